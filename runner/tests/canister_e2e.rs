//! End-to-end tests of the users/orders canister: the real production wasm
//! (`target/canister/stablebench.wasm`, built by `scripts/build.sh`) through the offline runner.

mod common;
use common::{code, decode, integrity_ok, sql, unit};

use candid::{CandidType, Principal};
use serde::de::DeserializeOwned;
use stablebench::query::{Rows, Value};
use stablebench_canister::{Batch, Cost, Deleted, Error, IndexProgress, KvBackend, Stats};
use stablebench_runner::canister::{default_controller, Canister, Limits, Options, Reject};
use stablebench_runner::host::Trap;

fn install(limits: Limits) -> Canister {
    Canister::install(code(), &unit(), Options { limits, ..Options::default() }).expect("installs").0
}

fn create_indexes(c: &mut Canister) -> IndexProgress {
    update::<Result<IndexProgress, Error>>(c, "create_indexes", &unit()).expect("create_indexes")
}

fn call<R: CandidType + DeserializeOwned>(
    c: &mut Canister,
    method: &str,
    arg: &[u8],
    caller: Principal,
    query: bool,
) -> R {
    let out = if query { c.query(method, arg, caller) } else { c.update(method, arg, caller) };
    decode(out, method)
}

fn update<R: CandidType + DeserializeOwned>(c: &mut Canister, method: &str, arg: &[u8]) -> R {
    call(c, method, arg, default_controller(), false)
}

fn stats(c: &mut Canister) -> Stats {
    call::<Result<Stats, Error>>(c, "stats", &unit(), Principal::anonymous(), true).expect("stats")
}

fn count(c: &mut Canister, text: &str) -> i64 {
    match sql(c, text).expect("query").rows[0][0] {
        Value::Integer(n) => n,
        ref v => panic!("{text}: not a count: {v:?}"),
    }
}

/// A batch load as a controller; its reply's `instructions` must be the message's own count up
/// to the reply: more than zero, at most what the runner counted for the whole message.
fn batch(c: &mut Canister, method: &str, offset: u64, count: u64) -> Batch {
    let out = c.update(method, &candid::encode_args((offset, count)).unwrap(), default_controller());
    let whole = out.instructions;
    let b = decode::<Result<Batch, Error>>(out, method).unwrap_or_else(|e| panic!("{method}: {e:?}"));
    assert!(b.instructions > 0 && b.instructions <= whole, "{method}: reply says {}, message {whole}", b.instructions);
    b
}

fn load(c: &mut Canister, users: u64, orders: u64) {
    let cost = update::<Result<Cost, Error>>(c, "create_schema", &unit()).expect("schema");
    assert!(cost.instructions > 0);
    let b = batch(c, "add_users", 0, users);
    assert_eq!((b.inserted, b.next_offset, b.complete), (users, users, true));
    let b = batch(c, "add_orders", 0, orders);
    assert_eq!((b.inserted, b.next_offset, b.complete), (orders, orders, true));
}

#[test]
fn the_workload_runs_through_the_endpoints_with_the_oracle_results() {
    let mut c = install(Limits::PRODUCTION);
    load(&mut c, 2_000, 20_000);
    assert!(create_indexes(&mut c).complete);
    let join = sql(&mut c, &stablebench::workload::select_join_sql(20)).unwrap();
    let (n, sum) = stablebench::oracle::join(2_000, 20_000, 20);
    assert_eq!((join.rows.len() as u64, stablebench::oracle::checksum(&join)), (n, sum));
    assert_eq!(sql(&mut c, stablebench::workload::SELECT_LIKE).unwrap().rows.len(), 2_000);
    let deleted: Result<Deleted, Error> = update(&mut c, "delete_orders", &candid::encode_one(2u64).unwrap());
    let deleted = deleted.unwrap();
    assert_eq!((deleted.deleted, deleted.complete), (stablebench::oracle::orders_of_users(2_000, 20_000, 2), true));
    let s = stats(&mut c);
    assert_eq!((s.users, s.orders, s.indexes.len()), (2_000, 20_000 - 20, 2));
    assert_eq!(
        (s.page_size, s.profile.as_str()),
        (8192, stablebench_grid::profiles::DEFAULT.name),
        "the recommended profile is the default"
    );
    assert_eq!(s.profile, "page_8k_temp_file");
    let active = |name: &str| s.pragmas.iter().find(|p| p.name == name).unwrap().value.clone();
    // The profile's 1,000,000-page cache, bounded to a quarter of the default 3 GiB
    // wasm_memory_limit: 768 MiB, as KiB (negative).
    assert_eq!(
        (active("journal_mode"), active("locking_mode"), active("cache_size")),
        ("persist".into(), "exclusive".into(), (-(768i64 << 10)).to_string())
    );
    // temp_store FILE is 1; ic-rusqlite's SQLite enforces foreign keys unless told otherwise.
    assert_eq!((active("temp_store"), active("foreign_keys")), ("1".into(), "1".into()));
    assert!(integrity_ok(&mut c));
}

#[test]
fn non_controllers_get_not_controller_and_change_nothing() {
    let mut c = install(Limits::PRODUCTION);
    load(&mut c, 100, 1_000);
    let before = stats(&mut c);
    let anon = Principal::anonymous();
    let not_controller = Error::NotController { caller: anon };
    let unit = unit();
    let batch = candid::encode_args((100u64, 10u64)).unwrap();
    assert_eq!(call::<Result<Cost, Error>>(&mut c, "create_schema", &unit, anon, false), Err(not_controller.clone()));
    assert_eq!(call::<Result<Batch, Error>>(&mut c, "add_users", &batch, anon, false), Err(not_controller.clone()));
    assert_eq!(
        call::<Result<Deleted, Error>>(&mut c, "delete_orders", &candid::encode_one(50u64).unwrap(), anon, false),
        Err(not_controller.clone())
    );
    assert_eq!(
        call::<Result<IndexProgress, Error>>(&mut c, "create_indexes", &unit, anon, false),
        Err(not_controller.clone())
    );
    let q = candid::encode_one("SELECT 1").unwrap();
    assert_eq!(call::<Result<Rows, Error>>(&mut c, "query_sql", &q, anon, true), Err(not_controller));
    assert_eq!(stats(&mut c), before);
}

#[test]
fn bad_input_gets_a_specific_error_and_changes_nothing() {
    let mut c = install(Limits::PRODUCTION);
    let unit = unit();
    let early: Result<Batch, Error> = update(&mut c, "add_users", &candid::encode_args((0u64, 10u64)).unwrap());
    assert_eq!(early, Err(Error::SchemaMissing));
    load(&mut c, 100, 1_000);
    let before = stats(&mut c);
    let retried = batch(&mut c, "add_users", 0, 100);
    assert_eq!(
        (retried.inserted, retried.next_offset, retried.complete),
        (0, 100, true),
        "a repeated batch adds nothing"
    );
    let gap: Result<Batch, Error> = update(&mut c, "add_users", &candid::encode_args((101u64, 5u64)).unwrap());
    assert!(
        matches!(gap, Err(Error::InvalidArgument { ref message }) if message.contains("continue from offset 100")),
        "{gap:?}"
    );
    let budget: Result<Batch, Error> =
        update(&mut c, "add_users", &candid::encode_args((100u64, 5u64, Some(1u64))).unwrap());
    assert!(matches!(budget, Err(Error::InvalidArgument { ref message }) if message.contains("budget")), "{budget:?}");
    let zero: Result<Batch, Error> = update(&mut c, "add_orders", &candid::encode_args((1_000u64, 0u64)).unwrap());
    assert!(matches!(zero, Err(Error::InvalidArgument { .. })), "{zero:?}");
    let huge: Result<Batch, Error> = update(&mut c, "add_orders", &candid::encode_args((1_000u64, u64::MAX)).unwrap());
    assert!(matches!(huge, Err(Error::InvalidArgument { .. })), "{huge:?}");
    assert!(matches!(sql(&mut c, "DELETE FROM orders"), Err(Error::NotReadOnly { .. })));
    assert!(matches!(sql(&mut c, "SELEC nonsense"), Err(Error::NotReadOnly { .. })));
    assert!(matches!(sql(&mut c, "SELECT * FROM no_such_table"), Err(Error::Sqlite { .. })));
    // A wrong Candid type is rejected by the canister's decoder (a trap: nothing changes).
    let out = c.update("add_users", &candid::encode_one("not numbers").unwrap(), default_controller());
    assert!(matches!(out.result, Err(Reject::Trapped(_))), "{:?}", out.result);
    update::<Result<Cost, Error>>(&mut c, "create_schema", &unit).unwrap(); // idempotent
    assert_eq!(stats(&mut c), before);
    assert!(integrity_ok(&mut c));
}

#[test]
fn a_trap_in_the_middle_of_an_update_leaves_the_database_as_it_was() {
    // An update limit of 200 M instructions stops a 100,000-user insert (about 1.9 B) halfway
    // through its transaction: the IC discards the whole message.
    let mut c = install(Limits { update: 200_000_000, ..Limits::PRODUCTION });
    load(&mut c, 1_000, 5_000);
    let before = stats(&mut c);
    let join = sql(&mut c, &stablebench::workload::select_join_sql(10)).unwrap();
    let out = c.update("add_users", &candid::encode_args((1_000u64, 100_000u64)).unwrap(), default_controller());
    assert_eq!(out.result, Err(Reject::Trapped(Trap::OutOfInstructions)));
    assert_eq!(stats(&mut c), before);
    assert_eq!(sql(&mut c, &stablebench::workload::select_join_sql(10)).unwrap(), join);
    assert!(integrity_ok(&mut c));
    // And the canister carries on from where it was.
    let b: Result<Batch, Error> = update(&mut c, "add_users", &candid::encode_args((1_000u64, 500u64)).unwrap());
    assert_eq!(b.unwrap().next_offset, 1_500);
}

#[test]
fn a_query_that_would_pass_its_instruction_limit_stops_with_an_error() {
    let mut c = install(Limits::PRODUCTION);
    load(&mut c, 10, 10);
    // No row comes out before the aggregate has run: only SQLite's progress handler can stop it.
    let text =
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000000000) SELECT sum(i) FROM n";
    match sql(&mut c, text) {
        Err(Error::InstructionLimit { budget, .. }) => assert_eq!(budget, 4_000_000_000),
        other => panic!("expected InstructionLimit, got {other:?}"),
    }
}

/// `stats` and one-row loads cost the same whatever the size: the counts are kept, not counted
/// (`SELECT count(*)` would visit every page: about 2 M instructions more at the larger size).
#[test]
fn stats_and_a_one_order_load_cost_the_same_at_ten_times_the_rows() {
    let mut c = install(Limits::PRODUCTION);
    load(&mut c, 1_000, 10_000);
    let cost = |c: &mut Canister| -> (u64, u64) {
        let out = c.query("stats", &unit(), Principal::anonymous());
        let stats = out.instructions;
        assert!(decode::<Result<Stats, Error>>(out, "stats").is_ok());
        let next = next_order_offset(c);
        let out = c.update("add_orders", &candid::encode_args((next, 1u64)).unwrap(), default_controller());
        let add = out.instructions;
        assert_eq!(decode::<Result<Batch, Error>>(out, "add_orders").unwrap().inserted, 1);
        (stats, add)
    };
    let small = cost(&mut c);
    assert_eq!(batch(&mut c, "add_users", 1_000, 9_000).inserted, 9_000);
    let next = next_order_offset(&mut c);
    assert_eq!(batch(&mut c, "add_orders", next, 99_999).inserted, 99_999);
    let large = cost(&mut c);
    let s = stats(&mut c);
    assert_eq!((s.users, s.orders), (10_000, 110_001));
    assert_eq!(count(&mut c, "SELECT count(*) FROM orders"), 110_001);
    for (what, a, b) in [("stats", small.0, large.0), ("add_orders(next, 1)", small.1, large.1)] {
        // A B-tree one level deeper may add a few thousand instructions; a count, millions.
        eprintln!("{what}: {a} instructions at 10,000 orders, {b} at 110,000");
        assert!(b.abs_diff(a) < 20_000, "{what}: {a} instructions at 10,000 orders, {b} at 110,000");
    }
}

/// The next generator offset of `add_orders`: the orders' count, as this test deletes none.
fn next_order_offset(c: &mut Canister) -> u64 {
    stats(c).orders
}

#[test]
fn an_upgrade_keeps_every_row_and_the_settings() {
    let mut c = install(Limits::PRODUCTION);
    load(&mut c, 3_000, 30_000);
    assert!(create_indexes(&mut c).complete);
    // The orders' count is kept outside the database (a stable cell) once a delete counted them:
    // the upgrade must keep it with the rows.
    let d: Result<Deleted, Error> = update(&mut c, "delete_orders", &candid::encode_one(10u64).unwrap());
    assert_eq!(d.unwrap().deleted, 100);
    let before = stats(&mut c);
    assert_eq!(before.orders as i64, count(&mut c, "SELECT count(*) FROM orders"));
    assert_eq!(before.orders, 30_000 - 100);
    let like = sql(&mut c, stablebench::workload::SELECT_LIKE).unwrap();
    for _ in 0..2 {
        let out = c.upgrade(code(), &unit());
        assert!(out.result.is_ok(), "{:?}", out.result);
    }
    let after = stats(&mut c);
    assert_eq!(
        (after.users, after.orders, &after.indexes, &after.pragmas),
        (before.users, before.orders, &before.indexes, &before.pragmas)
    );
    assert_eq!(sql(&mut c, stablebench::workload::SELECT_LIKE).unwrap(), like);
    assert_eq!(count(&mut c, "SELECT count(*) FROM orders WHERE user_id <= 30"), 200);
    assert!(integrity_ok(&mut c));
    let b: Result<Batch, Error> = update(&mut c, "add_orders", &candid::encode_args((30_000u64, 100u64)).unwrap());
    assert_eq!(b.unwrap().next_offset, 30_100);
    assert_eq!(stats(&mut c).orders, 30_000 - 100 + 100);
}

#[test]
fn a_result_too_large_for_one_reply_is_an_error_not_a_trap() {
    let mut c = install(Limits::PRODUCTION);
    load(&mut c, 40_000, 1);
    match sql(&mut c, "SELECT * FROM users") {
        Err(Error::ReplyTooLarge { rows_read, limit_bytes }) => {
            assert_eq!(limit_bytes, 2_000_000);
            assert!(rows_read < 40_000, "{rows_read}");
        }
        other => panic!("expected ReplyTooLarge, got {:?}", other.map(|r| r.rows.len())),
    }
    assert_eq!(count(&mut c, "SELECT count(*) FROM users"), 40_000);
}

fn kv_get(c: &mut Canister, backend: KvBackend, key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
    call(c, "kv_get", &candid::encode_args((backend, key.to_vec())).unwrap(), Principal::anonymous(), true)
}

fn kv_len(c: &mut Canister, backend: KvBackend) -> u64 {
    call::<Result<u64, Error>>(c, "kv_len", &candid::encode_one(backend).unwrap(), Principal::anonymous(), true)
        .expect("kv_len")
}

/// Checks that every key-value backend stores, returns and keeps values across two upgrades,
/// that writes are for controllers only and bad keys are refused, and that a resumed or repeated
/// `kv_load` never duplicates a key.
#[test]
fn every_key_value_backend_keeps_its_values_across_upgrades_and_refuses_bad_calls() {
    let mut c = install(Limits::PRODUCTION);
    let data = stablebench::kv::gen::TrieDataset::new(1_000, stablebench_grid::KV_SEED).unwrap();
    let backends = stablebench_grid::cells::BACKENDS.map(|b| KvBackend::try_from(b).expect("a key-value backend"));
    for b in backends {
        // Before any write the SQLite tables do not exist: reads answer "nothing", not an error.
        assert_eq!(kv_get(&mut c, b, &[1; 32]), Ok(None), "{b:?}");
        assert_eq!(kv_len(&mut c, b), 0);
        // Loaded in two calls, the second repeated (a retry): every key exactly once. Each call's
        // range fits the default budget, so each is `complete` (its range is all present).
        for (offset, count) in [(0u64, 400u64), (400, 600), (400, 600)] {
            let arg = candid::encode_args((b, 1_000u64, offset, count, None::<u64>)).unwrap();
            let batch: Batch = update::<Result<Batch, Error>>(&mut c, "kv_load", &arg).expect("kv_load");
            assert_eq!((batch.inserted, batch.next_offset, batch.complete), (count, offset + count, true));
        }
        assert_eq!(kv_len(&mut c, b), data.len(), "{b:?}: 1,000 entries and their 100 warm-ups");
        let put = |key: Vec<u8>, value: &[u8]| candid::encode_args((b, key, value.to_vec())).unwrap();
        update::<Result<Cost, Error>>(&mut c, "kv_put", &put(vec![7; 32], b"seven")).expect("kv_put");
        // Strangers cannot write; a key that is not 32 bytes is refused; nothing changes.
        let stranger = Principal::from_slice(&[9; 29]);
        let refused: Result<Cost, Error> = call(&mut c, "kv_put", &put(vec![8; 32], b"x"), stranger, false);
        assert!(matches!(refused, Err(Error::NotController { .. })), "{refused:?}");
        let short: Result<Cost, Error> = update(&mut c, "kv_put", &put(vec![8; 31], b"x"));
        assert!(matches!(short, Err(Error::InvalidArgument { .. })), "{short:?}");
        assert!(matches!(kv_get(&mut c, b, &[8; 33]), Err(Error::InvalidArgument { .. })));
        assert_eq!(kv_len(&mut c, b), data.len() + 1);
    }
    for _ in 0..2 {
        let out = c.upgrade(code(), &unit());
        assert!(out.result.is_ok(), "upgrade: {:?}", out.result);
        for b in backends {
            assert_eq!(kv_get(&mut c, b, &[7; 32]), Ok(Some(b"seven".to_vec())), "{b:?} after an upgrade");
            let (key, value) = &data.query_keys()[3];
            assert_eq!(kv_get(&mut c, b, key), Ok(Some(value.clone())));
            assert_eq!(kv_len(&mut c, b), data.len() + 1);
        }
    }
    // A bad data-set size is refused with the rule.
    let bad: Result<Batch, Error> =
        update(&mut c, "kv_load", &candid::encode_args((KvBackend::Sqlite, 150u64, 0u64, 10u64, None::<u64>)).unwrap());
    assert!(matches!(bad, Err(Error::InvalidArgument { .. })), "{bad:?}");
}

/// The writes a user makes between two `create_indexes` calls, the `round`-th: 100 more orders
/// and the orders of the first `round` users deleted.
fn writes_between_calls(c: &mut Canister, round: u64) {
    let next = count(c, "SELECT seq FROM sqlite_sequence WHERE name = 'orders'") as u64;
    let b = batch(c, "add_orders", next, 100);
    assert!(b.complete);
    let d: Deleted = update::<Result<Deleted, Error>>(c, "delete_orders", &candid::encode_one(round).unwrap())
        .expect("delete_orders");
    assert!(d.complete);
}

/// What a user can read of the orders: their count, and sums over their columns.
fn orders_digest(c: &mut Canister) -> Vec<Vec<Value>> {
    sql(c, "SELECT count(*), sum(order_id), sum(user_id), sum(amount) FROM orders").unwrap().rows
}

#[test]
fn an_index_too_large_for_the_budget_is_built_across_calls_while_writes_and_upgrades_go_on() {
    let (mut c, mut model) = (install(Limits::PRODUCTION), install(Limits::PRODUCTION));
    // More users than one copy window (shadow::COPY_WINDOW), so that the users' build too
    // spans calls (a table of at most one window is copied and swapped in one call).
    for c in [&mut c, &mut model] {
        load(c, 25_000, 100_000);
    }
    // The smallest budget the canister takes: neither index fits it (the users' is a parent
    // table, the orders' a child), so both are built through shadow tables.
    let budget = candid::encode_one(Some(10_000_000u64)).unwrap();
    let (mut round, mut tables) = (0u64, std::collections::BTreeSet::new());
    loop {
        let p: IndexProgress = update::<Result<IndexProgress, Error>>(&mut c, "create_indexes", &budget).unwrap();
        if let Some(b) = &p.building {
            tables.insert(b.table.clone());
            assert!(!stats(&mut c).indexes.contains(&b.index), "{} is listed before it is whole", b.index);
        }
        if p.complete {
            break;
        }
        round += 1;
        assert!(round < 2_000, "no end in sight: {p:?}");
        if round % 10 == 0 {
            writes_between_calls(&mut c, round / 10);
            writes_between_calls(&mut model, round / 10);
        }
        if round % 50 == 0 {
            assert!(c.upgrade(code(), &unit()).result.is_ok());
        }
    }
    assert_eq!(tables.into_iter().collect::<Vec<_>>(), ["orders", "users"]);
    assert!(create_indexes(&mut model).complete);
    assert_eq!(orders_digest(&mut c), orders_digest(&mut model));
    let (s, m) = (stats(&mut c), stats(&mut model));
    assert_eq!((s.users, s.orders, &s.indexes), (m.users, m.orders, &m.indexes));
    assert_eq!(s.orders, count(&mut c, "SELECT count(*) FROM orders") as u64);
    assert!(integrity_ok(&mut c));
    let plan = sql(&mut c, "EXPLAIN QUERY PLAN SELECT * FROM orders WHERE user_id = 5").unwrap();
    assert!(format!("{:?}", plan.rows).contains("idx_orders_user_id"), "{plan:?}");
    assert_eq!(count(&mut c, "SELECT count(*) FROM sqlite_schema WHERE name LIKE 'stablebench_shadow%'"), 0);
    // Foreign keys hold after the users' table was swapped.
    assert_eq!(count(&mut c, "SELECT count(*) FROM pragma_foreign_key_check"), 0);
    assert!(sql(&mut c, "SELECT * FROM pragma_foreign_keys").unwrap().rows == vec![vec![Value::Integer(1)]]);
}

/// Under mainnet's memory charges (the ic cost model: every 64 KiB page a message touches costs
/// 80,000 instructions, 80,000 more if it writes it), the budgeted endpoints still stop within
/// their budgets instead of trapping, and lose nothing: the batch loads, the index build across
/// calls at the smallest budget and a delete across calls leave exactly the rows a canister under
/// canbench's charges has.
#[test]
fn under_mainnets_memory_charges_the_budgeted_endpoints_still_end_in_budget_and_lose_nothing() {
    use stablebench_runner::replica::CostModel;
    let install_in = |cost_model| {
        let opts = Options { limits: Limits::PRODUCTION, cost_model, ..Options::default() };
        Canister::install(code(), &unit(), opts).expect("installs").0
    };
    let (mut ic, mut model) = (install_in(CostModel::Ic), install_in(CostModel::Canbench));
    for c in [&mut ic, &mut model] {
        load(c, 25_000, 100_000);
    }
    let budget = 10_000_000u64;
    let (mut calls, mut most) = (0, 0);
    loop {
        let out = ic.update("create_indexes", &candid::encode_one(Some(budget)).unwrap(), default_controller());
        most = most.max(out.instructions);
        let p = decode::<Result<IndexProgress, Error>>(out, "create_indexes").expect("create_indexes");
        calls += 1;
        assert!(calls < 2_000, "no end in sight: {p:?}");
        if p.complete {
            break;
        }
    }
    assert!(calls > 2, "the build spans calls under the ic model too ({calls})");
    assert!(create_indexes(&mut model).complete);
    // Deletes across calls, each within a small budget.
    let (mut from, mut deleted) = (0u64, 0u64);
    loop {
        let arg = candid::encode_args((500u64, Some(from), Some(budget))).unwrap();
        let d = update::<Result<Deleted, Error>>(&mut ic, "delete_orders", &arg).expect("delete_orders");
        deleted += d.deleted;
        from = d.next_order_id;
        if d.complete {
            break;
        }
    }
    let all = update::<Result<Deleted, Error>>(&mut model, "delete_orders", &candid::encode_one(500u64).unwrap())
        .expect("delete_orders");
    assert!(all.complete);
    assert_eq!(deleted, all.deleted);
    assert_eq!(orders_digest(&mut ic), orders_digest(&mut model));
    let (s, m) = (stats(&mut ic), stats(&mut model));
    assert_eq!((s.users, s.orders, &s.indexes), (m.users, m.orders, &m.indexes));
    assert!(integrity_ok(&mut ic));
    // The index build's calls overran their budget by at most one copy window's rows, as under
    // canbench (about 0.3 B; the 40 B limit is far).
    assert!(most < 2_000_000_000, "a create_indexes call ran {most} instructions on a 10 M budget");
}
