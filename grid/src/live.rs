//! The benchmark canister's live API (`canister/stablebench_bench.did`): the grid's cells offered
//! through Candid, so that a dfx user runs a benchmark's setup call by call and then its measured
//! step on a live canister (a local replica or mainnet) and gets what canbench reports plus what
//! the message cost. The canister replies with these types; the runner's `live` command decodes
//! them, offline or through dfx.

use candid::{CandidType, Deserialize};

/// One benchmark of the grid, as `bench_cells` lists it.
#[derive(CandidType, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct BenchCell {
    /// The canbench name.
    pub name: String,
    /// `users_orders`, `trie`, `nodestore`.
    pub workload: String,
    /// The operation without backend, size and settings (`select_join`, `trie_read_warm`).
    pub operation: String,
    /// `sqlite`, `sqlite_rowid`, `stable_btreemap`, `heap_btreemap`.
    pub backend: String,
    /// Keys (trie), objects per phase (nodestore); 0 for users/orders (the size is in the name).
    pub size: u64,
    /// The SQLite pragma profile, for SQLite cells.
    pub profile: Option<String>,
    /// The setup's steps, in order (each resumable under a budget).
    pub setup: Vec<String>,
    /// The measured step leaves the state as it was: `bench_run` may repeat it on one setup.
    pub repeatable: bool,
    /// The measured step only reads, so caches matter (warm against cold after an upgrade).
    pub read: bool,
}

/// Where a benchmark's setup stands after a `bench_setup` call.
#[derive(CandidType, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct SetupProgress {
    /// The benchmark being set up.
    pub name: String,
    /// True when the setup is complete: `bench_run` may measure.
    pub complete: bool,
    /// The step the next call continues (or the last one, when complete).
    pub step: String,
    /// Units (rows, keys) of that step done so far.
    pub done: u64,
    /// Units of that step in all.
    pub units: u64,
    /// Steps completed, of `steps`.
    pub steps_done: u64,
    /// Steps of the setup in all.
    pub steps: u64,
    /// Instructions this call had executed when it replied (performance counter 0).
    pub instructions: u64,
}

/// Where a Chia replay taken block by block (`bench_chia_blocks`) stands after a call.
#[derive(CandidType, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ChiaProgress {
    /// The benchmark replayed.
    pub name: String,
    /// Blocks this call accepted.
    pub blocks: u64,
    /// Coins those blocks created.
    pub coins: u64,
    /// Coins those blocks spent.
    pub spends: u64,
    /// Instructions of this call's `accept_block` calls and its one flush (the commit), as
    /// performance-counter differences: the chain's generation and the model are not counted.
    pub instructions: u64,
    /// Blocks accepted by this call and every earlier one.
    pub blocks_total: u64,
    /// Coins created so far.
    pub coins_total: u64,
    /// Coins spent so far.
    pub spends_total: u64,
    /// True when the chain is replayed (`coins_total` is the benchmark's size).
    pub complete: bool,
    /// On the call that completes the replay: the reads and the rewind checked against the model
    /// fed the same blocks. `None` before.
    pub oracle: Option<Oracle>,
    /// Instructions this call had executed when it replied (performance counter 0).
    pub message_instructions: u64,
}

/// What the measured step of one benchmark cost on a live canister: canbench's numbers (the same
/// code measures them) and the message's own.
#[derive(CandidType, Deserialize, Clone, Debug, PartialEq)]
pub struct BenchReport {
    /// The benchmark.
    pub name: String,
    /// How it ran: `update` (state kept, charged) or `query` (state discarded, free for the caller).
    pub call: CallKind,
    /// Instructions of the measured step: canbench's `total` (`performance_counter(0)` around it).
    pub instructions: u64,
    /// canbench's `calls` (iterations the total sums: 50 for the trie cells).
    pub calls: u64,
    /// Heap growth during the measured step, in 64 KiB wasm pages (canbench's `heap_increase`).
    pub heap_increase_pages: u64,
    /// Stable memory growth during the measured step, in 64 KiB pages. A live canister that ran
    /// benchmarks before has grown its stable memory already, so this is often 0 where a fresh
    /// canbench canister grows.
    pub stable_memory_increase_pages: u64,
    /// canbench's scopes (`w_avg`, the NodeStore phases, `save`/`load`), in name order.
    pub scopes: Vec<ScopeReport>,
    /// Instructions of the whole message when it replied: decoding the argument, the measured
    /// step, the oracle's check, building this report (not encoding it).
    pub message_instructions: u64,
    /// Wasm heap after the step, bytes.
    pub heap_bytes: u64,
    /// Stable memory after the step, bytes.
    pub stable_memory_bytes: u64,
    /// Whether the result matched what the oracle predicts.
    pub oracle: Oracle,
    /// Cycles of this message as an update on a 13-node subnet: the per-message fee plus one
    /// cycle per instruction of `message_instructions` (ingress and storage not included). For a
    /// query this is what the same work would cost as an update: queries are free for the caller.
    pub cycles_13_nodes: u64,
    /// The same on a 34-node subnet (34/13 of it).
    pub cycles_34_nodes: u64,
    /// `cycles_13_nodes` in USD at the rate of `stablebench_grid::ic::prices::RATE_DATE`.
    pub usd_13_nodes: f64,
}

/// How a benchmark's measured step ran.
#[derive(CandidType, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallKind {
    /// An update call: its state changes are kept and it is charged.
    #[serde(rename = "update")]
    Update,
    /// A query: its state changes are discarded (so a cold cache stays cold), free for the caller.
    #[serde(rename = "query")]
    Query,
}

/// One canbench scope of a [`BenchReport`].
#[derive(CandidType, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ScopeReport {
    /// The scope's name.
    pub name: String,
    /// Instructions inside it.
    pub instructions: u64,
    /// Times it was entered.
    pub calls: u64,
}

/// The oracle's verdict on a measured step's result.
#[derive(CandidType, Deserialize, Clone, Debug, PartialEq, Eq)]
pub enum Oracle {
    /// The result is the predicted one (what was checked).
    #[serde(rename = "pass")]
    Pass(String),
    /// The result differs from the prediction (expected against got).
    #[serde(rename = "fail")]
    Fail(String),
}
