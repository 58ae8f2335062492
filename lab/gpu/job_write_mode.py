"""The extraction job with another way of writing in its drain (lab/gpu/job_bench.py's
variants named ``MODE[:MiB][+beside]``, eagle3_extraction_job.drain.set_write_variant:
buffered, early, stream, direct, early+beside...), to compare them in one run.
Usage: job_write_mode.py VARIANT ARGS-OF-THE-JOB..."""
import runpy
import sys

from eagle3_extraction_job import drain

if __name__ == "__main__":
    try:
        drain.set_write_variant(sys.argv.pop(1))
    except ValueError as exc:
        sys.exit(str(exc))
    sys.argv[0] = "eagle3_extraction_job"
    runpy.run_module("eagle3_extraction_job", run_name="__main__", alter_sys=True)
