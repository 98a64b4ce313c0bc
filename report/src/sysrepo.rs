//! The sysrepo report: from the grid's sysrepo cells to `docs/sysrepo.md` (the tables of
//! sysrepo's `DB_PLG_PERF.md`, per size and backend, in instructions), its chart and the README's
//! summary. Every number and every sentence is computed from the results; a cell that was not
//! measured leaves "–".

use std::fmt::Write;

use stablebench_grid::cells::size_label;
use stablebench_grid::cells::{Backend, Op, SYSREPO_BACKENDS};
use stablebench_grid::grouped;
use stablebench_grid::ic::{QUERY_INSTRUCTION_LIMIT, UPDATE_INSTRUCTION_LIMIT};
use stablebench_grid::sysrepo::{Test, CHANGE_SUBS_MAX_SIZE, MAX_TRY_SCOPE, SIZES, TESTS, TRIES};

use plotters::prelude::*;

use super::human;
use super::results::Results;
use crate::chart::{legend, line_panel, log_range, Drawn, Mark, Series};

/// The backend every comparison is against: the whole datastore (`blob`), as sysrepo's document
/// compares with its first plugin, the JSON DS file.
pub const BASELINE: Backend = SYSREPO_BACKENDS[0];

/// The chart's panels: a full load, a key lookup, a bulk create, a single-item edit.
pub const CHART_PANELS: [(Test, bool); 4] =
    [(Test::GetTree, false), (Test::GetTreeHash, false), (Test::CreateAllItems, false), (Test::ModifyAnItem, true)];

/// sysrepo's green and red (`DB_PLG_PERF.md` writes `$\color{#08872B}…$` and `$\color{#FF474C}…$`).
const GREEN: &str = "#08872B";
const RED: &str = "#FF474C";

/// The mean instructions per try of a sysrepo cell (its total over its calls), if measured.
pub fn mean_per_try(results: &Results, test: Test, fresh: bool, size: u64, backend: Backend) -> Option<f64> {
    let (_, record) = results.find(Op::Sysrepo { test, fresh }, size, backend)?;
    (record.total.calls > 0).then(|| record.total.instructions as f64 / record.total.calls as f64)
}

/// The most expensive try of a sysrepo cell (its `max_try` scope), if measured.
pub fn max_try(results: &Results, test: Test, fresh: bool, size: u64, backend: Backend) -> Option<u64> {
    let (_, record) = results.find(Op::Sysrepo { test, fresh }, size, backend)?;
    record.scope(MAX_TRY_SCOPE).map(|m| m.instructions)
}

/// sysrepo's comparison: `baseline / value` in green when faster, `value / baseline` in red when
/// slower, always at least 1, "%.3f x"; within 0.05% "1.000 x" uncoloured.
pub fn comparison(value: f64, baseline: f64) -> String {
    if value <= 0.0 || baseline <= 0.0 {
        return "–".into();
    }
    let r = value / baseline;
    if (r - 1.0).abs() < 0.0005 {
        "1.000 x".into()
    } else if r < 1.0 {
        format!("$\\color{{{GREEN}}}\\text{{{:.3} x}}$", 1.0 / r)
    } else {
        format!("$\\color{{{RED}}}\\text{{{r:.3} x}}$")
    }
}

/// The limit a try must fit in production: a query's for the reads, an update's for the rest.
fn limit(test: Test) -> (u64, &'static str) {
    if test.reads() {
        (QUERY_INSTRUCTION_LIMIT, "query")
    } else {
        (UPDATE_INSTRUCTION_LIMIT, "update")
    }
}

fn row_title(test: Test, fresh: bool) -> String {
    if fresh {
        format!("{} (fresh)", test.title())
    } else {
        test.title().to_string()
    }
}

/// Every row of a table: the tests in the document's order, each quirky one followed by its
/// fresh variant.
fn rows() -> Vec<(Test, bool)> {
    TESTS.iter().flat_map(|&t| std::iter::once((t, false)).chain(t.has_quirk().then_some((t, true)))).collect()
}

/// The generated documents.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SysrepoReport {
    /// `docs/sysrepo.md`.
    pub markdown: String,
    /// `docs/sysrepo.svg`.
    pub svg: String,
    /// The README's summary (between `<!-- sysrepo-summary:begin/end -->`).
    pub readme: String,
}

/// Generates the sysrepo report; `command` is how the results were produced and `date` when.
pub fn generate(results: &Results, command: &str, date: &str) -> SysrepoReport {
    let findings = findings(results);
    SysrepoReport {
        markdown: document(results, command, date, &findings),
        svg: chart(results, &CHART_PANELS),
        readme: readme(&findings),
    }
}

/// The smallest and largest ratio baseline/backend over `tests` at `size` (>1: fewer
/// instructions than the whole datastore).
fn speedups(results: &Results, tests: &[(Test, bool)], size: u64, backend: Backend) -> Option<(f64, f64)> {
    let ratios: Vec<f64> = tests
        .iter()
        .filter_map(|&(t, f)| {
            Some(mean_per_try(results, t, f, size, BASELINE)? / mean_per_try(results, t, f, size, backend)?)
        })
        .collect();
    if ratios.len() < tests.len() {
        return None;
    }
    Some((ratios.iter().copied().fold(f64::MAX, f64::min), ratios.iter().copied().fold(0f64, f64::max)))
}

/// `12.3x fewer` / `2.5x more`, or a range of them.
fn span((lo, hi): (f64, f64)) -> String {
    let one = |r: f64| if r >= 1.0 { format!("{r:.1}x fewer") } else { format!("{:.1}x more", 1.0 / r) };
    if (hi / lo - 1.0).abs() < 0.05 {
        one(lo)
    } else if lo >= 1.0 || hi < 1.0 {
        let (a, b) = if lo >= 1.0 { (lo, hi) } else { (1.0 / hi, 1.0 / lo) };
        format!("{a:.1}x to {b:.1}x {}", if lo >= 1.0 { "fewer" } else { "more" })
    } else {
        format!("from {} to {}", one(lo), one(hi))
    }
}

const SINGLE_EDITS: [(Test, bool); 4] = [
    (Test::CreateAnItem, false),
    (Test::ModifyAnItem, true),
    (Test::RemoveAnItem, true),
    (Test::CreateAnItemOper, false),
];
const BULK: [(Test, bool); 3] =
    [(Test::CreateBatch, false), (Test::CreateAllItems, false), (Test::CreateAllItemsOper, false)];
const FULL_READS: [(Test, bool); 3] =
    [(Test::GetTree, false), (Test::GetItem, false), (Test::GetUserOrderedTree, false)];
const CACHED_EDITS: [(Test, bool); 3] =
    [(Test::CreateAnItemCached, false), (Test::ModifyAnItemCached, true), (Test::RemoveAnItemCached, true)];

/// The plain-words findings, each computed from the results at the largest size measured.
fn findings(results: &Results) -> String {
    let Some(&size) = SIZES.iter().rev().find(|&&s| results.any(|c| c.size == s && matches!(c.op, Op::Sysrepo { .. })))
    else {
        return "_Not measured yet: the results file has no sysrepo results._\n".into();
    };
    let n = grouped(size);
    let mut out = String::new();
    let groups: [(&str, &[(Test, bool)]); 4] = [
        (
            "a single-item edit (create/modify/remove an item, fresh where a quirk hides the work) without the \
             cache, where a diff store writes the edit without loading anything while the whole datastore is \
             loaded, parsed, serialized and written (sysrepo's database plugins load the module's data first: \
             see below)",
            &SINGLE_EDITS,
        ),
        (
            "the same edits on a cached connection (every store also updates the decoded copy in the heap, so a \
             diff store pays a little more than without the cache, and the whole datastore skips the load)",
            &CACHED_EDITS,
        ),
        ("creating all N items in one apply (create batch, create all items, its oper variant)", &BULK),
        ("reading the whole datastore (get tree, get item, get user ordered tree)", &FULL_READS),
    ];
    for (what, tests) in groups {
        let per_backend: Vec<String> = SYSREPO_BACKENDS[1..]
            .iter()
            .filter_map(|&b| Some(format!("`{}` {}", b.name(), span(speedups(results, tests, size, b)?))))
            .collect();
        if !per_backend.is_empty() {
            let _ = writeln!(
                out,
                "- For {what} at {n} items: {} instructions than the whole datastore.",
                per_backend.join(", ")
            );
        }
    }
    if let Some(blob) = mean_per_try(results, Test::ModifyAnItem, true, size, BASELINE) {
        let _ = writeln!(
            out,
            "- The whole datastore pays for its size on every change: modifying one item at {n} items costs {} \
             instructions (load, parse, serialize, write), {} with the decoded copy cached.",
            human(blob as u64),
            mean_per_try(results, Test::ModifyAnItemCached, true, size, BASELINE)
                .map_or("–".into(), |v| human(v as u64))
        );
    }
    let over: Vec<String> = results
        .iter()
        .filter(|(c, r)| {
            let Op::Sysrepo { test, .. } = c.op else { return false };
            r.scope(MAX_TRY_SCOPE).is_some_and(|m| m.instructions > limit(test).0)
        })
        .map(|(c, _)| format!("`{}`", c.name()))
        .collect();
    if over.is_empty() {
        let _ = writeln!(
            out,
            "- Every try that ran fits one production message (its most expensive try against 5 B per query for \
             reads, 40 B per update for writes). \"many oper change_subs\" did not run at more than {} items: with \
             `stable_btreemap` one try would probably exceed 40 B there (it grows faster than linearly: see the \
             10,000-item table).",
            grouped(CHANGE_SUBS_MAX_SIZE)
        );
    } else {
        let _ = writeln!(
            out,
            "- Over one production message (5 B per query for reads, 40 B per update for writes): {}.",
            over.join(", ")
        );
    }
    out
}

fn readme(findings: &str) -> String {
    format!(
        "{findings}\nFor comparison, sysrepo's own document (`DB_PLG_PERF.md`, wall time on one machine): at \
         100,000 items Redis answered \"get tree hash\" 1450x faster than the JSON file, while most store-side \
         tests were 2-19x slower, and it concludes that its database plugins pay off only for many small changes \
         on a cached connection. Its database plugins also load the module's data before every non-cached edit \
         (to validate it); the diff stores here do not, as a canister would not.\n\n\
         Tables per size and backend, with sysrepo's ×faster/×slower comparisons: [docs/sysrepo.md](docs/sysrepo.md).\n"
    )
}

fn document(results: &Results, command: &str, date: &str, findings: &str) -> String {
    let mut md = String::new();
    intro(&mut md, results, command, date, findings);
    method(&mut md, results);
    tables(&mut md, results);
    md
}

/// What sysrepo's test is, the chart, the findings and the backends.
fn intro(md: &mut String, results: &Results, command: &str, date: &str, findings: &str) {
    let _ = write!(
        md,
        "# sysrepo on the IC: the whole datastore against stores of diffs\n\n\
         Generated by `scripts/report.sh` from `{file}`; do not edit. The numbers were produced by \
         `{command}` on {date} ({described}).\n\n\
         sysrepo's datastore-plugin performance test (`tests/perf.c`, binary `sr_perf`, published with its \
         results as `DB_PLG_PERF.md` in sysrepo/sysrepo) as canister benchmarks. The `perf` YANG module: list \
         `lst` keyed by (`k1`, `k2`) with leaf `l`, and the user-ordered list `usr-lst`; N items `k1 = i`, \
         `k2 = \"str<i>\"`, `l = \"l<i>\"`; single-item tests target item N/2. Each test runs its setup once, \
         then {TRIES} tries, and reports the mean of the tries' timed parts, as `sr_perf` does; here in \
         instructions instead of seconds.\n\n\
         ![sysrepo tests against N](sysrepo.svg)\n\n\
         ## What the numbers say\n\n{findings}\n\
         ## The backends (sysrepo's \"plugins\")\n\n",
        file = results.model().file(),
        described = results.model().described(),
    );
    for b in SYSREPO_BACKENDS {
        let what = match b {
            Backend::Blob => {
                "the whole datastore as one JSON document in stable memory (libyang's JSON shape), parsed whole on \
                 every load and serialized and written whole on every change: sysrepo's default JSON DS file, the \
                 baseline"
            }
            Backend::Sqlite => {
                "SQLite (ic-rusqlite, `journal_memory_temp_file`): `lst` as a `WITHOUT ROWID` table keyed by \
                 (k1, k2), `usr-lst` with a position column; an apply is one transaction of one statement per edit"
            }
            Backend::StableBTreeMap => {
                "ic-stable-structures `StableBTreeMap`s: `lst` keyed by k1 (big-endian) and k2, `usr-lst` by \
                 position plus a key-to-position index; an apply writes the entries its edits touch"
            }
            _ => b.about(),
        };
        let _ = writeln!(md, "- **`{}`**: {what}.", b.name());
    }
}

/// How the port differs from sysrepo, the quirks it keeps and the limits it checks.
fn method(md: &mut String, results: &Results) {
    let _ = write!(
        md,
        "\n**Cached** tests keep the decoded datastore in the heap (`sr_cache_running`): reads and the diff need no \
         load; stores still go to the backend (the whole document for `blob`). **Not cached**: `blob` loads and \
         parses everything for every operation; the diff stores look up what an edit needs and read everything \
         only for the tests that select by an expression or the whole container (get tree, get item, get user \
         ordered tree).\n\n\
         **Where the port differs from sysrepo.** sysrepo loads a module's data before every non-cached edit to \
         validate it; a canister storing diffs needs no such load, so the diff stores here skip it (what a \
         canister would do), and there is no YANG validation pass. \"get oper tree\" builds N items in a callback \
         and serializes them: no store is involved, a control that costs the same everywhere. \"many oper \
         change_subs\" notifies 12 in-canister subscribers of every apply; it is not run at more than {} items \
         (one try is 20 applies of N edits).\n\n\
         **sysrepo's quirks, kept.** Setup runs once per test, so \"remove all items\" and \"remove whole subtree\" \
         delete N items in try 1 only, and the mean is (1 real + {} empty) / {TRIES}; \"modify an item\" writes \
         the value it already has from try 2 on; \"remove an item\" deletes a leaf that is already gone from try 2 \
         on. Each of these also runs **fresh**: what try 1 changed is put back (untimed) before every try, so every try does \
         the real work. An apply whose diff is empty (the value a leaf already has, a leaf already gone) stores \
         nothing, as in sysrepo: on a cached connection nothing reaches the store, and without the cache the whole \
         datastore is loaded and compared but not written (the diff stores run the edit, which changes nothing).\n\n\
         **Production limits.** Each try is one operation a canister would run in one message: reads as a query \
         (5 B instructions), writes as an update (40 B). \"fits one message\" judges the most expensive try (scope \
         `max_try`), not the mean. `StableBTreeMap`'s \"remove all items\" is `clear_new`, which resets the map in \
         constant time (the space is reused, not freed), as SQLite's `DELETE` without `WHERE` drops the table's \
         pages at once. Heap and stable growth \
         per cell are in `{file}` (they include the setup).\n\n",
        grouped(CHANGE_SUBS_MAX_SIZE),
        TRIES - 1,
        file = results.model().file(),
    );
}

/// One table per size and backend: every test's mean per try against the baseline.
fn tables(md: &mut String, results: &Results) {
    for size in SIZES {
        for backend in SYSREPO_BACKENDS {
            let name = backend.name();
            let _ = write!(
                md,
                "## {} items, `{name}`{}\n\n| test | instructions (mean per try) | comparison | fits one message |\n\
                 |---|---:|---:|---|\n",
                grouped(size),
                if backend == BASELINE { " (baseline)" } else { "" }
            );
            for (test, fresh) in rows() {
                let title = row_title(test, fresh);
                if !test.runs_at(size) {
                    let _ = writeln!(md, "| {title} | not run at {} items | | |", size_label(size));
                    continue;
                }
                let value = mean_per_try(results, test, fresh, size, backend);
                let base = mean_per_try(results, test, fresh, size, BASELINE);
                let (cap, kind) = limit(test);
                let fits = match max_try(results, test, fresh, size, backend) {
                    Some(m) if m <= cap => "yes".to_string(),
                    Some(m) => format!("**no**: a try took {} (over the {kind} limit)", human(m)),
                    None => "–".into(),
                };
                let (v, cmp) = match value {
                    Some(v) => (grouped(v.round() as u64), base.map_or("–".into(), |b| comparison(v, b))),
                    None => ("–".into(), "–".into()),
                };
                let _ = writeln!(md, "| {title} | {v} | {cmp} | {fits} |");
            }
            md.push_str(
                "\nAll comparisons refer to how many times faster (green) or slower (red) the current backend is \
                 compared to the first backend (`blob`).\n\n",
            );
        }
    }
}

/// `docs/sysrepo.svg`: mean instructions per try against the number of items, both axes
/// logarithmic, one line per sysrepo backend, one panel per test of `panels` (2×2).
pub fn chart(results: &Results, panels: &[(Test, bool); 4]) -> String {
    crate::chart::svg(|s| draw_sysrepo(results, panels, s))
}

fn draw_sysrepo(results: &Results, panels: &[(Test, bool); 4], svg: &mut String) -> Drawn {
    {
        let root = SVGBackend::with_string(svg, (1100, 900)).into_drawing_area();
        root.fill(&WHITE)?;
        let root = root.titled(
            "sysrepo datastore tests: instructions per try against items in the datastore",
            ("sans-serif", 22),
        )?;
        let (strip, grid) = root.split_vertically(36);
        legend(&strip, Mark::Line, &SYSREPO_BACKENDS)?;
        let x_range = log_range(SIZES.iter().map(|s| *s as f64), (1e3, 1e5));
        for (panel, &(test, fresh)) in grid.split_evenly((2, 2)).iter().zip(panels) {
            let title = format!("{}{}", test.title(), if fresh { " (fresh)" } else { "" });
            let series: Vec<Series<f64>> = SYSREPO_BACKENDS
                .into_iter()
                .map(|b| (b, SIZES.map(|s| (s as f64, mean_per_try(results, test, fresh, s, b))).to_vec()))
                .collect();
            line_panel(panel, &title, x_range, "items in the datastore (N)", "instructions per try", &series)?;
        }
        root.present()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use stablebench_grid::cells::cells;

    use super::super::results::{Measurement, Record};
    use super::*;

    #[test]
    fn comparisons_are_sysreps_style_and_never_below_one() {
        assert_eq!(comparison(100.0, 100.0), "1.000 x");
        assert_eq!(comparison(50.0, 100.0), "$\\color{#08872B}\\text{2.000 x}$");
        assert_eq!(comparison(300.0, 100.0), "$\\color{#FF474C}\\text{3.000 x}$");
        assert_eq!(comparison(0.0, 100.0), "–");
    }

    /// Synthetic results: blob costs 1,000 per item per try, SQLite 10 per try, StableBTreeMap 20,
    /// except one SQLite cell over the update limit.
    fn synthetic() -> Results {
        let mut named = BTreeMap::new();
        for c in cells().into_iter().filter(|c| matches!(c.op, Op::Sysrepo { .. })) {
            let per_try = match (c.backend, c.op) {
                (Backend::Blob, _) => 1_000 * c.size,
                (Backend::Sqlite, Op::Sysrepo { test: Test::CreateAllItems, .. }) if c.size == 100_000 => {
                    50_000_000_000
                }
                (Backend::Sqlite, _) => 10,
                _ => 20,
            };
            let total = Measurement { calls: 10, instructions: 10 * per_try, ..Default::default() };
            let max = Measurement { calls: 1, instructions: per_try, ..Default::default() };
            named.insert(
                c.name(),
                Record { total, scopes: BTreeMap::from([(MAX_TRY_SCOPE.to_string(), max)]), ..Default::default() },
            );
        }
        Results::new(named).unwrap()
    }

    #[test]
    fn the_report_has_a_table_per_size_and_backend_and_flags_what_does_not_fit() {
        let r = generate(&synthetic(), "cmd", "2026-11-23");
        assert_eq!(r.markdown.matches("| test | instructions (mean per try) |").count(), 9);
        assert_eq!(r.markdown.matches("All comparisons refer to").count(), 9);
        assert!(r.markdown.contains("| many oper change_subs | not run at 100k items | | |"));
        assert!(r.markdown.contains("| remove all items (fresh) |"));
        // SQLite create all items at 100k: 50 B per try, over the update limit.
        assert!(r.markdown.contains("**no**: a try took 50.00 B (over the update limit)"), "{}", r.markdown);
        assert!(r.readme.contains("`sqlite_sysrepo_create_all_items_100k_journal_memory_temp_file`"), "{}", r.readme);
        // Single edits at 100k: blob 100,000,000 against SQLite 10 and the map 20.
        assert!(r.readme.contains("`sqlite` 10000000.0x fewer"), "{}", r.readme);
        assert!(r.svg.starts_with("<svg"));
    }

    #[test]
    fn without_results_the_report_says_so() {
        let r = generate(&Results::new(BTreeMap::new()).unwrap(), "cmd", "date");
        assert!(r.markdown.contains("Not measured yet"));
        assert!(r.markdown.contains("| get tree | – | – | – |"));
    }
}
