"""Two training sets of .ckpt files, sample by sample (lab/gpu/specforge_side_by_side.sh).

    python3 specforge_compare.py OURS_DIR SPECFORGE_DIR --label NAME [--bit-equal]

Samples are paired by their ``input_ids`` (SpecForge shuffles the dataset and names files
by position; the job names them by dataset line). With --strip-padding the second dir's
samples lose the rows SpecForge's batching padded them with (--batch-size > 1 pads each
sample to its batch's longest, pad id and loss mask 0); --theirs-may-drop counts samples
missing there (its DataLoader drops the last, partial batch) instead of failing. For each pair: ``input_ids`` and
``loss_mask`` must be equal, and ``aux_hidden_state`` / ``hidden_state`` are compared: the
largest absolute difference and the share of token rows equal bit for bit. With
--bit-equal every row must be bit-equal; without it the difference is reported against
bf16's rounding: a difference is within rounding when it is at most a few bf16 steps at
the row's largest magnitude (bf16 keeps 8 significant bits: a step is 2**-7 of it).
Prints one line per sample that is not bit-equal (at most 10), then a summary and a
JSON line ``{"compare": ...}``; exits 1 when a check fails.
"""

import argparse
import json
import os
import sys

import torch


def strip_padding(data, pad_id):
    """A sample without the rows SpecForge's batching padded it with: trailing positions
    whose id is the pad id and whose loss mask is 0."""
    ids, mask = data["input_ids"].view(-1), data["loss_mask"].view(-1)
    length = ids.numel()
    while length and int(ids[length - 1]) == pad_id and int(mask[length - 1]) == 0:
        length -= 1
    return {"input_ids": ids[:length], "loss_mask": mask[:length],
            "aux_hidden_state": data["aux_hidden_state"][:, :length],
            "hidden_state": data["hidden_state"][:, :length]}, ids.numel() - length


def load_dir(path, pad_id=None):
    """{input_ids bytes: (file, sample)}; with pad_id, the samples without their padding."""
    out, padded = {}, 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            if name.endswith(".ckpt"):
                data = torch.load(os.path.join(root, name), map_location="cpu", weights_only=True)
                if pad_id is not None:
                    data, pad = strip_padding(data, pad_id)
                    padded += pad
                key = data["input_ids"].view(-1).to(torch.int64).numpy().tobytes()
                out[key] = (os.path.relpath(os.path.join(root, name), path), data)
    return out, padded


def compare_tensor(ours, theirs):
    """(max abs diff, share of rows bit-equal, max diff in units of the row's bf16 step)."""
    a = ours.reshape(-1, ours.shape[-1])
    b = theirs.reshape(-1, theirs.shape[-1])
    equal_rows = (a.view(torch.int16) == b.view(torch.int16)).all(dim=1)
    diff = (a.float() - b.float()).abs()
    # one bf16 step (8 significant bits) at the row's largest magnitude: rounding in a sum
    # scales with the terms summed, not with a result that happens to be near zero
    step = torch.maximum(a.float().abs().amax(dim=1, keepdim=True),
                         b.float().abs().amax(dim=1, keepdim=True)).clamp_min(1e-30) * 2.0 ** -7
    return float(diff.max()), float(equal_rows.float().mean()), float((diff / step).max())


def main():  # pylint: disable=too-many-locals
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("ours")
    parser.add_argument("theirs")
    parser.add_argument("--label", required=True)
    parser.add_argument("--bit-equal", action="store_true")
    parser.add_argument("--strip-padding", action="store_true",
                        help="THEIRS holds samples padded to their batch's longest: compare without it")
    parser.add_argument("--pad-id", type=int, default=0)
    parser.add_argument("--theirs-may-drop", action="store_true",
                        help="samples missing from THEIRS are counted and named, not a failure")
    parser.add_argument("--max-steps", type=float, default=4.0,
                        help="the largest difference still called bf16 rounding, in bf16 steps")
    args = parser.parse_args()
    ours, _none = load_dir(args.ours)
    theirs, padded = load_dir(args.theirs, args.pad_id if args.strip_padding else None)
    fails = []
    missing, extra = set(ours) - set(theirs), set(theirs) - set(ours)
    if args.strip_padding:
        print(f"{args.label}: {padded} padding rows left out of {len(theirs)} samples there")
    if missing and args.theirs_may_drop:
        print(f"{args.label}: {len(missing)} of {len(ours)} samples are not there: "
              + ", ".join(sorted(ours[k][0] for k in missing)[:8]) + (" ..." if len(missing) > 8 else ""))
    if extra or (missing and not args.theirs_may_drop):
        fails.append(f"{len(ours)} samples here, {len(theirs)} there, "
                     f"{len(set(ours) & set(theirs))} with the same input_ids")
    rows = {"aux_hidden_state": [], "hidden_state": []}
    worst = {"aux_hidden_state": 0.0, "hidden_state": 0.0}
    worst_steps = {"aux_hidden_state": 0.0, "hidden_state": 0.0}
    shown = 0
    tokens = 0
    for key in sorted(set(ours) & set(theirs)):
        (our_name, a), (their_name, b) = ours[key], theirs[key]
        tokens += a["input_ids"].numel()
        if not torch.equal(a["loss_mask"].view(-1).long(), b["loss_mask"].view(-1).long()):
            fails.append(f"{our_name} / {their_name}: loss_mask differs")
        line = []
        for name in rows:
            if a[name].shape != b[name].shape:
                fails.append(f"{our_name}: {name} {list(a[name].shape)} vs {list(b[name].shape)}")
                continue
            mad, share, steps = compare_tensor(a[name], b[name])
            rows[name].append((share, a[name].shape[-2]))
            worst[name] = max(worst[name], mad)
            worst_steps[name] = max(worst_steps[name], steps)
            if share < 1.0:
                line.append(f"{name} max abs diff {mad:.3g} ({steps:.1f} bf16 steps), "
                            f"{100 * share:.1f} % rows bit-equal")
        if line and shown < 10:
            shown += 1
            print(f"  {our_name} ({a['input_ids'].numel()} tokens) vs {their_name}: " + "; ".join(line))
    summary = {"label": args.label, "samples": len(set(ours) & set(theirs)), "tokens": tokens,
               "missing_there": len(missing), "padding_rows": padded}
    for name, items in rows.items():
        total = sum(n for _s, n in items) or 1
        summary[name] = {
            "max_abs_diff": worst[name], "max_bf16_steps": worst_steps[name],
            "rows_bit_equal": sum(s * n for s, n in items) / total,
            "samples_bit_equal": sum(s == 1.0 for s, _n in items)}
        if args.bit_equal and summary[name]["rows_bit_equal"] < 1.0:
            fails.append(f"{name}: {100 * summary[name]['rows_bit_equal']:.2f} % rows bit-equal, "
                         "all expected")
        if not args.bit_equal and worst_steps[name] > args.max_steps:
            fails.append(f"{name}: differs by {worst_steps[name]:.1f} bf16 steps, more than rounding "
                         f"({args.max_steps})")
    for name in rows:
        s = summary[name]
        print(f"{args.label}: {name}: {s['samples_bit_equal']}/{summary['samples']} samples and "
              f"{100 * s['rows_bit_equal']:.2f} % of {tokens} rows bit-equal, max abs diff "
              f"{s['max_abs_diff']:.3g} ({s['max_bf16_steps']:.1f} bf16 steps)")
    for fail in fails[:20]:
        print(f"FAIL {args.label}: {fail}")
    if not fails:
        print(f"PASS {args.label}: input_ids and loss_mask equal for all {summary['samples']} samples"
              + (", every row bit-equal" if args.bit_equal else ""))
    print(json.dumps({"compare": summary}))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
