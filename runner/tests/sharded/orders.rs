//! The users/orders set sharded by user (`sharded-orders/`): a router and N shards, each shard's
//! users and orders in SQLite under the recommended settings, run together in the offline
//! runner's network of canisters and priced as mainnet prices them. Checked against a model (a
//! map from user to its orders), with orders moved between users on one shard and across two,
//! faults in the middle of a cross-shard move, and what each operation costs against N
//! (`sharded_orders_results.yml`, from which `docs/sharding.md`'s tables are generated).

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use crate::common::sets::{self, Measuring, Set};
use candid::Principal;
use stablebench_grid::sharded::{self, ORDERS_LOAD_BATCH, ORDERS_ORDERS, ORDERS_USERS};
use stablebench_report::sharding::{Cost, SHARDED_ORDERS_HEADER};
use stablebench_runner::canister::{default_controller, Code};
use stablebench_runner::instrument::Metering;
use stablebench_runner::network::{Event, SubnetId};
use stablebench_sharded::{by_amount, shard_of, Error, Move, OrderRow, Role, Stage, UserOrder};

/// `target/canister/stablebench_sharded_orders.wasm` (scripts/build.sh sharded_orders), loaded once.
fn code() -> Arc<Code> {
    static CODE: OnceLock<Arc<Code>> = OnceLock::new();
    CODE.get_or_init(|| {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../target/canister/stablebench_sharded_orders.wasm");
        Code::from_file(path.as_ref(), Metering::On)
            .unwrap_or_else(|e| panic!("{path}: {e} (run scripts/build.sh sharded_orders; scripts/test.sh does)"))
    })
    .clone()
}

/// A router and `n` shards of the users/orders set (ids tagged 2).
fn deploy(n: u64, subnets: u32, subnet_of: impl Fn(u64) -> SubnetId) -> Set {
    sets::deploy(code(), 2, n, subnets, subnet_of)
}

/// The shard of `user` in `set`.
fn shard_of_user(set: &Set, user: u64) -> Principal {
    set.shards[shard_of(&user.to_be_bytes(), set.shards.len() as u32) as usize]
}

/// Per user, its orders by id.
type Model = BTreeMap<u64, Vec<OrderRow>>;

/// Users 1..=`users`, and `orders` orders: order `i` (from 1) belongs to user `i % users + 1`,
/// amount `i`; loaded in batches of `ORDERS_LOAD_BATCH`.
fn load(set: &mut Set, users: u64, orders: u64) -> Model {
    let all: Vec<(u64, String)> = (1..=users).map(|u| (u, format!("user{u}@example.com"))).collect();
    for batch in all.chunks(ORDERS_LOAD_BATCH as usize) {
        let added: Result<u64, Error> = set.call(set.router, "add_users", &(batch.to_vec(),)).0;
        assert_eq!(added, Ok(batch.len() as u64));
    }
    let rows: Vec<OrderRow> = (1..=orders).map(|i| OrderRow { id: i, user: i % users + 1, amount: i as i64 }).collect();
    for batch in rows.chunks(ORDERS_LOAD_BATCH as usize) {
        let added: Result<u64, Error> = set.call(set.router, "add_orders", &(batch.to_vec(),)).0;
        assert_eq!(added, Ok(batch.len() as u64));
    }
    let mut model = Model::new();
    for u in 1..=users {
        model.insert(u, Vec::new());
    }
    for o in rows {
        model.get_mut(&o.user).unwrap().push(o);
    }
    model
}

/// Every user's orders read back through the router as the model has them, the count, the ten
/// largest orders with their users' emails, and every order paged through by id.
fn check_model(set: &mut Set, model: &Model) {
    let count: Result<u64, Error> = set.call(set.router, "count_orders", &()).0;
    assert_eq!(count, Ok(model.values().map(|v| v.len() as u64).sum()));
    let mut all: Vec<OrderRow> = model.values().flatten().copied().collect();
    all.sort_by(by_amount);
    let top: Result<Vec<UserOrder>, Error> = set.call(set.router, "top_orders", &(10u32,)).0;
    let want: Vec<UserOrder> =
        all[..10].iter().map(|&order| UserOrder { order, email: format!("user{}@example.com", order.user) }).collect();
    assert_eq!(top, Ok(want));
    all.sort();
    let (mut after, mut paged) = (None::<u64>, Vec::new());
    loop {
        let page: Result<Vec<OrderRow>, Error> = set.call(set.router, "scan_orders", &(after, 1000u32)).0;
        let page = page.unwrap();
        let Some(last) = page.last() else { break };
        after = Some(last.id);
        paged.extend(page);
    }
    assert_eq!(paged, all);
    for (&user, orders) in model {
        let got: Result<Vec<OrderRow>, Error> = set.call(set.router, "orders_of", &(user,)).0;
        assert_eq!(got.as_ref(), Ok(orders), "user {user}");
    }
}

/// `order` moved from its user to `to` in the model.
fn moved(model: &mut Model, order: u64, to: u64) {
    let (from, i) =
        model.iter().find_map(|(&u, v)| v.iter().position(|o| o.id == order).map(|i| (u, i))).expect("the order");
    let o = model.get_mut(&from).unwrap().remove(i);
    let dest = model.get_mut(&to).unwrap();
    dest.push(OrderRow { user: to, ..o });
    dest.sort();
}

/// Two users on different shards of `set`: (a, b).
fn across(set: &Set, users: u64) -> (u64, u64) {
    let b = (2..=users).find(|&u| shard_of_user(set, u) != shard_of_user(set, 1)).expect("another shard");
    (1, b)
}

#[test]
fn a_sharded_users_orders_set_holds_what_a_model_holds() {
    for n in [1, 3] {
        let mut set = deploy(n, 1, |_| 0);
        let model = load(&mut set, 60, 600);
        check_model(&mut set, &model);
        // Every user's orders live on its shard, which a client can read directly (a query).
        for user in [1u64, 17, 60] {
            let shard: Result<Principal, Error> = set.query(set.router, "shard_for_user", &(user,));
            assert_eq!(shard, Ok(shard_of_user(&set, user)));
            let direct: Result<Vec<OrderRow>, Error> =
                set.query(shard_of_user(&set, user), "shard_orders_of", &(user,));
            assert_eq!(direct.as_ref(), Ok(&model[&user]));
        }
        let counts: Vec<u64> = set
            .shards
            .clone()
            .iter()
            .map(|&s| set.query::<_, Result<u64, Error>>(s, "shard_count", &()).unwrap())
            .collect();
        assert_eq!(counts.iter().sum::<u64>(), 600);
        assert!(n == 1 || counts.iter().all(|&c| c > 0), "{counts:?}");
        // Pages of 7 by id, each shard's first 7 merged, list every order once.
        let (mut after, mut pages) = (None::<u64>, 0);
        let mut ids = Vec::new();
        while let Ok(page) = set.call::<_, Result<Vec<OrderRow>, Error>>(set.router, "scan_orders", &(after, 7u32)).0 {
            let Some(last) = page.last() else { break };
            assert!(page.len() <= 7);
            (after, pages) = (Some(last.id), pages + 1);
            ids.extend(page.iter().map(|o| o.id));
        }
        assert_eq!((ids, pages), ((1..=600).collect::<Vec<u64>>(), 86));
        for refused in [0u32, 1001] {
            let top: Result<Vec<UserOrder>, Error> = set.call(set.router, "top_orders", &(refused,)).0;
            assert!(matches!(top, Err(Error::InvalidArgument { .. })), "top_orders({refused}): {top:?}");
            let page: Result<Vec<OrderRow>, Error> = set.call(set.router, "scan_orders", &(None::<u64>, refused)).0;
            assert!(matches!(page, Err(Error::InvalidArgument { .. })), "scan_orders(null, {refused}): {page:?}");
        }
    }
}

/// Orders given to a user on the same shard (one UPDATE) and on another (the move protocol);
/// refusals (an order that is not the user's, a user that does not exist, a stranger, the same
/// user twice, a duplicate order id in a load) change nothing.
#[test]
fn orders_move_between_users_and_refused_moves_change_nothing() {
    let mut set = deploy(4, 1, |_| 0);
    let mut model = load(&mut set, 40, 200);
    let (mut within, mut between) = (0, 0);
    for order in 1..=20u64 {
        let from = order % 40 + 1;
        let to = (from + 7) % 40 + 1;
        let ok: Result<(), Error> = set.call(set.router, "move_order", &(order, from, to)).0;
        assert_eq!(ok, Ok(()), "order {order}");
        moved(&mut model, order, to);
        if shard_of_user(&set, from) == shard_of_user(&set, to) {
            within += 1;
        } else {
            between += 1;
        }
    }
    assert!(within > 0 && between > 0, "{within} within a shard, {between} across");
    let (a, b) = across(&set, 40);
    let same = (2..=40).find(|&u| shard_of_user(&set, u) == shard_of_user(&set, a)).unwrap();
    let order_of_a = model[&a][0].id;
    for (order, from, to) in [(order_of_a, b, a), (order_of_a, a, 999), (order_of_a, a, a), (order_of_a, same, a)] {
        let r: Result<(), Error> = set.call(set.router, "move_order", &(order, from, to)).0;
        assert!(r.is_err(), "moving order {order} from {from} to {to}: {r:?}");
    }
    let r: Result<(), Error> = set.call(set.router, "move_order", &(order_of_a, a, b + 1000)).0;
    assert!(matches!(r, Err(Error::NotFound { .. })), "a user that does not exist: {r:?}");
    let stranger = Principal::from_slice(&[9; 29]);
    let r: Result<(), Error> = set.call_as(stranger, set.router, "move_order", &(order_of_a, a, b)).0;
    assert_eq!(r, Err(Error::NotAuthorized { caller: stranger }));
    let r: Result<u64, Error> =
        set.call(set.router, "add_orders", &(vec![OrderRow { id: order_of_a, user: a, amount: 1 }],)).0;
    assert!(matches!(r, Err(Error::KeyExists { .. })), "a duplicate order id: {r:?}");
    let twice = vec![OrderRow { id: 9_000, user: a, amount: 1 }, OrderRow { id: 9_000, user: b, amount: 1 }];
    let r: Result<u64, Error> = set.call(set.router, "add_orders", &(twice,)).0;
    assert!(matches!(r, Err(Error::InvalidArgument { .. })), "a batch that repeats an id: {r:?}");
    let pending: Vec<Move> = set.query(set.router, "moves", &());
    assert!(pending.is_empty(), "{pending:?}");
    check_model(&mut set, &model);
}

/// A shard that is full (its `memory_allocation` at what it uses): a batch of orders whose part
/// needs room there fails with an error naming the shard, the other shards keep their parts and
/// the full shard all it had (its SQLite transaction undone with the message), its users' orders
/// still read back; once it has room again, the part of the batch that was its (the orders of
/// its users) sent again lands, and the model check finds every order once.
#[test]
fn a_full_shard_gives_a_clear_error_and_loses_nothing() {
    let mut set = deploy(4, 1, |_| 0);
    let mut model = load(&mut set, 40, 200);
    let full = shard_of_user(&set, 1);
    set.fill(full);
    // Batches of 4,000 orders until one needs more room than the full shard has (SQLite and its
    // page cache fill the room it had first).
    let mut failed = None;
    for b in 0..100u64 {
        let batch: Vec<OrderRow> =
            (0..4_000u64).map(|i| OrderRow { id: 10_000 + b * 4_000 + i, user: i % 40 + 1, amount: 7 }).collect();
        let r: Result<u64, Error> = set.call(set.router, "add_orders", &(batch.clone(),)).0;
        match r {
            Ok(n) => {
                assert_eq!(n, 4_000);
                for o in batch {
                    model.get_mut(&o.user).unwrap().push(o);
                }
            }
            Err(Error::ShardFailed { shard, code: 5, message }) => {
                assert_eq!(shard, full);
                assert!(message.contains("memory"), "{message}");
                failed = Some(batch);
                break;
            }
            Err(e) => panic!("expected the full shard's failure, got {e:?}"),
        }
    }
    let batch = failed.expect("the full shard ran out of room within 400,000 orders");
    let (theirs, others): (Vec<OrderRow>, Vec<OrderRow>) =
        batch.into_iter().partition(|o| shard_of_user(&set, o.user) == full);
    for o in others {
        model.get_mut(&o.user).unwrap().push(o);
    }
    // While full, a read that needs no temporary storage still answers; one that sorts (the top
    // orders) needs room for its temporary file (temp_store FILE: the recommended profile's sorts
    // spill to stable memory, not the heap) and fails with the shard's clear error. Given room,
    // every read finds every row: nothing was lost.
    let count: Result<u64, Error> = set.call(set.router, "count_orders", &()).0;
    assert_eq!(count, Ok(model.values().map(|v| v.len() as u64).sum()));
    match set.call::<_, Result<Vec<UserOrder>, Error>>(set.router, "top_orders", &(10u32,)).0 {
        Ok(_) => {}
        Err(Error::ShardFailed { shard, code: 5, message }) => {
            assert_eq!(shard, full);
            assert!(message.contains("memory"), "{message}");
        }
        Err(e) => panic!("expected the top orders or the full shard's failure, got {e:?}"),
    }
    set.room(full);
    check_model(&mut set, &model);
    let r: Result<u64, Error> = set.call(set.router, "add_orders", &(theirs.clone(),)).0;
    assert_eq!(r, Ok(theirs.len() as u64));
    for o in theirs {
        model.get_mut(&o.user).unwrap().push(o);
    }
    check_model(&mut set, &model);
}

/// A set whose 4 shards sit on another subnet than the router, 40 users and 200 orders, and an
/// order of a user moved to a user on another shard: the hold reaches the source in round 3, its
/// answer the router in round 5, the place the destination in round 7, its answer the router in
/// round 9, the finishes both shards in round 11.
fn moving_set() -> (Set, Model, u64, u64, u64, Principal, Principal) {
    let mut set = deploy(4, 2, |_| 1);
    let model = load(&mut set, 40, 200);
    let (a, b) = across(&set, 40);
    let order = model[&a][0].id;
    let (src, dst) = (shard_of_user(&set, a), shard_of_user(&set, b));
    (set, model, order, a, b, src, dst)
}

/// The destination traps at the place: the move is undone, the error names the destination, and
/// the order is its user's again, writable.
#[test]
fn a_destination_that_traps_mid_move_undoes_it() {
    let (mut set, model, order, a, b, _, dst) = moving_set();
    set.net.schedule(6, Event::Trap(dst));
    let (r, t): (Result<(), Error>, _) = set.call(set.router, "move_order", &(order, a, b));
    assert!(matches!(&r, Err(Error::ShardFailed { shard, code: 5, .. }) if *shard == dst), "{r:?}");
    assert!(t.log.iter().any(|l| l.canister == dst && l.what == "shard_place" && l.trap.is_some()), "{:?}", t.log);
    let pending: Vec<Move> = set.query(set.router, "moves", &());
    assert!(pending.is_empty(), "{pending:?}");
    check_model(&mut set, &model);
}

/// The source traps at the commit: `MoveUnfinished` at `Committing`, and `recover` finishes it:
/// the order is the new user's only.
#[test]
fn a_source_that_traps_at_the_commit_is_finished_by_recover() {
    let (mut set, mut model, order, a, b, src, _) = moving_set();
    set.net.schedule(10, Event::Trap(src));
    let r: Result<(), Error> = set.call(set.router, "move_order", &(order, a, b)).0;
    let Err(Error::MoveUnfinished { stage: Stage::Committing, .. }) = &r else { panic!("{r:?}") };
    let left: Result<u64, Error> = set.call(set.router, "recover", &()).0;
    assert_eq!(left, Ok(0));
    moved(&mut model, order, b);
    check_model(&mut set, &model);
}

/// The router traps in the callback that has the hold, its shards are upgraded (SQLite and the
/// hold live in stable memory), and `recover` finishes the move.
#[test]
fn a_router_that_traps_mid_move_and_upgraded_shards_lose_nothing() {
    let (mut set, mut model, order, a, b, src, dst) = moving_set();
    set.net.schedule(4, Event::Trap(set.router));
    let t =
        set.net.update(set.router, "move_order", &candid::encode_args((order, a, b)).unwrap(), default_controller());
    assert!(t.result.is_err(), "the router trapped: {:?}", t.result);
    let pending: Vec<Move> = set.query(set.router, "moves", &());
    assert_eq!(pending.iter().map(|m| m.stage).collect::<Vec<_>>(), [Stage::Holding]);
    for shard in [src, dst] {
        let arg = candid::encode_one(Role::Shard { router: set.router }).unwrap();
        set.net.schedule(1, Event::Upgrade { canister: shard, code: code(), arg });
    }
    // A move of the held order waits for the first one (refused, nothing changes).
    let (again, t): (Result<(), Error>, _) = set.call(set.router, "move_order", &(order, a, b));
    assert_eq!(t.log.iter().filter(|l| l.what == "upgrade").count(), 2);
    assert!(matches!(&again, Err(Error::Held { .. })), "{again:?}");
    let left: Result<u64, Error> = set.call(set.router, "recover", &()).0;
    assert_eq!(left, Ok(0));
    moved(&mut model, order, b);
    check_model(&mut set, &model);
}

/// Each operation of `stablebench_grid::sharded::ORDERS_OPERATIONS`, in order, on a set of `n`
/// shards holding `ORDERS_USERS` users and `ORDERS_ORDERS` orders, the shards on the router's
/// subnet or on another one.
fn measure(n: u64, across_subnets: bool) -> Vec<Cost> {
    let mut set = deploy(n, if across_subnets { 2 } else { 1 }, |_| if across_subnets { 1 } else { 0 });
    let model = load(&mut set, ORDERS_USERS, ORDERS_ORDERS);
    let router = set.router;
    let mut m = Measuring::new(sharded::Set::Orders);
    let user = 5u64;
    m.run(&mut set, "orders_of", router, "orders_of", candid::encode_one(user).unwrap());
    let shard = shard_of_user(&set, user);
    m.run(&mut set, "shard_orders_of", shard, "shard_orders_of", candid::encode_one(user).unwrap());
    let new: Vec<OrderRow> =
        (0..100).map(|i| OrderRow { id: ORDERS_ORDERS + 1 + i, user: i % ORDERS_USERS + 1, amount: 1 }).collect();
    m.run(&mut set, "add_orders", router, "add_orders", candid::encode_one(new).unwrap());
    m.run(&mut set, "count_orders", router, "count_orders", candid::encode_args(()).unwrap());
    m.run(&mut set, "top_orders", router, "top_orders", candid::encode_one(10u32).unwrap());
    m.run(&mut set, "scan_orders", router, "scan_orders", candid::encode_args((None::<u64>, 100u32)).unwrap());
    let order = model[&user][0].id;
    let other = (1..=ORDERS_USERS)
        .find(|&u| u != user && (n == 1 || shard_of_user(&set, u) != shard_of_user(&set, user)))
        .unwrap();
    m.run(&mut set, "move_order", router, "move_order", candid::encode_args((order, user, other)).unwrap());
    let order = model[&user][1].id;
    let same = (1..=ORDERS_USERS).find(|&u| u != user && shard_of_user(&set, u) == shard_of_user(&set, user)).unwrap();
    m.run(&mut set, "move_order_within", router, "move_order", candid::encode_args((order, user, same)).unwrap());
    m.costs
}

/// `sharded_orders_results.yml`: what each operation costs against the number of shards, on one
/// subnet and with the shards on another. Written with `STABLEBENCH_REGENERATE_SHARDED=1`, else
/// compared exactly.
#[test]
fn what_each_operation_costs_against_the_number_of_shards() {
    let (same, across) = sets::measure_all(sharded::Set::Orders, measure);
    let measured = sets::results(sharded::Set::Orders, &same, &across);
    for c in &same {
        assert_eq!((c[0].executions, c[1].executions, c[7].executions), (3, 1, 3));
        assert!(c.iter().all(|c| c.rounds == 1));
    }
    // Across shards a move is three round trips: nine executions, its reply in round 13 with the
    // shards on another subnet.
    assert!(same[1..].iter().all(|c| c[6].executions == 9) && across[1..].iter().all(|c| c[6].rounds == 13));
    sets::keep("sharded_orders_results.yml", SHARDED_ORDERS_HEADER, &measured, "sharded");
}
