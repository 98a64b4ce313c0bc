//! The cost of one call of every users/orders endpoint, next to its floor: the whole message
//! (Candid decoding, the controller check, the endpoint's checks and bookkeeping, the SQL, the
//! commit, the reply) of the smallest useful call on the production wasm through the runner with
//! production limits, with the reference data set loaded (100,000 users, 1,000,000 orders,
//! indexes created before the load), and the same SQL statement alone in a minimal message
//! (the `floor_*` methods of the benchmark canister, `canister/src/floor.rs`) on the same
//! database: the production canister is upgraded to the benchmark wasm, which keeps the stable
//! memory, warmed with one call of each floor, and measured.
//!
//! Every call is measured `CALLS` times (the median is reported); the rows a call touches are
//! the newest ones or a few below them, which the loads and the calls before it have just read,
//! so both sides find them in SQLite's page cache. Updates keep their statements prepared on both
//! sides; the query endpoints find theirs prepared by the canister's updates, where a floor query
//! prepares its statement in every call (a query's heap changes are discarded).
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

const RESULTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../endpoints_results.yml");
const TABLE_DOC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/per-call.md");

/// One endpoint call's cost at one size.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq)]
struct Cell {
    /// The median instructions of the endpoint's whole message.
    instructions: u64,
    /// The median instructions of its floor, if it has one.
    floor: Option<u64>,
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

/// `method(offset, count)` in budgeted calls until the table holds `total` rows.
fn load(c: &mut Canister, method: &str, total: u64) {
    let mut next = 0;
    while next < total {
        let (b, _): (Result<Batch, Error>, _) = update(c, method, &candid::encode_args((next, total - next)).unwrap());
        next = b.unwrap_or_else(|e| panic!("{method}: {e:?}")).next_offset;
    }
}

/// The production canister with `sizes` loaded (indexes first, so the loads maintain them),
/// under `model` from its install on.
fn loaded(sizes: Sizes, model: CostModel) -> Canister {
    let opts = Options { limits: Limits::PRODUCTION, cost_model: model, ..Options::default() };
    let (mut c, _) = Canister::install(code(), &unit(), opts).expect("installs");
    let (r, _): (Result<Cost, Error>, _) = update(&mut c, "create_schema", &unit());
    r.expect("create_schema");
    let (r, _): (Result<IndexProgress, Error>, _) =
        update(&mut c, "create_indexes", &candid::encode_one(None::<u64>).unwrap());
    assert!(r.expect("create_indexes").complete);
    load(&mut c, "add_users", sizes.users);
    load(&mut c, "add_orders", sizes.orders);
    c
}

/// Measures every row of [`ROWS`] at `sizes` under `model`.
fn measure(sizes: Sizes, model: CostModel) -> BTreeMap<String, Cell> {
    let mut c = loaded(sizes, model);
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

    // The floors, on the same database under the benchmark wasm.
    let up = c.upgrade(bench_code(), &unit());
    assert!(up.result.is_ok(), "the upgrade to the benchmark wasm: {:?}", up.result);
    let floor_update = |c: &mut Canister, method: &str, arg: Vec<u8>| -> (u64, Msg) { update(c, method, &arg) };
    let floor_query =
        |c: &mut Canister, method: &str, arg: Vec<u8>| -> (u64, Msg) { query(c, method, &arg, default_controller()) };
    // The floor deletes order `k` for k = last_order - CALLS, then one lower per call.
    let delete_window = |k: u64, users: u64| candid::encode_args((k - 1, k, users)).unwrap();
    let mut floor_deletes = (0..=CALLS as u64).map(|j| last_order - CALLS as u64 - j);
    let mut floors: Vec<Vec<Msg>> = vec![Vec::new(); ROWS.len()];
    // Warm-up: the first statement after the upgrade reads the schema and the pages it needs.
    users += 1;
    assert_eq!(floor_update(&mut c, "floor_insert_user", candid::encode_one(users).unwrap()).0, 1);
    assert_eq!(floor_update(&mut c, "floor_insert_order", candid::encode_args((orders, users)).unwrap()).0, 1);
    orders += 1;
    let k = floor_deletes.next().unwrap();
    assert_eq!(floor_update(&mut c, "floor_delete_window", delete_window(k, users)).0, 1);
    for _ in 0..CALLS {
        users += 1;
        let (rows, n) = floor_update(&mut c, "floor_insert_user", candid::encode_one(users).unwrap());
        assert_eq!(rows, 1);
        floors[0].push(n);
        let (rows, n) = floor_update(&mut c, "floor_insert_order", candid::encode_args((orders, users)).unwrap());
        assert_eq!(rows, 1);
        floors[1].push(n);
        orders += 1;
        let k = floor_deletes.next().unwrap();
        let (rows, n) = floor_update(&mut c, "floor_delete_window", delete_window(k, users));
        assert_eq!(rows, 1, "the floor deletes one order");
        floors[2].push(n);
        let (rows, n) = floor_query(&mut c, "floor_list_users", candid::encode_args((users - 1, 1u32)).unwrap());
        assert_eq!(rows, 1);
        floors[5].push(n);
        let (rows, n) = floor_query(&mut c, "floor_list_orders", candid::encode_args((listed_after, 1u32)).unwrap());
        assert_eq!(rows, 2, "the page and the row that tells another follows");
        floors[6].push(n);
        let select = format!("SELECT * FROM users WHERE user_id = {users}");
        let (rows, n) = floor_query(&mut c, "floor_sql", candid::encode_one(select).unwrap());
        assert_eq!(rows, 1);
        floors[7].push(n);
        floors[8].push(n);
    }
    ROWS.iter()
        .zip(endpoint.into_iter().zip(floors))
        .map(|((call, _), (e, f))| {
            let mid = median_call(&e);
            let cell = Cell {
                instructions: mid.instructions,
                floor: (!f.is_empty()).then(|| median(&f, |m| m.instructions)),
                reply_bytes: median(&e, |m| m.reply_bytes),
                pages: mid.pages,
            };
            (call.to_string(), cell)
        })
        .collect()
}

fn table(r: &Results) -> String {
    let cell = |sizes: &BySize, size: &str, call: &str| sizes.get(size).and_then(|m| m.get(call)).cloned();
    let num = stablebench::report::grouped;
    let with_floor = |c: Option<Cell>| match c {
        Some(Cell { instructions, floor: Some(f), .. }) => {
            format!(" {} | {} | {:.2}x |", num(instructions), num(f), instructions as f64 / f as f64)
        }
        Some(c) => format!(" {} | — | — |", num(c.instructions)),
        None => " not measured | | |".to_string(),
    };
    let alone = |c: Option<Cell>| c.map_or(" not measured |".to_string(), |c| format!(" {} |", num(c.instructions)));
    let mut out = String::from(
        "| call | on mainnet (1x) | floor | ratio | its pages | canbench (1x) | floor | ratio | on mainnet (10x) | canbench (10x) | reply bytes: their fee | the floor runs |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n",
    );
    for (call, floor_sql) in ROWS {
        out += &format!("| `{call}` |");
        let ic = cell(&r.mainnet, "1x", call);
        out += &with_floor(ic.clone());
        out += &ic.map_or(" |".to_string(), |c| format!(" {} |", pages_text(&c.pages)));
        out += &with_floor(cell(&r.sizes, "1x", call));
        out += &alone(cell(&r.mainnet, "10x", call));
        out += &alone(cell(&r.sizes, "10x", call));
        match cell(&r.sizes, "1x", call) {
            Some(c) => out += &format!(" {} B: {} |", num(c.reply_bytes), num(c.reply_bytes * TRANSMISSION_FACTOR)),
            None => out += " |",
        }
        out += &format!(" {floor_sql} |\n");
    }
    out + "\n"
        + MAINNET_CHARGES
        + ". \"Its pages\": the Wasm pages the median call accessed / wrote, heap \
           and stable together (`endpoints_results.yml` splits them; a query's writes are undone and \
           not charged). Each model's figures come from its own install and load.\n"
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
    stablebench::report::splice(doc, name, body).unwrap_or_else(|e| panic!("docs/per-call.md: {e}"))
}

#[test]
fn every_endpoint_costs_what_the_committed_results_say() {
    let committed: Results = std::fs::read_to_string(RESULTS)
        .ok()
        .map(|s| serde_yaml::from_str(&s).expect("endpoints_results.yml parses"))
        .unwrap_or_default();
    let mut measured = Results::default();
    let ten = std::env::var_os("STABLEBENCH_ENDPOINTS_10X").is_some();
    let wasms = common::wasm_hashes(&WASM_FILES);
    for (model, sizes) in [(CostModel::Canbench, &mut measured.sizes), (CostModel::Ic, &mut measured.mainnet)] {
        sizes.insert("1x".into(), measure(Sizes::REFERENCE, model));
        if ten {
            let ten = Sizes { users: Sizes::REFERENCE.users * 10, orders: Sizes::REFERENCE.orders * 10 };
            sizes.insert("10x".into(), measure(ten, model));
        }
    }
    for size in measured.sizes.keys() {
        measured.wasm.insert(size.clone(), wasms.clone());
    }
    // What holds whatever the committed figures say: the memory tracker only adds charges.
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
    for (model, sizes) in [("canbench", &measured.sizes), ("mainnet", &measured.mainnet)] {
        for (size, cells) in sizes {
            for (call, cell) in cells {
                eprintln!("{model} {size} {call}: {cell:?}");
            }
        }
    }
    let readme = std::fs::read_to_string(TABLE_DOC).unwrap();
    if std::env::var_os("STABLEBENCH_REGENERATE_ENDPOINTS").is_some() {
        let mut merged = committed;
        merged.sizes.extend(measured.sizes);
        merged.mainnet.extend(measured.mainnet);
        merged.wasm.extend(measured.wasm);
        let yml = format!(
            "# Generated by `STABLEBENCH_REGENERATE_ENDPOINTS=1 [STABLEBENCH_ENDPOINTS_10X=1] cargo test --release -p stablebench-runner --test endpoints`;\n# whole-message instructions (medians of {CALLS} calls) on the production wasm and, for the floors, the benchmark wasm, through the offline runner,\n# under the canbench cost model (`sizes`) and the ic cost model (`mainnet`), with the 64 KiB Wasm pages of each median call. Do not edit.\n{}",
            serde_yaml::to_string(&merged).unwrap()
        );
        std::fs::write(RESULTS, yml).unwrap();
        std::fs::write(TABLE_DOC, splice(&readme, "endpoint-table", &table(&merged))).unwrap();
        return;
    }
    // Sizes this run did not measure (10x without STABLEBENCH_ENDPOINTS_10X) stand only if they
    // were measured on the wasm files this run would measure.
    for size in committed.sizes.keys().filter(|s| !measured.sizes.contains_key(*s)) {
        common::assert_measured_on(
            "endpoints_results.yml",
            size,
            committed.wasm.get(size),
            &wasms,
            "STABLEBENCH_REGENERATE_ENDPOINTS=1 STABLEBENCH_ENDPOINTS_10X=1",
        );
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
    assert_eq!(
        readme,
        splice(&readme, "endpoint-table", &table(&committed)),
        "docs/per-call.md's endpoint table is stale"
    );
}
