//! Key-value storage behind one small trait, and the key-value workloads that run on it.
//!
//! Four backends implement [`KvStore`]: SQLite (`kv(key BLOB PRIMARY KEY, value BLOB) WITHOUT
//! ROWID`, [`sqlite::SqliteKv`] with [`sqlite::Layout::WithoutRowid`]), SQLite with a rowid table
//! and a UNIQUE index on the key ([`sqlite::Layout::Rowid`]), ic-stable-structures'
//! `StableBTreeMap` ([`stable::StableKv`]) and a `std::collections::BTreeMap` in the heap that is
//! written whole to stable memory before an upgrade ([`heap::HeapKv`]). Every backend is plain
//! Rust over a `rusqlite::Connection` or an ic-stable-structures `Memory`, so the same code runs
//! in the canister and natively in the tests (SQLite `bundled`, `VectorMemory`), where each is
//! checked against a `BTreeMap` model on generated operation sequences.
//!
//! The workloads ([`trie`]: Substrate's trie read/write benchmark; [`nodestore`]: rippled's
//! NodeStore timing test) take any [`KvStore`] and a [`Probe`], which reads the instruction
//! counter and opens named phases (`performance_counter` and canbench's `bench_scope` in the
//! canister; nothing natively).

pub mod gen;
pub mod heap;
pub mod nodestore;
pub mod sqlite;
pub mod stable;
pub mod trie;

use crate::Result;

/// A key: 32 bytes, as in both seed systems (Substrate's random keys, rippled's 256-bit hashes).
pub type Key = [u8; 32];

/// A key-value store as the workloads use it. Every write method is one atomic transaction: it
/// is applied entirely or (on an error) not at all, and a SQLite backend commits it before it
/// returns.
pub trait KvStore {
    /// The value stored under `key`, if any.
    fn get(&mut self, key: &Key) -> Result<Option<Vec<u8>>>;
    /// Stores `value` under `key`, replacing any previous value: one transaction.
    fn put(&mut self, key: &Key, value: &[u8]) -> Result<()>;
    /// Stores every pair in order (a later duplicate key wins): one transaction.
    ///
    /// The default puts each pair in turn, which is one transaction only for a store whose `put`
    /// cannot fail halfway: the maps, which have no transactions and need none on the IC (a
    /// message's stable-memory and heap writes are kept as a whole when it returns and discarded
    /// as a whole if it traps). A transactional store (SQLite) overrides it.
    fn put_batch(&mut self, items: &[(Key, Vec<u8>)]) -> Result<()> {
        for (key, value) in items {
            self.put(key, value)?;
        }
        Ok(())
    }
    /// Removes `key`; returns whether it was present: one transaction.
    fn remove(&mut self, key: &Key) -> Result<bool>;
    /// The number of keys stored.
    fn len(&mut self) -> Result<u64>;
    /// Whether the store holds no key.
    fn is_empty(&mut self) -> Result<bool> {
        Ok(self.len()? == 0)
    }
    /// Drops every cache the backend keeps in the heap, so the next reads go to stable memory as
    /// they do after an upgrade ("cold"). SQLite empties its page cache
    /// (`sqlite3_db_release_memory`); the BTreeMaps keep no cache (ic-stable-structures 0.7 has no
    /// node cache; the heap map *is* the data), so for them it does nothing.
    fn drop_caches(&mut self) -> Result<()>;
}

/// Where a workload reads the instruction counter and marks its phases. In the canister:
/// `ic0.performance_counter(0)` and canbench's `bench_scope`; natively: a counter that stays 0
/// and no scopes.
pub trait Probe {
    /// Instructions executed so far in this message.
    fn instructions(&self) -> u64;
    /// Runs `f` as the named phase (a canbench `bench_scope` in the canister).
    fn phase<R>(&self, name: &'static str, f: impl FnOnce() -> R) -> R;
    /// A timed part that would be a message of its own on the IC starts here, right before its
    /// first [`Probe::instructions`] read: the benchmark canister tells the offline runner, which
    /// prices what follows as a new message (the pages it touches are charged afresh; see
    /// docs/mainnet.md). Nothing natively.
    fn message_starts(&self) {}
}

/// The native [`Probe`]: no counter, no scopes.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoProbe;

impl Probe for NoProbe {
    fn instructions(&self) -> u64 {
        0
    }
    fn phase<R>(&self, _name: &'static str, f: impl FnOnce() -> R) -> R {
        f()
    }
}
