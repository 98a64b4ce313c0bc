//! The results site, `docs/site/`: static HTML generated from the same data as the markdown
//! reports, browsable from a clone or any static host (no server, no CDN: a stylesheet and a
//! few lines of JavaScript for the filters are written next to the pages).
//!
//! - `index.html`: the answer first (the recommended profile, the backend per access pattern, the
//!   IC DbWeight), then the workload pages;
//! - one page per report (`docs/*.md` rendered, with its plotters charts), each followed by the
//!   table of its benchmarks;
//! - `benchmarks.html`: every benchmark of the grid with its numbers, cycles and USD, the limits
//!   it fits, its flamegraph where one is committed, filterable by workload, backend, size and
//!   settings.
//!
//! [`compare`] writes the page of a run against the committed results from canbench's CSV
//! (`--csv`), for a CI artifact. `scripts/site-check.sh` opens the pages in headless Chromium.

use std::fmt::Write as _;

use pulldown_cmark::{CowStr, Event, HeadingLevel, Options, Parser, Tag, TagEnd};
use stablebench_grid::cells::{size_label, Cell};
use stablebench_grid::ic::{
    prices, DEFAULT_WASM_MEMORY_LIMIT_BYTES, QUERY_INSTRUCTION_LIMIT, UPDATE_INSTRUCTION_LIMIT,
};

use super::results::{Measurement, Results};
use super::{grouped, human, mib, pages_mib};

/// A file of the site: its name under `docs/site/` and its contents.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct File {
    /// File name, e.g. `index.html`.
    pub name: String,
    /// Contents.
    pub text: String,
}

/// A markdown report shown as one page of the site.
pub struct Doc<'a> {
    /// The page's file name under `docs/site/` (`kv.html`).
    pub page: &'a str,
    /// The report's file name under `docs/` (`kv.md`): links to it from other reports lead here.
    pub source: &'a str,
    /// The page's title, also its entry in the navigation.
    pub title: &'a str,
    /// One line for the index.
    pub summary: &'a str,
    /// The report's markdown.
    pub markdown: &'a str,
    /// The benchmarks listed under it.
    pub cells: fn(&Cell) -> bool,
}

/// The figures the site shows: each benchmark under both models (mainnet's with the pages it
/// touched).
#[derive(Clone, Copy, Debug)]
pub struct Figures<'a> {
    /// canbench's results (`canbench_results.yml` and its `vfs/` twin).
    pub canbench: &'a Results,
    /// Mainnet's (`mainnet_results.yml` and its twin), with the 64 KiB pages each touched.
    pub ic: &'a Results,
}

/// The site's pages: `answer` (markdown, the index's first section), one page per `docs` entry,
/// and `benchmarks.html`, from `figures` (measured by `command` on `date`). `flamegraphs` are the
/// benchmarks with a committed flamegraph (`scripts/site-flamegraphs.sh` writes
/// `docs/site/flamegraphs/<benchmark>.svg`), linked from their rows.
pub fn generate(
    figures: Figures<'_>,
    answer: &str,
    docs: &[Doc],
    flamegraphs: &[String],
    command: &str,
    date: &str,
) -> Vec<File> {
    let nav = nav(docs);
    let footer = footer(command, date);
    let mut files = Vec::new();
    let body = index_body(figures.canbench, answer, docs, command, date);
    files.push(File {
        name: "index.html".into(),
        text: page("stablebench results", &nav, &body, &footer, Assets::Linked),
    });
    for d in docs {
        let (body, chart) = doc_body(figures, d, docs, flamegraphs);
        files.extend(chart);
        files.push(File { name: d.page.into(), text: page(d.title, &nav, &body, &footer, Assets::Linked) });
    }
    let mut body = String::from("<h1>All benchmarks</h1>\n");
    body += "<p>One row per cell of the grid (workload, operation, size, backend, settings). \
             <em>Per call</em> is the instructions of one timed iteration (the total over the \
             iterations the benchmark repeats, divided by them), on mainnet and as canbench \
             reports it; the limits, cycles and USD are those of one such call on mainnet as an \
             update message. <em>Pages</em>: the 64 KiB pages one call accessed / wrote, \
             which mainnet charges and canbench does not see.</p>\n";
    body += &benchmark_table(figures, |_| true, flamegraphs, "benchmark-table");
    files.push(File {
        name: "benchmarks.html".into(),
        text: page("All benchmarks", &nav, &body, &footer, Assets::Linked),
    });
    files.push(File { name: "style.css".into(), text: STYLE.into() });
    files.push(File { name: "filter.js".into(), text: FILTER_JS.into() });
    files
}

/// The index's body: how the figures were measured, `answer`, and a link to every page.
fn index_body(results: &Results, answer: &str, docs: &[Doc], command: &str, date: &str) -> String {
    let mut body = String::from("<h1>stablebench: databases inside IC canisters, measured</h1>\n");
    let _ = writeln!(
        body,
        "<p class=\"lead\">Every benchmark is measured by <code>{command}</code> on {date} twice: as \
         mainnet prices it since the IC's memory tracker ({access} instructions per 64 KiB page a \
         message accesses, {write} more per page it writes; <a href=\"mainnet.html\">what changes</a>), \
         and as canbench reports it on PocketIC 13, which predates the tracker. Tables lead with \
         mainnet's figure; cycles, USD and the limits follow from it, at the prices in the footer.</p>",
        access = grouped(stablebench_grid::ic::page_fees::ACCESS),
        write = grouped(stablebench_grid::ic::page_fees::WRITE),
    );
    body += &markdown_to_html(answer, docs);
    body += "<h2 id=\"workloads\">The workloads</h2>\n<ul class=\"pages\">\n";
    for d in docs {
        let n = results.iter().filter(|(c, _)| (d.cells)(c)).count();
        let count = if n == 0 { String::new() } else { format!(" ({} benchmarks)", grouped(n as u64)) };
        let _ = writeln!(body, "<li><a href=\"{}\">{}</a>: {}{count}</li>", d.page, esc(d.title), esc(d.summary));
    }
    let _ = writeln!(
        body,
        "<li><a href=\"benchmarks.html\">All benchmarks</a>: every cell of the grid, filterable ({} benchmarks)</li>\n</ul>",
        grouped(results.iter().count() as u64)
    );
    body += "<p>To see what a run of yours moved, write canbench's CSV (<code>canbench --csv</code>, or \
             <code>stablebench-runner bench --csv</code>) and run <code>scripts/site-compare.sh \
             canbench_results.csv</code>: it writes <code>target/site/compare.html</code>.</p>\n";
    body
}

/// A report's page body (its markdown, its benchmarks against the limits, its benchmark table)
/// and its limits chart.
/// A report's page body and its limits chart; a report no benchmark belongs to (its figures are
/// per-call measurements, not cells of the grid) gets neither the chart nor the table.
fn doc_body(figures: Figures<'_>, d: &Doc, docs: &[Doc], flamegraphs: &[String]) -> (String, Option<File>) {
    let results = figures.canbench;
    let mut body = markdown_to_html(d.markdown, docs);
    if !results.iter().any(|(c, _)| (d.cells)(c)) {
        return (body, None);
    }
    let _ = writeln!(body, "<h2 id=\"limits\">Against the limits</h2>");
    let chart = format!("{}.limits.svg", d.page.trim_end_matches(".html"));
    let _ = writeln!(
        body,
        "<p>Every benchmark of this page: instructions per call against heap and stable memory growth, \
         with the 5 B query and 40 B update limits and the 3 GiB default <code>wasm_memory_limit</code>; \
         a point's distance to a line is its headroom.</p>\n<p><img src=\"{chart}\" alt=\"{} against the limits\"></p>",
        esc(d.title)
    );
    let points: Vec<super::chart::LimitPoint> = results
        .iter()
        .filter(|(c, _)| (d.cells)(c))
        .map(|(c, r)| {
            let m = &r.total;
            (c.backend, per_call(m) as f64, pages_mib(m.heap_increase), pages_mib(m.stable_memory_increase))
        })
        .collect();
    let chart = File {
        name: chart,
        text: super::chart::limits(&format!("{}: every benchmark against the limits", d.title), &points),
    };
    let _ = writeln!(body, "<h2 id=\"benchmarks\">The benchmarks of this page</h2>");
    body += &benchmark_table(figures, d.cells, flamegraphs, "benchmark-table");
    (body, Some(chart))
}

fn nav(docs: &[Doc]) -> String {
    let mut n = String::from("<nav><a href=\"index.html\"><strong>stablebench</strong></a>");
    for d in docs {
        let _ = write!(n, " <a href=\"{}\">{}</a>", d.page, esc(d.title));
    }
    n += " <a href=\"benchmarks.html\">All benchmarks</a></nav>";
    n
}

fn footer(command: &str, date: &str) -> String {
    format!(
        "<footer>Generated by <code>scripts/report.sh</code> from <code>canbench_results.yml</code> and \
         <code>vfs/canbench_results.yml</code> (results of {date}, <code>{command}</code>). Cycles: an update \
         message on a {nodes}-node subnet, {base} cycles plus {per} per instruction (fees read {fees}); USD at \
         ${usd} per trillion cycles ({rate}). Limits: {query} instructions per query, {update} per update, \
         {heap} MiB default <code>wasm_memory_limit</code>.</footer>",
        nodes = prices::SUBNET_NODES,
        base = grouped(prices::UPDATE_BASE_CYCLES),
        per = prices::CYCLES_PER_INSTRUCTION,
        fees = prices::FEES_READ,
        usd = prices::USD_PER_TRILLION_CYCLES,
        rate = prices::RATE_DATE,
        query = human(QUERY_INSTRUCTION_LIMIT),
        update = human(UPDATE_INSTRUCTION_LIMIT),
        heap = grouped(DEFAULT_WASM_MEMORY_LIMIT_BYTES >> 20),
    )
}

/// How a page gets its stylesheet and script.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Assets {
    /// A page of the site: `style.css` and `filter.js` next to it.
    Linked,
    /// A file on its own (the compare page, a CI artifact): the stylesheet inline, no script.
    Inline,
}

fn page(title: &str, nav: &str, body: &str, footer: &str, assets: Assets) -> String {
    let (style, script) = match assets {
        Assets::Linked => {
            ("<link rel=\"stylesheet\" href=\"style.css\">".to_string(), "<script src=\"filter.js\"></script>\n")
        }
        Assets::Inline => (format!("<style>\n{STYLE}</style>"), ""),
    };
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{} · stablebench</title>\n{style}\n</head>\n<body>\n\
         <header>{nav}</header>\n<main>\n{body}</main>\n{footer}\n{script}</body>\n</html>\n",
        esc(title)
    )
}

/// The table of the benchmarks `pick` selects, with a filter form above it (`filter.js`).
fn benchmark_table(figures: Figures<'_>, pick: fn(&Cell) -> bool, flamegraphs: &[String], id: &str) -> String {
    let Figures { canbench: results, ic } = figures;
    let rows: Vec<(&Cell, &Measurement)> =
        results.iter().filter(|(c, _)| pick(c)).map(|(c, r)| (c, &r.total)).collect();
    let mut t = filters(&rows, id);
    let _ = writeln!(
        t,
        "<table class=\"benchmarks\" id=\"{id}\">\n<thead><tr><th>benchmark</th><th>workload</th><th>backend</th>\
         <th>size</th><th>settings</th><th class=\"n\">mainnet per call</th><th class=\"n\">canbench per call</th>\
         <th class=\"n\">pages per call</th><th class=\"n\">mainnet, all calls</th><th class=\"n\">calls</th><th class=\"n\">heap MiB</th><th class=\"n\">stable MiB</th>\
         <th class=\"n\">cycles per call</th><th class=\"n\">USD per call</th><th>fits</th><th>flamegraph</th></tr></thead>\n<tbody>"
    );
    for (c, m) in rows {
        t += &benchmark_row(c, m, ic, flamegraphs);
    }
    t += "</tbody>\n</table>\n";
    t
}

/// The filter form above a benchmark table: a choice per facet, among the values `rows` have.
fn filters(rows: &[(&Cell, &Measurement)], id: &str) -> String {
    let mut choices: [Vec<String>; 4] = Default::default();
    for (c, _) in rows {
        for (i, v) in facets(c).into_iter().enumerate() {
            if !choices[i].contains(&v) {
                choices[i].push(v);
            }
        }
    }
    let mut t = format!("<form class=\"filters\" data-table=\"{id}\">\n");
    for (i, name) in FACETS.iter().enumerate() {
        let _ = write!(t, "<label>{name} <select name=\"{name}\"><option value=\"\">all</option>");
        for v in &choices[i] {
            let _ = write!(t, "<option>{}</option>", esc(v));
        }
        t += "</select></label>\n";
    }
    t += "<label>name <input type=\"search\" name=\"name\" placeholder=\"part of a name\"></label>\n<output></output>\n</form>\n";
    t
}

/// One benchmark's row: canbench's figure `m` and mainnet's from `ic`, with what follows from
/// mainnet's (the limits, cycles and USD).
fn benchmark_row(c: &Cell, m: &Measurement, ic: &Results, flamegraphs: &[String]) -> String {
    let mut t = String::new();
    let [workload, backend, size, settings] = facets(c);
    let calls = m.calls.max(1);
    let canbench_per_call = per_call(m);
    // Mainnet's figure where it was measured (the limits, cycles and USD follow from it).
    let mainnet = ic.get(c).map(|r| per_call(&r.total));
    let per_call = mainnet.unwrap_or(canbench_per_call);
    let cycles = prices::update_cycles(per_call);
    let heap_bytes = m.heap_increase * stablebench_grid::ic::WASM_PAGE_BYTES;
    let fits = match (per_call <= QUERY_INSTRUCTION_LIMIT, per_call <= UPDATE_INSTRUCTION_LIMIT) {
        (true, _) => "query, update",
        (false, true) => "update",
        (false, false) => "neither",
    };
    let fits = if heap_bytes > DEFAULT_WASM_MEMORY_LIMIT_BYTES {
        format!("{fits}; heap over the limit")
    } else {
        fits.to_string()
    };
    let name = c.name();
    let pages = ic.get(c).and_then(|r| r.pages).map_or("–".to_string(), |p| {
        let per = |v: u64| match calls {
            1 => grouped(v),
            n => format!("{:.1}", v as f64 / n as f64),
        };
        format!("{} / {}", per(p.accessed()), per(p.written()))
    });
    let total = ic.get(c).map_or(m.instructions, |r| r.total.instructions);
    let flame = if flamegraphs.contains(&name) {
        format!("<a href=\"flamegraphs/{name}.svg\">step</a>")
    } else {
        String::new()
    };
    let _ = writeln!(
        t,
        "<tr data-workload=\"{w}\" data-backend=\"{b}\" data-size=\"{s}\" data-settings=\"{p}\" data-name=\"{name}\">\
         <td><code>{name}</code></td><td>{w}</td><td>{b}</td><td>{s}</td><td>{p}</td>\
         <td class=\"n\">{mainnet}</td><td class=\"n\">{per}</td><td class=\"n\">{pages}</td>\
         <td class=\"n\" title=\"{exact}\">{total}</td><td class=\"n\">{calls}</td>\
         <td class=\"n\">{heap}</td><td class=\"n\">{stable}</td><td class=\"n\">{cycles}</td>\
         <td class=\"n\">{usd:.6}</td><td>{fits}</td><td>{flame}</td></tr>",
        w = esc(&workload),
        b = esc(&backend),
        s = esc(&size),
        p = esc(&settings),
        exact = grouped(total),
        total = human(total),
        calls = grouped(calls),
        mainnet = mainnet.map_or("–".into(), human),
        per = human(canbench_per_call),
        heap = mib(m.heap_increase),
        stable = mib(m.stable_memory_increase),
        cycles = grouped(cycles),
        usd = prices::usd(cycles),
    );
    t
}

/// The instructions of one timed iteration: the total over the iterations, divided by them.
fn per_call(m: &Measurement) -> u64 {
    m.instructions / m.calls.max(1)
}

/// The filter names, in the order of [`facets`].
const FACETS: [&str; 4] = ["workload", "backend", "size", "settings"];

/// A cell's workload, backend, size and settings as the filters show them.
fn facets(c: &Cell) -> [String; 4] {
    [
        c.workload().name().to_string(),
        c.backend.name().to_string(),
        size_label(c.size),
        c.profile.map_or("(none)".to_string(), |p| p.name.to_string()),
    ]
}

/// Markdown (CommonMark with tables) as HTML: headings get GitHub's anchors, links to the reports
/// lead to their pages, and every other relative link or image to the file under `docs/`.
pub fn markdown_to_html(markdown: &str, docs: &[Doc]) -> String {
    let mut events: Vec<Event> = Vec::new();
    let mut heading: Option<(HeadingLevel, Vec<Event>)> = None;
    let mut used: Vec<String> = Vec::new();
    for event in Parser::new_ext(markdown, Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH) {
        let event = match event {
            Event::Start(Tag::Link { link_type, dest_url, title, id }) => {
                Event::Start(Tag::Link { link_type, dest_url: relink(dest_url, docs), title, id })
            }
            Event::Start(Tag::Image { link_type, dest_url, title, id }) => {
                Event::Start(Tag::Image { link_type, dest_url: relink(dest_url, docs), title, id })
            }
            e => e,
        };
        match (&mut heading, event) {
            (None, Event::Start(Tag::Heading { level, .. })) => heading = Some((level, Vec::new())),
            (Some((level, inner)), Event::End(TagEnd::Heading(_))) => {
                let text: String = inner
                    .iter()
                    .filter_map(|e| match e {
                        Event::Text(t) | Event::Code(t) => Some(t.as_ref()),
                        _ => None,
                    })
                    .collect();
                let mut slug = slug(&text);
                let base = slug.clone();
                let mut n = 0;
                while used.contains(&slug) {
                    n += 1;
                    slug = format!("{base}-{n}");
                }
                used.push(slug.clone());
                let level = *level;
                events.push(Event::Start(Tag::Heading {
                    level,
                    id: Some(CowStr::from(slug)),
                    classes: Vec::new(),
                    attrs: Vec::new(),
                }));
                events.append(inner);
                events.push(Event::End(TagEnd::Heading(level)));
                heading = None;
            }
            (Some((_, inner)), e) => inner.push(e),
            (None, e) => events.push(e),
        }
    }
    let mut html = String::new();
    pulldown_cmark::html::push_html(&mut html, events.into_iter());
    html
}

/// GitHub's heading anchor: lower case, spaces to `-`, only letters, digits, `-` and `_` kept.
pub(crate) fn slug(text: &str) -> String {
    text.trim()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c.to_ascii_lowercase()),
            _ => None,
        })
        .collect()
}

/// A report's link target as seen from `docs/site/`.
fn relink<'a>(url: CowStr<'a>, docs: &[Doc]) -> CowStr<'a> {
    if url.starts_with('#') || url.contains("://") || url.starts_with('/') || url.starts_with("mailto:") {
        return url;
    }
    // The README's links into docs/ (the index quotes the README's tables) are links to reports.
    let url = match url.strip_prefix("docs/") {
        Some(rest) => CowStr::from(rest.to_string()),
        None => url,
    };
    let (path, anchor) = url.split_once('#').map_or((url.as_ref(), None), |(p, a)| (p, Some(a)));
    if let Some(d) = docs.iter().find(|d| d.source == path) {
        return CowStr::from(match anchor {
            Some(a) => format!("{}#{a}", d.page),
            None => d.page.to_string(),
        });
    }
    CowStr::from(format!("../{url}"))
}

/// Text as HTML text or attribute value.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// One row of canbench's CSV (`--csv`): a benchmark's total or one of its scopes.
#[derive(Clone, Debug, PartialEq)]
pub struct CsvRow {
    /// `new` for a benchmark without a committed result, else empty.
    pub status: String,
    /// `<benchmark>` or `<benchmark>::<scope>`.
    pub name: String,
    /// Instructions of this run.
    pub instructions: u64,
    /// Change against the committed result, percent (`None` without one).
    pub instructions_pct: Option<f64>,
    /// Heap growth, pages, and its change in percent.
    pub heap: (u64, Option<f64>),
    /// Stable memory growth, pages, and its change in percent.
    pub stable: (u64, Option<f64>),
}

/// Reads canbench 0.7's CSV (the columns `status, name, scope_calls, scope_calls Δ, scope_calls
/// Δ%, instructions, instructions Δ, instructions Δ%, heap_increase, ..., stable_memory_increase
/// Δ%`).
pub fn parse_csv(text: &str) -> Result<Vec<CsvRow>, String> {
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().ok_or("empty CSV")?.split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).ok_or(format!("no column {name:?} in the CSV"));
    let (status, name, ins, ins_pct, heap, heap_pct, stable, stable_pct) = (
        col("status")?,
        col("name")?,
        col("instructions")?,
        col("instructions Δ%")?,
        col("heap_increase")?,
        col("heap_increase Δ%")?,
        col("stable_memory_increase")?,
        col("stable_memory_increase Δ%")?,
    );
    let mut rows = Vec::new();
    for (i, line) in lines.enumerate().filter(|(_, l)| !l.is_empty()) {
        let f: Vec<&str> = line.split(',').collect();
        let get = |c: usize| f.get(c).copied().ok_or(format!("line {}: too few columns", i + 2));
        let num = |c: usize| -> Result<u64, String> {
            get(c)?.parse().map_err(|e| format!("line {}: {:?}: {e}", i + 2, f.get(c)))
        };
        let pct = |c: usize| -> Result<Option<f64>, String> {
            let v = get(c)?;
            if v.is_empty() {
                return Ok(None);
            }
            v.trim_end_matches('%').parse().map(Some).map_err(|e| format!("line {}: {v:?}: {e}", i + 2))
        };
        rows.push(CsvRow {
            status: get(status)?.to_string(),
            name: get(name)?.to_string(),
            instructions: num(ins)?,
            instructions_pct: pct(ins_pct)?,
            heap: (num(heap)?, pct(heap_pct)?),
            stable: (num(stable)?, pct(stable_pct)?),
        });
    }
    Ok(rows)
}

/// The page of a run against the committed results: every benchmark total whose instructions,
/// heap or stable memory moved by `noise_threshold` percent or more (canbench's default is 2),
/// largest change first, then the counts. Scopes are left out, as canbench's table does.
pub fn compare(rows: &[CsvRow], noise_threshold: f64, source: &str) -> String {
    let totals: Vec<&CsvRow> = rows.iter().filter(|r| !r.name.contains("::")).collect();
    let moved = |p: Option<f64>| p.is_some_and(|p| p.abs() >= noise_threshold);
    let mut changed: Vec<&CsvRow> =
        totals.iter().copied().filter(|r| moved(r.instructions_pct) || moved(r.heap.1) || moved(r.stable.1)).collect();
    changed.sort_by(|a, b| {
        let key = |r: &CsvRow| r.instructions_pct.unwrap_or(0.0).abs();
        key(b).total_cmp(&key(a)).then_with(|| a.name.cmp(&b.name))
    });
    let new: Vec<&CsvRow> = totals.iter().copied().filter(|r| r.status == "new").collect();
    let (better, worse) = (
        changed.iter().filter(|r| r.instructions_pct.is_some_and(|p| p <= -noise_threshold)).count(),
        changed.iter().filter(|r| r.instructions_pct.is_some_and(|p| p >= noise_threshold)).count(),
    );
    let mut body = String::from("<h1>This run against the committed results</h1>\n");
    let _ = writeln!(
        body,
        "<p class=\"lead\">{} benchmarks in <code>{}</code>: {} moved by {noise_threshold}% or more \
         ({better} fewer instructions, {worse} more, the rest in heap or stable memory only), {} new.</p>",
        totals.len(),
        esc(source),
        changed.len(),
        new.len()
    );
    let pct = |p: Option<f64>| match p {
        None => ("", "—".to_string()),
        Some(p) if p >= noise_threshold => ("worse", format!("{p:+.2}%")),
        Some(p) if p <= -noise_threshold => ("better", format!("{p:+.2}%")),
        Some(p) => ("", format!("{p:+.2}%")),
    };
    if changed.is_empty() {
        body += "<p>Nothing moved beyond the noise threshold.</p>\n";
    } else {
        body += "<table class=\"benchmarks\" id=\"changes\">\n<thead><tr><th>benchmark</th><th class=\"n\">instructions</th>\
                 <th class=\"n\">change</th><th class=\"n\">heap pages</th><th class=\"n\">change</th>\
                 <th class=\"n\">stable pages</th><th class=\"n\">change</th></tr></thead>\n<tbody>\n";
        for r in &changed {
            let (ci, ti) = pct(r.instructions_pct);
            let (ch, th) = pct(r.heap.1);
            let (cs, ts) = pct(r.stable.1);
            let _ = writeln!(
                body,
                "<tr><td><code>{}</code></td><td class=\"n\">{}</td><td class=\"n {ci}\">{ti}</td>\
                 <td class=\"n\">{}</td><td class=\"n {ch}\">{th}</td><td class=\"n\">{}</td><td class=\"n {cs}\">{ts}</td></tr>",
                esc(&r.name),
                grouped(r.instructions),
                grouped(r.heap.0),
                grouped(r.stable.0)
            );
        }
        body += "</tbody>\n</table>\n";
    }
    if !new.is_empty() {
        body += "<h2 id=\"new\">New benchmarks</h2>\n<ul>\n";
        for r in &new {
            let _ = writeln!(body, "<li><code>{}</code>: {} instructions</li>", esc(&r.name), grouped(r.instructions));
        }
        body += "</ul>\n";
    }
    let nav = "<nav><strong>stablebench</strong>: a run compared (canbench's CSV)</nav>";
    let footer = format!(
        "<footer>From <code>{}</code>, the CSV canbench (or <code>stablebench-runner bench --csv</code>) writes; \
         noise threshold {noise_threshold}% (canbench's <code>--noise-threshold</code>).</footer>",
        esc(source)
    );
    page("A run compared", nav, &body, &footer, Assets::Inline)
}

/// The site's stylesheet.
const STYLE: &str = "body { font: 15px/1.5 system-ui, sans-serif; margin: 0; color: #1b1b1b; }
header nav { background: #12263a; padding: .6em 1em; }
header nav a { color: #e8eef5; margin-right: 1em; text-decoration: none; }
main { max-width: 1200px; margin: 0 auto; padding: 1em; }
footer { max-width: 1200px; margin: 2em auto; padding: 1em; color: #555; font-size: 13px; border-top: 1px solid #ddd; }
.lead { font-size: 17px; }
table { border-collapse: collapse; margin: 1em 0; font-size: 13px; }
th, td { border: 1px solid #ddd; padding: 3px 6px; vertical-align: top; }
th { background: #f3f5f7; position: sticky; top: 0; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; }
td.better { background: #e3f4e1; }
td.worse { background: #fbe3e1; }
img { max-width: 100%; height: auto; }
code { font-size: 12px; }
pre { background: #f6f8fa; padding: .8em; overflow-x: auto; }
form.filters { display: flex; flex-wrap: wrap; gap: .8em; align-items: center; background: #f3f5f7; padding: .5em; }
form.filters output { color: #555; }
";

/// The filters: each `form.filters` hides the rows of its table whose data attributes differ
/// from a chosen value or whose name lacks the searched text. No library.
const FILTER_JS: &str = "// stablebench site: filters the benchmark tables (no server, no library).
document.querySelectorAll('form.filters').forEach(function (form) {
  var table = document.getElementById(form.dataset.table);
  var rows = Array.prototype.slice.call(table.tBodies[0].rows);
  function apply() {
    var want = {};
    form.querySelectorAll('select').forEach(function (s) { if (s.value) { want[s.name] = s.value; } });
    var text = form.querySelector('input[name=name]').value.trim().toLowerCase();
    var shown = 0;
    rows.forEach(function (r) {
      var ok = Object.keys(want).every(function (k) { return r.dataset[k] === want[k]; })
        && (text === '' || r.dataset.name.indexOf(text) >= 0);
      r.hidden = !ok;
      if (ok) { shown += 1; }
    });
    form.querySelector('output').textContent = shown + ' of ' + rows.length + ' benchmarks';
  }
  form.addEventListener('input', apply);
  form.addEventListener('submit', function (e) { e.preventDefault(); });
  apply();
});
";

#[cfg(test)]
mod tests {
    use super::*;

    const CSV: &str = "status,name,scope_calls,scope_calls Δ,scope_calls Δ%,instructions,instructions Δ,instructions Δ%,heap_increase,heap_increase Δ,heap_increase Δ%,stable_memory_increase,stable_memory_increase Δ,stable_memory_increase Δ%
,a,,,,1000,100,11.11%,2,0,0.00%,0,0,0.00%
,a::setup,3,0,0.00%,500,400,400.00%,0,0,0.00%,0,0,0.00%
,b,,,,1000,-1,-0.10%,1,0,0.00%,0,0,0.00%
,c,,,,900,-100,-10.00%,1,1,100.00%,0,0,0.00%
new,d,,,,5,,,0,,,0,,
";

    #[test]
    fn the_comparison_lists_what_moved_beyond_the_noise_largest_first_and_skips_scopes() {
        let rows = parse_csv(CSV).unwrap();
        assert_eq!(rows.len(), 5);
        assert_eq!(rows[0].instructions_pct, Some(11.11));
        assert_eq!(rows[4].instructions_pct, None);
        let html = compare(&rows, 2.0, "canbench_results.csv");
        assert!(html.contains("4 benchmarks in <code>canbench_results.csv</code>: 2 moved by 2% or more (1 fewer instructions, 1 more"), "{html}");
        let (a, c) = (html.find("<code>a</code>").unwrap(), html.find("<code>c</code>").unwrap());
        assert!(a < c, "largest change first");
        assert!(!html.contains("<code>b</code></td>"), "within the noise");
        assert!(!html.contains("a::setup"), "scopes are left out");
        assert!(html.contains("class=\"n worse\">+11.11%") && html.contains("class=\"n better\">-10.00%"));
        assert!(html.contains("<li><code>d</code>: 5 instructions</li>"));
        assert!(!html.contains("src=") && !html.contains("href=\"style.css\""), "one file on its own");
    }

    #[test]
    fn report_links_lead_to_their_pages_and_other_files_to_docs() {
        let docs = [Doc { page: "kv.html", source: "kv.md", title: "kv", summary: "", markdown: "", cells: |_| true }];
        let html =
            markdown_to_html("# A b\n\n[x](kv.md#top) [y](results.svg) [z](#a-b) [w](https://x.org)\n\n# A b\n", &docs);
        assert!(html.contains("<h1 id=\"a-b\">A b</h1>") && html.contains("<h1 id=\"a-b-1\">"), "{html}");
        assert!(html.contains("href=\"kv.html#top\"") && html.contains("href=\"../results.svg\""), "{html}");
        assert!(html.contains("href=\"#a-b\"") && html.contains("href=\"https://x.org\""), "{html}");
    }
}
