//! The reference workload against native SQLite (rusqlite `bundled`), through the same library
//! code the canister runs, with the reference pragma profile on a file-backed database.

use std::path::PathBuf;

use rusqlite::Connection;
use stablebench::bench::{Bench, BenchRun, Output, Sizes, BENCHES};
use stablebench::pragma::Apply;
use stablebench::query::{query_rows, QueryLimits};
use stablebench::schema::{create_indexes, create_schema, index_names};
use stablebench::workload::{self, next_offset, Table};
use stablebench::{pragma, Error, Meter, NoLimit, Result};

/// A database file in its own temporary directory, removed on drop.
struct TempDb {
    dir: PathBuf,
    conn: Connection,
}

impl TempDb {
    fn new(name: &str) -> Result<TempDb> {
        let dir = std::env::temp_dir().join(format!("stablebench-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        let conn = Connection::open(dir.join("main.db"))?;
        pragma::DEFAULT.apply(&conn)?;
        Ok(TempDb { dir, conn })
    }
}

impl Drop for TempDb {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn counts(conn: &Connection) -> Result<(u64, u64)> {
    Ok((workload::count_users(conn)?, workload::count_orders(conn)?))
}

#[test]
fn reference_workload_runs_in_seed_order_with_the_seed_results() -> Result<()> {
    let mut db = TempDb::new("reference")?;
    let c = &mut db.conn;
    let s = Sizes::REFERENCE;
    create_schema(c)?;
    assert_eq!(counts(c)?, (0, 0));

    assert_eq!(workload::insert_users(c, 0, 100_000, &NoLimit)?, 100_000);
    assert_eq!(counts(c)?, (100_000, 0));

    assert_eq!(workload::insert_orders(c, 0, 1_000_000, 100_000, &NoLimit)?, 1_000_000);
    assert_eq!(counts(c)?, (100_000, 1_000_000));

    create_indexes(c)?;
    assert_eq!(index_names(c)?, ["idx_orders_user_id", "idx_users_email"]);

    let join = query_rows(c, &workload::select_join_sql(1_000), QueryLimits::UNLIMITED, &NoLimit)?;
    assert_eq!(join.columns, ["user_id", "username", "order_id", "amount"]);
    assert_eq!(join.rows.len(), 9_990, "users 1..=999 have 10 orders each");

    let like = query_rows(c, workload::SELECT_LIKE, QueryLimits::UNLIMITED, &NoLimit)?;
    assert_eq!(like.rows.len(), 100_000);
    // The two SELECT benchmarks' oracle checks at reference size, on this very state (building
    // it again for each would double the test's time).
    Bench::SelectJoin.verify(c, s, &Output::Rows(join))?;
    Bench::SelectLike.verify(c, s, &Output::Rows(like))?;

    assert_eq!(workload::insert_orders(c, 0, 100, 100_000, &NoLimit)?, 100);
    assert_eq!(counts(c)?, (100_000, 1_000_100));

    // The 100 extra orders reuse generator indexes 0..100: 7 of them belong to users 1..=7.
    assert_eq!(stablebench::oracle::orders_of_users(100_000, 100, 100), 7);
    assert_eq!(workload::delete_orders_of_users(c, 100)?, 1_000 + 7);
    assert_eq!(counts(c)?, (100_000, 999_093));

    // Back to the state of the rollback benchmark: exactly 1,000,000 orders with ids 1..=1M.
    workload::delete_all_orders(c)?;
    c.execute("DELETE FROM sqlite_sequence WHERE name = 'orders'", ())?;
    assert_eq!(workload::insert_orders(c, 0, 1_000_000, 100_000, &NoLimit)?, 1_000_000);
    let rb = workload::delete_orders_and_roll_back(c, s.rollback_min_order_id())?;
    assert_eq!((rb.deleted, rb.seen_inside), (100_000, 900_000));
    assert_eq!(counts(c)?, (100_000, 1_000_000), "ROLLBACK restores every deleted order");
    let max: i64 = c.query_row("SELECT max(order_id) FROM orders", (), |r| r.get(0))?;
    assert_eq!(max, 1_000_000);
    Ok(())
}

#[test]
fn the_delete_removes_exactly_the_orders_of_the_first_100_users() -> Result<()> {
    let mut db = TempDb::new("delete")?;
    let c = &mut db.conn;
    Bench::DeleteOrders1kIndexed.setup(c, Sizes::REFERENCE)?;
    assert_eq!(workload::delete_orders_of_users(c, 100)?, 1_000);
    let left: i64 = c.query_row("SELECT count(*) FROM orders WHERE user_id <= 100", (), |r| r.get(0))?;
    assert_eq!(left, 0);
    assert_eq!(counts(c)?, (100_000, 999_000));
    Ok(())
}

fn run_and_verify(bench: Bench, sizes: Sizes) -> Result<()> {
    let mut db = TempDb::new(bench.name())?;
    bench.setup(&mut db.conn, sizes)?;
    let output = bench.run(&mut db.conn, sizes)?;
    bench.verify(&db.conn, sizes, &output)?;
    Ok(())
}

#[test]
fn every_benchmark_matches_the_oracle_at_reduced_size() -> Result<()> {
    for bench in BENCHES {
        run_and_verify(bench, Sizes { users: 2_000, orders: 20_000 })?;
    }
    Ok(())
}

#[test]
fn verify_catches_a_wrong_result() -> Result<()> {
    let mut db = TempDb::new("wrong")?;
    let sizes = Sizes { users: 1_000, orders: 10_000 };
    Bench::SelectJoin.setup(&mut db.conn, sizes)?;
    let Output::Rows(mut rows) = Bench::SelectJoin.run(&mut db.conn, sizes)? else { panic!("rows") };
    rows.rows.pop();
    match Bench::SelectJoin.verify(&db.conn, sizes, &Output::Rows(rows)) {
        Err(Error::WrongResult(m)) => assert!(m.contains("sqlite_select_join_1m"), "{m}"),
        other => panic!("expected WrongResult, got {other:?}"),
    }
    Ok(())
}

#[test]
fn bench_names_are_unique_and_map_back() {
    let mut names: Vec<_> = BENCHES.iter().map(|b| b.name()).collect();
    for b in BENCHES {
        assert_eq!(Bench::by_name(b.name()), Some(b));
    }
    names.sort();
    names.dedup();
    assert_eq!(names.len(), 9);
}

#[test]
fn a_failed_insert_rolls_back_and_leaves_the_tables_as_they_were() -> Result<()> {
    let mut db = TempDb::new("fk")?;
    let c = &mut db.conn;
    create_schema(c)?;
    workload::insert_users(c, 0, 10, &NoLimit)?;
    workload::insert_orders(c, 0, 50, 10, &NoLimit)?;
    // Break the insert halfway: a trigger rejects the 30th order of this batch.
    c.execute_batch(
        "CREATE TRIGGER stop AFTER INSERT ON orders WHEN NEW.order_id = 80
         BEGIN SELECT RAISE(ABORT, 'injected failure'); END;",
    )?;
    let err = workload::insert_orders(c, 50, 100, 10, &NoLimit).unwrap_err();
    assert!(err.to_string().contains("injected failure"), "{err}");
    assert_eq!(counts(c)?, (10, 50), "no order of the failed batch is kept");
    assert_eq!(next_offset(c, Table::Orders)?, 50);
    Ok(())
}

#[test]
fn an_exhausted_meter_commits_what_was_done_and_the_offset_continues() -> Result<()> {
    struct Checks(std::cell::Cell<u32>);
    impl Meter for Checks {
        fn exhausted(&self) -> bool {
            self.0.set(self.0.get() + 1);
            self.0.get() >= 3
        }
        fn budget(&self) -> u64 {
            0
        }
    }
    let mut db = TempDb::new("meter")?;
    let c = &mut db.conn;
    create_schema(c)?;
    let done = workload::insert_users(c, 0, 10_000, &Checks(Default::default()))?;
    assert_eq!(done, 3 * workload::METER_EVERY_INSERTS);
    assert_eq!(next_offset(c, Table::Users)?, done);
    let rest = workload::insert_users(c, done, 10_000 - done, &NoLimit)?;
    assert_eq!(done + rest, 10_000);
    let distinct: i64 = c.query_row("SELECT count(DISTINCT username) FROM users", (), |r| r.get(0))?;
    assert_eq!(distinct, 10_000);
    Ok(())
}
