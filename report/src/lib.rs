//! # stablebench-report
//!
//! Every page of stablebench that shows a measured figure, generated from the committed results
//! and nothing else: the pragma guide's `docs/results.md` with its heatmap and the README's tables
//! (this module), the results keyed by the grid's cells ([`results`]), the key-value report
//! ([`kv`]), sysrepo ([`sysrepo`]), Chia ([`chia`]), scaling ([`scaling`]), sharding and where one canister runs out ([`sharding`]), mainnet's pricing
//! ([`mainnet`]), ic-sqlite-vfs against ic-rusqlite ([`vfs`]), their charts ([`chart`]) and the
//! results site ([`site`]). `report/tests/readme.rs` regenerates them all.
//!
//! It is its own crate, native only: no canister compiles it, so a change here never moves a
//! measured instruction (under fat LTO, code a canister never calls still shapes the code it does
//! call, when both live in one crate).

pub mod bounded;
pub mod chart;
pub mod chia;
pub mod kv;
pub mod mainnet;
pub mod page_regions;
pub mod recommend;
pub mod results;
pub mod scaling;
pub mod shapes;
pub mod sharding;
pub mod site;
pub mod sysrepo;
pub mod targets;
pub mod vfs;

use std::fmt::Write;

use stablebench::bench::{Bench, Sizes, BENCHES};
use stablebench::pragma::{Profile, Storage, MEMORY, PROFILES, REFERENCE};
use stablebench_grid::cells::{size_label, Cell};

use results::{Measurement, Results};

/// Which replica's pricing a results file follows: its instructions, and the words a report uses
/// for them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Model {
    /// canbench 0.7 on PocketIC 13, whose replica predates the IC's memory tracker
    /// (`canbench_results.yml`, which real canbench reproduces).
    #[default]
    Canbench,
    /// Mainnet since the memory tracker (the runner's `ic` cost model, `mainnet_results.yml`: its
    /// top-level `model` starts with `ic`).
    Mainnet,
}

impl Model {
    /// The results file of the ic-rusqlite canister in this model (its `vfs/` twin has the same
    /// name).
    pub fn file(self) -> &'static str {
        match self {
            Model::Canbench => "canbench_results.yml",
            Model::Mainnet => "mainnet_results.yml",
        }
    }

    /// The model in a few words, for a report's opening line.
    pub fn described(self) -> String {
        match self {
            Model::Canbench => {
                "canbench's model: the replica of PocketIC 13, which predates the IC's memory tracker".into()
            }
            Model::Mainnet => format!(
                "mainnet's pricing since the IC's memory tracker: the runner's `ic` model, {} instructions per 64 KiB \
                 page of heap or stable memory a message first accesses and {} more per page it first writes",
                stablebench_grid::grouped(stablebench_grid::ic::page_fees::ACCESS),
                stablebench_grid::grouped(stablebench_grid::ic::page_fees::WRITE)
            ),
        }
    }

    /// Whose figures these are: `canbench's` or `mainnet's`.
    pub fn whose(self) -> &'static str {
        match self {
            Model::Canbench => "canbench's",
            Model::Mainnet => "mainnet's",
        }
    }
}

/// Prices used for costs, with their source and date (declared once in the grid crate).
pub use stablebench_grid::ic::prices;

/// IC limits the report checks against.
const QUERY_LIMIT: u64 = stablebench_grid::ic::QUERY_INSTRUCTION_LIMIT;
const UPDATE_LIMIT: u64 = stablebench_grid::ic::UPDATE_INSTRUCTION_LIMIT;
const WASM_MEMORY_LIMIT_PAGES: u64 =
    stablebench_grid::ic::DEFAULT_WASM_MEMORY_LIMIT_BYTES / stablebench_grid::ic::WASM_PAGE_BYTES;

/// Replaces the text between the lines `<!-- NAME:begin -->` and `<!-- NAME:end -->` of `doc`
/// with `body` (how the README's generated tables are kept in place); an error names a missing
/// marker.
pub fn splice(doc: &str, name: &str, body: &str) -> Result<String, String> {
    let (b, e) = between(doc, name)?;
    Ok(format!("{}{}{}", &doc[..b], body, &doc[e..]))
}

/// The text between the lines `<!-- NAME:begin -->` and `<!-- NAME:end -->` of `doc` (what
/// [`splice`] replaces); an error names a missing marker.
pub fn fragment<'a>(doc: &'a str, name: &str) -> Result<&'a str, String> {
    let (b, e) = between(doc, name)?;
    Ok(&doc[b..e])
}

/// The documents, relative to the repository's root, that hold generated fragments between
/// markers (the README and the `docs/` pages it links to for details).
pub const MARKED_DOCS: [&str; 7] = [
    "README.md",
    "docs/grid.md",
    "docs/pragma-guide.md",
    "docs/storage.md",
    "docs/use-in-your-canister.md",
    "docs/per-call.md",
    "docs/sharding.md",
];

/// The one document of `docs` (name, text) that holds `name`'s markers; an error if none or
/// several do.
fn holder(docs: &[(String, String)], name: &str) -> Result<usize, String> {
    let begin = format!("<!-- {name}:begin -->\n");
    let holders: Vec<usize> = (0..docs.len()).filter(|&i| docs[i].1.contains(&begin)).collect();
    match holders[..] {
        [i] => Ok(i),
        [] => Err(format!("no document has a line {}", begin.trim_end())),
        _ => Err(format!(
            "{} documents have a line {}: {}",
            holders.len(),
            begin.trim_end(),
            holders.iter().map(|&i| docs[i].0.as_str()).collect::<Vec<_>>().join(", ")
        )),
    }
}

/// [`splice`] in whichever of `docs` (name, text) holds `name`'s markers. `body` is written for
/// the README: in a page under `docs/` its links into `docs/` lose that prefix
/// ([`for_docs_page`]).
pub fn splice_in(docs: &mut [(String, String)], name: &str, body: &str) -> Result<(), String> {
    let i = holder(docs, name)?;
    let body = if docs[i].0.starts_with("docs/") { for_docs_page(body) } else { body.to_string() };
    docs[i].1 = splice(&docs[i].1, name, &body).map_err(|e| format!("{}: {e}", docs[i].0))?;
    Ok(())
}

/// Markdown written for the README, with its links into `docs/` made relative to a page there.
pub fn for_docs_page(markdown: &str) -> String {
    markdown.replace("](docs/", "](")
}

/// [`fragment`] of whichever of `docs` (name, text) holds `name`'s markers.
pub fn fragment_in<'a>(docs: &'a [(String, String)], name: &str) -> Result<&'a str, String> {
    let i = holder(docs, name)?;
    fragment(&docs[i].1, name).map_err(|e| format!("{}: {e}", docs[i].0))
}

/// Where the text between `name`'s markers starts and ends in `doc`.
fn between(doc: &str, name: &str) -> Result<(usize, usize), String> {
    let (begin, end) = (format!("<!-- {name}:begin -->\n"), format!("<!-- {name}:end -->"));
    let b = doc.find(&begin).ok_or_else(|| format!("no line {}", begin.trim_end()))? + begin.len();
    let e = doc[b..].find(&end).ok_or_else(|| format!("no {end} after {}", begin.trim_end()))? + b;
    Ok((b, e))
}

/// The grid at a glance, for the README: per workload and operation, the backends, sizes and
/// settings it runs with and how many cells that makes, all counted from
/// `stablebench_grid::cells::cells()`.
pub fn grid_table() -> String {
    use stablebench_grid::cells::{cells, Workload};
    let all = cells();
    // Group cells by (workload, operation) in grid order.
    let mut groups: Vec<(String, Vec<Cell>)> = Vec::new();
    for c in &all {
        let key = format!("{} | `{}`", c.workload().name(), c.op_name());
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => v.push(*c),
            None => groups.push((key, vec![*c])),
        }
    }
    let mut t =
        String::from("| workload | operation | backends | sizes | settings | cells |\n|---|---|---|---|---|---:|\n");
    // The users/orders steps: one row for the nine, with the profile count; sysrepo: one row for
    // its tests.
    let (uo, kv): (Vec<_>, Vec<_>) = groups.into_iter().partition(|(_, v)| v[0].workload() == Workload::UsersOrders);
    let (sysrepo, kv): (Vec<_>, Vec<_>) = kv.into_iter().partition(|(_, v)| v[0].workload() == Workload::Sysrepo);
    // The scaling cells (the nine at other sizes) get a row of their own.
    let (uo, scaled): (Vec<_>, Vec<_>) = uo.into_iter().partition(|(_, v)| v[0].size == Sizes::REFERENCE.orders);
    if !uo.is_empty() {
        t += &users_orders_row(&uo);
    }
    if !scaled.is_empty() {
        t += &scaled_row(&scaled);
    }
    for (key, v) in kv {
        let settings = distinct(v.iter().filter_map(|c| c.profile.map(|p| format!("`{}` (SQLite)", p.name))));
        let _ = writeln!(
            t,
            "| {key} | {} | {} | {} | {} |",
            backends(&v),
            distinct(v.iter().map(|c| size_label(c.size))),
            if settings.is_empty() { "-" } else { &settings },
            v.len()
        );
    }
    if !sysrepo.is_empty() {
        t += &sysrepo_row(&sysrepo);
    }
    let _ = writeln!(t, "| **all** | | | | | **{}** |", all.len());
    t
}

/// Cells grouped by workload and operation (`grid_table`'s groups).
type Groups = [(String, Vec<Cell>)];

/// Every cell of `groups`, in order.
fn cells_of(groups: &Groups) -> Vec<&Cell> {
    groups.iter().flat_map(|(_, v)| v.iter()).collect()
}

/// `items` without repeats, in first-seen order, joined with commas.
fn distinct(items: impl Iterator<Item = String>) -> String {
    let mut out: Vec<String> = Vec::new();
    for x in items {
        if !out.contains(&x) {
            out.push(x);
        }
    }
    out.join(", ")
}

/// The backends of `cells`, each once.
fn backends<'a>(cells: impl IntoIterator<Item = &'a Cell>) -> String {
    distinct(cells.into_iter().map(|c| format!("`{}`", c.backend.name())))
}

/// The grid table's row for the nine users/orders steps at the reference size.
fn users_orders_row(uo: &Groups) -> String {
    let cells = cells_of(uo);
    let profiles = distinct(cells.iter().filter_map(|c| c.profile.map(|p| p.name.to_string())));
    let sizes = Sizes::REFERENCE;
    format!(
        "| users_orders | the {} reference steps | {} | {} users, {} orders | {} pragma profiles | {} |\n",
        uo.len(),
        backends(cells.iter().copied()),
        grouped(sizes.users),
        grouped(sizes.orders),
        profiles.split(", ").count(),
        cells.len()
    )
}

/// The grid table's row for the users/orders steps at other sizes (the scaling curves).
fn scaled_row(scaled: &Groups) -> String {
    let cells = cells_of(scaled);
    let sizes = distinct(cells.iter().map(|c| format!("{} orders", size_label(c.size))));
    let profiles = distinct(cells.iter().filter_map(|c| c.profile.map(|p| format!("`{}`", p.name))));
    format!(
        "| users_orders | the {} steps at other sizes (`<backend>_users_orders_<size>_<step>`; the scaling curves) | {} | {sizes} (one user per ten orders) | {profiles} | {} |\n",
        scaled.len(),
        backends(cells.iter().copied()),
        cells.len()
    )
}

/// The grid table's row for sysrepo's datastore tests.
fn sysrepo_row(sysrepo: &Groups) -> String {
    let cells = cells_of(sysrepo);
    let sizes = distinct(cells.iter().map(|c| size_label(c.size)));
    let settings = distinct(cells.iter().filter_map(|c| c.profile.map(|p| format!("`{}` (SQLite)", p.name))));
    let fresh = sysrepo.iter().filter(|(k, _)| k.ends_with("_fresh`")).count();
    format!(
        "| sysrepo | the {} datastore tests (`sysrepo_<test>`), {fresh} also `_fresh` | {} | {sizes} | {settings} | {} |\n",
        sysrepo.len() - fresh,
        backends(cells.iter().copied()),
        cells.len()
    )
}

/// The generated documents.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// `docs/results.md`.
    pub markdown: String,
    /// `docs/results.svg`.
    pub svg: String,
    /// The README's per-benchmark table for the default profile.
    pub readme_results: String,
    /// The README's profile summary table.
    pub readme_profiles: String,
}

/// How a profile did on the nine benchmarks together.
#[derive(Clone, Debug)]
pub struct Standing {
    /// The profile.
    pub profile: Profile,
    /// Benchmarks measured (9, or 8 for a profile without the rollback benchmark).
    pub benchmarks: usize,
    /// Geometric mean over its benchmarks of instructions / reference's instructions.
    pub geomean_vs_reference: f64,
    /// The largest instructions / memory floor's instructions over its benchmarks.
    pub worst_vs_memory: f64,
    /// Sum of instructions over its benchmarks.
    pub total: u64,
    /// Largest heap growth of a benchmark, pages.
    pub max_heap_pages: u64,
}

/// Rows a benchmark inserts, for stable bytes per row.
fn rows_inserted(b: Bench) -> Option<u64> {
    match b {
        Bench::InsertUsers => Some(Sizes::REFERENCE.users),
        Bench::InsertOrders | Bench::InsertOrders1mIndexed => Some(Sizes::REFERENCE.orders),
        Bench::InsertOrders100Indexed => Some(Sizes::EXTRA_ORDERS),
        _ => None,
    }
}

/// `1.23 B`, `157.49 M`, `8.64 M`.
pub fn human(v: u64) -> String {
    match v {
        v if v < 1_000_000 => format!("{:.2} K", v as f64 / 1e3),
        v if v < 1_000_000_000 => format!("{:.2} M", v as f64 / 1e6),
        v => format!("{:.2} B", v as f64 / 1e9),
    }
}

/// A measured mean rounded to a whole number, grouped: `53,633`.
pub fn int(v: f64) -> String {
    grouped(v.round().max(0.0) as u64)
}

/// `v` to three significant digits, grouped: `12,300,000` (for extrapolations and counts derived
/// from measured figures, whose later digits mean nothing); "–" for no positive number.
pub fn approx(v: f64) -> String {
    if !v.is_finite() || v <= 0.0 {
        return "–".to_string();
    }
    let magnitude = 10f64.powi(v.log10().floor() as i32 - 2);
    int((v / magnitude).round() * magnitude)
}

pub use stablebench_grid::grouped;

/// "1.23x faster", "1.10x slower" or "same" (within 0.5%) for `value` against `base`.
fn versus(value: u64, base: u64) -> String {
    ratio_text(value as f64 / base as f64, 2, "same")
}

/// A ratio of instructions (below 1: faster) as "1.23x faster" / "1.10x slower" with `decimals`
/// decimals, or `same` within 0.5%.
pub(crate) fn ratio_text(r: f64, decimals: usize, same: &str) -> String {
    if (r - 1.0).abs() < 0.005 {
        same.into()
    } else if r < 1.0 {
        format!("{:.*}x faster", decimals, 1.0 / r)
    } else {
        format!("{r:.decimals$}x slower")
    }
}

/// Wasm pages as MiB, one decimal.
pub(crate) fn mib(pages: u64) -> String {
    format!("{:.1}", pages_mib(pages))
}

/// Wasm pages as MiB.
pub(crate) fn pages_mib(pages: u64) -> f64 {
    (pages * stablebench_grid::ic::WASM_PAGE_BYTES) as f64 / 1_048_576.0
}

/// Cycles as USD at the dated rate (`prices::usd`): six decimals below a cent, four above.
pub fn usd(cycles: u64) -> String {
    let v = prices::usd(cycles);
    if v < 0.01 {
        format!("${v:.6}")
    } else {
        format!("${v:.4}")
    }
}

/// The users/orders step `bench`'s record under `profile` at the reference size, if measured.
fn record<'a>(results: &'a Results, bench: Bench, profile: &Profile) -> Option<&'a results::Record> {
    results.get(&Cell::users_orders(bench, *profile))
}

/// [`record`]'s totals.
fn step(results: &Results, bench: Bench, profile: &Profile) -> Option<Measurement> {
    record(results, bench, profile).map(|r| r.total)
}

/// The profiles' standings, fastest first (by geometric mean against the reference).
pub fn standings(results: &Results) -> Vec<Standing> {
    let get = |b: Bench, p: &Profile| step(results, b, p);
    let mut out: Vec<Standing> = PROFILES
        .iter()
        .filter_map(|p| {
            let rows: Vec<(Bench, Measurement)> = BENCHES.iter().filter_map(|b| get(*b, p).map(|m| (*b, m))).collect();
            if rows.is_empty() {
                return None;
            }
            let mut log_sum = 0.0;
            let mut worst: f64 = 0.0;
            for (b, m) in &rows {
                let reference = get(*b, &REFERENCE)?.instructions.max(1) as f64;
                let floor = get(*b, &MEMORY)?.instructions.max(1) as f64;
                log_sum += (m.instructions.max(1) as f64 / reference).ln();
                worst = worst.max(m.instructions as f64 / floor);
            }
            Some(Standing {
                profile: *p,
                benchmarks: rows.len(),
                geomean_vs_reference: (log_sum / rows.len() as f64).exp(),
                worst_vs_memory: worst,
                total: rows.iter().map(|(_, m)| m.instructions).sum(),
                max_heap_pages: rows.iter().map(|(_, m)| m.heap_increase).max().unwrap_or(0),
            })
        })
        .collect();
    out.sort_by(|a, b| a.geomean_vs_reference.total_cmp(&b.geomean_vs_reference));
    out
}

/// Whether a profile qualifies for the recommendation: atomic COMMIT/ROLLBACK, database in
/// stable memory (survives upgrades), the reference's semantics (foreign keys enforced), all
/// nine benchmarks measured, every heap growth under the default 3 GiB wasm memory limit.
pub fn qualifies(s: &Standing) -> bool {
    s.profile.deployable().is_ok()
        && s.profile.relaxes.is_none()
        && s.benchmarks == BENCHES.len()
        && s.max_heap_pages < WASM_MEMORY_LIMIT_PAGES
}

/// What a report priced as mainnet prices it shows beside each figure: canbench's figure for the
/// same benchmark (the 64 KiB pages it touched come with the mainnet results themselves).
#[derive(Clone, Copy, Debug)]
pub struct Beside<'a> {
    /// canbench's results.
    pub canbench: &'a Results,
}

/// Generates the report from `results`, priced under their model, with `beside` (canbench's
/// figure, and the pages mainnet results carry) next to each step's figure where given. `command` is how the results
/// were produced; `date` when.
pub fn generate(results: &Results, beside: Option<Beside<'_>>, command: &str, date: &str) -> Report {
    let standings = standings(results);
    let profiles = profiles_table(&standings);
    let mut md = results_head(results.model(), &profiles, command, date);
    md += &step_sections(results, beside);
    Report { markdown: md, svg: heatmap(results), readme_results: readme_table(results), readme_profiles: profiles }
}

/// The profile summary: every profile's standing over the nine steps, the cheapest qualifying one
/// marked (the recommendation is chosen by the per-call mix: [`recommend`]).
fn profiles_table(standings: &[Standing]) -> String {
    let best = standings.iter().find(|s| qualifies(s));
    let mut profiles = String::from(
        "| profile | what changes | benchmarks | geometric mean vs reference | worst vs memory floor | instructions, all benchmarks | deployable |\n|---|---|---:|---|---:|---:|---|\n",
    );
    for s in standings {
        let deploy = match s.profile.deployable() {
            Ok(()) if let Some(r) = s.profile.relaxes => format!("yes, but {r}"),
            Ok(()) => "yes".to_string(),
            Err(_) if s.profile.storage == Storage::Heap => "no: heap, lost on upgrade".to_string(),
            Err(_) => "no: not atomic".to_string(),
        };
        let mark = if best.is_some_and(|b| b.profile.name == s.profile.name) {
            " **(cheapest qualifying over the nine steps)**"
        } else {
            ""
        };
        let _ = writeln!(
            profiles,
            "| `{}`{mark} | {} | {} | {} | {:.2}x | {} | {deploy} |",
            s.profile.name,
            s.profile.source,
            s.benchmarks,
            ratio_text(s.geomean_vs_reference, 3, "same"),
            s.worst_vs_memory,
            human(s.total),
        );
    }
    profiles
}

/// The README's per-benchmark table: the nine steps under the default profile.
fn readme_table(results: &Results) -> String {
    let get = |b: Bench, p: &Profile| step(results, b, p);
    let mut readme = String::from(
        "| seed row | benchmark | instructions | heap increase | stable memory increase | fits a 5 B query | fits a 40 B update |\n|---|---|---:|---:|---:|---|---|\n",
    );
    for (i, b) in BENCHES.iter().enumerate() {
        if let Some(m) = get(*b, &stablebench::pragma::DEFAULT) {
            let yes = |ok: bool| if ok { "yes" } else { "no" };
            let _ = writeln!(
                readme,
                "| {} | `{}` | {} ({}) | {} pages | {} pages | {} | {} |",
                i + 1,
                b.name(),
                human(m.instructions),
                grouped(m.instructions),
                m.heap_increase,
                m.stable_memory_increase,
                yes(m.instructions <= QUERY_LIMIT),
                yes(m.instructions <= UPDATE_LIMIT)
            );
        }
    }
    readme
}

/// `docs/results.md` up to the steps: where the figures come from, the units and prices, and the
/// profile summary.
fn results_head(model: Model, profiles: &str, command: &str, date: &str) -> String {
    let mut md = String::new();
    let _ = write!(
        md,
        "# stablebench results\n\n\
         Generated by `scripts/report.sh` from `{file}`; do not edit. The numbers were\n\
         produced by `{command}` on {date} (offline runner; {model}).\n\n\
         Units: **instructions** ({whose}) unless a column says cycles or USD. Costs are\n\
         for running the step as one update on a 13-node application subnet: {} cycles per message plus\n\
         {} cycle per instruction; queries are free. USD at 1 T cycles = 1 XDR = {} USD ({}).\n\
         Heap and stable growth are in MiB (64 KiB wasm pages). \"vs reference\" compares with the seed's\n\
         profile, \"vs floor\" with `memory` (the database in the heap, no stable memory at all).\n\n\
         ![Instructions against the reference profile](results.svg)\n\n## Profiles\n\n\
         Every profile but `reference`, `ic_rusqlite` and `memory` is the reference with one setting\n\
         changed, or with two (\"combined\" under what changes). Ranked by\n\
         the geometric mean, over the nine benchmarks, of instructions against the reference (each\n\
         benchmark counts the same, whatever its size). A profile qualifies for the recommendation if\n\
         COMMIT/ROLLBACK stay atomic, the database is in stable memory (it survives upgrades), it keeps\n\
         the reference's semantics (foreign keys enforced), it ran all nine benchmarks, and no benchmark\n\
         grows the heap past the 3 GiB default wasm memory limit.\n\n{profiles}\n",
        prices::UPDATE_BASE_CYCLES,
        prices::CYCLES_PER_INSTRUCTION,
        prices::USD_PER_TRILLION_CYCLES,
        prices::RATE_DATE,
        file = model.file(),
        model = model.described(),
        whose = model.whose(),
    );
    md
}

/// A section per step: every profile's figures, with `beside` (canbench's, and the pages
/// `results` carry) where given.
fn step_sections(results: &Results, beside: Option<Beside<'_>>) -> String {
    let get = |b: Bench, p: &Profile| step(results, b, p);
    let mut md = String::new();
    let (beside_head, beside_rule) = match beside {
        Some(_) => (" canbench | pages accessed / written |", "---:|---:|"),
        None => ("", ""),
    };
    for (i, b) in BENCHES.iter().enumerate() {
        let _ = write!(
            md,
            "## {}. `{}`\n\n{}.\n\n| profile | instructions |{beside_head} vs reference | vs floor | heap MiB | stable MiB | stable bytes per row | 5 B query | 40 B update | cycles as an update | USD |\n|---|---:|{beside_rule}---|---:|---:|---:|---:|---|---|---:|---:|\n",
            i + 1,
            b.name(),
            b.seed_row()
        );
        let (reference, floor) = (get(*b, &REFERENCE), get(*b, &MEMORY));
        for p in PROFILES.iter() {
            let Some(r) = record(results, *b, p) else { continue };
            let m = r.total;
            let per_row = rows_inserted(*b).map_or("-".to_string(), |n| {
                format!("{:.1}", (m.stable_memory_increase * stablebench_grid::ic::WASM_PAGE_BYTES) as f64 / n as f64)
            });
            let cycles = prices::update_cycles(m.instructions);
            let yes = |ok: bool| if ok { "yes" } else { "**no**" };
            let cols = beside.map_or(String::new(), |x| {
                let canbench = step(x.canbench, *b, p).map_or("–".into(), |c| human(c.instructions));
                let pages =
                    r.pages.map_or("–".into(), |q| format!("{} / {}", grouped(q.accessed()), grouped(q.written())));
                format!(" {canbench} | {pages} |")
            });
            let _ = writeln!(
                md,
                "| `{}` | {} |{cols} {} | {} | {} | {} | {per_row} | {} | {} | {} | {} |",
                p.name,
                human(m.instructions),
                reference.map_or("-".into(), |r| versus(m.instructions, r.instructions)),
                floor.map_or("-".into(), |f| format!("{:.2}x", m.instructions as f64 / f.instructions.max(1) as f64)),
                mib(m.heap_increase),
                mib(m.stable_memory_increase),
                yes(m.instructions <= QUERY_LIMIT),
                yes(m.instructions <= UPDATE_LIMIT),
                grouped(cycles),
                usd(cycles),
            );
        }
        md.push('\n');
    }
    md
}

/// A heatmap: profiles down, benchmarks across, each cell the ratio to the reference profile
/// (green faster, red slower).
fn heatmap(results: &Results) -> String {
    let (label_w, cell_w, cell_h, top) = (150, 96, 22, 92);
    let width = label_w + cell_w * BENCHES.len() + 10;
    let height = top + cell_h * PROFILES.len() + 40;
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" font-family=\"sans-serif\" font-size=\"11\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"8\" y=\"18\" font-size=\"14\" font-weight=\"bold\">Instructions against the reference profile (x faster / x slower)</text>\n"
    );
    for (j, b) in BENCHES.iter().enumerate() {
        let x = label_w + j * cell_w + cell_w / 2;
        let short = b.name().trim_start_matches("sqlite_").replace('_', " ");
        let half = short.len() / 2;
        let (l1, l2) = short.split_at(short[..half].rfind(' ').unwrap_or(half));
        let _ = writeln!(s, "<text x=\"{x}\" y=\"{}\" text-anchor=\"middle\">{}</text><text x=\"{x}\" y=\"{}\" text-anchor=\"middle\">{}</text>", top - 30, l1.trim(), top - 16, l2.trim());
    }
    for (i, p) in PROFILES.iter().enumerate() {
        let y = top + i * cell_h;
        let _ = writeln!(s, "<text x=\"8\" y=\"{}\">{}</text>", y + 15, p.name);
        for (j, b) in BENCHES.iter().enumerate() {
            let x = label_w + j * cell_w;
            let cell = step(results, *b, p);
            let reference = step(results, *b, &REFERENCE);
            let (fill, text) = match (cell, reference) {
                (Some(m), Some(r)) => {
                    let ratio = m.instructions.max(1) as f64 / r.instructions.max(1) as f64;
                    let t = (ratio.ln() / 3f64.ln()).clamp(-1.0, 1.0); // 3x either way is full colour
                    let fill = if t < 0.0 {
                        let k = (-t * 160.0) as u8;
                        format!("rgb({},{},{})", 255 - k, 255, 255 - k)
                    } else {
                        let k = (t * 160.0) as u8;
                        format!("rgb(255,{},{})", 255 - k, 255 - k)
                    };
                    let text = ratio_text(ratio, 2, "=");
                    (fill, text)
                }
                _ => ("rgb(235,235,235)".to_string(), "n/a".to_string()),
            };
            let _ = writeln!(
                s,
                "<rect x=\"{x}\" y=\"{y}\" width=\"{}\" height=\"{}\" fill=\"{fill}\" stroke=\"white\"/><text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{text}</text>",
                cell_w - 1,
                cell_h - 1,
                x + cell_w / 2,
                y + 15
            );
        }
    }
    let _ = writeln!(s, "<text x=\"8\" y=\"{}\" fill=\"#555\">Green: fewer instructions than reference; red: more (full colour at 3x). n/a: not measured (journal_off cannot roll back).</text>", height - 14);
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_marker_is_spliced_in_the_one_document_that_holds_it() {
        let doc = |name: &str, text: &str| (name.to_string(), text.to_string());
        let mut docs = vec![doc("a", "x\n<!-- t:begin -->\nold\n<!-- t:end -->\n"), doc("b", "y\n")];
        super::splice_in(&mut docs, "t", "new\n").unwrap();
        assert_eq!(docs[0].1, "x\n<!-- t:begin -->\nnew\n<!-- t:end -->\n");
        assert_eq!(super::fragment_in(&docs, "t").unwrap(), "new\n");
        // Under docs/, a README link into docs/ is made relative to the page.
        let mut pages = vec![doc("docs/p.md", "<!-- t:begin -->\n<!-- t:end -->\n")];
        super::splice_in(&mut pages, "t", "[a](docs/a.md) [b](../b.md)\n").unwrap();
        assert_eq!(super::fragment_in(&pages, "t").unwrap(), "[a](a.md) [b](../b.md)\n");
        assert!(super::splice_in(&mut docs, "u", "").unwrap_err().contains("no document"));
        docs[1].1 = docs[0].1.clone();
        assert!(super::fragment_in(&docs, "t").unwrap_err().contains("2 documents have"));
    }

    use super::*;

    #[test]
    fn splice_replaces_only_between_the_markers_and_names_a_missing_one() {
        let doc = "a\n<!-- t:begin -->\nold\n<!-- t:end -->\nb\n";
        assert_eq!(splice(doc, "t", "new\n").unwrap(), "a\n<!-- t:begin -->\nnew\n<!-- t:end -->\nb\n");
        assert_eq!(splice(doc, "u", "x").unwrap_err(), "no line <!-- u:begin -->");
        assert_eq!(splice("<!-- t:begin -->\n", "t", "x").unwrap_err(), "no <!-- t:end --> after <!-- t:begin -->");
    }

    #[test]
    fn ratios_and_numbers_read_as_people_write_them() {
        assert_eq!(versus(50, 100), "2.00x faster");
        assert_eq!(versus(150, 100), "1.50x slower");
        assert_eq!(versus(1001, 1000), "same");
        assert_eq!(grouped(1883090070), "1,883,090,070");
        assert_eq!(human(157_486_960), "157.49 M");
    }

    #[test]
    fn the_fastest_qualifying_profile_is_atomic_in_stable_memory_and_keeps_foreign_keys() {
        let mut named = std::collections::BTreeMap::new();
        for b in BENCHES {
            for (p, ins) in [
                ("reference", 100),
                ("memory", 10),
                ("journal_off", 20),
                ("foreign_keys_off", 50),
                ("sync_off", 90),
                ("page_8k", 95),
            ] {
                if p == "journal_off" && b == Bench::DeleteOrders100kRollback {
                    continue;
                }
                let profile = PROFILES.iter().find(|q| q.name == p).unwrap();
                let total = Measurement { calls: 1, instructions: ins, ..Default::default() };
                named.insert(b.profiled_name(profile), results::Record { total, ..Default::default() });
            }
        }
        let s = standings(&Results::new(named).unwrap());
        assert_eq!(s[0].profile.name, "memory");
        let best = s.iter().find(|s| qualifies(s)).unwrap();
        assert_eq!(best.profile.name, "sync_off");
        assert!((best.geomean_vs_reference - 0.9).abs() < 1e-9);
        assert!((best.worst_vs_memory - 9.0).abs() < 1e-9);
    }
}
