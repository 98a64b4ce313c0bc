//! Ported from canbench 0.7.0 (dfinity/canbench, Apache-2.0), src/table.rs.
//!
//! canbench writes the table to an `io::Write`; this port appends the same text to a `String`.

use super::data::{Change, Entry};
use std::fmt::Write;

/// Keeps the entries where any metric is new, improved or regressed, sets their status column
/// ("new", "+", "-" or "+/-") and sorts them like canbench.
pub(crate) fn filter_entries(data: &[Entry], noise_threshold: f64) -> Vec<Entry> {
    let mut filtered: Vec<Entry> = data
        .iter()
        .filter_map(|entry| {
            let metrics = [&entry.instructions, &entry.heap_increase, &entry.stable_memory_increase];

            let is_significant = metrics
                .iter()
                .any(|v| matches!(v.status(noise_threshold), Change::New | Change::Improved | Change::Regressed));

            if !is_significant {
                return None;
            }

            let mut status = String::new();
            if entry.status.is_empty() {
                if metrics.iter().any(|v| v.status(noise_threshold) == Change::Regressed) {
                    status.push('+');
                }
                if metrics.iter().any(|v| v.status(noise_threshold) == Change::Improved) {
                    if !status.is_empty() {
                        status.push('/');
                    }
                    status.push('-');
                }
            } else {
                status = entry.status.clone();
            }

            let mut updated = entry.clone();
            updated.status = status;
            Some(updated)
        })
        .collect();

    // Sort by name, ascending.
    filtered.sort_by_key(|a| a.benchmark.full_name());
    // Sort by status.
    filtered.sort_by(|a, b| a.status.cmp(&b.status));
    // Sort by instructions percent diff, descending.
    const EMPTY: f64 = f64::MIN;
    filtered.sort_by(|a, b| {
        a.instructions
            .percent_diff()
            .unwrap_or(EMPTY)
            .partial_cmp(&b.instructions.percent_diff().unwrap_or(EMPTY))
            .unwrap_or(std::cmp::Ordering::Equal)
            .reverse()
    });

    filtered
}

/// The table (header, rule, rows, blank line, legend), each line ending in `\n`.
pub(crate) fn format_table(data: &[Entry], max_displayed_rows: usize) -> String {
    let columns = ["status", "name", "calls", "ins", "ins Δ%", "HI", "HI Δ%", "SMI", "SMI Δ%"];
    let mut rows: Vec<_> = data
        .iter()
        .map(|entry| {
            let scope_calls = if entry.has_scope() { entry.calls.fmt_human_current() } else { "".to_string() };
            vec![
                entry.status.clone(),
                entry.benchmark.full_name(),
                scope_calls,
                entry.instructions.fmt_human_current(),
                entry.instructions.fmt_human_percent(),
                entry.heap_increase.fmt_human_current(),
                entry.heap_increase.fmt_human_percent(),
                entry.stable_memory_increase.fmt_human_current(),
                entry.stable_memory_increase.fmt_human_percent(),
            ]
        })
        .collect();

    let total_rows = rows.len();

    if total_rows > max_displayed_rows {
        let omitted_count = total_rows - max_displayed_rows;
        let head_rows = max_displayed_rows / 2;
        let tail_rows = max_displayed_rows - head_rows;

        let mut limited_rows = Vec::new();
        if head_rows > 0 {
            limited_rows.extend_from_slice(&rows[..head_rows]);
        }

        let mut omitted_row = vec!["".to_string(); columns.len()];
        omitted_row[0] = "...".to_string();
        omitted_row[1] = format!("... {} row{} omitted ...", omitted_count, if omitted_count == 1 { "" } else { "s" });
        limited_rows.push(omitted_row);

        if tail_rows > 0 {
            limited_rows.extend_from_slice(&rows[total_rows - tail_rows..]);
        }

        rows = limited_rows;
    }

    // Widths are byte lengths (as in canbench) while `format!` pads by characters, so a
    // column whose widest cell contains "Δ" (2 bytes) gets one extra space of padding.
    let mut col_widths: Vec<_> = columns.iter().map(|h| h.len()).collect();
    for row in &rows {
        for (i, cell) in row.iter().enumerate() {
            col_widths[i] = col_widths[i].max(cell.len());
        }
    }

    let mut out = String::new();
    let print_row = |out: &mut String, row: &[String]| {
        out.push('|');
        for (i, cell) in row.iter().enumerate() {
            let width = col_widths[i];
            let _ = match i {
                0 => write!(out, " {:^width$} |", cell, width = width),
                1 => write!(out, " {:<width$} |", cell, width = width),
                _ => write!(out, " {:>width$} |", cell, width = width),
            };
        }
        out.push('\n');
    };

    print_row(&mut out, &columns.iter().map(|s| s.to_string()).collect::<Vec<_>>());
    out.push('|');
    for width in &col_widths {
        out.push_str(&"-".repeat(width + 2));
        out.push('|');
    }
    out.push('\n');

    for row in &rows {
        print_row(&mut out, row);
    }

    out.push('\n');
    out.push_str("ins = instructions, HI = heap_increase, SMI = stable_memory_increase, Δ% = percent change\n");

    out
}

#[cfg(test)]
mod tests {
    use super::super::data::{extract, Benchmark, Values};
    use super::super::test_support::{bench, m, results};
    use super::*;

    const LEGEND: &str = "ins = instructions, HI = heap_increase, SMI = stable_memory_increase, Δ% = percent change\n";

    // Ported from canbench 0.7.0 src/table.rs tests (test_print_table_variants_*).
    fn create_entry(name: &str, scope: Option<&str>) -> Entry {
        Entry {
            status: "".to_string(),
            benchmark: Benchmark::new(name, scope),
            calls: Values::new(Some(10), None),
            instructions: Values::new(Some(9_000_000), Some(10_000_000)),
            heap_increase: Values::new(Some(0), None),
            stable_memory_increase: Values::new(Some(0), None),
        }
    }

    fn run_table_test_case(max_displayed_rows: usize, expected_output: &str) {
        let entries: Vec<Entry> = (1..=5)
            .flat_map(|i| {
                let bench = format!("bench_{}", i);
                let mut v = vec![create_entry(&bench, None)];
                if i >= 5 {
                    v.push(create_entry(&bench, Some("scope_0")));
                }
                v
            })
            .collect();

        let output = format_table(&entries, max_displayed_rows);
        assert_eq!(
            output, expected_output,
            "Unexpected output with max_displayed_rows = {}:\n{}",
            max_displayed_rows, output
        );
    }

    #[test]
    fn table_with_zero_rows_allowed_shows_only_omitted_row() {
        run_table_test_case(
            0,
            "\
| status | name                   | calls | ins |  ins Δ% | HI |  HI Δ% | SMI |  SMI Δ% |
|--------|------------------------|-------|-----|---------|----|--------|-----|---------|
|  ...   | ... 6 rows omitted ... |       |     |         |    |        |     |         |

ins = instructions, HI = heap_increase, SMI = stable_memory_increase, Δ% = percent change
",
        );
    }

    #[test]
    fn table_with_one_row_allowed_keeps_the_last_row() {
        run_table_test_case(
            1,
            "\
| status | name                   | calls |   ins |  ins Δ% | HI |  HI Δ% | SMI |  SMI Δ% |
|--------|------------------------|-------|-------|---------|----|--------|-----|---------|
|  ...   | ... 5 rows omitted ... |       |       |         |    |        |     |         |
|        | bench_5::scope_0       |    10 | 9.00M | -10.00% |  0 |        |   0 |         |

ins = instructions, HI = heap_increase, SMI = stable_memory_increase, Δ% = percent change
",
        );
    }

    #[test]
    fn table_with_two_rows_allowed_keeps_first_and_last() {
        run_table_test_case(
            2,
            "\
| status | name                   | calls |   ins |  ins Δ% | HI |  HI Δ% | SMI |  SMI Δ% |
|--------|------------------------|-------|-------|---------|----|--------|-----|---------|
|        | bench_1                |       | 9.00M | -10.00% |  0 |        |   0 |         |
|  ...   | ... 4 rows omitted ... |       |       |         |    |        |     |         |
|        | bench_5::scope_0       |    10 | 9.00M | -10.00% |  0 |        |   0 |         |

ins = instructions, HI = heap_increase, SMI = stable_memory_increase, Δ% = percent change
",
        );
    }

    #[test]
    fn table_with_odd_limit_puts_extra_row_in_tail() {
        run_table_test_case(
            3,
            "\
| status | name                   | calls |   ins |  ins Δ% | HI |  HI Δ% | SMI |  SMI Δ% |
|--------|------------------------|-------|-------|---------|----|--------|-----|---------|
|        | bench_1                |       | 9.00M | -10.00% |  0 |        |   0 |         |
|  ...   | ... 3 rows omitted ... |       |       |         |    |        |     |         |
|        | bench_5                |       | 9.00M | -10.00% |  0 |        |   0 |         |
|        | bench_5::scope_0       |    10 | 9.00M | -10.00% |  0 |        |   0 |         |

ins = instructions, HI = heap_increase, SMI = stable_memory_increase, Δ% = percent change
",
        );
    }

    #[test]
    fn table_with_four_rows_allowed_splits_evenly() {
        run_table_test_case(
            4,
            "\
| status | name                   | calls |   ins |  ins Δ% | HI |  HI Δ% | SMI |  SMI Δ% |
|--------|------------------------|-------|-------|---------|----|--------|-----|---------|
|        | bench_1                |       | 9.00M | -10.00% |  0 |        |   0 |         |
|        | bench_2                |       | 9.00M | -10.00% |  0 |        |   0 |         |
|  ...   | ... 2 rows omitted ... |       |       |         |    |        |     |         |
|        | bench_5                |       | 9.00M | -10.00% |  0 |        |   0 |         |
|        | bench_5::scope_0       |    10 | 9.00M | -10.00% |  0 |        |   0 |         |

ins = instructions, HI = heap_increase, SMI = stable_memory_increase, Δ% = percent change
",
        );
    }

    #[test]
    fn table_with_one_omitted_row_uses_singular() {
        run_table_test_case(
            5,
            "\
| status | name                  | calls |   ins |  ins Δ% | HI |  HI Δ% | SMI |  SMI Δ% |
|--------|-----------------------|-------|-------|---------|----|--------|-----|---------|
|        | bench_1               |       | 9.00M | -10.00% |  0 |        |   0 |         |
|        | bench_2               |       | 9.00M | -10.00% |  0 |        |   0 |         |
|  ...   | ... 1 row omitted ... |       |       |         |    |        |     |         |
|        | bench_4               |       | 9.00M | -10.00% |  0 |        |   0 |         |
|        | bench_5               |       | 9.00M | -10.00% |  0 |        |   0 |         |
|        | bench_5::scope_0      |    10 | 9.00M | -10.00% |  0 |        |   0 |         |

ins = instructions, HI = heap_increase, SMI = stable_memory_increase, Δ% = percent change
",
        );
    }

    #[test]
    fn table_within_limit_shows_all_rows() {
        run_table_test_case(
            6,
            "\
| status | name             | calls |   ins |  ins Δ% | HI |  HI Δ% | SMI |  SMI Δ% |
|--------|------------------|-------|-------|---------|----|--------|-----|---------|
|        | bench_1          |       | 9.00M | -10.00% |  0 |        |   0 |         |
|        | bench_2          |       | 9.00M | -10.00% |  0 |        |   0 |         |
|        | bench_3          |       | 9.00M | -10.00% |  0 |        |   0 |         |
|        | bench_4          |       | 9.00M | -10.00% |  0 |        |   0 |         |
|        | bench_5          |       | 9.00M | -10.00% |  0 |        |   0 |         |
|        | bench_5::scope_0 |    10 | 9.00M | -10.00% |  0 |        |   0 |         |

ins = instructions, HI = heap_increase, SMI = stable_memory_increase, Δ% = percent change
",
        );
    }

    #[test]
    fn significant_rows_get_plus_minus_status_and_new_scope_row() {
        // tests/expected/reports_scopes_in_existing_benchmark.txt
        let new = results(&[(
            "bench_scope_exists",
            bench(m(1, 3834, 0, 0), &[("scope_1", m(1, 970, 0, 0)), ("scope_2", m(1, 781, 0, 0))]),
        )]);
        let old = results(&[("bench_scope_exists", bench(m(1, 0, 0, 0), &[("scope_1", m(1, 800, 1, 0))]))]);
        let filtered = filter_entries(&extract(&new, &old), 2.0);
        assert_eq!(
            format_table(&filtered, 50),
            "\
| status | name                        | calls |   ins |  ins Δ% | HI |    HI Δ% | SMI |  SMI Δ% |
|--------|-----------------------------|-------|-------|---------|----|----------|-----|---------|
|   +    | bench_scope_exists          |       | 3.83K |   +inf% |  0 |    0.00% |   0 |   0.00% |
|  +/-   | bench_scope_exists::scope_1 |     1 |   970 | +21.25% |  0 | -100.00% |   0 |   0.00% |
|  new   | bench_scope_exists::scope_2 |     1 |   781 |         |  0 |          |   0 |         |

ins = instructions, HI = heap_increase, SMI = stable_memory_increase, Δ% = percent change
"
        );
    }

    #[test]
    fn repeated_scope_in_existing_benchmark_table() {
        // tests/expected/reports_repeated_scope_in_existing_benchmark.txt
        let new =
            results(&[("bench_repeated_scope_exists", bench(m(1, 15_400, 0, 0), &[("scope_1", m(10, 7999, 0, 0))]))]);
        let old = results(&[("bench_repeated_scope_exists", bench(m(1, 0, 0, 0), &[("scope_1", m(10, 800, 1, 0))]))]);
        let filtered = filter_entries(&extract(&new, &old), 2.0);
        assert_eq!(
            format_table(&filtered, 50),
            "\
| status | name                                 | calls |    ins |   ins Δ% | HI |    HI Δ% | SMI |  SMI Δ% |
|--------|--------------------------------------|-------|--------|----------|----|----------|-----|---------|
|   +    | bench_repeated_scope_exists          |       | 15.40K |    +inf% |  0 |    0.00% |   0 |   0.00% |
|  +/-   | bench_repeated_scope_exists::scope_1 |    10 |  8.00K | +899.87% |  0 | -100.00% |   0 |   0.00% |

ins = instructions, HI = heap_increase, SMI = stable_memory_increase, Δ% = percent change
"
        );
    }

    #[test]
    fn noise_only_changes_are_filtered_out() {
        // tests/expected/benchmark_reports_noisy_change.txt has no table.
        let new = results(&[("noisy_change_test", bench(m(1, 207, 0, 0), &[]))]);
        let old = results(&[("noisy_change_test", bench(m(1, 210, 0, 0), &[]))]);
        assert!(filter_entries(&extract(&new, &old), 2.0).is_empty());
        // Above a 1% threshold the same change is an improvement.
        let rows = filter_entries(&extract(&new, &old), 1.0);
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].status, "-");
    }

    #[test]
    fn rows_sort_by_instruction_change_descending_then_status_then_name() {
        let new = results(&[
            ("a_new", bench(m(1, 100, 0, 0), &[])),
            ("b_up_10", bench(m(1, 110, 0, 0), &[])),
            ("c_down_10", bench(m(1, 90, 0, 0), &[])),
            ("d_up_50", bench(m(1, 150, 0, 0), &[])),
            ("e_heap_only", bench(m(1, 100, 5, 0), &[])),
            ("f_new", bench(m(1, 1, 0, 0), &[])),
            ("g_up_10", bench(m(1, 110, 0, 0), &[])),
        ]);
        let old = results(&[
            ("b_up_10", bench(m(1, 100, 0, 0), &[])),
            ("c_down_10", bench(m(1, 100, 0, 0), &[])),
            ("d_up_50", bench(m(1, 100, 0, 0), &[])),
            ("e_heap_only", bench(m(1, 100, 10, 0), &[])),
            ("g_up_10", bench(m(1, 100, 0, 0), &[])),
        ]);
        let rows = filter_entries(&extract(&new, &old), 2.0);
        let order: Vec<(String, String)> = rows.iter().map(|e| (e.status.clone(), e.benchmark.full_name())).collect();
        let expected = [
            ("+", "d_up_50"),
            ("+", "b_up_10"),
            ("+", "g_up_10"),
            ("-", "e_heap_only"),
            ("-", "c_down_10"),
            ("new", "a_new"),
            ("new", "f_new"),
        ];
        assert_eq!(order, expected.iter().map(|(s, n)| (s.to_string(), n.to_string())).collect::<Vec<_>>());
    }

    #[test]
    fn table_over_fifty_rows_omits_the_middle() {
        let new = results(&(0..60).map(|i| (format!("bench_{i:02}"), bench(m(1, 207, 0, 0), &[]))).collect::<Vec<_>>());
        let rows = filter_entries(&extract(&new, &Default::default()), 2.0);
        let table = format_table(&rows, 50);
        let lines: Vec<&str> = table.lines().collect();
        // header + rule + 25 + omitted + 25 + blank + legend
        assert_eq!(lines.len(), 2 + 25 + 1 + 25 + 2);
        assert_eq!(
            lines[0],
            "| status | name                    | calls | ins |  ins Δ% | HI |  HI Δ% | SMI |  SMI Δ% |"
        );
        assert_eq!(
            lines[2],
            "|  new   | bench_00                |       | 207 |         |  0 |        |   0 |         |"
        );
        assert_eq!(
            lines[26],
            "|  new   | bench_24                |       | 207 |         |  0 |        |   0 |         |"
        );
        assert_eq!(
            lines[27],
            "|  ...   | ... 10 rows omitted ... |       |     |         |    |        |     |         |"
        );
        assert_eq!(
            lines[28],
            "|  new   | bench_35                |       | 207 |         |  0 |        |   0 |         |"
        );
        assert_eq!(
            lines[52],
            "|  new   | bench_59                |       | 207 |         |  0 |        |   0 |         |"
        );
        assert!(table.ends_with(&format!("|\n\n{LEGEND}")));
    }
}
