//! The example canisters of `examples/` (built by `scripts/build.sh examples`), installed, written,
//! upgraded and read back through the runner, as a user copying them would deploy them; and the
//! instructions of one call of each, printed for docs/use-in-your-canister.md:
//! `cargo test --release -p stablebench-runner --test examples -- --nocapture`. Each call is
//! measured as canbench reports it and, on a copy of the canister in the same state, as mainnet
//! charges it (the runner's `ic` cost model: the memory tracker's 80,000 instructions per 64 KiB
//! page a message touches, 80,000 more per page it writes), with the pages it touched.

mod common;

use std::sync::Arc;

use candid::{CandidType, Deserialize, Principal};
use common::{code, decode, pages_text, unit};
use serde_bytes::ByteBuf;
use stablebench_canister::{Cost, Error};
use stablebench_grid::grouped;
use stablebench_runner::canister::{default_controller, Canister, Code, Options, Outcome, Reject};
use stablebench_runner::instrument::Metering;
use stablebench_runner::replica::CostModel;

/// `target/canister/<name>.wasm`, instrumented and compiled.
fn example(name: &str) -> Arc<Code> {
    let path = format!("{}/../target/canister/{name}.wasm", env!("CARGO_MANIFEST_DIR"));
    assert!(
        std::path::Path::new(&path).exists(),
        "{path} is missing: run scripts/build.sh examples first (scripts/test.sh does)"
    );
    Code::from_file(path.as_ref(), Metering::On).expect("the example wasm loads")
}

/// examples/sqlite's install argument (`InitArgs`).
#[derive(CandidType, Deserialize)]
struct InitArgs {
    wasm_memory_limit: Option<u64>,
}

#[derive(CandidType, Deserialize, Debug, PartialEq)]
struct Note {
    id: u64,
    text: String,
}

fn limit_arg(limit: Option<u64>) -> Vec<u8> {
    candid::encode_one(Some(InitArgs { wasm_memory_limit: limit })).unwrap()
}

fn add_notes(c: &mut Canister, texts: &[&str], caller: Principal) -> (Result<Vec<u64>, String>, u64) {
    let out = c.update("add_notes", &candid::encode_one(texts).unwrap(), caller);
    let instructions = out.instructions;
    (decode(out, "add_notes"), instructions)
}

/// A copy of `c` in its current state that charges what mainnet charges.
fn on_mainnet(c: &mut Canister) -> Canister {
    let mut ic = c.fork().expect("the canister forks");
    ic.set_cost_model(CostModel::Ic).expect("the example's code tracks its pages");
    ic
}

/// One call measured both ways: `call` on `c` (canbench's model) and on a mainnet copy of `c`
/// made just before it. Returns the table cells "mainnet | canbench | pages accessed / written".
fn both_ways(c: &mut Canister, call: impl Fn(&mut Canister) -> Outcome) -> String {
    let mut ic = on_mainnet(c);
    let (on_ic, on_canbench) = (call(&mut ic), call(c));
    assert!(on_ic.result.is_ok() && on_canbench.result.is_ok(), "{:?} / {:?}", on_ic.result, on_canbench.result);
    format!("{} | {} | {}", grouped(on_ic.instructions), grouped(on_canbench.instructions), pages_text(&on_ic.pages))
}

/// The header of the examples' cost tables, after the first column's name.
const BOTH_WAYS: &str = "on mainnet | canbench | pages accessed / written";

fn notes(c: &mut Canister, after: Option<u64>, limit: u32) -> Vec<Note> {
    decode::<Result<Vec<Note>, String>>(
        c.query("notes", &candid::encode_args((after, limit)).unwrap(), default_controller()),
        "notes",
    )
    .expect("notes")
}

fn pragmas(c: &mut Canister) -> Vec<(String, String)> {
    decode::<Result<Vec<(String, String)>, String>>(c.query("pragmas", &unit(), default_controller()), "pragmas")
        .expect("pragmas")
}

/// What `pragmas` must read back: the recommended settings as SQLite reports them, with the cache
/// (8 MiB) lowered to a quarter of `limit` (as negative KiB) if it is larger.
fn expected_pragmas(limit: u64) -> Vec<(String, String)> {
    stablebench_pragmas::RECOMMENDED
        .iter()
        .map(|p| {
            let reported = match p.name {
                // SQLite's convention: a positive cache_size is pages, a negative one KiB. Bounded
                // (to negative KiB) only if larger than the bound.
                "cache_size" => {
                    let v: i64 = p.value.parse().expect("cache_size is a number");
                    let page_kib = stablebench_pragmas::RECOMMENDED
                        .iter()
                        .find(|q| q.name == "page_size")
                        .map_or(4, |q| q.value.parse::<u64>().expect("page_size") / 1024);
                    let kib = if v < 0 { v.unsigned_abs() } else { v as u64 * page_kib };
                    let bound = stablebench_pragmas::cache_bound_kib(limit);
                    if kib > bound {
                        format!("-{bound}")
                    } else {
                        p.value.to_string()
                    }
                }
                _ => stablebench_pragmas::normalize(p.name, p.value).to_ascii_lowercase(),
            };
            (p.name.to_string(), reported)
        })
        .collect()
}

#[test]
fn the_sqlite_example_keeps_its_settings_and_its_rows_across_upgrades() {
    let code = example("example_sqlite");
    let limit = 256 << 20;
    let opts = Options { wasm_memory_limit: limit, ..Options::default() };
    let mut c = Canister::install(code.clone(), &limit_arg(Some(limit)), opts).expect("installs").0;
    assert_eq!(pragmas(&mut c), expected_pragmas(limit));

    let first = both_ways(&mut c, |c| {
        c.update("add_notes", &candid::encode_one(["one", "two", "three"]).unwrap(), default_controller())
    });
    assert_eq!(notes(&mut c, None, 10).len(), 3);
    // Refused, and nothing stored: a stranger, an empty note among good ones, too many notes.
    let (stranger, _) = add_notes(&mut c, &["x"], Principal::anonymous());
    assert_eq!(stranger, Err("only a controller can add notes".to_string()));
    let (bad, _) = add_notes(&mut c, &["four", ""], default_controller());
    assert!(bad.unwrap_err().contains("note 1 is empty"));
    let many = vec!["n"; 1001];
    assert!(add_notes(&mut c, &many, default_controller()).0.unwrap_err().contains("at most 1000"));
    let stored = notes(&mut c, None, 100);
    assert_eq!(stored.iter().map(|n| n.text.as_str()).collect::<Vec<_>>(), ["one", "two", "three"]);

    // An upgrade without an argument: the same rows, the settings applied again, the cache
    // still bounded by the limit given at install (saved in the database).
    let out = c.upgrade(code.clone(), &candid::encode_one(None::<InitArgs>).unwrap());
    assert!(out.result.is_ok(), "{:?}", out.result);
    assert_eq!(notes(&mut c, None, 100), stored);
    assert_eq!(pragmas(&mut c), expected_pragmas(limit));
    // A limit too small for a useful cache is refused, and the upgrade with it.
    let out = c.upgrade(code.clone(), &limit_arg(Some(1 << 20)));
    let Err(Reject::Trapped(trap)) = &out.result else { panic!("a 1 MiB limit was accepted: {:?}", out.result) };
    assert!(
        trap.to_string().contains("refusing to start: wasm_memory_limit 1048576 is below the 67108864 bytes"),
        "{trap}"
    );
    assert_eq!(pragmas(&mut c), expected_pragmas(limit));
    let (more, _) = add_notes(&mut c, &["four"], default_controller());
    assert_eq!(more, Ok(vec![4]));
    assert_eq!(notes(&mut c, Some(3), 100), vec![Note { id: 4, text: "four".into() }]);

    // One call of each endpoint, for docs/use-in-your-canister.md (the runner's replica accounting).
    let batch: Vec<String> = (0..100).map(|i| format!("note number {i:03} of a batch of one hundred")).collect();
    let batch: Vec<&str> = batch.iter().map(String::as_str).collect();
    let hundred =
        both_ways(&mut c, |c| c.update("add_notes", &candid::encode_one(&batch).unwrap(), default_controller()));
    let page = both_ways(&mut c, |c| {
        c.query("notes", &candid::encode_args((None::<u64>, 100u32)).unwrap(), default_controller())
    });
    let read = both_ways(&mut c, |c| c.query("pragmas", &unit(), default_controller()));
    let table = format!(
        "| call | {BOTH_WAYS} |\n|---|---:|---:|---:|\n\
         | `add_notes`, 3 notes (the first write after install) | {first} |\n\
         | `add_notes`, 100 notes in one transaction | {hundred} |\n\
         | `notes`, a page of 100 | {page} |\n\
         | `pragmas` | {read} |\n"
    );
    println!("{table}");
    readme_fragment("example-sqlite-costs", &table);
}

#[test]
fn the_sqlite_example_installed_without_a_limit_bounds_the_cache_by_the_default_limit() {
    let mut c = Canister::install(example("example_sqlite"), &limit_arg(None), Options::default()).expect("installs").0;
    assert_eq!(pragmas(&mut c), expected_pragmas(stablebench_pragmas::DEFAULT_WASM_MEMORY_LIMIT_BYTES));
    // 1,000,000 pages of 8 KiB, lowered to a quarter of the IC's default 3 GiB limit: 768 MiB, as
    // negative KiB.
    let cache = &pragmas(&mut c)[5];
    assert_eq!((cache.0.as_str(), cache.1.as_str()), ("cache_size", "-786432"));
}

/// `body`, docs/use-in-your-canister.md's fragment between `<!-- name:begin -->` and `<!-- name:end -->`: written
/// with `STABLEBENCH_REGENERATE_EXAMPLES=1`, else compared: the same text and every number the
/// same (the runner is deterministic).
fn readme_fragment(name: &str, body: &str) {
    static README_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _guard = README_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/use-in-your-canister.md");
    let readme = std::fs::read_to_string(path).unwrap();
    if std::env::var_os("STABLEBENCH_REGENERATE_EXAMPLES").is_some() {
        std::fs::write(path, stablebench_report::splice(&readme, name, body).unwrap()).unwrap();
        return;
    }
    let have =
        stablebench_report::fragment(&readme, name).unwrap_or_else(|e| panic!("docs/use-in-your-canister.md: {e}"));
    let regenerate =
        "regenerate with STABLEBENCH_REGENERATE_EXAMPLES=1 cargo test --release -p stablebench-runner --test examples";
    let ((have_text, have), (want_text, want)) = (numbers(have), numbers(body));
    assert_eq!(have_text, want_text, "docs/use-in-your-canister.md's {name} differs: {regenerate}");
    for (h, w) in have.iter().zip(&want) {
        assert!(h == w, "docs/use-in-your-canister.md's {name} says {h}, measured {w}: {regenerate}");
    }
}

/// `text` with every number (digits with `,` thousands separators) replaced by `#`, and the numbers.
fn numbers(text: &str) -> (String, Vec<f64>) {
    let (mut out, mut found, mut digits) = (String::new(), Vec::new(), String::new());
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        if chars[i].is_ascii_digit() {
            while i < chars.len()
                && (chars[i].is_ascii_digit()
                    || (chars[i] == ',' && chars.get(i + 1..i + 4).is_some_and(|d| d.iter().all(char::is_ascii_digit))))
            {
                if chars[i] != ',' {
                    digits.push(chars[i]);
                }
                i += 1;
            }
            found.push(digits.parse().unwrap());
            digits.clear();
            out.push('#');
        } else {
            out.push(chars[i]);
            i += 1;
        }
    }
    (out, found)
}

#[test]
fn the_sqlite_example_refuses_to_start_over_a_database_with_another_page_size() {
    // The stablebench canister with 64 KiB pages and its tables created: the database file the
    // example would open (ic-rusqlite's default mount) has a page size fixed at 65536.
    let arg = candid::encode_one(Some(stablebench_canister::InitArgs {
        profile: Some("page_64k".into()),
        wasm_memory_limit: None,
    }))
    .unwrap();
    let mut c = Canister::install(code(), &arg, Options::default()).expect("installs").0;
    decode::<Result<Cost, Error>>(c.update("create_schema", &unit(), default_controller()), "create_schema").unwrap();

    let out = c.upgrade(example("example_sqlite"), &limit_arg(None));
    let Err(Reject::Trapped(trap)) = &out.result else { panic!("the upgrade was not refused: {:?}", out.result) };
    let why = trap.to_string();
    assert!(
        why.contains(
            "refusing to start: PRAGMA page_size = 8192 did not take effect (SQLite reports 65536): \
             the page size is fixed once the first table exists"
        ),
        "{why}"
    );
    // Left as it was: still the stablebench canister, its tables there and no `notes` table.
    let tables =
        common::sql(&mut c, "SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name").expect("query_sql");
    let text = |s: &str| vec![stablebench::query::Value::Text(s.into())];
    assert_eq!(tables.rows, vec![text("orders"), text("sqlite_sequence"), text("users")]);
}

fn put(
    c: &mut Canister,
    map: &str,
    key: u64,
    value: &[u8],
    caller: Principal,
) -> (Result<Option<ByteBuf>, String>, u64) {
    let out = c.update(&format!("{map}_put"), &candid::encode_args((key, ByteBuf::from(value))).unwrap(), caller);
    let instructions = out.instructions;
    (decode(out, "put"), instructions)
}

fn get(c: &mut Canister, map: &str, key: u64) -> (Option<ByteBuf>, u64) {
    let out = c.query(&format!("{map}_get"), &candid::encode_one(key).unwrap(), default_controller());
    let instructions = out.instructions;
    (decode(out, "get"), instructions)
}

/// The value stored under `key` by the maps test: 100 bytes that depend on the key.
fn value(key: u64) -> Vec<u8> {
    (0..100).map(|i| (key.wrapping_mul(31) + i) as u8).collect()
}

#[test]
fn both_map_examples_keep_their_entries_across_upgrades() {
    const ENTRIES: u64 = 10_000;
    let code = example("example_maps");
    let mut c = Canister::install(code.clone(), &unit(), Options::default()).expect("installs").0;
    for map in ["stable", "heap"] {
        for key in 0..ENTRIES {
            assert_eq!(put(&mut c, map, key, &value(key), default_controller()).0, Ok(None), "{map} {key}");
        }
        let (replaced, _) = put(&mut c, map, 7, b"seven", default_controller());
        assert_eq!(replaced, Ok(Some(ByteBuf::from(value(7)))));
        assert_eq!(put(&mut c, map, 1, b"x", Principal::anonymous()).0, Err("only a controller can write".to_string()));
        assert!(put(&mut c, map, 1, &vec![0; 64 * 1024 + 1], default_controller())
            .0
            .unwrap_err()
            .contains("at most 65536"));
    }
    let len = |c: &mut Canister| -> (u64, u64) {
        candid::decode_args(&c.query("len", &unit(), default_controller()).result.expect("len")).expect("len")
    };
    assert_eq!(len(&mut c), (ENTRIES, ENTRIES));

    let upgrade = both_ways(&mut c, |c| c.upgrade(code.clone(), &unit()));
    assert_eq!(len(&mut c), (ENTRIES, ENTRIES));
    for map in ["stable", "heap"] {
        assert_eq!(get(&mut c, map, 7).0, Some(ByteBuf::from(&b"seven"[..])), "{map}");
        for key in (0..ENTRIES).filter(|&k| k != 7).step_by(97) {
            assert_eq!(get(&mut c, map, key).0, Some(ByteBuf::from(value(key))), "{map} {key}");
        }
        assert_eq!(get(&mut c, map, ENTRIES).0, None);
    }

    // One call of each, at 10,000 entries of 100 bytes, after the upgrade (for docs/use-in-your-canister.md).
    let mut costs = Vec::new();
    for map in ["stable", "heap"] {
        let name = if map == "stable" { "`StableBTreeMap`" } else { "heap `BTreeMap`" };
        let put = |key: u64, value: Vec<u8>| {
            move |c: &mut Canister| {
                let arg = candid::encode_args((key, ByteBuf::from(value.clone()))).unwrap();
                c.update(&format!("{map}_put"), &arg, default_controller())
            }
        };
        costs.push(format!("| {name} | put, new key | {} |", both_ways(&mut c, put(ENTRIES + 1, value(1)))));
        costs.push(format!("| {name} | put, existing key | {} |", both_ways(&mut c, put(5_000, value(2)))));
        let get = |c: &mut Canister| {
            c.query(&format!("{map}_get"), &candid::encode_one(4_999u64).unwrap(), default_controller())
        };
        costs.push(format!("| {name} | get | {} |", both_ways(&mut c, get)));
    }
    costs.push(format!("| both, full | upgrade (`pre_upgrade` and `post_upgrade`) | {upgrade} |"));
    let table = format!("| map | call | {BOTH_WAYS} |\n|---|---|---:|---:|---:|\n{}\n", costs.join("\n"));
    println!("{table}");
    readme_fragment("example-maps-costs", &table);
}
