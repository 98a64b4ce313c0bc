//! Ported from canbench 0.7.0 (dfinity/canbench, Apache-2.0), src/summary.rs.
//!
//! canbench prints the summary with `println!`; this port appends the same lines to a `String`.

use super::data::{Change, Entry, Values};
use super::fmt::{fmt_human_i64, fmt_human_percent};
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

/// The "Summary:" block: one section per metric, over benchmark totals only.
pub(crate) fn format_summary(data: &[Entry], noise_threshold: f64) -> String {
    let mut out = String::new();
    outln!(out, "Summary:");
    format_metric_summary(&mut out, "instructions", data, noise_threshold, |e| &e.instructions);
    outln!(out);
    format_metric_summary(&mut out, "heap_increase", data, noise_threshold, |e| &e.heap_increase);
    outln!(out);
    format_metric_summary(&mut out, "stable_memory_increase", data, noise_threshold, |e| &e.stable_memory_increase);
    out
}

fn format_metric_summary<F>(out: &mut String, label: &str, data: &[Entry], noise_threshold: f64, extractor: F)
where
    F: Fn(&Entry) -> &Values,
{
    let mut new = 0;
    let mut improved = 0;
    let mut regressed = 0;
    let mut unchanged = 0;

    let mut abs_deltas = Vec::new();
    let mut percent_diffs = Vec::new();

    let mut processed_entries = 0;
    for entry in data {
        // In summary only show the total measurements.
        if entry.has_scope() {
            continue;
        }
        processed_entries += 1;

        let values = extractor(entry);
        if let Some(delta) = values.abs_delta() {
            abs_deltas.push(delta);
        }
        if let Some(percent) = values.percent_diff() {
            percent_diffs.push(percent);
        }
        match values.status(noise_threshold) {
            Change::New => new += 1,
            Change::Improved => improved += 1,
            Change::Regressed => regressed += 1,
            Change::Unchanged => unchanged += 1,
        }
    }

    let total = regressed + improved + new + unchanged;
    debug_assert_eq!(total, processed_entries, "total count mismatch");

    outln!(out, "  {label}:");
    let status = match (regressed > 0, improved > 0, new > 0) {
        (false, false, false) => "No significant changes 👍",
        (true, false, false) => "Regressions detected 🔴",
        (false, true, false) => "Improvements detected 🟢",
        (false, false, true) => "New benchmarks added ➕",
        (true, true, false) => "Regressions and improvements 🔴🟢",
        (true, false, true) => "Regressions and new benchmarks 🔴➕",
        (false, true, true) => "Improvements and new benchmarks 🟢➕",
        (true, true, true) => "Regressions, improvements, and new benchmarks 🔴🟢➕",
    };
    outln!(out, "    status:   {status}");
    outln!(
        out,
        "    counts:   [total {} | regressed {} | improved {} | new {} | unchanged {}]",
        total,
        regressed,
        improved,
        new,
        unchanged
    );

    if !abs_deltas.is_empty() {
        format_range(out, "    change:  ", &abs_deltas, fmt_human_i64, percentile_i64);
    } else {
        outln!(out, "    change:   n/a");
    }

    if !percent_diffs.is_empty() {
        format_range(out, "    change %:", &percent_diffs, fmt_human_percent, percentile_f64);
    } else {
        outln!(out, "    change %: n/a");
    }
}

fn format_range<T, F, P>(out: &mut String, prefix: &str, values: &[T], format: F, percentile_fn: P)
where
    T: PartialOrd + Copy,
    F: Fn(T) -> String,
    P: Fn(&[T], usize) -> T,
{
    let mut sorted = values.to_vec();
    // canbench unwraps here; percent diffs are never NaN (see `Values::percent_diff`).
    sorted.sort_by(|a, b| a.partial_cmp(b).unwrap());

    let range = [
        ("max", sorted.last().copied().unwrap()),
        ("p75", percentile_fn(&sorted, 75)),
        ("median", percentile_fn(&sorted, 50)),
        ("p25", percentile_fn(&sorted, 25)),
        ("min", sorted.first().copied().unwrap()),
    ];

    let parts: Vec<String> = range.iter().map(|(label, v)| format!("{label} {}", format(*v))).collect();

    outln!(out, "{prefix} [{}]", parts.join(" | "));
}

fn percentile_f64(sorted: &[f64], pct: usize) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = pct as f64 / 100.0 * (sorted.len() - 1) as f64;
    let lower = rank.floor() as usize;
    let upper = rank.ceil() as usize;
    if lower == upper {
        sorted[lower]
    } else {
        let weight = rank - lower as f64;
        sorted[lower] * (1.0 - weight) + sorted[upper] * weight
    }
}

fn percentile_i64(sorted: &[i64], pct: usize) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = pct as f64 / 100.0 * (sorted.len() - 1) as f64;
    let lower = rank.floor() as usize;
    let upper = rank.ceil() as usize;
    if lower == upper {
        sorted[lower]
    } else {
        let weight = rank - lower as f64;
        (sorted[lower] as f64 * (1.0 - weight) + sorted[upper] as f64 * weight).round() as i64
    }
}

#[cfg(test)]
mod tests {
    use super::super::data::extract;
    use super::super::test_support::{bench, m, results};
    use super::*;

    const NO_CHANGE_SECTION: &str = "    \
    status:   No significant changes 👍
    counts:   [total 1 | regressed 0 | improved 0 | new 0 | unchanged 1]
    change:   [max 0 | p75 0 | median 0 | p25 0 | min 0]
    change %: [max 0.00% | p75 0.00% | median 0.00% | p25 0.00% | min 0.00%]
";

    #[test]
    fn summary_of_new_benchmarks_has_no_ranges() {
        // tests/expected/supports_gzipped_wasm.txt
        let new = results(&[("bench_1", bench(m(1, 207, 0, 0), &[])), ("bench_2", bench(m(1, 207, 0, 0), &[]))]);
        let data = extract(&new, &Default::default());
        let section = "    \
    status:   New benchmarks added ➕
    counts:   [total 2 | regressed 0 | improved 0 | new 2 | unchanged 0]
    change:   n/a
    change %: n/a
";
        assert_eq!(
            format_summary(&data, 2.0),
            format!(
                "Summary:\n  instructions:\n{section}\n  heap_increase:\n{section}\n  \
                 stable_memory_increase:\n{section}"
            )
        );
    }

    #[test]
    fn summary_of_regression_from_zero_shows_infinite_percent() {
        // tests/expected/benchmark_reports_regression_from_zero.txt
        let new = results(&[("b", bench(m(1, 307, 0, 123), &[]))]);
        let old = results(&[("b", bench(m(1, 0, 0, 0), &[]))]);
        let data = extract(&new, &old);
        assert_eq!(
            format_summary(&data, 2.0),
            format!(
                "\
Summary:
  instructions:
    status:   Regressions detected 🔴
    counts:   [total 1 | regressed 1 | improved 0 | new 0 | unchanged 0]
    change:   [max +307 | p75 +307 | median +307 | p25 +307 | min +307]
    change %: [max +inf% | p75 +inf% | median +inf% | p25 +inf% | min +inf%]

  heap_increase:
{NO_CHANGE_SECTION}
  stable_memory_increase:
    status:   Regressions detected 🔴
    counts:   [total 1 | regressed 1 | improved 0 | new 0 | unchanged 0]
    change:   [max +123 | p75 +123 | median +123 | p25 +123 | min +123]
    change %: [max +inf% | p75 +inf% | median +inf% | p25 +inf% | min +inf%]
"
            )
        );
    }

    #[test]
    fn summary_ignores_scopes_and_counts_noise_as_unchanged() {
        // tests/expected/reports_recursive_scopes_benchmark.txt
        let new = results(&[(
            "bench_recursive_scopes",
            bench(
                m(1, 30_090_000, 0, 0),
                &[("recursive_scope_1", m(10, 10_030_000, 0, 0)), ("recursive_scope_2", m(20, 20_060_000, 0, 0))],
            ),
        )]);
        let old = results(&[(
            "bench_recursive_scopes",
            bench(
                m(1, 29_998_520, 0, 0),
                &[("recursive_scope_1", m(10, 10_004_000, 0, 0)), ("recursive_scope_2", m(20, 19_998_000, 0, 0))],
            ),
        )]);
        let data = extract(&new, &old);
        assert_eq!(
            format_summary(&data, 2.0),
            format!(
                "\
Summary:
  instructions:
    status:   No significant changes 👍
    counts:   [total 1 | regressed 0 | improved 0 | new 0 | unchanged 1]
    change:   [max +91.48K | p75 +91.48K | median +91.48K | p25 +91.48K | min +91.48K]
    change %: [max +0.30% | p75 +0.30% | median +0.30% | p25 +0.30% | min +0.30%]

  heap_increase:
{NO_CHANGE_SECTION}
  stable_memory_increase:
{NO_CHANGE_SECTION}"
            )
        );
    }

    #[test]
    fn summary_status_combines_regressions_improvements_and_new() {
        let new = results(&[
            ("a", bench(m(1, 110, 0, 0), &[])),
            ("b", bench(m(1, 90, 0, 0), &[])),
            ("c", bench(m(1, 100, 0, 0), &[])),
            ("d", bench(m(1, 101, 0, 0), &[])),
        ]);
        let old = results(&[
            ("a", bench(m(1, 100, 0, 0), &[])),
            ("b", bench(m(1, 100, 0, 0), &[])),
            ("d", bench(m(1, 100, 0, 0), &[])),
        ]);
        let data = extract(&new, &old);
        let summary = format_summary(&data, 2.0);
        let instructions: Vec<&str> = summary.lines().skip(1).take(5).collect();
        assert_eq!(
            instructions,
            vec![
                "  instructions:",
                "    status:   Regressions, improvements, and new benchmarks 🔴🟢➕",
                "    counts:   [total 4 | regressed 1 | improved 1 | new 1 | unchanged 1]",
                "    change:   [max +10 | p75 +6 | median +1 | p25 -5 | min -10]",
                "    change %: [max +10.00% | p75 +5.50% | median +1.00% | p25 -4.50% | min -10.00%]",
            ]
        );
        // heap and stable memory never changed; "c" is new for them too.
        assert!(summary.contains(
            "  heap_increase:\n    status:   New benchmarks added ➕\n    \
             counts:   [total 4 | regressed 0 | improved 0 | new 1 | unchanged 3]\n"
        ));
    }

    /// (new, old) instructions of some benchmarks, and the status canbench prints for them.
    type Case<'a> = (&'a [(u64, Option<u64>)], &'a str);

    #[test]
    fn status_labels_cover_every_combination() {
        let cases: [Case; 7] = [
            (&[(10, Some(5))], "Regressions detected 🔴"),
            (&[(5, Some(10))], "Improvements detected 🟢"),
            (&[(5, None)], "New benchmarks added ➕"),
            (&[(10, Some(5)), (5, Some(10))], "Regressions and improvements 🔴🟢"),
            (&[(10, Some(5)), (5, None)], "Regressions and new benchmarks 🔴➕"),
            (&[(5, Some(10)), (5, None)], "Improvements and new benchmarks 🟢➕"),
            (&[(5, Some(5))], "No significant changes 👍"),
        ];
        for (benches, label) in cases {
            let mut new = std::collections::BTreeMap::new();
            let mut old = std::collections::BTreeMap::new();
            for (i, (curr, prev)) in benches.iter().enumerate() {
                new.insert(format!("b{i}"), bench(m(1, *curr, 0, 0), &[]));
                if let Some(prev) = prev {
                    old.insert(format!("b{i}"), bench(m(1, *prev, 0, 0), &[]));
                }
            }
            let summary = format_summary(&extract(&new, &old), 2.0);
            let line = summary.lines().nth(2).unwrap();
            assert_eq!(line, format!("    status:   {label}"));
        }
    }

    #[test]
    fn percentiles_interpolate_linearly_and_round_integers() {
        assert_eq!(percentile_i64(&[1, 2], 50), 2); // 1.5 rounds half away from zero
        assert_eq!(percentile_i64(&[-2, -1], 50), -2);
        assert_eq!(percentile_i64(&[0, 10, 20, 30], 75), 23); // rank 2.25 -> 22.5 -> 23
        assert_eq!(percentile_f64(&[0.0, 10.0, 20.0, 30.0], 25), 7.5);
        assert_eq!(percentile_f64(&[4.0], 75), 4.0);
        assert_eq!(percentile_i64(&[], 50), 0);
    }
}
