#!/usr/bin/env bash
# The page of a run against the committed results, from canbench's CSV files:
#
#   canbench --csv                                   # or: stablebench-runner bench --csv
#   scripts/site-compare.sh canbench_results.csv [vfs/canbench_results.csv] [--out FILE]
#
# writes target/site/compare.html (every benchmark that moved by canbench's 2% noise threshold or
# more, largest first, and the new ones). scripts/test.sh writes it after the grid's --check run.
#
# STABLEBENCH_REPORT: a stablebench-report binary already built (scripts/test.sh passes the one its
# workspace tests built for report/tests/compare.rs, instead of building it again).
source "$(dirname "$0")/lib.sh"

report=${STABLEBENCH_REPORT:-}
if [ -z "$report" ]; then
  ensure_rust
  cargo build --locked --release -p stablebench-report --bin stablebench-report >&2
  report=$ROOT/target/release/stablebench-report
fi
[ -x "$report" ] || die "stablebench-report $report is not an executable"
"$report" compare "$@"
