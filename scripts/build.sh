#!/usr/bin/env bash
# The one build path (dfx.json, canbench.yml, CI and the README call it).
#
#   scripts/build.sh [production|bench|vfs|vfs_bench|examples|example_sqlite|example_maps|sharded|sharded_orders|all|toy]
#                                                                       (default: production)
#
# production -> target/canister/stablebench.wasm: the canister dfx deploys (gzipped by dfx), with the
#               candid:service metadata, checked against canister/stablebench.did.
# bench      -> target/canister/stablebench_bench.wasm: the benchmark canister (cargo feature
#               `canbench`): the same canister plus one `__canbench__*` query per cell of the grid
#               and the live benchmark methods, checked against canister/stablebench_bench.did.
# Both are built for wasm32-wasip1 with the `canister` profile and converted by wasi2ic, which
# replaces the WASI imports with ic-wasi-polyfill's implementations over stable memory.
# vfs        -> target/canister/stablebench_vfs.wasm: the ic-sqlite-vfs canister (vfs/), built for
#               wasm32-unknown-unknown (no WASI, no wasi2ic), checked against vfs/stablebench_vfs.did.
# vfs_bench  -> target/canister/stablebench_vfs_bench.wasm: the same with its `__canbench__*` queries
#               (vfs/canbench.yml) and without the production-only kv_get_many and kv_put_many,
#               checked against vfs/stablebench_vfs_bench.did.
# examples   -> target/canister/example_sqlite.wasm (examples/sqlite: the recommended settings in a
#               canister to copy; wasm32-wasip1 and wasi2ic, like the production canister) and
#               example_maps.wasm (examples/maps: StableBTreeMap and a heap map; wasm32-unknown-unknown);
#               example_sqlite and example_maps build one of them (icp.yaml's build steps).
# sharded    -> target/canister/stablebench_sharded.wasm (sharded/: a router and its shards, one wasm;
#               wasm32-unknown-unknown), checked against sharded/stablebench_sharded.did.
# sharded_orders -> target/canister/stablebench_sharded_orders.wasm (sharded-orders/: users/orders
#               sharded by user, a router and its shards in one wasm, SQLite through ic-rusqlite;
#               wasm32-wasip1 and wasi2ic), checked against sharded-orders/stablebench_sharded_orders.did.
# toy        -> target/canister/stablebench_toy.wasm: the ic-sqlite-vfs benchmark canister with the
#               test-only toy workload's two cells (cargo feature `toy`; runner/tests/toy.rs). Not
#               part of `all`.
# Builds run one at a time (a lock in target/): icp-cli builds every canister of icp.yaml at once.
source "$(dirname "$0")/lib.sh"

variant=${1:-production}
case "$variant" in
  production|bench|vfs|vfs_bench|examples|example_sqlite|example_maps|sharded|sharded_orders|all|toy) ;;
  *) die "unknown variant '$variant' (expected production, bench, vfs, vfs_bench, examples, example_sqlite, example_maps, sharded, sharded_orders, all or toy)" ;;
esac

# One build at a time: two would race on the tools' installation and on the files of $OUT_DIR
# (cargo serializes its own builds, not the steps around them).
mkdir -p "$ROOT/target"
exec 9>"$ROOT/target/.build.lock"
flock 9

ensure_rust
WASI2IC=$(ensure_wasi2ic)
IC_WASM=$(ensure_ic_wasm)
mkdir -p "$OUT_DIR"

wasm_rustflags

# build NAME [cargo feature args...]: compiles, converts with wasi2ic, writes $OUT_DIR/NAME.wasm.
build() {
  local name=$1; shift
  log "building $name.wasm"
  cargo build --locked --profile canister --target "$WASM_TARGET" -p stablebench-canister "$@"
  "$WASI2IC" -q "target/$WASM_TARGET/canister/stablebench_canister.wasm" "$OUT_DIR/$name.wasm"
}

# build_example NAME: compiles examples/NAME (crate stablebench-example-NAME) for its target,
# writes $OUT_DIR/example_NAME.wasm.
build_example() {
  local name=$1 crate=stablebench_example_$1
  log "building example_$name.wasm"
  case $name in
    sqlite)
      cargo build --locked --profile canister --target "$WASM_TARGET" -p "stablebench-example-$name"
      "$WASI2IC" -q "target/$WASM_TARGET/canister/$crate.wasm" "$OUT_DIR/example_$name.wasm" ;;
    *)
      cargo build --locked --profile canister --target "$VFS_WASM_TARGET" -p "stablebench-example-$name"
      cp "target/$VFS_WASM_TARGET/canister/$crate.wasm" "$OUT_DIR/example_$name.wasm" ;;
  esac
}

# build_vfs NAME [cargo feature args...]: compiles the ic-sqlite-vfs canister, writes $OUT_DIR/NAME.wasm.
build_vfs() {
  local name=$1; shift
  log "building $name.wasm"
  cargo build --locked --profile canister --target "$VFS_WASM_TARGET" -p stablebench-vfs "$@"
  cp "target/$VFS_WASM_TARGET/canister/stablebench_vfs.wasm" "$OUT_DIR/$name.wasm"
}

# check_and_embed NAME [DID]: fails if the wasm's methods (canister_update/query exports) and
# canister/NAME.did disagree either way, then embeds the .did as public candid:service metadata
# (the Candid UI and `stablebench-runner call` read it). Other exports (lifecycle hooks, the WASI
# polyfill's __ic_custom_* functions) are not methods: they are listed as hidden so that only
# methods are compared.
check_and_embed() {
  local name=$1 did=${2:-canister/$1.did}
  "$IC_WASM" "$OUT_DIR/$name.wasm" info \
    | sed -n '/^Exported methods: \[/,/^]/s/^ *"\(.*\) (.*)",\{0,1\}$/\1/p' \
    | grep -v -E '^canister_(update|query|composite_query) ' > "$OUT_DIR/$name.hidden-endpoints.txt" || true
  # The ic-sqlite-vfs canister also exports its SQLite's libc shims (memchr, realloc, ...;
  # ic-sqlite-vfs defines them `extern "C"` for wasm32-unknown-unknown) and, in the bench wasm,
  # canbench's `__canbench__*`/`__tracing__*` queries: none is a method of its .did.
  case $name in
    stablebench_vfs|stablebench_vfs_bench|example_maps|stablebench_sharded)
      "$IC_WASM" "$OUT_DIR/$name.wasm" info | sed -n '/^Exported methods: \[/,/^]/s/^ *"\([^"(]*[^" (]\)\( (.*)\)\{0,1\}",\{0,1\}$/\1/p' \
        | grep -v -E '^canister_(update|query|composite_query) [a-z]' | sed 's/^\(canister_[a-z_]*\) /\1:/' > "$OUT_DIR/$name.hidden-endpoints.txt" || true ;;
  esac
  "$IC_WASM" "$OUT_DIR/$name.wasm" check-endpoints --candid "$did" \
    --hidden "$OUT_DIR/$name.hidden-endpoints.txt" >&2 || die "the methods of $name.wasm differ from $did"
  # After the check: check-endpoints reads an embedded candid:service before its --candid file.
  # The bench wasm keeps its name section (ic-wasm drops it otherwise): function names for
  # `stablebench-runner bench --profile`; custom sections cost no instructions.
  local keep=()
  case $name in stablebench_bench|stablebench_vfs_bench) keep=(--keep-name-section) ;; esac
  # The production wasm files drop their names; a copy that keeps them (the same module by the
  # same ic-wasm pass, so the same function indices: runner/tests/page_regions.rs checks that
  # the code is byte for byte the same) names the functions in their page profiles.
  case $name in
    stablebench|stablebench_vfs)
      "$IC_WASM" "$OUT_DIR/$name.wasm" -o "$OUT_DIR/$name.names.wasm" metadata candid:service -f "$did" -v public \
        --keep-name-section ;;
  esac
  "$IC_WASM" "$OUT_DIR/$name.wasm" -o "$OUT_DIR/$name.wasm" metadata candid:service -f "$did" -v public "${keep[@]}"
}

if [ "$variant" = production ] || [ "$variant" = all ]; then
  # STABLEBENCH_PRODUCTION_FEATURES (e.g. `pcache`): cargo features of a production wasm built to
  # be measured, in place of the production file, until the next build without them.
  build stablebench ${STABLEBENCH_PRODUCTION_FEATURES:+--features "$STABLEBENCH_PRODUCTION_FEATURES"}
  check_and_embed stablebench
fi
if [ "$variant" = bench ] || [ "$variant" = all ]; then
  build stablebench_bench --features canbench
  check_and_embed stablebench_bench
fi
if [ "$variant" = toy ]; then
  # No .did check: the toy's two benchmarks are queries no .did lists.
  build_vfs stablebench_toy --features toy
fi
if [ "$variant" = vfs ] || [ "$variant" = all ]; then
  build_vfs stablebench_vfs
  check_and_embed stablebench_vfs vfs/stablebench_vfs.did
fi
if [ "$variant" = vfs_bench ] || [ "$variant" = all ]; then
  build_vfs stablebench_vfs_bench --features canbench
  check_and_embed stablebench_vfs_bench vfs/stablebench_vfs_bench.did
fi
for example in sqlite maps; do
  case $variant in
    examples | all | "example_$example")
      build_example "$example"
      check_and_embed "example_$example" "examples/$example/example_$example.did" ;;
  esac
done
if [ "$variant" = sharded ] || [ "$variant" = all ]; then
  log "building stablebench_sharded.wasm"
  cargo build --locked --profile canister --target "$VFS_WASM_TARGET" -p stablebench-sharded
  cp "target/$VFS_WASM_TARGET/canister/stablebench_sharded.wasm" "$OUT_DIR/stablebench_sharded.wasm"
  check_and_embed stablebench_sharded sharded/stablebench_sharded.did
fi
if [ "$variant" = sharded_orders ] || [ "$variant" = all ]; then
  log "building stablebench_sharded_orders.wasm"
  cargo build --locked --profile canister --target "$WASM_TARGET" -p stablebench-sharded-orders
  "$WASI2IC" -q "target/$WASM_TARGET/canister/stablebench_sharded_orders.wasm" "$OUT_DIR/stablebench_sharded_orders.wasm"
  check_and_embed stablebench_sharded_orders sharded-orders/stablebench_sharded_orders.did
fi
log "done: $(cd "$OUT_DIR" && ls -1 *.wasm* | tr '\n' ' ')"
