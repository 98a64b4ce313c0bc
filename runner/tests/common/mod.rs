//! Shared by the end-to-end tests: the production wasm, loaded once per test binary.
// Each test binary includes this module and uses a different part of it.
#![allow(dead_code)]

pub mod sets;

use std::sync::{Arc, OnceLock};

use candid::CandidType;
use serde::de::DeserializeOwned;
use stablebench::query::{Rows, Value};
use stablebench_canister::Error;
use stablebench_runner::canister::{default_controller, Canister, Code, Outcome};
use stablebench_runner::instrument::Metering;

/// `target/canister/stablebench.wasm` (built by scripts/build.sh), instrumented and compiled.
pub fn code() -> Arc<Code> {
    static CODE: OnceLock<Arc<Code>> = OnceLock::new();
    CODE.get_or_init(|| {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../target/canister/stablebench.wasm");
        assert!(
            std::path::Path::new(path).exists(),
            "{path} is missing: run scripts/build.sh first (scripts/test.sh does)"
        );
        Code::from_file(path.as_ref(), Metering::On).expect("the canister wasm loads")
    })
    .clone()
}

/// `target/canister/stablebench_vfs.wasm`: the ic-sqlite-vfs canister (built by
/// `scripts/build.sh vfs`), instrumented and compiled once per test binary.
pub fn vfs_code() -> Arc<Code> {
    static CODE: OnceLock<Arc<Code>> = OnceLock::new();
    CODE.get_or_init(|| {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../target/canister/stablebench_vfs.wasm");
        assert!(std::path::Path::new(path).exists(), "{path} is missing: run scripts/build.sh vfs first");
        Code::from_file(path.as_ref(), Metering::On).expect("the ic-sqlite-vfs canister wasm loads")
    })
    .clone()
}

/// The ic-sqlite-vfs canister's `kv_load` of the whole trie data set of `keys` keys (with its
/// warm-ups), `MAX_LOAD_PER_CALL` entries per call.
pub fn vfs_load_all(c: &mut Canister, keys: u64) {
    use stablebench_grid::api::vfs::{Error, MAX_LOAD_PER_CALL};
    let mut offset = 0;
    while offset < keys {
        let count = MAX_LOAD_PER_CALL.min(keys - offset);
        let arg = candid::encode_args((keys, offset, count)).unwrap();
        offset =
            decode::<Result<u64, Error>>(c.update("kv_load", &arg, default_controller()), "kv_load").expect("kv_load");
    }
}

/// The SHA-256 (hex) of each named file of `target/canister/` (built by scripts/build.sh), by
/// name: recorded beside figures a test keeps without remeasuring them (the 10x columns), which it
/// accepts only while these are the files it would measure.
pub fn wasm_hashes(names: &[&str]) -> std::collections::BTreeMap<String, String> {
    use sha2::Digest;
    names
        .iter()
        .map(|name| {
            let path = format!("{}/../target/canister/{name}", env!("CARGO_MANIFEST_DIR"));
            let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e} (run scripts/build.sh)"));
            (name.to_string(), hex::encode(sha2::Sha256::digest(bytes)))
        })
        .collect()
}

/// Fails unless `recorded`, the hashes a results file keeps beside figures this run did not
/// measure (`part`, for example `10x`), are `current` ([`wasm_hashes`]): such figures stand only
/// while they describe the wasm files that are built. `regenerate` says how to remeasure them.
pub fn assert_measured_on(
    results: &str,
    part: &str,
    recorded: Option<&std::collections::BTreeMap<String, String>>,
    current: &std::collections::BTreeMap<String, String>,
    regenerate: &str,
) {
    assert_eq!(
        recorded,
        Some(current),
        "{results}'s {part} figures were measured on other wasm files than target/canister/'s: regenerate them ({regenerate})"
    );
}

/// What produces every measuring test's figures besides the wasm files and the test's own
/// files: the runner (its replica rules, metering, cost models and page accounting), the grid
/// (cells, sizes, seeds, prices), the native library (the data generators), the locked
/// dependencies and the toolchain. Paths from the repository's root; a folder stands for every
/// file under it.
pub const PRODUCERS: [&str; 8] = [
    "Cargo.toml",
    "Cargo.lock",
    "rust-toolchain.toml",
    "runner/Cargo.toml",
    "runner/src",
    "runner/tests/common",
    "grid",
    "src",
];

/// The SHA-256 (hex) of [`PRODUCERS`] and `own` (the test's files, and the report module that
/// holds its results type): every file's path and bytes, in path order. Recorded beside the
/// figures of a measuring test, which CI does not measure again while it is the same
/// ([`measures`]).
pub fn sources(own: &[&str]) -> String {
    use sha2::Digest;
    fn walk(root: &std::path::Path, rel: &str, files: &mut Vec<String>) {
        let path = root.join(rel);
        if path.is_dir() {
            for entry in std::fs::read_dir(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())) {
                let name = entry.unwrap().file_name().into_string().expect("a UTF-8 file name");
                walk(root, &format!("{rel}/{name}"), files);
            }
        } else {
            assert!(path.is_file(), "{} is neither a file nor a folder", path.display());
            files.push(rel.to_string());
        }
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for rel in PRODUCERS.iter().chain(own) {
        walk(&root, rel, &mut files);
    }
    files.sort();
    files.dedup();
    let mut h = sha2::Sha256::new();
    for rel in &files {
        let bytes = std::fs::read(root.join(rel)).unwrap();
        h.update(rel.as_bytes());
        h.update([0]);
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(&bytes);
    }
    hex::encode(h.finalize())
}

/// The switch that makes a measuring test measure again and compare exactly, without writing.
pub const REMEASURE: &str = "STABLEBENCH_REMEASURE";

/// Whether a measuring test measures: when `regenerate_var` (its regenerate switch) or
/// [`REMEASURE`] is set. Otherwise its committed figures stand only if they were measured on
/// the files this run would measure: the wasm files (`recorded_wasm` against `wasm`) and the
/// sources that produce them (`recorded_sources` against [`sources`]); else the test fails,
/// saying how to measure them again (`regenerate`). Standing figures still go through every
/// check that reads them (invariants, the generated files).
pub fn measures(
    results: &str,
    regenerate_var: &str,
    regenerate: &str,
    recorded_wasm: Option<&std::collections::BTreeMap<String, String>>,
    wasm: &std::collections::BTreeMap<String, String>,
    recorded_sources: &str,
    sources: &str,
) -> bool {
    if std::env::var_os(regenerate_var).is_some() || std::env::var_os(REMEASURE).is_some() {
        return true;
    }
    assert_measured_on(results, "measured", recorded_wasm, wasm, regenerate);
    assert_eq!(
        recorded_sources, sources,
        "{results}'s figures were measured with other sources than this checkout's (the runner, the grid, the \
         generators, the test, the lock file or the toolchain changed): measure them again ({regenerate}), or \
         check them without writing ({REMEASURE}=1)"
    );
    false
}

/// `target/canister/stablebench_bench.wasm`: the benchmark canister (built by
/// `scripts/build.sh bench`), instrumented and compiled.
pub const BENCH_WASM: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../target/canister/stablebench_bench.wasm");

/// [`BENCH_WASM`], loaded once per test binary.
pub fn bench_code() -> Arc<Code> {
    static CODE: OnceLock<Arc<Code>> = OnceLock::new();
    CODE.get_or_init(|| {
        assert!(
            std::path::Path::new(BENCH_WASM).exists(),
            "{BENCH_WASM} is missing: run scripts/build.sh bench first (scripts/test.sh does)"
        );
        Code::from_file(BENCH_WASM.as_ref(), Metering::On).expect("the benchmark wasm loads")
    })
    .clone()
}

/// The Candid encoding of no arguments.
pub fn unit() -> Vec<u8> {
    candid::encode_args(()).unwrap()
}

/// The reply of `out`, decoded; panics, naming `what`, if it was rejected or does not decode.
pub fn decode<R: CandidType + DeserializeOwned>(out: Outcome, what: &str) -> R {
    let reply = out.result.unwrap_or_else(|e| panic!("{what} was rejected: {e}"));
    candid::decode_one(&reply).unwrap_or_else(|e| panic!("{what}: {e}"))
}

/// `kv_load` of the whole trie data set of `keys` keys into `kb`, in budgeted calls.
pub fn kv_load_all(c: &mut Canister, kb: stablebench_canister::KvBackend, keys: u64) {
    let mut offset = 0;
    loop {
        let arg = candid::encode_args((kb, keys, offset, keys - offset, None::<u64>)).unwrap();
        let out = c.update("kv_load", &arg, default_controller());
        let b: stablebench_canister::Batch = decode::<Result<_, Error>>(out, "kv_load").expect("kv_load");
        offset = b.next_offset;
        if b.complete {
            return;
        }
    }
}

/// `query_sql` as a controller.
pub fn sql(c: &mut Canister, text: &str) -> Result<Rows, Error> {
    decode(c.query("query_sql", &candid::encode_one(text).unwrap(), default_controller()), "query_sql")
}

/// `PRAGMA integrity_check` through the read-only endpoint.
pub fn integrity_ok(c: &mut Canister) -> bool {
    sql(c, "SELECT * FROM pragma_integrity_check").expect("integrity_check").rows
        == vec![vec![Value::Text("ok".into())]]
}

/// Why a mainnet figure is larger than canbench's, as the per-call, endpoint and example tables
/// say it (followed by what each table adds).
pub const MAINNET_CHARGES: &str =
    "Mainnet charges 80,000 instructions for each 64 KiB Wasm page of heap or stable memory a \
     message first accesses and 80,000 more for each page it first writes (a query: accessed \
     pages only), the IC's memory tracker since August 2026 (`docs/mainnet.md`); canbench 0.7's \
     PocketIC predates it";

/// A call's Wasm pages as a table cell: accessed / written, heap and stable together.
pub fn pages_text(p: &stablebench_runner::host::PageCounts) -> String {
    format!("{} / {}", p.accessed(), p.written())
}

/// The committed results file at `path`, or `T::default()` if there is none yet (the first
/// regeneration writes it); a file that does not parse fails the test.
pub fn committed_or_default<T: DeserializeOwned + Default>(path: &str) -> T {
    std::fs::read_to_string(path)
        .ok()
        .map_or_else(T::default, |s| serde_yaml::from_str(&s).unwrap_or_else(|e| panic!("{path} does not parse: {e}")))
}

/// The median work of some calls (instructions, pages): their instructions, and under the `ic`
/// cost model (`ic`) without the memory tracker's charges for the pages (`update`: writes charged
/// too). What a floor must not exceed of its call.
pub fn median_work(
    calls: impl Iterator<Item = (u64, stablebench_runner::host::PageCounts)>,
    ic: bool,
    update: bool,
) -> u64 {
    let mut w: Vec<u64> = calls.map(|(n, p)| if ic { n - p.fee(update) } else { n }).collect();
    w.sort_unstable();
    w[w.len() / 2]
}

/// `method(offset, count)` in budgeted calls until the table holds `total` rows.
fn load_rows(c: &mut Canister, method: &str, total: u64) {
    let mut next = 0;
    while next < total {
        let out = c.update(method, &candid::encode_args((next, total - next)).unwrap(), default_controller());
        let b: Result<stablebench_canister::Batch, Error> = decode(out, method);
        next = b.unwrap_or_else(|e| panic!("{method}: {e:?}")).next_offset;
    }
}

/// The production canister `code` installed with `arg` under `opts`, with the users/orders
/// schema, both indexes (first, so the loads maintain them) and `sizes` loaded.
pub fn users_orders_loaded(
    code: Arc<Code>,
    arg: &[u8],
    opts: stablebench_runner::canister::Options,
    sizes: stablebench_grid::users_orders::Sizes,
) -> Canister {
    let (mut c, _) = Canister::install(code, arg, opts).expect("installs");
    let out = c.update("create_schema", &unit(), default_controller());
    decode::<Result<stablebench_canister::Cost, Error>>(out, "create_schema").expect("create_schema");
    let out = c.update("create_indexes", &candid::encode_one(None::<u64>).unwrap(), default_controller());
    let p: Result<stablebench_canister::IndexProgress, Error> = decode(out, "create_indexes");
    assert!(p.expect("create_indexes").complete);
    load_rows(&mut c, "add_users", sizes.users);
    load_rows(&mut c, "add_orders", sizes.orders);
    c
}
