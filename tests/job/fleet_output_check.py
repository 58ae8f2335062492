# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Check the fleet's extraction output, copied to the controller, against the dataset.

Run by tests/integration/test_extraction_fleet.py with the torch venv (.venv-torch:
CPU torch and SpecForge 0.2.0 without its dependencies):

    python tests/job/fleet_output_check.py --dataset D.jsonl --hidden-size 64 --layers 3 \\
        --count DIR [--count DIR ...] [--leftover DIR ...]

Each DIR is one shard's output dir. For every one: no partial file, the manifest's done
rows are exactly the ``.ckpt`` files (sizes and sha256), SpecForge's OfflineManifestReader
lists them all and normalize_offline_sample reads each, and every tensor equals what
the stand-in server computes for the sample (lab/standins/sglang_server) with the
dataset's loss mask. Across the ``--count`` dirs every dataset sample is there exactly
once. Prints a JSON summary; exits 1 listing the problems.
"""
import argparse
import hashlib
import json
import os
import sqlite3
import sys

import torch
from specforge.algorithms.eagle3.data import normalize_offline_sample
from specforge.runtime.data_plane.feature_store import load_feature_file
from specforge.runtime.data_plane.offline_reader import OfflineManifestReader

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "lab", "standins", "sglang_server"))
from sglang_standin import generate  # noqa: E402  pylint: disable=wrong-import-position

MAX_LEN = 1 << 16


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def check_shard(shard_dir, dataset, hidden_size, layers, problems):
    """The sample ids this shard dir holds (checked); problems appended."""
    for root, _dirs, files in os.walk(shard_dir):
        problems.extend(f"{os.path.join(root, n)}: a partial file" for n in files if n.endswith(".tmp"))
    db = sqlite3.connect(os.path.join(shard_dir, "manifest.sqlite"))
    try:
        rows = db.execute("SELECT sample_id, path, state, bytes, sha256 FROM samples").fetchall()
    finally:
        db.close()
    by_path = {}
    for sample_id, relpath, state, nbytes, digest in rows:
        path = os.path.join(shard_dir, relpath)
        if state != "done":
            problems.append(f"{shard_dir}: {sample_id} is in state {state}")
            continue
        if not os.path.isfile(path) or os.path.getsize(path) != nbytes or sha256(path) != digest:
            problems.append(f"{path}: missing, or not the manifest's size and sha256")
        by_path[os.path.realpath(path)] = sample_id
    files = {os.path.realpath(os.path.join(r, n)) for r, _d, fs in os.walk(shard_dir)
             for n in fs if n.endswith(".ckpt") and "rejected" not in r.split(os.sep)}
    problems.extend(f"{p}: not in the manifest" for p in sorted(files - set(by_path)))
    refs = OfflineManifestReader(shard_dir, max_len=MAX_LEN, validate_files=True).read()
    if len(refs) != len(files):
        problems.append(f"{shard_dir}: SpecForge lists {len(refs)} files, the dir holds {len(files)}")
    ids = []
    for ref in refs:
        path = os.path.realpath(ref.feature_store_uri[len("file://"):])
        sample_id = by_path.get(path)
        if sample_id is None or sample_id not in dataset:
            problems.append(f"{path}: no dataset sample")
            continue
        raw = load_feature_file(path)
        out = normalize_offline_sample(raw, max_len=MAX_LEN)
        sample = dataset[sample_id]
        if raw["loss_mask"].tolist() != sample["loss_mask"]:
            problems.append(f"{path} ({sample_id}): loss_mask is not the dataset's")
        hidden, aux = generate.hidden_states(torch, sample["input_ids"], hidden_size, layers)
        # SpecForge never trains on the last position: it zeroes its loss mask
        want = {"input_ids": torch.tensor([sample["input_ids"]]),
                "loss_mask": torch.tensor([sample["loss_mask"][:-1] + [0]]),
                "target": hidden.unsqueeze(0), "hidden_state": aux.unsqueeze(0)}
        for key, value in want.items():
            got = out[key]
            if got.shape != value.shape or not torch.equal(got.to(value.dtype), value):
                problems.append(f"{path} ({sample_id}): {key} is not the expected tensor")
        ids.append(sample_id)
    return ids


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--hidden-size", type=int, required=True)
    parser.add_argument("--layers", type=int, required=True)
    parser.add_argument("--count", action="append", default=[])
    parser.add_argument("--leftover", action="append", default=[])
    args = parser.parse_args()
    with open(args.dataset, encoding="utf-8") as f:
        dataset = {s["id"]: s for s in map(json.loads, f)}
    problems = []
    seen = {}
    for shard_dir in args.count + args.leftover:
        ids = check_shard(shard_dir, dataset, args.hidden_size, args.layers, problems)
        if shard_dir in args.leftover:
            continue
        for sample_id in ids:
            if sample_id in seen:
                problems.append(f"{sample_id} is in {seen[sample_id]} and {shard_dir}")
            seen[sample_id] = shard_dir
    missing = sorted(set(dataset) - set(seen))
    if missing:
        problems.append(f"{len(missing)} samples in no output, e.g. {missing[:5]}")
    print(json.dumps({"samples": len(seen), "problems": problems[:50], "problem_count": len(problems)}))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
