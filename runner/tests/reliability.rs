//! Nothing lost: faults, upgrades, message limits and hostile input, on the real production wasm
//! (`target/canister/stablebench.wasm`) through the offline runner with production limits.

mod common;
use common::{code, decode, integrity_ok, sql, unit};

use std::collections::BTreeMap;

use candid::{CandidType, Principal};
use serde::de::DeserializeOwned;
use stablebench::oracle;
use stablebench::pragma::PROFILES;
use stablebench::query::{Order, Page, Rows, RowsPage, User, Value};
use stablebench::workload::select_join_sql;
use stablebench_canister::{Batch, Cost, Deleted, Error, IndexProgress, InitArgs, ProfileInfo, Stats};
use stablebench_runner::canister::{default_controller, Canister, Options, Reject};

fn init_arg(profile: Option<&str>) -> Vec<u8> {
    candid::encode_one(Some(InitArgs { profile: profile.map(str::to_string), wasm_memory_limit: None })).unwrap()
}

fn install(profile: Option<&str>) -> Canister {
    Canister::install(code(), &init_arg(profile), Options::default()).expect("installs").0
}

fn update<R: CandidType + DeserializeOwned>(c: &mut Canister, method: &str, arg: Vec<u8>) -> R {
    decode(c.update(method, &arg, default_controller()), method)
}

fn query<R: CandidType + DeserializeOwned>(c: &mut Canister, method: &str, arg: Vec<u8>) -> R {
    decode(c.query(method, &arg, default_controller()), method)
}

fn stats(c: &mut Canister) -> Stats {
    query::<Result<Stats, Error>>(c, "stats", unit()).expect("stats")
}

/// `PRAGMA quick_check` (integrity_check without the index-content cross-check, which costs
/// more than one 5 B query at reference size) through the read-only endpoint, one table (with its
/// indexes) per query: under the recommended profile's 8 MiB cache the whole database's check at
/// reference size is refused with `InstructionLimit` (over the 4 B the endpoint allows a query),
/// while each table's fits.
fn quick_check_ok(c: &mut Canister) -> bool {
    ["users", "orders"].iter().all(|table| {
        sql(c, &format!("SELECT * FROM pragma_quick_check('{table}')")).expect("quick_check").rows
            == vec![vec![Value::Text("ok".into())]]
    })
}

/// Calls `add_users`/`add_orders` from `offset` until `complete`, upgrading the canister after
/// every `upgrade_every`-th call and repeating every `retry_every`-th call (as after a lost
/// reply); returns (calls including retries, upgrades, retries).
fn load_all(
    c: &mut Canister,
    method: &str,
    total: u64,
    budget: u64,
    upgrade_every: u32,
    retry_every: u32,
) -> (u32, u32, u32) {
    let (mut offset, mut calls, mut upgrades, mut retries) = (0u64, 0u32, 0u32, 0u32);
    loop {
        let arg = candid::encode_args((offset, total - offset, Some(budget))).unwrap();
        let b: Batch = update::<Result<Batch, Error>>(c, method, arg.clone()).expect(method);
        calls += 1;
        if calls % retry_every == 0 {
            // The same arguments again: rows the first call committed are skipped.
            let again: Batch = update::<Result<Batch, Error>>(c, method, arg).expect(method);
            calls += 1;
            // A retry continues where the first call stopped: it inserts only rows past
            // `b.next_offset`, and the table then holds exactly `again.next_offset` rows.
            assert_eq!(again.next_offset, b.next_offset + again.inserted, "a retry re-inserted rows");
            let s = stats(c);
            let rows = if method == "add_users" { s.users } else { s.orders };
            assert_eq!(rows, again.next_offset, "{method}: a retry must leave exactly next_offset rows");
            offset = again.next_offset;
            retries += 1;
            if again.complete {
                break;
            }
        } else {
            offset = b.next_offset;
            if b.complete {
                break;
            }
        }
        if calls % upgrade_every == 0 {
            let out = c.upgrade(code(), &init_arg(None));
            assert!(out.result.is_ok(), "upgrade: {:?}", out.result);
            upgrades += 1;
        }
    }
    (calls, upgrades, retries)
}

#[test]
fn a_million_orders_load_through_budgeted_calls_despite_upgrades_and_retries() {
    let mut c = install(None);
    update::<Result<Cost, Error>>(&mut c, "create_schema", unit()).unwrap();
    // 4 B per call: every call stays at a tenth of the 40 B limit.
    let (uc, uu, ur) = load_all(&mut c, "add_users", 100_000, 500_000_000, 1, 2);
    let (oc, ou, or) = load_all(&mut c, "add_orders", 1_000_000, 4_000_000_000, 2, 3);
    assert!(oc >= 5, "1M orders (about 19.5 B instructions) took {oc} calls of at most 4 B");
    let s = stats(&mut c);
    assert_eq!((s.users, s.orders), (100_000, 1_000_000));
    let mut index_calls = 0;
    loop {
        let p: IndexProgress = update::<Result<IndexProgress, Error>>(
            &mut c,
            "create_indexes",
            candid::encode_one(Some(8_000_000_000u64)).unwrap(),
        )
        .unwrap();
        index_calls += 1;
        if p.complete {
            break;
        }
    }
    let join = sql(&mut c, &select_join_sql(1_000)).unwrap();
    assert_eq!((join.rows.len() as u64, oracle::checksum(&join)), oracle::join(100_000, 1_000_000, 1_000));
    assert!(quick_check_ok(&mut c));
    eprintln!(
        "reliability: loaded 100,000 users in {uc} calls ({uu} upgrades, {ur} retries) and 1,000,000 orders in {oc} calls \
         ({ou} upgrades, {or} retries) (users at 0.5 B, orders at 4 B instructions per call); indexes in {index_calls} calls; all rows verified"
    );
}

#[test]
fn every_profile_keeps_every_row_across_upgrades_and_profile_changes() {
    let deployable: Vec<_> = PROFILES.into_iter().filter(|p| p.deployable().is_ok()).collect();
    assert!(deployable.len() >= 10, "{} deployable profiles", deployable.len());
    for profile in deployable.iter().filter(|p| {
        [
            "reference",
            "ic_rusqlite",
            "journal_memory_temp_file",
            "cache_8mib_page_16k_journal_memory",
            "page_8k_temp_file",
            "foreign_keys_off",
            "page_16k",
        ]
        .contains(&p.name)
    }) {
        let mut c = install(Some(profile.name));
        update::<Result<Cost, Error>>(&mut c, "create_schema", unit()).unwrap();
        update::<Result<Batch, Error>>(&mut c, "add_users", candid::encode_args((0u64, 5_000u64)).unwrap()).unwrap();
        update::<Result<Batch, Error>>(&mut c, "add_orders", candid::encode_args((0u64, 50_000u64)).unwrap()).unwrap();
        let like = sql(&mut c, stablebench::workload::SELECT_LIKE).unwrap();
        let before = stats(&mut c);
        assert_eq!(before.profile, profile.name);
        // Every deployable profile with the same page size (page_size cannot change once tables
        // exist), then back to its own.
        let same_page = |p: &&stablebench::pragma::Profile| p.pragmas[0].value == profile.pragmas[0].value;
        for other in deployable.iter().filter(same_page).map(|p| p.name).chain([profile.name]) {
            // Upgrade without an argument (the profile stays), then switch to `other`.
            for arg in [None, Some(other)] {
                let out = c.upgrade(code(), &init_arg(arg));
                assert!(out.result.is_ok(), "{} -> {arg:?}: {:?}", profile.name, out.result);
                let after = stats(&mut c);
                assert_eq!((after.users, after.orders), (5_000, 50_000), "{} -> {arg:?}", profile.name);
                assert_eq!(sql(&mut c, stablebench::workload::SELECT_LIKE).unwrap(), like);
                assert!(integrity_ok(&mut c));
            }
            let active: ProfileInfo = query(&mut c, "pragma_profile", unit());
            assert_eq!(active.name, other);
        }
    }
}

#[test]
fn unknown_or_unsafe_profiles_fail_the_install_and_leave_an_upgraded_canister_as_it_was() {
    let err = Canister::install(code(), &init_arg(Some("fastest")), Options::default()).err().expect("install fails");
    assert!(format!("{err:#}").contains("unknown pragma profile \"fastest\""), "{err:#}");
    for unsafe_profile in ["memory", "journal_off"] {
        let err =
            Canister::install(code(), &init_arg(Some(unsafe_profile)), Options::default()).err().expect("refused");
        assert!(format!("{err:#}").contains("benchmarks only"), "{err:#}");
    }
    let mut c = install(Some("ic_rusqlite"));
    update::<Result<Cost, Error>>(&mut c, "create_schema", unit()).unwrap();
    update::<Result<Batch, Error>>(&mut c, "add_users", candid::encode_args((0u64, 100u64)).unwrap()).unwrap();
    let before = stats(&mut c);
    for bad in ["fastest", "memory", "journal_off", "page_64k"] {
        // Unknown, benchmark-only, or a page size the existing tables cannot take.
        let out = c.upgrade(code(), &init_arg(Some(bad)));
        assert!(matches!(out.result, Err(Reject::Trapped(_))), "{bad}: {:?}", out.result);
        assert_eq!(stats(&mut c), before, "{bad}");
    }
}

/// xorshift64*: a fixed-seed generator, so every run makes the same calls.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize]
    }
}

const SQL: &[&str] = &[
    "SELECT count(*) FROM users",
    "SELECT * FROM orders WHERE user_id = 3",
    "WITH t AS (SELECT user_id FROM users) SELECT max(user_id) FROM t",
    "EXPLAIN SELECT * FROM users",
    "DELETE FROM users",
    "DROP TABLE orders",
    "INSERT INTO users (username, email) VALUES ('x', 'y')",
    "UPDATE orders SET amount = 0",
    "PRAGMA journal_mode = OFF",
    "ATTACH ':memory:' AS evil",
    "BEGIN; DELETE FROM orders",
    "SELECT 1; DELETE FROM orders",
    "SELECT * FROM nowhere",
    "SELEC 1",
    "",
    "WITH x AS (DELETE FROM users RETURNING *) SELECT * FROM x",
    "SELECT * FROM users, orders, orders AS o2 LIMIT 100000",
    "SELECT zeroblob(3000000)",
];

#[test]
fn generated_hostile_calls_never_lose_or_corrupt_data() {
    let mut c = install(None);
    let mut rng = Rng(0x5EED_CAFE_F00D_0001);
    let controller = default_controller();
    let other = Principal::from_slice(&[7; 29]);
    // The model: rows the canister should hold, and where the order generator continues
    // (deletes remove orders but do not move it).
    let (mut users, mut orders, mut orders_next, mut schema) = (0u64, 0u64, 0u64, false);
    let mut tally: BTreeMap<String, u32> = BTreeMap::new();
    const CALLS: u32 = 400;
    for i in 0..CALLS {
        let caller = match rng.below(10) {
            0..=5 => controller,
            6..=7 => Principal::anonymous(),
            _ => other,
        };
        // Half the time the value a well-behaved caller would send, else an edge value.
        let n = |rng: &mut Rng, next: u64| {
            let small = rng.below(600);
            if rng.below(2) == 0 {
                next
            } else {
                rng.pick(&[0, 1, next + 1, small, u64::MAX, i64::MAX as u64])
            }
        };
        let budget = if rng.below(2) == 0 {
            None
        } else {
            rng.pick(&[Some(0u64), Some(10_000_000), Some(50_000_000), Some(u64::MAX)])
        };
        let method = rng.pick(&[
            "create_schema",
            "add_users",
            "add_orders",
            "create_indexes",
            "delete_orders",
            "query_sql",
            "query_sql_page",
            "list_users",
            "list_orders",
            "garbage",
            "oversized",
        ]);
        let (method, arg, is_query): (&str, Vec<u8>, bool) = match method {
            "create_schema" => (method, unit(), false),
            "add_users" => (
                method,
                candid::encode_args((n(&mut rng, users), rng.pick(&[0, 50, 300, 300, u64::MAX]), budget)).unwrap(),
                false,
            ),
            "add_orders" => (
                method,
                candid::encode_args((n(&mut rng, orders_next), rng.pick(&[0, 50, 300, 300, u64::MAX]), budget))
                    .unwrap(),
                false,
            ),
            "create_indexes" => (method, candid::encode_args((budget,)).unwrap(), false),
            "delete_orders" => (
                method,
                candid::encode_args((
                    rng.pick(&[0, 1, 3, u64::MAX]),
                    rng.pick(&[None, Some(0u64), Some(u64::MAX)]),
                    budget,
                ))
                .unwrap(),
                false,
            ),
            "query_sql" => (method, candid::encode_one(rng.pick(SQL)).unwrap(), true),
            "query_sql_page" => {
                (method, candid::encode_args((rng.pick(SQL), rng.pick(&[0u64, 5, u64::MAX]))).unwrap(), true)
            }
            "list_users" | "list_orders" => (
                method,
                candid::encode_args((rng.pick(&[0u64, 10, u64::MAX]), rng.pick(&[0u32, 1, 100, u32::MAX]))).unwrap(),
                true,
            ),
            "garbage" => (
                rng.pick(&["add_users", "add_orders", "delete_orders"]),
                (0..rng.below(40)).map(|_| rng.next() as u8).collect(),
                false,
            ),
            _ => ("add_users", vec![0u8; (2 << 20) + 1], false),
        };
        let out = if is_query { c.query(method, &arg, caller) } else { c.update(method, &arg, caller) };
        let kind = match &out.result {
            Err(Reject::Trapped(_)) => "trap (bad Candid)".to_string(),
            Err(Reject::TooLarge { .. }) => "refused: over the ingress limit".to_string(),
            Err(e) => panic!("call {i} {method}: unexpected reject {e}"),
            Ok(reply) => {
                let err: Option<Error> = match method {
                    "create_schema" => {
                        candid::decode_one::<Result<Cost, Error>>(reply).unwrap().map(|_| schema = true).err()
                    }
                    "add_users" => match candid::decode_one::<Result<Batch, Error>>(reply).unwrap() {
                        Ok(b) => {
                            users += b.inserted;
                            None
                        }
                        Err(e) => Some(e),
                    },
                    "add_orders" => match candid::decode_one::<Result<Batch, Error>>(reply).unwrap() {
                        Ok(b) => {
                            orders += b.inserted;
                            orders_next = b.next_offset;
                            None
                        }
                        Err(e) => Some(e),
                    },
                    "create_indexes" => candid::decode_one::<Result<IndexProgress, Error>>(reply).unwrap().err(),
                    "delete_orders" => match candid::decode_one::<Result<Deleted, Error>>(reply).unwrap() {
                        Ok(d) => {
                            orders -= d.deleted;
                            None
                        }
                        Err(e) => Some(e),
                    },
                    "query_sql" => candid::decode_one::<Result<Rows, Error>>(reply).unwrap().err(),
                    "query_sql_page" => candid::decode_one::<Result<RowsPage, Error>>(reply).unwrap().err(),
                    "list_users" => candid::decode_one::<Result<Page<User>, Error>>(reply).unwrap().err(),
                    _ => candid::decode_one::<Result<Page<Order>, Error>>(reply).unwrap().err(),
                };
                match err {
                    None => "ok".to_string(),
                    Some(e) => {
                        if caller != controller && !matches!(method, "list_users" | "list_orders") {
                            assert_eq!(e, Error::NotController { caller }, "call {i} {method}");
                        }
                        let name = format!("{e:?}");
                        format!("error {}", name.split([' ', '{', '(']).next().unwrap())
                    }
                }
            }
        };
        *tally.entry(kind).or_default() += 1;
        // After every call: the counts the model expects, and an intact database.
        let s = stats(&mut c);
        assert_eq!((s.schema, s.users, s.orders), (schema, users, orders), "after call {i} ({method})");
        if schema {
            assert!(integrity_ok(&mut c), "after call {i} ({method})");
        }
    }
    eprintln!("reliability: {CALLS} generated calls (seed 0x5EED_CAFE_F00D_0001), outcomes {tally:?}; integrity and row counts checked after each");
    for kind in [
        "ok",
        "error NotController",
        "error InvalidArgument",
        "error NotReadOnly",
        "error Sqlite",
        "trap (bad Candid)",
        "refused: over the ingress limit",
    ] {
        assert!(tally.get(kind).copied().unwrap_or(0) > 0, "the generator never produced {kind}: {tally:?}");
    }
    assert!(users > 0 && orders > 0, "the generator loaded data ({users} users, {orders} orders)");
}

#[test]
fn the_bulk_load_profile_serves_a_database_larger_than_a_lowered_wasm_memory_limit() {
    // 64 MiB of heap (the smallest limit the canister accepts) for the reference database:
    // 100,000 users and 1,000,000 orders, about 115 MB with its indexes. The bulk-load profile
    // (`journal_memory_temp_file`: a 1,000,000-page cache) is the one whose cache must be bounded;
    // the recommended one's 8 MiB is below a quarter of any limit the canister accepts.
    const LIMIT: u64 = stablebench_canister::MIN_WASM_MEMORY_LIMIT;
    let opts = Options { wasm_memory_limit: LIMIT, ..Options::default() };
    // Installed without telling the canister its limit: it assumes the IC's default, 3 GiB.
    let mut c =
        Canister::install(code(), &init_arg(Some(stablebench_grid::profiles::JOURNAL_MEMORY_TEMP_FILE.name)), opts)
            .expect("installs")
            .0;
    update::<Result<Cost, Error>>(&mut c, "create_schema", unit()).unwrap();
    load_all(&mut c, "add_users", 100_000, 30_000_000_000, u32::MAX, u32::MAX);
    load_all(&mut c, "add_orders", 1_000_000, 30_000_000_000, u32::MAX, u32::MAX);
    let indexes = candid::encode_one(Some(30_000_000_000u64)).unwrap();
    // The index sort collects its keys in the heap (temp_store FILE, up to cache_size pages):
    // past 64 MiB the replica traps the update.
    let out = c.update("create_indexes", &indexes, default_controller());
    assert!(
        matches!(
            out.result,
            Err(Reject::Trapped(stablebench_runner::host::Trap::WasmMemoryLimit { limit: LIMIT, .. }))
        ),
        "{:?}",
        out.result
    );
    // Told its limit, the canister bounds the page cache to a quarter of it (16 MiB) ...
    let arg = candid::encode_one(Some(InitArgs { profile: None, wasm_memory_limit: Some(LIMIT) })).unwrap();
    assert!(c.upgrade(code(), &arg).result.is_ok());
    // ... and keeps it across an upgrade without an argument.
    assert!(c.upgrade(code(), &unit()).result.is_ok());
    let s = stats(&mut c);
    let cache = s.pragmas.iter().find(|p| p.name == "cache_size").map(|p| p.value.clone());
    assert_eq!(cache.as_deref(), Some("-16384"), "{:?}", s.pragmas);
    // Now the indexes build, and reads and writes keep working.
    let p: IndexProgress = update::<Result<IndexProgress, Error>>(&mut c, "create_indexes", indexes).unwrap();
    assert!(p.complete);
    let join = sql(&mut c, &select_join_sql(1_000)).unwrap();
    assert_eq!((join.rows.len() as u64, oracle::checksum(&join)), oracle::join(100_000, 1_000_000, 1_000));
    // 500,000 more orders, through the indexes: the database outgrows the heap limit.
    let mut offset = 1_000_000u64;
    while offset < 1_500_000 {
        let more = candid::encode_args((offset, 1_500_000 - offset, Some(30_000_000_000u64))).unwrap();
        offset = update::<Result<Batch, Error>>(&mut c, "add_orders", more).unwrap().next_offset;
    }
    let s = stats(&mut c);
    assert_eq!(s.orders, 1_500_000);
    assert!(s.database_bytes > LIMIT, "the database ({} bytes) is larger than the heap limit", s.database_bytes);
    let heap = c.heap_bytes();
    assert!(heap <= LIMIT, "heap {heap} bytes");
    eprintln!(
        "memory limit: {} MB database served within a {} MiB wasm_memory_limit (heap {} MB after loading, indexing and writing)",
        s.database_bytes / 1_000_000,
        LIMIT >> 20,
        heap / 1_000_000
    );
}
