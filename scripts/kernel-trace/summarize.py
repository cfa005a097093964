#!/usr/bin/env python3
"""Per-kernel times of decode steps from kernel_trace.cpp's CSV.

A step starts at a row lookup kernel (k_get_rows*). For the last --steps
steps of the trace it prints, per kernel kind (name and grid), how many run
per step, their mean duration and their mean *advance*: how far each moved
the step's end (end minus the latest end before it), so overlapped work
counts once; the advances add up to the step's time. Then the step time and
the idle gap between steps (host work between replays).
"""
import argparse
import collections
import csv
import re
import statistics


def short(name):
    m = re.search(r"(k_[a-z_0-9]+)(?:I([^E]*E[^E]*E?))?", name)
    base = m.group(1) if m else name[:40]
    t = re.search(r"k_[a-z_0-9]+I(.*?)EEvNS", name)
    args = re.findall(r"L[a-zA-Z0-9_]+E(\d+)|Li(\d+)E|Lb(\d)E", t.group(1)) if t else []
    flat = [a or b or c for a, b, c in args]
    return base + ("<" + ",".join(flat) + ">" if flat else "")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--steps", type=int, default=20)
    a = ap.parse_args()
    rows = []
    with open(a.csv) as f:
        for r in csv.reader(f):
            if len(r) < 8:
                continue
            rows.append((int(r[0]), int(r[1]), int(r[2]), short(",".join(r[7:]))))
    rows.sort()
    starts = [i for i, r in enumerate(rows) if r[3].startswith("k_get_rows")]
    if len(starts) < 3:
        raise SystemExit(f"only {len(starts)} steps in the trace")
    steps = []
    for s, e in zip(starts, starts[1:] + [len(rows)]):
        steps.append(rows[s:e])
    steps = steps[-a.steps - 1:-1]  # the last one may be a different shape
    kinds = collections.OrderedDict()
    step_us, gaps = [], []
    prev_end = None
    for st in steps:
        t0 = st[0][0]
        latest = t0
        for (b, e, g, name) in st:
            k = kinds.setdefault((name, g), {"n": 0, "dur": 0.0, "adv": 0.0})
            k["n"] += 1
            k["dur"] += (e - b) / 1e3
            k["adv"] += max(0, e - latest) / 1e3
            latest = max(latest, e)
        step_us.append((latest - t0) / 1e3)
        if prev_end is not None:
            gaps.append((t0 - prev_end) / 1e3)
        prev_end = latest
    n = len(steps)
    print(f"{n} steps: {statistics.mean(step_us):.1f} us per step on the GPU (min {min(step_us):.1f}), "
          f"gap before a step {statistics.mean(gaps):.1f} us" if gaps else "")
    print(f"{'kernel':<44} {'grid':>6} {'per step':>8} {'mean us':>8} {'advance us/step':>15}")
    for (name, g), k in sorted(kinds.items(), key=lambda kv: -kv[1]["adv"]):
        print(f"{name:<44} {g:>6} {k['n'] / n:>8.1f} {k['dur'] / k['n']:>8.2f} {k['adv'] / n:>15.1f}")


if __name__ == "__main__":
    main()
