//! The IC's limits and prices that benchmarks and endpoints are checked against, and the stable
//! memory ids this project uses: declared once, each with its public source (docs/sources.md has
//! the list with revisions).

/// Instruction limit of an update message on an application subnet: dfinity/ic
/// `rs/config/src/subnet_config.rs`, `MAX_INSTRUCTIONS_PER_MESSAGE`.
pub const UPDATE_INSTRUCTION_LIMIT: u64 = 40_000_000_000;

/// Instruction limit of a query: dfinity/ic `rs/config/src/subnet_config.rs`,
/// `MAX_INSTRUCTIONS_PER_QUERY_MESSAGE`.
pub const QUERY_INSTRUCTION_LIMIT: u64 = 5_000_000_000;

/// Instruction limit of an install or upgrade (`canister_init`, or `pre_upgrade` and
/// `post_upgrade` together): dfinity/ic `rs/config/src/subnet_config.rs`,
/// `MAX_INSTRUCTIONS_PER_INSTALL_CODE`.
pub const INSTALL_INSTRUCTION_LIMIT: u64 = 300_000_000_000;

/// Largest reply of a replicated call (an update): 2 MiB. `ic0.msg_reply_data_append` traps past
/// it (dfinity/ic `rs/embedders/src/wasmtime_embedder/system_api`, the reply-size check).
pub const MAX_UPDATE_REPLY_BYTES: u64 = 2 << 20;

/// Largest reply of a non-replicated query: 3 MiB (same check, query limit).
pub const MAX_QUERY_REPLY_BYTES: u64 = 3 << 20;

/// The default `wasm_memory_limit` of a canister, 3 GiB: defined (with its source) in the
/// `stablebench-pragmas` crate, whose page-cache bound users' canisters apply to it.
pub use stablebench_pragmas::DEFAULT_WASM_MEMORY_LIMIT_BYTES;

/// One wasm page (heap and stable memory grow by it; canbench reports growth in these pages).
pub const WASM_PAGE_BYTES: u64 = 65_536;

/// The largest heap of a wasm32 canister: 4 GiB, all of a 32-bit address space (65,536 wasm
/// pages; `memory.grow` past it returns -1). dfinity/ic `rs/config/src/embedders.rs`,
/// `MAX_WASM_MEMORY_IN_BYTES`.
pub const MAX_WASM32_HEAP_BYTES: u64 = 4 * 1024 * 1024 * 1024;

/// Largest payload of an inter-canister request or response: 2 MiB (dfinity/ic
/// `rs/types/types/src/messages.rs`, `MAX_INTER_CANISTER_PAYLOAD_IN_BYTES`).
pub const MAX_INTER_CANISTER_PAYLOAD_BYTES: u64 = 2 << 20;

/// Largest stable memory: 500 GiB (`max_stable_memory_size`, ic:`rs/config/src/embedders.rs`).
pub const MAX_STABLE_BYTES: u64 = 500 * (1 << 30);

/// The most a canister's stable memory holds through one ic-stable-structures `MemoryManager`
/// (as this project's canisters and ic-rusqlite use it): 32,768 buckets of 128 Wasm pages, 256
/// GiB (ic-stable-structures 0.7, `src/memory_manager.rs`, `MAX_NUM_BUCKETS` and
/// `BUCKET_SIZE_IN_PAGES`; read 2026-11-28), under the IC's [`MAX_STABLE_BYTES`].
pub const MEMORY_MANAGER_MAX_BYTES: u64 = 32_768 * 128 * WASM_PAGE_BYTES;

/// Ingress messages one block of a subnet takes at most: the subnet record's
/// `max_ingress_messages_per_block`, a registry setting: 1,000 for an application subnet in
/// dfinity/sns-testing's `change_subnet_params.sh` ("Set max-ingress-messages-per-block to 1000
/// for APP subnet") and in dfinity/ic's test subnet records (read 2026-11-28). Mainnet's value is
/// each subnet's registry record's, not read here.
pub const INGRESS_MESSAGES_PER_BLOCK: u64 = 1_000;

/// The scheduler's limits on application subnets that decide how many rounds a message takes
/// (read 2026-11-28 in ic:`rs/config/src/subnet_config.rs` at commit
/// d9202bc7f6d16b2777d4e092ee1b7ad5899aae2b, `SchedulerConfig::application_subnet`, and
/// ic:`rs/config/src/execution_environment.rs`); the runner's network applies them.
pub mod scheduler {
    /// `MAX_INSTRUCTIONS_PER_ROUND`: what one scheduler thread executes in a round, 4 B ("the
    /// longest possible round of 4B instructions or 2 seconds").
    pub const MAX_INSTRUCTIONS_PER_ROUND: u64 = 4_000_000_000;
    /// `MAX_INSTRUCTIONS_PER_SLICE`: a longer message pauses after each 2 B and resumes in the
    /// next round (deterministic time slicing).
    pub const MAX_INSTRUCTIONS_PER_SLICE: u64 = 2_000_000_000;
    /// `NUMBER_OF_EXECUTION_THREADS` (`scheduler_cores`): canisters executed in parallel, each
    /// on one thread for the round.
    pub const SCHEDULER_CORES: u64 = 4;
}

/// What a message pays, in instructions, for the memory it touches, under each replica the
/// suite prices against (docs/sources.md, "The memory tracker", has the reading in full; the
/// offline runner's `replica` module applies these).
pub mod page_fees {
    /// canbench 0.7's PocketIC 13, whose replica predates the memory tracker: per 4 KiB page of
    /// stable memory a message writes for the first time; nothing for the heap, nothing for
    /// reads. `DEFAULT_DIRTY_PAGE_OVERHEAD` (application subnets), dfinity/ic
    /// `rs/config/src/subnet_config.rs`.
    pub const CANBENCH_STABLE_WRITE: u64 = 1_000;
    /// Mainnet since the deterministic memory tracker (dfinity/ic #10789, merged 2026-07-16; in
    /// every replica release from `rc--2026-08-13_03-55`, dfinity/dre `release-index.yaml`; read
    /// 2026-11-26): per 4 KiB OS page, the tracker's `page_overhead`.
    pub const PER_OS_PAGE: u64 = 5_000;
    /// OS pages per 64 KiB Wasm page, the unit the tracker maps and counts (dfinity/ic
    /// `rs/memory_tracker/src/deterministic.rs`).
    pub const OS_PAGES_PER_WASM_PAGE: u64 = 16;
    /// Mainnet: the first access (read or write) to a Wasm page of heap or stable memory in an
    /// execution, charged during it.
    pub const ACCESS: u64 = PER_OS_PAGE * OS_PAGES_PER_WASM_PAGE;
    /// Mainnet: the first write to a Wasm page in an execution, on top of its access fee (#11344:
    /// charged "once when the Wasm page is first accessed and once more when it is first written
    /// to"). A plain query tracks accessed pages only and pays no write fee.
    pub const WRITE: u64 = PER_OS_PAGE * OS_PAGES_PER_WASM_PAGE;
}

/// The 64 KiB Wasm pages of heap and of stable memory a stretch of execution accessed (read or
/// wrote) and wrote: what the IC's memory tracker charges ([`page_fees`]). The offline runner
/// counts them; `mainnet_results.yml` records them; the reports show them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "candid", derive(serde::Serialize, serde::Deserialize))]
pub struct PageCounts {
    /// Heap pages accessed.
    pub heap_accessed: u64,
    /// Heap pages written.
    pub heap_written: u64,
    /// Stable-memory pages accessed.
    pub stable_accessed: u64,
    /// Stable-memory pages written.
    pub stable_written: u64,
}

impl PageCounts {
    /// Pages accessed, heap and stable.
    pub const fn accessed(&self) -> u64 {
        self.heap_accessed + self.stable_accessed
    }

    /// Pages written, heap and stable.
    pub const fn written(&self) -> u64 {
        self.heap_written + self.stable_written
    }

    /// What the memory tracker charges for these pages in an update (every write charged), or
    /// in a query (`update` false: accessed pages only).
    pub const fn fee(&self, update: bool) -> u64 {
        self.accessed() * page_fees::ACCESS + if update { self.written() * page_fees::WRITE } else { 0 }
    }

    /// `self - earlier`, field by field (`earlier` counted in the same window, so no field is
    /// larger).
    pub const fn minus(&self, earlier: &PageCounts) -> PageCounts {
        PageCounts {
            heap_accessed: self.heap_accessed - earlier.heap_accessed,
            heap_written: self.heap_written - earlier.heap_written,
            stable_accessed: self.stable_accessed - earlier.stable_accessed,
            stable_written: self.stable_written - earlier.stable_written,
        }
    }

    /// `self + other`, field by field.
    pub const fn plus(&self, other: &PageCounts) -> PageCounts {
        PageCounts {
            heap_accessed: self.heap_accessed + other.heap_accessed,
            heap_written: self.heap_written + other.heap_written,
            stable_accessed: self.stable_accessed + other.stable_accessed,
            stable_written: self.stable_written + other.stable_written,
        }
    }
}

/// Prices in cycles, with their source and date, for an application subnet. The fees are set
/// for a 13-node subnet and scale linearly with the subnet's nodes (`scale_cost` in dfinity/ic
/// `rs/cycles_account_manager/src/lib.rs`: fee × nodes / 13), so a 34-node subnet pays 34/13 of
/// each. Queries are free for the caller (no fee is charged for a non-replicated query).
///
/// Source of every fee: dfinity/ic `rs/config/src/subnet_config.rs` at commit
/// 002d5530aeb1ef1ed362d7f9c3c5529b8ec1cafe, `CyclesAccountManagerConfig::application_subnet`.
pub mod prices {
    /// Cycles per update message execution (13 nodes): `update_message_execution_fee`
    /// (5 M since dfinity/ic PR #2291, 2024-10).
    pub const UPDATE_BASE_CYCLES: u64 = 5_000_000;
    /// Cycles per instruction of an update (wasm32, 13 nodes): `ten_update_instructions_execution_fee`
    /// = 10 cycles per 10 instructions (dfinity/ic PR #2308).
    pub const CYCLES_PER_INSTRUCTION: u64 = 1;
    /// Cycles per instruction of a wasm64 canister (13 nodes): `ten_update_instructions_execution_fee_wasm64`
    /// = `WASM64_INSTRUCTION_COST_OVERHEAD` (2) × the wasm32 fee. stablebench builds wasm32.
    pub const WASM64_CYCLES_PER_INSTRUCTION: u64 = 2;
    /// Cycles to receive an ingress message (a user's update call), per message (13 nodes):
    /// `ingress_message_reception_fee`.
    pub const INGRESS_MESSAGE_CYCLES: u64 = 1_200_000;
    /// Cycles to receive an ingress message, per byte of the message (13 nodes):
    /// `ingress_byte_reception_fee`.
    pub const INGRESS_BYTE_CYCLES: u64 = 2_000;
    /// Cycles per GiB of memory (heap, stable memory, the wasm module) per second (13 nodes):
    /// `gib_storage_per_second_fee`, "4 SDR per GiB per year"; the same in DFINITY's reference page
    /// of 2026-03-13 (dfinity/developer-docs `docs/reference/cycles-costs.md`, pull request #8).
    /// Third-party summaries of a later revision show 317,500 ("10 SDR per GiB per year"); check
    /// the current file before budgeting.
    pub const GIB_STORAGE_PER_SECOND_CYCLES: u64 = 127_000;
    /// USD per trillion cycles: 1 T cycles = 1 XDR (the cycles peg), and 1 XDR = 1.3561 USD on
    /// [`RATE_DATE`]: the IMF's "currency units per SDR" for the U.S. dollar on 30 June 2026, as
    /// Business Recorder reprinted the IMF's table on 2026-07-01
    /// (<https://www.brecorder.com/news/amp/40428073>; the IMF's own page,
    /// imf.org "SDR valuation", was not reachable from where this was read).
    pub const USD_PER_TRILLION_CYCLES: f64 = 1.3561;
    /// When the XDR rate was taken.
    pub const RATE_DATE: &str = "2026-06-30";
    /// When the fees above were read from the source.
    pub const FEES_READ: &str = "2026-11-23";
    /// Cycles per inter-canister call, request and response (13 nodes): `xnet_call_fee`.
    pub const XNET_CALL_CYCLES: u64 = 260_000;
    /// Cycles per byte of an inter-canister request or response (13 nodes):
    /// `xnet_byte_transmission_fee`.
    pub const XNET_BYTE_CYCLES: u64 = 1_000;
    /// Cycles to create a canister (13 nodes): `canister_creation_fee`.
    pub const CANISTER_CREATION_CYCLES: u64 = 500_000_000_000;
    /// HTTPS outcall fees (13 nodes): `http_request_linear_baseline_fee`,
    /// `http_request_quadratic_baseline_fee`, `http_request_per_byte_fee`,
    /// `http_response_per_byte_fee`.
    pub const HTTP_LINEAR_CYCLES: u64 = 3_000_000;
    /// See [`HTTP_LINEAR_CYCLES`].
    pub const HTTP_QUADRATIC_CYCLES: u64 = 60_000;
    /// See [`HTTP_LINEAR_CYCLES`].
    pub const HTTP_REQUEST_BYTE_CYCLES: u64 = 400;
    /// See [`HTTP_LINEAR_CYCLES`].
    pub const HTTP_RESPONSE_BYTE_CYCLES: u64 = 800;
    /// Nodes of the subnet the fees above are set for (`reference_subnet_size`).
    pub const SUBNET_NODES: u64 = 13;
    /// Nodes of the large application subnets (for example the European or fiduciary ones).
    pub const LARGE_SUBNET_NODES: u64 = 34;
    /// Seconds in the month storage is priced per: a 30.44-day average month (365.25 / 12 days).
    pub const SECONDS_PER_MONTH: u64 = 2_629_800;
    /// Bytes in a GiB.
    pub const GIB: u64 = 1 << 30;

    /// `cycles` (priced for 13 nodes) on a subnet of `nodes` nodes.
    pub const fn scale(cycles: u64, nodes: u64) -> u64 {
        cycles * nodes / SUBNET_NODES
    }

    /// Cycles of one update message that runs `instructions` on a 13-node subnet.
    pub const fn update_cycles(instructions: u64) -> u64 {
        UPDATE_BASE_CYCLES + CYCLES_PER_INSTRUCTION * instructions
    }

    /// Cycles of one update message that runs `instructions` on a subnet of `nodes` nodes.
    pub const fn update_cycles_on(instructions: u64, nodes: u64) -> u64 {
        scale(update_cycles(instructions), nodes)
    }

    /// Cycles to receive one ingress message of `bytes` bytes on a subnet of `nodes` nodes.
    pub const fn ingress_cycles(bytes: u64, nodes: u64) -> u64 {
        scale(INGRESS_MESSAGE_CYCLES + INGRESS_BYTE_CYCLES * bytes, nodes)
    }

    /// Cycles to keep `bytes` of memory for a month on a subnet of `nodes` nodes.
    pub fn storage_cycles_per_month(bytes: u64, nodes: u64) -> u64 {
        let per_second = GIB_STORAGE_PER_SECOND_CYCLES as f64 * bytes as f64 / GIB as f64;
        (per_second * SECONDS_PER_MONTH as f64 * nodes as f64 / SUBNET_NODES as f64).round() as u64
    }

    /// What `ic0.cost_call` reports for a call with a `method_bytes`-byte method name and a
    /// `payload_bytes`-byte argument on a subnet of `nodes` nodes, and what `call_perform`
    /// withdraws: the call and its request bytes, the largest possible response (2 MiB) and the
    /// longest callback (an update's 40 B instructions and the base fee), the last two refunded
    /// as far as unused when the response arrives (dfinity/ic
    /// `rs/cycles_account_manager/src/cycles_account_manager.rs`, `xnet_call_total_fee`,
    /// `prepayment_for_response_transmission`, `prepayment_for_response_execution` with
    /// `max_instructions_per_message`, which the replica's setup passes; read 2026-11-28. The
    /// 5 B "without DTS" limit older replicas reserved is gone from the newest
    /// `subnet_config.rs`).
    pub const fn call_cycles(method_bytes: u64, payload_bytes: u64, nodes: u64) -> u64 {
        scale(XNET_CALL_CYCLES + XNET_BYTE_CYCLES * (method_bytes + payload_bytes), nodes)
            + scale(XNET_BYTE_CYCLES * super::MAX_INTER_CANISTER_PAYLOAD_BYTES, nodes)
            + update_cycles_on(super::UPDATE_INSTRUCTION_LIMIT, nodes)
    }

    /// What `ic0.cost_http_request` reports (dfinity/ic `rs/cycles_account_manager/src/lib.rs`,
    /// `http_request_fee`): (linear + quadratic × n) × n + per byte of request and of the
    /// largest response, for a subnet of `n` nodes.
    pub const fn http_request_cycles(request_bytes: u64, max_response_bytes: u64, nodes: u64) -> u64 {
        (HTTP_LINEAR_CYCLES + HTTP_QUADRATIC_CYCLES * nodes) * nodes
            + HTTP_REQUEST_BYTE_CYCLES * request_bytes * nodes
            + HTTP_RESPONSE_BYTE_CYCLES * max_response_bytes * nodes
    }

    /// USD of `cycles` at [`USD_PER_TRILLION_CYCLES`].
    pub fn usd(cycles: u64) -> f64 {
        cycles as f64 / 1e12 * USD_PER_TRILLION_CYCLES
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn fees_scale_with_the_subnet() {
            assert_eq!(update_cycles_on(1_000_000_000, SUBNET_NODES), 1_005_000_000);
            assert_eq!(update_cycles_on(1_000_000_000, LARGE_SUBNET_NODES), 1_005_000_000 * 34 / 13);
            assert_eq!(ingress_cycles(100, SUBNET_NODES), 1_400_000);
            // 4 XDR per GiB per year, as the source's comment says.
            let year = storage_cycles_per_month(GIB, SUBNET_NODES) * 12;
            assert!((4.0e12..4.01e12).contains(&(year as f64)), "{year}");
        }
    }
}

/// Stable-memory virtual memories (ic-stable-structures `MemoryManager` ids) of the canister.
/// ic-rusqlite 0.5 takes 101..=120 (120: the database file; 101..=118: ic-wasi-polyfill's file
/// system, its `FS_MEMORY_RANGE` 101..119); id 255 is reserved by the `MemoryManager`.
pub mod memory_ids {
    /// The name of the active pragma profile (a `StableCell<String>`).
    pub const PROFILE: u8 = 100;
    /// The `StableBTreeMap` key-value backend.
    pub const STABLE_BTREEMAP: u8 = 99;
    /// Where the heap `BTreeMap` backend is written whole in `pre_upgrade` and read back in
    /// `post_upgrade`.
    pub const HEAP_BTREEMAP_SNAPSHOT: u8 = 98;
    /// The live benchmark state of the benchmark canister (which cell is set up, how far).
    pub const BENCH_STATE: u8 = 97;
    /// The canister's `wasm_memory_limit` as its install or upgrade argument last gave it (a
    /// `StableCell<u64>`): SQLite's page cache is bounded by it.
    pub const MEMORY_LIMIT: u8 = 96;
    /// The first id ic-rusqlite uses.
    pub const IC_RUSQLITE_FIRST: u8 = 101;
    /// The ic-sqlite-vfs canister's database image (`vfs/`; its own `MemoryManager`, the only
    /// one over that canister's stable memory): 120, the slot ic-sqlite-vfs's README suggests
    /// for a fresh single-database canister.
    pub const VFS_DATABASE: u8 = 120;
    /// sysrepo's whole-datastore store: the running datastore's JSON document.
    pub const SYSREPO_BLOB_RUNNING: u8 = 95;
    /// sysrepo's whole-datastore store: the operational datastore's JSON document.
    pub const SYSREPO_BLOB_OPERATIONAL: u8 = 94;
    /// sysrepo's StableBTreeMap store: `lst`, `usr-lst` and its index of the running datastore,
    /// then the same three of the operational datastore.
    pub const SYSREPO_MAPS: [u8; 6] = [88, 89, 90, 91, 92, 93];
    /// Chia's `kv` schema: the name -> id `StableBTreeMap`.
    pub const CHIA_LOOKUP_MAP: u8 = 87;
    /// Chia's `kv` and `runs` schemas: the id -> name array.
    pub const CHIA_NAMES: u8 = 86;
    /// Chia's `runs` schema: the sorted runs.
    pub const CHIA_RUNS: u8 = 85;
    /// Chia's `btree_all` schema: coins by name.
    pub const CHIA_COINS: u8 = 84;
    /// Chia's `btree_all` schema: blocks by index.
    pub const CHIA_BLOCKS: u8 = 83;
    /// Every Chia schema's own memory, in id order: what a reset to a fresh canister empties.
    pub const CHIA: [u8; 5] = [CHIA_BLOCKS, CHIA_COINS, CHIA_RUNS, CHIA_NAMES, CHIA_LOOKUP_MAP];
    /// The number of orders the canister's `delete_orders` deleted (a `StableCell<u64>`,
    /// `stablebench::counts::Kept`): with `sqlite_sequence`, the orders' count in constant time.
    pub const ORDERS_DELETED: u8 = 82;

    // Ours are distinct and below ic-rusqlite's.
    const _: () = assert!(
        STABLE_BTREEMAP != HEAP_BTREEMAP_SNAPSHOT
            && STABLE_BTREEMAP != PROFILE
            && HEAP_BTREEMAP_SNAPSHOT != PROFILE
            && PROFILE < IC_RUSQLITE_FIRST
            && STABLE_BTREEMAP < IC_RUSQLITE_FIRST
            && HEAP_BTREEMAP_SNAPSHOT < IC_RUSQLITE_FIRST
            && BENCH_STATE < HEAP_BTREEMAP_SNAPSHOT
            && MEMORY_LIMIT < BENCH_STATE
            && SYSREPO_BLOB_RUNNING < MEMORY_LIMIT
            && SYSREPO_BLOB_OPERATIONAL < SYSREPO_BLOB_RUNNING
            && SYSREPO_MAPS[5] < SYSREPO_BLOB_OPERATIONAL
            && CHIA_LOOKUP_MAP < SYSREPO_MAPS[0]
            && CHIA_BLOCKS < CHIA_COINS
            && CHIA_COINS < CHIA_RUNS
            && CHIA_RUNS < CHIA_NAMES
            && CHIA_NAMES < CHIA_LOOKUP_MAP
            && ORDERS_DELETED < CHIA_BLOCKS
    );
}

/// The production canister's heap map stops taking writes when the heap passes half the default
/// `wasm_memory_limit`: `post_upgrade` reads the snapshot into a buffer and builds the map from it,
/// so it needs about twice the map's size; past this the canister could not be upgraded any more.
/// (Declared last in this file: the canisters' panic locations stay where they were.)
pub const HEAP_MAP_CEILING_BYTES: u64 = DEFAULT_WASM_MEMORY_LIMIT_BYTES / 2;
