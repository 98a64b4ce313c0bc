#!/usr/bin/env bash
# The README's benchmark command: builds the bench wasm and the offline runner, then runs every
# benchmark of the grid (or those whose name contains PATTERN) like canbench 0.7 does, on
# wasmtime with the IC's instruction accounting, and prints canbench's report plus the production-limits table.
#
#   scripts/bench.sh [PATTERN] [--persist] [--csv] [--noise-threshold P] [--less-verbose] ...
#   STABLEBENCH_BACKEND=canbench scripts/bench.sh ...   # real canbench on PocketIC instead
#
# --persist rewrites canbench_results.yml (commit it with the change that moved the numbers).
source "$(dirname "$0")/lib.sh"

if [ "${STABLEBENCH_BACKEND:-runner}" = canbench ]; then
  command -v canbench >/dev/null || die "canbench is not installed: cargo install canbench --version 0.7.0"
  exec canbench "$@"
fi

ensure_rust
log "building the offline runner"
cargo build --locked --release -p stablebench-runner
# The runner runs canbench.yml's build_cmd (scripts/build.sh bench) itself, as canbench does.
exec "$ROOT/target/release/stablebench-runner" bench "$@"
