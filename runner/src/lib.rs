//! # stablebench runner: offline canbench
//!
//! Runs an Internet Computer canister wasm on wasmtime with the replica's instruction
//! accounting: the wasm is rewritten as the replica rewrites it ([`instrument`]), the system API
//! (`ic0.*`) is implemented with the replica's fees ([`host`]), and messages follow the IC's
//! semantics: install, updates whose changes are discarded on trap, queries whose changes are
//! always discarded, upgrades that keep stable memory ([`canister`]).
#![warn(missing_docs)]

pub mod canbench;
pub mod candid_text;
pub mod canister;
#[cfg(unix)]
pub mod faults;
pub mod host;
pub mod instrument;
pub mod live;
pub mod load;
pub mod network;
pub mod profile;
pub mod regions;
pub mod replica;
#[cfg(unix)]
pub mod shared;
pub mod suite;
pub mod target;
