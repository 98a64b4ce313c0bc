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
//! the offline runner's network of canisters (`runner/tests/sharded/main.rs`), and deployed by
//! `scripts/deploy-sharded.sh`.

use candid::{CandidType, Deserialize, Principal};
use serde_bytes::ByteBuf;
use sha2::{Digest, Sha256};

#[cfg(all(target_arch = "wasm32", feature = "kv-canister"))]
mod canister;
#[cfg(any(test, feature = "sqlite"))]
pub mod orders;
#[cfg(target_arch = "wasm32")]
pub mod router;

/// The largest key a shard accepts, bytes.
pub const MAX_KEY_BYTES: usize = 256;
/// The largest value a shard accepts, bytes.
pub const MAX_VALUE_BYTES: usize = 64 * 1024;
/// The most shards a router serves.
pub const MAX_SHARDS: usize = 1024;
/// The most entries one top-k or scan answer holds.
pub const MAX_PAGE: u32 = 1000;

/// Refuses a top-k or a page of 0 or more than [`MAX_PAGE`] entries.
pub fn check_page(limit: u32) -> Result<(), Error> {
    if limit == 0 || limit > MAX_PAGE {
        return Err(Error::InvalidArgument { message: format!("a page of {limit}: 1 to {MAX_PAGE} entries") });
    }
    Ok(())
}

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
    /// No entry under this key.
    NotFound {
        /// The key.
        key: ByteBuf,
    },
    /// A move's destination already holds an entry (a move never overwrites one).
    KeyExists {
        /// The key.
        key: ByteBuf,
    },
    /// An unfinished move holds this key: writes to it wait until the move commits or aborts
    /// (the router's `recover` finishes moves a failure left unfinished).
    Held {
        /// The key.
        key: ByteBuf,
        /// The move.
        move_id: u64,
    },
    /// A move could not finish: the router keeps it in its log as `stage`, and `recover` drives
    /// it on from there (a move that reached `Committing` commits, one at `Aborting` is undone,
    /// and one at `Holding` or `Placing` goes on and may still commit).
    MoveUnfinished {
        /// The move.
        move_id: u64,
        /// Where it stopped.
        stage: Stage,
        /// Why: the failed call's error.
        cause: Box<Error>,
    },
}

/// A key and its value.
pub type Entry = (ByteBuf, ByteBuf);

// ---- Who may do what, for both sets' canisters -----------------------------------------------

/// What a canister's role is called in an error.
pub fn role_name(role: &Option<Role>) -> String {
    match role {
        Some(Role::Router) => "router".into(),
        Some(Role::Shard { .. }) => "shard".into(),
        None => "not installed with a role".into(),
    }
}

/// The router's shards, or why this canister cannot route.
pub fn routes(role: &Option<Role>, shards: Vec<Principal>) -> Result<Vec<Principal>, Error> {
    match role {
        Some(Role::Router) if shards.is_empty() => Err(Error::NoShards),
        Some(Role::Router) => Ok(shards),
        other => Err(Error::WrongRole { role: role_name(other) }),
    }
}

/// Whether `caller` may write to a shard: its router, or a controller.
pub fn may_write(role: &Option<Role>, caller: Principal, controller: bool) -> Result<(), Error> {
    match role {
        Some(Role::Shard { router }) if *router == caller || controller => Ok(()),
        Some(Role::Shard { .. }) => Err(Error::NotAuthorized { caller }),
        other => Err(Error::WrongRole { role: role_name(other) }),
    }
}

/// Whether this canister answers a shard's reads.
pub fn may_read(role: &Option<Role>) -> Result<(), Error> {
    match role {
        Some(Role::Shard { .. }) => Ok(()),
        other => Err(Error::WrongRole { role: role_name(other) }),
    }
}

/// Whether router `me` with shards `existing` may register `new` (once, 1 to [`MAX_SHARDS`],
/// each once, not itself: a key would have two places).
pub fn check_new_shards(
    role: &Option<Role>,
    me: Principal,
    existing: &[Principal],
    new: &[Principal],
) -> Result<(), Error> {
    if *role != Some(Role::Router) {
        return Err(Error::WrongRole { role: role_name(role) });
    }
    if !existing.is_empty() {
        return Err(Error::InvalidArgument {
            message: format!("the router has its {} shards already; its data is not moved", existing.len()),
        });
    }
    if new.is_empty() || new.len() > MAX_SHARDS {
        return Err(Error::InvalidArgument { message: format!("{} shards: 1 to {MAX_SHARDS}", new.len()) });
    }
    let distinct: std::collections::BTreeSet<&Principal> = new.iter().collect();
    if distinct.len() != new.len() || distinct.contains(&me) {
        return Err(Error::InvalidArgument {
            message: "each shard once, and not the router itself: a key would have two places".into(),
        });
    }
    Ok(())
}

/// An order of the users/orders set, as its canister's interface carries it
/// (`sharded-orders/stablebench_sharded_orders.did`).
#[derive(CandidType, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct OrderRow {
    /// Its id, unique across the set.
    pub id: u64,
    /// Its user: the order lives on the user's shard (`shard_of` of the user id, 8 bytes
    /// big-endian).
    pub user: u64,
    /// Its amount.
    pub amount: i64,
}

/// An order joined with its user's email: the join is one shard's, since every order lives on its
/// user's shard.
#[derive(CandidType, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct UserOrder {
    /// The order.
    pub order: OrderRow,
    /// Its user's email.
    pub email: String,
}

/// The order of a top-k of orders: the largest amount first, then the smallest id.
pub fn by_amount(a: &OrderRow, b: &OrderRow) -> std::cmp::Ordering {
    b.amount.cmp(&a.amount).then(a.id.cmp(&b.id))
}

/// The first `limit` items of all `parts` together in the order `cmp`, when each part is sorted
/// by `cmp` and holds (at least) its own first `limit`: a top-k or a page gathered from every
/// shard. Items past a part's end cannot belong before its last one, so the merge is exact.
pub fn merge_sorted<T>(parts: Vec<Vec<T>>, limit: usize, cmp: impl Fn(&T, &T) -> std::cmp::Ordering) -> Vec<T> {
    let mut all: Vec<T> = parts.into_iter().flatten().collect();
    all.sort_by(cmp);
    all.truncate(limit);
    all
}

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

// ---- Moving an entry between shards ----------------------------------------------------------
//
// `move_entry(from, to)` moves the value under key `from` to key `to` (a new key), where the two
// keys may live on different shards. The router coordinates it in stages, each recorded in its
// log in stable memory before the calls it makes (an `await` commits the router's state), and
// every shard step is idempotent, so a step can be sent again after any failure. (This relies on
// a router's calls to one shard arriving in the order it sent them, as the IC delivers the
// requests of guaranteed-response calls between two canisters: a stale place that arrived after
// its move's abort would leave a held copy behind.)
//
// 1. **Holding**: the source shard holds `from` for the move (writes to it are refused, reads
//    still see it) and answers its value.
// 2. **Placing**: the destination shard stores the value under `to` and holds it; it refuses if
//    `to` exists or another move holds it.
// 3. **Committing**: the source removes `from`, the destination keeps `to`; both release their
//    hold. Once here the move is decided: only finishing it is left.
//
// A failure in 1 or 2 turns the move to **Aborting**: the destination removes what it placed
// (if anything) and the source keeps `from`; both release their hold. A failure while committing
// or aborting leaves the stage in the log; the router's `recover` sends it again. So an entry is
// never lost and, once the move is over, held under exactly one key. Between the place and the
// commit a reader sees the value under both keys (and `len` counts it twice).

/// Where a move is, as the router's log records it.
#[derive(CandidType, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Asking the source shard to hold the key.
    Holding,
    /// Asking the destination shard to place the value.
    Placing,
    /// Decided: removing the source's key, keeping the destination's.
    Committing,
    /// Undone: removing the destination's key (if placed), keeping the source's.
    Aborting,
    /// Committed and released on both shards.
    Done,
    /// Aborted and released on both shards.
    Aborted,
}

/// A move in the router's log.
#[derive(CandidType, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Move {
    /// Its id (the router numbers moves from 0).
    pub id: u64,
    /// The key it moves from.
    pub from: ByteBuf,
    /// The key it moves to.
    pub to: ByteBuf,
    /// Where it is.
    pub stage: Stage,
}

/// What the router sends in a stage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// `shard_hold(from, id)` to the source.
    Hold,
    /// `shard_place(to, value, id)` to the destination (the value from the hold; after a restart
    /// the hold is sent again first, which answers the same value).
    Place,
    /// `shard_finish(key, id, remove)` to both shards: `commit` says which keeps the entry.
    Finish {
        /// Commit (the source removes) or abort (the destination removes).
        commit: bool,
    },
    /// Nothing: the move is over.
    Nothing,
}

impl Stage {
    /// What the router sends in this stage.
    pub fn action(self) -> Action {
        match self {
            Stage::Holding => Action::Hold,
            Stage::Placing => Action::Place,
            Stage::Committing => Action::Finish { commit: true },
            Stage::Aborting => Action::Finish { commit: false },
            Stage::Done | Stage::Aborted => Action::Nothing,
        }
    }

    /// The stage after this one's action succeeded (`ok`) or failed. A failed hold or place
    /// undoes the move; a failed finish stays where it is, to be sent again.
    pub fn after(self, ok: bool) -> Stage {
        match (self, ok) {
            (Stage::Holding, true) => Stage::Placing,
            (Stage::Placing, true) => Stage::Committing,
            (Stage::Holding | Stage::Placing, false) => Stage::Aborting,
            (Stage::Committing, true) => Stage::Done,
            (Stage::Aborting, true) => Stage::Aborted,
            (stage, _) => stage,
        }
    }

    /// Whether the move is over.
    pub fn is_over(self) -> bool {
        matches!(self, Stage::Done | Stage::Aborted)
    }
}

/// A shard's storage as the move steps see it: its entries, and which move holds a key.
pub trait Store {
    /// The value under `key`.
    fn get(&self, key: &[u8]) -> Option<Vec<u8>>;
    /// Stores `value` under `key`.
    fn insert(&mut self, key: &[u8], value: Vec<u8>);
    /// Removes `key`.
    fn remove(&mut self, key: &[u8]);
    /// The move holding `key`, if one does.
    fn holder(&self, key: &[u8]) -> Option<u64>;
    /// Holds `key` for move `id`, or releases it (`None`).
    fn set_holder(&mut self, key: &[u8], id: Option<u64>);
}

/// Whether a write may change `key`: not while a move holds it.
pub fn writable(store: &impl Store, key: &[u8]) -> Result<(), Error> {
    match store.holder(key) {
        Some(move_id) => Err(Error::Held { key: ByteBuf::from(key), move_id }),
        None => Ok(()),
    }
}

/// The source's step 1: holds `key` for move `id` and answers its value. Sent again, it answers
/// the same.
pub fn hold(store: &mut impl Store, key: &[u8], id: u64) -> Result<Vec<u8>, Error> {
    match store.holder(key) {
        Some(other) if other != id => return Err(Error::Held { key: ByteBuf::from(key), move_id: other }),
        _ => {}
    }
    let value = store.get(key).ok_or_else(|| Error::NotFound { key: ByteBuf::from(key) })?;
    store.set_holder(key, Some(id));
    Ok(value)
}

/// The destination's step 2: stores `value` under the new `key` and holds it for move `id`.
/// Sent again, it changes nothing. A key move `id` holds with another value is its source's (a
/// move whose two sides are one key of one shard): refused, so the move is undone, not lost.
pub fn place(store: &mut impl Store, key: &[u8], value: Vec<u8>, id: u64) -> Result<(), Error> {
    match store.holder(key) {
        Some(holder) if holder == id && store.get(key).as_deref() == Some(value.as_slice()) => return Ok(()),
        Some(other) => return Err(Error::Held { key: ByteBuf::from(key), move_id: other }),
        None => {}
    }
    if store.get(key).is_some() {
        return Err(Error::KeyExists { key: ByteBuf::from(key) });
    }
    store.insert(key, value);
    store.set_holder(key, Some(id));
    Ok(())
}

/// Step 3 on either shard: releases move `id`'s hold on `key`, removing the entry if `remove`
/// (the source when the move commits, the destination when it aborts). A key the move does not
/// hold is left alone: the step was done before, or (the destination of an abort) never placed.
pub fn finish(store: &mut impl Store, key: &[u8], id: u64, remove: bool) {
    if store.holder(key) == Some(id) {
        if remove {
            store.remove(key);
        }
        store.set_holder(key, None);
    }
}

/// Whether the shard on the `source` side removes its key when the move `commit`s or aborts.
pub fn removes(source: bool, commit: bool) -> bool {
    source == commit
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

/// The router's driver as the canister runs it, synchronously, for native tests of the move
/// protocol on any [`Store`].
#[cfg(test)]
pub(crate) mod sim {
    use super::*;

    /// One move: its keys on the two shards, its id, and what the router makes of the held value
    /// before placing it.
    pub struct Move<'a> {
        pub from: &'a [u8],
        pub to: &'a [u8],
        pub id: u64,
        pub rewrite: fn(Vec<u8>) -> Vec<u8>,
    }

    /// Drives `mv` from `stage` on (`src`, `dst`): every call may fail (`fail()` says so: the call
    /// traps, changing nothing), and the router may stop after the actions of `steps` stages (it
    /// trapped: its log keeps the stage it had reached), with the last one's outcome recorded or
    /// not (`record_last`: a trap in the callback that had the answer). Returns the stage.
    pub fn drive(
        mv: &Move<'_>,
        stage: Stage,
        src: &mut impl Store,
        dst: &mut impl Store,
        (steps, record_last): (usize, bool),
        fail: &mut dyn FnMut() -> bool,
    ) -> Stage {
        let (from, to, id) = (mv.from, mv.to, mv.id);
        let mut stage = stage;
        let mut value = None;
        for step in 0..steps {
            let ok = match stage.action() {
                Action::Hold => !fail() && hold(src, from, id).map(|v| value = Some(v)).is_ok(),
                Action::Place => {
                    let v = match value.take() {
                        Some(v) => Some(v),
                        None if !fail() => hold(src, from, id).ok(),
                        None => None,
                    };
                    v.is_some_and(|v| !fail() && place(dst, to, (mv.rewrite)(v), id).is_ok())
                }
                Action::Finish { commit } => {
                    // Two calls in flight together: each may fail on its own.
                    let a = !fail();
                    if a {
                        finish(src, from, id, removes(true, commit));
                    }
                    let b = !fail();
                    if b {
                        finish(dst, to, id, removes(false, commit));
                    }
                    a && b
                }
                Action::Nothing => return stage,
            };
            if step + 1 == steps && !record_last {
                return stage;
            }
            let next = stage.after(ok);
            if next == stage {
                return stage;
            }
            stage = next;
        }
        stage
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: u32) -> Vec<u8> {
        Sha256::digest(i.to_le_bytes()).to_vec()
    }

    #[test]
    fn pages_and_top_k_merge_to_those_of_all_parts_together() {
        let parts = vec![vec![1, 4, 9], vec![2, 3, 10, 11], Vec::new(), vec![5]];
        assert_eq!(merge_sorted(parts.clone(), 4, |a: &u32, b| a.cmp(b)), [1, 2, 3, 4]);
        assert_eq!(merge_sorted(parts, 100, |a: &u32, b| a.cmp(b)), [1, 2, 3, 4, 5, 9, 10, 11]);
        let o = |id, amount| OrderRow { id, user: 1, amount };
        let mut v = [o(3, 5), o(1, 7), o(2, 5), o(4, -1)];
        v.sort_by(by_amount);
        assert_eq!(v.iter().map(|o| o.id).collect::<Vec<_>>(), [1, 2, 3, 4]);
        assert!(check_page(0).is_err());
        assert_eq!((check_page(1), check_page(MAX_PAGE)), (Ok(()), Ok(())));
        assert!(check_page(MAX_PAGE + 1).is_err());
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

    /// A shard's storage in memory, for the move steps.
    #[derive(Default, Clone, Debug, PartialEq)]
    struct Mem {
        data: std::collections::BTreeMap<Vec<u8>, Vec<u8>>,
        held: std::collections::BTreeMap<Vec<u8>, u64>,
    }

    impl Store for Mem {
        fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
            self.data.get(key).cloned()
        }
        fn insert(&mut self, key: &[u8], value: Vec<u8>) {
            self.data.insert(key.to_vec(), value);
        }
        fn remove(&mut self, key: &[u8]) {
            self.data.remove(key);
        }
        fn holder(&self, key: &[u8]) -> Option<u64> {
            self.held.get(key).copied()
        }
        fn set_holder(&mut self, key: &[u8], id: Option<u64>) {
            match id {
                Some(id) => self.held.insert(key.to_vec(), id),
                None => self.held.remove(key),
            };
        }
    }

    #[test]
    fn a_move_loses_nothing_whatever_fails_and_recovery_finishes_it() {
        let value = b"value".to_vec();
        let mut outcomes = std::collections::BTreeSet::new();
        // Every pattern of failed calls among the first ten, with the router stopping after
        // any number of stages; then `recover` drives the move from its logged stage until
        // it is over.
        for pattern in 0u32..1 << 10 {
            for stop in (1..=4).flat_map(|steps| [(steps, true), (steps, false)]) {
                let mut src = Mem::default();
                src.insert(b"from", value.clone());
                let mut dst = Mem::default();
                let mut call = 0;
                let mut fail = || {
                    call += 1;
                    call <= 10 && pattern & (1 << (call - 1)) != 0
                };
                let mv = sim::Move { from: b"from", to: b"to", id: 7, rewrite: |v| v };
                let mut stage = sim::drive(&mv, Stage::Holding, &mut src, &mut dst, stop, &mut fail);
                for _ in 0..3 {
                    stage = sim::drive(&mv, stage, &mut src, &mut dst, (usize::MAX, true), &mut || false);
                }
                assert!(stage.is_over(), "pattern {pattern:b}, stopped at {stop:?}: {stage:?}");
                let (at_from, at_to) = (src.get(b"from"), dst.get(b"to"));
                match stage {
                    Stage::Done => assert_eq!((at_from, at_to), (None, Some(value.clone()))),
                    _ => assert_eq!((at_from, at_to), (Some(value.clone()), None)),
                }
                assert!(src.held.is_empty() && dst.held.is_empty(), "pattern {pattern:b}: holds left");
                outcomes.insert(stage == Stage::Done);
            }
        }
        assert_eq!(outcomes.len(), 2, "some patterns commit, some abort");
    }

    #[test]
    fn a_move_never_overwrites_and_held_keys_refuse_writes() {
        let mut src = Mem::default();
        src.insert(b"a", b"1".to_vec());
        src.insert(b"b", b"2".to_vec());
        // The destination exists: the place is refused and nothing changes.
        assert_eq!(hold(&mut src, b"a", 1), Ok(b"1".to_vec()));
        assert_eq!(
            place(&mut src, b"b", b"1".to_vec(), 1),
            Err(Error::KeyExists { key: ByteBuf::from(b"b".to_vec()) })
        );
        // While held: another move and a write are refused, a read still sees it.
        assert_eq!(hold(&mut src, b"a", 2), Err(Error::Held { key: ByteBuf::from(b"a".to_vec()), move_id: 1 }));
        assert_eq!(writable(&src, b"a"), Err(Error::Held { key: ByteBuf::from(b"a".to_vec()), move_id: 1 }));
        assert_eq!(src.get(b"a"), Some(b"1".to_vec()));
        // Sent again, a hold answers the same; an abort keeps the source and releases it.
        assert_eq!(hold(&mut src, b"a", 1), Ok(b"1".to_vec()));
        finish(&mut src, b"a", 1, removes(true, false));
        assert_eq!((src.get(b"a"), src.holder(b"a"), writable(&src, b"a")), (Some(b"1".to_vec()), None, Ok(())));
        // A finish of a move that holds nothing changes nothing.
        finish(&mut src, b"b", 9, true);
        assert_eq!(src.get(b"b"), Some(b"2".to_vec()));
        assert_eq!(hold(&mut src, b"none", 3), Err(Error::NotFound { key: ByteBuf::from(b"none".to_vec()) }));
        // A move whose source and destination are one key of one shard (an order moved to a user
        // of its own shard through the protocol): the place is refused and the abort keeps it.
        assert_eq!(hold(&mut src, b"b", 4), Ok(b"2".to_vec()));
        assert_eq!(
            place(&mut src, b"b", b"2'".to_vec(), 4),
            Err(Error::Held { key: ByteBuf::from(b"b".to_vec()), move_id: 4 })
        );
        finish(&mut src, b"b", 4, removes(true, false));
        finish(&mut src, b"b", 4, removes(false, false));
        assert_eq!((src.get(b"b"), src.holder(b"b")), (Some(b"2".to_vec()), None));
    }

    #[test]
    fn roles_decide_who_routes_writes_and_reads() {
        let (router, stranger) = (Principal::from_slice(&[1]), Principal::from_slice(&[2]));
        let shard = Some(Role::Shard { router });
        assert_eq!(may_write(&shard, router, false), Ok(()));
        assert_eq!(may_write(&shard, stranger, true), Ok(()), "a controller");
        assert_eq!(may_write(&shard, stranger, false), Err(Error::NotAuthorized { caller: stranger }));
        assert_eq!(may_write(&Some(Role::Router), router, true), Err(Error::WrongRole { role: "router".into() }));
        assert_eq!(may_read(&None), Err(Error::WrongRole { role: "not installed with a role".into() }));
        assert_eq!(routes(&Some(Role::Router), vec![]), Err(Error::NoShards));
        assert_eq!(routes(&shard, vec![router]), Err(Error::WrongRole { role: "shard".into() }));
        let (a, b) = (Principal::from_slice(&[3]), Principal::from_slice(&[4]));
        let r = Some(Role::Router);
        assert_eq!(check_new_shards(&r, router, &[], &[a, b]), Ok(()));
        for (existing, new) in [(vec![a], vec![b]), (vec![], vec![]), (vec![], vec![a, a]), (vec![], vec![a, router])] {
            assert!(matches!(check_new_shards(&r, router, &existing, &new), Err(Error::InvalidArgument { .. })));
        }
        assert!(matches!(check_new_shards(&shard, router, &[], &[a]), Err(Error::WrongRole { .. })));
    }
}
