//! Key-value endpoints of n operations per message (`kv_get_many`, `kv_put_many`): the message
//! shapes whose costs `message_shapes_results.yml` gives per backend and key pattern
//! (`runner/tests/message_shapes.rs`). The production canister only: the benchmark canister's
//! wasm, and with it every grid cell measured on it, stays what it was without them (fat LTO
//! turns any code linked in into a different wasm).

use serde_bytes::ByteBuf;
use stablebench::kv::Key;

use crate::kv::{key, with_store, KvBackend};
use crate::{cost_now, require_controller, Commit, Cost, Error, MAX_KEYS_PER_CALL};

/// The values under `keys` (each 32 bytes, at most `MAX_KEYS_PER_CALL`) in `backend`, in their
/// order: one message of n reads, the shape whose cost `message_shapes_results.yml` gives per
/// pattern. A query; a reply over `MAX_REPLY_BYTES` is refused with `ReplyTooLarge` (read fewer
/// keys per call). Not in the benchmark canister, whose wasm (and every grid cell measured on it)
/// stays what it was.
#[ic_cdk::query(manual_reply = true, guard = "crate::discarded")]
fn kv_get_many(backend: KvBackend, keys: Vec<ByteBuf>) -> Result<Vec<Option<ByteBuf>>, Error> {
    crate::send((|| -> Result<Vec<Option<ByteBuf>>, Error> {
        let keys = many_keys(&keys)?;
        with_store(backend, false, |s| {
            let Some(s) = s else { return Ok(vec![None; keys.len()]) };
            let mut values = Vec::with_capacity(keys.len());
            // Candid's per-value overhead (the option tag, the blob's length) is a few bytes.
            let mut bytes = 0u64;
            for k in &keys {
                let v = s.get(k)?;
                bytes += v.as_ref().map_or(1, |v| v.len() as u64 + 6);
                if bytes > crate::limits::MAX_REPLY_BYTES {
                    return Err(stablebench::Error::ReplyTooLarge {
                        rows_read: values.len() as u64,
                        limit_bytes: crate::limits::MAX_REPLY_BYTES,
                    });
                }
                values.push(v.map(ByteBuf::from));
            }
            Ok(values)
        })
    })())
}

/// Stores every `(key, value)` pair of `entries` (keys 32 bytes, at most `MAX_KEYS_PER_CALL`
/// pairs; a later duplicate key wins) in `backend`: one message of n writes, committed as
/// `commit` says (one SQLite transaction, or one per entry; the maps have no transactions).
/// Every key is checked before anything is written; a write that fails after earlier entries
/// were committed traps, so that the IC discards the whole message and the backend is as it was
/// (a failed update keeps nothing). Controllers only. Not in the benchmark canister (see
/// `kv_get_many`).
#[ic_cdk::update(manual_reply = true)]
fn kv_put_many(backend: KvBackend, entries: Vec<(ByteBuf, ByteBuf)>, commit: Commit) -> Result<Cost, Error> {
    crate::send((|| -> Result<Cost, Error> {
        require_controller()?;
        let keys: Vec<ByteBuf> = entries.iter().map(|(k, _)| k.clone()).collect();
        let keys = many_keys(&keys)?;
        let items: Vec<(Key, Vec<u8>)> = keys.into_iter().zip(entries.into_iter().map(|(_, v)| v.into_vec())).collect();
        with_store(backend, true, |s| {
            let s = s.expect("created");
            match commit {
                Commit::One => s.put_batch(&items),
                Commit::Each => {
                    for (i, (key, value)) in items.iter().enumerate() {
                        match s.put(key, value) {
                            Ok(()) => {}
                            Err(e) if i == 0 => return Err(e),
                            Err(e) => ic_cdk::trap(format!("kv_put_many failed after {i} entries were committed: {e}")),
                        }
                    }
                    Ok(())
                }
            }
        })?;
        Ok(cost_now())
    })())
}

/// The 32-byte keys of a `kv_get_many` or `kv_put_many` call, at most `MAX_KEYS_PER_CALL`.
fn many_keys(keys: &[ByteBuf]) -> Result<Vec<Key>, Error> {
    if keys.len() > MAX_KEYS_PER_CALL {
        return Err(Error::InvalidArgument {
            message: format!("{} keys: one call takes at most {MAX_KEYS_PER_CALL}", keys.len()),
        });
    }
    keys.iter().map(|k| key(k)).collect()
}
