#!/usr/bin/env bash
# The README's benchmark command: builds the bench wasm files and the offline runner, then runs every
# benchmark of the grid (or those whose name contains PATTERN) like canbench 0.7 does, on
# wasmtime with the IC's instruction accounting, and prints canbench's report plus the production-limits table.
# The grid lives in two canisters, each a canbench project: the ic-rusqlite one (canbench.yml here)
# and the ic-sqlite-vfs one (vfs/canbench.yml, its sqlite_vfs cells); both run, in that order.
#
#   scripts/bench.sh [PATTERN] [--persist] [--csv] [--noise-threshold P] [--less-verbose] ...
#   STABLEBENCH_BACKEND=canbench scripts/bench.sh ...   # real canbench on PocketIC instead
#
# --persist rewrites canbench_results.yml and vfs/canbench_results.yml (commit them with the change
# that moved the numbers).
source "$(dirname "$0")/lib.sh"

if [ "${STABLEBENCH_BACKEND:-runner}" = canbench ]; then
  command -v canbench >/dev/null || die "canbench is not installed: cargo install canbench --version 0.7.0"
  status=0
  canbench "$@" || status=$?
  (cd vfs && canbench "$@") || status=$?
  exit $status
fi

ensure_rust
log "building the offline runner"
cargo build --locked --release -p stablebench-runner
# The runner runs each canbench.yml's build_cmd (scripts/build.sh bench, vfs_bench) itself, as
# canbench does. Both projects run even if the first fails; the exit status says whether one did.
status=0
"$ROOT/target/release/stablebench-runner" bench "$@" || status=$?
(cd vfs && "$ROOT/target/release/stablebench-runner" bench "$@") || status=$?
exit $status
