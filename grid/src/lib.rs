//! # stablebench grid
//!
//! What the benchmark suite is, as data, declared once and shared by every crate that needs it:
//! the [`cells`] of the benchmark grid (workload × operation × size × backend × settings), the
//! SQLite pragma [`profiles`] (the settings axis), the users/orders steps
//! ([`users_orders`]), and the IC's limits, prices and memory ids ([`ic`]), each with its public
//! source. No dependencies by default, so the canister's build script can generate the canbench
//! functions from it; feature `candid` adds the types of the benchmark canister's live API
//! ([`live`]), which the canister and the runner share.
#![warn(missing_docs)]

pub mod api;
pub mod cells;
pub mod chia;
pub mod ic;
#[cfg(feature = "candid")]
pub mod live;
pub mod profiles;
#[cfg(feature = "candid")]
pub mod reply;
pub mod sysrepo;
pub mod users_orders;

/// Query keys read per iteration of the trie read benchmark (Substrate's `SAMPLE_SIZE`).
pub const TRIE_QUERY_KEYS: u64 = 100;

/// Iterations of a trie read or write benchmark (Substrate's node-bench runs 50).
pub const TRIE_ITERATIONS: usize = 50;

/// The sorted iterations Substrate's `w_avg` averages: skip 10, take 30 (samples 11-40).
pub const TRIE_TRIMMED: std::ops::Range<usize> = 10..40;

/// The seed of every key-value data set (the trie data set, `kv_load`, rippled's NodeStore
/// factories, whose `seedValue` is 50 too): recorded here once.
pub const KV_SEED: u64 = 50;

/// `1,883,090,070`: instructions as the reports and the runner's tables print them.
pub fn grouped(v: u64) -> String {
    let s = v.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Names of the canbench scopes the key-value cells record (the canister writes them, the
/// reports read them).
pub mod scopes {
    /// Trie cells: the sum of the middle 30 of 50 sorted iterations (`calls` = 30).
    pub const W_AVG: &str = "w_avg";
    /// Trie cells: loading the data set before measuring (not part of `total`).
    pub const SETUP: &str = "setup";
    /// The heap map's upgrade: writing it to stable memory (`pre_upgrade`).
    pub const SAVE: &str = "save";
    /// The heap map's upgrade: reading it back (`post_upgrade`).
    pub const LOAD: &str = "load";
}
