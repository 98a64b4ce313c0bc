//! What the benchmarks cost on mainnet: the grid measured under the runner's `ic` cost model
//! (the IC's deterministic memory tracker since August 2026: `page_fees::ACCESS` instructions per
//! 64 KiB Wasm page a message accesses, `page_fees::WRITE` more per page it writes) beside canbench's figures, from
//! `mainnet_results.yml` and `canbench_results.yml` (and their `vfs/` twins), to
//! `docs/mainnet.md` and the README's mainnet summary. Every answer the other reports give is
//! computed twice, by the same code, once from each file; the table of answers lists both.

use std::fmt::Write;

use stablebench_grid::cells::{
    Backend, Cell, Op, BACKENDS, DB_WEIGHT_SIZE, NODESTORE_SIZES, SYSREPO_BACKENDS, TRIE_OPS,
};
use stablebench_grid::grouped;
use stablebench_grid::ic::{page_fees, PageCounts};
use stablebench_grid::profiles::{Profile, DEFAULT, WORKLOADS};
use stablebench_grid::sysrepo::{SIZES as SYSREPO_SIZES, TESTS};
use stablebench_grid::users_orders::{Sizes, BENCHES};

use super::results::Results;
use super::{kv, sysrepo};

/// The report an answer belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Topic {
    /// The pragma profiles over the users/orders steps (`docs/results.md`).
    Profiles,
    /// The key-value stores (`docs/kv.md`).
    KeyValue,
    /// sysrepo's datastore tests (`docs/sysrepo.md`).
    Sysrepo,
}

/// One answer of the reports, as each model gives it.
#[derive(Clone, Debug, PartialEq)]
pub struct Answer {
    /// The report it belongs to.
    pub topic: Topic,
    /// The question.
    pub question: String,
    /// The answer from canbench's figures.
    pub canbench: String,
    /// The answer from mainnet's.
    pub mainnet: String,
}

/// The answer to a question no figure answers.
const NOT_MEASURED: &str = "not measured";

/// The name of the cheapest of `options` (with its figure), if any was measured.
fn cheapest(options: impl Iterator<Item = (Backend, Option<f64>)>) -> String {
    options
        .filter_map(|(b, v)| v.map(|v| (b, v)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map_or(NOT_MEASURED.into(), |(b, v)| format!("{} ({})", b.name(), grouped(v.round() as u64)))
}

/// The answers the reports give, computed from `results`, in [`answers`] order.
fn answers_of(results: &Results) -> Vec<(Topic, String, String)> {
    let mut out = Vec::new();
    let standings = super::standings(results);
    let best =
        standings.iter().find(|s| super::qualifies(s)).map_or("none".to_string(), |s| s.profile.name.to_string());
    out.push((
        Topic::Profiles,
        "Cheapest profile over the nine users/orders bulk steps (atomic, in stable memory, foreign keys kept; not the recommendation's criterion)".into(),
        best,
    ));
    for op in TRIE_OPS {
        // The message each figure is for: a w_avg divides one message shape by its operations.
        let shape = match op {
            Op::TrieRead(_) => {
                format!("a message of {} random reads, priced as an update", stablebench_grid::TRIE_QUERY_KEYS)
            }
            _ => "an update of one put and its commit".to_string(),
        };
        let q = format!(
            "Cheapest backend per {} at {} keys, in {shape} (w_avg, instructions)",
            kv::op_title(op).to_lowercase(),
            grouped(DB_WEIGHT_SIZE)
        );
        let options = BACKENDS.into_iter().map(|b| (b, kv::w_avg_per_op(results, op, DB_WEIGHT_SIZE, b)));
        out.push((Topic::KeyValue, q, cheapest(options)));
    }
    let size = SYSREPO_SIZES.iter().copied().max().unwrap_or(0);
    for test in TESTS {
        let fresh = false;
        let q = format!("Cheapest sysrepo backend for `{}` at {} items (mean per try)", test.name(), grouped(size));
        let options = SYSREPO_BACKENDS.into_iter().map(|b| (b, sysrepo::mean_per_try(results, test, fresh, size, b)));
        out.push((Topic::Sysrepo, q, cheapest(options)));
    }
    out
}

impl Answer {
    /// Whether the models choose differently (the figures beside a choice aside).
    pub fn changed(&self) -> bool {
        let choice = |s: &str| s.split(" (").next().unwrap_or(s).to_string();
        choice(&self.canbench) != choice(&self.mainnet)
    }
}

/// Each answer under both models that was measured under either: a question neither model's
/// results answer (a test not run at the size it asks about) is no answer, and counting it would
/// count a "same" nobody measured.
pub fn answers(canbench: &Results, ic: &Results) -> Vec<Answer> {
    answers_of(canbench)
        .into_iter()
        .zip(answers_of(ic))
        .map(|((topic, question, canbench), (_, _, mainnet))| Answer { topic, question, canbench, mainnet })
        .filter(|a| a.canbench != NOT_MEASURED || a.mainnet != NOT_MEASURED)
        .collect()
}

/// The paragraph a report opens with, right under its title: its figures are mainnet's, why
/// canbench's differ and by how much for the page's benchmarks (`on_page`), where both stand side
/// by side with the pages (the report's page of the site, `site_page`), where `docs/mainnet.md`
/// gives the report's summary as canbench reports it (its heading `section`, if it has one), and
/// which of the page's `answers` differ under canbench.
pub fn lead(
    canbench: &Results,
    ic: &Results,
    on_page: impl Fn(&Cell) -> bool,
    answers: &[Answer],
    section: Option<&str>,
    site_page: &str,
) -> String {
    let ratios: Vec<f64> = canbench
        .iter()
        .filter(|(cell, _)| on_page(cell))
        .filter_map(|(cell, c)| Some(ic.get(cell)?.total.instructions as f64 / c.total.instructions.max(1) as f64))
        .collect();
    let (lo, hi) = ratios.iter().fold((f64::MAX, 0f64), |(lo, hi), r| (lo.min(*r), hi.max(*r)));
    let mut out = format!(
        "**Mainnet's figures.** This report's instructions are what mainnet charges since the IC's \
         memory tracker (August 2026): {access} instructions for each 64 KiB page of heap or stable \
         memory a message accesses first, {write} more for each it writes first. canbench reports \
         less because its PocketIC 13 predates the tracker: for the report's {n} benchmarks \
         mainnet's figure is {lo:.2}× to {hi:.2}× canbench's. [The site's page](site/{site_page}#benchmarks) \
         shows both figures and the pages of every benchmark",
        access = grouped(page_fees::ACCESS),
        write = grouped(page_fees::WRITE),
        n = ratios.len(),
    );
    if let Some(s) = section {
        let _ = write!(
            out,
            ", [the mainnet report](mainnet.md#{}) the report's summary as canbench reports it",
            super::site::slug(s)
        );
    }
    out += "; every figure of both models is in `mainnet_results.yml` and `canbench_results.yml`.";
    let changed: Vec<&Answer> = answers.iter().filter(|a| a.changed()).collect();
    match (answers.len(), changed.len()) {
        (0, _) => {}
        (1, 0) => out += " Its answer is the same under canbench.",
        (1, _) => out += " Its answer differs under canbench:",
        (n, 0) => {
            let _ = write!(out, " Its {n} answers are the same under canbench.");
        }
        (n, 1) => {
            let _ = write!(out, " 1 of its {n} answers differs under canbench:");
        }
        (n, k) => {
            let _ = write!(out, " {k} of its {n} answers differ under canbench:");
        }
    }
    out += "\n";
    if !changed.is_empty() {
        for a in changed {
            let _ = write!(out, "\n- {}: **{}** on mainnet, {} under canbench.", a.question, a.mainnet, a.canbench);
        }
        out.push('\n');
    }
    out
}

/// `markdown` (a report) with `lead` inserted under its title (its first line).
pub fn with_lead(markdown: &str, lead: &str) -> String {
    let (title, rest) = markdown.split_once('\n').unwrap_or((markdown, ""));
    format!("{title}\n\n{lead}\n{}", rest.trim_start_matches('\n'))
}

/// The closing section of a report: every benchmark on its page (`on_page`), mainnet's figure per
/// call with canbench's and the pages beside it, in the grid's order.
pub fn both_models_section(canbench: &Results, ic: &Results, on_page: impl Fn(&Cell) -> bool) -> String {
    let rows: Vec<Row> =
        canbench.iter().filter(|(cell, _)| on_page(cell)).filter_map(|(cell, _)| row(cell, canbench, ic)).collect();
    if rows.is_empty() {
        return String::new();
    }
    format!(
        "## Every benchmark of this report, both ways\n\n\
         Per call (the total over the calls a benchmark records, divided by them): mainnet's figure, \
         canbench's, and the 64 KiB pages one call accessed / wrote, which mainnet charges \
         ({access} and {write} instructions) and canbench's PocketIC does not see.\n\n{}",
        per_call_table(&rows),
        access = grouped(page_fees::ACCESS),
        write = grouped(page_fees::WRITE),
    )
}

/// `markdown` (a report) with `section` appended, one blank line between them (unchanged if
/// `section` is empty).
pub fn with_section(markdown: &str, section: &str) -> String {
    if section.is_empty() {
        return markdown.to_string();
    }
    format!("{}\n\n{section}", markdown.trim_end_matches('\n'))
}

/// What `generate` writes.
#[derive(Clone, Debug)]
pub struct MainnetReport {
    /// `docs/mainnet.md`.
    pub markdown: String,
    /// The README's summary (between `<!-- mainnet-summary -->` markers).
    pub readme: String,
}

/// One row of the per-call table: a cell, its instructions per call in each model and its pages
/// per call.
struct Row {
    what: String,
    calls: u64,
    canbench: u64,
    mainnet: u64,
    pages: Option<PageCounts>,
}

fn row(cell: &Cell, canbench: &Results, ic: &Results) -> Option<Row> {
    let (c, i) = (canbench.get(cell)?, ic.get(cell)?);
    Some(Row {
        what: format!("`{}`", cell.name()),
        calls: c.total.calls.max(1),
        canbench: c.total.instructions,
        mainnet: i.total.instructions,
        pages: i.pages,
    })
}

/// The nine users/orders steps at the reference size under profile `a` against `b`, both models.
fn versus_table(canbench: &Results, ic: &Results, a: Profile, b: Profile) -> String {
    let mut t = format!(
        "| step | `{}` on mainnet | `{}` on mainnet | ratio on mainnet | ratio under canbench |\n|---|--:|--:|--:|--:|\n",
        a.name, b.name
    );
    for step in BENCHES {
        let cell = |p| Cell::users_orders_at(step, Sizes::REFERENCE.orders, Backend::Sqlite, p);
        let total = |r: &Results, p| r.get(&cell(p)).map(|m| m.total.instructions);
        let (Some(ia), Some(ib), Some(ca), Some(cb)) =
            (total(ic, a), total(ic, b), total(canbench, a), total(canbench, b))
        else {
            continue;
        };
        let _ = writeln!(
            t,
            "| `{}` | {} | {} | {:.2} | {:.2} |",
            step.name(),
            grouped(ia),
            grouped(ib),
            ia as f64 / ib.max(1) as f64,
            ca as f64 / cb.max(1) as f64
        );
    }
    t
}

fn per_call_table(rows: &[Row]) -> String {
    let mut t = String::from(
        "| benchmark | mainnet per call | canbench per call | mainnet / canbench | pages accessed / written per call |\n|---|--:|--:|--:|--:|\n",
    );
    for r in rows {
        let per = |v: u64| grouped(v / r.calls);
        let pages = r.pages.map_or("–".into(), |p| {
            let f = |v: u64| {
                if r.calls == 1 {
                    grouped(v)
                } else {
                    format!("{:.1}", v as f64 / r.calls as f64)
                }
            };
            format!("{} / {}", f(p.accessed()), f(p.written()))
        });
        let _ = writeln!(
            t,
            "| {} | {} | {} | {:.1}× | {pages} |",
            r.what,
            per(r.mainnet),
            per(r.canbench),
            r.mainnet as f64 / r.canbench.max(1) as f64
        );
    }
    t
}

fn answers_table(answers: &[Answer]) -> String {
    let mut t = String::from(
        "| question | mainnet (since the memory tracker) | canbench (PocketIC 13) | |\n|---|---|---|---|\n",
    );
    for a in answers {
        let verdict = if a.changed() { "**differs**" } else { "same" };
        let _ = writeln!(t, "| {} | {} | {} | {verdict} |", a.question, a.mainnet, a.canbench);
    }
    t
}

/// NodeStore's phases at its largest size, backend by backend: each phase's figure in both
/// models and the pages first touched in it (`scope_pages`), which canbench cannot report.
fn phases_table(canbench: &Results, ic: &Results) -> String {
    let size = NODESTORE_SIZES.into_iter().max().unwrap_or(0);
    let mut t = String::from(
        "| benchmark | phase | mainnet | canbench | mainnet / canbench | pages accessed / written |\n|---|---|--:|--:|--:|--:|\n",
    );
    for b in BACKENDS {
        let Some((cell, c)) = canbench.find(Op::NodeStore, size, b) else { continue };
        let Some(i) = ic.get(cell) else { continue };
        for (phase, m) in &c.scopes {
            let Some(mi) = i.scope(phase) else { continue };
            let pages = i
                .scope_pages
                .get(phase)
                .map_or("–".into(), |p| format!("{} / {}", grouped(p.accessed()), grouped(p.written())));
            let _ = writeln!(
                t,
                "| `{}` | `{phase}` | {} | {} | {:.1}× | {pages} |",
                cell.name(),
                grouped(mi.instructions),
                grouped(m.instructions),
                mi.instructions as f64 / m.instructions.max(1) as f64
            );
        }
    }
    t
}

/// `docs/mainnet.md` and the README's summary from the two models' results.
pub fn generate(canbench: &Results, ic: &Results, command: &str, date: &str) -> MainnetReport {
    let answers = answers(canbench, ic);
    let kv_rows: Vec<Row> = TRIE_OPS
        .into_iter()
        .flat_map(|op| BACKENDS.into_iter().map(move |b| (op, b)))
        .filter_map(|(op, b)| {
            let (cell, _) = canbench.find(op, DB_WEIGHT_SIZE, b)?;
            row(cell, canbench, ic)
        })
        .collect();
    let uo_rows: Vec<Row> = BENCHES
        .into_iter()
        .filter_map(|b| row(&Cell::users_orders_at(b, Sizes::REFERENCE.orders, Backend::Sqlite, DEFAULT), canbench, ic))
        .collect();
    let changed = answers.iter().filter(|a| a.changed()).count();
    let ratios: Vec<f64> = canbench
        .iter()
        .filter_map(|(cell, c)| Some(ic.get(cell)?.total.instructions as f64 / c.total.instructions.max(1) as f64))
        .collect();
    let (lo, hi) = ratios.iter().fold((f64::MAX, 0f64), |(lo, hi), r| (lo.min(*r), hi.max(*r)));
    let n_cells = ratios.len();

    let mut md = String::new();
    method(&mut md, command, date);
    let _ = writeln!(
        md,
        "Over the {n_cells} benchmarks priced both ways, mainnet's figure is {lo:.2}× to {hi:.0}× \
         canbench's. {changed} of the {} answers below differ between the two.\n",
        answers.len()
    );
    let _ = writeln!(md, "## The answers, under each model\n");
    md += &answers_table(&answers);
    let _ = writeln!(md, "\n## One operation per call: key-value stores at {} keys\n", grouped(DB_WEIGHT_SIZE));
    let _ = writeln!(
        md,
        "The trie cells' 50 iterations, each a message of its own on mainnet (per call: the total \
         over the iterations divided by 50; the DbWeight tables use the trimmed mean, w_avg).\n"
    );
    md += &per_call_table(&kv_rows);
    let _ = writeln!(
        md,
        "\n## Bulk steps: users/orders at {} orders, profile `{}`\n",
        grouped(Sizes::REFERENCE.orders),
        DEFAULT.name
    );
    md += &per_call_table(&uo_rows);
    let _ = writeln!(
        md,
        "\n## The recommendation against the bulk-load profile\n\n`{}` (the recommendation on mainnet) against \
         `{}` (the bulk-load profile, the recommendation under canbench's model), step by step: below 1 the \
         recommendation is cheaper.\n",
        DEFAULT.name, WORKLOADS.name
    );
    md += &versus_table(canbench, ic, DEFAULT, WORKLOADS);
    let _ = writeln!(
        md,
        "\n## Pages per scope: NodeStore's phases at {} objects\n\nEach phase is a canbench-rs scope \
         of one message (the seven run back to back). The runner finds the two counter reads that \
         time each scope (canbench-rs reads the counter where a scope starts and where it ends) and \
         counts the pages first touched between them: a page an earlier phase touched is not \
         charged again. Every benchmark's placeable scopes (those that ran once inside a measured \
         part) have their pages in `mainnet_results.yml` (`scope_pages`), and the mainnet figures of \
         these phases are derived from them (`IcPricing::Scopes`).\n",
        grouped(NODESTORE_SIZES.into_iter().max().unwrap_or(0))
    );
    md += &phases_table(canbench, ic);
    canbench_summaries(&mut md, canbench, command, date);
    let readme = readme(&answers, &kv_rows, (lo, hi), changed, date);
    MainnetReport { markdown: md, readme }
}

/// The page's head: why two figures, how the second is measured, where whole messages are.
fn method(md: &mut String, command: &str, date: &str) {
    let _ = writeln!(md, "# What the benchmarks cost on mainnet\n");
    let _ = writeln!(
        md,
        "Generated by `scripts/report.sh` from `mainnet_results.yml` and `canbench_results.yml` (and \
         their `vfs/` twins), both written by one run of `{command}` with the offline runner on {date}.\n"
    );
    let _ = writeln!(
        md,
        "**Why two figures.** Since August 2026 the IC charges for the memory a message touches: the \
         deterministic memory tracker (dfinity/ic #10789) takes {access} instructions for each 64 KiB \
         Wasm page of heap or stable memory a message first accesses, and {write} more for each page \
         it first writes, during the execution (so `performance_counter`, canbench-rs and the \
         instruction limits all see it). canbench 0.7 runs PocketIC 13, whose replica predates the \
         tracker: its figures leave these charges out. The rules, with their sources and what is \
         settled by code or only by pull-request text, are in [sources.md](sources.md#the-memory-tracker-what-mainnet-charges-since-august-2026-runnersrcreplicars-memory_tracker).\n",
        access = grouped(page_fees::ACCESS),
        write = grouped(page_fees::WRITE),
    );
    let _ = writeln!(
        md,
        "**How it is measured.** The runner runs each benchmark's setup once; where the measured \
         part starts it forks, and the copy goes on under the `ic` cost model while the original \
         goes on under canbench's (`--cost-model both`, the default of `scripts/bench.sh`). A \
         workload marks each timed part that would be a message of its own on the IC (a \
         users/orders step; each of a trie cell's 50 iterations; each sysrepo try; each Chia chunk \
         and lookup batch; `Probe::message_starts`): the tracker starts afresh there, as in a new \
         message, so a page the setup or an earlier iteration touched is charged again. Each part \
         is priced as an update (queries pay for accesses only: subtract the written pages' \
         {write} each). Both runs must touch the same pages, or the benchmark fails. The page \
         counts are the same in both models; canbench cannot report them. Where a cell's result is \
         made of whole timed parts (a users/orders step, one interval; a sysrepo cell, its tries' \
         sum and its largest try) or of scopes the runner can place (NodeStore's phases, below), \
         its mainnet figure is derived instead of measured twice: each part's canbench figure, \
         plus the fees of the pages it touched, minus canbench's {stable} per 4 KiB stable page \
         written (`Cell::ic_pricing`; the runner checks that the parts it timed add up to what the \
         canister reported, and `runner/tests/shared_setups.rs` checks the \
         derived figures against a run under the `ic` model alone). A scope measured before the first timed part (the \
         trie cells' `setup`, the data set's load) keeps canbench's figure in both files.\n",
        write = grouped(page_fees::WRITE),
        stable = grouped(page_fees::CANBENCH_STABLE_WRITE),
    );
    let _ = writeln!(
        md,
        "**Whole messages.** The production canisters' endpoints, one call at a time as a user \
         calls them (Candid, access checks, the operation, its commit, the reply), are measured \
         under both models too: [per-call.md](per-call.md)'s tables (`kv_put`, `kv_get`, `kv_len`, \
         `kv_load`, upgrades, each SQLite call against its floor; every users/orders endpoint at 1x \
         and 10x), the example canisters' tables ([use-in-your-canister.md](use-in-your-canister.md)), and \
         [per_call_profiles.md](per_call_profiles.md) (one key-value call under every pragma \
         profile).\n"
    );
}

/// The reports' summaries again, computed from canbench's figures alone.
fn canbench_summaries(md: &mut String, canbench: &Results, command: &str, date: &str) {
    let _ = writeln!(md, "\n## The same summaries as canbench reports them\n");
    let _ = writeln!(
        md,
        "The reports and the README give mainnet's figures. Here is the same code that writes their \
         summaries, run on `canbench_results.yml` (what canbench 0.7 reports on PocketIC 13): what a \
         reader of canbench's figures alone would conclude.\n"
    );
    let kv_cb = kv::generate(canbench, &|_| None, command, date, None);
    let _ = writeln!(md, "### IC DbWeight\n\n{}", super::for_docs_page(&kv_cb.readme_dbweight));
    let _ = writeln!(md, "### Which backend for which access pattern\n\n{}", super::for_docs_page(&kv_cb.patterns));
    let rep_cb = super::generate(canbench, None, command, date);
    let _ = writeln!(md, "### Pragma profiles\n\n{}", super::for_docs_page(&rep_cb.readme_profiles));
    let sys_cb = sysrepo::generate(canbench, command, date);
    let _ = writeln!(md, "### sysrepo\n\n{}", super::for_docs_page(&sys_cb.readme));
    let vfs_cb = super::vfs::generate(canbench, command, date);
    let _ = writeln!(md, "### ic-rusqlite against ic-sqlite-vfs\n\n{}", super::for_docs_page(&vfs_cb.readme));
    let scaling_cb = super::scaling::generate(canbench, command, date);
    let _ = writeln!(md, "### Scaling\n\n{}", super::for_docs_page(&scaling_cb.readme));
}

/// The README's summary: the range of the two figures, the answers that differ, the per-call table.
fn readme(answers: &[Answer], kv_rows: &[Row], (lo, hi): (f64, f64), changed: usize, date: &str) -> String {
    let mut readme = String::new();
    let _ = writeln!(
        readme,
        "Mainnet has charged since August 2026 for each 64 KiB page a message touches ({access} \
         instructions per page accessed, {write} more per page written); canbench's PocketIC does \
         not. Priced both ways ({date}), mainnet's figure is {lo:.2}× to {hi:.0}× canbench's, \
         and {changed} of {} answers differ ([docs/mainnet.md](docs/mainnet.md)):\n",
        answers.len(),
        access = grouped(page_fees::ACCESS),
        write = grouped(page_fees::WRITE),
    );
    // The README: the pragma and key-value answers (the sysrepo ones are in docs/mainnet.md).
    let readme_answers: Vec<Answer> = answers.iter().filter(|a| a.topic != Topic::Sysrepo).cloned().collect();
    readme += &answers_table(&readme_answers);
    let _ = writeln!(readme);
    readme += &per_call_table(kv_rows);
    readme
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reports_lead_gives_its_pages_ratios_and_the_answers_that_change() {
        use crate::results::{Measurement, Record};
        use stablebench_grid::cells::{cells_of, Canister, Op};
        // Two sysrepo cells and one trie cell, mainnet charging 2x and 5x the first two, 100x the
        // trie cell (which is not on the page).
        let grid = cells_of(Canister::Main);
        let sysrepo: Vec<&Cell> = grid.iter().filter(|c| matches!(c.op, Op::Sysrepo { .. })).take(2).collect();
        let trie = grid.iter().find(|c| matches!(c.op, Op::TrieRead(_))).unwrap();
        let record = |instructions| {
            let total = Measurement { calls: 1, instructions, ..Measurement::default() };
            Record { total, ..Default::default() }
        };
        let results = |f: [u64; 3]| {
            let named = [(sysrepo[0], f[0]), (sysrepo[1], f[1]), (trie, f[2])];
            Results::new(named.into_iter().map(|(c, i)| (c.name(), record(i))).collect()).unwrap()
        };
        let (canbench, ic) = (results([100, 100, 100]), results([200, 500, 10_000]));
        let answer = |canbench: &str, mainnet: &str| Answer {
            topic: Topic::Sysrepo,
            question: "Q".into(),
            canbench: canbench.into(),
            mainnet: mainnet.into(),
        };
        let on_page = |c: &Cell| matches!(c.op, Op::Sysrepo { .. });
        let answers = [answer("blob (1)", "blob (3)"), answer("sqlite (2)", "blob (9)")];
        let lead = lead(&canbench, &ic, on_page, &answers, Some("ic-rusqlite against ic-sqlite-vfs"), "vfs.html");
        assert!(lead.contains("the report's 2 benchmarks mainnet's figure is 2.00× to 5.00× canbench's"), "{lead}");
        assert!(
            lead.contains("(mainnet.md#ic-rusqlite-against-ic-sqlite-vfs) the report's summary as canbench"),
            "{lead}"
        );
        assert!(lead.contains("[The site's page](site/vfs.html#benchmarks)"), "{lead}");
        // Only the answer whose choice changed is listed, mainnet's first.
        assert!(lead.contains("1 of its 2 answers differs under canbench:"), "{lead}");
        assert!(lead.contains("- Q: **blob (9)** on mainnet, sqlite (2) under canbench."), "{lead}");
        assert!(!lead.contains("blob (3)"), "{lead}");
        let doc = with_lead("# Title\n\nBody.\n", &lead);
        assert!(doc.starts_with("# Title\n\n**Mainnet's figures.**") && doc.ends_with(".\n\nBody.\n"), "{doc}");
        // With no answer to list, one blank line between the lead and the report.
        let lead = super::lead(&canbench, &ic, on_page, &[], None, "chia.html");
        assert!(lead.ends_with("`canbench_results.yml`.\n") && !lead.contains("(mainnet.md"), "{lead}");
        let doc = with_lead("# Title\n\nBody.\n", &lead);
        assert!(doc.ends_with("`canbench_results.yml`.\n\nBody.\n"), "{doc}");
    }

    #[test]
    fn the_cheapest_option_is_named_with_its_figure_and_gaps_are_skipped() {
        let options =
            [(Backend::Sqlite, Some(3.0)), (Backend::StableBTreeMap, None), (Backend::HeapBTreeMap, Some(2.4))];
        assert_eq!(cheapest(options.into_iter()), format!("{} (2)", Backend::HeapBTreeMap.name()));
        assert_eq!(cheapest(std::iter::empty()), "not measured");
    }

    #[test]
    fn a_question_neither_model_measured_is_not_an_answer() {
        use crate::results::{Measurement, Record};
        use stablebench_grid::cells::{cells_of, Canister};
        // One trie read cell only: every other question (the profiles, the writes, sysrepo) is
        // answered by neither model, and only the measured ones are answers (counted, tabled).
        let grid = cells_of(Canister::Main);
        let trie = grid.iter().find(|c| matches!(c.op, Op::TrieRead(_)) && c.size == DB_WEIGHT_SIZE).unwrap();
        let record =
            Record { total: Measurement { calls: 1, instructions: 7, ..Measurement::default() }, ..Default::default() };
        let results = Results::new([(trie.name(), record)].into_iter().collect()).unwrap();
        let all = answers_of(&results);
        let kept = answers(&results, &results);
        assert!(kept.len() < all.len(), "unmeasured questions are dropped");
        assert!(kept.iter().all(|a| a.canbench != NOT_MEASURED || a.mainnet != NOT_MEASURED));
        let measured = all.iter().filter(|(_, _, a)| a != NOT_MEASURED).count();
        assert_eq!(kept.len(), measured, "every measured question stays");
    }
}
