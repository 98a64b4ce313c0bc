//! The generated tables of the README and of the docs pages it links to (`report::MARKED_DOCS`:
//! pragma, benchmark, results, DbWeight, NodeStore, ... tables), docs/results.{md,svg}
//! docs/kv.md with its charts (docs/kv_trie.svg, docs/kv_nodestore.svg), docs/sysrepo.{md,svg}
//! docs/chia.{md,svg}, docs/scaling.{md,svg}, docs/mainnet.md and docs/sharding.md's tables are
//! generated from what they describe (the code, canbench_results.yml, mainnet_results.yml,
//! chia_pages_results.yml, sharded_results.yml, sharded_orders_results.yml, per_call_results.yml and
//! storage_results.yml), and the
//! README's opening code is the example canister's (examples/sqlite);
//! this test fails when they drift apart (the reference README's table did not match what its
//! library applied). Regenerate with `scripts/report.sh`.

use stablebench::bench::BENCHES;
use stablebench::pragma::DEFAULT;
use stablebench_grid::cells::{Backend, Cell, Op, Workload, DB_WEIGHT_SIZE};
use stablebench_grid::sharded::Set;
use stablebench_report::mainnet::Topic;
use stablebench_report::results::Results;
use stablebench_report::{self as report, chia, kv, mainnet, scaling, sharding, site, sysrepo, vfs};

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

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

const RESULTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../canbench_results.yml");
const VFS_RESULTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../vfs/canbench_results.yml");
const MAINNET: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../mainnet_results.yml");
const VFS_MAINNET: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../vfs/mainnet_results.yml");
const MAINNET_MD: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/mainnet.md");
const VFS_MD: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/vfs.md");
const RESULTS_MD: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/results.md");
const RESULTS_SVG: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/results.svg");
const KV_MD: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/kv.md");
const KV_TRIE_SVG: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/kv_trie.svg");
const KV_NODESTORE_SVG: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/kv_nodestore.svg");
const SYSREPO_MD: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/sysrepo.md");
const SYSREPO_SVG: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/sysrepo.svg");
const CHIA_MD: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/chia.md");
const CHIA_SVG: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/chia.svg");
const SCALING_MD: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/scaling.md");
const SCALING_SVG: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/scaling.svg");
const SITE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/site");
const CHIA_PAGES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../chia_pages_results.yml");
const SHAPES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../message_shapes_results.yml");
const ENDPOINT_PROFILES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../endpoint_profiles_results.yml");
const BOUNDED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../bounded_heap_results.yml");

/// The recommendation's standings: the per-call mix of every deployable profile
/// (`endpoint_profiles_results.yml`), its bounded-heap run (`bounded_heap_results.yml`) and its nine
/// bulk steps on mainnet (`mainnet_results.yml`).
fn recommendation(ic: &Results) -> Vec<report::recommend::Standing> {
    report::recommend::standings(&yaml(ENDPOINT_PROFILES), &yaml(BOUNDED), &report::standings(ic))
}
const SHARDED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../sharded_results.yml");
const SHARDED_ORDERS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../sharded_orders_results.yml");
const PER_CALL: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../per_call_results.yml");
const ENDPOINTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../endpoints_results.yml");
const PAGE_REGIONS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../page_regions_results.yml");
const STORAGE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../storage_results.yml");

/// A committed YAML results file other than canbench's, parsed.
fn yaml<T: serde::de::DeserializeOwned>(path: &str) -> T {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The results keyed by the grid's cells; a name that is no cell fails the test, listing it.
fn results() -> Results {
    load([RESULTS, VFS_RESULTS], report::results::Model::Canbench)
}

/// The same benchmarks priced as mainnet prices them (the ic cost model), keyed by cells, each
/// with the pages it touched.
fn mainnet_results() -> Results {
    load([MAINNET, VFS_MAINNET], report::results::Model::Mainnet)
}

/// Both canisters' results files (`paths`), merged, which must follow `model`.
fn load(paths: [&str; 2], model: report::results::Model) -> Results {
    let texts = paths.map(|p| std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{p}: {e}")));
    let named: Vec<(&str, &str)> = paths
        .iter()
        .zip(&texts)
        .map(|(p, t)| (p.strip_prefix(ROOT).map_or(*p, |r| r.trim_start_matches('/')), t.as_str()))
        .collect();
    let results = Results::from_canbench_ymls(&named).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(results.model(), model, "{}: {}", paths[0], model.described());
    results
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
    let src = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/sqlite/src/lib.rs"))
        .expect("examples/sqlite/src/lib.rs");
    let (begin, end) = ("// README:open:begin\n", "// README:open:end\n");
    let b = src.find(begin).expect("examples/sqlite/src/lib.rs has no README:open:begin line") + begin.len();
    let e = src[b..].find(end).expect("examples/sqlite/src/lib.rs has no README:open:end line") + b;
    format!("```rust\n{}```\n", &src[b..e])
}

/// The benchmarks each report shows (its site page's table, and its lead's ratios).
fn profiles_page(c: &Cell) -> bool {
    c.workload() == Workload::UsersOrders && c.size == stablebench::bench::Sizes::REFERENCE.orders
}
fn scaling_page(c: &Cell) -> bool {
    c.workload() == Workload::UsersOrders
        && c.profile == Some(stablebench_grid::cells::SCALE_PROFILE)
        && c.backend == Backend::Sqlite
}
fn kv_page(c: &Cell) -> bool {
    matches!(c.workload(), Workload::Trie | Workload::NodeStore)
}
fn sysrepo_page(c: &Cell) -> bool {
    c.workload() == Workload::Sysrepo
}
fn chia_page(c: &Cell) -> bool {
    c.workload() == Workload::Chia
}
fn vfs_page(c: &Cell) -> bool {
    matches!(c.backend, Backend::SqliteVfs | Backend::SqliteVfsRowid)
}

#[test]
fn readme_tables_and_the_report_match_the_code_and_the_results() {
    let (command, date) = ("scripts/bench.sh --persist", results_date());
    let results = results();
    let ic = mainnet_results();
    // Every report and the README give mainnet's figures (what a call costs since the IC's memory
    // tracker); canbench's stand beside them (the pragma report's steps, the site's tables) and in
    // docs/mainnet.md's summaries.
    let rep = report::generate(&ic, Some(report::Beside { canbench: &results }), command, &date);
    let shapes: stablebench_report::shapes::Results = yaml(SHAPES);
    let kv = kv::generate(&ic, &nodestore_hits, command, &date, shapes.sizes.get("1x"));
    // Substrate's w_avg is a constant per operation, which it is under canbench's model only: the
    // README's DbWeight table gives it there (mainnet's per-message costs: message-shapes).
    // On mainnet kv.md's DbWeight is per message (base + each further operation), never a w_avg
    // per operation.
    let dbweight = kv.markdown.split("## IC DbWeight").nth(1).and_then(|s| s.split("\n## ").next()).unwrap();
    assert!(dbweight.contains(" + n × ") && !dbweight.contains(" instructions = "), "{dbweight}");
    let kv_canbench = kv::generate(&results, &nodestore_hits, command, &date, None);
    let sysrepo = sysrepo::generate(&ic, command, &date);
    let chia_pages: chia::PagesResults =
        serde_yaml::from_str(&std::fs::read_to_string(CHIA_PAGES).expect("chia_pages_results.yml"))
            .expect("chia_pages_results.yml parses");
    let chia = chia::generate(&ic, &chia_pages, command, &date);
    let vfs = vfs::generate(&ic, command, &date);
    let scaling = scaling::generate(&ic, command, &date);
    let (sharded, orders, per_call, storage): (
        sharding::Sharded,
        sharding::Sharded,
        sharding::PerCall,
        sharding::Storage,
    ) = (yaml(SHARDED), yaml(SHARDED_ORDERS), yaml(PER_CALL), yaml(STORAGE));
    // The results files hold the sharded cells the grid declares, and a file that does not is
    // found.
    for (set, file) in [(Set::Kv, &sharded), (Set::Orders, &orders)] {
        sharding::check_declared(set, file).unwrap();
        let mut short = file.clone();
        short.operations.pop();
        assert!(sharding::check_declared(set, &short).is_err(), "{set:?}: an operation missing");
        let mut fewer = file.clone();
        fewer.operations[0].shards.remove(&16);
        assert!(sharding::check_declared(set, &fewer).is_err(), "{set:?}: a shard count missing");
    }
    let one_canister = sharding::one_canister(&sharding::Inputs {
        mainnet: &ic,
        per_call: &per_call,
        storage: &storage,
        sharded: &sharded,
        orders: &orders,
    });
    assert_eq!(
        ic.iter().map(|(c, _)| c.name()).collect::<Vec<_>>(),
        results.iter().map(|(c, _)| c.name()).collect::<Vec<_>>(),
        "mainnet_results.yml and canbench_results.yml hold the same benchmarks (one run writes both)"
    );
    let mainnet = mainnet::generate(&results, &ic, command, &date);
    // Each report opens with what mainnet changes for it.
    let answers = mainnet::answers(&results, &ic);
    let of = |topic| answers.iter().filter(|a| a.topic == topic).cloned().collect::<Vec<_>>();
    // ...and closes with every one of its benchmarks under both models, with the pages.
    let lead = |markdown: &str, on_page: fn(&Cell) -> bool, answers: &[mainnet::Answer], section, site_page| {
        let led = mainnet::with_lead(markdown, &mainnet::lead(&results, &ic, on_page, answers, section, site_page));
        mainnet::with_section(&led, &mainnet::both_models_section(&results, &ic, on_page))
    };
    // (The pragma and key-value reports show the ic-rusqlite canister's cells; their site pages
    // add the ic-sqlite-vfs ones.)
    let rep_md = lead(
        &rep.markdown,
        |c| profiles_page(c) && !vfs_page(c),
        &of(Topic::Profiles),
        Some("Pragma profiles"),
        "users_orders.html",
    );
    let kv_md =
        lead(&kv.markdown, |c| kv_page(c) && !vfs_page(c), &of(Topic::KeyValue), Some("IC DbWeight"), "kv.html");
    let sysrepo_md = lead(&sysrepo.markdown, sysrepo_page, &of(Topic::Sysrepo), Some("sysrepo"), "sysrepo.html");
    let chia_md = lead(&chia.markdown, chia_page, &[], None, "chia.html");
    let vfs_md = lead(&vfs.markdown, vfs_page, &[], Some("ic-rusqlite against ic-sqlite-vfs"), "vfs.html");
    let scaling_md = lead(&scaling.markdown, scaling_page, &[], Some("Scaling"), "scaling.html");
    // The README and the docs pages that hold generated fragments (report::MARKED_DOCS): each
    // fragment is spliced into the one that holds its markers.
    let have: Vec<(String, String)> = report::MARKED_DOCS
        .iter()
        .map(|d| (d.to_string(), std::fs::read_to_string(format!("{ROOT}/{d}")).unwrap_or_else(|e| panic!("{d}: {e}"))))
        .collect();
    let mut want = have.clone();
    let fragments = [
        ("pragma-table", pragma_table()),
        ("bench-table", bench_table()),
        ("grid-table", report::grid_table()),
        // The recommendation and its nine steps: as mainnet prices them, as every table.
        ("results-table", rep.readme_results.clone()),
        ("profiles-table", rep.readme_profiles.clone()),
        ("recommendation", report::recommend::table(&recommendation(&ic))),
        ("dbweight-table", kv_canbench.readme_dbweight.clone()),
        ("nodestore-summary", kv.readme_nodestore.clone()),
        ("kv-patterns", kv.patterns.clone()),
        ("sysrepo-summary", sysrepo.readme.clone()),
        ("chia-summary", chia.readme.clone()),
        ("vfs-summary", vfs.readme.clone()),
        ("scaling-table", scaling.readme.clone()),
        ("example-open", example_open()),
        ("mainnet-summary", mainnet.readme.clone()),
        ("sharded-costs", sharding::cost_tables(&sharded)),
        ("sharded-orders-costs", sharding::cost_tables(&orders)),
        ("one-canister", one_canister),
        (
            "page-targets",
            stablebench_report::targets::table(&stablebench_report::targets::checks(
                &per_call,
                &yaml(ENDPOINTS),
                &yaml(PAGE_REGIONS),
            )),
        ),
    ];
    for (name, body) in &fragments {
        report::splice_in(&mut want, name, body).unwrap_or_else(|e| panic!("{e}"));
    }
    // Written and checked by runner/tests/page_regions.rs, which measures it.
    let page_budget_md = std::fs::read_to_string(format!("{ROOT}/docs/page-budget.md")).expect("docs/page-budget.md");
    let sharding_md = want.iter().find(|(d, _)| d == "docs/sharding.md").map(|(_, t)| t.clone()).expect("sharding.md");
    let docs = [
        site::Doc {
            page: "mainnet.html",
            source: "mainnet.md",
            title: "Mainnet",
            summary: "what the calls cost on mainnet since the IC's memory tracker, beside canbench's figures, and which answers change",
            markdown: &mainnet.markdown,
            cells: |c| {
                let reference = c.workload() == Workload::UsersOrders
                    && c.size == stablebench::bench::Sizes::REFERENCE.orders
                    && c.profile == Some(DEFAULT)
                    && c.backend == Backend::Sqlite;
                let trie = matches!(c.op, Op::TrieRead(_) | Op::TrieWrite(_)) && c.size == DB_WEIGHT_SIZE;
                reference || trie
            },
        },
        site::Doc {
            page: "users_orders.html",
            source: "results.md",
            title: "Pragma profiles",
            summary: "the users/orders workload's nine steps under every SQLite pragma profile, at 100,000 users and 1,000,000 orders",
            markdown: &rep_md,
            cells: profiles_page,
        },
        site::Doc {
            page: "scaling.html",
            source: "scaling.md",
            title: "Scaling",
            summary: "the nine users/orders steps from 10,000 to 10,000,000 orders under journal_memory_temp_file, the bulk-load profile",
            markdown: &scaling_md,
            cells: scaling_page,
        },
        site::Doc {
            page: "kv.html",
            source: "kv.md",
            title: "Key-value",
            summary: "Substrate's trie and rippled's NodeStore on SQLite, StableBTreeMap and a heap map",
            markdown: &kv_md,
            cells: kv_page,
        },
        site::Doc {
            page: "sysrepo.html",
            source: "sysrepo.md",
            title: "sysrepo",
            summary: "sysrepo's datastore tests on a JSON document, SQLite and StableBTreeMap",
            markdown: &sysrepo_md,
            cells: sysrepo_page,
        },
        site::Doc {
            page: "chia.html",
            source: "chia.md",
            title: "Chia coin store",
            summary: "Chia's coin-store schemas replayed from a synthetic chain",
            markdown: &chia_md,
            cells: chia_page,
        },
        site::Doc {
            page: "vfs.html",
            source: "vfs.md",
            title: "ic-sqlite-vfs",
            summary: "SQLite two ways: ic-rusqlite against ic-sqlite-vfs",
            markdown: &vfs_md,
            cells: vfs_page,
        },
        site::Doc {
            page: "page-budget.html",
            source: "page-budget.md",
            title: "Page budget",
            summary: "where one message's 64 KiB pages go, by region of memory, for every key-value and users/orders endpoint of the production canister, beside the minimal message and the pages each structure must touch",
            markdown: &page_budget_md,
            cells: |_| false,
        },
        site::Doc {
            page: "sharding.html",
            source: "sharding.md",
            title: "Sharding",
            summary: "a key-value set and the users/orders set split across a router and 1 to 16 shards, what each call and cross-shard move costs, and where one canister runs out (its benchmarks: the scaling curves it reads)",
            markdown: &sharding_md,
            cells: scaling_page,
        },
    ];
    let site_files = site::generate(
        site::Figures { canbench: &results, ic: &ic },
        &site_answer(&want),
        &docs,
        &flamegraphs(),
        command,
        &date,
    );
    let site_files: Vec<(String, &String)> =
        site_files.iter().map(|f| (format!("{SITE}/{}", f.name), &f.text)).collect();
    let files = [
        (RESULTS_MD, &rep_md),
        (RESULTS_SVG, &rep.svg),
        (KV_MD, &kv_md),
        (KV_TRIE_SVG, &kv.trie_svg),
        (KV_NODESTORE_SVG, &kv.nodestore_svg),
        (SYSREPO_MD, &sysrepo_md),
        (SYSREPO_SVG, &sysrepo.svg),
        (CHIA_MD, &chia_md),
        (CHIA_SVG, &chia.svg),
        (VFS_MD, &vfs_md),
        (SCALING_MD, &scaling_md),
        (SCALING_SVG, &scaling.svg),
        (MAINNET_MD, &mainnet.markdown),
    ];
    let files: Vec<(String, &String)> =
        files.into_iter().map(|(p, t)| (p.to_string(), t)).chain(site_files.iter().cloned()).collect();
    if std::env::var_os("STABLEBENCH_REGENERATE_README").is_some() {
        for (doc, text) in &want {
            std::fs::write(format!("{ROOT}/{doc}"), text).unwrap();
        }
        std::fs::create_dir_all(SITE).unwrap();
        for entry in std::fs::read_dir(SITE).unwrap() {
            let path = entry.unwrap().path();
            if path.is_file() && !files.iter().any(|(p, _)| std::path::Path::new(p) == path) {
                std::fs::remove_file(path).unwrap();
            }
        }
        for (path, text) in &files {
            std::fs::write(path, text).unwrap();
        }
        return;
    }
    let stale = "stale: run scripts/report.sh";
    for ((doc, have), (_, want)) in have.iter().zip(&want) {
        assert!(have == want, "{doc}'s generated tables are {stale}");
    }
    for (path, text) in &files {
        let name = path.strip_prefix(concat!(env!("CARGO_MANIFEST_DIR"), "/../")).unwrap();
        assert!(std::fs::read_to_string(path).unwrap_or_default() == **text, "{name} is {stale}");
    }
    for entry in std::fs::read_dir(SITE).expect("docs/site: run scripts/report.sh") {
        let path = entry.unwrap().path();
        assert!(
            !path.is_file() || files.iter().any(|(p, _)| std::path::Path::new(p) == path),
            "{} is no page of the site: {stale}",
            path.display()
        );
    }
}

/// The benchmarks with a committed flamegraph (`docs/site/flamegraphs/<benchmark>.svg`, written
/// by `scripts/site-flamegraphs.sh`); each must be a benchmark of the grid, so that a renamed one
/// cannot leave its flamegraph behind.
fn flamegraphs() -> Vec<String> {
    let dir = format!("{SITE}/flamegraphs");
    let mut names: Vec<String> = match std::fs::read_dir(&dir) {
        Ok(entries) => entries
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .map(|f| f.strip_suffix(".svg").unwrap_or_else(|| panic!("{dir}/{f} is not an SVG")).to_string())
            .collect(),
        Err(_) => Vec::new(),
    };
    names.sort();
    for n in &names {
        assert!(stablebench_grid::cells::by_name(n).is_some(), "{dir}/{n}.svg: {n} is no benchmark of the grid");
    }
    names
}

/// The generated fragment `name` of whichever of `docs` holds it (`report::fragment_in`), failing
/// the test on a missing marker.
fn fragment<'a>(docs: &'a [(String, String)], name: &str) -> &'a str {
    report::fragment_in(docs, name).unwrap_or_else(|e| panic!("{e}"))
}

/// The site index's first section: the answers, from the generated tables of the README and its
/// docs pages.
fn site_answer(readme: &[(String, String)]) -> String {
    format!(
        "## Which SQLite settings\n\nThe recommendation is `{default}` (the canister's default, and \
         `RECOMMENDED` in the `stablebench-pragmas` crate): the cheapest profile on mainnet over the nine \
         users/orders steps that keeps COMMIT and ROLLBACK atomic, the database in stable memory and \
         foreign keys enforced. For mostly large write transactions, `{workloads}` \
         (`BULK_LOAD`). Every profile, over those nine steps on mainnet:\n\n{profiles}\n\
         ## Which backend for which pattern\n\nInstructions per operation, SQLite under \
         `{workloads}`; details on the [key-value page](kv.md).\n\n{patterns}\n\
         ## The IC DbWeight\n\nWhat Substrate's `DbWeight` would be on the IC under canbench's model (no page \
         fees, so an operation's cost is a constant, as Substrate's w_avg means): instructions per read and \
         write at 200,000 keys. On mainnet an operation's cost depends on what shares its message: \
         [what a message of n operations costs](message-shapes.md).\n\n{dbweight}\n\
         ## One call of a key-value backend\n\nA whole message against the same operation inside a \
         benchmark (instructions; `runner/tests/per_call.rs`).\n\n{per_call}\n\
         ## One call of every users/orders endpoint, against its floor\n\nThe smallest useful call of \
         each endpoint, whole message, next to the same SQL statement alone in a minimal message \
         (instructions; `runner/tests/endpoints.rs`).\n\n{endpoints}\n\
         ## How the users/orders steps scale\n\nDetails on the [scaling page](scaling.md).\n\n{scaling}",
        default = DEFAULT.name,
        workloads = stablebench_grid::profiles::WORKLOADS.name,
        profiles = fragment(readme, "profiles-table"),
        patterns = fragment(readme, "kv-patterns"),
        dbweight = fragment(readme, "dbweight-table"),
        per_call = fragment(readme, "per-call-table"),
        endpoints = fragment(readme, "endpoint-table"),
        scaling = fragment(readme, "scaling-table"),
    )
}

/// Every link and image of the site leads somewhere: a relative target exists (under
/// `docs/site/`), an anchor names an element of its page, and the pages link each other.
#[test]
fn every_link_and_image_of_the_site_resolves() {
    if std::env::var_os("STABLEBENCH_REGENERATE_README").is_some() {
        return; // The other test is writing the site; the next plain run checks it.
    }
    let pages: Vec<std::path::PathBuf> = std::fs::read_dir(SITE)
        .expect("docs/site: run scripts/report.sh")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "html"))
        .collect();
    assert!(pages.len() >= 3, "docs/site has {} pages", pages.len());
    let ids = |path: &std::path::Path| -> Vec<String> { attributes(&std::fs::read_to_string(path).unwrap(), "id") };
    let (mut checked, mut images) = (0, 0);
    for page in &pages {
        let html = std::fs::read_to_string(page).unwrap();
        let name = page.file_name().unwrap().to_string_lossy().to_string();
        let refs: Vec<String> = attributes(&html, "href").into_iter().chain(attributes(&html, "src")).collect();
        images += attributes(&html, "src").iter().filter(|s| s.ends_with(".svg") || s.ends_with(".png")).count();
        for r in refs {
            if r.contains("://") || r.starts_with("mailto:") {
                continue;
            }
            let r = r.replace("&amp;", "&");
            let (path, anchor) = r.split_once('#').map_or((r.as_str(), None), |(p, a)| (p, Some(a)));
            let target = if path.is_empty() { page.clone() } else { page.parent().unwrap().join(path) };
            assert!(target.exists(), "{name}: {r} leads to {} which does not exist", target.display());
            if let Some(anchor) = anchor.filter(|_| target.extension().is_some_and(|x| x == "html")) {
                assert!(
                    ids(&target).iter().any(|i| i == anchor),
                    "{name}: {r}: no id {anchor:?} in {}",
                    target.display()
                );
            }
            checked += 1;
        }
    }
    assert!(checked > 50 && images > 3, "only {checked} links and {images} images checked");
}

/// The values of every `name="..."` attribute in `html`.
fn attributes(html: &str, name: &str) -> Vec<String> {
    let key = format!(" {name}=\"");
    html.match_indices(&key)
        .map(|(i, _)| {
            let rest = &html[i + key.len()..];
            rest[..rest.find('"').unwrap()].to_string()
        })
        .collect()
}

/// The canister's default profile is the one the committed results recommend: the qualifying
/// profile (deployable, foreign keys kept, every bulk step measured, its heap bounded under a lowered
/// `wasm_memory_limit`) whose per-call mix costs least on mainnet (`report::recommend`), the crate's
/// `RECOMMENDED`. Fails when a rerun of either sweep crowns another profile and the default was not
/// moved.
#[test]
fn the_default_profile_is_the_cheapest_qualifying_one_on_mainnet() {
    assert_eq!(DEFAULT.pragmas, &stablebench_pragmas::RECOMMENDED[..], "the canister applies the crate's RECOMMENDED");
    let standings = recommendation(&mainnet_results());
    let best = report::recommend::winner(&standings).expect("a qualifying profile");
    assert_eq!(
        best.profile.name, DEFAULT.name,
        "the results recommend {}, the canister defaults to {}",
        best.profile.name, DEFAULT.name
    );
}
