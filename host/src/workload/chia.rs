//! Chia's coin-store schema benchmark: a synthetic chain replayed into the cell's schema, new and
//! empty (`total`, a scope per `CHUNK_COINS` created coins), then the reads and a rewind as
//! scopes (outside `total`), every answer checked against the model fed the same blocks.

use std::collections::BTreeMap;

use canbench_rs::{BenchResult, Measurement};
use stablebench::chia::{self, ChainSpec};
use stablebench_grid::cells::{Cell, Op};
use stablebench_grid::chia::{self as grid, Schema, LIVE_RUN_MAX_COINS};
use stablebench_grid::ic::memory_ids;
use stablebench_grid::live::Oracle;

use crate::env::Env;
use crate::{checked_run, pages, Counter, Measured};

/// Runs `f` on the Chia schema `schema` as the canister's memories and database hold it (its
/// tables created if missing; the database must be open with the cell's profile, see [`reset`]).
pub fn with_schema<E: Env, R>(
    env: &E,
    schema: Schema,
    f: impl FnOnce(&mut dyn chia::Schema) -> stablebench::Result<R>,
) -> stablebench::Result<R> {
    let memory = |id| env.memory(id).map_err(stablebench::Error::InvalidArgument);
    if !schema.uses_sqlite() {
        return f(&mut chia::btree_all::BtreeAll::init(
            memory(memory_ids::CHIA_COINS)?,
            memory(memory_ids::CHIA_BLOCKS)?,
        ));
    }
    env.write(|conn| match schema {
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
            f(&mut chia::kv::open(conn, memory(memory_ids::CHIA_LOOKUP_MAP)?, memory(memory_ids::CHIA_NAMES)?)?)
        }
        Schema::Runs => {
            chia::runs::create(conn)?;
            f(&mut chia::runs::open(conn, memory(memory_ids::CHIA_RUNS)?, memory(memory_ids::CHIA_NAMES)?)?)
        }
        Schema::BtreeAll => unreachable!("btree_all keeps no coin in SQLite"),
    })
}

/// Empties the Chia schemas' stable memories as a fresh canister has them (their headers zeroed:
/// each structure's `init` then starts anew). A live setup's reset calls it; the coins in SQLite
/// go with the database's reset.
pub fn reset<E: Env>(env: &E) -> Result<(), String> {
    use ic_stable_structures::Memory;
    for id in memory_ids::CHIA {
        let m = env.memory(id)?;
        if m.size() > 0 {
            m.write(0, &[0; 64]);
        }
    }
    Ok(())
}

/// Chia's coin-store benchmark on the cell's schema (see the module documentation), on empty
/// schemas: canbench's fresh canister, or a live setup's reset.
pub fn measure<E: Env>(env: &E, cell: &Cell) -> Measured {
    let Op::Chia(schema) = cell.op else {
        return Err(format!("{} is not a Chia cell", cell.name()));
    };
    let spec = ChainSpec { coins: cell.size, seed: grid::SEED };
    let (heap0, stable0) = pages();
    if let Some(profile) = cell.profile {
        env.open_sqlite(&profile).map_err(|e| format!("open: {e}"))?;
    }
    let run = with_schema(env, schema, |s| chia::bench::run(s, spec, &Counter));
    let (heap1, stable1) = pages();
    let run = match checked_run(run) {
        Ok(run) => run,
        Err(measured) => return measured,
    };
    let one = |instructions| Measurement { calls: 1, instructions, ..Measurement::default() };
    let mut scopes: BTreeMap<String, Measurement> =
        run.replay.chunks.iter().enumerate().map(|(i, c)| (grid::chunk_scope(i), one(c.instructions))).collect();
    let [existing, missing, block_reads, rewind] = grid::READ_SCOPES;
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

/// `bench_run` replays the chain in one call up to `LIVE_RUN_MAX_COINS` coins;
/// `bench_chia_blocks` replays a larger one in messages.
pub fn live_refusal(cell: &Cell) -> Option<String> {
    (cell.size > LIVE_RUN_MAX_COINS).then(|| {
        format!(
            "{}: bench_run replays a Chia chain in one call up to {LIVE_RUN_MAX_COINS} coins (a larger one can exceed \
             the message's instruction limit); bench_chia_blocks replays it in messages",
            cell.name()
        )
    })
}
