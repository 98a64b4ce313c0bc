//! Ported from canbench 0.7.0 (dfinity/canbench, Apache-2.0), src/lib.rs: the output side of
//! `run_benchmarks` (per-benchmark blocks, summary, "Only significant changes:" table, CSV and
//! results file). The result types are canbench-rs 0.7's own ([`BenchResult`], [`Measurement`]).
//!
//! Everything canbench prints with `println!` is returned here as a `String` whose lines all
//! end in `\n`, so `print!("{}", ...)` reproduces canbench's stdout byte for byte. Colors go
//! through the `colored` crate as in canbench (bold benchmark names, blue "(new)", red/green
//! bold changes), decided when the string is formatted: `colored` looks at `CLICOLOR`,
//! `CLICOLOR_FORCE`, `NO_COLOR` and whether stdout is a terminal, or at
//! `colored::control::set_override`.
//!
//! canbench 0.7.0 prints, in this order (see [`format_report`], which does all of it):
//! 1. for each benchmark, in run (export) order, unless `--hide-results`:
//!    [`format_benchmark_section`] (separator, blank line, block, blank line);
//! 2. [`SEPARATOR`] and a newline;
//! 3. if verbose (the default, i.e. no `--less-verbose`) or `--show-summary`:
//!    [`format_summary_section`];
//! 4. with `--csv`: [`write_csv`] then [`format_csv_saved`];
//! 5. with `--persist`: [`write_results`] then [`format_persisted`].
//!
//! Where section 6 of the runtime spec (ic-runtime.md) and the canbench source disagree, the
//! source wins; those places are marked "Spec differs" in the code.

mod csv_file;
mod data;
mod fmt;
mod print_benchmark;
mod results_file;
mod summary;
mod table;

pub use csv_file::write_csv;
pub use print_benchmark::fmt_block_value;
pub use results_file::{read_results, write_results, Results, VersionError};

use std::collections::BTreeMap;
use std::path::Path;

/// The canbench version whose output this module reproduces, and that [`write_results`]
/// records in the results file.
pub const CANBENCH_VERSION: &str = "0.7.0";

/// canbench's default `--noise-threshold`, in percent.
pub const DEFAULT_NOISE_THRESHOLD: f64 = 2.0;

/// The most rows the "Only significant changes:" table shows (canbench `MAX_DISPLAYED_ROWS`);
/// beyond it the first 25 and last 25 rows are kept around a "... N rows omitted ..." row.
pub const MAX_DISPLAYED_ROWS: usize = 50;

/// The separator line canbench prints between sections (51 `-`, without the newline).
pub const SEPARATOR: &str = "---------------------------------------------------";

/// A benchmark's results and one measurement: canbench-rs 0.7's own types, re-exported.
///
/// A `__canbench__<name>` query replies a Candid `BenchResult` (`record { total : Measurement;
/// scopes : vec record { text; Measurement } }`), and canbench 0.7.0 decodes it into, prints
/// and persists exactly these types (its `PersistedResults` holds
/// `BTreeMap<String, canbench_rs::BenchResult>`). Using them rather than a copy makes the
/// results file's serde shape canbench's by construction: `total` then `scopes` (`scopes`
/// defaults to empty), `calls`, `instructions`, `heap_increase`, `stable_memory_increase` in
/// that order, each defaulting to 0 (the tests below pin that shape, so a canbench-rs 0.7.x that
/// changed it would fail them). The crate depends on ic-cdk and two proc-macro crates, which
/// build natively (the canister's native tests build them already); on x86_64 its wasm-only
/// parts (`bench_fn`, the tracing buffer) are never called by the runner.
///
/// canbench-rs's `BenchResult` derives neither `Clone` nor `Eq` (`Measurement` has `Clone`):
/// [`copy_result`] stands in for `clone`, and [`Results`] compares with `PartialEq` only.
pub use canbench_rs::{BenchResult, Measurement};

/// A copy of `r` (canbench-rs's [`BenchResult`] does not derive `Clone`).
pub fn copy_result(r: &BenchResult) -> BenchResult {
    BenchResult { total: r.total.clone(), scopes: r.scopes.clone() }
}

/// The block canbench prints for one benchmark (`print_benchmark`): `Benchmark: <name>`
/// (plus ` (new)` when `old` is `None`), `  total:` with instructions, heap_increase and
/// stable_memory_increase, then each scope (`  <scope> (scope):` with calls first), each metric
/// with its change against `old`: `(new)`, `(no change)`, `(regressed from 0)`,
/// `(<d>%) (change within noise threshold)` when |d| < `noise_threshold` percent,
/// `(regressed by <d>%)` or `(improved by <d>%)`.
pub fn format_benchmark(name: &str, new: &BenchResult, old: Option<&BenchResult>, noise_threshold: f64) -> String {
    print_benchmark::format_benchmark(name, new, old, noise_threshold)
}

/// What canbench prints per benchmark when results are shown: [`SEPARATOR`], a blank line,
/// [`format_benchmark`] and a blank line. (With `--instruction-tracing` canbench also prints
/// "Instruction traces written to <name>.svg" before the last blank line; not produced here.)
pub fn format_benchmark_section(
    name: &str,
    new: &BenchResult,
    old: Option<&BenchResult>,
    noise_threshold: f64,
) -> String {
    format!("{SEPARATOR}\n\n{}\n", format_benchmark(name, new, old, noise_threshold))
}

/// The "Summary:" block (status, counts, change and change % ranges for instructions,
/// heap_increase and stable_memory_increase, over benchmark totals only), without the blank
/// lines and separator around it.
pub fn format_summary(
    new: &BTreeMap<String, BenchResult>,
    old: &BTreeMap<String, BenchResult>,
    noise_threshold: f64,
) -> String {
    summary::format_summary(&data::extract(new, old), noise_threshold)
}

/// `Only significant changes:` followed by the table (rows where any metric is new, improved
/// or regressed, at most [`MAX_DISPLAYED_ROWS`]) and its legend line; `None` when no row is
/// significant, in which case canbench prints nothing for it.
pub fn format_significant_changes(
    new: &BTreeMap<String, BenchResult>,
    old: &BTreeMap<String, BenchResult>,
    noise_threshold: f64,
) -> Option<String> {
    let filtered = table::filter_entries(&data::extract(new, old), noise_threshold);
    if filtered.is_empty() {
        return None;
    }
    Some(format!("Only significant changes:\n{}", table::format_table(&filtered, MAX_DISPLAYED_ROWS)))
}

/// Everything canbench prints after the final separator when verbose or `--show-summary`:
/// a blank line, [`format_summary`], a blank line, [`SEPARATOR`]; then, if some row is
/// significant, a blank line, [`format_significant_changes`], a blank line and [`SEPARATOR`].
pub fn format_summary_section(
    new: &BTreeMap<String, BenchResult>,
    old: &BTreeMap<String, BenchResult>,
    noise_threshold: f64,
) -> String {
    let mut out = format!("\n{}\n{SEPARATOR}\n", format_summary(new, old, noise_threshold));
    if let Some(table) = format_significant_changes(new, old, noise_threshold) {
        out.push_str(&format!("\n{table}\n{SEPARATOR}\n"));
    }
    out
}

/// canbench's whole report for one run, from the first line up to (excluding) the CSV and
/// persist messages. `runs` are the new results in run order (canbench runs benchmarks in
/// the canister's export order); `old` are the results read from the results file (empty if
/// none); `show_results` is `!--hide-results`; `show_summary` is
/// `!--less-verbose || --show-summary`.
pub fn format_report(
    runs: &[(String, BenchResult)],
    old: &BTreeMap<String, BenchResult>,
    show_results: bool,
    show_summary: bool,
    noise_threshold: f64,
) -> String {
    let mut out = String::new();
    let mut new = BTreeMap::new();
    for (name, result) in runs {
        if show_results {
            out.push_str(&format_benchmark_section(name, result, old.get(name), noise_threshold));
        }
        new.insert(name.clone(), copy_result(result));
    }
    out.push_str(&format_report_tail(&new, old, show_summary, noise_threshold));
    out
}

/// What canbench prints after the per-benchmark sections: the separator and, unless
/// `--less-verbose` without `--show-summary`, the summary.
pub fn format_report_tail(
    new: &BTreeMap<String, BenchResult>,
    old: &BTreeMap<String, BenchResult>,
    show_summary: bool,
    noise_threshold: f64,
) -> String {
    let mut out = format!("{SEPARATOR}\n");
    if show_summary {
        out.push_str(&format_summary_section(new, old, noise_threshold));
    }
    out
}

/// canbench's percent change from `prev` to `curr` (infinite from 0, 0 when both are 0).
pub(crate) fn percent_change(curr: u64, prev: u64) -> f64 {
    data::Values::new(Some(curr), Some(prev)).percent_diff().expect("both values are present")
}

/// The line canbench prints after writing the CSV file: `CSV results saved to <path>`.
pub fn format_csv_saved(path: &Path) -> String {
    format!("CSV results saved to {}\n", path.display())
}

/// The line canbench prints after writing the results file:
/// `Successfully persisted results to <path>`.
pub fn format_persisted(path: &Path) -> String {
    format!("Successfully persisted results to {}\n", path.display())
}

/// Helpers shared by the tests of this module.
#[cfg(test)]
pub(crate) mod test_support {
    use super::{BenchResult, Measurement};
    use std::collections::BTreeMap;
    use std::path::{Path, PathBuf};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;

    pub(crate) fn m(calls: u64, instructions: u64, heap: u64, stable: u64) -> Measurement {
        Measurement { calls, instructions, heap_increase: heap, stable_memory_increase: stable }
    }

    pub(crate) fn bench(total: Measurement, scopes: &[(&str, Measurement)]) -> BenchResult {
        BenchResult { total, scopes: scopes.iter().map(|(name, m)| (name.to_string(), m.clone())).collect() }
    }

    pub(crate) fn results<S: AsRef<str>>(items: &[(S, BenchResult)]) -> BTreeMap<String, BenchResult> {
        items.iter().map(|(name, r)| (name.as_ref().to_string(), super::copy_result(r))).collect()
    }

    /// `colored`'s override is process-global and tests run in parallel: every test that
    /// formats colored text goes through this lock.
    static COLOR_LOCK: Mutex<()> = Mutex::new(());

    pub(crate) fn with_colors<R>(enabled: bool, f: impl FnOnce() -> R) -> R {
        let _guard = COLOR_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        colored::control::set_override(enabled);
        let result = f();
        colored::control::unset_override();
        result
    }

    /// A fresh directory under the system temp dir, removed on drop.
    pub(crate) struct TempDir(PathBuf);

    impl TempDir {
        pub(crate) fn new(label: &str) -> TempDir {
            static COUNTER: AtomicUsize = AtomicUsize::new(0);
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let dir = std::env::temp_dir().join(format!("stablebench-canbench-{label}-{}-{n}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            TempDir(dir)
        }

        pub(crate) fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::test_support::{bench, m, results, with_colors};
    use super::*;

    fn report(
        runs: &[(&str, BenchResult)],
        old: &BTreeMap<String, BenchResult>,
        show_results: bool,
        noise_threshold: f64,
    ) -> String {
        let runs: Vec<(String, BenchResult)> = runs.iter().map(|(n, r)| (n.to_string(), copy_result(r))).collect();
        with_colors(false, || format_report(&runs, old, show_results, true, noise_threshold))
    }

    // The golden reports below are canbench 0.7.0 tests/expected/*.txt, verbatim.

    #[test]
    fn report_for_regression_matches_canbench_expected_output() {
        // tests/expected/benchmark_reports_regression.txt
        let old = results(&[("regression_test", bench(m(1, 10, 0, 0), &[]))]);
        let out = report(&[("regression_test", bench(m(1, 207, 0, 0), &[]))], &old, true, 2.0);
        assert_eq!(
            out,
            "\
---------------------------------------------------

Benchmark: regression_test
  total:
    instructions: 207 (regressed by 1970.00%)
    heap_increase: 0 pages (no change)
    stable_memory_increase: 0 pages (no change)

---------------------------------------------------

Summary:
  instructions:
    status:   Regressions detected 🔴
    counts:   [total 1 | regressed 1 | improved 0 | new 0 | unchanged 0]
    change:   [max +197 | p75 +197 | median +197 | p25 +197 | min +197]
    change %: [max +1970.00% | p75 +1970.00% | median +1970.00% | p25 +1970.00% | min +1970.00%]

  heap_increase:
    status:   No significant changes 👍
    counts:   [total 1 | regressed 0 | improved 0 | new 0 | unchanged 1]
    change:   [max 0 | p75 0 | median 0 | p25 0 | min 0]
    change %: [max 0.00% | p75 0.00% | median 0.00% | p25 0.00% | min 0.00%]

  stable_memory_increase:
    status:   No significant changes 👍
    counts:   [total 1 | regressed 0 | improved 0 | new 0 | unchanged 1]
    change:   [max 0 | p75 0 | median 0 | p25 0 | min 0]
    change %: [max 0.00% | p75 0.00% | median 0.00% | p25 0.00% | min 0.00%]

---------------------------------------------------

Only significant changes:
| status | name            | calls | ins |    ins Δ% | HI |  HI Δ% | SMI |  SMI Δ% |
|--------|-----------------|-------|-----|-----------|----|--------|-----|---------|
|   +    | regression_test |       | 207 | +1970.00% |  0 |  0.00% |   0 |   0.00% |

ins = instructions, HI = heap_increase, SMI = stable_memory_increase, Δ% = percent change

---------------------------------------------------
"
        );
    }

    #[test]
    fn report_for_improvement_matches_canbench_expected_output() {
        // tests/expected/benchmark_reports_improvement.txt
        let old = results(&[("improvement_test", bench(m(1, 3097, 0, 0), &[]))]);
        let out = report(&[("improvement_test", bench(m(1, 207, 0, 0), &[]))], &old, true, 2.0);
        assert_eq!(
            out,
            "\
---------------------------------------------------

Benchmark: improvement_test
  total:
    instructions: 207 (improved by 93.32%)
    heap_increase: 0 pages (no change)
    stable_memory_increase: 0 pages (no change)

---------------------------------------------------

Summary:
  instructions:
    status:   Improvements detected 🟢
    counts:   [total 1 | regressed 0 | improved 1 | new 0 | unchanged 0]
    change:   [max -2.89K | p75 -2.89K | median -2.89K | p25 -2.89K | min -2.89K]
    change %: [max -93.32% | p75 -93.32% | median -93.32% | p25 -93.32% | min -93.32%]

  heap_increase:
    status:   No significant changes 👍
    counts:   [total 1 | regressed 0 | improved 0 | new 0 | unchanged 1]
    change:   [max 0 | p75 0 | median 0 | p25 0 | min 0]
    change %: [max 0.00% | p75 0.00% | median 0.00% | p25 0.00% | min 0.00%]

  stable_memory_increase:
    status:   No significant changes 👍
    counts:   [total 1 | regressed 0 | improved 0 | new 0 | unchanged 1]
    change:   [max 0 | p75 0 | median 0 | p25 0 | min 0]
    change %: [max 0.00% | p75 0.00% | median 0.00% | p25 0.00% | min 0.00%]

---------------------------------------------------

Only significant changes:
| status | name             | calls | ins |  ins Δ% | HI |  HI Δ% | SMI |  SMI Δ% |
|--------|------------------|-------|-----|---------|----|--------|-----|---------|
|   -    | improvement_test |       | 207 | -93.32% |  0 |  0.00% |   0 |   0.00% |

ins = instructions, HI = heap_increase, SMI = stable_memory_increase, Δ% = percent change

---------------------------------------------------
"
        );
    }

    #[test]
    fn report_within_noise_threshold_has_no_table() {
        // tests/expected/benchmark_reports_noisy_change_within_custom_noise_threshold.txt
        let old = results(&[("noisy_change_above_default_threshold_test", bench(m(1, 3_540_220, 65, 104), &[]))]);
        let out = report(
            &[("noisy_change_above_default_threshold_test", bench(m(1, 3_386_000, 62, 100), &[]))],
            &old,
            true,
            5.0,
        );
        assert_eq!(
            out,
            "\
---------------------------------------------------

Benchmark: noisy_change_above_default_threshold_test
  total:
    instructions: 3.39 M (-4.36%) (change within noise threshold)
    heap_increase: 62 pages (-4.62%) (change within noise threshold)
    stable_memory_increase: 100 pages (-3.85%) (change within noise threshold)

---------------------------------------------------

Summary:
  instructions:
    status:   No significant changes 👍
    counts:   [total 1 | regressed 0 | improved 0 | new 0 | unchanged 1]
    change:   [max -154.22K | p75 -154.22K | median -154.22K | p25 -154.22K | min -154.22K]
    change %: [max -4.36% | p75 -4.36% | median -4.36% | p25 -4.36% | min -4.36%]

  heap_increase:
    status:   No significant changes 👍
    counts:   [total 1 | regressed 0 | improved 0 | new 0 | unchanged 1]
    change:   [max -3 | p75 -3 | median -3 | p25 -3 | min -3]
    change %: [max -4.62% | p75 -4.62% | median -4.62% | p25 -4.62% | min -4.62%]

  stable_memory_increase:
    status:   No significant changes 👍
    counts:   [total 1 | regressed 0 | improved 0 | new 0 | unchanged 1]
    change:   [max -4 | p75 -4 | median -4 | p25 -4 | min -4]
    change %: [max -3.85% | p75 -3.85% | median -3.85% | p25 -3.85% | min -3.85%]

---------------------------------------------------
"
        );
    }

    #[test]
    fn report_for_new_benchmark_with_scopes_matches_canbench_expected_output() {
        // tests/expected/reports_scopes_in_new_benchmark.txt
        let out = report(
            &[(
                "bench_scope_new",
                bench(m(1, 3834, 0, 0), &[("scope_1", m(1, 970, 0, 0)), ("scope_2", m(1, 781, 0, 0))]),
            )],
            &BTreeMap::new(),
            true,
            2.0,
        );
        assert_eq!(
            out,
            "\
---------------------------------------------------

Benchmark: bench_scope_new (new)
  total:
    instructions: 3834 (new)
    heap_increase: 0 pages (new)
    stable_memory_increase: 0 pages (new)

  scope_1 (scope):
    calls: 1 (new)
    instructions: 970 (new)
    heap_increase: 0 pages (new)
    stable_memory_increase: 0 pages (new)

  scope_2 (scope):
    calls: 1 (new)
    instructions: 781 (new)
    heap_increase: 0 pages (new)
    stable_memory_increase: 0 pages (new)

---------------------------------------------------

Summary:
  instructions:
    status:   New benchmarks added ➕
    counts:   [total 1 | regressed 0 | improved 0 | new 1 | unchanged 0]
    change:   n/a
    change %: n/a

  heap_increase:
    status:   New benchmarks added ➕
    counts:   [total 1 | regressed 0 | improved 0 | new 1 | unchanged 0]
    change:   n/a
    change %: n/a

  stable_memory_increase:
    status:   New benchmarks added ➕
    counts:   [total 1 | regressed 0 | improved 0 | new 1 | unchanged 0]
    change:   n/a
    change %: n/a

---------------------------------------------------

Only significant changes:
| status | name                     | calls |   ins |  ins Δ% | HI |  HI Δ% | SMI |  SMI Δ% |
|--------|--------------------------|-------|-------|---------|----|--------|-----|---------|
|  new   | bench_scope_new          |       | 3.83K |         |  0 |        |   0 |         |
|  new   | bench_scope_new::scope_1 |     1 |   970 |         |  0 |        |   0 |         |
|  new   | bench_scope_new::scope_2 |     1 |   781 |         |  0 |        |   0 |         |

ins = instructions, HI = heap_increase, SMI = stable_memory_increase, Δ% = percent change

---------------------------------------------------
"
        );
    }

    #[test]
    fn report_for_two_new_benchmarks_matches_canbench_expected_output() {
        // tests/expected/supports_gzipped_wasm.txt
        let out = report(
            &[("bench_1", bench(m(1, 207, 0, 0), &[])), ("bench_2", bench(m(1, 207, 0, 0), &[]))],
            &BTreeMap::new(),
            true,
            2.0,
        );
        assert_eq!(
            out,
            "\
---------------------------------------------------

Benchmark: bench_1 (new)
  total:
    instructions: 207 (new)
    heap_increase: 0 pages (new)
    stable_memory_increase: 0 pages (new)

---------------------------------------------------

Benchmark: bench_2 (new)
  total:
    instructions: 207 (new)
    heap_increase: 0 pages (new)
    stable_memory_increase: 0 pages (new)

---------------------------------------------------

Summary:
  instructions:
    status:   New benchmarks added ➕
    counts:   [total 2 | regressed 0 | improved 0 | new 2 | unchanged 0]
    change:   n/a
    change %: n/a

  heap_increase:
    status:   New benchmarks added ➕
    counts:   [total 2 | regressed 0 | improved 0 | new 2 | unchanged 0]
    change:   n/a
    change %: n/a

  stable_memory_increase:
    status:   New benchmarks added ➕
    counts:   [total 2 | regressed 0 | improved 0 | new 2 | unchanged 0]
    change:   n/a
    change %: n/a

---------------------------------------------------

Only significant changes:
| status | name    | calls | ins |  ins Δ% | HI |  HI Δ% | SMI |  SMI Δ% |
|--------|---------|-------|-----|---------|----|--------|-----|---------|
|  new   | bench_1 |       | 207 |         |  0 |        |   0 |         |
|  new   | bench_2 |       | 207 |         |  0 |        |   0 |         |

ins = instructions, HI = heap_increase, SMI = stable_memory_increase, Δ% = percent change

---------------------------------------------------
"
        );
    }

    #[test]
    fn hide_results_report_starts_with_the_final_separator() {
        // tests/expected/benchmark_reports_no_changes_with_hide_results.txt
        let result = bench(m(1, 207, 0, 0), &[]);
        let old = results(&[("no_changes_test", copy_result(&result))]);
        let out = report(&[("no_changes_test", result)], &old, false, 2.0);
        let section = "    \
    status:   No significant changes 👍
    counts:   [total 1 | regressed 0 | improved 0 | new 0 | unchanged 1]
    change:   [max 0 | p75 0 | median 0 | p25 0 | min 0]
    change %: [max 0.00% | p75 0.00% | median 0.00% | p25 0.00% | min 0.00%]
";
        assert_eq!(
            out,
            format!(
                "\
---------------------------------------------------

Summary:
  instructions:
{section}
  heap_increase:
{section}
  stable_memory_increase:
{section}
---------------------------------------------------
"
            )
        );
    }

    #[test]
    fn less_verbose_report_is_blocks_and_final_separator_only() {
        let runs = vec![("b".to_string(), bench(m(1, 5, 0, 0), &[]))];
        let out = with_colors(false, || format_report(&runs, &BTreeMap::new(), true, false, 2.0));
        assert_eq!(
            out,
            format!(
                "{SEPARATOR}\n\nBenchmark: b (new)\n  total:\n    instructions: 5 (new)\n    \
                 heap_increase: 0 pages (new)\n    stable_memory_increase: 0 pages (new)\n\n\
                 {SEPARATOR}\n"
            )
        );
    }

    #[test]
    fn benchmarks_are_reported_in_run_order_but_summarised_in_name_order() {
        let out = report(
            &[("zeta", bench(m(1, 1, 0, 0), &[])), ("alpha", bench(m(1, 2, 0, 0), &[]))],
            &BTreeMap::new(),
            true,
            2.0,
        );
        let zeta = out.find("Benchmark: zeta").unwrap();
        let alpha = out.find("Benchmark: alpha").unwrap();
        assert!(zeta < alpha);
        let row_alpha = out.find("|  new   | alpha |").unwrap();
        let row_zeta = out.find("|  new   | zeta  |").unwrap();
        assert!(row_alpha < row_zeta);
    }

    #[test]
    fn separator_and_messages_match_canbench() {
        assert_eq!(SEPARATOR.len(), 51);
        assert!(SEPARATOR.bytes().all(|b| b == b'-'));
        assert_eq!(format_csv_saved(Path::new("canbench_results.csv")), "CSV results saved to canbench_results.csv\n");
        assert_eq!(
            format_persisted(Path::new("canbench_results.yml")),
            "Successfully persisted results to canbench_results.yml\n"
        );
    }

    #[test]
    fn bench_result_decodes_from_canbench_candid_reply() {
        // The reply of a `__canbench__*` query, built from candid text independently of any
        // derive, decodes into canbench-rs's `BenchResult` (a 0.7.x that changed the Candid
        // shape would fail here).
        let text = r#"(record {
            total = record { calls = 1 : nat64; instructions = 3834 : nat64;
                             heap_increase = 2 : nat64; stable_memory_increase = 1 : nat64 };
            scopes = vec {
                record { "scope_1"; record { calls = 10 : nat64; instructions = 970 : nat64;
                                             heap_increase = 0 : nat64; stable_memory_increase = 0 : nat64 } };
            };
        })"#;
        let bytes = candid_parser::parse_idl_args(text).unwrap().to_bytes().unwrap();
        let decoded: BenchResult = candid::decode_one(&bytes).unwrap();
        let expected = bench(m(1, 3834, 2, 1), &[("scope_1", m(10, 970, 0, 0))]);
        assert_eq!(decoded, expected);
        // And encoding it gives the same bytes (same type table and values).
        assert_eq!(candid::encode_one(&expected).unwrap(), bytes);
    }

    #[test]
    fn bench_result_yaml_field_order_is_total_then_scopes() {
        let yaml = serde_yaml::to_string(&bench(m(1, 2, 3, 4), &[])).unwrap();
        assert_eq!(
            yaml,
            "total:\n  calls: 1\n  instructions: 2\n  heap_increase: 3\n  stable_memory_increase: 4\nscopes: {}\n"
        );
        let without_scopes: BenchResult = serde_yaml::from_str("total:\n  instructions: 7\n").unwrap();
        assert_eq!(without_scopes, bench(m(0, 7, 0, 0), &[]));
    }
}
