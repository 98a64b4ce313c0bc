//! `stablebench-runner live`: drives the benchmark canister's live API (`bench_cells`,
//! `bench_setup`, `bench_run`, `bench_run_query`; see `canister/src/live.rs`) the way a dfx user
//! does, offline on this runner (default) or on a deployed canister through `dfx` (`--dfx`,
//! `--network ic`), and prints one table either way. Every argument and reply is the canister's
//! Candid (`stablebench_grid::live`), so both paths decode the same bytes (see [`crate::target`]).
//!
//! Two tables: the default one runs each benchmark's setup call by call and then its measured step
//! as an update, next to what canbench recorded in `canbench_results.yml`; `--warm-cold` runs each
//! read benchmark after an upgrade (cold caches) as a query twice, then as an update (which warms
//! the caches for later calls), then as a query again (warm).

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use stablebench_grid::grouped;
use stablebench_grid::live::{BenchCell, BenchReport, Oracle, SetupProgress};

use crate::canbench::{read_results, BenchResult};
use crate::target::{call, Dfx, Offline, Target};

/// Arguments of `stablebench-runner live`.
#[derive(clap::Args, Debug)]
pub struct LiveArgs {
    /// Only benchmarks whose name contains one of these (all if none).
    pub patterns: Vec<String>,
    /// Call a canister deployed with dfx (`dfx deploy stablebench_bench`) instead of the runner.
    #[arg(long)]
    pub dfx: bool,
    /// The dfx network (`ic` for mainnet); implies --dfx.
    #[arg(long)]
    pub network: Option<String>,
    /// The dfx canister name.
    #[arg(long, default_value = "stablebench_bench")]
    pub canister: String,
    /// The benchmark wasm the runner installs (offline only).
    #[arg(long, default_value = "target/canister/stablebench_bench.wasm")]
    pub wasm: PathBuf,
    /// Instruction budget of each bench_setup call (default: the canister's, 30 B).
    #[arg(long)]
    pub budget: Option<u64>,
    /// Warm against cold: read benchmarks only, first and second query after an upgrade, then an
    /// update, then a warm query.
    #[arg(long)]
    pub warm_cold: bool,
    /// canbench's results to compare with.
    #[arg(long, default_value = "canbench_results.yml")]
    pub results: PathBuf,
}

/// The grid's benchmarks as the canister lists them, those whose name contains one of
/// `patterns` (all if it is empty).
pub fn cells(target: &mut dyn Target, patterns: &[String]) -> Result<Vec<BenchCell>> {
    let reply = target.call("bench_cells", candid::encode_args(())?, true)?;
    let all: Vec<BenchCell> = candid::decode_one(&reply).context("decoding bench_cells")?;
    Ok(all.into_iter().filter(|c| patterns.is_empty() || patterns.iter().any(|p| c.name.contains(p))).collect())
}

/// Runs `bench_setup(name)` until the setup is complete; returns the calls it took.
pub fn setup(target: &mut dyn Target, name: &str, budget: Option<u64>) -> Result<u64> {
    for calls in 1.. {
        let p: SetupProgress = call(target, "bench_setup", (name, budget), false)?;
        eprintln!(
            "  bench_setup {name}: call {calls}: step {} ({}/{}), {} of {} done, {} instructions",
            p.step, p.steps_done, p.steps, p.done, p.units, p.instructions
        );
        if p.complete {
            return Ok(calls);
        }
    }
    unreachable!()
}

/// `bench_run` (update) or `bench_run_query`.
pub fn run(target: &mut dyn Target, name: &str, query: bool) -> Result<BenchReport> {
    let method = if query { "bench_run_query" } else { "bench_run" };
    let report: BenchReport = call(target, method, (name,), query)?;
    if let Oracle::Fail(why) = &report.oracle {
        bail!("{name}: the oracle rejected the result: {why}");
    }
    Ok(report)
}

/// The warm and cold runs of one read benchmark.
#[derive(Clone, Debug)]
pub struct WarmCold {
    /// The benchmark.
    pub name: String,
    /// The first query after an upgrade.
    pub first: BenchReport,
    /// The second query after it (queries cannot warm a cache: still cold).
    pub second: BenchReport,
    /// The update after them (the first call that keeps its cache).
    pub update: BenchReport,
    /// A query after the update.
    pub warm: BenchReport,
}

/// Sets `name` up, upgrades, and measures it cold and warm.
pub fn warm_cold(target: &mut dyn Target, name: &str, budget: Option<u64>) -> Result<WarmCold> {
    setup(target, name, budget)?;
    target.upgrade()?;
    let first = run(target, name, true)?;
    let second = run(target, name, true)?;
    let update = run(target, name, false)?;
    let warm = run(target, name, true)?;
    Ok(WarmCold { name: name.to_string(), first, second, update, warm })
}

/// The table of measured steps, next to canbench's numbers.
pub fn runs_table(reports: &[(BenchReport, u64)], canbench: &BTreeMap<String, BenchResult>) -> String {
    let mut out = String::from(
        "| benchmark | setup calls | measured step, live | canbench | live - canbench | whole message | heap +pages | stable +pages | oracle | cycles, 13 nodes | cycles, 34 nodes | USD, 13 nodes |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|\n",
    );
    for (r, setup_calls) in reports {
        let (recorded, delta) = match canbench.get(&r.name) {
            Some(b) => {
                let d = r.instructions as i128 - b.total.instructions as i128;
                let pct = 100.0 * d as f64 / b.total.instructions.max(1) as f64;
                (grouped(b.total.instructions), format!("{d:+} ({pct:+.2}%)"))
            }
            None => ("-".into(), "-".into()),
        };
        out += &format!(
            "| `{}` | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.6} |\n",
            r.name,
            setup_calls,
            grouped(r.instructions),
            recorded,
            delta,
            grouped(r.message_instructions),
            r.heap_increase_pages,
            r.stable_memory_increase_pages,
            if matches!(r.oracle, Oracle::Pass(_)) { "pass" } else { "FAIL" },
            grouped(r.cycles_13_nodes),
            grouped(r.cycles_34_nodes),
            r.usd_13_nodes,
        );
    }
    out
}

/// The warm/cold table: measured-step instructions of each run, cold against warm, and the same
/// for the whole message (what counts against the query's 5 B limit).
pub fn warm_cold_table(rows: &[WarmCold]) -> String {
    let mut out = String::from(
        "| benchmark | 1st query after upgrade | 2nd query | update (warms) | warm query | 1st / warm | whole message: 1st query | warm query | 1st / warm |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    let ratio = |a: u64, b: u64| a as f64 / b.max(1) as f64;
    for w in rows {
        out += &format!(
            "| `{}` | {} | {} | {} | {} | {:.3}x | {} | {} | {:.3}x |\n",
            w.name,
            grouped(w.first.instructions),
            grouped(w.second.instructions),
            grouped(w.update.instructions),
            grouped(w.warm.instructions),
            ratio(w.first.instructions, w.warm.instructions),
            grouped(w.first.message_instructions),
            grouped(w.warm.message_instructions),
            ratio(w.first.message_instructions, w.warm.message_instructions),
        );
    }
    out
}

/// `stablebench-runner live`.
pub fn main(args: &LiveArgs) -> Result<()> {
    let mut target: Box<dyn Target> = if args.dfx || args.network.is_some() {
        Box::new(Dfx::new(args.network.clone(), args.canister.clone(), "canister/stablebench_bench.did".into()))
    } else {
        Box::new(Offline::install(&args.wasm)?)
    };
    let cells = cells(target.as_mut(), &args.patterns)?;
    if cells.is_empty() {
        bail!("no benchmark matches {:?}", args.patterns);
    }
    if args.warm_cold {
        let mut rows = Vec::new();
        for cell in cells.iter().filter(|c| c.read) {
            eprintln!("{}: set up, upgrade, query, query, update, query", cell.name);
            rows.push(warm_cold(target.as_mut(), &cell.name, args.budget)?);
        }
        print!("{}", warm_cold_table(&rows));
        return Ok(());
    }
    let canbench = read_results(&args.results)?.map(|r| r.benches).unwrap_or_default();
    let mut reports = Vec::new();
    let mut failed = Vec::new();
    for cell in &cells {
        eprintln!("{}: set up, then bench_run", cell.name);
        // A measured step larger than one update (the 100k NodeStore runs on SQLite and the
        // StableBTreeMap) is rejected by the instruction limit: reported, and the run goes on.
        match setup(target.as_mut(), &cell.name, args.budget)
            .and_then(|calls| run(target.as_mut(), &cell.name, false).map(|r| (r, calls)))
        {
            Ok(row) => reports.push(row),
            Err(e) => failed.push(format!("- `{}`: {e:#}\n", cell.name)),
        }
    }
    print!("{}", runs_table(&reports, &canbench));
    if !failed.is_empty() {
        print!("\nNot run on a live canister:\n\n{}", failed.concat());
        bail!("{} benchmarks failed", failed.len());
    }
    Ok(())
}
