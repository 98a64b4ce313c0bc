//! docs/calibration.md's figures, generated from what `scripts/calibrate.sh` committed:
//! calibration/results.csv (every benchmark total and scope as PocketIC recorded it in the
//! project's canbench_results.yml and as the offline runner measured it) and calibration/sets.csv
//! (what each set is, and the run that measured it). The doc holds them between markers; this
//! test fails when they differ from what the files give, checks the files against calibrate.sh's
//! `SETS`, and asserts the claims the doc's prose makes about the data, so a run that breaks one
//! fails until the prose is mended. After a run of calibrate.sh, regenerate the doc with
//! `STABLEBENCH_REGENERATE_CALIBRATION=1 cargo test --release --locked -p stablebench-report --test calibration`.

use stablebench_report::{fragment, grouped, splice};

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
const DOC: &str = "docs/calibration.md";
const REGENERATE: &str = "STABLEBENCH_REGENERATE_CALIBRATION";
const RESULTS: &str = "calibration/results.csv";
const RESULTS_HEADER: &str = "set,directory,benchmark,scope,pocketic_instructions,pocketic_heap_increase,\
pocketic_stable_memory_increase,pocketic_calls,runner_instructions,runner_heap_increase,\
runner_stable_memory_increase,runner_calls";
const SETS: &str = "calibration/sets.csv";
const SETS_HEADER: &str = "set,repository,commit,toolchain,canbench,pocketic,run_date,runner";
/// Not measured by calibrate.sh: how many iterations of each vec benchmark allocate a buffer
/// (its first line says how they were counted); the doc's vec table joins them with the results.
const VEC: &str = "calibration/vec_allocating_iterations.csv";
const VEC_HEADER: &str = "benchmark,allocating_iterations,note";
/// A deviation above this, in percent of PocketIC's instructions, counts in the summary's last
/// column (calibrate.sh's threshold since its first run).
const NOTABLE: f64 = 0.1;
/// canbench's default noise threshold in percent: its CI fails a pull request whose committed
/// results are further off than this from what canbench measures.
const CANBENCH_NOISE: f64 = 2.0;
/// The set the doc's analysis of the deviations is about.
const STABLE_STRUCTURES: &str = "stable-structures";

/// What one side (PocketIC's committed results, or the runner) measured for a total or a scope.
#[derive(Clone, Copy, PartialEq, Debug)]
struct Side {
    instructions: u64,
    heap: u64,
    stable: u64,
    /// A scope's calls; none for a benchmark total.
    calls: Option<u64>,
}

/// One row of results.csv: a benchmark's total (empty scope) or one of its scopes. A side is
/// `None` where only the other side has the row.
struct Row {
    set: String,
    directory: String,
    benchmark: String,
    scope: String,
    pocketic: Option<Side>,
    runner: Option<Side>,
}

impl Row {
    /// Both sides, where both have the row.
    fn sides(&self) -> Option<(Side, Side)> {
        Some((self.pocketic?, self.runner?))
    }

    fn both(&self) -> (Side, Side) {
        self.sides().unwrap_or_else(|| panic!("{} ({}) has one side only", self.name(), self.set))
    }

    /// Runner minus PocketIC instructions.
    fn delta(&self) -> i64 {
        let (p, r) = self.both();
        r.instructions as i64 - p.instructions as i64
    }

    /// The deviation in percent of PocketIC's instructions (calibrate.sh's `pct`, float for float).
    fn pct(&self) -> f64 {
        match self.both().0.instructions {
            0 if self.delta() == 0 => 0.0,
            0 => f64::INFINITY,
            i => self.delta() as f64 * 100.0 / i as f64,
        }
    }

    /// Every figure equal: instructions, heap and stable growth, and a scope's calls.
    fn exact(&self) -> bool {
        let (p, r) = self.both();
        p == r
    }

    fn name(&self) -> String {
        match self.scope.as_str() {
            "" => self.benchmark.clone(),
            s => format!("{} (scope {s})", self.benchmark),
        }
    }
}

/// One set as it ran: calibrate.sh's fields (from sets.csv), when and with which runner, and
/// its directories in the script's order (those with results).
struct SetRun {
    name: String,
    commit: String,
    toolchain: String,
    canbench: String,
    pocketic: String,
    run_date: String,
    runner: String,
    directories: Vec<String>,
}

/// One line of the vec annotation: a benchmark, its iterations that allocate, and a note.
struct Allocating {
    benchmark: String,
    iterations: i64,
    note: String,
}

/// The committed calibration: its sets in calibrate.sh's order, every row of results.csv, and
/// the vec annotation.
struct Calibration {
    sets: Vec<SetRun>,
    rows: Vec<Row>,
    vec: Vec<Allocating>,
}

impl Calibration {
    /// Rows both sides have, in the doc's order: calibrate.sh's sets and directories, then the
    /// file's (by benchmark, total before scopes).
    fn compared(&self) -> Vec<&Row> {
        let mut out = Vec::new();
        for s in &self.sets {
            for d in &s.directories {
                out.extend(self.rows.iter().filter(|r| r.set == s.name && &r.directory == d && r.sides().is_some()));
            }
        }
        out
    }

    /// The benchmark totals both sides have that `keep` selects, in the doc's order.
    fn totals(&self, keep: impl Fn(&Row) -> bool) -> Vec<&Row> {
        self.compared().into_iter().filter(|r| r.scope.is_empty() && keep(r)).collect()
    }

    /// The total of `benchmark` in stable-structures (where the analysis's names are unique).
    fn total(&self, benchmark: &str) -> &Row {
        let found = self.totals(|r| r.set == STABLE_STRUCTURES && r.benchmark == benchmark);
        match found[..] {
            [r] => r,
            _ => panic!("{RESULTS}: {} totals of {benchmark} in {STABLE_STRUCTURES}", found.len()),
        }
    }
}

fn read(path: &str) -> String {
    std::fs::read_to_string(format!("{ROOT}/{path}")).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The records of a committed CSV file under `header` (lines starting with `#` are comments); no
/// field holds a comma or a quote, so a plain split reads what Python's csv module wrote.
fn records(path: &str, header: &str) -> Vec<Vec<String>> {
    let text = read(path);
    let mut lines = text.lines().filter(|l| !l.starts_with('#'));
    assert_eq!(lines.next(), Some(header), "{path}: the header calibrate.sh writes");
    let n = header.split(',').count();
    lines
        .map(|l| {
            let f: Vec<String> = l.split(',').map(String::from).collect();
            assert!(f.len() == n && !l.contains('"'), "{path}: {n} plain fields expected: {l}");
            f
        })
        .collect()
}

/// One side's four fields of a results.csv record (all empty: the side has no such row).
fn side(f: &[String]) -> Option<Side> {
    if f.iter().all(|x| x.is_empty()) {
        return None;
    }
    let n = |x: &String| x.parse::<u64>().unwrap_or_else(|e| panic!("{RESULTS}: {x:?}: {e}"));
    Some(Side { instructions: n(&f[0]), heap: n(&f[1]), stable: n(&f[2]), calls: (!f[3].is_empty()).then(|| n(&f[3])) })
}

/// calibrate.sh's `SETS`, in its order: per set, its first six fields (name, repository, commit,
/// toolchain, canbench, PocketIC) and its benchmark directories.
fn script_sets() -> Vec<(Vec<String>, Vec<String>)> {
    let script = read("scripts/calibrate.sh");
    let start = script.find("\nSETS=(\n").expect("calibrate.sh has no line SETS=(") + "\nSETS=(\n".len();
    let end = start + script[start..].find("\n)").expect("calibrate.sh's SETS has no closing line");
    let entries = script[start..end].lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#'));
    entries
        .map(|l| {
            let f: Vec<String> = l.trim_matches('"').split('|').map(String::from).collect();
            assert_eq!(f.len(), 7, "calibrate.sh SETS entry {l}");
            let dirs = f[6].split_whitespace().map(String::from).collect();
            (f[..6].to_vec(), dirs)
        })
        .collect()
}

/// Reads the committed files; sets and directories come in calibrate.sh's order.
fn load() -> Calibration {
    let rows: Vec<Row> = records(RESULTS, RESULTS_HEADER)
        .into_iter()
        .map(|f| Row {
            set: f[0].clone(),
            directory: f[1].clone(),
            benchmark: f[2].clone(),
            scope: f[3].clone(),
            pocketic: side(&f[4..8]),
            runner: side(&f[8..12]),
        })
        .collect();
    let runs = records(SETS, SETS_HEADER);
    let sets = script_sets()
        .into_iter()
        .filter_map(|(fields, dirs)| {
            let run = runs.iter().find(|r| r[0] == fields[0])?;
            let has = |d: &String| rows.iter().any(|r| r.set == run[0] && &r.directory == d);
            Some(SetRun {
                name: run[0].clone(),
                commit: run[2].clone(),
                toolchain: run[3].clone(),
                canbench: run[4].clone(),
                pocketic: run[5].clone(),
                run_date: run[6].clone(),
                runner: run[7].clone(),
                directories: dirs.into_iter().filter(has).collect(),
            })
        })
        .collect();
    let vec = records(VEC, VEC_HEADER)
        .into_iter()
        .map(|f| Allocating {
            iterations: f[1].parse().unwrap_or_else(|e| panic!("{VEC}: {f:?}: {e}")),
            benchmark: f[0].clone(),
            note: f[2].clone(),
        })
        .collect();
    Calibration { sets, rows, vec }
}

/// `set/basename`, the label calibrate.sh gives a directory.
fn label(set: &str, directory: &str) -> String {
    format!("{set}/{}", directory.rsplit('/').next().unwrap())
}

/// Python's `{x:.Ne}` (two-digit exponent with its sign): `1.36e-05`, `+1.4e-05` with `plus`.
fn sci(x: f64, digits: usize, plus: bool) -> String {
    let s = if plus { format!("{x:+.digits$e}") } else { format!("{x:.digits$e}") };
    let (mantissa, exp) = s.split_once('e').unwrap();
    let exp: i32 = exp.parse().unwrap();
    format!("{mantissa}e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs())
}

/// calibrate.sh's `fmt_pct` of a non-negative percentage: `0 %`, `1.36e-05 %`, `0.5146 %`.
fn fmt_pct(x: f64) -> String {
    if x == 0.0 {
        "0 %".into()
    } else if x == f64::INFINITY {
        "inf %".into()
    } else if x < 0.0001 {
        format!("{} %", sci(x, 2, false))
    } else {
        format!("{x:.4} %")
    }
}

/// A signed percentage for prose: `+11.3551 %`, `−3.9823 %`, `+1.36e-05 %`, `0 %`.
fn signed_pct(x: f64) -> String {
    if x == 0.0 {
        "0 %".into()
    } else {
        format!("{}{}", if x < 0.0 { '−' } else { '+' }, fmt_pct(x.abs()))
    }
}

/// A signed, grouped count for prose: `+2,097,153`, `−3,864`, `0`.
fn signed(v: i64) -> String {
    match v {
        0 => "0".into(),
        v => format!("{}{}", if v < 0 { '−' } else { '+' }, grouped(v.unsigned_abs())),
    }
}

/// The first of `rows` with the largest absolute deviation (calibrate.sh's `max`).
fn largest<'a>(rows: &[&'a Row]) -> &'a Row {
    rows.iter().skip(1).fold(rows[0], |w, r| if r.pct().abs() > w.pct().abs() { r } else { w })
}

/// How many of `rows` agree exactly.
fn exact_count(rows: &[&Row]) -> usize {
    rows.iter().filter(|r| r.exact()).count()
}

/// How many of `rows` deviate by more than `threshold` percent.
fn over(rows: &[&Row], threshold: f64) -> usize {
    rows.iter().filter(|r| r.pct().abs() > threshold).count()
}

/// calibrate.sh's `summary` of benchmark totals, as the summary table's cells: benchmarks,
/// exact, median and largest absolute deviation, and how many exceed [`NOTABLE`].
fn summary_cells(totals: &[&Row]) -> String {
    if totals.is_empty() {
        return "0 | 0 | - | - | 0".into();
    }
    let mut abs: Vec<f64> = totals.iter().map(|r| r.pct().abs()).collect();
    abs.sort_by(f64::total_cmp);
    let n = abs.len();
    let median = if n % 2 == 1 { abs[n / 2] } else { (abs[n / 2 - 1] + abs[n / 2]) / 2.0 };
    let w = largest(totals);
    let worst =
        if w.pct() == 0.0 { "0 % (all equal)".into() } else { format!("{} ({})", fmt_pct(w.pct().abs()), w.benchmark) };
    format!("{n} | {} | {} | {worst} | {}", exact_count(totals), fmt_pct(median), over(totals, NOTABLE))
}

/// The summary table: each directory, then each set.
fn summary_table(c: &Calibration) -> String {
    let mut t = format!(
        "| set / directory | benchmarks | exact | median abs Δ | max abs Δ (benchmark) | abs Δ > {NOTABLE} % |\n\
         |---|---:|---:|---:|---|---:|\n"
    );
    for s in &c.sets {
        for d in &s.directories {
            let totals = c.totals(|r| r.set == s.name && &r.directory == d);
            t += &format!("| {} | {} |\n", label(&s.name, d), summary_cells(&totals));
        }
    }
    for s in &c.sets {
        let totals = c.totals(|r| r.set == s.name);
        t += &format!("| **{}** (PocketIC {}) | {} |\n", s.name, s.pocketic, summary_cells(&totals));
    }
    t
}

/// Which run measured the sets: its date and the runner's commit (calibrate.sh records both).
fn run_line(c: &Calibration) -> String {
    let mut runs: Vec<(&str, &str, Vec<&str>)> = Vec::new();
    for s in &c.sets {
        match runs.iter_mut().find(|(d, r, _)| *d == s.run_date && *r == s.runner) {
            Some((_, _, names)) => names.push(&s.name),
            None => runs.push((&s.run_date, &s.runner, vec![&s.name])),
        }
    }
    let runs: Vec<String> = runs
        .iter()
        .map(|(date, runner, names)| format!("the run of {date} with the runner at {runner} ({})", names.join(", ")))
        .collect();
    format!(
        "The figures of this page are from {}: [`calibration/results.csv`](../{RESULTS}) and \
         [`calibration/sets.csv`](../{SETS}), as calibrate.sh wrote them.\n",
        runs.join("; ")
    )
}

/// What differs in a row that does not agree exactly: instructions, then any other figure.
fn changes(r: &Row) -> String {
    let (p, o) = r.both();
    let mut parts = vec![format!("{} of {} instructions", signed(r.delta()), grouped(p.instructions))];
    let calls = (p.calls.unwrap_or(0), o.calls.unwrap_or(0));
    let others = [("heap pages", p.heap, o.heap), ("stable pages", p.stable, o.stable), ("calls", calls.0, calls.1)];
    for (what, a, b) in others.into_iter().filter(|(_, a, b)| a != b) {
        parts.push(format!("{what} {a} on PocketIC, {b} on the runner"));
    }
    parts.join(", ")
}

/// One bullet per set: how much agrees exactly, and what the rest is.
fn set_bullet(c: &Calibration, s: &SetRun) -> String {
    let rows: Vec<&Row> = c.compared().into_iter().filter(|r| r.set == s.name).collect();
    let (totals, scopes): (Vec<&Row>, Vec<&Row>) = rows.iter().partition(|r| r.scope.is_empty());
    let scopes_part = match scopes.len() {
        0 => String::new(),
        n => format!(" and {} of {n} scopes", exact_count(&scopes)),
    };
    let head = format!(
        "- **{}** (PocketIC {}): {} of {} benchmarks{scopes_part} agree exactly (instructions, heap and stable growth, calls)",
        s.name,
        s.pocketic,
        exact_count(&totals),
        totals.len()
    );
    let off: Vec<&Row> = rows.iter().copied().filter(|r| !r.exact()).collect();
    let tail = match off.len() {
        0 => {
            let max = |f: fn(&Side) -> u64| grouped(rows.iter().map(|r| f(&r.both().0)).max().unwrap_or(0));
            format!(
                ", among them benchmarks of up to {} instructions, {} pages of heap growth and {} pages of stable growth",
                max(|s| s.instructions),
                max(|s| s.heap),
                max(|s| s.stable)
            )
        }
        1..=3 => {
            let off: Vec<String> = off.iter().map(|r| format!("{} {}", r.name(), changes(r))).collect();
            format!("; the others: {}", off.join("; "))
        }
        _ => {
            let notable: Vec<&Row> = totals.iter().copied().filter(|r| r.pct().abs() > NOTABLE).collect();
            let higher = notable.iter().filter(|r| r.delta() > 0).count();
            let w = largest(&totals);
            format!(
                "; {} deviate by more than {NOTABLE} % ({higher} higher on the runner, {} lower), {} by more than \
                 canbench's {CANBENCH_NOISE} %; the largest, relative to its figure, is `{}`: {} ({})",
                notable.len(),
                notable.len() - higher,
                over(&totals, CANBENCH_NOISE),
                w.benchmark,
                changes(w),
                signed_pct(w.pct())
            )
        }
    };
    format!("{head}{tail}.\n")
}

/// A bullet on one growth figure (`field` of a side): where the two sides agree, and each row
/// where they do not.
fn growth_bullet(c: &Calibration, what: &str, field: fn(&Side) -> u64) -> String {
    let rows = c.compared();
    let (totals, scopes): (Vec<&Row>, Vec<&Row>) = rows.iter().partition(|r| r.scope.is_empty());
    let agree = |rows: &[&Row]| rows.iter().filter(|r| field(&r.both().0) == field(&r.both().1)).count();
    let count = |rows: &[&Row], what: &str| match agree(rows) {
        n if n == rows.len() => format!("all {n} {what}"),
        n => format!("{n} of {} {what}", rows.len()),
    };
    let off: Vec<String> = rows
        .iter()
        .filter(|r| field(&r.both().0) != field(&r.both().1))
        .map(|r| {
            let (p, o) = r.both();
            let (a, b) = (field(&p), field(&o));
            format!(
                "`{}` ({}: {a} page{} on PocketIC, {b} on the runner)",
                r.name(),
                label(&r.set, &r.directory),
                plural(a)
            )
        })
        .collect();
    let off = if off.is_empty() { String::new() } else { format!("; it differs in {}", off.join(", ")) };
    format!("- {what} agrees for {} and {}{off}.\n", count(&totals, "benchmarks"), count(&scopes, "scopes"))
}

/// The plural ending of a count of pages.
fn plural(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// The summary's bullets: one per set, then heap and stable growth, then rows one side lacks.
fn findings(c: &Calibration) -> String {
    let mut out: String = c.sets.iter().map(|s| set_bullet(c, s)).collect();
    out += &growth_bullet(c, "stable_memory_increase", |s| s.stable);
    out += &growth_bullet(c, "heap_increase", |s| s.heap);
    let one_sided: Vec<String> = c
        .rows
        .iter()
        .filter(|r| r.sides().is_none())
        .map(|r| {
            format!(
                "{} ({}, {} only)",
                r.name(),
                label(&r.set, &r.directory),
                if r.runner.is_none() { "PocketIC" } else { "runner" }
            )
        })
        .collect();
    out += &match one_sided.len() {
        0 => "- Every benchmark and scope ran on both sides.\n".to_string(),
        _ => format!("- On one side only: {}.\n", one_sided.join(", ")),
    };
    out
}

/// One bullet per directory with a total that does not agree exactly: how many are off by more
/// than [`NOTABLE`] and in which direction, how many are exact, and the three largest.
fn directories(c: &Calibration) -> String {
    let mut out = String::new();
    for s in &c.sets {
        for d in &s.directories {
            let totals = c.totals(|r| r.set == s.name && &r.directory == d);
            if totals.iter().all(|r| r.exact()) {
                continue;
            }
            let notable: Vec<&Row> = totals.iter().copied().filter(|r| r.pct().abs() > NOTABLE).collect();
            let higher = notable.iter().filter(|r| r.delta() > 0).count();
            let mut off: Vec<&Row> = totals.iter().copied().filter(|r| r.delta() != 0).collect();
            off.sort_by(|a, b| b.pct().abs().total_cmp(&a.pct().abs()));
            let top: Vec<String> = off
                .iter()
                .take(3)
                .map(|r| format!("`{}` {} ({})", r.benchmark, signed(r.delta()), signed_pct(r.pct())))
                .collect();
            let signs = match notable.len() {
                0 => String::new(),
                n => format!(" ({higher} higher, {} lower)", n - higher),
            };
            out += &format!(
                "- {}: {} of {} above {NOTABLE} %{signs}, {} exact; largest {}.\n",
                label(&s.name, d),
                notable.len(),
                totals.len(),
                exact_count(&totals),
                top.join(", ")
            );
        }
    }
    out
}

/// A table of benchmark totals with grouped figures; `directory` adds their directory.
fn totals_table(rows: &[&Row], directory: bool) -> String {
    let (dh, ds) = if directory { (" directory |", "---|") } else { ("", "") };
    let mut t = format!("| benchmark |{dh} PocketIC | runner | Δ | Δ % |\n|---|{ds}---:|---:|---:|---:|\n");
    for r in rows {
        let (p, o) = r.both();
        let dir = if directory { format!(" {} |", label(&r.set, &r.directory)) } else { String::new() };
        t += &format!(
            "| `{}` |{dir} {} | {} | {} | {} |\n",
            r.benchmark,
            grouped(p.instructions),
            grouped(o.instructions),
            signed(r.delta()),
            signed_pct(r.pct())
        );
    }
    t
}

/// The totals further off than canbench's own CI allows, the largest first.
fn over_noise(c: &Calibration) -> String {
    let mut rows = c.totals(|r| r.pct().abs() > CANBENCH_NOISE);
    rows.sort_by(|a, b| b.pct().abs().total_cmp(&a.pct().abs()));
    totals_table(&rows, true)
}

/// The vec deviations against 6 × the iterations that allocate (calibration's annotation file),
/// and where vec_insert_u64's remainder appears again.
fn vec_table(c: &Calibration) -> String {
    let mut t = String::from(
        "| benchmark | Δ | iterations that allocate | 6 × that | Δ − 6 × that |\n|---|---:|---:|---:|---:|\n",
    );
    for a in &c.vec {
        let n = a.iterations;
        let note = if a.note.is_empty() { String::new() } else { format!(" ({})", a.note) };
        let d = c.total(&a.benchmark).delta();
        t += &format!(
            "| {} | {} | {}{note} | {} | {} |\n",
            a.benchmark,
            signed(d),
            grouped(n as u64),
            grouped(6 * n as u64),
            signed(d - 6 * n)
        );
    }
    let (rest, one, thousand) =
        (vec_rest(c), c.total("write_chunks_stable_1").delta(), c.total("write_chunks_stable_1k").delta());
    t + &format!(
        "\nThe remainder {} of vec_insert_u64 appears again in io_chunks' `write_chunks_stable_1k`: {} = {} {} {}, \
         where `write_chunks_stable_1` and `write_chunks_stable_1m` deviate by {}.\n",
        signed(rest),
        signed(thousand),
        signed(one),
        if rest < 0 { '−' } else { '+' },
        grouped(rest.unsigned_abs()),
        signed(one)
    )
}

/// vec_insert_u64's deviation less 6 × its allocating iterations.
fn vec_rest(c: &Calibration) -> i64 {
    let a = c.vec.iter().find(|a| a.benchmark == "vec_insert_u64").expect("vec_insert_u64 in the annotation");
    c.total("vec_insert_u64").delta() - 6 * a.iterations
}

/// btreemap's three range variants and the 20-entry, 10 MiB scans, and the range's step over the
/// scan.
fn ranges(c: &Calibration) -> String {
    let variant =
        |b: &str| ["count_", "key_sum_", "value_sum_"].iter().any(|v| b.starts_with(&format!("btreemap_v2_range_{v}")));
    let rows = c.totals(|r| {
        r.directory.ends_with("/btreemap") && (variant(&r.benchmark) || r.benchmark.ends_with("_20_10mib"))
    });
    let step = |side: fn(&Row) -> Side| {
        let i = |b: &str| side(c.total(b)).instructions as i64;
        signed(i("btreemap_v2_range_count_20_10mib") - i("btreemap_v2_scan_iter_20_10mib"))
    };
    let scans: Vec<&&Row> =
        rows.iter().filter(|r| r.benchmark.contains("_scan_") && r.benchmark.ends_with("_20_10mib")).collect();
    let max_scan = scans.iter().map(|r| r.delta().unsigned_abs()).max().unwrap_or(0);
    totals_table(&rows, false)
        + &format!(
            "\nAt 20 entries of 10 MiB, `range_count` minus `scan_iter` is {} on PocketIC and {} on the runner; \
             the {} scans deviate by at most {}.\n",
            step(|r| r.both().0),
            step(|r| r.both().1),
            scans.len(),
            grouped(max_scan)
        )
}

/// btreemap's benchmarks without the node cache (`_nocache`) beside their cached twins.
fn nocache(c: &Calibration) -> String {
    let mut t = String::from("| benchmark | Δ % with the node cache | Δ % without (`_nocache`) |\n|---|---:|---:|\n");
    for r in c.totals(|r| r.set == STABLE_STRUCTURES && r.benchmark.ends_with("_nocache")) {
        let twin = r.benchmark.trim_end_matches("_nocache");
        let with = c.totals(|t| t.set == STABLE_STRUCTURES && t.benchmark == twin);
        let with = with.first().map_or("-".to_string(), |t| signed_pct(t.pct()));
        t += &format!("| `{twin}` | {with} | {} |\n", signed_pct(r.pct()));
    }
    t
}

/// calibrate.sh's former per-directory tables: every row, figures as the files hold them.
fn benchmark_tables(c: &Calibration) -> String {
    let mut tables = Vec::new();
    for s in &c.sets {
        for d in &s.directories {
            let mut t = format!(
                "### {} ({}, Rust {}, canbench {}, PocketIC {})\n\n\
                 | benchmark | scope | PocketIC | runner | Δ | Δ % | heap PocketIC/runner | stable PocketIC/runner | calls PocketIC/runner |\n\
                 |---|---|---:|---:|---:|---:|---|---|---|\n",
                label(&s.name, d),
                &s.commit[..8],
                s.toolchain,
                s.canbench,
                s.pocketic
            );
            for r in c.rows.iter().filter(|r| r.set == s.name && &r.directory == d) {
                t += &benchmark_row(r);
            }
            tables.push(t);
        }
    }
    tables.join("\n")
}

/// One row of a per-directory table (calibrate.sh's format: Δ % to four decimals, and in
/// scientific notation too where that shows nothing).
fn benchmark_row(r: &Row) -> String {
    let Some((p, o)) = r.sides() else {
        let which = if r.pocketic.is_none() { "runner only" } else { "PocketIC only" };
        return format!("| {} | {} | | | | {which} | | | |\n", r.benchmark, r.scope);
    };
    let d = r.pct();
    let tiny = if d == 0.0 || d.abs() >= 0.0001 { String::new() } else { format!(" ({})", sci(d, 1, true)) };
    let calls = match (p.calls, o.calls) {
        (Some(a), Some(b)) => format!("{a}/{b}"),
        _ => String::new(),
    };
    format!(
        "| {} | {} | {} | {} | {:+} | {d:+.4}{tiny} | {}/{} | {}/{} | {calls} |\n",
        r.benchmark,
        r.scope,
        p.instructions,
        o.instructions,
        r.delta(),
        p.heap,
        o.heap,
        p.stable,
        o.stable
    )
}

/// Every generated block of the doc, by marker name.
fn fragments(c: &Calibration) -> Vec<(&'static str, String)> {
    vec![
        ("calibration-run", run_line(c)),
        ("calibration-summary", summary_table(c)),
        ("calibration-findings", findings(c)),
        ("calibration-directories", directories(c)),
        ("calibration-over-noise", over_noise(c)),
        ("calibration-vec", vec_table(c)),
        ("calibration-ranges", ranges(c)),
        ("calibration-nocache", nocache(c)),
        ("calibration-tables", benchmark_tables(c)),
    ]
}

#[test]
fn the_doc_shows_the_committed_calibration() {
    let c = load();
    let have = read(DOC);
    let mut want = have.clone();
    let mut stale = Vec::new();
    for (name, body) in fragments(&c) {
        if fragment(&have, name).unwrap_or_else(|e| panic!("{DOC}: {e}")) != body {
            stale.push(name);
        }
        want = splice(&want, name, &body).unwrap();
    }
    if std::env::var_os(REGENERATE).is_some() {
        if want != have {
            std::fs::write(format!("{ROOT}/{DOC}"), want).unwrap();
        }
        return;
    }
    assert!(
        stale.is_empty(),
        "{DOC} differs from {RESULTS} and {SETS} in the blocks {}: regenerate it with \
         `{REGENERATE}=1 cargo test --release --locked -p stablebench-report --test calibration`",
        stale.join(", ")
    );
}

#[test]
fn the_committed_files_agree_with_calibrate_sh() {
    let script = script_sets();
    let runs = records(SETS, SETS_HEADER);
    let rows = load().rows;
    for run in &runs {
        let (fields, _) = script
            .iter()
            .find(|(f, _)| f[0] == run[0])
            .unwrap_or_else(|| panic!("{SETS}: {} is not in calibrate.sh's SETS", run[0]));
        assert_eq!(&run[..6], &fields[..], "{SETS}: calibrate.sh's SETS changed since {} ran: rerun it", run[0]);
        let date = run[6].as_bytes();
        assert!(date.len() == 10 && date[4] == b'-' && date[7] == b'-', "{SETS}: run date {}", run[6]);
        assert!(rows.iter().any(|r| r.set == run[0]), "{SETS}: {} has no results", run[0]);
    }
    assert!(runs.windows(2).all(|w| w[0][0] < w[1][0]), "{SETS}: sorted by set, one line each");
    let key = |r: &Row| (r.set.clone(), r.directory.clone(), r.benchmark.clone(), r.scope.clone());
    assert!(
        rows.windows(2).all(|w| key(&w[0]) < key(&w[1])),
        "{RESULTS}: sorted by set, directory, benchmark and scope, one row each"
    );
    for r in &rows {
        let at = format!("{RESULTS}: {} ({})", r.name(), label(&r.set, &r.directory));
        let (_, dirs) = script
            .iter()
            .find(|(f, _)| f[0] == r.set)
            .unwrap_or_else(|| panic!("{at}: set not in calibrate.sh's SETS"));
        assert!(dirs.contains(&r.directory), "{at}: directory not in calibrate.sh's SETS");
        assert!(runs.iter().any(|run| run[0] == r.set), "{at}: set not in {SETS}");
        assert!(r.pocketic.is_some() || r.runner.is_some(), "{at}: no figures");
        let calls = [r.pocketic, r.runner].into_iter().flatten().any(|s| s.calls.is_some());
        assert!(!calls || !r.scope.is_empty(), "{at}: calls belong to scopes only");
        if !r.scope.is_empty() {
            let total = rows.iter().any(|t| {
                t.scope.is_empty() && (&t.set, &t.directory, &t.benchmark) == (&r.set, &r.directory, &r.benchmark)
            });
            assert!(total, "{at}: a scope without its benchmark's total");
        }
    }
}

/// Fails with the doc's words where the data no longer bears them out.
fn claim(holds: bool, words: &str) {
    assert!(holds, "{DOC} says {words:?}, which {RESULTS} no longer bears out: mend the prose");
}

/// What the summary and "Runner bugs" say about the data.
#[test]
fn the_summary_claims_hold() {
    let c = load();
    let all = c.compared();
    let latest: Vec<&SetRun> = c.sets.iter().filter(|s| s.pocketic.starts_with("13.")).collect();
    let on_latest = all.iter().filter(|r| latest.iter().any(|s| s.name == r.set));
    claim(
        !latest.is_empty() && on_latest.clone().all(|r| r.exact()),
        "against it [13.0.0] every number agrees exactly",
    );
    let totals = c.totals(|_| true);
    claim(largest(&totals).benchmark == "btreemap_v2_range_count_20_10mib", "The largest is located [the profile's]");
    let notable = c.totals(|r| r.pct().abs() > NOTABLE);
    claim(notable.iter().all(|r| r.set == STABLE_STRUCTURES), "All of them are in stable-structures");
    claim(all.iter().all(|r| r.both().0.stable == r.both().1.stable), "stable growth agrees everywhere");
    let heap = |r: &Row| r.both().1.heap as i64 - r.both().0.heap as i64;
    let heap_off: Vec<&&Row> = all.iter().filter(|r| heap(r) != 0).collect();
    claim(
        heap_off.len() < 5
            && heap_off.iter().all(|r| r.set == STABLE_STRUCTURES && r.directory.ends_with("/btreemap"))
            && heap_off.iter().any(|r| heap(r) == 1)
            && heap_off.iter().any(|r| heap(r) == -1)
            && heap_off.iter().all(|r| heap(r).abs() == 1),
        "Heap growth differs in a few btreemap benchmarks by a page, in either direction",
    );
    let exact = |names: &dyn Fn(&str) -> bool| c.totals(|r| names(&r.benchmark)).iter().all(|r| r.exact());
    claim(
        exact(&|b| {
            b.starts_with("vec_insert_blob_") || b.starts_with("read_chunks_stable_") || b == "memory_manager_baseline"
        }),
        "memory_manager_baseline, vec_insert_blob_* and io_chunks' read_chunks_stable_*: exact",
    );
    claim(exact(&|b| b.starts_with("fibonacci_")), "the fibonacci benchmarks, the smallest measured: exact");
    claim(all.iter().all(|r| r.both().0.calls == r.both().1.calls), "every scope's calls equal");
}

/// What the sections on the deviations say about the data.
#[test]
fn the_deviation_claims_hold() {
    let c = load();
    let t = |b: &str| c.total(b);
    claim(over(&c.totals(|_| true), CANBENCH_NOISE) >= 2, "Several deviations are above 2 %");
    let ss = c.totals(|r| r.set == STABLE_STRUCTURES);
    claim(over(&ss, 1.0) * 2 < ss.len(), "mostly below 1 %");
    claim(
        c.vec.len() == c.totals(|r| r.directory.ends_with("/vec")).len(),
        "[a line of the annotation per vec benchmark]",
    );
    for a in c.vec.iter().filter(|a| a.benchmark != "vec_insert_u64") {
        claim(t(&a.benchmark).delta() == 6 * a.iterations, "Every vec deviation is exactly 6 times ...");
    }
    let (one, thousand) = (t("write_chunks_stable_1").delta(), t("write_chunks_stable_1k").delta());
    claim(
        vec_rest(&c) != 0 && thousand - one == vec_rest(&c) && t("write_chunks_stable_1m").delta() == one,
        "but for a remainder in vec_insert_u64 that another benchmark shows too",
    );
    claim(t("read_chunks_vec_1m").delta().abs() < 100, "[read_chunks_vec_1m] under a hundred instructions off in all");
    let e560 = c.sets.iter().find(|s| s.toolchain == "1.86.0").expect("the set built with Rust 1.86.0");
    let row = |b: &str, scope: &str| {
        *c.compared().iter().find(|r| r.set == e560.name && r.benchmark == b && r.scope == scope).expect(b)
    };
    claim(
        row("insert_users", "").exact() && row("remove_users", "").exact(),
        "the canbench examples built with 1.86.0 ... exact",
    );
    let serialize = row("pre_upgrade_bench", "serialize_state").delta();
    claim(serialize != 0 && serialize % 6 == 0, "[serialize_state's] deviation ... is a multiple of 6");
    for size in ["1k_0b", "1k_10kib", "20_10mib"] {
        let d = |v: &str| t(&format!("btreemap_v2_range_{v}_{size}")).delta();
        let same = d("count") == d("key_sum") && (d("count") == d("value_sum")) == (size != "1k_10kib");
        claim(same, "the same amount in all three variants at each size but one (`value_sum` at 1k entries of 10 KiB)");
    }
    claim(t("btreemap_v2_range_count_20_10mib").delta() == (1 << 21) + 1, "at 20 entries of 10 MiB by 2^21 + 1");
    for b in ["btreemap_v2_get_zipf_10k_u64_u64", "btreemap_v2_get_zipf_100k_u64_u64"] {
        let several = t(&format!("{b}_nocache")).pct() < -CANBENCH_NOISE && t(b).pct().abs() < 1.0;
        claim(several, "several percent lower on the runner without the cache, within a fraction of a percent with it");
    }
    let signs = t("btreemap_v2_get_zipf_10k_u64_u64_nocache").delta() < 0
        && t("btreemap_v2_get_100k_u64_u64_nocache").delta() > 0;
    claim(signs, "The no-cache rows differ in sign");
    for r in c.totals(|r| r.set == STABLE_STRUCTURES && r.directory.ends_with("/io_chunks")) {
        let ok = r.benchmark.contains("btreemap") || r.pct().abs() < 0.01;
        claim(ok, "In io_chunks only the btreemap-backed rows are above 0.1 percent; [the others] within a hundredth");
    }
    let (p, o) = t("btreemap_v2_range_count_20_10mib").both();
    claim((p.heap, o.heap) == (0, 0), "`heap_increase` shows no growth on either side");
}
