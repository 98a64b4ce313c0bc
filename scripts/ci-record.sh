#!/usr/bin/env bash
# Records one run of CI in ci_runs.csv (the phase times docs/runner.md shows): reads the log of
# `CI=true bash .ci/run` (its `[stablebench +Ns]` lines, which scripts/lib.sh prints with the
# seconds since the start, nextest's summaries and the runner's "Wall time" lines), appends one
# row, and regenerates docs/runner.md's table from the file. Not part of CI: run it after a CI
# run you want on record, whose standard output and error went to one file:
#
#   CI=true bash .ci/run > ci.log 2>&1
#   scripts/ci-record.sh ci.log COMMIT CACHES
#
# COMMIT is the commit the run checked out; CACHES says what the run started from: `empty`
# (CARGO_HOME, STABLEBENCH_TOOLS and STABLEBENCH_CACHE_DIR pointing at empty folders, as on a
# new machine) or `kept` (the machine's caches, as the CI machine keeps them). The row is dated
# by the log file's modification time (the end of the run). A run that did not pass is refused.
source "$(dirname "$0")/lib.sh"

[ $# -eq 3 ] || die "usage: scripts/ci-record.sh LOG COMMIT CACHES (see the head of this script)"
log_file=$1 commit=$2 caches=$3
[ -f "$log_file" ] || die "no log $log_file"
case $caches in empty | kept) ;; *) die "CACHES is empty or kept, not $caches" ;; esac
commit=$(git -C "$ROOT" rev-parse --short=7 "$commit^{commit}") || die "$2 is no commit of this repository"
command -v python3 >/dev/null || die "python3 is not installed (the log is read by a small script below)"
date=$(date -u -r "$log_file" +%F)

python3 - "$log_file" "$commit" "$date" "$caches" "$ROOT/ci_runs.csv" <<'PY'
import csv
import os
import re
import sys

log_path, commit, date, caches, out = sys.argv[1:]
# Each phase starts at the first line whose message starts with one of its prefixes and ends
# where the next phase present in the log starts (scripts/test.sh runs them in this order).
# Before the first: `toolchain`, from the start (the first line's clock) to the lints, which
# scripts/test.sh logs after installing the Rust toolchain.
PHASES = [
    ("lints", ("checking formatting and lints",)),
    ("wasi2ic", ("building wasi2ic",)),
    ("wasm", ("installing ic-wasm", "building stablebench.wasm")),
    ("checks", ("checking the wasm files",)),
    ("icp", ("building every canister with icp-cli",)),
    ("tests", ("running the workspace tests",)),
    ("load", ("loading a data set",)),
    ("site", ("opening the results site",)),
    ("grid", ("running every benchmark of the grid",)),
]
END = "every check passed"
starts, end, nextest, walls, cells = {}, None, [], [], []
with open(log_path, errors="replace") as f:
    for line in f:
        m = re.match(r"\[stablebench \+(\d+)s\] (.*)", line)
        if m:
            t, msg = int(m.group(1)), m.group(2)
            for name, prefixes in PHASES:
                if name not in starts and msg.startswith(prefixes):
                    starts[name] = t
            if msg.startswith(END):
                end = t
        m = re.search(r"Summary \[\s*([\d.]+)s\] (\d+) tests run: (\d+) passed", line)
        if m:
            nextest.append((m.group(1), m.group(2), m.group(3)))
        m = re.match(r"Wall time: ([\d.]+)s in all .* install and (\d+) benchmark queries", line)
        if m:
            walls.append(m.group(1))
            cells.append(m.group(2))
if any(run != passed for _, run, passed in nextest):
    sys.exit(f"{log_path}: not every test passed: {nextest}")
if end is None:
    sys.exit(f"{log_path}: no line '{END}': the run did not pass, or the log is cut")
missing = [n for n, _ in PHASES if n not in starts and n != "wasi2ic"]
if missing:
    sys.exit(f"{log_path}: no start of phase(s) {', '.join(missing)}")
order = [n for n, _ in PHASES if n in starts]
row = {"commit": commit, "date": date, "caches": caches, "total": end, "toolchain": starts[order[0]]}
for i, n in enumerate(order):
    row[n] = (starts[order[i + 1]] if i + 1 < len(order) else end) - starts[n]
    if row[n] < 0:
        sys.exit(f"{log_path}: phase {n} ends before it starts: not the order scripts/test.sh runs the phases in")
row["nextest"] = "+".join(s for s, _, _ in nextest)
row["tests_run"] = "+".join(n for _, n, _ in nextest)
row["grid_wall"] = "+".join(walls)
row["cells"] = "+".join(cells)
fields = ["commit", "date", "caches", "toolchain"] + [n for n, _ in PHASES] + ["total", "nextest", "tests_run", "grid_wall", "cells"]
rows = []
if os.path.exists(out):
    with open(out, newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["commit"] != commit or r["caches"] != caches]
rows.append({k: str(row.get(k, "")) for k in fields})
rows.sort(key=lambda r: r["date"])
with open(out, "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=fields, lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
print(f"recorded {commit} ({caches} caches, {date}): {end} s")
PY
ensure_rust
STABLEBENCH_REGENERATE_CI_RUNS=1 cargo test --locked --release -p stablebench-report --test ci_runs >&2
log "wrote ci_runs.csv and docs/runner.md's table"
