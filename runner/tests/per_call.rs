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
//! (`scripts/report.sh` does).

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
fn measure_vfs() -> PerCall {
    use stablebench_grid::api::vfs::{Error, MAX_LOAD_PER_CALL};
    let (mut c, _) = Canister::install(vfs_code(), &unit(), Options::default()).expect("installs");
    let data = TrieDataset::new(DB_WEIGHT_SIZE, KV_SEED).unwrap();
    let mut offset = 0;
    while offset < DB_WEIGHT_SIZE {
        let count = MAX_LOAD_PER_CALL.min(DB_WEIGHT_SIZE - offset);
        let arg = candid::encode_args((DB_WEIGHT_SIZE, offset, count)).unwrap();
        offset =
            decode::<Result<u64, Error>>(c.update("kv_load", &arg, default_controller()), "kv_load").expect("kv_load");
    }
    let len: u64 = decode::<Result<u64, Error>>(c.query("kv_len", &unit(), default_controller()), "kv_len").unwrap();
    assert_eq!(len, data.len(), "sqlite_vfs_rowid: the data set and its warm-ups are loaded");
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
}

/// The committed file.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq)]
struct Results {
    keys: u64,
    /// The message floor: `kv_len` of an empty heap map (a query doing no storage work: decoding
    /// the argument, ic-cdk's entry, encoding the reply with its `Error` type).
    floor: u64,
    backends: BTreeMap<String, PerCall>,
}

fn floor() -> u64 {
    let (mut c, _) = Canister::install(code(), &unit(), Options::default()).expect("installs");
    let out = c.query("kv_len", &candid::encode_one(KvBackend::HeapBTreeMap).unwrap(), default_controller());
    let n = out.instructions;
    assert_eq!(decode::<Result<u64, Error>>(out, "kv_len"), Ok(0), "a fresh heap map is empty");
    n
}

/// `kv_load` of the whole data set at `DB_WEIGHT_SIZE` keys, in budgeted calls.
fn load(c: &mut Canister, kb: KvBackend) {
    let mut offset = 0;
    loop {
        let arg = candid::encode_args((kb, DB_WEIGHT_SIZE, offset, DB_WEIGHT_SIZE - offset, None::<u64>)).unwrap();
        let b: Batch = decode::<Result<Batch, Error>>(c.update("kv_load", &arg, default_controller()), "kv_load")
            .expect("kv_load");
        offset = b.next_offset;
        if b.complete {
            break;
        }
    }
}

fn measure(backend: Backend) -> PerCall {
    let kb = KvBackend::try_from(backend).expect("a key-value backend");
    let (mut c, _) = Canister::install(code(), &unit(), Options::default()).expect("installs");
    let data = TrieDataset::new(DB_WEIGHT_SIZE, KV_SEED).unwrap();
    load(&mut c, kb);
    let len: u64 = decode::<Result<u64, Error>>(
        c.query("kv_len", &candid::encode_one(kb).unwrap(), default_controller()),
        "kv_len",
    )
    .unwrap();
    assert_eq!(len, data.len(), "{}: the data set and its warm-ups are loaded", backend.name());

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
            let (put, get) = floors(&mut c, kb, layout, &data);
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
    }
}

/// The medians of `CALLS` `floor_kv_put` calls (fresh keys after the ones `kv_put` wrote) and
/// `CALLS` `floor_kv_get` calls (the same keys `kv_get` read), after an upgrade to the benchmark
/// wasm and one warm-up call of each (the first statement after an upgrade reads the schema).
fn floors(c: &mut Canister, kb: KvBackend, layout: Layout, data: &TrieDataset) -> (u64, u64) {
    let up = c.upgrade(bench_code(), &unit());
    assert!(up.result.is_ok(), "the upgrade to the benchmark wasm: {:?}", up.result);
    // The upgrade emptied SQLite's page cache, which the endpoints' calls found full (the load
    // had just written every page): rewrite the data set with the same values (an update, so
    // the pages it reads stay cached) before measuring, so that both sides find the pages a
    // random key needs in the cache.
    load(c, kb);
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
    t
}

/// `report::splice`, failing the test on a missing marker.
fn splice(doc: &str, name: &str, body: &str) -> String {
    stablebench::report::splice(doc, name, body).unwrap_or_else(|e| panic!("README.md: {e}"))
}

#[test]
fn one_call_per_backend_costs_what_the_committed_results_say() {
    let measured = Results {
        keys: DB_WEIGHT_SIZE,
        floor: floor(),
        backends: BACKENDS
            .iter()
            .map(|b| (b.name().to_string(), measure(*b)))
            .chain([(Backend::SqliteVfsRowid.name().to_string(), measure_vfs())])
            .collect(),
    };
    for (name, p) in &measured.backends {
        eprintln!(
            "{name}: put {:?}, get {:?}, upgrade {}, first get after {}",
            p.put, p.get, p.upgrade, p.first_get_after_upgrade
        );
    }
    let readme = std::fs::read_to_string(README).unwrap();
    if std::env::var_os("STABLEBENCH_REGENERATE_PER_CALL").is_some() {
        let yml = format!(
            "# Generated by `STABLEBENCH_REGENERATE_PER_CALL=1 cargo test --release -p stablebench-runner --test per_call`;\n# whole-message instructions on the production wasm through the offline runner. Do not edit.\n{}",
            serde_yaml::to_string(&measured).unwrap()
        );
        std::fs::write(RESULTS, yml).unwrap();
        std::fs::write(README, splice(&readme, "per-call-table", &table(&measured))).unwrap();
        return;
    }
    let committed: Results = serde_yaml::from_str(&std::fs::read_to_string(RESULTS).expect("per_call_results.yml"))
        .expect("per_call_results.yml parses");
    let close = |a: u64, b: u64| (a as f64 - b as f64).abs() <= 0.02 * b.max(1) as f64;
    for (name, p) in &measured.backends {
        let c = committed.backends.get(name).unwrap_or_else(|| panic!("{name} is not in per_call_results.yml"));
        let pairs = [
            (p.put.median, c.put.median),
            (p.get.median, c.get.median),
            (p.upgrade, c.upgrade),
            (p.first_get_after_upgrade, c.first_get_after_upgrade),
            (measured.floor, committed.floor),
        ];
        let floors = [(p.put_floor, c.put_floor), (p.get_floor, c.get_floor)];
        assert!(
            pairs.iter().all(|&(a, b)| close(a, b))
                && floors.iter().all(|&(a, b)| matches!((a, b), (Some(a), Some(b)) if close(a, b)) || a == b),
            "{name}: measured {p:?}, committed {c:?}: regenerate per_call_results.yml"
        );
    }
    assert_eq!(readme, splice(&readme, "per-call-table", &table(&committed)), "the README's per-call table is stale");
}
