#!/usr/bin/env bash
# Regenerates the pragma guide's report from canbench_results.yml: docs/results.md, the heatmap
# docs/results.svg, and the README's generated tables (results, profiles, pragmas, benchmarks).
# Run it after `scripts/bench.sh --persist` and commit everything together.
#
#   scripts/report.sh            # dated today
#   STABLEBENCH_RESULTS_DATE=2026-11-22 scripts/report.sh
source "$(dirname "$0")/lib.sh"

ensure_rust
export STABLEBENCH_REGENERATE_README=1
export STABLEBENCH_RESULTS_DATE=${STABLEBENCH_RESULTS_DATE:-$(date -u +%F)}
cargo test --locked --release --test readme >&2
log "wrote docs/results.md, docs/results.svg and the README tables (results of $STABLEBENCH_RESULTS_DATE)"
