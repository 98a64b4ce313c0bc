//! An index too large for one call is built through a shadow copy of its table (`shadow`),
//! across calls, while the table keeps changing: at the end the table holds exactly what the same
//! writes give without a build in progress, the index exists and is used, and nothing of the
//! build is left. Against native SQLite with a meter that runs out after a few checks.

mod common;
use common::Checks;

use rusqlite::Connection;
use stablebench::jobs::{self, IndexProgress};
use stablebench::schema::{self, index_names};
use stablebench::shadow;
use stablebench::{NoLimit, Result};

fn db(users: u64, orders: u64) -> Result<Connection> {
    let mut c = Connection::open_in_memory()?;
    c.execute_batch("PRAGMA page_size = 4096; PRAGMA foreign_keys = ON")?;
    schema::create_schema(&mut c)?;
    jobs::load_users(&mut c, 0, users, &NoLimit)?;
    jobs::load_orders(&mut c, 0, orders, &NoLimit)?;
    Ok(c)
}

/// Everything a user could read: both tables' rows (without the clock column) and the
/// AUTOINCREMENT positions.
fn contents(c: &Connection) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for sql in [
        "SELECT user_id || ',' || username || ',' || email FROM users ORDER BY user_id",
        "SELECT order_id || ',' || user_id || ',' || amount FROM orders ORDER BY order_id",
        "SELECT name || ',' || seq FROM sqlite_sequence ORDER BY name",
    ] {
        let mut stmt = c.prepare(sql)?;
        out.extend(stmt.query_map((), |r| r.get::<_, String>(0))?.collect::<rusqlite::Result<Vec<_>>>()?);
    }
    Ok(out)
}

/// The writes a canister might serve between two calls of the build: the `round`-th.
fn writes(c: &mut Connection, round: u64, kept: &mut Option<u64>) -> Result<()> {
    // New orders (ids past everything copied so far), a delete that reaches copied and uncopied
    // rows, an update of an early (copied) row and of a late one.
    let next = stablebench::workload::next_offset(c, stablebench::workload::Table::Orders)?;
    jobs::load_orders(c, next, 700, &NoLimit)?;
    jobs::delete_orders_of_users(c, kept, 2 + round, 0, &NoLimit)?;
    c.execute(
        "UPDATE orders SET amount = amount + 1 WHERE order_id IN (?1, ?2)",
        (3 + round as i64, 29_000 - round as i64),
    )?;
    let users = stablebench::counts::users(c)?;
    jobs::load_users(c, users, 5, &NoLimit)?;
    Ok(())
}

fn leftovers(c: &Connection) -> Result<i64> {
    Ok(c.query_row("SELECT count(*) FROM sqlite_schema WHERE name LIKE 'stablebench_shadow%'", (), |r| r.get(0))?)
}

/// Runs `create_indexes` call after call (each repeated once, as after a lost reply), with the
/// writes of a round between calls, on `c`; returns the progress of every call.
fn build_with_writes(c: &mut Connection, meter: &Checks, kept: &mut Option<u64>) -> Result<Vec<IndexProgress>> {
    let mut calls = Vec::new();
    for round in 0..100 {
        let p = jobs::create_indexes(c, meter.call())?;
        let again = jobs::create_indexes(c, meter.call())?;
        calls.push(p);
        calls.push(again.clone());
        if again.complete {
            return Ok(calls);
        }
        writes(c, round, kept)?;
    }
    panic!("the build did not finish in 100 rounds; the last call: {:?}", calls.last());
}

#[test]
fn an_index_too_large_for_a_call_is_built_across_calls_while_the_table_changes() -> Result<()> {
    let (mut c, mut model) = (db(1_000, 30_000)?, db(1_000, 30_000)?);
    let (mut kept, mut model_kept) = (None, None);
    // Three checks per call: the users' index fits, the orders' needs a shadow copy.
    let calls = build_with_writes(&mut c, &Checks::new(3), &mut kept)?;
    let builds: Vec<_> = calls.iter().filter_map(|p| p.building.clone()).collect();
    assert!(builds.iter().any(|b| b.index == "idx_orders_user_id" && b.copied_up_to > 0), "{calls:?}");
    assert!(builds.iter().all(|b| b.copied_up_to <= b.last_rowid && b.table == "orders"));
    // While it was being built, the index was not reported.
    assert!(calls.iter().all(|p| p.complete || p.remaining.contains(&"idx_orders_user_id".to_string())));
    // The same writes without a build, then the one-statement index.
    let rounds = calls.len() as u64 / 2 - 1;
    for round in 0..rounds {
        writes(&mut model, round, &mut model_kept)?;
    }
    schema::create_indexes(&mut model)?;
    assert_eq!(contents(&c)?, contents(&model)?);
    assert_eq!(kept, model_kept);
    assert_eq!(index_names(&c)?, vec!["idx_orders_user_id", "idx_users_email"]);
    let plan: String = c.query_row("EXPLAIN QUERY PLAN SELECT * FROM orders WHERE user_id = 5", (), |r| r.get(3))?;
    assert!(plan.contains("idx_orders_user_id"), "{plan}");
    assert_eq!(leftovers(&c)?, 0);
    let ok: String = c.query_row("PRAGMA integrity_check", (), |r| r.get(0))?;
    assert_eq!(ok, "ok");
    Ok(())
}

#[test]
fn a_build_finishes_while_rows_arrive_between_every_call() -> Result<()> {
    let (mut c, mut model) = (db(1_000, 30_000)?, db(1_000, 30_000)?);
    let (mut kept, mut model_kept) = (None, None);
    let meter = Checks::new(3);
    // A write before every call, none back to back: the swap copies the rows that arrived since
    // the last window in its own transaction instead of waiting for a call with nothing to copy.
    for round in 0.. {
        assert!(round < 100, "the build did not finish with writes between every call");
        writes(&mut c, round, &mut kept)?;
        writes(&mut model, round, &mut model_kept)?;
        if jobs::create_indexes(&mut c, meter.call())?.complete {
            break;
        }
    }
    schema::create_indexes(&mut model)?;
    assert_eq!(contents(&c)?, contents(&model)?);
    assert_eq!(index_names(&c)?, vec!["idx_orders_user_id", "idx_users_email"]);
    assert_eq!(leftovers(&c)?, 0);
    Ok(())
}

#[test]
fn a_parent_table_keeps_its_foreign_keys_through_the_swap() -> Result<()> {
    let mut c = db(30_000, 1_000)?;
    // Two checks per call: even the users' index needs a shadow copy (one window per call).
    let calls = build_with_writes(&mut c, &Checks::new(2), &mut None)?;
    assert!(calls.iter().any(|p| p.building.as_ref().is_some_and(|b| b.table == "users")), "{calls:?}");
    assert_eq!(index_names(&c)?, vec!["idx_orders_user_id", "idx_users_email"]);
    assert_eq!(c.query_row("PRAGMA foreign_keys", (), |r| r.get::<_, i64>(0))?, 1);
    let violations: i64 = c.query_row("SELECT count(*) FROM pragma_foreign_key_check", (), |r| r.get(0))?;
    assert_eq!(violations, 0);
    let orphan = c.execute("INSERT INTO orders (user_id, amount) VALUES (999999999, 1.0)", ());
    assert!(orphan.is_err(), "the foreign key still holds");
    let fk: String = c.query_row("SELECT sql FROM sqlite_schema WHERE name = 'orders'", (), |r| r.get(0))?;
    assert!(fk.contains("REFERENCES users(user_id)"), "{fk}");
    assert_eq!(leftovers(&c)?, 0);
    Ok(())
}

#[test]
fn a_build_in_progress_survives_a_reopened_connection() -> Result<()> {
    let dir = std::env::temp_dir().join(format!("stablebench-index-build-{}", std::process::id()));
    let _ = std::fs::remove_file(&dir);
    {
        let mut c = Connection::open(&dir)?;
        c.execute_batch("PRAGMA foreign_keys = ON")?;
        schema::create_schema(&mut c)?;
        jobs::load_users(&mut c, 0, 1_000, &NoLimit)?;
        jobs::load_orders(&mut c, 0, 30_000, &NoLimit)?;
        // The first call creates the users' index and stops; the second starts the copy.
        let meter = Checks::new(3);
        let first = jobs::create_indexes(&mut c, meter.call())?;
        assert_eq!((first.created, first.building), (vec!["idx_users_email".to_string()], None));
        let p = jobs::create_indexes(&mut c, meter.call())?;
        assert!(p.building.as_ref().is_some_and(|b| b.copied_up_to < b.last_rowid), "{p:?}");
    }
    // As after an upgrade: a new connection continues from what was committed.
    let mut c = Connection::open(&dir)?;
    assert!(shadow::build(&c, "orders")?.is_some());
    // One call copies the rest; the next, which finds nothing left to copy, swaps the copy in.
    let p = jobs::create_indexes(&mut c, &NoLimit)?;
    assert!(p.building.as_ref().is_some_and(|b| b.copied_up_to == b.last_rowid && b.copied_rows > 0), "{p:?}");
    let p = jobs::create_indexes(&mut c, &NoLimit)?;
    assert!(p.complete && p.building.is_none() && p.created == ["idx_orders_user_id"], "{p:?}");
    assert_eq!(leftovers(&c)?, 0);
    std::fs::remove_file(&dir).expect("removing the test database");
    Ok(())
}
