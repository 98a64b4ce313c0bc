//! # stablebench grid
//!
//! What the benchmark suite is, as data, declared once and shared by every crate that needs it:
//! the [`cells`] of the benchmark grid (workload × operation × size × backend × settings), the
//! SQLite pragma [`profiles`] (the settings axis), the users/orders steps
//! ([`users_orders`]), and the IC's limits, prices and memory ids ([`ic`]), each with its public
//! source. No dependencies, so the canister's build script can generate the canbench functions
//! from it.
#![warn(missing_docs)]

pub mod cells;
pub mod ic;
pub mod profiles;
pub mod users_orders;

/// Query keys read per iteration of the trie read benchmark (Substrate's `SAMPLE_SIZE`).
pub const TRIE_QUERY_KEYS: u64 = 100;
