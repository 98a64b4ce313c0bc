//! Key-value data sharded across canisters: one router canister and N shard canisters, built as
//! one wasm (`stablebench_sharded.wasm`) whose role is chosen at install.
//!
//! - **Routing.** A key belongs to shard [`shard_of`]`(key, n)`: Lamping and Veach's jump
//!   consistent hash of the first 8 bytes of the key's SHA-256. Any client can compute it (the
//!   router's `shard_for` says the same), and growing from n to n + 1 shards would move only the
//!   1 / (n + 1) of the keys that the new shard takes (this canister does not move them: its shard
//!   list is fixed once data exists).
//! - **The router** (`canister` module) forwards a point read or write to its shard (one
//!   inter-canister call), splits a batch by shard and sends the parts together, and fans a count,
//!   a top-k and a paginated scan out to every shard, merging the answers.
//! - **A shard** keeps its keys in a `StableBTreeMap` and takes writes from its router or its
//!   controllers only.
//!
//! The routing is plain Rust, tested natively here; the canister is tested and measured through
//! the offline runner's network of canisters (`runner/tests/sharded.rs`), and deployed by
//! `scripts/deploy-sharded.sh`.

use candid::{CandidType, Deserialize, Principal};
use serde_bytes::ByteBuf;
use sha2::{Digest, Sha256};

#[cfg(target_arch = "wasm32")]
mod canister;

/// The largest key a shard accepts, bytes.
pub const MAX_KEY_BYTES: usize = 256;
/// The largest value a shard accepts, bytes.
pub const MAX_VALUE_BYTES: usize = 64 * 1024;
/// The most shards a router serves.
pub const MAX_SHARDS: usize = 1024;
/// The most entries one top-k or scan answer holds.
pub const MAX_PAGE: u32 = 1000;

/// What the canister is, chosen at install.
#[derive(CandidType, Deserialize, Clone, Debug, PartialEq, Eq)]
pub enum Role {
    /// Routes calls to its shards (registered with `add_shards`).
    Router,
    /// Holds keys; takes writes from `router` or its controllers.
    Shard {
        /// The router that writes to it.
        router: Principal,
    },
}

/// What fails, and why; a call that fails changes nothing, but a batch that reached several
/// shards may have been applied by some (`ShardFailed` names the one that failed; puts can be
/// sent again).
#[derive(CandidType, Deserialize, Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// The caller may not write here.
    NotAuthorized {
        /// Who called.
        caller: Principal,
    },
    /// This method is the other role's.
    WrongRole {
        /// What this canister is.
        role: String,
    },
    /// The router has no shards yet: call `add_shards`.
    NoShards,
    /// An argument is out of range.
    InvalidArgument {
        /// What is wrong and what would be accepted.
        message: String,
    },
    /// A shard rejected the call, trapped, or does not exist (nothing was changed on it), or the
    /// call could not be made or its answer not decoded (code 0; the shard may have applied it).
    ShardFailed {
        /// The shard.
        shard: Principal,
        /// The reject code (2: transient, the call can be retried; 3: no such canister; 4: it
        /// rejected; 5: it trapped), or 0.
        code: u32,
        /// The reject message.
        message: String,
    },
}

/// A key and its value.
pub type Entry = (ByteBuf, ByteBuf);

/// The shard (0..`shards`) that holds `key`: the jump consistent hash of the first 8 bytes of
/// the key's SHA-256 (John Lamping and Eric Veach, "A Fast, Minimal Memory, Consistent Hash
/// Algorithm", 2014, arXiv:1406.2294; the reference code, transcribed: a crate for ten lines
/// would add a dependency to every canister that routes).
///
/// # Panics
/// If `shards` is 0.
pub fn shard_of(key: &[u8], shards: u32) -> u32 {
    assert!(shards > 0, "no shards to route to");
    let digest = Sha256::digest(key);
    let mut hash = u64::from_be_bytes(digest[..8].try_into().expect("8 bytes"));
    let (mut b, mut j) = (-1i64, 0i64);
    while j < shards as i64 {
        b = j;
        hash = hash.wrapping_mul(2862933555777941757).wrapping_add(1);
        j = ((b + 1) as f64 * ((1u64 << 31) as f64 / ((hash >> 33) + 1) as f64)) as i64;
    }
    b as u32
}

/// Bytes of keys and values one page holds at most: a shard's and the router's replies stay
/// under the 2 MiB reply limit, with room for Candid's framing.
pub const PAGE_BYTES: usize = 1 << 20;

/// Entries in key order (ascending for a scan, descending for a top-k), and whether the page
/// holds all the request asked for: `false` when [`PAGE_BYTES`] cut it short (a scan goes on
/// after its last key as always; a top-k says it holds fewer than `k`).
#[derive(CandidType, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct Page {
    /// The entries.
    pub entries: Vec<Entry>,
    /// Not cut short by the page's byte budget.
    pub complete: bool,
}

/// The first `limit` entries of `iter` (already in the page's order) that fit [`PAGE_BYTES`].
pub fn page(iter: impl Iterator<Item = (Vec<u8>, Vec<u8>)>, limit: usize) -> Page {
    let mut page = Page { entries: Vec::new(), complete: true };
    let mut bytes = 0;
    for (k, v) in iter.take(limit) {
        bytes += k.len() + v.len();
        if bytes > PAGE_BYTES {
            page.complete = false;
            break;
        }
        page.entries.push((ByteBuf::from(k), ByteBuf::from(v)));
    }
    page
}

/// Merges the shards' pages (each in the page's order: ascending, or `descending` for a top-k)
/// into one page of at most `limit` entries and [`PAGE_BYTES`]. A shard's page that was cut short
/// may have entries after its last one that belong before other shards' entries, so the merged
/// page stops at the earliest such last key: it stays a prefix, in order, of every shard's
/// entries together.
pub fn merge_pages(parts: Vec<Page>, limit: usize, descending: bool) -> Page {
    let before = |a: &[u8], b: &[u8]| if descending { a > b } else { a < b };
    let mut cutoff: Option<Vec<u8>> = None;
    for part in parts.iter().filter(|p| !p.complete) {
        if let Some((last, _)) = part.entries.last() {
            if cutoff.as_ref().is_none_or(|c| before(last, c)) {
                cutoff = Some(last.to_vec());
            }
        }
    }
    let cut = parts.iter().any(|p| !p.complete);
    let mut all: Vec<Entry> = parts.into_iter().flat_map(|p| p.entries).collect();
    all.sort_by(|a, b| if descending { b.0.cmp(&a.0) } else { a.0.cmp(&b.0) });
    let within = |k: &[u8]| cutoff.as_deref().is_none_or(|c| k == c || before(k, c));
    let kept = all.into_iter().take_while(|(k, _)| within(k)).map(|(k, v)| (k.into_vec(), v.into_vec()));
    let mut merged = page(kept, limit);
    merged.complete &= !cut || merged.entries.len() == limit;
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: u32) -> Vec<u8> {
        Sha256::digest(i.to_le_bytes()).to_vec()
    }

    #[test]
    fn one_shard_holds_everything() {
        assert!((0..1000).all(|i| shard_of(&key(i), 1) == 0));
    }

    #[test]
    fn keys_spread_evenly_and_growing_moves_only_the_new_shards_share() {
        const KEYS: u32 = 16_000;
        for n in [2u32, 4, 8, 16] {
            let mut counts = vec![0u32; n as usize];
            let mut moved = 0u32;
            for i in 0..KEYS {
                let s = shard_of(&key(i), n);
                counts[s as usize] += 1;
                let grown = shard_of(&key(i), n + 1);
                if grown != s {
                    // Jump hash moves a key only to the new shard.
                    assert_eq!(grown, n);
                    moved += 1;
                }
            }
            let even = KEYS / n;
            assert!(counts.iter().all(|&c| c.abs_diff(even) < even / 10), "{n} shards: {counts:?}");
            let share = KEYS / (n + 1);
            assert!(moved.abs_diff(share) < share / 10, "{n} → {}: {moved} moved, about {share} expected", n + 1);
        }
    }

    #[test]
    fn the_routing_matches_an_independent_transcription_and_never_changes() {
        // Computed with a Python transcription of the paper's reference code (hashlib's
        // SHA-256, the first 8 bytes big-endian): deployed routers and clients must agree.
        let routed: Vec<u32> = (0..8).map(|i| shard_of(&key(i), 16)).collect();
        assert_eq!(routed, [15, 7, 4, 10, 14, 6, 11, 10]);
        let routed: Vec<u32> = (0..8).map(|i| shard_of(&key(i), 3)).collect();
        assert_eq!(routed, [0, 2, 0, 2, 0, 0, 1, 2]);
        assert_eq!(shard_of(b"stablebench", 1000), 137);
    }

    fn part(keys: &[u8], complete: bool) -> Page {
        Page { entries: keys.iter().map(|&k| (ByteBuf::from(vec![k]), ByteBuf::from(vec![k]))).collect(), complete }
    }

    fn keys(p: &Page) -> Vec<u8> {
        p.entries.iter().map(|(k, _)| k[0]).collect()
    }

    #[test]
    fn merged_pages_keep_key_order_and_the_limit() {
        let parts = vec![part(&[1, 4], true), part(&[2, 3, 9], true)];
        let merged = merge_pages(parts, 3, false);
        assert_eq!((keys(&merged), merged.complete), (vec![1, 2, 3], true));
        let top = merge_pages(vec![part(&[4, 1], true), part(&[9, 3, 2], true)], 2, true);
        assert_eq!(keys(&top), [9, 4]);
    }

    #[test]
    fn a_page_cut_short_stops_the_merge_at_its_last_key() {
        // The first shard stopped at 4: its next key could be 5, before the other shard's 6.
        let merged = merge_pages(vec![part(&[1, 4], false), part(&[2, 6, 7], true)], 10, false);
        assert_eq!((keys(&merged), merged.complete), (vec![1, 2, 4], false));
        let top = merge_pages(vec![part(&[9, 5], false), part(&[8, 3], true)], 10, true);
        assert_eq!((keys(&top), top.complete), (vec![9, 8, 5], false));
    }

    #[test]
    fn a_page_holds_at_most_its_byte_budget() {
        let big = vec![0u8; PAGE_BYTES / 3];
        let p = page((0..5u8).map(|i| (vec![i], big.clone())), 5);
        assert_eq!((p.entries.len(), p.complete), (2, false));
        let p = page((0..5u8).map(|i| (vec![i], vec![i])), 3);
        assert_eq!((p.entries.len(), p.complete), (3, true));
    }
}
