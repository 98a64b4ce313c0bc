#!/usr/bin/env python3
"""Compares two canbench results files benchmark by benchmark (total instructions).

    scripts/compare-results.py BASE.yml NEW.yml [--rename OLD=NEW]

Prints, for every benchmark in both files, NEW / BASE, then the median and range. --rename maps
a benchmark name of BASE to one of NEW (a substring replacement), for comparing two canisters
whose names differ only by the backend, e.g. --rename sqlite_=sqlite_vfs_.
"""
import argparse
import statistics

import yaml

parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
parser.add_argument("base")
parser.add_argument("new")
parser.add_argument("--rename", default=None, help="OLD=NEW: substring of BASE's names to replace")
args = parser.parse_args()

base = yaml.safe_load(open(args.base))["benches"]
new = yaml.safe_load(open(args.new))["benches"]
old_part, new_part = args.rename.split("=", 1) if args.rename else ("", "")
rows = []
for name, result in base.items():
    other = name.replace(old_part, new_part, 1) if args.rename else name
    if other in new:
        b, n = result["total"]["instructions"], new[other]["total"]["instructions"]
        rows.append((n / b, name, b, n))
if not rows:
    raise SystemExit("no benchmark in both files")
width = max(len(r[1]) for r in rows)
for ratio, name, b, n in sorted(rows, key=lambda r: r[1]):
    print(f"{name:<{width}} {b:>16,} {n:>16,} {ratio - 1:+8.2%}")
ratios = [r[0] for r in rows]
print(f"{len(rows)} benchmarks: median {statistics.median(ratios) - 1:+.2%}, "
      f"range {min(ratios) - 1:+.2%} ({min(rows)[1]}) to {max(ratios) - 1:+.2%} ({max(rows)[1]})")
