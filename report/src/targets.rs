//! The targets for one call on mainnet, against the committed per-call figures
//! (`per_call_results.yml`, `endpoints_results.yml`): which are met and by how much the others
//! miss. The targets are the project's (what a one-row call of a serious database in a canister
//! should cost now that a message pays for its pages); the figures are measured, never typed.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt::Write;

use crate::page_regions;
use crate::sharding::PerCall;

/// The most a one-row SQLite write may cost on mainnet, instructions.
pub const SQLITE_WRITE: u64 = 3_500_000;
/// The most a `StableBTreeMap` put may cost on mainnet, instructions.
pub const STABLE_BTREEMAP_PUT: u64 = 1_500_000;
/// The most a users/orders endpoint may cost against its floor (its statement alone in a minimal
/// message, which touches the statement's pages too). The key-value calls are held to
/// [`crate::page_regions::RATIO`] times the minimal message plus their structure's necessary
/// pages (`docs/page-budget.md`).
pub const FLOOR_RATIO: f64 = 2.0;

/// The part of `endpoints_results.yml` read here: under the `ic` cost model, per size and call.
#[derive(Deserialize, Clone, Debug)]
pub struct Endpoints {
    /// Size (`1x`, `10x`) -> call -> its figures.
    pub mainnet: BTreeMap<String, BTreeMap<String, Endpoint>>,
}

/// One endpoint call's medians.
#[derive(Deserialize, Clone, Copy, Debug)]
pub struct Endpoint {
    /// On the production wasm.
    pub instructions: u64,
    /// The same call on the benchmark wasm, beside its floor.
    pub same_wasm: Option<u64>,
    /// Its floor (on the benchmark wasm).
    pub floor: Option<u64>,
}

/// One target against one measured call.
#[derive(Clone, Debug, PartialEq)]
pub struct Check {
    /// The target, in words.
    pub target: String,
    /// The call and where it was measured.
    pub call: String,
    /// The measured figure, instructions on mainnet.
    pub measured: u64,
    /// The figure it must not exceed, instructions.
    pub limit: u64,
    /// Where the call's floor plus its structure's necessary pages alone exceed the limit: that
    /// figure (`docs/page-budget.md`), so the target cannot be met without changing the
    /// structure's layout.
    pub floor_and_necessary: Option<u64>,
}

impl Check {
    /// Whether the call meets its target.
    pub fn met(&self) -> bool {
        self.measured <= self.limit
    }
}

/// The one-row user insert of the users/orders endpoints.
const ADD_USERS: &str = "add_users(next, 1)";

/// Every target against the committed figures, in a fixed order.
pub fn checks(per_call: &PerCall, endpoints: &Endpoints, regions: &page_regions::Results) -> Vec<Check> {
    let keys = stablebench_grid::grouped(per_call.keys);
    let mut out = Vec::new();
    let budgets = page_regions::budgets(regions);
    // The budget of `backend`'s `kv_put` where its floor and necessary pages alone pass `limit`.
    let unreachable = |backend: &str, limit: u64| {
        budgets
            .iter()
            .find(|b| b.backend == backend && b.name == "kv_put")
            .map(|b| b.floor_and_necessary())
            .filter(|&f| f > limit)
    };
    let put = |backend: &str| per_call.mainnet.backends.get(backend).map(|b| b.put.median);
    let sqlite_writes = [
        (format!("`kv_put`, `sqlite`, {keys} keys"), put("sqlite"), Some("sqlite")),
        (format!("`kv_put`, `sqlite_rowid`, {keys} keys"), put("sqlite_rowid"), Some("sqlite_rowid")),
        (
            format!("`{ADD_USERS}`, users/orders at 1x"),
            endpoints.mainnet.get("1x").and_then(|r| r.get(ADD_USERS)).map(|c| c.instructions),
            None,
        ),
    ];
    for (call, measured, backend) in sqlite_writes {
        if let Some(measured) = measured {
            out.push(Check {
                target: format!("a one-row SQLite write at most {}", stablebench_grid::grouped(SQLITE_WRITE)),
                call,
                measured,
                limit: SQLITE_WRITE,
                floor_and_necessary: backend.and_then(|b| unreachable(b, SQLITE_WRITE)),
            });
        }
    }
    if let Some(b) = per_call.mainnet.backends.get("stable_btreemap") {
        out.push(Check {
            target: format!("a `StableBTreeMap` put at most {}", stablebench_grid::grouped(STABLE_BTREEMAP_PUT)),
            call: format!("`kv_put`, `stable_btreemap`, {keys} keys"),
            measured: b.put.median,
            limit: STABLE_BTREEMAP_PUT,
            floor_and_necessary: unreachable("stable_btreemap", STABLE_BTREEMAP_PUT),
        });
    }
    for b in &budgets {
        out.push(Check {
            target: format!(
                "within {}× of the minimal {} plus its structure's necessary pages",
                page_regions::RATIO,
                if b.update { "update" } else { "query" }
            ),
            call: format!("`{}`, {}, the canister's default profile (`docs/page-budget.md`)", b.name, b.scope),
            measured: b.call.instructions,
            limit: b.limit(),
            floor_and_necessary: None,
        });
    }
    let sizes: Vec<(&str, &BTreeMap<String, Endpoint>)> =
        ["1x", "10x"].into_iter().filter_map(|l| Some((l, endpoints.mainnet.get(l)?))).collect();
    for &(size, calls) in &sizes {
        if let Some(same) = calls.get(ADD_USERS).and_then(|c| c.same_wasm.map(|s| (c.instructions, s))) {
            out.push(Check {
                target: "the production call no dearer than on the benchmark wasm".into(),
                call: format!("`{ADD_USERS}`, users/orders at {size}"),
                measured: same.0,
                limit: same.1,
                floor_and_necessary: None,
            });
        }
    }
    for &(size, calls) in &sizes {
        for (call, c) in calls {
            if let Some(floor) = c.floor {
                out.push(Check {
                    target: format!("within {FLOOR_RATIO}× of its floor"),
                    call: format!("`{call}`, users/orders at {size}"),
                    measured: c.instructions,
                    limit: (floor as f64 * FLOOR_RATIO) as u64,
                    floor_and_necessary: None,
                });
            }
        }
    }
    out
}

/// docs/per-call.md's `page-targets` fragment: every target, met or by how much it misses.
pub fn table(checks: &[Check]) -> String {
    let met = checks.iter().filter(|c| c.met()).count();
    let mut out = format!(
        "{met} of {} targets met, on mainnet (the runner's `ic` cost model, page fees included), production wasm, the recommended profile: each figure is the median message holding one call, an update for `kv_put`, `add_*` and `delete_orders`, a query for `list_*`, `query_sql*` and `kv_get`, as the tables below give it; a users/orders floor is the call's statement alone in a minimal message of the benchmark wasm over the same database; a limit \"within 2× of the minimal update or query\" is twice that minimal message of the production canister plus the fee of the pages the call's structure must touch, computed from the structure, for the calls of `docs/page-budget.md` (the canister's default profile; the key-value calls at 200,000 keys; the users/orders calls each the median of nine in a row of its kind, the reads from random ids, so their figures differ from those of the per-call table's calls, which alternate kinds and read the newest rows).\n\n",
        checks.len()
    );
    out.push_str("| target | call | on mainnet | at most | met |\n|---|---|---:|---:|---|\n");
    for c in checks {
        let mut verdict =
            if c.met() { "yes".to_string() } else { format!("no: {:.2}x", c.measured as f64 / c.limit as f64) };
        if let Some(f) = c.floor_and_necessary {
            let _ = write!(
                verdict,
                "; out of reach in this layout: the minimal update plus the pages its structure must touch cost {}",
                stablebench_grid::grouped(f)
            );
        }
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {verdict} |",
            c.target,
            c.call,
            stablebench_grid::grouped(c.measured),
            stablebench_grid::grouped(c.limit)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoints(instructions: u64, same_wasm: u64, floor: u64) -> Endpoints {
        let call = Endpoint { instructions, same_wasm: Some(same_wasm), floor: Some(floor) };
        Endpoints { mainnet: BTreeMap::from([("1x".into(), BTreeMap::from([(ADD_USERS.into(), call)]))]) }
    }

    fn per_call(put: u64) -> PerCall {
        serde_yaml::from_str(&format!(
            "keys: 200000\nmainnet:\n  backends:\n    stable_btreemap:\n      put: {{median: {put}}}\n      upgrade: 1\n"
        ))
        .unwrap()
    }

    #[test]
    fn a_target_is_met_up_to_its_limit_and_missed_past_it() {
        let none = page_regions::Results::default();
        let c = checks(&per_call(1_500_000), &endpoints(3_500_000, 3_500_000, 1_750_000), &none);
        assert_eq!(c.len(), 4, "{c:?}");
        assert!(c.iter().all(Check::met), "{c:?}");
        let c = checks(&per_call(1_500_001), &endpoints(3_500_001, 3_500_000, 1_750_000), &none);
        assert!(c.iter().all(|c| !c.met()), "{c:?}");
        let t = table(&c);
        assert!(t.starts_with("0 of 4 targets met"), "{t}");
        assert!(t.contains("| `kv_put`, `stable_btreemap`, 200,000 keys | 1,500,001 | 1,500,000 | no: 1.00x |"), "{t}");
    }

    #[test]
    fn a_fixed_target_below_the_floor_and_necessary_pages_is_out_of_reach() {
        use page_regions::{Call, Calls, Floor, Necessary, Results, Split};
        let mut put = Call { instructions: 2_000_000, ..Call::default() };
        put.necessary =
            Some(Necessary { what: "nodes".into(), heap: Split::default(), stable: Split { accessed: 6, written: 2 } });
        let floor = Floor { update: Call { instructions: 1_000_000, ..Call::default() }, query: Call::default() };
        let mut regions = Results { keys: 200_000, floor: Some(floor), ..Results::default() };
        let calls = Calls { calls: 1, update: true, median: put.clone(), max: put };
        regions.backends.insert("stable_btreemap".into(), BTreeMap::from([("kv_put".into(), calls)]));
        // 1,000,000 + 8 pages at 80,000 = 1,640,000: more than the 1,500,000 target.
        let c = checks(&per_call(1_600_000), &endpoints(3_500_000, 3_500_000, 1_750_000), &regions);
        let fixed = c.iter().find(|c| c.target.starts_with("a `StableBTreeMap` put")).expect("the fixed target");
        assert_eq!(fixed.floor_and_necessary, Some(1_640_000));
        let budget = c.iter().find(|c| c.target.starts_with("within 2× of the minimal update")).expect("the budget");
        assert_eq!((budget.measured, budget.limit), (2_000_000, 3_280_000));
        assert!(table(&c).contains("no: 1.07x; out of reach in this layout: the minimal update plus the pages its structure must touch cost 1,640,000"));
    }
}
