//! Ported from canbench 0.7.0 (dfinity/canbench, Apache-2.0), src/csv_file.rs.

use super::data::{self, Entry};
use super::BenchResult;
use anyhow::Context;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

/// Delimiter used in the CSV file.
/// Use `,` for GitHub/VSCode preview.
/// Use `\t` for better compatibility with Google Sheets.
const DELIMITER: char = ',';

/// Writes the CSV report canbench 0.7.0 writes with `--csv` (to `csv_results_path`, default
/// `canbench_results.csv`): a header line, then one row per benchmark total followed by one row
/// per scope, benchmarks and scopes in name order, with full integers, integer deltas and
/// `{:.2}%` percentages (`1.0E99` / `-1.0E99` for a change from zero). Cells without a previous
/// value are empty; `status` is `new` or empty.
///
/// `noise_threshold` is accepted for symmetry with the printed report but, as in canbench
/// 0.7.0, it does not affect the CSV (canbench never passes it to the CSV writer).
/// After writing, canbench prints "CSV results saved to <path>" (see
/// [`format_csv_saved`](super::format_csv_saved)).
///
/// Errors: the file cannot be created ("Failed to create results file: <path>") or written
/// ("Failed to write CSV results to: <path>"); canbench panics with those messages.
pub fn write_csv(
    path: &Path,
    new: &BTreeMap<String, BenchResult>,
    old: &BTreeMap<String, BenchResult>,
    noise_threshold: f64,
) -> anyhow::Result<()> {
    let _ = noise_threshold; // Unused by canbench's CSV writer too.
    let data = data::extract(new, old);
    let mut file =
        std::fs::File::create(path).with_context(|| format!("Failed to create results file: {}", path.display()))?;
    write(&mut file, &data)
        .and_then(|()| file.flush())
        .with_context(|| format!("Failed to write CSV results to: {}", path.display()))?;
    Ok(())
}

/// Write benchmark results to a CSV file.
pub(crate) fn write<W: Write>(writer: &mut W, data: &[Entry]) -> std::io::Result<()> {
    const HEADERS: &[&str] = &[
        "status",
        "name",
        "scope_calls",
        "scope_calls Δ",
        "scope_calls Δ%",
        "instructions",
        "instructions Δ",
        "instructions Δ%",
        "heap_increase",
        "heap_increase Δ",
        "heap_increase Δ%",
        "stable_memory_increase",
        "stable_memory_increase Δ",
        "stable_memory_increase Δ%",
    ];

    writeln!(writer, "{}", HEADERS.join(&DELIMITER.to_string()))?;

    for entry in data {
        let name = entry.benchmark.full_name();
        let scope_calls = if entry.has_scope() {
            let c = &entry.calls;
            (c.fmt_current(), c.fmt_abs_delta(), c.fmt_percent())
        } else {
            ("".to_string(), "".to_string(), "".to_string())
        };
        let row = [
            entry.status.clone(),
            name.clone(),
            // CSV report uses full numbers
            scope_calls.0,
            scope_calls.1,
            scope_calls.2,
            entry.instructions.fmt_current(),
            entry.instructions.fmt_abs_delta(),
            entry.instructions.fmt_percent(),
            entry.heap_increase.fmt_current(),
            entry.heap_increase.fmt_abs_delta(),
            entry.heap_increase.fmt_percent(),
            entry.stable_memory_increase.fmt_current(),
            entry.stable_memory_increase.fmt_abs_delta(),
            entry.stable_memory_increase.fmt_percent(),
        ];

        writeln!(writer, "{}", row.join(&DELIMITER.to_string()))?;
    }

    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{bench, m, results, TempDir};
    use super::*;
    use crate::canbench::data::{Benchmark, Values};

    const HEADER: &str = "status,name,scope_calls,scope_calls Δ,scope_calls Δ%,instructions,instructions Δ,instructions Δ%,heap_increase,heap_increase Δ,heap_increase Δ%,stable_memory_increase,stable_memory_increase Δ,stable_memory_increase Δ%\n";

    fn run_write_csv_case(entries: &[Entry], expected_output: &str) {
        let mut output = Vec::new();
        write(&mut output, entries).unwrap();
        let output_str = String::from_utf8(output).unwrap();
        assert_eq!(output_str, expected_output, "Unexpected output:\n{}", output_str);
    }

    // Ported from canbench 0.7.0 src/csv_file.rs (test_write_csv).
    #[test]
    fn csv_rows_use_full_numbers_deltas_and_1e99_for_infinity() {
        run_write_csv_case(
            &[
                Entry {
                    status: "".to_string(),
                    benchmark: Benchmark::new("bench_regression", None),
                    instructions: Values::new(Some(11_000_000), Some(10_000_000)),
                    heap_increase: Values::new(Some(0), None),
                    stable_memory_increase: Values::new(Some(0), None),
                    calls: Values::new(None, None),
                },
                Entry {
                    status: "".to_string(),
                    benchmark: Benchmark::new("bench_no_change", None),
                    instructions: Values::new(Some(10_000_000), Some(10_000_000)),
                    heap_increase: Values::new(Some(0), None),
                    stable_memory_increase: Values::new(Some(0), None),
                    calls: Values::new(None, None),
                },
                Entry {
                    status: "".to_string(),
                    benchmark: Benchmark::new("bench_improvement", None),
                    instructions: Values::new(Some(9_000_000), Some(10_000_000)),
                    heap_increase: Values::new(Some(0), None),
                    stable_memory_increase: Values::new(Some(0), None),
                    calls: Values::new(None, None),
                },
                Entry {
                    status: "".to_string(),
                    benchmark: Benchmark::new("bench_positive_inf", None),
                    instructions: Values::new(Some(10_000_000), Some(0)),
                    heap_increase: Values::new(Some(0), None),
                    stable_memory_increase: Values::new(Some(0), None),
                    calls: Values::new(None, None),
                },
                Entry {
                    status: "".to_string(),
                    benchmark: Benchmark::new("bench_from_10M_to_0", None),
                    instructions: Values::new(Some(0), Some(10_000_000)),
                    heap_increase: Values::new(Some(0), None),
                    stable_memory_increase: Values::new(Some(0), None),
                    calls: Values::new(None, None),
                },
                Entry {
                    status: "".to_string(),
                    benchmark: Benchmark::new("bench_with_scope", Some("my_scope")),
                    instructions: Values::new(Some(10_000_000), Some(9_000_000)),
                    heap_increase: Values::new(Some(0), None),
                    stable_memory_increase: Values::new(Some(0), None),
                    calls: Values::new(Some(100), Some(50)),
                },
            ],
            "\
status,name,scope_calls,scope_calls Δ,scope_calls Δ%,instructions,instructions Δ,instructions Δ%,heap_increase,heap_increase Δ,heap_increase Δ%,stable_memory_increase,stable_memory_increase Δ,stable_memory_increase Δ%
,bench_regression,,,,11000000,1000000,10.00%,0,,,0,,
,bench_no_change,,,,10000000,0,0.00%,0,,,0,,
,bench_improvement,,,,9000000,-1000000,-10.00%,0,,,0,,
,bench_positive_inf,,,,10000000,10000000,1.0E99,0,,,0,,
,bench_from_10M_to_0,,,,0,-10000000,-100.00%,0,,,0,,
,bench_with_scope::my_scope,100,50,100.00%,10000000,1000000,11.11%,0,,,0,,
",
        );
    }

    #[test]
    fn write_csv_file_lists_totals_then_scopes_with_new_status() {
        let new = results(&[
            (
                "bench_scope_exists",
                bench(m(1, 3834, 0, 0), &[("scope_1", m(1, 970, 0, 0)), ("scope_2", m(1, 781, 0, 0))]),
            ),
            ("another", bench(m(1, 12_345_678, 2, 1), &[])),
        ]);
        let old = results(&[("bench_scope_exists", bench(m(1, 0, 0, 0), &[("scope_1", m(1, 800, 1, 0))]))]);
        let dir = TempDir::new("csv");
        let path = dir.path().join("canbench_results.csv");
        write_csv(&path, &new, &old, 2.0).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            text,
            format!(
                "{HEADER}\
new,another,,,,12345678,,,2,,,1,,
,bench_scope_exists,,,,3834,3834,1.0E99,0,0,0.00%,0,0,0.00%
,bench_scope_exists::scope_1,1,0,0.00%,970,170,21.25%,0,-1,-100.00%,0,0,0.00%
new,bench_scope_exists::scope_2,1,,,781,,,0,,,0,,
"
            )
        );
        // The noise threshold does not change the CSV (as in canbench).
        write_csv(&path, &new, &old, 50.0).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
    }

    #[test]
    fn write_csv_reports_unwritable_path() {
        let dir = TempDir::new("csv-err");
        let path = dir.path().join("missing").join("x.csv");
        let err = write_csv(&path, &BTreeMap::new(), &BTreeMap::new(), 2.0).unwrap_err();
        assert_eq!(err.to_string(), format!("Failed to create results file: {}", path.display()));
    }
}
