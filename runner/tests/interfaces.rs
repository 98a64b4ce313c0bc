//! Each canister's `.did` file describes exactly the service its wasm's code generates: the
//! interface `ic_cdk::export_candid!` builds from the Rust types (`get_candid_pointer`, what
//! dfx's candid-extractor reads), run offline on the built wasm, against the file the build
//! embeds as `candid:service`. The production interfaces are also checked natively
//! (`did_file_matches_the_code`, `did_file`); the benchmark canister's is checked only here, on
//! the wasm that `scripts/build.sh bench` builds, without a second native build of the canister.

use stablebench_runner::canister::Code;
use stablebench_runner::instrument::Metering;

fn wasm(name: &str) -> String {
    format!("{}/../target/canister/{name}.wasm", env!("CARGO_MANIFEST_DIR"))
}

fn did(path: &str) -> String {
    let path = format!("{}/../{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The interface `name`.wasm's code generates must equal the `.did` file `path`, and be what the
/// build embedded.
fn matches(name: &str, path: &str) {
    let file = wasm(name);
    assert!(std::path::Path::new(&file).exists(), "{file} is missing: run scripts/build.sh all first");
    let code = Code::from_file(file.as_ref(), Metering::On).expect("the wasm loads");
    let generated = code.generated_candid().expect("get_candid_pointer runs").expect("the wasm exports its interface");
    let text = did(path);
    candid_parser::utils::service_equal(
        candid_parser::utils::CandidSource::Text(&text),
        candid_parser::utils::CandidSource::Text(&generated),
    )
    .unwrap_or_else(|e| {
        panic!("{path} differs from the interface {name}.wasm generates: {e}\n--- generated:\n{generated}")
    });
    let embedded = code.candid_service().expect("the build embeds candid:service");
    assert_eq!(embedded, text, "{name}.wasm embeds another interface than {path}");
}

#[test]
fn the_benchmark_canisters_did_is_what_its_wasm_generates() {
    matches("stablebench_bench", "canister/stablebench_bench.did");
}

#[test]
fn the_production_canisters_did_is_what_its_wasm_generates() {
    matches("stablebench", "canister/stablebench.did");
}

/// (Its benchmark wasm generates canbench's `__canbench__*` queries too, which its `.did`,
/// `vfs/stablebench_vfs_bench.did`, does not list: `scripts/build.sh` checks that wasm's methods
/// against the file with those hidden, and the crate's `did_file` test with `canbench` checks the
/// file against the code natively.)
#[test]
fn the_ic_sqlite_vfs_canisters_did_is_what_its_wasm_generates() {
    matches("stablebench_vfs", "vfs/stablebench_vfs.did");
}

#[test]
fn a_wasm_without_an_interface_export_says_so() {
    let code = Code::new(&wat::parse_str(r#"(module (memory 1) (func (export "f")))"#).unwrap(), Metering::On).unwrap();
    assert_eq!(code.generated_candid().unwrap(), None);
}
