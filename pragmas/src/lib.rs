//! The SQLite settings stablebench measured for a canister that keeps its database in stable
//! memory with ic-rusqlite, as a dependency instead of a table to retype:
//!
//! - [`RECOMMENDED`]: the recommended profile's pragmas (stablebench's `page_8k_temp_file`), in
//!   the order they must be applied, each with the reason for its value (the numbers behind them
//!   are in stablebench's pragma guide). Of the profiles whose heap stays bounded when the
//!   database outgrows it, it is the one whose everyday calls (one-row writes in an update, a
//!   point read and a page of ten rows in a query) cost least on mainnet, where the IC charges
//!   for the memory pages a message touches: 8 KiB pages, a page cache as large as the heap
//!   allows ([`bound_cache`]), the rollback journal a kept file, and sorts that spill to files in
//!   stable memory instead of the heap;
//! - [`BULK_LOAD`]: the settings for a canister whose messages are mostly large transactions
//!   (stablebench's `journal_memory_temp_file`, the recommendation before the IC's memory tracker):
//!   a page cache as large as the database and the rollback journal in the heap;
//! - [`apply`]: applies a list in order, then reads every value back, and fails naming the first
//!   one SQLite did not take (ic-rusqlite's own `ConnectionConfig` applies its pragmas from a
//!   `HashMap`, in no fixed order, and never checks them);
//! - [`bound_cache`]: lowers `cache_size` to a quarter of the canister's `wasm_memory_limit`, so
//!   that a database larger than the heap keeps working instead of trapping at the limit.
//!
//! No dependency but rusqlite: depend on the crate, or copy this file, `pcache.rs` and `query_arena.rs`
//! into your canister and delete this file's three `#[cfg(feature = "rusqlite")]` lines.
//!
//! Order matters:
//! 1. `page_size` first: it is written into the database header when the first table is created
//!    and ignored afterwards (short of a VACUUM), so it must precede any schema.
//! 2. `locking_mode` before `journal_mode`: SQLite can run WAL without shared memory (which the
//!    WASI polyfill does not provide) only when EXCLUSIVE locking is set before WAL is entered
//!    (<https://sqlite.org/wal.html#noshm>).
//! 3. The per-connection settings (`synchronous`, `temp_store`, `cache_size`) last: they are not
//!    stored in the file, so they are applied again on every open (init and post_upgrade).
//!
//! What the IC charges, in the reasons below: since dfinity/ic pull request #10789 (the
//! deterministic memory tracker, merged 2026-07-16, on every subnet from the release candidate of
//! 2026-08-13) a message pays 80,000 instructions the first time it accesses a 64 KiB Wasm page of
//! heap or stable memory and 80,000 more the first time it writes one, on top of the work itself.

/// One setting: `PRAGMA name = value`, and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pragma {
    /// Pragma name, e.g. `journal_mode`.
    pub name: &'static str,
    /// Value as written after `PRAGMA name = `.
    pub value: &'static str,
    /// Why this value: the trade-off it makes on the IC.
    pub why: &'static str,
}

/// `page_size` 8192, the recommended value.
pub const PAGE_SIZE_8K: Pragma = Pragma {
    name: "page_size",
    value: "8192",
    why: "Two OS pages per database page. On mainnet, where a message pays for each 64 KiB Wasm \
          page it touches, 8 KiB pages made the everyday calls (one-row writes, a point read, a \
          page of ten rows) cheaper than 4, 16 or 32 KiB did with the whole-database cache \
          (stablebench's page_8k). Only takes effect before the first table exists, so it is \
          applied first; an existing database keeps its page size until a VACUUM.",
};

/// `page_size` 16384.
pub const PAGE_SIZE_16K: Pragma = Pragma {
    name: "page_size",
    value: "16384",
    why: "A larger page means fewer pages per read and more bytes per write. On mainnet, \
          where a message pays for each 64 KiB Wasm page it touches, 16 KiB pages with the \
          8 MiB cache made the nine users/orders steps cheaper together than 4, 8 or 32 KiB \
          did (32 KiB is cheaper on some steps, much dearer on small deletes), and an \
          index-tree entry of up to 4,086 bytes stays on its \
          page (1,002 at 4 KiB). Only takes effect before the first table exists, so it is \
          applied first; an existing database keeps its page size until a VACUUM.",
};

/// `page_size` 4096, the bulk-load value.
pub const PAGE_SIZE_4K: Pragma = Pragma {
    name: "page_size",
    value: "4096",
    why: "SQLite's default: small write transactions copy fewer bytes per changed page. Only \
          takes effect before the first table exists, so it is applied first.",
};

/// `locking_mode` EXCLUSIVE, in both profiles.
pub const LOCKING_EXCLUSIVE: Pragma = Pragma {
    name: "locking_mode",
    value: "EXCLUSIVE",
    why: "The canister is the database's only client: take the file lock once and keep \
          it instead of locking and unlocking around every transaction. Applied before \
          journal_mode so that WAL, if chosen, never needs shared memory.",
};

/// `journal_mode` PERSIST, the recommended value (and the reference's).
pub const JOURNAL_PERSIST: Pragma = Pragma {
    name: "journal_mode",
    value: "PERSIST",
    why: "The rollback journal is a file in stable memory that is kept, its header zeroed at \
          commit, instead of being deleted and re-created: fewer file-system calls through the \
          WASI polyfill, and COMMIT and ROLLBACK stay atomic. On mainnet, with the 8 MiB \
          cache and 16 KiB pages, a journal in the heap (MEMORY) made most users/orders steps \
          cheaper: writing the journal file touches stable-memory pages that MEMORY never \
          writes.",
};

/// `journal_mode` MEMORY, the bulk-load value.
pub const JOURNAL_MEMORY: Pragma = Pragma {
    name: "journal_mode",
    value: "MEMORY",
    why: "The rollback journal lives in the heap: a transaction's original pages are never \
          written to stable memory, so a write transaction copies fewer bytes and touches \
          fewer stable pages (on mainnet, with the 8 MiB cache and 16 KiB pages, cheaper \
          than PERSIST on most users/orders steps). ROLLBACK still works within the message. \
          What is lost is recovery from a hot journal after a crash, which the IC makes unnecessary: a message's memory writes \
          are kept or discarded as a whole, so a trap mid-transaction leaves the previous \
          commit intact. Keep every transaction inside one message (never open across an \
          await or an upgrade).",
};

/// `synchronous` NORMAL, in both profiles.
pub const SYNCHRONOUS_NORMAL: Pragma = Pragma {
    name: "synchronous",
    value: "NORMAL",
    why: "The reference's value. On the IC a message's memory writes are kept or discarded \
          as a whole, so the level changes no guarantee, only how many sync calls reach the \
          WASI polyfill at a commit: OFF makes none and saves a little per commit, FULL \
          makes more.",
};

/// `temp_store` MEMORY, the reference's value: not for a database that can outgrow the heap.
pub const TEMP_STORE_MEMORY: Pragma = Pragma {
    name: "temp_store",
    value: "MEMORY",
    why: "Temporary tables and sorts stay in the heap instead of temporary files in the \
          polyfill's file system, with no bound: a sort larger than the page cache (an index \
          build over a table larger than the heap) keeps its sorted runs in the heap, which Wasm \
          never gives back, and traps once the heap reaches wasm_memory_limit (stablebench's \
          bounded-heap run: every profile with MEMORY stops at create_indexes).",
};

/// `temp_store` FILE, the recommended and bulk-load value.
pub const TEMP_STORE_FILE: Pragma = Pragma {
    name: "temp_store",
    value: "FILE",
    why: "Counter-intuitively faster with a large cache: only when temporary storage may use \
          files does SQLite's sorter (CREATE INDEX, ORDER BY without an index) collect its keys \
          in one growing heap buffer of up to cache_size pages (at most 512 MiB); with \
          temp_store MEMORY it makes one allocation per key. With the whole-database cache the \
          sorts never reach a file; a larger sort spills sorted runs to a temporary file in the \
          polyfill's file system in stable memory, which costs stable-memory writes and keeps \
          the heap bounded by the cache (bound_cache) and that buffer.",
};

/// `cache_size` -8192 (KiB: 8 MiB whatever the page size).
pub const CACHE_8MIB: Pragma = Pragma {
    name: "cache_size",
    value: "-8192",
    why: "8 MiB of page cache in the heap (a negative cache_size is KiB). On mainnet a message pays \
          for every 64 KiB Wasm page it touches, and a whole-database cache spreads even a \
          small message over many of them; a small cache bounds that, which made small write \
          transactions and upgrades much cheaper. A database larger than the cache reads its \
          other pages from stable memory, so large transactions (bulk loads, index builds) \
          cost more: a canister that mostly loads in bulk should use BULK_LOAD.",
};

/// `cache_size` 1,000,000 pages, the recommended and bulk-load value, to be bounded by [`bound_cache`].
pub const CACHE_WHOLE: Pragma = Pragma {
    name: "cache_size",
    value: "1000000",
    why: "Up to 1,000,000 pages (about 4 GB at 4 KiB, in practice the whole database) stay \
          in the heap page cache, so repeated reads do not go back to stable memory. Costs \
          heap, which counts against the wasm memory limit: it is lowered to a quarter of the \
          canister's wasm_memory_limit (bound_cache; default limit 3 GiB: 768 MiB), so a \
          database larger than the heap keeps working. On mainnet every heap page a message \
          touches is charged, so the larger the cache, the more a small message pays.",
};

/// The recommended profile (stablebench's `page_8k_temp_file`), in the order to apply it. Apply
/// [`bound_cache`] after it: its cache is as large as the heap allows.
pub const RECOMMENDED: [Pragma; 6] =
    [PAGE_SIZE_8K, LOCKING_EXCLUSIVE, JOURNAL_PERSIST, SYNCHRONOUS_NORMAL, TEMP_STORE_FILE, CACHE_WHOLE];

/// The bulk-load profile (stablebench's `journal_memory_temp_file`), in the order to apply it:
/// cheaper than [`RECOMMENDED`] for large write transactions and index builds, dearer for small
/// messages and upgrades on mainnet. Only for a database that stays well inside the heap: the
/// journal of a large transaction lives in the heap, and in stablebench's bounded-heap run an
/// index build over a database several times larger than `wasm_memory_limit` traps at the limit.
pub const BULK_LOAD: [Pragma; 6] =
    [PAGE_SIZE_4K, LOCKING_EXCLUSIVE, JOURNAL_MEMORY, SYNCHRONOUS_NORMAL, TEMP_STORE_FILE, CACHE_WHOLE];

/// The default `wasm_memory_limit` of a canister: 3 GiB (3,221,225,472 bytes, as the mainnet
/// registry canister's settings show; IC interface specification, canister settings). A canister
/// cannot read its own limit: pass [`bound_cache`] the one you set, or this.
pub const DEFAULT_WASM_MEMORY_LIMIT_BYTES: u64 = 3 * 1024 * 1024 * 1024;

/// The largest page cache a canister with `wasm_memory_limit` bytes of heap should allow, in
/// KiB: a quarter of the limit. The rest is for SQLite's other allocations (a sort collects its
/// keys in a buffer of up to `cache_size` pages before it spills to a file, so the bound holds
/// it too), the canister's own data and Candid buffers.
pub const fn cache_bound_kib(wasm_memory_limit: u64) -> u64 {
    wasm_memory_limit / 4 / 1024
}

/// Maps the spellings SQLite accepts to the one it reports back (`NORMAL` -> `1`,
/// `persist` -> `PERSIST`), so a requested value can be compared with the effective one.
pub fn normalize(name: &str, value: &str) -> String {
    let v = value.trim().to_ascii_uppercase();
    let code = match (name, v.as_str()) {
        ("synchronous", "OFF") | ("temp_store", "DEFAULT") | ("auto_vacuum", "NONE") | ("foreign_keys", "OFF") => "0",
        ("synchronous", "NORMAL") | ("temp_store", "FILE") | ("auto_vacuum", "FULL") | ("foreign_keys", "ON") => "1",
        ("synchronous", "FULL") | ("temp_store", "MEMORY") | ("auto_vacuum", "INCREMENTAL") => "2",
        ("synchronous", "EXTRA") => "3",
        _ => return v,
    };
    code.to_string()
}

#[cfg(feature = "rusqlite")]
pub use sqlite::*;

#[cfg(feature = "rusqlite")]
mod sqlite {
    use super::{cache_bound_kib, normalize, Pragma};
    use rusqlite::Connection;

    /// Why [`apply`] failed.
    #[derive(Debug)]
    pub enum Error {
        /// SQLite refused a statement.
        Sqlite(rusqlite::Error),
        /// SQLite accepted `PRAGMA name = requested` but reports `effective`.
        NotApplied {
            /// Pragma name.
            name: &'static str,
            /// The value asked for.
            requested: &'static str,
            /// The value SQLite reports.
            effective: String,
        },
    }

    impl From<rusqlite::Error> for Error {
        fn from(e: rusqlite::Error) -> Self {
            Error::Sqlite(e)
        }
    }

    impl std::fmt::Display for Error {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            match self {
                Error::Sqlite(e) => write!(f, "SQLite error: {e}"),
                Error::NotApplied { name, requested, effective } => {
                    write!(f, "PRAGMA {name} = {requested} did not take effect (SQLite reports {effective})")?;
                    if *name == "page_size" {
                        write!(f, ": the page size is fixed once the first table exists")?;
                    }
                    Ok(())
                }
            }
        }
    }

    impl std::error::Error for Error {}

    /// Applies `pragmas` in order, then reads each back and fails with [`Error::NotApplied`] on
    /// the first SQLite did not take (for example `page_size` on a database whose tables already
    /// exist with another page size). Call it right after opening, before anything else touches
    /// the connection, on every open (init and post_upgrade).
    pub fn apply(conn: &Connection, pragmas: &[Pragma]) -> Result<(), Error> {
        for p in pragmas {
            // `pragma_update` quotes text values; SQLite accepts keywords either way.
            conn.pragma_update(None, p.name, p.value)?;
        }
        for p in pragmas {
            let effective = read(conn, p.name)?;
            if normalize(p.name, p.value) != normalize(p.name, &effective) {
                return Err(Error::NotApplied { name: p.name, requested: p.value, effective });
            }
        }
        Ok(())
    }

    /// Reads one pragma's current value as text (what a query endpoint shows in production).
    pub fn read(conn: &Connection, name: &str) -> rusqlite::Result<String> {
        // Cached: a statistics endpoint reads a dozen, and preparing costs more than running one.
        let value: rusqlite::types::Value =
            conn.prepare_cached(&format!("PRAGMA {name}"))?.query_row((), |r| r.get(0))?;
        Ok(match value {
            rusqlite::types::Value::Integer(i) => i.to_string(),
            rusqlite::types::Value::Text(t) => t,
            rusqlite::types::Value::Real(r) => r.to_string(),
            rusqlite::types::Value::Null => String::new(),
            rusqlite::types::Value::Blob(b) => format!("{b:?}"),
        })
    }

    /// Lowers the connection's `cache_size` to [`cache_bound_kib`] of `wasm_memory_limit` if it
    /// allows more. Returns the cache in KiB the connection has afterwards.
    pub fn bound_cache(conn: &Connection, wasm_memory_limit: u64) -> rusqlite::Result<u64> {
        let pages: i64 = conn.query_row("PRAGMA cache_size", (), |r| r.get(0))?;
        let page_size: i64 = conn.query_row("PRAGMA page_size", (), |r| r.get(0))?;
        // SQLite's convention: positive = pages, negative = KiB.
        let kib = if pages >= 0 { (pages * page_size / 1024) as u64 } else { pages.unsigned_abs() };
        let bound = cache_bound_kib(wasm_memory_limit);
        if kib <= bound {
            return Ok(kib);
        }
        conn.execute_batch(&format!("PRAGMA cache_size = -{bound}"))?;
        Ok(bound)
    }
}

#[cfg(all(test, feature = "rusqlite"))]
mod tests {
    use super::*;
    use rusqlite::Connection;

    #[test]
    fn the_recommended_settings_take_on_a_new_database_and_read_back() {
        let dir = std::env::temp_dir().join(format!("stablebench-pragmas-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("new.db");
        let _ = std::fs::remove_file(&path);
        let conn = Connection::open(&path).unwrap();
        apply(&conn, &RECOMMENDED).unwrap();
        let read_back: Vec<_> = RECOMMENDED.iter().map(|p| (p.name, read(&conn, p.name).unwrap())).collect();
        assert_eq!(
            read_back,
            [
                ("page_size", "8192".to_string()),
                ("locking_mode", "exclusive".to_string()),
                ("journal_mode", "persist".to_string()),
                ("synchronous", "1".to_string()),
                ("temp_store", "1".to_string()),
                ("cache_size", "1000000".to_string()),
            ]
        );
        drop(conn);
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn the_bulk_load_settings_take_and_read_back() {
        let conn = Connection::open_in_memory().unwrap();
        apply(&conn, &BULK_LOAD).unwrap();
        let read_back: Vec<_> = BULK_LOAD.iter().map(|p| (p.name, read(&conn, p.name).unwrap())).collect();
        assert_eq!(
            read_back,
            [
                ("page_size", "4096".to_string()),
                ("locking_mode", "exclusive".to_string()),
                // An in-memory database's journal is always in memory; a file's follows the pragma.
                ("journal_mode", "memory".to_string()),
                ("synchronous", "1".to_string()),
                ("temp_store", "1".to_string()),
                ("cache_size", "1000000".to_string()),
            ]
        );
    }

    #[test]
    fn a_page_size_that_comes_too_late_is_refused_with_the_reason() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("PRAGMA page_size = 4096; CREATE TABLE t (x)").unwrap();
        let e = apply(&conn, &RECOMMENDED).unwrap_err();
        assert!(
            matches!(&e, Error::NotApplied { name: "page_size", requested: "8192", effective } if effective == "4096")
        );
        assert_eq!(
            e.to_string(),
            "PRAGMA page_size = 8192 did not take effect (SQLite reports 4096): \
             the page size is fixed once the first table exists"
        );
    }

    #[test]
    fn the_cache_is_bounded_to_a_quarter_of_the_heap_limit_and_never_raised() {
        let conn = Connection::open_in_memory().unwrap();
        apply(&conn, &BULK_LOAD).unwrap();
        // 1,000,000 pages of 4 KiB against 256 MiB: lowered to 64 MiB, as KiB (negative).
        assert_eq!(bound_cache(&conn, 256 << 20).unwrap(), 64 << 10);
        assert_eq!(read(&conn, "cache_size").unwrap(), (-(64i64 << 10)).to_string());
        // Already below the bound: left alone.
        conn.execute_batch("PRAGMA cache_size = 2000").unwrap();
        assert_eq!(bound_cache(&conn, 256 << 20).unwrap(), 8000);
        assert_eq!(read(&conn, "cache_size").unwrap(), "2000");
    }

    #[test]
    fn normalize_maps_keywords_to_reported_codes() {
        assert_eq!(normalize("synchronous", "normal"), "1");
        assert_eq!(normalize("temp_store", "MEMORY"), "2");
        assert_eq!(normalize("journal_mode", "persist"), "PERSIST");
    }
}

/// A page cache that touches fewer Wasm pages per message than SQLite's own (see its docs).
#[cfg(feature = "rusqlite")]
pub mod pcache;

/// A global allocator that puts a query's allocations on the fewest Wasm pages (see its docs).
pub mod query_arena;
