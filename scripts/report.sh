#!/usr/bin/env bash
# Regenerates the reports from mainnet_results.yml, whose figures they give, and canbench_results.yml,
# whose figures stand beside them (and both files' vfs/ twins): the pragma guide's docs/results.md and its
# heatmap docs/results.svg, the key-value report docs/kv.md with its charts docs/kv_trie.svg and
# docs/kv_nodestore.svg, the sysrepo report docs/sysrepo.md with docs/sysrepo.svg, the Chia report
# docs/chia.md with docs/chia.svg (after replaying each Chia schema in messages on the benchmark
# wasm: runner/tests/chia_pages.rs, chia_pages_results.yml), docs/scaling.md with docs/scaling.svg (the
# users/orders steps from 10k to 10M orders), docs/vfs.md (ic-rusqlite against
# ic-sqlite-vfs), docs/sharding.md's tables (what the sharded set's calls cost, from sharded_results.yml, and
# where one canister runs out, from the single-canister results), the results site docs/site/ (report/src/site.rs; scripts/site-check.sh opens it in
# headless Chromium and saves its screenshots), and the
# generated tables of the README and its docs pages (report::MARKED_DOCS: results, profiles, pragmas, benchmarks, grid, DbWeight, NodeStore,
# sysrepo, Chia, ic-sqlite-vfs), then measures one call per key-value backend on the production wasm
# files of both canisters
# (runner/tests/per_call.rs: per_call_results.yml and docs/per-call.md's per-call table, which quotes the
# benchmarks' numbers next to it), and messages of n operations (runner/tests/message_shapes.rs).
# It also regenerates docs/breakdown.md's tables from the step profiles in docs/profiles/, which
# must match canbench_results.yml exactly: when the users/orders results of the recommended
# profile moved, run scripts/site-flamegraphs.sh first (the breakdown test says so otherwise).
# Run it after `scripts/bench.sh --persist` and commit everything together. When the production
# wasm moved, the per-call test refuses to keep its 10x and profile figures: run this with
# STABLEBENCH_PER_CALL_10X=1 STABLEBENCH_PER_CALL_PROFILES=1 (several minutes more), and before it regenerate
# the endpoint tables too (STABLEBENCH_REGENERATE_ENDPOINTS=1 STABLEBENCH_ENDPOINTS_10X=1
# STABLEBENCH_REGENERATE_STORAGE=1 cargo test --release -p stablebench-runner --test endpoints).
#
#   scripts/report.sh            # dated today
#   STABLEBENCH_RESULTS_DATE=2026-11-22 scripts/report.sh
source "$(dirname "$0")/lib.sh"

ensure_rust
export STABLEBENCH_REGENERATE_README=1
export STABLEBENCH_RESULTS_DATE=${STABLEBENCH_RESULTS_DATE:-$(date -u +%F)}
# The benchmark wasm of these sources, for the Chia replays in messages the Chia report quotes.
"$ROOT/scripts/build.sh" bench
STABLEBENCH_REGENERATE_CHIA_PAGES=1 cargo test --locked --release -p stablebench-runner --test chia_pages >&2
# The production wasm of these sources (cargo rebuilds only what changed), never a stale one.
"$ROOT/scripts/build.sh" production
"$ROOT/scripts/build.sh" vfs
STABLEBENCH_REGENERATE_PER_CALL=1 cargo test --locked --release -p stablebench-runner --test per_call >&2
# Messages of 0 to 1,000 key-value operations (message_shapes_results.yml, docs/message-shapes.md, the
# README's message block); its 2,000,000-key size only with STABLEBENCH_SHAPES_10X=1 (kept otherwise,
# and refused once the production wasm differs from the one it was measured on).
STABLEBENCH_REGENERATE_SHAPES=1 cargo test --locked --release -p stablebench-runner --test message_shapes >&2
# docs/breakdown.md's tables, from the profiles scripts/site-flamegraphs.sh committed in docs/profiles/.
STABLEBENCH_REGENERATE_BREAKDOWN=1 cargo test --locked --release -p stablebench-runner --test breakdown >&2
# Last: the site's index (docs/site/) quotes docs/per-call.md's table just rewritten.
cargo test --locked --release -p stablebench-report --test readme >&2
log "wrote docs/results.{md,svg}, docs/kv.md, docs/kv_{trie,nodestore}.svg, docs/sysrepo.{md,svg}, chia_pages_results.yml, docs/chia.{md,svg}, docs/vfs.md, docs/scaling.{md,svg}, per_call_results.yml, docs/breakdown.md's tables, the generated tables of README.md and docs/ and the results site docs/site/ (results of $STABLEBENCH_RESULTS_DATE)"
