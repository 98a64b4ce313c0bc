//! The cost of one call, per key-value backend: the whole message (Candid decoding, the access
//! check, the operation, its commit, the reply) of `kv_put` (an update writing one 128-byte value)
//! and `kv_get` (a query reading one value), on the production wasm through the runner with
//! production limits, at 200,000 keys (the IC DbWeight size), next to what the trie benchmarks
//! measure inside `bench_fn` for the same operation.
//!
//! The ic-sqlite-vfs canister (`target/canister/stablebench_vfs.wasm`) is measured the same way
//! on its rowid table (`sqlite_vfs_rowid`), next to ic-rusqlite's `sqlite_rowid`.
//!
//! The measured figures are committed in `per_call_results.yml` and the README's per-call table;
//! this test fails when a rerun differs by more than 2% (instruction counts are deterministic, so
//! a difference means the code or the toolchain moved). Regenerate with
//! `STABLEBENCH_REGENERATE_PER_CALL=1 cargo test --release -p stablebench-runner --test per_call`
//! (`scripts/report.sh` does). With `STABLEBENCH_PER_CALL_10X=1` it measures every backend at ten
//! times the keys too (several minutes) and regenerating rewrites those figures; without it, the
//! committed 10x figures stay as they are. Every call also has `kv_len` and a one-entry `kv_load`.

mod common;
use common::{bench_code, code, decode, unit};

use std::collections::BTreeMap;

use stablebench::kv::gen::TrieDataset;
use stablebench::kv::sqlite::Layout;
use stablebench::report::{kv, results::Results as CanbenchResults};
use stablebench_canister::{Batch, Cost, Error, KvBackend};
use std::sync::{Arc, OnceLock};

use serde_bytes::ByteBuf;
use stablebench_grid::cells::{Backend, Cache, Op, BACKENDS, DB_WEIGHT_SIZE};
use stablebench_grid::KV_SEED;
use stablebench_runner::canister::{default_controller, Canister, Code, Options};
use stablebench_runner::instrument::Metering;

/// Calls of each kind measured per backend.
const CALLS: u64 = 20;

const RESULTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../per_call_results.yml");
const CANBENCH_RESULTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../canbench_results.yml");
const VFS_CANBENCH_RESULTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../vfs/canbench_results.yml");
const VFS_WASM: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../target/canister/stablebench_vfs.wasm");

/// The ic-sqlite-vfs canister's production wasm (`scripts/build.sh vfs`).
fn vfs_code() -> Arc<Code> {
    static CODE: OnceLock<Arc<Code>> = OnceLock::new();
    CODE.get_or_init(|| {
        assert!(std::path::Path::new(VFS_WASM).exists(), "{VFS_WASM} is missing: run scripts/build.sh vfs first");
        Code::from_file(VFS_WASM.as_ref(), Metering::On).expect("the ic-sqlite-vfs wasm loads")
    })
    .clone()
}

/// The ic-sqlite-vfs canister's rowid table, measured as [`measure`] measures ic-rusqlite's.
fn measure_vfs(keys: u64) -> PerCall {
    use stablebench_grid::api::vfs::{Error, MAX_LOAD_PER_CALL};
    let (mut c, _) = Canister::install(vfs_code(), &unit(), Options::default()).expect("installs");
    let data = TrieDataset::new(keys, KV_SEED).unwrap();
    let mut offset = 0;
    while offset < keys {
        let count = MAX_LOAD_PER_CALL.min(keys - offset);
        let arg = candid::encode_args((keys, offset, count)).unwrap();
        offset =
            decode::<Result<u64, Error>>(c.update("kv_load", &arg, default_controller()), "kv_load").expect("kv_load");
    }
    let out = c.query("kv_len", &unit(), default_controller());
    let len_instructions = out.instructions;
    let len: u64 = decode::<Result<u64, Error>>(out, "kv_len").unwrap();
    assert_eq!(len, data.len(), "sqlite_vfs_rowid: the data set and its warm-ups are loaded");
    let load_one = (0..CALLS)
        .map(|_| {
            let out = c.update("kv_load", &candid::encode_args((keys, 0u64, 1u64)).unwrap(), default_controller());
            let n = out.instructions;
            assert_eq!(decode::<Result<u64, Error>>(out, "kv_load"), Ok(1), "the next offset");
            n
        })
        .collect();
    let queries = data.query_keys();
    let get = |c: &mut Canister, i: usize| {
        let (key, value) = &queries[i % queries.len()];
        let out = c.query("kv_get", &candid::encode_one(ByteBuf::from(key.to_vec())).unwrap(), default_controller());
        let n = out.instructions;
        let got: Option<ByteBuf> = decode::<Result<_, Error>>(out, "kv_get").unwrap();
        assert_eq!(
            got.map(ByteBuf::into_vec).as_ref(),
            Some(value),
            "sqlite_vfs_rowid: kv_get returns the stored value"
        );
        n
    };
    let mut puts = Vec::new();
    for i in 0..CALLS {
        let (key, value) = data.write_entry(i);
        let arg = candid::encode_args((ByteBuf::from(key.to_vec()), ByteBuf::from(value))).unwrap();
        let out = c.update("kv_put", &arg, default_controller());
        puts.push(out.instructions);
        decode::<Result<Cost, Error>>(out, "kv_put").unwrap();
    }
    let gets = (0..CALLS as usize).map(|i| get(&mut c, i)).collect();
    let upgrade = c.upgrade(vfs_code(), &unit());
    assert!(upgrade.result.is_ok(), "upgrade: {:?}", upgrade.result);
    let first = get(&mut c, 0);
    PerCall {
        put: Series::of(puts),
        get: Series::of(gets),
        upgrade: upgrade.instructions,
        first_get_after_upgrade: first,
        put_floor: None,
        get_floor: None,
        len: Some(len_instructions),
        load_one: Some(Series::of(load_one).median),
    }
}
const README: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md");

/// Instructions of a series of calls.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq)]
struct Series {
    calls: u64,
    median: u64,
    min: u64,
    max: u64,
}

impl Series {
    fn of(mut v: Vec<u64>) -> Series {
        v.sort_unstable();
        Series { calls: v.len() as u64, median: v[v.len() / 2], min: v[0], max: v[v.len() - 1] }
    }
}

/// One backend's per-call costs.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq)]
struct PerCall {
    /// `kv_put` of a fresh 32-byte key with a 128-byte value (update, controller).
    put: Series,
    /// `kv_get` of an existing key (query).
    get: Series,
    /// The upgrade (pre_upgrade + post_upgrade) with the data set loaded.
    upgrade: u64,
    /// The first `kv_get` after that upgrade (caches empty).
    first_get_after_upgrade: u64,
    /// SQLite backends: the median of `CALLS` `floor_kv_put` calls (the upsert statement alone in
    /// a minimal message, `canister/src/floor.rs`) on the same database under the benchmark wasm.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    put_floor: Option<u64>,
    /// SQLite backends: the same for `floor_kv_get` (the lookup statement alone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    get_floor: Option<u64>,
    /// `kv_len` with the data set loaded (query).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    len: Option<u64>,
    /// The median of `CALLS` `kv_load` calls of one entry (entry 0 rewritten with its own value:
    /// the smallest load; update, controller).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    load_one: Option<u64>,
}

/// The same calls at ten times the keys (`STABLEBENCH_PER_CALL_10X=1`).
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq)]
struct Scaled {
    keys: u64,
    backends: BTreeMap<String, PerCall>,
}

/// The committed file.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq)]
struct Results {
    keys: u64,
    /// The message floor: `kv_len` of an empty heap map (a query doing no storage work: decoding
    /// the argument, ic-cdk's entry, encoding the reply with its `Error` type).
    floor: u64,
    backends: BTreeMap<String, PerCall>,
    /// Ten times the keys, measured only when asked (a few minutes); kept as committed otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ten_x: Option<Scaled>,
}

fn floor() -> u64 {
    let (mut c, _) = Canister::install(code(), &unit(), Options::default()).expect("installs");
    let out = c.query("kv_len", &candid::encode_one(KvBackend::HeapBTreeMap).unwrap(), default_controller());
    let n = out.instructions;
    assert_eq!(decode::<Result<u64, Error>>(out, "kv_len"), Ok(0), "a fresh heap map is empty");
    n
}

/// `kv_load` of the whole data set of `keys` keys, in budgeted calls.
fn load(c: &mut Canister, kb: KvBackend, keys: u64) {
    let mut offset = 0;
    loop {
        let arg = candid::encode_args((kb, keys, offset, keys - offset, None::<u64>)).unwrap();
        let b: Batch = decode::<Result<Batch, Error>>(c.update("kv_load", &arg, default_controller()), "kv_load")
            .expect("kv_load");
        offset = b.next_offset;
        if b.complete {
            break;
        }
    }
}

fn measure(backend: Backend, keys: u64) -> PerCall {
    let kb = KvBackend::try_from(backend).expect("a key-value backend");
    let (mut c, _) = Canister::install(code(), &unit(), Options::default()).expect("installs");
    let data = TrieDataset::new(keys, KV_SEED).unwrap();
    load(&mut c, kb, keys);
    let out = c.query("kv_len", &candid::encode_one(kb).unwrap(), default_controller());
    let len_instructions = out.instructions;
    let len: u64 = decode::<Result<u64, Error>>(out, "kv_len").unwrap();
    assert_eq!(len, data.len(), "{}: the data set and its warm-ups are loaded", backend.name());
    let load_one = (0..CALLS)
        .map(|_| {
            let arg = candid::encode_args((kb, keys, 0u64, 1u64, None::<u64>)).unwrap();
            let out = c.update("kv_load", &arg, default_controller());
            let n = out.instructions;
            let b = decode::<Result<Batch, Error>>(out, "kv_load").expect("kv_load");
            assert_eq!((b.next_offset, b.complete), (1, true), "{}: one entry rewritten", backend.name());
            n
        })
        .collect();

    let queries = data.query_keys();
    let get = |c: &mut Canister, i: usize| {
        let (key, value) = &queries[i % queries.len()];
        let out = c.query("kv_get", &candid::encode_args((kb, key.to_vec())).unwrap(), default_controller());
        let n = out.instructions;
        let got: Option<Vec<u8>> = decode::<Result<_, Error>>(out, "kv_get").unwrap();
        assert_eq!(got.as_ref(), Some(value), "{}: kv_get returns the stored value", backend.name());
        n
    };
    let mut puts = Vec::new();
    for i in 0..CALLS {
        let (key, value) = data.write_entry(i);
        let out = c.update("kv_put", &candid::encode_args((kb, key.to_vec(), value)).unwrap(), default_controller());
        puts.push(out.instructions);
        decode::<Result<Cost, Error>>(out, "kv_put").unwrap();
    }
    let gets = (0..CALLS as usize).map(|i| get(&mut c, i)).collect();
    let upgrade = c.upgrade(code(), &unit());
    assert!(upgrade.result.is_ok(), "upgrade: {:?}", upgrade.result);
    let first = get(&mut c, 0);
    let (put_floor, get_floor) = match Layout::of(backend) {
        Some(layout) => {
            let (put, get) = floors(&mut c, kb, keys, layout, &data);
            (Some(put), Some(get))
        }
        None => (None, None),
    };
    PerCall {
        put: Series::of(puts),
        get: Series::of(gets),
        upgrade: upgrade.instructions,
        first_get_after_upgrade: first,
        put_floor,
        get_floor,
        len: Some(len_instructions),
        load_one: Some(Series::of(load_one).median),
    }
}

/// The medians of `CALLS` `floor_kv_put` calls (fresh keys after the ones `kv_put` wrote) and
/// `CALLS` `floor_kv_get` calls (the same keys `kv_get` read), after an upgrade to the benchmark
/// wasm and one warm-up call of each (the first statement after an upgrade reads the schema).
fn floors(c: &mut Canister, kb: KvBackend, keys: u64, layout: Layout, data: &TrieDataset) -> (u64, u64) {
    let up = c.upgrade(bench_code(), &unit());
    assert!(up.result.is_ok(), "the upgrade to the benchmark wasm: {:?}", up.result);
    // The upgrade emptied SQLite's page cache, which the endpoints' calls found full (the load
    // had just written every page): rewrite the data set with the same values (an update, so
    // the pages it reads stay cached) before measuring, so that both sides find the pages a
    // random key needs in the cache.
    load(c, kb, keys);
    let rowid = layout == Layout::Rowid;
    let put = |c: &mut Canister, i: u64| {
        let (key, value) = data.write_entry(i);
        let arg = candid::encode_args((rowid, ByteBuf::from(key.to_vec()), ByteBuf::from(value))).unwrap();
        let out = c.update("floor_kv_put", &arg, default_controller());
        let n = out.instructions;
        assert_eq!(decode::<u64>(out, "floor_kv_put"), 1, "one row written");
        n
    };
    let queries = data.query_keys();
    let get = |c: &mut Canister, i: usize| {
        let (key, _) = &queries[i % queries.len()];
        let arg = candid::encode_args((rowid, ByteBuf::from(key.to_vec()))).unwrap();
        let out = c.query("floor_kv_get", &arg, default_controller());
        let n = out.instructions;
        assert_eq!(decode::<u64>(out, "floor_kv_get"), 1, "one row read");
        n
    };
    put(c, CALLS);
    get(c, 0);
    let puts = (CALLS + 1..=2 * CALLS).map(|i| put(c, i)).collect();
    let gets = (0..CALLS as usize).map(|i| get(c, i)).collect();
    (Series::of(puts).median, Series::of(gets).median)
}

fn table(r: &Results) -> String {
    let mut t = String::from(
        "| backend | `kv_put` (update, whole message) | its floor (ratio) | put in `bench_fn` (w_avg) | `kv_get` (query, whole message) | its floor (ratio) | get in `bench_fn` (w_avg) | upgrade | first `kv_get` after it |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    // What the trie benchmark measured inside `bench_fn` for the same operations at 200,000 keys
    // (warm): the README's DbWeight row of each backend, from canbench_results.yml.
    let (main, vfs) =
        (std::fs::read_to_string(CANBENCH_RESULTS).unwrap(), std::fs::read_to_string(VFS_CANBENCH_RESULTS).unwrap());
    let results = CanbenchResults::from_canbench_ymls(&[&main, &vfs]).unwrap_or_else(|e| panic!("{e}"));
    let weights = kv::db_weights(&results);
    let opt = |v: Option<f64>| v.map_or("–".to_string(), stablebench::report::int);
    let floor = |call: u64, floor: Option<u64>| {
        floor.map_or("–".to_string(), |f| {
            format!("{} ({:.2}x)", stablebench::report::grouped(f), call as f64 / f as f64)
        })
    };
    for b in BACKENDS {
        let Some(p) = r.backends.get(b.name()) else { continue };
        let w = weights.iter().find(|w| w.backend == b);
        t += &format!(
            "| `{}` | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            b.name(),
            stablebench::report::grouped(p.put.median),
            floor(p.put.median, p.put_floor),
            opt(w.and_then(|w| w.write_warm)),
            stablebench::report::grouped(p.get.median),
            floor(p.get.median, p.get_floor),
            opt(w.and_then(|w| w.read_warm)),
            stablebench::report::grouped(p.upgrade),
            stablebench::report::grouped(p.first_get_after_upgrade),
        );
    }
    if let Some(p) = r.backends.get(Backend::SqliteVfsRowid.name()) {
        let w = |op| kv::w_avg_per_op(&results, op, DB_WEIGHT_SIZE, Backend::SqliteVfsRowid);
        t += &format!(
            "| `{}` (ic-sqlite-vfs) | {} | – | {} | {} | – | {} | {} | {} |\n",
            Backend::SqliteVfsRowid.name(),
            stablebench::report::grouped(p.put.median),
            opt(w(Op::TrieWrite(Cache::Warm))),
            stablebench::report::grouped(p.get.median),
            opt(w(Op::TrieRead(Cache::Warm))),
            stablebench::report::grouped(p.upgrade),
            stablebench::report::grouped(p.first_get_after_upgrade),
        );
    }
    t += &format!(
        "\nA floor is the backend's SQL statement alone in a minimal message (`floor_kv_put` and \
         `floor_kv_get` of the benchmark canister, `canister/src/floor.rs`: the same cached statement, \
         plain Candid arguments, the controller check for the write, a `nat64` reply), measured on the \
         same database after an upgrade to the benchmark wasm and a rewrite of the data set that fills \
         the page cache again, as the endpoints found it, median of the same number of calls. \
         The floor under every call: `kv_len` of an empty heap map, a query that touches no data, costs {} \
         instructions (decoding the argument, ic-cdk's entry, encoding the reply; the reply's type table is \
         built once and kept, `stablebench_grid::reply`). \
         The rest of a column's whole-message figure is the operation, the backend's own work around it \
         (for SQLite, the statement and its transaction) and the key and value crossing Candid.\n",
        stablebench::report::grouped(r.floor)
    );
    t + &every_call_table(r)
}

/// Every key-value endpoint's call at the reference size and ten times it, next to its floor
/// where it has one: the shape of the users/orders endpoint table.
fn every_call_table(r: &Results) -> String {
    let num = stablebench::report::grouped;
    let ten_keys = r.ten_x.as_ref().map_or("ten times the keys".to_string(), |t| format!("{} keys", num(t.keys)));
    let mut t = format!(
        "\nEvery key-value endpoint, one call each, at {} keys and at {ten_keys} (`kv_load` rewrites one \
         entry, its smallest call; `kv_len` is the answer to \"how many keys\": SQLite counts the table):\n\n\
         | backend | call | {} keys | floor | ratio | {ten_keys} | floor | ratio |\n\
         |---|---|---:|---:|---:|---:|---:|---:|\n",
        num(r.keys),
        num(r.keys),
    );
    type Pick = fn(&PerCall) -> (Option<u64>, Option<u64>);
    let calls: [(&str, Pick); 6] = [
        ("`kv_put`", |p| (Some(p.put.median), p.put_floor)),
        ("`kv_get`", |p| (Some(p.get.median), p.get_floor)),
        ("`kv_len`", |p| (p.len, None)),
        ("`kv_load` of one entry", |p| (p.load_one, None)),
        ("upgrade", |p| (Some(p.upgrade), None)),
        ("first `kv_get` after it", |p| (Some(p.first_get_after_upgrade), None)),
    ];
    let cells = |p: Option<&PerCall>, pick: Pick| -> String {
        match p.map(pick) {
            Some((Some(n), Some(f))) => format!("{} | {} | {:.2}x", num(n), num(f), n as f64 / f as f64),
            Some((Some(n), None)) => format!("{} | – | –", num(n)),
            _ => "not measured | | ".to_string(),
        }
    };
    for (name, p) in &r.backends {
        let ten = r.ten_x.as_ref().and_then(|t| t.backends.get(name));
        for (call, pick) in calls {
            t += &format!("| `{name}` | {call} | {} | {} |\n", cells(Some(p), pick), cells(ten, pick));
        }
    }
    t + "\n`kv_load` of one entry writes the entry and its warm-up twin (two upserts in one \
         transaction, the meter, the `Batch` reply): about two `kv_put` floors, so it has no floor \
         of its own. `kv_len` on SQLite runs `count(*)`, which reads the whole table: it grows with \
         the keys (the query budget stops it with an error before the query limit).\n"
}

/// `report::splice`, failing the test on a missing marker.
fn splice(doc: &str, name: &str, body: &str) -> String {
    stablebench::report::splice(doc, name, body).unwrap_or_else(|e| panic!("README.md: {e}"))
}

#[test]
fn one_call_per_backend_costs_what_the_committed_results_say() {
    let backends = |keys: u64| -> BTreeMap<String, PerCall> {
        BACKENDS
            .iter()
            .map(|b| (b.name().to_string(), measure(*b, keys)))
            .chain([(Backend::SqliteVfsRowid.name().to_string(), measure_vfs(keys))])
            .collect()
    };
    let ten_x = std::env::var_os("STABLEBENCH_PER_CALL_10X")
        .map(|_| Scaled { keys: 10 * DB_WEIGHT_SIZE, backends: backends(10 * DB_WEIGHT_SIZE) });
    let measured = Results { keys: DB_WEIGHT_SIZE, floor: floor(), backends: backends(DB_WEIGHT_SIZE), ten_x };
    for (name, p) in measured.backends.iter().chain(measured.ten_x.iter().flat_map(|t| &t.backends)) {
        eprintln!("{name}: {p:?}");
    }
    let readme = std::fs::read_to_string(README).unwrap();
    let committed: Option<Results> =
        std::fs::read_to_string(RESULTS).ok().map(|s| serde_yaml::from_str(&s).expect("per_call_results.yml parses"));
    if std::env::var_os("STABLEBENCH_REGENERATE_PER_CALL").is_some() {
        let mut measured = measured;
        if measured.ten_x.is_none() {
            measured.ten_x = committed.and_then(|c| c.ten_x);
        }
        let yml = format!(
            "# Generated by `STABLEBENCH_REGENERATE_PER_CALL=1 cargo test --release -p stablebench-runner --test per_call`;\n# whole-message instructions on the production wasm through the offline runner. Do not edit.\n{}",
            serde_yaml::to_string(&measured).unwrap()
        );
        std::fs::write(RESULTS, yml).unwrap();
        std::fs::write(README, splice(&readme, "per-call-table", &table(&measured))).unwrap();
        return;
    }
    let committed = committed.expect("per_call_results.yml");
    let close = |a: u64, b: u64| (a as f64 - b as f64).abs() <= 0.02 * b.max(1) as f64;
    let same = |a: Option<u64>, b: Option<u64>| matches!((a, b), (Some(a), Some(b)) if close(a, b)) || a == b;
    // (measured, committed) per size: the reference size, and ten times it when it was measured.
    let mut sizes = vec![(&measured.backends, &committed.backends)];
    if let Some(t) = &measured.ten_x {
        let c = committed.ten_x.as_ref().expect("per_call_results.yml has no 10x figures: regenerate it");
        assert_eq!(t.keys, c.keys);
        sizes.push((&t.backends, &c.backends));
    }
    for (name, p, committed_backends) in sizes.into_iter().flat_map(|(m, c)| m.iter().map(move |(n, p)| (n, p, c))) {
        let c = committed_backends.get(name).unwrap_or_else(|| panic!("{name} is not in per_call_results.yml"));
        let pairs = [
            (p.put.median, c.put.median),
            (p.get.median, c.get.median),
            (p.upgrade, c.upgrade),
            (p.first_get_after_upgrade, c.first_get_after_upgrade),
            (measured.floor, committed.floor),
        ];
        let optional =
            [(p.put_floor, c.put_floor), (p.get_floor, c.get_floor), (p.len, c.len), (p.load_one, c.load_one)];
        assert!(
            pairs.iter().all(|&(a, b)| close(a, b)) && optional.iter().all(|&(a, b)| same(a, b)),
            "{name}: measured {p:?}, committed {c:?}: regenerate per_call_results.yml"
        );
    }
    assert_eq!(readme, splice(&readme, "per-call-table", &table(&committed)), "the README's per-call table is stale");
}
