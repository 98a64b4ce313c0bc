//! SQLite over ic-sqlite-vfs, driven through rusqlite.
//!
//! ic-sqlite-vfs owns the connections: `Db::update` runs a closure on its write connection inside
//! one transaction (`BEGIN` ... `COMMIT`) and then publishes the pages the transaction dirtied from
//! its heap overlay to stable memory; `Db::query` runs a closure on a read-only connection. Both
//! connections are the library's `sqlite3` handles on its precompiled SQLite, so we wrap each in a
//! `rusqlite::Connection` (`from_handle`: rusqlite never closes it) and run the same workload
//! code as the ic-rusqlite canister. A wrapper is kept while its handle lives, so rusqlite's
//! statement cache survives across calls as ic-rusqlite's does; it is dropped (its statements
//! finalized) before the library closes the handle under it: the read connection at every
//! update, the write connection when a closure fails.
//!
//! rusqlite accepts this SQLite although it is built with `SQLITE_THREADSAFE=0`: rusqlite skips
//! its threading-mode check on wasm32 (`ensure_safe_sqlite_threading_mode`), as it must for
//! ic-rusqlite's SQLite, which is built the same way.

use std::cell::{Cell, RefCell};

use ic_sqlite_vfs::{Db, DbError, DefaultMemoryImpl, MemoryId, MemoryManager};
use rusqlite::{ffi, Connection};
use stablebench::kv::sqlite::{self, Layout, SqliteKv};
use stablebench::kv::{Key, KvStore};
use stablebench::{Error, Result};
use stablebench_grid::ic::memory_ids;
use stablebench_grid::profiles::{self, Profile};

thread_local! {
    /// ic-sqlite-vfs's own MemoryManager (a fork with ic-stable-structures 0.7's layout), the only
    /// one over this canister's stable memory.
    static MEMORY_MANAGER: RefCell<MemoryManager<DefaultMemoryImpl>> = RefCell::new(
        MemoryManager::init_strict(DefaultMemoryImpl::default())
            .expect("stable memory is empty or holds a MemoryManager layout"),
    );
    /// The settings every connection gets when it is first wrapped.
    static PROFILE: Cell<Profile> = const { Cell::new(profiles::VFS_CACHE_768MIB) };
    static WRITE: RefCell<Option<Wrapped>> = const { RefCell::new(None) };
    static READ: RefCell<Option<Wrapped>> = const { RefCell::new(None) };
}

/// A library connection wrapped for rusqlite, with the handle it wraps.
struct Wrapped {
    raw: *mut ffi::sqlite3,
    conn: Connection,
}

/// Opens the database image in its virtual memory (`init` and `post_upgrade`).
pub fn init() -> Result<()> {
    MEMORY_MANAGER
        .with_borrow(|m| Db::init(m.get(MemoryId::new(memory_ids::VFS_DATABASE))))
        .map_err(|e| storage("Db::init", e))
}

/// The profile connections get from now on (a benchmark's, set before it opens anything).
#[cfg_attr(not(feature = "canbench"), allow(dead_code))]
pub fn set_profile(profile: Profile) {
    PROFILE.set(profile);
}

fn storage(what: &str, e: DbError) -> Error {
    match e {
        DbError::Sqlite(code, message) => {
            Error::Sqlite(rusqlite::Error::SqliteFailure(ffi::Error::new(code), Some(format!("{what}: {message}"))))
        }
        e => Error::InvalidArgument(format!("ic-sqlite-vfs {what}: {e}")),
    }
}

/// The wrapper of `raw` in `slot`, made (and given the profile's per-connection settings) if
/// `slot` wraps another handle or none.
fn adopt(slot: &mut Option<Wrapped>, raw: *mut ffi::sqlite3) -> Result<&mut Connection> {
    if slot.as_ref().is_none_or(|w| w.raw != raw) {
        *slot = None;
        // SAFETY: `raw` is the library's open connection for the duration of the closure we are
        // called from; rusqlite does not close a connection made by `from_handle`, and the
        // wrapper is dropped before the library closes the handle (see the module docs).
        let conn = unsafe { Connection::from_handle(raw) }?;
        apply_connection_settings(&conn, PROFILE.get())?;
        *slot = Some(Wrapped { raw, conn });
    }
    Ok(&mut slot.as_mut().expect("just set").conn)
}

/// The settings ic-sqlite-vfs leaves to the caller (only `cache_size`: the others it fixes, see
/// `profiles::VFS_DEFAULT`), applied and read back.
fn apply_connection_settings(conn: &Connection, profile: Profile) -> Result<()> {
    for p in profile.pragmas.iter().filter(|p| p.name == "cache_size") {
        conn.pragma_update(None, p.name, p.value)?;
        let effective: String = conn.pragma_query_value(None, p.name, |r| r.get::<_, i64>(0))?.to_string();
        if effective != p.value {
            return Err(Error::PragmaNotApplied {
                name: p.name.to_string(),
                requested: p.value.to_string(),
                effective,
            });
        }
    }
    Ok(())
}

/// Runs `f` on the write connection in one `Db::update`: one SQLite transaction, published to
/// stable memory when `f` succeeds; nothing is kept when it fails.
pub fn write<R>(f: impl FnOnce(&mut Connection) -> Result<R>) -> Result<R> {
    // The library closes its read connection at every update: finalize our statements on it first.
    READ.with_borrow_mut(|r| *r = None);
    let mut failure = None;
    let out = Db::update(|c| {
        let raw = c.raw().cast::<ffi::sqlite3>();
        WRITE.with_borrow_mut(|slot| {
            let result = adopt(slot, raw).and_then(f);
            result.map_err(|e| {
                // The library closes its write connection when the closure fails.
                *slot = None;
                failure = Some(e);
                DbError::Sqlite(ffi::SQLITE_ABORT, "the closure failed".into())
            })
        })
    });
    match (out, failure) {
        (_, Some(e)) => Err(e),
        (Ok(v), None) => Ok(v),
        (Err(e), None) => {
            WRITE.with_borrow_mut(|slot| *slot = None);
            Err(storage("Db::update", e))
        }
    }
}

/// Runs `f` on the write connection with SQLite in autocommit, so that `f` opens and commits its
/// own transactions as it does on ic-rusqlite (the users/orders steps): the library's `BEGIN` is
/// committed empty first and a new one opened after `f`, which the library's `COMMIT` then closes
/// empty. Everything `f` commits is published to stable memory once, at the end of the update.
pub fn write_own_transactions<R>(f: impl FnOnce(&mut Connection) -> Result<R>) -> Result<R> {
    write(|conn| {
        conn.execute_batch("COMMIT")?;
        let out = f(conn)?;
        conn.execute_batch("BEGIN")?;
        Ok(out)
    })
}

/// Runs `f` on the library's read-only connection (`Db::query`), as a query method would.
pub fn read<R>(f: impl FnOnce(&Connection) -> Result<R>) -> Result<R> {
    let mut failure = None;
    let out = Db::query(|c| {
        let raw = c.raw().cast::<ffi::sqlite3>();
        READ.with_borrow_mut(|slot| {
            adopt(slot, raw).and_then(|conn| f(conn)).map_err(|e| {
                failure = Some(e);
                DbError::Sqlite(ffi::SQLITE_ABORT, "the closure failed".into())
            })
        })
    });
    match (out, failure) {
        (_, Some(e)) => Err(e),
        (Ok(v), None) => Ok(v),
        (Err(e), None) => Err(storage("Db::query", e)),
    }
}

/// A key-value table (`stablebench::kv::sqlite`'s SQL, either layout) on ic-sqlite-vfs: writes in
/// `Db::update` (one transaction each), reads in `Db::query`.
#[derive(Clone, Copy, Debug)]
pub struct VfsKv {
    layout: Layout,
}

impl VfsKv {
    /// Creates the layout's table if it does not exist yet.
    pub fn create(layout: Layout) -> Result<VfsKv> {
        write(|conn| sqlite::create(conn, layout))?;
        Ok(VfsKv { layout })
    }
}

impl KvStore for VfsKv {
    fn get(&mut self, key: &Key) -> Result<Option<Vec<u8>>> {
        read(|conn| SqliteKv::new(conn, self.layout).get(key))
    }
    fn put(&mut self, key: &Key, value: &[u8]) -> Result<()> {
        write(|conn| SqliteKv::new(conn, self.layout).put(key, value))
    }
    /// One `Db::update`: every upsert in the library's transaction.
    fn put_batch(&mut self, items: &[(Key, Vec<u8>)]) -> Result<()> {
        write(|conn| {
            let mut kv = SqliteKv::new(conn, self.layout);
            for (key, value) in items {
                kv.put(key, value)?;
            }
            Ok(())
        })
    }
    fn remove(&mut self, key: &Key) -> Result<bool> {
        write(|conn| SqliteKv::new(conn, self.layout).remove(key))
    }
    fn len(&mut self) -> Result<u64> {
        read(|conn| SqliteKv::new(conn, self.layout).len())
    }
    /// Empties the write connection's page cache and makes the library drop its read connection
    /// (an update does), so the next read opens a new one with an empty cache, as after an upgrade.
    fn drop_caches(&mut self) -> Result<()> {
        write(|conn| SqliteKv::new(conn, self.layout).drop_caches())
    }
}
