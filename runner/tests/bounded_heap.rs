//! Whether a pragma profile keeps the heap bounded: the production canister installed with a
//! lowered `wasm_memory_limit` ([`LIMIT`], the smallest the canister accepts) and the same value as
//! its `wasm_memory_limit` argument (which bounds SQLite's page cache to a quarter of it), a
//! users/orders database several times larger than that limit loaded through the production
//! endpoints in budgeted calls, at each of [`SIZES`] (at 3,000,000 orders `create_indexes` builds
//! the orders index in one `CREATE INDEX`, whose sorter holds every key; at 4,000,000 through a
//! shadow table), then both index builds (`create_indexes` until `complete`), the reference join
//! (`query_sql_page`: its `ORDER BY` sorts every joined row before the first page), the reference
//! delete (`delete_orders` of the first thousandth of the users) and `integrity_check`. Per step:
//! its calls, their instructions under the runner's `ic` cost model (mainnet's), and the heap's
//! high-water mark (Wasm memory never shrinks, so an update's heap after it is its high-water
//! mark; a query's growth is discarded with it, and its figure is the heap while it ran), or the
//! error that stopped it.
//!
//! A profile is bounded when no step stops at either size but at the message's instruction limit
//! ([`Profile::bounded`]). The recommended profile's entries at both sizes stand on the wasm and
//! the sources they were measured with (`common::measures`; `STABLEBENCH_REMEASURE=1` measures
//! them again, and they must match `bounded_heap_results.yml` exactly); the other deployable profiles stand only on the
//! production wasm they were measured on (its SHA-256 is recorded), and are remeasured with
//! `STABLEBENCH_REGENERATE_BOUNDED=1 STABLEBENCH_BOUNDED_PROFILES=1 cargo test --release -p stablebench-runner --test bounded_heap`
//! (every profile at both sizes, on every core: on 2026-12-02 the 3,000,000-order size took
//! 268 s on two cores, the 4,000,000-order one 2,665 s on one; `STABLEBENCH_BOUNDED_SIZES=3m`
//! measures one size and keeps the other's entries, which must stand on the wasm built now;
//! without `STABLEBENCH_BOUNDED_PROFILES` regenerating rewrites the recommended profile's entries
//! only, likewise).

mod common;
use common::{code, decode, unit};

use std::collections::BTreeMap;

use candid::{CandidType, Principal};
use serde::de::DeserializeOwned;
use stablebench_canister::{Batch, Cost, Deleted, Error, IndexProgress, InitArgs};
use stablebench_grid::profiles::{DEFAULT, PROFILES};
use stablebench_report::bounded::{Profile, Results, Size, Step, LIMIT, SIZES};
use stablebench_runner::canister::{default_controller, Canister, Limits, Options, Outcome};
use stablebench_runner::replica::CostModel;

const RESULTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../bounded_heap_results.yml");
const DOC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/pragma-guide.md");
/// This test's own sources (besides [`common::PRODUCERS`]): its file and its results type.
const SOURCES: [&str; 2] = ["runner/tests/bounded_heap.rs", "report/src/bounded.rs"];

fn splice(doc: &str, r: &Results) -> String {
    stablebench_report::splice(doc, "bounded-heap-table", &stablebench_report::bounded::table(r))
        .unwrap_or_else(|e| panic!("docs/pragma-guide.md: {e}"))
}

/// A step's calls so far.
struct Tally {
    step: Step,
}

impl Tally {
    fn new(name: &str) -> Tally {
        Tally { step: Step { step: name.to_string(), calls: 0, instructions: 0, heap_bytes: 0, error: None } }
    }

    /// Counts `out`; its reply decoded, or the reason it has none (a trap, a rejection, the
    /// canister's error) as the step's error.
    fn call<R: CandidType + DeserializeOwned>(&mut self, out: Outcome) -> Option<R> {
        self.step.calls += 1;
        self.step.instructions += out.instructions;
        self.step.heap_bytes = self.step.heap_bytes.max(out.heap_bytes);
        match out.result {
            Ok(bytes) => match candid::decode_one::<Result<R, Error>>(&bytes) {
                Ok(Ok(r)) => Some(r),
                Ok(Err(e)) => {
                    self.step.error = Some(format!("{e:?}"));
                    None
                }
                Err(e) => panic!("{}: the reply does not decode: {e}", self.step.step),
            },
            Err(e) => {
                self.step.error = Some(format!("{e}"));
                None
            }
        }
    }
}

fn update(c: &mut Canister, method: &str, arg: &[u8]) -> Outcome {
    c.update(method, arg, default_controller())
}

/// `method(offset, count)` in budgeted calls until `total` rows are present, or the first error.
fn rows(c: &mut Canister, t: &mut Tally, method: &str, total: u64) -> bool {
    let mut next = 0;
    while next < total {
        match t.call::<Batch>(update(c, method, &candid::encode_args((next, total - next, None::<u64>)).unwrap())) {
            Some(b) => next = b.next_offset,
            None => return false,
        }
    }
    true
}

/// Every step on a fresh canister under `profile` at `size`, until the first that fails.
fn measure(profile: &str, size: Size) -> Profile {
    let (users, orders) = (size.users, size.orders);
    let arg =
        candid::encode_one(Some(InitArgs { profile: Some(profile.into()), wasm_memory_limit: Some(LIMIT) })).unwrap();
    let opts = Options {
        limits: Limits::PRODUCTION,
        cost_model: CostModel::Ic,
        wasm_memory_limit: LIMIT,
        ..Options::default()
    };
    let (mut c, out) = Canister::install(code(), &arg, opts).expect("installs");
    let mut steps = vec![Step {
        step: "install".into(),
        calls: 1,
        instructions: out.instructions,
        heap_bytes: out.heap_bytes,
        error: out.result.err().map(|e| e.to_string()),
    }];
    let mut run = |name: &str, body: &mut dyn FnMut(&mut Canister, &mut Tally) -> bool| -> bool {
        let mut t = Tally::new(name);
        let ok = body(&mut c, &mut t) && t.step.error.is_none();
        steps.push(t.step);
        ok
    };
    let anyone = Principal::anonymous();
    let _ = run("create_schema", &mut |c, t| t.call::<Cost>(update(c, "create_schema", &unit())).is_some())
        && run("add_users", &mut |c, t| rows(c, t, "add_users", users))
        && run("add_orders", &mut |c, t| rows(c, t, "add_orders", orders))
        && run("create_indexes", &mut |c, t| loop {
            match t.call::<IndexProgress>(update(c, "create_indexes", &candid::encode_one(None::<u64>).unwrap())) {
                Some(p) if p.complete => break true,
                Some(_) => continue,
                None => break false,
            }
        })
        && run("select_join", &mut |c, t| {
            let sql = stablebench::workload::select_join_sql(users / 100);
            let out = c.query("query_sql_page", &candid::encode_args((&sql, 0u64)).unwrap(), default_controller());
            t.call::<stablebench::query::RowsPage>(out).is_some_and(|p| !p.rows.rows.is_empty())
        })
        && run("delete_orders", &mut |c, t| {
            let mut from = None::<u64>;
            loop {
                let arg = candid::encode_args((users / 1_000, from, None::<u64>)).unwrap();
                match t.call::<Deleted>(update(c, "delete_orders", &arg)) {
                    Some(d) if d.complete => break true,
                    Some(d) => from = Some(d.next_order_id),
                    None => break false,
                }
            }
        })
        && run("integrity_check", &mut |c, t| {
            let sql = candid::encode_one("SELECT * FROM pragma_integrity_check").unwrap();
            t.call::<stablebench::query::Rows>(c.query("query_sql", &sql, default_controller()))
                .is_some_and(|r| r.rows == vec![vec![stablebench::query::Value::Text("ok".into())]])
        });
    let stats: Result<stablebench_canister::Stats, Error> = decode(c.query("stats", &unit(), anyone), "stats");
    let database_bytes = stats.map_or(0, |s| s.database_bytes);
    Profile { database_bytes, steps }
}

/// `jobs` measured on the machine's cores, each on a canister of its own (the runner is
/// deterministic: the figures do not depend on what runs beside them).
fn measure_all(jobs: &[(&'static str, Size)]) -> BTreeMap<String, BTreeMap<String, Profile>> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let done = std::sync::Mutex::new(BTreeMap::<String, BTreeMap<String, Profile>>::new());
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(jobs.len());
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(&(name, size)) = jobs.get(i) else { break };
                let p = measure(name, size);
                for s in &p.steps {
                    eprintln!(
                        "{name} {} {}: {} calls, {} instructions, heap {} B, {:?}",
                        size.name, s.step, s.calls, s.instructions, s.heap_bytes, s.error
                    );
                }
                done.lock().unwrap().entry(size.name.to_string()).or_default().insert(name.to_string(), p);
            });
        }
    });
    done.into_inner().unwrap()
}

#[test]
fn every_deployable_profile_keeps_its_heap_where_the_committed_results_say() {
    let committed: Results = common::committed_or_default(RESULTS);
    let wasm = common::wasm_hashes(&["stablebench.wasm"]);
    let every = std::env::var_os("STABLEBENCH_BOUNDED_PROFILES").is_some();
    // `STABLEBENCH_BOUNDED_SIZES=3m,4m` (names of `SIZES`) measures those sizes only.
    let only = std::env::var("STABLEBENCH_BOUNDED_SIZES").ok();
    let sizes: Vec<Size> =
        SIZES.into_iter().filter(|s| only.as_deref().is_none_or(|o| o.split(',').any(|n| n == s.name))).collect();
    assert!(!sizes.is_empty(), "STABLEBENCH_BOUNDED_SIZES names none of {:?}", SIZES.map(|s| s.name));
    let names: Vec<&'static str> = PROFILES
        .iter()
        .filter(|p| p.deployable().is_ok() && (every || p.name == DEFAULT.name))
        .map(|p| p.name)
        .collect();
    let jobs: Vec<(&'static str, Size)> = sizes.iter().flat_map(|s| names.iter().map(move |n| (*n, *s))).collect();
    let sources = common::sources(&SOURCES);
    let measures = common::measures(
        RESULTS,
        "STABLEBENCH_REGENERATE_BOUNDED",
        "STABLEBENCH_REGENERATE_BOUNDED=1 cargo test --release -p stablebench-runner --test bounded_heap",
        Some(&committed.wasm),
        &wasm,
        &committed.sources,
        &sources,
    );
    // Unmeasured, the committed entries stand (`common::measures`).
    let measured = if measures { measure_all(&jobs) } else { committed.sizes.clone() };
    let whole = every && sizes.len() == SIZES.len();
    if std::env::var_os("STABLEBENCH_REGENERATE_BOUNDED").is_some() {
        let mut merged = committed.clone();
        if whole {
            merged.sizes = measured;
        } else {
            // Entries kept from the committed file must stand on the wasm built now.
            common::assert_measured_on(
                "bounded_heap_results.yml",
                "per-profile",
                Some(&committed.wasm),
                &wasm,
                "STABLEBENCH_REGENERATE_BOUNDED=1 STABLEBENCH_BOUNDED_PROFILES=1",
            );
            for (size, m) in measured {
                merged.sizes.entry(size).or_default().extend(m);
            }
        }
        // The recommended profile's entries at the sizes not measured stand on the sources too.
        assert!(
            sizes.len() == SIZES.len() || committed.sources == sources,
            "the sources changed since bounded_heap_results.yml was measured: measure every size"
        );
        merged.wasm = wasm;
        merged.sources = sources;
        let yml = format!(
            "# Generated by `STABLEBENCH_REGENERATE_BOUNDED=1 STABLEBENCH_BOUNDED_PROFILES=1 cargo test --release -p stablebench-runner --test bounded_heap`;\n\
             # per size, per deployable pragma profile, the steps of a users/orders load several times larger than a lowered\n\
             # wasm_memory_limit on the production wasm (its SHA-256 under `wasm`), under the runner's ic cost model. Do not edit.\n{}",
            serde_yaml::to_string(&merged).unwrap()
        );
        std::fs::write(RESULTS, yml).unwrap();
        let doc = std::fs::read_to_string(DOC).unwrap();
        std::fs::write(DOC, splice(&doc, &merged)).unwrap();
        return;
    }
    for size in &sizes {
        assert_eq!(
            measured.get(size.name).and_then(|m| m.get(DEFAULT.name)),
            committed.sizes.get(size.name).and_then(|m| m.get(DEFAULT.name)),
            "the recommended profile's bounded-heap steps at {} moved: regenerate bounded_heap_results.yml (STABLEBENCH_REGENERATE_BOUNDED=1)",
            size.name
        );
    }
    common::assert_measured_on(
        "bounded_heap_results.yml",
        "per-profile",
        Some(&committed.wasm),
        &wasm,
        "STABLEBENCH_REGENERATE_BOUNDED=1 STABLEBENCH_BOUNDED_PROFILES=1",
    );
    if every {
        for size in &sizes {
            assert_eq!(
                measured.get(size.name),
                committed.sizes.get(size.name),
                "a profile's bounded-heap steps at {} moved: regenerate bounded_heap_results.yml",
                size.name
            );
        }
    }
    // Every deployable profile is in the file at every size, and the recommended one is bounded.
    for p in PROFILES.iter().filter(|p| p.deployable().is_ok()) {
        for size in SIZES {
            assert!(
                committed.sizes.get(size.name).is_some_and(|m| m.contains_key(p.name)),
                "bounded_heap_results.yml has no `{}` at {}: regenerate it (STABLEBENCH_REGENERATE_BOUNDED=1 STABLEBENCH_BOUNDED_PROFILES=1)",
                p.name,
                size.name
            );
        }
    }
    assert_eq!(committed.bounded(DEFAULT.name), Ok(()), "the recommended profile's heap is not bounded");
    // The rule the README, the pragma guide and `stablebench-pragmas` state: a profile keeps its
    // heap bounded exactly when it sets temp_store FILE (ic-rusqlite's own default is MEMORY) and
    // keeps the rollback journal out of the heap.
    for p in PROFILES.iter().filter(|p| p.deployable().is_ok()) {
        let has = |name: &str, value: &str| p.pragmas.iter().any(|x| x.name == name && x.value == value);
        let rule = has("temp_store", "FILE") && !has("journal_mode", "MEMORY");
        assert_eq!(
            committed.bounded(p.name).is_ok(),
            rule,
            "{}: bounded {:?}, but the stated rule (temp_store FILE, journal not MEMORY) says {rule}: fix the texts",
            p.name,
            committed.bounded(p.name)
        );
    }
    let doc = std::fs::read_to_string(DOC).unwrap();
    assert_eq!(doc, splice(&doc, &committed), "docs/pragma-guide.md's bounded-heap table is stale");
}
