//! SQLite's C API as rusqlite expects it from `sqlite-wasm-rs` on wasm32-unknown-unknown: the
//! declarations only (see Cargo.toml). No SQLite is compiled here and nothing is imported from
//! JavaScript; the canister that uses it links a SQLite library itself.
#![no_std]
#![allow(clippy::missing_safety_doc)]
#![allow(non_upper_case_globals)]
#![allow(non_camel_case_types)]
#![allow(non_snake_case)]

#[rustfmt::skip]
#[allow(clippy::type_complexity)]
mod bindings;

pub use bindings::*;
