//! One Chia benchmark run: the replay the original timed, then the reads it left as stubs, each
//! measured and checked against the [`Model`] fed the same blocks.
//!
//! Measured (instructions, from the [`Probe`]): the replay per chunk of created coins (see
//! [`replay`]); then `LOOKUPS` existing names (every created coin is a candidate, taken at an even
//! stride, spent and unspent alike) and as many missing ones in one `coin_infos_for_coin_names`
//! call each; `BLOCK_READS` blocks by index (at an even stride over the chain, plus indices
//! between blocks that do not exist); and a rewind of the last `REWIND_BLOCKS` blocks. Every
//! answer, and the lookups again after the rewind, must equal the model's, or the run fails with
//! [`Error::WrongResult`].

use stablebench_grid::chia::{BLOCK_READS, CHUNK_COINS, LOOKUPS, REWIND_BLOCKS};

use super::{chain, replay, BlockSpendInfo, ChainSpec, Hash, Model, Replay, Schema};
use crate::kv::Probe;
use crate::{Error, Result};

/// What a run measured.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChiaRun {
    /// The replay: chunks and totals.
    pub replay: Replay,
    /// Instructions of the lookup of `LOOKUPS` existing names.
    pub lookup_existing: u64,
    /// Instructions of the lookup of `LOOKUPS` missing names.
    pub lookup_missing: u64,
    /// Instructions of `BLOCK_READS` block reads by index.
    pub block_reads: u64,
    /// Instructions of the rewind of the last `REWIND_BLOCKS` blocks.
    pub rewind: u64,
}

fn same<T: PartialEq + std::fmt::Debug>(what: &str, got: &T, expected: &T) -> Result<()> {
    if got == expected {
        Ok(())
    } else {
        Err(Error::WrongResult(format!("chia: {what} differ from the model's")))
    }
}

/// `n` items of `all` at an even stride (all of them if there are fewer).
fn stride<T: Copy>(all: &[T], n: usize) -> Vec<T> {
    if all.len() <= n {
        return all.to_vec();
    }
    (0..n).map(|i| all[i * all.len() / n]).collect()
}

/// What the checks after a replay need, fed block by block as the replay (in one call or in many
/// messages) takes them: the model, and the names and indices to read back.
#[derive(Debug, Default)]
pub struct Tracker {
    model: Model,
    names: Vec<Hash>,
    indices: Vec<u32>,
    error: Option<Error>,
}

impl Tracker {
    /// Nothing seen yet.
    pub fn new() -> Self {
        Tracker::default()
    }

    /// Takes `block` as the schema did (the model's first refusal is kept for [`reads`]).
    pub fn observe(&mut self, block: &BlockSpendInfo) {
        self.names.extend(block.confirms.iter().map(|c| c.name()));
        self.indices.push(block.index);
        if let Err(e) = self.model.accept_block(block) {
            self.error.get_or_insert(e);
        }
    }
}

/// The reads measured after a replay.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reads {
    /// Instructions of the lookup of `LOOKUPS` existing names.
    pub lookup_existing: u64,
    /// Instructions of the lookup of `LOOKUPS` missing names.
    pub lookup_missing: u64,
    /// Instructions of `BLOCK_READS` block reads by index.
    pub block_reads: u64,
    /// Instructions of the rewind of the last `REWIND_BLOCKS` blocks.
    pub rewind: u64,
}

/// Replays the chain of `spec` into `schema` (new and empty) and measures the reads; see the
/// module documentation.
pub fn run<S: Schema + ?Sized, P: Probe>(schema: &mut S, spec: ChainSpec, probe: &P) -> Result<ChiaRun> {
    let mut tracker = Tracker::new();
    // The tracker takes each block as the replay pulls it: outside the measured calls.
    let blocks = chain(spec).inspect(|block: &BlockSpendInfo| tracker.observe(block));
    let replay = replay(schema, blocks, CHUNK_COINS, probe)?;
    let Reads { lookup_existing, lookup_missing, block_reads, rewind } = reads(schema, tracker, probe)?;
    Ok(ChiaRun { replay, lookup_existing, lookup_missing, block_reads, rewind })
}

/// Measures the reads and the rewind on `schema`, which took exactly the blocks `tracker` saw
/// (flushed), and checks every answer, and the lookups again after the rewind, against the model.
pub fn reads<S: Schema + ?Sized, P: Probe>(schema: &mut S, tracker: Tracker, probe: &P) -> Result<Reads> {
    let Tracker { mut model, names, indices, error } = tracker;
    if let Some(e) = error {
        return Err(e);
    }
    model.flush()?;
    let existing = stride(&names, LOOKUPS);
    // Missing names: hashes of the existing ones' names (no coin is named so, with certainty for
    // practical purposes: a SHA-256 collision).
    let missing: Vec<Hash> =
        existing.iter().map(|n| crate::chia::Coin { parent: *n, puzzle_hash: *n, amount: 0 }.name()).collect();
    let mut reads = stride(&indices, BLOCK_READS / 2);
    reads.extend(reads.clone().iter().map(|i| i + 1).filter(|i| !indices.contains(i)));

    let measure = |f: &mut dyn FnMut() -> Result<()>| -> Result<u64> {
        probe.message_starts();
        let start = probe.instructions();
        f()?;
        Ok(probe.instructions().saturating_sub(start))
    };
    let mut got = Vec::new();
    let lookup_existing = measure(&mut || {
        got = schema.coin_infos_for_coin_names(&existing)?;
        Ok(())
    })?;
    same("the coins of existing names", &got, &model.coin_infos_for_coin_names(&existing)?)?;
    if got.len() != existing.len() {
        return Err(Error::WrongResult(format!("chia: {} of {} existing names found", got.len(), existing.len())));
    }
    let lookup_missing = measure(&mut || {
        got = schema.coin_infos_for_coin_names(&missing)?;
        Ok(())
    })?;
    same("the coins of missing names", &got, &Vec::new())?;
    let mut blocks = Vec::new();
    let block_reads = measure(&mut || {
        blocks = reads.iter().map(|&i| schema.block_info_for_block_index(i)).collect::<Result<Vec<_>>>()?;
        Ok(())
    })?;
    let expected = reads.iter().map(|&i| model.block_info_for_block_index(i)).collect::<Result<Vec<_>>>()?;
    same("the blocks read by index", &blocks, &expected)?;
    let target = indices.len().checked_sub(REWIND_BLOCKS + 1).map_or(0, |i| indices[i]);
    let rewind = measure(&mut || schema.rewind_to_block_index(target))?;
    model.rewind_to_block_index(target)?;
    same(
        "the coins after the rewind",
        &schema.coin_infos_for_coin_names(&existing)?,
        &model.coin_infos_for_coin_names(&existing)?,
    )?;
    same(
        "the tip block after the rewind",
        &schema.block_info_for_block_index(target)?,
        &model.block_info_for_block_index(target)?,
    )?;
    Ok(Reads { lookup_existing, lookup_missing, block_reads, rewind })
}
