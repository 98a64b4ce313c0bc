//! The key-value report's charts: `docs/kv_trie.svg` and `docs/kv_nodestore.svg`.

use plotters::prelude::*;
use stablebench_grid::cells::{BACKENDS, NODESTORE_SIZES, TRIE_SIZES};

use super::{op_title, op_unit, phase_per_op, w_avg_per_op, COLUMNS, TRIE_OPS};
use crate::chart::{colour, legend, line_panel, log_label, log_range, not_measured, svg, Drawn, Mark, Series};
use crate::grouped;
use crate::results::Results;

/// `docs/kv_trie.svg`: w_avg instructions per operation against keys in the database, both axes
/// logarithmic, one line with points per backend, one panel per trie operation (2×2).
pub fn trie(results: &Results) -> String {
    svg(|s| draw_trie(results, s))
}

fn draw_trie(results: &Results, svg: &mut String) -> Drawn {
    {
        let root = SVGBackend::with_string(svg, (1100, 900)).into_drawing_area();
        root.fill(&WHITE)?;
        let root = root.titled(
            "Key-value trie workload: instructions per operation (w_avg) against database size",
            ("sans-serif", 22),
        )?;
        let (strip, grid) = root.split_vertically(36);
        legend(&strip, Mark::Line, &BACKENDS)?;
        let x_range = log_range(TRIE_SIZES.iter().map(|s| *s as f64), (1e2, 1e6));
        for (panel, op) in grid.split_evenly((2, 2)).iter().zip(TRIE_OPS) {
            let series: Vec<Series<f64>> = BACKENDS
                .into_iter()
                .map(|b| (b, TRIE_SIZES.map(|s| (s as f64, w_avg_per_op(results, op, s, b))).to_vec()))
                .collect();
            line_panel(panel, op_title(op), x_range, "keys in the database", op_unit(op), &series)?;
        }
        root.present()?;
    }
    Ok(())
}

/// `docs/kv_nodestore.svg`: instructions per operation in each NodeStore phase (logarithmic),
/// one bar per backend and phase, one panel per object count.
pub fn nodestore(results: &Results) -> String {
    svg(|s| draw_nodestore(results, s))
}

fn draw_nodestore(results: &Results, svg: &mut String) -> Drawn {
    {
        let root = SVGBackend::with_string(svg, (1100, 520)).into_drawing_area();
        root.fill(&WHITE)?;
        let root =
            root.titled("NodeStore (rippled's timing test): instructions per operation per phase", ("sans-serif", 22))?;
        let (strip, grid) = root.split_vertically(36);
        legend(&strip, Mark::Bar, &BACKENDS)?;
        for (panel, n) in grid.split_evenly((1, NODESTORE_SIZES.len())).iter().zip(NODESTORE_SIZES) {
            let values: Vec<(usize, usize, f64)> = COLUMNS
                .iter()
                .enumerate()
                .flat_map(|(i, p)| {
                    BACKENDS
                        .iter()
                        .enumerate()
                        .filter_map(move |(j, b)| Some((i, j, phase_per_op(results, *b, n, *p)?)))
                })
                .collect();
            let (lo, hi) = log_range(values.iter().map(|(_, _, v)| *v), (1e3, 1e6));
            let mut chart = ChartBuilder::on(panel)
                .caption(format!("{} objects", grouped(n)), ("sans-serif", 18))
                .margin(12)
                .x_label_area_size(40)
                .y_label_area_size(70)
                .build_cartesian_2d(-0.5..COLUMNS.len() as f64 - 0.5, (lo..hi).log_scale())?;
            // Phases are categories: label the integer positions only.
            let phase_label = |x: &f64| {
                let i = x.round();
                match COLUMNS.get(i as usize) {
                    Some(p) if (x - i).abs() < 1e-6 && i >= 0.0 => p.short_title().to_string(),
                    _ => String::new(),
                }
            };
            chart
                .configure_mesh()
                .x_labels(COLUMNS.len() + 1)
                .y_labels(40)
                .max_light_lines(0)
                .bold_line_style(BLACK.mix(0.08))
                .x_label_formatter(&phase_label)
                .y_label_formatter(&|v| log_label(*v))
                .y_desc("instructions per operation")
                .label_style(("sans-serif", 12))
                .axis_desc_style(("sans-serif", 14))
                .disable_x_mesh()
                .draw()?;
            if values.is_empty() {
                not_measured(panel, "NodeStore")?;
            }
            let width = 0.8 / BACKENDS.len() as f64;
            chart.draw_series(values.iter().map(|&(i, j, v)| {
                let x0 = i as f64 - 0.4 + j as f64 * width;
                Rectangle::new([(x0, lo), (x0 + width * 0.9, v)], colour(BACKENDS[j]).filled())
            }))?;
        }
        root.present()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use stablebench_grid::cells::{cells, Backend, Cache, Op};

    use super::*;
    use crate::results::{Measurement, Record};

    fn results(skip: impl Fn(Backend, u64) -> bool) -> Results {
        let mut named = BTreeMap::new();
        for c in cells()
            .into_iter()
            .filter(|c| matches!(c.op, Op::TrieRead(_) | Op::TrieWrite(_)) && BACKENDS.contains(&c.backend))
        {
            if skip(c.backend, c.size) {
                continue;
            }
            let per_iteration = 1_000 * (1 + BACKENDS.iter().position(|b| *b == c.backend).unwrap() as u64) * c.size;
            let record = Record {
                total: Measurement { calls: 50, instructions: 50 * per_iteration, ..Default::default() },
                scopes: BTreeMap::from([(
                    "w_avg".to_string(),
                    Measurement { calls: 30, instructions: 30 * per_iteration, ..Default::default() },
                )]),
                ..Default::default()
            };
            named.insert(c.name(), record);
        }
        Results::new(named).unwrap()
    }

    fn stroke(b: Backend) -> String {
        let RGBColor(r, g, bl) = colour(b);
        format!("stroke=\"#{r:02X}{g:02X}{bl:02X}\"")
    }

    #[test]
    fn the_trie_chart_is_deterministic() {
        let r = results(|_, _| false);
        assert_eq!(trie(&r), trie(&r));
        assert_eq!(nodestore(&r), nodestore(&r));
    }

    #[test]
    fn the_trie_chart_has_one_series_per_backend_in_every_panel() {
        let svg = trie(&results(|_, _| false));
        assert!(svg.starts_with("<svg"));
        for b in BACKENDS {
            // One legend entry (a line and a point), and per panel one line through all sizes.
            assert_eq!(svg.lines().filter(|l| *l == b.name()).count(), 1, "{}", b.name());
            let lines = svg.lines().filter(|l| l.starts_with("<polyline") && l.contains(&stroke(b))).count();
            assert_eq!(lines, 1 + TRIE_OPS.len(), "{}", b.name());
            let points = svg.lines().filter(|l| l.starts_with("<circle") && l.contains(&stroke(b))).count();
            assert_eq!(points, 1 + TRIE_SIZES.len() * TRIE_OPS.len(), "{}", b.name());
        }
        assert!(svg.contains("instructions per read") && svg.contains("instructions per write"));
        assert!(svg.contains(op_title(Op::TrieRead(Cache::Cold))));
    }

    #[test]
    fn a_missing_size_splits_the_line_and_drops_the_point() {
        let svg = trie(&results(|b, s| b == Backend::Sqlite && s == 10_000));
        let b = Backend::Sqlite;
        let lines = svg.lines().filter(|l| l.starts_with("<polyline") && l.contains(&stroke(b))).count();
        assert_eq!(lines, 1 + 2 * TRIE_OPS.len());
        let points = svg.lines().filter(|l| l.starts_with("<circle") && l.contains(&stroke(b))).count();
        assert_eq!(points, 1 + (TRIE_SIZES.len() - 1) * TRIE_OPS.len());
    }
}
