#!/usr/bin/env bash
# Loads the users/orders data set into a canister in resumable calls, each under an instruction
# budget, then builds the indexes: the way to fill a canister with more than one 40 B-instruction
# message can do.
#
#   scripts/load.sh [--users N] [--orders N] [--budget INSTRUCTIONS] [--index-budget INSTRUCTIONS] [--state DIR]
#   scripts/load.sh --dfx [--network ic] [--canister stablebench] ...
#
# By default it drives the offline runner (installing target/canister/stablebench.wasm into
# --state if nothing is installed there yet); with --dfx it calls a deployed canister through
# `dfx canister call` as a controller. Every call is idempotent: if the script stops halfway
# (a lost reply, an upgrade, Ctrl-C), run it again with the same sizes and it continues.
source "$(dirname "$0")/lib.sh"

users=100000 orders=1000000 budget="" index_budget="" state=.stablebench/canister mode=runner network="" canister=stablebench
while [ $# -gt 0 ]; do
  case "$1" in
    --users) users=$2; shift 2 ;;
    --orders) orders=$2; shift 2 ;;
    --budget) budget=$2; shift 2 ;;
    --index-budget) index_budget=$2; shift 2 ;;
    --state) state=$2; shift 2 ;;
    --dfx) mode=dfx; shift ;;
    --network) network=$2; shift 2 ;;
    --canister) canister=$2; shift 2 ;;
    *) die "unknown argument $1 (see the header of $0)" ;;
  esac
done
# Budgets per call (default: the canister's, 30 B). An index is built by one statement, so its
# budget must cover the whole index: by default it is the canister's.
opt() { [ -n "$1" ] && echo "opt $1" || echo null; }
opt_budget=$(opt "$budget")
opt_index_budget=$(opt "$index_budget")

if [ "$mode" = runner ]; then
  ensure_rust
  cargo build --locked --release -p stablebench-runner >&2
  RUNNER="$ROOT/target/release/stablebench-runner"
  if [ ! -f "$state/state.yml" ]; then
    [ -f "$OUT_DIR/stablebench.wasm" ] || "$ROOT/scripts/build.sh" production
    "$RUNNER" install "$OUT_DIR/stablebench.wasm" --state "$state" >&2
  fi
  call() { "$RUNNER" call "$1" "$2" --state "$state" 2>/dev/null; }
else
  command -v dfx >/dev/null || die "dfx is not installed"
  call() { dfx canister call ${network:+--network "$network"} "$canister" "$1" "$2"; }
fi

# field NAME TEXT: the value of `NAME = value` in Candid text output (underscores removed).
field() { sed -n "s/.*$1 = \([^;:]*\).*/\1/p" <<<"$2" | head -n 1 | tr -d '_ '; }
ok_or_die() { grep -q "variant {\s*Ok" <<<"$2" || grep -q "Ok =" <<<"$2" || die "$1 failed: $2"; }

out=$(call create_schema '()') || die "create_schema failed: $out"
ok_or_die create_schema "$out"

# Every reply says what its call cost (`instructions`); the summary adds them up per method.
summary=""
# load METHOD TOTAL: calls METHOD from offset 0 until `complete`, continuing from next_offset.
load() {
  local method=$1 total=$2 offset=0 calls=0 spent=0 out
  while :; do
    out=$(call "$method" "($offset, $((total - offset)), $opt_budget)") || die "$method failed: $out"
    ok_or_die "$method" "$out"
    calls=$((calls + 1))
    offset=$(field next_offset "$out")
    spent=$((spent + $(field instructions "$out")))
    log "$method: $offset of $total rows present (call $calls, $(field instructions "$out") instructions)"
    [ "$(field complete "$out")" = true ] && break
  done
  summary+="| $method | $calls | $spent |"$'\n'
}
load add_users "$users"
load add_orders "$orders"
calls=0 spent=0
while :; do
  out=$(call create_indexes "($opt_index_budget)") || die "create_indexes failed: $out"
  ok_or_die create_indexes "$out"
  calls=$((calls + 1))
  spent=$((spent + $(field instructions "$out")))
  log "create_indexes: $(tr -d '\n' <<<"$out" | sed 's/  */ /g')"
  [ "$(field complete "$out")" = true ] && break
done
summary+="| create_indexes | $calls | $spent |"$'\n'
# The cost table on stderr (stdout stays the stats, which scripts/test.sh reads): update calls
# cost 5 M cycles each plus 1 cycle per instruction on a 13-node subnet (grid/src/ic.rs).
{ printf '| method | calls | instructions (sum of the replies) |\n|---|---:|---:|\n%s' "$summary"; } >&2
call stats '()'
