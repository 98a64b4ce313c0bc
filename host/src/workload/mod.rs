//! The grid's workloads, each a module with the same parts, measured against an [`Env`]:
//! - `bench`: a canbench query's whole run of a cell on a freshly installed canister (its setup
//!   in one go, reporting each [`setup_stage`](crate::setup_stage) it passes, then the measure);
//! - `measure`: the measured step alone, on the state a setup built (the live API's
//!   `bench_run`, after `bench_setup` built it call by call with [`live_setup`]'s steps).
//!
//! [`bench`], [`measure`], [`live_setup`] and the live refusals pick the workload by the cell
//! ([`Cell::workload`]) for the canisters and the live API; what stays in the canister is its own
//! bookkeeping (`live.rs`: the Chia block-by-block replay, the users/orders job count).

pub mod chia;
pub mod nodestore;
pub mod sysrepo;
#[cfg(feature = "toy")]
pub mod toy;
pub mod trie;
pub mod users_orders;

use stablebench::bench::SetupStep;
use stablebench_grid::cells::{Cell, Workload};

use crate::env::Env;
use crate::Measured;

/// Runs cell `first` (at `index` in `grid`) as a canbench query does: its setup on a fresh
/// canister, then its measured step; returns the cell it went on as (see
/// [`setup_stage`](crate::setup_stage)) with what it measured.
pub fn bench<E: Env>(env: &E, grid: &[Cell], index: usize, first: Cell) -> (Cell, Measured) {
    match first.workload() {
        Workload::UsersOrders => users_orders::bench(env, grid, index, first),
        Workload::Trie => trie::bench(env, grid, index, first),
        Workload::NodeStore => nodestore::bench(env, first),
        Workload::Sysrepo => sysrepo::bench(env, grid, index, first),
        Workload::Chia => (first, chia::measure(env, &first)),
        Workload::Declared(_) => (first, declared(env, &first)),
    }
}

/// Runs `cell`'s measured step on the state its setup built, with the code [`bench`] measures.
pub fn measure<E: Env>(env: &E, cell: &Cell) -> Measured {
    match cell.workload() {
        Workload::UsersOrders => users_orders::measure(env, cell),
        Workload::Trie => trie::measure(env, cell),
        Workload::NodeStore => nodestore::measure(env, cell),
        Workload::Sysrepo => sysrepo::measure(env, cell, &mut || *cell),
        Workload::Chia => chia::measure(env, cell),
        Workload::Declared(_) => declared(env, cell),
    }
}

/// The workloads declared in modules of their own (`Op::Declared`, no stage, no live setup step,
/// no live refusal), one line each: the name their declaration gives, and the module that
/// measures their cells with [`measure`]'s contract.
#[cfg_attr(not(feature = "toy"), allow(unused_variables))]
fn declared<E: Env>(env: &E, cell: &Cell) -> Measured {
    match cell.workload() {
        #[cfg(feature = "toy")]
        Workload::Declared(stablebench_grid::toy::WORKLOAD) => toy::measure(env, cell),
        w => Err(format!("{}: no module of the bench host measures workload {}", cell.name(), w.name())),
    }
}

/// A step of a live setup after its reset (the canister's stores emptied, the database opened
/// with the cell's profile).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LiveStep {
    /// A step of the users/orders setup.
    UsersOrders(SetupStep),
    /// The trie data set, `SETUP_BATCH` keys per transaction.
    KvLoad,
}

/// The steps a live canister's `bench_setup` runs after its reset, in order: the ones the cell's
/// benchmark runs in one go before its measured step. NodeStore, sysrepo and Chia build their
/// state in the measured call, from the empty stores the reset leaves.
pub fn live_setup(cell: &Cell) -> Vec<LiveStep> {
    match cell.workload() {
        Workload::UsersOrders => users_orders::live_setup(cell),
        Workload::Trie => trie::live_setup(),
        Workload::NodeStore | Workload::Sysrepo | Workload::Chia | Workload::Declared(_) => Vec::new(),
    }
}

/// Why a live canister's `bench_setup` refuses `cell` (checked before its reset deletes anything);
/// canbench runs every cell.
pub fn live_setup_refusal(cell: &Cell) -> Option<String> {
    match cell.workload() {
        Workload::UsersOrders => users_orders::live_refusal(cell),
        Workload::Trie | Workload::NodeStore | Workload::Sysrepo | Workload::Chia | Workload::Declared(_) => None,
    }
}

/// Why a live canister's `bench_run` refuses `cell` (its measured call could exceed one message's
/// instruction limit); canbench runs every cell.
pub fn live_run_refusal(cell: &Cell) -> Option<String> {
    match cell.workload() {
        Workload::Sysrepo => sysrepo::live_refusal(cell),
        Workload::Chia => chia::live_refusal(cell),
        Workload::UsersOrders | Workload::Trie | Workload::NodeStore | Workload::Declared(_) => None,
    }
}
