//! The key-value workloads' data generators and benchmark drivers (Substrate's trie benchmark,
//! rippled's NodeStore timing test) over a `BTreeMap` store defined here, so they are checked
//! independently of the real backends.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use stablebench::kv::gen::{kusama_value_len, rng_for, NodeFactory, NodeObject, TrieDataset};
use stablebench::kv::nodestore::{self, Phase, SEED};
use stablebench::kv::trie::{self, ITERATIONS, QUERY_KEYS};
use stablebench::kv::{Key, KvStore, NoProbe, Probe};
use stablebench::{Error, Result};

/// A `BTreeMap` store that counts its operations (the probe's "instructions") and can return a
/// corrupted value for chosen keys.
#[derive(Default)]
struct MapKv {
    map: BTreeMap<Key, Vec<u8>>,
    ops: Rc<Cell<u64>>,
    corrupt: BTreeSet<Key>,
    cache_drops: u64,
}

impl MapKv {
    fn tick(&self) {
        self.ops.set(self.ops.get() + 1);
    }
}

impl KvStore for MapKv {
    fn get(&mut self, key: &Key) -> Result<Option<Vec<u8>>> {
        self.tick();
        let mut value = self.map.get(key).cloned();
        if let Some(v) = value.as_mut().filter(|_| self.corrupt.contains(key)) {
            v[0] ^= 0xff;
        }
        Ok(value)
    }
    fn put(&mut self, key: &Key, value: &[u8]) -> Result<()> {
        self.tick();
        self.map.insert(*key, value.to_vec());
        Ok(())
    }
    fn put_batch(&mut self, items: &[(Key, Vec<u8>)]) -> Result<()> {
        self.tick();
        for (key, value) in items {
            self.map.insert(*key, value.clone());
        }
        Ok(())
    }
    fn remove(&mut self, key: &Key) -> Result<bool> {
        self.tick();
        Ok(self.map.remove(key).is_some())
    }
    fn len(&mut self) -> Result<u64> {
        Ok(self.map.len() as u64)
    }
    fn drop_caches(&mut self) -> Result<()> {
        self.cache_drops += 1;
        Ok(())
    }
}

/// A probe whose "instruction counter" is the store's operation count, and which records the
/// phases it runs.
struct CountingProbe {
    ops: Rc<Cell<u64>>,
    phases: RefCell<Vec<&'static str>>,
}

impl CountingProbe {
    fn of(store: &MapKv) -> CountingProbe {
        CountingProbe { ops: store.ops.clone(), phases: RefCell::new(Vec::new()) }
    }
}

impl Probe for CountingProbe {
    fn instructions(&self) -> u64 {
        self.ops.get()
    }
    fn phase<R>(&self, name: &'static str, f: impl FnOnce() -> R) -> R {
        self.phases.borrow_mut().push(name);
        f()
    }
}

fn ensure(condition: bool, message: impl FnOnce() -> String) -> Result<()> {
    if condition {
        Ok(())
    } else {
        Err(Error::WrongResult(message()))
    }
}

// ---------------------------------------------------------------------------------------------
// Generators

#[test]
fn same_seed_gives_same_data_and_items_do_not_depend_on_other_indexes() -> Result<()> {
    let a = TrieDataset::new(1000, 7)?;
    let b = TrieDataset::new(1000, 7)?;
    let other = TrieDataset::new(1000, 8)?;
    // Entry 500 alone equals entry 500 computed after every other one.
    let alone = a.entry(500);
    let all: Vec<_> = (0..1000).map(|i| b.entry(i)).collect();
    assert_eq!(alone, all[500]);
    assert_ne!(alone, other.entry(500));
    assert_eq!(a.warmup_prefix(), b.warmup_prefix());
    assert_ne!(a.warmup_prefix(), other.warmup_prefix());
    assert_eq!(a.write_entry(3), b.write_entry(3));
    assert_ne!(a.write_entry(3), a.write_entry(4));
    // A load split anywhere inserts exactly what one full load does.
    let whole: Vec<_> = a.entries(0..1000).collect();
    let split: Vec<_> = a.entries(0..333).chain(a.entries(333..1000)).collect();
    assert_eq!(whole, split);

    let factory = NodeFactory::new(50, 1000, 0, 999);
    let seeds: Vec<u64> = factory.key_seeds().collect();
    assert_eq!(seeds, NodeFactory::new(50, 1000, 0, 999).key_seeds().collect::<Vec<_>>());
    for i in [0, 1, 2, 31, 32, 33, 999] {
        assert_eq!(factory.key_seed(i), seeds[i as usize], "draw {i}");
    }
    assert_eq!(factory.key_seeds_in(400..410).collect::<Vec<_>>(), seeds[400..410]);
    assert_ne!(seeds, NodeFactory::new(51, 1000, 0, 999).key_seeds().collect::<Vec<_>>());
    // Another factory drawing key seed k produces the identical object.
    assert_eq!(NodeObject::from_key_seed(seeds[10]), factory.iter().nth(10).expect("10 < 1000"));
    Ok(())
}

#[test]
fn kusama_value_lengths_match_published_quantiles_and_mean() -> Result<()> {
    // 1,000,000 samples: p90 = 547 sits 0.09 points above the 90 % line (Kusama: 90.10 % of
    // values are ≤ 547 bytes), three standard errors at this sample size.
    const SAMPLES: usize = 1_000_000;
    let mut rng = rng_for(2020, 0);
    let mut lens: Vec<usize> = (0..SAMPLES).map(|_| kusama_value_len(&mut rng)).collect();
    lens.sort_unstable();
    let q = |p: f64| lens[((SAMPLES as f64 * p).ceil() as usize).saturating_sub(1)];
    let mean = lens.iter().sum::<usize>() as f64 / SAMPLES as f64;
    println!(
        "kusama: min {} p25 {} p50 {} p75 {} p90 {} p99 {} max {} mean {mean:.1}",
        lens[0],
        q(0.25),
        q(0.5),
        q(0.75),
        q(0.9),
        q(0.99),
        lens[SAMPLES - 1]
    );
    assert!(lens[0] >= 32);
    assert_eq!((q(0.25), q(0.5), q(0.75), q(0.9)), (69, 140, 425, 547));
    ensure((mean - 391.0).abs() < 391.0 * 0.03, || format!("mean {mean}"))?;
    // Every one of the sixteen exact sizes shows up with about its share.
    let share = |size: usize| lens.iter().filter(|&&l| l == size).count() as f64 / SAMPLES as f64;
    ensure((share(69) - 0.121).abs() < 0.005, || format!("share of 69: {}", share(69)))?;
    ensure((share(2630) - 0.0362).abs() < 0.003, || format!("share of 2630: {}", share(2630)))?;
    Ok(())
}

#[test]
fn trie_dataset_has_size_plus_100_entries_clustered_warmups_and_present_query_keys() -> Result<()> {
    let data = TrieDataset::new(10_000, 1)?;
    let all: BTreeMap<Key, Vec<u8>> = data.entries(0..data.size).collect();
    assert_eq!(data.len(), 10_100);
    assert_eq!(all.len() as u64, data.len(), "every key distinct");
    assert_eq!(data.entries(0..data.size).count() as u64, data.len());

    let prefix = data.warmup_prefix();
    let warmups = data.warmup_keys();
    assert_eq!(warmups.len(), 100);
    for (i, (key, value)) in warmups.iter().enumerate() {
        let idx = i as u64 * data.every();
        let (entry_key, entry_value) = data.entry(idx);
        assert_eq!(key[..16], prefix);
        assert_eq!(key[16..], entry_key[16..]);
        assert_eq!(value, &entry_value);
        assert_eq!(data.warmup(idx).as_ref(), Some(&(*key, value.clone())));
        assert_eq!(all.get(key), Some(value));
    }
    assert_eq!(data.warmup(1), None);
    // Apart from the warm-ups, the prefix is no key's prefix.
    assert_eq!(all.keys().filter(|k| k[..16] == prefix).count(), 100);

    let queries = data.query_keys();
    assert_eq!(queries.len(), QUERY_KEYS);
    for (i, (key, value)) in queries.iter().enumerate() {
        assert_eq!(data.entry(i as u64 * 100 + 1).0, *key);
        assert_eq!(all.get(key), Some(value), "query key {i}");
    }
    for iteration in 0..1000 {
        let (key, value) = data.write_entry(iteration);
        assert!(!all.contains_key(&key), "write key {iteration} is in the dataset");
        assert_eq!(value.len(), TrieDataset::WRITE_SIZE);
    }
    // Values have Kusama lengths.
    assert!(all.values().all(|v| v.len() >= 32));
    Ok(())
}

#[test]
fn trie_dataset_rejects_sizes_without_100_warmups() {
    for size in [0, 100, 150, 1_050] {
        assert!(matches!(TrieDataset::new(size, 0), Err(Error::InvalidArgument(_))), "size {size}");
    }
    assert!(TrieDataset::new(200, 0).is_ok());
}

// ---------------------------------------------------------------------------------------------
// Substrate's trie benchmark

fn loaded(size: u64) -> Result<(TrieDataset, MapKv)> {
    let data = TrieDataset::new(size, 42)?;
    let mut store = MapKv::default();
    // Two resumed loads with a batch that does not divide the entry count.
    let mut written = trie::load(&mut store, &data, 0..size / 3, 97)?;
    written += trie::load(&mut store, &data, size / 3..size, 97)?;
    assert_eq!(written, data.len());
    assert_eq!(store.len()?, data.len());
    Ok((data, store))
}

#[test]
fn trie_read_and_write_leave_the_store_unchanged_and_time_only_the_measured_operations() -> Result<()> {
    let (data, mut store) = loaded(10_000)?;
    let before = store.map.clone();
    let probe = CountingProbe::of(&store);
    for cold in [false, true] {
        let drops = store.cache_drops;
        let reads = trie::read(&mut store, &data, cold, &probe)?;
        assert_eq!(reads.0.len(), ITERATIONS);
        // One sample is exactly the 100 query reads: no warm-up or check in the timed part.
        assert!(reads.0.iter().all(|&s| s == QUERY_KEYS as u64), "{reads:?}");
        assert_eq!(reads.w_avg(), 100.0);
        let writes = trie::write(&mut store, &data, cold, &probe)?;
        assert_eq!(writes.0, vec![1; ITERATIONS], "one put per sample");
        assert_eq!(writes.trimmed_sum(), 30);
        let expected_drops = if cold { 2 * ITERATIONS as u64 } else { 0 };
        assert_eq!(store.cache_drops - drops, expected_drops);
        assert!(store.map == before, "the store changed (cold = {cold})");
    }
    // The native probe runs the same code.
    assert_eq!(trie::read(&mut store, &data, false, &NoProbe)?.total(), 0);
    Ok(())
}

#[test]
fn trie_read_fails_with_wrong_result_when_a_value_is_wrong() -> Result<()> {
    let (data, mut store) = loaded(1_000)?;
    // A query key's value: caught after the timed part.
    store.corrupt.insert(data.query_keys()[37].0);
    let err = trie::read(&mut store, &data, false, &NoProbe).expect_err("corrupted query value");
    assert!(matches!(&err, Error::WrongResult(m) if m.contains("query key 37")), "{err}");
    // A warm-up key's value: caught by read and write alike.
    store.corrupt.clear();
    store.corrupt.insert(data.warmup_keys()[5].0);
    let err = trie::read(&mut store, &data, true, &NoProbe).expect_err("corrupted warm-up value");
    assert!(matches!(&err, Error::WrongResult(m) if m.contains("warm-up key 5")), "{err}");
    let err = trie::write(&mut store, &data, true, &NoProbe).expect_err("corrupted warm-up value");
    assert!(matches!(err, Error::WrongResult(_)), "{err}");
    // A written value that reads back wrong.
    store.corrupt.clear();
    store.corrupt.insert(data.write_entry(0).0);
    let err = trie::write(&mut store, &data, false, &NoProbe).expect_err("corrupted written value");
    assert!(matches!(&err, Error::WrongResult(m) if m.contains("written key")), "{err}");
    // A missing query key.
    store.corrupt.clear();
    store.map.remove(&data.query_keys()[0].0);
    let err = trie::read(&mut store, &data, false, &NoProbe).expect_err("missing query key");
    assert!(matches!(&err, Error::WrongResult(m) if m.contains("missing")), "{err}");
    Ok(())
}

#[test]
fn trie_load_rejects_bad_arguments() -> Result<()> {
    let data = TrieDataset::new(1_000, 0)?;
    let mut store = MapKv::default();
    assert!(matches!(trie::load(&mut store, &data, 0..10, 0), Err(Error::InvalidArgument(_))));
    assert!(matches!(trie::load(&mut store, &data, 0..1_001, 10), Err(Error::InvalidArgument(_))));
    let bad = TrieDataset { size: 1_050, seed: 0 };
    assert!(matches!(trie::load(&mut store, &bad, 0..10, 10), Err(Error::InvalidArgument(_))));
    assert!(matches!(trie::read(&mut store, &bad, false, &NoProbe), Err(Error::InvalidArgument(_))));
    assert_eq!(store.len()?, 0);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// rippled's NodeStore objects and timing test

#[test]
fn repeatable_object_10000_draws_over_keys_0_to_99_give_100_distinct_objects() -> Result<()> {
    // rippled's repeatableObject: 10,000 objects over key range [0, 99] hold exactly 100 distinct
    // objects, and every duplicate is identical.
    let factory = NodeFactory::new(SEED, 10_000, 0, 99);
    let mut by_seed: BTreeMap<u64, NodeObject> = BTreeMap::new();
    let mut by_hash: BTreeMap<Key, Vec<u8>> = BTreeMap::new();
    for (key_seed, obj) in factory.key_seeds().zip(factory.iter()) {
        assert!(key_seed <= 99);
        let encoded = obj.encoded();
        if let Some(previous) = by_hash.insert(obj.hash, encoded.clone()) {
            assert_eq!(previous, encoded, "duplicate of key seed {key_seed} differs");
        }
        if let Some(previous) = by_seed.insert(key_seed, obj.clone()) {
            assert_eq!(previous, obj);
        }
    }
    assert_eq!(by_seed.len(), 100);
    assert_eq!(by_hash.len(), 100);
    // Iterating again ("reset") gives the same sequence.
    assert!(factory.iter().zip(factory.iter()).all(|(a, b)| a == b));
    Ok(())
}

#[test]
fn node_object_payload_and_encoded_lengths_stay_in_range_with_mean_1536() -> Result<()> {
    let objects: Vec<NodeObject> = NodeFactory::new(1, 5_000, 0, u64::MAX).iter().collect();
    let mut payload_total = 0;
    let mut kinds = BTreeSet::new();
    for obj in &objects {
        let len = obj.payload.len();
        assert!((1024..=2048).contains(&len) && len.is_multiple_of(8), "payload {len}");
        assert_eq!(obj.encoded().len(), len + 9);
        assert!((1_033..=2_057).contains(&obj.encoded().len()));
        assert!((1..=10_000_000).contains(&obj.ledger_index));
        kinds.insert(obj.kind);
        payload_total += len;
    }
    let mean = payload_total as f64 / objects.len() as f64;
    println!("node objects: payload mean {mean:.1} bytes, encoded mean {:.1}", mean + 9.0);
    ensure((mean - 1536.0).abs() < 15.0, || format!("payload mean {mean}"))?;
    assert_eq!(kinds, BTreeSet::from([0, 1, 2, 3]));
    Ok(())
}

#[test]
fn nodestore_run_over_a_btreemap_equals_expected_and_runs_the_phases_in_order() -> Result<()> {
    for (n, seed) in [(2_000, SEED), (300, 7)] {
        let mut store = MapKv::default();
        let probe = CountingProbe::of(&store);
        let run = nodestore::run(&mut store, n, seed, &probe)?;
        assert_eq!(run, nodestore::expected(n, seed), "n = {n}");
        // The scopes, in run order: the public names results files and reports carry.
        let names = Phase::ALL.map(Phase::name);
        assert_eq!(
            names,
            [
                "inserts",
                "batch_insert",
                "fetch_50_50",
                "fetch_50_50_intended",
                "ordered_fetch",
                "fetch_random",
                "fetch_missing"
            ]
        );
        assert_eq!(*probe.phases.borrow(), names);
        assert_eq!(run.hits.ordered_fetch, n);
        assert_eq!(run.hits.fetch_missing, 0);
        // Operations: n puts, one put_batch per full batch, six fetch phases of n gets.
        assert_eq!(store.ops.get(), n + n / 128 + 5 * n);
    }
    Ok(())
}

#[test]
fn nodestore_expected_hits_follow_the_draw_probabilities() -> Result<()> {
    for n in [10_000u64, 100_000] {
        let run = nodestore::expected(n, SEED);
        let inserted: BTreeSet<u64> = Phase::Inserts.factory(n, SEED).key_seeds().collect();
        let batch_full = n / 128 * 128;
        let batched: BTreeSet<u64> = Phase::BatchInsert.factory(n, SEED).key_seeds_in(0..batch_full).collect();
        println!(
            "nodestore n = {n}, seed {SEED}: inserts distinct {}, batch distinct {} (of {batch_full} stored draws), {run:?}",
            inserted.len(),
            batched.len()
        );
        let share = |count: u64| count as f64 / n as f64;
        let near = |value: f64, target: f64, what: &str| {
            ensure((value - target).abs() < 0.015, || format!("n = {n}: {what} = {value}, expected ~{target}"))
        };
        // 1 - e^-1 of the n + 1 key seeds are drawn at least once.
        near(share(inserted.len() as u64), 0.632, "inserted distinct share")?;
        assert_eq!(run.stored, (inserted.len() + batched.len()) as u64);
        // fetch_random draws the batch range afresh: ~63 % of the draws hit, minus the tail.
        near(share(run.hits.fetch_random), 0.632 * batch_full as f64 / n as f64, "fetch_random hit share")?;
        // Half of [0, 2n] was inserted, 63 % of it drawn.
        near(share(run.hits.fetch_50_50_intended), 0.316, "fetch_50_50_intended hit share")?;
        ensure(run.hits.fetch_50_50 <= 5, || format!("fetch_50_50 hits {}", run.hits.fetch_50_50))?;
        assert_eq!(run.hits.ordered_fetch, n);
        assert_eq!(run.hits.fetch_missing, 0);
    }
    Ok(())
}

#[test]
fn nodestore_fails_on_a_wrong_value_a_nonempty_store_or_no_objects() -> Result<()> {
    // Every value read back corrupted: the first hit is a WrongResult.
    struct Corrupting(MapKv);
    impl KvStore for Corrupting {
        fn get(&mut self, key: &Key) -> Result<Option<Vec<u8>>> {
            Ok(self.0.get(key)?.map(|mut v| {
                let last = v.len() - 1;
                v[last] ^= 1;
                v
            }))
        }
        fn put(&mut self, key: &Key, value: &[u8]) -> Result<()> {
            self.0.put(key, value)
        }
        fn put_batch(&mut self, items: &[(Key, Vec<u8>)]) -> Result<()> {
            self.0.put_batch(items)
        }
        fn remove(&mut self, key: &Key) -> Result<bool> {
            self.0.remove(key)
        }
        fn len(&mut self) -> Result<u64> {
            self.0.len()
        }
        fn drop_caches(&mut self) -> Result<()> {
            self.0.drop_caches()
        }
    }
    let err = nodestore::run(&mut Corrupting(MapKv::default()), 500, SEED, &NoProbe).expect_err("corrupted values");
    assert!(matches!(err, Error::WrongResult(_)), "{err}");

    let mut store = MapKv::default();
    store.put(&[0; 32], b"x")?;
    assert!(matches!(nodestore::run(&mut store, 10, SEED, &NoProbe), Err(Error::InvalidArgument(_))));
    assert!(matches!(nodestore::run(&mut MapKv::default(), 0, SEED, &NoProbe), Err(Error::InvalidArgument(_))));

    // A store that lost an inserted object fails ordered_fetch.
    let mut store = MapKv::default();
    for phase in [Phase::Inserts, Phase::BatchInsert] {
        nodestore::run_phase(&mut store, phase, 500, SEED, &NoProbe)?;
    }
    let first = NodeObject::from_key_seed(Phase::Inserts.factory(500, SEED).key_seed(0));
    store.remove(&first.hash)?;
    let err = nodestore::run_phase(&mut store, Phase::OrderedFetch, 500, SEED, &NoProbe).expect_err("lost object");
    assert!(matches!(&err, Error::WrongResult(m) if m.contains("ordered_fetch")), "{err}");
    Ok(())
}
