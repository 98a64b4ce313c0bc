//! The toy workload end to end: docs/grid.md's recipe for a new workload, followed to the letter
//! (`stablebench_grid::toy`, one line in `cells()`, `stablebench_host::workload::toy`, this
//! test), behind the cargo feature `toy` so that no committed result and no release wasm has it.
//!
//! The ic-sqlite-vfs benchmark canister built with it (`scripts/build.sh toy`) must export that
//! canister's benchmarks of the grid and the toy's two, named from their declaration; both run through the runner as
//! `stablebench-runner bench` runs them (setups shared, both cost models at once) and as canbench
//! runs them (each in its own query), pass their oracle, and measure the same both ways, to the
//! instruction and page. The runner's own grid has no toy (this crate builds the grid without the
//! feature): the toy's names are the wasm's benchmarks that the grid does not list.

#![cfg(unix)]

use std::collections::BTreeSet;
use std::sync::Arc;

use stablebench_grid::cells::{self, Canister};
use stablebench_runner::canister::Code;
use stablebench_runner::instrument::Metering;
use stablebench_runner::replica::CostModel;
use stablebench_runner::shared;
use stablebench_runner::suite::{self, BenchSetup};

const TOY_WASM: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../target/canister/stablebench_toy.wasm");

#[test]
fn the_toy_workload_runs_end_to_end_through_the_runner() {
    assert!(std::path::Path::new(TOY_WASM).exists(), "{TOY_WASM} is missing: run scripts/build.sh toy");
    let full_code = Code::from_file(TOY_WASM.as_ref(), Metering::On).expect("the toy wasm loads");
    let shared_code = Code::from_file_with_heap_tracking(TOY_WASM.as_ref(), Metering::On, false).expect("it loads");
    let exported = suite::benchmark_names(&full_code);
    let grid: BTreeSet<String> = cells::cells_of(Canister::Vfs).iter().map(|c| c.name()).collect();
    assert!(grid.iter().all(|n| exported.contains(n)), "the toy wasm lacks some of the grid's benchmarks");
    let names: Vec<String> = exported.into_iter().filter(|n| !grid.contains(n)).collect();
    assert_eq!(names, ["sqlite_vfs_counter_increment_100_vfs_default", "sqlite_vfs_counter_read_100_vfs_default"]);

    let setup = BenchSetup::default();
    let full = suite::run_named(Arc::clone(&full_code), &setup, &names, false, 2, None, |_| {}).expect("the full run");
    let full_ic = suite::run_named_in(full_code, &setup, &names, false, 2, None, CostModel::Ic, |_| {})
        .expect("the full run under the ic model");
    let groups = shared::plan(&names);
    assert_eq!(groups.len(), 2, "no stage: each cell runs alone");
    let shared = shared::run_groups(shared_code, &setup, &names, &groups, false, 2, true, |_| {}).expect("shared run");
    for ((f, s), i) in full.iter().zip(&shared).zip(&full_ic) {
        assert_eq!(f.result, s.result, "{}: the shared run measured another result", f.name);
        let ic = s.ic.as_ref().unwrap_or_else(|| panic!("{}: no ic result", s.name));
        assert_eq!(&i.result, ic, "{}: the forked ic measurement differs from an ic run's", s.name);
        assert_eq!(i.pages, s.pages, "{}: the pages differ between the ic run and the shared run", s.name);
        assert!(ic.total.instructions >= f.result.total.instructions, "{}: mainnet charges at least as much", s.name);
        assert_eq!(f.result.total.calls, 1, "{}: one bench_fn", f.name);
    }
    let [increment, read] = [&full[0].result, &full[1].result];
    // An increment is a read and a write of the key; a read only the read.
    assert!(read.total.instructions > 0 && read.total.instructions < increment.total.instructions);
    assert!(increment.scopes.is_empty());
    let first = &read.scopes["first_read"];
    assert_eq!(first.calls, 1);
    assert!(first.instructions > 0 && first.instructions < read.total.instructions);
}
