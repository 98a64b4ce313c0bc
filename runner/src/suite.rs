//! `stablebench-runner bench`: canbench 0.7's run sequence (canbench-0.7.0 `src/lib.rs`, see docs/sources.md),
//! offline. Reads `canbench.yml`, runs its `build_cmd`, installs the wasm on a simulated
//! benchmarking subnet, runs every `__canbench__<name>` query (optionally filtered by a name
//! pattern) as an anonymous query with argument `()`, and prints canbench's blocks, summary and
//! table against the committed results, then writes the CSV and results file when asked.
//!
//! After canbench's output it adds what canbench does not say: whether each benchmark's measured
//! step would fit the production limits (5 B per query, 40 B per update, 2 MiB per replicated
//! reply, 3 MiB per query reply), and how long each took on this machine.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use candid::Principal;

use crate::canbench::{self, copy_result, BenchResult};
use crate::canister::{Canister, Code, Limits, Options, Reject};
use crate::host::{PageCounts, Span, Step, MAX_QUERY_REPLY_BYTES, MAX_UPDATE_REPLY_BYTES};
use crate::instrument::Metering;
use crate::profile;
use crate::replica::CostModel;
use stablebench_grid::cells::IcPricing;

/// Arguments of `stablebench-runner bench` (canbench 0.7's flags, plus `--no-metering`).
#[derive(clap::Args, Debug, Default)]
pub struct BenchArgs {
    /// Only benchmarks whose name contains this.
    pub pattern: Option<String>,
    /// Write the results file (canbench_results.yml by default).
    #[arg(long)]
    pub persist: bool,
    /// Write the CSV file (canbench_results.csv by default).
    #[arg(long)]
    pub csv: bool,
    /// No summary unless --show-summary.
    #[arg(long)]
    pub less_verbose: bool,
    /// Do not print the per-benchmark blocks.
    #[arg(long)]
    pub hide_results: bool,
    /// Print the summary even with --less-verbose.
    #[arg(long)]
    pub show_summary: bool,
    /// Print the canister's debug_print output.
    #[arg(long)]
    pub show_canister_output: bool,
    /// Percent change below which a difference is noise.
    #[arg(long, default_value_t = canbench::DEFAULT_NOISE_THRESHOLD)]
    pub noise_threshold: f64,
    /// Run without the metering code (wall time of plain wasmtime; counts are meaningless and
    /// cannot be persisted). For measuring what metering costs.
    #[arg(long)]
    pub no_metering: bool,
    /// Benchmark queries run at once (default: the number of cores; the results do not depend
    /// on it).
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Skip the config's build_cmd.
    #[arg(long)]
    pub no_build: bool,
    /// Exit 1 if the results file is stale: a benchmark added or removed, or instructions that
    /// moved by more than the noise threshold (CI: results are part of the change).
    #[arg(long)]
    pub check: bool,
    /// Attribute every benchmark query's wasm instructions to functions, exactly (the counts
    /// do not change): per benchmark, folded stacks and a flamegraph SVG of the measured step
    /// and of the whole query, and a table of the top functions, in --profile-dir.
    #[arg(long)]
    pub profile: bool,
    /// Where --profile writes.
    #[arg(long, value_name = "DIR", default_value = "target/profile")]
    pub profile_dir: PathBuf,
    /// With --profile: also attribute every 64 KiB Wasm page the query touches (what mainnet's
    /// memory tracker charges) to the function that touched it first, as a table in each
    /// benchmark's profile. Slower: the page marks are collected at every function entry and exit.
    #[arg(long, requires = "profile")]
    pub profile_pages: bool,
    /// Run every benchmark's setup in its own query, as canbench does on PocketIC, instead of
    /// building each setup state once for the benchmarks that share it (the results are the
    /// same; see docs/runner.md). --profile implies it.
    #[arg(long)]
    pub full_setups: bool,
    /// Which replica's charges to measure under: `canbench` (PocketIC 13, what canbench reports;
    /// the results file), `ic` (mainnet since the memory tracker, docs/mainnet.md; the mainnet
    /// results file), or `both` in one run (the default with shared setups).
    #[arg(long, value_enum)]
    pub cost_model: Option<ModelChoice>,
    /// Do not count the pages each benchmark touches (only with --cost-model canbench): for
    /// measuring what counting costs.
    #[arg(long)]
    pub no_page_counts: bool,
}

/// `--cost-model`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ModelChoice {
    /// canbench 0.7 on PocketIC 13.
    Canbench,
    /// The IC mainnet since the deterministic memory tracker.
    Ic,
    /// Both, the measured steps run twice from one setup.
    Both,
}

/// Where the benchmarks priced as mainnet prices them are written: next to canbench's results
/// file.
pub fn mainnet_results_path(results_path: &std::path::Path) -> PathBuf {
    results_path.with_file_name(MAINNET_RESULTS_FILE)
}

/// The mainnet results file's name.
pub const MAINNET_RESULTS_FILE: &str = "mainnet_results.yml";

/// The benchmarks under the ic cost model, as `mainnet_results.yml` holds them.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct MainnetResults {
    /// What the figures are (the rules, their source and date).
    pub model: String,
    /// By benchmark name.
    pub benches: BTreeMap<String, MainnetBench>,
}

/// One benchmark under the ic cost model.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MainnetBench {
    /// The 64 KiB Wasm pages its measured steps touched (the same in both models).
    pub pages: PageCounts,
    /// What canbench-rs measured, each measured step priced as a message of its own on mainnet.
    pub total: crate::canbench::Measurement,
    /// Its scopes, likewise.
    pub scopes: BTreeMap<String, crate::canbench::Measurement>,
    /// The pages first touched inside each scope that ran once within a measured step, where
    /// the runner could tell which two counter reads timed it ([`scope_pages`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub scope_pages: BTreeMap<String, PageCounts>,
}

impl MainnetBench {
    /// Its figures as canbench-rs's result (what the blocks and checks compare).
    pub fn result(&self) -> BenchResult {
        BenchResult { total: self.total.clone(), scopes: self.scopes.clone() }
    }
}

/// What `mainnet_results.yml` says its figures are.
pub const MAINNET_MODEL: &str = "ic: the IC mainnet since the deterministic memory tracker (dfinity/ic #10789, merged 2026-07-16; read 2026-11-26): 80,000 instructions per 64 KiB Wasm page of heap or stable memory at its first access in a message, 80,000 more at its first write, no stable write fee; each measured step priced as an update message of its own; a scope measured before the first step (setup) keeps canbench's figure (docs/mainnet.md)";

/// Reads a mainnet results file; empty if there is none.
pub fn read_mainnet_results(path: &std::path::Path) -> Result<MainnetResults> {
    match std::fs::read_to_string(path) {
        Ok(text) => serde_yaml::from_str(&text).with_context(|| format!("reading {}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(MainnetResults::default()),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

/// Writes a mainnet results file.
pub fn write_mainnet_results(path: &std::path::Path, benches: BTreeMap<String, MainnetBench>) -> Result<()> {
    let results = MainnetResults { model: MAINNET_MODEL.to_string(), benches };
    std::fs::write(path, serde_yaml::to_string(&results)?).with_context(|| format!("writing {}", path.display()))
}

/// The keys of canbench.yml that canbench 0.7 reads.
#[derive(serde::Deserialize, Debug)]
struct Config {
    wasm_path: PathBuf,
    build_cmd: Option<String>,
    results_path: Option<PathBuf>,
    csv_results_path: Option<PathBuf>,
    init_args: Option<InitArgs>,
    stable_memory: Option<StableMemoryFile>,
    env_vars: Option<EnvVarsFile>,
}

/// canbench's `env_vars: { file: ... }`: a file of `NAME,VALUE` lines (canbench-0.7.0
/// `parse_env_vars`: split at the first comma, both sides trimmed).
#[derive(serde::Deserialize, Debug)]
struct EnvVarsFile {
    file: PathBuf,
}

/// Reads canbench's environment variables file.
pub fn read_env_vars(path: &std::path::Path) -> Result<Vec<(String, String)>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the environment variables file {}", path.display()))?;
    text.lines()
        .map(|line| match line.split_once(',') {
            Some((k, v)) => Ok((k.trim().to_string(), v.trim().to_string())),
            None => bail!("invalid line in environment variables file {}: '{line}'", path.display()),
        })
        .collect()
}

#[derive(serde::Deserialize, Debug)]
struct InitArgs {
    hex: String,
}

#[derive(serde::Deserialize, Debug)]
struct StableMemoryFile {
    file: PathBuf,
}

/// The prefix a canister's debug_print line uses to report the reply size a benchmark's result
/// would have if returned by the matching endpoint (the benchmark itself replies a BenchResult).
pub const REPLY_BYTES_PREFIX: &str = "stablebench: reply_bytes=";

/// One benchmark's run.
#[derive(Debug)]
pub struct Run {
    /// Benchmark name (export suffix).
    pub name: String,
    /// What the canister measured.
    pub result: BenchResult,
    /// Reply bytes of the result, if the canister reported them.
    pub reply_bytes: Option<u64>,
    /// Wall time of the query.
    pub wall: Duration,
    /// What `--profile` wrote.
    pub profile: Option<profile::Written>,
    /// The 64 KiB Wasm pages its measured steps touched, if the code counts them.
    pub pages: Option<PageCounts>,
    /// The same for each of its scopes the runner can place ([`scope_pages`]), as the scopes of
    /// `ic` have them where there is an ic result (which try is a sysrepo cell's largest depends
    /// on the model), else of `result`.
    pub scope_pages: BTreeMap<String, PageCounts>,
    /// What it measured under the ic cost model, when run under both.
    pub ic: Option<BenchResult>,
}

/// The benchmark names a wasm exports (`canister_query __canbench__<name>`), in export order.
pub fn benchmark_names(code: &Code) -> Vec<String> {
    code.exports.iter().filter_map(|e| e.strip_prefix("canister_query __canbench__")).map(str::to_string).collect()
}

/// What canbench.yml sets up besides the wasm.
#[derive(Clone, Debug, Default)]
pub struct BenchSetup {
    /// Candid argument of `canister_init` (`init_args.hex`).
    pub init_args: Vec<u8>,
    /// Stable memory loaded after install (`stable_memory.file`).
    pub stable_memory: Option<Vec<u8>>,
    /// Environment variables (`env_vars.file`).
    pub env_vars: Vec<(String, String)>,
}

/// The canister canbench creates on PocketIC: benchmarking-subnet limits, the anonymous
/// principal as its controller (canbench creates it with sender `None`), the 1,000 T cycles
/// canbench adds, the default 3 GiB `wasm_memory_limit`, the config's environment variables.
pub fn bench_options(setup: &BenchSetup, print_output: bool) -> Options {
    bench_options_in(setup, print_output, CostModel::Canbench)
}

/// [`bench_options`] under cost model `model`.
pub fn bench_options_in(setup: &BenchSetup, print_output: bool, model: CostModel) -> Options {
    // Under ic, canbench's model until the first measured step, as in a run under both.
    let (cost_model, ic_from) = match model {
        CostModel::Canbench => (CostModel::Canbench, crate::host::IcFrom::Start),
        CostModel::Ic => (CostModel::Canbench, crate::host::IcFrom::FirstStep),
    };
    Options {
        cost_model,
        ic_from,
        limits: Limits::BENCHMARK,
        controllers: vec![crate::replica::pocket_ic::bench_controller()],
        print_output,
        env_vars: setup.env_vars.clone(),
        ..Options::default()
    }
}

/// Installs `code` as canbench does (benchmarking subnet, init args, stable memory file) and runs
/// the benchmarks whose names contain `pattern`, calling `each` after every one, in export order.
/// With `profile` (and `code` instrumented with `Metering::Profiled`), writes each benchmark's
/// profile there.
///
/// Benchmark queries are independent (each starts from the installed state and leaves nothing),
/// so they run on `jobs` threads, each on its own copy of the installed canister; the results do
/// not depend on `jobs`.
pub fn run_benchmarks(
    code: std::sync::Arc<Code>,
    setup: &BenchSetup,
    pattern: Option<&str>,
    print_output: bool,
    jobs: usize,
    profile: Option<&profile::Output>,
    each: impl FnMut(&Run),
) -> Result<Vec<Run>> {
    let names = matching(&code, pattern);
    run_named(code, setup, &names, print_output, jobs, profile, each)
}

/// The benchmarks of `code` whose names contain `pattern`, in export order.
pub fn matching(code: &Code, pattern: Option<&str>) -> Vec<String> {
    benchmark_names(code).into_iter().filter(|n| pattern.is_none_or(|p| n.contains(p))).collect()
}

/// [`run_benchmarks`] for the benchmarks `names`, in that order.
pub fn run_named(
    code: std::sync::Arc<Code>,
    setup: &BenchSetup,
    names: &[String],
    print_output: bool,
    jobs: usize,
    profile: Option<&profile::Output>,
    each: impl FnMut(&Run),
) -> Result<Vec<Run>> {
    run_named_in(code, setup, names, print_output, jobs, profile, CostModel::Canbench, each)
}

/// [`run_named`] under cost model `model`.
#[allow(clippy::too_many_arguments)]
pub fn run_named_in(
    code: std::sync::Arc<Code>,
    setup: &BenchSetup,
    names: &[String],
    print_output: bool,
    jobs: usize,
    profile: Option<&profile::Output>,
    model: CostModel,
    mut each: impl FnMut(&Run),
) -> Result<Vec<Run>> {
    let opts = bench_options_in(setup, print_output, model);
    let (init_args, stable_memory) = (&setup.init_args, setup.stable_memory.as_deref());
    let (mut canister, _) = Canister::install(code, init_args, opts)?;
    if let Some(bytes) = stable_memory {
        canister.set_stable_memory(bytes);
    }
    let jobs = jobs.clamp(1, names.len().max(1));
    let mut workers: Vec<Canister> = (1..jobs).map(|_| canister.fork()).collect::<Result<_>>()?;
    workers.insert(0, canister);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let (tx, rx) = std::sync::mpsc::channel::<(usize, Result<Run>)>();
    let mut done: BTreeMap<usize, Run> = BTreeMap::new();
    let mut printed = 0;
    let mut failure = None;
    std::thread::scope(|s| {
        for mut c in workers {
            let (tx, next) = (tx.clone(), &next);
            s.spawn(move || loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let Some(name) = names.get(i) else { break };
                let r = run_one(&mut c, name, profile);
                let stop = r.is_err();
                if tx.send((i, r)).is_err() || stop {
                    next.store(names.len(), std::sync::atomic::Ordering::SeqCst);
                    break;
                }
            });
        }
        drop(tx);
        for (i, r) in rx {
            match r {
                Ok(run) => {
                    done.insert(i, run);
                    // Report in export order, as soon as the next one in order is done.
                    while let Some(run) = done.get(&printed) {
                        each(run);
                        printed += 1;
                    }
                }
                Err(e) => {
                    failure.get_or_insert(e);
                }
            }
        }
    });
    if let Some(e) = failure {
        return Err(e);
    }
    Ok(done.into_values().collect())
}

/// [`run_benchmarks`] with shared setups (see `crate::shared`): the benchmarks whose names
/// contain `pattern`, grouped by the setup stages the grid declares, longest groups first (by the
/// committed results `old`), each group in a process of its own; the same results. With `both`,
/// each benchmark's measured steps also run under the ic cost model ([`Run::ic`]). Without
/// `fork` (not unix), setups are not shared and `both` is refused.
#[allow(clippy::too_many_arguments)]
pub fn run_shared(
    code: std::sync::Arc<Code>,
    setup: &BenchSetup,
    pattern: Option<&str>,
    print_output: bool,
    jobs: usize,
    old: &BTreeMap<String, BenchResult>,
    both: bool,
    each: impl FnMut(&Run),
) -> Result<Vec<Run>> {
    #[cfg(unix)]
    {
        let names = matching(&code, pattern);
        let mut groups = crate::shared::plan(&names);
        crate::shared::longest_first(&mut groups, |b| {
            old.get(&names[b]).map_or(0, |r| {
                r.total.instructions + r.scopes.get(stablebench_grid::scopes::SETUP).map_or(0, |s| s.instructions)
            })
        });
        crate::shared::run_groups(code, setup, &names, &groups, print_output, jobs, both, each)
    }
    #[cfg(not(unix))]
    {
        let _ = old;
        if both {
            bail!("both cost models in one run need fork (unix); run --cost-model canbench and ic separately");
        }
        run_benchmarks(code, setup, pattern, print_output, jobs, None, each)
    }
}

fn run_one(c: &mut Canister, name: &str, profile: Option<&profile::Output>) -> Result<Run> {
    c.set_profile_pages(profile.is_some_and(|p| p.pages));
    let started = Instant::now();
    let out = c.query(&format!("__canbench__{name}"), b"DIDL\x00\x00", Principal::anonymous());
    let wall = started.elapsed();
    let result = out.result.as_ref().map_err(|e| BenchError::from_reject(name, e)).and_then(|reply| {
        candid::decode_one::<BenchResult>(reply)
            .map_err(|e| BenchError::from_reject(name, &Reject::Rejected(format!("decoding the result: {e}"))))
    });
    // A benchmark that failed is profiled too (the query, up to the trap).
    let written = match profile {
        Some(p) => {
            let prof = c.take_profile().context("--profile: the code is not instrumented for profiling")?;
            let measured = result.as_ref().ok().filter(|r| r.total.calls == 1).map(|r| r.total.instructions);
            Some(p.write(name, &prof, out.instructions, measured)?)
        }
        None => None,
    };
    let result = result?;
    let reply_bytes = out.output.iter().find_map(|l| l.strip_prefix(REPLY_BYTES_PREFIX)?.trim().parse().ok());
    let scope_pages = scope_pages(&result, &out.steps, &grid_interval_scope(name));
    Ok(Run {
        name: name.to_string(),
        result,
        reply_bytes,
        wall,
        profile: written,
        pages: out.step_pages(),
        scope_pages,
        ic: None,
    })
}

/// Whether scope `scope` of benchmark `name` is one stretch between two counter reads, as the
/// grid declares for its cell (`Cell::interval_scope`); no scope of a benchmark that is no grid
/// cell (another project's canister) is.
pub fn grid_interval_scope(name: &str) -> impl Fn(&str) -> bool {
    let cell = stablebench_grid::cells::by_name(name);
    move |scope| cell.is_some_and(|c| c.interval_scope(scope))
}

/// A benchmark query that did not reply.
#[derive(Debug)]
pub struct BenchError {
    /// The benchmark.
    pub name: String,
    /// canbench's error code: `CanisterReject` or `CanisterError`.
    pub code: &'static str,
    /// Why.
    pub message: String,
}

impl BenchError {
    /// Benchmark `name` failed with `code` and `message`.
    pub fn new(name: &str, code: &'static str, message: String) -> BenchError {
        BenchError { name: name.to_string(), code, message }
    }

    /// Benchmark `name`'s query ended with `reject`.
    pub fn from_reject(name: &str, reject: &Reject) -> BenchError {
        let code = match reject {
            Reject::Rejected(_) => "CanisterReject",
            _ => "CanisterError",
        };
        BenchError::new(name, code, reject.to_string())
    }
}

impl std::fmt::Display for BenchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // canbench: "Error executing benchmark <name>. Error:\n<code>: <message>"
        write!(f, "Error executing benchmark {}. Error:\n{}: {}", self.name, self.code, self.message)
    }
}

impl std::error::Error for BenchError {}

/// The `bench` command.
pub fn run(args: &BenchArgs) -> Result<ExitCode> {
    // The flags first: a wrong combination stops before the build.
    let mode = Mode::of(args)?;
    let Some(suite) = Suite::read(args)? else { return Ok(ExitCode::FAILURE) };
    let Some(committed) = Committed::read(&suite.results_path)? else { return Ok(ExitCode::FAILURE) };
    let setup = suite.setup()?;
    let started = Instant::now();
    let tracking = crate::instrument::Tracking {
        heap: !mode.shared,
        pages: crate::instrument::PageCounting::when(!args.no_page_counts),
    };
    let code = Code::from_file_tracked(&suite.cfg.wasm_path, mode.metering, tracking)?;
    let load = started.elapsed();
    let profile_out = profile_output(args, &code, &suite.cfg.wasm_path)?;
    let jobs = args.jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let runs = match measure(args, mode, code, &setup, jobs, profile_out.as_ref(), &committed) {
        Ok(r) => r,
        Err(e) if e.downcast_ref::<BenchError>().is_some() => {
            eprintln!("{e}");
            return Ok(ExitCode::FAILURE);
        }
        Err(e) => return Err(e),
    };
    let measured = Measured::of(&runs);
    report(args, mode, &suite, &committed, &measured)?;
    println!();
    print!("{}", limits_table(&runs, mode.metering, jobs, mode.shared, load, started.elapsed()));
    if let Some(out) = &profile_out {
        print!("{}", profiles_summary(&runs, &out.dir));
    }
    if args.check {
        return Ok(check(args, mode, &suite, &committed, &measured));
    }
    Ok(ExitCode::SUCCESS)
}

/// canbench.yml read and its build command run.
struct Suite {
    cfg_name: String,
    cfg: Config,
    results_path: PathBuf,
    csv_path: PathBuf,
}

impl Suite {
    /// The suite; `None` (said on stderr) if there is no canbench.yml.
    fn read(args: &BenchArgs) -> Result<Option<Suite>> {
        let cfg_name = std::env::var("CANBENCH_CFG_FILE").unwrap_or_else(|_| "canbench.yml".into());
        let Ok(cfg_text) = std::fs::read_to_string(&cfg_name) else {
            eprintln!("configuration file not found: '{cfg_name}'");
            return Ok(None);
        };
        let cfg: Config = serde_yaml::from_str(&cfg_text).with_context(|| format!("reading {cfg_name}"))?;
        if let (Some(cmd), false) = (&cfg.build_cmd, args.no_build) {
            let status = std::process::Command::new("bash").arg("-c").arg(cmd).status().context("running build_cmd")?;
            if !status.success() {
                bail!("build_cmd `{cmd}` failed with {status}");
            }
        }
        let results_path = cfg.results_path.clone().unwrap_or_else(|| "canbench_results.yml".into());
        let csv_path = cfg.csv_results_path.clone().unwrap_or_else(|| "canbench_results.csv".into());
        Ok(Some(Suite { cfg_name, cfg, results_path, csv_path }))
    }

    /// What canbench.yml gives every benchmark: its init argument, stable memory and environment
    /// variables, read from their files.
    fn setup(&self) -> Result<BenchSetup> {
        let cfg = &self.cfg;
        let init_args = match &cfg.init_args {
            Some(a) => hex_decode(&a.hex).with_context(|| format!("{}: init_args.hex", self.cfg_name))?,
            None => Vec::new(),
        };
        let stable = cfg
            .stable_memory
            .as_ref()
            .map(|s| std::fs::read(&s.file).with_context(|| format!("reading {}", s.file.display())))
            .transpose()?;
        let env_vars = cfg.env_vars.as_ref().map(|e| read_env_vars(&e.file)).transpose()?.unwrap_or_default();
        Ok(BenchSetup { init_args, stable_memory: stable, env_vars })
    }
}

/// The committed results, read before the run.
struct Committed {
    /// canbench's results.
    canbench: BTreeMap<String, BenchResult>,
    /// The mainnet-priced results file and its benchmarks.
    mainnet_path: PathBuf,
    mainnet: BTreeMap<String, MainnetBench>,
    /// Their ic figures as canbench's results (what the blocks and checks compare).
    ic: BTreeMap<String, BenchResult>,
}

impl Committed {
    /// The results beside `results_path`; `None` (said on stderr) if canbench's are of another
    /// version.
    fn read(results_path: &std::path::Path) -> Result<Option<Committed>> {
        let canbench = match canbench::read_results(results_path) {
            Ok(r) => r.map(|r| r.benches).unwrap_or_default(),
            Err(e) if e.downcast_ref::<canbench::VersionError>().is_some() => {
                eprintln!("{e}");
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        let mainnet_path = mainnet_results_path(results_path);
        let mainnet = read_mainnet_results(&mainnet_path)?.benches;
        let ic = mainnet.iter().map(|(n, b)| (n.clone(), b.result())).collect();
        Ok(Some(Committed { canbench, mainnet_path, mainnet, ic }))
    }
}

/// How the run measures, from the flags.
#[derive(Clone, Copy)]
struct Mode {
    metering: Metering,
    /// Whether setups are shared (each benchmark in a process of its own, where nothing is
    /// undone: the code needs no heap tracking there).
    shared: bool,
    choice: ModelChoice,
}

impl Mode {
    fn of(args: &BenchArgs) -> Result<Mode> {
        if args.no_metering && args.persist {
            bail!("--no-metering counts nothing: it cannot be combined with --persist");
        }
        if args.no_metering && args.profile {
            bail!("--no-metering counts nothing: it cannot be combined with --profile");
        }
        let metering = match (args.no_metering, args.profile) {
            (true, _) => Metering::Off,
            (false, true) => Metering::Profiled,
            (false, false) => Metering::On,
        };
        let shared = cfg!(unix) && !args.full_setups && !args.profile;
        let choice = args.cost_model.unwrap_or(if shared && !args.no_metering {
            ModelChoice::Both
        } else {
            ModelChoice::Canbench
        });
        if choice == ModelChoice::Both && !shared {
            bail!("--cost-model both runs the measured steps twice from shared setups: not with --full-setups or --profile (run --cost-model canbench and ic one after the other)");
        }
        if args.no_page_counts && choice != ModelChoice::Canbench {
            bail!("--no-page-counts: the ic cost model charges the pages; run it with --cost-model canbench");
        }
        if args.no_metering && choice != ModelChoice::Canbench {
            bail!("--no-metering counts nothing: run it with --cost-model canbench");
        }
        if args.profile && args.profile_pages && args.no_page_counts {
            bail!("--profile-pages attributes the pages the code marks: not with --no-page-counts");
        }
        Ok(Mode { metering, shared, choice })
    }

    /// Whether canbench's model runs (its results printed, written and checked).
    fn canbench(self) -> bool {
        self.choice != ModelChoice::Ic
    }
}

/// Where `--profile` writes, with the module's function names.
fn profile_output(args: &BenchArgs, code: &Code, wasm_path: &std::path::Path) -> Result<Option<profile::Output>> {
    if !args.profile {
        return Ok(None);
    }
    let names = profile::Names::from_wasm(&code.wasm)?;
    if names.is_empty() {
        eprintln!(
            "{} has no name section: functions are shown as func[N] (scripts/build.sh bench keeps the names)",
            wasm_path.display()
        );
    }
    Ok(Some(profile::Output { dir: args.profile_dir.clone(), names, pages: args.profile_pages }))
}

/// The benchmarks the pattern selects, each block printed as it is done (under ic alone, the ic
/// figures against the mainnet file).
fn measure(
    args: &BenchArgs,
    mode: Mode,
    code: std::sync::Arc<Code>,
    setup: &BenchSetup,
    jobs: usize,
    profile_out: Option<&profile::Output>,
    committed: &Committed,
) -> Result<Vec<Run>> {
    let ic_alone = mode.choice == ModelChoice::Ic;
    let shown_old = if ic_alone { &committed.ic } else { &committed.canbench };
    let print_block = |run: &Run| {
        if !args.hide_results {
            let result = if ic_alone { run.ic.as_ref().unwrap_or(&run.result) } else { &run.result };
            print!(
                "{}",
                canbench::format_benchmark_section(&run.name, result, shown_old.get(&run.name), args.noise_threshold)
            );
        }
    };
    let (pattern, output) = (args.pattern.as_deref(), args.show_canister_output);
    if mode.shared {
        let both = mode.choice != ModelChoice::Canbench;
        return run_shared(code, setup, pattern, output, jobs, &committed.canbench, both, print_block);
    }
    let model = if ic_alone { CostModel::Ic } else { CostModel::Canbench };
    let names = matching(&code, pattern);
    let runs = run_named_in(code, setup, &names, output, jobs, profile_out, model, print_block)?;
    // Under ic alone the one run is the ic run.
    Ok(runs
        .into_iter()
        .map(|mut r| {
            if model == CostModel::Ic {
                r.ic = Some(copy_result(&r.result));
            }
            r
        })
        .collect())
}

/// What the run measured, as the results files hold it.
struct Measured {
    canbench: BTreeMap<String, BenchResult>,
    mainnet: BTreeMap<String, MainnetBench>,
}

impl Measured {
    fn of(runs: &[Run]) -> Measured {
        let canbench = runs.iter().map(|r| (r.name.clone(), copy_result(&r.result))).collect();
        let mainnet = runs
            .iter()
            .filter_map(|r| {
                let ic = r.ic.as_ref()?;
                let bench = MainnetBench {
                    pages: r.pages.unwrap_or_default(),
                    total: ic.total.clone(),
                    scopes: ic.scopes.clone(),
                    scope_pages: r.scope_pages.clone(),
                };
                Some((r.name.clone(), bench))
            })
            .collect();
        Measured { canbench, mainnet }
    }
}

/// canbench's report tail and csv file, and with `--persist` the results files.
fn report(args: &BenchArgs, mode: Mode, suite: &Suite, committed: &Committed, measured: &Measured) -> Result<()> {
    let (new, old, noise) = (&measured.canbench, &committed.canbench, args.noise_threshold);
    if mode.canbench() {
        print!("{}", canbench::format_report_tail(new, old, !args.less_verbose || args.show_summary, noise));
        if args.csv {
            canbench::write_csv(&suite.csv_path, new, old, noise)?;
            print!("{}", canbench::format_csv_saved(&suite.csv_path));
        }
    }
    if !args.persist {
        return Ok(());
    }
    if mode.canbench() {
        canbench::write_results(&suite.results_path, new)?;
        print!("{}", canbench::format_persisted(&suite.results_path));
    }
    if !measured.mainnet.is_empty() {
        // A filtered run updates its benchmarks and keeps the others (read at the start), as
        // canbench does not: without a pattern the file is exactly this run.
        let mut all = if args.pattern.is_none() { BTreeMap::new() } else { committed.mainnet.clone() };
        let n = measured.mainnet.len();
        all.extend(measured.mainnet.clone());
        write_mainnet_results(&committed.mainnet_path, all)?;
        println!("Successfully persisted {n} mainnet-priced results to {}", committed.mainnet_path.display());
    }
    Ok(())
}

/// `--check`: failure, with every difference listed, if the committed results are stale.
fn check(args: &BenchArgs, mode: Mode, suite: &Suite, committed: &Committed, measured: &Measured) -> ExitCode {
    let (pattern, noise) = (args.pattern.as_deref(), args.noise_threshold);
    let mut stale = if mode.canbench() {
        stale_results(&measured.canbench, &committed.canbench, pattern, noise)
    } else {
        Vec::new()
    };
    if mode.choice != ModelChoice::Canbench {
        let path = committed.mainnet_path.display();
        let new_ic: BTreeMap<String, BenchResult> =
            measured.mainnet.iter().map(|(n, b)| (n.clone(), b.result())).collect();
        for line in stale_results(&new_ic, &committed.ic, pattern, noise) {
            stale.push(format!("{path}: {line}"));
        }
        for (name, b) in &measured.mainnet {
            if let Some(o) = committed.mainnet.get(name).filter(|o| o.pages != b.pages) {
                stale.push(format!("{path}: {name}: pages {:?} -> {:?}", o.pages, b.pages));
            }
            if let Some(o) = committed.mainnet.get(name).filter(|o| o.scope_pages != b.scope_pages) {
                stale.push(format!("{path}: {name}: scope pages {:?} -> {:?}", o.scope_pages, b.scope_pages));
            }
        }
    }
    let results_path = suite.results_path.display();
    if !stale.is_empty() {
        eprintln!(
            "{results_path} is stale (regenerate with scripts/bench.sh --persist and commit it with the change):"
        );
        for line in stale {
            eprintln!("  {line}");
        }
        return ExitCode::FAILURE;
    }
    eprintln!("{results_path} is up to date (every benchmark within {}%)", noise);
    ExitCode::SUCCESS
}

/// Differences between a run and the committed results that mean the file is stale.
pub fn stale_results(
    new: &BTreeMap<String, BenchResult>,
    old: &BTreeMap<String, BenchResult>,
    pattern: Option<&str>,
    noise: f64,
) -> Vec<String> {
    let mut out = Vec::new();
    for (name, r) in new {
        match old.get(name) {
            None => out.push(format!("{name}: new, not in the results file")),
            Some(o) => {
                let pct = canbench::percent_change(r.total.instructions, o.total.instructions);
                if pct.abs() > noise {
                    out.push(format!(
                        "{name}: {} -> {} instructions ({pct:+.2}%)",
                        o.total.instructions, r.total.instructions
                    ));
                } else if noise == 0.0 && r != o {
                    // No noise allowed: the runner is deterministic, so every field must match
                    // (calls, heap and stable growth, every scope), not only the total.
                    out.push(format!("{name}: {}", first_difference(o, r)));
                }
            }
        }
    }
    for name in old.keys().filter(|n| !new.contains_key(*n) && pattern.is_none_or(|p| n.contains(p))) {
        out.push(format!("{name}: in the results file but no longer a benchmark"));
    }
    out
}

/// Where two results of one benchmark first differ, as `field: old -> new`.
fn first_difference(old: &BenchResult, new: &BenchResult) -> String {
    let fields = |m: &canbench::Measurement| {
        [
            ("calls", m.calls),
            ("instructions", m.instructions),
            ("heap_increase", m.heap_increase),
            ("stable_memory_increase", m.stable_memory_increase),
        ]
    };
    let mut measures = vec![("total".to_string(), Some(&old.total), Some(&new.total))];
    for scope in old.scopes.keys().chain(new.scopes.keys()) {
        measures.push((format!("scope {scope}"), old.scopes.get(scope), new.scopes.get(scope)));
    }
    for (what, o, n) in measures {
        match (o, n) {
            (Some(o), Some(n)) => {
                for ((field, a), (_, b)) in fields(o).into_iter().zip(fields(n)) {
                    if a != b {
                        return format!("{what} {field}: {a} -> {b}");
                    }
                }
            }
            (Some(_), None) => return format!("{what}: no longer measured"),
            (None, Some(_)) => return format!("{what}: new"),
            (None, None) => {}
        }
    }
    "results differ".to_string()
}

/// The ic-model result of a benchmark whose cell the grid prices by derivation
/// (`Cell::ic_pricing`), from its canbench result and its measured steps: the figures the ic
/// model measures in-band, as long as the steps do not act on the instruction counter
/// (`runner/tests/shared_setups.rs` compares the two). `Err` says why the result is not of the
/// shape the grid declares (the derivation would be wrong, so nothing is derived).
///
/// - [`IcPricing::OneStep`]: one step, no scopes, its total the interval between the step's first
///   and last counter reads: canbench's total, without the canbench model's stable write fee,
///   plus the tracker's fees for the step's pages.
/// - [`IcPricing::Steps`]: each step timed by its first and last counter reads; the canister's
///   total and largest step must be exactly what the runner read, and each step's ic figure is
///   [`Step::ic_instructions`].
pub fn derive_ic(canbench: &BenchResult, pricing: IcPricing, steps: &[Step]) -> Result<BenchResult, String> {
    let mut r = copy_result(canbench);
    match pricing {
        IcPricing::Measured => return Err("its cell is measured under the ic model, not derived".into()),
        IcPricing::OneStep => {
            if !canbench.scopes.is_empty() || canbench.total.calls != 1 {
                return Err("its result is not one step's (it has scopes or several calls)".into());
            }
            let [step] = steps else {
                return Err(format!("it marked {} steps, not one", steps.len()));
            };
            if step.last_read - step.first_read != canbench.total.instructions {
                return Err(format!(
                    "its total ({}) is not what the runner timed between the step's first and last reads ({})",
                    canbench.total.instructions,
                    step.last_read - step.first_read
                ));
            }
            r.total.instructions = step.ic_instructions();
        }
        IcPricing::Steps { max_scope } => {
            if let Some((k, s)) = steps.iter().enumerate().find(|(_, s)| s.reads != 2) {
                return Err(format!("step {k} read the counter {} times, not 2", s.reads));
            }
            let canbench_steps: Vec<u64> = steps.iter().map(|s| s.last_read - s.first_read).collect();
            let max = canbench.scopes.get(max_scope);
            let scopes: Vec<&String> = canbench.scopes.keys().collect();
            if canbench.total.calls != steps.len() as u64
                || canbench.total.instructions != canbench_steps.iter().sum::<u64>()
                || scopes != [max_scope]
                || max.map(|m| m.instructions) != canbench_steps.iter().copied().max()
            {
                return Err(format!(
                    "its result (total {} in {} calls, scopes {scopes:?}) is not the sum and the largest \
                     ({max_scope}) of the {} steps the runner timed ({canbench_steps:?})",
                    canbench.total.instructions,
                    canbench.total.calls,
                    steps.len()
                ));
            }
            let ic: Vec<u64> = steps.iter().map(Step::ic_instructions).collect();
            r.total.instructions = ic.iter().sum();
            if let Some(m) = r.scopes.get_mut(max_scope) {
                m.instructions = ic.iter().copied().max().unwrap_or(0);
            }
        }
        IcPricing::Scopes => {
            let [step] = steps else {
                return Err(format!("it marked {} steps, not one", steps.len()));
            };
            let sum: u64 = canbench.scopes.values().map(|m| m.instructions).sum();
            if canbench.total.calls != 1
                || canbench.scopes.is_empty()
                || canbench.total.instructions != sum
                || canbench.scopes.values().any(|m| m.calls != 1)
            {
                return Err(format!(
                    "its result (total {} in {} calls) is not the sum of scopes that each ran once ({:?})",
                    canbench.total.instructions,
                    canbench.total.calls,
                    canbench.scopes.iter().map(|(n, m)| (n, m.instructions, m.calls)).collect::<Vec<_>>()
                ));
            }
            let mut total = 0;
            for (name, m) in r.scopes.iter_mut() {
                let span = the_span(step, m.instructions).map_err(|why| format!("scope {name}: {why}"))?;
                m.instructions = span.ic_instructions();
                total += m.instructions;
            }
            r.total.instructions = total;
        }
    }
    Ok(r)
}

/// The one stretch of `step` between two counter reads that advanced the counter by
/// `instructions`, or why there is none: no two reads that far apart, or several that touched
/// different pages.
fn the_span(step: &Step, instructions: u64) -> Result<Span, String> {
    let spans = step.spans_of(instructions);
    match spans.split_first() {
        None => Err(format!("no two counter reads of the step are {instructions} instructions apart")),
        Some((first, rest)) if rest.iter().all(|s| s == first) => Ok(*first),
        Some(_) => Err(format!("{} stretches of {instructions} instructions touched different pages", spans.len())),
    }
}

/// The pages first touched inside each scope of `result` that ran once (`calls` 1) and that
/// `interval` says is one stretch between two counter reads (the grid declares which:
/// `Cell::interval_scope`), where those reads can be told: canbench-rs reads
/// `performance_counter(0)` where a scope starts and where it ends, and the scope's instructions
/// are the difference, so the scope ran between a pair of reads of a measured step that far
/// apart, and if every such pair touched the same pages those are its pages. A scope that sums
/// several stretches (a Chia chunk: a pair of reads may be that far apart by chance), one of
/// several calls, one that ran outside the measured steps (a trie cell's `setup`), or one whose
/// reads cannot be told apart, gets none.
pub fn scope_pages(
    result: &BenchResult,
    steps: &[Step],
    interval: &impl Fn(&str) -> bool,
) -> BTreeMap<String, PageCounts> {
    result
        .scopes
        .iter()
        .filter(|(name, m)| m.calls == 1 && interval(name))
        .filter_map(|(name, m)| {
            let spans: Vec<Span> = steps.iter().flat_map(|s| s.spans_of(m.instructions)).collect();
            let (first, rest) = spans.split_first()?;
            rest.iter().all(|s| s.pages == first.pages).then(|| (name.clone(), first.pages))
        })
        .collect()
}

fn hex_decode(s: &str) -> Result<Vec<u8>> {
    hex::decode(s.trim()).map_err(|e| anyhow!("{e}"))
}

/// Whether each benchmark's measured step fits the production limits, and the wall times.
pub fn limits_table(
    runs: &[Run],
    metering: Metering,
    jobs: usize,
    shared: bool,
    load: Duration,
    total: Duration,
) -> String {
    let q = Limits::PRODUCTION.query;
    let u = Limits::PRODUCTION.update;
    let fits = |ok: bool| if ok { "yes" } else { "NO" };
    // The first column is as wide as the longest name, so the table stays aligned.
    let w = runs.iter().map(|r| r.name.len()).chain([9]).max().unwrap_or(9);
    let mainnet = runs.iter().any(|r| r.ic.is_some());
    let mut t = String::from(if mainnet {
        "Production limits (measured step only; instructions, not cycles; \"mainnet\" is the ic cost model, which the limits are judged by; pages: 64 KiB Wasm pages accessed/written per call, heap + stable):\n"
    } else {
        "Production limits (measured step only; instructions, not cycles):\n"
    });
    let (mh, md) = if mainnet {
        (format!(" {:>14} | {:>13} |", "mainnet", "pages"), format!("{:->16}|{:->15}|", "", ""))
    } else {
        (String::new(), String::new())
    };
    t += &format!(
        "| {:<w$} | {:>12} |{mh} {:>10} | {:>11} | {:>12} | {:>10} | {:>8} |\n",
        "benchmark", "instructions", "5 B query", "40 B update", "reply bytes", "2/3 MiB", "wall"
    );
    t += &format!(
        "|{:-<w2$}|{:->14}|{md}{:->12}|{:->13}|{:->14}|{:->12}|{:->10}|\n",
        "",
        "",
        "",
        "",
        "",
        "",
        "",
        w2 = w + 2
    );
    for r in runs {
        // A benchmark that records several calls (canbench-rs `calls`, e.g. 50 iterations of
        // which each would be one message) is judged per call.
        let per_call = |m: &crate::canbench::Measurement| m.instructions / m.calls.max(1);
        let i = per_call(&r.result.total);
        let judged = r.ic.as_ref().map_or(i, |ic| per_call(&ic.total));
        let (bytes, reply_fit) = match r.reply_bytes {
            Some(b) => {
                (b.to_string(), format!("{}/{}", fits(b <= MAX_UPDATE_REPLY_BYTES), fits(b <= MAX_QUERY_REPLY_BYTES)))
            }
            None => ("-".into(), "-".into()),
        };
        let cols = if mainnet {
            let calls = r.result.total.calls.max(1);
            let pages = r.pages.map_or("-".to_string(), |p| match calls {
                1 => format!("{}/{}", p.accessed(), p.written()),
                n => format!("{:.1}/{:.1}", p.accessed() as f64 / n as f64, p.written() as f64 / n as f64),
            });
            let ic = r.ic.as_ref().map_or("-".to_string(), |ic| canbench::fmt_block_value(per_call(&ic.total)));
            format!(" {ic:>14} | {pages:>13} |")
        } else {
            String::new()
        };
        t += &format!(
            "| {:<w$} | {:>12} |{cols} {:>10} | {:>11} | {:>12} | {:>10} | {:>7.1}s |\n",
            r.name,
            canbench::fmt_block_value(i),
            fits(judged <= q),
            fits(judged <= u),
            bytes,
            reply_fit,
            r.wall.as_secs_f64()
        );
    }
    let mode = match metering {
        Metering::On => "metered",
        Metering::Profiled => "metered and profiled (--profile)",
        Metering::Off => "NOT metered (--no-metering)",
    };
    let unit = match (shared, jobs == 1) {
        (true, true) => "process",
        (true, false) => "processes",
        (false, true) => "thread",
        (false, false) => "threads",
    };
    let setups = if shared {
        "shared setups: a benchmark's wall time starts where its setup joins the one it shares, the first of a group's includes the whole setup"
    } else {
        "a benchmark's wall time includes its setup"
    };
    t += &format!(
        "Wall time: {:.1}s in all ({mode}; loading and compiling the wasm {:.1}s, install and {} benchmark queries on {jobs} {unit} the rest; {setups}). Instructions are per call where a benchmark records several calls (`calls` > 1). Reply bytes: the Candid size of the rows the matching endpoint would return.\n",
        total.as_secs_f64(),
        load.as_secs_f64(),
        runs.len(),
    );
    t
}

/// Where each benchmark's profile is, and its top functions.
pub fn profiles_summary(runs: &[Run], dir: &std::path::Path) -> String {
    let mut t = format!(
        "\nProfiles in {} (wasm instructions by function: <benchmark>.txt, .step.svg/.folded/.tsv for the measured step, \
         .query.svg/.folded/.tsv for the whole query):\n",
        dir.display()
    );
    for r in runs {
        let Some(p) = &r.profile else { continue };
        let what = match p.step {
            Some(s) => format!(
                "step {} of a {}-instruction query",
                stablebench_grid::grouped(s),
                stablebench_grid::grouped(p.query)
            ),
            None => format!("query {} (no single measured interval)", stablebench_grid::grouped(p.query)),
        };
        let top: Vec<String> = p.top.iter().map(|(n, share)| format!("{share:.1}% {n}")).collect();
        t += &format!("  {}: {what}; top exclusive: {}\n", r.name, top.join(", "));
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canbench::Measurement;
    use crate::host::Mark;
    use crate::replica::memory_tracker::{ACCESS_FEE, WRITE_FEE};

    const MAX: &str = "max_try";
    const STEPS: IcPricing = IcPricing::Steps { max_scope: MAX };

    /// A step timed from `first` to `last` that touched `accessed` pages and wrote `written` of
    /// them, one of the written pages being stable memory of which `fee_pages` 4 KiB pages paid
    /// canbench's write fee.
    fn step(first: u64, last: u64, accessed: u64, written: u64, fee_pages: u64) -> Step {
        let pages = PageCounts {
            heap_accessed: accessed - 1,
            heap_written: written - 1,
            stable_accessed: 1,
            stable_written: 1,
        };
        let (start, end) = (
            Mark { value: first, pages: PageCounts::default(), dirtied: 7 },
            Mark { value: last, pages, dirtied: 7 + fee_pages },
        );
        Step {
            pages,
            dirtied_at_start: 7,
            dirtied: 7 + fee_pages,
            first_read: first,
            last_read: last,
            reads: 2,
            marks: vec![start, end],
        }
    }

    fn result(total: u64, calls: u64, max: Option<u64>) -> BenchResult {
        let m = |instructions, calls| Measurement { calls, instructions, ..Measurement::default() };
        BenchResult { total: m(total, calls), scopes: max.map(|x| (MAX.to_string(), m(x, 1))).into_iter().collect() }
    }

    #[test]
    fn steps_are_priced_one_by_one_and_the_largest_is_taken_after_pricing() {
        // Step 0: 5,000 instructions, 2,000 of them canbench's stable write fee for 2 pages; 3
        // Wasm pages accessed, 2 written. Step 1: 6,000 instructions, 1 page accessed and written.
        let steps = [step(100, 5_100, 3, 2, 2), step(8_000, 14_000, 1, 1, 0)];
        let ic = derive_ic(&result(11_000, 2, Some(6_000)), STEPS, &steps).unwrap();
        let first = 5_000 - 2 * 1_000 + 3 * ACCESS_FEE + 2 * WRITE_FEE;
        let second = 6_000 + ACCESS_FEE + WRITE_FEE;
        assert_eq!(ic.total.instructions, first + second);
        assert_eq!(ic.total.calls, 2);
        // Under canbench step 1 is the largest; on mainnet step 0 is.
        assert!(first > second);
        assert_eq!(ic.scopes[MAX].instructions, first);
    }

    #[test]
    fn a_result_the_steps_do_not_add_up_to_is_not_derived() {
        let steps = [step(100, 1_100, 1, 1, 0), step(2_000, 3_500, 1, 1, 0)];
        // The canister counted something else: a total that is not the steps' sum, a largest step
        // that is not theirs, another number of calls, another scope, no scope.
        for wrong in [
            result(2_501, 2, Some(1_500)),
            result(2_500, 2, Some(1_000)),
            result(2_500, 3, Some(1_500)),
            result(2_500, 2, None),
        ] {
            assert!(derive_ic(&wrong, STEPS, &steps).is_err());
        }
        let mut other_scope = result(2_500, 2, Some(1_500));
        other_scope.scopes.insert("w_avg".into(), Measurement::default());
        assert!(derive_ic(&other_scope, STEPS, &steps).is_err());
        // A step that read the counter a third time (its ic figure would depend on when).
        let mut three = steps.clone();
        three[1].reads = 3;
        let e = derive_ic(&result(2_500, 2, Some(1_500)), STEPS, &three).unwrap_err();
        assert!(e.contains("step 1 read the counter 3 times"), "{e}");
        // And a cell the grid says is measured is never derived.
        assert!(derive_ic(&result(2_500, 2, Some(1_500)), IcPricing::Measured, &steps).is_err());
    }

    #[test]
    fn one_step_adds_its_pages_fees_and_drops_canbenchs_stable_fee() {
        let steps = [step(0, 50_000, 4, 2, 3)];
        let ic = derive_ic(&result(50_000, 1, None), IcPricing::OneStep, &steps).unwrap();
        assert_eq!(ic.total.instructions, 50_000 - 3 * 1_000 + 4 * ACCESS_FEE + 2 * WRITE_FEE);
        assert!(derive_ic(&result(50_000, 2, None), IcPricing::OneStep, &steps).is_err());
        // A total that is not the step's interval (a read after the timer stopped), or two steps.
        assert!(derive_ic(&result(49_999, 1, None), IcPricing::OneStep, &steps).is_err());
        let two = [steps[0].clone(), steps[0].clone()];
        assert!(derive_ic(&result(50_000, 1, None), IcPricing::OneStep, &two).is_err());
    }

    /// A step whose counter reads returned `values`, each read's cumulative pages being
    /// `heap` pages accessed and written (heap only), and its stable pages dirtied `dirtied`.
    fn marked(reads: &[(u64, u64, u64)]) -> Step {
        let marks: Vec<Mark> = reads
            .iter()
            .map(|&(value, heap, dirtied)| Mark {
                value,
                pages: PageCounts { heap_accessed: heap, heap_written: heap, ..PageCounts::default() },
                dirtied,
            })
            .collect();
        let (first, last) = (marks[0], marks[marks.len() - 1]);
        Step {
            pages: last.pages,
            dirtied_at_start: first.dirtied,
            dirtied: last.dirtied,
            first_read: first.value,
            last_read: last.value,
            reads: marks.len() as u32,
            marks,
        }
    }

    fn scoped(scopes: &[(&str, u64, u64)]) -> BenchResult {
        let m = |instructions, calls| Measurement { calls, instructions, ..Measurement::default() };
        BenchResult {
            total: m(scopes.iter().map(|s| s.1).sum(), 1),
            scopes: scopes.iter().map(|&(n, i, c)| (n.to_string(), m(i, c))).collect(),
        }
    }

    /// bench_fn's start, scope `a` (1,000 instructions, 2 pages, 1 page of canbench's stable
    /// write fee), work between the scopes (1 page), scope `b` (2,000, 3 pages), bench_fn's end.
    fn phases() -> Step {
        marked(&[(0, 0, 0), (100, 1, 0), (1_100, 3, 1), (1_500, 4, 1), (3_500, 7, 1), (4_000, 7, 1)])
    }

    #[test]
    fn scopes_are_priced_from_the_two_reads_that_time_them() {
        let ic = derive_ic(&scoped(&[("a", 1_000, 1), ("b", 2_000, 1)]), IcPricing::Scopes, &[phases()]).unwrap();
        let a = 1_000 + 2 * (ACCESS_FEE + WRITE_FEE) - 1_000;
        let b = 2_000 + 3 * (ACCESS_FEE + WRITE_FEE);
        assert_eq!((ic.scopes["a"].instructions, ic.scopes["b"].instructions), (a, b));
        // `total` stays the scopes' sum: the page between them is in neither.
        assert_eq!(ic.total.instructions, a + b);
        let pages = scope_pages(&scoped(&[("a", 1_000, 1), ("b", 2_000, 1)]), &[phases()], &|_| true);
        let heap = |n| PageCounts { heap_accessed: n, heap_written: n, ..PageCounts::default() };
        assert_eq!(pages, BTreeMap::from([("a".to_string(), heap(2)), ("b".to_string(), heap(3))]));
        // The reads as the ic model would have returned them time each scope by its ic figure.
        let as_ic = phases().as_ic();
        assert_eq!(as_ic.spans_of(a).iter().map(|s| s.pages).collect::<Vec<_>>(), [heap(2)]);
        assert_eq!(as_ic.spans_of(b).iter().map(|s| s.pages).collect::<Vec<_>>(), [heap(3)]);
        assert_eq!(scope_pages(&ic, &[as_ic], &|_| true), pages);
    }

    #[test]
    fn scopes_that_cannot_be_placed_are_not_priced_and_get_no_pages() {
        // No two reads 1,234 apart; a scope of two calls; a total that is not the scopes' sum.
        assert!(derive_ic(&scoped(&[("a", 1_234, 1)]), IcPricing::Scopes, &[phases()]).is_err());
        assert!(derive_ic(&scoped(&[("a", 1_000, 2)]), IcPricing::Scopes, &[phases()]).is_err());
        let mut off = scoped(&[("a", 1_000, 1), ("b", 2_000, 1)]);
        off.total.instructions += 1;
        assert!(derive_ic(&off, IcPricing::Scopes, &[phases()]).is_err());
        // Two stretches of 1,000 instructions that touched different pages cannot be told apart.
        let twice = marked(&[(0, 0, 0), (1_000, 1, 0), (2_000, 4, 0)]);
        let e = derive_ic(&scoped(&[("a", 1_000, 1)]), IcPricing::Scopes, std::slice::from_ref(&twice)).unwrap_err();
        assert!(e.contains("touched different pages"), "{e}");
        assert!(scope_pages(&scoped(&[("a", 1_000, 1)]), &[twice], &|_| true).is_empty());
        // Several calls (a trie cell's `w_avg`) or no step: no pages.
        assert!(scope_pages(&scoped(&[("a", 1_000, 2)]), &[phases()], &|_| true).is_empty());
        assert!(scope_pages(&scoped(&[("a", 1_000, 1)]), &[], &|_| true).is_empty());
        // A step that read the counter more often than it kept: its reads are not searched.
        let mut cut = phases();
        cut.reads += 1;
        assert!(scope_pages(&scoped(&[("a", 1_000, 1)]), std::slice::from_ref(&cut), &|_| true).is_empty());
        assert!(derive_ic(&scoped(&[("a", 1_000, 1), ("b", 2_000, 1)]), IcPricing::Scopes, &[cut]).is_err());
        // A scope the grid does not declare one stretch (a sum of several) is never placed, even
        // where two reads happen to be that far apart.
        assert!(scope_pages(&scoped(&[("a", 1_000, 1)]), &[phases()], &|s: &str| s != "a").is_empty());
    }
}
