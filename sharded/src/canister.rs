//! The canister: a router or a shard, by its install argument (see the crate documentation and
//! `sharded/stablebench_sharded.did`).

use std::cell::RefCell;

use candid::{CandidType, Deserialize, Principal};
use futures::future::join_all;
use ic_cdk::call::Call;
use ic_stable_structures::memory_manager::{MemoryId, MemoryManager, VirtualMemory};
use ic_stable_structures::storable::Bound;
use ic_stable_structures::{DefaultMemoryImpl, StableBTreeMap, StableCell, Storable};
use serde_bytes::ByteBuf;

use crate::{
    merge_pages, page, shard_of, Entry, Error, Page, Role, MAX_KEY_BYTES, MAX_PAGE, MAX_SHARDS, MAX_VALUE_BYTES,
};

type Mem = VirtualMemory<DefaultMemoryImpl>;

/// The role and, for a router, its shards: kept in stable memory across upgrades.
const CONFIG: MemoryId = MemoryId::new(0);
/// A shard's keys.
const DATA: MemoryId = MemoryId::new(1);

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

thread_local! {
    static MEMORY: MemoryManager<DefaultMemoryImpl> = MemoryManager::init(DefaultMemoryImpl::default());
    static CONFIG_CELL: RefCell<StableCell<Config, Mem>> =
        RefCell::new(StableCell::init(MEMORY.with(|m| m.get(CONFIG)), Config::default()));
    static MAP: RefCell<StableBTreeMap<Vec<u8>, Vec<u8>, Mem>> =
        RefCell::new(StableBTreeMap::init(MEMORY.with(|m| m.get(DATA))));
}

fn config() -> Config {
    CONFIG_CELL.with_borrow(|c| c.get().clone())
}

#[ic_cdk::init]
fn init(role: Role) {
    CONFIG_CELL.with_borrow_mut(|c| c.set(Config { role: Some(role), shards: Vec::new() }));
}

fn role_name(role: &Option<Role>) -> String {
    match role {
        Some(Role::Router) => "router".into(),
        Some(Role::Shard { .. }) => "shard".into(),
        None => "not installed with a role".into(),
    }
}

/// The router's shards, or why this canister cannot route.
fn shards() -> Result<Vec<Principal>, Error> {
    let c = config();
    match c.role {
        Some(Role::Router) if c.shards.is_empty() => Err(Error::NoShards),
        Some(Role::Router) => Ok(c.shards),
        other => Err(Error::WrongRole { role: role_name(&other) }),
    }
}

/// Whether the caller may write to this shard: its router or a controller.
fn shard_writer() -> Result<(), Error> {
    let caller = ic_cdk::api::msg_caller();
    match config().role {
        Some(Role::Shard { router }) if router == caller || ic_cdk::api::is_controller(&caller) => Ok(()),
        Some(Role::Shard { .. }) => Err(Error::NotAuthorized { caller }),
        other => Err(Error::WrongRole { role: role_name(&other) }),
    }
}

fn shard_reader() -> Result<(), Error> {
    match config().role {
        Some(Role::Shard { .. }) => Ok(()),
        other => Err(Error::WrongRole { role: role_name(&other) }),
    }
}

fn controller_only() -> Result<(), Error> {
    let caller = ic_cdk::api::msg_caller();
    if ic_cdk::api::is_controller(&caller) {
        Ok(())
    } else {
        Err(Error::NotAuthorized { caller })
    }
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

fn check_page(limit: u32) -> Result<(), Error> {
    if limit == 0 || limit > MAX_PAGE {
        return Err(Error::InvalidArgument { message: format!("a page of {limit}: 1 to {MAX_PAGE} entries") });
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
    if c.role != Some(Role::Router) {
        return Err(Error::WrongRole { role: role_name(&c.role) });
    }
    if !c.shards.is_empty() {
        return Err(Error::InvalidArgument {
            message: format!("the router has its {} shards already; its keys are not moved", c.shards.len()),
        });
    }
    if new.is_empty() || new.len() > MAX_SHARDS {
        return Err(Error::InvalidArgument { message: format!("{} shards: 1 to {MAX_SHARDS}", new.len()) });
    }
    let distinct: std::collections::BTreeSet<&Principal> = new.iter().collect();
    if distinct.len() != new.len() || distinct.contains(&ic_cdk::api::canister_self()) {
        return Err(Error::InvalidArgument {
            message: "each shard once, and not the router itself: a key would have two places".into(),
        });
    }
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

/// Calls `method` on `shard` with `args`, and decodes its `Result<R, Error>`.
async fn ask<A: candid::utils::ArgumentEncoder, R: CandidType + for<'de> Deserialize<'de>>(
    shard: Principal,
    method: &str,
    args: &A,
) -> Result<R, Error> {
    let failed = |code: u32, message: String| Error::ShardFailed { shard, code, message };
    let response = Call::unbounded_wait(shard, method).with_args(args).await.map_err(|e| match e {
        ic_cdk::call::CallFailed::CallRejected(r) => failed(r.raw_reject_code(), r.reject_message().to_string()),
        other => failed(0, other.to_string()),
    })?;
    response.candid::<Result<R, Error>>().map_err(|e| failed(0, format!("decoding its answer: {e}")))?
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
    let mut parts: Vec<Vec<Entry>> = vec![Vec::new(); shards.len()];
    for entry in entries {
        parts[shard_of(&entry.0, shards.len() as u32) as usize].push(entry);
    }
    let calls = shards
        .iter()
        .zip(parts)
        .filter(|(_, part)| !part.is_empty())
        .map(|(&shard, part)| async move { ask::<_, u64>(shard, "shard_put_batch", &(part,)).await });
    let mut stored = 0;
    for result in join_all(calls).await {
        stored += result?;
    }
    Ok(stored)
}

/// Asks every shard the same, all calls in flight together; the answers in shard order.
async fn fan_out<A: candid::utils::ArgumentEncoder, R: CandidType + for<'de> Deserialize<'de>>(
    method: &str,
    args: &A,
) -> Result<Vec<R>, Error> {
    let shards = shards()?;
    join_all(shards.iter().map(|&shard| ask::<A, R>(shard, method, args))).await.into_iter().collect()
}

/// How many keys all shards hold (one call to each).
#[ic_cdk::update]
async fn len() -> Result<u64, Error> {
    Ok(fan_out::<_, u64>("shard_len", &()).await?.into_iter().sum())
}

/// The `k` largest keys with their values, largest first (each shard's `k` largest, merged), as
/// many as fit a page (`complete` false if fewer than `k` did).
#[ic_cdk::update]
async fn top(k: u32) -> Result<Page, Error> {
    check_page(k)?;
    let parts = fan_out::<_, Page>("shard_top", &(k,)).await?;
    Ok(merge_pages(parts, k as usize, true))
}

/// Up to `limit` entries in key order after `after` (from the start without it): each shard's
/// first `limit` after it, merged, as many as fit a page. The next page starts after the last key
/// returned; an empty page is the end.
#[ic_cdk::update]
async fn scan(after: Option<ByteBuf>, limit: u32) -> Result<Page, Error> {
    check_page(limit)?;
    let parts = fan_out::<_, Page>("shard_scan", &(after, limit)).await?;
    Ok(merge_pages(parts, limit as usize, false))
}

// ---- A shard -------------------------------------------------------------------------------

/// Stores `value` under `key`; returns the value it replaced. Its router or controllers only.
#[ic_cdk::update]
fn shard_put(key: ByteBuf, value: ByteBuf) -> Result<Option<ByteBuf>, Error> {
    shard_writer()?;
    check_entry(&key, &value)?;
    Ok(MAP.with_borrow_mut(|m| m.insert(key.into_vec(), value.into_vec())).map(ByteBuf::from))
}

/// Stores every entry (one message); returns how many. Its router or controllers only.
#[ic_cdk::update]
fn shard_put_batch(entries: Vec<Entry>) -> Result<u64, Error> {
    shard_writer()?;
    for (k, v) in &entries {
        check_entry(k, v)?;
    }
    let n = entries.len() as u64;
    MAP.with_borrow_mut(|m| {
        for (k, v) in entries {
            m.insert(k.into_vec(), v.into_vec());
        }
    });
    Ok(n)
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
