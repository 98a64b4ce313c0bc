//! The key-value endpoints: the grid's four backends behind Candid, so that a single call's cost
//! (Candid decoding, the controller check, the operation, its commit, the reply) can be measured
//! on the production wasm, and so that a dfx user can load and query each backend.
//!
//! - `sqlite` / `sqlite_rowid`: tables `kv` and `kv_rowid` in the canister's SQLite database
//!   (created by the first write, so the users/orders database is untouched until then);
//! - `stable_btreemap`: a `StableBTreeMap` in its own virtual memory (`memory_ids::STABLE_BTREEMAP`);
//! - `heap_btreemap`: a `BTreeMap` in the heap, written whole to stable memory in `pre_upgrade`
//!   (`memory_ids::HEAP_BTREEMAP_SNAPSHOT`) and read back in `post_upgrade`.

use std::cell::{Cell as Flag, RefCell};

use candid::{CandidType, Deserialize};
use ic_stable_structures::memory_manager::VirtualMemory;
use ic_stable_structures::{DefaultMemoryImpl, Memory};
use serde_bytes::ByteBuf;
use stablebench::kv::gen::TrieDataset;
use stablebench::kv::heap::HeapKv;
use stablebench::kv::sqlite::{self, Layout, SqliteKv};
use stablebench::kv::stable::StableKv;
use stablebench::kv::{trie, Key, KvStore};
use stablebench::Meter;
use stablebench_grid::cells::Backend;
use stablebench_grid::ic::memory_ids;
use stablebench_grid::KV_SEED;

use crate::limits::{InstructionBudget, QUERY_BUDGET};
use crate::{cost_now, db, require_controller, update_budget, Batch, Cost, Error};

/// Entries per transaction (and between two budget checks) in `kv_load`.
const LOAD_CHUNK: u64 = 500;

/// The heap map stops taking writes when the heap passes half the default `wasm_memory_limit`
/// (declared once in the grid, where the reports read it too: `post_upgrade` needs about twice
/// the map's size; past this the canister could not be upgraded any more).
const HEAP_MAP_CEILING_BYTES: u64 = stablebench_grid::ic::HEAP_MAP_CEILING_BYTES;

/// A key-value backend, as Candid names it.
#[derive(CandidType, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum KvBackend {
    /// SQLite, `kv(key BLOB PRIMARY KEY, value BLOB) WITHOUT ROWID`.
    #[serde(rename = "sqlite")]
    Sqlite,
    /// SQLite, rowid table with a UNIQUE index on the key.
    #[serde(rename = "sqlite_rowid")]
    SqliteRowid,
    /// `StableBTreeMap` in stable memory.
    #[serde(rename = "stable_btreemap")]
    StableBTreeMap,
    /// `BTreeMap` in the heap, saved across upgrades.
    #[serde(rename = "heap_btreemap")]
    HeapBTreeMap,
}

impl TryFrom<Backend> for KvBackend {
    type Error = Error;
    fn try_from(b: Backend) -> Result<KvBackend, Error> {
        match b {
            Backend::Sqlite => Ok(KvBackend::Sqlite),
            Backend::SqliteRowid => Ok(KvBackend::SqliteRowid),
            Backend::StableBTreeMap => Ok(KvBackend::StableBTreeMap),
            Backend::HeapBTreeMap => Ok(KvBackend::HeapBTreeMap),
            Backend::Blob => {
                Err(Error::InvalidArgument { message: "blob is a sysrepo store, not a key-value backend".to_string() })
            }
            Backend::SqliteVfs | Backend::SqliteVfsRowid => Err(Error::InvalidArgument {
                message: format!("{} runs in the ic-sqlite-vfs canister (stablebench_vfs)", b.name()),
            }),
        }
    }
}

impl From<KvBackend> for Backend {
    fn from(b: KvBackend) -> Backend {
        match b {
            KvBackend::Sqlite => Backend::Sqlite,
            KvBackend::SqliteRowid => Backend::SqliteRowid,
            KvBackend::StableBTreeMap => Backend::StableBTreeMap,
            KvBackend::HeapBTreeMap => Backend::HeapBTreeMap,
        }
    }
}

thread_local! {
    static STABLE: RefCell<StableKv<VirtualMemory<DefaultMemoryImpl>>> =
        RefCell::new(StableKv::init(db::memory(memory_ids::STABLE_BTREEMAP)));
    static HEAP: RefCell<HeapKv> = RefCell::new(HeapKv::default());
    // Whether each SQLite table is known to exist in this instance (checked once, not per call).
    static TABLES: [Flag<bool>; 2] = const { [Flag::new(false), Flag::new(false)] };
}

/// Runs `f` on `backend`. With `create`, a missing SQLite table is created first (updates);
/// without, `f` gets `None` when it does not exist (queries, which cannot create it), and SQLite
/// reads run under the query budget (a `count(*)` over a large table stops with
/// `InstructionLimit` instead of trapping at the 5 B limit).
pub(crate) fn with_store<T>(
    backend: KvBackend,
    create: bool,
    f: impl FnOnce(Option<&mut dyn KvStore>) -> stablebench::Result<T>,
) -> Result<T, Error> {
    Ok(match Layout::of(backend.into()) {
        Some(layout) => db::with_conn(|conn| {
            let known = TABLES.with(|t| t[layout as usize].get());
            if !known {
                if create {
                    sqlite::create(conn, layout)?;
                    sqlite::prepare(conn, layout)?;
                } else if !sqlite::exists(conn, layout)? {
                    return f(None);
                }
                TABLES.with(|t| t[layout as usize].set(true));
            }
            let mut store = SqliteKv::new(conn, layout);
            if create {
                f(Some(&mut store))
            } else {
                stablebench::jobs::guarded(conn, &InstructionBudget(QUERY_BUDGET), || f(Some(&mut store)))
            }
        })?,
        None if backend == KvBackend::StableBTreeMap => STABLE.with_borrow_mut(|s| f(Some(s)))?,
        None if create && crate::memory::heap_bytes() > HEAP_MAP_CEILING_BYTES => {
            return Err(Error::InvalidArgument {
                message: format!(
                    "the heap is over {} bytes: the heap map takes no more writes, because reading it back in \
                     post_upgrade needs about as much heap again and the canister could no longer be upgraded",
                    HEAP_MAP_CEILING_BYTES
                ),
            })
        }
        None => HEAP.with_borrow_mut(|h| f(Some(h)))?,
    })
}

/// Opens every backend once per instance (`init`, `post_upgrade`): the `StableBTreeMap`'s header
/// is read, the SQLite tables looked up and their statements prepared here, in an update context,
/// because queries cannot keep anything in the heap and would otherwise repeat all three on every
/// call until an update ran.
pub fn open() {
    STABLE.with(|_| ());
    if let Err(e) = db::with_conn(|conn| -> stablebench::Result<()> {
        for layout in Layout::ALL {
            let present = sqlite::exists(conn, layout)?;
            if present {
                sqlite::prepare(conn, layout)?;
            }
            TABLES.with(|t| t[layout as usize].set(present));
        }
        Ok(())
    }) {
        ic_cdk::trap(format!("looking up the key-value tables: {e}"));
    }
}

pub(crate) fn key(bytes: &[u8]) -> Result<Key, Error> {
    bytes.try_into().map_err(|_| Error::InvalidArgument { message: format!("a key is 32 bytes, not {}", bytes.len()) })
}

/// Stores `value` under the 32-byte `key` in `backend`: one transaction. Controllers only.
#[ic_cdk::update(manual_reply = true)]
fn kv_put(backend: KvBackend, key_bytes: ByteBuf, value: ByteBuf) -> Result<Cost, Error> {
    crate::send((|| -> Result<Cost, Error> {
        require_controller()?;
        let k = key(&key_bytes)?;
        with_store(backend, true, |s| s.expect("created").put(&k, &value))?;
        Ok(cost_now())
    })())
}

/// The value under the 32-byte `key` in `backend`, if any.
#[ic_cdk::query(manual_reply = true, guard = "crate::discarded")]
fn kv_get(backend: KvBackend, key_bytes: ByteBuf) -> Result<Option<ByteBuf>, Error> {
    crate::send((|| -> Result<Option<ByteBuf>, Error> {
        let k = key(&key_bytes)?;
        with_store(backend, false, |s| match s {
            Some(s) => s.get(&k).map(|v| v.map(ByteBuf::from)),
            None => Ok(None),
        })
    })())
}

/// How many keys `backend` holds.
#[ic_cdk::query(manual_reply = true, guard = "crate::discarded")]
fn kv_len(backend: KvBackend) -> Result<u64, Error> {
    crate::send(with_store(backend, false, |s| match s {
        Some(s) => s.len(),
        None => Ok(0),
    }))
}

/// Writes entries `offset .. offset + count` of the trie benchmark's data set of `size` keys (a
/// multiple of 100, at least 200; random 32-byte keys, Kusama-distributed values, seed 50; each
/// entry's warm-up twin with it) into `backend`, in chunks of 500 entries (one SQLite transaction
/// each), until the instruction budget (default 30 B) is used; call again from `next_offset` until `complete`. Entries are a function of their index,
/// so a repeated call rewrites the same values: retries and resumes never duplicate. Controllers
/// only.
#[ic_cdk::update(manual_reply = true)]
fn kv_load(backend: KvBackend, size: u64, offset: u64, count: u64, budget: Option<u64>) -> Result<Batch, Error> {
    crate::send((|| -> Result<Batch, Error> {
        require_controller()?;
        let meter = update_budget(budget)?;
        let data = TrieDataset::new(size, KV_SEED)?;
        if count == 0 || offset >= size {
            return Err(Error::InvalidArgument {
                message: format!("offset {offset} and count {count}: need count >= 1 and offset < {size}"),
            });
        }
        let end = offset.saturating_add(count).min(size);
        with_store(backend, true, |s| load(s.expect("created"), &data, offset, end, LOAD_CHUNK, &meter))
    })())
}

/// Loads entries `offset..end`, `chunk` at a time, until `meter` runs out. A chunk is one SQLite
/// transaction; if one fails after earlier chunks were committed, the call traps, so that the IC
/// discards the whole message and the backend is as it was before the call (a failed update loses
/// nothing and keeps nothing).
pub(crate) fn load(
    store: &mut dyn KvStore,
    data: &TrieDataset,
    offset: u64,
    end: u64,
    chunk: u64,
    meter: &InstructionBudget,
) -> stablebench::Result<Batch> {
    let mut next = offset;
    while next < end && !meter.exhausted() {
        let stop = (next + chunk).min(end);
        match trie::load(store, data, next..stop, chunk as usize) {
            Ok(_) => next = stop,
            Err(e) if next == offset => return Err(e),
            Err(e) => ic_cdk::trap(format!("kv_load failed after entries {offset}..{next} were written: {e}")),
        }
    }
    Ok(Batch { inserted: next - offset, next_offset: next, complete: next >= end, instructions: meter.used() })
}

/// Empties every backend, as a fresh install has them (the benchmark canister's reset, after
/// `db::reset` emptied the database): a new `StableBTreeMap` over the old one, an empty heap map,
/// the SQLite tables to be created again.
#[cfg(feature = "canbench")]
pub fn reset() {
    STABLE.set(StableKv::new(db::memory(memory_ids::STABLE_BTREEMAP)));
    HEAP.set(HeapKv::default());
    TABLES.with(|t| t.iter().for_each(|f| f.set(false)));
}

/// Runs `f` on the heap map.
#[cfg(feature = "canbench")]
pub fn with_heap<R>(f: impl FnOnce(&HeapKv) -> R) -> R {
    HEAP.with_borrow(f)
}

/// Writes the heap map to stable memory (`pre_upgrade`).
pub fn save_heap() {
    let memory = db::memory(memory_ids::HEAP_BTREEMAP_SNAPSHOT);
    // A map that was never used needs no snapshot (and would take an 8 MiB bucket for nothing).
    if memory.size() == 0 && HEAP.with_borrow(|h| h.map().is_empty()) {
        return;
    }
    if let Err(e) = HEAP.with_borrow(|h| h.save(&memory)) {
        ic_cdk::trap(format!("saving the heap map before the upgrade: {e}"));
    }
}

/// Reads the heap map back (`post_upgrade`); a snapshot that does not read back fails the
/// upgrade, which leaves the canister as it was.
pub fn load_heap() {
    let memory = db::memory(memory_ids::HEAP_BTREEMAP_SNAPSHOT);
    match HeapKv::load(&memory) {
        Ok(h) => HEAP.set(h),
        Err(e) => ic_cdk::trap(format!("reading the heap map after the upgrade: {e}")),
    }
}

/// Builds the type tables of the key-value query replies in an update (see `stablebench_grid::reply`).
pub fn warm_query_replies() {
    stablebench_grid::reply::warm::<Result<Option<ByteBuf>, Error>>();
    stablebench_grid::reply::warm::<Result<u64, Error>>();
}

#[cfg(test)]
mod tests {
    use candid::types::{CandidType as _, TypeInner};

    use super::*;

    const ALL: [KvBackend; 4] =
        [KvBackend::Sqlite, KvBackend::SqliteRowid, KvBackend::StableBTreeMap, KvBackend::HeapBTreeMap];

    #[test]
    fn every_backend_is_named_as_its_grid_backend() {
        let TypeInner::Variant(fields) = KvBackend::ty().as_ref().clone() else { panic!("KvBackend is a variant") };
        let mut candid: Vec<String> = fields.iter().map(|f| f.id.to_string()).collect();
        let mut grid: Vec<String> = ALL.iter().map(|&b| Backend::from(b).name().to_string()).collect();
        candid.sort();
        grid.sort();
        assert_eq!(candid, grid);
        for b in ALL {
            assert_eq!(KvBackend::try_from(Backend::from(b)), Ok(b), "{b:?} round-trips through the grid");
        }
    }

    #[test]
    fn the_api_has_every_key_value_backend_of_the_grid_and_refuses_the_others() {
        let mut ours: Vec<&str> = ALL.iter().map(|&b| Backend::from(b).name()).collect();
        let mut grid: Vec<&str> = stablebench_grid::cells::BACKENDS.iter().map(|b| b.name()).collect();
        ours.sort();
        grid.sort();
        assert_eq!(ours, grid);
        for b in [Backend::Blob, Backend::SqliteVfs, Backend::SqliteVfsRowid] {
            assert!(matches!(KvBackend::try_from(b), Err(Error::InvalidArgument { .. })), "{}", b.name());
        }
    }
}
