//! The IC system API (`ic0.*`) as wasmtime host functions, with the replica's fees and the
//! interface specification's rules of where each call may be used.
//!
//! Every fee and limit is a named constant of [`crate::replica`] with its source. Each call first
//! charges its fixed overhead plus 1 instruction per byte copied in or out (50 per byte for bytes
//! leaving the canister), then checks its context, then does its work, as
//! ic:`rs/embedders/src/wasmtime_embedder/linker.rs` does. The wasm `call` (5) that reaches a
//! host function is charged by the instrumented caller, as on the IC.
//!
//! The functions register in groups ([`add_to_linker`]): message data, replies, cycles, identity
//! and status, time and timers, certification, logging, stable memory, environment variables,
//! cost queries, and calls. Offline there is no other canister: a call to this canister runs
//! here (that is how ic-cdk's timers execute), a call to `raw_rand` of the management canister
//! gets deterministic bytes, any other call is answered the way the replica answers a call to a
//! canister that does not exist (see `crate::canister`).

use std::collections::VecDeque;
use std::fmt;

use candid::Principal;
use wasmtime::{Caller, Global, Linker, Memory, Val};

use crate::replica::{self, fee, log, page_budget, CostModel, TRANSMISSION_FACTOR};
pub use crate::replica::{DIRTY_PAGE_FEE, MAX_QUERY_REPLY_BYTES, MAX_UPDATE_REPLY_BYTES, OS_PAGE};

/// 64 KiB: the wasm page, the unit of `stable64_size` and `stable64_grow`.
pub const WASM_PAGE: u64 = replica::WASM_PAGE_BYTES;
/// Largest stable memory, in wasm pages.
pub const MAX_STABLE_PAGES: u64 = replica::MAX_STABLE_BYTES / WASM_PAGE;

/// Which entry point an execution runs; decides which APIs are allowed, the reply rules, the
/// stable-memory page budgets and whether the wasm memory limit applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The module's start function (install and upgrade).
    Start,
    /// `canister_init`.
    Init,
    /// `canister_pre_upgrade`.
    PreUpgrade,
    /// `canister_post_upgrade`.
    PostUpgrade,
    /// `canister_update <name>`.
    Update,
    /// `canister_query <name>`, non-replicated.
    Query,
    /// A reply callback of a call this canister made.
    ReplyCallback,
    /// A reject callback of a call this canister made.
    RejectCallback,
    /// The cleanup callback, after a reply or reject callback trapped.
    Cleanup,
    /// `canister_global_timer`.
    GlobalTimer,
}

impl Kind {
    /// Per-execution page budgets in 4 KiB pages: (dirty, accessed).
    pub fn page_budgets(self) -> (u64, u64) {
        match self {
            Kind::Query => page_budget::QUERY,
            Kind::Init | Kind::PreUpgrade | Kind::PostUpgrade => page_budget::UPGRADE,
            _ => page_budget::MESSAGE,
        }
    }

    /// Whether `wasm_memory_limit` applies: every replicated execution except `pre_upgrade`
    /// (so that a canister over its limit can still be upgraded), never a query (the
    /// interface specification, canister settings, `wasm_memory_limit`).
    pub fn enforces_wasm_memory_limit(self) -> bool {
        !matches!(self, Kind::Query | Kind::PreUpgrade)
    }
}

/// Why an execution stopped with a trap. Carried through wasmtime as the host function's error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Trap {
    /// The instruction counter went below zero (the message's limit was reached).
    OutOfInstructions,
    /// The canister called `ic0.trap`, or trapped in wasm (unreachable, out of bounds, ...).
    Canister(String),
    /// The canister used the system API in a way the IC forbids.
    ContractViolation(String),
    /// A stable memory access outside its size.
    StableOutOfBounds,
    /// A heap range outside the wasm memory.
    HeapOutOfBounds,
    /// A page budget of this execution was exceeded.
    PageLimit(&'static str),
    /// The canister's memory would outgrow its `memory_allocation` (the heap's `memory.grow`; a
    /// stable grow fails with -1 instead).
    OutOfMemory,
    /// `memory.grow` past the canister's `wasm_memory_limit`.
    WasmMemoryLimit {
        /// The limit, bytes.
        limit: u64,
        /// The size the heap would have had, bytes.
        wanted: u64,
    },
    /// The runner does not implement this API offline.
    Unsupported(String),
}

impl fmt::Display for Trap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Trap::OutOfInstructions => {
                write!(f, "Canister exceeded the limit of instructions for a single message execution")
            }
            Trap::Canister(m) => write!(f, "Canister trapped: {m}"),
            Trap::ContractViolation(m) => write!(f, "Canister violated contract: {m}"),
            Trap::StableOutOfBounds => write!(f, "Canister trapped: stable memory out of bounds"),
            Trap::HeapOutOfBounds => write!(f, "Canister trapped: heap out of bounds"),
            Trap::PageLimit(which) => write!(
                f,
                "Exceeded the limit for the number of {which} pages in the stable memory in a single execution"
            ),
            // The replica's text for HypervisorError::OutOfMemory since dfinity/ic#5358 (2025-05-30).
            Trap::OutOfMemory => write!(f, "Canister cannot grow its memory usage."),
            Trap::WasmMemoryLimit { limit, wanted } => write!(
                f,
                "Canister exceeded its current Wasm memory limit of {limit} bytes (memory.grow to {wanted} bytes)"
            ),
            Trap::Unsupported(api) => write!(f, "ic0.{api} is not supported by the offline runner"),
        }
    }
}

impl std::error::Error for Trap {}

type HostResult<T> = wasmtime::Result<T>;

fn trap<T>(t: Trap) -> HostResult<T> {
    Err(wasmtime::Error::new(t))
}

fn violation<T>(m: impl Into<String>) -> HostResult<T> {
    trap(Trap::ContractViolation(m.into()))
}

/// Stable memory with the replica's per-execution bookkeeping, plus an undo log so that an
/// execution's writes can be rolled back (trapped updates, every query).
#[derive(Clone, Debug, Default)]
pub struct StableMemory {
    /// The bytes; the length is a multiple of 64 KiB.
    pub bytes: Vec<u8>,
    /// Per 4 KiB page, this execution: bit 0 written, bit 1 accessed (the replica's bytemap).
    state: Vec<u8>,
    /// Pages whose `state` is non-zero, to reset them at the next execution.
    touched: Vec<u64>,
    /// Original content of each page this execution wrote, for rollback.
    undo: Vec<(u64, Box<[u8]>)>,
    /// Size at the start of the execution, for rollback.
    len_at_start: usize,
    dirty_left: u64,
    accessed_left: u64,
    /// Pages written for the first time in this execution.
    pub dirtied: u64,
    /// Per 64 KiB Wasm page, since page tracking last started ([`StableMemory::restart_pages`]):
    /// the memory tracker's view (see [`PageCounts`]).
    wasm_pages: PageState,
}

impl StableMemory {
    /// Stable memory holding `bytes`, rounded up to whole 64 KiB pages.
    pub fn from_bytes(mut bytes: Vec<u8>) -> StableMemory {
        let len = bytes.len().div_ceil(WASM_PAGE as usize) * WASM_PAGE as usize;
        bytes.resize(len, 0);
        let state = vec![0; len / OS_PAGE as usize];
        StableMemory { len_at_start: len, bytes, state, ..Default::default() }
    }

    /// Size in wasm pages.
    pub fn pages(&self) -> u64 {
        self.bytes.len() as u64 / WASM_PAGE
    }

    /// Starts counting the Wasm pages touched afresh (each execution, and the measured step).
    pub fn restart_pages(&mut self) {
        self.wasm_pages.clear();
    }

    /// Marks the Wasm pages of `[off, off + len)` (`len` > 0) with `bits` (1 read, 3 write);
    /// returns how many were accessed, and written, for the first time.
    fn touch(&mut self, off: u64, len: u64, bits: u8) -> (u64, u64) {
        let (mut accessed, mut written) = (0, 0);
        for p in off / WASM_PAGE..=(off + len - 1) / WASM_PAGE {
            let (a, w) = self.wasm_pages.mark(p, bits);
            accessed += u64::from(a);
            written += u64::from(w);
        }
        (accessed, written)
    }

    /// Starts an execution of `kind`: resets the bytemap and budgets, starts a new undo log.
    pub fn begin(&mut self, kind: Kind) {
        self.next_step(kind);
        self.undo.clear();
        self.len_at_start = self.bytes.len();
        self.dirtied = 0;
    }

    /// Starts the next step of an install or upgrade (`start`, `canister_init`,
    /// `canister_post_upgrade`): a fresh bytemap and the step's budgets, but the same undo log,
    /// so that a trap in a later step still undoes the earlier steps' writes.
    fn next_step(&mut self, kind: Kind) {
        for p in self.touched.drain(..) {
            self.state[p as usize] = 0;
        }
        (self.dirty_left, self.accessed_left) = kind.page_budgets();
    }

    /// Undoes every write and grow of the current execution.
    pub fn rollback(&mut self) {
        for (page, old) in self.undo.drain(..).rev() {
            let at = (page * OS_PAGE) as usize;
            if at < self.len_at_start {
                self.bytes[at..at + old.len()].copy_from_slice(&old);
            }
        }
        self.bytes.truncate(self.len_at_start);
        self.state.truncate(self.len_at_start / OS_PAGE as usize);
        self.touched.retain(|&p| (p as usize) < self.state.len());
    }

    fn grow(&mut self, new_pages: u64) -> Option<u64> {
        let old = self.pages();
        let total = old.checked_add(new_pages)?;
        if total > MAX_STABLE_PAGES {
            return None;
        }
        self.bytes.resize((total * WASM_PAGE) as usize, 0);
        self.state.resize((total * WASM_PAGE / OS_PAGE) as usize, 0);
        Some(old)
    }

    fn check_range(&self, off: u64, len: u64) -> Result<(), Trap> {
        match off.checked_add(len) {
            Some(end) if end <= self.bytes.len() as u64 => Ok(()),
            _ => Err(Trap::StableOutOfBounds),
        }
    }

    /// Pages of [off, off + len) without `bit`.
    fn count_without(&self, off: u64, len: u64, bit: u8) -> u64 {
        let (first, last) = (off / OS_PAGE, (off + len - 1) / OS_PAGE);
        (first..=last).filter(|&p| self.state[p as usize] & bit == 0).count() as u64
    }

    fn mark(&mut self, off: u64, len: u64, bits: u8, save: bool) {
        let (first, last) = (off / OS_PAGE, (off + len - 1) / OS_PAGE);
        for p in first..=last {
            let s = &mut self.state[p as usize];
            if *s == 0 {
                self.touched.push(p);
            }
            let at = (p * OS_PAGE) as usize;
            // Pages grown by this execution are cut off by `rollback`, never restored: no copy.
            if save && *s & 1 == 0 && at < self.len_at_start {
                self.undo.push((p, self.bytes[at..at + OS_PAGE as usize].into()));
            }
            *s |= bits;
        }
    }
}

/// A call the canister is building (`call_new` .. `call_perform`) or has performed.
#[derive(Clone, Debug)]
pub struct Call {
    /// The callee.
    pub callee: Principal,
    /// The method.
    pub method: String,
    /// The argument bytes.
    pub arg: Vec<u8>,
    /// Reply callback: table index and environment.
    pub reply: (u32, u32),
    /// Reject callback: table index and environment.
    pub reject: (u32, u32),
    /// Cleanup callback, if set.
    pub cleanup: Option<(u32, u32)>,
    /// Cycles attached (taken from the balance at `call_perform`).
    pub cycles: u128,
}

/// Per-execution context: the call context's argument, caller and reply state, plus what a
/// callback receives.
#[derive(Clone, Debug)]
pub struct Message {
    /// The entry point kind.
    pub kind: Kind,
    /// Argument bytes (for a reply callback: the reply).
    pub arg: Vec<u8>,
    /// Caller principal.
    pub caller: Principal,
    /// Reply bytes appended so far.
    pub reply: Vec<u8>,
    /// `msg_reply` was called.
    pub replied: bool,
    /// `msg_reject` was called, with this message.
    pub rejected: Option<String>,
    /// Reply size limit in bytes (2 MiB replicated, 3 MiB query).
    pub max_reply: u64,
    /// `ic0.time` for this execution, ns since 1970.
    pub time: u64,
    /// For a callback: the reject code (0 for a reply) and message.
    pub reject_code: i32,
    /// See `reject_code`.
    pub reject_message: String,
    /// Cycles the message carries and the canister has not accepted yet (`msg_cycles_available`):
    /// a call's attached cycles, in the callee's execution of it. Ingress messages carry none.
    pub cycles_available: u128,
    /// In a callback: the cycles the callee did not accept, back in the balance
    /// (`msg_cycles_refunded`).
    pub cycles_refunded: u128,
}

impl Message {
    /// An execution of `kind` from `caller` with `arg`.
    pub fn new(kind: Kind, arg: Vec<u8>, caller: Principal, time: u64) -> Message {
        let max_reply = if kind == Kind::Query { MAX_QUERY_REPLY_BYTES } else { MAX_UPDATE_REPLY_BYTES };
        Message {
            kind,
            arg,
            caller,
            reply: Vec::new(),
            replied: false,
            rejected: None,
            max_reply,
            time,
            reject_code: 0,
            reject_message: String::new(),
            cycles_available: 0,
            cycles_refunded: 0,
        }
    }

    fn answered(&self) -> bool {
        self.replied || self.rejected.is_some()
    }
}

/// The canister's log as one execution sees it: a fresh 4 KiB delta log per execution.
#[derive(Clone, Debug, Default)]
struct ExecutionLog {
    records: VecDeque<u64>,
    used: u64,
}

impl ExecutionLog {
    fn remaining(&self) -> u64 {
        log::CAPACITY - self.used.min(log::CAPACITY)
    }

    /// Adds a record of `len` content bytes, dropping the oldest ones to make room
    /// (`CanisterLog::add_record`).
    fn add(&mut self, len: u64) {
        let size = log::RECORD_OVERHEAD + len.min(log::CAPACITY - log::RECORD_OVERHEAD);
        while self.used + size > log::CAPACITY {
            match self.records.pop_front() {
                Some(s) => self.used -= s,
                None => break,
            }
        }
        self.records.push_back(size);
        self.used += size;
    }
}

/// The state host functions work on (wasmtime store data).
#[derive(Debug)]
pub struct Host {
    /// The current execution.
    pub msg: Message,
    /// Stable memory.
    pub stable: StableMemory,
    /// This canister's id.
    pub canister_id: Principal,
    /// Its controllers.
    pub controllers: Vec<Principal>,
    /// Cycle balance reported to the canister.
    pub cycles: u128,
    /// Installs + upgrades so far (`canister_version`).
    pub version: u64,
    /// The global timer (ns), 0 if unset.
    pub timer: u64,
    /// Certified data set by the canister.
    pub certified_data: Vec<u8>,
    /// Environment variables, sorted by name (canister settings).
    pub env_vars: Vec<(String, String)>,
    /// `wasm_memory_limit` in bytes (canister settings); 0 means none.
    pub wasm_memory_limit: u64,
    /// `memory_allocation` in bytes (canister settings); 0 means best effort. The heap and stable
    /// memory together may not grow past it ([`Host::fits_allocation`]).
    pub memory_allocation: u64,
    /// Print `debug_print` output to stderr.
    pub print_output: bool,
    /// Captured `debug_print` lines of the current execution.
    pub output: Vec<String>,
    /// Instruction limit of the current execution (the counter's start value).
    pub limit: u64,
    /// The call being built.
    pub building: Option<Call>,
    /// Calls performed by the current execution, in order.
    pub performed: Vec<Call>,
    /// True while wasm runs (the memory limit is checked only then, not when the host restores
    /// a heap).
    pub executing: bool,
    log: ExecutionLog,
    /// The running profile of the current message (code instrumented with `Metering::Profiled`).
    pub profile: Option<Box<crate::profile::Profiler>>,
    counter: Option<Global>,
    memory: Option<Memory>,
    /// The byte map of heap pages written (`instrument::DIRTY_EXPORT`), if the module tracks them.
    dirty: Option<Memory>,
    /// Where the canister's setup-stage reports go (`stablebench-runner bench`'s shared setups).
    pub stage_hook: Option<Box<dyn StageHook>>,
    /// Set in a fork that goes on as another cell: what ends its execution.
    pub forked: Option<Box<dyn StageHook>>,
    /// Which replica's charges apply.
    pub model: CostModel,
    /// Where the heap Wasm pages the code touches are counted, if they are.
    pages: Option<PageSource>,
    /// Which heap Wasm pages the current step has accessed (bit 0) and written (bit 1), with
    /// its counts: the host's side of the page maps.
    heap_pages: PageState,
    /// The measured step's bookkeeping (see [`Measure`]).
    pub measure: Measure,
    /// Price queries' written pages as an update's are priced (the tracker's write fee), for
    /// [`crate::canister::Canister::query_priced_as_update`].
    pub queries_as_updates: bool,
    /// Where the ic model starts (see [`IcFrom`]).
    pub ic_from: IcFrom,
    /// With a profiled module: attribute each Wasm page to the function that touched it first
    /// ([`crate::profile`], "Pages"). Collects the page marks at every function entry and exit.
    pub profile_pages: bool,
}

impl Host {
    /// Whether the heap Wasm pages the code touches are counted (a module that tracks them).
    pub fn has_page_source(&self) -> bool {
        self.pages.is_some()
    }
}

/// Where the heap Wasm pages the code touches are counted.
#[derive(Clone, Debug)]
pub enum PageSource {
    /// The module marks them ([`PageMaps`]).
    Marks(PageMaps),
    /// The heap is protected and its faults count (`crate::faults`).
    #[cfg(unix)]
    Faults(std::sync::Arc<crate::faults::Tracker>),
}

/// The maps of a module that tracks the heap Wasm pages it touches (`instrument`, "Pages
/// touched"): its code sets byte `p` of one to 1 when it reads page `p`, of the other when it
/// writes it; the host collects the marks ([`collect_pages`]) and clears them.
#[derive(Clone, Copy, Debug)]
pub struct PageMaps {
    /// Pages read.
    pub read: Memory,
    /// Pages written.
    pub written: Memory,
}

/// Per Wasm page of one memory, what the current step did to it (bit 0 accessed, bit 1
/// written), and how many pages it accessed and wrote.
#[derive(Clone, Debug, Default)]
struct PageState {
    bits: Vec<u8>,
    touched: Vec<u64>,
    accessed: u64,
    written: u64,
}

impl PageState {
    /// Marks page `p` with `bits` (1 read, 3 write); returns whether it was accessed, and
    /// written, for the first time.
    fn mark(&mut self, p: u64, bits: u8) -> (bool, bool) {
        if self.bits.len() <= p as usize {
            self.bits.resize(p as usize + 1, 0);
        }
        let old = self.bits[p as usize];
        if old & bits == bits {
            return (false, false);
        }
        if old == 0 {
            self.touched.push(p);
        }
        self.bits[p as usize] = old | bits;
        let (a, w) = (old == 0, bits & 2 != 0 && old & 2 == 0);
        self.accessed += u64::from(a);
        self.written += u64::from(w);
        (a, w)
    }

    /// Every page touched, in page order, with whether it was written.
    fn pages(&self) -> Vec<(u64, bool)> {
        let mut v: Vec<(u64, bool)> = self.touched.iter().map(|&p| (p, self.bits[p as usize] & 2 != 0)).collect();
        v.sort_unstable();
        v
    }

    fn clear(&mut self) {
        for p in self.touched.drain(..) {
            self.bits[p as usize] = 0;
        }
        (self.accessed, self.written) = (0, 0);
    }
}

/// The Wasm pages a stretch of execution touched (declared once, in the grid, for the runner
/// and the reports).
pub use stablebench_grid::ic::PageCounts;

/// The measured steps of a benchmark canister. Where a message of its own would start, the
/// canister prints `stablebench_grid::cells::MEASURE_LINE` (before canbench-rs's `bench_fn`,
/// before each timed iteration of a workload that times several); the host starts a step at the
/// next `performance_counter(0)` read (which is where the canister's timer starts): page
/// tracking starts afresh there, as in a new message, and the pages touched up to the step's
/// last counter read are the step's. The first step may fork a process that measures the rest
/// of the query under the ic model ([`StageHook::measuring`]).
#[derive(Clone, Debug, Default)]
pub struct Measure {
    /// The line was printed; a step starts at the next counter read.
    armed: bool,
    /// The steps so far, each up to its last counter read.
    steps: Vec<Step>,
    /// In the process that measures the steps under the ic model: each is priced as an update
    /// (every first write charged), whatever the benchmark's own message kind.
    pub as_update: bool,
}

/// Where the ic cost model starts in a benchmark query: from the start of the execution, or at
/// its first measured step (what `stablebench-runner bench --cost-model ic` does, so that what
/// runs before the steps, such as a scope measuring the setup, keeps canbench's figure, as in a
/// run under both models).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IcFrom {
    /// The model in force applies from the start.
    #[default]
    Start,
    /// Canbench's model until the first measured step, the ic model from there on.
    FirstStep,
}

/// One measured step, up to its last counter read: its pages, the 4 KiB stable pages the
/// canbench model had charged its write fee for (`StableMemory::dirtied`) at its start and at
/// its last read, and the counter's values at its first and last reads.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Step {
    /// The Wasm pages it touched.
    pub pages: PageCounts,
    /// The 4 KiB stable pages the message had dirtied (`StableMemory::dirtied`) when it started.
    pub dirtied_at_start: u64,
    /// The same at its last read.
    pub dirtied: u64,
    /// What `performance_counter(0)` returned at the step's first read (where the canister's
    /// timer starts).
    pub first_read: u64,
    /// What it returned at the step's last read.
    pub last_read: u64,
    /// How many times the step read the counter.
    pub reads: u32,
    /// Each of its counter reads, in order, up to [`MAX_MARKS`] (what a canbench-rs scope
    /// inside the step spans: see [`Step::spans_of`]).
    pub marks: Vec<Mark>,
}

/// One `performance_counter(0)` read inside a measured step: the value it returned, the step's
/// pages up to it (collected there) and the 4 KiB stable pages dirtied by then.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Mark {
    /// What the read returned.
    pub value: u64,
    /// The step's pages up to the read.
    pub pages: PageCounts,
    /// `StableMemory::dirtied` at the read.
    pub dirtied: u64,
}

/// The reads a step keeps in [`Step::marks`]: the benchmarks' scopes read the counter twice each,
/// a few dozen times a step; a step that reads it more (a budget check in a loop) keeps the first
/// ones, and its scopes past them get no pages.
pub const MAX_MARKS: usize = 4096;

/// The stretch of a step between two of its counter reads, as a canbench-rs scope measures it
/// (`performance_counter(0)` at its start and at its end).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    /// What the counter advanced by (the scope's instructions in the model the step ran under).
    pub instructions: u64,
    /// The pages first touched in it (after the start read, up to the end read).
    pub pages: PageCounts,
    /// The 4 KiB stable pages whose canbench write fee it paid.
    pub stable_fee_pages: u64,
}

impl Span {
    /// What the span would have counted under the ic model, for a step recorded under the
    /// canbench model (see [`Step::ic_instructions`]).
    pub fn ic_instructions(&self) -> u64 {
        self.instructions + self.pages.fee(true) - DIRTY_PAGE_FEE * self.stable_fee_pages
    }
}

impl Step {
    /// The 4 KiB stable pages whose canbench write fee ([`DIRTY_PAGE_FEE`]) the step paid.
    pub fn stable_fee_pages(&self) -> u64 {
        self.dirtied - self.dirtied_at_start
    }

    /// What the step would have counted between its first and last reads under the ic model,
    /// for a step recorded under the canbench model (one recorded under ic already holds the
    /// fees): the canbench model's count, without its stable write fee, with the tracker's fees
    /// for the step's pages (each step is priced as an update). Exact when the two models ran
    /// the same code, which they do unless the canister acts on the counter's value inside the
    /// step.
    pub fn ic_instructions(&self) -> u64 {
        let whole = Span {
            instructions: self.last_read - self.first_read,
            pages: self.pages,
            stable_fee_pages: self.stable_fee_pages(),
        };
        whole.ic_instructions()
    }

    /// The step's reads as the ic model would have returned them, for a step recorded under the
    /// canbench model, to place spans by their ic figures ([`Step::spans_of`]): each read's value
    /// with the tracker's fees for the pages touched up to it added and canbench's stable write
    /// fees taken out (from the step's start, so that the values of one step are comparable among
    /// themselves, as [`Span::ic_instructions`] prices a stretch). Only the marks change: the
    /// result is for placing spans, not for [`Step::ic_instructions`] (which would add the fees
    /// again).
    pub fn as_ic(&self) -> Step {
        // A read's value as the end of the stretch from the step's start (value 0, no pages).
        let at = |m: &Mark| {
            let from_start = Span {
                instructions: m.value,
                pages: m.pages,
                stable_fee_pages: m.dirtied.saturating_sub(self.dirtied_at_start),
            };
            from_start.ic_instructions()
        };
        Step { marks: self.marks.iter().map(|m| Mark { value: at(m), ..*m }).collect(), ..self.clone() }
    }

    /// Whether the step read the counter more often than [`Step::marks`] keeps: a pair of the
    /// reads kept might then be as far apart as a scope by chance while the scope's own reads
    /// were dropped, so no scope is placed in it.
    pub fn truncated(&self) -> bool {
        self.reads as usize > self.marks.len()
    }

    /// The spans between two of the step's reads (in [`Step::marks`]) that advanced the counter
    /// by exactly `instructions`: where a scope that measured that much ran, if it ran in this
    /// step. None in a [`Step::truncated`] step. For a step recorded under the canbench model (or
    /// its [`Step::as_ic`]): [`Span::ic_instructions`] assumes canbench's stable write fee was
    /// charged inside the span.
    pub fn spans_of(&self, instructions: u64) -> Vec<Span> {
        if self.truncated() {
            return Vec::new();
        }
        let at: std::collections::HashMap<u64, &Mark> = self.marks.iter().map(|m| (m.value, m)).collect();
        self.marks
            .iter()
            .filter_map(|end| {
                let start = at.get(&end.value.checked_sub(instructions)?)?;
                (start.value < end.value || instructions == 0).then(|| Span {
                    instructions,
                    pages: end.pages.minus(&start.pages),
                    stable_fee_pages: end.dirtied - start.dirtied,
                })
            })
            .collect()
    }
}

/// The pages of all `steps`, summed; `None` if there are none.
pub fn steps_pages(steps: &[Step]) -> Option<PageCounts> {
    (!steps.is_empty()).then(|| steps.iter().fold(PageCounts::default(), |a, s| a.plus(&s.pages)))
}

impl Measure {
    /// The steps so far.
    pub fn steps(&self) -> &[Step] {
        &self.steps
    }
}

/// What the shared setups of `stablebench-runner bench` (`crate::shared`) hook into: the lines
/// a benchmark canister prints when its setup reaches a stage
/// (`stablebench_grid::cells::SETUP_STAGE_PREFIX`, then the stage's key and the address of the
/// slot that holds the cell's position in the grid).
pub trait StageHook: Send + fmt::Debug {
    /// The canister's setup reached `stage`. `Ok(None)`: go on as the same cell. `Ok(Some(i))`:
    /// this process is a fork that goes on as cell `i`, which the host writes into the slot;
    /// its execution ends in [`StageHook::finish`]. `Err`: the execution traps with that message.
    fn reached(&mut self, stage: &str) -> Result<Option<u32>, String>;

    /// Ends a fork's process once its execution is over (never returns).
    fn finish(self: Box<Self>, end: ExecutionEnd) -> !;

    /// The first measured step starts ([`Measure`]). `true`: this process is a fork that
    /// measures the rest of the query under the ic model; its execution ends in
    /// [`StageHook::finish`].
    fn measuring(&mut self) -> bool {
        false
    }
}

/// How an execution ended, as a fork reports it (see [`StageHook::finish`]).
#[derive(Debug)]
pub struct ExecutionEnd {
    /// How it trapped, if it did.
    pub trap: Option<String>,
    /// Whether it replied, and with what.
    pub replied: bool,
    /// The reply's bytes.
    pub reply: Vec<u8>,
    /// The reject message, if it rejected.
    pub rejected: Option<String>,
    /// Its `debug_print` lines.
    pub output: Vec<String>,
    /// Its measured steps ([`Measure::steps`]).
    pub steps: Vec<Step>,
}

impl Host {
    /// A host for canister `canister_id` controlled by `controllers`.
    pub fn new(canister_id: Principal, controllers: Vec<Principal>) -> Host {
        Host {
            msg: Message::new(Kind::Init, Vec::new(), Principal::anonymous(), 0),
            stable: StableMemory::default(),
            canister_id,
            controllers,
            cycles: replica::pocket_ic::BENCH_CYCLES,
            version: 0,
            timer: 0,
            certified_data: Vec::new(),
            env_vars: Vec::new(),
            wasm_memory_limit: replica::DEFAULT_WASM_MEMORY_LIMIT_BYTES,
            memory_allocation: 0,
            print_output: false,
            output: Vec::new(),
            limit: 0,
            building: None,
            performed: Vec::new(),
            executing: false,
            log: ExecutionLog::default(),
            profile: None,
            counter: None,
            memory: None,
            dirty: None,
            stage_hook: None,
            forked: None,
            model: CostModel::Canbench,
            pages: None,
            heap_pages: PageState::default(),
            measure: Measure::default(),
            queries_as_updates: false,
            ic_from: IcFrom::Start,
            profile_pages: false,
        }
    }

    /// Binds the instance's counter global, heap and map of written heap pages (after each
    /// instantiation).
    pub fn bind(&mut self, counter: Global, memory: Option<Memory>, dirty: Option<Memory>, pages: Option<PageSource>) {
        self.counter = Some(counter);
        self.memory = memory;
        self.dirty = dirty;
        self.pages = pages;
    }

    /// Whether the module counts the heap pages it touches.
    pub fn tracks_pages(&self) -> bool {
        self.pages.is_some()
    }

    /// The fees for a Wasm page's first access and first write in the current execution: none
    /// in the canbench model; in the ic model the tracker's, with no write fee in a plain query
    /// (which tracks accessed pages only) unless the measured step, or every query
    /// ([`Host::queries_as_updates`]), is priced as an update.
    pub fn page_fees(&self) -> (u64, u64) {
        use replica::memory_tracker::{ACCESS_FEE, WRITE_FEE};
        match self.model {
            CostModel::Canbench => (0, 0),
            CostModel::Ic if self.msg.kind == Kind::Query && !self.measure.as_update && !self.queries_as_updates => {
                (ACCESS_FEE, 0)
            }
            CostModel::Ic => (ACCESS_FEE, WRITE_FEE),
        }
    }

    /// Starts an execution: its context, stable-memory budgets, a new log, no calls.
    pub fn begin(&mut self, msg: Message) {
        self.stable.begin(msg.kind);
        self.measure = Measure::default();
        if self.ic_from == IcFrom::FirstStep {
            // The previous query's first step switched to the ic model: each starts afresh.
            self.model = CostModel::Canbench;
        }
        self.msg = msg;
        self.output.clear();
        self.log = ExecutionLog::default();
        self.building = None;
        self.performed.clear();
    }

    /// Moves an install or upgrade on to its next step, of `kind`: the step's page budgets and
    /// its own log; writes stay undoable until the whole install or upgrade is done.
    pub fn next_step(&mut self, kind: Kind) {
        self.msg.kind = kind;
        self.stable.next_step(kind);
        self.log = ExecutionLog::default();
    }

    /// A copy of the settings and system state (everything but the execution and the memories),
    /// for a second canister in the same state.
    pub fn clone_state(&self) -> Host {
        let mut h = Host::new(self.canister_id, self.controllers.clone());
        h.cycles = self.cycles;
        h.version = self.version;
        h.timer = self.timer;
        h.certified_data = self.certified_data.clone();
        h.env_vars = self.env_vars.clone();
        h.wasm_memory_limit = self.wasm_memory_limit;
        h.memory_allocation = self.memory_allocation;
        h.print_output = self.print_output;
        h.stable = StableMemory::from_bytes(self.stable.bytes.clone());
        h.model = self.model;
        h.ic_from = self.ic_from;
        h.profile_pages = self.profile_pages;
        h
    }
}

impl Host {
    /// Whether a canister whose heap is `heap_bytes` and stable memory `stable_bytes` stays within
    /// its `memory_allocation` (always, without one). The replica counts more in a canister's
    /// memory usage (its module, globals, messages in its queues, snapshots); this counts the two
    /// memories a canister grows itself. The replica's `try_grow_stable_memory` answers -1 and
    /// `try_grow_wasm_memory` traps when an execution would grow past it (dfinity/ic
    /// `rs/system_api/src/lib.rs`, read 2026-11-28; the interface specification's
    /// `memory_allocation`: "any attempt to grow memory usage beyond the memory allocation will
    /// fail", dfinity/interface-spec#300).
    pub fn fits_allocation(&self, heap_bytes: u64, stable_bytes: u64) -> bool {
        self.memory_allocation == 0 || heap_bytes.saturating_add(stable_bytes) <= self.memory_allocation
    }
}

impl wasmtime::ResourceLimiter for Host {
    /// `memory.grow` of the heap: past 4 GiB it fails (-1), as in any wasm32 engine; past the
    /// canister's `wasm_memory_limit` in an execution where the limit applies it traps, as the
    /// replica's `try_grow_wasm_memory` does, and so it does past the canister's
    /// `memory_allocation` ([`Trap::OutOfMemory`]).
    fn memory_growing(&mut self, current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        let desired = desired as u64;
        if desired > replica::MAX_WASM32_HEAP_BYTES {
            return Ok(false);
        }
        let limit = self.wasm_memory_limit;
        if self.executing
            && limit > 0
            && desired > limit
            && desired > current as u64
            && self.msg.kind.enforces_wasm_memory_limit()
        {
            return trap(Trap::WasmMemoryLimit { limit, wanted: desired });
        }
        if self.executing && desired > current as u64 && !self.fits_allocation(desired, self.stable.bytes.len() as u64)
        {
            return trap(Trap::OutOfMemory);
        }
        Ok(true)
    }

    fn table_growing(&mut self, _current: usize, _desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        Ok(true)
    }
}

/// Charges `fee` instructions; traps with [`Trap::OutOfInstructions`] below zero (DTS off).
fn charge(caller: &mut Caller<'_, Host>, fee: u64) -> HostResult<()> {
    if fee == 0 {
        // Nothing to take: the counter is as it was (and reading it is not free).
        return Ok(());
    }
    let g = caller.data().counter.expect("counter bound");
    let v = g.get(&mut *caller).unwrap_i64();
    let left = v.saturating_sub(fee.min(i64::MAX as u64) as i64);
    g.set(&mut *caller, Val::I64(left))?;
    if left < 0 {
        return trap(Trap::OutOfInstructions);
    }
    Ok(())
}

/// Instructions executed so far in this execution: limit - counter, floored at 0.
pub fn executed(limit: u64, counter: i64) -> u64 {
    (limit as i128 - counter as i128).clamp(0, u64::MAX as i128) as u64
}

fn heap<'a>(caller: &'a mut Caller<'_, Host>) -> HostResult<(&'a mut [u8], &'a mut Host)> {
    match caller.data().memory {
        Some(m) => Ok(m.data_and_store_mut(caller)),
        None => trap(Trap::HeapOutOfBounds),
    }
}

fn heap_range(heap_len: usize, at: u64, len: u64) -> HostResult<std::ops::Range<usize>> {
    match at.checked_add(len) {
        Some(end) if end <= heap_len as u64 => Ok(at as usize..end as usize),
        _ => trap(Trap::HeapOutOfBounds),
    }
}

/// Marks the heap pages of `dst .. dst + len`, which the host has just written, in the module's
/// map of written pages (the wasm code marks its own stores; see `instrument`).
fn mark_written(caller: &mut Caller<'_, Host>, dst: u64, len: u64) {
    let Some(map) = caller.data().dirty else { return };
    if len == 0 {
        return;
    }
    let map = map.data_mut(caller);
    let last = map.len().saturating_sub(1) as u64;
    let shift = crate::instrument::DIRTY_PAGE_SHIFT;
    for p in (dst >> shift)..=((dst + len - 1) >> shift).min(last) {
        map[p as usize] = 1;
    }
}

/// Collects the marks the code left in the page maps since the last collection into the host's
/// page state, clears them, and charges the fees of the pages accessed and written for the first
/// time (none in the canbench model). The replica charges at the fault itself; here the charge
/// lands at the next collection: every `performance_counter` read and the end of each execution
/// (so every value the canister reads, and every count, is the same; only an instruction-limit
/// trap from page charges alone comes at the next system call or the end instead of in
/// the middle of wasm code). Returns the counter after the charge.
pub fn collect_pages(store: &mut impl wasmtime::AsContextMut<Data = Host>) -> i64 {
    let mut store = store.as_context_mut();
    let counter = store.data().counter.expect("counter bound");
    let (access_fee, write_fee) = store.data().page_fees();
    let (mut accessed, mut written) = (0u64, 0u64);
    let mut count = |heap_pages: &mut PageState, p: u64, bits: u8| {
        let (a, w) = heap_pages.mark(p, bits);
        accessed += u64::from(a);
        written += u64::from(w);
    };
    match &store.data().pages {
        None => return counter.get(&mut store).unwrap_i64(),
        Some(PageSource::Marks(maps)) => {
            let maps = *maps;
            // The marks can only be where the heap is (and one page past it, for an access at
            // its end).
            let heap_pages = store.data().memory.map_or(0, |m| m.data_size(&store) as u64 / WASM_PAGE) as usize + 1;
            for (map, bits) in [(maps.read, 1u8), (maps.written, 3u8)] {
                let (data, host) = map.data_and_store_mut(&mut store);
                let end = heap_pages.min(data.len());
                let mut at = 0;
                while at < end {
                    // Eight entries at a time: most are zero.
                    if at + 8 <= end && u64::from_ne_bytes(data[at..at + 8].try_into().expect("eight bytes")) == 0 {
                        at += 8;
                        continue;
                    }
                    if data[at] != 0 {
                        data[at] = 0;
                        count(&mut host.heap_pages, at as u64, bits);
                    }
                    at += 1;
                }
            }
        }
        #[cfg(unix)]
        Some(PageSource::Faults(_)) => {
            let Host { pages: Some(PageSource::Faults(tracker)), heap_pages, .. } = store.data_mut() else {
                unreachable!("matched above")
            };
            tracker.drain(|p, bits| count(heap_pages, p, bits));
        }
    }
    let fee = accessed * access_fee + written * write_fee;
    let left = counter.get(&mut store).unwrap_i64().saturating_sub(fee.min(i64::MAX as u64) as i64);
    if fee > 0 {
        counter.set(&mut store, Val::I64(left)).expect("the counter is mutable");
    }
    left
}

/// Starts counting the Wasm pages touched afresh, heap and stable: at the start of each
/// execution (and of each step of an install or upgrade, each a tracker of its own in the
/// replica), and where a measured step starts (after collecting, and charging, what came before).
pub fn restart_pages(store: &mut impl wasmtime::AsContextMut<Data = Host>) {
    let mut store = store.as_context_mut();
    collect_pages(&mut store);
    // Marks past the heap (an access that trapped, a range that wrapped around) are never
    // collected: clear the whole maps, so that a later, larger heap does not find them.
    match store.data().pages.clone() {
        Some(PageSource::Marks(maps)) => {
            maps.read.data_mut(&mut store).fill(0);
            maps.written.data_mut(&mut store).fill(0);
        }
        #[cfg(unix)]
        Some(PageSource::Faults(tracker)) => tracker.protect(),
        None => {}
    }
    store.data_mut().heap_pages.clear();
    store.data_mut().stable.restart_pages();
}

/// Ends an execution's page tracking, after its last collection: the heap is the host's again
/// (with pages counted by faults, it was protected). An error if the counts were lost
/// (`crate::faults::Tracker::take_broken`).
pub fn end_pages(store: &mut impl wasmtime::AsContextMut<Data = Host>) -> Result<(), String> {
    #[cfg(unix)]
    if let Some(PageSource::Faults(tracker)) = store.as_context_mut().data().pages.clone() {
        tracker.release();
        if tracker.take_broken() {
            return Err("counting the heap pages by faults failed: the kernel refused an mprotect (too many \
                        mappings? see vm.max_map_count); run with STABLEBENCH_PAGE_MARKS=1 to count them by marks"
                .into());
        }
    }
    #[cfg(not(unix))]
    let _ = store;
    Ok(())
}

/// The Wasm pages touched since page tracking last started (collecting the code's marks first).
pub fn page_counts(store: &mut impl wasmtime::AsContextMut<Data = Host>) -> PageCounts {
    let mut store = store.as_context_mut();
    collect_pages(&mut store);
    let h = store.data();
    PageCounts {
        heap_accessed: h.heap_pages.accessed,
        heap_written: h.heap_pages.written,
        stable_accessed: h.stable.wasm_pages.accessed,
        stable_written: h.stable.wasm_pages.written,
    }
}

/// The 64 KiB Wasm pages one execution touched, page by page, in page order, each with whether
/// it was written: what [`PageCounts`] counts ([`crate::regions`] names where each lies).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PageSet {
    /// Heap (linear memory) pages.
    pub heap: Vec<(u64, bool)>,
    /// Stable memory pages.
    pub stable: Vec<(u64, bool)>,
}

/// The pages touched since page tracking last started, page by page, as the last collection left
/// them: call it right after [`page_counts`] (which collects the code's marks), as the end of an
/// execution does, so the maps are scanned once.
pub fn page_set(host: &Host) -> PageSet {
    PageSet { heap: host.heap_pages.pages(), stable: host.stable.wasm_pages.pages() }
}

/// The host's own access to the heap range `[at, at + len)` (`bits` 1 a read, 3 a write), which
/// the replica's tracker sees as the wasm code's: marks its Wasm pages and charges the first
/// access and first write of each.
fn touch_heap(caller: &mut Caller<'_, Host>, at: u64, len: u64, bits: u8) -> HostResult<()> {
    if caller.data().pages.is_none() || len == 0 {
        return Ok(());
    }
    let (access_fee, write_fee) = caller.data().page_fees();
    let (mut accessed, mut written) = (0u64, 0u64);
    let shift = crate::instrument::PAGE_SHIFT;
    for p in (at >> shift)..=((at + len - 1) >> shift) {
        let (a, w) = caller.data_mut().heap_pages.mark(p, bits);
        accessed += u64::from(a);
        written += u64::from(w);
    }
    // Counted here: the host's access must not fault (and count again, or after the charge).
    #[cfg(unix)]
    if let Some(PageSource::Faults(tracker)) = &caller.data().pages {
        tracker.open(at, len, bits);
    }
    charge(caller, accessed * access_fee + written * write_fee)
}

/// The canister printed `MEASURE_LINE`: its measured step starts at the next counter read.
fn arm_measure(c: &mut Caller<'_, Host>) {
    c.data_mut().measure.armed = true;
}

/// At a `performance_counter(0)` read: starts a measured step if one is armed (page tracking
/// afresh; at the first, the hook may fork a process that measures the rest under the ic model).
fn measure_read(c: &mut Caller<'_, Host>) -> HostResult<()> {
    if c.data().measure.armed {
        c.data_mut().measure.armed = false;
        let first = c.data().measure.steps.is_empty();
        let ic = first && {
            if c.data().ic_from == IcFrom::FirstStep {
                true
            } else if let Some(hook) = c.data_mut().forked.as_mut() {
                hook.measuring()
            } else if let Some(mut hook) = c.data_mut().stage_hook.take() {
                let ic = hook.measuring();
                if ic {
                    c.data_mut().forked = Some(hook);
                } else {
                    c.data_mut().stage_hook = Some(hook);
                }
                ic
            } else {
                false
            }
        };
        // What came before the step is collected under the fees it ran under.
        collect_pages(c);
        if ic {
            c.data_mut().model = CostModel::Ic;
        }
        // Each step is priced as an update, whatever the benchmark's own message kind.
        c.data_mut().measure.as_update = true;
        restart_pages(c);
        let dirtied = c.data().stable.dirtied;
        let step = Step { dirtied_at_start: dirtied, dirtied, ..Step::default() };
        c.data_mut().measure.steps.push(step);
    }
    Ok(())
}

/// Copies `src[offset..offset + size]` to the heap at `dst` (the `*_copy` idiom).
fn copy_out(caller: &mut Caller<'_, Host>, src: &[u8], dst: u64, offset: u64, size: u64, what: &str) -> HostResult<()> {
    let end = offset.checked_add(size);
    if end.is_none_or(|e| e > src.len() as u64) {
        return violation(format!("{what}: offset + size exceeds the length {}", src.len()));
    }
    let (mem, _) = heap(caller)?;
    heap_range(mem.len(), dst, size)?;
    touch_heap(caller, dst, size, 3)?;
    let (mem, _) = heap(caller)?;
    mem[dst as usize..(dst + size) as usize].copy_from_slice(&src[offset as usize..(offset + size) as usize]);
    mark_written(caller, dst, size);
    Ok(())
}

/// A setup-stage line's `<stage> <slot address>`, handed to the stage hook if there is one.
fn setup_stage(c: &mut Caller<'_, Host>, line: &str) -> HostResult<()> {
    let Some(mut hook) = c.data_mut().stage_hook.take() else { return Ok(()) };
    let parsed = line
        .rsplit_once(' ')
        .and_then(|(stage, slot)| Some((stage, u64::from_str_radix(slot.strip_prefix("0x")?, 16).ok()?)));
    let Some((stage, slot)) = parsed else {
        c.data_mut().stage_hook = Some(hook);
        return violation(format!("a setup-stage line without its slot: {line:?}"));
    };
    match hook.reached(stage) {
        Ok(None) => {
            c.data_mut().stage_hook = Some(hook);
            Ok(())
        }
        Ok(Some(index)) => {
            c.data_mut().forked = Some(hook);
            let (mem, host) = heap(c)?;
            let r = heap_range(mem.len(), slot, 4)?;
            // Not a page the tracker counts (the setup's own bookkeeping, which the marks never
            // saw either).
            match &host.pages {
                #[cfg(unix)]
                Some(PageSource::Faults(tracker)) => {
                    tracker.unseen(slot, 4, || mem[r].copy_from_slice(&index.to_le_bytes()))
                }
                _ => mem[r].copy_from_slice(&index.to_le_bytes()),
            }
            mark_written(c, slot, 4);
            Ok(())
        }
        Err(e) => {
            c.data_mut().stage_hook = Some(hook);
            violation(e)
        }
    }
}

fn read_heap(caller: &mut Caller<'_, Host>, src: u64, size: u64) -> HostResult<Vec<u8>> {
    let (mem, _) = heap(caller)?;
    heap_range(mem.len(), src, size)?;
    touch_heap(caller, src, size, 1)?;
    let (mem, _) = heap(caller)?;
    Ok(mem[src as usize..(src + size) as usize].to_vec())
}

fn read_text(caller: &mut Caller<'_, Host>, src: u64, size: u64, what: &str) -> HostResult<String> {
    String::from_utf8(read_heap(caller, src, size)?)
        .or_else(|_| violation(format!("{what}: the text is not valid UTF-8")))
}

fn write_u128(caller: &mut Caller<'_, Host>, dst: u64, v: u128) -> HostResult<()> {
    let (mem, _) = heap(caller)?;
    heap_range(mem.len(), dst, 16)?;
    touch_heap(caller, dst, 16, 3)?;
    let (mem, _) = heap(caller)?;
    mem[dst as usize..dst as usize + 16].copy_from_slice(&v.to_le_bytes());
    mark_written(caller, dst, 16);
    Ok(())
}

fn u128_of(hi: i64, lo: i64) -> u128 {
    ((hi as u64 as u128) << 64) | lo as u64 as u128
}

/// Where each call may be used: the letters of the interface specification's "System imports"
/// table (I init/post_upgrade, G pre_upgrade, U update, Q query, Ry/Rt reply/reject callback,
/// C cleanup, T timer, s start). `None`: everywhere, `start` included ("* s").
mod context {
    use super::Kind::{self, *};

    /// "*": everywhere but `start`.
    pub const ALL: Option<&[Kind]> =
        Some(&[Init, PreUpgrade, PostUpgrade, Update, Query, ReplyCallback, RejectCallback, Cleanup, GlobalTimer]);
    /// "* s".
    pub const ANY: Option<&[Kind]> = None;
    /// `msg_arg_data_*`: I U Q Ry.
    pub const ARG: Option<&[Kind]> = Some(&[Init, PostUpgrade, Update, Query, ReplyCallback]);
    /// `msg_reply*`, `msg_reject`: U Q Ry Rt.
    pub const REPLY: Option<&[Kind]> = Some(&[Update, Query, ReplyCallback, RejectCallback]);
    /// `msg_deadline`: U Q Ry Rt.
    pub const DEADLINE: Option<&[Kind]> = REPLY;
    /// `msg_reject_code`: Ry Rt.
    pub const CALLBACK: Option<&[Kind]> = Some(&[ReplyCallback, RejectCallback]);
    /// `msg_reject_msg_*`: Rt.
    pub const REJECT: Option<&[Kind]> = Some(&[RejectCallback]);
    /// `msg_cycles_available*`, `msg_cycles_accept*`: U Ry Rt.
    pub const CYCLES_IN: Option<&[Kind]> = Some(&[Update, ReplyCallback, RejectCallback]);
    /// `cycles_burn128`, `global_timer_set`, `root_key_*`: I G U Ry Rt C T.
    pub const REPLICATED: Option<&[Kind]> =
        Some(&[Init, PreUpgrade, PostUpgrade, Update, ReplyCallback, RejectCallback, Cleanup, GlobalTimer]);
    /// `certified_data_set`: I G U Ry Rt T.
    pub const CERTIFY: Option<&[Kind]> =
        Some(&[Init, PreUpgrade, PostUpgrade, Update, ReplyCallback, RejectCallback, GlobalTimer]);
    /// `data_certificate_size/copy`: non-replicated Q.
    pub const NON_REPLICATED_QUERY: Option<&[Kind]> = Some(&[Query]);
    /// `call_*`: U Ry Rt T.
    pub const CALL: Option<&[Kind]> = Some(&[Update, ReplyCallback, RejectCallback, GlobalTimer]);
    /// `msg_method_name_*`, `accept_message`: F (inspect_message, which the runner never runs).
    pub const INSPECT: Option<&[Kind]> = Some(&[]);
}

fn require(caller: &Caller<'_, Host>, api: &str, allowed: Option<&[Kind]>) -> HostResult<()> {
    let kind = caller.data().msg.kind;
    match allowed {
        Some(kinds) if !kinds.contains(&kind) => {
            violation(format!("\"ic0_{api}\" cannot be executed in {kind:?} mode"))
        }
        _ => Ok(()),
    }
}

/// Charges `fee` then checks the context: the order of every replica system call.
fn enter(c: &mut Caller<'_, Host>, api: &str, fee: u64, allowed: Option<&[Kind]>) -> HostResult<()> {
    charge(c, fee)?;
    require(c, api, allowed)
}

/// Adds every `ic0` function of a wasm32 canister to `linker`.
pub fn add_to_linker(linker: &mut Linker<Host>) -> wasmtime::Result<()> {
    add_blobs(linker)?;
    add_replies(linker)?;
    add_cycles(linker)?;
    add_status(linker)?;
    add_time(linker)?;
    add_logging(linker)?;
    add_stable(linker)?;
    add_env_vars(linker)?;
    add_costs(linker)?;
    add_calls(linker)?;
    Ok(())
}

/// A byte string the canister reads with a `<name>_size` / `<name>_copy` pair.
type Blob = fn(&Host) -> Result<Vec<u8>, Trap>;

/// The `_size`/`_copy` pairs: (name, context, the bytes).
const BLOBS: &[(&str, Option<&[Kind]>, Blob)] = &[
    ("msg_arg_data", context::ARG, |h| Ok(h.msg.arg.clone())),
    ("msg_caller", context::ALL, |h| Ok(h.msg.caller.as_slice().to_vec())),
    ("msg_reject_msg", context::REJECT, |h| Ok(h.msg.reject_message.clone().into_bytes())),
    ("msg_method_name", context::INSPECT, |_| Ok(Vec::new())),
    ("canister_self", context::ALL, |h| Ok(h.canister_id.as_slice().to_vec())),
    ("subnet_self", context::ALL, |_| Ok(subnet_id().as_slice().to_vec())),
    ("root_key", context::REPLICATED, |_| Ok(hex::decode(replica::MAINNET_ROOT_KEY_HEX).expect("valid hex"))),
    ("data_certificate", context::NON_REPLICATED_QUERY, |_| {
        Err(Trap::ContractViolation("data_certificate: no certificate is present offline".into()))
    }),
];

/// The id of the subnet the runner's canister lives on (a fixed, valid principal).
pub fn subnet_id() -> Principal {
    Principal::self_authenticating(b"stablebench offline subnet")
}

fn add_blobs(linker: &mut Linker<Host>) -> wasmtime::Result<()> {
    for &(name, allowed, get) in BLOBS {
        let size_name: &'static str = Box::leak(format!("{name}_size").into_boxed_str());
        let copy_name: &'static str = Box::leak(format!("{name}_copy").into_boxed_str());
        linker.func_wrap("ic0", size_name, move |mut c: Caller<'_, Host>| -> HostResult<i32> {
            enter(&mut c, size_name, fee::SYSTEM_CALL, allowed)?;
            Ok(get(c.data()).map_err(wasmtime::Error::new)?.len() as i32)
        })?;
        linker.func_wrap(
            "ic0",
            copy_name,
            move |mut c: Caller<'_, Host>, dst: i32, off: i32, size: i32| -> HostResult<()> {
                enter(&mut c, copy_name, fee::SYSTEM_CALL + size as u32 as u64, allowed)?;
                let bytes = get(c.data()).map_err(wasmtime::Error::new)?;
                copy_out(&mut c, &bytes, dst as u32 as u64, off as u32 as u64, size as u32 as u64, copy_name)
            },
        )?;
    }
    linker.func_wrap("ic0", "accept_message", |mut c: Caller<'_, Host>| -> HostResult<()> {
        enter(&mut c, "accept_message", fee::SYSTEM_CALL, context::INSPECT)
    })?;
    linker.func_wrap("ic0", "msg_reject_code", |mut c: Caller<'_, Host>| -> HostResult<i32> {
        enter(&mut c, "msg_reject_code", fee::SYSTEM_CALL, context::CALLBACK)?;
        Ok(c.data().msg.reject_code)
    })?;
    Ok(())
}

fn add_replies(linker: &mut Linker<Host>) -> wasmtime::Result<()> {
    linker.func_wrap(
        "ic0",
        "msg_reply_data_append",
        |mut c: Caller<'_, Host>, src: i32, size: i32| -> HostResult<()> {
            let size = size as u32 as u64;
            enter(&mut c, "msg_reply_data_append", fee::SYSTEM_CALL + TRANSMISSION_FACTOR * size, context::REPLY)?;
            let data = read_heap(&mut c, src as u32 as u64, size)?;
            let msg = &mut c.data_mut().msg;
            if msg.answered() {
                return violation("msg_reply_data_append: the call was already answered");
            }
            if msg.reply.len() as u64 + size > msg.max_reply {
                return violation(format!(
                    "msg_reply_data_append: the reply exceeds the maximum of {} bytes",
                    msg.max_reply
                ));
            }
            msg.reply.extend_from_slice(&data);
            Ok(())
        },
    )?;
    linker.func_wrap("ic0", "msg_reply", |mut c: Caller<'_, Host>| -> HostResult<()> {
        enter(&mut c, "msg_reply", fee::SYSTEM_CALL, context::REPLY)?;
        let msg = &mut c.data_mut().msg;
        if msg.answered() {
            return violation("msg_reply: the call was already answered");
        }
        msg.replied = true;
        Ok(())
    })?;
    linker.func_wrap("ic0", "msg_reject", |mut c: Caller<'_, Host>, src: i32, size: i32| -> HostResult<()> {
        let size = size as u32 as u64;
        enter(&mut c, "msg_reject", fee::SYSTEM_CALL + TRANSMISSION_FACTOR * size, context::REPLY)?;
        let text = read_text(&mut c, src as u32 as u64, size, "msg_reject")?;
        let msg = &mut c.data_mut().msg;
        if msg.answered() {
            return violation("msg_reject: the call was already answered");
        }
        msg.reply.clear();
        msg.rejected = Some(text);
        Ok(())
    })?;
    linker.func_wrap("ic0", "msg_deadline", |mut c: Caller<'_, Host>| -> HostResult<i64> {
        enter(&mut c, "msg_deadline", fee::SYSTEM_CALL, context::DEADLINE)?;
        Ok(0) // ingress messages and guaranteed-response calls have no deadline
    })?;
    Ok(())
}

/// Cycles: the canister holds a balance (canbench's 1,000 T). Ingress messages carry none; a call
/// between canisters ([`crate::network`]) carries what its caller attached, which the callee may
/// accept and the caller's callback sees refunded.
fn add_cycles(linker: &mut Linker<Host>) -> wasmtime::Result<()> {
    /// What each read returns: the balance, the message's unaccepted cycles, or the refund.
    #[derive(Clone, Copy)]
    enum Read {
        Balance,
        Available,
        Refunded,
    }
    fn read(h: &Host, what: Read) -> u128 {
        match what {
            Read::Balance => h.cycles,
            Read::Available => h.msg.cycles_available,
            Read::Refunded => h.msg.cycles_refunded,
        }
    }
    /// Moves up to `max` of the message's cycles into the balance; returns how many.
    fn accept(h: &mut Host, max: u128) -> u128 {
        let taken = max.min(h.msg.cycles_available);
        h.msg.cycles_available -= taken;
        h.cycles += taken;
        taken
    }
    for (name, allowed, what) in [
        ("msg_cycles_available128", context::CYCLES_IN, Read::Available),
        ("msg_cycles_refunded128", context::CALLBACK, Read::Refunded),
        ("canister_cycle_balance128", context::ALL, Read::Balance),
        ("canister_liquid_cycle_balance128", context::ALL, Read::Balance),
    ] {
        linker.func_wrap("ic0", name, move |mut c: Caller<'_, Host>, dst: i32| -> HostResult<()> {
            enter(&mut c, name, fee::SYSTEM_CALL, allowed)?;
            let v = read(c.data(), what);
            write_u128(&mut c, dst as u32 as u64, v)
        })?;
    }
    for (name, allowed, what) in [
        ("msg_cycles_available", context::CYCLES_IN, Read::Available),
        ("msg_cycles_refunded", context::CALLBACK, Read::Refunded),
        ("canister_cycle_balance", context::ALL, Read::Balance),
    ] {
        linker.func_wrap("ic0", name, move |mut c: Caller<'_, Host>| -> HostResult<i64> {
            enter(&mut c, name, fee::SYSTEM_CALL, allowed)?;
            let v = read(c.data(), what);
            match u64::try_from(v) {
                Ok(v) => Ok(v as i64),
                Err(_) => violation(format!("{name}: the amount does not fit in 64 bits, use {name}128")),
            }
        })?;
    }
    linker.func_wrap(
        "ic0",
        "msg_cycles_accept128",
        |mut c: Caller<'_, Host>, hi: i64, lo: i64, dst: i32| -> HostResult<()> {
            enter(&mut c, "msg_cycles_accept128", fee::SYSTEM_CALL, context::CYCLES_IN)?;
            let taken = accept(c.data_mut(), u128_of(hi, lo));
            write_u128(&mut c, dst as u32 as u64, taken)
        },
    )?;
    linker.func_wrap("ic0", "msg_cycles_accept", |mut c: Caller<'_, Host>, max: i64| -> HostResult<i64> {
        enter(&mut c, "msg_cycles_accept", fee::SYSTEM_CALL, context::CYCLES_IN)?;
        // The 64-bit variant takes at most 2^64 - 1 (the interface specification).
        Ok(accept(c.data_mut(), max as u64 as u128) as u64 as i64)
    })?;
    linker.func_wrap(
        "ic0",
        "cycles_burn128",
        |mut c: Caller<'_, Host>, hi: i64, lo: i64, dst: i32| -> HostResult<()> {
            enter(&mut c, "cycles_burn128", fee::SYSTEM_CALL, context::REPLICATED)?;
            let burnt = u128_of(hi, lo).min(c.data().cycles);
            c.data_mut().cycles -= burnt;
            write_u128(&mut c, dst as u32 as u64, burnt)
        },
    )?;
    linker.func_wrap(
        "ic0",
        "mint_cycles128",
        |c: Caller<'_, Host>, _hi: i64, _lo: i64, _dst: i32| -> HostResult<()> {
            // Only the cycles minting canister may mint (no fee is charged before the check).
            require(&c, "mint_cycles128", context::CYCLES_IN)?;
            violation("ic0.mint_cycles128 can only be executed on the cycles minting canister")
        },
    )?;
    Ok(())
}

fn add_status(linker: &mut Linker<Host>) -> wasmtime::Result<()> {
    linker.func_wrap("ic0", "canister_status", |mut c: Caller<'_, Host>| -> HostResult<i32> {
        enter(&mut c, "canister_status", fee::SYSTEM_CALL, context::ALL)?;
        Ok(1) // running
    })?;
    linker.func_wrap("ic0", "canister_version", |mut c: Caller<'_, Host>| -> HostResult<i64> {
        enter(&mut c, "canister_version", fee::SYSTEM_CALL, context::ALL)?;
        Ok(c.data().version as i64)
    })?;
    linker.func_wrap("ic0", "is_controller", |mut c: Caller<'_, Host>, src: i32, size: i32| -> HostResult<i32> {
        enter(&mut c, "is_controller", fee::IS_CONTROLLER + size as u32 as u64, context::ANY)?;
        let bytes = read_heap(&mut c, src as u32 as u64, size as u32 as u64)?;
        let p = Principal::try_from_slice(&bytes)
            .or_else(|e| violation(format!("is_controller: invalid principal: {e}")))?;
        Ok(c.data().controllers.contains(&p) as i32)
    })?;
    linker.func_wrap("ic0", "in_replicated_execution", |mut c: Caller<'_, Host>| -> HostResult<i32> {
        enter(&mut c, "in_replicated_execution", fee::SYSTEM_CALL, context::ANY)?;
        Ok((c.data().msg.kind != Kind::Query) as i32)
    })?;
    linker.func_wrap("ic0", "performance_counter", |mut c: Caller<'_, Host>, kind: i32| -> HostResult<i64> {
        // Charged before the counter is read, as in the replica.
        enter(&mut c, "performance_counter", fee::PERFORMANCE_COUNTER, context::ANY)?;
        if kind != 0 && kind != 1 {
            return violation(format!("performance_counter: unknown counter type {kind}"));
        }
        if kind == 0 {
            measure_read(&mut c)?;
        }
        // The pages' fees so far are part of what the counter reads. Under canbench's model
        // there are none, and outside the measured steps nothing asks for the pages yet: the
        // marks wait for the next collection.
        let counter = if c.data().model == CostModel::Ic || !c.data().measure.steps.is_empty() {
            collect_pages(&mut c)
        } else {
            c.data().counter.expect("counter bound").get(&mut c).unwrap_i64()
        };
        if counter < 0 {
            return trap(Trap::OutOfInstructions);
        }
        crate::profile::mark(c.data_mut(), counter);
        let value = executed(c.data().limit, counter);
        if kind == 0 && !c.data().measure.steps.is_empty() {
            let (pages, dirtied) = (page_counts(&mut c), c.data().stable.dirtied);
            if let Some(step) = c.data_mut().measure.steps.last_mut() {
                (step.pages, step.dirtied) = (pages, dirtied);
                if step.reads == 0 {
                    step.first_read = value;
                }
                (step.last_read, step.reads) = (value, step.reads + 1);
                if step.marks.len() < MAX_MARKS {
                    step.marks.push(Mark { value, pages, dirtied });
                }
            }
        }
        Ok(value as i64)
    })?;
    linker.func_wrap(
        "ic0",
        "certified_data_set",
        |mut c: Caller<'_, Host>, src: i32, size: i32| -> HostResult<()> {
            enter(&mut c, "certified_data_set", fee::SYSTEM_CALL + size as u32 as u64, context::CERTIFY)?;
            if size as u32 > 32 {
                return violation("certified_data_set: more than 32 bytes");
            }
            let data = read_heap(&mut c, src as u32 as u64, size as u32 as u64)?;
            c.data_mut().certified_data = data;
            Ok(())
        },
    )?;
    linker.func_wrap("ic0", "data_certificate_present", |mut c: Caller<'_, Host>| -> HostResult<i32> {
        enter(&mut c, "data_certificate_present", fee::SYSTEM_CALL, context::ALL)?;
        Ok(0) // the offline runner has no subnet to certify anything
    })?;
    Ok(())
}

fn add_time(linker: &mut Linker<Host>) -> wasmtime::Result<()> {
    linker.func_wrap("ic0", "time", |mut c: Caller<'_, Host>| -> HostResult<i64> {
        enter(&mut c, "time", fee::SYSTEM_CALL, context::ALL)?;
        Ok(c.data().msg.time as i64)
    })?;
    linker.func_wrap("ic0", "global_timer_set", |mut c: Caller<'_, Host>, ts: i64| -> HostResult<i64> {
        enter(&mut c, "global_timer_set", fee::SYSTEM_CALL, context::REPLICATED)?;
        Ok(std::mem::replace(&mut c.data_mut().timer, ts as u64) as i64)
    })?;
    Ok(())
}

/// What `debug_print` and `trap` print of a heap range: nothing if it is out of bounds (they
/// never trap on that), but an instruction-limit trap from its pages' fees stands.
fn printable(read: HostResult<Vec<u8>>) -> HostResult<Vec<u8>> {
    match read {
        Ok(bytes) => Ok(bytes),
        Err(e) if matches!(e.downcast_ref::<Trap>(), Some(Trap::HeapOutOfBounds)) => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

fn add_logging(linker: &mut Linker<Host>) -> wasmtime::Result<()> {
    linker.func_wrap("ic0", "debug_print", |mut c: Caller<'_, Host>, src: i32, size: i32| -> HostResult<()> {
        let size = size as u32 as u64;
        // Printing is enabled (PocketIC and canbench print canister output): + 1 per byte.
        let fee = fee::DEBUG_PRINT + log::charge_bytes(size, c.data().log.remaining()) + size;
        charge(&mut c, fee)?;
        c.data_mut().log.add(size);
        // Never traps, even out of bounds.
        let text = printable(read_heap(&mut c, src as u32 as u64, size))?;
        let line = String::from_utf8_lossy(&text).into_owned();
        if c.data().print_output {
            eprintln!("[canister] {line}");
        }
        if let Some(stage) = line.strip_prefix(stablebench_grid::cells::SETUP_STAGE_PREFIX) {
            setup_stage(&mut c, stage)?;
        } else if line == stablebench_grid::cells::MEASURE_LINE {
            arm_measure(&mut c);
        }
        c.data_mut().output.push(line);
        Ok(())
    })?;
    linker.func_wrap("ic0", "trap", |mut c: Caller<'_, Host>, src: i32, size: i32| -> HostResult<()> {
        let size = size as u32 as u64;
        let fee = fee::SYSTEM_CALL + size + log::charge_bytes(size, c.data().log.remaining());
        charge(&mut c, fee)?;
        let text = printable(read_heap(&mut c, src as u32 as u64, size))?;
        trap(Trap::Canister(String::from_utf8_lossy(&text).into_owned()))
    })?;
    Ok(())
}

/// Stable memory, with the native-stable-memory rules (ic:`rs/embedders/src/wasm_utils/
/// system_api_replacements.rs`): 20 + len per read or write, 1,000 per 4 KiB page an execution
/// writes for the first time, 100 per grow, per-execution page budgets.
fn add_stable(linker: &mut Linker<Host>) -> wasmtime::Result<()> {
    // The size calls are implemented in wasm by the replica's instrumentation and charged as wasm
    // code, not as a system call: no fee here.
    linker.func_wrap("ic0", "stable64_size", |c: Caller<'_, Host>| -> HostResult<i64> {
        Ok(c.data().stable.pages() as i64)
    })?;
    linker.func_wrap("ic0", "stable64_grow", |mut c: Caller<'_, Host>, pages: i64| -> HostResult<i64> {
        charge(&mut c, fee::STABLE_GROW)?;
        if !stable_fits(&mut c, pages as u64)? {
            return Ok(-1);
        }
        Ok(c.data_mut().stable.grow(pages as u64).map_or(-1, |old| old as i64))
    })?;
    linker.func_wrap(
        "ic0",
        "stable64_read",
        |mut c: Caller<'_, Host>, dst: i64, off: i64, len: i64| -> HostResult<()> {
            stable_read(&mut c, dst as u64, off as u64, len as u64)
        },
    )?;
    linker.func_wrap(
        "ic0",
        "stable64_write",
        |mut c: Caller<'_, Host>, off: i64, src: i64, len: i64| -> HostResult<()> {
            stable_write(&mut c, off as u64, src as u64, len as u64)
        },
    )?;
    linker.func_wrap("ic0", "stable_size", |c: Caller<'_, Host>| -> HostResult<i32> {
        let pages = c.data().stable.pages();
        if pages > 65_536 {
            return violation("stable_size: stable memory is larger than 4 GiB, use stable64_size");
        }
        Ok(pages as i32)
    })?;
    linker.func_wrap("ic0", "stable_grow", |mut c: Caller<'_, Host>, pages: i32| -> HostResult<i32> {
        charge(&mut c, fee::STABLE_GROW)?;
        if c.data().stable.pages() + pages as u32 as u64 > 65_536 || !stable_fits(&mut c, pages as u32 as u64)? {
            return Ok(-1);
        }
        let s = &mut c.data_mut().stable;
        Ok(s.grow(pages as u32 as u64).map_or(-1, |old| old as i32))
    })?;
    linker.func_wrap(
        "ic0",
        "stable_read",
        |mut c: Caller<'_, Host>, dst: i32, off: i32, len: i32| -> HostResult<()> {
            stable_read(&mut c, dst as u32 as u64, off as u32 as u64, len as u32 as u64)
        },
    )?;
    linker.func_wrap(
        "ic0",
        "stable_write",
        |mut c: Caller<'_, Host>, off: i32, src: i32, len: i32| -> HostResult<()> {
            stable_write(&mut c, off as u32 as u64, src as u32 as u64, len as u32 as u64)
        },
    )?;
    Ok(())
}

/// Whether stable memory may grow by `pages` within the canister's `memory_allocation`.
fn stable_fits(c: &mut Caller<'_, Host>, pages: u64) -> HostResult<bool> {
    if c.data().memory_allocation == 0 {
        return Ok(true);
    }
    let (mem, host) = heap(c)?;
    let stable = (host.stable.pages().saturating_add(pages)).saturating_mul(WASM_PAGE);
    Ok(host.fits_allocation(mem.len() as u64, stable))
}

fn stable_read(c: &mut Caller<'_, Host>, dst: u64, off: u64, len: u64) -> HostResult<()> {
    charge(c, fee::STABLE_ACCESS.saturating_add(len))?;
    if len == 0 {
        return Ok(());
    }
    let (mem, host) = heap(c)?;
    let s = &mut host.stable;
    s.check_range(off, len).map_err(wasmtime::Error::new)?;
    let r = heap_range(mem.len(), dst, len)?;
    let new = s.count_without(off, len, 2);
    if new > s.accessed_left {
        return trap(Trap::PageLimit("accessed"));
    }
    s.mark(off, len, 2, false);
    s.accessed_left -= new;
    // The memory tracker: the stable pages read, then the heap pages written.
    let (accessed, _) = s.touch(off, len, 1);
    let (access_fee, _) = host.page_fees();
    charge(c, accessed * access_fee)?;
    touch_heap(c, dst, len, 3)?;
    let (mem, host) = heap(c)?;
    mem[r].copy_from_slice(&host.stable.bytes[off as usize..(off + len) as usize]);
    mark_written(c, dst, len);
    Ok(())
}

fn stable_write(c: &mut Caller<'_, Host>, off: u64, src: u64, len: u64) -> HostResult<()> {
    charge(c, fee::STABLE_ACCESS.saturating_add(len))?;
    if len == 0 {
        return Ok(());
    }
    let dirty = {
        let (mem, host) = heap(c)?;
        let s = &host.stable;
        s.check_range(off, len).map_err(wasmtime::Error::new)?;
        heap_range(mem.len(), src, len)?;
        let (dirty, accessed) = (s.count_without(off, len, 1), s.count_without(off, len, 2));
        if dirty > s.dirty_left {
            return trap(Trap::PageLimit("modified"));
        }
        if accessed > s.accessed_left {
            return trap(Trap::PageLimit("accessed"));
        }
        dirty
    };
    match c.data().model {
        CostModel::Canbench => charge(c, DIRTY_PAGE_FEE * dirty)?,
        // The tracker's fees replace the stable write fee (#10789).
        CostModel::Ic => {}
    }
    // The memory tracker: the heap pages read, then the stable pages written.
    touch_heap(c, src, len, 1)?;
    let (access_fee, write_fee) = c.data().page_fees();
    let (accessed, written) = c.data_mut().stable.touch(off, len, 3);
    charge(c, accessed * access_fee + written * write_fee)?;
    let (mem, host) = heap(c)?;
    let s = &mut host.stable;
    let accessed = s.count_without(off, len, 2);
    s.mark(off, len, 3, true);
    s.dirty_left -= dirty;
    s.accessed_left -= accessed;
    s.dirtied += dirty;
    s.bytes[off as usize..(off + len) as usize].copy_from_slice(&mem[src as usize..(src + len) as usize]);
    Ok(())
}

/// Environment variables (canister settings; canbench's `env_vars` file). Sorted by name, as
/// the replica keeps them.
fn add_env_vars(linker: &mut Linker<Host>) -> wasmtime::Result<()> {
    fn name_at(h: &Host, index: u32) -> HostResult<Vec<u8>> {
        match h.env_vars.get(index as usize) {
            Some((name, _)) => Ok(name.clone().into_bytes()),
            None => violation(format!("env_var_name: index {index} is out of bounds ({} variables)", h.env_vars.len())),
        }
    }
    fn value_of(c: &mut Caller<'_, Host>, src: i32, size: i32) -> HostResult<Vec<u8>> {
        let name = read_text(c, src as u32 as u64, size as u32 as u64, "env_var_value")?;
        match c.data().env_vars.iter().find(|(n, _)| *n == name) {
            Some((_, v)) => Ok(v.clone().into_bytes()),
            None => violation(format!("env_var_value: no environment variable {name:?}")),
        }
    }
    linker.func_wrap("ic0", "env_var_count", |mut c: Caller<'_, Host>| -> HostResult<i32> {
        enter(&mut c, "env_var_count", fee::SYSTEM_CALL, context::ALL)?;
        Ok(c.data().env_vars.len() as i32)
    })?;
    linker.func_wrap("ic0", "env_var_name_size", |mut c: Caller<'_, Host>, index: i32| -> HostResult<i32> {
        enter(&mut c, "env_var_name_size", fee::SYSTEM_CALL, context::ALL)?;
        Ok(name_at(c.data(), index as u32)?.len() as i32)
    })?;
    linker.func_wrap(
        "ic0",
        "env_var_name_copy",
        |mut c: Caller<'_, Host>, index: i32, dst: i32, off: i32, size: i32| -> HostResult<()> {
            enter(&mut c, "env_var_name_copy", fee::SYSTEM_CALL + size as u32 as u64, context::ALL)?;
            let name = name_at(c.data(), index as u32)?;
            copy_out(&mut c, &name, dst as u32 as u64, off as u32 as u64, size as u32 as u64, "env_var_name_copy")
        },
    )?;
    linker.func_wrap(
        "ic0",
        "env_var_name_exists",
        |mut c: Caller<'_, Host>, src: i32, size: i32| -> HostResult<i32> {
            enter(&mut c, "env_var_name_exists", fee::SYSTEM_CALL, context::ALL)?;
            let name = read_text(&mut c, src as u32 as u64, size as u32 as u64, "env_var_name_exists")?;
            Ok(c.data().env_vars.iter().any(|(n, _)| *n == name) as i32)
        },
    )?;
    linker.func_wrap(
        "ic0",
        "env_var_value_size",
        |mut c: Caller<'_, Host>, src: i32, size: i32| -> HostResult<i32> {
            enter(&mut c, "env_var_value_size", fee::SYSTEM_CALL, context::ALL)?;
            Ok(value_of(&mut c, src, size)?.len() as i32)
        },
    )?;
    linker.func_wrap(
        "ic0",
        "env_var_value_copy",
        |mut c: Caller<'_, Host>, src: i32, size: i32, dst: i32, off: i32, len: i32| -> HostResult<()> {
            enter(&mut c, "env_var_value_copy", fee::SYSTEM_CALL + len as u32 as u64, context::ALL)?;
            let value = value_of(&mut c, src, size)?;
            copy_out(&mut c, &value, dst as u32 as u64, off as u32 as u64, len as u32 as u64, "env_var_value_copy")
        },
    )?;
    Ok(())
}

/// `cost_*`: what an operation would cost in cycles on a 13-node application subnet (the
/// subnet PocketIC's benchmarking subnet is), from `stablebench_grid::ic::prices`.
fn add_costs(linker: &mut Linker<Host>) -> wasmtime::Result<()> {
    use stablebench_grid::ic::prices;
    let nodes = prices::SUBNET_NODES;
    // The two that price a size pair: (name, cycles of (a, b) on `nodes` nodes).
    type Priced = fn(u64, u64, u64) -> u64;
    let sized: [(&'static str, Priced); 2] =
        [("cost_call", prices::call_cycles), ("cost_http_request", prices::http_request_cycles)];
    for (name, cycles) in sized {
        linker.func_wrap("ic0", name, move |mut c: Caller<'_, Host>, a: i64, b: i64, dst: i32| -> HostResult<()> {
            enter(&mut c, name, fee::SYSTEM_CALL, context::ANY)?;
            write_u128(&mut c, dst as u32 as u64, cycles(a as u64, b as u64, nodes) as u128)
        })?;
    }
    linker.func_wrap("ic0", "cost_create_canister", move |mut c: Caller<'_, Host>, dst: i32| -> HostResult<()> {
        enter(&mut c, "cost_create_canister", fee::SYSTEM_CALL, context::ANY)?;
        write_u128(&mut c, dst as u32 as u64, prices::scale(prices::CANISTER_CREATION_CYCLES, nodes) as u128)
    })?;
    linker.func_wrap(
        "ic0",
        "cost_http_request_v2",
        |mut c: Caller<'_, Host>, _src: i32, _size: i32, _dst: i32| -> HostResult<()> {
            enter(&mut c, "cost_http_request_v2", fee::COST_HTTP_REQUEST_V2, context::ANY)?;
            trap(Trap::Unsupported("cost_http_request_v2".into()))
        },
    )?;
    // Threshold keys live on other subnets; offline there are none, so every key name is
    // unknown: result 2 ("invalid key name"), the replica's answer for a key it does not have.
    for name in ["cost_sign_with_ecdsa", "cost_sign_with_schnorr", "cost_vetkd_derive_key"] {
        linker.func_wrap(
            "ic0",
            name,
            move |mut c: Caller<'_, Host>, src: i32, size: i32, _curve: i32, _dst: i32| -> HostResult<i32> {
                enter(&mut c, name, fee::SYSTEM_CALL + size as u32 as u64, context::ANY)?;
                read_heap(&mut c, src as u32 as u64, size as u32 as u64)?;
                Ok(2)
            },
        )?;
    }
    Ok(())
}

/// Inter-canister calls: built by `call_new` .. `call_perform`, recorded in
/// [`Host::performed`]; the canister module delivers them after the execution ends.
fn add_calls(linker: &mut Linker<Host>) -> wasmtime::Result<()> {
    linker.func_wrap(
        "ic0",
        "call_new",
        |mut c: Caller<'_, Host>,
         callee_src: i32,
         callee_size: i32,
         name_src: i32,
         name_size: i32,
         reply_fun: i32,
         reply_env: i32,
         reject_fun: i32,
         reject_env: i32|
         -> HostResult<()> {
            let bytes = callee_size as u32 as u64 + name_size as u32 as u64;
            enter(&mut c, "call_new", fee::CALL_NEW + bytes, context::CALL)?;
            let callee = read_heap(&mut c, callee_src as u32 as u64, callee_size as u32 as u64)?;
            let callee =
                Principal::try_from_slice(&callee).or_else(|e| violation(format!("call_new: invalid callee: {e}")))?;
            let method = read_text(&mut c, name_src as u32 as u64, name_size as u32 as u64, "call_new")?;
            // A call still being built is discarded.
            c.data_mut().building = Some(Call {
                callee,
                method,
                arg: Vec::new(),
                reply: (reply_fun as u32, reply_env as u32),
                reject: (reject_fun as u32, reject_env as u32),
                cleanup: None,
                cycles: 0,
            });
            Ok(())
        },
    )?;
    linker.func_wrap("ic0", "call_data_append", |mut c: Caller<'_, Host>, src: i32, size: i32| -> HostResult<()> {
        let size = size as u32 as u64;
        enter(&mut c, "call_data_append", fee::SYSTEM_CALL + TRANSMISSION_FACTOR * size, context::CALL)?;
        let data = read_heap(&mut c, src as u32 as u64, size)?;
        match c.data_mut().building.as_mut() {
            Some(call) => {
                call.arg.extend_from_slice(&data);
                Ok(())
            }
            None => violation("call_data_append: no call is being built"),
        }
    })?;
    linker.func_wrap("ic0", "call_on_cleanup", |mut c: Caller<'_, Host>, fun: i32, env: i32| -> HostResult<()> {
        enter(&mut c, "call_on_cleanup", fee::SYSTEM_CALL, context::CALL)?;
        match c.data_mut().building.as_mut() {
            Some(call) if call.cleanup.is_none() => {
                call.cleanup = Some((fun as u32, env as u32));
                Ok(())
            }
            Some(_) => violation("call_on_cleanup: the cleanup callback is already set"),
            None => violation("call_on_cleanup: no call is being built"),
        }
    })?;
    linker.func_wrap(
        "ic0",
        "call_with_best_effort_response",
        |mut c: Caller<'_, Host>, _secs: i32| -> HostResult<()> {
            enter(&mut c, "call_with_best_effort_response", fee::SYSTEM_CALL, context::CALL)?;
            match c.data().building {
                Some(_) => Ok(()),
                None => violation("call_with_best_effort_response: no call is being built"),
            }
        },
    )?;
    fn add_cycles_to_call(c: &mut Caller<'_, Host>, amount: u128) -> HostResult<()> {
        let h = c.data_mut();
        let Some(call) = h.building.as_mut() else {
            return violation("call_cycles_add: no call is being built");
        };
        if amount > h.cycles {
            return violation("call_cycles_add: the canister does not have enough cycles");
        }
        h.cycles -= amount;
        call.cycles += amount;
        Ok(())
    }
    linker.func_wrap("ic0", "call_cycles_add128", |mut c: Caller<'_, Host>, hi: i64, lo: i64| -> HostResult<()> {
        enter(&mut c, "call_cycles_add128", fee::SYSTEM_CALL, context::CALL)?;
        add_cycles_to_call(&mut c, u128_of(hi, lo))
    })?;
    linker.func_wrap("ic0", "call_cycles_add", |mut c: Caller<'_, Host>, amount: i64| -> HostResult<()> {
        enter(&mut c, "call_cycles_add", fee::SYSTEM_CALL, context::CALL)?;
        add_cycles_to_call(&mut c, amount as u64 as u128)
    })?;
    linker.func_wrap("ic0", "call_perform", |mut c: Caller<'_, Host>| -> HostResult<i32> {
        enter(&mut c, "call_perform", fee::CALL_PERFORM, context::CALL)?;
        let h = c.data_mut();
        match h.building.take() {
            Some(call) => {
                h.performed.push(call);
                Ok(0)
            }
            None => violation("call_perform: no call is being built"),
        }
    })?;
    Ok(())
}
