//! The canister's one SQLite connection. In the canister it is ic-rusqlite's: the database file
//! lives in its own virtual memory of stable memory (MemoryId 120; the polyfill's file system
//! uses 101..119). Natively (for the `.did` test) it is a file in the temp directory.

use ic_stable_structures::memory_manager::{MemoryId, VirtualMemory};
use ic_stable_structures::DefaultMemoryImpl;
use stablebench::pragma::{Apply, Profile};
use stablebench::Result;
#[cfg(target_arch = "wasm32")]
use stablebench_grid::ic::memory_ids;

pub use rusqlite::Connection;

#[cfg(target_arch = "wasm32")]
use ic_rusqlite::rusqlite;

/// Opens the database (creating it on first use) and applies `profile` in its order.
///
/// ic-rusqlite applies its own default pragmas from a `HashMap`, in no fixed order, so
/// `page_size` could come after the first table exists. We hand it an empty map and apply our
/// ordered profile ourselves, before anything else touches the connection.
#[cfg(target_arch = "wasm32")]
pub fn open(profile: &Profile) -> Result<()> {
    let mut config = ic_rusqlite::ConnectionConfig {
        pragma_settings: Default::default(),
        ..ic_rusqlite::ConnectionConfig::default()
    };
    if profile.storage == stablebench::pragma::Storage::Heap {
        // SQLite's in-memory database: nothing mounted, nothing in stable memory.
        config.db_file_name = ":memory:".into();
        config.db_file_mount_id = None;
    }
    ic_rusqlite::set_connection_config(config);
    with_conn(|conn| profile.apply(conn))
}

/// Closes the connection and opens it again with `profile` (the benchmarks' way to start from
/// an empty database with another profile; before any table exists, so `page_size` applies).
#[cfg(all(feature = "canbench", target_arch = "wasm32"))]
pub fn reopen(profile: &Profile) -> Result<()> {
    close();
    open(profile)
}

/// Runs `f` with the open connection.
#[cfg(target_arch = "wasm32")]
pub fn with_conn<R>(f: impl FnOnce(&mut Connection) -> R) -> R {
    ic_rusqlite::with_connection(|mut conn| f(&mut conn))
}

/// A virtual memory of stable memory (`stablebench_grid::ic::memory_ids`). In the canister it
/// comes from ic-rusqlite's `MemoryManager`, the only one allowed over stable memory (a second
/// manager would overwrite the first one's buckets).
#[cfg(target_arch = "wasm32")]
pub fn memory(id: u8) -> VirtualMemory<DefaultMemoryImpl> {
    ic_rusqlite::MEMORY_MANAGER.with_borrow(|m| m.get(MemoryId::new(id)))
}

#[cfg(not(target_arch = "wasm32"))]
thread_local! {
    static NATIVE_MEMORY: ic_stable_structures::memory_manager::MemoryManager<DefaultMemoryImpl> =
        ic_stable_structures::memory_manager::MemoryManager::init(DefaultMemoryImpl::default());
}

/// Native stand-in for [`memory`] on wasm32: a `MemoryManager` over a `VectorMemory`.
#[cfg(not(target_arch = "wasm32"))]
pub fn memory(id: u8) -> VirtualMemory<DefaultMemoryImpl> {
    NATIVE_MEMORY.with(|m| m.get(MemoryId::new(id)))
}

#[cfg(target_arch = "wasm32")]
thread_local! {
    static PROFILE_CELL: std::cell::RefCell<ic_stable_structures::StableCell<String, VirtualMemory<DefaultMemoryImpl>>> =
        std::cell::RefCell::new(ic_stable_structures::StableCell::init(memory(memory_ids::PROFILE), String::new()));
}

/// The profile name saved in stable memory ("" before the first install).
#[cfg(target_arch = "wasm32")]
pub fn saved_profile() -> String {
    PROFILE_CELL.with_borrow(|c| c.get().clone())
}

/// Saves the profile name in stable memory, where it survives upgrades.
#[cfg(target_arch = "wasm32")]
pub fn save_profile(name: &str) {
    PROFILE_CELL.with_borrow_mut(|c| {
        c.set(name.to_string());
    });
}

/// Closes the connection: releases the EXCLUSIVE lock and drops the page cache before an
/// upgrade discards the heap. Committed data is already in stable memory.
#[cfg(target_arch = "wasm32")]
pub fn close() {
    ic_rusqlite::close_connection();
}

#[cfg(not(target_arch = "wasm32"))]
thread_local! {
    static NATIVE: std::cell::RefCell<Option<Connection>> = const { std::cell::RefCell::new(None) };
}

/// Native stand-in for [`open`] on wasm32: a file database in the temp directory.
#[cfg(not(target_arch = "wasm32"))]
pub fn open(profile: &Profile) -> Result<()> {
    let path = std::env::temp_dir().join(format!("stablebench-canister-{}.db", std::process::id()));
    let conn = Connection::open(path)?;
    profile.apply(&conn)?;
    NATIVE.with_borrow_mut(|c| *c = Some(conn));
    Ok(())
}

/// Native stand-in for [`with_conn`] on wasm32.
#[cfg(not(target_arch = "wasm32"))]
pub fn with_conn<R>(f: impl FnOnce(&mut Connection) -> R) -> R {
    NATIVE.with_borrow_mut(|c| f(c.as_mut().expect("db::open was not called")))
}

#[cfg(not(target_arch = "wasm32"))]
thread_local! {
    static NATIVE_PROFILE: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

/// Native stand-in for [`saved_profile`] on wasm32.
#[cfg(not(target_arch = "wasm32"))]
pub fn saved_profile() -> String {
    NATIVE_PROFILE.with_borrow(|p| p.clone())
}

/// Native stand-in for [`save_profile`] on wasm32.
#[cfg(not(target_arch = "wasm32"))]
pub fn save_profile(name: &str) {
    NATIVE_PROFILE.with_borrow_mut(|p| *p = name.to_string());
}

/// Native stand-in for [`close`] on wasm32.
#[cfg(not(target_arch = "wasm32"))]
pub fn close() {
    NATIVE.with_borrow_mut(|c| *c = None);
}
