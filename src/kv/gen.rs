//! Deterministic data for the key-value workloads. Every item is a pure function of a seed and an
//! index, so a load split over many messages can resume at any offset and the verification after
//! a measured region can recompute any expected value without keeping state.
//!
//! The randomness is a ChaCha8 stream ([`rand_chacha::ChaCha8Rng`]): a canister has no OS
//! randomness, and a seeded stream gives the same bytes natively and in wasm.
//!
//! Three generators live here:
//! - [`kusama_value_len`]: value sizes following the Kusama state histogram that Substrate's
//!   node-bench uses (`KUSAMA_STATE_DISTRIBUTION`);
//! - [`TrieDataset`]: the key/value set of Substrate node-bench's trie read/write benchmark;
//! - [`NodeFactory`] and [`NodeObject`]: the objects of rippled's NodeStore timing test.

use std::ops::Range;

use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::Key;
use crate::{Error, Result};

/// Stream domains: each generator draws from its own ChaCha key, so no two generators ever share
/// bytes even when they are given the same seed and index.
mod domain {
    /// [`super::rng_for`]: the trie dataset's entries.
    pub const DEFAULT: u64 = 0;
    /// The trie dataset's warm-up key prefix.
    pub const TRIE_PREFIX: u64 = 1;
    /// The trie benchmark's written entries.
    pub const TRIE_WRITE: u64 = 2;
    /// A node factory's key-seed draws.
    pub const NODE_KEYS: u64 = 3;
    /// A node object, from its key seed.
    pub const NODE_OBJECT: u64 = 4;
}

/// The random stream of item `index` under `seed`.
///
/// The ChaCha key holds `seed` and the stream number is `index`, so distinct `(seed, index)` pairs
/// get distinct, independent streams (ChaCha is a pseudo-random function of key and stream), and
/// constructing one costs no more than a key setup: no state is carried from item to item.
pub fn rng_for(seed: u64, index: u64) -> ChaCha8Rng {
    rng_in(domain::DEFAULT, seed, index)
}

/// [`rng_for`] in another domain: the ChaCha key is `seed` and `domain`, the stream `index`.
fn rng_in(domain: u64, seed: u64, index: u64) -> ChaCha8Rng {
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&seed.to_le_bytes());
    key[8..16].copy_from_slice(&domain.to_le_bytes());
    let mut rng = ChaCha8Rng::from_seed(key);
    rng.set_stream(index);
    rng
}

/// A uniform draw on `lo..=hi` (`lo <= hi`).
///
/// Multiply-shift on one 64-bit word rather than rand's rejection sampler: it consumes exactly one
/// word per draw, so the data does not depend on the rand version's sampling details, and its bias
/// (at most `span / 2^64`, below 10^-12 for every range used here) is far below anything a
/// benchmark can see.
pub fn uniform<R: Rng + ?Sized>(rng: &mut R, lo: u64, hi: u64) -> u64 {
    debug_assert!(lo <= hi, "uniform({lo}, {hi})");
    let span = hi.wrapping_sub(lo).wrapping_add(1);
    if span == 0 {
        // The whole u64 range.
        return rng.next_u64();
    }
    lo + ((u128::from(rng.next_u64()) * u128::from(span)) >> 64) as u64
}

// ---------------------------------------------------------------------------------------------
// Kusama value sizes

/// One part of the value-size distribution: `weight` hundredths of a percent of all values, drawn
/// uniformly on `lo..=hi` (one exact size when `lo == hi`).
#[derive(Clone, Copy, Debug)]
struct Part {
    weight: u32,
    lo: u32,
    hi: u32,
}

/// A size that alone holds `weight` hundredths of a percent of the values.
const fn exact(weight: u32, size: u32) -> Part {
    Part { weight, lo: size, hi: size }
}

/// The remaining values of `start..end` with mean `mean`: drawn uniformly from the widest interval
/// centred on `mean` that stays inside the range, so the part's mean is exactly `mean`.
const fn bucket(weight: u32, start: u32, end: u32, mean: u32) -> Part {
    let below = mean - start;
    let above = end - 1 - mean;
    let half = if below < above { below } else { above };
    Part { weight, lo: mean - half, hi: mean + half }
}

/// Kusama's state value sizes (46.56 M values, smallest 32 bytes, mean ≈ 391 bytes), as
/// Substrate's node-bench samples them (`KUSAMA_STATE_DISTRIBUTION`, a histogram of every size).
///
/// This table is not that histogram: it is derived from facts about it — the sixteen sizes that
/// each hold more than 1.5 % of the values, and for the remainder the share and mean of each
/// power-of-two range — so it is 26 rows instead of ~4,700. The 512–1,023 range is split at the
/// exact size 547 (2.25 % of the values lie in 512–546 with mean 539, 2.13 % in 548–1,023 with
/// mean 647), because the 90th percentile is 547 and sits on a knife edge: 90.10 % of Kusama's
/// values are ≤ 547 bytes, and a single uniform part for 512–1,023 would move p90 to 580. The
/// weights are shares in hundredths of a percent; they add up to 10,001 (rounding), and the
/// sampler draws on that total. Published quantiles reproduced: p25 69, p50 140, p75 425, p90 547.
const KUSAMA: [Part; 26] = [
    exact(1210, 69),
    exact(806, 102),
    exact(687, 425),
    exact(555, 65),
    exact(420, 135),
    exact(399, 547),
    exact(377, 140),
    exact(362, 2630),
    exact(362, 204),
    exact(325, 37),
    exact(317, 51),
    exact(317, 137),
    exact(276, 417),
    exact(275, 465),
    exact(271, 580),
    exact(157, 333),
    bucket(406, 32, 64, 49),
    bucket(421, 64, 128, 92),
    bucket(603, 128, 256, 180),
    bucket(872, 256, 512, 381),
    bucket(225, 512, 547, 539),
    bucket(213, 548, 1024, 647),
    bucket(18, 1024, 2048, 1474),
    bucket(24, 2048, 4096, 3071),
    bucket(102, 4096, 8192, 6178),
    // The largest values (up to 1.6 MB in Kusama) are 0.01 %; their mean is ~46,000 bytes.
    bucket(1, 8192, 2 * 46_000 - 8192 + 1, 46_000),
];

/// The sum of [`KUSAMA`]'s weights.
const KUSAMA_TOTAL: u32 = {
    let mut total = 0;
    let mut i = 0;
    while i < KUSAMA.len() {
        total += KUSAMA[i].weight;
        i += 1;
    }
    total
};

/// A value length drawn from Kusama's state value-size distribution (see the table's notes):
/// at least 32 bytes, mean ≈ 391 bytes, median 140 bytes.
pub fn kusama_value_len<R: Rng + ?Sized>(rng: &mut R) -> usize {
    let mut r = uniform(rng, 0, u64::from(KUSAMA_TOTAL) - 1) as u32;
    for part in &KUSAMA {
        if r < part.weight {
            return uniform(rng, u64::from(part.lo), u64::from(part.hi)) as usize;
        }
        r -= part.weight;
    }
    unreachable!("r < KUSAMA_TOTAL")
}

/// `len` random bytes.
fn random_bytes<R: Rng + ?Sized>(rng: &mut R, len: usize) -> Vec<u8> {
    let mut bytes = vec![0u8; len];
    rng.fill_bytes(&mut bytes);
    bytes
}

/// A random 32-byte key.
fn random_key<R: Rng + ?Sized>(rng: &mut R) -> Key {
    let mut key = [0u8; 32];
    rng.fill_bytes(&mut key);
    key
}

// ---------------------------------------------------------------------------------------------
// Substrate's trie benchmark dataset

/// The dataset of Substrate node-bench's trie read/write benchmark: `size` entries, each a
/// uniformly random 32-byte key and a random value of Kusama length ([`kusama_value_len`]), plus
/// 100 warm-up entries.
///
/// With `every = size / 100`: for `idx % every == 0` a warm-up entry is added whose key is a
/// per-dataset random 16-byte prefix followed by the last 16 bytes of entry `idx`'s key (same
/// value), so the 100 warm-ups cluster under one prefix; for `idx % every == 1`, entry `idx` is
/// one of the 100 query keys, spread evenly over the dataset. The store holds `size + 100` keys.
///
/// `size` must be a multiple of 100 and at least 200 (so that `every >= 2` and there are exactly
/// 100 warm-ups and 100 query keys); [`TrieDataset::new`] checks it. Sizes used: the grid's
/// `TRIE_SIZES`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TrieDataset {
    /// Entries (keys besides the warm-ups).
    pub size: u64,
    /// The seed of every key and value.
    pub seed: u64,
}

impl TrieDataset {
    /// Warm-up entries and query keys: Substrate's `SAMPLE_SIZE`.
    pub const SAMPLE: u64 = stablebench_grid::TRIE_QUERY_KEYS;

    /// Bytes of a written value: Substrate's `TEST_WRITE_SIZE`.
    pub const WRITE_SIZE: usize = 128;

    /// A dataset of `size` entries; `size` must be a multiple of 100 and at least 200.
    pub fn new(size: u64, seed: u64) -> Result<TrieDataset> {
        let data = TrieDataset { size, seed };
        data.validate()?;
        Ok(data)
    }

    /// Checks that `size` is a multiple of 100 and at least 200.
    pub fn validate(&self) -> Result<()> {
        if self.size < 2 * Self::SAMPLE || !self.size.is_multiple_of(Self::SAMPLE) {
            return Err(Error::InvalidArgument(format!(
                "trie dataset size {} must be a multiple of 100 and at least 200",
                self.size
            )));
        }
        Ok(())
    }

    /// The spacing of warm-ups and query keys: `size / 100`.
    pub fn every(&self) -> u64 {
        self.size / Self::SAMPLE
    }

    /// Keys in a fully loaded store: `size + 100`.
    pub fn len(&self) -> u64 {
        self.size + Self::SAMPLE
    }

    /// Whether the dataset has no entry (never, for a valid dataset).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Entry `idx` (`idx < size`): a random key and a random value of Kusama length.
    pub fn entry(&self, idx: u64) -> (Key, Vec<u8>) {
        let mut rng = rng_for(self.seed, idx);
        let key = random_key(&mut rng);
        let len = kusama_value_len(&mut rng);
        (key, random_bytes(&mut rng, len))
    }

    /// The 16-byte prefix shared by every warm-up key.
    pub fn warmup_prefix(&self) -> [u8; 16] {
        let mut prefix = [0u8; 16];
        rng_in(domain::TRIE_PREFIX, self.seed, 0).fill_bytes(&mut prefix);
        prefix
    }

    /// The warm-up entry that comes with entry `idx`, if `idx % every == 0`.
    pub fn warmup(&self, idx: u64) -> Option<(Key, Vec<u8>)> {
        self.is_warmup(idx).then(|| self.warmup_of(&self.entry(idx)))
    }

    fn is_warmup(&self, idx: u64) -> bool {
        idx.is_multiple_of(self.every())
    }

    /// The warm-up entry derived from `entry`: the prefix, the entry key's last 16 bytes, its value.
    fn warmup_of(&self, entry: &(Key, Vec<u8>)) -> (Key, Vec<u8>) {
        let mut key = [0u8; 32];
        key[..16].copy_from_slice(&self.warmup_prefix());
        key[16..].copy_from_slice(&entry.0[16..]);
        (key, entry.1.clone())
    }

    /// The 100 warm-up entries (key and expected value), in index order.
    pub fn warmup_keys(&self) -> Vec<(Key, Vec<u8>)> {
        (0..Self::SAMPLE).map(|i| self.warmup_of(&self.entry(i * self.every()))).collect()
    }

    /// The 100 query entries (key and expected value): entries `i * every + 1`.
    pub fn query_keys(&self) -> Vec<(Key, Vec<u8>)> {
        (0..Self::SAMPLE).map(|i| self.entry(i * self.every() + 1)).collect()
    }

    /// What a load of entries `range` inserts: each entry followed by its warm-up, if it has one.
    /// The range is clipped to `0..size`.
    pub fn entries(&self, range: Range<u64>) -> impl Iterator<Item = (Key, Vec<u8>)> + '_ {
        let range = range.start.min(self.size)..range.end.min(self.size);
        range.flat_map(move |idx| {
            let entry = self.entry(idx);
            let warmup = self.is_warmup(idx).then(|| self.warmup_of(&entry));
            std::iter::once(entry).chain(warmup)
        })
    }

    /// The entry that write iteration `iteration` puts: a fresh random 32-byte key from a stream
    /// of its own (so it is not in the dataset: a collision with one of a million keys has
    /// probability 2^-236) and a random 128-byte value.
    pub fn write_entry(&self, iteration: u64) -> (Key, Vec<u8>) {
        let mut rng = rng_in(domain::TRIE_WRITE, self.seed, iteration);
        let key = random_key(&mut rng);
        (key, random_bytes(&mut rng, Self::WRITE_SIZE))
    }
}

// ---------------------------------------------------------------------------------------------
// rippled's NodeStore objects

/// A rippled node object: what the NodeStore keeps under a 256-bit hash.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeObject {
    /// The key: 32 random bytes.
    pub hash: Key,
    /// The ledger index, uniform on 1..=10,000,000.
    pub ledger_index: u32,
    /// The node object type byte, uniform over four types (0..=3).
    pub kind: u8,
    /// The data: 8 × uniform(128..=256) random bytes (1,024–2,048, mean 1,536).
    pub payload: Vec<u8>,
}

impl NodeObject {
    /// Bytes of [`NodeObject::encoded`]'s header.
    pub const HEADER: usize = 9;

    /// The object of key seed `key_seed`: a pure function of it (not of any factory's seed), so
    /// two factories that draw the same key seed produce identical objects.
    pub fn from_key_seed(key_seed: u64) -> NodeObject {
        let mut rng = rng_in(domain::NODE_OBJECT, key_seed, 0);
        let hash = random_key(&mut rng);
        let ledger_index = uniform(&mut rng, 1, 10_000_000) as u32;
        let kind = uniform(&mut rng, 0, 3) as u8;
        let len = 8 * uniform(&mut rng, 128, 256) as usize;
        NodeObject { hash, ledger_index, kind, payload: random_bytes(&mut rng, len) }
    }

    /// The stored value, as rippled's `EncodedBlob`: the ledger index as a big-endian u32 written
    /// twice, the type byte, then the payload (1,033–2,057 bytes).
    pub fn encoded(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.encoded_len());
        out.extend_from_slice(&self.header());
        out.extend_from_slice(&self.payload);
        out
    }

    /// The length of [`NodeObject::encoded`].
    pub fn encoded_len(&self) -> usize {
        Self::HEADER + self.payload.len()
    }

    /// Whether `bytes` is exactly [`NodeObject::encoded`] (compared without building it).
    pub fn matches(&self, bytes: &[u8]) -> bool {
        bytes.len() == self.encoded_len()
            && bytes[..Self::HEADER] == self.header()
            && bytes[Self::HEADER..] == self.payload[..]
    }

    fn header(&self) -> [u8; Self::HEADER] {
        let index = self.ledger_index.to_be_bytes();
        let mut header = [0u8; Self::HEADER];
        header[..4].copy_from_slice(&index);
        header[4..8].copy_from_slice(&index);
        header[8] = self.kind;
        header
    }
}

/// rippled's NodeStore test `NodeFactory`: `count` objects whose key seeds are drawn uniformly
/// on `min_key..=max_key`, with replacement, from a stream seeded by `seed`. Each object is a pure
/// function of its key seed ([`NodeObject::from_key_seed`]), so a duplicate key seed is a duplicate
/// object, byte for byte.
///
/// The draws are one sequential stream, but draw `i` is the stream's `i`-th word, so iterating
/// again ("reset") or starting at any `i` gives the same sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeFactory {
    /// The seed of the key-seed draws.
    pub seed: u64,
    /// Objects produced.
    pub count: u64,
    /// The smallest key seed (inclusive).
    pub min_key: u64,
    /// The largest key seed (inclusive; at least `min_key`).
    pub max_key: u64,
}

impl NodeFactory {
    /// A factory of `count` objects with key seeds on `min_key..=max_key`.
    pub fn new(seed: u64, count: u64, min_key: u64, max_key: u64) -> NodeFactory {
        NodeFactory { seed, count, min_key, max_key }
    }

    /// The key seed of draw `i` (`i < count`), found by seeking the draw stream to it.
    pub fn key_seed(&self, i: u64) -> u64 {
        let mut rng = self.draws();
        rng.set_word_pos(2 * u128::from(i));
        uniform(&mut rng, self.min_key, self.max_key)
    }

    /// The key seeds of draws `range` (clipped to `0..count`), in order: what a phase split over
    /// several messages resumes with.
    pub fn key_seeds_in(&self, range: Range<u64>) -> impl Iterator<Item = u64> + '_ {
        let range = range.start.min(self.count)..range.end.min(self.count);
        let mut rng = self.draws();
        rng.set_word_pos(2 * u128::from(range.start));
        range.map(move |_| uniform(&mut rng, self.min_key, self.max_key))
    }

    /// The `count` key seeds, in order.
    pub fn key_seeds(&self) -> impl Iterator<Item = u64> + '_ {
        self.key_seeds_in(0..self.count)
    }

    /// The stream of key-seed draws. Draw `i` is its `i`-th 64-bit word ([`uniform`] takes exactly
    /// one), so iterating reads the stream sequentially and [`NodeFactory::key_seed`] can seek.
    fn draws(&self) -> ChaCha8Rng {
        rng_in(domain::NODE_KEYS, self.seed, 0)
    }

    /// The `count` objects, in order; call again to iterate again ("reset").
    pub fn iter(&self) -> impl Iterator<Item = NodeObject> + '_ {
        self.key_seeds().map(NodeObject::from_key_seed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kusama_parts_stay_in_their_ranges_and_keep_their_means() {
        assert_eq!(KUSAMA_TOTAL, 10_001);
        for part in &KUSAMA {
            assert!(part.lo >= 32 && part.lo <= part.hi, "{part:?}");
        }
        // Each bucket's interval is centred on its mean and inside its power-of-two range.
        let buckets = &KUSAMA[16..];
        let ranges = [
            (32, 64, 49),
            (64, 128, 92),
            (128, 256, 180),
            (256, 512, 381),
            (512, 547, 539),
            (548, 1024, 647),
            (1024, 2048, 1474),
            (2048, 4096, 3071),
            (4096, 8192, 6178),
            (8192, u32::MAX, 46_000),
        ];
        for (part, (start, end, mean)) in buckets.iter().zip(ranges) {
            assert!(part.lo >= start && part.hi < end, "{part:?}");
            assert_eq!(part.lo + part.hi, 2 * mean, "{part:?}");
        }
        assert_eq!((KUSAMA[25].lo, KUSAMA[25].hi), (8192, 83_808));
    }

    #[test]
    fn uniform_covers_both_ends() {
        let mut rng = rng_for(1, 2);
        let draws: Vec<u64> = (0..1000).map(|_| uniform(&mut rng, 5, 7)).collect();
        assert!(draws.iter().all(|d| (5..=7).contains(d)));
        for v in 5..=7 {
            assert!(draws.contains(&v));
        }
        assert_eq!(uniform(&mut rng, 9, 9), 9);
        let _ = uniform(&mut rng, 0, u64::MAX);
    }

    #[test]
    fn streams_differ_by_seed_index_and_domain() {
        let word = |mut r: ChaCha8Rng| r.next_u64();
        let base = word(rng_for(7, 3));
        assert_eq!(base, word(rng_for(7, 3)));
        assert_ne!(base, word(rng_for(7, 4)));
        assert_ne!(base, word(rng_for(8, 3)));
        assert_ne!(base, word(rng_in(domain::TRIE_WRITE, 7, 3)));
    }

    #[test]
    fn encoded_object_layout() {
        let obj = NodeObject::from_key_seed(42);
        let bytes = obj.encoded();
        assert_eq!(bytes.len(), obj.encoded_len());
        assert_eq!(bytes[..4], obj.ledger_index.to_be_bytes());
        assert_eq!(bytes[4..8], obj.ledger_index.to_be_bytes());
        assert_eq!(bytes[8], obj.kind);
        assert_eq!(bytes[9..], obj.payload[..]);
        assert!(obj.matches(&bytes));
        let mut wrong = bytes.clone();
        wrong[9] ^= 1;
        assert!(!obj.matches(&wrong));
        assert!(!obj.matches(&bytes[..bytes.len() - 1]));
    }
}
