//! Ported from canbench 0.7.0 (dfinity/canbench, Apache-2.0), src/print_benchmark.rs.
//!
//! canbench prints each line with `println!`; this port appends the same lines (each ending
//! in `\n`) to a `String`, so the caller prints the result with `print!`. Colors go through
//! `colored` exactly as in canbench, and are decided when the string is formatted.

use super::{BenchResult, Measurement};
use colored::Colorize;
use std::fmt::Write;

/// `println!` into a `String` (writing to a `String` cannot fail).
macro_rules! outln {
    ($out:expr) => {{
        $out.push('\n');
    }};
    ($out:expr, $($arg:tt)*) => {{
        let _ = writeln!($out, $($arg)*);
    }};
}

/// Formats a benchmark, comparing it to the previous result if available.
pub(crate) fn format_benchmark(
    name: &str,
    new: &BenchResult,
    old: Option<&BenchResult>,
    noise_threshold: f64,
) -> String {
    let mut out = String::new();

    // Print benchmark name.
    if old.is_some() {
        outln!(out, "Benchmark: {}", name.bold());
    } else {
        outln!(out, "Benchmark: {} {}", name.bold(), "(new)".blue().bold());
    }

    // Print totals, skip calls number, since it's always should be 1.
    outln!(out, "  total:");
    format_measurement(&mut out, &new.total, old.map(|m| &m.total), noise_threshold, false);

    // Print scopes
    for (scope, measurement) in &new.scopes {
        outln!(out);
        outln!(out, "  {} (scope):", scope);
        format_measurement(
            &mut out,
            measurement,
            old.map(|m| &m.scopes).and_then(|m| m.get(scope)),
            noise_threshold,
            true,
        );
    }

    out
}

// Formats a measurement along with a comparison with the old value if available.
fn format_measurement(
    out: &mut String,
    new: &Measurement,
    old: Option<&Measurement>,
    noise_threshold: f64,
    print_calls: bool,
) {
    if print_calls {
        format_metric(out, "calls", new.calls, old.map(|m| m.calls), noise_threshold);
    }
    format_metric(out, "instructions", new.instructions, old.map(|m| m.instructions), noise_threshold);
    format_metric(out, "heap_increase", new.heap_increase, old.map(|m| m.heap_increase), noise_threshold);
    format_metric(
        out,
        "stable_memory_increase",
        new.stable_memory_increase,
        old.map(|m| m.stable_memory_increase),
        noise_threshold,
    );
}

// Formats a metric along with its percentage change relative to the old value.
fn format_metric(out: &mut String, metric: &str, value: u64, old_value: Option<u64>, noise_threshold: f64) {
    // Convert value to a more readable representation.
    let value_str = fmt_block_value(value);

    // Add unit to value depending on the metric.
    let value_str = match metric {
        "calls" => value_str,        // Units are clear from the metric name.
        "instructions" => value_str, // Units are clear from the metric name.
        "heap_increase" => format!("{value_str} pages"),
        "stable_memory_increase" => format!("{value_str} pages"),
        other => panic!("unknown metric {}", other),
    };

    let old_value = match old_value {
        Some(old_value) => old_value,
        None => {
            // No old value exists. This is a new metric.
            outln!(out, "    {metric}: {value_str} (new)");
            return;
        }
    };

    match old_value {
        0 => {
            // The old value is zero, so changes cannot be reported as a percentage.
            if value == 0 {
                outln!(out, "    {metric}: {value_str} (no change)");
            } else {
                // Spec differs: section 6.3 of ic-runtime.md says "(red)"; canbench makes
                // this line red *and* bold, and the canbench source wins.
                outln!(out, "    {}", format!("{metric}: {value_str} (regressed from 0)").red().bold());
            }
        }
        _ => {
            // The old value is > 0. Report changes as percentages.
            let diff = ((value as f64 - old_value as f64) / old_value as f64) * 100.0;
            if diff == 0.0 {
                outln!(out, "    {metric}: {value_str} (no change)");
            } else if diff.abs() < noise_threshold {
                outln!(out, "    {metric}: {value_str} ({:.2}%) (change within noise threshold)", diff);
            } else if diff > 0.0 {
                outln!(out, "    {}", format!("{}: {value_str} (regressed by {:.2}%)", metric, diff).red().bold());
            } else {
                outln!(
                    out,
                    "    {}",
                    format!("{}: {value_str} (improved by {:.2}%)", metric, diff.abs()).green().bold()
                );
            }
        }
    }
}

/// A value as canbench's benchmark blocks print it: the integer below 10,000, else two
/// decimals and a spaced unit (`1.23 K`, `4.56 M`, `7.89 B`, `1.00 T`).
pub fn fmt_block_value(value: u64) -> String {
    if value < 10_000 {
        format!("{}", value)
    } else if value < 1_000_000 {
        format!("{:.2} K", value as f64 / 1_000.0)
    } else if value < 1_000_000_000 {
        format!("{:.2} M", value as f64 / 1_000_000.0)
    } else if value < 1_000_000_000_000 {
        format!("{:.2} B", value as f64 / 1_000_000_000.0)
    } else {
        format!("{:.2} T", value as f64 / 1_000_000_000_000.0)
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{bench, m, with_colors};
    use super::*;

    fn plain(name: &str, new: &BenchResult, old: Option<&BenchResult>, t: f64) -> String {
        with_colors(false, || format_benchmark(name, new, old, t))
    }

    // Golden blocks below are copied from canbench 0.7.0 tests/expected/*.txt.

    #[test]
    fn new_benchmark_block_marks_every_metric_new() {
        // tests/expected/benchmark_heap_increase.txt
        let new = bench(m(1, 3_390_000, 62, 0), &[]);
        assert_eq!(
            plain("increase_heap_increase", &new, None, 2.0),
            "\
Benchmark: increase_heap_increase (new)
  total:
    instructions: 3.39 M (new)
    heap_increase: 62 pages (new)
    stable_memory_increase: 0 pages (new)
"
        );
    }

    #[test]
    fn unchanged_benchmark_block_says_no_change() {
        // tests/expected/benchmark_reports_no_changes.txt
        let new = bench(m(1, 207, 0, 0), &[]);
        assert_eq!(
            plain("no_changes_test", &new, Some(&new), 2.0),
            "\
Benchmark: no_changes_test
  total:
    instructions: 207 (no change)
    heap_increase: 0 pages (no change)
    stable_memory_increase: 0 pages (no change)
"
        );
    }

    #[test]
    fn small_change_is_reported_within_noise_threshold() {
        // tests/expected/benchmark_reports_noisy_change.txt: 210 -> 207 is -1.43%.
        let new = bench(m(1, 207, 0, 0), &[]);
        let old = bench(m(1, 210, 0, 0), &[]);
        assert_eq!(
            plain("noisy_change_test", &new, Some(&old), 2.0),
            "\
Benchmark: noisy_change_test
  total:
    instructions: 207 (-1.43%) (change within noise threshold)
    heap_increase: 0 pages (no change)
    stable_memory_increase: 0 pages (no change)
"
        );
    }

    #[test]
    fn change_above_threshold_is_improvement_and_custom_threshold_hides_it() {
        // tests/expected/benchmark_reports_noisy_change_above_default_noise_threshold.txt
        // and ..._within_custom_noise_threshold.txt (--noise-threshold 5).
        let new = bench(m(1, 3_386_000, 62, 100), &[]);
        let old = bench(m(1, 3_540_220, 65, 104), &[]);
        assert_eq!(
            plain("noisy_change_above_default_threshold_test", &new, Some(&old), 2.0),
            "\
Benchmark: noisy_change_above_default_threshold_test
  total:
    instructions: 3.39 M (improved by 4.36%)
    heap_increase: 62 pages (improved by 4.62%)
    stable_memory_increase: 100 pages (improved by 3.85%)
"
        );
        assert_eq!(
            plain("noisy_change_above_default_threshold_test", &new, Some(&old), 5.0),
            "\
Benchmark: noisy_change_above_default_threshold_test
  total:
    instructions: 3.39 M (-4.36%) (change within noise threshold)
    heap_increase: 62 pages (-4.62%) (change within noise threshold)
    stable_memory_increase: 100 pages (-3.85%) (change within noise threshold)
"
        );
    }

    #[test]
    fn regression_and_improvement_percentages() {
        // tests/expected/benchmark_reports_regression.txt (10 -> 207) and
        // benchmark_reports_improvement.txt (3097 -> 207).
        let new = bench(m(1, 207, 0, 0), &[]);
        assert_eq!(
            plain("regression_test", &new, Some(&bench(m(1, 10, 0, 0), &[])), 2.0),
            "\
Benchmark: regression_test
  total:
    instructions: 207 (regressed by 1970.00%)
    heap_increase: 0 pages (no change)
    stable_memory_increase: 0 pages (no change)
"
        );
        assert_eq!(
            plain("improvement_test", &new, Some(&bench(m(1, 3097, 0, 0), &[])), 2.0),
            "\
Benchmark: improvement_test
  total:
    instructions: 207 (improved by 93.32%)
    heap_increase: 0 pages (no change)
    stable_memory_increase: 0 pages (no change)
"
        );
    }

    #[test]
    fn growth_from_zero_is_regressed_from_0() {
        // tests/expected/benchmark_reports_regression_from_zero.txt
        let new = bench(m(1, 307, 0, 123), &[]);
        let old = bench(m(1, 0, 0, 0), &[]);
        assert_eq!(
            plain("stable_memory_increase_from_zero", &new, Some(&old), 2.0),
            "\
Benchmark: stable_memory_increase_from_zero
  total:
    instructions: 307 (regressed from 0)
    heap_increase: 0 pages (no change)
    stable_memory_increase: 123 pages (regressed from 0)
"
        );
    }

    #[test]
    fn scopes_print_calls_and_new_scope_in_existing_benchmark() {
        // tests/expected/reports_scopes_in_existing_benchmark.txt
        let new = bench(m(1, 3834, 0, 0), &[("scope_1", m(1, 970, 0, 0)), ("scope_2", m(1, 781, 0, 0))]);
        let old = bench(m(1, 0, 0, 0), &[("scope_1", m(1, 800, 1, 0))]);
        assert_eq!(
            plain("bench_scope_exists", &new, Some(&old), 2.0),
            "\
Benchmark: bench_scope_exists
  total:
    instructions: 3834 (regressed from 0)
    heap_increase: 0 pages (no change)
    stable_memory_increase: 0 pages (no change)

  scope_1 (scope):
    calls: 1 (no change)
    instructions: 970 (regressed by 21.25%)
    heap_increase: 0 pages (improved by 100.00%)
    stable_memory_increase: 0 pages (no change)

  scope_2 (scope):
    calls: 1 (new)
    instructions: 781 (new)
    heap_increase: 0 pages (new)
    stable_memory_increase: 0 pages (new)
"
        );
    }

    #[test]
    fn scopes_in_new_benchmark_are_all_new() {
        // tests/expected/reports_repeated_scope_in_new_benchmark.txt
        let new = bench(m(1, 15_400, 0, 0), &[("scope_1", m(10, 7999, 0, 0))]);
        assert_eq!(
            plain("bench_repeated_scope_new", &new, None, 2.0),
            "\
Benchmark: bench_repeated_scope_new (new)
  total:
    instructions: 15.40 K (new)
    heap_increase: 0 pages (new)
    stable_memory_increase: 0 pages (new)

  scope_1 (scope):
    calls: 10 (new)
    instructions: 7999 (new)
    heap_increase: 0 pages (new)
    stable_memory_increase: 0 pages (new)
"
        );
    }

    #[test]
    fn value_units_switch_at_ten_thousand_and_powers_of_thousand() {
        let block = plain("units", &bench(m(1, 9_999, 10_000, 56_390_000_000), &[]), None, 2.0);
        assert_eq!(
            block,
            "\
Benchmark: units (new)
  total:
    instructions: 9999 (new)
    heap_increase: 10.00 K pages (new)
    stable_memory_increase: 56.39 B pages (new)
"
        );
        let t = plain("t", &bench(m(1, 2_500_000_000_000, 0, 0), &[]), None, 2.0);
        assert!(t.contains("    instructions: 2.50 T (new)\n"), "{t}");
    }

    #[test]
    fn regression_beyond_noise_threshold_is_red_and_bold_with_colors() {
        let new = bench(m(1, 207, 0, 0), &[]);
        let old = bench(m(1, 10, 0, 0), &[]);
        let colored = with_colors(true, || format_benchmark("r", &new, Some(&old), 2.0));
        assert_eq!(
            colored,
            "Benchmark: \u{1b}[1mr\u{1b}[0m\n  total:\n    \
             \u{1b}[1;31minstructions: 207 (regressed by 1970.00%)\u{1b}[0m\n    \
             heap_increase: 0 pages (no change)\n    \
             stable_memory_increase: 0 pages (no change)\n"
        );
    }

    #[test]
    fn new_marker_is_blue_bold_and_improvement_green_bold_with_colors() {
        let new_block = with_colors(true, || format_benchmark("n", &bench(m(1, 1, 0, 0), &[]), None, 2.0));
        assert!(new_block.starts_with("Benchmark: \u{1b}[1mn\u{1b}[0m \u{1b}[1;34m(new)\u{1b}[0m\n"), "{new_block:?}");
        let improved = with_colors(true, || {
            format_benchmark("i", &bench(m(1, 5, 0, 0), &[]), Some(&bench(m(1, 10, 0, 0), &[])), 2.0)
        });
        assert!(improved.contains("    \u{1b}[1;32minstructions: 5 (improved by 50.00%)\u{1b}[0m\n"), "{improved:?}");
        let from_zero = with_colors(true, || {
            format_benchmark("z", &bench(m(1, 5, 0, 0), &[]), Some(&bench(m(1, 0, 0, 0), &[])), 2.0)
        });
        assert!(from_zero.contains("    \u{1b}[1;31minstructions: 5 (regressed from 0)\u{1b}[0m\n"), "{from_zero:?}");
    }
}
