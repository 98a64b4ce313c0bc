//! Substrate's trie read/write benchmark (node-bench `trie`), the workload behind the DbWeight
//! figures, on any [`KvStore`].
//!
//! Setup ([`load`], never measured) stores a [`TrieDataset`]: `size` random keys with Kusama-sized
//! values plus 100 warm-up entries. Each of [`ITERATIONS`] iterations then (optionally) drops the
//! caches, reads the 100 warm-up keys untimed — as Substrate does, so the top of the structure is
//! warm while the queried leaves are not — and measures:
//! - [`read`]: the 100 query keys, one sample per 100 reads;
//! - [`write()`]: one `put` of a fresh 128-byte entry (one transaction: the write and its commit).
//!
//! Every result is checked after the timed part, and a write is undone (`remove`) before the next
//! iteration, so every iteration starts from the loaded state as Substrate's runs start from the
//! original root. Substrate reports `w_avg`, the mean of the sorted samples 11–40
//! ([`Samples::w_avg`]); a read sample covers 100 reads, so the per-read figure is that / 100.

use std::ops::Range;

use super::gen::TrieDataset;
use super::{Key, KvStore, Probe};
use crate::{Error, Result};

/// Measured iterations per benchmark (Substrate's trie benchmark runs 50).
pub const ITERATIONS: usize = stablebench_grid::TRIE_ITERATIONS;

/// Keys read in one read sample: the dataset's 100 query keys.
pub const QUERY_KEYS: usize = stablebench_grid::TRIE_QUERY_KEYS as usize;

/// The sorted samples that Substrate's `w_avg` averages: skip the 10 smallest, take 30.
pub const TRIMMED: Range<usize> = stablebench_grid::TRIE_TRIMMED;

/// Stores the entries `range` of `data` and their warm-ups, `batch` entries per
/// [`KvStore::put_batch`]. Returns the entries written (warm-ups included). A full load is
/// `load(store, data, 0..data.size, batch)`; a load split over several messages resumes with the
/// next range. Setup: never measured.
pub fn load<S: KvStore + ?Sized>(store: &mut S, data: &TrieDataset, range: Range<u64>, batch: usize) -> Result<u64> {
    data.validate()?;
    if batch == 0 {
        return Err(Error::InvalidArgument("trie load: batch must be at least 1".into()));
    }
    if range.start > range.end || range.end > data.size {
        return Err(Error::InvalidArgument(format!(
            "trie load: range {}..{} is not inside 0..{}",
            range.start, range.end, data.size
        )));
    }
    let mut chunk = Vec::with_capacity(batch);
    let mut written = 0u64;
    for item in data.entries(range) {
        chunk.push(item);
        if chunk.len() == batch {
            store.put_batch(&chunk)?;
            written += chunk.len() as u64;
            chunk.clear();
        }
    }
    if !chunk.is_empty() {
        store.put_batch(&chunk)?;
        written += chunk.len() as u64;
    }
    Ok(written)
}

/// Instruction counts of the measured iterations, in iteration order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Samples(pub Vec<u64>);

impl Samples {
    /// The mean of all samples (0 without samples).
    pub fn avg(&self) -> f64 {
        mean(&self.0)
    }

    /// Substrate's `w_avg`: the mean of the sorted samples [`TRIMMED`] (the 11th to the 40th
    /// smallest), which drops the outliers at both ends. With fewer than 40 samples that window
    /// does not exist; the mean of the middle half (sorted `n/4 .. n - n/4`) stands in for it, so
    /// a short run still discards its extremes. 0 without samples.
    pub fn w_avg(&self) -> f64 {
        mean(&self.trimmed())
    }

    /// The sum of the samples [`Samples::w_avg`] averages.
    pub fn trimmed_sum(&self) -> u64 {
        self.trimmed().iter().sum()
    }

    /// The sum of all samples.
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }

    /// The samples [`Samples::w_avg`] averages, sorted.
    pub fn trimmed(&self) -> Vec<u64> {
        let mut sorted = self.0.clone();
        sorted.sort_unstable();
        let n = sorted.len();
        let window = if n >= TRIMMED.end { TRIMMED } else { n / 4..n - n / 4 };
        sorted[window].to_vec()
    }
}

fn mean(values: &[u64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.iter().map(|&v| v as f64).sum::<f64>() / values.len() as f64
}

/// The read benchmark: per iteration, drop the caches if `cold`, read the warm-up keys (untimed,
/// checked), then time the 100 query-key reads; the values are checked after the timed part.
/// Returns one sample per iteration (100 reads each). Fails with [`Error::WrongResult`] if any
/// read returns a value other than the dataset's.
pub fn read<S: KvStore + ?Sized, P: Probe>(
    store: &mut S,
    data: &TrieDataset,
    cold: bool,
    probe: &P,
) -> Result<Samples> {
    data.validate()?;
    let warmups = data.warmup_keys();
    let queries = data.query_keys();
    // The keys alone, so the timed loop walks one small array.
    let keys: Vec<Key> = queries.iter().map(|(key, _)| *key).collect();
    let mut got: Vec<Option<Vec<u8>>> = Vec::with_capacity(keys.len());
    let mut samples = Vec::with_capacity(ITERATIONS);
    for iteration in 0..ITERATIONS {
        if cold {
            store.drop_caches()?;
        }
        warm_up(store, &warmups, "read", iteration)?;
        // Free the previous iteration's values before the timer starts.
        got.clear();
        probe.message_starts();
        let t0 = probe.instructions();
        for key in &keys {
            got.push(store.get(key)?);
        }
        let t1 = probe.instructions();
        samples.push(t1.saturating_sub(t0));
        for (i, ((_, expected), value)) in queries.iter().zip(&got).enumerate() {
            check("read", iteration, "query key", i, value.as_deref(), expected)?;
        }
    }
    Ok(Samples(samples))
}

/// The write benchmark: per iteration, drop the caches if `cold`, read the warm-up keys (untimed,
/// checked), then time one `put` of [`TrieDataset::write_entry`] (one transaction, commit
/// included). Untimed afterwards: the entry must read back, and it is removed again, so the store
/// ends as it began. Fails with [`Error::WrongResult`] if a value is wrong or the entry is not
/// there to remove.
pub fn write<S: KvStore + ?Sized, P: Probe>(
    store: &mut S,
    data: &TrieDataset,
    cold: bool,
    probe: &P,
) -> Result<Samples> {
    data.validate()?;
    let warmups = data.warmup_keys();
    let mut samples = Vec::with_capacity(ITERATIONS);
    for iteration in 0..ITERATIONS {
        if cold {
            store.drop_caches()?;
        }
        warm_up(store, &warmups, "write", iteration)?;
        let (key, value) = data.write_entry(iteration as u64);
        probe.message_starts();
        let t0 = probe.instructions();
        store.put(&key, &value)?;
        let t1 = probe.instructions();
        samples.push(t1.saturating_sub(t0));
        check("write", iteration, "written key", 0, store.get(&key)?.as_deref(), &value)?;
        if !store.remove(&key)? {
            return Err(Error::WrongResult(format!(
                "trie write, iteration {iteration}: the written key was not there to remove"
            )));
        }
    }
    Ok(Samples(samples))
}

/// Reads every warm-up key and checks its value (untimed).
fn warm_up<S: KvStore + ?Sized>(
    store: &mut S,
    warmups: &[(Key, Vec<u8>)],
    bench: &str,
    iteration: usize,
) -> Result<()> {
    for (i, (key, expected)) in warmups.iter().enumerate() {
        check(bench, iteration, "warm-up key", i, store.get(key)?.as_deref(), expected)?;
    }
    Ok(())
}

fn check(bench: &str, iteration: usize, what: &str, i: usize, got: Option<&[u8]>, expected: &[u8]) -> Result<()> {
    match got {
        Some(value) if value == expected => Ok(()),
        Some(value) => Err(Error::WrongResult(format!(
            "trie {bench}, iteration {iteration}: {what} {i} returned a {}-byte value that differs \
             from the expected {} bytes",
            value.len(),
            expected.len()
        ))),
        None => Err(Error::WrongResult(format!("trie {bench}, iteration {iteration}: {what} {i} is missing"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn w_avg_is_the_mean_of_sorted_samples_11_to_40() {
        // 50 samples 1..=50 in reverse order: sorted 11..=40 averages 25.5.
        let samples = Samples((1..=50).rev().collect());
        assert_eq!(samples.w_avg(), 25.5);
        assert_eq!(samples.trimmed_sum(), (11..=40).sum::<u64>());
        assert_eq!(samples.total(), 1275);
        assert_eq!(samples.avg(), 25.5);
        // An outlier outside the window does not move w_avg.
        let mut spiked = samples.0.clone();
        spiked[0] = 1_000_000;
        assert_eq!(Samples(spiked).w_avg(), 25.5);
    }

    #[test]
    fn short_runs_fall_back_to_the_middle_half() {
        assert_eq!(Samples(vec![]).w_avg(), 0.0);
        assert_eq!(Samples(vec![7]).w_avg(), 7.0);
        // 8 samples: sorted[2..6] = 3, 4, 5, 6.
        assert_eq!(Samples(vec![8, 1, 7, 2, 6, 3, 5, 4]).trimmed(), vec![3, 4, 5, 6]);
    }
}
