//! Offline and live agree: the benchmark canister's Candid API (`bench_setup`, then `bench_run`),
//! driven as a dfx user drives it, measures what canbench measures for the same cell. Each cell
//! runs on a freshly installed benchmark canister twice: once canbench's way (the
//! `__canbench__<name>` query: setup and measured step in one message) and once the live way
//! (the setup in its own update calls, then the measured step in an update).
//!
//! What must hold, and why (the differences are the message boundary and the allocator's state it
//! leaves, nothing else):
//! - a read of a store that keeps nothing in the heap between calls (StableBTreeMap) costs the
//!   same but for where its short-lived buffers land: within 1% (it was exact while Rust's
//!   allocations shared wasi-libc's `malloc` with SQLite; since the canister gives them the
//!   dlmalloc crate, the region's history moves the count: +0.66% measured on 2026-11-26; not
//!   traced further: probably which requests the allocator serves from never-used memory);
//! - a write costs at least as much live: canbench's replica (PocketIC 13, the model these runs
//!   use) charges 1,000 instructions for each 4 KiB stable page a message dirties first, and
//!   canbench's setup has already dirtied, in the same message, the pages the step writes again;
//! - what allocates in the heap (SQLite's page and statement caches, the heap map's values, a
//!   sysrepo try's documents) differs by less than 4%: the live setup filled the heap in other
//!   messages, so the allocator's free lists differ (measured on 2026-11-26 with the dlmalloc
//!   crate: the heap map's cold read -3.0%, a sysrepo try -2.0%; with wasi-libc's `malloc` for
//!   both, before: +0.06% and within 2%).

use stablebench_canister::Error;
use stablebench_grid::live::SetupProgress;
use stablebench_runner::canbench::BenchResult;
use stablebench_runner::canister::{Canister, Limits, Options};
use stablebench_runner::live;
use stablebench_runner::target::{Offline, Target};

mod common;
use common::{bench_code as code, BENCH_WASM as WASM};

/// canbench's way: the `__canbench__` query on a fresh canister with the benchmarking limits.
fn canbench(name: &str) -> BenchResult {
    let opts = Options { limits: Limits::BENCHMARK, ..Options::default() };
    let (mut c, _) = Canister::install(code(), &candid::encode_one(None::<()>).unwrap(), opts).unwrap();
    let out =
        c.query(&format!("__canbench__{name}"), &candid::encode_args(()).unwrap(), candid::Principal::anonymous());
    candid::decode_one(&out.result.unwrap_or_else(|e| panic!("{name}: {e}"))).unwrap()
}

/// The live way, on a fresh canister: returns (canbench, live) instructions of the measured step.
fn both(name: &str) -> (u64, u64) {
    let expected = canbench(name).total.instructions;
    let mut target = Offline::install(WASM.as_ref()).unwrap();
    live::setup(&mut target, name, None).unwrap();
    let report = live::run(&mut target, name, false).unwrap();
    assert_eq!(report.name, name);
    eprintln!("{name}: canbench {expected}, live {}", report.instructions);
    (expected, report.instructions)
}

/// How far a live figure may be from canbench's where the heap's history differs (module docs).
const HEAP_HISTORY: f64 = 0.04;

/// `live` within `share` of `canbench`.
fn within(name: &str, canbench: u64, live: u64, share: f64) {
    let deviation = canbench.abs_diff(live) as f64 / canbench as f64;
    assert!(deviation < share, "{name}: canbench {canbench}, live {live} ({:.2}%)", deviation * 100.0);
}

#[test]
fn a_read_of_the_stable_map_costs_what_canbench_measures() {
    let name = "stable_btreemap_trie_read_10k_warm";
    let (canbench, live) = both(name);
    within(name, canbench, live, 0.01);
}

#[test]
fn a_live_write_pays_for_the_pages_canbench_setup_had_dirtied() {
    let (canbench, live) = both("stable_btreemap_trie_write_10k_warm");
    // 50 writes: at most a few pages each, 1,000 instructions per page.
    assert!(live > canbench && live - canbench < 50 * 10 * 1_000, "canbench {canbench}, live {live}");
}

#[test]
fn heap_and_sqlite_cells_agree_within_the_heaps_history() {
    for name in [
        "heap_btreemap_trie_read_10k_cold",
        "heap_btreemap_trie_upgrade_10k",
        "sqlite_trie_read_10k_warm_journal_memory_temp_file",
        "sqlite_rowid_trie_read_10k_cold_journal_memory_temp_file",
        "sqlite_insert_users_100k_journal_memory_temp_file",
    ] {
        let (canbench, live) = both(name);
        within(name, canbench, live, HEAP_HISTORY);
    }
}

/// A sysrepo cell has no setup steps: its measured call builds the data set from empty stores and
/// runs the tries, as canbench's query does, so both ways run the same code in one message.
#[test]
fn sysrepo_cells_run_live_as_canbench_runs_them() {
    for name in [
        "blob_sysrepo_modify_an_item_1k_fresh",
        "stable_btreemap_sysrepo_get_tree_hash_1k",
        "sqlite_sysrepo_create_an_item_1k_journal_memory_temp_file",
    ] {
        let (canbench, live) = both(name);
        within(name, canbench, live, HEAP_HISTORY);
    }
}

/// A Chia cell's setup is the reset (every store emptied); its measured call replays the chain
/// from empty, as canbench's query does on a fresh canister. Above 10,000 coins `bench_run`
/// refuses (one call could exceed an update's limit), and a replay in messages uses the setup up.
#[test]
fn chia_cells_run_live_as_canbench_runs_them_and_larger_ones_are_refused() {
    let name = "sqlite_chia_kv_10k_journal_memory_temp_file";
    let (canbench, live) = both(name);
    let diff = canbench.abs_diff(live) as f64 / canbench as f64;
    assert!(diff < 0.02, "{name}: canbench {canbench}, live {live}");
    let mut target = Offline::install(WASM.as_ref()).unwrap();
    let name = "stable_btreemap_chia_btree_all_100k";
    live::setup(&mut target, name, None).unwrap();
    let e = live::run(&mut target, name, false).unwrap_err().to_string();
    assert!(e.contains("InvalidArgument") && e.contains("bench_chia_blocks"), "{e}");
}

#[test]
fn the_api_refuses_what_it_cannot_do_and_lists_the_grid() {
    let mut target = Offline::install(WASM.as_ref()).unwrap();
    let cells = live::cells(&mut target, &[]).unwrap();
    assert_eq!(cells.len(), stablebench_grid::cells::cells().len());
    assert!(cells.iter().all(|c| c.setup.first().map(String::as_str) == Some("reset")));
    // Not set up: a clear error, not a trap.
    let e = live::run(&mut target, "heap_btreemap_trie_read_200_warm", false).unwrap_err().to_string();
    assert!(e.contains("InvalidArgument") && e.contains("not set up"), "{e}");
    let e = live::setup(&mut target, "no_such_benchmark", None).unwrap_err().to_string();
    assert!(e.contains("bench_cells lists them"), "{e}");
    // A step that changes the state uses its setup up.
    let name = "heap_btreemap_nodestore_10k";
    live::setup(&mut target, name, None).unwrap();
    live::run(&mut target, name, false).unwrap();
    let e = live::run(&mut target, name, false).unwrap_err().to_string();
    assert!(e.contains("used the setup up"), "{e}");
    // A sysrepo cell above 1,000 items: its setup and ten tries would be one update call, which can
    // exceed 40 B instructions; refused with the reason.
    let name = "stable_btreemap_sysrepo_create_batch_10k";
    live::setup(&mut target, name, None).unwrap();
    let e = live::run(&mut target, name, false).unwrap_err().to_string();
    assert!(e.contains("InvalidArgument") && e.contains("at 1000 items only"), "{e}");
    // A users/orders cell past the reference size: its setup's index build and its inserts each
    // exceed one update; refused before anything is reset.
    let e = live::setup(&mut target, "sqlite_users_orders_10m_select_join_journal_memory_temp_file", None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("InvalidArgument") && e.contains("up to the reference size"), "{e}");
    // A repeatable one runs again, and survives an upgrade (the setup is kept in stable memory).
    let name = "heap_btreemap_trie_read_1k_warm";
    live::setup(&mut target, name, None).unwrap();
    let first = live::run(&mut target, name, false).unwrap();
    Target::upgrade(&mut target).unwrap();
    let after = live::run(&mut target, name, true).unwrap();
    assert_eq!(after.calls, first.calls);
    // Not a controller: refused.
    let (mut c, _) = Canister::install(code(), &candid::encode_one(None::<()>).unwrap(), Options::default()).unwrap();
    let out =
        c.update("bench_setup", &candid::encode_args((name, None::<u64>)).unwrap(), candid::Principal::anonymous());
    let reply: Result<SetupProgress, Error> = candid::decode_one(&out.result.unwrap()).unwrap();
    assert!(matches!(reply, Err(Error::NotController { .. })), "{reply:?}");
}

/// On mainnet (the runner's `ic` cost model: the IC's memory tracker charges every 64 KiB page a
/// message touches) the live way still works as a dfx user drives it: `bench_setup` stops each
/// call at its budget (between batches: a key-value load's batch of `SETUP_BATCH` entries runs
/// whole), which the page fees now eat into, so the setup takes at least as many calls and
/// completes; the measured step passes its oracle and costs more than under canbench.
#[test]
fn under_mainnets_memory_charges_a_budgeted_setup_completes_and_the_run_passes_its_oracle() {
    use stablebench_runner::replica::CostModel;
    let budget = Some(50_000_000);
    // (cell, whether its setup spans several calls of that budget)
    for (name, spans) in [
        ("sqlite_users_orders_10k_insert_orders_indexed_journal_memory_temp_file", true),
        ("sqlite_rowid_trie_read_10k_cold_journal_memory_temp_file", false),
        ("stable_btreemap_trie_write_10k_warm", false),
    ] {
        let run = |model| {
            let mut target = Offline::install_in(WASM.as_ref(), model).unwrap();
            let calls = live::setup(&mut target, name, budget).unwrap_or_else(|e| panic!("{name} ({model:?}): {e:#}"));
            let report = live::run(&mut target, name, false).unwrap_or_else(|e| panic!("{name} ({model:?}): {e:#}"));
            (calls, report.instructions)
        };
        let ((calls, canbench), (ic_calls, ic)) = (run(CostModel::Canbench), run(CostModel::Ic));
        eprintln!("{name}: canbench {canbench} in {calls} setup calls, ic {ic} in {ic_calls}");
        assert!(ic_calls >= calls && (calls > 1) == spans, "{name}: setup calls: canbench {calls}, ic {ic_calls}");
        assert!(ic > canbench, "{name}: canbench {canbench}, ic {ic}");
    }
}
