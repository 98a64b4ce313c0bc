//! The reports' chart primitives, and the charts of the Chia report and the results site, drawn
//! with plotters' SVG backend (each report draws its own charts with these: `kv::charts`,
//! `sysrepo`, `scaling`). Without plotters' `ttf`
//! feature its text is written as SVG `<text>` elements (the browser picks the font), and layout
//! uses plotters' built-in size estimate, so no font file is read and the output is a pure
//! function of the results: the same results give byte-identical SVG, which the README test
//! relies on.

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use stablebench_grid::cells::{Backend, BACKENDS};

/// The colour of a backend's series (fixed per backend, so charts compare at a glance).
pub fn colour(backend: Backend) -> RGBColor {
    match BACKENDS.iter().position(|b| *b == backend) {
        Some(i) => PALETTE[i % PALETTE.len()],
        // The sysrepo baseline (whole datastore): grey, the colour of "the old way".
        None => GREY,
    }
}

/// The series colours, in order.
const PALETTE: [RGBColor; 4] =
    [RGBColor(31, 119, 180), RGBColor(255, 127, 14), RGBColor(44, 160, 44), RGBColor(214, 39, 40)];

/// A baseline's colour.
const GREY: RGBColor = RGBColor(127, 127, 127);

/// Axis labels: `200`, `10k`, `1.5M`, `2B`.
pub(crate) fn compact(v: f64) -> String {
    let (scaled, unit) = match v.abs() {
        a if a >= 1e9 => (v / 1e9, "B"),
        a if a >= 1e6 => (v / 1e6, "M"),
        a if a >= 1e3 => (v / 1e3, "k"),
        _ => (v, ""),
    };
    let text = format!("{scaled:.2}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    format!("{text}{unit}")
}

/// A log axis range around `values` from one power of ten to another (plotters labels a log
/// axis from its first power of ten on), or `fallback` without values.
pub(crate) fn log_range(values: impl Iterator<Item = f64>, fallback: (f64, f64)) -> (f64, f64) {
    let (lo, hi) = values.filter(|v| *v > 0.0).fold((f64::MAX, 0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if hi == 0.0 {
        return fallback;
    }
    // A margin, so that no point sits on the frame.
    (10f64.powf((lo / 1.2).log10().floor()), 10f64.powf((hi * 1.2).log10().ceil()))
}

/// Log axis labels on the 1-2-5 steps only (the other ticks stay unlabelled, as on log paper).
pub(crate) fn log_label(v: f64) -> String {
    if v <= 0.0 {
        return String::new();
    }
    let mantissa = v / 10f64.powf(v.log10().floor());
    if [1.0, 2.0, 5.0].iter().any(|m| (mantissa - m).abs() < 1e-6) {
        compact(v)
    } else {
        String::new()
    }
}

/// Splits a series at missing points, so a size a backend was not measured at leaves a gap.
pub(crate) fn runs<X: Copy>(points: &[(X, Option<f64>)]) -> Vec<Vec<(X, f64)>> {
    let mut out = vec![Vec::new()];
    for (x, y) in points {
        match y {
            Some(y) => out.last_mut().expect("never empty").push((*x, *y)),
            None if out.last().is_some_and(|r| !r.is_empty()) => out.push(Vec::new()),
            None => {}
        }
    }
    out.retain(|r| !r.is_empty());
    out
}

pub(crate) type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;
/// A backend's points: x, and the value where it was measured.
pub(crate) type Series<X> = (Backend, Vec<(X, Option<f64>)>);
pub(crate) type Drawn = Result<(), Box<dyn std::error::Error>>;

/// The SVG `draw` writes into a string (which cannot fail with plotters' estimated font layout).
pub(crate) fn svg(draw: impl FnOnce(&mut String) -> Drawn) -> String {
    let mut svg = String::new();
    draw(&mut svg).expect("drawing to a String with plotters' estimated font layout cannot fail");
    svg
}

pub(crate) fn not_measured(panel: &Area, what: &str) -> Drawn {
    let (w, h) = panel.dim_in_pixel();
    let style = TextStyle::from(("sans-serif", 16).into_font())
        .color(&RGBColor(120, 120, 120))
        .pos(Pos::new(HPos::Center, VPos::Center));
    panel.draw_text(&format!("{what}: not measured yet"), &style, (w as i32 / 2, h as i32 / 2))?;
    Ok(())
}

/// How a backend is drawn, for the shared legend.
#[derive(Clone, Copy)]
pub(crate) enum Mark {
    /// A line with points.
    Line,
    /// A filled bar.
    Bar,
}

/// One legend for all panels, in a strip under the title: a backend's colour means the same
/// everywhere, and no panel's data hides behind a legend box.
pub(crate) fn legend(strip: &Area, mark: Mark, backends: &[Backend]) -> Drawn {
    let keys: Vec<(RGBColor, &str)> = backends.iter().map(|b| (colour(*b), b.name())).collect();
    legend_keys(strip, mark, &keys)
}

/// [`legend`] for series that are not backends: a colour and a name each.
fn legend_keys(strip: &Area, mark: Mark, keys: &[(RGBColor, &str)]) -> Drawn {
    let (w, h) = strip.dim_in_pixel();
    let style = TextStyle::from(("sans-serif", 15).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
    // Wide enough for the longest name (about 8 px a character at 15 px).
    let slot = keys.iter().map(|(_, name)| 44 + 8 * name.len() as i32).max().unwrap_or(0).max(190);
    let mut x = (w as i32 - slot * keys.len() as i32) / 2;
    let y = h as i32 / 2;
    for &(c, name) in keys {
        match mark {
            Mark::Line => {
                strip.draw(&PathElement::new(vec![(x, y), (x + 28, y)], c.stroke_width(2)))?;
                strip.draw(&Circle::new((x + 14, y), 4, c.stroke_width(2)))?;
            }
            Mark::Bar => strip.draw(&Rectangle::new([(x + 6, y - 7), (x + 22, y + 7)], c.filled()))?,
        }
        strip.draw_text(name, &style, (x + 36, y))?;
        x += slot;
    }
    Ok(())
}

/// A line legend in rows of three keys at the top of `root`; returns the area under it.
pub(crate) fn legend_rows<'a>(
    root: &Area<'a>,
    keys: &[(RGBColor, &str)],
) -> Result<Area<'a>, Box<dyn std::error::Error>> {
    let rows = keys.len().div_ceil(3).max(1);
    let (strips, rest) = root.split_vertically(28 * rows as u32);
    for (strip, keys) in strips.split_evenly((rows, 1)).iter().zip(keys.chunks(3)) {
        legend_keys(strip, Mark::Line, keys)?;
    }
    Ok(rest)
}

/// One panel of a line chart, both axes logarithmic: a line with points per backend (a point
/// that was not measured splits its line: a gap, not a guess), "not measured yet" without data.
pub(crate) fn line_panel(
    panel: &Area,
    title: &str,
    x_range: (f64, f64),
    x_desc: &str,
    y_desc: &str,
    series: &[Series<f64>],
) -> Drawn {
    let lines: Vec<Line> = series.iter().map(|(b, points)| (colour(*b), points.clone())).collect();
    line_panel_keys(panel, title, x_range, x_desc, y_desc, &lines)
}

/// A coloured line's points: x, and the value where it was measured.
pub(crate) type Line = (RGBColor, Vec<(f64, Option<f64>)>);

/// A chart on a panel with both axes logarithmic.
pub(crate) type LogLog<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<LogCoord<f64>, LogCoord<f64>>>;

/// A panel's chart with both axes logarithmic, its mesh drawn: 1..9 per decade as key points,
/// each a faint line, labels on 1-2-5 only.
pub(crate) fn log_log_chart<'a, 'b>(
    panel: &'a Area<'b>,
    title: &str,
    x_range: (f64, f64),
    y_range: (f64, f64),
    x_desc: &str,
    y_desc: &str,
) -> Result<LogLog<'a, 'b>, Box<dyn std::error::Error>> {
    let mut chart = ChartBuilder::on(panel)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(42)
        .y_label_area_size(70)
        .build_cartesian_2d((x_range.0..x_range.1).log_scale(), (y_range.0..y_range.1).log_scale())?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .x_labels(40)
        .y_labels(40)
        .max_light_lines(0)
        .bold_line_style(BLACK.mix(0.08))
        .x_label_formatter(&|v| log_label(*v))
        .y_label_formatter(&|v| log_label(*v))
        .label_style(("sans-serif", 12))
        .axis_desc_style(("sans-serif", 14))
        .draw()?;
    Ok(chart)
}

/// [`line_panel`] for series that are not backends.
fn line_panel_keys(
    panel: &Area,
    title: &str,
    x_range: (f64, f64),
    x_desc: &str,
    y_desc: &str,
    series: &[Line],
) -> Drawn {
    let y_range = log_range(series.iter().flat_map(|(_, p)| p.iter().filter_map(|(_, y)| *y)), (1e3, 1e6));
    let mut chart = log_log_chart(panel, title, x_range, y_range, x_desc, y_desc)?;
    if series.iter().all(|(_, p)| p.iter().all(|(_, y)| y.is_none())) {
        not_measured(panel, title)?;
    }
    for (c, points) in series {
        for run in runs(points) {
            chart.draw_series(LineSeries::new(run, c.stroke_width(2)).point_size(4))?;
        }
    }
    Ok(())
}

/// One panel's lines: per series, x and the value where it was measured.
pub type PanelLines = Vec<Vec<(f64, Option<f64>)>>;

/// `docs/chia.svg`: the Chia replay's cost per created coin against coins stored, one line per
/// schema: per 10,000-coin chunk (left; schemas that batch 50,000 coins pay at the commit) and
/// over the replay so far (right), one row per SQLite profile. `lines[row][col]` are the series of
/// each panel, `names` the legend's (colour-indexed like the lines), `rows` the row titles.
pub fn chia(names: &[&str], rows: &[&str; 2], lines: &[[PanelLines; 2]; 2]) -> String {
    svg(|s| draw_chia(names, rows, lines, s))
}

fn draw_chia(names: &[&str], rows: &[&str; 2], lines: &[[PanelLines; 2]; 2], svg: &mut String) -> Drawn {
    // The baseline schema grey, as the sysrepo chart draws its baseline; the others as backends.
    let colours = [GREY, PALETTE[0], PALETTE[1], PALETTE[2], PALETTE[3]];
    {
        let root = SVGBackend::with_string(svg, (1100, 900)).into_drawing_area();
        root.fill(&WHITE)?;
        let root = root
            .titled("Chia coin-store replay: instructions per created coin against coins stored", ("sans-serif", 22))?;
        let (strip, grid) = root.split_vertically(36);
        let keys: Vec<(RGBColor, &str)> = names.iter().enumerate().map(|(i, n)| (colours[i % 5], *n)).collect();
        legend_keys(&strip, Mark::Line, &keys)?;
        let xs = lines.iter().flatten().flatten().flat_map(|l| l.iter().map(|(x, _)| *x));
        let x_range = log_range(xs, (1e4, 1e5));
        let panels = grid.split_evenly((2, 2));
        for (r, row) in rows.iter().enumerate() {
            for (k, what) in ["per 10,000-coin chunk", "over the replay so far"].iter().enumerate() {
                let series: Vec<Line> =
                    lines[r][k].iter().enumerate().map(|(i, l)| (colours[i % 5], l.clone())).collect();
                line_panel_keys(
                    &panels[r * 2 + k],
                    &format!("{row}: {what}"),
                    x_range,
                    "coins stored",
                    "instructions per coin",
                    &series,
                )?;
            }
        }
        root.present()?;
    }
    Ok(())
}

/// Ten distinguishable colours (matplotlib's "tab10"), for charts with more series than backends.
pub(crate) const TEN: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// One benchmark on a [`limits`] chart: its backend, instructions per call, and heap and stable
/// memory growth in MiB.
pub type LimitPoint = (Backend, f64, f64, f64);

/// The smallest growth a [`limits`] chart shows, MiB: a benchmark that grew nothing is drawn here.
const GROWTH_FLOOR_MIB: f64 = 0.01;

/// A results page's benchmarks against the IC's limits: instructions per call (x) against heap
/// growth (left) and stable memory growth (right), both axes logarithmic, a point per benchmark in
/// its backend's colour; the 5 B query and 40 B update limits as vertical lines, the 3 GiB default
/// `wasm_memory_limit` as a horizontal line on the heap panel. The headroom of every benchmark is
/// its distance to those lines.
pub fn limits(title: &str, points: &[LimitPoint]) -> String {
    svg(|s| draw_limits(title, points, s))
}

fn draw_limits(title: &str, points: &[LimitPoint], svg: &mut String) -> Drawn {
    use stablebench_grid::ic::{DEFAULT_WASM_MEMORY_LIMIT_BYTES, QUERY_INSTRUCTION_LIMIT, UPDATE_INSTRUCTION_LIMIT};
    let root = SVGBackend::with_string(svg, (1100, 520)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(title, ("sans-serif", 20))?;
    let mut backends: Vec<Backend> = points.iter().map(|p| p.0).collect();
    backends.sort();
    backends.dedup();
    // Six backends do not fit one row.
    let keys: Vec<(RGBColor, &str)> = backends.iter().map(|b| (colour(*b), b.name())).collect();
    let panels = legend_rows(&root, &keys)?;
    let limits = [(QUERY_INSTRUCTION_LIMIT as f64, "5 B query"), (UPDATE_INSTRUCTION_LIMIT as f64, "40 B update")];
    let x_range = log_range(points.iter().map(|p| p.1).chain(limits.iter().map(|l| l.0)), (1e3, 1e11));
    let heap_limit = (DEFAULT_WASM_MEMORY_LIMIT_BYTES >> 20) as f64;
    let (left, right) = panels.split_horizontally(550);
    for (panel, heap) in [(&left, true), (&right, false)] {
        let growth = |p: &LimitPoint| if heap { p.2 } else { p.3 };
        let top = points.iter().map(growth).chain(heap.then_some(heap_limit));
        let y_range = (GROWTH_FLOOR_MIB, log_range(top, (1.0, 1e3)).1);
        let (panel_title, y_desc) = if heap {
            ("heap growth", "MiB (0 is drawn at the bottom)")
        } else {
            ("stable memory growth", "MiB (0 is drawn at the bottom)")
        };
        let mut chart = log_log_chart(panel, panel_title, x_range, y_range, "instructions per call", y_desc)?;
        let style = |h| TextStyle::from(("sans-serif", 12).into_font()).pos(Pos::new(h, VPos::Top));
        // The query limit's label left of its line, the update limit's right of its own.
        for ((x, name), (h, at)) in limits.into_iter().zip([(HPos::Right, 1.0 / 1.15), (HPos::Left, 1.15)]) {
            chart.draw_series(LineSeries::new([(x, y_range.0), (x, y_range.1)], BLACK.mix(0.6).stroke_width(1)))?;
            chart.draw_series([Text::new(name.to_string(), (x * at, y_range.1 / 1.3), style(h))])?;
        }
        if heap {
            let y = heap_limit;
            chart.draw_series(LineSeries::new([(x_range.0, y), (x_range.1, y)], BLACK.mix(0.6).stroke_width(1)))?;
            chart.draw_series([Text::new(
                "3 GiB wasm_memory_limit".to_string(),
                (x_range.0 * 1.15, y / 1.15),
                style(HPos::Left),
            )])?;
        }
        for p in points {
            let y = growth(p).max(GROWTH_FLOOR_MIB);
            chart.draw_series([Circle::new((p.1, y), 3, colour(p.0).filled())])?;
        }
    }
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_break_at_gaps() {
        let pts = [(1, Some(1.0)), (2, None), (3, Some(3.0)), (4, Some(4.0)), (5, None)];
        assert_eq!(runs(&pts), vec![vec![(1, 1.0)], vec![(3, 3.0), (4, 4.0)]]);
        assert_eq!(compact(200.0), "200");
        assert_eq!(compact(10_000.0), "10k");
        assert_eq!(compact(1_500_000.0), "1.5M");
        assert_eq!(log_label(2_000.0), "2k");
        assert_eq!(log_label(3_000.0), "");
        assert_eq!(log_range([200.0, 200_000.0].into_iter(), (1.0, 2.0)), (100.0, 1_000_000.0));
    }
}
