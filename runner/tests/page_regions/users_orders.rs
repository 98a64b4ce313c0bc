//! The users/orders calls of `page_regions.rs`: one script of calls, run on the production
//! canister (there) and natively here, on a copy of its database built the same way, to count
//! the pages each call's structure must touch.
//! - **Visited**: the database pages the call's statements fetch, counted by emptying SQLite's
//!   page cache before the call (`sqlite3_db_release_memory`) and counting its misses: each
//!   distinct page once. One heap page each (where the canister's page cache holds it).
//! - **Changed** (a write): the pages its commit changes, the database file compared before and
//!   after, written in the heap (the cached copy) and in the file's 64 KiB pages of stable memory
//!   they lie in (ic-rusqlite keeps the file's bytes in order in one memory). The rollback
//!   journal's writes and the canister's own bookkeeping (the deleted orders' count in a stable
//!   cell) are not counted.

use std::collections::BTreeSet;
use std::path::PathBuf;

use rand::{Rng, SeedableRng};
use rusqlite::{ffi, Connection};
use stablebench::query::QueryLimits;
use stablebench::NoLimit;
use stablebench_grid::ic::WASM_PAGE_BYTES;
use stablebench_grid::profiles::DEFAULT;
use stablebench_grid::users_orders::Sizes;
use stablebench_report::page_regions::{Necessary, Split};

use crate::necessary::{changed, depth};

/// The calls, as `docs/per-call.md` and `docs/page-budget.md` name them.
pub const ADD_USERS: &str = "add_users(next, 1)";
pub const ADD_ORDERS: &str = "add_orders(next, 1)";
pub const DELETE_ORDERS: &str = "delete_orders(users, opt (newest - 1))";
pub const POINT_READ: &str = "list_users(random, 1)";
pub const LIST_PAGE: &str = "list_orders(random, 10)";
pub const STATS: &str = "stats()";

/// Rows of a list page.
pub const PAGE_ROWS: u32 = 10;

/// Seeds the random ids the reads start from (recorded here: the script is the same every run).
const READS_SEED: u64 = 53;

/// One call of the script.
#[derive(Clone, Copy, Debug)]
pub enum Step {
    /// `add_users(offset, 1)`.
    AddUser(u64),
    /// `add_orders(offset, 1)`.
    AddOrder(u64),
    /// `delete_orders(max_user_id, opt from, null)`: deletes order `from + 1`, the newest.
    DeleteNewest { max_user_id: u64, from: u64 },
    /// `list_users(after, 1)`.
    PointRead(u64),
    /// `list_orders(after, PAGE_ROWS)`.
    ListPage(u64),
    /// `stats()`.
    Stats,
}

impl Step {
    /// The call's name.
    pub fn name(&self) -> &'static str {
        match self {
            Step::AddUser(_) => ADD_USERS,
            Step::AddOrder(_) => ADD_ORDERS,
            Step::DeleteNewest { .. } => DELETE_ORDERS,
            Step::PointRead(_) => POINT_READ,
            Step::ListPage(_) => LIST_PAGE,
            Step::Stats => STATS,
        }
    }

    /// Whether it is an update (else a query).
    pub fn update(&self) -> bool {
        matches!(self, Step::AddUser(_) | Step::AddOrder(_) | Step::DeleteNewest { .. })
    }
}

/// Each kind of call `calls + 1` times in a row (the first is not measured), on a database of
/// `sizes`: new users and orders, then the newest orders deleted one per call, then reads from
/// seeded uniformly random ids below the rows the calls added.
pub fn script(sizes: Sizes, calls: u64) -> Vec<Step> {
    let n = calls + 1;
    let (users, orders) = (sizes.users + n, sizes.orders + n);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(READS_SEED);
    let mut out: Vec<Step> = (0..n).map(|i| Step::AddUser(sizes.users + i)).collect();
    out.extend((0..n).map(|i| Step::AddOrder(sizes.orders + i)));
    out.extend((0..n).map(|i| Step::DeleteNewest { max_user_id: users, from: orders - 1 - i }));
    out.extend((0..n).map(|_| Step::PointRead(rng.random_range(0..sizes.users))));
    out.extend((0..n).map(|_| Step::ListPage(rng.random_range(0..sizes.orders - u64::from(PAGE_ROWS)))));
    out.extend((0..n).map(|_| Step::Stats));
    out
}

/// Database pages fetched from outside SQLite's page cache since the last call (reset each time).
fn misses(conn: &Connection) -> u64 {
    let (mut current, mut highest) = (0, 0);
    // SAFETY: a valid open connection; the two out-pointers are live locals.
    let rc = unsafe {
        ffi::sqlite3_db_status(conn.handle(), ffi::SQLITE_DBSTATUS_CACHE_MISS, &mut current, &mut highest, 1)
    };
    assert_eq!(rc, ffi::SQLITE_OK, "sqlite3_db_status");
    current as u64
}

/// Empties SQLite's page cache (outside a transaction every page is unpinned and freed).
fn empty_cache(conn: &Connection) {
    // SAFETY: a valid open connection.
    let rc = unsafe { ffi::sqlite3_db_release_memory(conn.handle()) };
    assert_eq!(rc, ffi::SQLITE_OK, "sqlite3_db_release_memory");
}

/// The database of `sizes` built natively as the canister builds it (the default profile, the
/// schema, both indexes, then the users and the orders), its page count, and the necessary pages
/// of every step of `steps` run on it in order.
pub fn necessary(sizes: Sizes, steps: &[Step]) -> (u64, Vec<Necessary>) {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("necessary_users_orders_{}.db", sizes.orders));
    for suffix in ["", "-journal"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    let mut conn = Connection::open(&path).expect("opens");
    stablebench_pragmas::apply(&conn, DEFAULT.pragmas).expect("the profile applies");
    stablebench::schema::create_schema(&mut conn).expect("the schema");
    stablebench::schema::create_indexes(&mut conn).expect("the indexes");
    stablebench::jobs::load_users(&mut conn, 0, sizes.users, &NoLimit).expect("the users");
    stablebench::jobs::load_orders(&mut conn, 0, sizes.orders, &NoLimit).expect("the orders");
    let pragma = |conn: &Connection, name: &str| conn.query_row(&format!("PRAGMA {name}"), [], |r| r.get::<_, i64>(0));
    let (page_size, pages) = (pragma(&conn, "page_size").unwrap() as u64, pragma(&conn, "page_count").unwrap() as u64);
    let trees = [("users", "users"), ("orders", "orders"), ("idx_users_email", "users' email index")];
    let levels: Vec<String> = trees.iter().map(|(t, what)| format!("{what} {}", depth(&conn, t))).collect();
    let levels = format!("B-tree levels: {}", levels.join(", "));
    let mut kept: Option<u64> = None;
    let mut image = std::fs::read(&path).expect("the database file");
    let mut out = Vec::new();
    for step in steps {
        empty_cache(&conn);
        misses(&conn);
        run(&mut conn, &mut kept, step);
        let visited = misses(&conn);
        assert!(visited >= 2, "{step:?}: page 1 and at least one more ({visited})");
        let necessary = if step.update() {
            let after = std::fs::read(&path).expect("the database file");
            let pages = changed(&image, &after, page_size as usize);
            image = after;
            let in_file: BTreeSet<u64> = pages.iter().map(|p| (p - 1) * page_size / WASM_PAGE_BYTES).collect();
            let n = pages.len() as u64;
            assert!(n >= 1, "{step:?}: a write changes the file");
            Necessary {
                what: format!("{visited} database pages visited, {n} changed, in {} 64 KiB file pages", in_file.len()),
                heap: Split { accessed: visited.max(n), written: n },
                stable: Split { accessed: in_file.len() as u64, written: in_file.len() as u64 },
            }
        } else {
            Necessary {
                what: format!("{visited} database pages visited ({levels})"),
                heap: Split { accessed: visited, written: 0 },
                stable: Split::default(),
            }
        };
        out.push(necessary);
    }
    (pages, out)
}

/// One step natively: the library functions the canister's endpoint calls, in its order.
fn run(conn: &mut Connection, kept: &mut Option<u64>, step: &Step) {
    use stablebench::{counts, jobs, pragma, query, schema};
    let unlimited = QueryLimits::UNLIMITED;
    match *step {
        Step::AddUser(offset) => {
            assert_eq!(jobs::load_users(conn, offset, 1, &NoLimit).expect("add_users").inserted, 1);
        }
        Step::AddOrder(offset) => {
            assert_eq!(jobs::load_orders(conn, offset, 1, &NoLimit).expect("add_orders").inserted, 1);
        }
        Step::DeleteNewest { max_user_id, from } => {
            let d = jobs::delete_orders_of_users(conn, kept, max_user_id, from, &NoLimit).expect("delete_orders");
            assert!(d.complete && d.deleted == 1, "{d:?}");
        }
        Step::PointRead(after) => {
            let p = query::list_users(conn, after, 1, unlimited, &NoLimit).expect("list_users");
            assert_eq!(p.items[0].user_id, after + 1);
        }
        Step::ListPage(after) => {
            let p = query::list_orders(conn, after, PAGE_ROWS, unlimited, &NoLimit).expect("list_orders");
            assert_eq!(p.items.len(), PAGE_ROWS as usize);
        }
        Step::Stats => {
            counts::users(conn).expect("users");
            counts::orders_or_count(conn, kept).expect("orders");
            schema::index_names(conn).expect("indexes");
            for name in ["page_size", "page_count", "freelist_count"] {
                pragma::read_pragma(conn, name).expect("a pragma");
            }
            pragma::read_active(conn).expect("the pragmas");
        }
    }
}
