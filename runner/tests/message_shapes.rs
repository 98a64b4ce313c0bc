//! What a message of n key-value operations costs, per backend and key pattern: the production
//! wasm's `kv_get_many` (a query, and the same reads priced as in an update) and `kv_put_many`
//! (one transaction, or one commit per entry) at the operation counts and patterns declared in
//! `stablebench_grid::shapes`, under both cost models, with each message's pages. The
//! ic-sqlite-vfs canister's production wasm has the same two endpoints over its rowid table
//! (without a backend argument), measured the same way (`sqlite_vfs_rowid`).
//!
//! Each backend is installed and loaded once (`kv_load`, the trie data set of seed 50, under the
//! ic model as on mainnet); each model then measures every shape from a fork of that state, in
//! the same order (reads first, then writes), so both models price the same executions. Every
//! message's reply is checked: a read returns the values stored, a write's keys read back after it.
//!
//! The figures are committed in `message_shapes_results.yml` and `docs/message-shapes.md` (with
//! the README's `message-shapes` block); the test fails when a rerun differs at all (the runner is
//! deterministic). Regenerate with
//! `STABLEBENCH_REGENERATE_SHAPES=1 cargo test --release -p stablebench-runner --test message_shapes`.
//! With `STABLEBENCH_SHAPES_10X=1` it measures ten times the keys too (2,000,000: about 12
//! minutes, not in CI); without it the committed 10x figures are kept, and refused unless the
//! SHA-256 of the wasm recorded beside them is that of the file this run would measure.

mod common;
use common::code;

use std::collections::BTreeMap;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Zipf};
use serde_bytes::ByteBuf;
use stablebench::kv::gen::TrieDataset;
use stablebench::kv::Key;
use stablebench_canister::{Commit, Cost, Error, KvBackend};
use stablebench_grid::api::vfs::Error as VfsError;
use stablebench_grid::cells::Backend;
use stablebench_grid::ic::page_fees::WRITE;
use stablebench_grid::shapes::{
    Pattern, Shape, BACKENDS, MESSAGES_PER_POINT, OPS_PER_MESSAGE, SHAPES_SEED, SIZES, ZIPF_EXPONENT,
};
use stablebench_grid::KV_SEED;
use stablebench_report::shapes::{Counts, Models, Point, Results, Shapes, Size};
use stablebench_runner::canister::{default_controller, Canister, Options, Outcome};
use stablebench_runner::replica::CostModel;

const RESULTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../message_shapes_results.yml");
const PAGE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/message-shapes.md");
const README: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md");
const WASM_FILES: [&str; 2] = ["stablebench.wasm", "stablebench_vfs.wasm"];
const REGENERATE: &str = "STABLEBENCH_REGENERATE_SHAPES=1 STABLEBENCH_SHAPES_10X=1";
/// This test's own sources (besides [`common::PRODUCERS`]): its file and its results type.
const SOURCES: [&str; 2] = ["runner/tests/message_shapes.rs", "report/src/shapes.rs"];

/// A seeded stream per (pattern, shape, operation count, message). Both read shapes read the same
/// keys: the same executions, priced as a query and as in an update.
fn rng(pattern: Pattern, shape: Shape, n: u64, message: u64) -> ChaCha8Rng {
    let shape = if shape == Shape::ReadInUpdate { Shape::ReadQuery } else { shape };
    let tag = (pattern as u64) << 56 | (shape as u64) << 48 | n << 16 | message;
    ChaCha8Rng::seed_from_u64(SHAPES_SEED ^ tag.wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

/// The data set and its entries' keys in key order, with their indices.
struct Data {
    set: TrieDataset,
    sorted: Vec<(Key, u64)>,
}

impl Data {
    fn new(keys: u64) -> Data {
        let set = TrieDataset::new(keys, KV_SEED).unwrap();
        let mut sorted: Vec<(Key, u64)> = (0..keys).map(|i| (set.entry(i).0, i)).collect();
        sorted.sort_unstable();
        Data { set, sorted }
    }

    /// Entry indices for a message of `n` operations under `pattern` (reads, and zipf's overwrites).
    fn indices(&self, pattern: Pattern, shape: Shape, n: u64, message: u64) -> Vec<u64> {
        let size = self.set.size;
        let mut r = rng(pattern, shape, n, message);
        match pattern {
            Pattern::Uniform => (0..n).map(|_| r.random_range(0..size)).collect(),
            Pattern::Zipf => {
                let z = Zipf::new(size as f64, ZIPF_EXPONENT).unwrap();
                (0..n).map(|_| z.sample(&mut r) as u64 - 1).collect()
            }
            Pattern::Sequential => {
                let start = r.random_range(0..size - n) as usize;
                self.sorted[start..start + n as usize].iter().map(|&(_, i)| i).collect()
            }
        }
    }

    /// The entries a write message of `n` under `pattern` puts.
    fn writes(&self, pattern: Pattern, shape: Shape, n: u64, message: u64) -> Vec<(Key, Vec<u8>)> {
        let mut r = rng(pattern, shape, n, message);
        let value = |r: &mut ChaCha8Rng| (0..TrieDataset::WRITE_SIZE).map(|_| r.random::<u8>()).collect::<Vec<u8>>();
        match pattern {
            Pattern::Uniform => (0..n).map(|_| (r.random::<Key>(), value(&mut r))).collect(),
            Pattern::Zipf => {
                let idx = self.indices(pattern, shape, n, message);
                idx.into_iter().map(|i| (self.set.entry(i).0, value(&mut r))).collect()
            }
            Pattern::Sequential => {
                let at = r.random_range(0..self.sorted.len() - 1);
                let (base, next) = (self.sorted[at].0, self.sorted[at + 1].0);
                let low = u64::from_be_bytes(base[24..].try_into().unwrap());
                (1..=n)
                    .map(|j| {
                        let mut k = base;
                        let (v, carry) = low.overflowing_add(j);
                        assert!(!carry, "a key's low bytes do not wrap (the draw is moved otherwise)");
                        k[24..].copy_from_slice(&v.to_be_bytes());
                        assert!(k < next, "a sequential write lands before the next entry");
                        (k, value(&mut r))
                    })
                    .collect()
            }
        }
    }
}

/// The canister a backend's messages go to: one of the production canister's backends (named in
/// every call), or the ic-sqlite-vfs canister's one table (`kv_get_many(keys)`,
/// `kv_put_many(entries, commit)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Target {
    Canister(KvBackend),
    Vfs,
}

impl Target {
    fn of(backend: Backend) -> Target {
        match backend {
            Backend::SqliteVfsRowid => Target::Vfs,
            b => Target::Canister(KvBackend::try_from(b).unwrap()),
        }
    }

    fn install_and_load(self, data: &Data) -> Canister {
        let opts = Options { cost_model: CostModel::Ic, ..Options::default() };
        let code = if self == Target::Vfs { common::vfs_code() } else { code() };
        let (mut c, _) = Canister::install(code, &common::unit(), opts).expect("installs");
        match self {
            Target::Canister(kb) => common::kv_load_all(&mut c, kb, data.set.size),
            Target::Vfs => common::vfs_load_all(&mut c, data.set.size),
        }
        c
    }

    fn get_arg(self, keys: &[Key]) -> Vec<u8> {
        let keys: Vec<ByteBuf> = keys.iter().map(|k| ByteBuf::from(k.to_vec())).collect();
        match self {
            Target::Canister(kb) => candid::encode_args((kb, keys)).unwrap(),
            Target::Vfs => candid::encode_one(keys).unwrap(),
        }
    }

    fn put_arg(self, entries: &[(Key, Vec<u8>)], commit: Commit) -> Vec<u8> {
        self.put_arg_of(
            entries.iter().map(|(k, v)| (ByteBuf::from(k.to_vec()), ByteBuf::from(v.clone()))).collect(),
            commit,
        )
    }

    /// [`Target::put_arg`] of entries as sent (a key of any length).
    fn put_arg_of(self, entries: Vec<(ByteBuf, ByteBuf)>, commit: Commit) -> Vec<u8> {
        match self {
            Target::Canister(kb) => candid::encode_args((kb, entries, commit)).unwrap(),
            Target::Vfs => candid::encode_args((entries, commit)).unwrap(),
        }
    }

    /// A reply's `Ok` value; its `Err` as text.
    fn ok<T: candid::CandidType + serde::de::DeserializeOwned>(self, out: &Outcome, what: &str) -> Result<T, String> {
        let bytes = out.result.as_ref().unwrap_or_else(|e| panic!("{what} replies: {e:?}"));
        match self {
            Target::Canister(_) => candid::decode_one::<Result<T, Error>>(bytes).unwrap().map_err(|e| format!("{e:?}")),
            Target::Vfs => candid::decode_one::<Result<T, VfsError>>(bytes).unwrap().map_err(|e| format!("{e:?}")),
        }
    }
}

fn get_many(c: &mut Canister, t: Target, keys: &[Key], in_update: bool) -> (Outcome, Vec<Option<Vec<u8>>>) {
    let arg = t.get_arg(keys);
    let out = if in_update {
        c.query_priced_as_update("kv_get_many", &arg, default_controller())
    } else {
        c.query("kv_get_many", &arg, default_controller())
    };
    let values: Vec<Option<ByteBuf>> = t.ok(&out, "kv_get_many").expect("kv_get_many");
    (out, values.into_iter().map(|v| v.map(ByteBuf::into_vec)).collect())
}

/// Every shape of one backend under `model`, from `loaded`'s state.
fn measure(loaded: &mut Canister, backend: Backend, data: &Data, model: CostModel) -> Shapes {
    let t = Target::of(backend);
    let mut c = loaded.fork().expect("forks");
    c.set_cost_model(model).unwrap();
    let mut shapes = Shapes::new();
    for shape in Shape::ALL.into_iter().filter(|s| s.applies_to(backend)) {
        for pattern in Pattern::ALL {
            let mut counts = Counts::new();
            for n in OPS_PER_MESSAGE {
                // Message 0 is not measured: each point's messages follow one of their own shape
                // (what the message before left in the heap and caches moves a small message by
                // up to a few hundred thousand instructions).
                let outs: Vec<_> = (0..=MESSAGES_PER_POINT)
                    .map(|m| {
                        let out = if shape.writes() {
                            let entries = data.writes(pattern, shape, n, m);
                            let commit = if shape == Shape::WriteEachCommitted { Commit::Each } else { Commit::One };
                            let out = c.update("kv_put_many", &t.put_arg(&entries, commit), default_controller());
                            let cost = (out.instructions, out.pages);
                            t.ok::<Cost>(&out, "kv_put_many").expect("kv_put_many");
                            // The last write of each key is what reads back (zipf repeats keys).
                            let last: BTreeMap<Key, &Vec<u8>> = entries.iter().map(|(k, v)| (*k, v)).collect();
                            let keys: Vec<Key> = last.keys().copied().collect();
                            let (_, got) = get_many(&mut c, t, &keys, false);
                            let want: Vec<Option<Vec<u8>>> = last.values().map(|v| Some((*v).clone())).collect();
                            assert_eq!(
                                got,
                                want,
                                "{}: {} {} n={n}: the writes read back",
                                backend.name(),
                                shape.name(),
                                pattern.name()
                            );
                            cost
                        } else {
                            let idx = data.indices(pattern, shape, n, m);
                            let keys: Vec<Key> = idx.iter().map(|&i| data.set.entry(i).0).collect();
                            let in_update = shape == Shape::ReadInUpdate;
                            let (out, got) = get_many(&mut c, t, &keys, in_update);
                            if in_update {
                                // The query's own execution (the same keys and state), plus the
                                // write fee of every page it wrote, exactly.
                                let (q, _) = get_many(&mut c, t, &keys, false);
                                let fee = if model == CostModel::Ic { q.pages.written() * WRITE } else { 0 };
                                assert_eq!(
                                    (out.instructions, out.pages),
                                    (q.instructions + fee, q.pages),
                                    "{}: n={n} reads in an update: the query and its written pages' fee",
                                    backend.name()
                                );
                            }
                            let want: Vec<Option<Vec<u8>>> = idx.iter().map(|&i| Some(data.set.entry(i).1)).collect();
                            assert_eq!(
                                got,
                                want,
                                "{}: {} {} n={n}: the stored values",
                                backend.name(),
                                shape.name(),
                                pattern.name()
                            );
                            (out.instructions, out.pages)
                        };
                        out
                    })
                    .collect();
                counts.insert(n, Point::median_of(outs[1..].to_vec()));
            }
            shapes.entry(shape.name().to_string()).or_default().insert(pattern.name().to_string(), counts);
        }
    }
    shapes
}

fn measure_size(keys: u64) -> Size {
    let data = Data::new(keys);
    let backends = BACKENDS
        .iter()
        .map(|&b| {
            let mut loaded = Target::of(b).install_and_load(&data);
            let models = Models {
                canbench: measure(&mut loaded, b, &data, CostModel::Canbench),
                mainnet: measure(&mut loaded, b, &data, CostModel::Ic),
            };
            (b.name().to_string(), models)
        })
        .collect();
    Size { keys, backends, wasm: common::wasm_hashes(&WASM_FILES), sources: common::sources(&SOURCES) }
}

/// What holds whatever the committed figures say: the memory tracker only adds charges, and a
/// message of more operations costs more under canbench's model (it runs them all).
fn check_invariants(size: &Size) {
    for (b, m) in &size.backends {
        for (shape, patterns) in &m.canbench {
            for (pattern, counts) in patterns {
                let main = &m.mainnet[shape][pattern];
                for (n, c) in counts {
                    assert!(main[n].median >= c.median, "{b} {shape} {pattern} n={n}: mainnet under canbench");
                }
                // (From one operation on: the base, n = 0, is within the spread of n = 1 for some.)
                let medians: Vec<u64> = counts.range(1..).map(|(_, p)| p.median).collect();
                assert!(
                    medians.windows(2).all(|w| w[0] < w[1]) && counts[&0].median < medians[medians.len() - 1],
                    "{b} {shape} {pattern}: under canbench a message of more operations costs more: {medians:?}"
                );
            }
        }
    }
}

#[test]
fn sequential_and_zipf_draws_are_what_they_say() {
    let data = Data::new(10_000);
    let seq = data.indices(Pattern::Sequential, Shape::ReadQuery, 100, 0);
    let keys: Vec<Key> = seq.iter().map(|&i| data.set.entry(i).0).collect();
    assert!(keys.windows(2).all(|w| w[0] < w[1]), "neighbouring in key order");
    let pos = data.sorted.iter().position(|&(k, _)| k == keys[0]).unwrap();
    assert_eq!(data.sorted[pos + 99].0, keys[99], "no entry skipped");
    let zipf = data.indices(Pattern::Zipf, Shape::ReadQuery, 1_000, 0);
    let hottest = zipf.iter().filter(|&&i| i == 0).count();
    // Rank 1's probability at 10,000 entries and exponent 1 is 1 / H(10,000), about 0.102.
    assert!((60..150).contains(&hottest), "rank 1 drawn {hottest} times of 1,000");
    let uniform = data.indices(Pattern::Uniform, Shape::ReadQuery, 1_000, 0);
    assert!(uniform.iter().filter(|&&i| i == 0).count() < 5, "uniform draws are not skewed");
    assert_eq!(zipf, data.indices(Pattern::Zipf, Shape::ReadQuery, 1_000, 0), "deterministic");
    assert_ne!(zipf, data.indices(Pattern::Zipf, Shape::ReadQuery, 1_000, 1), "each message its own keys");
    let writes = data.writes(Pattern::Sequential, Shape::WriteOneTransaction, 10, 0);
    assert!(writes.windows(2).all(|w| w[0].0 < w[1].0));
    assert!(writes.iter().all(|(k, _)| data.sorted.binary_search_by(|(s, _)| s.cmp(k)).is_err()), "fresh keys");
}

#[test]
fn kv_get_many_and_kv_put_many_refuse_bad_input_and_change_nothing() {
    for t in [Target::Canister(KvBackend::Sqlite), Target::Vfs] {
        let code = if t == Target::Vfs { common::vfs_code() } else { code() };
        let (mut c, _) = Canister::install(code, &common::unit(), Options::default()).expect("installs");
        let put = |c: &mut Canister, entries: &[(Key, Vec<u8>)], who| {
            t.ok::<Cost>(&c.update("kv_put_many", &t.put_arg(entries, Commit::Each), who), "kv_put_many")
        };
        let refused = |r: Result<Cost, String>, variant: &str| {
            let e = r.expect_err("refused");
            assert!(e.starts_with(variant), "{t:?}: {e} is not {variant}");
        };
        let good = ([1u8; 32], vec![7u8; 4]);
        // A short key among good entries: checked before anything is written.
        let entry = |k: Vec<u8>| (ByteBuf::from(k), ByteBuf::from(vec![7u8; 4]));
        let short = t.put_arg_of(vec![entry(vec![1u8; 32]), entry(vec![2u8; 31])], Commit::Each);
        let short = c.update("kv_put_many", &short, default_controller());
        refused(t.ok::<Cost>(&short, "kv_put_many"), "InvalidArgument");
        refused(put(&mut c, std::slice::from_ref(&good), candid::Principal::anonymous()), "NotController");
        let too_many = vec![good.clone(); stablebench_canister::MAX_KEYS_PER_CALL + 1];
        refused(put(&mut c, &too_many, default_controller()), "InvalidArgument");
        if t == Target::Vfs {
            let huge = ([4u8; 32], vec![0u8; stablebench_grid::api::vfs::MAX_VALUE_BYTES + 1]);
            refused(put(&mut c, &[good.clone(), huge], default_controller()), "InvalidArgument");
        }
        let (_, got) = get_many(&mut c, t, &[[1u8; 32]], false);
        assert_eq!(got, vec![None], "{t:?}: a refused write wrote nothing");
        put(&mut c, &[good], default_controller()).expect("a good write");
        let (_, got) = get_many(&mut c, t, &[[1u8; 32], [3u8; 32]], false);
        assert_eq!(got, vec![Some(vec![7u8; 4]), None], "{t:?}");
        // A reply over the limit is refused, not trapped: 20 values of 100 KiB.
        let big: Vec<(Key, Vec<u8>)> = (0..20u8).map(|i| ([i + 10; 32], vec![0u8; 100_000])).collect();
        put(&mut c, &big, default_controller()).expect("twenty large values");
        let keys: Vec<Key> = big.iter().map(|(k, _)| *k).collect();
        let out = c.query("kv_get_many", &t.get_arg(&keys), default_controller());
        let e = t.ok::<Vec<Option<ByteBuf>>>(&out, "kv_get_many").expect_err("refused");
        let want = if t == Target::Vfs { "InvalidArgument" } else { "ReplyTooLarge" };
        assert!(e.starts_with(want), "{t:?}: {e}");
    }
}

#[test]
fn message_shapes_match_the_committed_results() {
    let ten_x = std::env::var_os("STABLEBENCH_SHAPES_10X").is_some();
    let regenerate = std::env::var_os("STABLEBENCH_REGENERATE_SHAPES").is_some();
    let committed: Results = common::committed_or_default(RESULTS);
    let current = common::wasm_hashes(&WASM_FILES);
    let one_x = committed.sizes.get("1x");
    let measures = common::measures(
        RESULTS,
        "STABLEBENCH_REGENERATE_SHAPES",
        "STABLEBENCH_REGENERATE_SHAPES=1 cargo test --release -p stablebench-runner --test message_shapes",
        one_x.map(|s| &s.wasm),
        &current,
        one_x.map_or("", |s| &s.sources),
        &common::sources(&SOURCES),
    );
    let mut measured = Results::default();
    let one_x = if measures { measure_size(SIZES[0]) } else { one_x.unwrap().clone() };
    measured.sizes.insert("1x".into(), one_x);
    if ten_x {
        measured.sizes.insert("10x".into(), measure_size(SIZES[1]));
    }
    measured.sizes.values().for_each(check_invariants);
    if !ten_x {
        if let Some(kept) = committed.sizes.get("10x") {
            common::assert_measured_on("message_shapes_results.yml", "10x", Some(&kept.wasm), &current, REGENERATE);
            measured.sizes.insert("10x".into(), kept.clone());
        }
    }
    let yml = format!(
        "# Generated by `STABLEBENCH_REGENERATE_SHAPES=1 cargo test --release -p stablebench-runner --test message_shapes`\n# (10x: with STABLEBENCH_SHAPES_10X=1): whole-message instructions of kv_get_many / kv_put_many on the production wasm\n# through the offline runner, per backend, cost model, shape, key pattern and operation count. Do not edit.\n{}",
        serde_yaml::to_string(&measured).unwrap()
    );
    let page = stablebench_report::shapes::page(&measured);
    let readme = std::fs::read_to_string(README).unwrap();
    let block = stablebench_report::shapes::summary(&measured.sizes["1x"]);
    let spliced =
        stablebench_report::splice(&readme, "message-shapes", &block).unwrap_or_else(|e| panic!("README.md: {e}"));
    if regenerate {
        std::fs::write(RESULTS, yml).unwrap();
        std::fs::write(PAGE, page).unwrap();
        std::fs::write(README, spliced).unwrap();
        return;
    }
    for (label, size) in &measured.sizes {
        let c = committed
            .sizes
            .get(label)
            .unwrap_or_else(|| panic!("message_shapes_results.yml has no {label}: regenerate it ({REGENERATE})"));
        assert_eq!(size, c, "{label}: measured, committed: regenerate message_shapes_results.yml ({REGENERATE})");
    }
    assert_eq!(std::fs::read_to_string(RESULTS).unwrap(), yml, "message_shapes_results.yml is not what it generates");
    assert_eq!(std::fs::read_to_string(PAGE).unwrap_or_default(), page, "docs/message-shapes.md is stale");
    assert_eq!(readme, spliced, "README.md's message-shapes block is stale");
}
