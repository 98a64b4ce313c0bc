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
    /// Every page of the call (heap and stable together) by the part of the canister whose
    /// function touched it first ([`PARTS`]; the runner's page profile, every function summed).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub by_part: BTreeMap<String, Split>,
    /// The pages the allocators touched first (the `allocator` part) by allocation site, most
    /// first, the first [`SITES`] (`stablebench_runner::profile::allocation_sites`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allocation_sites: Vec<AllocationSite>,
    /// The pages the call's structure must touch for this call, computed natively from the
    /// structure (`runner/tests/page_regions.rs`), if computed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub necessary: Option<Necessary>,
}

/// The allocation sites kept per call.
pub const SITES: usize = 4;

/// Pages the allocators touched first on behalf of one caller.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct AllocationSite {
    /// The nearest caller that is neither an allocator function nor Rust's container code
    /// forwarding the request (`alloc::raw_vec`, `alloc::vec`, ...).
    pub site: String,
    /// The allocator function it called (the outermost allocator frame: `malloc`, `free`, ...).
    pub entry: String,
    /// The pages, heap and stable.
    pub pages: Split,
}

/// The pages a structure must touch for one operation, computed from the structure: the
/// B-tree path a lookup descends, the nodes or database pages a write changes.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct Necessary {
    /// What was counted, in words.
    pub what: String,
    /// Heap pages.
    pub heap: Split,
    /// Stable-memory pages.
    pub stable: Split,
}

impl Necessary {
    /// Every page, heap and stable.
    pub fn total(&self) -> Split {
        Split { accessed: self.heap.accessed + self.stable.accessed, written: self.heap.written + self.stable.written }
    }
}

impl Split {
    /// What mainnet's memory tracker charges for these pages, instructions: every access, and
    /// every write in an update (a query's writes are not charged).
    pub fn fee(&self, update: bool) -> u64 {
        use stablebench_grid::ic::page_fees::{ACCESS, WRITE};
        self.accessed * ACCESS + if update { self.written * WRITE } else { 0 }
    }

    /// `self - other`, field by field, each at least zero.
    pub fn less(&self, other: &Split) -> Split {
        Split {
            accessed: self.accessed.saturating_sub(other.accessed),
            written: self.written.saturating_sub(other.written),
        }
    }
}

/// The floor under every call: the minimal update and the minimal query on a freshly installed
/// production canister (decode the argument, check the caller, touch one value, reply).
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct Floor {
    /// `kv_put` of one key into the empty heap map.
    pub update: Call,
    /// `kv_get` of that key.
    pub query: Call,
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
    /// Whether the calls are updates (else queries, whose writes mainnet does not charge).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub update: bool,
    /// The median call.
    pub median: Call,
    /// The largest.
    pub max: Call,
}

impl Calls {
    /// The calls' median and largest by instructions (ties in call order); `update` says
    /// whether they are updates.
    pub fn of(mut calls: Vec<Call>, update: bool) -> Calls {
        calls.sort_by_key(|c| c.instructions);
        let (median, max) = (calls[calls.len() / 2].clone(), calls[calls.len() - 1].clone());
        Calls { calls: calls.len() as u64, update, median, max }
    }
}

/// The committed file.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct Results {
    /// Keys loaded in each backend before its calls.
    pub keys: u64,
    /// Per backend name, per call name.
    pub backends: BTreeMap<String, BTreeMap<String, Calls>>,
    /// The minimal update and query, if measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub floor: Option<Floor>,
    /// The users/orders endpoints of the production canister, per size ("1x", "10x").
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub endpoints: BTreeMap<String, Endpoints>,
    /// The code passed over when naming an allocation site, as Markdown
    /// (`stablebench_runner::profile::forwarding_paths`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub forwarding: String,
    /// The SHA-256 of the wasm files measured, by file name.
    pub wasm: BTreeMap<String, String>,
    /// The SHA-256 of the sources that produced the figures besides the wasm (the runner, the
    /// grid, the generators, the test, the lock file, the toolchain).
    #[serde(default)]
    pub sources: String,
}

/// The users/orders endpoints at one size: the production canister with the reference schema,
/// its indexes and `users` and `orders` rows loaded.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct Endpoints {
    /// Users loaded before the calls.
    pub users: u64,
    /// Orders loaded before the calls.
    pub orders: u64,
    /// SQLite's database pages after the load (the canister's `stats`; the native copy the
    /// necessary pages are computed on has as many).
    pub database_pages: u64,
    /// Per call (as `docs/per-call.md` names it).
    pub calls: BTreeMap<String, Calls>,
    /// The SHA-256 of the wasm measured, by file name (a size measured outside CI is refused when
    /// the wasm changed).
    pub wasm: BTreeMap<String, String>,
}

/// How many times its floor plus its necessary pages a call may cost (the target of the per-call
/// benchmarks: `docs/per-call.md`).
pub const RATIO: u64 = 2;

/// The parts of a canister a page's first toucher can belong to, in the page's column order
/// (`runner/tests/page_regions.rs` sorts each function of the name section into one).
pub const PARTS: [(&str, &str); 8] = [
    ("sqlite_page_cache", "SQLite's page cache (`pcache1*`, `sqlite3Pcache*`)"),
    ("sqlite", "the rest of SQLite (VDBE, B-tree, pager, parser)"),
    ("allocator", "the allocators (wasi-libc's `malloc`, the `dlmalloc` crate, Rust's `alloc`)"),
    ("storage", "the storage path (SQLite's VFS, WASI, ic-wasi-polyfill, stable-fs, ic-stable-structures, `ic0`)"),
    ("mem_ops", "`memcpy`, `memset`, `memmove`, `memcmp` (and `memory.copy`/`memory.fill`)"),
    ("candid", "Candid decoding and encoding (the `candid` crate)"),
    ("ic_cdk", "ic-cdk: its entry, reply and system-API wrappers (its stable-memory calls count as storage)"),
    ("canister", "the canister's own code, rusqlite, Rust's std and the exports"),
];

/// One median call against the floor under it and the pages its structure must touch.
#[derive(Clone, Debug)]
pub struct Budget<'a> {
    /// The backend, or `users/orders at SIZE`.
    pub backend: String,
    /// What it ran over, in words (the backend and its keys, or the users/orders sizes).
    pub scope: String,
    /// The call's name (`kv_put`, `kv_get`, `add_users(next, 1)`, ...).
    pub name: &'a str,
    /// Whether it is an update (else a query, whose writes are not charged).
    pub update: bool,
    /// The median call, measured.
    pub call: &'a Call,
    /// The minimal update or query, measured.
    pub floor: &'a Call,
    /// The pages its structure must touch, computed.
    pub necessary: &'a Necessary,
}

impl Budget<'_> {
    /// The floor plus the mainnet fee of the necessary pages, instructions.
    pub fn floor_and_necessary(&self) -> u64 {
        self.floor.instructions + self.necessary.total().fee(self.update)
    }

    /// The most the call may cost: [`RATIO`] times [`Budget::floor_and_necessary`].
    pub fn limit(&self) -> u64 {
        RATIO * self.floor_and_necessary()
    }

    /// The call's pages that neither the floor nor the structure accounts for.
    pub fn avoidable(&self) -> Split {
        self.call.total().less(&self.floor.total()).less(&self.necessary.total())
    }
}

/// Every median call whose necessary pages were computed, with the floor of its kind: the
/// key-value calls per backend, then the users/orders endpoints per size.
pub fn budgets(r: &Results) -> Vec<Budget<'_>> {
    let Some(floor) = &r.floor else { return Vec::new() };
    let mut out = Vec::new();
    for (shown, scope, calls) in groups(r) {
        for (name, calls) in calls {
            if let Some(necessary) = &calls.median.necessary {
                let update = calls.update;
                let floor = if update { &floor.update } else { &floor.query };
                let (backend, scope) = (shown.trim_matches('`').to_string(), scope.clone());
                out.push(Budget { backend, scope, name, update, call: &calls.median, floor, necessary });
            }
        }
    }
    out
}

/// The groups of calls measured, in the page's order: each backend's key-value calls, then the
/// users/orders endpoints at each size, with a label as the page shows it (a backend's name in
/// backticks) and what they ran over in words.
fn groups(r: &Results) -> Vec<(String, String, &BTreeMap<String, Calls>)> {
    let kv = r.backends.iter().map(|(b, c)| (format!("`{b}`"), format!("`{b}`, {} keys", grouped(r.keys)), c));
    let endpoints = ["1x", "10x"].into_iter().filter_map(|size| {
        let e = r.endpoints.get(size)?;
        let scope = format!("users/orders at {size} ({} users, {} orders)", grouped(e.users), grouped(e.orders));
        Some((format!("users/orders at {size}"), scope, &e.calls))
    });
    kv.chain(endpoints).collect()
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
    for (b, _, calls) in groups(r) {
        for (name, calls) in calls {
            let c = pick(calls);
            let stable: Vec<String> = c.stable.iter().map(|(k, s)| format!("{k} {}", split(Some(s)))).collect();
            let heap: Vec<String> = heap_regions.iter().map(|h| split(c.heap.get(*h))).collect();
            let _ = writeln!(
                out,
                "| {b} | {} (`{name}`) | {} | {} | {} | {} |",
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
        "Generated by `STABLEBENCH_REGENERATE_PAGE_REGIONS=1 [STABLEBENCH_PAGE_REGIONS_10X=1] cargo test --release -p stablebench-runner --test page_regions` from `page_regions_results.yml` (CI measures it again and fails on any difference; the 10x users/orders figures, measured outside CI, stand only while the production wasm they were measured on is the one built). Do not edit.\n"
    );
    let calls = r.backends.values().flat_map(|c| c.values()).map(|c| c.calls).max().unwrap_or(0);
    let _ = writeln!(
        out,
        "On mainnet a small call pays mostly for pages: since the IC's memory tracker each message pays 80,000 instructions for every 64 KiB Wasm page it first accesses and 80,000 more for every page it first writes ([mainnet.md](mainnet.md)). Below, messages of each key-value endpoint on the production wasm files (each backend in a canister of its own with {} keys loaded by `kv_load`, SQLite under the canister's default profile; `sqlite_vfs_rowid` is the ic-sqlite-vfs canister), their pages split by where they lie, as **accessed / written**. Each kind is called {calls} times after one call that is not measured (a fresh key per `kv_put`, a stored one per `kv_get`); the first table shows the median call by instructions (the whole message on mainnet), the second the largest.\n",
        grouped(r.keys)
    );
    for (size, e) in &r.endpoints {
        let _ = writeln!(
            out,
            "Then the users/orders endpoints at {size}: the production canister under its default profile with the reference schema, both indexes and {} users and {} orders loaded ({} database pages), each call {} times after one not measured: `add_users(next, 1)` and `add_orders(next, 1)` insert one new row each, `delete_orders(users, opt (newest - 1))` deletes the newest order (one of those just added), `list_users(random, 1)` reads one user by id and `list_orders(random, 10)` a page of ten orders, each from a uniformly random id (seeded), and `stats()` counts the rows (a query of constant cost).\n",
            grouped(e.users),
            grouped(e.orders),
            grouped(e.database_pages),
            e.calls.values().map(|c| c.calls).max().unwrap_or(0),
        );
    }
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
    for (b, _, calls) in groups(r) {
        for (name, c) in calls {
            let _ = writeln!(out, "| {b} | `{name}` | {} | {} |", top(&c.median), top(&c.max));
        }
    }
    parts_section(&mut out, r);
    sites_section(&mut out, r);
    budget_section(&mut out, r);
    out.push_str(
        "\n**Why a SQLite put sometimes reads the whole page cache.** Where `pcache1TruncateUnsafe` leads a call, its commit walked every page of SQLite's page cache. At every commit the pager truncates the cache to the database's size (`pager_end_transaction` → `sqlite3PcacheTruncate`), and the cache scans every hash slot and every page header when the largest page number it has seen lies more than its hash size past the database's end (`pcache1TruncateUnsafe` in SQLite's `pcache1.c`). A page split that reorders the new sibling pages renumbers one of them through a temporary page number, `PENDING_BYTE / page_size + 1` (131,073 at 8 KiB pages; `balance_nonroot` in `btree.c`), so every commit after such a split scans it all. Natively that is a quick loop; on mainnet every 64 KiB heap page holding a cached page costs 80,000 instructions, so the larger the page cache, the dearer these commits.\n",
    );
    out
}

/// docs/page-budget.md's pages-by-part section: each median call's pages by the part of the
/// canister that touched them first (nothing if no call has them).
fn parts_section(out: &mut String, r: &Results) {
    let groups = groups(r);
    if !groups.iter().any(|(_, _, calls)| calls.values().any(|c| !c.median.by_part.is_empty())) {
        return;
    }
    out.push_str("\n## By part of the canister\n\nEach median call's pages (heap and stable together, accessed / written) by the part of the canister whose function touched the page first in the message (the runner's page profile, every function's pages summed, so each row adds up to the call's pages). A page goes to its first toucher, not to what it holds: a page of SQLite's page cache that `memcpy` fills first counts under `memcpy`, and a page one part reads first and another writes first counts as accessed by the first and written by the second (so a part's written pages can outnumber its accessed ones). The parts:\n\n");
    for (key, what) in PARTS {
        let _ = writeln!(out, "- **{}**: {what}", key.replace('_', " "));
    }
    let _ = writeln!(
        out,
        "\n| backend | call | all pages | {} |\n|---|---|---:|{}",
        PARTS.map(|(k, _)| k.replace('_', " ")).join(" | "),
        "---:|".repeat(PARTS.len())
    );
    for (b, _, calls) in groups {
        for (name, c) in calls {
            let c = &c.median;
            if c.by_part.is_empty() {
                continue;
            }
            let cells: Vec<String> = PARTS.iter().map(|(k, _)| split(c.by_part.get(*k))).collect();
            let _ = writeln!(out, "| {b} | `{name}` | {} | {} |", split(Some(&c.total())), cells.join(" | "));
        }
    }
}

/// docs/page-budget.md's allocation-site section: each median call's allocator pages by the
/// call that asked (nothing if no call has them).
fn sites_section(out: &mut String, r: &Results) {
    let groups = groups(r);
    if !groups.iter().any(|(_, _, calls)| calls.values().any(|c| !c.median.allocation_sites.is_empty())) {
        return;
    }
    let _ = writeln!(
        out,
        "\n## The allocators' pages by allocation site\n\nThe **allocator** column above: each median call (one call per message, the same messages as above: the reads are queries, whose written pages mainnet does not charge, the writes updates), its pages that an allocator function touched first (malloc and free walking bins and trees, splitting chunks and writing their headers: a small request that lands in a chunk on a page the message has not touched yet costs that page), by the call that asked: the nearest frame below the allocator that is not Rust's container or iterator code forwarding the request ({}), then the allocator function it entered, the {SITES} sites with the most pages (the runner's page profile, `stablebench_runner::profile::allocation_sites`; the same pages as `--profile-pages` reports). A site's pages are where its chunks' headers lie, not every byte it uses: a page the caller itself fills first counts under the caller in the tables above.\n\n| backend | call | allocator pages | allocation sites (site via allocator function, accessed / written) |\n|---|---|---:|---|",
        r.forwarding
    );
    for (b, _, calls) in groups {
        for (name, c) in calls {
            let c = &c.median;
            if c.allocation_sites.is_empty() {
                continue;
            }
            let v: Vec<String> = c
                .allocation_sites
                .iter()
                .map(|s| format!("`{}` via `{}` {}", s.site, s.entry, split(Some(&s.pages))))
                .collect();
            let _ = writeln!(out, "| {b} | `{name}` | {} | {} |", split(c.by_part.get("allocator")), v.join(", "));
        }
    }
}

/// docs/page-budget.md's floor-necessary-avoidable section (nothing if the floor was not measured).
fn budget_section(out: &mut String, r: &Results) {
    let Some(floor) = &r.floor else { return };
    let fee = |c: &Call, update: bool| c.total().fee(update);
    let _ = writeln!(
        out,
        "\n## Floor, necessary and avoidable\n\nEach median call above, read as **floor + necessary + avoidable**. The **floor** is measured: the minimal update, `{}` ({} instructions on mainnet, pages {}, {} of them their fees), and the minimal query, `{}` ({}, pages {}, {}), each on a freshly installed production canister (decode the argument, check the caller, touch one value, reply). The **necessary** pages are computed from the structure, natively, for the same keys in the same order after the same load (`runner/tests/page_regions.rs`): a `StableBTreeMap`'s are the 64 KiB pages of its memory that its own reads and writes touch (counted exactly over a `VectorMemory`, whose pages are the canister's: the `MemoryManager` maps whole pages); SQLite's are the database pages the statement visits (page 1 and each B-tree path, from `dbstat`) and the pages its commit changes (the database file compared before and after), one heap page for each (where the page cache holds it), and the file's 64 KiB pages the changed ones lie in (stable memory; the rollback journal is not counted); the heap map's are its B-tree path (the fewest levels 200,000 keys can take at eleven keys a node: `std`'s `BTreeMap` does not show its height) and the value, one heap page each. For the users/orders endpoints the same calls run natively through the same library functions (`stablebench::jobs`, `stablebench::query`, `stablebench::counts`) on a copy of the database built the same way (as many pages as the canister's): the database pages every statement of the call visits are counted by emptying SQLite's page cache before the call (`sqlite3_db_release_memory`) and counting its misses, one heap page each, and a write's changed pages as above; a read whose pages the canister's page cache does not hold reads them from stable memory, counted as avoidable (a page cache that holds them would not). What is left is **avoidable**: pages neither the floor nor the structure needs (the allocators' scattered temporaries, caches' headers, the structures' own bookkeeping). Pages are accessed / written; the fee of a page is 80,000 instructions to access and 80,000 more to write (in an update). The target is at most {RATIO}× the floor plus the necessary pages' fee.\n",
        floor.update.what,
        grouped(floor.update.instructions),
        split(Some(&floor.update.total())),
        grouped(fee(&floor.update, true)),
        floor.query.what,
        grouped(floor.query.instructions),
        split(Some(&floor.query.total())),
        grouped(fee(&floor.query, false)),
    );
    out.push_str("| backend | call | on mainnet | its pages | necessary: what | necessary pages | avoidable pages | floor + necessary | at most | met |\n|---|---|---:|---:|---|---:|---:|---:|---:|---|\n");
    for b in budgets(r) {
        let _ = writeln!(
            out,
            "| {} | `{}` | {} | {} | {} | {} | {} | {} | {} | {} |",
            if b.backend.starts_with("users/orders") { b.backend.clone() } else { format!("`{}`", b.backend) },
            b.name,
            grouped(b.call.instructions),
            split(Some(&b.call.total())),
            b.necessary.what,
            split(Some(&b.necessary.total())),
            split(Some(&b.avoidable())),
            grouped(b.floor_and_necessary()),
            grouped(b.limit()),
            if b.call.instructions <= b.limit() {
                "yes".to_string()
            } else {
                format!("no: {:.2}x", b.call.instructions as f64 / b.limit() as f64)
            }
        );
    }
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
    fn a_budget_is_floor_plus_necessary_and_the_rest_is_avoidable() {
        let call = |what: &str, accessed, written| {
            let mut c = Call { what: what.into(), instructions: 0, ..Call::default() };
            c.heap.insert("heap".into(), Split { accessed, written });
            c
        };
        let floor = Floor {
            update: Call { instructions: 1_000_000, ..call("update", 7, 4) },
            query: Call { instructions: 500_000, ..call("query", 6, 4) },
        };
        let necessary = Necessary {
            what: "path".into(),
            heap: Split { accessed: 5, written: 1 },
            stable: Split { accessed: 2, written: 2 },
        };
        let mut put = Call { instructions: 9_000_000, ..call("put", 30, 20) };
        put.necessary = Some(necessary.clone());
        let mut get = Call { instructions: 2_000_000, ..call("get", 20, 10) };
        get.necessary = Some(necessary);
        let mut r = Results { keys: 10, ..Results::default() };
        assert!(budgets(&r).is_empty(), "no floor, no budget");
        let of = |c: Call, update| Calls { calls: 1, update, median: c.clone(), max: c };
        r.backends
            .insert("b".into(), BTreeMap::from([("kv_put".into(), of(put, true)), ("kv_get".into(), of(get, false))]));
        r.floor = Some(floor);
        let b = budgets(&r);
        assert_eq!(b.len(), 2);
        let (get, put) = (&b[0], &b[1]);
        assert!(!get.update && put.update);
        // The query pays for accessed pages only: 7 necessary pages at 80,000.
        assert_eq!(get.floor_and_necessary(), 500_000 + 7 * 80_000);
        assert_eq!(put.floor_and_necessary(), 1_000_000 + 7 * 80_000 + 3 * 80_000);
        assert_eq!(put.limit(), 2 * put.floor_and_necessary());
        assert_eq!(put.avoidable(), Split { accessed: 30 - 7 - 7, written: 20 - 4 - 3 });
        assert_eq!(get.avoidable(), Split { accessed: 20 - 6 - 7, written: 10 - 4 - 3 });
        let page = page(&r, &["heap"]);
        assert!(
            page.contains(
                "| `b` | `kv_put` | 9,000,000 | 30 / 20 | path | 7 / 3 | 16 / 13 | 1,800,000 | 3,600,000 | no: 2.50x |"
            ),
            "{page}"
        );
    }

    #[test]
    fn the_parts_table_lists_each_part_in_order_and_skips_calls_without_them() {
        let mut c = Call { what: "put".into(), ..Call::default() };
        c.heap.insert("heap".into(), Split { accessed: 5, written: 2 });
        let without = Calls { calls: 1, update: true, median: c.clone(), max: c.clone() };
        let mut r = Results { keys: 1, ..Results::default() };
        r.backends.insert("b".into(), BTreeMap::from([("kv_put".into(), without.clone())]));
        assert!(!page(&r, &["heap"]).contains("## By part"), "no call has parts: no section");
        c.by_part.insert("candid".into(), Split { accessed: 2, written: 1 });
        c.by_part.insert("sqlite_page_cache".into(), Split { accessed: 3, written: 1 });
        let with = Calls { calls: 1, update: true, median: c.clone(), max: c };
        r.backends.insert("b".into(), BTreeMap::from([("kv_put".into(), with), ("kv_get".into(), without)]));
        let page = page(&r, &["heap"]);
        assert!(page.contains("| `b` | `kv_put` | 5 / 2 | 3 / 1 | – | – | – | – | 2 / 1 | – | – |"), "{page}");
        assert!(!page.contains("| `b` | `kv_get` | 5 / 2 | –"), "{page}");
    }

    #[test]
    fn the_sites_table_names_each_site_and_its_allocator_function() {
        let mut c = Call { what: "get".into(), ..Call::default() };
        c.heap.insert("heap".into(), Split { accessed: 9, written: 6 });
        let without = Calls { calls: 1, update: false, median: c.clone(), max: c.clone() };
        let mut r = Results { keys: 1, ..Results::default() };
        r.backends.insert("b".into(), BTreeMap::from([("kv_get".into(), without.clone())]));
        assert!(!page(&r, &["heap"]).contains("## The allocators' pages"), "no call has sites: no section");
        c.by_part.insert("allocator".into(), Split { accessed: 5, written: 4 });
        let site = |site: &str, entry: &str, accessed, written| AllocationSite {
            site: site.into(),
            entry: entry.into(),
            pages: Split { accessed, written },
        };
        c.allocation_sites = vec![site("candid::de::X", "malloc", 3, 3), site("f", "free", 2, 1)];
        let with = Calls { calls: 1, update: false, median: c.clone(), max: c };
        r.backends.insert("b".into(), BTreeMap::from([("kv_get".into(), with), ("kv_len".into(), without)]));
        let page = page(&r, &["heap"]);
        assert!(
            page.contains("| `b` | `kv_get` | 5 / 4 | `candid::de::X` via `malloc` 3 / 3, `f` via `free` 2 / 1 |"),
            "{page}"
        );
        let section = page.split("## The allocators' pages").nth(1).expect("the section");
        assert!(!section.contains("`kv_len`"), "a call without sites has no row: {section}");
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
