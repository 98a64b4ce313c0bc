//! Where a call's pages go: the 64 KiB Wasm pages of one message of each key-value endpoint,
//! split by the region of memory they lie in (the stack, the statics, the heap; stable memory by
//! `MemoryManager` memory), from `page_regions_results.yml` (measured by
//! `runner/tests/page_regions.rs` on the production wasm files, regions read by
//! `stablebench_runner::regions`) into `docs/page-budget.md`.
//!
//! On mainnet a small call's bill is mostly these pages (each costs 80,000 instructions to
//! access and 80,000 more to write), so the split says which of them a setting could cut: the
//! stack and statics a message cannot avoid touching, the heap pages its allocations land on,
//! and the stable pages of the structure it reads or writes.

use std::collections::BTreeMap;
use std::fmt::Write;

use stablebench_grid::grouped;
use stablebench_grid::ic::memory_ids;

/// Pages accessed and written (every page written was accessed).
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Split {
    /// Pages accessed.
    pub accessed: u64,
    /// Pages written.
    pub written: u64,
}

/// One call: its instructions on mainnet and its pages by region.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct Call {
    /// What the call is (method and arguments, in words).
    pub what: String,
    /// The whole message's instructions under the ic model (page fees included).
    pub instructions: u64,
    /// Heap pages by region name (`stablebench_runner::regions::HeapRegion::name`).
    pub heap: BTreeMap<String, Split>,
    /// Stable pages by region ([`stable_region_name`]).
    pub stable: BTreeMap<String, Split>,
    /// The functions that first touched the most pages (heap and stable together), most first:
    /// the runner's page profile, named from the wasm's name section.
    pub first_touched_by: Vec<(String, Split)>,
}

impl Call {
    /// Every page, heap and stable.
    pub fn total(&self) -> Split {
        self.heap
            .values()
            .chain(self.stable.values())
            .fold(Split::default(), |a, s| Split { accessed: a.accessed + s.accessed, written: a.written + s.written })
    }
}

/// Several calls of one kind: the median by instructions and the largest, each with its split.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct Calls {
    /// Calls measured.
    pub calls: u64,
    /// The median call.
    pub median: Call,
    /// The largest.
    pub max: Call,
}

impl Calls {
    /// The calls' median and largest by instructions (ties in call order).
    pub fn of(mut calls: Vec<Call>) -> Calls {
        calls.sort_by_key(|c| c.instructions);
        Calls { calls: calls.len() as u64, median: calls[calls.len() / 2].clone(), max: calls[calls.len() - 1].clone() }
    }
}

/// The committed file.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct Results {
    /// Keys loaded in each backend before its calls.
    pub keys: u64,
    /// Per backend name, per call name.
    pub backends: BTreeMap<String, BTreeMap<String, Calls>>,
    /// The SHA-256 of the wasm files measured, by file name.
    pub wasm: BTreeMap<String, String>,
}

/// The name of a stable-memory region: the `MemoryManager`'s header, or the memory with `id`
/// named by what the canisters keep in it (`stablebench_grid::ic::memory_ids`).
pub fn stable_region_name(id: Option<u8>) -> String {
    let Some(id) = id else { return "memory_manager_header".into() };
    let what = match id {
        memory_ids::STABLE_BTREEMAP => "stable_btreemap",
        memory_ids::HEAP_BTREEMAP_SNAPSHOT => "heap_btreemap_snapshot",
        memory_ids::PROFILE => "profile_cell",
        memory_ids::MEMORY_LIMIT => "memory_limit_cell",
        memory_ids::ORDERS_DELETED => "orders_deleted_cell",
        memory_ids::VFS_DATABASE => "database",
        id if id >= memory_ids::IC_RUSQLITE_FIRST => "ic_rusqlite_fs",
        _ => "other",
    };
    format!("memory_{id}_{what}")
}

fn split(s: Option<&Split>) -> String {
    s.map_or("–".into(), |s| format!("{} / {}", s.accessed, s.written))
}

/// One table: per backend and call, `pick`'s call and its pages by region.
fn table(out: &mut String, r: &Results, heap_regions: &[&str], pick: fn(&Calls) -> &Call) {
    let _ = writeln!(
        out,
        "| backend | call | instructions | all pages | {} | stable memory |",
        heap_regions.iter().map(|r| format!("heap: {}", r.replace('_', " "))).collect::<Vec<_>>().join(" | ")
    );
    let _ = writeln!(out, "|---|---|---:|---:|{}---|", "---:|".repeat(heap_regions.len()));
    for (b, calls) in &r.backends {
        for (name, calls) in calls {
            let c = pick(calls);
            let stable: Vec<String> = c.stable.iter().map(|(k, s)| format!("{k} {}", split(Some(s)))).collect();
            let heap: Vec<String> = heap_regions.iter().map(|h| split(c.heap.get(*h))).collect();
            let _ = writeln!(
                out,
                "| `{b}` | {} (`{name}`) | {} | {} | {} | {} |",
                c.what,
                grouped(c.instructions),
                split(Some(&c.total())),
                heap.join(" | "),
                if stable.is_empty() { "–".into() } else { stable.join(", ") }
            );
        }
    }
}

/// `docs/page-budget.md`, whole.
pub fn page(r: &Results, heap_regions: &[&str]) -> String {
    let mut out = String::from("# Where a call's pages go\n\n");
    let _ = writeln!(
        out,
        "Generated by `STABLEBENCH_REGENERATE_PAGE_REGIONS=1 cargo test --release -p stablebench-runner --test page_regions` from `page_regions_results.yml` (CI measures it again and fails on any difference). Do not edit.\n"
    );
    let calls = r.backends.values().flat_map(|c| c.values()).map(|c| c.calls).max().unwrap_or(0);
    let _ = writeln!(
        out,
        "On mainnet a small call pays mostly for pages: since the IC's memory tracker each message pays 80,000 instructions for every 64 KiB Wasm page it first accesses and 80,000 more for every page it first writes ([mainnet.md](mainnet.md)). Below, messages of each key-value endpoint on the production wasm files (each backend in a canister of its own with {} keys loaded by `kv_load`, SQLite under the canister's default profile; `sqlite_vfs_rowid` is the ic-sqlite-vfs canister), their pages split by where they lie, as **accessed / written**. Each kind is called {calls} times after one call that is not measured (a fresh key per `kv_put`, a stored one per `kv_get`); the first table shows the median call by instructions (the whole message on mainnet), the second the largest.\n",
        grouped(r.keys)
    );
    out.push_str(
        "The regions are read, not guessed (`stablebench_runner::regions`): in the heap, the **stack** (wasm-ld puts it first, up to `__stack_pointer`'s initial value), the **statics** (the data segments and zeroed statics up to `__heap_base`), the **shared** page that holds the statics' end and the heap's start, and the **heap** (everything above `__heap_base`: what the allocators hand out; in the ic-rusqlite canister Rust's allocations come from the `dlmalloc` crate and SQLite's from wasi-libc's `malloc`, both growing the same memory, and the last section names which touched a page); in stable memory, the `MemoryManager`'s **header** and bucket table (page 0) and each memory's buckets, named by the bucket table read from the canister's stable memory after the call (`memory_120_database`: the SQLite database file, on either canister; `ic_rusqlite_fs`: ic-wasi-polyfill's file system metadata).\n\n",
    );
    out.push_str("## The median call\n\n");
    table(&mut out, r, heap_regions, |c| &c.median);
    out.push_str("\n## The largest call\n\n");
    table(&mut out, r, heap_regions, |c| &c.max);
    out.push_str(
        "\n## Who touches the pages\n\nPer call, the functions that touched the most pages first (the runner's page profile: each page goes to the function that touched it first in the message; heap and stable together, accessed / written), for the median call and the largest. Functions are named from a copy of each production wasm that keeps its name section (`target/canister/*.names.wasm`, the same code).\n\n| backend | call | median call | largest call |\n|---|---|---|---|\n",
    );
    let top = |c: &Call| -> String {
        let v: Vec<String> = c.first_touched_by.iter().map(|(f, s)| format!("`{f}` {}", split(Some(s)))).collect();
        if v.is_empty() {
            "–".into()
        } else {
            v.join(", ")
        }
    };
    for (b, calls) in &r.backends {
        for (name, c) in calls {
            let _ = writeln!(out, "| `{b}` | `{name}` | {} | {} |", top(&c.median), top(&c.max));
        }
    }
    out.push_str(
        "\n**Why a SQLite put sometimes reads the whole page cache.** Where `pcache1TruncateUnsafe` leads a call, its commit walked every page of SQLite's page cache. At every commit the pager truncates the cache to the database's size (`pager_end_transaction` → `sqlite3PcacheTruncate`), and the cache scans every hash slot and every page header when the largest page number it has seen lies more than its hash size past the database's end (`pcache1TruncateUnsafe` in SQLite's `pcache1.c`). A page split that reorders the new sibling pages renumbers one of them through a temporary page number, `PENDING_BYTE / page_size + 1` (131,073 at 8 KiB pages; `balance_nonroot` in `btree.c`), so every commit after such a split scans it all. Natively that is a quick loop; on mainnet every 64 KiB heap page holding a cached page costs 80,000 instructions, so the larger the page cache, the dearer these commits.\n",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stable_regions_are_named_by_their_memory() {
        assert_eq!(stable_region_name(None), "memory_manager_header");
        assert_eq!(stable_region_name(Some(99)), "memory_99_stable_btreemap");
        assert_eq!(stable_region_name(Some(105)), "memory_105_ic_rusqlite_fs");
        assert_eq!(stable_region_name(Some(120)), "memory_120_database");
    }

    #[test]
    fn a_calls_total_adds_heap_and_stable() {
        let mut c = Call::default();
        c.heap.insert("stack".into(), Split { accessed: 2, written: 2 });
        c.heap.insert("heap".into(), Split { accessed: 5, written: 1 });
        c.stable.insert("memory_99_stable_btreemap".into(), Split { accessed: 3, written: 0 });
        assert_eq!(c.total(), Split { accessed: 10, written: 3 });
    }
}
