# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One shard's host, as a process of its own (its own hash seed, as every host has): reads the
dataset the way the job does and prints, as JSON, the bad lines this shard counts and its samples.

Usage: python shard_host.py DATASET SHARD_INDEX SHARD_COUNT (tests/job/test_inputs.py runs it)."""
import json
import os
import sys

from eagle3_extraction_job import config, job


def main(dataset, shard_index, shard_count):
    root = os.path.dirname(os.path.abspath(dataset))
    cfg = config.JobConfig(job="testjob", dataset=os.path.abspath(dataset),
                           output_dir=os.path.join(root, "out"), dump_dir=os.path.join(root, "shm"),
                           server_url="http://127.0.0.1:1", hidden_size=16,
                           shard_index=int(shard_index), shard_count=int(shard_count))
    shard = job.Job(cfg, torch=None)
    shard.load_dataset()
    json.dump({"bad_lines": [bad.line for bad in shard.bad_lines],
               "samples": sorted(shard.samples)}, sys.stdout)


if __name__ == "__main__":
    main(*sys.argv[1:])
