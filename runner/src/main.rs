//! `stablebench-runner`: offline canbench and a small canister shell.
//!
//! ```text
//! stablebench-runner bench [PATTERN] [--persist] [--csv] ...   # canbench 0.7, offline
//! stablebench-runner install WASM [--arg '(...)']              # state in .stablebench/canister
//! stablebench-runner call METHOD ['(args)'] [--caller P] [--query]
//! stablebench-runner upgrade WASM [--arg '(...)']
//! stablebench-runner tick [--advance SECONDS]                  # run the global timer if due
//! stablebench-runner live [PATTERN...] [--warm-cold] [--dfx [--network ic]]  # the benchmark canister's Candid API
//! stablebench-runner load [--users N] [--orders N] [--budget I] [--state DIR] [--dfx]  # the data set, in budgeted calls
//! ```

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use candid::Principal;
use clap::{Parser, Subcommand, ValueEnum};
use stablebench_runner::candid_text::{self, Interface};
use stablebench_runner::canister::{self, Canister, Code, Limits, Options};
use stablebench_runner::instrument::Metering;
use stablebench_runner::suite;

#[derive(Parser)]
#[command(
    name = "stablebench-runner",
    version,
    about = "Runs IC canister wasm offline with the replica's instruction accounting"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Runs the canbench benchmarks of canbench.yml like canbench 0.7 does, on wasmtime.
    Bench(suite::BenchArgs),
    /// Runs benchmarks through the benchmark canister's Candid API (bench_setup, bench_run) as a
    /// dfx user does: on this runner, or with --dfx / --network on a deployed canister.
    Live(stablebench_runner::live::LiveArgs),
    /// Loads the users/orders data set into the production canister in resumable calls under an
    /// instruction budget (create_schema, add_users, add_orders, create_indexes), offline into
    /// --state or with --dfx / --network into a deployed canister; a second run continues and
    /// loads nothing twice. Progress and a cost table on stderr, the `stats` reply on stdout.
    Load(stablebench_runner::load::LoadArgs),
    /// Installs a canister (start + canister_init) and saves it in the state directory.
    Install {
        /// The wasm file (.wasm or .wasm.gz).
        wasm: PathBuf,
        /// Candid text argument of canister_init, e.g. '(record { x = 1 })'.
        #[arg(long, default_value = "()")]
        arg: String,
        /// A controller (repeatable). Default: the runner's default controller.
        #[arg(long = "controller")]
        controllers: Vec<String>,
        /// The instruction limits of the canister's messages.
        #[arg(long, value_enum, default_value_t = LimitsArg::Production)]
        limits: LimitsArg,
        /// The canister's wasm_memory_limit in bytes (0: none): memory.grow past it traps.
        #[arg(long, default_value_t = stablebench_runner::replica::DEFAULT_WASM_MEMORY_LIMIT_BYTES)]
        wasm_memory_limit: u64,
        /// An environment variable of the canister, NAME=VALUE (repeatable).
        #[arg(long = "env", value_parser = parse_env_var)]
        env_vars: Vec<(String, String)>,
        #[command(flatten)]
        common: Common,
    },
    /// Runs the canister's global timer if it is due (after moving the clock by --advance
    /// seconds), with the calls it makes (ic-cdk timers run this way).
    Tick {
        /// Seconds to move the canister's clock forward first.
        #[arg(long, default_value_t = 0)]
        advance: u64,
        #[command(flatten)]
        common: Common,
    },
    /// Calls a method (update, or query with --query or when the interface says so).
    Call {
        /// Method name.
        method: String,
        /// Candid text arguments, e.g. '(0, 10_000)'.
        #[arg(default_value = "()")]
        args: String,
        /// Run as a query: its changes are discarded.
        #[arg(long)]
        query: bool,
        /// Caller principal, or "anonymous". Default: the first controller.
        #[arg(long)]
        caller: Option<String>,
        /// Candid interface for typing arguments (default: the wasm's candid:service metadata).
        #[arg(long)]
        candid: Option<PathBuf>,
        #[command(flatten)]
        common: Common,
    },
    /// Upgrades the saved canister to a new wasm (pre_upgrade, new module, post_upgrade).
    Upgrade {
        /// The new wasm file.
        wasm: PathBuf,
        /// Candid text argument of canister_post_upgrade.
        #[arg(long, default_value = "()")]
        arg: String,
        #[command(flatten)]
        common: Common,
    },
}

/// `install --limits`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum LimitsArg {
    /// An application subnet: 40 B instructions per update, 5 B per query.
    Production,
    /// PocketIC's benchmarking subnet (what canbench uses): practically unlimited.
    Benchmark,
}

impl From<LimitsArg> for Limits {
    fn from(l: LimitsArg) -> Limits {
        match l {
            LimitsArg::Production => Limits::PRODUCTION,
            LimitsArg::Benchmark => Limits::BENCHMARK,
        }
    }
}

#[derive(clap::Args)]
struct Common {
    /// Where the canister's state is kept between commands.
    #[arg(long, default_value = ".stablebench/canister")]
    state: PathBuf,
    /// Print the canister's debug_print output.
    #[arg(long)]
    show_canister_output: bool,
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Bench(args) => suite::run(&args),
        Command::Live(args) => stablebench_runner::live::main(&args).map(|()| ExitCode::SUCCESS),
        Command::Load(args) => stablebench_runner::load::main(&args).map(|()| ExitCode::SUCCESS),
        Command::Install { wasm, arg, controllers, limits, wasm_memory_limit, env_vars, common } => {
            let code = Code::from_file(&wasm, Metering::On)?;
            let controllers = if controllers.is_empty() {
                vec![canister::default_controller()]
            } else {
                controllers.iter().map(|c| principal(c)).collect::<Result<_>>()?
            };
            let iface = interface(&code, None)?;
            let arg = candid_text::encode_init_args(&arg, iface.as_ref())?;
            let opts = Options {
                controllers,
                limits: limits.into(),
                print_output: common.show_canister_output,
                wasm_memory_limit,
                env_vars,
                ..Options::default()
            };
            let (mut c, out) = Canister::install(code, &arg, opts)?;
            c.save(&common.state)?;
            println!(
                "installed {} ({} instructions); state in {}",
                wasm.display(),
                out.instructions,
                common.state.display()
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Call { method, args, query, caller, candid, common } => {
            let mut c = Canister::load(&common.state, common.show_canister_output)?;
            let iface = interface(c.code(), candid.as_deref())?;
            let bytes = candid_text::encode_args(&args, &method, iface.as_ref())?;
            let caller = match caller {
                Some(p) => principal(&p)?,
                None => c.options().controllers[0],
            };
            let is_query = query || iface.as_ref().map(|i| i.is_query(&method)).transpose()?.unwrap_or(false);
            let out = if is_query { c.query(&method, &bytes, caller) } else { c.update(&method, &bytes, caller) };
            c.save(&common.state)?;
            eprintln!("{} instructions ({})", out.instructions, if is_query { "query" } else { "update" });
            match out.result {
                Ok(reply) => {
                    println!("{}", candid_text::decode_reply(&reply, &method, iface.as_ref())?);
                    Ok(ExitCode::SUCCESS)
                }
                Err(reject) => {
                    eprintln!("rejected: {reject}");
                    Ok(ExitCode::FAILURE)
                }
            }
        }
        Command::Tick { advance, common } => {
            let mut c = Canister::load(&common.state, common.show_canister_output)?;
            c.advance_time(advance.saturating_mul(1_000_000_000));
            let out = c.tick();
            c.save(&common.state)?;
            match out {
                None if c.timer() == 0 => println!("no timer is set"),
                None => println!("the timer is due in {} s", c.timer().saturating_sub(c.now()) / 1_000_000_000),
                Some(out) => {
                    println!(
                        "ran canister_global_timer ({} instructions, calls and callbacks included)",
                        out.instructions
                    );
                    if let Err(e) = out.result {
                        eprintln!("the timer failed: {e}");
                        return Ok(ExitCode::FAILURE);
                    }
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Upgrade { wasm, arg, common } => {
            let mut c = Canister::load(&common.state, common.show_canister_output)?;
            let code = Code::from_file(&wasm, Metering::On)?;
            let iface = interface(&code, None)?;
            let arg = candid_text::encode_init_args(&arg, iface.as_ref())?;
            let out = c.upgrade(code, &arg);
            if let Err(e) = out.result {
                bail!("upgrade failed, the canister is unchanged: {e}");
            }
            c.save(&common.state)?;
            println!("upgraded to {} ({} instructions)", wasm.display(), out.instructions);
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn parse_env_var(text: &str) -> Result<(String, String), String> {
    text.split_once('=')
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .ok_or_else(|| format!("{text:?} is not NAME=VALUE"))
}

fn principal(text: &str) -> Result<Principal> {
    if text == "anonymous" {
        return Ok(Principal::anonymous());
    }
    Principal::from_text(text).with_context(|| format!("{text:?} is not a principal"))
}

fn interface(code: &Code, path: Option<&Path>) -> Result<Option<Interface>> {
    let did = match path {
        Some(p) => Some(std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?),
        None => code.candid_service(),
    };
    did.map(|d| Interface::parse(&d)).transpose()
}
