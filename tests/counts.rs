//! The maintained row counts against `count(*)` (the model): after any sequence of budgeted
//! loads, retries, deletes and failed calls, `stats`' counts are exact.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use rusqlite::Connection;
use stablebench::workload::{self, count_orders, count_users, Table};
use stablebench::{counts, jobs, schema, Error, Meter, NoLimit, Result};

/// Runs out after `n` checks.
#[derive(Clone)]
struct Checks(Arc<AtomicU32>, u32);

impl Meter for Checks {
    fn exhausted(&self) -> bool {
        self.0.fetch_add(1, Ordering::Relaxed) + 1 > self.1
    }
    fn budget(&self) -> u64 {
        u64::from(self.1)
    }
}

fn checks(n: u32) -> Checks {
    Checks(Default::default(), n)
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

fn run(c: &mut Connection, call: &Call) -> Result<()> {
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
            jobs::delete_orders_of_users(c, max_user_id, from_order_id, &checks(n))?;
        }
        Call::FailingLoadOrders { count, at } => {
            let next = workload::next_offset(c, Table::Orders)?;
            c.execute_batch(&format!(
                "CREATE TEMP TRIGGER fail AFTER INSERT ON orders WHEN NEW.order_id = {} \
                 BEGIN SELECT RAISE(ABORT, 'failing load'); END",
                next + at.min(count)
            ))?;
            let before = (count_orders(c)?, counts::orders(c)?);
            let result = jobs::load_orders(c, next, count, &NoLimit);
            c.execute_batch("DROP TRIGGER temp.fail")?;
            match result {
                Err(Error::Sqlite(e)) => assert!(e.to_string().contains("failing load"), "{e}"),
                Err(Error::InvalidArgument(m)) if m.contains("no users") => {}
                other => panic!("the load was meant to fail: {other:?}"),
            }
            assert_eq!((count_orders(c)?, counts::orders(c)?), before, "a failed load changed the orders");
        }
    }
    Ok(())
}

fn check(c: &Connection) -> Result<(), TestCaseError> {
    let err = |e: Error| TestCaseError::fail(e.to_string());
    prop_assert_eq!(counts::users(c).map_err(err)?, count_users(c).map_err(err)?);
    let counted = count_orders(c).map_err(err)?;
    prop_assert_eq!(counts::orders_or_count(c).map_err(err)?, counted);
    if let Some(kept) = counts::orders(c).map_err(err)? {
        prop_assert_eq!(kept, counted);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn the_kept_counts_equal_count_star_after_any_calls(calls in prop::collection::vec(call(), 1..24)) {
        let mut c = db().map_err(|e| TestCaseError::fail(e.to_string()))?;
        for call in &calls {
            run(&mut c, call).map_err(|e| TestCaseError::fail(format!("{call:?}: {e}")))?;
            check(&c)?;
        }
    }
}

#[test]
fn a_database_from_before_the_counts_is_counted_once_by_the_first_delete() -> Result<()> {
    let mut c = db()?;
    jobs::load_users(&mut c, 0, 100, &NoLimit)?;
    // Orders written the way earlier versions (and the benchmarks) write them: no count kept.
    workload::insert_orders(&mut c, 0, 5_000, 100, &NoLimit)?;
    assert_eq!(counts::orders(&c)?, None);
    assert_eq!(counts::orders_or_count(&c)?, 5_000);
    let d = jobs::delete_orders_of_users(&mut c, 10, 0, &NoLimit)?;
    assert_eq!(counts::orders(&c)?, Some(5_000 - d.deleted));
    assert_eq!(count_orders(&c)?, 5_000 - d.deleted);
    // And `init`, as the canister calls it after an upgrade, counts a fresh database as 0.
    let fresh = db()?;
    assert_eq!(counts::init(&fresh)?, 0);
    assert_eq!(counts::orders(&fresh)?, Some(0));
    Ok(())
}
