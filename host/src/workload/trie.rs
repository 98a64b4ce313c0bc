//! Substrate node-bench's trie benchmark (the "IC DbWeight") on a key-value backend: the data set
//! loaded (scope `setup`, outside `total`), then 50 read or write iterations of which only the
//! timed parts count; and the heap map's upgrade (the map saved to stable memory and read back).

use std::collections::BTreeMap;

use canbench_rs::{bench_fn, bench_scope, BenchResult, Measurement};
use stablebench::kv::gen::TrieDataset;
use stablebench::kv::heap::HeapKv;
use stablebench::kv::{trie, KvStore, Probe};
use stablebench_grid::cells::{Cache, Cell, Op};
use stablebench_grid::ic::memory_ids;
use stablebench_grid::{scopes, KV_SEED};

use super::LiveStep;
use crate::env::Env;
use crate::{checked_run, fail, message_starts, pages, setup_stage, verdict, Counter, Measured, SETUP_BATCH};

/// A read or write cell on its backend, new and empty ([`run`]); the upgrade on a heap map
/// loaded with the data set.
pub fn bench<E: Env>(env: &E, grid: &[Cell], index: usize, first: Cell) -> (Cell, Measured) {
    if first.op == Op::TrieUpgrade {
        let mut heap = HeapKv::default();
        let data = TrieDataset { size: first.size, seed: KV_SEED };
        trie::load(&mut heap, &data, 0..first.size, SETUP_BATCH).unwrap_or_else(|e| fail(&first.name(), "setup", e));
        return (first, measure_upgrade(env, &first, &heap));
    }
    // The store's error names its step (`open`, `create`).
    env.with_kv_store(&first, |store| run(grid, index, first, store))
        .unwrap_or_else(|e| ic_cdk::trap(format!("{}: {e}", first.name())))
}

/// The measured step on the store (or heap map) a live setup loaded.
pub fn measure<E: Env>(env: &E, cell: &Cell) -> Measured {
    match cell.op {
        Op::TrieUpgrade => env.with_heap_map(|heap| measure_upgrade(env, cell, heap))?,
        _ => env.with_kv_store(cell, |store| measure_iterations(cell, store))?,
    }
}

/// The data set, in setup batches.
pub fn live_setup() -> Vec<LiveStep> {
    vec![LiveStep::KvLoad]
}

/// A trie read or write cell on `store`, new and empty: loads the data set (scope `setup`,
/// outside `total`: [`setup`]), reports the setup stage, then measures the cell it goes on as.
pub fn run(grid: &[Cell], index: usize, first: Cell, store: &mut dyn KvStore) -> (Cell, Measured) {
    let setup = setup(&first, store, SETUP_BATCH).unwrap_or_else(|e| fail(&first.name(), "setup", e));
    let (_, cell) = setup_stage(grid, index, first.setup_stage(0));
    let mut measured = measure_iterations(&cell, store);
    if let Ok((result, _)) = &mut measured {
        result.scopes.insert(scopes::SETUP.to_string(), setup);
    }
    (cell, measured)
}

/// Loads the trie data set in one go, recorded as scope `setup` (outside `total`): what loading
/// it costs in one message, and how much heap and stable memory it takes, so the report can say
/// which setups only canbench can run in one message and where the heap would run out.
pub fn setup(cell: &Cell, store: &mut dyn KvStore, batch: usize) -> stablebench::Result<Measurement> {
    let data = TrieDataset { size: cell.size, seed: KV_SEED };
    let ((heap_s, stable_s), start) = (pages(), Counter.instructions());
    trie::load(store, &data, 0..cell.size, batch)?;
    let (heap0, stable0) = pages();
    Ok(Measurement {
        calls: 1,
        instructions: Counter.instructions() - start,
        heap_increase: heap0 - heap_s,
        stable_memory_increase: stable0 - stable_s,
    })
}

/// The trie read or write iterations on a store holding the cell's data set.
pub fn measure_iterations(cell: &Cell, store: &mut dyn KvStore) -> Measured {
    let data = TrieDataset { size: cell.size, seed: KV_SEED };
    let (heap0, stable0) = pages();
    let samples = match cell.op {
        Op::TrieRead(cache) => trie::read(store, &data, cache == Cache::Cold, &Counter),
        Op::TrieWrite(cache) => trie::write(store, &data, cache == Cache::Cold, &Counter),
        _ => return Err(format!("{} is not a trie read or write cell", cell.name())),
    };
    // trie::read and trie::write check every value against the data set: a wrong one is the
    // oracle's verdict, any other error a failed step.
    let samples = match checked_run(samples) {
        Ok(samples) => samples,
        Err(measured) => return measured,
    };
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
    let checked = Ok(format!("{} iterations, every value as the data set has it", samples.0.len()));
    Ok((BenchResult { total, scopes: BTreeMap::from([(scopes::W_AVG.to_string(), w_avg)]) }, verdict(checked)))
}

/// The heap map's upgrade: written whole to stable memory and read back, as scopes `save` and
/// `load`; the map read back must equal the one saved and hold the whole data set.
pub fn measure_upgrade<E: Env>(env: &E, cell: &Cell, heap: &HeapKv) -> Measured {
    let data = TrieDataset { size: cell.size, seed: KV_SEED };
    let memory = env.memory(memory_ids::HEAP_BTREEMAP_SNAPSHOT)?;
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
