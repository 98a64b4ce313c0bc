//! The "hash-db" schemas' common part (the original's `cdb/schemas/hash_db_schema.py`,
//! `BaseDBSchema`): coins and blocks in SQLite tables keyed by small integers, and the name → id
//! lookup in a separate [`CoinIndex`], which is what [`super::v3`], [`super::kv`] and
//! [`super::runs`] vary.
//!
//! Tables (the original's, column for column):
//!
//! ```sql
//! coin  (id INTEGER PRIMARY KEY AUTOINCREMENT, parent INTEGER, puzzle BLOB, amount BLOB,
//!        confirmed INTEGER, spent INTEGER)
//! block (id INTEGER, timestamp INTEGER, spends BLOB, confirms BLOB)
//! ```
//!
//! `coin.parent` is the parent's coin id, or for a reward coin the non-positive id that encodes
//! the reward parent ([`super::reward_parent_id`]), which is never looked up; `amount` is 8 bytes
//! big-endian; `spent` is 0 while the coin is unspent. A block row lists its spends and confirms
//! as coin ids, packed u64 big-endian. One change: the block row's rowid is the block's index (the
//! original lets SQLite number the rows 1, 2, 3, …; both append in increasing order), so that
//! [`Schema::block_info_for_block_index`] and [`Schema::rewind_to_block_index`] find blocks by rowid
//! instead of scanning a table without an index.
//!
//! **Batching.** [`Schema::accept_block`] only buffers the block; once more than
//! [`BATCH_COINS`] (50,000) coins are pending, or on [`Schema::flush`], one transaction stores every
//! buffered block in order. Per block: resolve the parents' names to ids (reward parents are
//! encoded, parents created earlier in this flush come from the flush's own map, the others from
//! the index, in one [`CoinIndex::ids`] call); sort the confirms so that a parent created in the
//! block comes before its children; INSERT each coin (with `spent` already set if the block also
//! spends it); resolve the spends (the flush's map, then the index) and `UPDATE coin SET spent`
//! for each, including the ones just inserted as spent (the original does this too, with a TODO to
//! skip them); INSERT the block row. Finally the flush's new (name, id) rows go to the index in one
//! [`CoinIndex::add`], and the transaction commits. (One difference from the original: a parent
//! created in the same block is not first looked up in the index, where it cannot be.)
//!
//! **Reads** flush first, so they see every accepted block, and run on the tables and the index:
//! [`Schema::coin_infos_for_coin_names`] is an index lookup and a coin row per name, plus a reverse
//! lookup ([`CoinIndex::names`]) per parent; [`Schema::block_info_for_block_index`] reads the block
//! row, the coin rows of its confirms and the names of its spends and of the confirms' parents.
//!
//! **Rewind** flushes first, then in one transaction: finds the last coin id to keep (the largest
//! id in the confirms of the last block kept: ids increase with block index), marks unspent the
//! coins spent by the dropped blocks (from their rows' spend lists, so no scan), deletes the coins
//! above that id and the dropped block rows, and tells the index to forget the ids above it
//! ([`CoinIndex::truncate`]). `AUTOINCREMENT` never hands a deleted id out again.

use std::collections::{BTreeMap, BTreeSet};

use rusqlite::{Connection, OptionalExtension};

use super::{
    amount_blob, amount_from_blob, reward_parent_id, reward_parent_of_id, validate_block, BlockSpendInfo, Coin,
    CoinInfo, Hash, Schema,
};
use crate::tx::Tx;
use crate::{Error, Result};

/// Pending coins above which [`Schema::accept_block`] writes the buffered blocks (the original's
/// `_cache_size`).
pub const BATCH_COINS: u64 = 50_000;

/// `CREATE TABLE` for the `coin` and `block` tables.
pub const CREATE_SQL: &str = "\
    CREATE TABLE IF NOT EXISTS coin (id INTEGER PRIMARY KEY AUTOINCREMENT, parent INTEGER, puzzle BLOB, \
        amount BLOB, confirmed INTEGER, spent INTEGER);\
    CREATE TABLE IF NOT EXISTS block (id INTEGER, timestamp INTEGER, spends BLOB, confirms BLOB);";

const INSERT_COIN: &str = "INSERT INTO coin (parent, puzzle, amount, confirmed, spent) VALUES (?1, ?2, ?3, ?4, ?5)";
const SPEND_COIN: &str = "UPDATE coin SET spent = ?1 WHERE id = ?2";
const INSERT_BLOCK: &str = "INSERT INTO block (rowid, id, timestamp, spends, confirms) VALUES (?1, ?1, ?2, ?3, ?4)";
const SELECT_COIN: &str = "SELECT parent, puzzle, amount, confirmed, spent FROM coin WHERE id = ?1";
const SELECT_BLOCK: &str = "SELECT timestamp, spends, confirms FROM block WHERE rowid = ?1";
const LAST_KEPT_BLOCK: &str = "SELECT confirms FROM block WHERE rowid <= ?1 ORDER BY rowid DESC LIMIT 1";
const DROPPED_SPENDS: &str = "SELECT spends FROM block WHERE rowid > ?1";
const UNSPEND_COIN: &str = "UPDATE coin SET spent = 0 WHERE id = ?1";
const DELETE_COINS: &str = "DELETE FROM coin WHERE id > ?1";
const DELETE_BLOCKS: &str = "DELETE FROM block WHERE rowid > ?1";

/// Creates the `coin` and `block` tables if they do not exist.
pub fn create_tables(conn: &Connection) -> Result<()> {
    conn.execute_batch(CREATE_SQL)?;
    Ok(())
}

/// The name → coin id lookup of a hash-db schema (the original's "hash DB": a `coin_lookup` table,
/// sorted runs, RocksDB), plus the reverse lookup that the reads need.
///
/// Ids are the `coin` table's rowids: at least 1, increasing in the order coins are stored, never
/// reused. A store holds only live ids: after [`CoinIndex::truncate`] the ids above its argument
/// are gone from every answer.
pub trait CoinIndex {
    /// The id of each name, `None` for names not stored, in the order asked.
    fn ids(&mut self, names: &[Hash]) -> Result<Vec<Option<u64>>>;
    /// Stores new `(name, id)` rows, in increasing id order, names not stored before (a flush's
    /// coins).
    fn add(&mut self, rows: Vec<(Hash, u64)>) -> Result<()>;
    /// The name of each id, in the order asked. Fails if an id is not stored.
    fn names(&mut self, ids: &[u64]) -> Result<Vec<Hash>>;
    /// Forgets every id above `last` (a rewind).
    fn truncate(&mut self, last: u64) -> Result<()>;
}

/// A hash-db schema: the `coin` and `block` tables in `conn` (see [`create_tables`]) and the
/// lookup `I`. See the module documentation for what each method does.
pub struct HashDb<'c, I: CoinIndex> {
    conn: &'c Connection,
    index: I,
    pending: Vec<BlockSpendInfo>,
    pending_coins: u64,
    batch_coins: u64,
}

impl<'c, I: CoinIndex> HashDb<'c, I> {
    /// The schema over `conn`'s tables and `index`, with the original's batch size
    /// ([`BATCH_COINS`]). Nothing is pending: blocks accepted by an earlier instance were either
    /// flushed or are lost.
    pub fn new(conn: &'c Connection, index: I) -> Self {
        HashDb { conn, index, pending: Vec::new(), pending_coins: 0, batch_coins: BATCH_COINS }
    }

    /// The same schema writing its buffer once more than `coins` coins are pending (with 0, every
    /// block is written as it is accepted).
    pub fn with_batch_coins(mut self, coins: u64) -> Self {
        self.batch_coins = coins;
        self
    }

    /// The lookup.
    pub fn index(&self) -> &I {
        &self.index
    }

    /// Coins of the blocks accepted but not yet written.
    pub fn pending_coins(&self) -> u64 {
        self.pending_coins
    }

    /// Blocks accepted but not yet written.
    pub fn pending_blocks(&self) -> usize {
        self.pending.len()
    }

    /// Stores one buffered block inside the flush's transaction. `unflushed` maps the names of the
    /// coins stored by this flush so far to their ids; `added` collects the same rows in id order.
    fn store_block(
        &mut self,
        block: &BlockSpendInfo,
        unflushed: &mut BTreeMap<Hash, u64>,
        added: &mut Vec<(Hash, u64)>,
    ) -> Result<()> {
        let index = i64::from(block.index);
        let names: Vec<Hash> = block.confirms.iter().map(Coin::name).collect();
        let in_block: BTreeMap<Hash, usize> = names.iter().enumerate().map(|(i, n)| (*n, i)).collect();
        let order = topological_order(&block.confirms, &in_block)?;

        // Parents neither encoded, nor stored by this flush, nor created in this block: one lookup.
        let mut from_index: Vec<Hash> = block
            .confirms
            .iter()
            .map(|c| c.parent)
            .filter(|p| reward_parent_id(p).is_none() && !unflushed.contains_key(p) && !in_block.contains_key(p))
            .collect();
        from_index.sort_unstable();
        from_index.dedup();
        let found = self.index.ids(&from_index)?;
        let looked_up: BTreeMap<Hash, u64> =
            from_index.iter().zip(found).filter_map(|(name, id)| id.map(|id| (*name, id))).collect();

        let spends: BTreeSet<&Hash> = block.spends.iter().collect();
        let mut confirm_ids = Vec::with_capacity(order.len());
        {
            let mut insert = self.conn.prepare_cached(INSERT_COIN)?;
            for i in order {
                let coin = &block.confirms[i];
                let parent = match reward_parent_id(&coin.parent) {
                    Some(id) => id,
                    None => match unflushed.get(&coin.parent).or_else(|| looked_up.get(&coin.parent)) {
                        Some(&id) => id as i64,
                        None => {
                            return Err(Error::InvalidArgument(format!(
                                "chia block {}: no coin id for parent {}",
                                block.index,
                                hex(&coin.parent)
                            )))
                        }
                    },
                };
                let spent = if spends.contains(&names[i]) { index } else { 0 };
                insert.execute((parent, &coin.puzzle_hash, &amount_blob(coin.amount), index, spent))?;
                let id = self.conn.last_insert_rowid() as u64;
                unflushed.insert(names[i], id);
                added.push((names[i], id));
                confirm_ids.push(id);
            }
        }

        // Spends: this flush's coins first, then the index. Unknown names are skipped, as the
        // original's lookup skips them.
        let missing: Vec<Hash> = block.spends.iter().filter(|s| !unflushed.contains_key(*s)).copied().collect();
        let mut found = self.index.ids(&missing)?.into_iter();
        let mut spend_ids = Vec::with_capacity(block.spends.len());
        for name in &block.spends {
            let id = match unflushed.get(name) {
                Some(&id) => Some(id),
                None => found.next().flatten(),
            };
            spend_ids.extend(id);
        }
        {
            let mut spend = self.conn.prepare_cached(SPEND_COIN)?;
            for &id in &spend_ids {
                spend.execute((index, id as i64))?;
            }
        }
        let mut insert = self.conn.prepare_cached(INSERT_BLOCK)?;
        insert.execute((index, block.timestamp as i64, pack_ids(&spend_ids), pack_ids(&confirm_ids)))?;
        Ok(())
    }

    /// The coin stored under `id` and its parent's id.
    fn coin_row(&self, id: u64) -> Result<Option<(i64, CoinInfo)>> {
        let mut stmt = self.conn.prepare_cached(SELECT_COIN)?;
        let row = stmt
            .query_row([id as i64], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, Vec<u8>>(1)?,
                    r.get::<_, Vec<u8>>(2)?,
                    r.get::<_, i64>(3)?,
                    r.get::<_, i64>(4)?,
                ))
            })
            .optional()?;
        let Some((parent, puzzle, amount, confirmed, spent)) = row else {
            return Ok(None);
        };
        let coin = Coin {
            parent: [0; 32],
            puzzle_hash: super::hash_from_blob(&puzzle, "puzzle")?,
            amount: amount_from_blob(&amount)?,
        };
        let info = CoinInfo {
            coin,
            confirmed_index: confirmed as u32,
            spent_index: (spent != 0).then_some(spent as u32),
            coinbase: parent <= 0,
        };
        Ok(Some((parent, info)))
    }

    /// The coins of `ids` (every one must exist), with their parents' names filled in.
    fn coin_infos_for_ids(&mut self, ids: &[u64]) -> Result<Vec<CoinInfo>> {
        let mut rows = Vec::with_capacity(ids.len());
        for &id in ids {
            match self.coin_row(id)? {
                Some(row) => rows.push(row),
                None => return Err(Error::InvalidArgument(format!("chia: coin id {id} is referenced but not stored"))),
            }
        }
        self.fill_parents(&mut rows)?;
        Ok(rows.into_iter().map(|(_, info)| info).collect())
    }

    /// Sets each coin's parent name from its parent id: reward parents are decoded, the others
    /// come from the index's reverse lookup (one call).
    fn fill_parents(&mut self, rows: &mut [(i64, CoinInfo)]) -> Result<()> {
        let lookups: Vec<u64> = rows.iter().filter(|(p, _)| *p > 0).map(|(p, _)| *p as u64).collect();
        let mut names = self.index.names(&lookups)?.into_iter();
        for (parent, info) in rows.iter_mut() {
            info.coin.parent = if *parent > 0 {
                names.next().expect("one name per positive parent id")
            } else {
                reward_parent_of_id(*parent).ok_or_else(|| {
                    Error::InvalidArgument(format!("chia: parent id {parent} encodes no reward parent"))
                })?
            };
        }
        Ok(())
    }

    fn flush_pending(&mut self) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let conn = self.conn;
        let pending = std::mem::take(&mut self.pending);
        let mut stored = || -> Result<()> {
            // `begin_unchecked`: we hold `&Connection` (see `kv::sqlite::SqliteKv::put_batch`).
            let tx = Tx::begin_unchecked(conn)?;
            let mut unflushed = BTreeMap::new();
            let mut added = Vec::with_capacity(self.pending_coins as usize);
            for block in &pending {
                self.store_block(block, &mut unflushed, &mut added)?;
            }
            self.index.add(added)?;
            tx.commit()?;
            Ok(())
        };
        match stored() {
            Ok(()) => {
                self.pending_coins = 0;
                Ok(())
            }
            Err(e) => {
                // The transaction was dropped, which rolled the tables back; the blocks stay
                // pending. (A stable-memory index written before a failed commit is not rolled
                // back natively; in a canister the trap that follows discards everything.)
                self.pending = pending;
                Err(e)
            }
        }
    }
}

impl<I: CoinIndex> Schema for HashDb<'_, I> {
    /// Buffers the block; writes the buffer once more than the batch size of coins are pending.
    fn accept_block(&mut self, block: &BlockSpendInfo) -> Result<()> {
        validate_block(block)?;
        self.pending_coins += block.confirms.len() as u64;
        self.pending.push(block.clone());
        if self.pending_coins > self.batch_coins {
            self.flush_pending()?;
        }
        Ok(())
    }

    /// Writes the buffered blocks in one transaction (nothing if none).
    fn flush(&mut self) -> Result<()> {
        self.flush_pending()
    }

    /// Flushes, then per name: the index lookup, the coin row, and the parent's name.
    fn coin_infos_for_coin_names(&mut self, names: &[Hash]) -> Result<Vec<CoinInfo>> {
        self.flush_pending()?;
        let ids = self.index.ids(names)?;
        let mut rows = Vec::with_capacity(names.len());
        for (name, id) in names.iter().zip(ids) {
            let Some(id) = id else { continue };
            match self.coin_row(id)? {
                Some(row) => rows.push(row),
                None => {
                    return Err(Error::InvalidArgument(format!(
                        "chia: the index maps {} to coin id {id}, which is not stored",
                        hex(name)
                    )))
                }
            }
        }
        self.fill_parents(&mut rows)?;
        Ok(rows.into_iter().map(|(_, info)| info).collect())
    }

    /// Flushes, then reads the block row (by rowid), its confirms' coin rows and the names of its
    /// spends and of the confirms' parents.
    fn block_info_for_block_index(&mut self, index: u32) -> Result<Option<BlockSpendInfo>> {
        self.flush_pending()?;
        let row = {
            let mut stmt = self.conn.prepare_cached(SELECT_BLOCK)?;
            stmt.query_row([i64::from(index)], |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, Vec<u8>>(1)?, r.get::<_, Vec<u8>>(2)?))
            })
            .optional()?
        };
        let Some((timestamp, spends, confirms)) = row else {
            return Ok(None);
        };
        let spends = self.index.names(&unpack_ids(&spends)?)?;
        let confirms = self.coin_infos_for_ids(&unpack_ids(&confirms)?)?.into_iter().map(|i| i.coin).collect();
        Ok(Some(BlockSpendInfo { index, timestamp: timestamp as u64, spends, confirms }.canonical()))
    }

    /// Flushes, then in one transaction: un-spends the coins the dropped blocks spent, deletes the
    /// coins above the last kept block's last id and the dropped blocks, and truncates the index.
    fn rewind_to_block_index(&mut self, index: u32) -> Result<()> {
        self.flush_pending()?;
        let conn = self.conn;
        let tx = Tx::begin_unchecked(conn)?;
        let last_kept_block: Option<Vec<u8>> = {
            let mut stmt = self.conn.prepare_cached(LAST_KEPT_BLOCK)?;
            stmt.query_row([i64::from(index)], |r| r.get(0)).optional()?
        };
        let last_id = match last_kept_block {
            Some(confirms) => unpack_ids(&confirms)?.into_iter().max().unwrap_or(0),
            None => 0,
        };
        let mut unspend = Vec::new();
        {
            let mut stmt = self.conn.prepare_cached(DROPPED_SPENDS)?;
            let mut rows = stmt.query([i64::from(index)])?;
            while let Some(row) = rows.next()? {
                let spends: Vec<u8> = row.get(0)?;
                unspend.extend(unpack_ids(&spends)?.into_iter().filter(|&id| id <= last_id));
            }
        }
        {
            let mut stmt = self.conn.prepare_cached(UNSPEND_COIN)?;
            for id in unspend {
                stmt.execute([id as i64])?;
            }
        }
        self.conn.prepare_cached(DELETE_COINS)?.execute([last_id as i64])?;
        self.conn.prepare_cached(DELETE_BLOCKS)?.execute([i64::from(index)])?;
        self.index.truncate(last_id)?;
        tx.commit()?;
        Ok(())
    }
}

/// The order in which to insert a block's confirms: every coin after its parent if the parent is
/// created in the same block, otherwise in the given order (the original's `topological_sort`,
/// made deterministic). `in_block` maps each confirm's name to its position. Fails on a cycle,
/// which SHA-256 makes impossible in real data.
pub fn topological_order(confirms: &[Coin], in_block: &BTreeMap<Hash, usize>) -> Result<Vec<usize>> {
    #[derive(Clone, Copy, PartialEq)]
    enum State {
        New,
        Visiting,
        Done,
    }
    let mut state = vec![State::New; confirms.len()];
    let mut order = Vec::with_capacity(confirms.len());
    let mut chain = Vec::new();
    for start in 0..confirms.len() {
        // Walk up the in-block ancestors not placed yet, then place them oldest first.
        let mut j = start;
        loop {
            match state[j] {
                State::Done => break,
                State::Visiting => {
                    return Err(Error::InvalidArgument("chia block: the confirms' parents form a cycle".into()))
                }
                State::New => {}
            }
            state[j] = State::Visiting;
            chain.push(j);
            match in_block.get(&confirms[j].parent) {
                Some(&parent) => j = parent,
                None => break,
            }
        }
        for &c in chain.iter().rev() {
            state[c] = State::Done;
            order.push(c);
        }
        chain.clear();
    }
    Ok(order)
}

/// Coin ids as the block table stores them: u64 big-endian, concatenated (the original's
/// `list_int_to_bytes`).
pub fn pack_ids(ids: &[u64]) -> Vec<u8> {
    ids.iter().flat_map(|id| id.to_be_bytes()).collect()
}

/// The ids of a blob written by [`pack_ids`].
pub fn unpack_ids(blob: &[u8]) -> Result<Vec<u64>> {
    if !blob.len().is_multiple_of(8) {
        return Err(Error::InvalidArgument(format!(
            "chia: an id list blob has {} bytes, not a multiple of 8",
            blob.len()
        )));
    }
    Ok(blob.chunks_exact(8).map(|c| u64::from_be_bytes(c.try_into().expect("8 bytes"))).collect())
}

/// A hash in hex, for error messages.
pub(crate) fn hex(h: &Hash) -> String {
    h.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn coin(parent: Hash, tag: u8) -> Coin {
        Coin { parent, puzzle_hash: [tag; 32], amount: u64::from(tag) }
    }

    #[test]
    fn parents_in_the_block_come_first() -> Result<()> {
        // c is a grandchild of a, b is unrelated; given in the order c, b, child-of-a, a.
        let a = coin([9; 32], 1);
        let child = coin(a.name(), 2);
        let c = coin(child.name(), 3);
        let b = coin([8; 32], 4);
        let confirms = [c, b, child, a];
        let in_block: BTreeMap<Hash, usize> = confirms.iter().enumerate().map(|(i, c)| (c.name(), i)).collect();
        assert_eq!(topological_order(&confirms, &in_block)?, vec![3, 2, 0, 1]);
        Ok(())
    }

    #[test]
    fn ids_pack_as_big_endian_u64s() -> Result<()> {
        let blob = pack_ids(&[1, 258, u64::MAX]);
        assert_eq!(&blob[..8], &[0, 0, 0, 0, 0, 0, 0, 1]);
        assert_eq!(&blob[8..16], &[0, 0, 0, 0, 0, 0, 1, 2]);
        assert_eq!(unpack_ids(&blob)?, vec![1, 258, u64::MAX]);
        assert!(unpack_ids(&[0; 9]).is_err());
        Ok(())
    }
}
