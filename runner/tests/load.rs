//! `stablebench-runner load` against the real production wasm (`target/canister/stablebench.wasm`,
//! built by `scripts/build.sh`) offline: the command as scripts/load.sh runs it, twice into one
//! state directory, and a load interrupted halfway that continues.

mod common;
use common::{decode, unit};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Result};
use candid::Principal;
use stablebench_canister::{Error, Stats};
use stablebench_runner::candid_text::Interface;
use stablebench_runner::canister::Canister;
use stablebench_runner::load::{self, MethodCost, Plan};
use stablebench_runner::target::{Offline, Target};

const WASM: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../target/canister/stablebench.wasm");
const USERS: u64 = 300;
const ORDERS: u64 = 3_000;
/// The smallest budget the canister accepts: a few hundred orders per call, so the orders take
/// several calls.
const BUDGET: u64 = 10_000_000;

fn wasm() -> &'static Path {
    let path = Path::new(WASM);
    assert!(path.exists(), "{WASM} is missing: run scripts/build.sh first (scripts/test.sh does)");
    path
}

/// A fresh directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(label: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("stablebench-load-{label}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The canister saved in `state`, asked for its stats with the canister's own types.
fn saved_stats(state: &Path) -> Stats {
    let mut c = Canister::load(state, false).expect("a canister is saved");
    decode::<Result<Stats, Error>>(c.query("stats", &unit(), Principal::anonymous()), "stats").expect("stats")
}

/// Runs `stablebench-runner load` into `state`; its stdout and stderr.
fn run_command(state: &Path) -> (String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_stablebench-runner"))
        .args(["load", "--users", &USERS.to_string(), "--orders", &ORDERS.to_string()])
        .args(["--budget", &BUDGET.to_string(), "--wasm", wasm().to_str().unwrap(), "--state"])
        .arg(state)
        .output()
        .expect("the runner runs");
    let (stdout, stderr) = (String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap());
    assert!(out.status.success(), "load failed:\n{stderr}");
    (stdout, stderr)
}

/// The cost table on stderr: method -> (calls, added).
fn cost_rows(stderr: &str) -> BTreeMap<String, (u64, String)> {
    let header = "| method | calls | rows or indexes added | instructions (sum of the replies) |";
    let table = &stderr[stderr.find(header).unwrap_or_else(|| panic!("no cost table in:\n{stderr}"))..];
    table
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split('|').map(str::trim).collect();
            (cells[0].to_string(), (cells[1].parse().unwrap(), cells[2].to_string()))
        })
        .collect()
}

#[test]
fn load_command_fills_the_canister_and_a_second_run_loads_nothing_twice() {
    let dir = TempDir::new("twice");
    let (stdout, stderr) = run_command(&dir.0);
    // stdout is the stats reply in Candid text, which scripts/test.sh reads.
    assert!(stdout.contains("users = 300 : nat64") && stdout.contains("orders = 3_000 : nat64"), "{stdout}");
    // One progress line per add_orders call, each further than the last, the last at 3000.
    let present: Vec<u64> = stderr
        .lines()
        .filter_map(|l| l.strip_prefix("add_orders: ")?.split_once(" of 3000 rows present")?.0.parse().ok())
        .collect();
    assert!(present.len() >= 2 && present.windows(2).all(|w| w[0] < w[1]), "{stderr}");
    assert_eq!(present.last(), Some(&ORDERS));
    let first = cost_rows(&stderr);
    let expect = |rows: &[(&str, u64, &str)]| -> BTreeMap<String, (u64, String)> {
        rows.iter().map(|(m, calls, added)| (m.to_string(), (*calls, added.to_string()))).collect()
    };
    assert_eq!(
        first,
        expect(&[
            ("create_schema", 1, "-"),
            ("add_users", 1, "300"),
            ("add_orders", present.len() as u64, "3000"),
            ("create_indexes", 1, "2")
        ])
    );
    let s = saved_stats(&dir.0);
    assert_eq!((s.schema, s.users, s.orders, s.indexes.len()), (true, USERS, ORDERS, 2));

    // Again with the same sizes: one call per method finds everything present.
    let (stdout2, stderr2) = run_command(&dir.0);
    assert_eq!(
        cost_rows(&stderr2),
        expect(&[("create_schema", 1, "-"), ("add_users", 1, "0"), ("add_orders", 1, "0"), ("create_indexes", 1, "0")])
    );
    assert!(!stderr2.contains("installed"), "the second run must use the saved canister:\n{stderr2}");
    let s2 = saved_stats(&dir.0);
    assert_eq!((s2.users, s2.orders, &s2.indexes), (USERS, ORDERS, &s.indexes));
    // The data did not change: the same database, page for page.
    assert_eq!((s2.page_count, s2.database_bytes), (s.page_count, s.database_bytes));
    assert!(stdout2.contains("orders = 3_000 : nat64"), "{stdout2}");
}

/// A target that stops (like Ctrl-C) before its `n`-th update call is sent.
struct StopBefore {
    inner: Offline,
    updates_left: usize,
}

impl Target for StopBefore {
    fn call(&mut self, method: &str, arg: Vec<u8>, query: bool) -> Result<Vec<u8>> {
        if !query {
            if self.updates_left == 0 {
                bail!("interrupted before {method}");
            }
            self.updates_left -= 1;
        }
        self.inner.call(method, arg, query)
    }

    fn upgrade(&mut self) -> Result<()> {
        self.inner.upgrade()
    }

    fn interface(&self) -> Option<Interface> {
        self.inner.interface()
    }
}

fn by_method(costs: &[MethodCost]) -> BTreeMap<&'static str, (u64, Option<u64>)> {
    costs.iter().map(|c| (c.method, (c.calls, c.added))).collect()
}

#[test]
fn an_interrupted_load_continues_from_the_saved_canister() {
    let dir = TempDir::new("interrupted");
    let plan = Plan { users: USERS, orders: ORDERS, budget: Some(BUDGET), index_budget: None };
    // create_schema, add_users, two add_orders calls; the next is never sent.
    let (offline, installed) = Offline::open(&dir.0, wasm()).unwrap();
    assert!(installed);
    let mut stopping = StopBefore { inner: offline, updates_left: 4 };
    let e = load::load(&mut stopping, &plan).unwrap_err();
    assert_eq!(e.to_string(), "interrupted before add_orders");
    let before = saved_stats(&dir.0);
    assert_eq!((before.users, before.indexes.len()), (USERS, 0));
    assert!(0 < before.orders && before.orders < ORDERS, "{} orders after two calls", before.orders);

    // A new process: the saved canister, the same plan.
    let (mut offline, installed) = Offline::open(&dir.0, wasm()).unwrap();
    assert!(!installed);
    let costs = by_method(&load::load(&mut offline, &plan).unwrap());
    // The users were all there; the orders continue after those present, each inserted once.
    let (order_calls, orders_added) = costs["add_orders"];
    assert!(order_calls >= 1);
    assert_eq!(orders_added, Some(ORDERS - before.orders));
    assert_eq!(
        costs,
        BTreeMap::from([
            ("create_schema", (1, None)),
            ("add_users", (1, Some(0))),
            ("add_orders", (order_calls, orders_added)),
            ("create_indexes", (1, Some(2))),
        ])
    );
    // The runner's reply types decode the real `stats` reply as the canister's own types do.
    let (stats, text) = load::stats(&mut offline).unwrap();
    let real = saved_stats(&dir.0);
    assert_eq!((stats.users, stats.orders, stats.indexes.clone()), (USERS, ORDERS, real.indexes.clone()));
    assert_eq!((real.users, real.orders), (USERS, ORDERS));
    assert_eq!((stats.page_count, stats.profile.as_str()), (real.page_count, real.profile.as_str()));
    assert!(text.contains("users = 300 : nat64"), "{text}");
}
