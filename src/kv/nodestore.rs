//! rippled's NodeStore timing test (`NodeStoreTiming`, the six-test version) on any [`KvStore`].
//!
//! With `n` objects from [`NodeFactory`]s (objects of 1,033–2,057 encoded bytes under random
//! 32-byte hashes) and rippled's `seedValue` `s` ([`SEED`]), the phases run in this order, each
//! inside `probe.phase(name, ..)` ([`Phase::name`]):
//!
//! | phase | factory: seed, key-seed range | operation |
//! |---|---|---|
//! | `inserts` | `s`, `[0, n]` | `n` × `put`, one transaction each |
//! | `batch_insert` | `s`, `[10n, 11n]` | `put_batch` of [`BATCH_SIZE`]; the short last batch is dropped |
//! | `fetch_50_50` | `s`, `[n, 2n]` | `n` × `get`, hits counted |
//! | `fetch_50_50_intended` | `s`, `[0, 2n]` | `n` × `get`, hits counted |
//! | `ordered_fetch` | `s`, `[0, n]` | `n` × `get`, every one must hit |
//! | `fetch_random` | `s + 1`, `[10n, 11n]` | `n` × `get`, hits counted |
//! | `fetch_missing` | `s`, `[3n, 4n]` | `n` × `get`, every one must miss |
//!
//! Key seeds are drawn with replacement, so `inserts` stores only ~63.2 % distinct objects (the
//! rest rewrite an existing key with the identical value: put semantics) and `fetch_random` hits
//! ~63 % of its draws. `fetch_50_50` is reproduced as coded: its range `[n, 2n]` shares only the
//! key seed `n` with the inserted `[0, n]`, so it hits almost never, not half the time as its name
//! says; `fetch_50_50_intended` is the labelled fix, whose range `[0, 2n]` is half inserted (so
//! ~31.6 % of its draws hit). `batch_insert` reproduces rippled's `fillBatch`, which returns false
//! on a short final batch so the loop stops without storing it: the last `n mod 128` objects are
//! generated but never stored.
//!
//! Unlike rippled, each phase's objects are generated before the phase starts and the values it
//! fetched are compared with the objects after it ends (on the IC both cost more than a heap
//! map's put or get, and would hide the differences between stores); a hit with other bytes is
//! [`Error::WrongResult`].
//! [`expected`] predicts every count from the key seeds alone, without a store, so a run can be
//! checked after the measured region.

use std::collections::BTreeSet;

use super::gen::NodeFactory;
use super::{Key, KvStore, Probe};
use crate::{Error, Result};

/// rippled's `seedValue`.
pub const SEED: u64 = stablebench_grid::KV_SEED;

/// Objects per `put_batch` in `batch_insert`: rippled's `batchSize`.
pub const BATCH_SIZE: usize = 128;

/// One phase of the test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// `n` single puts of key seeds `[0, n]`.
    Inserts,
    /// Batches of 128 of key seeds `[10n, 11n]`; the short final batch is not stored.
    BatchInsert,
    /// Gets of key seeds `[n, 2n]`, as rippled codes it (almost no hits).
    Fetch5050,
    /// Gets of key seeds `[0, 2n]`, half of them inserted: the intent of `fetch_50_50`.
    Fetch5050Intended,
    /// Gets of the inserts' sequence again: every one hits.
    OrderedFetch,
    /// Gets of key seeds `[10n, 11n]` drawn with seed `s + 1`.
    FetchRandom,
    /// Gets of key seeds `[3n, 4n]`, never stored: every one misses.
    FetchMissing,
}

impl Phase {
    /// Every phase, in run order.
    pub const ALL: [Phase; 7] = [
        Phase::Inserts,
        Phase::BatchInsert,
        Phase::Fetch5050,
        Phase::Fetch5050Intended,
        Phase::OrderedFetch,
        Phase::FetchRandom,
        Phase::FetchMissing,
    ];

    /// The phase's canbench scope name (the canister records it, the report reads it).
    pub const fn name(self) -> &'static str {
        match self {
            Phase::Inserts => "inserts",
            Phase::BatchInsert => "batch_insert",
            Phase::Fetch5050 => "fetch_50_50",
            Phase::Fetch5050Intended => "fetch_50_50_intended",
            Phase::OrderedFetch => "ordered_fetch",
            Phase::FetchRandom => "fetch_random",
            Phase::FetchMissing => "fetch_missing",
        }
    }

    /// rippled's column title (the intended 50/50 is ours, and says so).
    pub const fn title(self) -> &'static str {
        match self {
            Phase::Inserts => "Inserts",
            Phase::BatchInsert => "Batch Insert",
            Phase::Fetch5050 => "Fetch 50/50",
            Phase::Fetch5050Intended => "Fetch 50/50 (intended)",
            Phase::OrderedFetch => "Ordered Fetch",
            Phase::FetchRandom => "Fetch Random",
            Phase::FetchMissing => "Fetch Missing",
        }
    }

    /// A short name for chart axes.
    pub const fn short_title(self) -> &'static str {
        match self {
            Phase::Inserts => "Inserts",
            Phase::BatchInsert => "Batch",
            Phase::Fetch5050 => "50/50",
            Phase::Fetch5050Intended => "50/50 intended",
            Phase::OrderedFetch => "Ordered",
            Phase::FetchRandom => "Random",
            Phase::FetchMissing => "Missing",
        }
    }

    /// Whether the phase stores objects (the others fetch).
    pub const fn is_insert(self) -> bool {
        matches!(self, Phase::Inserts | Phase::BatchInsert)
    }

    /// The store operations the phase performs for `n` objects: `n` puts or fetches, except
    /// `batch_insert`, which drops the short final batch and stores `n - n mod BATCH_SIZE`.
    pub const fn operations(self, n: u64) -> u64 {
        match self {
            Phase::BatchInsert => n / BATCH_SIZE as u64 * BATCH_SIZE as u64,
            _ => n,
        }
    }

    /// This phase's hits in `hits` (`None` for the insert phases).
    pub const fn hits(self, hits: &Hits) -> Option<u64> {
        match self {
            Phase::Inserts | Phase::BatchInsert => None,
            Phase::Fetch5050 => Some(hits.fetch_50_50),
            Phase::Fetch5050Intended => Some(hits.fetch_50_50_intended),
            Phase::OrderedFetch => Some(hits.ordered_fetch),
            Phase::FetchRandom => Some(hits.fetch_random),
            Phase::FetchMissing => Some(hits.fetch_missing),
        }
    }

    /// The factory whose objects the phase stores or fetches, for `n` objects and seed `seed`.
    pub fn factory(self, n: u64, seed: u64) -> NodeFactory {
        let (seed, min_key, max_key) = match self {
            Phase::Inserts | Phase::OrderedFetch => (seed, 0, n),
            Phase::BatchInsert => (seed, 10 * n, 11 * n),
            Phase::Fetch5050 => (seed, n, 2 * n),
            Phase::Fetch5050Intended => (seed, 0, 2 * n),
            Phase::FetchRandom => (seed.wrapping_add(1), 10 * n, 11 * n),
            Phase::FetchMissing => (seed, 3 * n, 4 * n),
        };
        NodeFactory::new(seed, n, min_key, max_key)
    }
}

/// Hits of the fetch phases.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Hits {
    /// `fetch_50_50` (as coded): almost none.
    pub fetch_50_50: u64,
    /// `fetch_50_50_intended`: ~31.6 % of `n`.
    pub fetch_50_50_intended: u64,
    /// `ordered_fetch`: always `n`.
    pub ordered_fetch: u64,
    /// `fetch_random`: ~63 % of the draws, less the dropped tail's share.
    pub fetch_random: u64,
    /// `fetch_missing`: always 0.
    pub fetch_missing: u64,
}

/// The outcome of a run: fetch hits and the distinct objects stored.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NodeStoreRun {
    /// Hits per fetch phase.
    pub hits: Hits,
    /// Distinct keys in the store after the run.
    pub stored: u64,
}

/// Runs the seven phases in order on an empty `store` with `n` objects and seed `seed` (rippled's
/// is [`SEED`]), then counts the keys stored (outside the phases).
pub fn run<S: KvStore + ?Sized, P: Probe>(store: &mut S, n: u64, seed: u64, probe: &P) -> Result<NodeStoreRun> {
    check_n(n)?;
    if !store.is_empty()? {
        return Err(Error::InvalidArgument("nodestore: the store must start empty".into()));
    }
    let mut counts = [0u64; 7];
    for phase in Phase::ALL {
        counts[phase as usize] = run_phase(store, phase, n, seed, probe)?;
    }
    let hits = Hits {
        fetch_50_50: counts[Phase::Fetch5050 as usize],
        fetch_50_50_intended: counts[Phase::Fetch5050Intended as usize],
        ordered_fetch: counts[Phase::OrderedFetch as usize],
        fetch_random: counts[Phase::FetchRandom as usize],
        fetch_missing: counts[Phase::FetchMissing as usize],
    };
    Ok(NodeStoreRun { hits, stored: store.len()? })
}

/// Runs one phase inside `probe.phase(phase.name(), ..)`. Returns the objects written (`inserts`:
/// `n`; `batch_insert`: the objects of the full batches) or the hits (fetch phases). The phases
/// depend on the earlier ones' data: [`run`] runs them in order.
pub fn run_phase<S: KvStore + ?Sized, P: Probe>(
    store: &mut S,
    phase: Phase,
    n: u64,
    seed: u64,
    probe: &P,
) -> Result<u64> {
    check_n(n)?;
    // The phase's objects are made before it starts, and fetched values are checked after it
    // ends. rippled does both inside its timing, but on the IC drawing 1.5 KB of ChaCha bytes
    // per object, or comparing 1.5 KB byte by byte, costs more than a heap map's whole put or
    // get: measured inside, they would be most of every phase and hide the differences between
    // stores. The phases measure the store.
    let objects: Vec<(Key, Vec<u8>)> = phase.factory(n, seed).iter().map(|o| (o.hash, o.encoded())).collect();
    match phase {
        Phase::Inserts => probe.phase(phase.name(), || {
            for (key, value) in &objects {
                store.put(key, value)?;
            }
            Ok(n)
        }),
        Phase::BatchInsert => probe.phase(phase.name(), || {
            let mut written = 0;
            // rippled's fillBatch returned false for the short final batch: it is dropped.
            for batch in objects.chunks_exact(BATCH_SIZE) {
                store.put_batch(batch)?;
                written += BATCH_SIZE as u64;
            }
            Ok(written)
        }),
        _ => {
            let mut fetched = Vec::with_capacity(objects.len());
            probe.phase(phase.name(), || -> Result<()> {
                for (key, _) in &objects {
                    fetched.push(store.get(key)?);
                }
                Ok(())
            })?;
            let must_hit = match phase {
                Phase::OrderedFetch => Some(true),
                Phase::FetchMissing => Some(false),
                _ => None,
            };
            check_fetched(&objects, &fetched, phase, must_hit)
        }
    }
}

/// Checks what a fetch phase got and counts the hits. A hit must equal the object's encoded
/// bytes; `must_hit` = `Some(true)` / `Some(false)` requires every get to hit / miss.
fn check_fetched(
    objects: &[(Key, Vec<u8>)],
    fetched: &[Option<Vec<u8>>],
    phase: Phase,
    must_hit: Option<bool>,
) -> Result<u64> {
    let mut hits = 0;
    for (i, ((_, encoded), got)) in objects.iter().zip(fetched).enumerate() {
        let found = match got {
            Some(bytes) if bytes == encoded => true,
            Some(bytes) => {
                return Err(Error::WrongResult(format!(
                    "nodestore {}: object {i} read back as {} bytes that differ from its {} encoded bytes",
                    phase.name(),
                    bytes.len(),
                    encoded.len()
                )))
            }
            None => false,
        };
        if must_hit.is_some_and(|must| must != found) {
            return Err(Error::WrongResult(format!(
                "nodestore {}: object {i} was {}",
                phase.name(),
                if found { "found but must be missing" } else { "missing but must be found" }
            )));
        }
        hits += u64::from(found);
    }
    Ok(hits)
}

fn check_n(n: u64) -> Result<()> {
    // 11n must not overflow; no benchmark comes near.
    if n == 0 || n > u64::MAX / 16 {
        return Err(Error::InvalidArgument(format!("nodestore: {n} objects is out of range")));
    }
    Ok(())
}

/// What [`run`] returns for `n` objects and seed `seed`, computed from the key seeds alone (a
/// set of the stored ones; no object is generated and no store is touched). `n` must be at least 1.
pub fn expected(n: u64, seed: u64) -> NodeStoreRun {
    let mut stored: BTreeSet<u64> = Phase::Inserts.factory(n, seed).key_seeds().collect();
    stored.extend(Phase::BatchInsert.factory(n, seed).key_seeds_in(0..Phase::BatchInsert.operations(n)));
    let hits = |phase: Phase| phase.factory(n, seed).key_seeds().filter(|k| stored.contains(k)).count() as u64;
    NodeStoreRun {
        hits: Hits {
            fetch_50_50: hits(Phase::Fetch5050),
            fetch_50_50_intended: hits(Phase::Fetch5050Intended),
            ordered_fetch: hits(Phase::OrderedFetch),
            fetch_random: hits(Phase::FetchRandom),
            fetch_missing: hits(Phase::FetchMissing),
        },
        stored: stored.len() as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_phase_is_listed_once_with_a_name_of_its_own() {
        let names: BTreeSet<&str> = Phase::ALL.iter().map(|p| p.name()).collect();
        assert_eq!(names.len(), Phase::ALL.len());
        for (i, phase) in Phase::ALL.into_iter().enumerate() {
            assert_eq!(phase as usize, i, "Phase::ALL is in the enum's (run) order");
        }
    }

    #[test]
    fn only_missing_ranges_never_overlap_the_stored_ones() {
        let n = 1000;
        let run = expected(n, SEED);
        assert_eq!(run.hits.ordered_fetch, n);
        assert_eq!(run.hits.fetch_missing, 0);
        assert!(run.hits.fetch_50_50 <= 5, "{run:?}");
    }
}
