//! The targets for one call on mainnet, against the committed per-call figures
//! (`per_call_results.yml`, `endpoints_results.yml`): which are met and by how much the others
//! miss. The targets are the project's (what a one-row call of a serious database in a canister
//! should cost now that a message pays for its pages); the figures are measured, never typed.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt::Write;

use crate::sharding::PerCall;

/// The most a one-row SQLite write may cost on mainnet, instructions.
pub const SQLITE_WRITE: u64 = 3_500_000;
/// The most a `StableBTreeMap` put may cost on mainnet, instructions.
pub const STABLE_BTREEMAP_PUT: u64 = 1_500_000;
/// The most a production endpoint may cost against its floor (the floor alone: the pages its
/// structure needs beyond the floor are not computed yet, so a call within this ratio of its floor
/// meets the target, and one beyond it may still).
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
pub fn checks(per_call: &PerCall, endpoints: &Endpoints) -> Vec<Check> {
    let keys = stablebench_grid::grouped(per_call.keys);
    let mut out = Vec::new();
    let put = |backend: &str| per_call.mainnet.backends.get(backend).map(|b| b.put.median);
    let sqlite_writes = [
        (format!("`kv_put`, `sqlite`, {keys} keys"), put("sqlite")),
        (format!("`kv_put`, `sqlite_rowid`, {keys} keys"), put("sqlite_rowid")),
        (
            format!("`{ADD_USERS}`, users/orders at 1x"),
            endpoints.mainnet.get("1x").and_then(|r| r.get(ADD_USERS)).map(|c| c.instructions),
        ),
    ];
    for (call, measured) in sqlite_writes {
        if let Some(measured) = measured {
            out.push(Check {
                target: format!("a one-row SQLite write at most {}", stablebench_grid::grouped(SQLITE_WRITE)),
                call,
                measured,
                limit: SQLITE_WRITE,
            });
        }
    }
    if let Some(b) = per_call.mainnet.backends.get("stable_btreemap") {
        out.push(Check {
            target: format!("a `StableBTreeMap` put at most {}", stablebench_grid::grouped(STABLE_BTREEMAP_PUT)),
            call: format!("`kv_put`, `stable_btreemap`, {keys} keys"),
            measured: b.put.median,
            limit: STABLE_BTREEMAP_PUT,
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
        "{met} of {} targets met, on mainnet (the runner's `ic` cost model, page fees included), production wasm, the recommended profile: each figure is the median message holding one call, an update for `kv_put`, `add_*` and `delete_orders`, a query for `list_*` and `query_sql*`, as the tables below give it; a floor is measured on the benchmark wasm over the same database.\n\n",
        checks.len()
    );
    out.push_str("| target | call | on mainnet | at most | met |\n|---|---|---:|---:|---|\n");
    for c in checks {
        let verdict =
            if c.met() { "yes".to_string() } else { format!("no: {:.2}x", c.measured as f64 / c.limit as f64) };
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
        let c = checks(&per_call(1_500_000), &endpoints(3_500_000, 3_500_000, 1_750_000));
        assert_eq!(c.len(), 4, "{c:?}");
        assert!(c.iter().all(Check::met), "{c:?}");
        let c = checks(&per_call(1_500_001), &endpoints(3_500_001, 3_500_000, 1_750_000));
        assert!(c.iter().all(|c| !c.met()), "{c:?}");
        let t = table(&c);
        assert!(t.starts_with("0 of 4 targets met"), "{t}");
        assert!(t.contains("| `kv_put`, `stable_btreemap`, 200,000 keys | 1,500,001 | 1,500,000 | no: 1.00x |"), "{t}");
    }
}
