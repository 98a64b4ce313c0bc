//! sysrepo's datastore-plugin performance test: one of its tests per cell, on the cell's store
//! (SQLite, StableBTreeMaps or blobs), new and empty: the test's setup, then its tries, of which
//! only the timed parts count; every read and the final datastore checked against the model.

use std::collections::BTreeMap;

use canbench_rs::{BenchResult, Measurement};
use stablebench::sysrepo::blob::BlobStore;
use stablebench::sysrepo::sqlite::SqliteStore;
use stablebench::sysrepo::stable::StableStore;
use stablebench::sysrepo::{self, LIVE_MAX_SIZE, TRIES};
use stablebench_grid::cells::{Backend, Cell, Op};
use stablebench_grid::ic::memory_ids;
use stablebench_grid::live::Oracle;

use crate::env::Env;
use crate::{checked_run, pages, setup_stage, Counter, Measured};

/// The test on fresh stores; once its setup is written, the setup stage says which cell's tries
/// follow.
pub fn bench<E: Env>(env: &E, grid: &[Cell], index: usize, first: Cell) -> (Cell, Measured) {
    let mut now = first;
    let measured = measure(env, &first, &mut || {
        now = setup_stage(grid, index, first.setup_stage(0)).1;
        now
    });
    (now, measured)
}

/// sysrepo's test of the cell on its backend, new and empty (see the module documentation).
/// Once the test's setup is written, `stage` says which cell's tries follow (a cell with the
/// same setup: the benchmark canister's setup stage; the cell itself elsewhere).
pub fn measure<E: Env>(env: &E, cell: &Cell, stage: &mut dyn FnMut() -> Cell) -> Measured {
    let Op::Sysrepo { test, fresh } = cell.op else {
        return Err(format!("{} is not a sysrepo cell", cell.name()));
    };
    let n = u32::try_from(cell.size).map_err(|_| format!("size {} does not fit sysrepo's uint32 keys", cell.size))?;
    let mut then = || match stage().op {
        Op::Sysrepo { test, fresh } => (test, fresh),
        _ => ic_cdk::trap("a sysrepo setup went on as another workload's cell"),
    };
    let memory = |id| env.memory(id);
    let (heap0, stable0) = pages();
    let samples = match cell.backend {
        Backend::Blob => {
            let (running, operational) =
                (memory(memory_ids::SYSREPO_BLOB_RUNNING)?, memory(memory_ids::SYSREPO_BLOB_OPERATIONAL)?);
            let mut store = BlobStore::new(running, operational).map_err(|e| e.to_string())?;
            sysrepo::run_from_stage(test, &mut store, n, TRIES, fresh, &Counter, &mut then)
        }
        Backend::StableBTreeMap => {
            let [a, b, c, d, e, f] = memory_ids::SYSREPO_MAPS;
            let maps = [memory(a)?, memory(b)?, memory(c)?, memory(d)?, memory(e)?, memory(f)?];
            sysrepo::run_from_stage(test, &mut StableStore::new(maps), n, TRIES, fresh, &Counter, &mut then)
        }
        Backend::Sqlite => {
            let profile = cell.profile.ok_or("SQLite cells have a profile")?;
            env.open_sqlite(&profile).map_err(|e| format!("open: {e}"))?;
            env.write(|conn| {
                sysrepo::sqlite::create(conn)?;
                sysrepo::run_from_stage(test, &mut SqliteStore::new(conn), n, TRIES, fresh, &Counter, &mut then)
            })
        }
        b => return Err(format!("{} has no sysrepo store", b.name())),
    };
    let (heap1, stable1) = pages();
    let samples = match checked_run(samples) {
        Ok(samples) => samples,
        Err(measured) => return measured,
    };
    let total = Measurement {
        calls: samples.len() as u64,
        instructions: samples.iter().sum(),
        heap_increase: heap1 - heap0,
        stable_memory_increase: stable1 - stable0,
    };
    let checked = format!("{} tries; every read and the final datastore as the model has them", samples.len());
    let max_try =
        Measurement { calls: 1, instructions: samples.iter().copied().max().unwrap_or(0), ..Measurement::default() };
    let scopes = BTreeMap::from([(sysrepo::MAX_TRY_SCOPE.to_string(), max_try)]);
    Ok((BenchResult { total, scopes }, Oracle::Pass(checked)))
}

/// The setup and the tries are one update call, which past `LIVE_MAX_SIZE` items can exceed the
/// 40 B instruction limit.
pub fn live_refusal(cell: &Cell) -> Option<String> {
    (cell.size > LIVE_MAX_SIZE).then(|| {
        format!(
            "{}: sysrepo cells run live at {LIVE_MAX_SIZE} items only (setup and {TRIES} tries are one update call, \
             which at this size can exceed the 40 B instruction limit); canbench runs every size",
            cell.name()
        )
    })
}
