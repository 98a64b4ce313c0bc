//! Bounded heap: `bounded_heap_results.yml` (written by `runner/tests/bounded_heap.rs`), the
//! users/orders steps of a database several times larger than a lowered `wasm_memory_limit`, at
//! each of [`SIZES`] (one per path `create_indexes` takes for the orders index), per deployable
//! pragma profile, and which profiles stay within it.

use std::collections::BTreeMap;

/// The lowered `wasm_memory_limit`, bytes: the smallest the production canister accepts
/// (`MIN_WASM_MEMORY_LIMIT`, 64 MiB), given both as the canister's setting and as its install
/// argument.
pub const LIMIT: u64 = 64 << 20;

/// One database size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Size {
    /// Its key in `bounded_heap_results.yml`.
    pub name: &'static str,
    /// Users loaded.
    pub users: u64,
    /// Orders loaded, ten per user.
    pub orders: u64,
    /// How `create_indexes` builds the orders index at this size (`src/jobs.rs`: one statement
    /// while the orders' rowids times `INDEX_ROW_INSTRUCTIONS`, 8,000, fit a call's budget of
    /// 30,000,000,000; else through a shadow copy of the table).
    pub path: &'static str,
}

/// The sizes: three and four times the reference's. At 3,000,000 orders `CREATE INDEX` on orders
/// is one statement, whose sorter holds every key; at 4,000,000 it is built through a shadow table,
/// window by window. A profile must survive both.
pub const SIZES: [Size; 2] = [
    Size {
        name: "3m",
        users: 300_000,
        orders: 3_000_000,
        path: "where `create_indexes` builds the orders index in one `CREATE INDEX`, whose sort holds every key",
    },
    Size {
        name: "4m",
        users: 400_000,
        orders: 4_000_000,
        path: "where it builds it through a shadow table, window by window over calls",
    },
];

/// One step: its calls until it completed or failed.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// `install`, `create_schema`, `add_users`, `add_orders`, `create_indexes`, `select_join`,
    /// `delete_orders`, `integrity_check`.
    pub step: String,
    /// Messages.
    pub calls: u64,
    /// Their instructions, summed, under the runner's `ic` cost model (mainnet's).
    pub instructions: u64,
    /// The largest heap, bytes, after any of its messages (for an update its high-water mark; for
    /// a query the heap while it ran, which the query's end discards).
    pub heap_bytes: u64,
    /// What stopped it, if it did not complete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Why a step stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// The message's instruction limit: the trap ("Canister exceeded the limit of instructions
    /// for a single message execution", the runner's `Trap::OutOfInstructions` in
    /// `runner/src/host.rs`, the replica's text) or the canister's own budget (`Error::InstructionLimit`, which stops a statement before
    /// the replica would). Not a heap failure: the step does not fit one message at this size.
    Instructions,
    /// The heap: the trap at `wasm_memory_limit` ("Canister exceeded its current Wasm memory
    /// limit", `Trap::WasmMemoryLimit`), past the memory allocation ("Canister cannot grow its
    /// memory usage", `Trap::OutOfMemory`) or SQLite's `SQLITE_NOMEM` ("out of memory").
    Heap,
    /// Anything else.
    Other,
}

impl Step {
    /// Why it stopped, if it did.
    pub fn stop(&self) -> Option<Stop> {
        let e = self.error.as_deref()?;
        Some(if e.starts_with("Canister exceeded the limit of instructions") || e.starts_with("InstructionLimit") {
            Stop::Instructions
        } else if e.contains("Wasm memory limit") || e.contains("cannot grow its memory") || e.contains("out of memory")
        {
            Stop::Heap
        } else {
            Stop::Other
        })
    }
}

/// One profile's run at one size.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct Profile {
    /// SQLite's file after the last step (`stats().database_bytes`; 0 if it did not answer).
    pub database_bytes: u64,
    /// The steps, in order, up to the first that failed.
    pub steps: Vec<Step>,
}

/// The step names, in the order the test runs them.
pub const STEPS: [&str; 8] = [
    "install",
    "create_schema",
    "add_users",
    "add_orders",
    "create_indexes",
    "select_join",
    "delete_orders",
    "integrity_check",
];

impl Profile {
    /// Whether every step ran and none stopped but at the message's instruction limit (a step too
    /// large for one message says nothing of the heap: the last, `integrity_check`, is one query
    /// over the whole file).
    pub fn bounded(&self) -> bool {
        self.steps.len() == STEPS.len()
            && self.steps.iter().all(|s| matches!(s.stop(), None | Some(Stop::Instructions)))
    }

    /// The first step that stopped, if any.
    pub fn failed(&self) -> Option<&Step> {
        self.steps.iter().find(|s| s.error.is_some())
    }

    /// The largest heap of any step, bytes.
    pub fn high_water(&self) -> u64 {
        self.steps.iter().map(|s| s.heap_bytes).max().unwrap_or(0)
    }
}

/// `bounded_heap_results.yml`.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq, Default)]
pub struct Results {
    /// Per size ([`Size::name`]), per profile name.
    pub sizes: BTreeMap<String, BTreeMap<String, Profile>>,
    /// The SHA-256 of the production wasm they were measured on, by file name.
    pub wasm: BTreeMap<String, String>,
    /// The SHA-256 of the sources that produced the recommended profile's entries besides the
    /// wasm (the runner, the grid, the generators, the test, the lock file, the toolchain). The
    /// other profiles' entries stand on `wasm` alone.
    #[serde(default)]
    pub sources: String,
}

impl Results {
    /// Whether `profile` kept its heap bounded at every size; else why not (the first size and
    /// step that stopped, or the size not measured).
    pub fn bounded(&self, profile: &str) -> Result<(), String> {
        for size in SIZES {
            let Some(p) = self.sizes.get(size.name).and_then(|m| m.get(profile)) else {
                return Err(format!("not measured at {} orders", crate::grouped(size.orders)));
            };
            if !p.bounded() {
                return Err(match p.failed() {
                    Some(s) => format!(
                        "at {} orders `{}` stopped: {}",
                        crate::grouped(size.orders),
                        s.step,
                        s.error.as_deref().unwrap_or("")
                    ),
                    None => format!("at {} orders it did not complete", crate::grouped(size.orders)),
                });
            }
        }
        Ok(())
    }

    /// Every profile measured at some size.
    pub fn profiles(&self) -> std::collections::BTreeSet<&str> {
        self.sizes.values().flat_map(|m| m.keys().map(String::as_str)).collect()
    }
}

fn mib(bytes: u64) -> String {
    format!("{:.1}", bytes as f64 / 1_048_576.0)
}

/// What stopped `p`, for the table: `—` if nothing did.
fn stopped(p: &Profile) -> String {
    match p.failed() {
        None => "—".to_string(),
        Some(s) => format!(
            "`{}`: {}",
            s.step,
            match s.stop() {
                Some(Stop::Instructions) => "instruction limit".to_string(),
                Some(Stop::Heap) => "**heap limit**".to_string(),
                _ => format!("**{}**", s.error.as_deref().unwrap_or("").replace('|', "\\|")),
            }
        ),
    }
}

/// The page's table: per profile and size, the database, the heap's high-water mark over the
/// steps in MiB, and the step that stopped (and why), then whether it stayed bounded at both.
pub fn table(r: &Results) -> String {
    let sizes: Vec<String> = SIZES
        .iter()
        .map(|s| format!("{} users and {} orders, {}", crate::grouped(s.users), crate::grouped(s.orders), s.path))
        .collect();
    let integrity: Vec<&Step> = r
        .sizes
        .values()
        .flat_map(|m| m.values())
        .filter_map(|p| p.steps.iter().find(|s| s.step == "integrity_check"))
        .collect();
    let mut out = format!(
        "The production canister installed with `wasm_memory_limit` {} MiB (its setting and its install \
         argument, which bounds SQLite's page cache to a quarter of it), loaded with `add_users` and \
         `add_orders` in budgeted calls at two sizes ({}), then both indexes built (`create_indexes` until \
         `complete`), the reference join through `query_sql_page` (its `ORDER BY` sorts every joined row), \
         the orders of the first thousandth of the users deleted (`delete_orders`) and `PRAGMA \
         integrity_check` in one query: per size, SQLite's file, the heap's high-water mark over the steps \
         in MiB (an update's heap after it; a query's while it ran, which its end discards; at the limit, \
         `≥ {}`, where a step stopped there) and the step that stopped, if one did. A profile is bounded when no step stopped at the heap limit at either \
         size; the instruction limit does not count (`integrity_check` reads the whole file in one query: \
         it stopped at a query's instruction limit in {} of the {} runs that reached it). Produced by \
         `STABLEBENCH_REGENERATE_BOUNDED=1 STABLEBENCH_BOUNDED_PROFILES=1 cargo test --release -p \
         stablebench-runner --test bounded_heap` (`bounded_heap_results.yml`, every step's calls, \
         instructions and heap); `scripts/test.sh` remeasures the recommended profile and refuses the \
         others unless the production wasm they were measured on is the one built now.\n\n| profile |",
        mib(LIMIT),
        sizes.join("; "),
        mib(LIMIT),
        integrity.iter().filter(|s| s.stop() == Some(Stop::Instructions)).count(),
        integrity.len(),
    );
    for s in SIZES {
        let o = crate::grouped(s.orders);
        out += &format!(" {o} orders: database MiB | heap MiB | stopped |");
    }
    out += " bounded |\n|---|";
    out += &"---:|---:|---|".repeat(SIZES.len());
    out += "---|\n";
    for name in r.profiles() {
        out += &format!("| `{name}` |");
        for s in SIZES {
            out += &match r.sizes.get(s.name).and_then(|m| m.get(name)) {
                Some(p) => format!(
                    " {} | {} | {} |",
                    if p.database_bytes > 0 { mib(p.database_bytes) } else { "—".into() },
                    if p.failed().and_then(Step::stop) == Some(Stop::Heap) {
                        format!("≥ {}", mib(LIMIT))
                    } else {
                        mib(p.high_water())
                    },
                    stopped(p)
                ),
                None => " not measured | | |".to_string(),
            };
        }
        out += if r.bounded(name).is_ok() { " yes |\n" } else { " **no** |\n" };
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(name: &str, error: Option<&str>) -> Step {
        Step { step: name.into(), calls: 1, instructions: 1, heap_bytes: 1 << 20, error: error.map(str::to_string) }
    }

    fn run(last_error: Option<&str>) -> Profile {
        let mut steps: Vec<Step> = STEPS[..7].iter().map(|s| step(s, None)).collect();
        steps.push(step("integrity_check", last_error));
        Profile { database_bytes: 1, steps }
    }

    #[test]
    fn only_the_heap_and_other_stops_make_a_profile_unbounded() {
        let limit = "Canister exceeded the limit of instructions for a single message execution";
        assert!(run(None).bounded());
        assert!(run(Some(limit)).bounded());
        assert!(run(Some("InstructionLimit { rows_done: 0, budget: 4000000000 }")).bounded());
        assert!(!run(Some("Canister exceeded its current Wasm memory limit of 67108864 bytes")).bounded());
        assert!(!run(Some("Sqlite(SqliteFailure(.., Some(\"disk I/O error\")))")).bounded());
        let mut short = run(None);
        short.steps.pop();
        assert!(!short.bounded(), "a step that never ran is not bounded");
    }

    #[test]
    fn a_profile_is_bounded_only_when_measured_and_bounded_at_every_size() {
        let mut r = Results::default();
        r.sizes.entry("3m".into()).or_default().insert("a".into(), run(None));
        assert!(r.bounded("a").unwrap_err().contains("not measured at 4,000,000 orders"));
        r.sizes
            .entry("4m".into())
            .or_default()
            .insert("a".into(), run(Some("Canister exceeded its current Wasm memory limit of 67108864 bytes")));
        let why = r.bounded("a").unwrap_err();
        assert!(why.starts_with("at 4,000,000 orders `integrity_check` stopped"), "{why}");
        r.sizes.get_mut("4m").unwrap().insert("a".into(), run(None));
        assert_eq!(r.bounded("a"), Ok(()));
        assert!(table(&r).contains("| `a` | 0.0 | 1.0 | — | 0.0 | 1.0 | — | yes |"), "{}", table(&r));
    }
}
