//! rippled's NodeStore timing test on a key-value backend: its six phases (plus the intended
//! 50/50 fetch) on one store, each a scope, `total` their sum; the hit counts against the model.

use canbench_rs::bench_fn;
use stablebench::kv::{nodestore, KvStore};
use stablebench_grid::cells::Cell;

use crate::env::Env;
use crate::{message_starts, verdict, Counter, Measured};

/// A benchmark: the phases on the cell's store, new and empty; a store that does not open traps
/// with its step (`open`, `create`).
pub fn bench<E: Env>(env: &E, first: Cell) -> (Cell, Measured) {
    let measured = env
        .with_kv_store(&first, |store| measure_store(&first, store))
        .unwrap_or_else(|e| ic_cdk::trap(format!("{}: {e}", first.name())));
    (first, measured)
}

/// The phases on the cell's store: new and empty in a benchmark (NodeStore builds its own data),
/// the one a live setup left (empty) in the live API.
pub fn measure<E: Env>(env: &E, cell: &Cell) -> Measured {
    env.with_kv_store(cell, |store| measure_store(cell, store))?
}

/// rippled's NodeStore phases on `store`, new and empty, each a scope; `total` their sum.
pub fn measure_store(cell: &Cell, store: &mut dyn KvStore) -> Measured {
    let mut run = None;
    message_starts();
    let mut result = bench_fn(|| run = Some(nodestore::run(store, cell.size, nodestore::SEED, &Counter)));
    // `total` is the phases themselves: generating each phase's objects and checking what it
    // fetched happen between the scopes (see `stablebench::kv::nodestore`), not in the measure.
    // `calls` stays bench_fn's 1: the phases are one benchmark, not seven messages, so the runner's
    // per-call limits check sees the whole run.
    result.total.instructions = result.scopes.values().map(|m| m.instructions).sum();
    let run = run.expect("bench_fn ran").map_err(|e| e.to_string())?;
    let expected = nodestore::expected(cell.size, nodestore::SEED);
    let checked = if run == expected {
        ic_cdk::api::debug_print(format!("stablebench: nodestore_hits={:?}", run.hits));
        Ok(format!("hits {:?} as the model predicts", run.hits))
    } else {
        Err(format!("got {run:?}, expected {expected:?}"))
    };
    Ok((result, verdict(checked)))
}
