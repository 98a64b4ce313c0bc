//! The README's pragma, benchmark, results, DbWeight and NodeStore tables, docs/results.{md,svg}
//! docs/kv.md with its charts (docs/kv_trie.svg, docs/kv_nodestore.svg), docs/sysrepo.{md,svg}
//! docs/chia.{md,svg} and docs/scaling.{md,svg} are generated from
//! what they describe (the code, canbench_results.yml and chia_pages_results.yml), and the
//! README's opening code is the example canister's (examples/sqlite);
//! this test fails when they drift apart (the reference README's table did not match what its
//! library applied). Regenerate with `scripts/report.sh`.

use std::collections::BTreeMap;

use stablebench::bench::BENCHES;
use stablebench::pragma::DEFAULT;
use stablebench::report::results::Results;
use stablebench::report::{self, chia, kv, scaling, sysrepo, vfs, Measured};

const README: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/README.md");

fn pragma_table() -> String {
    let mut t = String::from("| # | pragma | value | why |\n|---|---|---|---|\n");
    for (i, p) in DEFAULT.pragmas.iter().enumerate() {
        let why = p.why.split_whitespace().collect::<Vec<_>>().join(" ");
        t += &format!("| {} | `{}` | `{}` | {} |\n", i + 1, p.name, p.value, why);
    }
    t
}

fn bench_table() -> String {
    let mut t =
        String::from("| seed row | benchmark (canbench name: `<this>_<profile>`) | reference step |\n|---|---|---|\n");
    for (i, b) in BENCHES.iter().enumerate() {
        t += &format!("| {} | `{}` | {} |\n", i + 1, b.name(), b.seed_row());
    }
    t
}

const RESULTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/canbench_results.yml");
const VFS_RESULTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/vfs/canbench_results.yml");
const VFS_MD: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/vfs.md");
const RESULTS_MD: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/results.md");
const RESULTS_SVG: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/results.svg");
const KV_MD: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/kv.md");
const KV_TRIE_SVG: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/kv_trie.svg");
const KV_NODESTORE_SVG: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/kv_nodestore.svg");
const SYSREPO_MD: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/sysrepo.md");
const SYSREPO_SVG: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/sysrepo.svg");
const CHIA_MD: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/chia.md");
const CHIA_SVG: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/chia.svg");
const SCALING_MD: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/scaling.md");
const SCALING_SVG: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/scaling.svg");
const CHIA_PAGES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/chia_pages_results.yml");

/// The results keyed by the grid's cells; a name that is no cell fails the test, listing it.
fn results() -> Results {
    let (main, vfs) = (std::fs::read_to_string(RESULTS).unwrap(), std::fs::read_to_string(VFS_RESULTS).unwrap());
    Results::from_canbench_ymls(&[&main, &vfs]).unwrap_or_else(|e| panic!("{e}"))
}

/// The totals as the pragma guide's report reads them (it looks up the users/orders names only).
fn measured(results: &Results) -> BTreeMap<String, Measured> {
    results
        .iter()
        .map(|(cell, r)| {
            let m = Measured {
                instructions: r.total.instructions,
                heap_increase: r.total.heap_increase,
                stable_memory_increase: r.total.stable_memory_increase,
            };
            (cell.name(), m)
        })
        .collect()
}

/// The NodeStore fetch hits for `n` objects: exact counts from the data generator, which the
/// canister's benchmark also checks its run against.
fn nodestore_hits(n: u64) -> Option<kv::Hits> {
    Some(stablebench::kv::nodestore::expected(n, stablebench::kv::nodestore::SEED).hits)
}

/// The date the results were produced: STABLEBENCH_RESULTS_DATE when regenerating, else the
/// one docs/results.md already states.
fn results_date() -> String {
    if let Ok(d) = std::env::var("STABLEBENCH_RESULTS_DATE") {
        return d;
    }
    let md = std::fs::read_to_string(RESULTS_MD).unwrap_or_default();
    md.split("` on ").nth(1).and_then(|r| r.split_whitespace().next()).unwrap_or("(unknown date)").to_string()
}

/// The opening code of the example canister (examples/sqlite/src/lib.rs, between its
/// `// README:open:begin` and `// README:open:end` lines), as the README shows it.
fn example_open() -> String {
    let src = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/sqlite/src/lib.rs"))
        .expect("examples/sqlite/src/lib.rs");
    let (begin, end) = ("// README:open:begin\n", "// README:open:end\n");
    let b = src.find(begin).expect("examples/sqlite/src/lib.rs has no README:open:begin line") + begin.len();
    let e = src[b..].find(end).expect("examples/sqlite/src/lib.rs has no README:open:end line") + b;
    format!("```rust\n{}```\n", &src[b..e])
}

/// `report::splice`, failing the test on a missing marker.
fn splice(doc: &str, name: &str, body: &str) -> String {
    stablebench::report::splice(doc, name, body).unwrap_or_else(|e| panic!("README.md: {e}"))
}

#[test]
fn readme_tables_and_the_report_match_the_code_and_the_results() {
    let (command, date) = ("scripts/bench.sh --persist", results_date());
    let results = results();
    let rep = report::generate(&measured(&results), command, &date);
    let kv = kv::generate(&results, &nodestore_hits, command, &date);
    let sysrepo = sysrepo::generate(&results, command, &date);
    let pages: chia::PagesResults =
        serde_yaml::from_str(&std::fs::read_to_string(CHIA_PAGES).expect("chia_pages_results.yml"))
            .expect("chia_pages_results.yml parses");
    let chia = chia::generate(&results, &pages, command, &date);
    let vfs = vfs::generate(&results, command, &date);
    let scaling = scaling::generate(&results, command, &date);
    let doc = std::fs::read_to_string(README).unwrap();
    let want = splice(&doc, "pragma-table", &pragma_table());
    let want = splice(&want, "bench-table", &bench_table());
    let want = splice(&want, "grid-table", &report::grid_table());
    let want = splice(&want, "results-table", &rep.readme_results);
    let want = splice(&want, "profiles-table", &rep.readme_profiles);
    let want = splice(&want, "dbweight-table", &kv.readme_dbweight);
    let want = splice(&want, "nodestore-summary", &kv.readme_nodestore);
    let want = splice(&want, "kv-patterns", &kv.patterns);
    let want = splice(&want, "sysrepo-summary", &sysrepo.readme);
    let want = splice(&want, "chia-summary", &chia.readme);
    let want = splice(&want, "vfs-summary", &vfs.readme);
    let want = splice(&want, "scaling-table", &scaling.readme);
    let want = splice(&want, "example-open", &example_open());
    let files = [
        (RESULTS_MD, &rep.markdown),
        (RESULTS_SVG, &rep.svg),
        (KV_MD, &kv.markdown),
        (KV_TRIE_SVG, &kv.trie_svg),
        (KV_NODESTORE_SVG, &kv.nodestore_svg),
        (SYSREPO_MD, &sysrepo.markdown),
        (SYSREPO_SVG, &sysrepo.svg),
        (CHIA_MD, &chia.markdown),
        (CHIA_SVG, &chia.svg),
        (VFS_MD, &vfs.markdown),
        (SCALING_MD, &scaling.markdown),
        (SCALING_SVG, &scaling.svg),
    ];
    if std::env::var_os("STABLEBENCH_REGENERATE_README").is_some() {
        std::fs::write(README, &want).unwrap();
        std::fs::create_dir_all(concat!(env!("CARGO_MANIFEST_DIR"), "/docs")).unwrap();
        for (path, text) in files {
            std::fs::write(path, text).unwrap();
        }
        return;
    }
    let stale = "stale: run scripts/report.sh";
    assert!(doc == want, "README.md tables are {stale}");
    for (path, text) in files {
        let name = path.rsplit('/').next().unwrap();
        assert!(std::fs::read_to_string(path).unwrap_or_default() == *text, "docs/{name} is {stale}");
    }
}

/// The canister's default profile is the one the committed results recommend: the fastest
/// qualifying profile (atomic, in stable memory, foreign keys kept, within the heap limit).
/// Fails when a rerun of the sweep crowns another profile and the default was not moved.
#[test]
fn the_default_profile_is_the_fastest_qualifying_one_in_the_results() {
    let standings = report::standings(&measured(&results()));
    let best = standings.iter().find(|s| report::qualifies(s)).expect("a qualifying profile in canbench_results.yml");
    assert_eq!(
        best.profile.name, DEFAULT.name,
        "the results recommend {}, the canister defaults to {}",
        best.profile.name, DEFAULT.name
    );
}
