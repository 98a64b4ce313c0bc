//! Resumable jobs and paginated reads against native SQLite: every call stays under its budget,
//! repeating a call changes nothing, and the pieces add up to the whole.

mod common;
use common::Checks;

use rusqlite::Connection;
use stablebench::jobs::{self, Batch};
use stablebench::query::{list_orders, list_users, query_page, QueryLimits};
use stablebench::workload::{self, count_orders, count_users};
use stablebench::{oracle, schema, Error, Meter, NoLimit, Result};

fn db() -> Result<Connection> {
    let c = Connection::open_in_memory()?;
    c.execute_batch("PRAGMA page_size = 4096")?;
    let mut c = c;
    schema::create_schema(&mut c)?;
    Ok(c)
}

#[test]
fn a_load_in_budgeted_batches_equals_one_big_load_and_retries_add_nothing() -> Result<()> {
    let mut c = db()?;
    let meter = Checks::new(3); // 3 checks of 256 rows: at most ~1,000 rows per call
    let (mut offset, mut calls) = (0, 0);
    loop {
        meter.reset();
        let b = jobs::load_users(&mut c, offset, 5_000 - offset, &meter)?;
        calls += 1;
        // A retry of the same call (its reply lost) inserts nothing and reports the same end.
        meter.reset();
        let again = jobs::load_users(&mut c, offset, 5_000 - offset, &meter)?;
        calls += 1;
        assert!(again.next_offset >= b.next_offset);
        offset = again.next_offset;
        if again.complete {
            break;
        }
        // Retrying even older cursors adds nothing either.
        assert_eq!(
            jobs::load_users(&mut c, 0, 1, &NoLimit)?,
            Batch { inserted: 0, next_offset: offset, complete: true, instructions: 0 }
        );
    }
    // 5,000 rows at most 1,024 a call (the fourth check, at row 1,024, stops it): 5 calls or more.
    assert!(calls >= 5, "the budget split the load ({calls} calls)");
    assert_eq!(count_users(&c)?, 5_000);
    let distinct: i64 = c.query_row("SELECT count(DISTINCT email) FROM users", (), |r| r.get(0))?;
    assert_eq!(distinct, 5_000);
    let b = jobs::load_orders(&mut c, 0, 30_000, &NoLimit)?;
    assert_eq!(b, Batch { inserted: 30_000, next_offset: 30_000, complete: true, instructions: 0 });
    let (n, sum) = oracle::join(5_000, 30_000, 50);
    let rows = stablebench::query::query_rows(&c, &workload::select_join_sql(50), QueryLimits::UNLIMITED, &NoLimit)?;
    assert_eq!((rows.rows.len() as u64, oracle::checksum(&rows)), (n, sum));
    Ok(())
}

#[test]
fn a_load_past_the_end_or_out_of_range_is_refused_and_changes_nothing() -> Result<()> {
    let mut c = db()?;
    assert!(
        matches!(jobs::load_orders(&mut c, 0, 10, &NoLimit), Err(Error::InvalidArgument(m)) if m.contains("no users"))
    );
    jobs::load_users(&mut c, 0, 10, &NoLimit)?;
    for (offset, count) in [(11, 5), (0, 0), (0, u64::MAX), (u64::MAX, 1)] {
        assert!(
            matches!(jobs::load_users(&mut c, offset, count, &NoLimit), Err(Error::InvalidArgument(_))),
            "({offset}, {count})"
        );
    }
    assert_eq!(count_users(&c)?, 10);
    Ok(())
}

#[test]
fn a_budgeted_delete_resumes_from_its_cursor_and_removes_exactly_the_orders() -> Result<()> {
    let mut c = db()?;
    jobs::load_users(&mut c, 0, 1_000, &NoLimit)?;
    jobs::load_orders(&mut c, 0, 50_000, &NoLimit)?;
    let meter = Checks::new(1); // one window of 10,000 ids per call
    let (mut from, mut total, mut calls) = (0, 0, 0);
    let mut kept = Some(0);
    loop {
        meter.reset();
        let d = jobs::delete_orders_of_users(&mut c, &mut kept, 100, from, &meter)?;
        calls += 1;
        meter.reset();
        assert_eq!(
            jobs::delete_orders_of_users(&mut c, &mut kept, 100, from, &meter)?.deleted,
            0,
            "a repeated call deletes nothing more"
        );
        total += d.deleted;
        from = d.next_order_id;
        if d.complete {
            break;
        }
    }
    assert_eq!(calls, 5);
    assert_eq!(total, oracle::orders_of_users(1_000, 50_000, 100));
    assert_eq!(count_orders(&c)?, 50_000 - total);
    assert_eq!(kept, Some(total), "the kept count has every deleted order, once");
    Ok(())
}

#[test]
fn indexes_are_created_one_per_call_when_the_budget_is_small() -> Result<()> {
    let mut c = db()?;
    jobs::load_users(&mut c, 0, 100, &NoLimit)?;
    let meter = Checks::new(1); // one check before the first index, none left for the second
    let first = jobs::create_indexes(&mut c, &meter)?;
    assert_eq!((first.created.len(), first.remaining.len(), first.complete), (1, 1, false));
    let second = jobs::create_indexes(&mut c, &NoLimit)?;
    assert_eq!((second.created.len(), second.complete), (1, true));
    assert_eq!(jobs::create_indexes(&mut c, &NoLimit)?.created, Vec::<String>::new(), "nothing left to do");
    Ok(())
}

#[test]
fn an_index_bigger_than_the_budget_starts_a_shadow_build_and_is_not_reported_yet() -> Result<()> {
    let mut c = db()?;
    jobs::load_users(&mut c, 0, 50_000, &NoLimit)?;
    // Exhausted at the first progress-handler call inside CREATE INDEX.
    #[derive(Clone)]
    struct AfterFirst(std::sync::Arc<std::sync::atomic::AtomicU32>);
    impl Meter for AfterFirst {
        fn exhausted(&self) -> bool {
            self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed) >= 1
        }
        fn budget(&self) -> u64 {
            7
        }
    }
    let p = jobs::create_indexes(&mut c, &AfterFirst(Default::default()))?;
    let b = p.building.expect("the index is built through a shadow copy");
    assert_eq!(
        (b.index.as_str(), b.table.as_str(), b.copied_up_to, b.last_rowid),
        ("idx_users_email", "users", 0, 50_000)
    );
    assert!(!p.complete && p.created.is_empty());
    assert!(schema::index_names(&c)?.is_empty(), "the index on the copy is not usable yet");
    Ok(())
}

/// A meter with an instruction counter: `left` instructions remain, and it never runs out.
#[derive(Clone)]
struct Left(u64);

impl Meter for Left {
    fn exhausted(&self) -> bool {
        false
    }
    fn budget(&self) -> u64 {
        self.0
    }
    fn remaining(&self) -> Option<u64> {
        Some(self.0)
    }
}

#[test]
fn an_index_is_sized_before_its_one_statement_build_is_tried() -> Result<()> {
    let mut c = db()?;
    jobs::load_users(&mut c, 0, 20_000, &NoLimit)?;
    let rows_fit = 20_000 * jobs::INDEX_ROW_INSTRUCTIONS;
    // Not enough for 20,000 users: a shadow build starts without trying the statement (which
    // would have been interrupted: this meter never is), and copies the whole table.
    let p = jobs::create_indexes(&mut c, &Left(rows_fit - 1))?;
    let b = p.building.expect("a shadow build");
    assert_eq!((b.index.as_str(), b.copied_up_to, b.copied_rows), ("idx_users_email", 20_000, 20_000));
    assert!(p.created.is_empty());
    // Enough: the statement, on a fresh database.
    let mut c = db()?;
    jobs::load_users(&mut c, 0, 20_000, &NoLimit)?;
    let p = jobs::create_indexes(&mut c, &Left(rows_fit))?;
    assert_eq!((p.created.len(), p.building, p.complete), (2, None, true));
    Ok(())
}

#[test]
fn keyset_pages_cover_the_table_once_and_stop_at_the_byte_limit() -> Result<()> {
    let mut c = db()?;
    jobs::load_users(&mut c, 0, 3_000, &NoLimit)?;
    jobs::load_orders(&mut c, 0, 3_000, &NoLimit)?;
    let (mut after, mut ids) = (0, Vec::new());
    loop {
        let page = list_users(&c, after, 700, QueryLimits::UNLIMITED, &NoLimit)?;
        assert!(page.items.len() <= 700);
        ids.extend(page.items.iter().map(|u| u.user_id));
        match page.next_after {
            Some(a) => after = a,
            None => break,
        }
    }
    assert_eq!(ids, (1..=3_000).collect::<Vec<_>>());
    let small = QueryLimits { max_reply_bytes: 1_000 };
    let page = list_orders(&c, 0, 10_000, small, &NoLimit)?;
    assert!(!page.items.is_empty() && page.items.len() < 100, "{}", page.items.len());
    assert_eq!(page.next_after, Some(page.items.last().unwrap().order_id));
    assert!(matches!(list_users(&c, 0, 0, QueryLimits::UNLIMITED, &NoLimit), Err(Error::InvalidArgument(_))));
    Ok(())
}

#[test]
fn sql_pages_continue_where_the_byte_limit_stopped() -> Result<()> {
    let mut c = db()?;
    jobs::load_users(&mut c, 0, 2_000, &NoLimit)?;
    let limits = QueryLimits { max_reply_bytes: 20_000 };
    let (mut start, mut all) = (0, Vec::new());
    loop {
        let page = query_page(&c, "SELECT user_id, email FROM users ORDER BY user_id", start, limits, &NoLimit)?;
        all.extend(page.rows.rows);
        match page.next_row {
            Some(n) => start = n,
            None => break,
        }
    }
    assert_eq!(all.len(), 2_000);
    assert!(all.windows(2).all(|w| w[0][0] != w[1][0]), "no row twice");
    Ok(())
}
