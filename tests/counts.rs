//! The maintained row counts against `count(*)` (the model): after any sequence of budgeted
//! loads, retries, deletes and failed calls, `stats`' counts are exact.

mod common;
use common::Checks;

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use rusqlite::Connection;
use stablebench::workload::{self, count_orders, count_users, Table};
use stablebench::{counts, jobs, schema, Error, NoLimit, Result};

fn checks(n: u32) -> Checks {
    Checks::new(n)
}

fn db() -> Result<Connection> {
    let mut c = Connection::open_in_memory()?;
    schema::create_schema(&mut c)?;
    Ok(c)
}

/// One call as the canister's endpoints make it.
#[derive(Clone, Debug)]
enum Call {
    /// `add_users` from `back` rows before the end (a retry when `back` > 0).
    LoadUsers { back: u64, count: u64, checks: u32 },
    /// `add_orders`, the same way.
    LoadOrders { back: u64, count: u64, checks: u32 },
    /// `delete_orders(max_user_id, from_order_id)`.
    Delete { max_user_id: u64, from_order_id: u64, checks: u32 },
    /// `add_orders` that fails at its `at`-th row (a trigger aborts it): nothing may change.
    FailingLoadOrders { count: u64, at: u64 },
}

fn call() -> impl Strategy<Value = Call> {
    prop_oneof![
        (0..50u64, 1..400u64, 0..3u32).prop_map(|(back, count, checks)| Call::LoadUsers { back, count, checks }),
        (0..500u64, 1..4_000u64, 0..6u32).prop_map(|(back, count, checks)| Call::LoadOrders { back, count, checks }),
        (0..60u64, 0..5_000u64, 0..3u32).prop_map(|(max_user_id, from_order_id, checks)| Call::Delete {
            max_user_id,
            from_order_id,
            checks
        }),
        (2..500u64, 1..400u64).prop_map(|(count, at)| Call::FailingLoadOrders { count, at }),
    ]
}

fn run(c: &mut Connection, kept: &mut Option<u64>, call: &Call) -> Result<()> {
    let back_from =
        |c: &Connection, table, back: u64| -> Result<u64> { Ok(workload::next_offset(c, table)?.saturating_sub(back)) };
    match *call {
        Call::LoadUsers { back, count, checks: n } => {
            let offset = back_from(c, Table::Users, back)?;
            jobs::load_users(c, offset, count, &checks(n))?;
        }
        Call::LoadOrders { back, count, checks: n } => {
            let offset = back_from(c, Table::Orders, back)?;
            match jobs::load_orders(c, offset, count, &checks(n)) {
                Err(Error::InvalidArgument(m)) if m.contains("no users") => {}
                other => {
                    other?;
                }
            }
        }
        Call::Delete { max_user_id, from_order_id, checks: n } => {
            jobs::delete_orders_of_users(c, kept, max_user_id, from_order_id, &checks(n))?;
        }
        Call::FailingLoadOrders { count, at } => {
            let next = workload::next_offset(c, Table::Orders)?;
            c.execute_batch(&format!(
                "CREATE TEMP TRIGGER fail AFTER INSERT ON orders WHEN NEW.order_id = {} \
                 BEGIN SELECT RAISE(ABORT, 'failing load'); END",
                next + at.min(count)
            ))?;
            let before = (count_orders(c)?, counts::orders(c, kept)?);
            let result = jobs::load_orders(c, next, count, &NoLimit);
            c.execute_batch("DROP TRIGGER temp.fail")?;
            match result {
                Err(Error::Sqlite(e)) => assert!(e.to_string().contains("failing load"), "{e}"),
                Err(Error::InvalidArgument(m)) if m.contains("no users") => {}
                other => panic!("the load was meant to fail: {other:?}"),
            }
            assert_eq!((count_orders(c)?, counts::orders(c, kept)?), before, "a failed load changed the orders");
        }
    }
    Ok(())
}

fn check(c: &Connection, kept: &Option<u64>) -> Result<(), TestCaseError> {
    let err = |e: Error| TestCaseError::fail(e.to_string());
    prop_assert_eq!(counts::users(c).map_err(err)?, count_users(c).map_err(err)?);
    let counted = count_orders(c).map_err(err)?;
    prop_assert_eq!(counts::orders_or_count(c, kept).map_err(err)?, counted);
    if let Some(kept) = counts::orders(c, kept).map_err(err)? {
        prop_assert_eq!(kept, counted);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn the_kept_counts_equal_count_star_after_any_calls(calls in prop::collection::vec(call(), 1..24)) {
        let mut c = db().map_err(|e| TestCaseError::fail(e.to_string()))?;
        let mut kept = None;
        for call in &calls {
            run(&mut c, &mut kept, call).map_err(|e| TestCaseError::fail(format!("{call:?}: {e}")))?;
            check(&c, &kept)?;
        }
    }
}

#[test]
fn a_database_from_before_the_counts_is_counted_once_by_the_first_delete() -> Result<()> {
    let mut c = db()?;
    jobs::load_users(&mut c, 0, 100, &NoLimit)?;
    // Orders written the way earlier versions (and the benchmarks) write them: no count kept.
    workload::insert_orders(&mut c, 0, 5_000, 100, &NoLimit)?;
    let mut kept = None;
    assert_eq!(counts::orders(&c, &kept)?, None);
    assert_eq!(counts::orders_or_count(&c, &kept)?, 5_000);
    let d = jobs::delete_orders_of_users(&mut c, &mut kept, 10, 0, &NoLimit)?;
    assert!(d.deleted > 0);
    assert_eq!(counts::orders(&c, &kept)?, Some(5_000 - d.deleted));
    assert_eq!(count_orders(&c)?, 5_000 - d.deleted);
    // And `init`, as the canister calls it after an upgrade, counts a fresh database as 0.
    let fresh = db()?;
    let mut kept = None;
    assert_eq!(counts::init(&fresh, &mut kept)?, 0);
    assert_eq!(kept, Some(0));
    Ok(())
}

#[test]
fn the_count_an_earlier_version_kept_in_the_database_moves_out_once() -> Result<()> {
    let mut c = db()?;
    jobs::load_users(&mut c, 0, 100, &NoLimit)?;
    workload::insert_orders(&mut c, 0, 1_000, 100, &NoLimit)?;
    // As the earlier version left it: 7 orders deleted and counted in its table. (The table's
    // figure, not count(*), is taken: here it says 7 where 0 were deleted.)
    c.execute_batch(&format!(
        "CREATE TABLE {} (name TEXT PRIMARY KEY NOT NULL, n INTEGER NOT NULL) WITHOUT ROWID; \
         INSERT INTO {0} VALUES ('orders_deleted', 7)",
        counts::LEGACY_TABLE
    ))?;
    let mut kept = None;
    assert_eq!(counts::init(&c, &mut kept)?, 993);
    assert_eq!(kept, Some(7));
    let legacy: i64 =
        c.query_row("SELECT count(*) FROM sqlite_schema WHERE name = ?1", [counts::LEGACY_TABLE], |r| r.get(0))?;
    assert_eq!(legacy, 0, "the earlier table is dropped");
    Ok(())
}

#[test]
fn a_failed_delete_keeps_the_count_it_had() -> Result<()> {
    let mut c = db()?;
    jobs::load_users(&mut c, 0, 100, &NoLimit)?;
    jobs::load_orders(&mut c, 0, 1_000, &NoLimit)?;
    let mut kept = Some(0);
    c.execute_batch(
        "CREATE TEMP TRIGGER fail AFTER DELETE ON orders WHEN OLD.order_id = 500 \
         BEGIN SELECT RAISE(ABORT, 'failing delete'); END",
    )?;
    let failed = jobs::delete_orders_of_users(&mut c, &mut kept, 100, 0, &NoLimit);
    assert!(matches!(failed, Err(Error::Sqlite(ref e)) if e.to_string().contains("failing delete")), "{failed:?}");
    assert_eq!((kept, count_orders(&c)?), (Some(0), 1_000), "nothing deleted, nothing counted");
    c.execute_batch("DROP TRIGGER temp.fail")?;
    let d = jobs::delete_orders_of_users(&mut c, &mut kept, 100, 0, &NoLimit)?;
    assert_eq!((d.deleted, kept, counts::orders(&c, &kept)?), (1_000, Some(1_000), Some(0)));
    Ok(())
}
