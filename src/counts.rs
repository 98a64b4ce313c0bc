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
//!   count is the highest id minus the orders deleted, which the delete job adds up in the
//!   one-row table `stablebench_counts` in the transaction that deletes them: an interrupted or
//!   failed delete rolls its count back with its rows, and the loads write nothing extra. A
//!   database written before the table existed gets its row once, from `count(*)`, from the first
//!   delete that deletes something (or the upgrade, or `create_schema`) and finds it missing.
//!
//! Writes that bypass the jobs (the canbench benchmarks' own statements, a test's SQL) do not
//! keep the count: the canister has no endpoint that writes SQL directly, the benchmark
//! canister's live steps call [`forget`] after they write, and [`orders_or_count`] is exact
//! whenever the jobs are the only writers.

use rusqlite::Connection;

use crate::workload::{self, Table};
use crate::{Error, Result};

/// The table of kept counts: one row per count (`orders_deleted`).
pub const CREATE: &str = "CREATE TABLE IF NOT EXISTS stablebench_counts (\
    name TEXT PRIMARY KEY NOT NULL, \
    n INTEGER NOT NULL CHECK (n >= 0)\
) WITHOUT ROWID";

/// The number of users: the highest user id handed out (users are dense from 1 and never
/// deleted).
pub fn users(conn: &Connection) -> Result<u64> {
    workload::next_offset(conn, Table::Users)
}

/// The number of orders (the highest order id handed out, minus the orders deleted), or `None`
/// on a database whose deletes no job has counted yet.
pub fn orders(conn: &Connection) -> Result<Option<u64>> {
    // One statement, not a lookup in sqlite_schema first: a query's statements are prepared
    // anew in every call, and preparing is most of what this costs.
    let sql = "SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'orders'), 0) - n \
               FROM stablebench_counts WHERE name = 'orders_deleted'";
    // Cached: an update keeps it prepared for the next call (and for the queries after it).
    match conn.prepare_cached(sql).and_then(|mut s| s.query_row((), |r| r.get::<_, i64>(0))) {
        Ok(n) if n >= 0 => Ok(Some(n as u64)),
        Ok(n) => Err(Error::WrongResult(format!("{n} orders: more deleted than ever inserted"))),
        Err(rusqlite::Error::QueryReturnedNoRows) => Ok(None),
        Err(rusqlite::Error::SqliteFailure(_, Some(m))) if m.starts_with("no such table: stablebench_counts") => {
            Ok(None)
        }
        Err(e) => Err(e.into()),
    }
}

/// The number of orders, from [`orders`], else `count(*)` (a database no job has counted yet).
pub fn orders_or_count(conn: &Connection) -> Result<u64> {
    match orders(conn)? {
        Some(n) => Ok(n),
        None => workload::count_orders(conn),
    }
}

/// Makes sure the deleted orders are counted, counting the orders once with `count(*)` if no
/// job has. Returns the orders' count.
pub fn ensure_orders(conn: &Connection) -> Result<u64> {
    if let Some(n) = orders(conn)? {
        return Ok(n);
    }
    conn.execute(CREATE, ())?;
    let n = workload::count_orders(conn)?;
    let ids = workload::next_offset(conn, Table::Orders)?;
    let deleted = ids
        .checked_sub(n)
        .ok_or_else(|| Error::WrongResult(format!("{n} orders but ids only up to {ids}: the ids are not dense")))?;
    conn.execute("INSERT INTO stablebench_counts (name, n) VALUES ('orders_deleted', ?1)", [deleted as i64])?;
    Ok(n)
}

/// Adds `deleted` to the orders deleted, inside the transaction that deleted them, after the
/// deletes; on a database no job has counted yet it counts the orders instead (which includes
/// these deletes). Writes nothing when nothing was deleted.
pub fn orders_deleted(conn: &Connection, deleted: u64) -> Result<()> {
    if deleted == 0 {
        return Ok(());
    }
    let changed = match conn
        .prepare_cached("UPDATE stablebench_counts SET n = n + ?1 WHERE name = 'orders_deleted'")
        .and_then(|mut s| s.execute([deleted as i64]))
    {
        Ok(n) => n,
        Err(rusqlite::Error::SqliteFailure(_, Some(m))) if m.starts_with("no such table: stablebench_counts") => 0,
        Err(e) => return Err(e.into()),
    };
    if changed == 0 {
        ensure_orders(conn)?;
    }
    Ok(())
}

/// Forgets the kept count, so the next reader counts with `count(*)` and the next job counts
/// afresh: for writers that bypass the jobs (the benchmark canister's setup and measured steps).
pub fn forget(conn: &Connection) -> Result<()> {
    conn.execute("DROP TABLE IF EXISTS stablebench_counts", ())?;
    Ok(())
}

/// Counts the orders once if no job has yet, in a transaction of its own (the canister calls it
/// when it creates the schema and after an upgrade, under the progress-handler guard).
pub fn init(conn: &Connection) -> Result<u64> {
    if let Some(n) = orders(conn)? {
        return Ok(n);
    }
    let tx = conn.unchecked_transaction()?;
    let n = ensure_orders(&tx)?;
    tx.commit()?;
    Ok(n)
}
