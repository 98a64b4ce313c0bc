//! The scaling curves of the users/orders workload: the nine steps under `cells::SCALE_PROFILE`
//! on databases of [`SCALES`] orders (one user per ten orders), read from the grid's cells (the
//! reference size's cells are the published ones), to `docs/scaling.md`, its chart
//! `docs/scaling.svg` and the README's "How it scales" table. The 100 M-order column is a
//! projection ([`projected_per_row`]), labelled as such everywhere it appears.

use std::fmt::Write;

use stablebench_grid::cells::{size_label, Backend, Cell, SCALE_PROFILE};
use stablebench_grid::ic::{QUERY_INSTRUCTION_LIMIT, UPDATE_INSTRUCTION_LIMIT};
use stablebench_grid::users_orders::{PROJECTED_SCALE, SCALES};

use super::results::{Measurement, Results};
use super::{grouped, human, mib};
use crate::chart::{compact, Drawn};
use plotters::prelude::*;
use stablebench::bench::{Bench, Sizes, BENCHES};

/// Rows the measured step handles on a database of `sizes`, the unit of "per row": rows
/// inserted, index entries built (both indexes), rows returned, orders deleted (and, for the
/// rolled-back delete, restored). The generator gives order `i` to user `(i + 1) * 13 mod users
/// plus one`, so every user owns exactly ten orders when users is a tenth of orders and prime to
/// 13, and the counts are closed forms (checked against the oracle in the tests).
pub fn rows(b: Bench, s: Sizes) -> u64 {
    match b {
        Bench::InsertUsers => s.users,
        Bench::InsertOrders | Bench::InsertOrders1mIndexed => s.orders,
        Bench::CreateIndexes => s.users + s.orders,
        // The join takes users below the bound, the LIKE every user.
        Bench::SelectJoin => s.orders / s.users * s.join_max_user_id().saturating_sub(1),
        Bench::SelectLike => s.users,
        Bench::InsertOrders100Indexed => Sizes::EXTRA_ORDERS,
        Bench::DeleteOrders1kIndexed => s.orders / s.users * s.delete_max_user_id(),
        Bench::DeleteOrders100kRollback => s.orders - s.rollback_min_order_id(),
    }
}

/// The cell of step `b` at `orders` orders on the curve.
pub fn cell(b: Bench, orders: u64) -> Cell {
    Cell::users_orders_at(b, orders, Backend::Sqlite, SCALE_PROFILE)
}

/// One step's curve: its measurement at every size of [`SCALES`] (None: not measured yet).
#[derive(Clone, Debug)]
pub struct Curve {
    /// The step.
    pub bench: Bench,
    /// Per size of [`SCALES`], the measured step's totals.
    pub points: Vec<Option<Measurement>>,
}

impl Curve {
    /// The step's curve from the results.
    pub fn of(results: &Results, bench: Bench) -> Curve {
        Curve { bench, points: SCALES.iter().map(|&n| results.get(&cell(bench, n)).map(|r| r.total)).collect() }
    }

    /// Instructions per row at size `i` of [`SCALES`].
    pub fn per_row(&self, i: usize) -> Option<f64> {
        let rows = rows(self.bench, Sizes::at(SCALES[i])).max(1);
        self.points[i].map(|m| m.instructions as f64 / rows as f64)
    }

    /// Instructions of the whole step at size `i` of [`SCALES`].
    pub fn total(&self, i: usize) -> Option<f64> {
        self.points[i].map(|m| m.instructions as f64)
    }
}

/// The projected instructions per row at [`PROJECTED_SCALE`]: the largest measured size's cost
/// per row, grown by the factor it grew over the decade before it (the curve's last slope on a
/// log scale, carried one decade further). A projection, not a measurement: past 10 M orders the
/// database (over 1 GiB) is several times the page cache's bound, which the last decade already
/// shows in part.
pub fn projected_per_row(curve: &Curve) -> Option<f64> {
    let last = SCALES.len() - 1;
    let (hi, lo) = (curve.per_row(last)?, curve.per_row(last - 1)?);
    let decades = (PROJECTED_SCALE as f64 / SCALES[last] as f64).log10()
        / (SCALES[last] as f64 / SCALES[last - 1] as f64).log10();
    Some(hi * (hi / lo).powf(decades))
}

/// The projected instructions of the whole step at [`PROJECTED_SCALE`].
pub fn projected_total(curve: &Curve) -> Option<f64> {
    Some(projected_per_row(curve)? * rows(curve.bench, Sizes::at(PROJECTED_SCALE)) as f64)
}

/// Where the step stops fitting `limit` instructions.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Fit {
    /// It exceeds the limit at every size measured.
    Never,
    /// It crosses the limit at about this many orders, interpolated between two measured sizes.
    Measured(f64),
    /// It crosses between the largest measured size and the projection, at about this many.
    Projected(f64),
    /// It still fits at the largest size on the curve: this many orders, projected or measured.
    Beyond {
        /// The largest size.
        orders: u64,
        /// Whether that size is the projection.
        projected: bool,
    },
    /// Nothing measured.
    Unmeasured,
}

/// Where `curve` crosses `limit` (log-log interpolation between the sizes around the crossing).
pub fn fit(curve: &Curve, limit: u64) -> Fit {
    let limit = limit as f64;
    let mut points: Vec<(f64, f64, bool)> =
        (0..SCALES.len()).filter_map(|i| Some((SCALES[i] as f64, curve.total(i)?, false))).collect();
    if let Some(t) = projected_total(curve) {
        points.push((PROJECTED_SCALE as f64, t, true));
    }
    let Some(first) = points.first() else { return Fit::Unmeasured };
    if first.1 > limit {
        return Fit::Never;
    }
    for w in points.windows(2) {
        let ((n0, t0, _), (n1, t1, projected)) = (w[0], w[1]);
        if t1 > limit {
            let n = n0 * (n1 / n0).powf((limit / t0).ln() / (t1 / t0).ln());
            return if projected { Fit::Projected(n) } else { Fit::Measured(n) };
        }
    }
    let &(orders, _, projected) = points.last().expect("not empty");
    Fit::Beyond { orders: orders as u64, projected }
}

/// `~27M orders`, `~270M orders (projected)`, `beyond 100M orders (projected)`, `beyond 1M
/// orders` (when there is no projection), `not measured`.
fn fit_text(f: Fit) -> String {
    let orders = about;
    match f {
        Fit::Never => format!("not at {} orders", order_label(SCALES[0])),
        Fit::Measured(n) => format!("{} orders", orders(n)),
        Fit::Projected(n) => format!("{} orders (projected)", orders(n)),
        Fit::Beyond { orders, projected: true } => format!("beyond {} orders (projected)", order_label(orders)),
        Fit::Beyond { orders, projected: false } => format!("beyond {} orders", order_label(orders)),
        Fit::Unmeasured => "not measured".to_string(),
    }
}

/// `~2.7M`: a size read off a curve, to two significant digits (the interpolation is not more
/// precise than that).
pub(crate) fn about(n: f64) -> String {
    let magnitude = 10f64.powf(n.log10().floor() - 1.0);
    let rounded = ((n / magnitude).round() * magnitude) as u64;
    format!("~{}", order_label(rounded))
}

/// `10k`, `2.7M`, `100M`: orders as the tables show them (the charts' axis labels).
fn order_label(n: u64) -> String {
    compact(n as f64)
}

/// Instructions per row, as a table cell: `1,234` or `12.3` below 100.
fn per_row_text(v: Option<f64>) -> String {
    match v {
        None => "-".into(),
        Some(v) if v < 100.0 => format!("{v:.1}"),
        Some(v) => grouped(v.round() as u64),
    }
}

/// The generated documents.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// `docs/scaling.md`.
    pub markdown: String,
    /// `docs/scaling.svg`.
    pub svg: String,
    /// The README's table (between `<!-- scaling-table:begin/end -->`).
    pub readme: String,
}

/// The cell names of one step across the sizes, for the tables' first column.
fn step_title(b: Bench) -> String {
    format!("`{}`", b.step())
}

/// The per-row table: one row per step, a column per size, the projection last, then where the
/// step stops fitting a query and an update.
fn per_row_table(curves: &[Curve]) -> String {
    let mut t = String::from("| step | rows at 10M |");
    for n in SCALES {
        let _ = write!(t, " {} |", order_label(n));
    }
    let _ = writeln!(
        t,
        " {} (projected) | whole step at {} | fits a 5 B query up to | fits a 40 B update up to |",
        order_label(PROJECTED_SCALE),
        order_label(SCALES[SCALES.len() - 1])
    );
    t += &format!("|---|---:|{}---:|---:|---|---|\n", "---:|".repeat(SCALES.len()));
    for c in curves {
        let _ =
            write!(t, "| {} | {} |", step_title(c.bench), grouped(rows(c.bench, Sizes::at(SCALES[SCALES.len() - 1]))));
        for i in 0..SCALES.len() {
            let _ = write!(t, " {} |", per_row_text(c.per_row(i)));
        }
        let last = c.points[SCALES.len() - 1].map(|m| human(m.instructions)).unwrap_or_else(|| "-".into());
        let _ = writeln!(
            t,
            " {} | {last} | {} | {} |",
            per_row_text(projected_per_row(c)),
            fit_text(fit(c, QUERY_INSTRUCTION_LIMIT)),
            fit_text(fit(c, UPDATE_INSTRUCTION_LIMIT))
        );
    }
    t
}

/// Heap and stable-memory growth of each step, MiB, per size.
fn memory_table(curves: &[Curve]) -> String {
    let mut t = String::from("| step |");
    for n in SCALES {
        let _ = write!(t, " heap, {} |", order_label(n));
    }
    for n in SCALES {
        let _ = write!(t, " stable, {} |", order_label(n));
    }
    t += &format!("\n|---|{}\n", "---:|".repeat(2 * SCALES.len()));
    for c in curves {
        let _ = write!(t, "| {} |", step_title(c.bench));
        for pick in [|m: Measurement| m.heap_increase, |m: Measurement| m.stable_memory_increase] {
            for p in &c.points {
                let _ = write!(t, " {} |", p.map(|m| mib(pick(m))).unwrap_or_else(|| "-".into()));
            }
        }
        t += "\n";
    }
    t
}

/// The scaling report from the results, produced by `command` on `date`.
pub fn generate(results: &Results, command: &str, date: &str) -> Report {
    let curves: Vec<Curve> = BENCHES.iter().map(|&b| Curve::of(results, b)).collect();
    let per_row = per_row_table(&curves);
    let sizes: Vec<String> = SCALES
        .iter()
        .map(|&n| {
            let s = Sizes::at(n);
            format!("{} orders and {} users", grouped(s.orders), grouped(s.users))
        })
        .collect();
    let names: Vec<String> = SCALES
        .iter()
        .map(|&n| match n == Sizes::REFERENCE.orders {
            true => "the published names (`sqlite_insert_users_100k_<profile>`, ...)".to_string(),
            false => format!("`sqlite_users_orders_{}_<step>_{}`", size_label(n), SCALE_PROFILE.name),
        })
        .collect();
    let mut md = String::new();
    let _ = writeln!(md, "# How the users/orders steps scale\n");
    let _ = writeln!(
        md,
        "Generated by `scripts/report.sh` from `{file}` (`{command}` with the offline runner, on \
         {date}). The nine steps of the reference workload, under the key-value workloads' profile \
         (`{}`, the bulk-load profile; the recommendation is measured at the reference size in \
         `docs/mainnet.md` and `docs/results.md`), each on a database built by its own setup at {}: one user per ten orders, the \
         reference's ratio, and the statements' bounds scaled with it (the join takes users below a \
         hundredth of them, the delete the orders of the first thousandth, the rolled-back delete \
         the last tenth of the orders). Instructions are {whose} ({described}), of the measured step only; heap \
         and stable memory are the step's growth.\n",
        SCALE_PROFILE.name,
        sizes.join(", "),
        file = results.model().file(),
        whose = results.model().whose(),
        described = results.model().described(),
    );
    let _ = writeln!(md, "Cells per size:\n");
    for (n, name) in SCALES.iter().zip(&names) {
        let _ = writeln!(md, "- {} orders: {name}", order_label(*n));
    }
    let _ = writeln!(
        md,
        "\n![instructions per row and per step against orders](scaling.svg)\n\n\
         ## Instructions per row\n\n\
         A row is what the step handles: a row inserted, an index entry built (both indexes), a row \
         returned, an order deleted. The {} column is a **projection**, not a measurement: the \
         {} cost per row grown by the factor it grew from {} to {}. \"Fits ... up to\" interpolates \
         the whole step's instructions between the measured sizes on a log scale (and between {} and \
         the projection when it is marked so).\n\n{per_row}",
        order_label(PROJECTED_SCALE),
        order_label(SCALES[SCALES.len() - 1]),
        order_label(SCALES[SCALES.len() - 2]),
        order_label(SCALES[SCALES.len() - 1]),
        order_label(SCALES[SCALES.len() - 1]),
    );
    let _ = writeln!(
        md,
        "## Heap and stable memory growth of the step (MiB)\n\n{}\n\
         Growth during the measured step only, as canbench-rs reports it: memory the setup already \
         grew is reused without showing here. So the reads show none (the setup left SQLite's page \
         cache and the allocator holding more than they need), and stable memory, which \
         ic-stable-structures' memory manager grows in buckets of 8 MiB, shows only the buckets a \
         write crossed. SQLite's page cache is bounded by the profile (`cache_size`: a quarter of \
         the canister's `wasm_memory_limit`, 768 MiB at the IC's default of 3 GiB), which the \
         database outgrows between 1 M and 10 M orders.\n",
        memory_table(&curves)
    );
    let svg = chart(&curves);
    Report { markdown: md, svg, readme: per_row }
}

/// `docs/scaling.svg`: the nine users/orders steps against orders in the database, both axes
/// logarithmic, one line per step: instructions per row (left) and of the whole step (right, with
/// the 5 B query and 40 B update limits as horizontal lines). The projected size is joined to the
/// last measured one by a dashed line and drawn without a point.
pub fn chart(curves: &[Curve]) -> String {
    crate::chart::svg(|s| draw_scaling(curves, s))
}

fn draw_scaling(curves: &[Curve], svg: &mut String) -> Drawn {
    use crate::chart::{legend_rows, log_log_chart, log_range, runs, Area, Line, TEN};
    use plotters::style::text_anchor::{HPos, Pos, VPos};
    let root = SVGBackend::with_string(svg, (1300, 640)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(
        "users/orders, journal_memory_temp_file: instructions against orders in the database (dashed: projected)",
        ("sans-serif", 20),
    )?;
    // The step names are longer than a legend slot of the other charts.
    let keys: Vec<(RGBColor, &str)> = curves.iter().enumerate().map(|(i, c)| (TEN[i % 10], c.bench.step())).collect();
    let panels = legend_rows(&root, &keys)?;
    let x_range = (SCALES[0] as f64 / 2.0, PROJECTED_SCALE as f64 * 2.0);
    let (left, right) = panels.split_horizontally(650);
    /// A panel: where, its titles, the measured and projected values it draws, its limit lines.
    struct Side<'a, 'b> {
        panel: &'a Area<'b>,
        title: &'static str,
        y_desc: &'static str,
        pick: fn(&Curve, usize) -> Option<f64>,
        project: fn(&Curve) -> Option<f64>,
        limits: &'static [(u64, &'static str)],
    }
    let sides = [
        Side {
            panel: &left,
            title: "per row",
            y_desc: "instructions per row",
            pick: |c, i| c.per_row(i),
            project: projected_per_row,
            limits: &[],
        },
        Side {
            panel: &right,
            title: "whole step",
            y_desc: "instructions",
            pick: |c, i| c.total(i),
            project: projected_total,
            limits: &[(QUERY_INSTRUCTION_LIMIT, "5 B query limit"), (UPDATE_INSTRUCTION_LIMIT, "40 B update limit")],
        },
    ];
    for Side { panel, title, y_desc, pick, project, limits } in sides {
        let lines: Vec<Line> = curves
            .iter()
            .enumerate()
            .map(|(k, c)| (TEN[k % 10], (0..SCALES.len()).map(|i| (SCALES[i] as f64, pick(c, i))).collect()))
            .collect();
        let values = lines
            .iter()
            .flat_map(|(_, p)| p.iter().filter_map(|(_, y)| *y))
            .chain(curves.iter().filter_map(project))
            .chain(limits.iter().map(|(l, _)| *l as f64));
        let y_range = log_range(values, (1.0, 1e3));
        let mut chart =
            log_log_chart(panel, title, x_range, y_range, "orders in the database (users: a tenth)", y_desc)?;
        for &(limit, name) in limits {
            let y = limit as f64;
            chart.draw_series(LineSeries::new([(x_range.0, y), (x_range.1, y)], BLACK.mix(0.6).stroke_width(1)))?;
            let style = TextStyle::from(("sans-serif", 12).into_font()).pos(Pos::new(HPos::Left, VPos::Bottom));
            chart.draw_series([Text::new(name.to_string(), (x_range.0 * 1.2, y * 1.1), style)])?;
        }
        for ((c, points), curve) in lines.iter().zip(curves) {
            for run in runs(points) {
                chart.draw_series(LineSeries::new(run, c.stroke_width(2)).point_size(4))?;
            }
            let last = SCALES.len() - 1;
            if let (Some(y), Some(p)) = (pick(curve, last), project(curve)) {
                let segment = [(SCALES[last] as f64, y), (PROJECTED_SCALE as f64, p)];
                chart.draw_series(DashedLineSeries::new(segment, 6, 4, c.stroke_width(2)))?;
            }
        }
    }
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::super::results::Record;
    use super::*;
    use stablebench::oracle;

    #[test]
    fn rows_are_the_oracles_counts() {
        for n in SCALES {
            let s = Sizes::at(n);
            assert_eq!(rows(Bench::SelectJoin, s), oracle::join(s.users, s.orders, s.join_max_user_id()).0, "{n}");
            assert_eq!(
                rows(Bench::DeleteOrders1kIndexed, s),
                oracle::orders_of_users(s.users, s.orders, s.delete_max_user_id())
            );
        }
        let r = Sizes::REFERENCE;
        assert_eq!(rows(Bench::SelectJoin, r), 9_990);
        assert_eq!(rows(Bench::DeleteOrders1kIndexed, r), 1_000);
        assert_eq!(rows(Bench::DeleteOrders100kRollback, r), 100_000);
    }

    /// Results where step `b` costs `per_row(n)` per row at `n` orders.
    fn results(per_row: impl Fn(u64) -> u64) -> Results {
        let mut named = BTreeMap::new();
        for b in BENCHES {
            for n in SCALES {
                let m =
                    Measurement { calls: 1, instructions: per_row(n) * rows(b, Sizes::at(n)), ..Default::default() };
                named.insert(cell(b, n).name(), Record { total: m, ..Default::default() });
            }
        }
        Results::new(named).unwrap()
    }

    #[test]
    fn the_projection_carries_the_last_decades_growth_one_decade_on() {
        let r = results(|n| if n >= 10_000_000 { 2_000 } else { 1_000 });
        let c = Curve::of(&r, Bench::InsertOrders);
        assert_eq!(c.per_row(3), Some(2_000.0));
        assert_eq!(projected_per_row(&c), Some(4_000.0));
        assert_eq!(projected_total(&c), Some(4_000.0 * 100_000_000.0));
    }

    #[test]
    fn a_step_crosses_a_limit_where_its_total_does() {
        // 20,000 per order: 200 M at 10k, 20 B at 1M, 200 B at 10M, so 5 B at 250k and 40 B at 2M.
        let r = results(|_| 20_000);
        let c = Curve::of(&r, Bench::InsertOrders);
        let Fit::Measured(q) = fit(&c, QUERY_INSTRUCTION_LIMIT) else { panic!("{:?}", fit(&c, 5)) };
        assert!((q - 250_000.0).abs() < 1.0, "{q}");
        let Fit::Measured(u) = fit(&c, UPDATE_INSTRUCTION_LIMIT) else { panic!() };
        assert!((u - 2_000_000.0).abs() < 10.0, "{u}");
        assert_eq!(fit_text(Fit::Measured(u)), "~2M orders");
        assert_eq!(fit_text(Fit::Measured(2_740_000.0)), "~2.7M orders");
        // 100 orders cost the same at every size: beyond the projection.
        assert_eq!(
            fit(&Curve::of(&r, Bench::InsertOrders100Indexed), UPDATE_INSTRUCTION_LIMIT),
            Fit::Beyond { orders: PROJECTED_SCALE, projected: true }
        );
        assert_eq!(fit(&c, 1), Fit::Never);
        // 30 B at 10M orders, growing: crosses 40 B between 10M and the projection.
        let r = results(|n| if n >= 10_000_000 { 3_000 } else { 1_500 });
        assert!(matches!(fit(&Curve::of(&r, Bench::InsertOrders), UPDATE_INSTRUCTION_LIMIT), Fit::Projected(_)));
    }

    #[test]
    fn the_report_labels_the_projection_and_shows_gaps() {
        let rep = generate(&Results::new(BTreeMap::new()).unwrap(), "cmd", "2026-11-25");
        assert!(rep.readme.contains("100M (projected)"));
        assert!(rep.readme.lines().nth(2).unwrap().contains("| - |"));
        assert!(rep.readme.lines().nth(2).unwrap().ends_with("| not measured | not measured |"));
        // Without the 10M cells there is no projection: a step that fits says up to what it was measured.
        let mut named = BTreeMap::new();
        for n in [10_000, 100_000, 1_000_000] {
            let m = Measurement { calls: 1, instructions: 1_000, ..Default::default() };
            named.insert(cell(Bench::SelectJoin, n).name(), Record { total: m, ..Default::default() });
        }
        let c = Curve::of(&Results::new(named).unwrap(), Bench::SelectJoin);
        assert_eq!(fit(&c, UPDATE_INSTRUCTION_LIMIT), Fit::Beyond { orders: 1_000_000, projected: false });
        assert_eq!(fit_text(fit(&c, UPDATE_INSTRUCTION_LIMIT)), "beyond 1M orders");
        let full = generate(&results(|_| 1_000), "cmd", "2026-11-25");
        assert!(full.markdown.contains("`sqlite_users_orders_10m_<step>_journal_memory_temp_file`"));
        assert_eq!(full.readme.lines().count(), 2 + BENCHES.len());
    }
}
