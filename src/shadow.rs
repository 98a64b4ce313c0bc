//! Building an index on a table too large for one message: a shadow table.
//!
//! `CREATE INDEX` is one statement: it cannot be split, and on a large table it needs more than a
//! message's 40 B instructions (both indexes on 10 M orders: 61 B, `docs/scaling.md`). Instead:
//!
//! 1. **Start** (one transaction): an empty copy of the table, `stablebench_shadow_<table>`, with
//!    the index already on it; a row in `stablebench_index_build` saying which index and up to
//!    which rowid the copy has got; and three triggers on the table that keep the part already
//!    copied equal to the table (an insert at or below that rowid is copied, an update is copied
//!    again, a delete is deleted from the copy).
//! 2. **Copy**, call after call: windows of [`COPY_WINDOW`] rowids (`INSERT INTO shadow SELECT *
//!    FROM table WHERE rowid > ? AND rowid <= ?`), the index maintained row by row, each call one
//!    transaction that commits the windows it copied and the new position, until the position
//!    passes the table's last rowid. Rows inserted meanwhile get higher rowids and are copied by a
//!    later window.
//! 3. **Swap** (one transaction, at the start of the first call that finds at most one window
//!    left to copy, which it copies first): the triggers dropped, the table's AUTOINCREMENT sequence given to
//!    the copy, the table dropped and the copy renamed to it, which keeps the index. Foreign keys
//!    are switched off around it when another table refers to this one (dropping a parent table
//!    would otherwise delete its rows one by one and check every child), and back on after it.
//!
//! Between two calls the table is whole and consistent and serves every read and write as before
//! (writes pay the triggers). Every step is a transaction that leaves its state in the database,
//! so a call can be repeated or lost, and the canister upgraded, at any point: the next call
//! continues where the last committed one stopped. The cost is a copy of the table, about as
//! expensive as inserting its rows again with the index present, so the one-statement build is
//! tried first (`jobs::create_indexes`).

use rusqlite::{Connection, OptionalExtension};

use crate::tx::Tx;
use crate::{Error, Meter, Result};

/// Rowids copied by one statement of the copy: its cost is bounded, so the budget is checked
/// between windows and no statement has to be interrupted.
pub const COPY_WINDOW: i64 = 10_000;

/// The table of builds in progress, one row per table.
const STATE: &str = "stablebench_index_build";

/// The shadow copy of `table`.
pub fn shadow_name(table: &str) -> String {
    format!("stablebench_shadow_{table}")
}

/// Whether a table name is a shadow copy (not part of the schema a user sees).
pub fn is_shadow(table: &str) -> bool {
    table.starts_with("stablebench_shadow_")
}

/// A build in progress.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Build {
    /// The table.
    pub table: String,
    /// The index being built.
    pub index: String,
    /// Rows with rowids up to this one are in the copy.
    pub copied_up_to: i64,
}

/// The build in progress on `table`, if any.
pub fn build(conn: &Connection, table: &str) -> Result<Option<Build>> {
    if !state_exists(conn)? {
        return Ok(None);
    }
    let row = conn
        .prepare_cached(&format!("SELECT idx, copied FROM {STATE} WHERE tbl = ?1"))?
        .query_row([table], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))
        .optional()?;
    Ok(row.map(|(index, copied_up_to)| Build { table: table.to_string(), index, copied_up_to }))
}

fn state_exists(conn: &Connection) -> Result<bool> {
    let n: i64 = conn
        .prepare_cached("SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?1")?
        .query_row([STATE], |r| r.get(0))?;
    Ok(n == 1)
}

/// The `CREATE TABLE` statement of `table` as SQLite keeps it.
fn table_sql(conn: &Connection, table: &str) -> Result<String> {
    conn.prepare_cached("SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = ?1")?
        .query_row([table], |r| r.get(0))
        .optional()?
        .ok_or_else(|| Error::InvalidArgument(format!("there is no table {table}")))
}

/// Replaces the first occurrence of the table name `table` (a whole word) in `sql` with `with`.
fn rename_in(sql: &str, table: &str, with: &str) -> Result<String> {
    let bytes = sql.as_bytes();
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut from = 0;
    while let Some(i) = sql[from..].find(table).map(|i| i + from) {
        let end = i + table.len();
        let quoted = i > 0 && matches!(bytes[i - 1], b'"' | b'`' | b'[');
        if (i == 0 || !word(bytes[i - 1]) || quoted) && (end == sql.len() || !word(bytes[end])) {
            return Ok(format!("{}{with}{}", &sql[..i], &sql[end..]));
        }
        from = end;
    }
    Err(Error::WrongResult(format!("no table name {table} in {sql}")))
}

/// The column names of `table`, in order.
fn columns(conn: &Connection, table: &str) -> Result<Vec<String>> {
    let mut stmt = conn.prepare(&format!("SELECT name FROM pragma_table_info('{table}') ORDER BY cid"))?;
    let names = stmt.query_map((), |r| r.get(0))?.collect::<rusqlite::Result<_>>()?;
    Ok(names)
}

/// Starts building the index of `create_index` (a `CREATE INDEX <name> ON <table>(...)`
/// statement) on `table` through a shadow copy, in one transaction: the copy, empty, with the
/// index; the build's row; the triggers. Nothing is copied yet.
pub fn start(conn: &mut Connection, table: &str, index: &str, create_index: &str) -> Result<Build> {
    let shadow = shadow_name(table);
    let create_table = rename_in(&table_sql(conn, table)?, table, &shadow)?;
    let create_shadow_index = rename_in(create_index, table, &shadow)?;
    let names = columns(conn, table)?;
    let cols = names.join(", ");
    let new_cols = names.iter().map(|c| format!("NEW.{c}")).collect::<Vec<_>>().join(", ");
    let copied = format!("(SELECT copied FROM {STATE} WHERE tbl = '{table}')");
    let tx = Tx::begin(conn)?;
    tx.execute_batch(&format!(
        "CREATE TABLE IF NOT EXISTS {STATE} (tbl TEXT PRIMARY KEY, idx TEXT NOT NULL, copied INTEGER NOT NULL);
         {create_table};
         {create_shadow_index};
         INSERT INTO {STATE} (tbl, idx, copied) VALUES ('{table}', '{index}', 0);
         CREATE TRIGGER stablebench_shadow_{table}_insert AFTER INSERT ON {table}
             WHEN NEW.rowid <= {copied}
             BEGIN INSERT INTO {shadow} (rowid, {cols}) VALUES (NEW.rowid, {new_cols}); END;
         CREATE TRIGGER stablebench_shadow_{table}_update AFTER UPDATE ON {table}
             BEGIN
                 DELETE FROM {shadow} WHERE rowid = OLD.rowid;
                 INSERT INTO {shadow} (rowid, {cols}) SELECT NEW.rowid, {new_cols} WHERE NEW.rowid <= {copied};
             END;
         CREATE TRIGGER stablebench_shadow_{table}_delete AFTER DELETE ON {table}
             BEGIN DELETE FROM {shadow} WHERE rowid = OLD.rowid; END;"
    ))?;
    tx.commit()?;
    Ok(Build { table: table.to_string(), index: index.to_string(), copied_up_to: 0 })
}

/// What one call of [`resume`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resumed {
    /// The build's position after the call (None once swapped in).
    pub build: Option<Build>,
    /// Rows copied by this call.
    pub copied: u64,
}

/// The statement copying rows `?1 < rowid <= ?2` of `table` into its shadow copy.
fn copy_sql(conn: &Connection, table: &str) -> Result<String> {
    let cols = columns(conn, table)?.join(", ");
    let shadow = shadow_name(table);
    Ok(format!(
        "INSERT INTO {shadow} (rowid, {cols}) SELECT rowid, {cols} FROM {table} WHERE rowid > ?1 AND rowid <= ?2"
    ))
}

/// Continues the build on `table`. A call that finds at most one window left to copy swaps the
/// copy in (copying those rows in the swap's own transaction, so that rows written between calls
/// cannot put the swap off forever), with the whole budget for the swap's DROP TABLE; any other
/// call copies windows until `meter` runs out or the copy has reached the table's last rowid
/// (one transaction). Returns where it stands.
pub fn resume(conn: &mut Connection, build: &Build, meter: &dyn Meter) -> Result<Resumed> {
    let table = build.table.as_str();
    let last = last_rowid(conn, table)? as i64;
    if last - build.copied_up_to <= COPY_WINDOW {
        let copied = swap(conn, table, build.copied_up_to, last)?;
        return Ok(Resumed { build: None, copied });
    }
    let tx = Tx::begin(conn)?;
    let (mut at, mut copied) = (build.copied_up_to, 0u64);
    {
        let mut copy = tx.prepare_cached(&copy_sql(&tx, table)?)?;
        while at < last && !meter.exhausted() {
            let upto = at.saturating_add(COPY_WINDOW).min(last);
            copied += copy.execute((at, upto))? as u64;
            at = upto;
        }
    }
    tx.prepare_cached(&format!("UPDATE {STATE} SET copied = ?1 WHERE tbl = ?2"))?.execute((at, table))?;
    tx.commit()?;
    Ok(Resumed { build: Some(Build { copied_up_to: at, ..build.clone() }), copied })
}

/// The last rowid of `table` (0 when empty).
pub fn last_rowid(conn: &Connection, table: &str) -> Result<u64> {
    let last: i64 =
        conn.prepare_cached(&format!("SELECT coalesce(max(rowid), 0) FROM {table}"))?.query_row((), |r| r.get(0))?;
    Ok(last as u64)
}

/// Whether another table's foreign key refers to `table`.
fn is_referenced(conn: &Connection, table: &str) -> Result<bool> {
    let n: i64 = conn
        .prepare(
            "SELECT count(*) FROM sqlite_schema AS s, pragma_foreign_key_list(s.name) AS f \
             WHERE s.type = 'table' AND f.\"table\" = ?1 AND s.name <> ?1",
        )?
        .query_row([table], |r| r.get(0))?;
    Ok(n > 0)
}

/// Copies the rows of `table` with rowids `after < rowid <= last` and replaces the table by its
/// now complete copy, in one transaction (see the module documentation); returns the rows copied.
fn swap(conn: &mut Connection, table: &str, after: i64, last: i64) -> Result<u64> {
    let shadow = shadow_name(table);
    let fk_off = is_referenced(conn, table)? && conn.query_row("PRAGMA foreign_keys", (), |r| r.get::<_, i64>(0))? == 1;
    if fk_off {
        conn.execute_batch("PRAGMA foreign_keys = OFF")?;
    }
    let swapped = (|| -> Result<u64> {
        let tx = Tx::begin(conn)?;
        let copied = tx.prepare_cached(&copy_sql(&tx, table)?)?.execute((after, last))? as u64;
        tx.execute_batch(&format!(
            "DROP TRIGGER stablebench_shadow_{table}_insert;
             DROP TRIGGER stablebench_shadow_{table}_update;
             DROP TRIGGER stablebench_shadow_{table}_delete;
             UPDATE sqlite_sequence SET seq = (SELECT seq FROM sqlite_sequence WHERE name = '{table}')
                 WHERE name = '{shadow}' AND EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = '{table}');
             INSERT INTO sqlite_sequence (name, seq)
                 SELECT '{shadow}', seq FROM sqlite_sequence WHERE name = '{table}'
                 AND NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = '{shadow}');
             DROP TABLE {table};
             ALTER TABLE {shadow} RENAME TO {table};
             DELETE FROM {STATE} WHERE tbl = '{table}';"
        ))?;
        tx.commit()?;
        Ok(copied)
    })();
    if fk_off {
        conn.execute_batch("PRAGMA foreign_keys = ON")?;
    }
    swapped
}
