//! The production canister and hand-written ones end to end, in one test binary (each runner test
//! binary links wasmtime in release, about half a minute of CI's time apiece). `scripts/test.sh`
//! runs this binary with `STABLEBENCH_RUNNER_CHECK_HEAP=1`: the whole heap checked against its
//! committed image after every execution.
//!
//! - `canister_e2e`: the production canister's endpoints, refusals, upgrades and limits;
//! - `system_api`: the system API beyond what stablebench's canister uses, on hand-written wat;
//! - `reliability`: loads, faults and limits of the production canister at scale.

mod canister_e2e;
#[path = "../common/mod.rs"]
mod common;
mod reliability;
mod system_api;
