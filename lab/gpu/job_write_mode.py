"""The extraction job with another write mode of its drain (lab/gpu/job_bench.py's
variants named after a mode of eagle3_extraction_job.ckpt_file: buffered, early, stream,
direct), to compare them in one run. Usage: job_write_mode.py MODE ARGS-OF-THE-JOB..."""
import runpy
import sys

from eagle3_extraction_job import ckpt_file

if __name__ == "__main__":
    mode = sys.argv.pop(1)
    if mode not in ckpt_file.MODES:
        sys.exit(f"write mode {mode!r} is not one of {', '.join(ckpt_file.MODES)}")
    ckpt_file.MODE = mode
    sys.argv[0] = "eagle3_extraction_job"
    runpy.run_module("eagle3_extraction_job", run_name="__main__", alter_sys=True)
