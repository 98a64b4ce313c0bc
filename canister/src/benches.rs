//! The grid's cells as canbench queries (`--features canbench`).
//!
//! `build.rs` generates one `#[bench(raw)]` function per cell of `stablebench_grid::cells::cells()`,
//! named as the cell, each calling [`run`] with its position in the grid. canbench runs each `__canbench__<name>`
//! as a query on a freshly installed canister, so every benchmark builds its own starting state
//! before it measures, and checks its result afterwards (a wrong result traps the benchmark
//! instead of reporting a number);
//! what each workload builds, measures and checks is documented in its module of
//! [`stablebench_host::workload`].
//!
//! The setups report the stages they pass ([`stablebench_host::setup_stage`]: users/orders after each setup step,
//! the trie cells after the load, sysrepo after the items its tests start from): under canbench
//! this only prints a line; `stablebench-runner bench` builds each stage once and goes on from it
//! as every cell that shares it, with the same results (docs/runner.md, "Shared setups").
//!
//! The measured steps are the bench host's workloads ([`stablebench_host::workload`]), run against
//! this canister's [`Env`] ([`CanisterEnv`]). The live API (`live.rs`) runs the same code against
//! the state its setup built call by call, so that canbench and a dfx user measure the same thing.

use std::cell::RefCell;

use canbench_rs::{bench, bench_fn, BenchResult};
use stablebench::bench::Output;
use stablebench::kv::heap::HeapKv;
use stablebench::kv::sqlite::{self, Layout, SqliteKv};
use stablebench::kv::stable::StableKv;
use stablebench::kv::KvStore;
use stablebench::query::Rows;
use stablebench_grid::cells::{self, Backend, Cell};
use stablebench_grid::ic::memory_ids;
use stablebench_grid::profiles::Profile;
use stablebench_host::{message_starts, Env};

use crate::db::{self, Connection};
use crate::kv;

include!(concat!(env!("OUT_DIR"), "/cells.rs"));

/// Runs cell `index` of this canister's grid (`cells_of(Canister::Main)`) through the bench host
/// ([`stablebench_host::run`]) on this freshly installed canister: a fresh store, the setup in
/// one go, then the measured step. The setup reports each stage it passes, where
/// `stablebench-runner bench` may go on as another cell with the same setup so far.
pub fn run(index: usize) -> BenchResult {
    stablebench_host::run(cells::Canister::Main, index, &CanisterEnv::Fresh)
}

/// This canister as the workloads' [`Env`]: ic-rusqlite's connection (a write is statements on
/// it, each its own transaction unless the workload opens one), the memories of ic-rusqlite's
/// `MemoryManager`, and the key-value stores.
pub enum CanisterEnv {
    /// A freshly installed canister (canbench's): each cell gets its backend new and empty.
    Fresh,
    /// The live API's canister: a cell gets the stores `bench_setup` loaded (`kv.rs`). It keeps
    /// the typed error a store refused with ([`CanisterEnv::live_failure`]), so that `bench_run`
    /// answers with its kind (`InvalidArgument`, `Sqlite`) and not as an internal failure.
    Live(RefCell<Option<crate::Error>>),
}

impl CanisterEnv {
    /// The live API's canister, no store refused yet.
    pub fn live() -> CanisterEnv {
        CanisterEnv::Live(RefCell::new(None))
    }

    /// The error a store of the live canister refused with, if one did.
    pub fn live_failure(&self) -> Option<crate::Error> {
        match self {
            CanisterEnv::Fresh => None,
            CanisterEnv::Live(failure) => failure.take(),
        }
    }
}

impl Env for CanisterEnv {
    type Memory = ic_stable_structures::memory_manager::VirtualMemory<ic_stable_structures::DefaultMemoryImpl>;

    fn open_sqlite(&self, profile: &Profile) -> Result<(), String> {
        db::reopen(profile).map_err(|e| e.to_string())
    }

    fn write<R>(&self, f: impl FnOnce(&mut Connection) -> stablebench::Result<R>) -> stablebench::Result<R> {
        db::with_conn(f)
    }

    fn measured_write<R>(
        &self,
        f: impl FnOnce(&mut Connection) -> stablebench::Result<R>,
    ) -> (BenchResult, stablebench::Result<R>) {
        db::with_conn(|conn| {
            let mut output = None;
            message_starts();
            let result = bench_fn(|| output = Some(f(conn)));
            (result, output.expect("bench_fn ran the step"))
        })
    }

    fn read<R>(&self, f: impl FnOnce(&Connection) -> stablebench::Result<R>) -> stablebench::Result<R> {
        db::with_conn(|conn| f(conn))
    }

    fn memory(&self, id: u8) -> Result<Self::Memory, String> {
        Ok(db::memory(id))
    }

    fn with_kv_store<R>(&self, cell: &Cell, f: impl FnOnce(&mut dyn KvStore) -> R) -> Result<R, String> {
        match self {
            CanisterEnv::Fresh => with_fresh_store(cell, f),
            CanisterEnv::Live(failure) => {
                let opened = kv::KvBackend::try_from(cell.backend).and_then(|backend| {
                    kv::with_store(backend, true, |store| Ok(f(store.expect("with_store creates the store"))))
                });
                opened.map_err(|e| {
                    let message = format!("{e:?}");
                    failure.replace(Some(e));
                    message
                })
            }
        }
    }

    fn with_heap_map<R>(&self, f: impl FnOnce(&HeapKv) -> R) -> Result<R, String> {
        match self {
            CanisterEnv::Fresh => Err("a fresh canister's heap map is empty: its benchmark loads its own".into()),
            CanisterEnv::Live(_) => Ok(kv::with_heap(f)),
        }
    }

    /// For SELECTs, tells the runner (through the canister log) how many bytes `query_sql` would
    /// reply with these rows, so it can say whether the result fits one reply. Outside `bench_fn`.
    fn replied(&self, output: Output) {
        if let Output::Rows(rows) = output {
            let reply: Result<Rows, crate::Error> = Ok(rows);
            let bytes = candid::encode_one(reply).map(|b| b.len()).unwrap_or(0);
            ic_cdk::api::debug_print(format!("stablebench: reply_bytes={bytes}"));
        }
    }
}

/// Opens the cell's backend, new and empty, and runs `f` on it; an error names its step (`open`,
/// `create`).
fn with_fresh_store<R>(cell: &Cell, f: impl FnOnce(&mut dyn KvStore) -> R) -> Result<R, String> {
    match cell.backend {
        Backend::Sqlite | Backend::SqliteRowid => {
            let layout = Layout::of(cell.backend).ok_or("open: a SQLite backend")?;
            let profile = cell.profile.ok_or("open: SQLite cells have a profile")?;
            db::reopen(&profile).map_err(|e| format!("open: {e}"))?;
            db::with_conn(|conn| {
                sqlite::create(conn, layout).map_err(|e| format!("create: {e}"))?;
                Ok(f(&mut SqliteKv::new(conn, layout)))
            })
        }
        Backend::StableBTreeMap => Ok(f(&mut StableKv::init(db::memory(memory_ids::STABLE_BTREEMAP)))),
        Backend::HeapBTreeMap => Ok(f(&mut HeapKv::default())),
        Backend::Blob => Err("open: blob is a sysrepo store, not a key-value backend".into()),
        Backend::SqliteVfs | Backend::SqliteVfsRowid => Err("open: an ic-sqlite-vfs cell (stablebench_vfs)".into()),
    }
}
