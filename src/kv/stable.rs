//! The `StableBTreeMap` backend: ic-stable-structures' B-tree, kept directly in stable memory.
//!
//! Nothing is copied at upgrade time: the map's nodes live in its `Memory` (in the canister, one
//! virtual memory of a `MemoryManager`), and [`StableKv::init`] after an upgrade only reads the
//! map's header.

use ic_stable_structures::{Memory, StableBTreeMap};

use super::{Key, KvStore};
use crate::Result;

/// A [`KvStore`] over a `StableBTreeMap<[u8; 32], Vec<u8>>` (ic-stable-structures 0.7: the
/// array is a bounded key of fixed size, `Vec<u8>` an unbounded value).
pub struct StableKv<M: Memory> {
    map: StableBTreeMap<Key, Vec<u8>, M>,
}

impl<M: Memory> StableKv<M> {
    /// Opens the map in `memory`: the existing map after an upgrade, or a new empty one if the
    /// memory is empty (or holds no map: `StableBTreeMap::init` then starts a new one over it).
    pub fn init(memory: M) -> Self {
        StableKv { map: StableBTreeMap::init(memory) }
    }

    /// A new, empty map in `memory`, whatever it held before (the benchmark canister's reset).
    pub fn new(memory: M) -> Self {
        StableKv { map: StableBTreeMap::new(memory) }
    }

    /// The underlying map, for reads the trait does not offer (iteration, ranges).
    pub fn map(&self) -> &StableBTreeMap<Key, Vec<u8>, M> {
        &self.map
    }
}

impl<M: Memory> KvStore for StableKv<M> {
    fn get(&mut self, key: &Key) -> Result<Option<Vec<u8>>> {
        Ok(self.map.get(key))
    }

    /// One insert. In 0.7 `insert` also reads and returns the previous value, which we drop: the
    /// cost of an overwrite includes reading the old value from stable memory.
    fn put(&mut self, key: &Key, value: &[u8]) -> Result<()> {
        self.map.insert(*key, value.to_vec());
        Ok(())
    }

    fn remove(&mut self, key: &Key) -> Result<bool> {
        Ok(self.map.remove(key).is_some())
    }

    fn len(&mut self) -> Result<u64> {
        Ok(self.map.len())
    }

    /// Nothing to drop: ic-stable-structures 0.7 reads every node from stable memory on every
    /// access and keeps no node cache, so every read is already "cold". (Unreleased
    /// ic-stable-structures main adds a node cache; when it ships, this is where to clear it.)
    fn drop_caches(&mut self) -> Result<()> {
        Ok(())
    }
}
