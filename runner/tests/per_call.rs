//! The cost of one call, per key-value backend: the whole message (Candid decoding, the access
//! check, the operation, its commit, the reply) of `kv_put` (an update writing one 128-byte value)
//! and `kv_get` (a query reading one value), on the production wasm through the runner with
//! production limits, at 200,000 keys (the IC DbWeight size), next to what the trie benchmarks
//! measure inside `bench_fn` for the same operation.
//!
//! The ic-sqlite-vfs canister (`target/canister/stablebench_vfs.wasm`) is measured the same way
//! on its rowid table (`sqlite_vfs_rowid`), next to ic-rusqlite's `sqlite_rowid`.
//!
//! Every call is measured twice, each time from a fresh install: under the runner's `canbench`
//! cost model (what canbench 0.7 reports on PocketIC) and under its `ic` model (what mainnet
//! charges since the IC's memory tracker: 80,000 instructions per 64 KiB Wasm page a message
//! accesses, 80,000 more per page it writes; `docs/mainnet.md`), with the pages each call touched.
//! The data sets are loaded under the same model (`kv_load`'s budget sees the page fees on
//! mainnet too).
//!
//! The measured figures are committed in `per_call_results.yml` and docs/per-call.md's per-call table;
//! this test fails when a rerun differs from them at all (instruction counts are deterministic, so
//! a difference means the code or the toolchain moved). Regenerate with
//! `STABLEBENCH_REGENERATE_PER_CALL=1 cargo test --release -p stablebench-runner --test per_call`
//! (`scripts/report.sh` does). With `STABLEBENCH_PER_CALL_10X=1` it measures every backend at ten
//! times the keys too (several minutes) and regenerating rewrites those figures; without it, the
//! committed 10x figures stay as they are, and so do the profile sweep's
//! (`STABLEBENCH_PER_CALL_PROFILES=1`). Figures kept that way are refused unless the SHA-256 of the
//! wasm files recorded beside them (`wasm`) is that of the files this run would measure. In every
//! mode, regenerating included, a put or get costs at least as much under `ic` as under
//! `canbench` (the memory tracker only adds charges). Every call also has `kv_len` and a one-entry
//! `kv_load`.

mod common;
use common::{bench_code, code, decode, unit, vfs_code, MAINNET_CHARGES};

use std::collections::BTreeMap;

use stablebench::kv::gen::TrieDataset;
use stablebench::kv::sqlite::Layout;
use stablebench_canister::{Batch, Cost, Error, InitArgs, KvBackend};
use stablebench_report::{kv, results::Model, results::Results as CanbenchResults};

use serde_bytes::ByteBuf;
use stablebench_grid::cells::{Backend, Cache, Op, BACKENDS, DB_WEIGHT_SIZE};
use stablebench_grid::profiles::{Profile, DEFAULT, PROFILES};
use stablebench_grid::KV_SEED;
use stablebench_runner::canister::{default_controller, Canister, Options, Outcome};
use stablebench_runner::host::PageCounts;
use stablebench_runner::replica::CostModel;

/// Calls of each kind measured per backend.
const CALLS: u64 = 20;

const RESULTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../per_call_results.yml");
const MAINNET_RESULTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../mainnet_results.yml");
const VFS_MAINNET_RESULTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../vfs/mainnet_results.yml");

/// The ic-sqlite-vfs canister's rowid table, measured as [`measure`] measures ic-rusqlite's.
fn measure_vfs(keys: u64, model: CostModel) -> PerCall {
    use stablebench_grid::api::vfs::Error;
    let (mut c, _) = Canister::install(vfs_code(), &unit(), options(model)).expect("installs");
    let data = TrieDataset::new(keys, KV_SEED).unwrap();
    common::vfs_load_all(&mut c, keys);
    let out = c.query("kv_len", &unit(), default_controller());
    let len_cost = cost(&out);
    let len: u64 = decode::<Result<u64, Error>>(out, "kv_len").unwrap();
    assert_eq!(len, data.len(), "sqlite_vfs_rowid: the data set and its warm-ups are loaded");
    let load_one = (0..CALLS)
        .map(|_| {
            let out = c.update("kv_load", &candid::encode_args((keys, 0u64, 1u64)).unwrap(), default_controller());
            let n = cost(&out);
            assert_eq!(decode::<Result<u64, Error>>(out, "kv_load"), Ok(1), "the next offset");
            n
        })
        .collect();
    let queries = data.query_keys();
    let get = |c: &mut Canister, i: usize| {
        let (key, value) = &queries[i % queries.len()];
        let out = c.query("kv_get", &candid::encode_one(ByteBuf::from(key.to_vec())).unwrap(), default_controller());
        let n = cost(&out);
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
        puts.push(cost(&out));
        decode::<Result<Cost, Error>>(out, "kv_put").unwrap();
    }
    let gets = (0..CALLS as usize).map(|i| get(&mut c, i)).collect();
    let upgrade = c.upgrade(vfs_code(), &unit());
    assert!(upgrade.result.is_ok(), "upgrade: {:?}", upgrade.result);
    let first = get(&mut c, 0);
    PerCall::new(Calls { puts, gets, upgrade: cost(&upgrade), first, floors: None, len: len_cost, load_one })
}
const TABLE_DOC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/per-call.md");
const PROFILES_DOC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/per_call_profiles.md");

/// Instructions of a series of calls.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq)]
struct Series {
    calls: u64,
    median: u64,
    min: u64,
    max: u64,
}

impl Series {
    /// The series of `v`'s instructions, and the pages of its median call.
    fn of(mut v: Vec<(u64, PageCounts)>) -> (Series, PageCounts) {
        v.sort_by_key(|&(n, _)| n);
        let (median, pages) = v[v.len() / 2];
        (Series { calls: v.len() as u64, median, min: v[0].0, max: v[v.len() - 1].0 }, pages)
    }
}

/// One message's instructions and the Wasm pages it touched.
fn cost(out: &Outcome) -> (u64, PageCounts) {
    (out.instructions, out.pages)
}

/// Production settings under `model`.
fn options(model: CostModel) -> Options {
    Options { cost_model: model, ..Options::default() }
}

/// What [`measure`] and [`measure_vfs`] measured of one backend, call by call.
struct Calls {
    puts: Vec<(u64, PageCounts)>,
    gets: Vec<(u64, PageCounts)>,
    upgrade: (u64, PageCounts),
    first: (u64, PageCounts),
    /// SQLite backends: the medians of `kv_put` and `kv_get` and of their floors, measured
    /// call for call on the benchmark wasm.
    floors: Option<Floors>,
    len: (u64, PageCounts),
    load_one: Vec<(u64, PageCounts)>,
}

impl PerCall {
    fn new(c: Calls) -> PerCall {
        let ((put, put_pages), (get, get_pages)) = (Series::of(c.puts), Series::of(c.gets));
        let (load_one, load_pages) = Series::of(c.load_one);
        let pages = [
            ("kv_put", put_pages),
            ("kv_get", get_pages),
            ("kv_len", c.len.1),
            ("kv_load", load_pages),
            ("upgrade", c.upgrade.1),
            ("first_kv_get", c.first.1),
        ];
        PerCall {
            put,
            get,
            upgrade: c.upgrade.0,
            first_get_after_upgrade: c.first.0,
            floor_pages: c
                .floors
                .map(|f| [("kv_put".to_string(), f.pages[0]), ("kv_get".to_string(), f.pages[1])].into())
                .unwrap_or_default(),
            put_same_wasm: c.floors.map(|f| f.put.0),
            put_floor: c.floors.map(|f| f.put.1),
            get_same_wasm: c.floors.map(|f| f.get.0),
            get_floor: c.floors.map(|f| f.get.1),
            len: Some(c.len.0),
            load_one: Some(load_one.median),
            pages: pages.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
        }
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
    /// SQLite backends: the median of `CALLS` `kv_put` calls on the benchmark wasm, each beside a
    /// call of its floor (below), on the same database: the floor's ratio is taken to this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    put_same_wasm: Option<u64>,
    /// SQLite backends: the median of `CALLS` `floor_kv_put` calls (the upsert statement alone in
    /// a minimal message, `canister/src/floor.rs`) on the same database under the benchmark wasm.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    put_floor: Option<u64>,
    /// SQLite backends: `kv_get` on the benchmark wasm, as `put_same_wasm`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    get_same_wasm: Option<u64>,
    /// SQLite backends: the same for `floor_kv_get` (the lookup statement alone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    get_floor: Option<u64>,
    /// SQLite backends: the 64 KiB Wasm pages of the median calls of `kv_put` and `kv_get` on the
    /// benchmark wasm and of their floors, (the call's, the floor's).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    floor_pages: BTreeMap<String, (PageCounts, PageCounts)>,
    /// `kv_len` with the data set loaded (query).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    len: Option<u64>,
    /// The median of `CALLS` `kv_load` calls of one entry (entry 0 rewritten with its own value:
    /// the smallest load; update, controller).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    load_one: Option<u64>,
    /// The 64 KiB Wasm pages each call touched (of a series, its median call): `kv_put`,
    /// `kv_get`, `kv_len`, `kv_load`, `upgrade`, `first_kv_get`.
    #[serde(default)]
    pages: BTreeMap<String, PageCounts>,
}

/// The same calls at ten times the keys (`STABLEBENCH_PER_CALL_10X=1`).
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq)]
struct Scaled {
    keys: u64,
    backends: BTreeMap<String, PerCall>,
}

/// Every call under one cost model.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq, Default)]
struct Measured {
    /// The message floor: `kv_len` of an empty heap map (a query doing no storage work: decoding
    /// the argument, ic-cdk's entry, encoding the reply with its `Error` type).
    floor: u64,
    backends: BTreeMap<String, PerCall>,
    /// Ten times the keys, measured only when asked (a few minutes); kept as committed otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ten_x: Option<Scaled>,
    /// The SQLite backends under every deployable pragma profile (per profile, per backend),
    /// measured only when asked (`STABLEBENCH_PER_CALL_PROFILES=1`, several minutes); kept as
    /// committed otherwise.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    profiles: BTreeMap<String, BTreeMap<String, PerCall>>,
}

/// The key-value backends that run on SQLite, whose calls a pragma profile changes.
const SQLITE_BACKENDS: [Backend; 2] = [Backend::Sqlite, Backend::SqliteRowid];

impl Measured {
    /// Every backend at `keys` (and ten times that if `ten_x`) under `model`.
    fn at(keys: u64, model: CostModel, ten_x: bool) -> Measured {
        let backends = |keys: u64| -> BTreeMap<String, PerCall> {
            BACKENDS
                .iter()
                .map(|b| (b.name().to_string(), measure(*b, keys, model)))
                .chain([(Backend::SqliteVfsRowid.name().to_string(), measure_vfs(keys, model))])
                .collect()
        };
        let ten_x = ten_x.then(|| Scaled { keys: 10 * keys, backends: backends(10 * keys) });
        Measured { floor: floor(model), backends: backends(keys), ten_x, profiles: BTreeMap::new() }
    }

    /// The SQLite backends at `keys` under every deployable profile, under `model`.
    fn profiles(keys: u64, model: CostModel) -> BTreeMap<String, BTreeMap<String, PerCall>> {
        PROFILES
            .iter()
            .filter(|p| p.deployable().is_ok())
            .map(|p| {
                let per_backend = SQLITE_BACKENDS
                    .iter()
                    .map(|b| (b.name().to_string(), measure_in(*b, keys, model, Some(p.name), false)));
                (p.name.to_string(), per_backend.collect())
            })
            .collect()
    }
}

/// The committed file: the canbench model's figures at the top level (as before the ic model),
/// the ic model's under `mainnet`, and the wasm files each part was measured on.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq)]
struct Results {
    keys: u64,
    #[serde(flatten)]
    canbench: Measured,
    /// The same calls under the `ic` cost model, each from its own install and load.
    #[serde(default)]
    mainnet: Measured,
    /// Per part (`1x`, `10x`, `profiles`), the SHA-256 of [`WASM_FILES`] it was measured on.
    #[serde(default)]
    wasm: BTreeMap<String, BTreeMap<String, String>>,
    /// The SHA-256 of the sources that produced the `1x` part besides the wasm (the runner, the
    /// grid, the generators, this test, the lock file, the toolchain); the other parts stand on
    /// `wasm` alone.
    #[serde(default)]
    sources: String,
}

/// This test's own sources (besides [`common::PRODUCERS`]).
const SOURCES: [&str; 1] = ["runner/tests/per_call.rs"];

/// What the calls and their floors run (the `1x` and `10x` parts).
const WASM_FILES: [&str; 3] = ["stablebench.wasm", "stablebench_bench.wasm", "stablebench_vfs.wasm"];

/// What the profile sweep runs (ic-rusqlite's SQLite backends only: the ic-sqlite-vfs canister
/// has no profiles to sweep), so that only these files' changes refuse its kept figures.
const PROFILES_WASM_FILES: [&str; 2] = ["stablebench.wasm", "stablebench_bench.wasm"];

fn floor(model: CostModel) -> u64 {
    let (mut c, _) = Canister::install(code(), &unit(), options(model)).expect("installs");
    let out = c.query("kv_len", &candid::encode_one(KvBackend::HeapBTreeMap).unwrap(), default_controller());
    let n = out.instructions;
    assert_eq!(decode::<Result<u64, Error>>(out, "kv_len"), Ok(0), "a fresh heap map is empty");
    n
}

/// `kv_load` of the whole data set of `keys` keys, in budgeted calls.
fn load(c: &mut Canister, kb: KvBackend, keys: u64) {
    common::kv_load_all(c, kb, keys);
}

/// One backend's calls; SQLite under the key-value workloads' profile (`Backend::kv_profile`), so
/// that a whole call and the benchmark's operation run under the same settings.
fn measure(backend: Backend, keys: u64, model: CostModel) -> PerCall {
    measure_in(backend, keys, model, backend.kv_profile().map(|p| p.name), true)
}

/// [`measure`] with the canister installed with pragma profile `profile` (its default if none).
/// `with_floors`: also measure the SQLite backends' calls against their floors (the profile sweep,
/// whose report shows no floors, does not).
fn measure_in(backend: Backend, keys: u64, model: CostModel, profile: Option<&str>, with_floors: bool) -> PerCall {
    let kb = KvBackend::try_from(backend).expect("a key-value backend");
    let arg = match profile {
        Some(name) => {
            candid::encode_one(Some(InitArgs { profile: Some(name.to_string()), wasm_memory_limit: None })).unwrap()
        }
        None => unit(),
    };
    let (mut c, _) = Canister::install(code(), &arg, options(model)).expect("installs");
    let data = TrieDataset::new(keys, KV_SEED).unwrap();
    load(&mut c, kb, keys);
    let out = c.query("kv_len", &candid::encode_one(kb).unwrap(), default_controller());
    let len_cost = cost(&out);
    let len: u64 = decode::<Result<u64, Error>>(out, "kv_len").unwrap();
    assert_eq!(len, data.len(), "{}: the data set and its warm-ups are loaded", backend.name());
    let load_one = (0..CALLS)
        .map(|_| {
            let arg = candid::encode_args((kb, keys, 0u64, 1u64, None::<u64>)).unwrap();
            let out = c.update("kv_load", &arg, default_controller());
            let n = cost(&out);
            let b = decode::<Result<Batch, Error>>(out, "kv_load").expect("kv_load");
            assert_eq!((b.next_offset, b.complete), (1, true), "{}: one entry rewritten", backend.name());
            n
        })
        .collect();

    let queries = data.query_keys();
    let get = |c: &mut Canister, i: usize| {
        let (key, value) = &queries[i % queries.len()];
        let out = c.query("kv_get", &candid::encode_args((kb, key.to_vec())).unwrap(), default_controller());
        let n = cost(&out);
        let got: Option<Vec<u8>> = decode::<Result<_, Error>>(out, "kv_get").unwrap();
        assert_eq!(got.as_ref(), Some(value), "{}: kv_get returns the stored value", backend.name());
        n
    };
    let mut puts = Vec::new();
    for i in 0..CALLS {
        let (key, value) = data.write_entry(i);
        let out = c.update("kv_put", &candid::encode_args((kb, key.to_vec(), value)).unwrap(), default_controller());
        puts.push(cost(&out));
        decode::<Result<Cost, Error>>(out, "kv_put").unwrap();
    }
    let gets = (0..CALLS as usize).map(|i| get(&mut c, i)).collect();
    let upgrade = c.upgrade(code(), &unit());
    assert!(upgrade.result.is_ok(), "upgrade: {:?}", upgrade.result);
    let first = get(&mut c, 0);
    let floors = Layout::of(backend).filter(|_| with_floors).map(|layout| floors(&mut c, kb, keys, layout, &data));
    PerCall::new(Calls { puts, gets, upgrade: cost(&upgrade), first, floors, len: len_cost, load_one })
}

/// A call and its floor on the same wasm: (the call's median, the floor's median).
type Pair = (u64, u64);

/// `kv_put` and `kv_get` against their floors.
#[derive(Clone, Copy, Debug)]
struct Floors {
    put: Pair,
    get: Pair,
    /// The pages of the median calls: (`kv_put`'s, its floor's), (`kv_get`'s, its floor's).
    pages: [(PageCounts, PageCounts); 2],
}

/// After an upgrade to the benchmark wasm (the one with the `floor_*` methods) and `floor_warm`,
/// `CALLS` rounds of
/// `kv_put` and `floor_kv_put` (neighbouring fresh keys after the ones measured before, the first
/// alternating) and of `kv_get` then
/// `floor_kv_get` (the same key, one of those read before), after one round not measured: the
/// call and its floor on the same wasm and database, call for call.
fn floors(c: &mut Canister, kb: KvBackend, keys: u64, layout: Layout, data: &TrieDataset) -> Floors {
    let up = c.upgrade(bench_code(), &unit());
    assert!(up.result.is_ok(), "the upgrade to the benchmark wasm: {:?}", up.result);
    // What the production canister's `post_upgrade` prepares for its queries, which the benchmark
    // canister's skips (the reply type tables of `kv_get` among them).
    let out = c.update("floor_warm", &unit(), default_controller());
    decode::<()>(out, "floor_warm");
    // The upgrade emptied SQLite's page cache, which the endpoints' calls found full (the load
    // had just written every page): rewrite the data set with the same values (an update, so
    // the pages it reads stay cached) before measuring, so that both sides find the pages a
    // random key needs in the cache, as the production wasm's calls did.
    load(c, kb, keys);
    let rowid = layout == Layout::Rowid;
    let queries = data.query_keys();
    let (mut puts, mut gets) = ((Vec::new(), Vec::new()), (Vec::new(), Vec::new()));
    for round in 0..=CALLS {
        // The call and its floor insert neighbouring keys (the same fresh key but its last bit),
        // which land in the same leaf pages, the first one alternating: a key's page split or
        // journal spill falls on one side or the other, not on one side always.
        let (key, value) = data.write_entry(CALLS + round);
        let mut neighbour = key;
        neighbour[31] ^= 1;
        let put = |c: &mut Canister| {
            let arg = candid::encode_args((kb, ByteBuf::from(key.to_vec()), ByteBuf::from(value.clone()))).unwrap();
            let out = c.update("kv_put", &arg, default_controller());
            let n = cost(&out);
            decode::<Result<Cost, Error>>(out, "kv_put").expect("kv_put");
            n
        };
        let floor_put = |c: &mut Canister| {
            let arg =
                candid::encode_args((rowid, ByteBuf::from(neighbour.to_vec()), ByteBuf::from(value.clone()))).unwrap();
            let out = c.update("floor_kv_put", &arg, default_controller());
            let n = cost(&out);
            assert_eq!(decode::<u64>(out, "floor_kv_put"), 1, "one row written");
            n
        };
        let (e, f) = if round % 2 == 0 {
            let e = put(c);
            (e, floor_put(c))
        } else {
            let f = floor_put(c);
            (put(c), f)
        };
        if round > 0 {
            puts.0.push(e);
            puts.1.push(f);
        }
        let (key, value) = &queries[round as usize % queries.len()];
        let out =
            c.query("kv_get", &candid::encode_args((kb, ByteBuf::from(key.to_vec()))).unwrap(), default_controller());
        let e = cost(&out);
        let got: Option<Vec<u8>> = decode::<Result<_, Error>>(out, "kv_get").expect("kv_get");
        assert_eq!(got.as_ref(), Some(value), "kv_get returns the stored value");
        let arg = candid::encode_args((rowid, ByteBuf::from(key.to_vec()))).unwrap();
        let out = c.query("floor_kv_get", &arg, default_controller());
        let f = cost(&out);
        assert_eq!(decode::<u64>(out, "floor_kv_get"), 1, "one row read");
        if round > 0 {
            gets.0.push(e);
            gets.1.push(f);
        }
    }
    // A floor, the call's statement alone on the same wasm, does no more work than the call: the
    // medians of their instructions, on mainnet without the tracker's charges (which pages a
    // message touches also depends on where the allocator put its short-lived allocations). In
    // every mode, regenerating included.
    let ic = c.options().cost_model == CostModel::Ic;
    for (call, (e, f), update) in [("kv_put", &puts, true), ("kv_get", &gets, false)] {
        let work = |v: &[(u64, PageCounts)]| common::median_work(v.iter().copied(), ic, update);
        let (e, f) = (work(e), work(f));
        assert!(
            f <= e,
            "{kb:?} {keys} keys, {}: {call}'s floor runs {f} instructions (median), more than the call's {e} on the same wasm",
            if ic { "mainnet, without the tracker's charges" } else { "canbench" }
        );
    }
    let ((put, put_pages), (put_floor, put_floor_pages)) = (Series::of(puts.0), Series::of(puts.1));
    let ((get, get_pages), (get_floor, get_floor_pages)) = (Series::of(gets.0), Series::of(gets.1));
    Floors {
        put: (put.median, put_floor.median),
        get: (get.median, get_floor.median),
        pages: [(put_pages, put_floor_pages), (get_pages, get_floor_pages)],
    }
}

/// A call's pages as a table cell, "–" if it has none.
fn pages_cell(p: Option<&PageCounts>) -> String {
    p.map_or("–".to_string(), common::pages_text)
}

fn table(r: &Results) -> String {
    let num = stablebench_report::grouped;
    let header = String::from(
        "| backend | `kv_put` on mainnet | canbench | its pages | on the benchmark wasm: it / its floor on mainnet (ratio) | `kv_get` on mainnet | canbench | its pages | on the benchmark wasm: it / its floor on mainnet (ratio) | put / get in `bench_fn` on mainnet (w_avg) | upgrade on mainnet (canbench) | first `kv_get` after it on mainnet (canbench) |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    // What the trie benchmarks measured inside `bench_fn` for the same operations at 200,000 keys
    // (warm) under the ic model: the README's DbWeight rows, from mainnet_results.yml.
    let (main, vfs) =
        (std::fs::read_to_string(MAINNET_RESULTS).unwrap(), std::fs::read_to_string(VFS_MAINNET_RESULTS).unwrap());
    let results =
        CanbenchResults::from_canbench_ymls(&[("mainnet_results.yml", &main), ("vfs/mainnet_results.yml", &vfs)])
            .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(results.model(), Model::Mainnet, "mainnet_results.yml names the ic model");
    let opt = |v: Option<f64>| v.map_or("–".to_string(), stablebench_report::int);
    let floor = |pair: Option<Pair>| {
        pair.map_or("–".to_string(), |(e, f)| format!("{} / {} ({:.2}x)", num(e), num(f), e as f64 / f as f64))
    };
    let names = BACKENDS.iter().copied().chain([Backend::SqliteVfsRowid]);
    // The answer first: the cheapest backend per whole call, under each model.
    let cheapest = |m: &Measured, pick: fn(&PerCall) -> u64| {
        m.backends
            .iter()
            .min_by_key(|(_, p)| pick(p))
            .map_or("–".to_string(), |(n, p)| format!("`{n}` ({})", num(pick(p))))
    };
    let mut t = format!(
        "The cheapest backend for one whole call at {} keys: `kv_put` on mainnet {}, under canbench {}; \
         `kv_get` on mainnet {}, under canbench {}.\n\n{header}",
        num(r.keys),
        cheapest(&r.mainnet, |p| p.put.median),
        cheapest(&r.canbench, |p| p.put.median),
        cheapest(&r.mainnet, |p| p.get.median),
        cheapest(&r.canbench, |p| p.get.median),
    );
    for b in names {
        let (Some(ic), Some(cb)) = (r.mainnet.backends.get(b.name()), r.canbench.backends.get(b.name())) else {
            continue;
        };
        let w = |op| kv::w_avg_per_op(&results, op, DB_WEIGHT_SIZE, b);
        let label = if b == Backend::SqliteVfsRowid { " (ic-sqlite-vfs)" } else { "" };
        t += &format!(
            "| `{}`{label} | {} | {} | {} | {} | {} | {} | {} | {} | {} / {} | {} ({}) | {} ({}) |\n",
            b.name(),
            num(ic.put.median),
            num(cb.put.median),
            pages_cell(ic.pages.get("kv_put")),
            floor(ic.put_same_wasm.zip(ic.put_floor)),
            num(ic.get.median),
            num(cb.get.median),
            pages_cell(ic.pages.get("kv_get")),
            floor(ic.get_same_wasm.zip(ic.get_floor)),
            opt(w(Op::TrieWrite(Cache::Warm))),
            opt(w(Op::TrieRead(Cache::Warm))),
            num(ic.upgrade),
            num(cb.upgrade),
            num(ic.first_get_after_upgrade),
            num(cb.first_get_after_upgrade),
        );
    }
    t += &format!(
        "\n{MAINNET_CHARGES}, so its figure leaves them out. \"Its pages\" are the Wasm pages the \
         call accessed / wrote, heap and stable together (`per_call_results.yml` splits them; a \
         query's writes are undone and not charged). \
         Each model's figures come from its own install and load of the data set. \
         SQLite runs under `{kv}`, the profile of the key-value benchmarks beside it, so that both \
         compare like with like; `docs/per_call_profiles.md` has both SQLite layouts under every \
         deployable profile, the recommended `{rec}` included. \
         A floor is the backend's SQL statement alone in a minimal message (`floor_kv_put` and \
         `floor_kv_get` of the benchmark canister, `canister/src/floor.rs`: the same cached statement, \
         plain Candid arguments, the controller check for the write, a `nat64` reply). It is compared \
         with the same call on the same wasm: after an upgrade of the same canister to the benchmark \
         wasm and a rewrite of the data set that fills the page cache again, as the endpoints found it, \
         the call and its floor alternate (the writes insert neighbouring keys, the first one alternating), \
         median of the same number of calls each (`per_call_results.yml` \
         has the pages of both). On mainnet a floor can touch a page more than its call, and then cost more: \
         which pages a message touches also depends on where the allocator put its short-lived allocations; \
         the test requires of every floor that it run no more instructions than its call, on mainnet once the \
         tracker's charges are taken off both. \
         The floor under every call: `kv_len` of an empty heap map, a query that touches no data, costs {} \
         instructions on mainnet ({} under canbench: decoding the argument, ic-cdk's entry, encoding the \
         reply; the reply's type table is built once and kept, `stablebench_grid::reply`). \
         The rest of a column's whole-message figure is the operation, the backend's own work around it \
         (for SQLite, the statement and its transaction), the key and value crossing Candid and, on \
         mainnet, the pages all of it touches.\n",
        num(r.mainnet.floor),
        num(r.canbench.floor),
        kv = stablebench_grid::cells::KV_PROFILE.name,
        rec = DEFAULT.name,
    );
    t + &every_call_table(r)
}

/// Every key-value endpoint's call at the reference size and ten times it, next to its floor
/// where it has one, on mainnet and under canbench: the shape of the users/orders endpoint table.
fn every_call_table(r: &Results) -> String {
    let num = stablebench_report::grouped;
    let tens = [&r.mainnet, &r.canbench].map(|m| m.ten_x.as_ref());
    let ten_keys =
        tens.iter().flatten().next().map_or("ten times the keys".to_string(), |t| format!("{} keys", num(t.keys)));
    let mut t = format!(
        "\nEvery key-value endpoint, one call each, at {} keys and at {ten_keys} (`kv_load` rewrites one \
         entry, its smallest call; `kv_len` is the answer to \"how many keys\": SQLite counts the table), \
         on mainnet and under canbench:\n\n\
         | backend | call | {} keys on mainnet | its pages | on the benchmark wasm: it / its floor | ratio | canbench | on the benchmark wasm: it / its floor | ratio | {ten_keys} on mainnet | canbench |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        num(r.keys),
        num(r.keys),
    );
    type Pick = fn(&PerCall) -> (Option<u64>, Option<Pair>);
    let calls: [(&str, &str, Pick); 6] = [
        ("`kv_put`", "kv_put", |p| (Some(p.put.median), p.put_same_wasm.zip(p.put_floor))),
        ("`kv_get`", "kv_get", |p| (Some(p.get.median), p.get_same_wasm.zip(p.get_floor))),
        ("`kv_len`", "kv_len", |p| (p.len, None)),
        ("`kv_load` of one entry", "kv_load", |p| (p.load_one, None)),
        ("upgrade", "upgrade", |p| (Some(p.upgrade), None)),
        ("first `kv_get` after it", "first_kv_get", |p| (Some(p.first_get_after_upgrade), None)),
    ];
    // The call's figure, then its floor's cells.
    let with_floor = |p: Option<&PerCall>, pick: Pick| -> (String, String) {
        match p.map(pick) {
            Some((Some(n), Some((e, f)))) => (num(n), format!("{} / {} | {:.2}x", num(e), num(f), e as f64 / f as f64)),
            Some((Some(n), None)) => (num(n), "– | –".to_string()),
            _ => ("not measured".to_string(), " | ".to_string()),
        }
    };
    let alone = |p: Option<&PerCall>, pick: Pick| -> String {
        p.and_then(|p| pick(p).0).map_or("not measured".to_string(), num)
    };
    for (name, ic) in &r.mainnet.backends {
        let cb = r.canbench.backends.get(name);
        let [ic_ten, cb_ten] = tens.map(|t| t.and_then(|t| t.backends.get(name)));
        for (call, key, pick) in calls {
            let ((ic_n, ic_floor), (cb_n, cb_floor)) = (with_floor(Some(ic), pick), with_floor(cb, pick));
            t += &format!(
                "| `{name}` | {call} | {ic_n} | {} | {ic_floor} | {cb_n} | {cb_floor} | {} | {} |\n",
                pages_cell(ic.pages.get(key)),
                alone(ic_ten, pick),
                alone(cb_ten, pick),
            );
        }
    }
    t + "\n`kv_load` of one entry writes the entry and its warm-up twin (two upserts in one \
         transaction, the meter, the `Batch` reply): about two `kv_put` floors, so it has no floor \
         of its own. `kv_len` on SQLite runs `count(*)`, which reads the whole table: it grows with \
         the keys (the query budget stops it with an error before the query limit).\n"
}

/// One figure of a backend's calls.
type Figure = fn(&PerCall) -> u64;

/// `docs/per_call_profiles.md`: the SQLite backends' calls under every deployable profile, on
/// mainnet and under canbench.
fn profiles_doc(r: &Results) -> String {
    let num = stablebench_report::grouped;
    let mut t = format!(
        "# One key-value call under each pragma profile\n\n\
         Generated by `STABLEBENCH_REGENERATE_PER_CALL=1 STABLEBENCH_PER_CALL_PROFILES=1 cargo test --release \
         -p stablebench-runner --test per_call` (`per_call_results.yml`, `profiles`). The per-call \
         measurement (whole messages on the production wasm, {} keys loaded with `kv_load`, the median of \
         {CALLS} calls) of the two SQLite layouts, with the canister installed under each deployable pragma \
         profile (`(opt record {{ profile = opt \"<name>\" }})`), once under the runner's `ic` cost model (mainnet \
         since the IC's memory tracker: 80,000 instructions per 64 KiB Wasm page a message accesses, 80,000 \
         more per page it writes) and once under `canbench`'s. Pages: accessed / written, heap and stable \
         together. The cheapest mainnet figure of each column is in bold; `{}` is the recommended profile.\n\n",
        num(r.keys),
        DEFAULT.name,
    );
    // The answer first: per backend and call, the cheapest profile on mainnet against the recommended one.
    for b in SQLITE_BACKENDS {
        let of = |p: &str| r.mainnet.profiles.get(p).and_then(|m| m.get(b.name()));
        let Some(recommended) = of(DEFAULT.name) else { continue };
        let calls: [(&str, Figure); 3] =
            [("`kv_put`", |p| p.put.median), ("`kv_get`", |p| p.get.median), ("an upgrade", |p| p.upgrade)];
        let parts: Vec<String> = calls
            .iter()
            .filter_map(|(call, pick)| {
                let (name, best) = r
                    .mainnet
                    .profiles
                    .iter()
                    .filter_map(|(n, m)| Some((n, m.get(b.name())?)))
                    .min_by_key(|(_, p)| pick(p))?;
                // The recommended profile itself, or one that ties with it, is no improvement on it.
                if pick(best) >= pick(recommended) {
                    return Some(format!("{call}: `{}` itself ({})", DEFAULT.name, num(pick(recommended))));
                }
                Some(format!(
                    "{call}: `{name}` ({}, {:.2}x cheaper than `{}`'s {})",
                    num(pick(best)),
                    pick(recommended) as f64 / pick(best) as f64,
                    DEFAULT.name,
                    num(pick(recommended))
                ))
            })
            .collect();
        t += &format!("- **`{}`**, cheapest on mainnet for {}.\n", b.name(), parts.join("; "));
    }
    t += "\n";
    for b in SQLITE_BACKENDS {
        let rows: Vec<(&Profile, &PerCall, Option<&PerCall>)> = PROFILES
            .iter()
            .filter_map(|p| {
                let ic = r.mainnet.profiles.get(p.name)?.get(b.name())?;
                Some((p, ic, r.canbench.profiles.get(p.name).and_then(|m| m.get(b.name()))))
            })
            .collect();
        if rows.is_empty() {
            continue;
        }
        let picks: [Figure; 4] = [|p| p.put.median, |p| p.get.median, |p| p.upgrade, |p| p.first_get_after_upgrade];
        let best = picks.map(|pick| rows.iter().map(|(_, ic, _)| pick(ic)).min().unwrap_or(0));
        t += &format!(
            "## `{}`\n\n| profile | `kv_put` on mainnet | canbench | its pages | `kv_get` on mainnet | canbench | its pages | upgrade on mainnet | first `kv_get` after it on mainnet |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
            b.name()
        );
        for (p, ic, cb) in rows {
            let cell = |i: usize| {
                let v = picks[i](ic);
                if v == best[i] {
                    format!("**{}**", num(v))
                } else {
                    num(v)
                }
            };
            let canbench = |pick: Figure| cb.map_or("not measured".to_string(), |c| num(pick(c)));
            let name =
                if p.name == DEFAULT.name { format!("`{}` (recommended)", p.name) } else { format!("`{}`", p.name) };
            t += &format!(
                "| {name} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
                cell(0),
                canbench(picks[0]),
                pages_cell(ic.pages.get("kv_put")),
                cell(1),
                canbench(picks[1]),
                pages_cell(ic.pages.get("kv_get")),
                cell(2),
                cell(3),
            );
        }
        t += "\n";
    }
    t
}

/// `stablebench_report::splice`, failing the test on a missing marker.
fn splice(doc: &str, name: &str, body: &str) -> String {
    stablebench_report::splice(doc, name, body).unwrap_or_else(|e| panic!("docs/per-call.md: {e}"))
}

#[test]
fn one_call_per_backend_costs_what_the_committed_results_say() {
    let ten_x = std::env::var_os("STABLEBENCH_PER_CALL_10X").is_some();
    let profiles = std::env::var_os("STABLEBENCH_PER_CALL_PROFILES").is_some();
    let wasms = common::wasm_hashes(&WASM_FILES);
    let profile_wasms = common::wasm_hashes(&PROFILES_WASM_FILES);
    let committed: Option<Results> =
        std::fs::read_to_string(RESULTS).ok().map(|s| serde_yaml::from_str(&s).expect("per_call_results.yml parses"));
    let sources = common::sources(&SOURCES);
    let measures = ten_x
        || profiles
        || common::measures(
            RESULTS,
            "STABLEBENCH_REGENERATE_PER_CALL",
            "STABLEBENCH_REGENERATE_PER_CALL=1 cargo test --release -p stablebench-runner --test per_call",
            committed.as_ref().and_then(|c| c.wasm.get("1x")),
            &wasms,
            committed.as_ref().map_or("", |c| &c.sources),
            &sources,
        );
    let mut measured = if measures {
        Results {
            keys: DB_WEIGHT_SIZE,
            canbench: Measured::at(DB_WEIGHT_SIZE, CostModel::Canbench, ten_x),
            mainnet: Measured::at(DB_WEIGHT_SIZE, CostModel::Ic, ten_x),
            wasm: BTreeMap::from([("1x".into(), wasms.clone())]),
            sources,
        }
    } else {
        // The committed figures stand (`common::measures`): every check below reads them.
        committed.clone().unwrap()
    };
    if ten_x {
        measured.wasm.insert("10x".into(), wasms.clone());
    }
    if profiles {
        measured.canbench.profiles = Measured::profiles(DB_WEIGHT_SIZE, CostModel::Canbench);
        measured.mainnet.profiles = Measured::profiles(DB_WEIGHT_SIZE, CostModel::Ic);
        measured.wasm.insert("profiles".into(), profile_wasms.clone());
    }
    for (model, m) in [("canbench", &measured.canbench), ("mainnet", &measured.mainnet)] {
        for (name, p) in m.backends.iter().chain(m.ten_x.iter().flat_map(|t| &t.backends)) {
            eprintln!("{model} {name}: {p:?}");
        }
    }
    // What holds whatever the committed figures say: the memory tracker only adds charges.
    fn parts(m: &Measured) -> Vec<(String, &PerCall)> {
        let ten = m.ten_x.iter().flat_map(|t| t.backends.iter().map(|(n, p)| (format!("10x {n}"), p)));
        let swept = m.profiles.iter().flat_map(|(pr, b)| b.iter().map(move |(n, p)| (format!("{pr} {n}"), p)));
        m.backends.iter().map(|(n, p)| (n.clone(), p)).chain(ten).chain(swept).collect()
    }
    for ((name, c), (_, m)) in parts(&measured.canbench).iter().zip(parts(&measured.mainnet).iter()) {
        assert!(
            m.put.median >= c.put.median && m.get.median >= c.get.median,
            "{name}: put {} / get {} under ic, less than canbench's {} / {}",
            m.put.median,
            m.get.median,
            c.put.median,
            c.get.median
        );
    }
    let readme = std::fs::read_to_string(TABLE_DOC).unwrap();
    // Parts this run does not measure stand only if they were measured on the files it would
    // measure: regenerating without them after the wasm moved would write figures the check
    // refuses, so it fails here too.
    if let Some(c) = &committed {
        for (part, kept, present, current) in [
            ("10x", !ten_x, c.canbench.ten_x.is_some(), &wasms),
            ("profiles", !profiles, !c.canbench.profiles.is_empty(), &profile_wasms),
        ] {
            if kept && present {
                common::assert_measured_on(
                    "per_call_results.yml",
                    part,
                    c.wasm.get(part),
                    current,
                    "STABLEBENCH_REGENERATE_PER_CALL=1 STABLEBENCH_PER_CALL_10X=1 STABLEBENCH_PER_CALL_PROFILES=1",
                );
            }
        }
    }
    if std::env::var_os("STABLEBENCH_REGENERATE_PER_CALL").is_some() {
        if let Some(c) = committed {
            for (part, kept) in [("10x", !ten_x), ("profiles", !profiles)] {
                if let Some(w) = c.wasm.get(part).filter(|_| kept) {
                    measured.wasm.insert(part.into(), w.clone());
                }
            }
            if !ten_x {
                measured.canbench.ten_x = c.canbench.ten_x;
                measured.mainnet.ten_x = c.mainnet.ten_x;
            }
            if !profiles {
                measured.canbench.profiles = c.canbench.profiles;
                measured.mainnet.profiles = c.mainnet.profiles;
            }
        }
        let yml = format!(
            "# Generated by `STABLEBENCH_REGENERATE_PER_CALL=1 cargo test --release -p stablebench-runner --test per_call`;\n# whole-message instructions on the production wasm through the offline runner, under the canbench cost model\n# (top level) and the ic cost model (`mainnet`), with the 64 KiB Wasm pages each call touched. Do not edit.\n{}",
            serde_yaml::to_string(&measured).unwrap()
        );
        std::fs::write(RESULTS, yml).unwrap();
        std::fs::write(TABLE_DOC, splice(&readme, "per-call-table", &table(&measured))).unwrap();
        std::fs::write(PROFILES_DOC, profiles_doc(&measured)).unwrap();
        return;
    }
    let committed = committed.expect("per_call_results.yml");
    for (model, m, c) in
        [("canbench", &measured.canbench, &committed.canbench), ("mainnet", &measured.mainnet, &committed.mainnet)]
    {
        assert_eq!(m.floor, c.floor, "{model} floor: measured, committed: regenerate per_call_results.yml");
        // (measured, committed) per size: the reference size, and ten times it when it was measured.
        let mut sizes = vec![(&m.backends, &c.backends)];
        if let Some(t) = &m.ten_x {
            let c = c.ten_x.as_ref().expect("per_call_results.yml has no 10x figures: regenerate it");
            assert_eq!(t.keys, c.keys);
            sizes.push((&t.backends, &c.backends));
        }
        // The profile sweep, when it was measured: every profile's SQLite backends.
        for (profile, backends) in &m.profiles {
            let c = c.profiles.get(profile).unwrap_or_else(|| panic!("{model} profile {profile} is not committed"));
            sizes.push((backends, c));
        }
        for (name, p, committed_backends) in sizes.into_iter().flat_map(|(m, c)| m.iter().map(move |(n, p)| (n, p, c)))
        {
            let c_p =
                committed_backends.get(name).unwrap_or_else(|| panic!("{model} {name} is not in per_call_results.yml"));
            assert_eq!(p, c_p, "{model} {name}: measured, committed: regenerate per_call_results.yml");
        }
    }
    assert_eq!(
        readme,
        splice(&readme, "per-call-table", &table(&committed)),
        "docs/per-call.md's per-call table is stale"
    );
    let doc = std::fs::read_to_string(PROFILES_DOC).unwrap_or_default();
    assert_eq!(doc, profiles_doc(&committed), "docs/per_call_profiles.md is stale: regenerate it");
}
