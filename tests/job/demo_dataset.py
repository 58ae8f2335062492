# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A pre-tokenized dataset for the demo and the fleet tests (standard library only).

Sample ``d<n>`` has 4 to 64 token ids that depend on ``n`` only, and a loss mask that
covers the second half (the "assistant's" tokens): the same file every time.

    python tests/job/demo_dataset.py --samples 300 --out /tmp/demo.jsonl
"""
import argparse
import json
import os


def sample(n):
    tokens = 4 + (n * 37) % 61
    ids = [(n * 7919 + k * 104729) % 150000 for k in range(tokens)]
    mask = [0] * (tokens // 2) + [1] * (tokens - tokens // 2)
    return {"id": "d%05d" % n, "input_ids": ids, "loss_mask": mask}


def write(path, count):
    """Write ``count`` samples to ``path`` (temp name, then rename); returns them."""
    samples = [sample(n) for n in range(count)]
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        for s in samples:
            f.write(json.dumps(s, separators=(",", ":")) + "\n")
    os.replace(tmp, path)
    return samples


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    if not 1 <= args.samples <= 1000000:
        parser.error("--samples: expected 1 to 1000000, got %d" % args.samples)
    write(args.out, args.samples)
    print(args.out)


if __name__ == "__main__":
    main()
