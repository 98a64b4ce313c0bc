//! The SQLite diff store: each datastore is two tables, and an apply runs one statement per edit
//! in one transaction (sysrepo's database plugins store only the diff).
//!
//! `lst`: `(k1 INTEGER, k2 TEXT, l TEXT, PRIMARY KEY (k1, k2)) WITHOUT ROWID`, so a key path is
//! one B-tree descent. `usr-lst`: `(pos INTEGER PRIMARY KEY, k INTEGER UNIQUE, l TEXT)`, where
//! `pos` keeps the user order (a new item goes after the last, with a gap for later inserts).
//! Operational tables have an `origin` column for the metadata. Statements go through the
//! connection's statement cache, as in the key-value backends.

use rusqlite::{Connection, OptionalExtension};

use super::{validate, Ds, Edit, LstKey, Store, Tree, ORIGIN};
use crate::tx::Tx;
use crate::Result;

/// The gap between two consecutive `usr-lst` positions.
pub const POSITION_GAP: i64 = 1024;

struct Sql {
    create: &'static str,
    select_lst: &'static str,
    select_usr: &'static str,
    get: &'static str,
    set: &'static str,
    delete_leaf: &'static str,
    delete_lst: &'static str,
    delete_usr: &'static str,
    update_usr: &'static str,
    append_usr: &'static str,
}

const RUNNING: Sql = Sql {
    create: "CREATE TABLE IF NOT EXISTS sr_lst (k1 INTEGER NOT NULL, k2 TEXT NOT NULL, l TEXT, \
             PRIMARY KEY (k1, k2)) WITHOUT ROWID; \
             CREATE TABLE IF NOT EXISTS sr_usr (pos INTEGER PRIMARY KEY, k INTEGER NOT NULL UNIQUE, l TEXT NOT NULL);",
    select_lst: "SELECT k1, k2, l FROM sr_lst",
    select_usr: "SELECT k, l FROM sr_usr ORDER BY pos",
    get: "SELECT l FROM sr_lst WHERE k1 = ?1 AND k2 = ?2",
    set: "INSERT INTO sr_lst (k1, k2, l) VALUES (?1, ?2, ?3) ON CONFLICT (k1, k2) DO UPDATE SET l = excluded.l",
    delete_leaf: "UPDATE sr_lst SET l = NULL WHERE k1 = ?1 AND k2 = ?2",
    delete_lst: "DELETE FROM sr_lst",
    delete_usr: "DELETE FROM sr_usr",
    update_usr: "UPDATE sr_usr SET l = ?2 WHERE k = ?1",
    append_usr: "INSERT INTO sr_usr (pos, k, l) VALUES ((SELECT ifnull(max(pos), 0) + 1024 FROM sr_usr), ?1, ?2)",
};

const OPERATIONAL: Sql = Sql {
    create: "CREATE TABLE IF NOT EXISTS sr_oper_lst (k1 INTEGER NOT NULL, k2 TEXT NOT NULL, l TEXT, \
             origin TEXT NOT NULL, PRIMARY KEY (k1, k2)) WITHOUT ROWID; \
             CREATE TABLE IF NOT EXISTS sr_oper_usr (pos INTEGER PRIMARY KEY, k INTEGER NOT NULL UNIQUE, \
             l TEXT NOT NULL, origin TEXT NOT NULL);",
    select_lst: "SELECT k1, k2, l FROM sr_oper_lst",
    select_usr: "SELECT k, l FROM sr_oper_usr ORDER BY pos",
    get: "SELECT l FROM sr_oper_lst WHERE k1 = ?1 AND k2 = ?2",
    set: "INSERT INTO sr_oper_lst (k1, k2, l, origin) VALUES (?1, ?2, ?3, ?4) \
          ON CONFLICT (k1, k2) DO UPDATE SET l = excluded.l, origin = excluded.origin",
    delete_leaf: "UPDATE sr_oper_lst SET l = NULL WHERE k1 = ?1 AND k2 = ?2",
    delete_lst: "DELETE FROM sr_oper_lst",
    delete_usr: "DELETE FROM sr_oper_usr",
    update_usr: "UPDATE sr_oper_usr SET l = ?2 WHERE k = ?1",
    append_usr: "INSERT INTO sr_oper_usr (pos, k, l, origin) \
                 VALUES ((SELECT ifnull(max(pos), 0) + 1024 FROM sr_oper_usr), ?1, ?2, ?3)",
};

const _: () = assert!(POSITION_GAP == 1024, "the SQL above spells the gap out");

fn sql(ds: Ds) -> &'static Sql {
    match ds {
        Ds::Running => &RUNNING,
        Ds::Operational => &OPERATIONAL,
    }
}

/// Creates both datastores' tables if they do not exist.
pub fn create(conn: &Connection) -> Result<()> {
    for ds in Ds::ALL {
        conn.execute_batch(sql(ds).create)?;
    }
    Ok(())
}

/// The SQLite diff store on a connection whose tables [`create`] made.
pub struct SqliteStore<'c> {
    conn: &'c Connection,
}

impl<'c> SqliteStore<'c> {
    /// The store on `conn`.
    pub fn new(conn: &'c Connection) -> Self {
        SqliteStore { conn }
    }

    fn leaf(&self, ds: Ds, key: &LstKey) -> Result<Option<Option<String>>> {
        Ok(self.conn.prepare_cached(sql(ds).get)?.query_row((key.0, &key.1), |r| r.get(0)).optional()?)
    }
}

impl Store for SqliteStore<'_> {
    fn load(&mut self, ds: Ds) -> Result<Tree> {
        let s = sql(ds);
        let lst = self
            .conn
            .prepare_cached(s.select_lst)?
            .query_map((), |r| Ok(((r.get(0)?, r.get(1)?), r.get(2)?)))?
            .collect::<rusqlite::Result<_>>()?;
        let mut stmt = self.conn.prepare_cached(s.select_usr)?;
        let usr = stmt.query_map((), |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(Tree::with_usr(lst, usr))
    }

    fn get(&mut self, ds: Ds, key: &LstKey) -> Result<Option<Option<String>>> {
        self.leaf(ds, key)
    }

    fn apply(&mut self, ds: Ds, edits: &[Edit], _after: Option<&Tree>) -> Result<()> {
        let s = sql(ds);
        let oper = ds == Ds::Operational;
        // Dropped without commit on an error: SQLite rolls back, nothing is stored.
        let tx = Tx::begin_unchecked(self.conn)?;
        validate(edits, |key| Ok(matches!(self.leaf(ds, key)?, Some(Some(_)))))?;
        for edit in edits {
            match edit {
                Edit::Set { key, l } | Edit::Create { key, l } => {
                    let mut stmt = tx.prepare_cached(s.set)?;
                    if oper {
                        stmt.execute((key.0, &key.1, l, ORIGIN))?;
                    } else {
                        stmt.execute((key.0, &key.1, l))?;
                    }
                }
                Edit::DeleteLeaf { key } => {
                    tx.prepare_cached(s.delete_leaf)?.execute((key.0, &key.1))?;
                }
                Edit::DeleteLst => {
                    tx.prepare_cached(s.delete_lst)?.execute(())?;
                }
                Edit::DeleteAll => {
                    tx.prepare_cached(s.delete_lst)?.execute(())?;
                    tx.prepare_cached(s.delete_usr)?.execute(())?;
                }
                Edit::SetUsr { k, l } => {
                    if tx.prepare_cached(s.update_usr)?.execute((k, l))? == 0 {
                        let mut stmt = tx.prepare_cached(s.append_usr)?;
                        if oper {
                            stmt.execute((k, l, ORIGIN))?;
                        } else {
                            stmt.execute((k, l))?;
                        }
                    }
                }
            }
        }
        tx.commit()?;
        Ok(())
    }
}
