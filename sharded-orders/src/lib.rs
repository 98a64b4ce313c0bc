//! The users/orders data set sharded by user across canisters: one wasm
//! (`stablebench_sharded_orders.wasm`), installed as a router or as a shard.
//!
//! - **A shard** keeps its users and their orders in SQLite (ic-rusqlite, in stable memory), opened
//!   with stablebench's recommended settings (`stablebench_pragmas::RECOMMENDED`, each read back,
//!   the page cache bounded to a quarter of the heap limit), in the tables of
//!   `stablebench_sharded::orders`. Every order lives on its user's shard. Writes come from its
//!   router or its controllers; reads from anyone.
//! - **The router** routes by user (`shard_of` of the user id, 8 bytes big-endian): a batch of
//!   users or orders split by shard, a user's orders from its shard, a count, the top-k orders
//!   (joined with their users) and a page of orders fanned out to every shard, and
//!   `move_order`, which gives an order to another user: on one shard a single `UPDATE`,
//!   across two shards the move protocol of `stablebench_sharded` (hold, place, finish, logged
//!   here in SQLite), which loses nothing when a side fails.
//!
//! Its interface: `sharded-orders/stablebench_sharded_orders.did`; tested and measured through
//! the offline runner's network of canisters (`runner/tests/sharded/orders.rs`).
#![cfg(target_arch = "wasm32")]

use candid::{CandidType, Deserialize, Principal};
use ic_rusqlite::{close_connection, with_connection, Connection, OptionalExtension};
use serde_bytes::ByteBuf;
use stablebench_sharded::orders::{order_key, user_key, Order, OrdersShard};
use stablebench_sharded::router::{self, ask, controller_only, fan_out, scatter, MoveLog};
use stablebench_sharded::{
    by_amount, check_new_shards, check_page, finish, hold, may_read, merge_sorted, routes, shard_of, Error, Move,
    OrderRow, Role, Stage, UserOrder,
};

/// Rust's allocations in a heap of their own, away from SQLite's page cache (as in
/// examples/sqlite).
#[global_allocator]
static ALLOCATOR: dlmalloc::GlobalDlmalloc = dlmalloc::GlobalDlmalloc;

/// The most users or orders one batch takes.
const MAX_BATCH: usize = 10_000;
/// The longest email accepted, bytes.
const MAX_EMAIL_BYTES: usize = 256;

/// The router's and every shard's own tables, beside the shard's users and orders.
const TABLES: &str = "\
    CREATE TABLE IF NOT EXISTS config (name TEXT PRIMARY KEY, value BLOB NOT NULL);\n\
    CREATE TABLE IF NOT EXISTS moves (id INTEGER PRIMARY KEY, move BLOB NOT NULL, from_user INTEGER NOT NULL, \
        to_user INTEGER NOT NULL);";

/// Runs `f` on the connection; a SQLite error traps, which undoes the message.
fn db<R>(f: impl FnOnce(&Connection) -> ic_rusqlite::Result<R>) -> R {
    with_connection(|conn| f(&conn)).unwrap_or_else(|e| ic_cdk::trap(format!("SQLite: {e}")))
}

/// Opens the database with the recommended settings, each read back, and the tables.
fn open() -> Result<(), String> {
    ic_rusqlite::set_connection_config(ic_rusqlite::ConnectionConfig {
        pragma_settings: Default::default(),
        ..Default::default()
    });
    with_connection(|conn| {
        stablebench_pragmas::apply(&conn, &stablebench_pragmas::RECOMMENDED).map_err(|e| e.to_string())?;
        conn.execute_batch(TABLES).map_err(|e| e.to_string())?;
        OrdersShard::open(&conn).map_err(|e| e.to_string())?;
        stablebench_pragmas::bound_cache(&conn, stablebench_pragmas::DEFAULT_WASM_MEMORY_LIMIT_BYTES)
            .map_err(|e| e.to_string())?;
        Ok(())
    })
}

fn get_config<T: for<'de> Deserialize<'de> + CandidType>(name: &str) -> Option<T> {
    let bytes: Option<Vec<u8>> =
        db(|c| c.query_row("SELECT value FROM config WHERE name = ?1", [name], |r| r.get(0)).optional());
    bytes.map(|b| candid::decode_one(&b).unwrap_or_else(|e| ic_cdk::trap(format!("config {name}: {e}"))))
}

fn set_config<T: CandidType>(name: &str, value: &T) {
    let bytes = candid::encode_one(value).expect("encode the config");
    db(|c| c.execute("INSERT OR REPLACE INTO config (name, value) VALUES (?1, ?2)", (name, bytes)));
}

#[ic_cdk::init]
fn init(role: Role) {
    if let Err(e) = open() {
        ic_cdk::trap(format!("refusing to start: {e}"));
    }
    set_config("role", &role);
}

#[ic_cdk::pre_upgrade]
fn pre_upgrade() {
    close_connection();
}

#[ic_cdk::post_upgrade]
fn post_upgrade() {
    if let Err(e) = open() {
        ic_cdk::trap(format!("refusing to start: {e}"));
    }
}

fn role() -> Option<Role> {
    get_config("role")
}

/// The router's shards, or why this canister cannot route.
fn shards() -> Result<Vec<Principal>, Error> {
    routes(&role(), get_config("shards").unwrap_or_default())
}

/// A user's shard among `shards`.
fn shard_of_user(shards: &[Principal], user: u64) -> Principal {
    shards[shard_of(&user_key(user), shards.len() as u32) as usize]
}

fn shard_writer() -> Result<(), Error> {
    router::shard_writer(&role())
}

fn shard_reader() -> Result<(), Error> {
    may_read(&role())
}

/// A batch of 1 to [`MAX_BATCH`] ids, each once and at most `i64::MAX` (SQLite's integer key).
fn check_batch(ids: impl Iterator<Item = u64>) -> Result<(), Error> {
    let mut seen = std::collections::BTreeSet::new();
    for id in ids {
        if id > i64::MAX as u64 || !seen.insert(id) {
            return Err(Error::InvalidArgument { message: format!("id {id} is repeated or above {}", i64::MAX) });
        }
    }
    if seen.is_empty() || seen.len() > MAX_BATCH {
        return Err(Error::InvalidArgument { message: format!("a batch of {}: 1 to {MAX_BATCH}", seen.len()) });
    }
    Ok(())
}

// ---- The router ----------------------------------------------------------------------------

/// Registers shards, in order (a user's shard is its position in this list). Controllers only;
/// once.
#[ic_cdk::update]
fn add_shards(new: Vec<Principal>) -> Result<(), Error> {
    controller_only()?;
    let existing: Vec<Principal> = get_config("shards").unwrap_or_default();
    check_new_shards(&role(), ic_cdk::api::canister_self(), &existing, &new)?;
    set_config("shards", &new);
    Ok(())
}

/// The router's shards, in order.
#[ic_cdk::query]
fn shard_list() -> Vec<Principal> {
    get_config("shards").unwrap_or_default()
}

/// The shard that holds `user` and its orders (for clients that route their own calls).
#[ic_cdk::query]
fn shard_for_user(user: u64) -> Result<Principal, Error> {
    Ok(shard_of_user(&shards()?, user))
}

/// Adds users (id, email) on their shards: one call per shard, all in flight together. Returns
/// how many were added. Controllers only. A shard that refuses its part (a user it has) adds none
/// of it; the others may have added theirs (the error names the shard).
#[ic_cdk::update]
async fn add_users(users: Vec<(u64, String)>) -> Result<u64, Error> {
    controller_only()?;
    check_batch(users.iter().map(|u| u.0))?;
    if let Some((id, _)) = users.iter().find(|(_, e)| e.len() > MAX_EMAIL_BYTES) {
        return Err(Error::InvalidArgument { message: format!("user {id}'s email: at most {MAX_EMAIL_BYTES} bytes") });
    }
    let shards = shards()?;
    let n = shards.len() as u32;
    scatter(&shards, "shard_add_users", users, |u| shard_of(&user_key(u.0), n)).await
}

/// Adds orders on their users' shards: one call per shard, all in flight together. Returns how
/// many were added. Controllers only. A shard that refuses its part (an order id it has, a user
/// it does not) adds none of it; the others may have added theirs.
#[ic_cdk::update]
async fn add_orders(orders: Vec<OrderRow>) -> Result<u64, Error> {
    controller_only()?;
    check_batch(orders.iter().map(|o| o.id))?;
    let shards = shards()?;
    let n = shards.len() as u32;
    scatter(&shards, "shard_add_orders", orders, |o| shard_of(&user_key(o.user), n)).await
}

/// A user's orders, from its shard (one call; an update, because a query cannot call another
/// canister).
#[ic_cdk::update]
async fn orders_of(user: u64) -> Result<Vec<OrderRow>, Error> {
    let shard = shard_of_user(&shards()?, user);
    ask(shard, "shard_orders_of", &(user,)).await
}

/// How many orders all shards hold (one call to each, together).
#[ic_cdk::update]
async fn count_orders() -> Result<u64, Error> {
    Ok(fan_out::<_, u64>(&shards()?, "shard_count", &()).await?.into_iter().sum())
}

/// The `k` largest orders of all shards (largest amount first, then smallest id), each with its
/// user's email: every shard's `k` largest joined with its users (a user and its orders share a
/// shard), merged.
#[ic_cdk::update]
async fn top_orders(k: u32) -> Result<Vec<UserOrder>, Error> {
    check_page(k)?;
    let parts = fan_out::<_, Vec<UserOrder>>(&shards()?, "shard_top_orders", &(k,)).await?;
    Ok(merge_sorted(parts, k as usize, |a, b| by_amount(&a.order, &b.order)))
}

/// Up to `limit` orders of all shards by id, after `after` (from the first without it): every
/// shard's first `limit`, merged. The next page starts after the last id returned; an empty page
/// is the end.
#[ic_cdk::update]
async fn scan_orders(after: Option<u64>, limit: u32) -> Result<Vec<OrderRow>, Error> {
    check_page(limit)?;
    let parts = fan_out::<_, Vec<OrderRow>>(&shards()?, "shard_scan_orders", &(after, limit)).await?;
    Ok(merge_sorted(parts, limit as usize, |a, b| a.id.cmp(&b.id)))
}

/// The router's log of moves, in SQLite: a move's shards are its users', and the order it holds
/// is placed with the new user.
struct OrdersLog;

impl MoveLog for OrdersLog {
    fn load(&self, id: u64) -> Option<Move> {
        let bytes: Option<Vec<u8>> =
            db(|c| c.query_row("SELECT move FROM moves WHERE id = ?1", [id as i64], |r| r.get(0)).optional());
        bytes.map(|b| candid::decode_one(&b).unwrap_or_else(|e| ic_cdk::trap(format!("move {id}: {e}"))))
    }
    fn save(&self, m: Move) {
        let bytes = candid::encode_one(&m).expect("encode a move");
        db(|c| c.execute("UPDATE moves SET move = ?2 WHERE id = ?1", (m.id as i64, bytes)));
    }
    fn forget(&self, id: u64) {
        db(|c| c.execute("DELETE FROM moves WHERE id = ?1", [id as i64]));
    }
    fn shards(&self, m: &Move) -> Result<(Principal, Principal), Error> {
        let shards = shards()?;
        let (from, to) = users_of(m.id);
        Ok((shard_of_user(&shards, from), shard_of_user(&shards, to)))
    }
    fn rewrite(&self, m: &Move, value: ByteBuf) -> Result<ByteBuf, Error> {
        let (from, to) = users_of(m.id);
        match Order::decode(&value) {
            Some(o) if o.user == from => Ok(ByteBuf::from(Order { user: to, ..o }.encode())),
            Some(o) => Err(Error::InvalidArgument {
                message: format!("order {} belongs to user {}, not {from}", order_id(&m.from), o.user),
            }),
            None => Err(Error::InvalidArgument { message: "the source answered no order".into() }),
        }
    }
}

/// The users a logged move takes its order from and gives it to.
fn users_of(id: u64) -> (u64, u64) {
    db(|c| {
        c.query_row("SELECT from_user, to_user FROM moves WHERE id = ?1", [id as i64], |r| {
            Ok((r.get::<_, i64>(0)? as u64, r.get::<_, i64>(1)? as u64))
        })
    })
}

fn order_id(key: &[u8]) -> u64 {
    key.try_into().map(u64::from_be_bytes).unwrap_or(u64::MAX)
}

/// The logged moves' ids, in order.
fn move_ids() -> Vec<u64> {
    db(|c| {
        let mut st = c.prepare("SELECT id FROM moves ORDER BY id")?;
        let rows = st.query_map([], |r| r.get::<_, i64>(0))?;
        rows.map(|r| r.map(|id| id as u64)).collect::<ic_rusqlite::Result<Vec<_>>>()
    })
}

/// Gives order `order` of user `from` to user `to`. Controllers only. On one shard it is one
/// `UPDATE`; across two, the move protocol (`stablebench_sharded`, "Moving an entry between
/// shards"): a failure undoes it, or, once decided, leaves it for `recover` (`MoveUnfinished`).
/// Refused, changing nothing, if the order is not `from`'s, `to` does not exist, or a move holds
/// the order.
#[ic_cdk::update]
async fn move_order(order: u64, from: u64, to: u64) -> Result<(), Error> {
    controller_only()?;
    if from == to {
        return Err(Error::InvalidArgument { message: "a move needs two different users".into() });
    }
    let shards = shards()?;
    let (src, dst) = (shard_of_user(&shards, from), shard_of_user(&shards, to));
    if src == dst {
        return ask(src, "shard_reassign", &(order, from, to)).await;
    }
    let id: u64 = get_config("next_move").unwrap_or(0);
    set_config("next_move", &(id + 1));
    let key = ByteBuf::from(order_key(order).to_vec());
    let m = Move { id, from: key.clone(), to: key, stage: Stage::Holding };
    let bytes = candid::encode_one(&m).expect("encode a move");
    db(|c| {
        c.execute(
            "INSERT INTO moves (id, move, from_user, to_user) VALUES (?1, ?2, ?3, ?4)",
            (id as i64, bytes, from as i64, to as i64),
        )
    });
    router::run(&OrdersLog, id).await
}

/// Drives every unfinished move no call is driving on from its logged stage, as the key-value
/// router's `recover` does. Controllers only. Returns how many moves are still unfinished.
#[ic_cdk::update]
async fn recover() -> Result<u64, Error> {
    controller_only()?;
    shards()?;
    router::recover(&OrdersLog, move_ids()).await;
    Ok(db(|c| c.query_row("SELECT count(*) FROM moves", [], |r| r.get::<_, i64>(0))) as u64)
}

/// The unfinished moves, in id order.
#[ic_cdk::query]
fn moves() -> Vec<Move> {
    move_ids().into_iter().filter_map(|id| OrdersLog.load(id)).collect()
}

// ---- A shard -------------------------------------------------------------------------------

/// Runs `f` on this shard's tables.
fn shard<R>(f: impl FnOnce(&mut OrdersShard<'_>) -> R) -> R {
    with_connection(|conn| {
        let mut s = OrdersShard::on(&conn);
        f(&mut s)
    })
}

/// An order key: 8 bytes.
fn check_key(key: &[u8]) -> Result<(), Error> {
    if key.len() != 8 {
        return Err(Error::InvalidArgument { message: format!("an order key is 8 bytes, not {}", key.len()) });
    }
    Ok(())
}

/// Adds users, all or none: refused if this shard has one of them. Its router or controllers.
#[ic_cdk::update]
fn shard_add_users(users: Vec<(u64, String)>) -> Result<u64, Error> {
    shard_writer()?;
    check_batch(users.iter().map(|u| u.0))?;
    shard(|s| {
        if let Some((id, _)) = users.iter().find(|(id, _)| s.has_user(*id).expect("SQLite")) {
            return Err(Error::KeyExists { key: ByteBuf::from(user_key(*id).to_vec()) });
        }
        let n = users.len() as u64;
        s.add_users(&users).unwrap_or_else(|e| ic_cdk::trap(format!("SQLite: {e}")));
        Ok(n)
    })
}

/// Adds orders, all or none: refused if this shard has one of the order ids or lacks one of the
/// users. Its router or controllers.
#[ic_cdk::update]
fn shard_add_orders(orders: Vec<OrderRow>) -> Result<u64, Error> {
    shard_writer()?;
    check_batch(orders.iter().map(|o| o.id))?;
    shard(|s| {
        for o in &orders {
            if !s.has_user(o.user).expect("SQLite") {
                return Err(Error::NotFound { key: ByteBuf::from(user_key(o.user).to_vec()) });
            }
            if stablebench_sharded::Store::get(s, &order_key(o.id)).is_some() {
                return Err(Error::KeyExists { key: ByteBuf::from(order_key(o.id).to_vec()) });
            }
        }
        let n = orders.len() as u64;
        s.add_orders(&orders).unwrap_or_else(|e| ic_cdk::trap(format!("SQLite: {e}")));
        Ok(n)
    })
}

/// A user's orders, by id.
#[ic_cdk::query]
fn shard_orders_of(user: u64) -> Result<Vec<OrderRow>, Error> {
    shard_reader()?;
    Ok(shard(|s| s.orders_of(user).expect("SQLite"))
        .into_iter()
        .map(|(id, amount)| OrderRow { id, user, amount })
        .collect())
}

/// How many orders this shard holds.
#[ic_cdk::query]
fn shard_count() -> Result<u64, Error> {
    shard_reader()?;
    Ok(shard(|s| s.count_orders().expect("SQLite")))
}

/// This shard's `k` largest orders, each with its user's email.
#[ic_cdk::query]
fn shard_top_orders(k: u32) -> Result<Vec<UserOrder>, Error> {
    shard_reader()?;
    check_page(k)?;
    Ok(shard(|s| s.top_orders(k).expect("SQLite")))
}

/// Up to `limit` of this shard's orders by id, after `after`.
#[ic_cdk::query]
fn shard_scan_orders(after: Option<u64>, limit: u32) -> Result<Vec<OrderRow>, Error> {
    shard_reader()?;
    check_page(limit)?;
    Ok(shard(|s| s.orders_after(after, limit).expect("SQLite")))
}

/// Gives order `order` of user `from` to user `to`, both of this shard (one `UPDATE`). Its router
/// or controllers.
#[ic_cdk::update]
fn shard_reassign(order: u64, from: u64, to: u64) -> Result<(), Error> {
    shard_writer()?;
    shard(|s| s.reassign(order, from, to))
}

/// A move's step 1 on its source: holds the order for move `id` and answers it. Its router or
/// controllers.
#[ic_cdk::update]
fn shard_hold(key: ByteBuf, id: u64) -> Result<ByteBuf, Error> {
    shard_writer()?;
    check_key(&key)?;
    shard(|s| hold(s, &key, id)).map(ByteBuf::from)
}

/// A move's step 2 on its destination: stores the order, held for move `id`, if its user lives
/// here. Its router or controllers.
#[ic_cdk::update]
fn shard_place(key: ByteBuf, value: ByteBuf, id: u64) -> Result<(), Error> {
    shard_writer()?;
    check_key(&key)?;
    shard(|s| s.place_order(&key, value.into_vec(), id))
}

/// A move's last step on either shard: releases move `id`'s hold on the order, removing it if
/// `remove`. Its router or controllers.
#[ic_cdk::update]
fn shard_finish(key: ByteBuf, id: u64, remove: bool) -> Result<(), Error> {
    shard_writer()?;
    check_key(&key)?;
    shard(|s| finish(s, &key, id, remove));
    Ok(())
}

ic_cdk::export_candid!();
