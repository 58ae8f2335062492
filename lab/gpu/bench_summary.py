"""The goal's measure of `capture_real_sglang.sh bench`: the first round after each start
(262,144 tokens) with the capture on against the same round with it off.

Reads the client log's ``{"bench": "<side>-<n>", "rates": [round 0, round 1, ...]}``
lines (capture_client.py bench, one a server start); ``warm`` starts are shown, not
counted. Prints every start, then round 0 on against round 0 off (mean, median, each
side's spread) and the steady rounds beside it, to 0.1 % (the goal is at most 10 %)."""
import json
import statistics
import sys


def load(path):
    starts = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith('{"bench"'):
                d = json.loads(line)
                starts.append((d["bench"], d["rates"]))
    return starts


def spread(values):
    return f"{min(values):,.0f} to {max(values):,.0f} ({100 * (max(values) / min(values) - 1):.1f} %)"


def main(path):
    starts = load(path)
    print("| start (in order) | capture | round 0 (after the start) | steady rounds (mean) |")
    print("| --- | --- | ---: | ---: |")
    for n, (tag, rates) in enumerate(starts, 1):
        steady = f"{statistics.mean(rates[1:]):,.0f}" if len(rates) > 1 else "-"
        print(f"| {n} | {tag} | {rates[0]:,.0f} | {steady} |")
    side = {s: [r for t, r in starts if t.split("-")[0] == s] for s in ("off", "on")}
    if not side["off"] or not side["on"]:
        print("INFO no start of one side: no comparison")
        return 1
    first = {s: [r[0] for r in rs] for s, rs in side.items()}
    steady = {s: [statistics.mean(r[1:]) for r in rs if len(r) > 1] for s, rs in side.items()}
    print()
    print("| | capture off | capture on | cost |")
    print("| --- | ---: | ---: | ---: |")
    for name, fn in (("mean", statistics.mean), ("median", statistics.median)):
        off, on = fn(first["off"]), fn(first["on"])
        print(f"| round 0, {name} of {len(first['off'])} / {len(first['on'])} starts | {off:,.0f} | "
              f"{on:,.0f} | {100 * (1 - on / off):.1f} % |")
    print(f"| round 0, spread of the starts | {spread(first['off'])} | {spread(first['on'])} | |")
    if steady["off"] and steady["on"]:
        off, on = statistics.mean(steady["off"]), statistics.mean(steady["on"])
        print(f"| steady rounds, mean | {off:,.0f} | {on:,.0f} | {100 * (1 - on / off):.1f} % |")
    for name, fn in (("means", statistics.mean), ("medians", statistics.median)):
        cost = 1 - fn(first["on"]) / fn(first["off"])
        print(f"INFO round 0 with the capture on: {100 * abs(cost):.1f} % "
              f"{'slower' if cost >= 0 else 'faster'} than with it off ({name} of "
              f"{len(first['off'])} and {len(first['on'])} starts; goal: at most 10 % slower)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
