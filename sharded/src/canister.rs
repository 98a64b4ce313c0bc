//! The canister: a router or a shard, by its install argument (see the crate documentation and
//! `sharded/stablebench_sharded.did`).

use std::cell::RefCell;

use candid::{CandidType, Deserialize, Principal};
use ic_stable_structures::memory_manager::{MemoryId, MemoryManager, VirtualMemory};
use ic_stable_structures::storable::Bound;
use ic_stable_structures::{DefaultMemoryImpl, StableBTreeMap, StableCell, Storable};
use serde_bytes::ByteBuf;

use crate::router::{self, ask, controller_only, fan_out, scatter, MoveLog};
use crate::{
    check_new_shards, check_page, finish, hold, may_read, merge_pages, page, place, routes, shard_of, writable, Entry,
    Error, Move, Page, Role, Stage, Store, MAX_KEY_BYTES, MAX_VALUE_BYTES,
};

type Mem = VirtualMemory<DefaultMemoryImpl>;

/// The role and, for a router, its shards: kept in stable memory across upgrades.
const CONFIG: MemoryId = MemoryId::new(0);
/// A shard's keys.
const DATA: MemoryId = MemoryId::new(1);
/// A shard's keys held by unfinished moves, with the move.
const HELD: MemoryId = MemoryId::new(2);
/// The router's log of unfinished moves.
const MOVES: MemoryId = MemoryId::new(3);
/// The router's next move id.
const NEXT_MOVE: MemoryId = MemoryId::new(4);

/// The stable state: the role and the router's shards.
#[derive(CandidType, Deserialize, Clone, Debug, Default)]
struct Config {
    role: Option<Role>,
    shards: Vec<Principal>,
}

impl Storable for Config {
    fn to_bytes(&self) -> std::borrow::Cow<'_, [u8]> {
        std::borrow::Cow::Owned(candid::encode_one(self).expect("encode the config"))
    }
    fn into_bytes(self) -> Vec<u8> {
        candid::encode_one(&self).expect("encode the config")
    }
    fn from_bytes(bytes: std::borrow::Cow<[u8]>) -> Self {
        candid::decode_one(&bytes).expect("decode the config")
    }
    const BOUND: Bound = Bound::Unbounded;
}

impl Storable for Move {
    fn to_bytes(&self) -> std::borrow::Cow<'_, [u8]> {
        std::borrow::Cow::Owned(candid::encode_one(self).expect("encode a move"))
    }
    fn into_bytes(self) -> Vec<u8> {
        candid::encode_one(&self).expect("encode a move")
    }
    fn from_bytes(bytes: std::borrow::Cow<[u8]>) -> Self {
        candid::decode_one(&bytes).expect("decode a move")
    }
    const BOUND: Bound = Bound::Unbounded;
}

thread_local! {
    static MEMORY: MemoryManager<DefaultMemoryImpl> = MemoryManager::init(DefaultMemoryImpl::default());
    static CONFIG_CELL: RefCell<StableCell<Config, Mem>> =
        RefCell::new(StableCell::init(MEMORY.with(|m| m.get(CONFIG)), Config::default()));
    static MAP: RefCell<StableBTreeMap<Vec<u8>, Vec<u8>, Mem>> =
        RefCell::new(StableBTreeMap::init(MEMORY.with(|m| m.get(DATA))));
    static HELD_MAP: RefCell<StableBTreeMap<Vec<u8>, u64, Mem>> =
        RefCell::new(StableBTreeMap::init(MEMORY.with(|m| m.get(HELD))));
    static LOG: RefCell<StableBTreeMap<u64, Move, Mem>> =
        RefCell::new(StableBTreeMap::init(MEMORY.with(|m| m.get(MOVES))));
    static NEXT: RefCell<StableCell<u64, Mem>> =
        RefCell::new(StableCell::init(MEMORY.with(|m| m.get(NEXT_MOVE)), 0));
}

/// This shard's storage, as the move steps see it.
struct Shard;

impl Store for Shard {
    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        MAP.with_borrow(|m| m.get(&key.to_vec()))
    }
    fn insert(&mut self, key: &[u8], value: Vec<u8>) {
        MAP.with_borrow_mut(|m| m.insert(key.to_vec(), value));
    }
    fn remove(&mut self, key: &[u8]) {
        MAP.with_borrow_mut(|m| m.remove(&key.to_vec()));
    }
    fn holder(&self, key: &[u8]) -> Option<u64> {
        HELD_MAP.with_borrow(|m| m.get(&key.to_vec()))
    }
    fn set_holder(&mut self, key: &[u8], id: Option<u64>) {
        HELD_MAP.with_borrow_mut(|m| match id {
            Some(id) => m.insert(key.to_vec(), id),
            None => m.remove(&key.to_vec()),
        });
    }
}

fn config() -> Config {
    CONFIG_CELL.with_borrow(|c| c.get().clone())
}

#[ic_cdk::init]
fn init(role: Role) {
    CONFIG_CELL.with_borrow_mut(|c| c.set(Config { role: Some(role), shards: Vec::new() }));
}

/// The router's shards, or why this canister cannot route.
fn shards() -> Result<Vec<Principal>, Error> {
    let c = config();
    routes(&c.role, c.shards)
}

fn shard_writer() -> Result<(), Error> {
    router::shard_writer(&config().role)
}

fn shard_reader() -> Result<(), Error> {
    may_read(&config().role)
}

fn check_entry(key: &[u8], value: &[u8]) -> Result<(), Error> {
    if key.len() > MAX_KEY_BYTES || value.len() > MAX_VALUE_BYTES {
        return Err(Error::InvalidArgument {
            message: format!(
                "a {}-byte key and a {}-byte value: at most {MAX_KEY_BYTES} and {MAX_VALUE_BYTES}",
                key.len(),
                value.len()
            ),
        });
    }
    Ok(())
}

// ---- The router ----------------------------------------------------------------------------

/// Registers shards, in order (a key's shard is its position in this list). Controllers only;
/// refused once the router has shards (moving keys between shards is not implemented).
#[ic_cdk::update]
fn add_shards(new: Vec<Principal>) -> Result<(), Error> {
    controller_only()?;
    let mut c = config();
    check_new_shards(&c.role, ic_cdk::api::canister_self(), &c.shards, &new)?;
    c.shards = new;
    CONFIG_CELL.with_borrow_mut(|cell| cell.set(c));
    Ok(())
}

/// The router's shards, in routing order.
#[ic_cdk::query]
fn shard_list() -> Vec<Principal> {
    config().shards
}

/// The shard that holds `key` (for clients that route their own calls).
#[ic_cdk::query]
fn shard_for(key: ByteBuf) -> Result<Principal, Error> {
    let shards = shards()?;
    Ok(shards[shard_of(&key, shards.len() as u32) as usize])
}

/// Stores `value` under `key` on its shard (one call); returns the value it replaced.
/// Controllers only.
#[ic_cdk::update]
async fn put(key: ByteBuf, value: ByteBuf) -> Result<Option<ByteBuf>, Error> {
    controller_only()?;
    check_entry(&key, &value)?;
    let shards = shards()?;
    let shard = shards[shard_of(&key, shards.len() as u32) as usize];
    ask(shard, "shard_put", &(key, value)).await
}

/// The value under `key`, from its shard (one call: an update, because a query cannot call
/// another canister; a composite query could, and the offline runner does not run them yet).
#[ic_cdk::update]
async fn get(key: ByteBuf) -> Result<Option<ByteBuf>, Error> {
    let shards = shards()?;
    let shard = shards[shard_of(&key, shards.len() as u32) as usize];
    ask(shard, "shard_get", &(key,)).await
}

/// Stores every entry on its shard: one call per shard that has entries, all in flight together.
/// Returns how many entries were stored. Controllers only. If a shard fails, the others may have
/// stored theirs: the error names it, and sending the batch again is safe.
#[ic_cdk::update]
async fn put_batch(entries: Vec<Entry>) -> Result<u64, Error> {
    controller_only()?;
    for (k, v) in &entries {
        check_entry(k, v)?;
    }
    let shards = shards()?;
    let n = shards.len() as u32;
    scatter(&shards, "shard_put_batch", entries, |entry| shard_of(&entry.0, n)).await
}

/// How many keys all shards hold (one call to each).
#[ic_cdk::update]
async fn len() -> Result<u64, Error> {
    Ok(fan_out::<_, u64>(&shards()?, "shard_len", &()).await?.into_iter().sum())
}

/// The `k` largest keys with their values, largest first (each shard's `k` largest, merged), as
/// many as fit a page (`complete` false if fewer than `k` did).
#[ic_cdk::update]
async fn top(k: u32) -> Result<Page, Error> {
    check_page(k)?;
    let parts = fan_out::<_, Page>(&shards()?, "shard_top", &(k,)).await?;
    Ok(merge_pages(parts, k as usize, true))
}

/// Up to `limit` entries in key order after `after` (from the start without it): each shard's
/// first `limit` after it, merged, as many as fit a page. The next page starts after the last key
/// returned; an empty page is the end.
#[ic_cdk::update]
async fn scan(after: Option<ByteBuf>, limit: u32) -> Result<Page, Error> {
    check_page(limit)?;
    let parts = fan_out::<_, Page>(&shards()?, "shard_scan", &(after, limit)).await?;
    Ok(merge_pages(parts, limit as usize, false))
}

/// The router's log of moves, for the shared driver: a move's shards are those of its keys, and
/// its value is placed as it was held.
struct KvLog;

impl MoveLog for KvLog {
    fn load(&self, id: u64) -> Option<Move> {
        LOG.with_borrow(|l| l.get(&id))
    }
    fn save(&self, m: Move) {
        LOG.with_borrow_mut(|l| l.insert(m.id, m));
    }
    fn forget(&self, id: u64) {
        LOG.with_borrow_mut(|l| l.remove(&id));
    }
    fn shards(&self, m: &Move) -> Result<(Principal, Principal), Error> {
        let shards = shards()?;
        let n = shards.len() as u32;
        Ok((shards[shard_of(&m.from, n) as usize], shards[shard_of(&m.to, n) as usize]))
    }
    fn rewrite(&self, _: &Move, value: ByteBuf) -> Result<ByteBuf, Error> {
        Ok(value)
    }
}

/// Moves the value under `from` to the new key `to`, which may live on another shard (the
/// protocol: `sharded/src/lib.rs`, "Moving an entry between shards"). Controllers only. Refused
/// if `from` holds nothing, `to` holds something, or a move holds either; then nothing changes.
/// If a shard fails during the move, it is undone (or, once decided, finished) and the error
/// says which; `MoveUnfinished` means a failure stopped it half-way, to be finished by `recover`.
/// Sent again, a move is a new one (refused: its source is gone, or held).
#[ic_cdk::update]
async fn move_entry(from: ByteBuf, to: ByteBuf) -> Result<(), Error> {
    controller_only()?;
    check_entry(&from, &[])?;
    check_entry(&to, &[])?;
    if from == to {
        return Err(Error::InvalidArgument { message: "a move needs two different keys".into() });
    }
    shards()?;
    let id = NEXT.with_borrow_mut(|n| {
        let id = *n.get();
        n.set(id + 1);
        id
    });
    LOG.with_borrow_mut(|l| l.insert(id, Move { id, from, to, stage: Stage::Holding }));
    router::run(&KvLog, id).await
}

/// Drives every unfinished move no call is driving on from its logged stage (`Committing`
/// commits, `Aborting` is undone, `Holding` and `Placing` go on and may commit). Controllers
/// only. Returns how many moves are still unfinished: those a shard still fails, and those
/// another call is driving.
#[ic_cdk::update]
async fn recover() -> Result<u64, Error> {
    controller_only()?;
    shards()?;
    let ids: Vec<u64> = LOG.with_borrow(|l| l.keys().collect());
    router::recover(&KvLog, ids).await;
    Ok(LOG.with_borrow(|l| l.len()))
}

/// The unfinished moves, in id order.
#[ic_cdk::query]
fn moves() -> Vec<Move> {
    LOG.with_borrow(|l| l.values().collect())
}

// ---- A shard -------------------------------------------------------------------------------

/// Stores `value` under `key`; returns the value it replaced. Its router or controllers only.
#[ic_cdk::update]
fn shard_put(key: ByteBuf, value: ByteBuf) -> Result<Option<ByteBuf>, Error> {
    shard_writer()?;
    check_entry(&key, &value)?;
    writable(&Shard, &key)?;
    Ok(MAP.with_borrow_mut(|m| m.insert(key.into_vec(), value.into_vec())).map(ByteBuf::from))
}

/// Stores every entry (one message); returns how many. Its router or controllers only.
#[ic_cdk::update]
fn shard_put_batch(entries: Vec<Entry>) -> Result<u64, Error> {
    shard_writer()?;
    for (k, v) in &entries {
        check_entry(k, v)?;
        writable(&Shard, k)?;
    }
    let n = entries.len() as u64;
    MAP.with_borrow_mut(|m| {
        for (k, v) in entries {
            m.insert(k.into_vec(), v.into_vec());
        }
    });
    Ok(n)
}

/// A move's step 1 on its source: holds `key` for move `id` and answers its value. Its router
/// or controllers only.
#[ic_cdk::update]
fn shard_hold(key: ByteBuf, id: u64) -> Result<ByteBuf, Error> {
    shard_writer()?;
    hold(&mut Shard, &key, id).map(ByteBuf::from)
}

/// A move's step 2 on its destination: stores `value` under the new `key`, held for move `id`.
/// Its router or controllers only.
#[ic_cdk::update]
fn shard_place(key: ByteBuf, value: ByteBuf, id: u64) -> Result<(), Error> {
    shard_writer()?;
    check_entry(&key, &value)?;
    place(&mut Shard, &key, value.into_vec(), id)
}

/// A move's last step on either shard: releases move `id`'s hold on `key`, removing the entry
/// if `remove`. Its router or controllers only.
#[ic_cdk::update]
fn shard_finish(key: ByteBuf, id: u64, remove: bool) -> Result<(), Error> {
    shard_writer()?;
    finish(&mut Shard, &key, id, remove);
    Ok(())
}

/// The value under `key`.
#[ic_cdk::query]
fn shard_get(key: ByteBuf) -> Result<Option<ByteBuf>, Error> {
    shard_reader()?;
    Ok(MAP.with_borrow(|m| m.get(&key.into_vec())).map(ByteBuf::from))
}

/// How many keys this shard holds.
#[ic_cdk::query]
fn shard_len() -> Result<u64, Error> {
    shard_reader()?;
    Ok(MAP.with_borrow(|m| m.len()))
}

/// This shard's `k` largest keys with their values, largest first.
#[ic_cdk::query]
fn shard_top(k: u32) -> Result<Page, Error> {
    shard_reader()?;
    check_page(k)?;
    Ok(MAP.with_borrow(|m| page(m.iter().rev().map(|e| e.into_pair()), k as usize)))
}

/// Up to `limit` of this shard's entries in key order after `after`.
#[ic_cdk::query]
fn shard_scan(after: Option<ByteBuf>, limit: u32) -> Result<Page, Error> {
    shard_reader()?;
    check_page(limit)?;
    use std::ops::Bound::{Excluded, Unbounded};
    let from = after.map_or(Unbounded, |k| Excluded(k.into_vec()));
    Ok(MAP.with_borrow(|m| page(m.range((from, Unbounded)).map(|e| e.into_pair()), limit as usize)))
}

ic_cdk::export_candid!();
