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

/// The default `wasm_memory_limit` of a canister: 3 GiB (3,221,225,472 bytes, as the mainnet
/// registry canister's settings show; IC interface specification, canister settings).
pub const DEFAULT_WASM_MEMORY_LIMIT_BYTES: u64 = 3 * 1024 * 1024 * 1024;

/// One wasm page (heap and stable memory grow by it; canbench reports growth in these pages).
pub const WASM_PAGE_BYTES: u64 = 65_536;

/// Prices in cycles, with their source and date. A 13-node application subnet; other subnet sizes
/// scale linearly (`scale_cost` in dfinity/ic `rs/cycles_account_manager`).
pub mod prices {
    /// Cycles per update message execution (13 nodes): dfinity/ic `rs/config/src/subnet_config.rs`
    /// `CyclesAccountManagerConfig::application_subnet`, `update_message_execution_fee`
    /// (5 M since dfinity/ic PR #2291, 2024-10).
    pub const UPDATE_BASE_CYCLES: u64 = 5_000_000;
    /// Cycles per instruction of an update (wasm32, 13 nodes): `ten_update_instructions_execution_fee`
    /// = 10 cycles per 10 instructions (same source). wasm64 costs twice that.
    pub const CYCLES_PER_INSTRUCTION: u64 = 1;
    /// Cycles to receive an ingress message (a user's update call), per message (13 nodes):
    /// `ingress_message_reception_fee` (same source).
    pub const INGRESS_MESSAGE_CYCLES: u64 = 1_200_000;
    /// Cycles to receive an ingress message, per byte (13 nodes): `ingress_byte_reception_fee`.
    pub const INGRESS_BYTE_CYCLES: u64 = 2_000;
    /// USD per trillion cycles: 1 T cycles = 1 XDR, and 1 XDR = 1.35 USD on [`RATE_DATE`].
    pub const USD_PER_TRILLION_CYCLES: f64 = 1.35;
    /// When the XDR rate was taken.
    pub const RATE_DATE: &str = "2025-05-22";
    /// Nodes of the subnet the prices above are for.
    pub const SUBNET_NODES: u64 = 13;

    /// Cycles of one update message that runs `instructions` on a 13-node subnet.
    pub const fn update_cycles(instructions: u64) -> u64 {
        UPDATE_BASE_CYCLES + CYCLES_PER_INSTRUCTION * instructions
    }

    /// USD of `cycles` at [`USD_PER_TRILLION_CYCLES`].
    pub fn usd(cycles: u64) -> f64 {
        cycles as f64 / 1e12 * USD_PER_TRILLION_CYCLES
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
    /// The first id ic-rusqlite uses.
    pub const IC_RUSQLITE_FIRST: u8 = 101;

    // Ours are distinct and below ic-rusqlite's.
    const _: () = assert!(
        STABLE_BTREEMAP != HEAP_BTREEMAP_SNAPSHOT
            && STABLE_BTREEMAP != PROFILE
            && HEAP_BTREEMAP_SNAPSHOT != PROFILE
            && PROFILE < IC_RUSQLITE_FIRST
            && STABLE_BTREEMAP < IC_RUSQLITE_FIRST
            && HEAP_BTREEMAP_SNAPSHOT < IC_RUSQLITE_FIRST
    );
}
