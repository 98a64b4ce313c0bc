//! The generated claims, read as a reader reads them and checked against their inputs: each kind
//! of sentence the reports generate (a ratio, a fit, an extrapolation, a ranking, a count of
//! answers) is recomputed here from the figures beside it or from the committed results file it
//! came from, with arithmetic of its own rather than the generators' code, and the test fails
//! when the numbers do not support the words. `readme.rs` and the other report tests check that
//! each page is what its generator writes; this test checks that what it writes follows.
//!
//! Every check also counts the sentences it read, and fails when it read none: a reworded page
//! must be checked again, not pass unread.

use regex::Regex;
use stablebench_grid::ic::{HEAP_MAP_CEILING_BYTES, UPDATE_INSTRUCTION_LIMIT};
use stablebench_grid::shapes::{Pattern, Shape, OPS_PER_MESSAGE};
use stablebench_pragmas::DEFAULT_WASM_MEMORY_LIMIT_BYTES;
use stablebench_report::shapes::Results as ShapeResults;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

fn read(path: &str) -> String {
    std::fs::read_to_string(format!("{ROOT}/{path}")).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The pages the reports generate or fill: the README and every markdown page of `docs/`.
fn pages() -> Vec<(String, String)> {
    let mut out = vec![("README.md".to_string(), read("README.md"))];
    let mut docs: Vec<_> = std::fs::read_dir(format!("{ROOT}/docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    for p in docs {
        let name = format!("docs/{}", p.file_name().unwrap().to_string_lossy());
        out.push((name, std::fs::read_to_string(&p).unwrap()));
    }
    out
}

/// `5,296,704` as a number.
fn int(s: &str) -> f64 {
    s.replace(',', "").parse().unwrap_or_else(|e| panic!("{s}: {e}"))
}

/// Whether `stated`, printed with `decimals` decimals, can be `num / den` rounded, the two
/// figures being whole numbers rounded from what the ratio was computed on (each within 0.5).
fn ratio_of(stated: f64, decimals: i32, num: f64, den: f64) -> bool {
    let half = 0.5 * 10f64.powi(-decimals);
    let (lo, hi) = ((num - 0.5) / (den + 0.5), (num + 0.5) / (den - 0.5).max(0.5));
    stated + half * 1.0001 >= lo && stated - half * 1.0001 <= hi
}

/// `value` rounded to three significant digits, as the reports round an estimate ("about").
fn three_significant(value: f64) -> f64 {
    let magnitude = 10f64.powi(value.log10().floor() as i32 - 2);
    (value / magnitude).round() * magnitude
}

/// "`a` is the cheapest at X ..., R faster than `b` (Y), ...": every ratio is Y / X, every rival
/// costs more than the cheapest, and none is said to be slower than it. Returns the ratios read.
fn cheapest_lists(page: &str, text: &str) -> usize {
    let cheapest = Regex::new(r"`(\w+)` is the cheapest at ([\d,]+)").unwrap();
    let rival = Regex::new(r"(\d+\.\d+)x (faster|slower) than `(\w+)` \(([\d,]+)\)").unwrap();
    let mut read = 0;
    for line in text.lines() {
        // A clause runs from one "cheapest at" to the next (a bullet may rank two shapes).
        let starts: Vec<_> = cheapest.captures_iter(line).map(|c| (c.get(0).unwrap().start(), c)).collect();
        for (i, (start, c)) in starts.iter().enumerate() {
            let end = starts.get(i + 1).map_or(line.len(), |(s, _)| *s);
            let clause = &line[*start..end];
            let (best, x) = (&c[1], int(&c[2]));
            for r in rival.captures_iter(clause) {
                let (stated, word, other, y) = (r[1].parse::<f64>().unwrap(), &r[2], &r[3], int(&r[4]));
                assert_eq!(
                    word, "faster",
                    "{page}: `{best}` is the cheapest yet {stated}x slower than `{other}`: {clause}"
                );
                assert!(y >= x, "{page}: `{best}` is the cheapest at {x} yet `{other}` costs {y}: {clause}");
                assert!(
                    ratio_of(stated, 2, y, x),
                    "{page}: `{best}` at {x} against `{other}` at {y} is {:.4}x, not {stated}x: {clause}",
                    y / x
                );
                read += 1;
            }
        }
    }
    read
}

/// "X instead of Y (Rx faster)" and "X ... and Y in batches, Rx faster": R is the larger over
/// the smaller, and the faster one is the one said to be. Returns the ratios read.
fn paired_ratios(page: &str, text: &str) -> usize {
    let instead = Regex::new(r"([\d,]+) instead of ([\d,]+) \((\d+\.\d+)x (faster|slower)\)").unwrap();
    let batches =
        Regex::new(r"pays ([\d,]+) instructions per object with one commit each and ([\d,]+) in batches, (\d+\.\d+)x (faster|slower)")
            .unwrap();
    let mut read = 0;
    for line in text.lines() {
        for c in instead.captures_iter(line) {
            let (now, before, stated) = (int(&c[1]), int(&c[2]), c[3].parse::<f64>().unwrap());
            let faster = &c[4] == "faster";
            assert_eq!(faster, now < before, "{page}: {now} instead of {before} is not {}: {}", &c[4], &c[0]);
            let exact = if faster { before / now } else { now / before };
            let (num, den) = if faster { (before, now) } else { (now, before) };
            assert!(ratio_of(stated, 2, num, den), "{page}: {now} against {before} is {exact:.4}x, not {stated}x");
            read += 1;
        }
        for c in batches.captures_iter(line) {
            let (each, batched, stated) = (int(&c[1]), int(&c[2]), c[3].parse::<f64>().unwrap());
            let faster = &c[4] == "faster";
            assert_eq!(faster, batched < each, "{page}: {}", &c[0]);
            let exact = if faster { each / batched } else { batched / each };
            let (num, den) = if faster { (each, batched) } else { (batched, each) };
            assert!(ratio_of(stated, 2, num, den), "{page}: {each} against {batched} is {exact:.4}x, not {stated}x");
            read += 1;
        }
    }
    read
}

#[test]
fn every_ratio_follows_from_the_figures_beside_it() {
    let (mut lists, mut pairs) = (0, 0);
    for (page, text) in pages() {
        lists += cheapest_lists(&page, &text);
        pairs += paired_ratios(&page, &text);
    }
    assert!(lists > 10, "read {lists} ratios of a ranking: the sentences were reworded, so check them again");
    assert!(pairs > 2, "read {pairs} paired ratios: the sentences were reworded, so check them again");
}

/// The README's mainnet table: mainnet per call / canbench per call is the ratio it prints.
#[test]
fn the_mainnet_tables_ratios_are_their_columns_divided() {
    let row = Regex::new(r"^\| `(\w+)` \| ([\d,]+) \| ([\d,]+) \| (\d+(?:\.\d+)?)× \|").unwrap();
    let mut read = 0;
    for (page, text) in pages() {
        for line in text.lines() {
            let Some(c) = row.captures(line) else { continue };
            let (main, canbench, stated) = (int(&c[2]), int(&c[3]), &c[4]);
            let decimals = stated.split('.').nth(1).map_or(0, |d| d.len() as i32);
            let exact = main / canbench;
            assert!(
                ratio_of(stated.parse().unwrap(), decimals, main, canbench),
                "{page}: `{}`: {main} / {canbench} is {exact:.3}×, not {stated}×",
                &c[1]
            );
            read += 1;
        }
    }
    assert!(read > 10, "read {read} rows of mainnet / canbench ratios");
}

/// The message-shapes block: each backend's base and marginal are the committed medians (the
/// message of no operation; the difference between 1,000 and 100 operations over 900), and the
/// writes that fit one update are (40 B - base) / marginal, rounded to three digits.
#[test]
fn fits_are_counted_from_the_committed_base_and_marginal() {
    let results: ShapeResults = serde_yaml::from_str(&read("message_shapes_results.yml")).unwrap();
    let size = &results.sizes["1x"];
    let readme = read("README.md");
    let block = between(&readme, "message-shapes");
    let header = block.lines().find(|l| l.starts_with("| backend |")).expect("the table's header");
    let columns: Vec<&str> = header.trim_matches('|').split(" | ").map(str::trim).collect();
    let fit_column = columns.iter().position(|c| c.starts_with("writes that fit")).expect("the fit column");
    assert!(columns[fit_column].contains("one transaction"), "the fit is of one transaction: {header}");
    let shape_column =
        |s: Shape| columns.iter().position(|c| *c == s.title()).unwrap_or_else(|| panic!("{}", s.title()));
    let sum = Regex::new(r"^([\d,]+) \+ n × (-?[\d,]+)$").unwrap();
    let (last, before) = (OPS_PER_MESSAGE[OPS_PER_MESSAGE.len() - 1], OPS_PER_MESSAGE[OPS_PER_MESSAGE.len() - 2]);
    let mut read = 0;
    for line in block.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line.trim_matches('|').split(" | ").map(str::trim).collect();
        let backend = cells[0].trim_matches('`');
        let models = &size.backends[backend];
        for shape in Shape::ALL {
            let text = cells[shape_column(shape)];
            let Some(c) = sum.captures(text) else {
                let b = stablebench_grid::shapes::BACKENDS.into_iter().find(|b| b.name() == backend).unwrap();
                assert!(!shape.applies_to(b), "{backend} {}: {text}", shape.name());
                continue;
            };
            let points = &models.mainnet[shape.name()][Pattern::Uniform.name()];
            let base = points[&0].median as f64;
            let marginal =
                ((points[&last].median as f64 - points[&before].median as f64) / (last - before) as f64).round();
            assert_eq!((int(&c[1]), int(&c[2])), (base, marginal), "{backend} {}: {text}", shape.name());
            if shape == Shape::WriteOneTransaction {
                let fit = ((UPDATE_INSTRUCTION_LIMIT as f64 - base) / marginal).floor();
                let stated = cells[fit_column].trim_start_matches("about ");
                assert_eq!(int(stated), three_significant(fit), "{backend}: {fit} writes fit, said {stated}");
                read += 1;
            }
        }
    }
    assert_eq!(read, size.backends.len(), "a fit per backend measured");
}

/// The text between a generated block's markers.
fn between<'a>(text: &'a str, name: &str) -> &'a str {
    let begin = format!("<!-- {name}:begin -->");
    let end = format!("<!-- {name}:end -->");
    let a = text.find(&begin).unwrap_or_else(|| panic!("no {begin}")) + begin.len();
    let b = text[a..].find(&end).unwrap_or_else(|| panic!("no {end}")) + a;
    &text[a..b]
}

/// "Reads in a query": the cheapest message of n reads per query, and every other backend's,
/// are the committed medians, and every backend measured is in the sentence.
#[test]
fn the_query_ranking_is_the_committed_minimum() {
    let results: ShapeResults = serde_yaml::from_str(&read("message_shapes_results.yml")).unwrap();
    let size = &results.sizes["1x"];
    let readme = read("README.md");
    let bullet = readme.lines().find(|l| l.starts_with("- **Reads in a query**")).expect("the bullet");
    for n in [OPS_PER_MESSAGE[1], OPS_PER_MESSAGE[OPS_PER_MESSAGE.len() - 1]] {
        let mut v: Vec<(&str, u64)> = size
            .backends
            .iter()
            .map(|(b, m)| (b.as_str(), m.mainnet[Shape::ReadQuery.name()][Pattern::Uniform.name()][&n].median))
            .collect();
        v.sort_by_key(|&(b, x)| (x, b));
        let reads = if n == 1 { "1 read".to_string() } else { format!("{} reads", stablebench_report::grouped(n)) };
        let at = bullet.find(&format!("with {reads} per query ")).unwrap_or_else(|| panic!("n = {n}: {bullet}"));
        let clause = &bullet[at..];
        let clause = &clause[..clause[1..].find("; with ").map_or(clause.len(), |e| e + 1)];
        let (best, x) = v[0];
        assert!(
            clause.contains(&format!("`{best}` is the cheapest at {} instructions", stablebench_report::grouped(x))),
            "n = {n}: the committed cheapest is `{best}` at {x}: {clause}"
        );
        for (b, y) in &v[1..] {
            assert!(
                clause.contains(&format!("`{b}` ({})", stablebench_report::grouped(*y))),
                "n = {n}: `{b}` {y} missing: {clause}"
            );
        }
    }
}

/// "K of N answers differ": N rows were measured under at least one model, K of them choose
/// differently (their figures aside), and every row marked so does.
#[test]
fn the_count_of_differing_answers_counts_measured_rows() {
    let mainnet = read("docs/mainnet.md");
    let table = &mainnet[mainnet.find("## The answers, under each model").expect("the answers")..];
    let rows: Vec<Vec<&str>> = table
        .lines()
        .skip_while(|l| !l.starts_with("|---"))
        .skip(1)
        .take_while(|l| l.starts_with('|'))
        .map(|l| l.trim_matches('|').split(" | ").map(str::trim).collect())
        .collect();
    let choice = |s: &str| s.split(" (").next().unwrap_or(s).to_string();
    let mut differ = 0;
    for r in &rows {
        assert!(!(r[1] == "not measured" && r[2] == "not measured"), "a row nobody measured: {r:?}");
        let differs = choice(r[1]) != choice(r[2]);
        assert_eq!(r[3] == "**differs**", differs, "{r:?}");
        differ += differs as usize;
    }
    let claim = format!("{differ} of {} answers differ", rows.len());
    let readme = read("README.md");
    assert!(readme.contains(&claim), "README.md does not say '{claim}'");
    let lead = format!("{differ} of the {} answers below differ", rows.len());
    assert!(mainnet.contains(&lead), "docs/mainnet.md does not say '{lead}'");
}

/// The heap bullets' extrapolations stop where the canister stops them and name the bound: the
/// heap map's refusal at half the default limit, SQLite's page-cache cap at a quarter; the
/// upgrade extrapolation goes no further than the refusal, and its total is its rate times it.
#[test]
fn extrapolations_stop_at_the_bounds_the_canister_enforces() {
    let readme = read("README.md");
    let heap = readme.lines().find(|l| l.starts_with("- **Heap**")).expect("the heap bullet");
    let upgrades = readme.lines().find(|l| l.starts_with("- **Upgrades**")).expect("the upgrades bullet");
    let limit_mib = DEFAULT_WASM_MEMORY_LIMIT_BYTES >> 20;
    let refusal = Regex::new(
        r"`heap_btreemap` takes no more writes at about ([\d,]+) keys \(`kv_load` and `kv_put` refuse them once the heap passes ([\d,]+) MiB, half the limit",
    )
    .unwrap();
    let c = refusal.captures(heap).unwrap_or_else(|| panic!("the refusal: {heap}"));
    let (refused_at, ceiling) = (int(&c[1]), int(&c[2]) as u64);
    assert_eq!(ceiling, HEAP_MAP_CEILING_BYTES >> 20);
    assert_eq!(ceiling * 2, limit_mib, "half the limit");
    let cap = Regex::new(
        r"page cache reaches the canister's cap \(([\d,]+) MiB, a quarter of the limit\) at about ([\d,]+) keys",
    )
    .unwrap();
    let caps: Vec<_> = cap.captures_iter(heap).collect();
    assert!(!caps.is_empty(), "SQLite's cap: {heap}");
    for c in caps {
        assert_eq!(int(&c[1]) as u64 * 4, limit_mib, "a quarter of the limit");
    }
    let rate = Regex::new(
        r"at ([\d,]+) instructions per key \(linear from [\d,]+ keys\) the map the canister takes, at most about ([\d,]+) keys \(it refuses writes past that\), upgrades in about (\d+\.\d+) B",
    )
    .unwrap();
    let c = rate.captures(upgrades).unwrap_or_else(|| panic!("the upgrade extrapolation: {upgrades}"));
    let (per_key, keys, total) = (int(&c[1]), int(&c[2]), c[3].parse::<f64>().unwrap());
    assert_eq!(keys, refused_at, "the upgrade extrapolation ends where the heap map refuses writes");
    // Both figures are rounded (the rate to the instruction, the keys to three digits).
    let exact = per_key * keys / 1e9;
    assert!((total - exact).abs() <= exact * 0.006, "{per_key} x {keys} is {exact:.2} B, not {total} B");
    let about = Regex::new(r"about ([\d,]+) keys").unwrap();
    for c in about.captures_iter(upgrades) {
        assert!(int(&c[1]) <= refused_at, "an upgrade extrapolated past the refusal: {}", &c[0]);
    }
}

/// Both canisters' results files, merged.
fn grid_results(paths: [&str; 2]) -> stablebench_report::results::Results {
    let texts = paths.map(read);
    let named: Vec<(&str, &str)> = paths.iter().zip(&texts).map(|(p, t)| (*p, t.as_str())).collect();
    stablebench_report::results::Results::from_canbench_ymls(&named).unwrap_or_else(|e| panic!("{e}"))
}

/// "Cheapest backend per read (write), warm (cold) cache": under each model, the backend named is
/// the one of least w_avg per operation among all measured, and its figure is that w_avg.
#[test]
fn the_cheapest_backend_answers_are_the_minimum_of_the_results() {
    use stablebench_grid::cells::{BACKENDS, DB_WEIGHT_SIZE, TRIE_OPS};
    use stablebench_report::kv;
    let canbench = grid_results(["canbench_results.yml", "vfs/canbench_results.yml"]);
    let mainnet = grid_results(["mainnet_results.yml", "vfs/mainnet_results.yml"]);
    let page = read("docs/mainnet.md");
    for op in TRIE_OPS {
        let q = format!("| Cheapest backend per {} at ", kv::op_title(op).to_lowercase());
        let row = page.lines().find(|l| l.starts_with(&q)).unwrap_or_else(|| panic!("no row {q}"));
        let cells: Vec<&str> = row.trim_matches('|').split(" | ").map(str::trim).collect();
        for (results, stated) in [(&mainnet, cells[1]), (&canbench, cells[2])] {
            let (best, v) = BACKENDS
                .into_iter()
                .filter_map(|b| Some((b, kv::w_avg_per_op(results, op, DB_WEIGHT_SIZE, b)?)))
                .min_by(|a, b| a.1.total_cmp(&b.1))
                .expect("measured");
            let want = format!("{} ({})", best.name(), stablebench_report::grouped(v.round() as u64));
            assert_eq!(stated, want, "{row}");
        }
    }
}
