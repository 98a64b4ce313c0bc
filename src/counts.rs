//! Row counts that cost the same at any table size.
//!
//! `SELECT count(*)` visits every leaf page of a table (at 1.8 M users it cost about 300 M
//! instructions warm and 1.59 B right after an upgrade), so a `stats` query that counts stops
//! fitting a query's budget past some tens of millions of rows, and a load that counts the users
//! on every call grows with them. Instead:
//!
//! - **users** are never deleted, and the loads give them dense ids from 1 (a load that would
//!   leave a gap is refused), so their count is the highest id AUTOINCREMENT handed out, kept
//!   by SQLite in `sqlite_sequence`: one lookup in a table of two rows.
//! - **orders** are counted by the jobs that insert and delete them, in the same transaction, in
//!   the one-row table `stablebench_counts`: a failed or interrupted job rolls its count back
//!   with its rows. A database written before the table existed is counted once, with
//!   `count(*)`, by the first job (or upgrade) that finds the row missing.
//!
//! Writes that bypass the jobs (the canbench benchmarks' own statements, a test's SQL) do not
//! keep the count: the canister has no endpoint that writes SQL directly, the benchmark
//! canister's live steps call [`forget`] after they write, and [`orders_or_count`] is exact
//! whenever the jobs are the only writers.

use rusqlite::Connection;

use crate::workload::{self, Table};
use crate::{Error, Result};

/// The table of maintained counts: one row per counted table.
pub const CREATE: &str = "CREATE TABLE IF NOT EXISTS stablebench_counts (\
    name TEXT PRIMARY KEY NOT NULL, \
    n INTEGER NOT NULL CHECK (n >= 0)\
) WITHOUT ROWID";

/// The number of users: the highest user id handed out (users are dense from 1 and never
/// deleted).
pub fn users(conn: &Connection) -> Result<u64> {
    workload::next_offset(conn, Table::Users)
}

/// The maintained number of orders, or `None` on a database no job has counted yet.
pub fn orders(conn: &Connection) -> Result<Option<u64>> {
    // One statement, not a lookup in sqlite_schema first: a query's statements are prepared
    // anew in every call, and preparing is most of what this costs.
    match conn.query_row("SELECT n FROM stablebench_counts WHERE name = 'orders'", (), |r| r.get::<_, i64>(0)) {
        Ok(n) => Ok(Some(n as u64)),
        Err(rusqlite::Error::QueryReturnedNoRows) => Ok(None),
        Err(rusqlite::Error::SqliteFailure(_, Some(m))) if m.starts_with("no such table: stablebench_counts") => {
            Ok(None)
        }
        Err(e) => Err(e.into()),
    }
}

/// The maintained number of orders, else `count(*)` (a database no job has counted yet).
pub fn orders_or_count(conn: &Connection) -> Result<u64> {
    match orders(conn)? {
        Some(n) => Ok(n),
        None => workload::count_orders(conn),
    }
}

/// Makes sure the orders are counted, counting them once with `count(*)` if no job has: call it
/// inside the transaction that then changes the orders. Returns the count.
pub fn ensure_orders(conn: &Connection) -> Result<u64> {
    if let Some(n) = orders(conn)? {
        return Ok(n);
    }
    conn.execute(CREATE, ())?;
    let n = workload::count_orders(conn)?;
    conn.execute("INSERT INTO stablebench_counts (name, n) VALUES ('orders', ?1)", [n as i64])?;
    Ok(n)
}

/// Adds `delta` (negative for deletes) to the orders' count, inside the transaction that
/// inserted or deleted them, after [`ensure_orders`].
pub fn add_orders(conn: &Connection, delta: i64) -> Result<()> {
    let changed = conn.execute("UPDATE stablebench_counts SET n = n + ?1 WHERE name = 'orders'", [delta])?;
    if changed != 1 {
        return Err(Error::WrongResult("the orders' count is missing: counts::ensure_orders was not called".into()));
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
    let tx = conn.unchecked_transaction()?;
    let n = ensure_orders(&tx)?;
    tx.commit()?;
    Ok(n)
}
