//! A canister to copy whole: the two key-value patterns stablebench's key-value benchmarks
//! measured, side by side, over `u64` keys and byte values.
//!
//! - `stable_*`: a `StableBTreeMap` in stable memory. Every read and write goes to stable memory;
//!   nothing to do at upgrade, and it grows past the heap limit.
//! - `heap_*`: a `std::collections::BTreeMap` in the heap, written to stable memory in
//!   `pre_upgrade` and read back in `post_upgrade`. Calls are cheaper; the map must fit the heap
//!   twice over at upgrade (this example encodes it whole) and the upgrade's instruction limit.
//!
//! It owns stable memory through its own `MemoryManager`. In a canister that also uses
//! ic-rusqlite, take these two virtual memories from `ic_rusqlite::MEMORY_MANAGER` instead (with
//! ids outside 101..=120, which ic-rusqlite uses): two managers over one stable memory overwrite
//! each other's data.
//!
//! Built by `scripts/build.sh examples`; tested and measured through the offline runner by
//! `runner/tests/examples.rs`; its interface is `examples/maps/example_maps.did`.
#![cfg(target_arch = "wasm32")]

use std::cell::RefCell;
use std::collections::BTreeMap;

use ic_stable_structures::memory_manager::{MemoryId, MemoryManager, VirtualMemory};
use ic_stable_structures::{DefaultMemoryImpl, Memory, StableBTreeMap};
use serde_bytes::ByteBuf;

type Mem = VirtualMemory<DefaultMemoryImpl>;

/// The `StableBTreeMap`'s memory.
const STABLE_MAP: MemoryId = MemoryId::new(0);
/// Where `pre_upgrade` writes the heap map.
const HEAP_SNAPSHOT: MemoryId = MemoryId::new(1);
/// The largest value accepted, bytes.
const MAX_VALUE_BYTES: usize = 64 * 1024;

thread_local! {
    static MEMORY: MemoryManager<DefaultMemoryImpl> = MemoryManager::init(DefaultMemoryImpl::default());
    static STABLE: RefCell<StableBTreeMap<u64, Vec<u8>, Mem>> =
        RefCell::new(StableBTreeMap::init(MEMORY.with(|m| m.get(STABLE_MAP))));
    static HEAP: RefCell<BTreeMap<u64, ByteBuf>> = const { RefCell::new(BTreeMap::new()) };
}

fn controller_only() -> Result<(), String> {
    if ic_cdk::api::is_controller(&ic_cdk::api::msg_caller()) {
        Ok(())
    } else {
        Err("only a controller can write".into())
    }
}

fn check_value(value: &[u8]) -> Result<(), String> {
    if value.len() > MAX_VALUE_BYTES {
        return Err(format!("a value of {} bytes: at most {MAX_VALUE_BYTES}", value.len()));
    }
    Ok(())
}

/// Stores `value` under `key` in the `StableBTreeMap`; returns the value it replaced.
#[ic_cdk::update]
fn stable_put(key: u64, value: ByteBuf) -> Result<Option<ByteBuf>, String> {
    controller_only()?;
    check_value(&value)?;
    Ok(STABLE.with_borrow_mut(|m| m.insert(key, value.into_vec())).map(ByteBuf::from))
}

/// The value under `key` in the `StableBTreeMap`.
#[ic_cdk::query]
fn stable_get(key: u64) -> Option<ByteBuf> {
    STABLE.with_borrow(|m| m.get(&key)).map(ByteBuf::from)
}

/// Stores `value` under `key` in the heap map; returns the value it replaced.
#[ic_cdk::update]
fn heap_put(key: u64, value: ByteBuf) -> Result<Option<ByteBuf>, String> {
    controller_only()?;
    check_value(&value)?;
    Ok(HEAP.with_borrow_mut(|m| m.insert(key, value)))
}

/// The value under `key` in the heap map.
#[ic_cdk::query]
fn heap_get(key: u64) -> Option<ByteBuf> {
    HEAP.with_borrow(|m| m.get(&key).cloned())
}

/// Entries in each map: `(stable, heap)`.
#[ic_cdk::query]
fn len() -> (u64, u64) {
    (STABLE.with_borrow(|m| m.len()), HEAP.with_borrow(|m| m.len() as u64))
}

/// Writes the heap map to its own memory: its Candid encoding (one copy of the map in the heap),
/// after an 8-byte length. A trap here fails the upgrade and leaves the canister as it was.
#[ic_cdk::pre_upgrade]
fn pre_upgrade() {
    let bytes = HEAP
        .with_borrow(|m| candid::encode_one(m))
        .unwrap_or_else(|e| ic_cdk::trap(format!("encoding the heap map: {e}")));
    let memory = MEMORY.with(|m| m.get(HEAP_SNAPSHOT));
    let len = bytes.len() as u64;
    let pages = (8 + len).div_ceil(65536);
    if memory.size() < pages && memory.grow(pages - memory.size()) < 0 {
        ic_cdk::trap(format!("saving the heap map: stable memory cannot grow to {pages} pages"));
    }
    memory.write(0, &len.to_le_bytes());
    memory.write(8, &bytes);
}

/// Reads the heap map back; a snapshot that does not decode fails the upgrade (which leaves the
/// canister as it was) instead of starting with an empty map.
#[ic_cdk::post_upgrade]
fn post_upgrade() {
    let memory = MEMORY.with(|m| m.get(HEAP_SNAPSHOT));
    if memory.size() == 0 {
        return;
    }
    let mut len = [0; 8];
    memory.read(0, &mut len);
    let mut bytes = vec![0; u64::from_le_bytes(len) as usize];
    memory.read(8, &mut bytes);
    let map = candid::decode_one(&bytes).unwrap_or_else(|e| ic_cdk::trap(format!("reading the heap map back: {e}")));
    HEAP.set(map);
}
