//! # stablebench-host
//!
//! What both canisters' benchmarks share (their feature `canbench`):
//! - the grid's workloads ([`workload`]), each a module that runs a cell's setup and measured step
//!   against the small [`Env`] each canister implements (open SQLite with a profile, run a
//!   write, stable memory by id, the cell's key-value store), so the ic-rusqlite canister
//!   (`canister/`), its live API, and the ic-sqlite-vfs canister (`vfs/`) run exactly this code;
//! - [`run`], which a generated canbench function calls with its position in the grid;
//! - the instruction counter and scopes as a [`Probe`] ([`Counter`]), memory in wasm pages, the
//!   setup-stage report where the runner's shared setups fork ([`setup_stage`]) and the setup
//!   batching ([`SETUP_BATCH`]).
//!
//! The canbench functions themselves are generated from the grid by each canister's `build.rs`
//! (`stablebench_grid::canbench`).

pub mod env;
pub mod workload;

use std::collections::BTreeMap;

use canbench_rs::{bench_scope, BenchResult, Measurement};
use stablebench::kv::Probe;
use stablebench_grid::cells::{self, Canister, Cell, Stage, MEASURE_LINE, SETUP_STAGE_PREFIX, SWITCHED_CELL_PREFIX};
use stablebench_grid::live::Oracle;

pub use env::Env;

/// Rows per transaction when a benchmark's setup loads a key-value data set (never measured).
pub const SETUP_BATCH: usize = 10_000;

/// Traps with the cell's name, the step that failed and why: a benchmark that cannot run has no
/// result to report.
pub fn fail(name: &str, step: &str, e: impl std::fmt::Display) -> ! {
    ic_cdk::trap(format!("{name}: {step}: {e}"))
}

/// Runs cell `index` of `canister`'s grid (the generated canbench functions call the canister's
/// `run` with their own position) in `env`, a freshly installed canister: its workload's
/// [`bench`](workload::bench) runs the setup and the measured step, and returns the cell it went
/// on as (itself, unless a setup stage said otherwise, see [`setup_stage`]) with what it measured. A failure or a wrong result traps, with
/// the cell's name; a switched cell is reported after the measurement.
///
/// Everything before a setup stage depends only on the setup, never on which cell runs: the grid
/// is looked up by position, and the list stays allocated until the end.
pub fn run<E: Env>(canister: Canister, index: usize, env: &E) -> BenchResult {
    let grid = cells::cells_of(canister);
    let Some(&first) = grid.get(index) else { fail(&index.to_string(), "lookup", "no such cell in the grid") };
    let (cell, measured) = workload::bench(env, &grid, index, first);
    let (result, oracle) = measured.unwrap_or_else(|e| fail(&cell.name(), "run", e));
    // After the measurement (which this allocation cannot move): which cell this query went on as.
    if cell != first {
        ic_cdk::api::debug_print(format!("{SWITCHED_CELL_PREFIX}{}", cell.name()));
    }
    match oracle {
        Oracle::Pass(_) => result,
        Oracle::Fail(why) => fail(&cell.name(), "verify", why),
    }
}

/// A measured step's canbench result and the oracle's verdict on what it returned; `Err` when the
/// step itself failed.
pub type Measured = Result<(BenchResult, Oracle), String>;

/// A workload run's result, or what the benchmark reports instead: a
/// [`WrongResult`](stablebench::Error::WrongResult) is the oracle's verdict (a check failed, the
/// numbers are void), any other error a failed step.
pub fn checked_run<T>(run: stablebench::Result<T>) -> Result<T, Measured> {
    match run {
        Ok(t) => Ok(t),
        Err(stablebench::Error::WrongResult(why)) => {
            Err(Ok((BenchResult { total: Measurement::default(), scopes: BTreeMap::new() }, Oracle::Fail(why))))
        }
        Err(e) => Err(Err(e.to_string())),
    }
}

pub fn verdict(checked: Result<String, String>) -> Oracle {
    match checked {
        Ok(what) => Oracle::Pass(what),
        Err(why) => Oracle::Fail(why),
    }
}

/// Reports that the setup of `grid[index]` reached `stage` and returns the cell this query
/// measures from here on, with its position in `grid`: the same one, except where
/// `stablebench-runner bench` shares the setup among the cells that pass through this stage.
///
/// The report is one `debug_print` line, `stablebench: setup_stage <stage> <address>`: the
/// runner (its shared setups) forks the canister's whole execution here, once for each other
/// cell whose setup ends at this stage, and writes that cell's position at `<address>` in the
/// copy, which then measures that cell from exactly the state its own query would have had.
/// Under canbench (PocketIC), or `--full-setups`, the line is only printed, and the query goes
/// on as itself. The line is formatted on the stack: reporting a stage allocates nothing on the
/// heap, so the heap is the same whichever cell reaches it.
pub fn setup_stage(grid: &[Cell], index: usize, stage: Stage) -> (usize, Cell) {
    use std::fmt::Write;
    let mut slot = index as u32;
    // SAFETY: `slot` is a live local; the volatile accesses keep it in memory, where the runner
    // may rewrite it during the debug_print below.
    unsafe { std::ptr::write_volatile(&mut slot, index as u32) };
    let mut line = StackLine::default();
    let fits = write!(line, "{SETUP_STAGE_PREFIX}{stage} {:#x}", &raw const slot as usize).is_ok();
    if !fits {
        ic_cdk::trap("a setup stage's key does not fit its line");
    }
    ic_cdk::api::debug_print(line.as_str());
    // SAFETY: as above.
    let now = unsafe { std::ptr::read_volatile(&slot) } as usize;
    match grid.get(now) {
        Some(cell) => (now, *cell),
        None => ic_cdk::trap("the runner switched to a cell outside the grid"),
    }
}

/// A line of at most 256 bytes formatted on the stack (no heap allocation).
struct StackLine {
    bytes: [u8; 256],
    len: usize,
}

impl Default for StackLine {
    fn default() -> Self {
        StackLine { bytes: [0; 256], len: 0 }
    }
}

impl StackLine {
    fn as_str(&self) -> &str {
        std::str::from_utf8(&self.bytes[..self.len]).unwrap_or_default()
    }
}

impl std::fmt::Write for StackLine {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let end = self.len + s.len();
        let dest = self.bytes.get_mut(self.len..end).ok_or(std::fmt::Error)?;
        dest.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// The canister's [`Probe`]: the instruction counter canbench reads, and `bench_scope`.
pub struct Counter;

impl Probe for Counter {
    fn instructions(&self) -> u64 {
        instructions()
    }
    fn phase<R>(&self, name: &'static str, f: impl FnOnce() -> R) -> R {
        let _scope = bench_scope(name);
        f()
    }
    fn message_starts(&self) {
        message_starts();
    }
}

/// Tells the offline runner that a timed part which would be a message of its own starts at the
/// next instruction-counter read (`MEASURE_LINE`; see `Probe::message_starts`): before
/// `bench_fn`, and through [`Counter`] before each timed iteration. One `debug_print` of a static
/// line, outside the timed part; nothing is allocated.
pub fn message_starts() {
    ic_cdk::api::debug_print(MEASURE_LINE);
}

/// Heap and stable memory sizes in wasm pages, as canbench measures them.
pub fn pages() -> (u64, u64) {
    #[cfg(target_arch = "wasm32")]
    {
        (core::arch::wasm32::memory_size(0) as u64, ic_cdk::stable::stable_size())
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        (0, 0)
    }
}

/// Instructions executed so far in this message (`ic0.performance_counter(0)`; 0 natively).
fn instructions() -> u64 {
    #[cfg(target_arch = "wasm32")]
    {
        ic_cdk::api::performance_counter(0)
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        0
    }
}
