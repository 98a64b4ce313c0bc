//! Where a call's pages go: one message of each key-value endpoint (`kv_put`, `kv_get`,
//! `kv_len`) per backend of the production canister and of the ic-sqlite-vfs canister, at
//! 200,000 keys (the DbWeight size), its pages split by region: the heap's stack, statics and
//! allocator heap, read from the wasm, and stable memory by `MemoryManager` memory, read from the
//! canister's stable memory (`stablebench_runner::regions`). Each split adds up to the pages the
//! message is charged for (`Outcome::pages`), which this test checks. Then the users/orders
//! endpoints of the production canister (`add_users(next, 1)`, `add_orders(next, 1)`,
//! `delete_orders` of one order, a point read, a list page, `stats`) at the reference size, split
//! the same way. Beside each call, the pages its structure must touch, computed natively
//! (`page_regions/necessary.rs`, `page_regions/users_orders.rs`), and the floor under them all:
//! the minimal update and query.
//!
//! The figures are committed in `page_regions_results.yml` and `docs/page-budget.md`; the test
//! fails when a rerun differs at all. Regenerate with
//! `STABLEBENCH_REGENERATE_PAGE_REGIONS=1 cargo test --release -p stablebench-runner --test page_regions`;
//! with `STABLEBENCH_PAGE_REGIONS_10X=1` it measures the users/orders endpoints at ten times the
//! reference size too (1,000,000 users, 10,000,000 orders; outside CI), and without it the
//! committed 10x figures stand only if they were measured on the production wasm built now.

mod common;
#[path = "page_regions/necessary.rs"]
mod necessary;
#[path = "page_regions/users_orders.rs"]
mod users_orders;

use std::collections::BTreeMap;

use candid::Principal;
use serde_bytes::ByteBuf;
use stablebench::kv::gen::TrieDataset;
use stablebench_canister::{Batch, Deleted, Error, KvBackend, Stats};
use stablebench_grid::api::vfs::Error as VfsError;
use stablebench_grid::cells::{Backend, DB_WEIGHT_SIZE};
use stablebench_grid::users_orders::Sizes;
use stablebench_grid::KV_SEED;
use stablebench_report::page_regions::{
    stable_region_name, AllocationSite, Call, Calls, Endpoints, Floor, Necessary, Results, Split, SITES,
};
use stablebench_runner::canister::{default_controller, Canister, Code, Limits, Options, Outcome};
use stablebench_runner::instrument::Metering;
use stablebench_runner::profile::{allocation_sites, Names};
use stablebench_runner::regions::{HeapLayout, HeapRegion, StableLayout, StableRegion};
use stablebench_runner::replica::CostModel;

const RESULTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../page_regions_results.yml");
const PAGE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/page-budget.md");
const WASM_FILES: [&str; 2] = ["stablebench.wasm", "stablebench_vfs.wasm"];
/// This test's own sources (besides [`common::PRODUCERS`]): its files and its results type.
const SOURCES: [&str; 3] = ["runner/tests/page_regions.rs", "runner/tests/page_regions", "report/src/page_regions.rs"];
const REGENERATE: &str =
    "STABLEBENCH_REGENERATE_PAGE_REGIONS=1 cargo test --release -p stablebench-runner --test page_regions";

/// Calls of each kind measured, after one that is not (each its own key).
const CALLS: u64 = 9;

/// Functions named per call in its page profile.
const TOP_FUNCTIONS: usize = 4;

/// `name`'s production wasm, profiled (its page profile: which function touched each page
/// first; profiling changes no instruction count), and the names of its copy that keeps them
/// (`scripts/build.sh` writes `NAME.names.wasm`), which must be the same code.
fn profiled(name: &str) -> (std::sync::Arc<Code>, Names) {
    let path = |f: &str| format!("{}/../target/canister/{f}", env!("CARGO_MANIFEST_DIR"));
    let wasm = std::fs::read(path(&format!("{name}.wasm"))).expect("run scripts/build.sh all");
    let named = std::fs::read(path(&format!("{name}.names.wasm"))).expect("run scripts/build.sh all");
    assert_eq!(code_section(&wasm), code_section(&named), "{name}.names.wasm is not {name}.wasm's code");
    let code = Code::new(&wasm, Metering::Profiled).expect("instruments and compiles");
    (code, Names::from_wasm(&named).expect("the names"))
}

/// A module's code section, byte for byte (the functions, in index order).
fn code_section(wasm: &[u8]) -> Vec<u8> {
    for payload in wasmparser::Parser::new(0).parse_all(wasm) {
        if let wasmparser::Payload::CodeSectionStart { range, .. } = payload.unwrap() {
            return wasm[range].to_vec();
        }
    }
    panic!("no code section")
}

/// The pages of `out`, split by the regions of `layout` and of the canister's stable memory now.
fn split(c: &mut Canister, layout: &HeapLayout, names: &Names, out: &Outcome, what: &str) -> Call {
    assert!(out.result.is_ok(), "{what}: {:?}", out.result);
    let profile = c.take_profile().expect("profiled");
    let first_touched_by = profile
        .pages()
        .into_iter()
        .take(TOP_FUNCTIONS)
        .map(|(f, p)| (names.get(f), Split { accessed: p.accessed(), written: p.written() }))
        .collect();
    let mut by_part = BTreeMap::<String, Split>::new();
    for (f, p) in profile.pages() {
        let s = by_part.entry(part(&names.get(f)).into()).or_default();
        s.accessed += p.accessed();
        s.written += p.written();
    }
    let sites = allocation_sites(&profile, names);
    let (accessed, written) = sites.iter().fold((0, 0), |(a, w), (_, p)| (a + p.accessed(), w + p.written()));
    let allocator = by_part.get("allocator").copied().unwrap_or_default();
    assert_eq!(
        (accessed, written),
        (allocator.accessed, allocator.written),
        "{what}: the sites add up to the allocator's pages"
    );
    let allocation_sites = sites
        .into_iter()
        .take(SITES)
        .map(|(s, p)| AllocationSite {
            site: names.get(s.caller),
            entry: names.get(s.entry),
            pages: Split { accessed: p.accessed(), written: p.written() },
        })
        .collect();
    let stable = StableLayout::read(c.stable_memory());
    let mut call = Call {
        what: what.into(),
        instructions: out.instructions,
        first_touched_by,
        by_part,
        allocation_sites,
        ..Call::default()
    };
    let add = |m: &mut BTreeMap<String, Split>, k: String, written: bool| {
        let s = m.entry(k).or_default();
        s.accessed += 1;
        s.written += u64::from(written);
    };
    for set in &out.page_sets {
        for &(p, w) in &set.heap {
            add(&mut call.heap, layout.region(p).name().into(), w);
        }
        for &(p, w) in &set.stable {
            let name = match stable.as_ref().map(|l| l.region(p)) {
                Some(StableRegion::ManagerHeader) => stable_region_name(None),
                Some(StableRegion::Memory(id)) => stable_region_name(Some(id)),
                Some(StableRegion::Unallocated) => "unallocated".into(),
                None => "no_memory_manager".into(),
            };
            add(&mut call.stable, name, w);
        }
    }
    let total = call.total();
    assert_eq!(
        (total.accessed, total.written),
        (out.pages.accessed(), out.pages.written()),
        "{what}: the regions add up to the pages charged"
    );
    let parts = call.by_part.values().fold((0, 0), |(a, w), s| (a + s.accessed, w + s.written));
    assert_eq!(parts, (total.accessed, total.written), "{what}: the parts add up to the pages charged");
    call
}

/// The part of the canister ([`stablebench_report::page_regions::PARTS`]) a function belongs
/// to, by its demangled name: the runner's buckets (`stablebench_runner::profile::bucket`), with
/// SQLite's page cache, Candid and ic-cdk told apart.
fn part(name: &str) -> &'static str {
    use stablebench_runner::profile::{bucket, Bucket};
    let bare = name.trim_start_matches('<');
    let in_crate = |c: &str| bare.starts_with(c) || name.contains(&format!(" as {c}"));
    if name.starts_with("pcache1") || name.starts_with("sqlite3Pcache") {
        return "sqlite_page_cache";
    }
    if in_crate("candid::") {
        return "candid";
    }
    if in_crate("ic_cdk::") && !in_crate("ic_cdk::stable") {
        return "ic_cdk";
    }
    match bucket(name) {
        Bucket::Sqlite => "sqlite",
        Bucket::Allocator => "allocator",
        Bucket::Storage => "storage",
        Bucket::MemOps => "mem_ops",
        Bucket::Other => "canister",
    }
}

#[test]
fn every_function_belongs_to_one_named_part() {
    let cases = [
        ("pcache1Fetch", "sqlite_page_cache"),
        ("sqlite3PcacheRelease", "sqlite_page_cache"),
        ("sqlite3VdbeExec", "sqlite"),
        ("dlmalloc", "allocator"),
        ("dlmalloc::dlmalloc::Dlmalloc<A>::malloc", "allocator"),
        ("stable_fs::storage::metadata_provider::MetadataCache::get", "storage"),
        ("<ic_stable_structures::memory_manager::VirtualMemory<M> as ic_stable_structures::Memory>::write", "storage"),
        ("ic_cdk::stable::stable_write", "storage"),
        ("memcpy", "mem_ops"),
        ("candid::de::IDLDeserialize::new", "candid"),
        ("<candid::binary_parser::Header as binread::BinRead>::read_options", "candid"),
        ("ic_cdk::api::msg_reply", "ic_cdk"),
        ("canister_query list_orders", "canister"),
        ("stablebench::query::list_users", "canister"),
    ];
    for (name, want) in cases {
        assert_eq!(part(name), want, "{name}");
    }
    let parts = stablebench_report::page_regions::PARTS.map(|(k, _)| k);
    for (_, want) in cases {
        assert!(parts.contains(&want), "{want} is a part the page names");
    }
}

/// One backend's calls after the load, each one message: `kv_put` of fresh keys, `kv_get` of
/// stored ones, `kv_len`, [`CALLS`] of each after one not measured.
fn measure(backend: Backend, data: &TrieDataset) -> BTreeMap<String, Calls> {
    let vfs = backend == Backend::SqliteVfsRowid;
    let opts = Options { cost_model: CostModel::Ic, ..Options::default() };
    let (code, names) = profiled(if vfs { "stablebench_vfs" } else { "stablebench" });
    let layout = HeapLayout::read(&code.wasm).expect("the wasm's layout");
    let (mut c, _) = Canister::install(code, &common::unit(), opts).expect("installs");
    let kb = (!vfs).then(|| KvBackend::try_from(backend).unwrap());
    match kb {
        Some(kb) => common::kv_load_all(&mut c, kb, data.size),
        None => common::vfs_load_all(&mut c, data.size),
    }
    c.set_profile_pages(true);
    let ok = |out: &Outcome, what: &str| {
        let bytes = out.result.as_ref().unwrap_or_else(|e| panic!("{what}: {e:?}"));
        let fine = if vfs {
            candid::decode_one::<Result<candid::Reserved, VfsError>>(bytes).map(|r| r.is_ok())
        } else {
            candid::decode_one::<Result<candid::Reserved, Error>>(bytes).map(|r| r.is_ok())
        };
        assert!(fine.unwrap_or(false), "{what} answers Ok");
    };
    let need = necessary::of(backend, data, CALLS);
    let mut calls = BTreeMap::new();
    let queries = data.query_keys();
    let mut puts = Vec::new();
    for i in 0..=CALLS {
        let (key, value) = data.write_entry(i);
        let (key, value) = (ByteBuf::from(key.to_vec()), ByteBuf::from(value));
        let arg = match kb {
            Some(kb) => candid::encode_args((kb, key, value)).unwrap(),
            None => candid::encode_args((key, value)).unwrap(),
        };
        let out = c.update("kv_put", &arg, default_controller());
        ok(&out, "kv_put");
        if i > 0 {
            puts.push(split(&mut c, &layout, &names, &out, "a fresh key's 128-byte value, one commit"));
        }
    }
    calls.insert("kv_put".to_string(), Calls::of(with_necessary(puts, &need["kv_put"]), true));
    let mut gets = Vec::new();
    for i in 0..=CALLS {
        let key = ByteBuf::from(queries[i as usize].0.to_vec());
        let arg = match kb {
            Some(kb) => candid::encode_args((kb, key)).unwrap(),
            None => candid::encode_one(key).unwrap(),
        };
        let out = c.query("kv_get", &arg, default_controller());
        ok(&out, "kv_get");
        if i > 0 {
            gets.push(split(&mut c, &layout, &names, &out, "a stored key's value, a query"));
        }
    }
    calls.insert("kv_get".to_string(), Calls::of(with_necessary(gets, &need["kv_get"]), false));
    let arg = match kb {
        Some(kb) => candid::encode_one(kb).unwrap(),
        None => common::unit(),
    };
    let mut lens = Vec::new();
    for i in 0..=CALLS {
        let out = c.query("kv_len", &arg, default_controller());
        ok(&out, "kv_len");
        if i > 0 {
            lens.push(split(&mut c, &layout, &names, &out, "the number of keys, a query"));
        }
    }
    calls.insert("kv_len".to_string(), Calls::of(lens, false));
    calls
}

/// Each measured call with the necessary pages computed for it (the same key, in call order).
fn with_necessary(mut calls: Vec<Call>, necessary: &[Necessary]) -> Vec<Call> {
    assert_eq!(calls.len(), necessary.len(), "one computation per call");
    for (c, n) in calls.iter_mut().zip(necessary) {
        c.necessary = Some(n.clone());
    }
    calls
}

/// The floor under every call, on a freshly installed production canister: the minimal update
/// (`kv_put` of one key into the empty heap map: decode, check the caller, touch one value,
/// reply) and the minimal query (`kv_get` of it).
fn floor(data: &TrieDataset) -> Floor {
    let opts = Options { cost_model: CostModel::Ic, ..Options::default() };
    let (code, names) = profiled("stablebench");
    let layout = HeapLayout::read(&code.wasm).expect("the wasm's layout");
    let (mut c, _) = Canister::install(code, &common::unit(), opts).expect("installs");
    c.set_profile_pages(true);
    let kb = KvBackend::HeapBTreeMap;
    let (key, value) = data.write_entry(0);
    let (key, value) = (ByteBuf::from(key.to_vec()), ByteBuf::from(value));
    let out = c.update("kv_put", &candid::encode_args((kb, key.clone(), value.clone())).unwrap(), default_controller());
    let update = split(&mut c, &layout, &names, &out, "one key's 128-byte value into the empty heap map, an update");
    common::decode::<Result<stablebench_canister::Cost, Error>>(out, "kv_put").expect("kv_put");
    let out = c.query("kv_get", &candid::encode_args((kb, key)).unwrap(), default_controller());
    let query = split(&mut c, &layout, &names, &out, "that key's value from the heap map, a query");
    let got: Option<ByteBuf> = common::decode::<Result<_, Error>>(out, "kv_get").expect("kv_get");
    assert_eq!(got, Some(value), "the minimal query reads the value the minimal update wrote");
    Floor { update, query }
}

/// The users/orders endpoints at `sizes` on the production canister (its default profile, the
/// schema and both indexes, then the rows, as `endpoints.rs` loads them): every call of
/// [`users_orders::script`], each kind's first not measured.
fn measure_endpoints(sizes: Sizes) -> Endpoints {
    let opts = Options { limits: Limits::PRODUCTION, cost_model: CostModel::Ic, ..Options::default() };
    let (code, names) = profiled("stablebench");
    let layout = HeapLayout::read(&code.wasm).expect("the wasm's layout");
    let mut c = common::users_orders_loaded(code, &common::unit(), opts, sizes);
    let stats = |c: &mut Canister| -> Stats {
        let out = c.query("stats", &common::unit(), Principal::anonymous());
        common::decode::<Result<Stats, Error>>(out, "stats").expect("stats")
    };
    let database_pages = stats(&mut c).page_count;
    let steps = users_orders::script(sizes, CALLS);
    let (native_pages, need) = users_orders::necessary(sizes, &steps);
    assert_eq!(native_pages, database_pages, "the native copy of the database has the canister's pages");
    c.set_profile_pages(true);
    let mut by_call: BTreeMap<&str, (bool, Vec<Call>)> = BTreeMap::new();
    let mut first = std::collections::BTreeSet::new();
    for (step, need) in steps.iter().zip(need) {
        use users_orders::Step;
        let anyone = Principal::anonymous();
        let (out, what) = match *step {
            Step::AddUser(offset) => (
                c.update("add_users", &candid::encode_args((offset, 1u64)).unwrap(), default_controller()),
                "one new user, one commit",
            ),
            Step::AddOrder(offset) => (
                c.update("add_orders", &candid::encode_args((offset, 1u64)).unwrap(), default_controller()),
                "one new order, one commit",
            ),
            Step::DeleteNewest { max_user_id, from } => (
                c.update(
                    "delete_orders",
                    &candid::encode_args((max_user_id, Some(from), None::<u64>)).unwrap(),
                    default_controller(),
                ),
                "the newest order deleted, one commit",
            ),
            Step::PointRead(after) => (
                c.query("list_users", &candid::encode_args((after, 1u32)).unwrap(), anyone),
                "one user by a random id, a query",
            ),
            Step::ListPage(after) => (
                c.query("list_orders", &candid::encode_args((after, users_orders::PAGE_ROWS)).unwrap(), anyone),
                "ten orders from a random id, a query",
            ),
            Step::Stats => (c.query("stats", &common::unit(), anyone), "the row counts and sizes, a query"),
        };
        let mut call = split(&mut c, &layout, &names, &out, what);
        let bytes = out.result.as_ref().unwrap();
        let fine = match step {
            Step::AddUser(_) | Step::AddOrder(_) => {
                candid::decode_one::<Result<Batch, Error>>(bytes).unwrap().is_ok_and(|b| b.inserted == 1)
            }
            Step::DeleteNewest { .. } => {
                candid::decode_one::<Result<Deleted, Error>>(bytes).unwrap().is_ok_and(|d| d.complete && d.deleted == 1)
            }
            _ => candid::decode_one::<Result<candid::Reserved, Error>>(bytes).unwrap().is_ok(),
        };
        assert!(fine, "{}: {step:?} answers as the native run did", step.name());
        if first.insert(step.name()) {
            continue;
        }
        call.necessary = Some(need);
        by_call.entry(step.name()).or_insert((step.update(), Vec::new())).1.push(call);
    }
    let calls = by_call.into_iter().map(|(name, (update, v))| (name.to_string(), Calls::of(v, update))).collect();
    Endpoints {
        users: sizes.users,
        orders: sizes.orders,
        database_pages,
        calls,
        wasm: common::wasm_hashes(&WASM_FILES[..1]),
    }
}

/// Ten times the reference data set: 1,000,000 users, 10,000,000 orders.
const TEN_X: Sizes = Sizes::at(Sizes::REFERENCE.orders * 10);

/// Set, the users/orders endpoints are measured at [`TEN_X`] too; else the committed 10x figures
/// stand, if they were measured on the production wasm this run would measure.
const TEN_X_VAR: &str = "STABLEBENCH_PAGE_REGIONS_10X";

fn measured(committed: &Results, wasm: BTreeMap<String, String>, sources: String) -> Results {
    let data = TrieDataset::new(DB_WEIGHT_SIZE, KV_SEED).unwrap();
    let backends =
        stablebench_grid::shapes::BACKENDS.iter().map(|&b| (b.name().to_string(), measure(b, &data))).collect();
    let mut endpoints = BTreeMap::from([("1x".to_string(), measure_endpoints(Sizes::REFERENCE))]);
    if std::env::var_os(TEN_X_VAR).is_some() {
        endpoints.insert("10x".to_string(), measure_endpoints(TEN_X));
    } else if let Some(kept) = committed.endpoints.get("10x") {
        common::assert_measured_on(
            RESULTS,
            "10x",
            Some(&kept.wasm),
            &endpoints["1x"].wasm,
            &format!("STABLEBENCH_REGENERATE_PAGE_REGIONS=1 {TEN_X_VAR}=1"),
        );
        endpoints.insert("10x".to_string(), kept.clone());
    }
    Results {
        keys: DB_WEIGHT_SIZE,
        backends,
        floor: Some(floor(&data)),
        endpoints,
        forwarding: stablebench_runner::profile::forwarding_paths(),
        wasm,
        sources,
    }
}

#[test]
fn every_calls_pages_by_region_match_the_committed_results() {
    let committed: Results = common::committed_or_default(RESULTS);
    let (wasm, sources) = (common::wasm_hashes(&WASM_FILES), common::sources(&SOURCES));
    let measures = common::measures(
        RESULTS,
        "STABLEBENCH_REGENERATE_PAGE_REGIONS",
        REGENERATE,
        Some(&committed.wasm),
        &wasm,
        &committed.sources,
        &sources,
    );
    let r = if measures { measured(&committed, wasm, sources) } else { committed.clone() };
    let yml = format!(
        "# Generated by `STABLEBENCH_REGENERATE_PAGE_REGIONS=1 [STABLEBENCH_PAGE_REGIONS_10X=1] cargo test --release -p stablebench-runner --test page_regions`:\n# one message of each key-value endpoint and of the users/orders endpoints on the production wasm files through the offline\n# runner, its 64 KiB Wasm pages (accessed / written) by region of memory (stablebench_runner::regions). Do not edit.\n{}",
        serde_yaml::to_string(&r).unwrap()
    );
    let heap_regions = HeapRegion::ALL.map(HeapRegion::name);
    let page = stablebench_report::page_regions::page(&r, &heap_regions);
    if std::env::var_os("STABLEBENCH_REGENERATE_PAGE_REGIONS").is_some() {
        std::fs::write(RESULTS, yml).unwrap();
        std::fs::write(PAGE, page).unwrap();
        return;
    }
    assert_eq!(
        r, committed,
        "measured, committed: regenerate page_regions_results.yml (STABLEBENCH_REGENERATE_PAGE_REGIONS=1)"
    );
    assert_eq!(std::fs::read_to_string(RESULTS).unwrap(), yml, "page_regions_results.yml is not what it generates");
    assert_eq!(std::fs::read_to_string(PAGE).unwrap_or_default(), page, "docs/page-budget.md is stale");
}
