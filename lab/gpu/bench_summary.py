"""The goal's measure of `capture_real_sglang.sh bench`: the first round after each start
(262,144 tokens) with the capture on against the same round with it off.

Reads the client log's ``{"bench": "<side>-<n>", "rates": [round 0, round 1, ...]}``
lines (capture_client.py bench, one a server start); ``warm`` starts are shown, not
counted. Prints every start, then round 0 of each side against the first side started
(capture on against off; in the flags' bench, "flags" against "on"): mean, median, each
side's spread and the steady rounds beside it, to 0.1 %."""
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


def compare(starts, base, other):
    """Round 0 (and the steady rounds) of the starts tagged ``other`` against those tagged ``base``."""
    side = {s: [r for t, r in starts if t.split("-")[0] == s] for s in (base, other)}
    first = {s: [r[0] for r in rs] for s, rs in side.items()}
    steady = {s: [statistics.mean(r[1:]) for r in rs if len(r) > 1] for s, rs in side.items()}
    print()
    print(f"| | {base} | {other} | cost |")
    print("| --- | ---: | ---: | ---: |")
    for name, fn in (("mean", statistics.mean), ("median", statistics.median)):
        b, o = fn(first[base]), fn(first[other])
        print(f"| round 0, {name} of {len(first[base])} / {len(first[other])} starts | {b:,.0f} | "
              f"{o:,.0f} | {100 * (1 - o / b):.1f} % |")
    print(f"| round 0, spread of the starts | {spread(first[base])} | {spread(first[other])} | |")
    if steady[base] and steady[other]:
        b, o = statistics.mean(steady[base]), statistics.mean(steady[other])
        print(f"| steady rounds, mean | {b:,.0f} | {o:,.0f} | {100 * (1 - o / b):.1f} % |")
    for name, fn in (("means", statistics.mean), ("medians", statistics.median)):
        cost = 1 - fn(first[other]) / fn(first[base])
        print(f"INFO round 0 {other}: {100 * abs(cost):.1f} % "
              f"{'slower' if cost >= 0 else 'faster'} than {base} ({name} of "
              f"{len(first[base])} and {len(first[other])} starts)")


def main(path):
    starts = load(path)
    print("| start (in order) | capture | round 0 (after the start) | steady rounds (mean) |")
    print("| --- | --- | ---: | ---: |")
    for n, (tag, rates) in enumerate(starts, 1):
        steady = f"{statistics.mean(rates[1:]):,.0f}" if len(rates) > 1 else "-"
        print(f"| {n} | {tag} | {rates[0]:,.0f} | {steady} |")
    sides = list(dict.fromkeys(t.split("-")[0] for t, _rates in starts if not t.startswith("warm")))
    if len(sides) < 2:
        print("INFO no start of one side: no comparison")
        return 1
    # the first side started is the base ("off" in the capture's bench, "on" in the flags' bench)
    base = sides[0]
    for other in sides[1:]:
        compare(starts, base, other)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
