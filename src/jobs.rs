//! Work that may exceed one message, split into calls that each stay under an instruction
//! budget, commit, and say where to continue. Every call is idempotent: repeating one (a retry
//! after a lost reply, or after an upgrade) never duplicates or loses rows.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rusqlite::Connection;

use crate::counts;
use crate::schema::{index_names, CREATE_INDEXES};
use crate::shadow;
use crate::tx::Tx;
use crate::workload::{self, next_offset, Table};
use crate::{Error, Meter, Result};

/// SQLite virtual-machine steps between two budget checks of the progress handler. A step is a
/// few dozen to a few hundred wasm instructions, so the budget is overshot by well under 10 M.
pub const PROGRESS_STEPS: i32 = 10_000;

/// Instructions a one-statement `CREATE INDEX` is assumed to need per row of its table, to decide
/// before starting it whether it fits the budget. SQLite sorts the keys inside one step of its
/// virtual machine, which the progress handler cannot interrupt: a build started without room
/// could run past the message's limit (and trap) instead of stopping at the budget. Measured: 4,410 to 5,566 per index
/// entry from 10k to 10M orders (`create_indexes` in `docs/scaling.md`), 4,843 to 5,803 on mainnet with the memory
/// tracker's page fees (`docs/mainnet.md`, "Scaling"; both 2026-11-26): this leaves a margin in both.
pub const INDEX_ROW_INSTRUCTIONS: u64 = 8_000;

/// Order ids covered by one DELETE statement of [`delete_orders_of_users`].
pub const DELETE_WINDOW: u64 = 10_000;

/// The statement [`delete_orders_of_users`] runs per window: `(after, upto, max_user_id)`.
pub const DELETE_WINDOW_SQL: &str = "DELETE FROM orders WHERE order_id > ?1 AND order_id <= ?2 AND user_id <= ?3";

pub use stablebench_grid::api::{Batch, Deleted, IndexBuild, IndexProgress};

/// Loads users `offset .. offset + count` (ids `offset + 1 ..`), continuing from the rows already
/// present: rows that exist are skipped, so repeating a call changes nothing. An offset past the
/// table's end would leave a gap in the ids and is refused.
pub fn load_users(conn: &mut Connection, offset: u64, count: u64, meter: &dyn Meter) -> Result<Batch> {
    load(conn, Table::Users, offset, count, meter, |conn, start, n| workload::insert_users(conn, start, n, meter))
}

/// Loads orders for generator indexes `offset .. offset + count`, spread over the users present,
/// with the same resumable, idempotent rules as [`load_users`]. The users are counted in constant
/// time ([`counts`]).
pub fn load_orders(conn: &mut Connection, offset: u64, count: u64, meter: &dyn Meter) -> Result<Batch> {
    let users = counts::users(conn)?;
    if users == 0 {
        return Err(Error::InvalidArgument("there are no users yet: load users first".into()));
    }
    load(conn, Table::Orders, offset, count, meter, |conn, start, n| {
        workload::insert_orders(conn, start, n, users, meter)
    })
}

fn load(
    conn: &mut Connection,
    table: Table,
    offset: u64,
    count: u64,
    meter: &dyn Meter,
    insert: impl FnOnce(&mut Connection, u64, u64) -> Result<u64>,
) -> Result<Batch> {
    if count == 0 {
        return Err(Error::InvalidArgument("count must be at least 1".into()));
    }
    let end = match offset.checked_add(count) {
        Some(end) if end <= i64::MAX as u64 => end,
        _ => {
            return Err(Error::InvalidArgument(format!(
                "offset + count exceeds {} (SQLite's largest row id)",
                i64::MAX
            )))
        }
    };
    let next = next_offset(conn, table)?;
    if offset > next {
        return Err(Error::InvalidArgument(format!(
            "offset {offset} is past the end of table {}: continue from offset {next}",
            table.name()
        )));
    }
    let start = next.max(offset);
    let inserted = if start < end { insert(conn, start, end - start)? } else { 0 };
    Ok(Batch { inserted, next_offset: start + inserted, complete: start + inserted >= end, instructions: meter.used() })
}

/// Runs `f` with SQLite's progress handler checking `meter`: a statement still running when the
/// budget is used up is interrupted (its transaction rolled back by the caller) and the call
/// fails with [`Error::InstructionLimit`] instead of the message trapping at the IC's limit.
pub fn guarded<M, T>(conn: &Connection, meter: &M, f: impl FnOnce() -> Result<T>) -> Result<T>
where
    M: Meter + Clone + Send + 'static,
{
    let tripped = Arc::new(AtomicBool::new(false));
    let (m, t) = (meter.clone(), tripped.clone());
    conn.progress_handler(
        PROGRESS_STEPS,
        Some(move || {
            let stop = m.exhausted();
            t.store(stop, Ordering::Relaxed);
            stop
        }),
    )?;
    let result = f();
    conn.progress_handler(0, None::<fn() -> bool>)?;
    match result {
        Err(Error::Sqlite(_)) if tripped.load(Ordering::Relaxed) => {
            Err(Error::InstructionLimit { rows_done: 0, budget: meter.budget() })
        }
        other => other,
    }
}

/// The index a `CREATE INDEX IF NOT EXISTS <name> ON <table>(...)` statement creates.
fn index_name(sql: &str) -> &str {
    sql.split_whitespace().nth(5).unwrap_or(sql)
}

/// The table of a `CREATE INDEX ... ON <table>(...)` statement.
fn index_table(sql: &str) -> &str {
    sql.split(" ON ").nth(1).and_then(|t| t.split('(').next()).map(str::trim).unwrap_or(sql)
}

/// Creates the missing indexes one statement (one transaction) at a time until `meter` runs
/// out; call again until `complete`. An index that alone needs more than the budget (sized
/// beforehand by [`INDEX_ROW_INSTRUCTIONS`] where the meter counts instructions, else found by
/// the statement being interrupted and rolled back) is built instead through a shadow copy of its
/// table, window by window over the next calls ([`shadow`]; `building` says how far it got);
/// the table serves reads and writes throughout. Repeating a call never does anything twice.
pub fn create_indexes<M: Meter + Clone + Send + 'static>(conn: &mut Connection, meter: &M) -> Result<IndexProgress> {
    let existing = index_names(conn)?;
    let (mut created, mut building) = (Vec::new(), None);
    for sql in CREATE_INDEXES {
        let (name, table) = (index_name(sql), index_table(sql));
        if existing.iter().any(|n| n == name) {
            continue;
        }
        if meter.exhausted() {
            break;
        }
        if let Some(build) = shadow::build(conn, table)? {
            let resumed = shadow::resume(conn, &build, meter)?;
            match resumed.build {
                None => created.push(name.to_string()),
                Some(b) => {
                    building = Some(progress(&b, resumed.copied, shadow::last_rowid(conn, table)?));
                    break;
                }
            }
            continue;
        }
        let rows = shadow::last_rowid(conn, table)?;
        if meter.remaining().is_some_and(|left| rows.saturating_mul(INDEX_ROW_INSTRUCTIONS) > left) {
            // Too large to try in one statement: through a shadow table, with a whole budget.
            if created.is_empty() {
                let b = shadow::start(conn, table, name, sql)?;
                // The copy goes on with what is left of this call's budget.
                let resumed = shadow::resume(conn, &b, meter)?;
                match resumed.build {
                    Some(b) => building = Some(progress(&b, resumed.copied, rows)),
                    None => created.push(name.to_string()),
                }
            }
            break;
        }
        let tx = Tx::begin(conn)?;
        match guarded(&tx, meter, || Ok(tx.execute(sql, ())?)) {
            Ok(_) => tx.commit()?,
            // The whole budget was not enough for the one statement: build it across calls.
            Err(Error::InstructionLimit { .. }) if created.is_empty() => {
                drop(tx);
                let b = shadow::start(conn, table, name, sql)?;
                building = Some(progress(&b, 0, shadow::last_rowid(conn, table)?));
                break;
            }
            Err(Error::InstructionLimit { .. }) => break,
            Err(e) => return Err(e),
        }
        created.push(name.to_string());
    }
    let remaining: Vec<String> = CREATE_INDEXES
        .iter()
        .map(|s| index_name(s).to_string())
        .filter(|n| !existing.contains(n) && !created.contains(n))
        .collect();
    Ok(IndexProgress { complete: remaining.is_empty(), created, remaining, building, instructions: meter.used() })
}

fn progress(b: &shadow::Build, copied_rows: u64, last_rowid: u64) -> IndexBuild {
    IndexBuild {
        index: b.index.clone(),
        table: b.table.clone(),
        copied_up_to: b.copied_up_to as u64,
        last_rowid: last_rowid.max(b.copied_up_to as u64),
        copied_rows,
    }
}

/// Deletes the orders of users `1 ..= max_user_id` with ids above `from_order_id`, one window of
/// [`DELETE_WINDOW`] order ids per statement, until the last order or until `meter` runs out,
/// in one transaction; call again from `next_order_id` until `complete`. A window's cost is
/// bounded (at most that many rows are visited), so the budget is checked between windows and
/// no statement has to be interrupted (an interrupt would roll back the whole transaction).
/// Repeating a call deletes nothing more. `kept` gets the orders deleted once the transaction
/// has committed ([`counts`]).
pub fn delete_orders_of_users(
    conn: &mut Connection,
    kept: &mut dyn counts::Kept,
    max_user_id: u64,
    from_order_id: u64,
    meter: &dyn Meter,
) -> Result<Deleted> {
    for (what, v) in [("max_user_id", max_user_id), ("from_order_id", from_order_id)] {
        if v > i64::MAX as u64 {
            return Err(Error::InvalidArgument(format!("{what} must be at most {}", i64::MAX)));
        }
    }
    let tx = Tx::begin(conn)?;
    let last: i64 = tx.prepare_cached("SELECT coalesce(max(order_id), 0) FROM orders")?.query_row((), |r| r.get(0))?;
    let (mut after, mut deleted) = (from_order_id as i64, 0u64);
    {
        let mut delete = tx.prepare_cached(DELETE_WINDOW_SQL)?;
        while after < last && !meter.exhausted() {
            let upto = after.saturating_add(DELETE_WINDOW as i64).min(last);
            deleted += delete.execute((after, upto, max_user_id as i64))? as u64;
            after = upto;
        }
    }
    // Counted inside the transaction (a database no job has counted yet is counted here, and a
    // failure rolls the deletes back too), kept once it has committed.
    let mut counted = kept.deleted();
    counts::orders_deleted(&tx, &mut counted, deleted)?;
    tx.commit()?;
    kept.set_deleted(counted);
    let next_order_id = after.max(from_order_id as i64) as u64;
    Ok(Deleted { deleted, next_order_id, complete: after >= last, instructions: meter.used() })
}
