#!/usr/bin/env bash
# Deploys the sharded set (sharded/): one router and N shards, all the same wasm
# (target/canister/stablebench_sharded.wasm), and registers the shards with the router.
#
#   scripts/deploy-sharded.sh N [--orders] [--network ic] [--cycles CYCLES_PER_SHARD]
#
# Without --orders: the key-value set (stablebench_sharded); with it, the users/orders set sharded
# by user on SQLite (sharded-orders/, stablebench_sharded_orders, target/canister/
# stablebench_sharded_orders.wasm). Everything below holds for both.
#
# With dfx, as the current identity (which becomes a controller of every canister):
#   1. `dfx deploy <canister>` installs the router (dfx.json, role `Router`);
#   2. each shard is created through the identity's cycles wallet (`create_canister`, with the
#      identity and the router as controllers), then installed with role `Shard { router }`;
#   3. `add_shards` registers them in order (a key's shard is its position: sharded/src/lib.rs).
# The shards' ids are written to .sharded-shards (.sharded_orders-shards), one per line, so a
# second run refuses to register a second set. Writes go through the router, or to a shard from its controllers.
#
# Not run on this project's machines (no dfx or replica there): the same calls are exercised
# offline by runner/tests/sharded/main.rs and runner/tests/sharded/orders.rs through the runner's
# network of canisters.
source "$(dirname "$0")/lib.sh"

n=${1:?usage: scripts/deploy-sharded.sh N [--orders] [--network NAME] [--cycles CYCLES_PER_SHARD]}
shift
network=local
cycles=1000000000000
canister=stablebench_sharded
variant=sharded
while [ $# -gt 0 ]; do
  case "$1" in
    --orders) canister=stablebench_sharded_orders; variant=sharded_orders; shift ;;
    --network) network=${2:?--network needs a name}; shift 2 ;;
    --cycles) cycles=${2:?--cycles needs an amount}; shift 2 ;;
    *) die "unknown argument '$1'" ;;
  esac
done
[[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 1024 ] || die "N must be 1 to 1024 shards, not '$n'"
command -v dfx >/dev/null || die "dfx is not installed (https://internetcomputer.org/docs/building-apps/getting-started/install)"
record="$ROOT/.$variant-shards"
[ -e "$record" ] && die "$record exists: this project already registered shards (a router's shards are fixed once set)"

"$ROOT/scripts/build.sh" "$variant"
dfx deploy --network "$network" "$canister" --argument '(variant { Router })'
router=$(dfx canister --network "$network" id "$canister")
me=$(dfx identity get-principal)
wallet=$(dfx identity --network "$network" get-wallet)
log "router $router; creating $n shards with $cycles cycles each through wallet $wallet"
shards=()
for i in $(seq 0 $((n - 1))); do
  out=$(dfx canister --network "$network" call "$wallet" wallet_create_canister128 \
    "(record { cycles = $cycles : nat; settings = record { controllers = opt vec { principal \"$me\"; principal \"$router\" }; compute_allocation = null; memory_allocation = null; freezing_threshold = null } })")
  id=$(printf '%s' "$out" | grep -o 'principal "[^"]*"' | head -1 | cut -d'"' -f2)
  [ -n "$id" ] || die "shard $i: could not read the new canister's id from: $out"
  dfx canister --network "$network" install "$id" --wasm "$OUT_DIR/$canister.wasm" \
    --argument "(variant { Shard = record { router = principal \"$router\" } })"
  shards+=("$id")
  log "shard $i: $id"
done
list=$(printf 'principal "%s"; ' "${shards[@]}")
dfx canister --network "$network" call "$canister" add_shards "(vec { $list })"
printf '%s\n' "${shards[@]}" > "$record"
log "registered ${#shards[@]} shards with $router (listed in $record)"
