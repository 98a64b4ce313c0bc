//! Chia's coin store as a workload: the coin-database schemas that Richard Kiss compared in
//! `richardkiss/cdb_benchmark` (its `REPORT.md`), ported to Rust over SQLite and stable memory.
//!
//! Chia keeps one row per coin, keyed by the coin's *name*, a SHA-256 of its parent's name, its
//! puzzle hash and its amount ([`Coin::name`]). Replaying mainnet into the node's SQLite table
//! (`coin_record` with the 32-byte name as its primary key) gets slower as the table grows, since
//! random keys rewrite pages all over the B-tree; the benchmark replays 800 k blocks (13,423,068
//! coin creations and 5,840,449 spends) into several schemas that move the name → coin lookup out of
//! the coin table. This module is the pure-library part of that benchmark:
//!
//! - the data model ([`Coin`], [`BlockSpendInfo`], [`CoinInfo`]) and the protocol every schema
//!   follows ([`Schema`], the original's `cdb/schema.py`);
//! - a deterministic synthetic [`chain`](mod@chain) standing in for the 2.1 GB replay file
//!   (`cdb/cmds/dump_blocks.py` writes it from a full node's database, which cannot be shipped to a
//!   canister);
//! - five schemas: [`v2`] (Chia's own table, the baseline), [`v3`] (a `coin_lookup` table),
//!   [`kv`] (a `StableBTreeMap` as the lookup, the analog of `rocks_schema`), [`runs`] (sorted runs
//!   of 40-byte rows in stable memory, the analog of `flat_file_schema`/`sqlite_row_schema`) and
//!   [`btree_all`] (everything in `StableBTreeMap`s, an extra); [`hashdb`] holds the batching code
//!   that `v3`, `kv` and `runs` share (the original's `cdb/schemas/hash_db_schema.py`), and
//!   [`names`] the id → name array that `kv` and `runs` add for the reads;
//! - the [`replay`](mod@replay) driver (`cdb/cmds/load_blocks.py`), with per-chunk instruction
//!   counts, and the [`model::Model`] that every schema is tested against.
//!
//! The original benchmarked only the write path (`accept_block` and `flush`): its read and rewind
//! methods are stubs. Here every schema implements all of them, so they can be measured too.
//!
//! Like the rest of the crate this is plain Rust over a `rusqlite::Connection` and
//! ic-stable-structures `Memory`s, so it runs unchanged in a canister and natively (SQLite
//! `bundled`, `VectorMemory`).

pub mod bench;
pub mod btree_all;
pub mod chain;
pub mod hashdb;
pub mod kv;
pub mod model;
pub mod names;
pub mod replay;
pub mod runs;
pub mod v2;
pub mod v3;

pub use chain::{chain, Chain, ChainSpec};
pub use model::Model;
pub use replay::{replay, Chunk, Replay};

use sha2::{Digest, Sha256};

use crate::{Error, Result};

/// A 32-byte hash: a coin's name, a parent's name or a puzzle hash.
pub type Hash = [u8; 32];

/// A coin: the parent coin's name, the hash of the puzzle that locks it and its amount (in mojos).
///
/// The field order is the replay file's sort order: `dump_blocks` writes a block's confirms sorted
/// by (parent, puzzle hash, amount), which is the derived `Ord`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Coin {
    /// The name of the coin whose spend created this one, or a synthetic reward parent
    /// ([`reward_parent`]) for a block reward.
    pub parent: Hash,
    /// The hash of the puzzle that must be solved to spend the coin.
    pub puzzle_hash: Hash,
    /// The amount.
    pub amount: u64,
}

impl Coin {
    /// The coin's name, its id in Chia: `sha256(parent ‖ puzzle_hash ‖ clvm_int(amount))` (Chia's
    /// `Coin.name()`; the original's `cdb/schema.py`, `Coin.name`).
    pub fn name(&self) -> Hash {
        let mut hasher = Sha256::new();
        hasher.update(self.parent);
        hasher.update(self.puzzle_hash);
        hasher.update(clvm_int(self.amount));
        hasher.finalize().into()
    }

    /// Whether the coin is a block reward: its parent is a synthetic reward parent
    /// ([`reward_parent_id`]).
    pub fn is_coinbase(&self) -> bool {
        reward_parent_id(&self.parent).is_some()
    }
}

/// `amount` as a CLVM integer, the encoding a coin's name hashes (the original's `as_clvm_int`):
/// 0 is empty; otherwise the minimal signed big-endian encoding, i.e. the big-endian bytes without
/// leading zero bytes, plus a leading `0x00` if the first byte's top bit is set (so the number
/// stays positive). 1 → `01`, 128 → `00 80`, 256 → `01 00`, `u64::MAX` → `00 ff ff ff ff ff ff ff ff`.
pub fn clvm_int(amount: u64) -> Vec<u8> {
    let bytes = amount.to_be_bytes();
    let skip = (amount.leading_zeros() / 8) as usize;
    let digits = &bytes[skip..];
    let mut out = Vec::with_capacity(digits.len() + 1);
    if digits.first().is_some_and(|b| b & 0x80 != 0) {
        out.push(0);
    }
    out.extend_from_slice(digits);
    out
}

/// What one block did to the coin set, as the replay file records it: the coins it spent and the
/// coins it created (the original's `BlockSpendInfo`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockSpendInfo {
    /// The block's height. Heights increase from block to block, and start at 1: a spent index of
    /// 0 means "unspent" in Chia's `coin_record`.
    pub index: u32,
    /// The block's timestamp (seconds).
    pub timestamp: u64,
    /// The names of the coins spent, sorted (as the replay file has them).
    pub spends: Vec<Hash>,
    /// The coins created, sorted by (parent, puzzle hash, amount) (as the replay file has them).
    pub confirms: Vec<Coin>,
}

impl BlockSpendInfo {
    /// The block with its spends and confirms in the replay file's order (sorted), the form every
    /// [`Schema::block_info_for_block_index`] returns.
    pub fn canonical(mut self) -> Self {
        self.spends.sort_unstable();
        self.confirms.sort_unstable();
        self
    }
}

/// A coin and where it stands (the original's `CoinInfo`, with Chia's `coinbase` flag).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CoinInfo {
    /// The coin.
    pub coin: Coin,
    /// The block that created it.
    pub confirmed_index: u32,
    /// The block that spent it, if any.
    pub spent_index: Option<u32>,
    /// Whether it is a block reward ([`Coin::is_coinbase`]).
    pub coinbase: bool,
}

/// The protocol every coin-store schema follows (the original's `cdb/schema.py`, `Schema`, less
/// `blocks()`, which only served to write the replay file).
///
/// Callers keep to the preconditions that real chain data satisfies, and the schemas do not check
/// them (as the original's do not), beyond [`validate_block`]: blocks come in increasing index
/// order (after a rewind, above the rewind's index); every spend names a coin that exists and is
/// unspent (created in an earlier block or in the same one); every parent is a reward parent or an
/// existing coin (possibly created in the same block); no coin is created twice. The
/// [`model::Model`] checks all of them and refuses what breaks them.
pub trait Schema {
    /// Records one block: its new coins and its spends.
    fn accept_block(&mut self, block: &BlockSpendInfo) -> Result<()>;
    /// Writes whatever is buffered (the replay calls it once, at the end).
    fn flush(&mut self) -> Result<()>;
    /// The coins named, in the order asked; names of no known coin are left out.
    fn coin_infos_for_coin_names(&mut self, names: &[Hash]) -> Result<Vec<CoinInfo>>;
    /// Block `index` as accepted, in canonical order ([`BlockSpendInfo::canonical`]), or `None`
    /// if no block with that index is stored.
    fn block_info_for_block_index(&mut self, index: u32) -> Result<Option<BlockSpendInfo>>;
    /// Undoes every block above `index`: deletes the coins they created, marks the coins they
    /// spent unspent again and forgets the blocks.
    fn rewind_to_block_index(&mut self, index: u32) -> Result<()>;
}

/// The checks every schema makes before accepting a block: its index is at least 1 (0 means
/// "unspent"), and it creates at least one coin (as every block of the replay file does:
/// `dump_blocks` emits only blocks that create coins, and Chia's `coin_record` keeps a block's
/// timestamp only in the coins it created).
pub fn validate_block(block: &BlockSpendInfo) -> Result<()> {
    if block.index == 0 {
        return Err(Error::InvalidArgument("chia block: index 0 is reserved (it means unspent)".into()));
    }
    if block.confirms.is_empty() {
        return Err(Error::InvalidArgument(format!("chia block {}: creates no coin", block.index)));
    }
    Ok(())
}

/// The two 16-byte prefixes of reward parents: the halves of Chia mainnet's genesis challenge
/// (`ccd5bb71…3ff07eb3…`). Chia names the parent of block `h`'s pool reward
/// `genesis_challenge[:16] ‖ h as 16 bytes` and of its farmer reward `genesis_challenge[16:] ‖ h`
/// (`chia/consensus/coinbase.py`, `pool_parent_id` and `farmer_parent_id`). The order is the
/// original's `COINBASE_PREFIXES`, whose index goes into a reward parent's id.
pub const REWARD_PREFIXES: [[u8; 16]; 2] = [
    [0x3f, 0xf0, 0x7e, 0xb3, 0x58, 0xe8, 0x25, 0x5a, 0x65, 0xc3, 0x0a, 0x2d, 0xce, 0x0e, 0x5f, 0xbb],
    [0xcc, 0xd5, 0xbb, 0x71, 0x18, 0x35, 0x32, 0xbf, 0xf2, 0x20, 0xba, 0x46, 0xc2, 0x68, 0x99, 0x1a],
];

/// The largest height a reward parent's id can encode: `-(height << 8 | prefix)` must fit an i64.
pub const MAX_REWARD_HEIGHT: u64 = (i64::MAX as u64) >> 8;

/// The synthetic parent of a block reward: prefix `prefix` (an index into [`REWARD_PREFIXES`]),
/// 8 zero bytes, then `height` as a big-endian u64 (bytes 16..32 are the height as 16 big-endian
/// bytes, as in Chia).
///
/// # Panics
/// If `prefix` is not 0 or 1.
pub fn reward_parent(prefix: usize, height: u64) -> Hash {
    let mut parent = [0u8; 32];
    parent[..16].copy_from_slice(&REWARD_PREFIXES[prefix]);
    parent[24..].copy_from_slice(&height.to_be_bytes());
    parent
}

/// The id the hash-db schemas store for a reward parent instead of looking it up: `-(height << 8 |
/// prefix)`, at most 0 (the original's `as_coinbase_index`). `None` if `parent` is not a reward
/// parent: a prefix of [`REWARD_PREFIXES`], bytes 16..24 zero and a height up to
/// [`MAX_REWARD_HEIGHT`].
pub fn reward_parent_id(parent: &Hash) -> Option<i64> {
    let prefix = REWARD_PREFIXES.iter().position(|p| parent[..16] == p[..])?;
    if parent[16..24] != [0; 8] {
        return None;
    }
    let height = u64::from_be_bytes(parent[24..].try_into().expect("8 bytes"));
    if height > MAX_REWARD_HEIGHT {
        return None;
    }
    Some(-(((height << 8) | prefix as u64) as i64))
}

/// The reward parent of an id from [`reward_parent_id`] (the original's
/// `bytes32_for_negative_coin_index`); `None` if `id` is positive or encodes no known prefix.
pub fn reward_parent_of_id(id: i64) -> Option<Hash> {
    if id > 0 {
        return None;
    }
    let v = id.unsigned_abs();
    let prefix = (v & 0xff) as usize;
    (prefix < REWARD_PREFIXES.len()).then(|| reward_parent(prefix, v >> 8))
}

/// `amount` as the 8-byte big-endian blob the SQLite schemas store (Chia's `coin_record.amount`).
pub(crate) fn amount_blob(amount: u64) -> [u8; 8] {
    amount.to_be_bytes()
}

/// The amount in an 8-byte big-endian blob.
pub(crate) fn amount_from_blob(blob: &[u8]) -> Result<u64> {
    let bytes: [u8; 8] = blob
        .try_into()
        .map_err(|_| Error::InvalidArgument(format!("chia: an amount blob has {} bytes, not 8", blob.len())))?;
    Ok(u64::from_be_bytes(bytes))
}

/// A hash read from a SQLite blob.
pub(crate) fn hash_from_blob(blob: &[u8], what: &str) -> Result<Hash> {
    blob.try_into().map_err(|_| Error::InvalidArgument(format!("chia: a {what} blob has {} bytes, not 32", blob.len())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reward_parent_ids_round_trip_and_are_not_positive() {
        for prefix in 0..2 {
            for height in [0, 1, 255, 256, 4_000_000, u64::from(u32::MAX), MAX_REWARD_HEIGHT] {
                let parent = reward_parent(prefix, height);
                let id = reward_parent_id(&parent).expect("a reward parent");
                assert!(id <= 0);
                assert_eq!(reward_parent_of_id(id), Some(parent));
            }
        }
        // The original's example: height 1, prefix 1 → -(1 << 8 | 1).
        assert_eq!(reward_parent_id(&reward_parent(1, 1)), Some(-257));
    }

    #[test]
    fn other_hashes_are_not_reward_parents() {
        let mut parent = reward_parent(0, 7);
        parent[20] = 1;
        assert_eq!(reward_parent_id(&parent), None);
        let mut parent = reward_parent(1, 7);
        parent[0] ^= 1;
        assert_eq!(reward_parent_id(&parent), None);
        assert_eq!(reward_parent_id(&reward_parent(0, MAX_REWARD_HEIGHT + 1)), None);
        assert_eq!(reward_parent_of_id(1), None);
        assert_eq!(reward_parent_of_id(-2), None);
    }

    #[test]
    fn a_coin_is_coinbase_when_its_parent_is_a_reward_parent() {
        let reward = Coin { parent: reward_parent(1, 9), puzzle_hash: [1; 32], amount: 7 };
        assert!(reward.is_coinbase());
        let child = Coin { parent: reward.name(), puzzle_hash: [2; 32], amount: 7 };
        assert!(!child.is_coinbase());
    }
}
