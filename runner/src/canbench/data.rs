//! Ported from canbench 0.7.0 (dfinity/canbench, Apache-2.0), src/data.rs.
//!
//! Flattens new and old results into one [`Entry`] per benchmark total and per scope, and
//! classifies every metric as new, improved, regressed or unchanged.
//!
//! The inputs are canbench-rs's own [`BenchResult`] and [`Measurement`] (re-exported by
//! `super`, see there why). `Entry`, `Benchmark`, `Change` and `Values` are ported because they
//! exist nowhere else: canbench declares them `pub(crate)` in its CLI crate (`canbench`, not
//! `canbench-rs`), so no crate exports them.

use super::fmt::{fmt_human_percent, fmt_human_u64, fmt_percent};
use super::{BenchResult, Measurement};
use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Entry {
    pub(crate) status: String,
    pub(crate) benchmark: Benchmark,
    pub(crate) calls: Values,
    pub(crate) instructions: Values,
    pub(crate) heap_increase: Values,
    pub(crate) stable_memory_increase: Values,
}

impl Entry {
    pub(crate) fn has_scope(&self) -> bool {
        self.benchmark.scope.is_some()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Benchmark {
    name: String,
    scope: Option<String>,
}

impl Benchmark {
    pub(crate) fn new(name: &str, scope: Option<&str>) -> Self {
        Self { name: name.to_string(), scope: scope.map(str::to_string) }
    }

    pub(crate) fn full_name(&self) -> String {
        self.scope.as_ref().map(|s| format!("{}::{}", self.name, s)).unwrap_or_else(|| self.name.clone())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Change {
    New,
    Improved,
    Regressed,
    Unchanged,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Values {
    curr: Option<u64>,
    prev: Option<u64>,
}

impl Values {
    pub(crate) fn new(curr: Option<u64>, prev: Option<u64>) -> Self {
        Self { curr, prev }
    }

    pub(crate) fn current(&self) -> Option<u64> {
        self.curr
    }

    pub(crate) fn abs_delta(&self) -> Option<i64> {
        Some(self.curr? as i64 - self.prev? as i64)
    }

    pub(crate) fn percent_diff(&self) -> Option<f64> {
        let delta = self.abs_delta()?;
        let prev = self.prev?;

        Some(if prev == 0 {
            match delta {
                d if d < 0 => f64::NEG_INFINITY,
                d if d > 0 => f64::INFINITY,
                _ => 0.0,
            }
        } else {
            delta as f64 / prev as f64 * 100.0
        })
    }

    pub(crate) fn fmt_current(&self) -> String {
        self.current().map_or_else(String::new, |v| v.to_string())
    }

    pub(crate) fn fmt_human_current(&self) -> String {
        self.current().map_or_else(String::new, fmt_human_u64)
    }

    pub(crate) fn fmt_abs_delta(&self) -> String {
        self.abs_delta().map_or_else(String::new, |v| v.to_string())
    }

    pub(crate) fn fmt_percent(&self) -> String {
        self.percent_diff().map_or_else(String::new, fmt_percent)
    }

    pub(crate) fn fmt_human_percent(&self) -> String {
        self.percent_diff().map_or_else(String::new, fmt_human_percent)
    }

    pub(crate) fn status(&self, noise_threshold: f64) -> Change {
        match (self.curr, self.prev) {
            (Some(_), Some(_)) => match self.percent_diff() {
                Some(p) if p.abs() < noise_threshold => Change::Unchanged,
                Some(p) if p < 0.0 => Change::Improved,
                Some(_) => Change::Regressed,
                None => Change::Unchanged,
            },
            (Some(_), None) => Change::New,
            (None, Some(_)) => {
                // This is actually a removed benchmark
                // but we don't track it at the moment,
                // so we treat it as unchanged.
                Change::Unchanged
            }
            (None, None) => Change::Unchanged,
        }
    }
}

/// One entry per benchmark total followed by one per scope, benchmarks in name order
/// (`BTreeMap` order), scopes in name order. Removed benchmarks and scopes are not listed.
pub(crate) fn extract(
    new_results: &BTreeMap<String, BenchResult>,
    old_results: &BTreeMap<String, BenchResult>,
) -> Vec<Entry> {
    let mut results = Vec::new();

    for (name, new_bench) in new_results {
        let old_bench = old_results.get(name);

        // Process total
        let benchmark = Benchmark::new(name, None);
        results.push(build_entry(
            if old_bench.is_none() { "new" } else { "" }.to_string(),
            benchmark,
            Some(&new_bench.total),
            old_bench.map(|b| &b.total),
        ));

        // Process scopes
        for (scope, new_m) in &new_bench.scopes {
            let old_m = old_bench.and_then(|b| b.scopes.get(scope));
            let benchmark = Benchmark::new(name, Some(scope));
            results.push(build_entry(
                if old_m.is_none() { "new" } else { "" }.to_string(),
                benchmark,
                Some(new_m),
                old_m,
            ));
        }
    }

    results
}

fn build_entry(
    status: String,
    benchmark: Benchmark,
    new_m: Option<&Measurement>,
    old_m: Option<&Measurement>,
) -> Entry {
    let extract_values = |f: fn(&Measurement) -> u64| Values { curr: new_m.map(f), prev: old_m.map(f) };

    Entry {
        status,
        benchmark,
        calls: extract_values(|m| m.calls),
        instructions: extract_values(|m| m.instructions),
        heap_increase: extract_values(|m| m.heap_increase),
        stable_memory_increase: extract_values(|m| m.stable_memory_increase),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(calls: u64, instructions: u64, heap: u64, stable: u64) -> Measurement {
        Measurement { calls, instructions, heap_increase: heap, stable_memory_increase: stable }
    }

    #[test]
    fn status_follows_noise_threshold_and_sign() {
        // Values from tests/expected/benchmark_reports_*.txt (canbench 0.7.0).
        assert_eq!(Values::new(Some(207), Some(207)).status(2.0), Change::Unchanged);
        assert_eq!(Values::new(Some(207), Some(210)).status(2.0), Change::Unchanged); // -1.43%
        assert_eq!(Values::new(Some(62), Some(65)).status(2.0), Change::Improved); // -4.62%
        assert_eq!(Values::new(Some(62), Some(65)).status(5.0), Change::Unchanged);
        assert_eq!(Values::new(Some(207), Some(10)).status(2.0), Change::Regressed);
        assert_eq!(Values::new(Some(307), Some(0)).status(2.0), Change::Regressed); // +inf
        assert_eq!(Values::new(Some(0), Some(0)).status(2.0), Change::Unchanged);
        assert_eq!(Values::new(Some(1), None).status(2.0), Change::New);
        assert_eq!(Values::new(None, Some(1)).status(2.0), Change::Unchanged);
        assert_eq!(Values::new(None, None).status(2.0), Change::Unchanged);
        // canbench quirk kept on purpose: with a zero threshold, "no change" is not below
        // the threshold, so it counts as a regression.
        assert_eq!(Values::new(Some(5), Some(5)).status(0.0), Change::Regressed);
    }

    #[test]
    fn percent_diff_is_infinite_from_zero_and_zero_for_zero_delta() {
        assert_eq!(Values::new(Some(307), Some(0)).percent_diff(), Some(f64::INFINITY));
        assert_eq!(Values::new(Some(0), Some(0)).percent_diff(), Some(0.0));
        assert_eq!(Values::new(Some(0), Some(10)).percent_diff(), Some(-100.0));
        assert_eq!(Values::new(Some(1), None).percent_diff(), None);
        assert_eq!(Values::new(Some(888), Some(841)).abs_delta(), Some(47));
        assert_eq!(Values::new(Some(888), Some(841)).fmt_human_percent(), "+5.59%");
        assert_eq!(Values::new(Some(888), None).fmt_abs_delta(), "");
    }

    #[test]
    fn extract_lists_totals_then_scopes_in_name_order_with_new_status() {
        let mut new = BTreeMap::new();
        new.insert(
            "b".to_string(),
            BenchResult {
                total: m(1, 3834, 0, 0),
                scopes: [("scope_2".to_string(), m(1, 781, 0, 0)), ("scope_1".to_string(), m(1, 970, 0, 0))]
                    .into_iter()
                    .collect(),
            },
        );
        new.insert("a".to_string(), BenchResult { total: m(1, 10, 0, 0), scopes: BTreeMap::new() });
        let mut old = BTreeMap::new();
        old.insert(
            "b".to_string(),
            BenchResult {
                total: m(1, 0, 0, 0),
                scopes: [("scope_1".to_string(), m(1, 800, 1, 0))].into_iter().collect(),
            },
        );
        let entries = extract(&new, &old);
        let summary: Vec<(String, String)> =
            entries.iter().map(|e| (e.status.clone(), e.benchmark.full_name())).collect();
        assert_eq!(
            summary,
            vec![
                ("new".to_string(), "a".to_string()),
                ("".to_string(), "b".to_string()),
                ("".to_string(), "b::scope_1".to_string()),
                ("new".to_string(), "b::scope_2".to_string()),
            ]
        );
        assert_eq!(entries[2].instructions, Values::new(Some(970), Some(800)));
        assert_eq!(entries[3].calls, Values::new(Some(1), None));
    }
}
