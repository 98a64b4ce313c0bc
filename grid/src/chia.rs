//! Chia's coin-store schema benchmark (`richardkiss/cdb_benchmark`, its `REPORT.md`) as grid data:
//! the schemas compared, the sizes, the chain's seed and the reads measured after the replay. The
//! library (`stablebench::chia`) runs them.

/// One coin-store schema of the benchmark.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Schema {
    /// Chia's own `coin_record` table keyed by the 32-byte coin name, a commit per block (the
    /// original's `blockchain_v2_mainnet`; the baseline).
    V2,
    /// Coins by integer id, a `coin_lookup(hash, id)` table, 50,000-coin batches (`sqlite_v3`).
    V3,
    /// As `v3` with the lookup in a `StableBTreeMap` (the analog of `rocks_schema`).
    Kv,
    /// As `v3` with the lookup in sorted runs of 40-byte rows in stable memory, the two smallest
    /// merged at 10 runs (the analog of `flat_file_schema` / `sqlite_row_schema`).
    Runs,
    /// Everything in `StableBTreeMap`s: coins by name, blocks by index (not in the original).
    BtreeAll,
}

/// Every schema, in report order (the baseline, `v2`, first).
pub const SCHEMAS: [Schema; 5] = [Schema::V2, Schema::V3, Schema::Kv, Schema::Runs, Schema::BtreeAll];

/// Coins created by the replayed chain: 0.075 % and 0.75 % of the original's 13,423,068.
pub const SIZES: [u64; 2] = [10_000, 100_000];

/// Coins per point of the cost-against-size curve (a canbench scope each).
pub const CHUNK_COINS: u64 = 10_000;

/// The seed of the synthetic chain (recorded here once).
pub const SEED: u64 = 13_423_068;

/// Names looked up after the replay: this many existing ones, and as many missing ones.
pub const LOOKUPS: usize = 100;

/// Blocks read by index after the replay.
pub const BLOCK_READS: usize = 100;

/// Blocks the rewind after the replay drops (a reorg of this depth).
pub const REWIND_BLOCKS: usize = 100;

/// The scopes of the reads after the replay and of the rewind, each one timed part of its own
/// (the canister writes them, the reports read them): existing names looked up, missing names,
/// blocks read by index, the rewind. The replay's chunks are scopes too ([`chunk_scope`]).
pub const READ_SCOPES: [&str; 4] = ["lookup_existing", "lookup_missing", "block_reads", "rewind"];

/// The scope of the replay's chunk `i` (from 0): `chunk_01`, `chunk_02`, ..., the sum of its
/// blocks' timed parts (the canister writes it, the reports read it).
pub fn chunk_scope(i: usize) -> String {
    format!("chunk_{:02}", i + 1)
}

/// The original's replay: mainnet blocks below 800,000 (REPORT.md).
pub const MAINNET_CREATIONS: u64 = 13_423_068;
/// The spends of the same replay.
pub const MAINNET_SPENDS: u64 = 5_840_449;

impl Schema {
    /// The name in benchmark names (`btree_all`).
    pub const fn name(self) -> &'static str {
        match self {
            Schema::V2 => "v2",
            Schema::V3 => "v3",
            Schema::Kv => "kv",
            Schema::Runs => "runs",
            Schema::BtreeAll => "btree_all",
        }
    }

    /// The original schema it ports (a module of `cdb/schemas/`), or what it adds.
    pub const fn original(self) -> &'static str {
        match self {
            Schema::V2 => "blockchain_v2_mainnet",
            Schema::V3 => "sqlite_v3",
            Schema::Kv => "rocks_schema",
            Schema::Runs => "flat_file_schema / sqlite_row_schema",
            Schema::BtreeAll => "(not in the original)",
        }
    }

    /// Whether its coins live in SQLite (so a pragma profile applies).
    pub const fn uses_sqlite(self) -> bool {
        !matches!(self, Schema::BtreeAll)
    }
}

/// The largest Chia cell `bench_run` replays live in one call (a replay of 100,000 coins takes
/// about 13 B instructions: more than a query may, a third of an update); larger ones are replayed
/// in messages with `bench_chia_blocks`.
pub const LIVE_RUN_MAX_COINS: u64 = 10_000;

/// The most blocks one `bench_chia_blocks` call accepts: about 20,000 coins (a block creates 10 on
/// average), under 3 B instructions on the costliest schema with 100,000 coins stored (about
/// 130,000 per coin): far inside an update's 40 B.
pub const MAX_BLOCKS_PER_CALL: u32 = 2_000;
