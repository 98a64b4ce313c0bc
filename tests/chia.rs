//! The Chia coin-store workload: the coin name and its CLVM amount encoding against independent
//! vectors, the synthetic chain's determinism, shape and validity, and every schema against the
//! [`Model`] — after a replay, after rewinds, after re-applying the rewound blocks (a reorg that
//! creates the same coins again) and after reopening its storage — on a fixed ~3,000-coin chain,
//! on hand-made blocks with coins created and spent in the same block, and on generated small
//! chains. Also the sorted-runs store's merging and reopening, and the replay driver's chunks.

use std::cell::Cell;
use std::collections::BTreeSet;
use std::time::Instant;

use ic_stable_structures::VectorMemory;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use rusqlite::Connection;
use sha2::{Digest, Sha256};
use stablebench::chia::btree_all::BtreeAll;
use stablebench::chia::hashdb::BATCH_COINS;
use stablebench::chia::runs::{self, RunStore, MERGE_AT, ROW_LEN};
use stablebench::chia::{
    chain, clvm_int, kv, replay, reward_parent, v2, v3, BlockSpendInfo, ChainSpec, Coin, Hash, Model, Schema,
};
use stablebench::kv::{NoProbe, Probe};
use stablebench::{Error, Result};

// ---------------------------------------------------------------------------------------------
// Coins

#[test]
fn clvm_int_matches_the_published_vectors() {
    let vectors: [(u64, &[u8]); 11] = [
        (0, &[]),
        (1, &[0x01]),
        (127, &[0x7f]),
        (128, &[0x00, 0x80]),
        (255, &[0x00, 0xff]),
        (256, &[0x01, 0x00]),
        (32_767, &[0x7f, 0xff]),
        (32_768, &[0x00, 0x80, 0x00]),
        (1_750_000_000_000, &[0x01, 0x97, 0x74, 0x20, 0xdc, 0x00]),
        (u64::MAX >> 1, &[0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]),
        (u64::MAX, &[0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]),
    ];
    for (amount, expected) in vectors {
        assert_eq!(clvm_int(amount), expected, "{amount}");
    }
}

fn from_hex(s: &str) -> Hash {
    let bytes: Vec<u8> = (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect();
    bytes.try_into().unwrap()
}

#[test]
fn coin_name_is_the_sha256_of_parent_puzzle_hash_and_clvm_amount() {
    let parent: Hash = std::array::from_fn(|i| i as u8);
    let puzzle_hash = [0xa5; 32];
    // The expected names were computed outside Rust (Python's hashlib over the original's
    // `as_clvm_int`), and again here with sha2 over bytes concatenated by hand.
    let cases: [(u64, &[u8], &str); 4] = [
        (0, &[], "e5c6e21ed7852c0b4a9193fcd56fb279cdfe6b43e97184be464c06dfac359b92"),
        (128, &[0x00, 0x80], "876213d3f13878e8a2fe6f602186366287d3d43d217c655e0a872ccf61cdb41e"),
        (
            1_750_000_000_000,
            &[0x01, 0x97, 0x74, 0x20, 0xdc, 0x00],
            "cf0ca92ebf6b64b987b6e19ce80edcdc1afaa862445fe1ac5552782ab63a49b6",
        ),
        (
            u64::MAX,
            &[0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
            "c67d6dc5496b2fb7b4a2ea9e557af96271fe3de28dbec0e5ac184841d8261c85",
        ),
    ];
    for (amount, encoded, expected) in cases {
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&parent);
        bytes.extend_from_slice(&puzzle_hash);
        bytes.extend_from_slice(encoded);
        let by_hand: Hash = Sha256::digest(&bytes).into();
        assert_eq!(by_hand, from_hex(expected), "{amount}");
        assert_eq!(Coin { parent, puzzle_hash, amount }.name(), by_hand, "{amount}");
    }
}

// ---------------------------------------------------------------------------------------------
// The chain

#[test]
fn the_chain_is_a_function_of_its_seed() {
    let a: Vec<BlockSpendInfo> = chain(ChainSpec { coins: 2000, seed: 7 }).collect();
    let b: Vec<BlockSpendInfo> = chain(ChainSpec { coins: 2000, seed: 7 }).collect();
    let c: Vec<BlockSpendInfo> = chain(ChainSpec { coins: 2000, seed: 8 }).collect();
    assert_eq!(a, b);
    assert_ne!(a, c);
    // A shorter chain of the same seed is a prefix, except for its last block, which is cut short.
    let short: Vec<BlockSpendInfo> = chain(ChainSpec { coins: 1000, seed: 7 }).collect();
    let n = short.len() - 1;
    assert_eq!(short[..n], a[..n]);
}

#[test]
fn the_chain_spends_435_coins_per_1000_created() {
    let mut blocks = chain(ChainSpec { coins: 100_000, seed: 1 });
    let (mut coins, mut spends, mut count) = (0u64, 0u64, 0u64);
    for block in blocks.by_ref() {
        coins += block.confirms.len() as u64;
        spends += block.spends.len() as u64;
        count += 1;
    }
    assert_eq!(coins, 100_000);
    assert_eq!((blocks.created(), blocks.spent()), (coins, spends));
    assert_eq!(blocks.unspent().len() as u64, coins - spends);
    let ratio = spends as f64 / coins as f64;
    eprintln!("chain of 100,000 coins: {count} blocks, {spends} spends, spends/creations {ratio:.4} (original 0.4351)");
    assert!((ratio - 5_840_449.0 / 13_423_068.0).abs() < 0.02, "{ratio}");
}

#[test]
fn the_chain_is_a_valid_history() -> Result<()> {
    let blocks: Vec<BlockSpendInfo> = chain(ChainSpec { coins: 20_000, seed: 3 }).collect();
    let mut unspent: BTreeSet<Hash> = BTreeSet::new();
    let mut ever: BTreeSet<Hash> = BTreeSet::new();
    let (mut last_index, mut last_time) = (0u32, 0u64);
    let mut model = Model::new();
    for block in &blocks {
        assert!(block.index > last_index && block.index - last_index <= 4, "block {}", block.index);
        assert!(block.timestamp > last_time);
        (last_index, last_time) = (block.index, block.timestamp);
        assert!(block.spends.is_sorted() && block.confirms.is_sorted(), "block {}", block.index);
        let spent: BTreeSet<Hash> = block.spends.iter().copied().collect();
        assert_eq!(spent.len(), block.spends.len(), "block {}: a coin spent twice", block.index);
        for name in &block.spends {
            // Created in an earlier block and unspent until now.
            assert!(unspent.remove(name), "block {}: spends a coin that is not unspent", block.index);
        }
        let rewards: Vec<&Coin> = block.confirms.iter().filter(|c| c.is_coinbase()).collect();
        let expected: BTreeSet<Hash> = (0..2).map(|p| reward_parent(p, u64::from(block.index))).collect();
        assert_eq!(rewards.iter().map(|c| c.parent).collect::<BTreeSet<_>>(), expected, "block {}", block.index);
        for coin in block.confirms.iter().filter(|c| !c.is_coinbase()) {
            assert!(
                spent.contains(&coin.parent),
                "block {}: a transaction coin's parent is not spent here",
                block.index
            );
        }
        for coin in &block.confirms {
            assert!(ever.insert(coin.name()), "a coin created twice");
            unspent.insert(coin.name());
        }
        model.accept_block(block)?;
    }
    // Amounts of every CLVM length occur, 0 (empty) and 9 bytes included.
    let lengths: BTreeSet<usize> = blocks.iter().flat_map(|b| &b.confirms).map(|c| clvm_int(c.amount).len()).collect();
    assert_eq!(lengths, (0..=9).collect());
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The schemas against the model

/// The storage of the five schemas: a `:memory:` database for each SQLite schema (v3, kv and runs
/// share table names) and the stable memories. Opening the schemas again over the same `Stores`
/// is what an upgrade does.
struct Stores {
    v2: Connection,
    v3: Connection,
    kv: Connection,
    runs: Connection,
    kv_map: VectorMemory,
    kv_names: VectorMemory,
    runs_runs: VectorMemory,
    runs_names: VectorMemory,
    btree_coins: VectorMemory,
    btree_blocks: VectorMemory,
}

type Schemas<'a> = Vec<(&'static str, Box<dyn Schema + 'a>)>;

impl Stores {
    fn new() -> Result<Stores> {
        let stores = Stores {
            v2: Connection::open_in_memory()?,
            v3: Connection::open_in_memory()?,
            kv: Connection::open_in_memory()?,
            runs: Connection::open_in_memory()?,
            kv_map: VectorMemory::default(),
            kv_names: VectorMemory::default(),
            runs_runs: VectorMemory::default(),
            runs_names: VectorMemory::default(),
            btree_coins: VectorMemory::default(),
            btree_blocks: VectorMemory::default(),
        };
        v2::create(&stores.v2)?;
        v3::create(&stores.v3)?;
        kv::create(&stores.kv)?;
        runs::create(&stores.runs)?;
        Ok(stores)
    }

    /// Every schema over these stores; the hash-db ones writing once more than `batch` coins are
    /// pending.
    fn open(&self, batch: u64) -> Result<Schemas<'_>> {
        Ok(vec![
            ("v2", Box::new(v2::V2::new(&self.v2))),
            ("v3", Box::new(v3::open(&self.v3).with_batch_coins(batch))),
            ("kv", Box::new(kv::open(&self.kv, self.kv_map.clone(), self.kv_names.clone())?.with_batch_coins(batch))),
            (
                "runs",
                Box::new(
                    runs::open(&self.runs, self.runs_runs.clone(), self.runs_names.clone())?.with_batch_coins(batch),
                ),
            ),
            ("btree_all", Box::new(BtreeAll::init(self.btree_coins.clone(), self.btree_blocks.clone()))),
        ])
    }
}

/// Accepts `blocks` into the model and every schema, then flushes.
fn apply(model: &mut Model, schemas: &mut Schemas<'_>, blocks: &[BlockSpendInfo]) -> Result<()> {
    for block in blocks {
        model.accept_block(block)?;
        for (_, schema) in schemas.iter_mut() {
            schema.accept_block(block)?;
        }
    }
    for (_, schema) in schemas.iter_mut() {
        schema.flush()?;
    }
    Ok(())
}

fn rewind(model: &mut Model, schemas: &mut Schemas<'_>, index: u32) -> Result<()> {
    model.rewind_to_block_index(index)?;
    for (_, schema) in schemas.iter_mut() {
        schema.rewind_to_block_index(index)?;
    }
    Ok(())
}

/// Names of no coin.
fn missing_names(n: u64) -> Vec<Hash> {
    (0..n).map(|i| Sha256::digest(format!("no such coin {i}")).into()).collect()
}

/// What every schema is asked: every coin of `blocks` (so rewound coins too), missing names mixed
/// in and one name twice; every index from 0 to 3 past the last block, and `u32::MAX`.
fn full_queries(blocks: &[BlockSpendInfo]) -> (Vec<Hash>, Vec<u32>) {
    let mut names: Vec<Hash> = blocks.iter().flat_map(|b| &b.confirms).map(Coin::name).collect();
    let missing = missing_names(names.len() as u64 / 10 + 1);
    for (i, m) in missing.into_iter().enumerate() {
        let at = (i * 11).min(names.len());
        names.insert(at, m);
    }
    if let Some(&first) = names.first() {
        names.push(first);
    }
    let top = blocks.last().map_or(0, |b| b.index);
    let mut indices: Vec<u32> = (0..=top + 3).collect();
    indices.push(u32::MAX);
    (names, indices)
}

/// The benchmark's read set: 100 existing coins (half spent, as far as there are) and 100 missing
/// names, interleaved.
fn benchmark_names(model: &Model) -> Vec<Hash> {
    let spent: Vec<Hash> = model.coins().iter().filter(|(_, c)| c.spent_index.is_some()).map(|(n, _)| *n).collect();
    let unspent: Vec<Hash> = model.coins().iter().filter(|(_, c)| c.spent_index.is_none()).map(|(n, _)| *n).collect();
    let pick = |v: &[Hash], n: usize| -> Vec<Hash> {
        let step = (v.len() / n).max(1);
        v.iter().step_by(step).take(n).copied().collect()
    };
    let mut existing = pick(&spent, 50);
    existing.extend(pick(&unspent, 100 - existing.len()));
    existing.into_iter().zip(missing_names(100)).flat_map(|(a, b)| [a, b]).collect()
}

/// The first difference between a schema's answers and the model's, if any.
fn differences(
    model: &mut Model,
    label: &str,
    schema: &mut dyn Schema,
    names: &[Hash],
    indices: &[u32],
) -> Result<Option<String>> {
    let (got, expected) = (schema.coin_infos_for_coin_names(names)?, model.coin_infos_for_coin_names(names)?);
    if got != expected {
        let first = got.iter().zip(&expected).position(|(g, e)| g != e);
        return Ok(Some(format!(
            "{label}: coin infos differ ({} returned, {} expected; first difference at {first:?}: {:?} vs {:?})",
            got.len(),
            expected.len(),
            first.map(|i| got[i]),
            first.map(|i| expected[i])
        )));
    }
    for &i in indices {
        let (got, expected) = (schema.block_info_for_block_index(i)?, model.block_info_for_block_index(i)?);
        if got != expected {
            return Ok(Some(format!("{label}: block {i} differs: {got:?} vs {expected:?}")));
        }
    }
    Ok(None)
}

fn check_all(
    model: &mut Model,
    schemas: &mut Schemas<'_>,
    step: &str,
    names: &[Hash],
    indices: &[u32],
) -> Result<Option<String>> {
    for (label, schema) in schemas.iter_mut() {
        if let Some(d) = differences(model, &format!("{label} {step}"), schema.as_mut(), names, indices)? {
            return Ok(Some(d));
        }
    }
    Ok(None)
}

fn assert_all(model: &mut Model, schemas: &mut Schemas<'_>, step: &str, names: &[Hash], indices: &[u32]) -> Result<()> {
    if let Some(d) = check_all(model, schemas, step, names, indices)? {
        panic!("{d}");
    }
    Ok(())
}

/// The first `n` blocks that create at least `coins` coins.
fn blocks_for(blocks: &[BlockSpendInfo], coins: u64) -> usize {
    let mut total = 0;
    blocks
        .iter()
        .take_while(|b| {
            let before = total;
            total += b.confirms.len() as u64;
            before < coins
        })
        .count()
}

#[test]
fn every_schema_answers_as_the_model_after_a_replay_a_rewind_and_a_reorg() -> Result<()> {
    let blocks: Vec<BlockSpendInfo> = chain(ChainSpec { coins: 3600, seed: 42 }).collect();
    let n = blocks_for(&blocks, 3000);
    // The original's batch (one write at the end) and a small one (a write every ~100 coins, so
    // the runs store merges many times).
    for batch in [BATCH_COINS, 97] {
        let stores = Stores::new()?;
        let mut schemas = stores.open(batch)?;
        let mut model = Model::new();
        for (label, schema) in schemas.iter_mut() {
            let start = Instant::now();
            let r = replay(schema.as_mut(), blocks[..n].iter().cloned(), 1000, &NoProbe)?;
            eprintln!(
                "batch {batch}: {label} replayed {} blocks, {} coins, {} spends in {:.1} ms",
                r.blocks,
                r.coins,
                r.spends,
                start.elapsed().as_secs_f64() * 1e3
            );
        }
        apply(&mut model, &mut Vec::new(), &blocks[..n])?;
        let (names, indices) = full_queries(&blocks);
        assert_all(&mut model, &mut schemas, "after the replay", &names, &indices)?;
        let bench = benchmark_names(&model);
        assert_eq!(model.coin_infos_for_coin_names(&bench)?.len(), 100);
        assert!(model.coin_infos_for_coin_names(&bench)?.iter().filter(|c| c.spent_index.is_some()).count() >= 40);
        assert_all(&mut model, &mut schemas, "on the benchmark's names", &bench, &[])?;

        // Rewind 20 blocks (to an index just below a block's, which may be no block's index), then
        // 30 more.
        let shallow = blocks[n - 20].index - 1;
        rewind(&mut model, &mut schemas, shallow)?;
        assert_all(&mut model, &mut schemas, "after a rewind", &names, &indices)?;
        let deep = blocks[n - 50].index;
        rewind(&mut model, &mut schemas, deep)?;
        assert_all(&mut model, &mut schemas, "after a second rewind", &names, &indices)?;
        // Rewinding above the tip changes nothing.
        rewind(&mut model, &mut schemas, blocks[n - 1].index + 10)?;
        // The reorg: the rewound blocks again (their coins come back under new ids), then more.
        apply(&mut model, &mut schemas, &blocks[n - 49..])?;
        assert_all(&mut model, &mut schemas, "after re-applying and continuing", &names, &indices)?;

        // Reopened over the same storage, every schema still answers the same.
        drop(schemas);
        let mut schemas = stores.open(batch)?;
        assert_all(&mut model, &mut schemas, "after a reopen", &names, &indices)?;
    }
    Ok(())
}

/// A coin created and spent in the same block, and a coin whose parent is created in the same
/// block (listed before its parent in sorted order or not), which the chain generator never makes.
#[test]
fn coins_created_and_spent_in_one_block_and_parents_created_in_it() -> Result<()> {
    let coin = |parent: Hash, tag: u8, amount: u64| Coin { parent, puzzle_hash: [tag; 32], amount };
    let rewards = |index: u32| {
        [
            coin(reward_parent(0, index.into()), 1, 1_750_000_000_000),
            coin(reward_parent(1, index.into()), 2, 250_000_000_000),
        ]
    };
    let block = |index: u32, spends: Vec<Hash>, mut confirms: Vec<Coin>| {
        confirms.extend(rewards(index));
        BlockSpendInfo { index, timestamp: 1000 + u64::from(index), spends, confirms }.canonical()
    };
    let b1 = block(1, vec![], vec![]);
    let r0 = b1.confirms.iter().find(|c| c.parent == reward_parent(0, 1)).copied().unwrap();
    // Block 3 spends r0 and creates a (ephemeral: also spent in block 3), whose spend creates b
    // and c; c's spend creates d, all in block 3.
    let a = coin(r0.name(), 3, 100);
    let b = coin(a.name(), 4, 60);
    let c = coin(a.name(), 5, 40);
    let d = coin(c.name(), 6, 0);
    let b3 = block(3, vec![r0.name(), a.name(), c.name()], vec![a, b, c, d]);
    // Block 6 spends b and d, creating e.
    let e = coin(b.name(), 7, u64::MAX);
    let b6 = block(6, vec![b.name(), d.name()], vec![e]);
    let all = [b1.clone(), b3.clone(), b6.clone()];

    for batch in [0, BATCH_COINS] {
        let stores = Stores::new()?;
        let mut schemas = stores.open(batch)?;
        let mut model = Model::new();
        apply(&mut model, &mut schemas, &all)?;
        let (names, indices) = full_queries(&all);
        assert_all(&mut model, &mut schemas, "after three blocks", &names, &indices)?;
        let a_info = model.coin_infos_for_coin_names(&[a.name()])?;
        assert_eq!((a_info[0].confirmed_index, a_info[0].spent_index), (3, Some(3)));
        rewind(&mut model, &mut schemas, 5)?;
        assert_all(&mut model, &mut schemas, "after rewinding block 6", &names, &indices)?;
        rewind(&mut model, &mut schemas, 2)?;
        assert_all(&mut model, &mut schemas, "after rewinding block 3", &names, &indices)?;
        assert_eq!(model.coins().len(), 2);
        apply(&mut model, &mut schemas, &all[1..])?;
        assert_all(&mut model, &mut schemas, "after re-applying both", &names, &indices)?;
    }
    Ok(())
}

#[test]
fn the_model_refuses_blocks_that_break_the_protocol() -> Result<()> {
    let blocks: Vec<BlockSpendInfo> = chain(ChainSpec { coins: 200, seed: 9 }).collect();
    let mut model = Model::new();
    for block in &blocks[..blocks.len() - 1] {
        model.accept_block(block)?;
    }
    let next = blocks.last().unwrap().clone();
    let tip = model.tip().unwrap();
    let spent = *model.coins().iter().find(|(_, c)| c.spent_index.is_some()).unwrap().0;
    let reward = |index: u32| Coin { parent: reward_parent(0, index.into()), puzzle_hash: [9; 32], amount: 5 };
    let with = |f: &dyn Fn(&mut BlockSpendInfo)| {
        let mut b = next.clone();
        f(&mut b);
        b
    };
    let bad: Vec<(&str, BlockSpendInfo)> = vec![
        ("index 0", with(&|b| b.index = 0)),
        ("no coin created", with(&|b| b.confirms.clear())),
        ("index not above the tip", with(&|b| b.index = tip)),
        ("a spent coin spent again", with(&|b| b.spends.push(spent))),
        ("an unknown coin spent", with(&|b| b.spends.push([0x77; 32]))),
        ("a coin spent twice", with(&|b| b.spends.push(b.spends.first().copied().unwrap_or(spent)))),
        ("an existing coin created again", with(&|b| b.confirms.push(blocks[0].confirms[0]))),
        ("a coin created twice", with(&|b| b.confirms.push(b.confirms[0]))),
        ("an unknown parent", with(&|b| b.confirms.push(Coin { parent: [0x55; 32], ..reward(b.index) }))),
    ];
    let before = model.clone();
    for (what, block) in bad {
        assert!(matches!(model.accept_block(&block), Err(Error::InvalidArgument(_))), "{what}");
        assert_eq!(model, before, "{what}: the model changed");
    }
    model.accept_block(&next)?;
    // The schemas check the per-block rules too.
    let stores = Stores::new()?;
    for (label, mut schema) in stores.open(0)? {
        for block in [with(&|b| b.index = 0), with(&|b| b.confirms.clear())] {
            assert!(matches!(schema.accept_block(&block), Err(Error::InvalidArgument(_))), "{label}");
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The replay driver

/// A probe whose counter advances by one on every read, so a call's "instructions" are 1.
struct Ticks(Cell<u64>);

impl Probe for Ticks {
    fn instructions(&self) -> u64 {
        self.0.set(self.0.get() + 1);
        self.0.get()
    }
    fn phase<R>(&self, _name: &'static str, f: impl FnOnce() -> R) -> R {
        f()
    }
}

#[test]
fn replay_counts_chunks_and_the_flush() -> Result<()> {
    let blocks: Vec<BlockSpendInfo> = chain(ChainSpec { coins: 3000, seed: 4 }).collect();
    let mut model = Model::new();
    let r = replay(&mut model, blocks.iter().cloned(), 500, &Ticks(Cell::new(0)))?;
    assert_eq!(r.blocks, blocks.len() as u64);
    assert_eq!(r.coins, 3000);
    assert_eq!(r.spends, blocks.iter().map(|b| b.spends.len() as u64).sum::<u64>());
    assert_eq!(r.last_index, blocks.last().map(|b| b.index));
    assert_eq!(r.flush_instructions, 1);
    assert_eq!(r.instructions, r.blocks + 1);
    let (last, full) = r.chunks.split_last().unwrap();
    for c in full {
        assert!(c.coins >= 500 && c.coins < 500 + 18, "{c:?}");
        assert_eq!(c.instructions, c.blocks);
    }
    assert_eq!(last.instructions, last.blocks + 1);
    assert_eq!(r.chunks.iter().map(|c| c.blocks).sum::<u64>(), r.blocks);
    assert_eq!(r.chunks.iter().map(|c| c.coins).sum::<u64>(), r.coins);
    assert_eq!(r.chunks.iter().map(|c| c.spends).sum::<u64>(), r.spends);
    let mut total = 0;
    for c in &r.chunks {
        total += c.coins;
        assert_eq!(c.coins_total, total);
    }
    assert_eq!(model.coins().len(), 3000);
    // No block: one empty chunk holding the flush. A chunk size of 0 is refused.
    let r = replay(&mut Model::new(), std::iter::empty(), 500, &Ticks(Cell::new(0)))?;
    assert_eq!((r.chunks.len(), r.chunks[0].blocks, r.instructions), (1, 0, 1));
    assert!(replay(&mut Model::new(), std::iter::empty(), 0, &NoProbe).is_err());
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The sorted runs

fn numbered(i: u64) -> Hash {
    Sha256::digest(i.to_le_bytes()).into()
}

#[test]
fn the_run_store_merges_below_ten_runs_and_survives_a_reopen() -> Result<()> {
    let memory = VectorMemory::default();
    let mut store = RunStore::init(memory.clone())?;
    let mut next = 1u64;
    let mut merges = 0;
    for flush in 0..40u64 {
        // Runs of varied sizes, ids increasing as the coin table hands them out.
        let size = 1 + (flush * 37) % 90;
        let before = store.runs().len();
        store.add((next..next + size).map(|id| (numbered(id), id)).collect())?;
        next += size;
        assert!(store.runs().len() < MERGE_AT, "after flush {flush}: {} runs", store.runs().len());
        if store.runs().len() <= before {
            merges += 1;
        }
        // The header on the memory agrees with the store after every flush.
        let reopened = RunStore::init(memory.clone())?;
        assert_eq!(reopened.runs(), store.runs());
    }
    assert!(merges >= 25, "{merges} merges");
    assert_eq!(store.rows(), next - 1);
    let live = store.rows() * ROW_LEN;
    assert_eq!(store.used_bytes(), runs::DATA_START + live + store.wasted_bytes());
    assert!(store.wasted_bytes() > live, "rows are rewritten by merges");
    // A rewind, then a reopen: the dead range persists too.
    store.forget_above(next - 30)?;
    drop(store);
    let store = RunStore::init(memory.clone())?;
    assert_eq!(store.dead_ranges(), &[(next - 29, next - 1)]);
    for id in 1..next {
        let expected = (id <= next - 30).then_some(id);
        assert_eq!(store.get(&numbered(id)), expected, "id {id}");
    }
    assert_eq!(store.get(&numbered(0)), None);
    assert_eq!(store.get(&[0xff; 32]), None);
    assert_eq!(store.get(&[0; 32]), None);
    // A memory holding something else is refused, not misread.
    let foreign = VectorMemory::default();
    BtreeAll::init(foreign.clone(), VectorMemory::default());
    assert!(RunStore::init(foreign).is_err());
    Ok(())
}

#[test]
fn many_rewinds_compact_the_runs() -> Result<()> {
    let mut store = RunStore::init(VectorMemory::default())?;
    let mut next = 1u64;
    // Each round adds 10 ids and drops the last 3: a new dead range each time.
    for _ in 0..50 {
        store.add((next..next + 10).map(|id| (numbered(id), id)).collect())?;
        next += 10;
        store.forget_above(next - 4)?;
        assert!(store.dead_ranges().len() <= runs::MAX_DEAD_RANGES);
    }
    for id in 1..next {
        let live = (id - 1) % 10 < 7;
        assert_eq!(store.get(&numbered(id)), live.then_some(id), "id {id}");
    }
    Ok(())
}

#[test]
fn the_runs_schema_keeps_fewer_than_ten_runs_on_a_long_replay() -> Result<()> {
    let stores = Stores::new()?;
    let blocks: Vec<BlockSpendInfo> = chain(ChainSpec { coins: 3000, seed: 11 }).collect();
    let mut schema =
        runs::open(&stores.runs, stores.runs_runs.clone(), stores.runs_names.clone())?.with_batch_coins(50);
    let r = replay(&mut schema, blocks.iter().cloned(), 1000, &NoProbe)?;
    assert_eq!(schema.pending_coins(), 0);
    let store = schema.index().store();
    assert!(store.runs().len() < MERGE_AT);
    assert_eq!(store.rows(), r.coins);
    assert!(store.wasted_bytes() > 0);
    drop(schema);
    let reopened = RunStore::init(stores.runs_runs.clone())?;
    assert_eq!(reopened.rows(), r.coins);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Generated chains

fn ok<T>(r: Result<T>) -> std::result::Result<T, TestCaseError> {
    r.map_err(|e| TestCaseError::fail(format!("schema error: {e}")))
}

fn same(
    model: &mut Model,
    schemas: &mut Schemas<'_>,
    step: &str,
    names: &[Hash],
    indices: &[u32],
) -> std::result::Result<(), TestCaseError> {
    match ok(check_all(model, schemas, step, names, indices))? {
        Some(d) => Err(TestCaseError::fail(d)),
        None => Ok(()),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// A chain of 0–400 coins, a batch size from "every block" to the original's, a rewind of
    /// 0–12 blocks, the rewound blocks re-applied and the rest of the chain.
    #[test]
    fn every_schema_matches_the_model_on_small_chains(
        seed in any::<u64>(),
        coins in 0u64..400,
        batch in prop_oneof![Just(0u64), 1u64..60, Just(BATCH_COINS)],
        depth in 0usize..12,
        tail in 0usize..6,
    ) {
        let blocks: Vec<BlockSpendInfo> = chain(ChainSpec { coins, seed }).collect();
        let n = blocks.len().saturating_sub(tail);
        let stores = ok(Stores::new())?;
        let mut schemas = ok(stores.open(batch))?;
        let mut model = Model::new();
        ok(apply(&mut model, &mut schemas, &blocks[..n]))?;
        let (names, indices) = full_queries(&blocks);
        same(&mut model, &mut schemas, "after the replay", &names, &indices)?;
        let keep = n.saturating_sub(depth);
        let to = if keep == 0 { 0 } else { blocks[keep - 1].index };
        ok(rewind(&mut model, &mut schemas, to))?;
        same(&mut model, &mut schemas, "after the rewind", &names, &indices)?;
        ok(apply(&mut model, &mut schemas, &blocks[keep..]))?;
        same(&mut model, &mut schemas, "after re-applying", &names, &indices)?;
    }
}

/// The benchmark's run (replay, lookups, block reads, rewind), as the canister runs it, on every
/// schema: every answer as the model's, the chunks adding up to the replay.
#[test]
fn the_benchmark_run_passes_on_every_schema() {
    use stablebench::chia::bench;
    let spec = ChainSpec { coins: 25_000, seed: 7 };
    let check = |name: &str, run: stablebench::Result<bench::ChiaRun>| {
        let run = run.unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(run.replay.coins, run.replay.chunks.iter().map(|c| c.coins).sum::<u64>(), "{name}");
        assert!(run.replay.chunks.len() >= 2, "{name}: {} chunks", run.replay.chunks.len());
    };
    let conn = Connection::open_in_memory().unwrap();
    v2::create(&conn).unwrap();
    check("v2", bench::run(&mut v2::V2::new(&conn), spec, &NoProbe));
    let conn = Connection::open_in_memory().unwrap();
    v3::create(&conn).unwrap();
    check("v3", bench::run(&mut v3::open(&conn), spec, &NoProbe));
    let conn = Connection::open_in_memory().unwrap();
    kv::create(&conn).unwrap();
    check(
        "kv",
        bench::run(&mut kv::open(&conn, VectorMemory::default(), VectorMemory::default()).unwrap(), spec, &NoProbe),
    );
    let conn = Connection::open_in_memory().unwrap();
    runs::create(&conn).unwrap();
    check(
        "runs",
        bench::run(&mut runs::open(&conn, VectorMemory::default(), VectorMemory::default()).unwrap(), spec, &NoProbe),
    );
    check(
        "btree_all",
        bench::run(&mut BtreeAll::init(VectorMemory::default(), VectorMemory::default()), spec, &NoProbe),
    );
}
