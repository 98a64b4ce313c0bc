//! The recommendation, for what users do: the pragma profile whose per-call mix (the calls a
//! users/orders canister makes every day, [`MIX`], at the reference size and ten times it) costs
//! least on mainnet, among the profiles that qualify, with the nine bulk steps (what a load costs
//! once) beside it.
//!
//! Qualifying: deployable (the database in stable memory, COMMIT and ROLLBACK atomic), foreign keys
//! enforced, every one of the nine bulk steps measured, and a bounded heap: every step of a database
//! several times larger than a lowered `wasm_memory_limit` completes within it
//! ([`crate::bounded`]). The inputs are `endpoint_profiles_results.yml` (the calls per profile,
//! measured by `runner/tests/endpoints.rs`), `bounded_heap_results.yml` and `mainnet_results.yml`.

use std::collections::BTreeMap;

use stablebench_grid::ic::PageCounts;
use stablebench_grid::profiles::{Profile, PROFILES};

use crate::grouped;
use crate::shapes::Counts;

/// One call's median message under one profile and size.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct Call {
    /// Its instructions on mainnet.
    pub instructions: u64,
    /// The 64 KiB Wasm pages it touched.
    pub pages: PageCounts,
}

/// The users/orders calls under one profile at one size: the per-call table's rows
/// (`endpoints_results.yml`'s) and the calls of n rows.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq, Default)]
pub struct Calls {
    /// Per call of the per-call table.
    pub calls: BTreeMap<String, Call>,
    /// Per call whose row count is the caller's choice, per row count.
    pub shapes: BTreeMap<String, Counts>,
}

/// `endpoint_profiles_results.yml`: per deployable profile, per size (`1x`, `10x`), its calls.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq, Default)]
pub struct Sweep {
    /// Per profile name, per size.
    pub profiles: BTreeMap<String, BTreeMap<String, Calls>>,
    /// The SHA-256 of the production wasm they were measured on.
    pub wasm: BTreeMap<String, String>,
}

/// One call of the mix.
#[derive(Clone, Copy, Debug)]
pub struct MixCall {
    /// As the tables show it.
    pub label: &'static str,
    /// Its name in [`Calls`]: a row of the per-call table, or a call of n rows.
    pub call: &'static str,
    /// The row count, for a call of n rows.
    pub rows: Option<u64>,
}

/// The per-call mix, one message of each, equally weighted: a one-row write of each table in an
/// update, a point read by id and a page of ten rows from a random key in a query.
pub const MIX: [MixCall; 4] = [
    MixCall { label: "`add_users(next, 1)`", call: "add_users(next, 1)", rows: None },
    MixCall { label: "`add_orders(next, 1)`", call: "add_orders(next, 1)", rows: None },
    MixCall { label: "`list_users(random, 1)`, a point read", call: "list_users(random, n)", rows: Some(1) },
    MixCall { label: "`list_orders(random, 10)`, a page", call: "list_orders(random, n)", rows: Some(10) },
];

/// The sizes the mix is taken at, each weighted equally.
pub const MIX_SIZES: [&str; 2] = ["1x", "10x"];

impl MixCall {
    /// Its figure in `c`, if measured.
    pub fn of(&self, c: &Calls) -> Option<u64> {
        match self.rows {
            None => c.calls.get(self.call).map(|x| x.instructions),
            Some(n) => c.shapes.get(self.call).and_then(|m| m.get(&n)).map(|p| p.median),
        }
    }
}

/// The mix at one size: the sum of its calls' instructions on mainnet (`None` if one is missing).
pub fn mix(c: &Calls) -> Option<u64> {
    MIX.iter().map(|m| m.of(c)).sum()
}

/// One profile's standing.
#[derive(Clone, Debug)]
pub struct Standing {
    /// The profile.
    pub profile: Profile,
    /// Each mix call's instructions, per [`MIX_SIZES`] then per [`MIX`]; `None` where not measured.
    pub calls: Vec<Option<u64>>,
    /// Their sum at 1x.
    pub mix_1x: u64,
    /// Their sum over both sizes, the criterion, if both were measured.
    pub mix: Option<u64>,
    /// The nine bulk steps' total on mainnet, if every one was measured.
    pub bulk: Option<u64>,
    /// Whether its heap stayed bounded ([`crate::bounded`]); else why not.
    pub bounded: Result<(), String>,
    /// Why it does not qualify, if it does not.
    pub excluded: Option<String>,
}

impl Standing {
    /// The mix at `size` (an entry of [`MIX_SIZES`]), if measured.
    pub fn at(&self, size: usize) -> Option<u64> {
        self.calls[size * MIX.len()..(size + 1) * MIX.len()].iter().copied().sum()
    }
}

/// Every deployable profile measured at 1x: the qualifying ones first, cheapest mix first, then
/// the others by their mix at 1x.
pub fn standings(sweep: &Sweep, bounded: &crate::bounded::Results, bulk: &[crate::Standing]) -> Vec<Standing> {
    let mut out: Vec<Standing> = PROFILES
        .iter()
        .filter(|p| p.deployable().is_ok())
        .filter_map(|p| {
            let at = sweep.profiles.get(p.name)?;
            let calls: Vec<Option<u64>> =
                MIX_SIZES.iter().flat_map(|s| MIX.iter().map(move |m| at.get(*s).and_then(|c| m.of(c)))).collect();
            let mix_1x = calls[..MIX.len()].iter().copied().sum::<Option<u64>>()?;
            let mix: Option<u64> = calls.iter().copied().sum();
            let bulk =
                bulk.iter().find(|s| s.profile.name == p.name && s.benchmarks == crate::BENCHES.len()).map(|s| s.total);
            let bounded = bounded.bounded(p.name);
            let excluded = if p.relaxes.is_some() {
                Some("foreign keys off".to_string())
            } else if let Err(why) = &bounded {
                Some(format!("heap not bounded ({why})"))
            } else if bulk.is_none() {
                Some("bulk steps not all measured".to_string())
            } else if mix.is_none() {
                Some("10x not measured".to_string())
            } else {
                None
            };
            Some(Standing { profile: *p, calls, mix_1x, mix, bulk, bounded, excluded })
        })
        .collect();
    out.sort_by_key(|s| (s.excluded.is_some(), s.mix.unwrap_or(u64::MAX), s.mix_1x, s.profile.name));
    out
}

/// The qualifying profile with the cheapest mix.
pub fn winner(standings: &[Standing]) -> Option<&Standing> {
    standings.iter().find(|s| s.excluded.is_none())
}

/// The qualifying profile the mix ranks next.
pub fn runner_up(standings: &[Standing]) -> Option<&Standing> {
    standings.iter().filter(|s| s.excluded.is_none()).nth(1)
}

/// The single mix calls (size, call) without which another qualifying profile would win, with that
/// profile: what would flip the recommendation.
pub fn flips(standings: &[Standing]) -> Vec<(&'static str, MixCall, Profile)> {
    let Some(win) = winner(standings) else { return Vec::new() };
    let mut out = Vec::new();
    for (i, (size, call)) in MIX_SIZES.iter().flat_map(|s| MIX.iter().map(move |m| (*s, *m))).enumerate() {
        let best = standings
            .iter()
            .filter(|s| s.excluded.is_none())
            .min_by_key(|s| (s.mix.unwrap_or(u64::MAX) - s.calls[i].unwrap_or(0), s.profile.name))
            .expect("a winner qualifies");
        if best.profile.name != win.profile.name {
            out.push((size, call, best.profile));
        }
    }
    out
}

/// The README's recommendation block: the winner and the criterion, the qualifying profiles ranked
/// by the mix with the bulk steps beside, the margin and what would flip it, and what was left out.
pub fn table(standings: &[Standing]) -> String {
    let Some(w) = winner(standings) else { return "No profile qualifies.\n".to_string() };
    let qualifying: Vec<&Standing> = standings.iter().filter(|s| s.excluded.is_none()).collect();
    let unbounded = standings.iter().filter(|s| s.bounded.is_err()).count();
    let mut out = format!(
        "**Recommendation: `{}`** (the canister's default, `RECOMMENDED` in `stablebench-pragmas`): the profile \
         whose per-call mix costs least on mainnet (one message of each of {}, at the reference size, 1x: \
         100,000 users and 1,000,000 orders, and at 10x; instructions, page fees included), among the {} of {} \
         deployable profiles that keep COMMIT and ROLLBACK atomic, the database in stable memory, foreign keys \
         enforced and the heap bounded ({} do not: a step of a database several times a lowered \
         `wasm_memory_limit` stopped at the limit, [the table](docs/pragma-guide.md#a-database-larger-than-the-heap-per-profile)). \
         The nine bulk steps, paid once per load, beside it:\n\n\
         | profile | mix, 1x | mix, 10x | the mix | nine bulk steps, 1x |\n|---|---:|---:|---:|---:|\n",
        w.profile.name,
        MIX.iter().map(|m| m.label).collect::<Vec<_>>().join(", "),
        qualifying.len(),
        standings.len(),
        unbounded,
    );
    for s in &qualifying {
        let mark = if s.profile.name == w.profile.name { " (recommended)" } else { "" };
        let num = |v: Option<u64>| v.map_or("—".to_string(), grouped);
        out += &format!(
            "| `{}`{mark} | {} | {} | {} | {} |\n",
            s.profile.name,
            num(s.at(0)),
            num(s.at(1)),
            num(s.mix),
            num(s.bulk),
        );
    }
    out += "\n";
    if let (Some(r), Some(wm)) = (runner_up(standings).and_then(|r| r.mix.map(|m| (r, m))), w.mix) {
        let (r, rm) = r;
        out += &format!(
            "`{}` costs {} less than the runner-up `{}` ({:.1}%).",
            w.profile.name,
            grouped(rm - wm),
            r.profile.name,
            (rm - wm) as f64 / rm as f64 * 100.0,
        );
        let flips = flips(standings);
        if flips.is_empty() {
            out += " No single call flips it: without any one of the eight it still wins.";
        } else {
            let each: Vec<String> = flips
                .iter()
                .map(|(size, c, p)| format!("without {} at {size}, `{}` would win", c.label, p.name))
                .collect();
            out += &format!(" What flips it: {}.", each.join("; "));
        }
    }
    let cheapest_bulk = qualifying.iter().filter_map(|s| s.bulk.map(|b| (b, *s))).min_by_key(|(b, _)| *b);
    match (w.bulk, cheapest_bulk) {
        (Some(wb), Some((best, s))) if s.profile.name != w.profile.name => {
            out += &format!(
                " Its bulk steps cost {:.2}x those of `{}`, the qualifying profile cheapest in bulk.",
                wb as f64 / best as f64,
                s.profile.name,
            );
        }
        (Some(_), _) => out += " Its bulk steps cost the least of the qualifying profiles too.",
        _ => {}
    }
    if let Some(c) =
        standings.iter().filter(|s| s.excluded.is_some()).min_by_key(|s| s.mix_1x).filter(|c| c.mix_1x < w.mix_1x)
    {
        out += &format!(
            " The cheapest mix at 1x of all, `{}`'s ({:.2}x less than the recommendation's), is left out: {}.",
            c.profile.name,
            w.mix_1x as f64 / c.mix_1x as f64,
            c.excluded.as_deref().unwrap_or(""),
        );
    }
    out + "\n"
}
