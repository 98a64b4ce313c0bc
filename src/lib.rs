//! # stablebench workload
//!
//! The users/orders workload of the ic-rusqlite reference benchmark
//! (wasm-forge/ic-rusqlite, `benchmarks/users-orders`; see docs/sources.md) as a plain Rust library over a
//! [`rusqlite::Connection`]: the [`schema`], ordered [`pragma`] profiles, deterministic
//! [`generate`]d rows, the [`workload`] statements, resumable [`jobs`] that stay under a message's
//! instruction limit, a read-only [`query`] runner, the [`oracle`] that predicts every result, and
//! the nine [`bench`]marks. Further workloads live in their own modules: key-value storage
//! ([`kv`]) and Chia's coin store ([`chia`]).
//!
//! It has no IC dependency: the canister links it against ic-rusqlite's SQLite over stable
//! memory, and the tests run it against native SQLite (rusqlite `bundled`).
#![warn(missing_docs)]

pub mod bench;
pub mod chia;
pub mod counts;
mod error;
pub mod generate;
pub mod jobs;
pub mod kv;
pub mod oracle;
pub mod pragma;
pub mod query;
pub mod schema;
pub mod shadow;
pub mod sysrepo;
pub mod tx;
pub mod workload;

pub use error::{Error, Result};

/// Tells long loops when to stop: the canister backs it with the IC performance counter so that
/// a message stops with an answer instead of trapping at the instruction limit.
pub trait Meter {
    /// True once the budget is used up. Called every few hundred rows, not per row.
    fn exhausted(&self) -> bool;
    /// The budget, for error messages.
    fn budget(&self) -> u64;
    /// Instructions used so far, reported in a job's reply (the canister reads the IC's
    /// performance counter; meters without a counter report 0).
    fn used(&self) -> u64 {
        0
    }
    /// Instructions left before the budget is used up, to size work that cannot be stopped
    /// midway before starting it; `None` for meters without an instruction counter.
    fn remaining(&self) -> Option<u64> {
        None
    }
}

/// A [`Meter`] that never runs out (benchmarks, native tests).
#[derive(Clone, Copy, Debug, Default)]
pub struct NoLimit;

impl Meter for NoLimit {
    fn exhausted(&self) -> bool {
        false
    }
    fn budget(&self) -> u64 {
        u64::MAX
    }
}
