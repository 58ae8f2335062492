# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The online run's records against the files mode's output for the same samples and servers.

Run by tests/integration/test_online_fleet.py with the torch venv (SpecForge 0.2.0's loader):

    python tests/online/online_fleet_check.py --records records.jsonl --dataset D.jsonl --count DIR [--count DIR]

``records.jsonl`` is the online reader's (one line a sample consumed: its token ids and each feature's sha256),
``D.jsonl`` the files-mode dataset made of those token ids (``id`` = ``r<index of the record>``), each DIR one
shard's output of the files mode. For every sample: the files mode's aux layers (``aux_hidden_state``, read with
SpecForge's own ``load_feature_file``) hash to the online ``hidden_state`` feature's sha256, its last hidden state
(``hidden_state``) to the online ``target``'s, its ``input_ids`` are the record's: bit for bit. Prints a JSON
summary; exits 1 listing the problems.
"""
import argparse
import hashlib
import json
import os
import sys

import torch
from specforge.runtime.data_plane.feature_store import load_feature_file

# the files mode's key -> the online feature that holds the same tensor (SpecForge's names on each side)
SAME = {"aux_hidden_state": "hidden_state", "hidden_state": "target"}


def digest(tensor):
    """The sha256 of a tensor's bytes, as the online reader hashes them."""
    data = tensor.contiguous().reshape(-1)
    if data.dtype == torch.bfloat16:
        data = data.view(torch.int16)
    return hashlib.sha256(data.numpy().tobytes()).hexdigest()


def files_of(shard_dirs):
    for shard_dir in shard_dirs:
        for root, _dirs, names in os.walk(shard_dir):
            if "rejected" in root.split(os.sep):
                continue
            for name in names:
                if name.endswith(".ckpt"):
                    yield os.path.join(root, name)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", required=True)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--count", action="append", default=[])
    args = parser.parse_args()
    with open(args.records, encoding="utf-8") as f:
        records = [json.loads(line) for line in f if line.strip()]
    with open(args.dataset, encoding="utf-8") as f:
        by_ids = {tuple(s["input_ids"]): s["id"] for s in map(json.loads, f)}
    wanted = dict(("r%05d" % index, record) for index, record in enumerate(records))
    problems, seen = [], set()
    for path in files_of(args.count):
        raw = load_feature_file(path)
        ids = tuple(int(i) for i in raw["input_ids"].reshape(-1).tolist())
        sample_id = by_ids.get(ids)
        if sample_id is None:
            problems.append(f"{path}: token ids of no record")
            continue
        if sample_id in seen:
            problems.append(f"{path}: {sample_id} twice in the files mode's output")
        seen.add(sample_id)
        record = wanted[sample_id]
        for key, feature in SAME.items():
            if digest(raw[key]) != record["features"][feature]["sha256"]:
                problems.append(f"{path} ({sample_id}): the files mode's {key} is not the online {feature}")
    missing = sorted(set(wanted) - seen)
    if missing:
        problems.append(f"{len(missing)} records with no file, e.g. {missing[:5]}")
    print(json.dumps({"records": len(records), "compared": len(seen), "problems": problems[:50],
                      "problem_count": len(problems)}))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
