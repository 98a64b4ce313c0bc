//! The grid's cells as canbench queries (`--features canbench`).
//!
//! `build.rs` generates one `#[bench(raw)]` function per cell of `stablebench_grid::cells::cells()`,
//! named as the cell, each calling [`run`] with its name. canbench runs each `__canbench__<name>`
//! as a query on a freshly installed canister, so every benchmark builds its own starting state
//! before it measures, and checks its result afterwards (a wrong result traps the benchmark
//! instead of reporting a number):
//! - users/orders: an empty database with the cell's profile, the step's setup, the step in
//!   `bench_fn`, then the oracle;
//! - trie read/write: the data set loaded (setup), then 50 iterations of which only the timed part
//!   is counted (Substrate's method); `total` is the sum of the 50 timed parts (`calls` = 50) and
//!   the scope `w_avg` the sum of the middle 30 after sorting (Substrate's trimmed mean), and the
//!   scope `setup` the data-set load (not part of `total`);
//! - trie upgrade (heap map): the map written whole to stable memory and read back, as scopes
//!   `save` and `load`;
//! - NodeStore: the six phases (plus the intended 50/50) as scopes in `bench_fn`, `total` their
//!   sum (each phase's objects are made before it and its fetches checked after it, outside the
//!   scopes), then the hit counts against the model.

use std::collections::BTreeMap;

use canbench_rs::{bench, bench_fn, bench_scope, BenchResult, Measurement};
use stablebench::bench::{Bench, BenchRun, Output, Sizes};
use stablebench::kv::gen::TrieDataset;
use stablebench::kv::heap::HeapKv;
use stablebench::kv::sqlite::{self, Layout, SqliteKv};
use stablebench::kv::stable::StableKv;
use stablebench::kv::{nodestore, trie, KvStore, Probe};
use stablebench::pragma::Profile;
use stablebench::query::Rows;
use stablebench_grid::cells::{self, Backend, Cache, Cell, Op};
use stablebench_grid::ic::memory_ids;
use stablebench_grid::{scopes, KV_SEED};

use crate::db;

include!(concat!(env!("OUT_DIR"), "/cells.rs"));

/// Rows per transaction when a benchmark's setup loads a key-value data set (never measured).
const SETUP_BATCH: usize = 10_000;

fn fail(name: &str, step: &str, e: impl std::fmt::Display) -> ! {
    ic_cdk::trap(format!("{name}: {step}: {e}"))
}

/// Runs the cell named `name` (the generated functions call this with their own name).
pub fn run(name: &str) -> BenchResult {
    let cell = cells::by_name(name).unwrap_or_else(|| fail(name, "lookup", "no such cell in the grid"));
    match cell.op {
        Op::UsersOrders(b) => users_orders(name, b, cell.profile.expect("users/orders cells have a profile")),
        Op::TrieRead(_) | Op::TrieWrite(_) => with_store(name, &cell, |store| trie_cell(name, &cell, store)),
        Op::TrieUpgrade => trie_upgrade(name, &cell),
        Op::NodeStore => with_store(name, &cell, |store| nodestore_cell(name, &cell, store)),
    }
}

fn users_orders(name: &str, bench: Bench, profile: Profile) -> BenchResult {
    let sizes = Sizes::REFERENCE;
    // A fresh, empty database with this profile (the query's changes are discarded afterwards).
    db::reopen(&profile).unwrap_or_else(|e| fail(name, "open", e));
    db::with_conn(|conn| {
        bench.setup(conn, sizes).unwrap_or_else(|e| fail(name, "setup", e));
        let mut output = None;
        let result = bench_fn(|| output = Some(bench.run(conn, sizes)));
        let output = output.expect("bench_fn ran the step").unwrap_or_else(|e| fail(name, "run", e));
        bench.verify(conn, sizes, &output).unwrap_or_else(|e| fail(name, "verify", e));
        report_reply_bytes(output);
        result
    })
}

/// For SELECTs, tells the runner (through the canister log) how many bytes `query_sql` would
/// reply with these rows, so it can say whether the result fits one reply. Outside `bench_fn`.
fn report_reply_bytes(output: Output) {
    if let Output::Rows(rows) = output {
        let reply: Result<Rows, crate::Error> = Ok(rows);
        let bytes = candid::encode_one(reply).map(|b| b.len()).unwrap_or(0);
        ic_cdk::api::debug_print(format!("stablebench: reply_bytes={bytes}"));
    }
}

/// The canister's [`Probe`]: the instruction counter canbench reads, and `bench_scope`.
struct Counter;

impl Probe for Counter {
    fn instructions(&self) -> u64 {
        crate::limits::instructions()
    }
    fn phase<R>(&self, name: &'static str, f: impl FnOnce() -> R) -> R {
        let _scope = bench_scope(name);
        f()
    }
}

/// Heap and stable memory sizes in wasm pages, as canbench measures them.
fn pages() -> (u64, u64) {
    (core::arch::wasm32::memory_size(0) as u64, ic_cdk::stable::stable_size())
}

/// Opens the cell's backend, empty, and runs `f` on it.
fn with_store(name: &str, cell: &Cell, f: impl FnOnce(&mut dyn KvStore) -> BenchResult) -> BenchResult {
    match cell.backend {
        Backend::Sqlite | Backend::SqliteRowid => {
            let layout = Layout::of(cell.backend).expect("a SQLite backend");
            let profile = cell.profile.expect("SQLite cells have a profile");
            db::reopen(&profile).unwrap_or_else(|e| fail(name, "open", e));
            db::with_conn(|conn| {
                sqlite::create(conn, layout).unwrap_or_else(|e| fail(name, "create", e));
                f(&mut SqliteKv::new(conn, layout))
            })
        }
        Backend::StableBTreeMap => f(&mut StableKv::init(db::memory(memory_ids::STABLE_BTREEMAP))),
        Backend::HeapBTreeMap => f(&mut HeapKv::default()),
    }
}

fn trie_cell(name: &str, cell: &Cell, store: &mut dyn KvStore) -> BenchResult {
    let data = TrieDataset { size: cell.size, seed: KV_SEED };
    // The setup is recorded as scope `setup` (outside `total`): what loading the data set costs in
    // one go, and how much heap and stable memory it takes, so the report can say which setups
    // only canbench can run in one message and where the heap would run out.
    let ((heap_s, stable_s), start) = (pages(), Counter.instructions());
    trie::load(store, &data, 0..cell.size, SETUP_BATCH).unwrap_or_else(|e| fail(name, "setup", e));
    let (heap0, stable0) = pages();
    let setup = Measurement {
        calls: 1,
        instructions: Counter.instructions() - start,
        heap_increase: heap0 - heap_s,
        stable_memory_increase: stable0 - stable_s,
    };
    let samples = match cell.op {
        Op::TrieRead(cache) => trie::read(store, &data, cache == Cache::Cold, &Counter),
        Op::TrieWrite(cache) => trie::write(store, &data, cache == Cache::Cold, &Counter),
        _ => unreachable!("trie_cell runs trie reads and writes"),
    }
    .unwrap_or_else(|e| fail(name, "run", e));
    let (heap1, stable1) = pages();
    let total = Measurement {
        calls: samples.0.len() as u64,
        instructions: samples.total(),
        heap_increase: heap1 - heap0,
        stable_memory_increase: stable1 - stable0,
    };
    let trimmed = samples.trimmed();
    let w_avg =
        Measurement { calls: trimmed.len() as u64, instructions: trimmed.iter().sum(), ..Measurement::default() };
    BenchResult {
        total,
        scopes: BTreeMap::from([(scopes::SETUP.to_string(), setup), (scopes::W_AVG.to_string(), w_avg)]),
    }
}

fn trie_upgrade(name: &str, cell: &Cell) -> BenchResult {
    let data = TrieDataset { size: cell.size, seed: KV_SEED };
    let mut heap = HeapKv::default();
    trie::load(&mut heap, &data, 0..cell.size, SETUP_BATCH).unwrap_or_else(|e| fail(name, "setup", e));
    let memory = db::memory(memory_ids::HEAP_BTREEMAP_SNAPSHOT);
    let mut loaded = None;
    let result = bench_fn(|| {
        {
            let _save = bench_scope(scopes::SAVE);
            heap.save(&memory).unwrap_or_else(|e| fail(name, "save", e));
        }
        let _load = bench_scope(scopes::LOAD);
        loaded = Some(HeapKv::load(&memory));
    });
    let loaded = loaded.expect("bench_fn ran").unwrap_or_else(|e| fail(name, "load", e));
    // Every key and value read back, and the data set all there.
    if loaded != heap || heap.map().len() as u64 != data.len() {
        fail(
            name,
            "verify",
            format!("{} keys read back, {} saved, {} expected", loaded.map().len(), heap.map().len(), data.len()),
        );
    }
    result
}

fn nodestore_cell(name: &str, cell: &Cell, store: &mut dyn KvStore) -> BenchResult {
    let mut run = None;
    let mut result = bench_fn(|| run = Some(nodestore::run(store, cell.size, nodestore::SEED, &Counter)));
    // `total` is the phases themselves: generating each phase's objects and checking what it
    // fetched happen between the scopes (see `stablebench::kv::nodestore`), not in the measure.
    // `calls` stays bench_fn's 1: the phases are one benchmark, not seven messages, so the runner's
    // per-call limits check sees the whole run.
    result.total.instructions = result.scopes.values().map(|m| m.instructions).sum();
    let run = run.expect("bench_fn ran").unwrap_or_else(|e| fail(name, "run", e));
    let expected = nodestore::expected(cell.size, nodestore::SEED);
    if run != expected {
        fail(name, "verify", format!("got {run:?}, expected {expected:?}"));
    }
    ic_cdk::api::debug_print(format!("stablebench: nodestore_hits={:?}", run.hits));
    result
}
