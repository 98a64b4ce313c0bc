//! `stablebench-report`: the results site's command-line part.
//!
//!   stablebench-report compare canbench_results.csv [vfs/canbench_results.csv] [--out FILE]
//!
//! writes the page of a run against the committed results (default `target/site/compare.html`)
//! from the CSV files canbench writes with `--csv` (`stablebench-runner bench --csv` writes the
//! same). `scripts/test.sh` does this after the grid's `--check` run, so CI keeps the page as an
//! artifact; `scripts/site-compare.sh` is the short way.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use stablebench_report::site;

#[derive(Parser)]
#[command(about = "The stablebench results site's command-line part")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Writes the page of a run against the committed results from canbench's CSV files.
    Compare {
        /// The CSV files (`canbench --csv`), one per canbench project.
        #[arg(required = true)]
        csv: Vec<PathBuf>,
        /// Changes below this, in percent, are noise (canbench's `--noise-threshold`).
        #[arg(long, default_value_t = 2.0)]
        noise_threshold: f64,
        /// Where to write the page.
        #[arg(long, default_value = "target/site/compare.html")]
        out: PathBuf,
    },
}

fn main() -> ExitCode {
    let Command::Compare { csv, noise_threshold, out } = Cli::parse().command;
    let mut rows = Vec::new();
    for path in &csv {
        let parsed = std::fs::read_to_string(path).map_err(|e| e.to_string()).and_then(|text| site::parse_csv(&text));
        match parsed {
            Ok(r) => rows.extend(r),
            Err(e) => {
                eprintln!("{}: {e}", path.display());
                return ExitCode::FAILURE;
            }
        }
    }
    let source = csv.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(" and ");
    let html = site::compare(&rows, noise_threshold, &source);
    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        if let Err(e) = std::fs::create_dir_all(dir) {
            eprintln!("{}: {e}", dir.display());
            return ExitCode::FAILURE;
        }
    }
    if let Err(e) = std::fs::write(&out, html) {
        eprintln!("{}: {e}", out.display());
        return ExitCode::FAILURE;
    }
    println!("wrote {} ({} rows of {source})", out.display(), rows.len());
    ExitCode::SUCCESS
}
