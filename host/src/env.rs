//! What a workload needs from the canister it runs in: the [`Env`] each canister implements.
//!
//! A workload (`crate::workload`) measures a cell against this trait only, so the same code runs
//! in the ic-rusqlite canister's benchmarks (a fresh canister per query), in its live API (the
//! state `bench_setup` built) and in the ic-sqlite-vfs canister. What differs between them in a
//! measurement is here (the live API's own bookkeeping stays in `canister/src/live.rs`):
//! - how SQLite is opened with a profile, and what one write is (ic-rusqlite: statements on the
//!   open connection; ic-sqlite-vfs: one `Db::update`, the library's transaction and the
//!   publication of its pages);
//! - which stable memories it hands out by id (`stablebench_grid::ic::memory_ids`);
//! - which key-value store a cell's backend is (a new one, or the one a live setup loaded).

use canbench_rs::BenchResult;
use rusqlite::Connection;
use stablebench::bench::Output;
use stablebench::kv::heap::HeapKv;
use stablebench::kv::KvStore;
use stablebench_grid::cells::Cell;
use stablebench_grid::profiles::Profile;

/// The canister a workload runs in (see the module documentation).
pub trait Env {
    /// The stable memories [`Env::memory`] hands out.
    type Memory: ic_stable_structures::Memory;

    /// Opens SQLite with `profile` and no table: what a freshly installed canister has.
    fn open_sqlite(&self, profile: &Profile) -> Result<(), String>;

    /// Runs `f` as one write on the open database (a setup step).
    fn write<R>(&self, f: impl FnOnce(&mut Connection) -> stablebench::Result<R>) -> stablebench::Result<R>;

    /// Runs `f` as one write on the open database, measured (`bench_fn`, after
    /// [`message_starts`](crate::message_starts)): the measured step of a SQL workload.
    fn measured_write<R>(
        &self,
        f: impl FnOnce(&mut Connection) -> stablebench::Result<R>,
    ) -> (BenchResult, stablebench::Result<R>);

    /// Runs `f` as a read of the open database (the oracle's checks, outside the measure).
    fn read<R>(&self, f: impl FnOnce(&Connection) -> stablebench::Result<R>) -> stablebench::Result<R>;

    /// Stable memory `id` (`stablebench_grid::ic::memory_ids`), or why this canister has none.
    fn memory(&self, id: u8) -> Result<Self::Memory, String>;

    /// Runs `f` on the key-value store of `cell`'s backend: a new, empty one in a benchmark, the
    /// one the setup loaded in a live canister.
    fn with_kv_store<R>(&self, cell: &Cell, f: impl FnOnce(&mut dyn KvStore) -> R) -> Result<R, String>;

    /// Runs `f` on the heap map as this canister holds it (a live setup's load), or says why it
    /// has none to hand out.
    fn with_heap_map<R>(&self, f: impl FnOnce(&HeapKv) -> R) -> Result<R, String>;

    /// Told what a users/orders step returned, after the measure (the ic-rusqlite canister
    /// reports the bytes its SQL endpoint would reply with).
    fn replied(&self, _output: Output) {}
}
