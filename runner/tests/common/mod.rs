//! Shared by the end-to-end tests: the production wasm, loaded once per test binary.

use std::sync::{Arc, OnceLock};

use stablebench_runner::canister::Code;
use stablebench_runner::instrument::Metering;

/// `target/canister/stablebench.wasm` (built by scripts/build.sh), instrumented and compiled.
pub fn code() -> Arc<Code> {
    static CODE: OnceLock<Arc<Code>> = OnceLock::new();
    CODE.get_or_init(|| {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../target/canister/stablebench.wasm");
        assert!(std::path::Path::new(path).exists(), "{path} is missing: run scripts/build.sh first (scripts/test.sh does)");
        Code::from_file(path.as_ref(), Metering::On).expect("the canister wasm loads")
    })
    .clone()
}
