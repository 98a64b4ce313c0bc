#!/usr/bin/env bash
# The README's test command, and what CI runs (.ci/run): checks formatting and lints, builds both wasm files the way users
# build them, checks them, runs every test of the workspace (in release mode: the runner's tests
# execute canister wasm, and the release artifacts are shared with scripts/bench.sh), opens the
# results site in headless Chromium (scripts/site-check.sh), then runs every benchmark of the grid
# through the offline runner. Each benchmark checks its result
# against its oracle, and --check fails if canbench_results.yml is stale.
source "$(dirname "$0")/lib.sh"

ensure_rust
log "checking formatting and lints"
cargo fmt --all --check || die "cargo fmt --all --check failed: run cargo fmt --all"
# `--release`: the build scripts (SQLite's C among them) and proc macros it compiles are the ones the
# release test build below needs, so that build reuses them instead of compiling them again.
cargo clippy --release --workspace --all-targets --all-features --locked -- -D warnings || die "clippy found warnings"
# The wasm clippy runs use the wasm builds' profile (`canister`) and flags (`wasm_rustflags`), so
# that the build scripts they run, SQLite's C among them, are the ones scripts/build.sh then
# reuses instead of compiling them again (measured on 2026-11-28 for examples/sqlite and
# sharded-orders: clippy and both builds 74 s instead of 100 s). Lints are the same in every
# profile, except code under `#[cfg(debug_assertions)]`, which none of these crates has.
wasm_rustflags
# The ic-sqlite-vfs canister's storage code exists for wasm32 only: lint it on its target too.
# (`--features canbench`: its two SQLite features exclude each other.)
cargo clippy --locked --profile canister --target "$VFS_WASM_TARGET" -p stablebench-vfs --features canbench -- -D warnings \
  || die "clippy found warnings in the ic-sqlite-vfs canister (wasm32-unknown-unknown)"
# The example canisters and the sharded sets' canisters compile for wasm32 only (natively they
# are empty): lint them there, one cargo run per target. The production canister with them: the
# workspace run above lints it with feature `canbench`, which leaves out its production-only
# endpoints (`canister/src/kv_many.rs`). In a cargo run of its own it took longer: fresh-clone CI
# lints 264 s against 224 s here, the wasm builds 270 s against 274 s (ci_runs.csv: 17e62ba, 205e43e).
cargo clippy --locked --profile canister --target "$WASM_TARGET" -p stablebench-example-sqlite -p stablebench-sharded-orders \
  -p stablebench-canister -- -D warnings \
  || die "clippy found warnings in examples/sqlite, sharded-orders/ or the production canister ($WASM_TARGET)"
# The ic-sqlite-vfs canister without `canbench` too: its production-only endpoints
# (`vfs/src/kv_many.rs`) are left out of the run above.
cargo clippy --locked --profile canister --target "$VFS_WASM_TARGET" -p stablebench-example-maps -p stablebench-sharded \
  -p stablebench-vfs -- -D warnings \
  || die "clippy found warnings in examples/maps, sharded/ or the ic-sqlite-vfs canister ($VFS_WASM_TARGET)"

"$ROOT/scripts/build.sh" all

IC_WASM=$(ensure_ic_wasm)
log "checking the wasm files"
exports() { "$IC_WASM" "$OUT_DIR/$1" info | sed -n '/^Exported methods: \[/,/^]/p'; }
# One benchmark per cell of the grid (build.rs generates them), as many as canbench_results.yml
# records (report/tests/readme.rs checks the names are exactly the grid's).
benches=$(exports stablebench_bench.wasm | grep -c '"canister_query __canbench__' || true)
recorded=$(grep -cE '^  [a-z0-9_]+:$' canbench_results.yml || true)
[ "$benches" -eq "$recorded" ] || die "stablebench_bench.wasm exports $benches __canbench__ queries, canbench_results.yml records $recorded"
vfs_benches=$(exports stablebench_vfs_bench.wasm | grep -c '"canister_query __canbench__' || true)
vfs_recorded=$(grep -cE '^  [a-z0-9_]+:$' vfs/canbench_results.yml || true)
[ "$vfs_benches" -eq "$vfs_recorded" ] \
  || die "stablebench_vfs_bench.wasm exports $vfs_benches __canbench__ queries, vfs/canbench_results.yml records $vfs_recorded"
for wasm in stablebench.wasm stablebench_vfs.wasm; do
  if exports "$wasm" | grep -q __canbench__; then
    die "the production wasm $wasm exports __canbench__ queries"
  fi
done
WASI2IC=$(ensure_wasi2ic)
for wasm in stablebench.wasm stablebench_bench.wasm stablebench_vfs.wasm stablebench_vfs_bench.wasm \
  example_sqlite.wasm example_maps.wasm stablebench_sharded.wasm stablebench_sharded_orders.wasm; do
  # After wasi2ic (ic-rusqlite) or as built (ic-sqlite-vfs), every import must be an IC system
  # API (module ic0): no WASI, no JavaScript.
  imports=$("$WASI2IC" -i "$OUT_DIR/$wasm")
  grep -q '^ *import "ic0"' <<<"$imports" || die "cannot list the imports of $wasm"
  others=$(awk '$1 == "import" && $2 != "\"ic0\"" {print $2 "." $3}' <<<"$imports")
  [ -z "$others" ] || die "$wasm imports functions the IC does not provide: $others"
done

log "building every canister with icp-cli (icp.yaml) and comparing its wasm with scripts/build.sh's"
# icp.yaml's build steps call scripts/build.sh per canister (cargo has nothing left to build; the
# wasi2ic and ic-wasm steps run again): each artifact must equal the file built above, byte for
# byte. Telemetry off (icp-cli turns it off itself when CI is set; not on a developer's machine).
ICP=$(ensure_icp)
dfx_names=$(python3 -c 'import json; print("\n".join(json.load(open("dfx.json"))["canisters"]))' | LC_ALL=C sort)
icp_names=$(sed -n 's/^  - name: *//p' icp.yaml | LC_ALL=C sort)
[ "$dfx_names" = "$icp_names" ] || die "icp.yaml and dfx.json declare different canisters: $(echo $icp_names) against $(echo $dfx_names)"
declare -A built
for name in $dfx_names; do
  built[$name]=$(sha256sum "$OUT_DIR/$name.wasm" | cut -d' ' -f1)
done
rm -rf "$ROOT/.icp/cache/artifacts"
# One canister at a time, the benchmark canister first: the production and benchmark wasm are one
# crate with and without a feature, and cargo relinks the benchmark one (about 100 s) when the
# production one was built after it, but not the other way round. After `build.sh all` (which
# builds the benchmark canister after the production one) this order rebuilds nothing.
for name in stablebench_bench $(grep -vx stablebench_bench <<<"$dfx_names"); do
  ICP_TELEMETRY_DISABLED=1 "$ICP" build "$name" >&2 || die "icp build $name failed"
done
for name in "${!built[@]}"; do
  artifact=$ROOT/.icp/cache/artifacts/$name
  [ -f "$artifact" ] || die "icp build wrote no artifact for $name ($artifact)"
  [ "$(sha256sum "$artifact" | cut -d' ' -f1)" = "${built[$name]}" ] \
    || die "icp build's $name wasm differs from scripts/build.sh's $OUT_DIR/$name.wasm"
done

log "checking scripts/deploy-sharded.sh against stand-ins for dfx and icp-cli, and icp-cli's parsing of its calls"
"$ROOT/scripts/deploy-sharded-check.sh"

# The toy is the ic-sqlite-vfs benchmark canister with one more feature (about 15 s; the grid's
# run builds that canister again without it).
log "building the ic-sqlite-vfs benchmark canister with the test-only toy workload (runner/tests/toy.rs)"
"$ROOT/scripts/build.sh" toy

log "running the workspace tests"
# cargo-nextest: every test in a process of its own, two at a time across all the test binaries
# (`cargo test` runs the binaries one after another, and most of the slow ones hold one test).
NEXTEST=$(ensure_nextest)
# The runner's heap tracking is checked after every execution of three end-to-end suites: the
# whole heap against its committed image (a write the map of written pages missed fails the
# test). They run once, with the check; everything else without it.
# (`--workspace`: with `-p stablebench-runner` cargo resolves the dependencies' features for that
# package alone and compiles wasmtime and the rest again, 2.5 minutes on 2 cores.)
heap_checked='binary(canister_e2e) | binary(system_api) | binary(reliability)'
"$NEXTEST" nextest run --workspace --locked --release --no-fail-fast -E "not ($heap_checked)"
STABLEBENCH_RUNNER_CHECK_HEAP=1 "$NEXTEST" nextest run --workspace --locked --release --no-fail-fast -E "$heap_checked"
# nextest runs no doctests: cargo does (none exist today; this keeps one from being skipped).
cargo test --workspace --locked --release --doc
# The runner binary the workspace tests built (for their integration tests), used by load.sh and
# the grid below, instead of a third build with the runner's own feature set.
export STABLEBENCH_RUNNER=$ROOT/target/release/stablebench-runner
[ -x "$STABLEBENCH_RUNNER" ] || die "the workspace tests did not build $STABLEBENCH_RUNNER"
# The same for the compare page's stablebench-report (the workspace tests built it for
# report/tests/compare.rs), instead of a second build.
export STABLEBENCH_REPORT=$ROOT/target/release/stablebench-report
[ -x "$STABLEBENCH_REPORT" ] || die "the workspace tests did not build $STABLEBENCH_REPORT"
# (The benchmark canister's interface is checked against canister/stablebench_bench.did on its
# wasm, by runner/tests/interfaces.rs above: no second native build with feature canbench.)

log "loading a data set in budgeted calls with scripts/load.sh, twice (the second run must add nothing)"
load_state=$(mktemp -d) load_log=$(mktemp)
trap 'rm -rf "$load_state" "$load_log"' EXIT
for run in 1 2; do
  stats=$("$ROOT/scripts/load.sh" --users 2000 --orders 20000 --budget 20000000 --state "$load_state" 2>"$load_log")
  grep -q "users = 2_000 : nat64" <<<"$stats" && grep -q "orders = 20_000 : nat64" <<<"$stats" \
    || die "scripts/load.sh run $run ended with: $stats"
done
# The second run's cost table: one call per method, nothing added.
grep -q '^| add_users | 1 | 0 |' "$load_log" && grep -q '^| add_orders | 1 | 0 |' "$load_log" \
  || die "the second scripts/load.sh run added rows: $(cat "$load_log")"

log "opening the results site in headless Chromium (every page loads, logs nothing, misses no file)"
# Installs Debian's chromium if it is missing (about 35 s on a fresh machine; the check itself about
# 15 s). Screenshots go to target/, not over the committed ones in docs/site/screenshots/.
"$ROOT/scripts/site-check.sh" --shots "$ROOT/target/site/screenshots"

log "running every benchmark of the grid (offline runner, checked against canbench_results.yml and vfs/canbench_results.yml)"
# --csv: canbench's CSV of this run against the committed results, which becomes
# target/site/compare.html (what moved, for the CI artifact) whether or not --check passes.
# A benchmark that fails stops its run before the CSV is written: old CSVs go first, and the page
# compares what this run wrote.
status=0
rm -f canbench_results.csv vfs/canbench_results.csv target/site/compare.html
# Shared setups (the runner's default; runner/tests/shared_setups.rs shows they change nothing)
# and --noise-threshold 0: the runner is deterministic, so every benchmark must reproduce the
# committed instructions exactly.
grid=(bench --no-build --hide-results --less-verbose --check --csv --noise-threshold 0)
"$STABLEBENCH_RUNNER" "${grid[@]}" || status=$?
(cd vfs && "$STABLEBENCH_RUNNER" "${grid[@]}") || status=$?
csvs=()
for csv in canbench_results.csv vfs/canbench_results.csv; do [ -f "$csv" ] && csvs+=("$csv"); done
if [ ${#csvs[@]} -gt 0 ]; then
  "$ROOT/scripts/site-compare.sh" "${csvs[@]}" --out target/site/compare.html || status=1
fi
[ "$status" -eq 0 ] || die "the grid's benchmarks failed or canbench_results.yml is stale (target/site/compare.html shows what moved)"
log "every check passed"
