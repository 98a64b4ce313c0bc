//! The benchmark canister's live API (`stablebench_bench.did`, feature `canbench`): every cell of
//! the grid, run on a live canister through Candid, so that a dfx user gets the suite's numbers
//! from a local replica or mainnet.
//!
//! - `bench_cells` lists the cells with their sizes, settings and setup steps.
//! - `bench_setup(name, budget)` builds the cell's starting state call by call: first a reset (the
//!   database emptied and opened with the cell's profile, every key-value store emptied, as a fresh
//!   install has them), then the same setup steps the canbench benchmark runs in one go, each
//!   resumable under the update budget (default 30 B). Call it until `complete`.
//! - `bench_run(name)` (update) and `bench_run_query(name)` (query: changes discarded, free for
//!   the caller) run the measured step with the very code canbench measures (the bench host's
//!   `workload` modules, against this canister's `CanisterEnv::Live`), check
//!   the result with the oracle, and reply with a [`BenchReport`].
//!
//! - `bench_chia_blocks(name, blocks)` (update) replays a Chia cell's chain the way a canister
//!   taking blocks in messages would: each call accepts the next blocks and commits them (one
//!   flush), and replies with the instructions of that work; the call that completes the chain
//!   checks the reads and a rewind against the model. The runner's pages-dirtied measurement
//!   (`runner/tests/chia_pages.rs`) is built on it.
//!
//! Which cell is set up, and how far, is kept in stable memory (`memory_ids::BENCH_STATE`), so a
//! setup survives an upgrade: set up, upgrade, then `bench_run_query` measures the first reads
//! after an upgrade (cold caches). A measured step that changes the state (the inserts, deletes,
//! index build, NodeStore) uses the setup up: the next run needs a new `bench_setup`.

use std::cell::RefCell;

use canbench_rs::BenchResult;
use ic_stable_structures::memory_manager::VirtualMemory;
use ic_stable_structures::{DefaultMemoryImpl, StableCell};
use stablebench::bench::{SetupStep, SetupStepRun};
use stablebench::chia::{self, Chain, ChainSpec};
use stablebench::kv::gen::TrieDataset;
use stablebench::kv::Probe;
use stablebench::Meter;
use stablebench_grid::cells::{self, Cell, Op, Workload};
use stablebench_grid::chia::{MAX_BLOCKS_PER_CALL, SEED as CHIA_SEED};
use stablebench_grid::ic::{memory_ids, prices};
use stablebench_grid::live::{BenchCell, BenchReport, CallKind, ChiaProgress, Oracle, ScopeReport, SetupProgress};
use stablebench_grid::KV_SEED;

use crate::benches::CanisterEnv;
use crate::limits::{self, InstructionBudget};
use crate::{active_profile, db, kv, require_controller, update_budget, Error};
use stablebench_host::workload::{self, LiveStep};
use stablebench_host::{Counter, SETUP_BATCH};

/// The live setup's state: the cell set up, the step reached and the units of it done, and
/// whether a measured step has used the setup up.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct State {
    name: String,
    step: usize,
    done: u64,
    consumed: bool,
}

impl State {
    fn encode(&self) -> String {
        format!("{} {} {} {}", self.name, self.step, self.done, self.consumed)
    }

    /// The state in `text`; an empty or unreadable one is "nothing set up".
    fn decode(text: &str) -> State {
        let mut parts = text.split(' ');
        let mut next = || parts.next().unwrap_or_default();
        let name = next().to_string();
        match (next().parse(), next().parse(), next().parse()) {
            (Ok(step), Ok(done), Ok(consumed)) => State { name, step, done, consumed },
            _ => State::default(),
        }
    }
}

thread_local! {
    static STATE: RefCell<StableCell<String, VirtualMemory<DefaultMemoryImpl>>> =
        RefCell::new(StableCell::init(db::memory(memory_ids::BENCH_STATE), String::new()));
}

/// A Chia replay taken block by block: where the chain stands and what the checks need. It lives
/// in the heap (the chain's generator keeps the unspent set), so an upgrade ends it.
struct ChiaReplay {
    name: String,
    chain: Chain,
    tracker: chia::bench::Tracker,
    blocks: u64,
    spends: u64,
    complete: bool,
}

thread_local! {
    static CHIA: RefCell<Option<ChiaReplay>> = const { RefCell::new(None) };
}

fn load_state() -> State {
    STATE.with_borrow(|c| State::decode(c.get()))
}

fn save_state(state: &State) {
    STATE.with_borrow_mut(|c| {
        c.set(state.encode());
    });
}

/// One step of a live setup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// Empty the database (opened with the cell's profile) and every key-value store.
    Reset,
    /// A step the cell's workload declares ([`workload::live_setup`]).
    Workload(LiveStep),
}

impl Step {
    fn name(self) -> &'static str {
        match self {
            Step::Reset => "reset",
            Step::Workload(LiveStep::UsersOrders(s)) => s.name(),
            Step::Workload(LiveStep::KvLoad) => "load",
        }
    }

    fn units(self, cell: &Cell) -> u64 {
        match self {
            Step::Reset => 1,
            Step::Workload(LiveStep::UsersOrders(s)) => s.units(cell.sizes()),
            Step::Workload(LiveStep::KvLoad) => cell.size,
        }
    }

    /// A step that is one statement, whose cost the budget cannot stop midway: it only starts a
    /// call, so that it gets the whole budget.
    fn starts_a_call(self) -> bool {
        matches!(
            self,
            Step::Reset | Step::Workload(LiveStep::UsersOrders(SetupStep::Indexes | SetupStep::DeleteAllOrders))
        )
    }
}

fn steps(cell: &Cell) -> Vec<Step> {
    let mut steps = vec![Step::Reset];
    steps.extend(workload::live_setup(cell).into_iter().map(Step::Workload));
    steps
}

fn lookup(name: &str) -> Result<Cell, Error> {
    cells::by_name(name).ok_or_else(|| Error::InvalidArgument {
        message: format!("no benchmark is named {name:?}: bench_cells lists them"),
    })
}

/// Runs `step` from unit `done`; returns the units done afterwards. A failure traps, so the call
/// leaves nothing half-done (the state and the data roll back together).
fn run_step(cell: &Cell, step: Step, done: u64, meter: &InstructionBudget) -> u64 {
    let name = cell.name();
    let failed = |e: String| -> ! {
        ic_cdk::trap(format!("bench_setup({name:?}): step {}: {e}; nothing was changed", step.name()))
    };
    match step {
        Step::Reset => {
            let profile = cell.profile.unwrap_or_else(active_profile);
            db::reset(&profile).unwrap_or_else(|e| failed(e.to_string()));
            kv::reset();
            workload::chia::reset(&CanisterEnv::live()).unwrap_or_else(|e| failed(e));
            CHIA.set(match cell.op {
                Op::Chia(_) => Some(ChiaReplay {
                    name: cell.name(),
                    chain: chia::chain(ChainSpec { coins: cell.size, seed: CHIA_SEED }),
                    tracker: chia::bench::Tracker::new(),
                    blocks: 0,
                    spends: 0,
                    complete: false,
                }),
                _ => None,
            });
            // An upgrade reopens the database with the saved profile; a benchmark-only one is never
            // saved (an upgrade then refuses to run the benchmark, see `ready`).
            if profile.deployable().is_ok() {
                db::save_profile(profile.name);
            }
            1
        }
        Step::Workload(LiveStep::UsersOrders(s)) => db::with_conn(|conn| {
            // The step writes orders past the jobs, which keep their count: forget it.
            let done = s.run(conn, cell.sizes(), done, meter)?;
            stablebench::counts::Kept::forget(&mut db::StableKept);
            Ok::<_, stablebench::Error>(done)
        })
        .unwrap_or_else(|e| failed(e.to_string())),
        Step::Workload(LiveStep::KvLoad) => {
            // kv_load's loop, in canbench's setup batches (one transaction each).
            let data = TrieDataset { size: cell.size, seed: KV_SEED };
            let backend = cell.backend.try_into().unwrap_or_else(|e: Error| failed(format!("{e:?}")));
            kv::with_store(backend, true, |store| {
                kv::load(
                    store.expect("with_store creates the store"),
                    &data,
                    done,
                    cell.size,
                    SETUP_BATCH as u64,
                    meter,
                )
            })
            .map(|batch| batch.next_offset)
            .unwrap_or_else(|e| failed(format!("{e:?}")))
        }
    }
}

fn progress(name: &str, steps: &[Step], cell: &Cell, state: &State) -> SetupProgress {
    let current = steps[state.step.min(steps.len() - 1)];
    let complete = state.step >= steps.len();
    SetupProgress {
        name: name.to_string(),
        complete,
        step: current.name().to_string(),
        done: if complete { current.units(cell) } else { state.done },
        units: current.units(cell),
        steps_done: state.step as u64,
        steps: steps.len() as u64,
        instructions: limits::instructions(),
    }
}

/// The grid's benchmarks, with their sizes, settings and setup steps.
#[ic_cdk::query]
fn bench_cells() -> Vec<BenchCell> {
    cells::cells()
        .iter()
        .map(|c| BenchCell {
            name: c.name(),
            workload: c.workload().name().to_string(),
            operation: c.op_name(),
            backend: c.backend.name().to_string(),
            size: c.size,
            profile: c.profile.map(|p| p.name.to_string()),
            setup: steps(c).iter().map(|s| s.name().to_string()).collect(),
            repeatable: c.repeatable(),
            read: c.is_read(),
        })
        .collect()
}

/// Builds the starting state of benchmark `name` on this canister, call by call: the first call
/// resets the database and the key-value stores (everything they held is deleted), then each call
/// continues the setup until the instruction budget (default 30 B) is used; call again until
/// `complete`. Calling it for a benchmark that is set up and unused returns at once. A failing
/// step traps, leaving the canister as it was before the call. Controllers only.
#[ic_cdk::update]
fn bench_setup(name: String, budget: Option<u64>) -> Result<SetupProgress, Error> {
    require_controller()?;
    let cell = lookup(&name)?;
    if let Some(message) = workload::live_setup_refusal(&cell) {
        // Refused before the reset, so that the canister's data stays.
        return Err(Error::InvalidArgument { message });
    }
    let meter = update_budget(budget)?;
    let steps = steps(&cell);
    let mut state = load_state();
    if state.name != name || state.consumed {
        state = State { name: name.clone(), ..State::default() };
    }
    let mut worked = false;
    while state.step < steps.len() && !meter.exhausted() {
        let step = steps[state.step];
        if worked && step.starts_a_call() {
            break;
        }
        state.done = run_step(&cell, step, state.done, &meter);
        if state.done >= step.units(&cell) {
            state.step += 1;
            state.done = 0;
        }
        worked = true;
        save_state(&state);
    }
    Ok(progress(&name, &steps, &cell, &state))
}

/// The cell `name` if its setup is complete, unused, and on a database open with its profile.
fn ready(name: &str) -> Result<(Cell, State), Error> {
    let cell = lookup(name)?;
    let state = load_state();
    let not_ready = |why: String| Error::InvalidArgument {
        message: format!("{name} is not set up: {why}; call bench_setup({name:?}) until it is complete"),
    };
    if state.name != name {
        let current = if state.name.is_empty() { "nothing".to_string() } else { state.name.clone() };
        return Err(not_ready(format!("the canister is set up for {current}")));
    }
    if state.consumed {
        return Err(not_ready("its measured step changed the state and used the setup up".into()));
    }
    if state.step < steps(&cell).len() {
        return Err(not_ready("the setup is not complete".into()));
    }
    if let Some(profile) = cell.profile {
        if db::open_profile() != profile.name {
            return Err(not_ready(format!(
                "the database is open with profile {:?} (an upgrade reopens it with the saved profile, and \
                 benchmark-only profiles are never saved)",
                db::open_profile()
            )));
        }
    }
    Ok((cell, state))
}

/// Runs the measured step with the code canbench runs.
fn measure(cell: &Cell) -> Result<(BenchResult, Oracle), Error> {
    if let Some(message) = workload::live_run_refusal(cell) {
        return Err(Error::InvalidArgument { message });
    }
    // A Chia replay uses the setup's empty schemas: no block-by-block replay can follow it.
    CHIA.set(None);
    let env = CanisterEnv::live();
    let measured = workload::measure(&env, cell);
    if measured.is_ok() && cell.workload() == Workload::UsersOrders {
        // Outside the measured region: the step wrote orders past the jobs' count.
        stablebench::counts::Kept::forget(&mut db::StableKept);
    }
    // A store's refusal keeps its kind (the heap map's ceiling, a backend of the other canister).
    measured.map_err(|message| {
        env.live_failure().unwrap_or_else(|| Error::Internal {
            message: format!("{}: the measured step failed: {message}", cell.name()),
        })
    })
}

fn report(name: String, call: CallKind, result: BenchResult, oracle: Oracle) -> BenchReport {
    let scopes = result
        .scopes
        .iter()
        .map(|(name, m)| ScopeReport { name: name.clone(), instructions: m.instructions, calls: m.calls })
        .collect();
    let message_instructions = limits::instructions();
    let cycles_13_nodes = prices::update_cycles_on(message_instructions, prices::SUBNET_NODES);
    BenchReport {
        name,
        call,
        instructions: result.total.instructions,
        calls: result.total.calls,
        heap_increase_pages: result.total.heap_increase,
        stable_memory_increase_pages: result.total.stable_memory_increase,
        scopes,
        message_instructions,
        heap_bytes: crate::memory::heap_bytes(),
        stable_memory_bytes: crate::memory::stable_bytes(),
        oracle,
        cycles_13_nodes,
        cycles_34_nodes: prices::update_cycles_on(message_instructions, prices::LARGE_SUBNET_NODES),
        usd_13_nodes: prices::usd(cycles_13_nodes),
    }
}

/// Runs benchmark `name`'s measured step as an update (its changes are kept: a read warms the
/// caches for the next call) and reports what canbench reports, what the message cost and the
/// oracle's verdict. Needs a complete `bench_setup`; a step that changes the state (not
/// `repeatable` in `bench_cells`) needs a new setup before it runs again. Controllers only.
#[ic_cdk::update]
fn bench_run(name: String) -> Result<BenchReport, Error> {
    require_controller()?;
    let (cell, mut state) = ready(&name)?;
    let (result, oracle) = measure(&cell)?;
    if !cell.repeatable() {
        state.consumed = true;
        save_state(&state);
    }
    Ok(report(name, CallKind::Update, result, oracle))
}

/// Like `bench_run`, as a query: its changes are discarded, so the setup stays as it was and a
/// cold cache (after an upgrade) stays cold for the next query; free for the caller, within the
/// query's 5 B instruction limit. Controllers only.
#[ic_cdk::query]
fn bench_run_query(name: String) -> Result<BenchReport, Error> {
    require_controller()?;
    let (cell, _) = ready(&name)?;
    let (result, oracle) = measure(&cell)?;
    Ok(report(name, CallKind::Query, result, oracle))
}

/// Replays the next `blocks` blocks (1 to `MAX_BLOCKS_PER_CALL`) of Chia benchmark `name`'s chain
/// into its schema and commits them (one flush for the call), as a canister taking blocks in
/// messages does; replies with where the replay stands and the instructions of the accepts and
/// the flush. The call that creates the last coin also measures the reads and a rewind and
/// checks them, with every block, against the model (`oracle`). Needs a complete
/// `bench_setup(name)`, and the heap the setup started the replay in (an upgrade ends it: set up
/// again). Once it has run, `bench_run(name)` needs a new setup. A failing step traps, leaving the
/// canister as it was before the call. Controllers only.
#[ic_cdk::update]
fn bench_chia_blocks(name: String, blocks: u32) -> Result<ChiaProgress, Error> {
    require_controller()?;
    let cell = lookup(&name)?;
    let Op::Chia(schema) = cell.op else {
        return Err(Error::InvalidArgument { message: format!("{name} is not a Chia benchmark") });
    };
    if blocks == 0 || blocks > MAX_BLOCKS_PER_CALL {
        return Err(Error::InvalidArgument {
            message: format!("blocks must be 1 to {MAX_BLOCKS_PER_CALL}, not {blocks}"),
        });
    }
    let mut state = load_state();
    let again = |why: &str| Error::InvalidArgument {
        message: format!("{name}: {why}; call bench_setup({name:?}) until it is complete"),
    };
    if state.name != name || state.step < steps(&cell).len() {
        return Err(again("not set up"));
    }
    if let Some(profile) = cell.profile {
        if db::open_profile() != profile.name {
            return Err(again("the database is open with another profile (an upgrade reopens it with the saved one)"));
        }
    }
    let Some(mut replay) = CHIA.take().filter(|r| r.name == name) else {
        return Err(again(
            "no block-by-block replay is under way (the heap keeps its position: an upgrade or a bench_run ends it)",
        ));
    };
    if replay.complete {
        CHIA.set(Some(replay));
        return Err(again("the chain is replayed"));
    }
    let failed =
        |e: stablebench::Error| -> ! { ic_cdk::trap(format!("bench_chia_blocks({name:?}): {e}; nothing was changed")) };
    let (mut taken, mut coins, mut spends, mut instructions) = (0u64, 0u64, 0u64, 0u64);
    let oracle = workload::chia::with_schema(&CanisterEnv::live(), schema, |s| {
        for _ in 0..blocks {
            let Some(block) = replay.chain.next() else { break };
            let t0 = Counter.instructions();
            s.accept_block(&block)?;
            instructions += Counter.instructions().saturating_sub(t0);
            replay.tracker.observe(&block);
            taken += 1;
            coins += block.confirms.len() as u64;
            spends += block.spends.len() as u64;
        }
        let t0 = Counter.instructions();
        s.flush()?;
        instructions += Counter.instructions().saturating_sub(t0);
        if replay.chain.created() < cell.size {
            return Ok(None);
        }
        replay.complete = true;
        let tracker = std::mem::take(&mut replay.tracker);
        Ok(Some(match chia::bench::reads(s, tracker, &Counter) {
            Ok(_) => Oracle::Pass("lookups, block reads and the rewind as the model has them".into()),
            Err(stablebench::Error::WrongResult(why)) => Oracle::Fail(why),
            Err(e) => return Err(e),
        }))
    })
    .unwrap_or_else(|e| failed(e));
    replay.blocks += taken;
    replay.spends += spends;
    state.consumed = true;
    save_state(&state);
    let progress = ChiaProgress {
        name,
        blocks: taken,
        coins,
        spends,
        instructions,
        blocks_total: replay.blocks,
        coins_total: replay.chain.created(),
        spends_total: replay.spends,
        complete: replay.complete,
        oracle,
        message_instructions: limits::instructions(),
    };
    CHIA.set(Some(replay));
    Ok(progress)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_round_trips_and_garbage_means_nothing_set_up() {
        let s = State { name: "sqlite_select_join_1m_reference".into(), step: 3, done: 42, consumed: true };
        assert_eq!(State::decode(&s.encode()), s);
        assert_eq!(State::decode(""), State::default());
        assert_eq!(State::decode("x y z"), State::default());
    }

    #[test]
    fn every_cell_starts_with_a_reset_and_the_users_orders_steps_follow_the_library() {
        for cell in cells::cells() {
            let s = steps(&cell);
            assert_eq!(s[0], Step::Reset, "{}", cell.name());
            if let Op::UsersOrders(b) = cell.op {
                assert_eq!(s.len(), 1 + b.setup_steps().len());
            }
        }
    }
}
