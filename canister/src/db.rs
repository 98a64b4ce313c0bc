//! The canister's one SQLite connection. In the canister it is ic-rusqlite's: the database file
//! lives in its own virtual memory of stable memory (MemoryId 120; the polyfill's file system
//! uses 101..119). Natively (for the `.did` test) it is a file in the temp directory.

use ic_stable_structures::memory_manager::{MemoryId, VirtualMemory};
use ic_stable_structures::DefaultMemoryImpl;
use stablebench::counts::Kept;
use stablebench::pragma::{Apply, Profile};
use stablebench::Result;
use stablebench_grid::ic::memory_ids;

pub use rusqlite::Connection;

/// rusqlite: ic-rusqlite's in the canister, the crate natively.
#[cfg(target_arch = "wasm32")]
pub use ic_rusqlite::rusqlite;
#[cfg(not(target_arch = "wasm32"))]
pub use rusqlite;

/// Opens the database (creating it on first use) and applies `profile` in its order.
///
/// ic-rusqlite applies its own default pragmas from a `HashMap`, in no fixed order, so
/// `page_size` could come after the first table exists. We hand it an empty map and apply our
/// ordered profile ourselves, before anything else touches the connection.
#[cfg(target_arch = "wasm32")]
pub fn open(profile: &Profile) -> Result<()> {
    forget_schema();
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
    OPEN_PROFILE.set("");
    with_conn(|conn| {
        // Every statement the endpoints run stays prepared across calls (rusqlite's default
        // keeps 16; `stats` alone runs about 20).
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE_CAPACITY);
        profile.apply(conn)
    })?;
    OPEN_PROFILE.set(profile.name);
    Ok(())
}

thread_local! {
    static SCHEMA_SEEN: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the tables exist: remembered once seen (a `schema_exists` query reads the whole
/// schema table, about 20 K instructions, in every call that needs the tables), since nothing
/// drops them while the connection is open; opening or closing the connection (install, upgrade,
/// the benchmark canister's reset) forgets it.
pub fn schema_ready(conn: &Connection) -> Result<bool> {
    if SCHEMA_SEEN.get() {
        return Ok(true);
    }
    let seen = stablebench::schema::schema_exists(conn)?;
    SCHEMA_SEEN.set(seen);
    Ok(seen)
}

fn forget_schema() {
    SCHEMA_SEEN.set(false);
}

/// Prepared statements rusqlite keeps per connection (least recently used dropped first).
#[cfg(target_arch = "wasm32")]
const STATEMENT_CACHE_CAPACITY: usize = 64;

thread_local! {
    static OPEN_PROFILE: std::cell::Cell<&'static str> = const { std::cell::Cell::new("") };
}

/// The profile the open connection was opened with ("" if none): the saved profile after an
/// upgrade, a benchmark's after the benchmark canister set one up.
#[cfg_attr(not(feature = "canbench"), allow(dead_code))]
pub fn open_profile() -> &'static str {
    OPEN_PROFILE.get()
}

/// Closes the connection and opens it again with `profile` (the canbench benchmarks' way to start
/// from an empty database with another profile: canbench's canister is freshly installed, so no
/// table exists yet and `page_size` applies).
#[cfg(feature = "canbench")]
pub fn reopen(profile: &Profile) -> Result<()> {
    close();
    open(profile)
}

/// Empties the database and opens it with `profile`, as a fresh install would have it: the
/// benchmark canister's way to start a live benchmark. Every table (and so every index) is
/// dropped, the page size set to the profile's and the file rebuilt by `VACUUM` (with a rollback
/// journal on disk, the only mode in which the page size can change). A heap profile (`memory`)
/// gets a new in-memory database and leaves the file alone.
///
/// The stable memory under the file does not shrink (a virtual memory never does), so a live
/// benchmark's stable memory growth can be 0 where canbench's fresh canister grows.
#[cfg(feature = "canbench")]
pub fn reset(profile: &Profile) -> Result<()> {
    close();
    if profile.storage == stablebench::pragma::Storage::StableMemory {
        // EXCLUSIVE first: a database left in WAL mode can then be opened without the shared
        // memory (wal-index) that WASI does not have.
        const EXCLUSIVE: &[stablebench::pragma::Pragma] =
            &[stablebench::pragma::Pragma { name: "locking_mode", value: "EXCLUSIVE", why: "" }];
        open(&Profile { pragmas: EXCLUSIVE, ..*profile })?;
        with_conn(|conn| -> Result<()> {
            let tables: Vec<String> = conn
                .prepare("SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")?
                .query_map((), |r| r.get(0))?
                .collect::<std::result::Result<_, _>>()?;
            conn.pragma_update(None, "journal_mode", "DELETE")?;
            // Dropping a parent table before its children would fail a foreign key check.
            conn.pragma_update(None, "foreign_keys", "OFF")?;
            for table in tables {
                conn.execute_batch(&format!("DROP TABLE \"{}\"", table.replace('"', "\"\"")))?;
            }
            let page_size = profile.pragmas.iter().find(|p| p.name == "page_size").map_or("4096", |p| p.value);
            conn.pragma_update(None, "page_size", page_size)?;
            conn.execute_batch("VACUUM")?;
            Ok(())
        })?;
        close();
    }
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

#[cfg(target_arch = "wasm32")]
thread_local! {
    static LIMIT_CELL: std::cell::RefCell<ic_stable_structures::StableCell<u64, VirtualMemory<DefaultMemoryImpl>>> =
        std::cell::RefCell::new(ic_stable_structures::StableCell::init(memory(memory_ids::MEMORY_LIMIT), 0));
}

/// The `wasm_memory_limit` saved in stable memory (0 before the first install that set one).
#[cfg(target_arch = "wasm32")]
pub fn saved_memory_limit() -> u64 {
    LIMIT_CELL.with_borrow(|c| *c.get())
}

/// Saves the `wasm_memory_limit` in stable memory, where it survives upgrades.
#[cfg(target_arch = "wasm32")]
pub fn save_memory_limit(bytes: u64) {
    LIMIT_CELL.with_borrow_mut(|c| {
        c.set(bytes);
    });
}

/// What [`KEPT_DELETED`] holds before any job counted the deleted orders.
const NOT_COUNTED: u64 = u64::MAX;

thread_local! {
    /// The orders `delete_orders` deleted, or [`NOT_COUNTED`] (also the value of a new cell).
    static KEPT_DELETED: std::cell::RefCell<ic_stable_structures::StableCell<u64, VirtualMemory<DefaultMemoryImpl>>> =
        std::cell::RefCell::new(ic_stable_structures::StableCell::init(memory(memory_ids::ORDERS_DELETED), NOT_COUNTED));
}

/// The count of deleted orders ([`stablebench::counts`]) in stable memory
/// ([`memory_ids::ORDERS_DELETED`]), where it survives upgrades: an 8-byte write, where a row in
/// the database costs a journaled page written back at commit. The IC rolls it back with the
/// database's pages if a message traps.
pub struct StableKept;

impl Kept for StableKept {
    fn deleted(&self) -> Option<u64> {
        KEPT_DELETED.with_borrow(|c| Some(*c.get()).filter(|&n| n != NOT_COUNTED))
    }
    fn set_deleted(&mut self, deleted: Option<u64>) {
        KEPT_DELETED.with_borrow_mut(|c| {
            c.set(deleted.unwrap_or(NOT_COUNTED));
        });
    }
    fn forget(&mut self) {
        // A canister that never counted has nothing to forget: leave the cell's memory
        // unallocated (the benchmark canister's steps call this after every write).
        if ic_stable_structures::Memory::size(&memory(memory_ids::ORDERS_DELETED)) > 0 {
            self.set_deleted(None);
        }
    }
}

/// Closes the connection: releases the EXCLUSIVE lock and drops the page cache before an
/// upgrade discards the heap. Committed data is already in stable memory.
#[cfg(target_arch = "wasm32")]
pub fn close() {
    forget_schema();
    ic_rusqlite::close_connection();
}

#[cfg(not(target_arch = "wasm32"))]
thread_local! {
    static NATIVE: std::cell::RefCell<Option<Connection>> = const { std::cell::RefCell::new(None) };
}

/// Native stand-in for [`open`] on wasm32: a file database in the temp directory.
#[cfg(not(target_arch = "wasm32"))]
pub fn open(profile: &Profile) -> Result<()> {
    forget_schema();
    let path = std::env::temp_dir().join(format!("stablebench-canister-{}.db", std::process::id()));
    let conn = Connection::open(path)?;
    profile.apply(&conn)?;
    NATIVE.with_borrow_mut(|c| *c = Some(conn));
    OPEN_PROFILE.set(profile.name);
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

#[cfg(not(target_arch = "wasm32"))]
thread_local! {
    static NATIVE_LIMIT: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Native stand-in for [`saved_memory_limit`] on wasm32.
#[cfg(not(target_arch = "wasm32"))]
pub fn saved_memory_limit() -> u64 {
    NATIVE_LIMIT.get()
}

/// Native stand-in for [`save_memory_limit`] on wasm32.
#[cfg(not(target_arch = "wasm32"))]
pub fn save_memory_limit(bytes: u64) {
    NATIVE_LIMIT.set(bytes);
}

/// Lowers the open connection's `cache_size` to [`stablebench_pragmas::cache_bound_kib`] (a
/// quarter of `wasm_memory_limit`) if the profile asked for
/// more. Returns the cache in KiB the connection has afterwards.
pub fn bound_cache(wasm_memory_limit: u64) -> Result<u64> {
    Ok(with_conn(|conn| stablebench_pragmas::bound_cache(conn, wasm_memory_limit))?)
}

/// Native stand-in for [`close`] on wasm32.
#[cfg(not(target_arch = "wasm32"))]
pub fn close() {
    forget_schema();
    NATIVE.with_borrow_mut(|c| *c = None);
}
