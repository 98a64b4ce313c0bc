#!/usr/bin/env bash
# Measures ic-rusqlite's SQLite build apart from its storage path (not part of CI; needs clang, lld,
# Debian's wasi-libc and clang's wasm32 runtime: installed here when run as root with apt-get).
#
# ic-rusqlite 0.5 links a precompiled SQLite 3.53.0 built by clang 20.1.8 at -O3 with
# libsqlite3-sys's bundled defines plus THREADSAFE=0 and OMIT_LOAD_EXTENSION (its archive's
# sqlite3_compileoption strings; wasm-forge/ic-rusqlite .github/workflows/build-sqlite.yml).
# ic-sqlite-vfs 2.1 ships SQLite 3.53.4 at -Oz with its own defines (vendor/sqlite/build-flags.txt).
# This compiles ic-sqlite-vfs's SQLite 3.53.4 source for wasm32-wasip1 with
#
#   DEFINES=rusqlite   ic-rusqlite's defines
#   DEFINES=vfs        ic-sqlite-vfs's defines, less SQLITE_OS_OTHER (ic-rusqlite runs SQLite's
#                      unix VFS over WASI); its TEMP_STORE=3 keeps temporary storage in memory
#                      whatever temp_store says, and OMIT_WAL removes WAL
#
# at CFLAGS, links it into the benchmark canister in place of ic-rusqlite's archive (a copy of the
# workspace with a patched copy of ic-rusqlite, under target/rusqlite-sqlite-build/), and runs the
# named benchmarks (default: the nine under journal_memory_temp_file and the SQLite key-value cells
# at 10k and 200k keys) on the offline runner against the committed canbench_results.yml, so
# canbench's change column is the effect of the build. The numbers are persisted in
# target/rusqlite-sqlite-build/<DEFINES>_<CFLAGS>/canbench_results.yml (each cell's run in cells/).
#
#   scripts/rusqlite-sqlite-build.sh DEFINES ["CFLAGS"] [NAME...]   (default CFLAGS: "-O3 -mbulk-memory")
source "$(dirname "$0")/lib.sh"

defines=${1:?usage: scripts/rusqlite-sqlite-build.sh rusqlite|vfs [CFLAGS] [NAME...]}
opt=${2:--O3 -mbulk-memory}
shift $(($# < 2 ? $# : 2))
names=("$@")
if [ ${#names[@]} = 0 ]; then
  for step in insert_users_100k insert_orders_1m create_indexes_1m select_join_1m select_like_100k \
    insert_orders_100_indexed delete_orders_1k_indexed insert_orders_1m_indexed delete_orders_100k_rollback; do
    names+=("sqlite_${step}_journal_memory_temp_file")
  done
  for backend in sqlite sqlite_rowid; do
    for size in 10k 200k; do
      for op in read_warm read_cold write_warm write_cold; do
        names+=("${backend}_trie_${op%_*}_${size}_${op#*_}_journal_memory_temp_file")
      done
    done
    names+=("${backend}_nodestore_10k_journal_memory_temp_file")
  done
fi

if ! command -v clang >/dev/null || [ ! -d /usr/include/wasm32-wasi ] || ! ls /usr/lib/llvm-*/lib/clang/*/lib/wasi/libclang_rt.builtins-wasm32.a >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    log "installing clang, lld, wasi-libc and clang's wasm32 runtime (Debian packages)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y clang llvm lld wasi-libc libclang-rt-14-dev-wasm32 >&2 \
      || die "could not install the Debian packages"
  else
    die "needs clang, llvm, lld, wasi-libc and libclang-rt-14-dev-wasm32 (Debian)"
  fi
fi
ensure_rust
registry_dir() {
  cargo metadata --locked --format-version 1 --filter-platform "$1" \
    | python3 -c "import json,sys; print(next(p['manifest_path'] for p in json.load(sys.stdin)['packages'] if p['name'] == '$2').rsplit('/', 1)[0])"
}
vfs_src=$(registry_dir "$VFS_WASM_TARGET" ic-sqlite-vfs)
rusqlite_src=$(registry_dir "$WASM_TARGET" ic-rusqlite)

wasi=(-D_WASI_EMULATED_MMAN -D_WASI_EMULATED_GETPID -D_WASI_EMULATED_SIGNAL -D_WASI_EMULATED_PROCESS_CLOCKS
  -DLONGDOUBLE_TYPE=double)
case $defines in
  rusqlite)
    flags=(-DSQLITE_CORE -DSQLITE_DEFAULT_FOREIGN_KEYS=1 -DSQLITE_ENABLE_API_ARMOR -DSQLITE_ENABLE_COLUMN_METADATA
      -DSQLITE_ENABLE_DBSTAT_VTAB -DSQLITE_ENABLE_FTS3 -DSQLITE_ENABLE_FTS3_PARENTHESIS -DSQLITE_ENABLE_FTS5
      -DSQLITE_ENABLE_JSON1 -DSQLITE_ENABLE_LOAD_EXTENSION=1 -DSQLITE_ENABLE_MEMORY_MANAGEMENT -DSQLITE_ENABLE_RTREE
      -DSQLITE_ENABLE_STAT4 -DSQLITE_SOUNDEX -DSQLITE_THREADSAFE=0 -DSQLITE_USE_URI -DHAVE_USLEEP=1 -DHAVE_ISNAN
      -DSQLITE_OMIT_LOAD_EXTENSION -DHAVE_LOCALTIME_R "${wasi[@]}")
    ;;
  vfs)
    flags=("${wasi[@]}")
    while read -r d; do
      [ -n "$d" ] && [ "$d" != SQLITE_OS_OTHER=1 ] && flags+=("-D$d")
    done <"$vfs_src/vendor/sqlite/build-flags.txt"
    ;;
  *) die "DEFINES is rusqlite or vfs, not $defines" ;;
esac

base=$ROOT/target/rusqlite-sqlite-build
out=$base/${defines}_$(tr -c 'A-Za-z0-9\n' _ <<<"$opt")
mkdir -p "$out"
log "compiling SQLite $(grep -m1 '^#define SQLITE_VERSION ' "$vfs_src/vendor/sqlite/src/sqlite3.c" | cut -d'"' -f2) for $WASM_TARGET with $(clang --version | head -1): $defines defines, $opt"
clang --target=wasm32-wasi $opt "${flags[@]}" -w -c "$vfs_src/vendor/sqlite/src/sqlite3.c" -o "$out/sqlite3.o"
rm -f "$out/libsqlite3.a"
llvm-ar rcs "$out/libsqlite3.a" "$out/sqlite3.o"

# A copy of the workspace whose ic-rusqlite is a copy of the registry's with this archive.
ws=$base/ws
mkdir -p "$ws"
(cd "$ROOT" && git ls-files -z | tar --null -T - -cf -) | tar -xf - -C "$ws"
rm -rf "$base/ic-rusqlite"
cp -r "$rusqlite_src" "$base/ic-rusqlite"
cp "$out/libsqlite3.a" "$base/ic-rusqlite/lib/libsqlite3.a"
python3 - "$ws/Cargo.toml" "$base/ic-rusqlite" <<'EOF'
import sys
path, crate = sys.argv[1:]
text = open(path).read()
assert "[patch.crates-io]\n" in text, "the workspace has a [patch.crates-io] table"
open(path, "w").write(text.replace("[patch.crates-io]\n", f'[patch.crates-io]\nic-rusqlite = {{ path = "{crate}" }}\n', 1))
EOF
# The patch changes the lock file's source of ic-rusqlite, nothing else.
(cd "$ws" && cargo metadata --format-version 1 --offline >/dev/null)
(cd "$ws" && scripts/build.sh bench)
cp "$ws/target/canister/stablebench_bench.wasm" "$out/stablebench_bench.wasm"
cp "$ROOT/canbench_results.yml" "$out/canbench_results.yml"
cat >"$out/canbench.yml" <<YML
build_cmd: "true"
wasm_path: stablebench_bench.wasm
results_path: canbench_results.yml
YML
cargo build --locked --release -p stablebench-runner
cd "$out"
# --persist with a pattern writes only the matching benchmarks, so each cell's results are kept
# apart and merged at the end.
mkdir -p cells
for name in "${names[@]}"; do
  cp "$ROOT/canbench_results.yml" canbench_results.yml
  "$ROOT/target/release/stablebench-runner" bench --no-build --less-verbose --persist "$name"
  mv canbench_results.yml "cells/$name.yml"
done
python3 - "${names[@]}" <<'MERGE'
import sys, yaml
benches, version = {}, None
for name in sys.argv[1:]:
    doc = yaml.safe_load(open(f"cells/{name}.yml"))
    benches[name] = doc["benches"][name]
    version = doc["version"]
yaml.safe_dump({"benches": dict(sorted(benches.items())), "version": version}, open("canbench_results.yml", "w"), sort_keys=False)
MERGE
log "results of ${#names[@]} cells: $out/canbench_results.yml"
