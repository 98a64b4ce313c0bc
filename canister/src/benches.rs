//! The grid's cells as canbench queries (`--features canbench`).
//!
//! `build.rs` generates one `#[bench(raw)]` function per cell of `stablebench_grid::cells::cells()`,
//! named as the cell, each calling [`run`] with its position in the grid. canbench runs each `__canbench__<name>`
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
//! - sysrepo: the test's setup on empty stores, then its tries, of which only the timed parts are
//!   counted (`total` is their sum, `calls` the number of tries, so instructions per call is
//!   sysrepo's mean per try; heap and stable growth cover the setup too; scope `max_try` the most
//!   expensive try), then the check of every
//!   read and of the final datastore against the model;
//! - Chia: a synthetic chain replayed into the schema, new and empty (`total`; a scope per 10,000
//!   created coins, `chunk_01`, ...), then the reads and a rewind as scopes (`lookup_existing`,
//!   `lookup_missing`, `block_reads`, `rewind`, not part of `total`), every answer checked against
//!   the model fed the same blocks;
//! - NodeStore: the six phases (plus the intended 50/50) as scopes in `bench_fn`, `total` their
//!   sum (each phase's objects are made before it and its fetches checked after it, outside the
//!   scopes), then the hit counts against the model.
//!
//! The setups report the stages they pass ([`setup_stage`]: users/orders after each setup step,
//! the trie cells after the load, sysrepo after the items its tests start from): under canbench
//! this only prints a line; `stablebench-runner bench` builds each stage once and goes on from it
//! as every cell that shares it, with the same results (docs/runner.md, "Shared setups").
//!
//! The measured steps (here and in the bench host, [`stablebench_host`]) are shared with the live API
//! (`live.rs`), which builds the same setup call by call on a live canister and then runs exactly
//! this code, so that canbench and a dfx user measure the same thing.

use std::collections::BTreeMap;

use canbench_rs::{bench, bench_fn, bench_scope, BenchResult, Measurement};
use stablebench::bench::{Bench, BenchRun, Output, SetupStepRun, Sizes};
use stablebench::chia::{self, ChainSpec};
use stablebench::kv::gen::TrieDataset;
use stablebench::kv::heap::HeapKv;
use stablebench::kv::sqlite::{self, Layout, SqliteKv};
use stablebench::kv::stable::StableKv;
use stablebench::kv::{trie, KvStore};
use stablebench::query::Rows;
use stablebench::sysrepo::blob::BlobStore;
use stablebench::sysrepo::sqlite::SqliteStore;
use stablebench::sysrepo::stable::StableStore;
use stablebench::sysrepo::{self, TRIES};
use stablebench_grid::cells::{self, Backend, Cell, Op};
use stablebench_grid::chia as chia_grid;
use stablebench_grid::ic::memory_ids;
use stablebench_grid::live::Oracle;
use stablebench_grid::{scopes, KV_SEED};

use crate::db;
use stablebench::NoLimit;
pub use stablebench_host::{checked_run, measure_kv, pages, verdict, Counter, Measured, SETUP_BATCH};
use stablebench_host::{fail, measure_nodestore, message_starts, run_trie, setup_stage};

include!(concat!(env!("OUT_DIR"), "/cells.rs"));

/// Runs cell `index` of this canister's grid (`cells_of(Canister::Main)`) through the bench host
/// ([`stablebench_host::run`]): a fresh store, the setup in one go, then the measured step. The
/// setup reports each stage it passes ([`setup_stage`]), where `stablebench-runner bench` may go
/// on as another cell with the same setup so far.
pub fn run(index: usize) -> BenchResult {
    stablebench_host::run(cells::Canister::Main, index, |grid, index, first| match first.op {
        Op::UsersOrders(_) => {
            let profile = first.profile.expect("users/orders cells have a profile");
            // A fresh, empty database with this profile (the query's changes are discarded afterwards).
            db::reopen(&profile).unwrap_or_else(|e| fail(&first.name(), "open", e));
            // The cell this query measures, and its position: `first` until a setup stage says otherwise.
            let mut now = (index, first);
            let mut stage = 0;
            while stage < now.1.setup_stage_count() {
                let (cell, step) = (now.1, users_orders_bench(&now.1).setup_steps()[stage]);
                db::with_conn(|conn| step.run(conn, cell.sizes(), 0, &NoLimit))
                    .unwrap_or_else(|e| fail(&cell.name(), "setup", e));
                now = setup_stage(grid, now.0, cell.setup_stage(stage));
                stage += 1;
            }
            (now.1, measure_users_orders(users_orders_bench(&now.1), now.1.sizes()))
        }
        Op::TrieRead(_) | Op::TrieWrite(_) => with_fresh_store(&first, |store| run_trie(grid, index, first, store)),
        Op::TrieUpgrade => {
            let mut heap = HeapKv::default();
            let data = TrieDataset { size: first.size, seed: KV_SEED };
            trie::load(&mut heap, &data, 0..first.size, SETUP_BATCH)
                .unwrap_or_else(|e| fail(&first.name(), "setup", e));
            (first, measure_trie_upgrade(&first, &heap))
        }
        Op::NodeStore => (first, with_fresh_store(&first, |store| measure_nodestore(&first, store))),
        Op::Sysrepo { .. } => {
            let mut now = first;
            let measured = measure_sysrepo(&first, &mut || {
                now = setup_stage(grid, index, first.setup_stage(0)).1;
                now
            });
            (now, measured)
        }
        Op::Chia(_) => (first, measure_chia(&first)),
    })
}

fn users_orders_bench(cell: &Cell) -> Bench {
    match cell.op {
        Op::UsersOrders(b) => b,
        _ => fail(&cell.name(), "setup", "a users/orders stage of another workload's cell"),
    }
}

/// The users/orders step `bench` on the open database, which its setup built at `sizes`.
pub fn measure_users_orders(bench: Bench, sizes: Sizes) -> Measured {
    db::with_conn(|conn| {
        let mut output = None;
        message_starts();
        let result = bench_fn(|| output = Some(bench.run(conn, sizes)));
        let output = output.expect("bench_fn ran the step").map_err(|e| e.to_string())?;
        let checked = bench.verify(conn, sizes, &output).map(|o| format!("{o:?}")).map_err(|e| e.to_string());
        report_reply_bytes(output);
        Ok((result, verdict(checked)))
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

/// Opens the cell's backend, new and empty, and runs `f` on it.
fn with_fresh_store<R>(cell: &Cell, f: impl FnOnce(&mut dyn KvStore) -> R) -> R {
    match cell.backend {
        Backend::Sqlite | Backend::SqliteRowid => {
            let layout = Layout::of(cell.backend).expect("a SQLite backend");
            let profile = cell.profile.expect("SQLite cells have a profile");
            db::reopen(&profile).unwrap_or_else(|e| fail(&cell.name(), "open", e));
            db::with_conn(|conn| {
                sqlite::create(conn, layout).unwrap_or_else(|e| fail(&cell.name(), "create", e));
                f(&mut SqliteKv::new(conn, layout))
            })
        }
        Backend::StableBTreeMap => f(&mut StableKv::init(db::memory(memory_ids::STABLE_BTREEMAP))),
        Backend::HeapBTreeMap => f(&mut HeapKv::default()),
        Backend::Blob => fail(&cell.name(), "open", "blob is a sysrepo store, not a key-value backend"),
        Backend::SqliteVfs | Backend::SqliteVfsRowid => {
            fail(&cell.name(), "open", "an ic-sqlite-vfs cell (stablebench_vfs)")
        }
    }
}

/// The heap map's upgrade: written whole to stable memory and read back, as scopes `save` and
/// `load`; the map read back must equal the one saved and hold the whole data set.
pub fn measure_trie_upgrade(cell: &Cell, heap: &HeapKv) -> Measured {
    let data = TrieDataset { size: cell.size, seed: KV_SEED };
    let memory = db::memory(memory_ids::HEAP_BTREEMAP_SNAPSHOT);
    let mut saved = Ok(0);
    let mut loaded = None;
    // One step: the save (pre_upgrade) and the load (post_upgrade) are priced as one execution.
    message_starts();
    let result = bench_fn(|| {
        {
            let _save = bench_scope(scopes::SAVE);
            saved = heap.save(&memory);
        }
        let _load = bench_scope(scopes::LOAD);
        loaded = Some(HeapKv::load(&memory));
    });
    saved.map_err(|e| format!("save: {e}"))?;
    let loaded = loaded.expect("bench_fn ran").map_err(|e| format!("load: {e}"))?;
    let checked = if loaded == *heap && heap.map().len() as u64 == data.len() {
        Ok(format!("{} keys read back as saved", data.len()))
    } else {
        Err(format!("{} keys read back, {} saved, {} expected", loaded.map().len(), heap.map().len(), data.len()))
    };
    Ok((result, verdict(checked)))
}

/// sysrepo's test of the cell on its backend, new and empty (see the module documentation).
/// Once the test's setup is written, `stage` says which cell's tries follow (a cell with the
/// same setup: the benchmark canister's setup stage; the cell itself elsewhere).
pub fn measure_sysrepo(cell: &Cell, stage: &mut dyn FnMut() -> Cell) -> Measured {
    let Op::Sysrepo { test, fresh } = cell.op else {
        return Err(format!("{} is not a sysrepo cell", cell.name()));
    };
    let n = u32::try_from(cell.size).map_err(|_| format!("size {} does not fit sysrepo's uint32 keys", cell.size))?;
    let mut then = || match stage().op {
        Op::Sysrepo { test, fresh } => (test, fresh),
        _ => ic_cdk::trap("a sysrepo setup went on as another workload's cell"),
    };
    let (heap0, stable0) = pages();
    let samples = match cell.backend {
        Backend::Blob => {
            let running = db::memory(memory_ids::SYSREPO_BLOB_RUNNING);
            let operational = db::memory(memory_ids::SYSREPO_BLOB_OPERATIONAL);
            let mut store = BlobStore::new(running, operational).map_err(|e| e.to_string())?;
            sysrepo::run_from_stage(test, &mut store, n, TRIES, fresh, &Counter, &mut then)
        }
        Backend::StableBTreeMap => {
            let mut store = StableStore::new(memory_ids::SYSREPO_MAPS.map(db::memory));
            sysrepo::run_from_stage(test, &mut store, n, TRIES, fresh, &Counter, &mut then)
        }
        Backend::Sqlite => {
            let profile = cell.profile.ok_or("SQLite cells have a profile")?;
            db::reopen(&profile).map_err(|e| format!("open: {e}"))?;
            db::with_conn(|conn| {
                sysrepo::sqlite::create(conn)?;
                sysrepo::run_from_stage(test, &mut SqliteStore::new(conn), n, TRIES, fresh, &Counter, &mut then)
            })
        }
        b => return Err(format!("{} has no sysrepo store", b.name())),
    };
    let (heap1, stable1) = pages();
    match checked_run(samples) {
        Ok(samples) => {
            let total = Measurement {
                calls: samples.len() as u64,
                instructions: samples.iter().sum(),
                heap_increase: heap1 - heap0,
                stable_memory_increase: stable1 - stable0,
            };
            let checked = format!("{} tries; every read and the final datastore as the model has them", samples.len());
            let max_try = Measurement {
                calls: 1,
                instructions: samples.iter().copied().max().unwrap_or(0),
                ..Measurement::default()
            };
            let scopes = BTreeMap::from([(sysrepo::MAX_TRY_SCOPE.to_string(), max_try)]);
            Ok((BenchResult { total, scopes }, Oracle::Pass(checked)))
        }
        Err(measured) => measured,
    }
}

/// Runs `f` on the Chia schema `schema` as this canister's memories and database hold it (its
/// tables created if missing; the database must be open with the cell's profile, see
/// [`reset_chia`]).
pub fn with_chia_schema<R>(
    schema: chia_grid::Schema,
    f: impl FnOnce(&mut dyn chia::Schema) -> stablebench::Result<R>,
) -> stablebench::Result<R> {
    use chia_grid::Schema;
    let memory = db::memory;
    if !schema.uses_sqlite() {
        return f(&mut chia::btree_all::BtreeAll::init(
            memory(memory_ids::CHIA_COINS),
            memory(memory_ids::CHIA_BLOCKS),
        ));
    }
    db::with_conn(|conn| match schema {
        Schema::V2 => {
            chia::v2::create(conn)?;
            f(&mut chia::v2::V2::new(conn))
        }
        Schema::V3 => {
            chia::v3::create(conn)?;
            f(&mut chia::v3::open(conn))
        }
        Schema::Kv => {
            chia::kv::create(conn)?;
            f(&mut chia::kv::open(conn, memory(memory_ids::CHIA_LOOKUP_MAP), memory(memory_ids::CHIA_NAMES))?)
        }
        Schema::Runs => {
            chia::runs::create(conn)?;
            f(&mut chia::runs::open(conn, memory(memory_ids::CHIA_RUNS), memory(memory_ids::CHIA_NAMES))?)
        }
        Schema::BtreeAll => unreachable!("btree_all keeps no coin in SQLite"),
    })
}

/// Empties the Chia schemas' stable memories as a fresh canister has them (their headers zeroed:
/// each structure's `init` then starts anew). The live setup's reset calls it; the coins in
/// SQLite go with the database's reset.
pub fn reset_chia() {
    use ic_stable_structures::Memory;
    for id in memory_ids::CHIA {
        let m = db::memory(id);
        if m.size() > 0 {
            m.write(0, &[0; 64]);
        }
    }
}

/// Chia's coin-store benchmark on the cell's schema (see the module documentation), on empty
/// schemas: canbench's fresh canister, or a live setup's reset.
pub fn measure_chia(cell: &Cell) -> Measured {
    let Op::Chia(schema) = cell.op else {
        return Err(format!("{} is not a Chia cell", cell.name()));
    };
    let spec = ChainSpec { coins: cell.size, seed: chia_grid::SEED };
    let (heap0, stable0) = pages();
    if let Some(profile) = cell.profile {
        db::reopen(&profile).map_err(|e| format!("open: {e}"))?;
    }
    let run = with_chia_schema(schema, |s| chia::bench::run(s, spec, &Counter));
    let (heap1, stable1) = pages();
    let run = match checked_run(run) {
        Ok(run) => run,
        Err(measured) => return measured,
    };
    let one = |instructions| Measurement { calls: 1, instructions, ..Measurement::default() };
    let mut scopes: BTreeMap<String, Measurement> =
        run.replay.chunks.iter().enumerate().map(|(i, c)| (chia_grid::chunk_scope(i), one(c.instructions))).collect();
    let [existing, missing, block_reads, rewind] = chia_grid::READ_SCOPES;
    scopes.insert(existing.into(), one(run.lookup_existing));
    scopes.insert(missing.into(), one(run.lookup_missing));
    scopes.insert(block_reads.into(), one(run.block_reads));
    scopes.insert(rewind.into(), one(run.rewind));
    let total = Measurement {
        calls: 1,
        instructions: run.replay.instructions,
        heap_increase: heap1 - heap0,
        stable_memory_increase: stable1 - stable0,
    };
    let checked = format!(
        "{} blocks, {} coins, {} spends; lookups, block reads and the rewind as the model has them",
        run.replay.blocks, run.replay.coins, run.replay.spends
    );
    ic_cdk::api::debug_print(format!("stablebench: chia_spends={}", run.replay.spends));
    Ok((BenchResult { total, scopes }, Oracle::Pass(checked)))
}
