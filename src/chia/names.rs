//! The reverse lookup of the stable-memory hash-db schemas ([`super::kv`], [`super::runs`]): coin
//! id → coin name, as an array of 32-byte names in one `Memory`, indexed by id.
//!
//! The original needs no reverse lookup, because its read methods are stubs. Reads need one: the
//! coin table stores a coin's parent as an id, and a [`super::CoinInfo`] or a block's spends carry
//! names. `sqlite_v3` has it for free (its `coin_lookup` rows have rowid = coin id, see
//! [`super::v3`]); a `StableBTreeMap` keyed by name or a sorted run does not. Ids are SQLite's
//! `AUTOINCREMENT` rowids, handed out in increasing order and never reused, so an array is the
//! whole index: writing a flush's names is one sequential stable write, and a lookup one 32-byte
//! read. It is not part of the original's write path: it costs one 32-byte stable write per coin.
//!
//! Layout: slot `k` is bytes `32k .. 32k + 32`. Slot 0 is the header: magic `SBCHNAME` (8 bytes),
//! then the largest id written, u64 little-endian; slot `k ≥ 1` holds the name of coin id `k`.
//! Slots of ids that a rewind dropped keep their old bytes; those ids are never handed out again.

use ic_stable_structures::Memory;

use super::Hash;
use crate::{Error, Result};

/// The first 8 bytes of the memory.
pub const MAGIC: [u8; 8] = *b"SBCHNAME";

const SLOT: u64 = 32;
const WASM_PAGE: u64 = stablebench_grid::ic::WASM_PAGE_BYTES;

/// Coin id → name, in one `Memory`.
pub struct Names<M: Memory> {
    memory: M,
    max_id: u64,
}

impl<M: Memory> Names<M> {
    /// Opens the array in `memory`, or starts an empty one if the memory is empty or all zeros
    /// there. Fails if the memory holds something else.
    pub fn init(memory: M) -> Result<Self> {
        let mut header = [0u8; 16];
        if memory.size() > 0 {
            memory.read(0, &mut header);
        }
        if header == [0; 16] {
            grow_to(&memory, SLOT, "the coin-name array")?;
            memory.write(0, &MAGIC);
            memory.write(8, &0u64.to_le_bytes());
            return Ok(Names { memory, max_id: 0 });
        }
        if header[..8] != MAGIC {
            return Err(Error::InvalidArgument("chia: the memory holds no coin-name array (wrong magic)".into()));
        }
        let max_id = u64::from_le_bytes(header[8..].try_into().expect("8 bytes"));
        if memory.size() * WASM_PAGE < (max_id + 1) * SLOT {
            return Err(Error::InvalidArgument(format!(
                "chia: the coin-name array claims {max_id} ids but its memory is {} pages",
                memory.size()
            )));
        }
        Ok(Names { memory, max_id })
    }

    /// The largest id stored (0 if none).
    pub fn max_id(&self) -> u64 {
        self.max_id
    }

    /// Stores each `(name, id)` (ids at least 1). Runs of consecutive ids, as a flush produces
    /// them, are written with one stable write each.
    pub fn put_all(&mut self, rows: &[(Hash, u64)]) -> Result<()> {
        let Some(top) = rows.iter().map(|&(_, id)| id).max() else {
            return Ok(());
        };
        if rows.iter().any(|&(_, id)| id == 0) {
            return Err(Error::InvalidArgument("chia: coin id 0 has no slot in the coin-name array".into()));
        }
        grow_to(&self.memory, (top + 1) * SLOT, "the coin-name array")?;
        let mut buf: Vec<u8> = Vec::with_capacity(rows.len() * SLOT as usize);
        let mut start = rows[0].1;
        for (i, &(name, id)) in rows.iter().enumerate() {
            if i > 0 && id != start + (buf.len() as u64) / SLOT {
                self.memory.write(start * SLOT, &buf);
                buf.clear();
                start = id;
            }
            buf.extend_from_slice(&name);
        }
        self.memory.write(start * SLOT, &buf);
        if top > self.max_id {
            self.set_max_id(top);
        }
        Ok(())
    }

    /// The name of coin `id`. Fails if `id` is 0 or above [`Names::max_id`].
    pub fn get(&self, id: u64) -> Result<Hash> {
        if id == 0 || id > self.max_id {
            return Err(Error::InvalidArgument(format!(
                "chia: coin id {id} is not in the coin-name array (ids 1..={})",
                self.max_id
            )));
        }
        let mut name = [0u8; 32];
        self.memory.read(id * SLOT, &mut name);
        Ok(name)
    }

    /// Forgets the ids above `last` (a rewind): [`Names::max_id`] becomes `last` if it was larger.
    pub fn truncate(&mut self, last: u64) {
        if last < self.max_id {
            self.set_max_id(last);
        }
    }

    fn set_max_id(&mut self, max_id: u64) {
        self.max_id = max_id;
        self.memory.write(8, &max_id.to_le_bytes());
    }
}

/// Grows `memory` so that it holds at least `bytes` bytes. Fails, leaving it as it was, if it
/// cannot grow.
pub(crate) fn grow_to<M: Memory>(memory: &M, bytes: u64, what: &str) -> Result<()> {
    let pages = bytes.div_ceil(WASM_PAGE);
    let have = memory.size();
    if pages > have && memory.grow(pages - have) < 0 {
        return Err(Error::InvalidArgument(format!(
            "chia: {what}: stable memory could not grow from {have} to {pages} pages ({bytes} bytes)"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use ic_stable_structures::VectorMemory;

    use super::*;

    #[test]
    fn names_round_trip_across_a_reopen_and_a_truncate() -> Result<()> {
        let memory = VectorMemory::default();
        let mut names = Names::init(memory.clone())?;
        assert_eq!(names.max_id(), 0);
        // Two runs of consecutive ids with a gap (ids dropped by a rewind are never reused).
        let rows: Vec<(Hash, u64)> = [1u64, 2, 3, 7, 8].iter().map(|&id| ([id as u8; 32], id)).collect();
        names.put_all(&rows)?;
        assert_eq!(names.max_id(), 8);
        let names = Names::init(memory.clone())?;
        for &(name, id) in &rows {
            assert_eq!(names.get(id)?, name);
        }
        assert!(names.get(0).is_err());
        assert!(names.get(9).is_err());
        let mut names = names;
        names.truncate(3);
        assert!(names.get(7).is_err());
        assert_eq!(Names::init(memory)?.max_id(), 3);
        Ok(())
    }

    #[test]
    fn a_foreign_memory_is_refused() {
        let memory = VectorMemory::default();
        memory.grow(1);
        memory.write(0, b"BTR\x01");
        assert!(Names::init(memory).is_err());
    }
}
