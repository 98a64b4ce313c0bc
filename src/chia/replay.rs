//! The replay: every block into a schema, then one flush (the original's `cdb/cmds/load_blocks.py`,
//! which REPORT.md times on the whole replay file), with the instructions counted per chunk of
//! created coins, which gives the cost-versus-size curve (the original watches the same thing as
//! `pv`'s throughput falling while the coin table grows).

use super::{BlockSpendInfo, Schema};
use crate::kv::Probe;
use crate::{Error, Result};

/// The blocks of one chunk: at least the chunk size of created coins (blocks are not split), except
/// in the last chunk.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Chunk {
    /// Blocks accepted.
    pub blocks: u64,
    /// Coins they created.
    pub coins: u64,
    /// Coins they spent.
    pub spends: u64,
    /// Coins created by this chunk and every chunk before it.
    pub coins_total: u64,
    /// Instructions of the chunk's `accept_block` calls (and, in the last chunk, of the final
    /// `flush`), as differences of [`Probe::instructions`] around each call, so producing the
    /// blocks is not counted.
    pub instructions: u64,
}

/// What a replay did and cost.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Replay {
    /// The chunks, in order; they add up to the totals below. A replay of no block has one empty
    /// chunk holding the flush.
    pub chunks: Vec<Chunk>,
    /// Blocks accepted.
    pub blocks: u64,
    /// Coins created.
    pub coins: u64,
    /// Coins spent.
    pub spends: u64,
    /// The index of the last block, if any.
    pub last_index: Option<u32>,
    /// Instructions in all (every `accept_block` and the flush).
    pub instructions: u64,
    /// Instructions of the final `flush` alone (included in the last chunk and the total).
    pub flush_instructions: u64,
}

/// Calls `schema.accept_block` for every block and `schema.flush` at the end, closing a chunk after
/// the block that brings it to at least `chunk_coins` created coins. Fails on a `chunk_coins` of 0
/// or the schema's first error (the blocks before it stay accepted).
pub fn replay<S: Schema + ?Sized, P: Probe>(
    schema: &mut S,
    blocks: impl Iterator<Item = BlockSpendInfo>,
    chunk_coins: u64,
    probe: &P,
) -> Result<Replay> {
    if chunk_coins == 0 {
        return Err(Error::InvalidArgument("chia replay: chunk_coins must be at least 1".into()));
    }
    let mut out = Replay::default();
    let mut open = Chunk::default();
    for block in blocks {
        if open.blocks == 0 {
            // A chunk is one message's worth of blocks.
            probe.message_starts();
        }
        let t0 = probe.instructions();
        schema.accept_block(&block)?;
        let t1 = probe.instructions();
        open.instructions += t1.saturating_sub(t0);
        open.blocks += 1;
        open.coins += block.confirms.len() as u64;
        open.spends += block.spends.len() as u64;
        out.last_index = Some(block.index);
        if open.coins >= chunk_coins {
            out.close(&mut open);
        }
    }
    let t0 = probe.instructions();
    schema.flush()?;
    let t1 = probe.instructions();
    out.flush_instructions = t1.saturating_sub(t0);
    open.instructions += out.flush_instructions;
    match out.chunks.last_mut() {
        // The chunks ended with the last block: the flush belongs to the last one.
        Some(last) if open.blocks == 0 => last.instructions += open.instructions,
        _ => out.close(&mut open),
    }
    out.instructions = out.chunks.iter().map(|c| c.instructions).sum();
    Ok(out)
}

impl Replay {
    fn close(&mut self, open: &mut Chunk) {
        self.blocks += open.blocks;
        self.coins += open.coins;
        self.spends += open.spends;
        open.coins_total = self.coins;
        self.chunks.push(std::mem::take(open));
    }
}
