#!/usr/bin/env bash
# Checks scripts/deploy-sharded.sh without a replica (scripts/test.sh runs it):
#   1. against stand-ins for dfx and icp that record their command lines and answer as the real
#      ones do, for both sets and both tools: N shards created with the identity and the router as
#      controllers, each installed with the wasm and role `Shard { router }`, registered in
#      creation order, the record written; then a second run refused, bad arguments refused
#      before any call, and a router's refusal of its shards reported with no record written;
#   2. every command line the script sent to the stand-in icp, given to the installed icp-cli
#      (ensure_icp) with no network running: each must get past icp-cli's argument parsing (a
#      usage error exits 2) to the missing network or canister.
# Needs the wasm files in target/canister/ (scripts/build.sh sharded sharded_orders).
source "$(dirname "$0")/lib.sh"

work=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
mkdir -p "$work/bin"
# The stand-ins: each appends its command line to $work/<tool>.log, keeps its arguments exactly
# (NUL-separated) in $work/<tool>.call.NNN, and answers as dfx 0.30 and icp-cli 1.5 print.
cat > "$work/bin/fake" <<'FAKE'
#!/usr/bin/env bash
tool=$(basename "$0")
calls=("$STANDIN_DIR/$tool".call.*); [ -e "${calls[0]}" ] || calls=()
printf '%s\0' "$@" > "$STANDIN_DIR/$tool.call.$(printf %03d ${#calls[@]})"
printf '%s\n' "$*" >> "$STANDIN_DIR/$tool.log"
# The ids of the canisters it creates, in order (valid principals: icp-cli checks them).
ids=(3rgvi-ciaaa-aaaaa-acaaq-cai 3yf6u-uaaaa-aaaaa-acaba-cai 37eya-zyaaa-aaaaa-acabq-cai)
next_id() { local n; n=$(cat "$STANDIN_DIR/ids" 2>/dev/null || echo 0); echo $((n + 1)) > "$STANDIN_DIR/ids"; echo "${ids[n]}"; }
case "$tool $*" in
  "dfx canister --network "*" id "*|"icp canister status "*) echo "rrkah-fqaaa-aaaaa-aaaaq-cai" ;;
  "dfx identity get-principal"|"icp identity principal") echo "ssdjl-wqha4-dqoby-ha4dq-obyha-4dqob-yha4d-qobyh-a4dqo-byha4-dqo" ;;
  "dfx identity --network "*" get-wallet") echo "ryjl3-tyaaa-aaaaa-aaaba-cai" ;;
  *wallet_create_canister128*) echo "(variant { 17_724 = record { 2_631_180_839 = principal \"$(next_id)\" } })" ;;
  "icp canister create "*) next_id ;;
  *add_shards*) if [ -n "${STANDIN_REFUSE:-}" ]; then echo '(variant { Err = variant { NoShards } })'; else echo "(variant { Ok })"; fi ;;
esac
FAKE
chmod +x "$work/bin/fake"
ln -s fake "$work/bin/dfx"
ln -s fake "$work/bin/icp"
export STANDIN_DIR=$work STABLEBENCH_DEPLOY_RECORD_DIR=$work

# deploy ARGS...: runs the script with the stand-ins first on PATH.
deploy() { PATH="$work/bin:$PATH" "$ROOT/scripts/deploy-sharded.sh" "$@"; }
# calls TOOL: its recorded command lines, fields joined by spaces.
calls() { cat "$work/$1.log"; }
fail() { die "deploy-sharded.sh: $*"; }

for tool in dfx icp; do
  for set in kv orders; do
    rm -f "$work"/*.log "$work"/*.call.* "$work/ids" "$work"/.sharded*-shards
    flags=(--no-build); [ $tool = icp ] && flags+=(--icp); [ $set = orders ] && flags+=(--orders)
    deploy 3 "${flags[@]}" 2> "$work/err" || { cat "$work/err" >&2; fail "$tool $set: failed"; }
    canister=stablebench_sharded; [ $set = orders ] && canister=stablebench_sharded_orders
    record=$work/.${canister#stablebench_}-shards
    ids=$(printf '%s\n' 3rgvi-ciaaa-aaaaa-acaaq-cai 3yf6u-uaaaa-aaaaa-acaba-cai 37eya-zyaaa-aaaaa-acabq-cai)
    [ "$(cat "$record")" = "$ids" ] || fail "$tool $set: the record holds $(cat "$record")"
    log=$(calls $tool)
    creates=$(grep -c -E 'wallet_create_canister128|canister create' <<< "$log")
    [ "$creates" = 3 ] || fail "$tool $set: $creates shards created, not 3"
    grep -E 'wallet_create_canister128|canister create' <<< "$log" | grep -v -q -E 'ssdjl-wqha4-dqoby-ha4dq-obyha-4dqob-yha4d-qobyh-a4dqo-byha4-dqo.*rrkah-fqaaa-aaaaa-aaaaq-cai' \
      && fail "$tool $set: a shard created without the identity and the router as controllers"
    for id in $ids; do
      grep -q -E "install .*$id .*--wasm $OUT_DIR/$canister.wasm .*\(variant \{ Shard = record \{ router = principal \"rrkah-fqaaa-aaaaa-aaaaq-cai\" \} \}\)" <<< "$log" \
        || fail "$tool $set: $id not installed as a shard of the router with $canister.wasm"
    done
    grep -q -E "$canister --arg(ument|s) \(variant \{ Router \}\)" <<< "$log" || fail "$tool $set: the router not deployed"
    want="add_shards (vec { $(printf 'principal "%s"; ' $ids)})"
    [[ "$(tail -1 <<< "$log")" == *"$canister $want"* ]] || fail "$tool $set: registered with: $(tail -1 <<< "$log")"
    # A second run refuses before any call.
    before=$(wc -l < "$work/$tool.log")
    deploy 2 "${flags[@]}" 2> "$work/err" && fail "$tool $set: a second run was not refused"
    grep -q 'already registered shards' "$work/err" || fail "$tool $set: $(cat "$work/err")"
    [ "$(wc -l < "$work/$tool.log")" = "$before" ] || fail "$tool $set: the refused run made calls"
  done
done
for bad in "0" "x" "2 --cycles lots" "2 --bogus"; do
  rm -f "$work"/.sharded*-shards "$work"/*.log
  # shellcheck disable=SC2086
  deploy $bad --no-build 2>/dev/null && fail "'$bad' was accepted"
  [ ! -e "$work/dfx.log" ] || fail "'$bad' made calls"
done
# A router that refuses its shards: the run fails and records nothing.
rm -f "$work"/*.log "$work"/*.call.* "$work/ids" "$work"/.sharded*-shards
STANDIN_REFUSE=1 deploy 2 --no-build 2> "$work/err" && fail "a refused add_shards was not reported"
grep -q 'the router refused its shards' "$work/err" || fail "a refused add_shards: $(cat "$work/err")"
[ ! -e "$work/.sharded-shards" ] || fail "a refused add_shards left a record"
log "deploy-sharded.sh: dfx and icp stand-ins, both sets, refusals: as expected"

# 2. The real icp-cli parses every command line the script sent (the last loop's icp log is the
# users/orders set's; the key-value set's are the same but for the canister's name).
icp=$(ensure_icp)
rm -f "$work"/*.log "$work"/*.call.* "$work/ids" "$work"/.sharded*-shards
deploy 2 --no-build --icp --orders 2>/dev/null || fail "icp orders: failed"
checked=0
for call in "$work"/icp.call.*; do
  mapfile -d '' -t args < "$call"
  rc=0; out=$(cd "$ROOT" && ICP_TELEMETRY_DISABLED=1 RUST_BACKTRACE=0 "$icp" "${args[@]}" 2>&1 </dev/null) || rc=$?
  case $rc in
    0|1) [[ $rc = 0 || "$out" == *"network for this project is not running"* || "$out" == *"could not find ID for canister"* ]] \
           || fail "icp ${args[*]}: $out" ;;
    *) fail "icp-cli refused the command line (exit $rc): icp ${args[*]}: $out" ;;
  esac
  checked=$((checked + 1))
done
[ "$checked" -ge 7 ] || fail "only $checked icp command lines recorded"
log "deploy-sharded.sh: icp-cli $ICP_CLI_VERSION accepts its $checked command lines"
