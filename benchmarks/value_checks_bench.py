# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the drain's checks of the values cost, per GB of dump, on one thread (as a drain thread runs them).

    .venv-torch/bin/python benchmarks/value_checks_bench.py [--tokens 1024] [--hidden 7168] [--layers 3] [--rounds 5]

Prints the seconds a GB of the NaN/Inf check (``drain.check_finite``), of the degenerate check
(``drain.check_not_degenerate``) and the ratio of the two, measured in one run on the same tensors.
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "roles", "extraction_job", "files"))

from eagle3_extraction_job import drain  # noqa: E402  pylint: disable=wrong-import-position


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=1024)
    parser.add_argument("--hidden", type=int, default=7168)
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    import torch  # pylint: disable=import-outside-toplevel
    torch.set_num_threads(1)   # as the drain sets it
    dump = {"hidden_state": torch.randn(1, args.tokens, args.hidden).to(torch.bfloat16),
            "aux_hidden_state": torch.randn(1, args.tokens, args.layers * args.hidden).to(torch.bfloat16),
            "captured_layers": list(range(args.layers))}
    gigabytes = sum(t.numel() * t.element_size() for k, t in dump.items() if k != "captured_layers") / 1e9
    best = {}
    for name, check in (("finite", drain.check_finite), ("degenerate", drain.check_not_degenerate)):
        check(torch, dump)   # warm
        times = []
        for _round in range(args.rounds):
            start = time.perf_counter()
            check(torch, dump)
            times.append(time.perf_counter() - start)
        best[name] = min(times) / gigabytes
    print(json.dumps({"gb": round(gigabytes, 3), "finite_s_per_gb": round(best["finite"], 4),
                      "degenerate_s_per_gb": round(best["degenerate"], 4),
                      "degenerate_over_finite": round(best["degenerate"] / best["finite"], 3)}))


if __name__ == "__main__":
    main()
