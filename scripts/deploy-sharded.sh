#!/usr/bin/env bash
# Deploys a sharded set: one router and N shards, all the same wasm, and registers the shards
# with the router.
#
#   scripts/deploy-sharded.sh N [--orders] [--icp] [--network NAME] [--cycles CYCLES_PER_SHARD] [--no-build]
#
# Without --orders: the key-value set (sharded/, canister stablebench_sharded, target/canister/
# stablebench_sharded.wasm); with it, the users/orders set sharded by user on SQLite
# (sharded-orders/, stablebench_sharded_orders). Everything below holds for both.
#
# With dfx (the default), as the current identity (which becomes a controller of every canister):
#   1. `dfx deploy <canister>` installs the router (dfx.json, role `Router`);
#   2. each shard is created through the identity's cycles wallet (`wallet_create_canister128`,
#      with the identity and the router as controllers), then installed with role
#      `Shard { router }`;
#   3. `add_shards` registers them in order (a key's shard is its position: sharded/src/lib.rs).
# With --icp, icp-cli (icp.yaml) does the same: `icp deploy <canister> --args` installs the
# router, `icp canister create --detached` creates each shard from the identity's cycles (the
# cycles ledger) with the identity and the router as controllers, `icp canister install` and
# `icp canister call` install and register them. --network names dfx's network, or icp-cli's
# environment (`local` or `ic`; `icp environment list`).
#
# The shards' ids are written to .sharded-shards (.sharded_orders-shards), one per line, so a
# second run refuses to register a second set. Writes go through the router, or to a shard from
# its controllers (STABLEBENCH_DEPLOY_RECORD_DIR puts the record elsewhere). --no-build deploys the
# wasm already in target/canister/.
#
# Not run against a replica on this project's machines (none there): the same calls are exercised
# offline by runner/tests/sharded/ through the runner's network of canisters, and
# scripts/test.sh runs this script against recording stand-ins for dfx and icp
# (scripts/deploy-sharded-check.sh), then checks that the installed icp-cli accepts every
# command line it sent.
source "$(dirname "$0")/lib.sh"

usage="usage: scripts/deploy-sharded.sh N [--orders] [--icp] [--network NAME] [--cycles CYCLES_PER_SHARD] [--no-build]"
n=${1:?$usage}
shift
network=local
cycles=1000000000000
canister=stablebench_sharded
variant=sharded
cli=dfx
build=1
while [ $# -gt 0 ]; do
  case "$1" in
    --orders) canister=stablebench_sharded_orders; variant=sharded_orders; shift ;;
    --icp) cli=icp; shift ;;
    --network) network=${2:?--network needs a name}; shift 2 ;;
    --cycles) cycles=${2:?--cycles needs an amount}; shift 2 ;;
    --no-build) build=; shift ;;
    *) die "unknown argument '$1' ($usage)" ;;
  esac
done
[[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 1024 ] || die "N must be 1 to 1024 shards, not '$n'"
[[ "$cycles" =~ ^[0-9]+$ ]] || die "--cycles takes a whole number of cycles, not '$cycles'"
case $cli in
  dfx) command -v dfx >/dev/null || die "dfx is not installed (https://internetcomputer.org/docs/building-apps/getting-started/install; or use --icp)" ;;
  icp) command -v icp >/dev/null || die "icp-cli is not installed (npm install -g @icp-sdk/icp-cli; https://github.com/dfinity/icp-cli)" ;;
esac
record="${STABLEBENCH_DEPLOY_RECORD_DIR:-$ROOT}/.$variant-shards"
[ -e "$record" ] && die "$record exists: this project already registered shards (a router's shards are fixed once set)"
wasm="$OUT_DIR/$canister.wasm"
router_role='(variant { Router })'

if [ -n "$build" ]; then "$ROOT/scripts/build.sh" "$variant"; fi
[ -f "$wasm" ] || die "$wasm is missing: run scripts/build.sh $variant (or drop --no-build)"

# The router: installed, its id and the deploying identity's principal.
if [ $cli = dfx ]; then
  dfx deploy --network "$network" "$canister" --argument "$router_role"
  router=$(dfx canister --network "$network" id "$canister")
  me=$(dfx identity get-principal)
  wallet=$(dfx identity --network "$network" get-wallet)
  log "router $router; creating $n shards with $cycles cycles each through wallet $wallet"
else
  icp deploy -e "$network" "$canister" --args "$router_role"
  router=$(icp canister status -e "$network" "$canister" --id-only)
  me=$(icp identity principal)
  log "router $router; creating $n shards with $cycles cycles each"
fi
[ -n "$router" ] && [ -n "$me" ] || die "could not read the router's id or the identity's principal"

# A new canister controlled by the identity and the router, funded with $cycles; prints its id.
create_shard() {
  local out id
  if [ $cli = dfx ]; then
    out=$(dfx canister --network "$network" call "$wallet" wallet_create_canister128 \
      "(record { cycles = $cycles : nat; settings = record { controllers = opt vec { principal \"$me\"; principal \"$router\" }; compute_allocation = null; memory_allocation = null; freezing_threshold = null } })")
    id=$(printf '%s' "$out" | grep -o 'principal "[^"]*"' | head -1 | cut -d'"' -f2)
  else
    out=$(icp canister create -e "$network" --detached --quiet --controller "$me" --controller "$router" \
      --cycles "$cycles")
    id=$(printf '%s\n' "$out" | tail -1 | tr -d '[:space:]')
  fi
  [[ "$id" =~ ^[a-z0-9]{5}(-[a-z0-9]{1,5})+$ ]] || die "could not read the new canister's id from: $out"
  echo "$id"
}

shards=()
shard_role() { echo "(variant { Shard = record { router = principal \"$router\" } })"; }
for i in $(seq 0 $((n - 1))); do
  id=$(create_shard) || exit 1
  if [ $cli = dfx ]; then
    dfx canister --network "$network" install "$id" --wasm "$wasm" --argument "$(shard_role)"
  else
    icp canister install -e "$network" "$id" --mode install --wasm "$wasm" --args "$(shard_role)"
  fi
  shards+=("$id")
  log "shard $i: $id"
done
list=$(printf 'principal "%s"; ' "${shards[@]}")
if [ $cli = dfx ]; then
  out=$(dfx canister --network "$network" call "$canister" add_shards "(vec { $list})")
else
  out=$(icp canister call -e "$network" "$canister" add_shards "(vec { $list})")
fi
[[ "$out" == *"variant { Ok }"* ]] \
  || die "the router refused its shards (${shards[*]}: created and installed, not registered): $out"
printf '%s\n' "${shards[@]}" > "$record"
log "registered ${#shards[@]} shards with $router (listed in $record)"
