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
use crate::host::{MAX_QUERY_REPLY_BYTES, MAX_UPDATE_REPLY_BYTES};
use crate::instrument::Metering;
use crate::profile;

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
    Options {
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
    mut each: impl FnMut(&Run),
) -> Result<Vec<Run>> {
    let names: Vec<String> =
        benchmark_names(&code).into_iter().filter(|n| pattern.is_none_or(|p| n.contains(p))).collect();
    let opts = bench_options(setup, print_output);
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
            let (tx, next, names) = (tx.clone(), &next, &names);
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

fn run_one(c: &mut Canister, name: &str, profile: Option<&profile::Output>) -> Result<Run> {
    let started = Instant::now();
    let out = c.query(&format!("__canbench__{name}"), b"DIDL\x00\x00", Principal::anonymous());
    let wall = started.elapsed();
    let result =
        out.result.as_ref().map_err(|e| BenchError { name: name.to_string(), reject: e.clone() }).and_then(|reply| {
            candid::decode_one::<BenchResult>(reply).map_err(|e| BenchError {
                name: name.to_string(),
                reject: Reject::Rejected(format!("decoding the result: {e}")),
            })
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
    Ok(Run { name: name.to_string(), result, reply_bytes, wall, profile: written })
}

/// A benchmark query that did not reply.
#[derive(Debug)]
pub struct BenchError {
    /// The benchmark.
    pub name: String,
    /// Why.
    pub reject: Reject,
}

impl std::fmt::Display for BenchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // canbench: "Error executing benchmark <name>. Error:\n<code>: <message>"
        let code = match self.reject {
            Reject::Rejected(_) => "CanisterReject",
            _ => "CanisterError",
        };
        write!(f, "Error executing benchmark {}. Error:\n{code}: {}", self.name, self.reject)
    }
}

impl std::error::Error for BenchError {}

/// The `bench` command.
pub fn run(args: &BenchArgs) -> Result<ExitCode> {
    let cfg_name = std::env::var("CANBENCH_CFG_FILE").unwrap_or_else(|_| "canbench.yml".into());
    let Ok(cfg_text) = std::fs::read_to_string(&cfg_name) else {
        eprintln!("configuration file not found: '{cfg_name}'");
        return Ok(ExitCode::FAILURE);
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
    let old = match canbench::read_results(&results_path) {
        Ok(r) => r.map(|r| r.benches).unwrap_or_default(),
        Err(e) if e.downcast_ref::<canbench::VersionError>().is_some() => {
            eprintln!("{e}");
            return Ok(ExitCode::FAILURE);
        }
        Err(e) => return Err(e),
    };
    let init_args = match &cfg.init_args {
        Some(a) => hex_decode(&a.hex).with_context(|| format!("{cfg_name}: init_args.hex"))?,
        None => Vec::new(),
    };
    let stable = cfg
        .stable_memory
        .as_ref()
        .map(|s| std::fs::read(&s.file).with_context(|| format!("reading {}", s.file.display())))
        .transpose()?;
    let env_vars = cfg.env_vars.as_ref().map(|e| read_env_vars(&e.file)).transpose()?.unwrap_or_default();
    let setup = BenchSetup { init_args, stable_memory: stable, env_vars };
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
    let started = Instant::now();
    let code = Code::from_file(&cfg.wasm_path, metering)?;
    let load = started.elapsed();
    let profile_out = if args.profile {
        let names = profile::Names::from_wasm(&code.wasm)?;
        if names.is_empty() {
            eprintln!(
                "{} has no name section: functions are shown as func[N] (scripts/build.sh bench keeps the names)",
                cfg.wasm_path.display()
            );
        }
        Some(profile::Output { dir: args.profile_dir.clone(), names })
    } else {
        None
    };
    let show_results = !args.hide_results;
    let jobs = args.jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let runs = run_benchmarks(
        code,
        &setup,
        args.pattern.as_deref(),
        args.show_canister_output,
        jobs,
        profile_out.as_ref(),
        |run| {
            if show_results {
                print!(
                    "{}",
                    canbench::format_benchmark_section(
                        &run.name,
                        &run.result,
                        old.get(&run.name),
                        args.noise_threshold
                    )
                );
            }
        },
    );
    let runs = match runs {
        Ok(r) => r,
        Err(e) if e.downcast_ref::<BenchError>().is_some() => {
            eprintln!("{e}");
            return Ok(ExitCode::FAILURE);
        }
        Err(e) => return Err(e),
    };
    let new: BTreeMap<String, BenchResult> = runs.iter().map(|r| (r.name.clone(), copy_result(&r.result))).collect();
    print!(
        "{}",
        canbench::format_report_tail(&new, &old, !args.less_verbose || args.show_summary, args.noise_threshold)
    );
    if args.csv {
        canbench::write_csv(&csv_path, &new, &old, args.noise_threshold)?;
        print!("{}", canbench::format_csv_saved(&csv_path));
    }
    if args.persist {
        canbench::write_results(&results_path, &new)?;
        print!("{}", canbench::format_persisted(&results_path));
    }
    println!();
    print!("{}", limits_table(&runs, metering, jobs, load, started.elapsed()));
    if let Some(out) = &profile_out {
        print!("{}", profiles_summary(&runs, &out.dir));
    }
    if args.check {
        let stale = stale_results(&new, &old, args.pattern.as_deref(), args.noise_threshold);
        if !stale.is_empty() {
            eprintln!(
                "{} is stale (regenerate with scripts/bench.sh --persist and commit it with the change):",
                results_path.display()
            );
            for line in stale {
                eprintln!("  {line}");
            }
            return Ok(ExitCode::FAILURE);
        }
        eprintln!("{} is up to date (every benchmark within {}%)", results_path.display(), args.noise_threshold);
    }
    Ok(ExitCode::SUCCESS)
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
                }
            }
        }
    }
    for name in old.keys().filter(|n| !new.contains_key(*n) && pattern.is_none_or(|p| n.contains(p))) {
        out.push(format!("{name}: in the results file but no longer a benchmark"));
    }
    out
}

fn hex_decode(s: &str) -> Result<Vec<u8>> {
    hex::decode(s.trim()).map_err(|e| anyhow!("{e}"))
}

/// Whether each benchmark's measured step fits the production limits, and the wall times.
pub fn limits_table(runs: &[Run], metering: Metering, jobs: usize, load: Duration, total: Duration) -> String {
    let q = Limits::PRODUCTION.query;
    let u = Limits::PRODUCTION.update;
    let fits = |ok: bool| if ok { "yes" } else { "NO" };
    // The first column is as wide as the longest name, so the table stays aligned.
    let w = runs.iter().map(|r| r.name.len()).chain([9]).max().unwrap_or(9);
    let mut t = String::from("Production limits (measured step only; instructions, not cycles):\n");
    t += &format!(
        "| {:<w$} | {:>12} | {:>10} | {:>11} | {:>12} | {:>10} | {:>8} |\n",
        "benchmark", "instructions", "5 B query", "40 B update", "reply bytes", "2/3 MiB", "wall"
    );
    t += &format!(
        "|{:-<w2$}|{:->14}|{:->12}|{:->13}|{:->14}|{:->12}|{:->10}|\n",
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
        let i = r.result.total.instructions / r.result.total.calls.max(1);
        let (bytes, reply_fit) = match r.reply_bytes {
            Some(b) => {
                (b.to_string(), format!("{}/{}", fits(b <= MAX_UPDATE_REPLY_BYTES), fits(b <= MAX_QUERY_REPLY_BYTES)))
            }
            None => ("-".into(), "-".into()),
        };
        t += &format!(
            "| {:<w$} | {:>12} | {:>10} | {:>11} | {:>12} | {:>10} | {:>7.1}s |\n",
            r.name,
            canbench::fmt_block_value(i),
            fits(i <= q),
            fits(i <= u),
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
    t += &format!(
        "Wall time: {:.1}s in all ({mode}; loading and compiling the wasm {:.1}s, install and {} benchmark queries on {jobs} thread{} the rest; a benchmark's wall time includes its setup). Instructions are per call where a benchmark records several calls (`calls` > 1). Reply bytes: the Candid size of the rows the matching endpoint would return.\n",
        total.as_secs_f64(),
        load.as_secs_f64(),
        runs.len(),
        if jobs == 1 { "" } else { "s" }
    );
    t
}

/// Where each benchmark's profile is, and its top functions.
pub fn profiles_summary(runs: &[Run], dir: &std::path::Path) -> String {
    let mut t = format!(
        "\nProfiles in {} (wasm instructions by function: <benchmark>.txt, .step.svg/.folded for the measured step, \
         .query.svg/.folded for the whole query):\n",
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
