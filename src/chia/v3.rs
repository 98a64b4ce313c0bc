//! The lookup-table schema (the original's `cdb/schemas/sqlite_v3.py`): the hash-db tables
//! ([`super::hashdb`]) plus the name → id lookup as a third SQLite table,
//!
//! ```sql
//! coin_lookup(hash BLOB PRIMARY KEY, id INTEGER)
//! ```
//!
//! The rows are smaller than `coin_record`'s, but the 32-byte random key still lands every insert
//! on a random page of the table's key index, which REPORT.md finds only a little faster than v2.
//!
//! Each row's rowid is its coin id: the original asserts exactly that after every insert
//! (`cursor.lastrowid == coin_lookup_index`); here the rowid is set explicitly, so it holds after a
//! rewind too. That makes the reverse lookup (id → name, which the reads need) a rowid lookup and
//! the rewind's truncation a rowid range delete; both are inside the SQLite transaction of the
//! flush or rewind that calls them.

use rusqlite::{Connection, OptionalExtension};

use super::hashdb::{self, CoinIndex, HashDb};
use super::{hash_from_blob, Hash};
use crate::{Error, Result};

/// `CREATE TABLE` of the lookup table.
pub const CREATE_LOOKUP_SQL: &str = "CREATE TABLE IF NOT EXISTS coin_lookup (hash BLOB PRIMARY KEY, id INTEGER)";

const SELECT_ID: &str = "SELECT id FROM coin_lookup WHERE hash = ?1";
const INSERT: &str = "INSERT INTO coin_lookup (rowid, hash, id) VALUES (?1, ?2, ?1)";
const SELECT_NAME: &str = "SELECT hash FROM coin_lookup WHERE rowid = ?1";
const TRUNCATE: &str = "DELETE FROM coin_lookup WHERE rowid > ?1";

/// Creates the `coin`, `block` and `coin_lookup` tables if they do not exist.
pub fn create(conn: &Connection) -> Result<()> {
    hashdb::create_tables(conn)?;
    conn.execute_batch(CREATE_LOOKUP_SQL)?;
    Ok(())
}

/// The schema: [`HashDb`] over [`LookupTable`].
pub type V3<'c> = HashDb<'c, LookupTable<'c>>;

/// The schema over `conn`'s tables (see [`create`]), with the original's batch size.
pub fn open(conn: &Connection) -> V3<'_> {
    HashDb::new(conn, LookupTable { conn })
}

/// The `coin_lookup` table as a [`CoinIndex`].
#[derive(Debug)]
pub struct LookupTable<'c> {
    conn: &'c Connection,
}

impl CoinIndex for LookupTable<'_> {
    /// One key lookup per name.
    fn ids(&mut self, names: &[Hash]) -> Result<Vec<Option<u64>>> {
        let mut stmt = self.conn.prepare_cached(SELECT_ID)?;
        names.iter().map(|n| Ok(stmt.query_row([n], |r| r.get::<_, i64>(0)).optional()?.map(|id| id as u64))).collect()
    }

    /// One `INSERT` per row (rowid = id).
    fn add(&mut self, rows: Vec<(Hash, u64)>) -> Result<()> {
        let mut stmt = self.conn.prepare_cached(INSERT)?;
        for (name, id) in rows {
            stmt.execute((id as i64, name))?;
        }
        Ok(())
    }

    /// One rowid lookup per id.
    fn names(&mut self, ids: &[u64]) -> Result<Vec<Hash>> {
        let mut stmt = self.conn.prepare_cached(SELECT_NAME)?;
        ids.iter()
            .map(|&id| {
                let blob: Option<Vec<u8>> = stmt.query_row([id as i64], |r| r.get(0)).optional()?;
                let blob =
                    blob.ok_or_else(|| Error::InvalidArgument(format!("chia: coin id {id} is not in coin_lookup")))?;
                hash_from_blob(&blob, "coin_lookup hash")
            })
            .collect()
    }

    /// `DELETE FROM coin_lookup WHERE rowid > last`.
    fn truncate(&mut self, last: u64) -> Result<()> {
        self.conn.prepare_cached(TRUNCATE)?.execute([last as i64])?;
        Ok(())
    }
}
