//! Row counts that cost the same at any table size.
//!
//! `SELECT count(*)` visits every leaf page of a table (at 1.8 M users it cost about 300 M
//! instructions warm and 1.59 B right after an upgrade), so a `stats` query that counts stops
//! fitting a query's budget past some tens of millions of rows, and a load that counts the users
//! on every call grows with them. Instead, both counts come from the highest id SQLite's
//! AUTOINCREMENT handed out (kept in `sqlite_sequence`, one lookup in a table of two rows):
//!
//! - **users** are never deleted, and the loads give them dense ids from 1 (a load that would
//!   leave a gap is refused), so their count is that highest id.
//! - **orders** get dense ids from 1 the same way, and only the delete job removes any, so their
//!   count is the highest id minus the orders deleted. The delete job adds those up in a
//!   [`Kept`] count **outside the database**, right after the transaction that deleted them
//!   commits. The canister keeps it in a `StableCell` (its own virtual memory of stable memory):
//!   an 8-byte write there costs a few thousand instructions, where a row in a table of the
//!   database costs a page journaled and written back at commit, about 25,000 (measured, README
//!   "One call of every endpoint"). Both stay consistent because the IC makes a message atomic:
//!   if the commit fails the count is not touched, and if the message traps after it, the
//!   database's pages and the cell are rolled back together. A database no job has counted yet
//!   (written by an earlier version, or by a writer that bypasses the jobs) is counted once with
//!   `count(*)`, by the upgrade or by the first delete that deletes something.
//!
//! Writes that bypass the jobs (the canbench benchmarks' own statements, a test's SQL) do not
//! keep the count: the canister has no endpoint that writes SQL directly, the benchmark
//! canister's live steps call [`Kept::forget`] after they write, and [`orders_or_count`] is
//! exact whenever the jobs are the only writers.

use rusqlite::Connection;

use crate::tx::Tx;
use crate::workload::{self, Table};
use crate::{Error, Result};

/// The table an earlier version kept the deleted orders' count in (`name = 'orders_deleted'`):
/// [`init`] moves its count to the [`Kept`] count and drops it.
pub const LEGACY_TABLE: &str = "stablebench_counts";

/// Where the number of orders deleted by the jobs is kept, next to the database.
pub trait Kept {
    /// The orders deleted so far, or `None` if nothing has counted them.
    fn deleted(&self) -> Option<u64>;
    /// Sets the count (`None`: not counted, the next reader counts with `count(*)`).
    fn set_deleted(&mut self, deleted: Option<u64>);
    /// Forgets the count, so the next reader counts with `count(*)` and the next job counts
    /// afresh: for writers that bypass the jobs (the benchmark canister's setup and steps).
    fn forget(&mut self) {
        self.set_deleted(None);
    }
}

/// A count kept in memory: for native use and tests (the canister keeps it in stable memory).
impl Kept for Option<u64> {
    fn deleted(&self) -> Option<u64> {
        *self
    }
    fn set_deleted(&mut self, deleted: Option<u64>) {
        *self = deleted;
    }
}

/// The number of users: the highest user id handed out (users are dense from 1 and never
/// deleted).
pub fn users(conn: &Connection) -> Result<u64> {
    workload::next_offset(conn, Table::Users)
}

/// The number of orders (the highest order id handed out, minus the orders deleted), or `None`
/// if no job has counted the deleted orders yet.
pub fn orders(conn: &Connection, kept: &dyn Kept) -> Result<Option<u64>> {
    let Some(deleted) = kept.deleted() else { return Ok(None) };
    let ids = workload::next_offset(conn, Table::Orders)?;
    match ids.checked_sub(deleted) {
        Some(n) => Ok(Some(n)),
        None => Err(Error::WrongResult(format!(
            "{deleted} orders deleted but only {ids} ever inserted: the kept count does not belong to this database"
        ))),
    }
}

/// The number of orders, from [`orders`], else `count(*)` (a database no job has counted yet).
pub fn orders_or_count(conn: &Connection, kept: &dyn Kept) -> Result<u64> {
    match orders(conn, kept)? {
        Some(n) => Ok(n),
        None => workload::count_orders(conn),
    }
}

/// Makes sure the deleted orders are counted: if no job has, takes the count an earlier version
/// kept in [`LEGACY_TABLE`] (and drops that table), else counts the orders once with
/// `count(*)`. Returns the orders' count. Call it where a failure changes nothing (in a
/// transaction, or before any write).
pub fn ensure_orders(conn: &Connection, kept: &mut dyn Kept) -> Result<u64> {
    if let Some(n) = orders(conn, kept)? {
        return Ok(n);
    }
    let ids = workload::next_offset(conn, Table::Orders)?;
    let deleted = match legacy_deleted(conn)? {
        Some(deleted) => deleted,
        None => {
            let n = workload::count_orders(conn)?;
            ids.checked_sub(n).ok_or_else(|| {
                Error::WrongResult(format!("{n} orders but ids only up to {ids}: the ids are not dense"))
            })?
        }
    };
    conn.execute(&format!("DROP TABLE IF EXISTS {LEGACY_TABLE}"), ())?;
    kept.set_deleted(Some(deleted));
    orders(conn, kept)?.ok_or_else(|| Error::WrongResult("the count was just set".into()))
}

/// The count of deleted orders an earlier version kept in [`LEGACY_TABLE`], if there is one.
fn legacy_deleted(conn: &Connection) -> Result<Option<u64>> {
    let sql = format!("SELECT n FROM {LEGACY_TABLE} WHERE name = 'orders_deleted'");
    match conn.query_row(&sql, (), |r| r.get::<_, i64>(0)) {
        Ok(n) => Ok(Some(u64::try_from(n).map_err(|_| Error::WrongResult(format!("{n} orders deleted")))?)),
        Err(rusqlite::Error::QueryReturnedNoRows) => Ok(None),
        Err(rusqlite::Error::SqliteFailure(_, Some(m))) if m.starts_with("no such table") => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Adds `deleted` to the orders deleted in `kept`, inside the transaction that deleted them
/// (the delete job passes its own copy of the count and keeps it once the transaction has
/// committed); on a database no job has counted yet it counts the orders instead (which
/// includes these deletes). Changes nothing when nothing was deleted.
pub fn orders_deleted(conn: &Connection, kept: &mut dyn Kept, deleted: u64) -> Result<()> {
    if deleted == 0 {
        return Ok(());
    }
    match kept.deleted() {
        Some(before) => kept.set_deleted(Some(before + deleted)),
        None => {
            ensure_orders(conn, kept)?;
        }
    }
    Ok(())
}

/// Counts the orders once if no job has yet, in a transaction of its own (the canister calls it
/// when it creates the schema and after an upgrade, under the progress-handler guard): a guard
/// that stops the count leaves the database and the count as they were.
pub fn init(conn: &Connection, kept: &mut dyn Kept) -> Result<u64> {
    if let Some(n) = orders(conn, kept)? {
        return Ok(n);
    }
    let mut counted = None;
    let tx = Tx::begin_unchecked(conn)?;
    let n = ensure_orders(&tx, &mut counted)?;
    tx.commit()?;
    kept.set_deleted(counted);
    Ok(n)
}
