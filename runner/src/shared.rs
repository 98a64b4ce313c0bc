//! Shared setups: `stablebench-runner bench` builds each setup state once for all the benchmarks
//! that start from it, with canbench's results unchanged to the instruction, page and byte.
//!
//! canbench runs every benchmark as a query on the freshly installed canister, so every
//! benchmark builds its own starting state: each of the nine users/orders steps of a profile
//! loads 100,000 users and 1,000,000 orders before it measures. The grid declares which states a
//! cell's setup passes through ([`stablebench_grid::cells::Stage`]), and the benchmark canisters
//! report each one as they reach it (a `debug_print` line with the stage's key and the address
//! of the slot that holds the cell's position in the grid; see the canisters' `setup_stage`).
//!
//! Here the benchmarks become groups ([`plan`]): a leader, whose query runs the longest setup,
//! and followers, each of whose stages are the first stages of the leader's. Every group runs in
//! a process forked from the installed canister. When the leader's setup reaches a stage where
//! followers end their setup, its process forks once per follower: the copy is the leader's
//! whole execution at that point (heap, stack, globals, stable memory, and what the message has
//! been charged so far), the host writes the follower's position into the slot, and the copy
//! goes on as the follower. Nothing before the stage depends on which cell runs (the canisters
//! look the grid up by position and report stages without allocating), so the copy is in the
//! state the follower's own query would have reached, and measures exactly what canbench
//! measures. `runner/tests/shared_setups.rs` runs a sample covering every workload both ways and
//! requires identical results; `--full-setups` runs every benchmark's own setup instead, as
//! canbench does on PocketIC.
//!
//! Processes, not threads: a fork copies one thread, so the forks happen where no other thread
//! of the process can hold a lock (the execution thread of a group's process, whose other
//! thread only waits for it). A token pipe (as make's jobserver) keeps at most `jobs` executions
//! running at once across all processes; each process writes its benchmark's outcome to a file
//! that the main process reads when the group's process has ended. Nothing is ever undone (each
//! process ends with its execution), so the code runs without heap tracking.
//!
//! Both cost models in one run (`both`): where a benchmark's first measured step starts (see
//! `host::Measure`), its process forks once more; the copy goes on under the ic model (the IC's
//! memory tracker, `replica::memory_tracker`) and writes its outcome beside the canbench one,
//! while the process waits for it, then goes on under the canbench model. The setup runs once,
//! the measured part twice; except where the grid says how the mainnet figure follows from the
//! canbench one and the steps' pages (`Cell::ic_pricing`: the users/orders steps, one step each,
//! and sysrepo's tries, a step each), which the runner derives ([`crate::suite::derive_ic`]).

use std::collections::{BTreeMap, HashMap};
use std::os::fd::RawFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use candid::Principal;
use stablebench_grid::cells::{self, Canister as GridCanister, IcPricing, SWITCHED_CELL_PREFIX};

use crate::canbench::BenchResult;
use crate::canister::{Canister, Code};
use crate::host::{ExecutionEnd, PageCounts, StageHook, Step};
use crate::suite::{bench_options, BenchError, BenchSetup, Run, REPLY_BYTES_PREFIX};

/// A benchmark that goes on from a leader's setup stage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Follower {
    /// Its position in the run's list of benchmarks.
    pub bench: usize,
    /// Its position in its canister's grid (`cells_of`), which the canister reads from the slot.
    pub grid_index: u32,
}

/// The benchmarks one process runs: a leader's query, and the followers forked from its stages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    /// The leader's position in the run's list of benchmarks.
    pub leader: usize,
    /// The leader's setup stages in order (their keys), each with the followers whose setup
    /// ends there. Empty for a benchmark that is no grid cell or has no stages.
    pub stages: Vec<(String, Vec<Follower>)>,
}

impl Group {
    /// The leader and every follower, as positions in the run's list.
    pub fn benches(&self) -> impl Iterator<Item = usize> + '_ {
        std::iter::once(self.leader).chain(self.stages.iter().flat_map(|(_, f)| f.iter().map(|f| f.bench)))
    }
}

/// Groups the benchmarks `names` (in run order) by the setup stages the grid declares: each
/// benchmark with stages joins the first group whose leader's stages begin with all of its own,
/// or leads a new group (the longest setups lead, so the nine users/orders steps of a profile
/// are one group); a benchmark without stages, or that is no grid cell, runs alone. Groups come
/// in the order of their leaders.
pub fn plan(names: &[String]) -> Vec<Group> {
    let mut grid = HashMap::new();
    for canister in GridCanister::ALL {
        for (i, cell) in cells::cells_of(canister).into_iter().enumerate() {
            grid.insert(cell.name(), (i as u32, cell));
        }
    }
    // (position, grid position, stage keys), longest setups first (stable: run order within).
    let mut staged: Vec<(usize, u32, Vec<String>)> = Vec::new();
    let mut groups: Vec<Group> = Vec::new();
    for (bench, name) in names.iter().enumerate() {
        match grid.get(name) {
            Some((index, cell)) if cell.setup_stage_count() > 0 => {
                staged.push((bench, *index, cell.setup_stages().map(|s| s.to_string()).collect()))
            }
            _ => groups.push(Group { leader: bench, stages: Vec::new() }),
        }
    }
    staged.sort_by_key(|(_, _, stages)| std::cmp::Reverse(stages.len()));
    let mut led: Vec<Group> = Vec::new();
    for (bench, grid_index, stages) in staged {
        let joined = led.iter_mut().find(|g| {
            g.stages.len() >= stages.len() && g.stages.iter().zip(&stages).all(|((key, _), mine)| key == mine)
        });
        match joined {
            Some(g) => g.stages[stages.len() - 1].1.push(Follower { bench, grid_index }),
            None => led.push(Group { leader: bench, stages: stages.into_iter().map(|s| (s, Vec::new())).collect() }),
        }
    }
    groups.extend(led);
    groups.sort_by_key(|g| g.leader);
    groups
}

/// Orders `groups` longest first (by the instructions `estimate` gives their benchmarks, where
/// it knows them: the committed results), so that the long ones do not start last.
pub fn longest_first(groups: &mut [Group], estimate: impl Fn(usize) -> u64) {
    groups.sort_by_key(|g| std::cmp::Reverse(g.benches().map(&estimate).sum::<u64>()));
}

/// Runs the benchmarks `names` as `groups` (see the module docs) on `jobs` executions at once,
/// calling `each` after every one, in the order of `names`. `code` should be compiled without
/// heap tracking ([`Code::with_heap_tracking`]): nothing is undone here.
#[allow(clippy::too_many_arguments)]
pub fn run_groups(
    code: Arc<Code>,
    setup: &BenchSetup,
    names: &[String],
    groups: &[Group],
    print_output: bool,
    jobs: usize,
    both: bool,
    mut each: impl FnMut(&Run),
) -> Result<Vec<Run>> {
    let (mut canister, _) = Canister::install(code, &setup.init_args, bench_options(setup, print_output))?;
    if let Some(bytes) = setup.stable_memory.as_deref() {
        canister.set_stable_memory(bytes);
    }
    let dir = ResultsDir::new()?;
    let tokens = Tokens::new(jobs.max(1))?;
    let derived = Arc::new(derived_benches(names));
    let mut running: BTreeMap<libc::pid_t, usize> = BTreeMap::new();
    let mut done = BTreeMap::new();
    let mut printed = 0;
    let mut failed = false;
    // Reaps the group processes that ended, collecting their benchmarks' outcomes; reports them
    // in order; true once a benchmark failed (no new group starts then, as canbench stops).
    type Done = BTreeMap<usize, Result<Run, BenchError>>;
    let collect = |pid: libc::pid_t, status: i32, running: &mut BTreeMap<libc::pid_t, usize>, done: &mut Done| {
        let Some(g) = running.remove(&pid) else { return };
        let normal = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
        if !normal {
            // It may have ended holding its token.
            tokens.release();
        }
        for bench in groups[g].benches() {
            let outcome = read_outcome(&dir.0, bench, &names[bench], both, derived.get(&bench).copied())
                .unwrap_or_else(|e| {
                    Err(BenchError::new(
                        &names[bench],
                        "CanisterError",
                        format!("the runner's process for it ended ({}) without an outcome: {e:#}", describe(status)),
                    ))
                });
            done.insert(bench, outcome);
        }
    };
    let mut report = |done: &Done, failed: &mut bool| {
        while let Some(outcome) = done.get(&printed) {
            match outcome {
                Ok(run) => each(run),
                Err(_) => {
                    *failed = true;
                    break;
                }
            }
            printed += 1;
        }
    };
    for (g, group) in groups.iter().enumerate() {
        // A token for the group's leader; meanwhile, collect what ended.
        loop {
            if tokens.try_acquire(Duration::from_millis(100))? {
                break;
            }
            while let Some((pid, status)) = reap(&running, false) {
                collect(pid, status, &mut running, &mut done);
            }
            report(&done, &mut failed);
        }
        if failed {
            tokens.release();
            break;
        }
        flush_stdio();
        // SAFETY: this process runs no other thread that could hold a lock the child needs (the
        // executions ran on threads that ended); the child only runs `run_group` and exits.
        match unsafe { libc::fork() } {
            -1 => bail!("fork: {}", std::io::Error::last_os_error()),
            0 => run_group(&mut canister, group, names, &dir.0, &tokens, both, &derived),
            pid => {
                running.insert(pid, g);
            }
        }
    }
    while !running.is_empty() {
        if let Some((pid, status)) = reap(&running, true) {
            collect(pid, status, &mut running, &mut done);
        }
        report(&done, &mut failed);
    }
    report(&done, &mut failed);
    let mut runs = Vec::new();
    for (_, outcome) in done {
        match outcome {
            Ok(run) => runs.push(run),
            Err(e) => return Err(e.into()),
        }
    }
    if runs.len() != names.len() {
        bail!("{} of {} benchmarks ran", runs.len(), names.len());
    }
    Ok(runs)
}

/// The group's process: the leader's query, with the hook that forks the followers; writes the
/// leader's outcome and ends.
fn run_group(
    canister: &mut Canister,
    group: &Group,
    names: &[String],
    dir: &Path,
    tokens: &Tokens,
    both: bool,
    derived: &Arc<BTreeMap<usize, IcPricing>>,
) -> ! {
    let children = Arc::new(std::sync::Mutex::new(Vec::new()));
    if !group.stages.is_empty() || both {
        canister.set_stage_hook(Some(Box::new(GroupHook {
            stages: group.stages.clone(),
            next: 0,
            names: group.benches().map(|b| (b, names[b].clone())).collect(),
            dir: dir.to_path_buf(),
            tokens: tokens.clone(),
            me: None,
            started: Instant::now(),
            children: Arc::clone(&children),
            leader: group.leader,
            both,
            ic: false,
            derived: Arc::clone(derived),
        })));
    }
    let name = &names[group.leader];
    let started = Instant::now();
    let out = canister.last_query(&format!("__canbench__{name}"), b"DIDL\x00\x00", Principal::anonymous());
    let wall = started.elapsed();
    let end = match out.result {
        Ok(reply) => Outcome { reply: Some(reply), error: None, output: out.output, wall, steps: out.steps },
        Err(reject) => {
            let e = BenchError::from_reject(name, &reject);
            Outcome { output: out.output, wall, ..Outcome::error(e.code, e.message) }
        }
    };
    let mut written = write_outcome(dir, group.leader, &end).is_ok();
    tokens.release();
    // The group ends when its followers have: the main process then reads every outcome.
    let children = std::mem::take(&mut *children.lock().unwrap_or_else(|e| e.into_inner()));
    for (pid, f) in children {
        let status = wait_for(pid);
        if !outcome_path(dir, f.bench).exists() {
            // It ended before writing its outcome, so before giving its token back.
            tokens.release();
            let error = format!("the runner's process for it ended ({}) without an outcome", describe(status));
            written &= write_outcome(dir, f.bench, &Outcome::failed(error)).is_ok();
        }
    }
    // SAFETY: ends this process without running anything inherited from the parent.
    unsafe { libc::_exit(if written { 0 } else { 1 }) }
}

/// The stage hook of a group's process (see the module docs).
#[derive(Debug)]
struct GroupHook {
    stages: Vec<(String, Vec<Follower>)>,
    /// The next stage the leader's setup must report.
    next: usize,
    /// The names of the group's benchmarks, by position in the run's list.
    names: BTreeMap<usize, String>,
    dir: PathBuf,
    tokens: Tokens,
    /// In a fork: the follower it measures.
    me: Option<Follower>,
    /// In a fork: when it was forked.
    started: Instant,
    /// The followers forked so far, for the group's process to wait for before it ends.
    children: Arc<std::sync::Mutex<Vec<(libc::pid_t, Follower)>>>,
    /// The group's leader (what an ic fork of the leader's own process measures).
    leader: usize,
    /// Measure under both cost models: fork an ic process at the first measured step.
    both: bool,
    /// This process measures under the ic model.
    ic: bool,
    /// The benchmarks whose ic figures are derived, not measured, and how (`Cell::ic_pricing`).
    derived: Arc<BTreeMap<usize, IcPricing>>,
}

impl GroupHook {
    /// The benchmark this process measures.
    fn bench(&self) -> usize {
        self.me.map_or(self.leader, |f| f.bench)
    }
}

impl StageHook for GroupHook {
    fn reached(&mut self, stage: &str) -> Result<Option<u32>, String> {
        let Some((key, followers)) = self.stages.get(self.next) else {
            return Err(format!(
                "the canister reports setup stage {stage} after the {} stages the grid declares (is the wasm built from this grid?)",
                self.stages.len()
            ));
        };
        if key != stage {
            return Err(format!(
                "the canister reports setup stage {stage} where the grid declares {key} (is the wasm built from this grid?)"
            ));
        }
        self.next += 1;
        if followers.is_empty() {
            return Ok(None);
        }
        // The followers start from here, each in a fork with a token of its own; the leader goes
        // on as soon as it has a token again (it does not wait for them: the longest group's
        // setup is the run's critical path).
        self.tokens.release();
        for f in followers.clone() {
            self.tokens.acquire();
            flush_stdio();
            // SAFETY: this is the execution thread; the process's other thread only waits for it,
            // holding no lock. The child goes on with the execution and ends in `finish`.
            match unsafe { libc::fork() } {
                -1 => {
                    self.tokens.release();
                    let error = format!("fork: {}", std::io::Error::last_os_error());
                    let _ = write_outcome(&self.dir, f.bench, &Outcome::failed(error));
                }
                0 => {
                    self.me = Some(f);
                    self.started = Instant::now();
                    return Ok(Some(f.grid_index));
                }
                pid => self.children.lock().unwrap_or_else(|e| e.into_inner()).push((pid, f)),
            }
        }
        self.tokens.acquire();
        Ok(None)
    }

    fn measuring(&mut self) -> bool {
        let bench = self.bench();
        if !self.both || self.ic || self.derived.contains_key(&bench) {
            return false;
        }
        flush_stdio();
        // SAFETY: as for the followers' forks (`reached`). The copy goes on under the ic model
        // and ends in `finish`; this process waits for it (it holds this process's token) and
        // goes on under the canbench model.
        match unsafe { libc::fork() } {
            -1 => {
                let error = format!("fork: {}", std::io::Error::last_os_error());
                let _ = write_outcome_at(&ic_outcome_path(&self.dir, bench), &Outcome::failed(error));
                false
            }
            0 => {
                self.ic = true;
                self.started = Instant::now();
                true
            }
            pid => {
                let status = wait_for(pid);
                let path = ic_outcome_path(&self.dir, bench);
                if !path.exists() {
                    let error = format!("its ic-model process ended ({}) without an outcome", describe(status));
                    let _ = write_outcome_at(&path, &Outcome::failed(error));
                }
                false
            }
        }
    }

    fn finish(self: Box<Self>, end: ExecutionEnd) -> ! {
        let bench = self.bench();
        let name = &self.names[&bench];
        let wall = self.started.elapsed();
        // The canister says which cell it went on as (after its measurement): it must be this one.
        let switched = format!("{SWITCHED_CELL_PREFIX}{name}");
        let mut outcome = match (end.trap, end.rejected, end.replied) {
            (Some(trap), _, _) => Outcome::failed(trap),
            (None, Some(m), _) => Outcome::error("CanisterReject", format!("Canister rejected the message: {m}")),
            (None, None, true) => {
                Outcome { reply: Some(end.reply), error: None, output: Vec::new(), wall, steps: end.steps }
            }
            (None, None, false) => Outcome::failed("Canister did not reply to the call".into()),
        };
        if outcome.error.is_none() && self.me.is_some() && !end.output.contains(&switched) {
            outcome = Outcome::failed(format!(
                "the canister did not report going on as {name} after the shared setup (is the wasm built from this grid?)"
            ));
        }
        outcome.output = end.output;
        outcome.wall = wall;
        if self.ic {
            // The process that forked it holds the token and waits for it.
            let written = write_outcome_at(&ic_outcome_path(&self.dir, bench), &outcome);
            // SAFETY: ends this process without running anything inherited from the parent.
            unsafe { libc::_exit(if written.is_ok() { 0 } else { 1 }) }
        }
        let written = write_outcome(&self.dir, bench, &outcome);
        self.tokens.release();
        // SAFETY: ends this process without running anything inherited from the parent.
        unsafe { libc::_exit(if written.is_ok() { 0 } else { 1 }) }
    }
}

/// One benchmark's outcome, as its process writes it.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Outcome {
    /// The query's reply (a Candid `BenchResult`).
    reply: Option<Vec<u8>>,
    /// canbench's error code and message, if it failed.
    error: Option<(String, String)>,
    /// The canister's `debug_print` lines.
    output: Vec<String>,
    /// Wall time of the benchmark's own part.
    wall: Duration,
    /// Its measured steps (`host::Measure::steps`).
    steps: Vec<Step>,
}

impl Outcome {
    /// The pages its measured steps touched, summed; `None` if it marked none.
    fn pages(&self) -> Option<PageCounts> {
        crate::host::steps_pages(&self.steps)
    }
}

impl Outcome {
    fn failed(message: String) -> Outcome {
        Outcome::error("CanisterError", message)
    }

    fn error(code: &str, message: String) -> Outcome {
        Outcome {
            reply: None,
            error: Some((code.into(), message)),
            output: Vec::new(),
            wall: Duration::ZERO,
            steps: Vec::new(),
        }
    }
}

fn outcome_path(dir: &Path, bench: usize) -> PathBuf {
    dir.join(format!("{bench}.json"))
}

/// Where the ic-model process of benchmark `bench` writes its outcome.
fn ic_outcome_path(dir: &Path, bench: usize) -> PathBuf {
    dir.join(format!("{bench}.ic.json"))
}

/// Writes the outcome of benchmark `bench` (then renames it into place: a file that exists is
/// whole).
fn write_outcome(dir: &Path, bench: usize, outcome: &Outcome) -> Result<()> {
    write_outcome_at(&outcome_path(dir, bench), outcome)
}

fn write_outcome_at(path: &Path, outcome: &Outcome) -> Result<()> {
    let path = path.to_path_buf();
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, serde_json::to_vec(outcome)?)?;
    std::fs::rename(&tmp, &path)?;
    Ok(())
}

/// The positions of `names` whose cells' ic figures the runner derives (`Cell::ic_pricing`), and how.
fn derived_benches(names: &[String]) -> BTreeMap<usize, IcPricing> {
    let pricing: BTreeMap<String, IcPricing> = GridCanister::ALL
        .into_iter()
        .flat_map(cells::cells_of)
        .map(|c| (c.name(), c.ic_pricing()))
        .filter(|(_, p)| *p != IcPricing::Measured)
        .collect();
    names.iter().enumerate().filter_map(|(i, n)| Some((i, *pricing.get(n)?))).collect()
}

/// Reads benchmark `bench`'s outcome as the thread-based runner reports it (with its ic-model
/// outcome if `both`: measured, or derived if its cell is priced by `derived`).
fn read_outcome(
    dir: &Path,
    bench: usize,
    name: &str,
    both: bool,
    derived: Option<IcPricing>,
) -> Result<Result<Run, BenchError>> {
    let read = |path: PathBuf| -> Result<Result<(BenchResult, Outcome), BenchError>> {
        let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        let outcome: Outcome = serde_json::from_slice(&bytes).with_context(|| format!("reading {}", path.display()))?;
        if let Some((code, message)) = &outcome.error {
            let code = if code == "CanisterReject" { "CanisterReject" } else { "CanisterError" };
            return Ok(Err(BenchError::new(name, code, message.clone())));
        }
        let reply = outcome.reply.as_ref().ok_or_else(|| anyhow!("an outcome with neither a reply nor an error"))?;
        Ok(match candid::decode_one::<BenchResult>(reply) {
            Ok(r) => Ok((r, outcome)),
            Err(e) => Err(BenchError::new(name, "CanisterReject", format!("decoding the result: {e}"))),
        })
    };
    let (result, outcome) = match read(outcome_path(dir, bench))? {
        Ok(r) => r,
        Err(e) => return Ok(Err(e)),
    };
    // The pages of each scope the grid says is one stretch, placed by the figures of the result
    // they describe: the ic result's where there is one (what `mainnet_results.yml` records: a
    // sysrepo cell's largest try on mainnet may be another try than under canbench's model),
    // found among the reads as the ic model saw them.
    let interval = crate::suite::grid_interval_scope(name);
    let mut scope_pages = crate::suite::scope_pages(&result, &outcome.steps, &interval);
    let ic = if both && outcome.steps.is_empty() {
        // The benchmark marks no measured step (`MEASURE_LINE`): a canbench canister of another
        // project. Nothing was measured under ic.
        None
    } else if let (true, Some(pricing)) = (both, derived) {
        match crate::suite::derive_ic(&result, pricing, &outcome.steps) {
            Ok(r) => {
                let as_ic: Vec<Step> = outcome.steps.iter().map(Step::as_ic).collect();
                scope_pages = crate::suite::scope_pages(&r, &as_ic, &interval);
                Some(r)
            }
            Err(why) => {
                let why = format!("its ic figure cannot be derived as the grid declares ({pricing:?}): {why}");
                return Ok(Err(BenchError::new(name, "CanisterError", why)));
            }
        }
    } else if both {
        match read(ic_outcome_path(dir, bench))? {
            Ok((r, ic)) => {
                if ic.pages() != outcome.pages() {
                    let why = format!(
                        "the two cost models' runs touched different pages: {:?} and {:?}",
                        outcome.pages(),
                        ic.pages()
                    );
                    return Ok(Err(BenchError::new(name, "CanisterError", why)));
                }
                scope_pages = crate::suite::scope_pages(&r, &ic.steps, &interval);
                Some(r)
            }
            Err(e) => {
                let message = format!("under the ic cost model: {}", e.message);
                return Ok(Err(BenchError::new(name, e.code, message)));
            }
        }
    } else {
        None
    };
    let reply_bytes = outcome.output.iter().find_map(|l| l.strip_prefix(REPLY_BYTES_PREFIX)?.trim().parse().ok());
    Ok(Ok(Run {
        name: name.to_string(),
        result,
        reply_bytes,
        wall: outcome.wall,
        profile: None,
        pages: outcome.pages(),
        scope_pages,
        ic,
    }))
}

/// A temporary folder for the outcomes, removed with its contents when dropped.
struct ResultsDir(PathBuf);

impl ResultsDir {
    fn new() -> Result<ResultsDir> {
        let base = std::env::temp_dir();
        for n in 0..1000u32 {
            let dir = base.join(format!("stablebench-runner-{}-{n}", std::process::id()));
            if std::fs::create_dir(&dir).is_ok() {
                return Ok(ResultsDir(dir));
            }
        }
        bail!("cannot create a folder for the outcomes in {}", base.display())
    }
}

impl Drop for ResultsDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// At most `jobs` executions at once across processes: a pipe that holds one byte per free
/// execution (make's jobserver). Forks inherit it.
#[derive(Clone, Debug)]
struct Tokens {
    read: RawFd,
    write: RawFd,
}

impl Tokens {
    fn new(jobs: usize) -> Result<Tokens> {
        let mut fds = [0; 2];
        // SAFETY: `fds` has room for the two descriptors.
        if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
            bail!("pipe: {}", std::io::Error::last_os_error());
        }
        let t = Tokens { read: fds[0], write: fds[1] };
        for _ in 0..jobs {
            t.release();
        }
        Ok(t)
    }

    /// Takes a token, waiting as long as it takes.
    fn acquire(&self) {
        let mut b = [0u8; 1];
        loop {
            // SAFETY: reads one byte into `b`.
            match unsafe { libc::read(self.read, b.as_mut_ptr().cast(), 1) } {
                1 => return,
                -1 if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted => {}
                r => panic!("reading a token: {r}, {}", std::io::Error::last_os_error()),
            }
        }
    }

    /// Takes a token if one comes within `wait`.
    fn try_acquire(&self, wait: Duration) -> Result<bool> {
        let mut fd = libc::pollfd { fd: self.read, events: libc::POLLIN, revents: 0 };
        // SAFETY: polls one descriptor.
        let ready = unsafe { libc::poll(&mut fd, 1, wait.as_millis() as i32) };
        if ready < 0 {
            let e = std::io::Error::last_os_error();
            return if e.kind() == std::io::ErrorKind::Interrupted { Ok(false) } else { Err(anyhow!("poll: {e}")) };
        }
        if ready == 0 {
            return Ok(false);
        }
        self.acquire();
        Ok(true)
    }

    /// Gives a token back.
    fn release(&self) {
        loop {
            // SAFETY: writes one byte.
            match unsafe { libc::write(self.write, b"t".as_ptr().cast(), 1) } {
                1 => return,
                -1 if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted => {}
                r => panic!("writing a token: {r}, {}", std::io::Error::last_os_error()),
            }
        }
    }
}

/// One of the child processes `pids` that ended, with its wait status (waiting, polling every
/// 20 ms, for one to end if `block`). Only these: another part of the process may have children.
fn reap(pids: &BTreeMap<libc::pid_t, usize>, block: bool) -> Option<(libc::pid_t, i32)> {
    loop {
        for &pid in pids.keys() {
            let mut status = 0;
            // SAFETY: asks about a child of this process without waiting.
            if unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) } == pid {
                return Some((pid, status));
            }
        }
        if !block || pids.is_empty() {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits for child `pid`; its wait status.
fn wait_for(pid: libc::pid_t) -> i32 {
    let mut status = 0;
    loop {
        // SAFETY: waits for a child of this process.
        match unsafe { libc::waitpid(pid, &mut status, 0) } {
            -1 if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted => {}
            _ => return status,
        }
    }
}

fn describe(status: i32) -> String {
    if libc::WIFEXITED(status) {
        format!("exit status {}", libc::WEXITSTATUS(status))
    } else if libc::WIFSIGNALED(status) {
        format!("signal {}", libc::WTERMSIG(status))
    } else {
        format!("wait status {status}")
    }
}

/// Writes out what this process buffered, so that a fork does not inherit it.
fn flush_stdio() {
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
}

#[cfg(test)]
mod tests {
    use super::*;
    use stablebench_grid::cells::Canister;

    fn names(canister: Canister) -> Vec<String> {
        cells::cells_of(canister).iter().map(|c| c.name()).collect()
    }

    #[test]
    fn a_profiles_nine_users_orders_steps_are_one_group() {
        let all = names(Canister::Main);
        let mine: Vec<String> =
            all.iter().filter(|n| n.ends_with("_journal_memory_temp_file") && !n.contains("trie")).cloned().collect();
        let groups = plan(&mine);
        let uo: Vec<&Group> = groups.iter().filter(|g| mine[g.leader].contains("insert_orders_1m_indexed")).collect();
        assert_eq!(uo.len(), 1, "{groups:#?}");
        assert_eq!(uo[0].benches().count(), 9, "{:#?}", uo[0]);
        // Every follower forks where its own setup ends: at its last stage.
        for (i, (_, followers)) in uo[0].stages.iter().enumerate() {
            for f in followers {
                let cell = cells::by_name(&mine[f.bench]).unwrap();
                assert_eq!(cell.setup_stage_count(), i + 1, "{}", mine[f.bench]);
                assert_eq!(cells::cells_of(Canister::Main)[f.grid_index as usize], cell);
            }
        }
    }

    #[test]
    fn every_benchmark_runs_once_and_groups_share_exactly_their_stages() {
        for canister in Canister::ALL {
            let all = names(canister);
            let groups = plan(&all);
            let mut seen: Vec<usize> = groups.iter().flat_map(|g| g.benches().collect::<Vec<_>>()).collect();
            seen.sort();
            assert_eq!(seen, (0..all.len()).collect::<Vec<_>>());
            for g in &groups {
                let leader = cells::by_name(&all[g.leader]).unwrap();
                let keys: Vec<String> = leader.setup_stages().map(|s| s.to_string()).collect();
                assert_eq!(g.stages.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>(), keys);
                for (i, (_, followers)) in g.stages.iter().enumerate() {
                    for f in followers {
                        let cell = cells::by_name(&all[f.bench]).unwrap();
                        let theirs: Vec<String> = cell.setup_stages().map(|s| s.to_string()).collect();
                        assert_eq!(theirs[..], keys[..=i], "{}", all[f.bench]);
                    }
                }
            }
        }
    }

    #[test]
    fn cells_with_different_data_or_settings_do_not_share() {
        let all = names(Canister::Main);
        let groups = plan(&all);
        for g in &groups {
            let leader = cells::by_name(&all[g.leader]).unwrap();
            for b in g.benches() {
                let cell = cells::by_name(&all[b]).unwrap();
                assert_eq!(
                    (cell.backend, cell.size, cell.profile.map(|p| p.name)),
                    (leader.backend, leader.size, leader.profile.map(|p| p.name)),
                    "{} shares {}'s setup",
                    all[b],
                    all[g.leader]
                );
            }
        }
        // A benchmark that is no grid cell runs alone.
        let groups = plan(&["not_a_cell".to_string(), all[0].clone()]);
        assert_eq!(groups.len(), 2);
    }
}
