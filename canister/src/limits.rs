//! The IC's per-message limits the endpoints stay under, so that a large request gets an answer
//! (partial progress or a clear error) instead of a trap. Sources: dfinity/ic
//! `rs/config/src/subnet_config.rs` (instruction limits) and the IC interface specification
//! (reply sizes); docs/sources.md lists them.

use stablebench::Meter;

pub use stablebench_grid::ic::{QUERY_INSTRUCTION_LIMIT, UPDATE_INSTRUCTION_LIMIT};

/// Inserts stop at this many instructions: the rest of the 40 B is for the COMMIT, which writes
/// every page the batch dirtied to stable memory (1 instruction per byte, and the page fees of
/// `stablebench_grid::ic::page_fees`: on mainnet each 64 KiB Wasm page of heap or stable memory
/// the commit touches for the first time in the message), and for the reply. Loading 10 M orders
/// in calls at this budget completes under both cost models (`runner/tests/endpoints.rs` with
/// `STABLEBENCH_ENDPOINTS_10X=1`).
pub const UPDATE_BUDGET: u64 = 30_000_000_000;

/// The largest budget a caller may ask an update for: 4 B below the limit, for the COMMIT and
/// the reply.
pub const MAX_UPDATE_BUDGET: u64 = 36_000_000_000;

/// The smallest budget a caller may ask for (smaller ones could not insert a single batch of
/// rows between two meter readings).
pub const MIN_BUDGET: u64 = 10_000_000;

/// Reads stop at this many instructions: the rest of the 5 B is for encoding and sending the
/// reply (msg_reply_data_append costs 50 instructions per byte: 100 M for 2 MB).
pub const QUERY_BUDGET: u64 = 4_000_000_000;

/// A reply may not exceed 2 MiB when the call is replicated (3 MiB for a non-replicated query).
/// Rows stop below the smaller one, leaving room for the Candid header and column names.
pub const MAX_REPLY_BYTES: u64 = stablebench_grid::api::MAX_REPLY_BYTES;

// The budgets must leave room below the limits they guard.
const _: () = assert!(
    UPDATE_BUDGET <= MAX_UPDATE_BUDGET
        && MAX_UPDATE_BUDGET < UPDATE_INSTRUCTION_LIMIT
        && QUERY_BUDGET < QUERY_INSTRUCTION_LIMIT
);

/// A [`Meter`] over the IC performance counter (instructions executed in this message).
#[derive(Clone, Copy, Debug)]
pub struct InstructionBudget(pub u64);

impl Meter for InstructionBudget {
    fn exhausted(&self) -> bool {
        instructions() >= self.0
    }
    fn budget(&self) -> u64 {
        self.0
    }
    fn used(&self) -> u64 {
        instructions()
    }
    fn remaining(&self) -> Option<u64> {
        Some(self.0.saturating_sub(instructions()))
    }
}

/// Instructions executed so far in this message (0 natively).
pub fn instructions() -> u64 {
    #[cfg(target_arch = "wasm32")]
    {
        ic_cdk::api::performance_counter(0)
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        0
    }
}
