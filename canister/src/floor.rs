//! Floors of the per-call table (benchmark canister only): an endpoint's SQL statement alone in a
//! minimal message, as the smallest canister doing the same work would run it: plain Candid
//! arguments and a `nat64` reply (the rows changed or read; its type table kept, as the
//! endpoints keep theirs), the controller check every write needs, the statement from rusqlite's
//! statement cache (`floor_sql`, like `query_sql`, prepares the caller's statement in every
//! call), one step per row, autocommit. No budget, no schema check, no resume bookkeeping, no progress handler, no
//! `Result` in the reply: a failure traps (this is a benchmark, not an API). The difference
//! between an endpoint and its floor is what those cost: `runner/tests/endpoints.rs` and
//! `runner/tests/per_call.rs` measure both on this wasm, call for call on the same database,
//! after [`floor_warm`] has prepared what the production canister prepares for its queries.

use stablebench::generate::{order_amount, order_user_id, write_user};
use stablebench::jobs::{DELETE_WINDOW, DELETE_WINDOW_SQL};
use stablebench::query::{LIST_ORDERS, LIST_USERS};
use stablebench::workload::{INSERT_ORDER, INSERT_USER};

use crate::db::rusqlite::{self, types::Value};
use crate::{db, require_controller};

fn controller_only() {
    if require_controller().is_err() {
        ic_cdk::trap("floors are for controllers only");
    }
}

/// Replies with the value, through the kept Candid type table as the endpoints do
/// (`stablebench_grid::reply`), or traps with the error.
fn or_trap<T: candid::CandidType + 'static>(r: stablebench::Result<T>) -> T {
    crate::send(r.unwrap_or_else(|e| ic_cdk::trap(format!("floor: {e}"))))
}

/// Steps `sql`, from rusqlite's statement cache, to its end, reading every column of every row;
/// returns the rows.
fn count_rows(conn: &rusqlite::Connection, sql: &str, params: &[&dyn rusqlite::ToSql]) -> stablebench::Result<u64> {
    let mut stmt = conn.prepare_cached(sql)?;
    step_all(&mut stmt, params)
}

/// Steps a prepared statement to its end, reading every column of every row; returns the rows.
fn step_all(stmt: &mut rusqlite::Statement, params: &[&dyn rusqlite::ToSql]) -> stablebench::Result<u64> {
    let columns = stmt.column_count();
    let mut rows = stmt.query(params)?;
    let mut n = 0;
    while let Some(row) = rows.next()? {
        for i in 0..columns {
            let _: Value = row.get(i)?;
        }
        n += 1;
    }
    Ok(n)
}

/// Prepares what the production canister's `init` and `post_upgrade` prepare for its queries (the
/// statements of `stats`, `list_users` and `list_orders`, the query replies' Candid type tables),
/// which this canister skips so that its benchmarks start from the heap of canbench's fresh
/// canister: after it, an endpoint and its floor measured on this wasm find the same prepared
/// statements as the production canister's calls. Controllers only.
#[ic_cdk::update]
fn floor_warm() {
    controller_only();
    stablebench_grid::reply::warm::<u64>();
    crate::warm_query_statements();
    crate::warm_query_replies();
}

/// `add_users(id - 1, 1)`'s statement: `INSERT_USER` of `user{id}`, `user{id}@example.com`.
#[ic_cdk::update(manual_reply = true)]
fn floor_insert_user(id: u64) -> u64 {
    controller_only();
    let (mut name, mut mail) = (String::new(), String::new());
    write_user(&mut name, &mut mail, id);
    or_trap(db::with_conn(|conn| Ok(conn.prepare_cached(INSERT_USER)?.execute((&name, &mail))? as u64)))
}

/// `add_orders(index, 1)`'s statement: `INSERT_ORDER` of generator index `index` over `users`.
#[ic_cdk::update(manual_reply = true)]
fn floor_insert_order(index: u64, users: u64) -> u64 {
    controller_only();
    let user_id = order_user_id(index, users);
    or_trap(db::with_conn(|conn| {
        Ok(conn.prepare_cached(INSERT_ORDER)?.execute((user_id as i64, order_amount(user_id)))? as u64)
    }))
}

/// `delete_orders(max_user_id, opt after)`'s statement when one window remains:
/// `DELETE_WINDOW_SQL` over order ids `after + 1 ..= upto` (at most `DELETE_WINDOW` ids).
#[ic_cdk::update(manual_reply = true)]
fn floor_delete_window(after: u64, upto: u64, max_user_id: u64) -> u64 {
    controller_only();
    let upto = upto.min(after.saturating_add(DELETE_WINDOW));
    or_trap(db::with_conn(|conn| {
        Ok(conn.prepare_cached(DELETE_WINDOW_SQL)?.execute((after as i64, upto as i64, max_user_id as i64))? as u64)
    }))
}

/// `list_users(after, limit)`'s statement, `LIST_USERS` (`limit + 1` rows asked, as the
/// endpoint does); returns the rows read.
#[ic_cdk::query(manual_reply = true)]
fn floor_list_users(after: u64, limit: u32) -> u64 {
    or_trap(db::with_conn(|conn| count_rows(conn, LIST_USERS, &[&(after as i64), &(i64::from(limit) + 1)])))
}

/// `list_orders(after, limit)`'s statement, `LIST_ORDERS`, the same way.
#[ic_cdk::query(manual_reply = true)]
fn floor_list_orders(after: u64, limit: u32) -> u64 {
    or_trap(db::with_conn(|conn| count_rows(conn, LIST_ORDERS, &[&(after as i64), &(i64::from(limit) + 1)])))
}

/// `query_sql(sql)`'s work: the caller's statement, every column of every row read as a value;
/// returns the rows. Controllers only (raw SQL).
#[ic_cdk::query(manual_reply = true)]
fn floor_sql(sql: String) -> u64 {
    controller_only();
    // Prepared in every call, as `query_sql` does: each call's SQL is its own.
    or_trap(db::with_conn(|conn| {
        let mut stmt = conn.prepare(&sql)?;
        step_all(&mut stmt, &[])
    }))
}

/// The key-value layout of `kv_put`/`kv_get` on `sqlite` (`rowid` false) or `sqlite_rowid`.
fn kv_layout(rowid: bool) -> stablebench::kv::sqlite::Layout {
    use stablebench::kv::sqlite::Layout;
    if rowid {
        Layout::Rowid
    } else {
        Layout::WithoutRowid
    }
}

/// `kv_put(sqlite | sqlite_rowid, key, value)`'s statement: the layout's upsert of one key in
/// autocommit, as `SqliteKv::put` runs it (the table must exist: `kv_load` creates it).
#[ic_cdk::update(manual_reply = true)]
fn floor_kv_put(rowid: bool, key: serde_bytes::ByteBuf, value: serde_bytes::ByteBuf) -> u64 {
    controller_only();
    or_trap(db::with_conn(|conn| {
        Ok(conn.prepare_cached(kv_layout(rowid).put_sql())?.execute((&key[..], &value[..]))? as u64)
    }))
}

/// `kv_get(sqlite | sqlite_rowid, key)`'s statement, the layout's lookup; returns the rows read.
#[ic_cdk::query(manual_reply = true)]
fn floor_kv_get(rowid: bool, key: serde_bytes::ByteBuf) -> u64 {
    or_trap(db::with_conn(|conn| count_rows(conn, kv_layout(rowid).get_sql(), &[&&key[..]])))
}
