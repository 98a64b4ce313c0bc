//! The SQLite backends: one table of 32-byte keys and blob values, in one of two [`Layout`]s.
//!
//! Every statement goes through `Connection::prepare_cached`, as a canister does: the statement
//! cache keeps the compiled statements across calls, so a put costs one bind and one step rather
//! than a parse. [`SqliteKv::put`] runs in autocommit (one committed transaction per put, as a
//! canister that writes one key per message would); [`SqliteKv::put_batch`] wraps the whole batch
//! in one transaction.

use rusqlite::{Connection, OptionalExtension};

use super::{Key, KvStore};
use crate::tx::Tx;
use crate::Result;

/// How the key-value table is laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Layout {
    /// `kv(key BLOB PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID`: the rows live in one B-tree
    /// ordered by key, so a lookup is one tree descent and a row is stored once.
    WithoutRowid,
    /// `kv_rowid(id INTEGER PRIMARY KEY, key BLOB NOT NULL UNIQUE, value BLOB NOT NULL)`: a rowid
    /// table plus the unique index on the key that the UNIQUE constraint creates, so a lookup
    /// descends the index, then the table, and each key is stored twice.
    Rowid,
}

impl Layout {
    /// Both layouts, in the order benchmarks list them.
    pub const ALL: [Layout; 2] = [Layout::WithoutRowid, Layout::Rowid];

    /// The layout of a SQLite backend of the grid (`None` for the other backends).
    pub const fn of(backend: stablebench_grid::cells::Backend) -> Option<Layout> {
        match backend {
            stablebench_grid::cells::Backend::Sqlite | stablebench_grid::cells::Backend::SqliteVfs => {
                Some(Layout::WithoutRowid)
            }
            stablebench_grid::cells::Backend::SqliteRowid | stablebench_grid::cells::Backend::SqliteVfsRowid => {
                Some(Layout::Rowid)
            }
            _ => None,
        }
    }

    /// An identifier for benchmark names: `without_rowid` or `rowid`.
    pub fn name(self) -> &'static str {
        match self {
            Layout::WithoutRowid => "without_rowid",
            Layout::Rowid => "rowid",
        }
    }

    /// The table's SQL name: `kv` or `kv_rowid` (distinct, so both layouts can share a database).
    pub fn table(self) -> &'static str {
        match self {
            Layout::WithoutRowid => "kv",
            Layout::Rowid => "kv_rowid",
        }
    }

    /// `CREATE TABLE IF NOT EXISTS` for this layout.
    pub fn create_sql(self) -> &'static str {
        match self {
            Layout::WithoutRowid => {
                "CREATE TABLE IF NOT EXISTS kv (key BLOB PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID"
            }
            Layout::Rowid => {
                "CREATE TABLE IF NOT EXISTS kv_rowid \
                 (id INTEGER PRIMARY KEY, key BLOB NOT NULL UNIQUE, value BLOB NOT NULL)"
            }
        }
    }

    /// The lookup: `SELECT value ... WHERE key = ?1`.
    pub fn get_sql(self) -> &'static str {
        match self {
            Layout::WithoutRowid => "SELECT value FROM kv WHERE key = ?1",
            Layout::Rowid => "SELECT value FROM kv_rowid WHERE key = ?1",
        }
    }

    /// The upsert of `(?1 key, ?2 value)`. `ON CONFLICT DO UPDATE` rather than `INSERT OR
    /// REPLACE`: REPLACE deletes the old row and inserts a new one, which in the rowid layout
    /// hands out a new rowid and rewrites the index entry; the upsert updates the value in place
    /// and keeps the rowid.
    pub fn put_sql(self) -> &'static str {
        match self {
            Layout::WithoutRowid => {
                "INSERT INTO kv (key, value) VALUES (?1, ?2) ON CONFLICT (key) DO UPDATE SET value = excluded.value"
            }
            Layout::Rowid => {
                "INSERT INTO kv_rowid (key, value) VALUES (?1, ?2) \
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value"
            }
        }
    }

    /// The delete: `DELETE ... WHERE key = ?1`.
    pub fn remove_sql(self) -> &'static str {
        match self {
            Layout::WithoutRowid => "DELETE FROM kv WHERE key = ?1",
            Layout::Rowid => "DELETE FROM kv_rowid WHERE key = ?1",
        }
    }

    /// The row count: `SELECT count(*) ...`.
    pub fn len_sql(self) -> &'static str {
        match self {
            Layout::WithoutRowid => "SELECT count(*) FROM kv",
            Layout::Rowid => "SELECT count(*) FROM kv_rowid",
        }
    }
}

/// Creates the table of `layout` if it does not exist yet (so it is also safe after an upgrade,
/// when the table is already there).
pub fn create(conn: &Connection, layout: Layout) -> Result<()> {
    conn.execute_batch(layout.create_sql())?;
    Ok(())
}

/// Prepares the layout's statements into the connection's statement cache. A canister calls it in
/// an update (`init`, `post_upgrade`, the call that creates the table): a query's heap changes are
/// discarded, so a statement first prepared in a query is parsed again by every query.
pub fn prepare(conn: &Connection, layout: Layout) -> Result<()> {
    for sql in [layout.get_sql(), layout.put_sql(), layout.remove_sql(), layout.len_sql()] {
        conn.prepare_cached(sql)?;
    }
    Ok(())
}

/// Whether the layout's table exists (a query cannot create it; it can answer "no value").
pub fn exists(conn: &Connection, layout: Layout) -> Result<bool> {
    let found: Option<i64> = conn
        .query_row("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1", [layout.table()], |r| r.get(0))
        .optional()?;
    Ok(found.is_some())
}

/// A [`KvStore`] over one table of a SQLite connection. The table must exist ([`create`]).
#[derive(Debug)]
pub struct SqliteKv<'c> {
    conn: &'c Connection,
    layout: Layout,
}

impl<'c> SqliteKv<'c> {
    /// The store over `layout`'s table in `conn`. Borrows the connection, so the canister can keep
    /// its one connection (and its statement cache) and wrap it per message.
    pub fn new(conn: &'c Connection, layout: Layout) -> Self {
        SqliteKv { conn, layout }
    }
}

impl KvStore for SqliteKv<'_> {
    fn get(&mut self, key: &Key) -> Result<Option<Vec<u8>>> {
        let mut stmt = self.conn.prepare_cached(self.layout.get_sql())?;
        Ok(stmt.query_row([key], |r| r.get(0)).optional()?)
    }

    /// One upsert in autocommit: SQLite wraps it in its own transaction and commits it before
    /// returning.
    fn put(&mut self, key: &Key, value: &[u8]) -> Result<()> {
        let mut stmt = self.conn.prepare_cached(self.layout.put_sql())?;
        stmt.execute((key, value))?;
        Ok(())
    }

    /// One transaction with one upsert per item, committed at the end; on any error the
    /// transaction is dropped, which rolls it back, so nothing of the batch remains. Fails if the
    /// connection is already inside a transaction (SQLite transactions do not nest).
    fn put_batch(&mut self, items: &[(Key, Vec<u8>)]) -> Result<()> {
        if items.is_empty() {
            return Ok(());
        }
        // `begin_unchecked` because we only hold `&Connection`: `Tx::begin` (like rusqlite's
        // `transaction`) takes `&mut` only to rule out nesting at compile time, and SQLite refuses
        // a nested BEGIN at run time anyway. `BEGIN`/`COMMIT` come from the statement cache.
        let tx = Tx::begin_unchecked(self.conn)?;
        {
            let mut stmt = tx.prepare_cached(self.layout.put_sql())?;
            for (key, value) in items {
                stmt.execute((key, value.as_slice()))?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    fn remove(&mut self, key: &Key) -> Result<bool> {
        let mut stmt = self.conn.prepare_cached(self.layout.remove_sql())?;
        Ok(stmt.execute([key])? > 0)
    }

    fn len(&mut self) -> Result<u64> {
        let mut stmt = self.conn.prepare_cached(self.layout.len_sql())?;
        let n: i64 = stmt.query_row([], |r| r.get(0))?;
        Ok(n as u64)
    }

    /// `sqlite3_db_release_memory`: frees every page of the page cache that no open statement
    /// holds, so the next reads go back to the file in stable memory. An in-memory (`:memory:`)
    /// database keeps its pages, which are its only copy of the data.
    ///
    /// Both ic-rusqlite's precompiled SQLite and rusqlite's `bundled` one are built with
    /// `SQLITE_ENABLE_MEMORY_MANAGEMENT`, which puts the pages of every connection of the process
    /// in one LRU list: this then frees the unpinned pages of *all* file connections, not only
    /// this one's. A canister has one connection; native tests that measure caches must not run
    /// beside one that drops them.
    fn drop_caches(&mut self) -> Result<()> {
        self.conn.release_memory()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_statement_of_both_layouts_prepares_against_its_own_table() -> Result<()> {
        let conn = Connection::open_in_memory()?;
        for layout in Layout::ALL {
            create(&conn, layout)?;
            for sql in [layout.get_sql(), layout.put_sql(), layout.remove_sql(), layout.len_sql()] {
                assert!(sql.contains(&format!(" {} ", layout.table())) || sql.ends_with(layout.table()), "{sql}");
                conn.prepare(sql)?;
            }
        }
        assert_ne!(Layout::WithoutRowid.table(), Layout::Rowid.table());
        assert_ne!(Layout::WithoutRowid.name(), Layout::Rowid.name());
        Ok(())
    }

    #[test]
    fn the_rowid_layout_has_a_unique_index_on_the_key() -> Result<()> {
        let conn = Connection::open_in_memory()?;
        create(&conn, Layout::Rowid)?;
        let unique: i64 = conn.query_row(
            "SELECT count(*) FROM pragma_index_list('kv_rowid') l \
             JOIN pragma_index_info(l.name) i WHERE l.\"unique\" = 1 AND i.name = 'key'",
            [],
            |r| r.get(0),
        )?;
        assert_eq!(unique, 1);
        Ok(())
    }
}
