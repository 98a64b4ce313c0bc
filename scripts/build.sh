#!/usr/bin/env bash
# The one build path (dfx.json, canbench.yml, CI and the README call it).
#
#   scripts/build.sh [production|bench|all]      (default: production)
#
# production -> target/canister/stablebench.wasm: the canister dfx deploys (gzipped by dfx), with the
#               candid:service metadata, checked against canister/stablebench.did.
# bench      -> target/canister/stablebench_bench.wasm: the same canister plus the nine
#               `__canbench__*` benchmark queries (cargo feature `canbench`).
# Both are built for wasm32-wasip1 with the `canister` profile and converted by wasi2ic, which
# replaces the WASI imports with ic-wasi-polyfill's implementations over stable memory.
source "$(dirname "$0")/lib.sh"

variant=${1:-production}
case "$variant" in
  production|bench|all) ;;
  *) die "unknown variant '$variant' (expected production, bench or all)" ;;
esac

ensure_rust
WASI2IC=$(ensure_cargo_tool wasi2ic "$WASI2IC_VERSION")
IC_WASM=$(ensure_cargo_tool ic-wasm "$IC_WASM_VERSION")
mkdir -p "$OUT_DIR"

# build NAME [cargo feature args...]: compiles, converts with wasi2ic, writes $OUT_DIR/NAME.wasm.
build() {
  local name=$1; shift
  log "building $name.wasm"
  cargo build --locked --profile canister --target "$WASM_TARGET" -p stablebench-canister "$@"
  "$WASI2IC" -q "target/$WASM_TARGET/canister/stablebench_canister.wasm" "$OUT_DIR/$name.wasm"
}

if [ "$variant" = production ] || [ "$variant" = all ]; then
  build stablebench
  did=canister/stablebench.did
  # Fails if the wasm's methods (canister_update/query exports) and the .did disagree either way.
  # Other exports (lifecycle hooks, the WASI polyfill's __ic_custom_* functions) are not methods:
  # they are listed as hidden so that only methods are compared.
  "$IC_WASM" "$OUT_DIR/stablebench.wasm" info \
    | sed -n '/^Exported methods: \[/,/^]/s/^ *"\(.*\) (.*)",\{0,1\}$/\1/p' \
    | grep -v -E '^canister_(update|query|composite_query) ' > "$OUT_DIR/hidden-endpoints.txt" || true
  "$IC_WASM" "$OUT_DIR/stablebench.wasm" check-endpoints --candid "$did" \
    --hidden "$OUT_DIR/hidden-endpoints.txt" >&2 || die "the wasm's methods differ from $did"
  # After the check: check-endpoints reads an embedded candid:service before its --candid file.
  "$IC_WASM" "$OUT_DIR/stablebench.wasm" -o "$OUT_DIR/stablebench.wasm" \
    metadata candid:service -f "$did" -v public
fi
if [ "$variant" = bench ] || [ "$variant" = all ]; then
  build stablebench_bench --features canbench
fi
log "done: $(cd "$OUT_DIR" && ls -1 *.wasm* | tr '\n' ' ')"
