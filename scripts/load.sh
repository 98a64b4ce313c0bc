#!/usr/bin/env bash
# Loads the users/orders data set into a canister in resumable calls, each under an instruction
# budget, then builds the indexes: the way to fill a canister with more than one 40 B-instruction
# message can do.
#
#   scripts/load.sh [--users N] [--orders N] [--budget INSTRUCTIONS] [--index-budget INSTRUCTIONS] [--state DIR]
#   scripts/load.sh --dfx [--network ic] [--canister stablebench] ...
#
# A thin wrapper around `stablebench-runner load` (runner/src/load.rs), which encodes and decodes
# the canister's Candid types: create_schema, add_users and add_orders from offset 0 continuing
# from each reply's next_offset until complete, create_indexes until complete. By default it
# drives the offline runner (installing target/canister/stablebench.wasm into --state if nothing
# is installed there yet); with --dfx (or --network) it calls a deployed canister through
# `dfx canister call` as a controller. Every call is idempotent: if the script stops halfway
# (a lost reply, an upgrade, Ctrl-C), run it again with the same sizes and it continues.
# Progress and a per-method cost table go to stderr, the `stats` reply (Candid text) to stdout.
source "$(dirname "$0")/lib.sh"

dfx_mode=false state=.stablebench/canister
args=("$@")
while [ $# -gt 0 ]; do
  case "$1" in
    --dfx) dfx_mode=true; shift ;;
    --network) dfx_mode=true; shift 2 ;;
    --state) state=$2; shift 2 ;;
    --users|--orders|--budget|--index-budget|--canister) shift 2 ;;
    *) die "unknown argument $1 (see the header of $0)" ;;
  esac
done

ensure_rust
# STABLEBENCH_RUNNER: a runner binary already built (scripts/test.sh passes the one its workspace
# test build made, instead of building it again with the runner's own feature set).
runner=${STABLEBENCH_RUNNER:-}
if [ -z "$runner" ]; then
  cargo build --locked --release -p stablebench-runner >&2
  runner=$ROOT/target/release/stablebench-runner
fi
if [ "$dfx_mode" = false ]; then
  if [ ! -f "$state/state.yml" ] && [ ! -f "$OUT_DIR/stablebench.wasm" ]; then
    "$ROOT/scripts/build.sh" production
  fi
else
  command -v dfx >/dev/null || die "dfx is not installed"
fi
exec "$runner" load "${args[@]}"
