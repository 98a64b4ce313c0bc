//! Stable pages dirtied per coin: the write amplification Chia's coin-store benchmark is about,
//! which a canbench query cannot show (its replay is one message, so each page counts once
//! however often it is rewritten). Under canbench's replica (PocketIC 13, the model this test
//! uses) every 4 KiB stable page a message writes for the first time costs 1,000 instructions,
//! on mainnet the memory tracker charges each 64 KiB page a message touches, and every replica
//! counts the pages against the message's dirty-page limit, so what a schema pays per coin
//! depends on how many coins a message commits.
//!
//! Each Chia schema at 100,000 coins (SQLite under `cells::KV_PROFILE`, the cache-rich profile: the cache-poor one
//! dirties the very same pages, measured when this test was written) is replayed on a fresh
//! benchmark canister through the live API (`bench_setup`, then `bench_chia_blocks`), as a canister
//! taking blocks in messages would: the chain up to the last `WINDOW_COINS` coins in messages of
//! `BULK_BLOCKS` blocks (about 10,000 coins, one commit each), then the rest a block per message
//! (one commit per block, as Chia's own node commits; the last block's message, which also
//! measures the reads and checks them and a rewind against the model, is not counted). The runner
//! reports the pages each message dirtied.
//!
//! The figures are committed in `chia_pages_results.yml` (docs/chia.md quotes them); this test
//! fails when a rerun differs from them at all (the runner is deterministic). Regenerate with
//! `STABLEBENCH_REGENERATE_CHIA_PAGES=1 cargo test --release -p stablebench-runner --test chia_pages`
//! (`scripts/report.sh` does).

use std::collections::BTreeMap;

mod common;
use common::bench_code as code;

use stablebench_canister::Error;
use stablebench_grid::cells::{cells, Cell, Workload, KV_PROFILE};
use stablebench_grid::chia::{MAX_BLOCKS_PER_CALL, SIZES};
use stablebench_grid::live::{ChiaProgress, Oracle, SetupProgress};
use stablebench_report::chia::{CellPages, PagesResults, Stretch, PAGES_RESULTS};
use stablebench_runner::canister::{default_controller, Canister, Options};

const RESULTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../chia_pages_results.yml");
/// What the replays run.
const WASM_FILES: [&str; 1] = ["stablebench_bench.wasm"];
/// This test's own sources (besides [`common::PRODUCERS`]): its file and its results type.
const SOURCES: [&str; 2] = ["runner/tests/chia_pages.rs", "report/src/chia.rs"];

/// Blocks per message in the bulk stretch: about 10,000 coins.
const BULK_BLOCKS: u32 = 1_000;
/// At least this many coins end the chain a block per message.
const WINDOW_COINS: u64 = 5_000;
/// The most coins one block creates (two rewards and up to 16 transaction coins).
const MAX_BLOCK_COINS: u64 = 18;

fn blocks(c: &mut Canister, name: &str, n: u32) -> (Result<ChiaProgress, Error>, u64, u64) {
    let out = c.update("bench_chia_blocks", &candid::encode_args((name, n)).unwrap(), default_controller());
    let (instructions, pages) = (out.instructions, out.dirtied_pages);
    let reply = out.result.unwrap_or_else(|e| panic!("{name}: bench_chia_blocks({n}) was rejected: {e}"));
    (candid::decode_one(&reply).unwrap(), instructions, pages)
}

fn add(s: &mut Stretch, p: &ChiaProgress, message_instructions: u64, pages: u64) {
    s.messages += 1;
    s.blocks += p.blocks;
    s.coins += p.coins;
    s.spends += p.spends;
    s.dirtied_pages += pages;
    s.max_dirtied_pages = s.max_dirtied_pages.max(pages);
    s.instructions += p.instructions;
    s.message_instructions += message_instructions;
}

/// Replays cell `name` in messages on a fresh canister; see the module documentation.
fn measure(cell: &Cell) -> CellPages {
    let name = cell.name();
    let (mut c, _) = Canister::install(code(), &candid::encode_one(None::<()>).unwrap(), Options::default())
        .expect("the benchmark wasm installs");
    loop {
        let out = c.update("bench_setup", &candid::encode_args((&name, None::<u64>)).unwrap(), default_controller());
        let p: Result<SetupProgress, Error> = candid::decode_one(&out.result.expect("bench_setup replies")).unwrap();
        if p.unwrap_or_else(|e| panic!("{name}: {e:?}")).complete {
            break;
        }
    }
    let mut out = CellPages::default();
    let mut stored = 0;
    while cell.size - stored > WINDOW_COINS + u64::from(BULK_BLOCKS) * MAX_BLOCK_COINS {
        let (p, i, pages) = blocks(&mut c, &name, BULK_BLOCKS);
        let p = p.unwrap_or_else(|e| panic!("{name}: {e:?}"));
        add(&mut out.bulk, &p, i, pages);
        stored = p.coins_total;
    }
    // Up to the window in smaller messages, counted in neither stretch.
    while cell.size - stored > WINDOW_COINS + MAX_BLOCK_COINS {
        let n = ((cell.size - stored - WINDOW_COINS) / MAX_BLOCK_COINS) as u32;
        let (p, _, _) = blocks(&mut c, &name, n.clamp(1, MAX_BLOCKS_PER_CALL));
        stored = p.unwrap_or_else(|e| panic!("{name}: {e:?}")).coins_total;
    }
    loop {
        let (p, i, pages) = blocks(&mut c, &name, 1);
        let p = p.unwrap_or_else(|e| panic!("{name}: {e:?}"));
        if p.complete {
            // The last block's message also measures the reads and the rewind: not counted.
            assert!(matches!(p.oracle, Some(Oracle::Pass(_))), "{name}: {:?}", p.oracle);
            assert_eq!(p.coins_total, cell.size, "{name}");
            break;
        }
        assert_eq!(p.oracle, None, "{name}: the oracle speaks once, when the chain is replayed");
        add(&mut out.single, &p, i, pages);
    }
    // The replay is over: another call is refused with the reason, and changes nothing.
    let (p, _, pages) = blocks(&mut c, &name, 1);
    assert!(matches!(&p, Err(Error::InvalidArgument { message }) if message.contains("replayed")), "{p:?}");
    assert_eq!(pages, 0, "{name}: a refused call dirties nothing");
    out
}

#[test]
fn pages_dirtied_per_coin_match_the_committed_results() {
    let size = SIZES[SIZES.len() - 1];
    let measured_cells: Vec<Cell> = cells()
        .into_iter()
        .filter(|c| c.workload() == Workload::Chia && c.size == size && c.profile.is_none_or(|p| p == KV_PROFILE))
        .collect();
    assert!(!measured_cells.is_empty());
    let committed: Option<PagesResults> =
        std::fs::read_to_string(RESULTS).ok().map(|s| serde_yaml::from_str(&s).expect("chia_pages_results.yml parses"));
    let wasm = common::wasm_hashes(&WASM_FILES);
    let sources = common::sources(&SOURCES);
    let measures = common::measures(
        RESULTS,
        "STABLEBENCH_REGENERATE_CHIA_PAGES",
        "STABLEBENCH_REGENERATE_CHIA_PAGES=1 cargo test --release -p stablebench-runner --test chia_pages",
        committed.as_ref().map(|c| &c.wasm),
        &wasm,
        committed.as_ref().map_or("", |c| &c.sources),
        &sources,
    );
    let mut results = BTreeMap::new();
    if measures {
        // Two at a time (the machine's cores); each on its own canister.
        for pair in measured_cells.chunks(2) {
            let done: Vec<(String, CellPages)> = std::thread::scope(|s| {
                let handles: Vec<_> = pair.iter().map(|c| s.spawn(move || (c.name(), measure(c)))).collect();
                handles.into_iter().map(|h| h.join().expect("a replay thread")).collect()
            });
            results.extend(done);
        }
    } else {
        results = committed.as_ref().unwrap().cells.clone();
    }
    for (name, p) in &results {
        eprintln!(
            "{name}: bulk {:.3} pages/coin, {:.0} instr/coin; single {:.3} pages/coin, {:.0} instr/coin",
            p.bulk.pages_per_coin(),
            p.bulk.instructions_per_coin(),
            p.single.pages_per_coin(),
            p.single.instructions_per_coin()
        );
        // Real behaviour: both stretches ran, and every schema writes stable memory per coin.
        assert!(p.bulk.coins > 0 && p.single.coins + MAX_BLOCK_COINS >= WINDOW_COINS, "{name}: {p:?}");
        assert!(p.bulk.dirtied_pages > 0 && p.single.dirtied_pages > 0, "{name}: {p:?}");
        assert!(p.single.blocks == p.single.messages, "{name}: one block per message");
    }
    let measured = PagesResults { bulk_blocks: BULK_BLOCKS, window_coins: WINDOW_COINS, cells: results, wasm, sources };
    if std::env::var_os("STABLEBENCH_REGENERATE_CHIA_PAGES").is_some() {
        let yml = format!(
            "# Generated by `STABLEBENCH_REGENERATE_CHIA_PAGES=1 cargo test --release -p stablebench-runner --test chia_pages`;\n# Chia replays in messages on the benchmark wasm through the offline runner ({PAGES_RESULTS}). Do not edit.\n{}",
            serde_yaml::to_string(&measured).unwrap()
        );
        std::fs::write(RESULTS, yml).unwrap();
        return;
    }
    let committed = committed.expect("chia_pages_results.yml");
    assert_eq!(
        committed.cells.keys().cloned().collect::<std::collections::BTreeSet<_>>(),
        measured_cells.iter().map(Cell::name).collect(),
        "the grid's Chia cells are not the file's: regenerate chia_pages_results.yml"
    );
    assert_eq!(
        (committed.bulk_blocks, committed.window_coins),
        (BULK_BLOCKS, WINDOW_COINS),
        "regenerate chia_pages_results.yml"
    );
    for (name, m) in &measured.cells {
        let c = &committed.cells[name];
        for (what, a, b) in [("bulk", &m.bulk, &c.bulk), ("single", &m.single, &c.single)] {
            assert_eq!(a, b, "{name} {what}: measured, committed: regenerate chia_pages_results.yml");
        }
    }
}
