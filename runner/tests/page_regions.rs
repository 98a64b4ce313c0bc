//! Where a call's pages go: one message of each key-value endpoint (`kv_put`, `kv_get`,
//! `kv_len`) per backend of the production canister and of the ic-sqlite-vfs canister, at
//! 200,000 keys (the DbWeight size), its pages split by region: the heap's stack, statics and
//! allocator heap, read from the wasm, and stable memory by `MemoryManager` memory, read from the
//! canister's stable memory (`stablebench_runner::regions`). Each split adds up to the pages the
//! message is charged for (`Outcome::pages`), which this test checks.
//!
//! The figures are committed in `page_regions_results.yml` and `docs/page-budget.md`; the test
//! fails when a rerun differs at all. Regenerate with
//! `STABLEBENCH_REGENERATE_PAGE_REGIONS=1 cargo test --release -p stablebench-runner --test page_regions`.

mod common;
#[path = "page_regions/necessary.rs"]
mod necessary;

use std::collections::BTreeMap;

use serde_bytes::ByteBuf;
use stablebench::kv::gen::TrieDataset;
use stablebench_canister::{Error, KvBackend};
use stablebench_grid::api::vfs::Error as VfsError;
use stablebench_grid::cells::{Backend, DB_WEIGHT_SIZE};
use stablebench_grid::KV_SEED;
use stablebench_report::page_regions::{stable_region_name, Call, Calls, Floor, Necessary, Results, Split};
use stablebench_runner::canister::{default_controller, Canister, Code, Options, Outcome};
use stablebench_runner::instrument::Metering;
use stablebench_runner::profile::Names;
use stablebench_runner::regions::{HeapLayout, HeapRegion, StableLayout, StableRegion};
use stablebench_runner::replica::CostModel;

const RESULTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../page_regions_results.yml");
const PAGE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/page-budget.md");
const WASM_FILES: [&str; 2] = ["stablebench.wasm", "stablebench_vfs.wasm"];

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
    let stable = StableLayout::read(c.stable_memory());
    let mut call = Call { what: what.into(), instructions: out.instructions, first_touched_by, ..Call::default() };
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
    call
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
    calls.insert("kv_put".to_string(), Calls::of(with_necessary(puts, &need["kv_put"])));
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
    calls.insert("kv_get".to_string(), Calls::of(with_necessary(gets, &need["kv_get"])));
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
    calls.insert("kv_len".to_string(), Calls::of(lens));
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

fn measured() -> Results {
    let data = TrieDataset::new(DB_WEIGHT_SIZE, KV_SEED).unwrap();
    let backends =
        stablebench_grid::shapes::BACKENDS.iter().map(|&b| (b.name().to_string(), measure(b, &data))).collect();
    Results { keys: DB_WEIGHT_SIZE, backends, floor: Some(floor(&data)), wasm: common::wasm_hashes(&WASM_FILES) }
}

#[test]
fn every_calls_pages_by_region_match_the_committed_results() {
    let r = measured();
    let yml = format!(
        "# Generated by `STABLEBENCH_REGENERATE_PAGE_REGIONS=1 cargo test --release -p stablebench-runner --test page_regions`:\n# one message of each key-value endpoint on the production wasm files through the offline runner, its 64 KiB Wasm\n# pages (accessed / written) by region of memory (stablebench_runner::regions). Do not edit.\n{}",
        serde_yaml::to_string(&r).unwrap()
    );
    let heap_regions = HeapRegion::ALL.map(HeapRegion::name);
    let page = stablebench_report::page_regions::page(&r, &heap_regions);
    if std::env::var_os("STABLEBENCH_REGENERATE_PAGE_REGIONS").is_some() {
        std::fs::write(RESULTS, yml).unwrap();
        std::fs::write(PAGE, page).unwrap();
        return;
    }
    let committed: Results = serde_yaml::from_str(&std::fs::read_to_string(RESULTS).expect("page_regions_results.yml"))
        .expect("page_regions_results.yml parses");
    assert_eq!(
        r, committed,
        "measured, committed: regenerate page_regions_results.yml (STABLEBENCH_REGENERATE_PAGE_REGIONS=1)"
    );
    assert_eq!(std::fs::read_to_string(RESULTS).unwrap(), yml, "page_regions_results.yml is not what it generates");
    assert_eq!(std::fs::read_to_string(PAGE).unwrap_or_default(), page, "docs/page-budget.md is stale");
}
