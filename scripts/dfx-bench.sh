#!/usr/bin/env bash
# Runs benchmarks through the benchmark canister's Candid API, as a dfx user does: for each
# benchmark, `bench_setup` until complete (one budgeted update call at a time), then `bench_run`,
# and prints one table (measured step next to canbench's committed number, the whole message,
# memory growth, the oracle's verdict, cycles on 13- and 34-node subnets).
#
#   scripts/dfx-bench.sh [PATTERN...] [--warm-cold] [--budget INSTRUCTIONS]
#   scripts/dfx-bench.sh --dfx [--network ic] [--canister stablebench_bench] [PATTERN...] ...
#
# By default the offline runner installs target/canister/stablebench_bench.wasm fresh and drives
# it; with --dfx (or --network) it calls the canister `dfx deploy stablebench_bench` created, as
# the current dfx identity (a controller). --warm-cold measures the read benchmarks cold (the
# first and second query after an upgrade) and warm (a query after an update).
#
# Every benchmark's setup first empties the benchmark canister's database and key-value stores.
source "$(dirname "$0")/lib.sh"

ensure_rust
cargo build --locked --release -p stablebench-runner >&2
dfx_mode=false
for a in "$@"; do
  case "$a" in --dfx|--network) dfx_mode=true ;; esac
done
if [ "$dfx_mode" = false ]; then
  [ -f "$OUT_DIR/stablebench_bench.wasm" ] || "$ROOT/scripts/build.sh" bench
else
  command -v dfx >/dev/null || die "dfx is not installed"
fi
exec "$ROOT/target/release/stablebench-runner" live "$@"
