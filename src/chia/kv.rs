//! The key-value schema, the analog of the original's `cdb/schemas/rocks_schema.py`: the hash-db
//! tables ([`super::hashdb`]) stay in SQLite, and the name → id lookup moves to a key-value store,
//! here ic-stable-structures' `StableBTreeMap<[u8; 32], u64>` in its own `Memory` (RocksDB's
//! `put(hash, 8-byte id)` and `multi_get` in the original, which REPORT.md finds by far the
//! fastest).
//!
//! Reads also need id → name, which RocksDB was never asked for (the original's reads are stubs):
//! that is the coin-name array of [`super::names`], in a second `Memory`. A rewind removes the
//! dropped coins' names from the map (it reads them from the array) and truncates the array.
//!
//! The stable stores have no transactions: natively, a flush or rewind that fails after writing
//! them leaves them ahead of SQLite; in a canister the trap that follows discards the whole
//! message, stable memory and SQLite alike.

use ic_stable_structures::{Memory, StableBTreeMap};
use rusqlite::Connection;

use super::hashdb::{self, CoinIndex, HashDb};
use super::names::Names;
use super::Hash;
use crate::Result;

/// Creates the `coin` and `block` tables if they do not exist.
pub fn create(conn: &Connection) -> Result<()> {
    hashdb::create_tables(conn)
}

/// The schema: [`HashDb`] over [`StableIndex`].
pub type Kv<'c, M> = HashDb<'c, StableIndex<M>>;

/// The schema over `conn`'s tables (see [`create`]), the map in `map_memory` and the coin-name
/// array in `names_memory` (each opened as it is, or started if empty), with the original's batch
/// size.
pub fn open<M: Memory>(conn: &Connection, map_memory: M, names_memory: M) -> Result<Kv<'_, M>> {
    Ok(HashDb::new(conn, StableIndex::init(map_memory, names_memory)?))
}

/// The lookup: a `StableBTreeMap` from name to id, and the coin-name array for the reverse.
pub struct StableIndex<M: Memory> {
    map: StableBTreeMap<Hash, u64, M>,
    names: Names<M>,
}

impl<M: Memory> StableIndex<M> {
    /// Opens (or starts) the map in `map_memory` and the array in `names_memory`.
    pub fn init(map_memory: M, names_memory: M) -> Result<Self> {
        Ok(StableIndex { map: StableBTreeMap::init(map_memory), names: Names::init(names_memory)? })
    }

    /// The map.
    pub fn map(&self) -> &StableBTreeMap<Hash, u64, M> {
        &self.map
    }
}

impl<M: Memory> CoinIndex for StableIndex<M> {
    /// One `get` per name.
    fn ids(&mut self, names: &[Hash]) -> Result<Vec<Option<u64>>> {
        Ok(names.iter().map(|n| self.map.get(n)).collect())
    }

    /// The names into the array, then one `insert` per row.
    fn add(&mut self, rows: Vec<(Hash, u64)>) -> Result<()> {
        self.names.put_all(&rows)?;
        for (name, id) in rows {
            self.map.insert(name, id);
        }
        Ok(())
    }

    /// One array read per id.
    fn names(&mut self, ids: &[u64]) -> Result<Vec<Hash>> {
        ids.iter().map(|&id| self.names.get(id)).collect()
    }

    /// Removes from the map every name of the array's ids above `last` that the map still maps
    /// above `last` (a slot left by an earlier rewind may hold a name that was created again since,
    /// under a newer id), then truncates the array.
    fn truncate(&mut self, last: u64) -> Result<()> {
        for id in last + 1..=self.names.max_id() {
            let name = self.names.get(id)?;
            if self.map.get(&name).is_some_and(|stored| stored > last) {
                self.map.remove(&name);
            }
        }
        self.names.truncate(last);
        Ok(())
    }
}
