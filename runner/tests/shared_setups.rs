//! Shared setups change nothing canbench reports: a sample of the grid that covers every workload
//! of both canisters runs both ways, each benchmark with its own setup in its own query (as
//! canbench runs it on PocketIC: `bench --full-setups`, on threads, with heap tracking) and with
//! the setups shared (`bench`'s default: one process per group, forked at each setup stage,
//! without heap tracking), and every result must be the same to the instruction, page and byte:
//! total, every scope, heap and stable growth, and the reply size the canister reports. The
//! shared run measures both cost models at once (each benchmark's measured part forked under the
//! ic model, or its ic figure derived from its timed parts where the grid says so:
//! `Cell::ic_pricing`, the users/orders steps, the sysrepo tests and NodeStore's phases); its ic
//! results and page counts, per benchmark and per scope, must equal a full run's under the ic
//! model alone.
//!
//! The sample: the nine users/orders steps at 10,000 orders (one group forked at all five setup
//! stages), the trie cells at their smallest size on every backend of both canisters (four cells
//! per load), every sysrepo test at 1,000 items on its three backends (the tests that write the
//! same items share them), the heap map's upgrade, and one NodeStore and Chia cell (no stages:
//! each runs alone). The ic-sqlite-vfs canister's users/orders cells run only at the reference size,
//! too slow for a test; `scripts/test.sh` runs the whole grid shared and checks it exactly against
//! the committed results, which `--full-setups` reproduces.

#![cfg(unix)]

use std::sync::Arc;

use stablebench_grid::cells::{self, Canister, Cell, Op};
use stablebench_runner::canister::Code;
use stablebench_runner::instrument::Metering;
use stablebench_runner::replica::CostModel;
use stablebench_runner::shared;
use stablebench_runner::suite::{self, BenchSetup, Run};

mod common;

/// The tests fork: one at a time, so that no other thread of the test process runs meanwhile
/// (and two cores run two executions, not four), under `cargo test`. Under cargo-nextest
/// (`scripts/test.sh`) each test is a process of its own, so nothing else runs in it anyway.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

const VFS_BENCH_WASM: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../target/canister/stablebench_vfs_bench.wasm");

/// The sample of `canister`'s grid (see the module docs), in grid order.
fn sample(canister: Canister) -> Vec<String> {
    let grid = cells::cells_of(canister);
    let smallest = |pick: &dyn Fn(&Cell) -> bool| grid.iter().filter(|c| pick(c)).map(|c| c.size).min();
    let trie = smallest(&|c| matches!(c.op, Op::TrieRead(_)));
    let mut picked: Vec<String> = Vec::new();
    let mut once = std::collections::BTreeSet::new();
    for c in &grid {
        let take = match c.op {
            Op::UsersOrders(_) => c.size == 10_000,
            Op::TrieRead(_) | Op::TrieWrite(_) | Op::TrieUpgrade => Some(c.size) == trie,
            // Every sysrepo test at the smallest size, on every backend (the tests with the same
            // setup share it).
            Op::Sysrepo { .. } => Some(c.size) == smallest(&|x| x.workload() == c.workload()),
            // One cell of each workload without stages, its smallest size.
            Op::NodeStore | Op::Chia(_) => {
                Some(c.size) == smallest(&|x| x.workload() == c.workload()) && once.insert(c.workload().name())
            }
            // No setup stage to share (the toy's, in no committed result, runs in runner/tests/toy.rs).
            Op::Declared(_) => false,
        };
        if take {
            picked.push(c.name());
        }
    }
    picked
}

/// Runs `names` of `wasm` both ways and requires the same results; returns how many groups
/// shared a setup.
fn both_ways(wasm: &str, names: &[String]) -> usize {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    assert!(std::path::Path::new(wasm).exists(), "{wasm} is missing: run scripts/build.sh bench vfs_bench first");
    let full_code = Code::from_file(wasm.as_ref(), Metering::On).expect("the wasm loads");
    let shared_code = Code::from_file_with_heap_tracking(wasm.as_ref(), Metering::On, false).expect("the wasm loads");
    assert!(full_code.info.tracks_heap && !shared_code.info.tracks_heap);
    let setup = BenchSetup::default();
    let full = suite::run_named(Arc::clone(&full_code), &setup, names, false, 2, None, |_| {}).expect("the full run");
    let full_ic = suite::run_named_in(full_code, &setup, names, false, 2, None, CostModel::Ic, |_| {})
        .expect("the full run under the ic model");
    let groups = shared::plan(names);
    let sharing = groups.iter().filter(|g| g.benches().count() > 1).count();
    let shared = shared::run_groups(Arc::clone(&shared_code), &setup, names, &groups, false, 2, true, |_| {})
        .expect("the shared run");
    assert_eq!(full.len(), names.len());
    assert_eq!(shared.len(), names.len());
    for ((f, s), i) in full.iter().zip(&shared).zip(&full_ic) {
        assert_eq!(f.name, s.name);
        same(f, s);
        let ic = s.ic.as_ref().unwrap_or_else(|| panic!("{}: no ic result from the shared run", s.name));
        assert_eq!(&i.result, ic, "{}: the forked ic measurement differs from an ic run's", s.name);
        assert!(s.pages.is_some(), "{}: no page counts", s.name);
        assert_eq!(i.pages, s.pages, "{}: the pages differ between the ic run and the shared run", s.name);
        assert_eq!(f.pages, s.pages, "{}: the pages differ between the canbench runs", s.name);
        // Each scope's pages, placed by the counter reads that time it: in a run under the ic
        // model from its ic figure, in the shared run from the ic figure it derived or forked.
        assert_eq!(i.scope_pages, s.scope_pages, "{}: the scope pages differ between the ic and shared runs", s.name);
        if s.name.contains("_nodestore_") {
            // Every phase is placed (its mainnet figure is derived from them).
            assert_eq!(
                s.scope_pages.keys().collect::<Vec<_>>(),
                s.result.scopes.keys().collect::<Vec<_>>(),
                "{}: not every phase has its pages",
                s.name
            );
        }
        assert!(ic.total.instructions > f.result.total.instructions, "{}: mainnet charges more", s.name);
    }
    sharing
}

fn same(full: &Run, shared: &Run) {
    assert_eq!(full.result, shared.result, "{}: shared setup changed the result", full.name);
    assert_eq!(full.reply_bytes, shared.reply_bytes, "{}: shared setup changed the reply size", full.name);
}

#[test]
fn the_ic_rusqlite_canisters_sample_measures_the_same_shared_and_full() {
    let names = sample(Canister::Main);
    for workload in
        ["users_orders_10k", "_trie_read_", "_trie_write_", "_trie_upgrade_", "_nodestore_", "_sysrepo_", "_chia_"]
    {
        assert!(names.iter().any(|n| n.contains(workload)), "the sample lacks {workload}: {names:?}");
    }
    let sharing = both_ways(common::BENCH_WASM, &names);
    // The nine users/orders steps, the four trie cells of each of the four backends, and the
    // sysrepo tests that write the N items first, on each of the three backends.
    assert_eq!(sharing, 1 + 4 + 3, "{names:?}");
}

#[test]
fn the_ic_sqlite_vfs_canisters_sample_measures_the_same_shared_and_full() {
    let names: Vec<String> = sample(Canister::Vfs).into_iter().filter(|n| !n.contains("users_orders")).collect();
    for workload in ["_trie_read_", "_trie_write_", "_nodestore_"] {
        assert!(names.iter().any(|n| n.contains(workload)), "the sample lacks {workload}: {names:?}");
    }
    let sharing = both_ways(VFS_BENCH_WASM, &names);
    assert_eq!(sharing, 2, "{names:?}");
}

#[test]
fn a_benchmark_that_fails_is_reported_as_canbench_reports_it() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // A benchmark the canister does not have: its process reports the failure, nothing hangs.
    let names: Vec<String> = vec!["no_such_benchmark".into()];
    let groups = shared::plan(&names);
    let code = Code::new(&wat::parse_str(r#"(module (memory 1) (func (export "f")))"#).unwrap(), Metering::On).unwrap();
    let err = shared::run_groups(code, &BenchSetup::default(), &names, &groups, false, 2, true, |_| {})
        .expect_err("a benchmark the canister does not export fails");
    let text = err.to_string();
    assert!(text.contains("Error executing benchmark no_such_benchmark"), "{text}");
}
