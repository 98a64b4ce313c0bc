//! Canisters run whole through the runner, in one test binary (each runner test binary links
//! wasmtime in release, about half a minute of CI's time apiece):
//!
//! - `load`: `stablebench-runner load` fills the production canister through its Candid API, and
//!   an interrupted load continues from the saved canister;
//! - `vfs`: the ic-sqlite-vfs canister's key-value API, across an upgrade, with its refusals;
//! - `profile`: the profiler's per-function costs against hand-computed ones;
//! - `interfaces`: each canister's `.did` is what its wasm generates;
//! - `live`: the live benchmark API against canbench's figures for the same cells;
//! - `heap_tracking`: the runner's map of written heap pages, checked after every execution.

#[path = "../common/mod.rs"]
mod common;
mod heap_tracking;
mod interfaces;
mod live;
mod load;
mod profile;
mod vfs;
