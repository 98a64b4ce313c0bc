//! Key-value endpoints of n operations per message (`kv_get_many`, `kv_put_many`) on the rowid
//! table: the ic-sqlite-vfs canister's message shapes, measured as the ic-rusqlite canister's are
//! (`runner/tests/message_shapes.rs`, `message_shapes_results.yml`, backend `sqlite_vfs_rowid`).
//! The production canister only: the benchmark canister's wasm, and with it every grid cell
//! measured on it, stays what it was without them (fat LTO turns any code linked in into a
//! different wasm).

use serde_bytes::ByteBuf;
use stablebench::kv::Key;
use stablebench_grid::api::{Commit, MAX_KEYS_PER_CALL, MAX_REPLY_BYTES};

use crate::{api_error, key_of, require_controller, send, Cost, Error, MAX_VALUE_BYTES};

/// The values under `keys` (each 32 bytes, at most `MAX_KEYS_PER_CALL`), in their order: one
/// message of n reads, all in one `Db::query`. A query; values over `MAX_REPLY_BYTES` in all are
/// refused with `InvalidArgument` (read fewer keys per call).
#[ic_cdk::query(manual_reply = true)]
fn kv_get_many(keys: Vec<ByteBuf>) -> Result<Vec<Option<ByteBuf>>, Error> {
    send((|| -> Result<Vec<Option<ByteBuf>>, Error> {
        let keys = many_keys(&keys)?;
        let values = imp::get_many(&keys).map_err(api_error)?;
        // Candid's per-value overhead (the option tag, the blob's length) is a few bytes.
        let mut bytes = 0u64;
        for (read, v) in values.iter().enumerate() {
            bytes += v.as_ref().map_or(1, |v| v.len() as u64 + 6);
            if bytes > MAX_REPLY_BYTES {
                return Err(Error::InvalidArgument {
                    message: format!(
                        "the values of the first {} keys are over the reply's {MAX_REPLY_BYTES} bytes: read fewer keys per call",
                        read + 1
                    ),
                });
            }
        }
        Ok(values.into_iter().map(|v| v.map(ByteBuf::from)).collect())
    })())
}

/// Stores every `(key, value)` pair of `entries` (keys 32 bytes, values at most
/// `MAX_VALUE_BYTES`, at most `MAX_KEYS_PER_CALL` pairs; a later duplicate key wins): one
/// message of n writes, committed as `commit` says (`one`: one `Db::update`, one SQLite
/// transaction published once; `each`: one `Db::update` per entry, each published). Every
/// argument is checked before anything is written; a write that fails after earlier entries were
/// committed traps, so that the IC discards the whole message and the table is as it was (a
/// failed update keeps nothing). Controllers only.
#[ic_cdk::update(manual_reply = true)]
fn kv_put_many(entries: Vec<(ByteBuf, ByteBuf)>, commit: Commit) -> Result<Cost, Error> {
    send((|| -> Result<Cost, Error> {
        require_controller()?;
        let keys: Vec<ByteBuf> = entries.iter().map(|(k, _)| k.clone()).collect();
        let keys = many_keys(&keys)?;
        if let Some((_, v)) = entries.iter().find(|(_, v)| v.len() > MAX_VALUE_BYTES) {
            return Err(Error::InvalidArgument {
                message: format!("a value is at most {MAX_VALUE_BYTES} bytes, not {}", v.len()),
            });
        }
        let items: Vec<(Key, Vec<u8>)> = keys.into_iter().zip(entries.into_iter().map(|(_, v)| v.into_vec())).collect();
        match commit {
            Commit::One => imp::put_batch(&items).map_err(api_error)?,
            Commit::Each => {
                for (i, (key, value)) in items.iter().enumerate() {
                    match crate::kv::put(key, value) {
                        Ok(()) => {}
                        Err(e) if i == 0 => return Err(api_error(e)),
                        Err(e) => ic_cdk::trap(format!("kv_put_many failed after {i} entries were committed: {e}")),
                    }
                }
            }
        }
        Ok(Cost { instructions: crate::instructions() })
    })())
}

/// The 32-byte keys of a call, at most `MAX_KEYS_PER_CALL`.
fn many_keys(keys: &[ByteBuf]) -> Result<Vec<Key>, Error> {
    if keys.len() > MAX_KEYS_PER_CALL {
        return Err(Error::InvalidArgument {
            message: format!("{} keys: one call takes at most {MAX_KEYS_PER_CALL}", keys.len()),
        });
    }
    keys.iter().map(|k| key_of(k)).collect()
}

#[cfg(target_arch = "wasm32")]
mod imp {
    use stablebench::kv::sqlite::{self, SqliteKv};
    use stablebench::kv::{Key, KvStore};

    use crate::kv::{reading, LAYOUT, TABLE};
    use crate::store::write;

    /// Every key's value, in one `Db::query` (no table: none of them).
    pub fn get_many(keys: &[Key]) -> stablebench::Result<Vec<Option<Vec<u8>>>> {
        reading(vec![None; keys.len()], |kv| keys.iter().map(|k| kv.get(k)).collect())
    }

    /// Every item's upsert in one `Db::update` (creating the table if this instance has not
    /// seen it): one transaction, published once.
    pub fn put_batch(items: &[(Key, Vec<u8>)]) -> stablebench::Result<()> {
        let known = TABLE.get();
        write(|conn| {
            if !known {
                sqlite::create(conn, LAYOUT)?;
            }
            let mut kv = SqliteKv::new(conn, LAYOUT);
            items.iter().try_for_each(|(k, v)| kv.put(k, v))
        })?;
        TABLE.set(true);
        Ok(())
    }
}

#[cfg(not(target_arch = "wasm32"))]
mod imp {
    //! Natively there is no ic-sqlite-vfs: the canister is built natively only to export its
    //! Candid interface.
    use stablebench::kv::Key;
    use stablebench::{Error, Result};

    pub fn get_many(_: &[Key]) -> Result<Vec<Option<Vec<u8>>>> {
        Err(Error::InvalidArgument("ic-sqlite-vfs runs in wasm32 only".into()))
    }
    pub fn put_batch(_: &[(Key, Vec<u8>)]) -> Result<()> {
        Err(Error::InvalidArgument("ic-sqlite-vfs runs in wasm32 only".into()))
    }
}
