//! The toy counter's measurement (feature `toy`; its cells and names are
//! `stablebench_grid::toy`): on the cell's key-value store, new and empty, `SIZE` increments
//! (each a get and a put of the counter's key) or `SIZE` reads of a counter set beforehand,
//! in one `bench_fn`; the counter, or every read, checked afterwards.

use canbench_rs::{bench_fn, bench_scope};
use stablebench::kv::KvStore;
use stablebench_grid::cells::{Cell, Op};
use stablebench_grid::toy::{self, FIRST_READ, KEY};

use crate::env::Env;
use crate::{message_starts, verdict, Measured};

/// The cell on its backend's store (a new one in a benchmark).
pub fn measure<E: Env>(env: &E, cell: &Cell) -> Measured {
    env.with_kv_store(cell, |store| measure_store(cell, store))?
}

fn counter(store: &mut dyn KvStore) -> stablebench::Result<u64> {
    let value = store.get(&KEY)?.unwrap_or_default();
    Ok(value.try_into().map(u64::from_le_bytes).unwrap_or(0))
}

fn measure_store(cell: &Cell, store: &mut dyn KvStore) -> Measured {
    let Op::Declared(op) = cell.op else { return Err(format!("{} is not a toy cell", cell.name())) };
    let read = op == &toy::READ;
    if read {
        // The setup, outside the measure.
        store.put(&KEY, &cell.size.to_le_bytes()).map_err(|e| e.to_string())?;
    }
    let mut seen = Vec::new();
    let mut run = Ok(());
    message_starts();
    let result = bench_fn(|| {
        run = (0..cell.size).try_for_each(|i| {
            if read {
                let _first = (i == 0).then(|| bench_scope(FIRST_READ));
                seen.push(counter(store)?);
            } else {
                let next = counter(store)? + 1;
                store.put(&KEY, &next.to_le_bytes())?;
            }
            Ok(())
        })
    });
    run.map_err(|e: stablebench::Error| e.to_string())?;
    let (want, got) = match read {
        true => (vec![cell.size; cell.size as usize], seen),
        false => (vec![cell.size], vec![counter(store).map_err(|e| e.to_string())?]),
    };
    let checked = match got == want {
        true => Ok(format!("{} {}", cell.size, if read { "reads of the counter" } else { "increments" })),
        false => Err(format!("counter {got:?}, expected {want:?}")),
    };
    Ok((result, verdict(checked)))
}
