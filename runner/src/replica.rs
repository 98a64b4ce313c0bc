//! Every rule of the IC replica (and of PocketIC, where canbench runs) that the runner
//! reproduces, as named constants, each with the public source it comes from. IC limits and
//! prices shared with the library and the canister live in `stablebench_grid::ic` and are
//! re-exported here; docs/sources.md lists the same sources for readers.
//!
//! "ic:" is the GitHub repository dfinity/ic. Revisions read: `linker.rs` @0048d8c4f8,
//! `system_api_complexity.rs` (module `overhead`, the revision whose `linker.rs` that is),
//! `subnet_config.rs` @002d5530ae, `instrumentation.rs` @002d5530ae,
//! `system_api_replacements.rs` @0c3226cf.

pub use stablebench_grid::ic::{
    DEFAULT_WASM_MEMORY_LIMIT_BYTES, INSTALL_INSTRUCTION_LIMIT, MAX_QUERY_REPLY_BYTES, MAX_UPDATE_REPLY_BYTES,
    MAX_WASM32_HEAP_BYTES, QUERY_INSTRUCTION_LIMIT, UPDATE_INSTRUCTION_LIMIT, WASM_PAGE_BYTES,
};

/// The fixed part of each system call's fee, in instructions, charged before the call does
/// anything (ic:`rs/embedders/src/wasmtime_embedder/system_api_complexity.rs`, module
/// `overhead`; charged by `charge_for_cpu` / `charge_for_cpu_and_mem` in
/// ic:`rs/embedders/src/wasmtime_embedder/linker.rs`). Calls that copy bytes add 1 instruction
/// per byte (`get_num_instructions_from_bytes`), or [`TRANSMISSION_FACTOR`] per byte for bytes
/// that leave the canister.
pub mod fee {
    /// Most system calls: `MSG_ARG_DATA_SIZE`, `MSG_CALLER_COPY`, `TIME`, `CANISTER_SELF_SIZE`,
    /// `GLOBAL_TIMER_SET`, `ENV_VAR_*`, `ROOT_KEY_*`, `COST_CALL`, `CYCLES_BURN128`, ... = 500.
    pub const SYSTEM_CALL: u64 = 500;
    /// `IS_CONTROLLER`.
    pub const IS_CONTROLLER: u64 = 1_000;
    /// `PERFORMANCE_COUNTER`.
    pub const PERFORMANCE_COUNTER: u64 = 200;
    /// `DEBUG_PRINT`.
    pub const DEBUG_PRINT: u64 = 100;
    /// `CALL_NEW`.
    pub const CALL_NEW: u64 = 1_500;
    /// `CALL_PERFORM`.
    pub const CALL_PERFORM: u64 = 5_000;
    /// `COST_HTTP_REQUEST_V2`.
    pub const COST_HTTP_REQUEST_V2: u64 = 10_000;
    /// `STABLE64_READ`, `STABLE64_WRITE` and the 32-bit ones (native stable memory,
    /// `overhead_native`), plus 1 per byte.
    pub const STABLE_ACCESS: u64 = 20;
    /// `STABLE_GROW` of `overhead_native` (both `stable_grow` and `stable64_grow`).
    pub const STABLE_GROW: u64 = 100;
}

/// Multiplier for bytes that leave the canister (replies, rejects, call arguments, logs):
/// `BYTE_TRANSMISSION_COST_FACTOR` in ic:`rs/embedders/src/wasmtime_embedder/linker.rs`.
pub const TRANSMISSION_FACTOR: u64 = 50;

/// 4 KiB: the OS page, the unit of the dirty-page fee and of the page budgets.
pub const OS_PAGE: u64 = 4096;

/// Fee per 4 KiB page of stable memory a message writes for the first time, before the memory
/// tracker: `DEFAULT_DIRTY_PAGE_OVERHEAD` (application subnets), ic:`rs/config/src/subnet_config.rs`
/// (`stablebench_grid::ic::page_fees`, declared once for the runner and the reports).
pub const DIRTY_PAGE_FEE: u64 = stablebench_grid::ic::page_fees::CANBENCH_STABLE_WRITE;

/// Which replica's charging the runner follows (`--cost-model`).
///
/// - `Canbench`: the replica canbench 0.7's PocketIC 13 runs, which predates the deterministic
///   memory tracker: no fee for the heap or stable pages a message touches, except
///   [`DIRTY_PAGE_FEE`] for each 4 KiB stable page it writes first. canbench reports these
///   counts, and `canbench_results.yml` holds them.
/// - `Ic`: mainnet since the deterministic memory tracker (August 2026, [`memory_tracker`]):
///   every 64 KiB Wasm page of heap or stable memory a message accesses costs
///   [`memory_tracker::ACCESS_FEE`], and each one it writes [`memory_tracker::WRITE_FEE`] more,
///   charged in-band (so `performance_counter` and the limits see them); no stable write fee.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum CostModel {
    /// canbench 0.7 on PocketIC 13 (the default).
    #[default]
    Canbench,
    /// The IC mainnet since the deterministic memory tracker.
    Ic,
}

impl CostModel {
    /// The name used in flags, files and tables.
    pub fn name(self) -> &'static str {
        match self {
            CostModel::Canbench => "canbench",
            CostModel::Ic => "ic",
        }
    }
}

/// The deterministic memory tracker (DMT), what mainnet charges for the memory a message
/// touches since August 2026. Read 2026-11-26 (docs/sources.md, "The memory tracker", has the
/// reading in full, with what is settled by code and what only by pull-request text):
///
/// - dfinity/ic #10789 "feat(Core): Switch to deterministic memory tracker" (merged 2026-07-16,
///   squash of #10536): the tracker charges {heap, stable} × {read, write} uniformly, 5,000
///   instructions per 4 KiB OS page; the system-API replacements of stable memory no longer
///   decrement the counter for dirty pages (their byte map still enforces the page limits).
///   #9565 switched the charging on; #11180 (merged 2026-08-24) removed the feature flag.
///   dfinity/dre `release-index.yaml`: in base from `rc--2026-07-31_04-23`, base only from
///   `rc--2026-08-13_03-55`.
/// - ic:`rs/memory_tracker/src/deterministic.rs` (@0277d7c1d, @fa0f0e9d6f): a fault maps the whole
///   64 KiB Wasm page around the faulting OS page; accessed and dirty pages are counted as Wasm
///   pages × 16 OS pages. A plain query (replicated or not) and inspect_message track accessed
///   pages only (`modification_tracking` is `Ignore`, ic:`rs/embedders/src/wasmtime_embedder/
///   system_api.rs` @a3f79e4bcf).
/// - ic:`rs/embedders/src/wasmtime_embedder.rs` @a3f79e4bcf: the charge is subtracted from the
///   instruction-counter global by the SIGSEGV handler, during the execution (so
///   `ic0.performance_counter` includes it); heap and stable memory share the tracker; the old
///   after-the-call charge for dirty heap pages ("Charge for dirty wasm heap pages", 1,000 per
///   OS page, × 4 for Wasm64) is gone ("The DMT charges directly"), and with it the Wasm64
///   multiplier.
/// - #11344 (2026-08-27), the config's documented meaning: charged "once when the Wasm page is
///   first accessed and once more when it is first written to".
/// - `DIRTY_PAGE_COPY_OVERHEAD` (3,000 per OS page, ic:`rs/config/src/embedders.rs`) is added
///   only to the slice's accounting with DTS, past 1 GiB of dirty pages
///   (`max_dirty_pages_without_optimization`): not to a message's instructions, not modelled.
///
/// The fees are declared once in `stablebench_grid::ic::page_fees`, for the runner and the reports.
pub mod memory_tracker {
    pub use stablebench_grid::ic::page_fees::{OS_PAGES_PER_WASM_PAGE, PER_OS_PAGE};

    /// The fee for the first access to a Wasm page in an execution: 80,000.
    pub const ACCESS_FEE: u64 = stablebench_grid::ic::page_fees::ACCESS;
    /// The fee for the first write to a Wasm page in an execution, on top of its access fee
    /// (in the same fault if the write is the first access): 80,000.
    pub const WRITE_FEE: u64 = stablebench_grid::ic::page_fees::WRITE;
}

pub use stablebench_grid::ic::MAX_STABLE_BYTES;

/// Stable-memory page budgets per execution, in 4 KiB pages (dirty, accessed):
/// `STABLE_MEMORY_DIRTY_PAGE_LIMIT` / `STABLE_MEMORY_ACCESSED_PAGE_LIMIT` in
/// ic:`rs/config/src/embedders.rs`, fields `message`, `upgrade`, `query`.
pub mod page_budget {
    /// An update, a callback, a timer, and the module's `start` (2 GiB).
    pub const MESSAGE: (u64, u64) = (524_288, 524_288);
    /// `canister_init`, `pre_upgrade`, `post_upgrade` (8 GiB).
    pub const UPGRADE: (u64, u64) = (2_097_152, 2_097_152);
    /// A query (1 GiB).
    pub const QUERY: (u64, u64) = (262_144, 262_144);
}

/// The canister log a single execution writes into: a "delta" log of 4 KiB
/// (`CanisterLog::default_delta`, `DEFAULT_AGGREGATE_LOG_MEMORY_LIMIT` 4 KiB; ic:`rs/types/types`
/// `canister_log.rs`), new for every execution, so a print's fee depends only on what the
/// same execution printed before it.
pub mod log {
    /// Capacity of one execution's log, in bytes.
    pub const CAPACITY: u64 = 4096;
    /// Bytes a log record takes on top of its content: `size_of::<CanisterLogRecord>()`
    /// (idx u64, timestamp u64, content Vec = 8 + 8 + 24). Older replicas counted 16.
    pub const RECORD_OVERHEAD: u64 = 40;

    /// The logging part of the fee of `debug_print`/`trap` for a message of `len` bytes with
    /// `remaining` bytes left in the execution's log (`logging_charge_bytes` in
    /// ic:`rs/embedders/src/wasmtime_embedder/linker.rs`): 2 per byte up to the capacity (adding
    /// a record and dropping the oldest) + 50 per byte that still fits (sent to the replica).
    pub const fn charge_bytes(len: u64, remaining: u64) -> u64 {
        let allocated = if len < CAPACITY { len } else { CAPACITY };
        let transmitted = if len < remaining { len } else { remaining };
        2 * allocated + super::TRANSMISSION_FACTOR * transmitted
    }
}

pub use stablebench_grid::ic::scheduler;

/// Reject codes a callback sees (`ic0.msg_reject_code`; the interface specification, "Reject
/// codes").
pub mod reject_code {
    /// `SYS_TRANSIENT`.
    pub const SYS_TRANSIENT: i32 = 2;
    /// `DESTINATION_INVALID`: no such canister.
    pub const DESTINATION_INVALID: i32 = 3;
    /// `CANISTER_REJECT`: the callee called `msg_reject`.
    pub const CANISTER_REJECT: i32 = 4;
    /// `CANISTER_ERROR`: the callee trapped or has no such method.
    pub const CANISTER_ERROR: i32 = 5;
}

/// PocketIC, as canbench 0.7 drives it (canbench-0.7.0 `src/lib.rs`, `init_pocket_ic` and
/// `init_canister`; pocket-ic's `create_canister_with_settings`).
pub mod pocket_ic {
    /// canbench creates the canister with sender `None`: the anonymous principal, which
    /// PocketIC then makes the canister's only controller.
    pub fn bench_controller() -> candid::Principal {
        candid::Principal::anonymous()
    }
    /// canbench adds 1,000 T cycles (`add_cycles(canister_id, 1_000_000_000_000_000)`).
    pub const BENCH_CYCLES: u128 = 1_000_000_000_000_000;
    /// 2021-05-06T19:17:10Z, the time a new PocketIC instance starts at, in ns since 1970.
    pub const START_TIME_NS: u64 = 1_620_328_630_000_000_000;
    /// The id PocketIC gives the first canister created on its first application subnet.
    pub const FIRST_CANISTER_ID: &str = "lxzze-o7777-77777-aaaaa-cai";
    /// PocketIC's benchmarking subnet: every message limit raised to 99,999,999,999,999 except
    /// install (ic:`rs/pocket_ic_server/src/pocket_ic.rs`, `with_benchmarking_application_subnet`).
    pub const BENCH_MESSAGE_LIMIT: u64 = 99_999_999_999_999;
}

/// The IC mainnet's root public key (DER, 133 bytes), what `ic0.root_key_copy` returns on
/// mainnet (the NNS root key that agents verify certificates against; dfinity/agent-rs
/// `IC_ROOT_KEY`). PocketIC has its own key of the same size, so the fees are the same.
pub const MAINNET_ROOT_KEY_HEX: &str = "308182301d060d2b0601040182dc7c0503010201060c2b0601040182dc7c05030201036100814c0e6ec71fab583b08bd81373c255c3c371b2e84863c98a4f1e08b74235d14fb5d9c0cd546d9685f913a0c0b2cc5341583bf4b4392e467db96d65b9bb4cb717112f8472e0d5a4d14505ffd7484b01291091c5f87b98883463f98091a0baaae";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_key_is_a_133_byte_der_key() {
        let key = hex::decode(MAINNET_ROOT_KEY_HEX).unwrap();
        assert_eq!(key.len(), 133);
        assert_eq!(key[0], 0x30);
    }

    #[test]
    fn logging_charge_follows_the_room_left() {
        // 100 bytes in an empty log: 2 × 100 + 50 × 100.
        assert_eq!(log::charge_bytes(100, log::CAPACITY), 5_200);
        // Nothing left: only the 2 per byte.
        assert_eq!(log::charge_bytes(100, 0), 200);
        // Longer than the log: 2 × capacity + 50 × what fits.
        assert_eq!(log::charge_bytes(10_000, 1_000), 2 * 4096 + 50 * 1_000);
    }
}
