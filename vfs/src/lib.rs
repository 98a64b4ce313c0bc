//! # The stablebench canister on ic-sqlite-vfs
//!
//! The same SQLite workloads as the ic-rusqlite canister (`canister/`), on the other way to put
//! SQLite in a canister: ic-sqlite-vfs 2.1, a SQLite VFS writing pages straight into a stable
//! memory virtual memory (no WASI, no wasi2ic), with its precompiled SQLite 3.53.4, built for
//! wasm32-unknown-unknown. The workload code is the same Rust over the same rusqlite API
//! ([`store`] explains how), so what differs between the two canisters is the storage path, the
//! library's transaction and publication protocol, and SQLite's build.
//!
//! - With `--features canbench`: one `__canbench__<name>` query per cell of the grid whose
//!   backend is `sqlite_vfs` or `sqlite_vfs_rowid` (`vfs/canbench.yml`, `vfs/canbench_results.yml`).
//! - A key-value API over the rowid layout (`kv_put`, controllers only; `kv_get`, `kv_len`;
//!   without `canbench`, `kv_get_many` and `kv_put_many` too, `kv_many.rs`): `stablebench_vfs.did`.

use serde_bytes::ByteBuf;
pub use stablebench_grid::api::{Commit, Cost};

#[cfg(all(feature = "canbench", target_arch = "wasm32"))]
mod benches;
#[cfg(target_arch = "wasm32")]
pub mod store;

pub use stablebench_grid::api::vfs::{Error, MAX_LOAD_PER_CALL, MAX_VALUE_BYTES};

/// The API's error for a library error: bad arguments stay bad arguments, the rest is storage.
fn api_error(e: stablebench::Error) -> Error {
    match e {
        stablebench::Error::InvalidArgument(message) => Error::InvalidArgument { message },
        e => Error::Storage { message: e.to_string() },
    }
}

/// Replies with `value` (its Candid type table built once, `stablebench_grid::reply`) and hands it
/// back for ic-cdk to drop: the endpoints are `manual_reply`, which keeps their declared types
/// in the exported `.did` (ic-cdk's `encode_with` would declare every reply a `blob`).
fn send<T: candid::CandidType + 'static>(value: T) -> T {
    ic_cdk::api::msg_reply(stablebench_grid::reply::reply(&value));
    value
}

fn require_controller() -> Result<(), Error> {
    let caller = ic_cdk::api::msg_caller();
    if ic_cdk::api::is_controller(&caller) {
        Ok(())
    } else {
        Err(Error::NotController { caller })
    }
}

fn key_of(key: &[u8]) -> Result<stablebench::kv::Key, Error> {
    key.try_into().map_err(|_| Error::InvalidArgument { message: format!("a key is 32 bytes, not {}", key.len()) })
}

#[cfg(target_arch = "wasm32")]
mod kv {
    //! The key-value API's table: the rowid layout (`kv_rowid`), created by the first write. Each
    //! call runs in one library call, as the ic-rusqlite canister's do in one message: a write is
    //! one `Db::update` (one SQLite transaction, creating the table if this instance has not seen
    //! it), a read one `Db::query` (looking the table up in the same read if needed).
    use std::cell::Cell;

    use stablebench::kv::gen::TrieDataset;
    use stablebench::kv::sqlite::{self, Layout, SqliteKv};
    use stablebench::kv::{trie, Key, KvStore};

    use crate::store::{read, write, VfsKv};

    pub const LAYOUT: Layout = Layout::Rowid;

    thread_local! {
        /// Whether this instance knows the table exists (an update created or found it). A
        /// query's heap changes are discarded, so only updates (`post_upgrade` included) set it.
        pub static TABLE: Cell<bool> = const { Cell::new(false) };
    }

    pub fn put(key: &Key, value: &[u8]) -> stablebench::Result<()> {
        let known = TABLE.get();
        write(|conn| {
            if !known {
                sqlite::create(conn, LAYOUT)?;
            }
            SqliteKv::new(conn, LAYOUT).put(key, value)
        })?;
        TABLE.set(true);
        Ok(())
    }

    pub fn load(data: &TrieDataset, range: std::ops::Range<u64>) -> stablebench::Result<u64> {
        let mut store = VfsKv::create(LAYOUT)?;
        TABLE.set(true);
        trie::load(&mut store, data, range, 10_000)
    }

    /// Runs `f` over the table in one `Db::query`, or answers `missing` if there is no table.
    pub fn reading<T>(missing: T, f: impl FnOnce(&mut SqliteKv) -> stablebench::Result<T>) -> stablebench::Result<T> {
        let known = TABLE.get();
        read(
            |conn| {
                if known || sqlite::exists(conn, LAYOUT)? {
                    f(&mut SqliteKv::new(conn, LAYOUT))
                } else {
                    Ok(missing)
                }
            },
        )
    }

    pub fn get(key: &Key) -> stablebench::Result<Option<Vec<u8>>> {
        reading(None, |kv| kv.get(key))
    }

    pub fn len() -> stablebench::Result<u64> {
        reading(0, |kv| kv.len())
    }

    /// Looks the table up once per instance, in an update (`init`, `post_upgrade`), so that the
    /// queries after it do not.
    pub fn find_table() -> stablebench::Result<()> {
        TABLE.set(read(|conn| sqlite::exists(conn, LAYOUT))?);
        Ok(())
    }
}

#[cfg(not(target_arch = "wasm32"))]
mod kv {
    //! Natively there is no ic-sqlite-vfs (its SQLite is precompiled for wasm32 only): the
    //! canister is built natively only to export its Candid interface.
    use stablebench::kv::gen::TrieDataset;
    use stablebench::kv::Key;
    use stablebench::{Error, Result};

    fn unavailable<T>() -> Result<T> {
        Err(Error::InvalidArgument("ic-sqlite-vfs runs in wasm32 only".into()))
    }
    pub fn put(_: &Key, _: &[u8]) -> Result<()> {
        unavailable()
    }
    pub fn load(_: &TrieDataset, _: std::ops::Range<u64>) -> Result<u64> {
        unavailable()
    }
    pub fn get(_: &Key) -> Result<Option<Vec<u8>>> {
        unavailable()
    }
    pub fn len() -> Result<u64> {
        unavailable()
    }
}

fn open() {
    #[cfg(target_arch = "wasm32")]
    {
        store::init().unwrap_or_else(|e| ic_cdk::trap(format!("opening the database: {e}")));
        // A failed lookup only means each query looks the table up itself.
        let _ = kv::find_table();
    }
}

#[ic_cdk::init]
fn init() {
    open();
    warm_query_replies();
}

#[ic_cdk::post_upgrade]
fn post_upgrade() {
    open();
    warm_query_replies();
}

/// Builds the type tables of the query replies in an update, for every query after it (see
/// `stablebench_grid::reply`).
fn warm_query_replies() {
    stablebench_grid::reply::warm::<Result<Option<ByteBuf>, Error>>();
    stablebench_grid::reply::warm::<Result<u64, Error>>();
}

/// Stores `value` under the 32-byte `key` (controllers only): one transaction.
#[ic_cdk::update(manual_reply = true)]
fn kv_put(key: ByteBuf, value: ByteBuf) -> Result<Cost, Error> {
    send((|| -> Result<Cost, Error> {
        require_controller()?;
        let key = key_of(&key)?;
        if value.len() > MAX_VALUE_BYTES {
            return Err(Error::InvalidArgument {
                message: format!("a value is at most {MAX_VALUE_BYTES} bytes, not {}", value.len()),
            });
        }
        kv::put(&key, &value).map_err(api_error)?;
        Ok(Cost { instructions: instructions() })
    })())
}

/// Stores entries `offset .. offset + count` of the trie benchmark's data set of `size` keys
/// (seed `KV_SEED`, as the benchmarks load it), with their warm-ups (controllers only): at most
/// `MAX_LOAD_PER_CALL` per call, in transactions of 10,000. Returns the next offset. Bad
/// arguments are refused before anything is written; a failure after the first transaction
/// traps, so that the message's writes are all discarded and a retry starts from `offset` again.
#[ic_cdk::update(manual_reply = true)]
fn kv_load(size: u64, offset: u64, count: u64) -> Result<u64, Error> {
    send((|| -> Result<u64, Error> {
        require_controller()?;
        if count > MAX_LOAD_PER_CALL {
            return Err(Error::InvalidArgument { message: format!("count {count} is over {MAX_LOAD_PER_CALL}") });
        }
        let data = stablebench::kv::gen::TrieDataset::new(size, stablebench_grid::KV_SEED).map_err(api_error)?;
        let end = offset.checked_add(count).filter(|&e| e <= size).ok_or_else(|| Error::InvalidArgument {
            message: format!("entries {offset} + {count} are not inside the data set's {size}"),
        })?;
        if let Err(e) = kv::load(&data, offset..end) {
            ic_cdk::trap(format!("kv_load: {e}; nothing of this call was kept"));
        }
        Ok(end)
    })())
}

/// The value under `key`, if any.
#[ic_cdk::query(manual_reply = true)]
fn kv_get(key: ByteBuf) -> Result<Option<ByteBuf>, Error> {
    send((|| -> Result<Option<ByteBuf>, Error> { Ok(kv::get(&key_of(&key)?).map_err(api_error)?.map(ByteBuf::from)) })())
}

/// The number of keys stored.
#[ic_cdk::query(manual_reply = true)]
fn kv_len() -> Result<u64, Error> {
    send(kv::len().map_err(api_error))
}

fn instructions() -> u64 {
    #[cfg(target_arch = "wasm32")]
    {
        ic_cdk::api::performance_counter(0)
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        0
    }
}

#[cfg(not(feature = "canbench"))] // Before `export_candid!`, which lists the methods defined before it.
mod kv_many;
// In the wasm, and natively for the `.did` test only (a native rlib's `get_candid_pointer` would clash).
#[cfg(any(target_arch = "wasm32", test))]
ic_cdk::export_candid!();

#[cfg(test)]
mod tests {
    /// The committed interface is the one the code exports (`STABLEBENCH_REGENERATE_DID=1` rewrites
    /// it): the production canister's, or with `canbench` the benchmark canister's (without
    /// `kv_many`'s two methods).
    #[test]
    fn did_file() {
        let path = if cfg!(feature = "canbench") {
            concat!(env!("CARGO_MANIFEST_DIR"), "/stablebench_vfs_bench.did")
        } else {
            concat!(env!("CARGO_MANIFEST_DIR"), "/stablebench_vfs.did")
        };
        let exported = super::__export_service();
        if std::env::var_os("STABLEBENCH_REGENERATE_DID").is_some() {
            std::fs::write(path, &exported).expect("writing the .did");
        }
        let committed = std::fs::read_to_string(path).expect("reading the .did");
        assert_eq!(
            committed, exported,
            "{path} is stale: STABLEBENCH_REGENERATE_DID=1 cargo test -p stablebench-vfs [--features canbench] did_file"
        );
    }
}
