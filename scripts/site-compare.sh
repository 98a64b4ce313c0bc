#!/usr/bin/env bash
# The page of a run against the committed results, from canbench's CSV files:
#
#   canbench --csv                                   # or: stablebench-runner bench --csv
#   scripts/site-compare.sh canbench_results.csv [vfs/canbench_results.csv] [--out FILE]
#
# writes target/site/compare.html (every benchmark that moved by canbench's 2% noise threshold or
# more, largest first, and the new ones). scripts/test.sh writes it after the grid's --check run.
source "$(dirname "$0")/lib.sh"

ensure_rust
cargo build --locked --release --features report --bin stablebench-report >&2
"$ROOT/target/release/stablebench-report" compare "$@"
