#!/usr/bin/env bash
# Measures SQLite's build apart from ic-sqlite-vfs's storage path (not part of CI; needs clang and
# llvm, e.g. Debian's `apt-get install clang llvm`). ic-sqlite-vfs ships its SQLite precompiled at
# -Oz (its scripts/build-sqlite-precompiled.sh and docs/BUILD_SETUP.md: WASI SDK 34 clang);
# ic-rusqlite's is built at -O3. This builds the ic-sqlite-vfs benchmark canister with the same
# SQLite source and defines (vendor/sqlite/build-flags.txt) compiled here at OPT (default -O3),
# then runs its benchmarks on the offline runner against the committed vfs/canbench_results.yml
# (the shipped -Oz build), so canbench's change column is the effect of the build; the exact
# numbers are persisted in target/vfs-sqlite-build/<CFLAGS>/project/canbench_results.yml.
#
#   scripts/vfs-sqlite-build.sh ["CFLAGS"] [PATTERN]     (default CFLAGS: "-O3 -mbulk-memory")
#
# -mbulk-memory lets clang emit memory.copy/memory.fill for memcpy/memset, as the WASI SDK's clang
# does by default (Debian's clang 14 does not).
source "$(dirname "$0")/lib.sh"

opt=${1:--O3 -mbulk-memory}
pattern=${2:-}
if ! command -v clang >/dev/null; then
  # Debian/Ubuntu as root (this machine, CI images): install it; elsewhere say what is missing.
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    log "installing clang and llvm (Debian packages)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y clang llvm >&2 || die "could not install clang and llvm"
  else
    die "needs clang (Debian: apt-get install clang llvm)"
  fi
fi
ensure_rust
src=$(cargo metadata --locked --format-version 1 --filter-platform "$VFS_WASM_TARGET" \
  | python3 -c 'import json,sys; print(next(p["manifest_path"] for p in json.load(sys.stdin)["packages"] if p["name"] == "ic-sqlite-vfs").rsplit("/", 1)[0])')
dir=$ROOT/target/vfs-sqlite-build/$(tr -c 'A-Za-z0-9\n' _ <<<"$opt")
mkdir -p "$dir/project"
log "building the ic-sqlite-vfs benchmark canister with its SQLite compiled by $(clang --version | head -1) at $opt"
# The library's own headers stand in for a libc (its cargo config does the same with a wrapper).
CC_wasm32_unknown_unknown=clang CFLAGS_wasm32_unknown_unknown="-I$src/c/include $opt" \
  cargo build --locked --profile canister --target "$VFS_WASM_TARGET" --target-dir "$dir/cargo" \
  -p stablebench-vfs --no-default-features --features canbench,sqlite-from-source
cp "$dir/cargo/$VFS_WASM_TARGET/canister/stablebench_vfs.wasm" "$dir/project/stablebench_vfs_bench.wasm"
cp "$ROOT/vfs/canbench_results.yml" "$dir/project/canbench_results.yml"
cat > "$dir/project/canbench.yml" <<YML
build_cmd: "true"
wasm_path: stablebench_vfs_bench.wasm
results_path: canbench_results.yml
YML
cargo build --locked --release -p stablebench-runner
cd "$dir/project"
args=(bench --no-build --less-verbose --persist)
[ -n "$pattern" ] && args+=("$pattern")
"$ROOT/target/release/stablebench-runner" "${args[@]}"
