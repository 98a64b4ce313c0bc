//! The cost of one call of every users/orders endpoint, next to its floor: the whole message
//! (Candid decoding, the controller check, the endpoint's checks and bookkeeping, the SQL, the
//! commit, the reply) of the smallest useful call on the production wasm through the runner with
//! production limits, with the reference data set loaded (100,000 users, 1,000,000 orders,
//! indexes created before the load). Then the same canister is upgraded to the benchmark wasm,
//! which keeps the stable memory and adds the floors (the `floor_*` methods,
//! `canister/src/floor.rs`: an endpoint's SQL statement alone in a minimal message), and, after
//! `floor_warm` has prepared what the production canister prepares for its queries, each call
//! with a floor and its floor alternate on that wasm and database: like with like, and a floor
//! that costs more than its call fails the test in every mode.
//!
//! Every call is measured `CALLS` times (the median is reported); the rows a call touches are
//! the newest ones or a few below them, which the loads and the calls before it have just read,
//! so both sides find them in SQLite's page cache (on the benchmark wasm after one round that is
//! not measured: the upgrade empties the cache).
//!
//! Every call is measured under the runner's `canbench` cost model (what canbench 0.7 reports on
//! PocketIC) and, from a second install and load, under its `ic` model (mainnet since the IC's
//! memory tracker: 80,000 instructions per 64 KiB Wasm page a message accesses, 80,000 more per
//! page it writes; `docs/mainnet.md`), with the pages the endpoint's median call touched. The
//! second run is also the test that the resumable loads, `create_indexes` and `delete_orders`
//! complete and keep their data under mainnet's charges at this size.
//!
//! The figures are committed in `endpoints_results.yml` and docs/per-call.md's endpoint table; this test
//! fails when a rerun differs from them at all (the runner is deterministic). Regenerate with
//! `STABLEBENCH_REGENERATE_ENDPOINTS=1 cargo test --release -p stablebench-runner --test endpoints`.
//! With `STABLEBENCH_ENDPOINTS_10X=1` it measures ten times the reference size too (1,000,000 users,
//! 10,000,000 orders), and regenerating then rewrites that column as well; without it, the
//! committed 10x figures stay as they are, and the test refuses them unless the SHA-256 of both
//! wasm files recorded beside them (`wasm`) is that of the files this run would measure: figures
//! measured on another wasm are not carried forward silently.
//!
//! In every mode, regenerating included, each call must cost at least as much under the `ic`
//! model as under `canbench` (the memory tracker only adds charges).

mod common;
use common::{bench_code, code, decode, pages_text, unit, MAINNET_CHARGES};

use std::collections::BTreeMap;

use candid::{CandidType, Principal};
use serde::de::DeserializeOwned;
use stablebench_canister::{Batch, Cost, Deleted, Error, IndexProgress};
use stablebench_grid::users_orders::Sizes;
use stablebench_runner::canister::{default_controller, Canister, Limits, Options, Outcome};
use stablebench_runner::host::PageCounts;
use stablebench_runner::replica::{CostModel, TRANSMISSION_FACTOR};

/// Calls measured per endpoint.
const CALLS: usize = 5;

/// Ten times the reference data set: 1,000,000 users, 10,000,000 orders.
const TEN_X: Sizes = Sizes { users: Sizes::REFERENCE.users * 10, orders: Sizes::REFERENCE.orders * 10 };

const RESULTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../endpoints_results.yml");
const TABLE_DOC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/per-call.md");

/// One endpoint call's cost at one size.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq)]
struct Cell {
    /// The median instructions of the endpoint's whole message.
    instructions: u64,
    /// Calls with a floor: the median instructions of the same call on the benchmark wasm,
    /// measured call for call beside its floor (the ratio's numerator).
    #[serde(default)]
    same_wasm: Option<u64>,
    /// The median instructions of its floor, if it has one.
    floor: Option<u64>,
    /// The 64 KiB Wasm pages of the median calls of `same_wasm` and of `floor`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    floor_pages: Option<(PageCounts, PageCounts)>,
    /// The median size of the endpoint's reply: each byte costs the replica's transmission fee
    /// (`TRANSMISSION_FACTOR`, 50 instructions) in `msg_reply_data_append`.
    #[serde(default)]
    reply_bytes: u64,
    /// The 64 KiB Wasm pages the endpoint's median call touched.
    #[serde(default)]
    pages: PageCounts,
}

/// Per size (`1x`, `10x`), per endpoint call.
type BySize = BTreeMap<String, BTreeMap<String, Cell>>;

/// The SHA-256 (hex) of the wasm files a size was measured on, by file name.
type Wasms = BTreeMap<String, String>;

/// What the endpoints and their floors run.
const WASM_FILES: [&str; 2] = ["stablebench.wasm", "stablebench_bench.wasm"];

/// The results file: the canbench model's figures (`sizes`), the ic model's (`mainnet`), and per
/// size the wasm files they were measured on (`wasm`).
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq, Default)]
struct Results {
    sizes: BySize,
    #[serde(default)]
    mainnet: BySize,
    #[serde(default)]
    wasm: BTreeMap<String, Wasms>,
    /// Per model (`canbench`, `mainnet`), per size: the calls whose size is the caller's choice
    /// ([`SHAPES`]), at each row count.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    shapes: BTreeMap<String, BTreeMap<String, CallShapes>>,
}

/// Per call of [`SHAPES`], per row count.
type CallShapes = BTreeMap<String, stablebench_report::shapes::Counts>;

/// The calls whose size the caller chooses, and the row counts measured: loads of n rows in one
/// call, and pages of n rows from a uniformly random key (a page of one is a point read by id).
const SHAPES: [(&str, &[u64]); 4] = [
    ("add_users(next, n)", &[1, 10, 100, 1_000]),
    ("add_orders(next, n)", &[1, 10, 100, 1_000]),
    ("list_users(random, n)", &[1, 10, 100]),
    ("list_orders(random, n)", &[1, 10, 100]),
];

/// Each call of [`SHAPES`] at each row count, `MESSAGES_PER_POINT` times (the pages from keys of
/// their own, seeded), on `c` (a fork: nothing after this sees its rows).
fn shapes(c: &mut Canister, mut users: u64, mut orders: u64) -> CallShapes {
    use rand::{Rng, SeedableRng};
    use stablebench_grid::shapes::{MESSAGES_PER_POINT, SHAPES_SEED};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(SHAPES_SEED);
    let anyone = Principal::anonymous();
    let mut out = CallShapes::new();
    for (call, counts) in SHAPES {
        let mut per_n = stablebench_report::shapes::Counts::new();
        for &n in counts {
            // Message 0 is not measured: each point's messages follow one of their own kind.
            let msgs: Vec<(u64, PageCounts)> = (0..=MESSAGES_PER_POINT)
                .map(|_| {
                    let m = match call {
                        "add_users(next, n)" | "add_orders(next, n)" => {
                            let users_call = call.starts_with("add_users");
                            let (method, next) =
                                if users_call { ("add_users", &mut users) } else { ("add_orders", &mut orders) };
                            let (b, m): (Result<Batch, Error>, _) =
                                update(c, method, &candid::encode_args((*next, n)).unwrap());
                            assert_eq!(b.unwrap().inserted, n, "{call}: n rows in one call");
                            *next += n;
                            m
                        }
                        "list_users(random, n)" => {
                            let after = rng.random_range(0..users - n);
                            let (p, m): (Result<stablebench::query::Page<stablebench::query::User>, Error>, _) =
                                query(c, "list_users", &candid::encode_args((after, n as u32)).unwrap(), anyone);
                            let items = p.unwrap().items;
                            assert_eq!((items.len() as u64, items[0].user_id), (n, after + 1), "{call}");
                            m
                        }
                        _ => {
                            let after = rng.random_range(0..orders - n - 10 * CALLS as u64);
                            let (p, m): (Result<stablebench::query::Page<stablebench::query::Order>, Error>, _) =
                                query(c, "list_orders", &candid::encode_args((after, n as u32)).unwrap(), anyone);
                            assert_eq!(p.unwrap().items.len() as u64, n, "{call}");
                            m
                        }
                    };
                    (m.instructions, m.pages)
                })
                .collect();
            per_n.insert(n, stablebench_report::shapes::Point::median_of(msgs[1..].to_vec()));
        }
        out.insert(call.to_string(), per_n);
    }
    out
}

/// docs/per-call.md's table of the calls whose size is the caller's choice, on mainnet and under
/// canbench, per size measured.
fn shapes_table(r: &Results) -> String {
    let num = stablebench_report::grouped;
    let mut out = format!(
        "The same canister, after the calls above (a copy of its state: nothing else sees these rows): the calls whose size the caller chooses, at n rows per call, each the median of {} messages after one not measured (pages from a uniformly random key; a page of one row is a point read by id). **per row, a → b**: (C(b) − C(a)) / (b − a), what each row between the two counts added to the message, never the message divided by its rows.\n\n| size | model | call | n = 1 | per row, 1 → 10 | 10 → 100 | 100 → 1,000 | largest n: the message | its pages |\n|---|---|---|---:|---:|---:|---:|---:|---:|\n",
        stablebench_grid::shapes::MESSAGES_PER_POINT
    );
    for (model, title) in [("mainnet", "mainnet"), ("canbench", "canbench")] {
        let sizes = r.shapes.get(model);
        for (size, calls) in ["1x", "10x"].into_iter().filter_map(|s| Some((s, sizes?.get(s)?))) {
            for (call, _) in SHAPES {
                let Some(c) = calls.get(call) else { continue };
                let m = stablebench_report::shapes::marginals(c);
                let step = |a: u64| {
                    m.iter().find(|s| s.0 == a).map_or("–".to_string(), |s| stablebench_report::shapes::signed(s.2))
                };
                let (n, last) = c.iter().next_back().unwrap();
                out += &format!(
                    "| {size} | {title} | `{call}` | {} | {} | {} | {} | n = {}: {} | {} |\n",
                    c.get(&1).map_or("–".into(), |p| num(p.median)),
                    step(1),
                    step(10),
                    step(100),
                    num(*n),
                    num(last.median),
                    pages_text(&last.pages),
                );
            }
        }
    }
    out
}

/// The calls of the table, in its order: the call as docs/per-call.md shows it, and what its floor runs.
const ROWS: [(&str, &str); 11] = [
    ("add_users(next, 1)", "`INSERT INTO users` of one row"),
    ("add_orders(next, 1)", "`INSERT INTO orders` of one row"),
    (
        "delete_orders(users, opt (newest - 1))",
        "one window's `DELETE FROM orders WHERE order_id > ? AND order_id <= ? AND user_id <= ?` of one order",
    ),
    ("create_schema()", "—"),
    ("create_indexes(null)", "—"),
    ("list_users(last - 1, 1)", "the page's `SELECT ... FROM users WHERE user_id > ? ORDER BY user_id LIMIT 2`"),
    ("list_orders(newest - 20, 1)", "the same on `orders`"),
    ("query_sql(\"SELECT * FROM users WHERE user_id = <last>\")", "the same statement"),
    ("query_sql_page(<the same>, 0)", "the same statement"),
    ("stats()", "—"),
    ("pragma_profile()", "—"),
];

/// Whether `call` is an update (the first five rows of [`ROWS`]): the memory tracker charges its
/// writes too.
fn updates(call: &str) -> bool {
    ROWS.iter().position(|(c, _)| *c == call).is_some_and(|i| i < 5)
}

fn median(v: &[Msg], f: impl Fn(&Msg) -> u64) -> u64 {
    let mut v: Vec<u64> = v.iter().map(f).collect();
    v.sort_unstable();
    v[v.len() / 2]
}

/// The call with the median instructions.
fn median_call(v: &[Msg]) -> Msg {
    let mut v = v.to_vec();
    v.sort_by_key(|m| m.instructions);
    v[v.len() / 2]
}

/// What one message cost: its instructions and the size of its reply.
#[derive(Clone, Copy, Debug)]
struct Msg {
    instructions: u64,
    reply_bytes: u64,
    pages: PageCounts,
}

fn msg(out: &Outcome) -> Msg {
    Msg {
        instructions: out.instructions,
        reply_bytes: out.result.as_ref().map_or(0, |r| r.len() as u64),
        pages: out.pages,
    }
}

fn update<R: CandidType + DeserializeOwned>(c: &mut Canister, method: &str, arg: &[u8]) -> (R, Msg) {
    let out = c.update(method, arg, default_controller());
    let m = msg(&out);
    (decode(out, method), m)
}

fn query<R: CandidType + DeserializeOwned>(c: &mut Canister, method: &str, arg: &[u8], caller: Principal) -> (R, Msg) {
    let out = c.query(method, arg, caller);
    let m = msg(&out);
    (decode(out, method), m)
}

/// The production canister installed with `arg`, with `sizes` loaded (indexes first, so the
/// loads maintain them), under `model` from its install on.
fn loaded_with(sizes: Sizes, model: CostModel, arg: &[u8]) -> Canister {
    let opts = Options { limits: Limits::PRODUCTION, cost_model: model, ..Options::default() };
    common::users_orders_loaded(code(), arg, opts, sizes)
}

/// Measures every row of [`ROWS`] at `sizes` under `model`, and then [`SHAPES`] on a copy.
fn measure(sizes: Sizes, model: CostModel) -> (BTreeMap<String, Cell>, CallShapes) {
    measure_with(sizes, model, &unit(), true)
}

/// [`measure`] of the canister installed with `arg`; with `with_floors` false, without the floors
/// (and the upgrade to the benchmark wasm they need): every other figure is the same.
fn measure_with(sizes: Sizes, model: CostModel, arg: &[u8], with_floors: bool) -> (BTreeMap<String, Cell>, CallShapes) {
    let mut c = loaded_with(sizes, model, arg);
    let users_next = |c: &mut Canister| -> u64 {
        let (s, _): (Result<stablebench_canister::Stats, Error>, _) =
            query(c, "stats", &unit(), Principal::anonymous());
        s.unwrap().users
    };
    let mut endpoint: Vec<Vec<Msg>> = vec![Vec::new(); ROWS.len()];
    let (mut users, mut orders) = (sizes.users, sizes.orders);
    for _ in 0..CALLS {
        let (b, n): (Result<Batch, Error>, _) =
            update(&mut c, "add_users", &candid::encode_args((users, 1u64)).unwrap());
        assert_eq!(b.unwrap().inserted, 1);
        endpoint[0].push(n);
        users += 1;
        let (b, n): (Result<Batch, Error>, _) =
            update(&mut c, "add_orders", &candid::encode_args((orders, 1u64)).unwrap());
        assert_eq!(b.unwrap().inserted, 1);
        endpoint[1].push(n);
        orders += 1;
    }
    assert_eq!(users_next(&mut c), users);
    // Order ids are dense from 1: the newest is the count. Each delete removes one order: the
    // endpoint's the newest ones, the floor's the next ones below. The pages listed lie below both.
    let last_order = orders;
    let listed_after = last_order - 4 * CALLS as u64;
    let select = format!("SELECT * FROM users WHERE user_id = {users}");
    let mut deleted = 0;
    for i in 0..CALLS as u64 {
        let newest = last_order - i;
        let (d, n): (Result<Deleted, Error>, _) =
            update(&mut c, "delete_orders", &candid::encode_args((users, Some(newest - 1), None::<u64>)).unwrap());
        let d = d.unwrap();
        assert!(d.complete && d.deleted == 1, "one order deleted: {d:?}");
        deleted += d.deleted;
        endpoint[2].push(n);
        let (r, n): (Result<Cost, Error>, _) = update(&mut c, "create_schema", &unit());
        r.unwrap();
        endpoint[3].push(n);
        let (r, n): (Result<IndexProgress, Error>, _) =
            update(&mut c, "create_indexes", &candid::encode_one(None::<u64>).unwrap());
        assert!(r.unwrap().complete);
        endpoint[4].push(n);
        let anyone = Principal::anonymous();
        let (p, n): (Result<stablebench::query::Page<stablebench::query::User>, Error>, _) =
            query(&mut c, "list_users", &candid::encode_args((users - 1, 1u32)).unwrap(), anyone);
        assert_eq!(p.unwrap().items.len(), 1);
        endpoint[5].push(n);
        let (p, n): (Result<stablebench::query::Page<stablebench::query::Order>, Error>, _) =
            query(&mut c, "list_orders", &candid::encode_args((listed_after, 1u32)).unwrap(), anyone);
        assert_eq!(p.unwrap().items.len(), 1);
        endpoint[6].push(n);
        let (r, n): (Result<stablebench::query::Rows, Error>, _) =
            query(&mut c, "query_sql", &candid::encode_one(&select).unwrap(), default_controller());
        assert_eq!(r.unwrap().rows.len(), 1);
        endpoint[7].push(n);
        let (r, n): (Result<stablebench::query::RowsPage, Error>, _) =
            query(&mut c, "query_sql_page", &candid::encode_args((&select, 0u64)).unwrap(), default_controller());
        assert_eq!(r.unwrap().rows.rows.len(), 1);
        endpoint[8].push(n);
        let (r, n): (Result<stablebench_canister::Stats, Error>, _) = query(&mut c, "stats", &unit(), anyone);
        assert_eq!(r.unwrap().orders, orders - deleted);
        endpoint[9].push(n);
        let (_, n): (stablebench_canister::ProfileInfo, _) = query(&mut c, "pragma_profile", &unit(), anyone);
        endpoint[10].push(n);
    }

    // The floors, and the endpoints that have one again beside them, call for call on the same
    // database under the benchmark wasm (the one with the `floor_*` methods), after `floor_warm`
    // prepared what the production canister prepares for its queries: like with like.
    let call_shapes = shapes(&mut c.fork().expect("forks"), users, orders);
    let mut same: Vec<Vec<Msg>> = vec![Vec::new(); ROWS.len()];
    let mut floors: Vec<Vec<Msg>> = vec![Vec::new(); ROWS.len()];
    if with_floors {
        let up = c.upgrade(bench_code(), &unit());
        assert!(up.result.is_ok(), "the upgrade to the benchmark wasm: {:?}", up.result);
        let ((), _) = update(&mut c, "floor_warm", &unit());
        let anyone = Principal::anonymous();
        // Round 0 is not measured: the upgrade emptied SQLite's page cache.
        for round in 0..=CALLS {
            let mut both = |row: usize, e: Msg, f: Msg| {
                if round > 0 {
                    same[row].push(e);
                    floors[row].push(f);
                }
            };
            let (b, e): (Result<Batch, Error>, _) =
                update(&mut c, "add_users", &candid::encode_args((users, 1u64)).unwrap());
            assert_eq!(b.unwrap().inserted, 1);
            users += 1;
            let (rows, f): (u64, _) = update(&mut c, "floor_insert_user", &candid::encode_one(users + 1).unwrap());
            assert_eq!(rows, 1);
            users += 1;
            both(0, e, f);
            let (b, e): (Result<Batch, Error>, _) =
                update(&mut c, "add_orders", &candid::encode_args((orders, 1u64)).unwrap());
            assert_eq!(b.unwrap().inserted, 1);
            orders += 1;
            let (rows, f): (u64, _) =
                update(&mut c, "floor_insert_order", &candid::encode_args((orders, users)).unwrap());
            assert_eq!(rows, 1);
            orders += 1;
            both(1, e, f);
            // Order ids are never reused: the round's two new orders are `orders - 1` and `orders`.
            // The endpoint deletes the newest, the floor the one below it.
            let (d, e): (Result<Deleted, Error>, _) =
                update(&mut c, "delete_orders", &candid::encode_args((users, Some(orders - 1), None::<u64>)).unwrap());
            let d = d.unwrap();
            assert!(d.complete && d.deleted == 1, "one order deleted: {d:?}");
            let (rows, f): (u64, _) =
                update(&mut c, "floor_delete_window", &candid::encode_args((orders - 2, orders - 1, users)).unwrap());
            assert_eq!(rows, 1, "the floor deletes one order");
            both(2, e, f);
            let (p, e): (Result<stablebench::query::Page<stablebench::query::User>, Error>, _) =
                query(&mut c, "list_users", &candid::encode_args((users - 1, 1u32)).unwrap(), anyone);
            assert_eq!(p.unwrap().items.len(), 1);
            let (rows, f): (u64, _) =
                query(&mut c, "floor_list_users", &candid::encode_args((users - 1, 1u32)).unwrap(), anyone);
            assert_eq!(rows, 1);
            both(5, e, f);
            let (p, e): (Result<stablebench::query::Page<stablebench::query::Order>, Error>, _) =
                query(&mut c, "list_orders", &candid::encode_args((listed_after, 1u32)).unwrap(), anyone);
            assert_eq!(p.unwrap().items.len(), 1);
            let (rows, f): (u64, _) =
                query(&mut c, "floor_list_orders", &candid::encode_args((listed_after, 1u32)).unwrap(), anyone);
            assert_eq!(rows, 2, "the page and the row that tells another follows");
            both(6, e, f);
            let select = format!("SELECT * FROM users WHERE user_id = {users}");
            let (r, e): (Result<stablebench::query::Rows, Error>, _) =
                query(&mut c, "query_sql", &candid::encode_one(&select).unwrap(), default_controller());
            assert_eq!(r.unwrap().rows.len(), 1);
            let (rows, f): (u64, _) =
                query(&mut c, "floor_sql", &candid::encode_one(&select).unwrap(), default_controller());
            assert_eq!(rows, 1);
            both(7, e, f);
            let (r, e): (Result<stablebench::query::RowsPage, Error>, _) =
                query(&mut c, "query_sql_page", &candid::encode_args((&select, 0u64)).unwrap(), default_controller());
            assert_eq!(r.unwrap().rows.rows.len(), 1);
            both(8, e, f);
        }
    }
    // A floor, the call's statement alone on the same wasm, does no more work than the call: the
    // medians of their instructions, under the ic model without the tracker's charges (which
    // pages a message touches also depends on where the allocator put its short-lived
    // allocations: the two may differ by a page either way, docs/per-call.md). In every mode,
    // regenerating included.
    for (row, (call, _)) in ROWS.iter().enumerate().filter(|(row, _)| !floors[*row].is_empty()) {
        let work = |v: &[Msg]| {
            common::median_work(v.iter().map(|m| (m.instructions, m.pages)), model == CostModel::Ic, updates(call))
        };
        let (e, f) = (work(&same[row]), work(&floors[row]));
        assert!(
            f <= e,
            "{model:?} {} orders, {call}: its floor runs {f} instructions (median), more than the call's {e} on the same wasm",
            sizes.orders
        );
    }
    let cells = ROWS
        .iter()
        .zip(endpoint.into_iter().zip(same.into_iter().zip(floors)))
        .map(|((call, _), (e, (same, f)))| {
            let mid = median_call(&e);
            let cell = Cell {
                instructions: mid.instructions,
                same_wasm: (!same.is_empty()).then(|| median(&same, |m| m.instructions)),
                floor: (!f.is_empty()).then(|| median(&f, |m| m.instructions)),
                floor_pages: (!f.is_empty()).then(|| (median_call(&same).pages, median_call(&f).pages)),
                reply_bytes: median(&e, |m| m.reply_bytes),
                pages: mid.pages,
            };
            (call.to_string(), cell)
        })
        .collect();
    (cells, call_shapes)
}

fn table(r: &Results) -> String {
    let cell = |sizes: &BySize, size: &str, call: &str| sizes.get(size).and_then(|m| m.get(call)).cloned();
    let num = stablebench_report::grouped;
    let alone = |c: Option<Cell>| c.map_or(" not measured |".to_string(), |c| format!(" {} |", num(c.instructions)));
    let mut out = String::from(
        "| call | on mainnet (1x) | its pages | canbench (1x) | on mainnet (10x) | canbench (10x) | reply bytes: their fee |\n\
         |---|---:|---:|---:|---:|---:|---:|\n",
    );
    for (call, _) in ROWS {
        out += &format!("| `{call}` |");
        let ic = cell(&r.mainnet, "1x", call);
        out += &alone(ic.clone());
        out += &ic.map_or(" |".to_string(), |c| format!(" {} |", pages_text(&c.pages)));
        out += &alone(cell(&r.sizes, "1x", call));
        out += &alone(cell(&r.mainnet, "10x", call));
        out += &alone(cell(&r.sizes, "10x", call));
        match cell(&r.sizes, "1x", call) {
            Some(c) => out += &format!(" {} B: {} |\n", num(c.reply_bytes), num(c.reply_bytes * TRANSMISSION_FACTOR)),
            None => out += " |\n",
        }
    }
    out += "\nAgainst its floor, both on the benchmark wasm (1x):\n\n\
            | call | on mainnet | its floor | ratio | pages, the call's; the floor's | canbench | its floor | ratio | the floor runs |\n\
            |---|---:|---:|---:|---:|---:|---:|---:|---|\n";
    let with_floor = |c: Option<Cell>| match c {
        Some(Cell { same_wasm: Some(e), floor: Some(f), .. }) => {
            format!(" {} | {} | {:.2}x |", num(e), num(f), e as f64 / f as f64)
        }
        _ => " not measured | | |".to_string(),
    };
    for (call, floor_runs) in ROWS.iter().filter(|(_, runs)| *runs != "—") {
        out += &format!("| `{call}` |");
        let ic = cell(&r.mainnet, "1x", call);
        out += &with_floor(ic.clone());
        out += &match ic.and_then(|c| c.floor_pages) {
            Some((e, f)) => format!(" {}; {} |", pages_text(&e), pages_text(&f)),
            None => " |".to_string(),
        };
        out += &with_floor(cell(&r.sizes, "1x", call));
        out += &format!(" {floor_runs} |\n");
    }
    out + "\n"
        + MAINNET_CHARGES
        + ". \"Its pages\": the Wasm pages the median call accessed / wrote, heap \
           and stable together (`endpoints_results.yml` splits them; a query's writes are undone and \
           not charged). Each model's figures come from its own install and load. The second table's calls \
           run after an upgrade, whose new heap holds little more than what those calls touch, so on mainnet \
           they touch fewer pages than the production canister's after its load: compare a call with its floor \
           there, not with the first table. On mainnet a floor \
           can touch a page more than its call, and then cost more: which pages a message touches \
           also depends on where the allocator put its short-lived allocations. The test requires \
           of every floor that it run no more instructions than its call, on mainnet once the \
           tracker's charges are taken off both.\n"
        + &growth(r)
}

/// The calls the growth sentence groups: one-row writes, and reads of one page or row.
const GROWTH_GROUPS: [(&str, [&str; 3]); 2] = [
    ("the one-row writes (`add_users`, `add_orders`, `delete_orders`)", [ROWS[0].0, ROWS[1].0, ROWS[2].0]),
    ("the one-page reads (`list_users`, `list_orders`, `query_sql`)", [ROWS[5].0, ROWS[6].0, ROWS[7].0]),
];

/// From 1x to 10x, per model and group of calls: the range of the change, as a sentence.
fn growth(r: &Results) -> String {
    let range = |sizes: &BySize, calls: &[&str]| -> Option<String> {
        let changes: Vec<f64> = calls
            .iter()
            .map(|call| {
                let (a, b) = (sizes.get("1x")?.get(*call)?, sizes.get("10x")?.get(*call)?);
                Some((b.instructions as f64 / a.instructions as f64 - 1.0) * 100.0)
            })
            .collect::<Option<_>>()?;
        let (lo, hi) = changes.iter().fold((f64::MAX, f64::MIN), |(lo, hi), c| (lo.min(*c), hi.max(*c)));
        Some(format!("{lo:+.1}% to {hi:+.1}%"))
    };
    let models: Vec<String> = [("on mainnet", &r.mainnet), ("under canbench's model", &r.sizes)]
        .into_iter()
        .filter_map(|(model, sizes)| {
            let parts: Vec<String> = GROWTH_GROUPS
                .iter()
                .filter_map(|(what, calls)| range(sizes, calls).map(|g| format!("{what} {g}")))
                .collect();
            (!parts.is_empty()).then(|| format!("{model}, {}", parts.join(", ")))
        })
        .collect();
    if models.is_empty() {
        return String::new();
    }
    format!("\nFrom 1x to 10x, per call: {}.\n", models.join("; "))
}

fn splice(doc: &str, name: &str, body: &str) -> String {
    stablebench_report::splice(doc, name, body).unwrap_or_else(|e| panic!("docs/per-call.md: {e}"))
}

#[test]
fn every_endpoint_costs_what_the_committed_results_say() {
    let committed: Results = common::committed_or_default(RESULTS);
    let mut measured = Results::default();
    let ten = std::env::var_os("STABLEBENCH_ENDPOINTS_10X").is_some();
    let wasms = common::wasm_hashes(&WASM_FILES);
    for (model, name) in [(CostModel::Canbench, "canbench"), (CostModel::Ic, "mainnet")] {
        let mut at = vec![("1x", Sizes::REFERENCE)];
        if ten {
            at.push(("10x", TEN_X));
        }
        for (size, s) in at {
            let (cells, shapes) = measure(s, model);
            let sizes = if model == CostModel::Ic { &mut measured.mainnet } else { &mut measured.sizes };
            sizes.insert(size.into(), cells);
            measured.shapes.entry(name.into()).or_default().insert(size.into(), shapes);
        }
    }
    for size in measured.sizes.keys() {
        measured.wasm.insert(size.clone(), wasms.clone());
    }
    for (model, sizes) in [("canbench", &measured.sizes), ("mainnet", &measured.mainnet)] {
        for (size, cells) in sizes {
            for (call, cell) in cells {
                eprintln!("{model} {size} {call}: {cell:?}");
            }
        }
    }
    // What holds whatever the committed figures say: the memory tracker only adds charges (and,
    // checked in `measure`, a floor does no more work than its call).
    for (size, cells) in &measured.sizes {
        for (call, c) in cells {
            let m = &measured.mainnet[size][call];
            assert!(
                m.instructions >= c.instructions,
                "{size} {call}: {} instructions under ic, fewer than canbench's {}",
                m.instructions,
                c.instructions
            );
        }
    }
    // Sizes this run did not measure (10x without STABLEBENCH_ENDPOINTS_10X) stand only if they
    // were measured on the wasm files this run would measure; regenerating without them after the
    // wasm moved would keep figures the check refuses, so it fails here too.
    for size in committed.sizes.keys().filter(|s| !measured.sizes.contains_key(*s)) {
        common::assert_measured_on(
            "endpoints_results.yml",
            size,
            committed.wasm.get(size),
            &wasms,
            "STABLEBENCH_REGENERATE_ENDPOINTS=1 STABLEBENCH_ENDPOINTS_10X=1",
        );
    }
    let readme = std::fs::read_to_string(TABLE_DOC).unwrap();
    if std::env::var_os("STABLEBENCH_REGENERATE_ENDPOINTS").is_some() {
        let mut merged = committed;
        merged.sizes.extend(measured.sizes);
        merged.mainnet.extend(measured.mainnet);
        merged.wasm.extend(measured.wasm);
        for (model, sizes) in measured.shapes.clone() {
            merged.shapes.entry(model).or_default().extend(sizes);
        }
        let yml = format!(
            "# Generated by `STABLEBENCH_REGENERATE_ENDPOINTS=1 [STABLEBENCH_ENDPOINTS_10X=1] cargo test --release -p stablebench-runner --test endpoints`;\n# whole-message instructions (medians of {CALLS} calls) on the production wasm and, beside the floors (`same_wasm`, `floor`), on the benchmark wasm, through the offline runner,\n# under the canbench cost model (`sizes`) and the ic cost model (`mainnet`), with the 64 KiB Wasm pages of each median call. Do not edit.\n{}",
            serde_yaml::to_string(&merged).unwrap()
        );
        std::fs::write(RESULTS, yml).unwrap();
        let doc = splice(&readme, "endpoint-table", &table(&merged));
        std::fs::write(TABLE_DOC, splice(&doc, "endpoint-shapes", &shapes_table(&merged))).unwrap();
        return;
    }
    for (model, sizes, committed) in
        [("canbench", &measured.sizes, &committed.sizes), ("mainnet", &measured.mainnet, &committed.mainnet)]
    {
        for (size, cells) in sizes {
            for (call, m) in cells {
                let c = committed.get(size).and_then(|s| s.get(call));
                let c =
                    c.unwrap_or_else(|| panic!("{model} {size} {call} is not in endpoints_results.yml: regenerate it"));
                assert_eq!(m, c, "{model} {size} {call}: measured, committed: regenerate endpoints_results.yml");
            }
        }
    }
    for (model, sizes) in &measured.shapes {
        for (size, calls) in sizes {
            let c = committed.shapes.get(model).and_then(|m| m.get(size));
            assert_eq!(
                Some(calls),
                c,
                "{model} {size}: the calls of n rows, measured, committed: regenerate endpoints_results.yml"
            );
        }
    }
    assert_eq!(
        readme,
        splice(&readme, "endpoint-shapes", &shapes_table(&committed)),
        "docs/per-call.md's table of calls of n rows is stale"
    );
    assert_eq!(
        readme,
        splice(&readme, "endpoint-table", &table(&committed)),
        "docs/per-call.md's endpoint table is stale"
    );
}

/// What the canister keeps after loading the reference data set under one pragma profile.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq)]
struct Kept {
    /// SQLite's page size, bytes.
    page_size: u64,
    /// Pages in the database file.
    page_count: u64,
    /// Of those, unused.
    freelist_count: u64,
    /// The stable memory the canister has grown to, bytes.
    stable_memory_bytes: u64,
    /// Its Wasm heap, bytes (SQLite's page cache included).
    heap_bytes: u64,
}

/// `storage_results.yml`: per deployable profile, what keeping the reference data set takes, and
/// the production wasm it was measured on.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq, Default)]
struct Storage {
    profiles: BTreeMap<String, Kept>,
    wasm: Wasms,
}

const STORAGE_RESULTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../storage_results.yml");
const STORAGE_DOC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/pragma-guide.md");

/// The reference data set loaded under `profile` (canbench's model: the sizes do not depend on
/// the cost model), as `stats()` reports it.
fn kept(profile: &str) -> Kept {
    let arg = candid::encode_one(Some(stablebench_canister::InitArgs {
        profile: Some(profile.to_string()),
        wasm_memory_limit: None,
    }))
    .unwrap();
    let mut c = loaded_with(Sizes::REFERENCE, CostModel::Canbench, &arg);
    let (s, _): (Result<stablebench_canister::Stats, Error>, _) =
        query(&mut c, "stats", &unit(), Principal::anonymous());
    let s = s.expect("stats");
    assert_eq!((s.profile.as_str(), s.users, s.orders), (profile, Sizes::REFERENCE.users, Sizes::REFERENCE.orders));
    assert_eq!(s.database_bytes, s.page_size * s.page_count);
    Kept {
        page_size: s.page_size,
        page_count: s.page_count,
        freelist_count: s.freelist_count,
        stable_memory_bytes: s.stable_memory_bytes,
        heap_bytes: s.heap_bytes,
    }
}

/// docs/pragma-guide.md's storage table, from `storage_results.yml`.
fn storage_table(r: &Storage) -> String {
    use stablebench_grid::ic::prices;
    use stablebench_grid::profiles::{DEFAULT, PROFILES};
    let num = stablebench_report::grouped;
    let mib = |bytes: u64| format!("{:.1}", bytes as f64 / 1_048_576.0);
    let held = |k: &Kept| k.stable_memory_bytes + k.heap_bytes;
    let mut out = format!(
        "What keeping the reference data set ({} users, {} orders, both indexes) costs under each deployable \
         profile: SQLite's database file (`page_count` × `page_size`; free pages are pages of the file that hold \
         nothing), and the stable memory and Wasm heap the production canister holds after loading it with \
         `add_users` and `add_orders` (stable memory grows in the memory manager's 8 MiB buckets; the heap \
         holds SQLite's page cache), priced at the IC's storage fee on both: {} cycles per GiB per second on a \
         {}-node subnet (fees read {}), per 30.44-day month, and on a {}-node subnet; USD at 1 T cycles = 1 XDR \
         = {} USD ({}). Produced by `STABLEBENCH_REGENERATE_STORAGE=1 cargo test --release -p stablebench-runner \
         --test endpoints` (`storage_results.yml`, a few minutes); `scripts/test.sh` remeasures the \
         recommended profile and fails if a figure moves at all, and refuses the others unless the SHA-256 of \
         the production wasm recorded beside them is that of the one built now.\n\n",
        num(Sizes::REFERENCE.users),
        num(Sizes::REFERENCE.orders),
        num(prices::GIB_STORAGE_PER_SECOND_CYCLES),
        prices::SUBNET_NODES,
        prices::FEES_READ,
        prices::LARGE_SUBNET_NODES,
        prices::USD_PER_TRILLION_CYCLES,
        prices::RATE_DATE,
    );
    let measured: Vec<(&str, &Kept)> =
        PROFILES.iter().filter_map(|p| r.profiles.get(p.name).map(|k| (p.name, k))).collect();
    if let (Some(least), Some(most), Some(rec)) = (
        measured.iter().min_by_key(|(_, k)| held(k)),
        measured.iter().max_by_key(|(_, k)| held(k)),
        r.profiles.get(DEFAULT.name),
    ) {
        out += &format!(
            "The least memory held: `{}` ({} MiB); the most: `{}` ({} MiB); the recommended `{}`: {} MiB.\n\n",
            least.0,
            mib(held(least.1)),
            most.0,
            mib(held(most.1)),
            DEFAULT.name,
            mib(held(rec)),
        );
    }
    out += &format!(
        "| profile | page size | database MiB | free pages | stable memory MiB | heap MiB | cycles per month ({} nodes) | USD per month ({} nodes) | USD per month ({} nodes) |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        prices::SUBNET_NODES,
        prices::SUBNET_NODES,
        prices::LARGE_SUBNET_NODES,
    );
    for (name, k) in &measured {
        let month = prices::storage_cycles_per_month(held(k), prices::SUBNET_NODES);
        let large = prices::storage_cycles_per_month(held(k), prices::LARGE_SUBNET_NODES);
        let mark = if *name == DEFAULT.name { " (recommended)" } else { "" };
        out += &format!(
            "| `{name}`{mark} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            num(k.page_size),
            mib(k.page_size * k.page_count),
            num(k.freelist_count),
            mib(k.stable_memory_bytes),
            mib(k.heap_bytes),
            num(month),
            stablebench_report::usd(month),
            stablebench_report::usd(large),
        );
    }
    out
}

#[test]
fn keeping_the_reference_data_costs_what_the_committed_results_say() {
    use stablebench_grid::profiles::{DEFAULT, PROFILES};
    let committed: Storage = common::committed_or_default(STORAGE_RESULTS);
    let wasm = common::wasm_hashes(&WASM_FILES[..1]);
    let doc = std::fs::read_to_string(STORAGE_DOC).unwrap();
    let splice = |doc: &str, body: &str| {
        stablebench_report::splice(doc, "storage-table", body).unwrap_or_else(|e| panic!("docs/pragma-guide.md: {e}"))
    };
    if std::env::var_os("STABLEBENCH_REGENERATE_STORAGE").is_some() {
        let profiles = PROFILES.iter().filter(|p| p.deployable().is_ok()).map(|p| (p.name.to_string(), kept(p.name)));
        let r = Storage { profiles: profiles.collect(), wasm };
        let yml = format!(
            "# Generated by `STABLEBENCH_REGENERATE_STORAGE=1 cargo test --release -p stablebench-runner --test endpoints`;\n\
             # per deployable pragma profile, SQLite's file and the canister's memory after loading the reference\n\
             # data set on the production wasm (its SHA-256 under `wasm`). Do not edit.\n{}",
            serde_yaml::to_string(&r).unwrap()
        );
        std::fs::write(STORAGE_RESULTS, yml).unwrap();
        std::fs::write(STORAGE_DOC, splice(&doc, &storage_table(&r))).unwrap();
        return;
    }
    // The recommended profile, remeasured; the others stand only on the wasm they were measured on.
    assert_eq!(
        Some(&kept(DEFAULT.name)),
        committed.profiles.get(DEFAULT.name),
        "the recommended profile's storage moved: regenerate storage_results.yml (STABLEBENCH_REGENERATE_STORAGE=1)"
    );
    common::assert_measured_on(
        "storage_results.yml",
        "per-profile",
        Some(&committed.wasm),
        &wasm,
        "STABLEBENCH_REGENERATE_STORAGE=1",
    );
    assert_eq!(doc, splice(&doc, &storage_table(&committed)), "docs/pragma-guide.md's storage table is stale");
}

const PROFILE_RESULTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../endpoint_profiles_results.yml");

/// The calls of the per-call mix under `profile` at `sizes` on mainnet (the `ic` model): the
/// canister installed with the profile (the recommended one with no argument, as
/// `every_endpoint_costs_what_the_committed_results_say` installs it, so its figures are those of
/// `endpoints_results.yml`), loaded and called as [`measure`] does, without the floors.
fn profile_calls(profile: &str, sizes: Sizes) -> stablebench_report::recommend::Calls {
    let arg = if profile == stablebench_grid::profiles::DEFAULT.name {
        unit()
    } else {
        candid::encode_one(Some(stablebench_canister::InitArgs {
            profile: Some(profile.into()),
            wasm_memory_limit: None,
        }))
        .unwrap()
    };
    let (cells, shapes) = measure_with(sizes, CostModel::Ic, &arg, false);
    let calls = cells
        .into_iter()
        .map(|(call, c)| (call, stablebench_report::recommend::Call { instructions: c.instructions, pages: c.pages }))
        .collect();
    stablebench_report::recommend::Calls { calls, shapes }
}

/// The profiles whose heap stayed bounded in `bounded_heap_results.yml` (`runner/tests/bounded_heap.rs`):
/// those the recommendation can choose.
fn bounded_profiles() -> std::collections::BTreeSet<String> {
    let r: stablebench_report::bounded::Results =
        common::committed_or_default(concat!(env!("CARGO_MANIFEST_DIR"), "/../bounded_heap_results.yml"));
    r.profiles().into_iter().filter(|n| r.bounded(n).is_ok()).map(str::to_string).collect()
}

/// Every deployable profile's calls on mainnet at 1x, and at 10x those of [`bounded_profiles`] (`endpoint_profiles_results.yml`,
/// what the recommendation's per-call mix is computed from): remeasured with
/// `STABLEBENCH_REGENERATE_ENDPOINT_PROFILES=1 cargo test --release -p stablebench-runner --test endpoints
/// every_profile` (about 15 s a profile at 1x, 2 to 3 minutes at 10x).
/// Every run checks that the recommended profile's figures there are `endpoints_results.yml`'s
/// (both files come from the same measurement), and refuses the file unless the production wasm
/// it was measured on is the one built now.
#[test]
fn every_profile_calls_what_the_committed_results_say() {
    use stablebench_grid::profiles::{DEFAULT, PROFILES};
    use stablebench_report::recommend::Sweep;
    let wasm = common::wasm_hashes(&WASM_FILES[..1]);
    if std::env::var_os("STABLEBENCH_REGENERATE_ENDPOINT_PROFILES").is_some() {
        // A part at a time, for a look before the whole hour: some profiles, some sizes (both comma lists).
        let only = std::env::var("STABLEBENCH_ENDPOINT_PROFILES_ONLY").ok();
        let sizes = std::env::var("STABLEBENCH_ENDPOINT_PROFILES_SIZES").ok();
        let mut sweep: Sweep = common::committed_or_default(PROFILE_RESULTS);
        if sweep.wasm != wasm {
            sweep = Sweep { wasm: wasm.clone(), ..Sweep::default() };
        }
        let bounded = bounded_profiles();
        for (name, at) in &mut sweep.profiles {
            if !bounded.contains(name) {
                // Its heap is not bounded (any more): it cannot be recommended, 10x is not kept.
                at.remove("10x");
            }
        }
        for p in PROFILES.iter().filter(|p| p.deployable().is_ok()) {
            if only.as_deref().is_some_and(|o| !o.split(',').any(|n| n == p.name)) {
                continue;
            }
            let at: BTreeMap<String, _> = [("1x", Sizes::REFERENCE), ("10x", TEN_X)]
                .into_iter()
                .filter(|(size, _)| *size == "1x" || bounded.contains(p.name))
                .filter(|(size, _)| sizes.as_deref().is_none_or(|o| o.split(',').any(|n| n == *size)))
                .map(|(size, s)| (size.to_string(), profile_calls(p.name, s)))
                .collect();
            eprintln!(
                "{}: {:?}",
                p.name,
                at.iter().map(|(s, c)| (s, stablebench_report::recommend::mix(c))).collect::<Vec<_>>()
            );
            sweep.profiles.entry(p.name.to_string()).or_default().extend(at);
            let yml = format!(
                "# Generated by `STABLEBENCH_REGENERATE_ENDPOINT_PROFILES=1 cargo test --release -p stablebench-runner --test endpoints every_profile`;\n\
                 # per deployable pragma profile and size, the users/orders calls of endpoints_results.yml on mainnet (the runner's ic\n\
                 # cost model), without the floors, on the production wasm (its SHA-256 under `wasm`). Do not edit.\n{}",
                serde_yaml::to_string(&sweep).unwrap()
            );
            std::fs::write(PROFILE_RESULTS, yml).unwrap();
        }
        return;
    }
    let sweep: Sweep = common::committed_or_default(PROFILE_RESULTS);
    let endpoints: Results = common::committed_or_default(RESULTS);
    common::assert_measured_on(
        "endpoint_profiles_results.yml",
        "per-profile",
        Some(&sweep.wasm),
        &wasm,
        "STABLEBENCH_REGENERATE_ENDPOINT_PROFILES=1",
    );
    let rec = sweep.profiles.get(DEFAULT.name).expect("the recommended profile in endpoint_profiles_results.yml");
    for (size, calls) in rec {
        for (call, c) in &calls.calls {
            let e = &endpoints.mainnet[size][call];
            assert_eq!(
                (c.instructions, c.pages),
                (e.instructions, e.pages),
                "{size} {call}: endpoint_profiles_results.yml and endpoints_results.yml disagree on the recommended profile"
            );
        }
        assert_eq!(
            Some(&calls.shapes),
            endpoints.shapes.get("mainnet").and_then(|m| m.get(size)),
            "{size}: the calls of n rows"
        );
    }
    // Every deployable profile at 1x; at 10x too each that can be recommended (its heap bounded).
    let bounded = bounded_profiles();
    for p in PROFILES.iter().filter(|p| p.deployable().is_ok()) {
        let at =
            sweep.profiles.get(p.name).unwrap_or_else(|| panic!("{} is not in endpoint_profiles_results.yml", p.name));
        let want: &[&str] = if bounded.contains(p.name) { &["10x", "1x"] } else { &["1x"] };
        assert_eq!(at.keys().collect::<Vec<_>>(), want, "{}: the sizes measured", p.name);
    }
}
