//! The sharded set (`sharded/`): a router and N shards run together in the offline runner's
//! network of canisters, checked against a model (a `BTreeMap` and `shard_of`), with its refusals,
//! a missing shard, and what routing costs beside calling the shard directly.

#[path = "../common/mod.rs"]
mod common;
/// The users/orders set sharded by user: in this test binary, so that CI links one binary for both
/// sets.
mod orders;

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use candid::Principal;
use common::sets::{self, Measuring, Set};
use serde_bytes::ByteBuf;
use sha2::{Digest, Sha256};
use stablebench_grid::sharded::{self, KV_ENTRIES, KV_LOAD_BATCH};
use stablebench_report::sharding::{Cost, SHARDED_HEADER};
use stablebench_runner::canister::{default_controller, Code, Options};
use stablebench_runner::instrument::Metering;
use stablebench_runner::network::{Event, Network, SubnetId};
use stablebench_sharded::{shard_of, Entry, Error, Page, Role, Stage};

/// `target/canister/stablebench_sharded.wasm` (scripts/build.sh sharded), loaded once.
fn code() -> Arc<Code> {
    static CODE: OnceLock<Arc<Code>> = OnceLock::new();
    CODE.get_or_init(|| {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../target/canister/stablebench_sharded.wasm");
        Code::from_file(path.as_ref(), Metering::On)
            .unwrap_or_else(|e| panic!("{path}: {e} (run scripts/build.sh sharded; scripts/test.sh does)"))
    })
    .clone()
}

/// A router and `n` shards of the key-value set (ids tagged 1).
fn deploy(n: u64, subnets: u32, subnet_of: impl Fn(u64) -> SubnetId) -> Set {
    sets::deploy(code(), 1, n, subnets, subnet_of)
}

fn key(i: u32) -> ByteBuf {
    ByteBuf::from(Sha256::digest(i.to_le_bytes()).to_vec())
}

fn value(i: u32) -> ByteBuf {
    ByteBuf::from(format!("value {i}").into_bytes())
}

fn entries(range: std::ops::Range<u32>) -> Vec<Entry> {
    range.map(|i| (key(i), value(i))).collect()
}

/// Entries `0..keys` stored through the router of `set` in one batch, and the model of them.
fn load(set: &mut Set, keys: u32) -> BTreeMap<Vec<u8>, ByteBuf> {
    let stored: Result<u64, Error> = set.call(set.router, "put_batch", &(entries(0..keys),)).0;
    assert_eq!(stored, Ok(keys.into()));
    entries(0..keys).into_iter().map(|(k, v)| (k.into_vec(), v)).collect()
}

#[test]
fn a_sharded_set_holds_what_a_model_holds() {
    const KEYS: u32 = 300;
    for n in [1u64, 3, 4] {
        let mut set = deploy(n, 1, |_| 0);
        let model = load(&mut set, KEYS);
        // Each shard holds exactly the keys the routing gives it.
        for (i, &shard) in set.shards.clone().iter().enumerate() {
            let expected = model.keys().filter(|k| shard_of(k, n as u32) == i as u32).count() as u64;
            let held: Result<u64, Error> = set.query(shard, "shard_len", &());
            assert_eq!(held, Ok(expected), "{n} shards: shard {i}");
        }
        let len: Result<u64, Error> = set.call(set.router, "len", &()).0;
        assert_eq!(len, Ok(KEYS as u64));
        for i in (0..KEYS).step_by(37) {
            let got: Result<Option<ByteBuf>, Error> = set.call(set.router, "get", &(key(i),)).0;
            assert_eq!(got, Ok(Some(value(i))));
            // A client that routes itself asks the shard the router names, and gets the same.
            let shard: Result<Principal, Error> = set.query(set.router, "shard_for", &(key(i),));
            assert_eq!(shard, Ok(set.shards[shard_of(&key(i), n as u32) as usize]));
            let direct: Result<Option<ByteBuf>, Error> = set.call(shard.unwrap(), "shard_get", &(key(i),)).0;
            assert_eq!(direct, Ok(Some(value(i))));
        }
        let replaced: Result<Option<ByteBuf>, Error> = set.call(set.router, "put", &(key(7), value(1007))).0;
        assert_eq!(replaced, Ok(Some(value(7))));
        let mut model = model;
        model.insert(key(7).into_vec(), value(1007));
        // The top 5 and a scan in pages of 64: the model's order.
        let top: Result<Page, Error> = set.call(set.router, "top", &(5u32,)).0;
        let expected: Vec<Entry> =
            model.iter().rev().take(5).map(|(k, v)| (ByteBuf::from(k.clone()), v.clone())).collect();
        assert_eq!(top, Ok(Page { entries: expected, complete: true }));
        let mut scanned: Vec<Entry> = Vec::new();
        loop {
            let after = scanned.last().map(|(k, _)| k.clone());
            let page: Page = set.call::<_, Result<Page, Error>>(set.router, "scan", &(after, 64u32)).0.unwrap();
            if page.entries.is_empty() {
                break;
            }
            assert!(page.complete);
            scanned.extend(page.entries);
        }
        let expected: Vec<Entry> = model.iter().map(|(k, v)| (ByteBuf::from(k.clone()), v.clone())).collect();
        assert_eq!(scanned, expected, "{n} shards");
    }
}

#[test]
fn writes_are_for_the_router_and_controllers_and_bad_input_is_refused() {
    let mut set = deploy(2, 1, |_| 0);
    let stranger = Principal::from_slice(&[9; 29]);
    let put: Result<Option<ByteBuf>, Error> = set.call_as(stranger, set.router, "put", &(key(1), value(1))).0;
    assert_eq!(put, Err(Error::NotAuthorized { caller: stranger }));
    let shard = set.shards[0];
    let put: Result<Option<ByteBuf>, Error> = set.call_as(stranger, shard, "shard_put", &(key(1), value(1))).0;
    assert_eq!(put, Err(Error::NotAuthorized { caller: stranger }));
    // Nothing was stored by the refused calls.
    let len: Result<u64, Error> = set.call(set.router, "len", &()).0;
    assert_eq!(len, Ok(0));
    let big = ByteBuf::from(vec![0; stablebench_sharded::MAX_VALUE_BYTES + 1]);
    let put: Result<Option<ByteBuf>, Error> = set.call(set.router, "put", &(key(1), big)).0;
    assert!(matches!(put, Err(Error::InvalidArgument { .. })), "{put:?}");
    let again: Result<(), Error> = set.call(set.router, "add_shards", &(vec![shard],)).0;
    assert!(matches!(again, Err(Error::InvalidArgument { .. })), "{again:?}");
    // A router given the same shard twice would count its keys twice: refused.
    let mut net = Network::new(1);
    let opts = |i| Options { canister_id: sets::id(i, 1), ..Options::default() };
    net.install(code(), &candid::encode_one(Role::Router).unwrap(), opts(50), 0).unwrap();
    let twice = candid::encode_one(vec![sets::id(51, 1), sets::id(51, 1)]).unwrap();
    let t = net.update(sets::id(50, 1), "add_shards", &twice, default_controller());
    let twice: Result<(), Error> = candid::decode_one(&t.result.unwrap()).unwrap();
    assert!(matches!(twice, Err(Error::InvalidArgument { .. })), "{twice:?}");
    let wrong: Result<u64, Error> = set.query(set.router, "shard_len", &());
    assert_eq!(wrong, Err(Error::WrongRole { role: "router".into() }));
    let page: Result<Page, Error> = set.call(set.router, "scan", &(None::<ByteBuf>, 0u32)).0;
    assert!(matches!(page, Err(Error::InvalidArgument { .. })), "{page:?}");
    // A router without shards says so.
    let mut net = Network::new(1);
    let lone = Options { canister_id: sets::id(7, 1), ..Options::default() };
    net.install(code(), &candid::encode_one(Role::Router).unwrap(), lone, 0).unwrap();
    let t = net.update(sets::id(7, 1), "get", &candid::encode_one(key(1)).unwrap(), default_controller());
    let got: Result<Option<ByteBuf>, Error> = candid::decode_one(&t.result.unwrap()).unwrap();
    assert_eq!(got, Err(Error::NoShards));
}

#[test]
fn a_missing_shard_gives_a_clear_error_and_the_others_keep_everything() {
    const KEYS: u32 = 100;
    let mut set = deploy(4, 1, |_| 0);
    load(&mut set, KEYS);
    let gone = set.shards[1];
    set.net.remove(gone);
    let on_gone = (0..KEYS).find(|&i| shard_of(&key(i), 4) == 1).unwrap();
    let got: Result<Option<ByteBuf>, Error> = set.call(set.router, "get", &(key(on_gone),)).0;
    match got {
        Err(Error::ShardFailed { shard, code: 3, .. }) => assert_eq!(shard, gone),
        other => panic!("expected DESTINATION_INVALID from the missing shard, got {other:?}"),
    }
    let len: Result<u64, Error> = set.call(set.router, "len", &()).0;
    assert!(matches!(len, Err(Error::ShardFailed { code: 3, .. })), "{len:?}");
    // The other shards still answer for every key they hold.
    for i in (0..KEYS).filter(|&i| shard_of(&key(i), 4) != 1) {
        let got: Result<Option<ByteBuf>, Error> = set.call(set.router, "get", &(key(i),)).0;
        assert_eq!(got, Ok(Some(value(i))));
    }
}

/// A shard that is full (its `memory_allocation` at what it uses, so neither its heap nor its
/// stable memory may grow): a batch whose part needs room there fails with an error naming the
/// shard, the other shards keep their parts, the full shard still answers reads and overwrites
/// in place, and once it has room again (its allocation raised) the batch sent again stores
/// every entry exactly once.
#[test]
fn a_full_shard_gives_a_clear_error_and_loses_nothing() {
    const KEYS: u32 = 200;
    let mut set = deploy(4, 1, |_| 0);
    let mut model = load(&mut set, KEYS);
    let full = set.shards[2];
    set.fill(full);
    // 30 values of 60 KiB (1.8 MiB, under the ingress limit): about 450 KiB per shard, more
    // than the full shard has room for.
    let big: Vec<Entry> = (KEYS..KEYS + 30).map(|i| (key(i), ByteBuf::from(vec![i as u8; 60 * 1024]))).collect();
    let on_full = big.iter().filter(|(k, _)| shard_of(k, 4) == 2).count();
    assert!(on_full > 0);
    let r: Result<u64, Error> = set.call(set.router, "put_batch", &(big.clone(),)).0;
    match &r {
        Err(Error::ShardFailed { shard, code: 5, message }) => {
            assert_eq!(*shard, full);
            assert!(message.contains("memory"), "{message}");
        }
        other => panic!("expected the full shard's failure, got {other:?}"),
    }
    // The other shards stored their parts; the full one nothing.
    for (k, v) in &big {
        let got: Result<Option<ByteBuf>, Error> = set.call(set.router, "get", &(k.clone(),)).0;
        let want = (shard_of(k, 4) != 2).then(|| v.clone());
        assert_eq!(got, Ok(want));
    }
    // It still answers reads and takes an overwrite of the same size in place.
    let held = (0..KEYS).find(|&i| shard_of(&key(i), 4) == 2).unwrap();
    let got: Result<Option<ByteBuf>, Error> = set.call(set.router, "get", &(key(held),)).0;
    assert_eq!(got, Ok(Some(value(held))));
    let again = ByteBuf::from(format!("VALUE {held}").into_bytes());
    assert_eq!(again.len(), value(held).len());
    let put: Result<Option<ByteBuf>, Error> = set.call(set.router, "put", &(key(held), again.clone())).0;
    assert_eq!(put, Ok(Some(value(held))));
    model.insert(key(held).into_vec(), again);
    // Room again: the same batch lands, every entry once.
    set.room(full);
    let r: Result<u64, Error> = set.call(set.router, "put_batch", &(big.clone(),)).0;
    assert_eq!(r, Ok(big.len() as u64));
    model.extend(big.into_iter().map(|(k, v)| (k.into_vec(), v)));
    let len: Result<u64, Error> = set.call(set.router, "len", &()).0;
    assert_eq!(len, Ok(model.len() as u64));
    for (k, v) in &model {
        let got: Result<Option<ByteBuf>, Error> = set.call(set.router, "get", &(ByteBuf::from(k.clone()),)).0;
        assert_eq!(got.as_ref(), Ok(&Some(v.clone())));
    }
}

/// What a routed call costs beside the same call sent to the shard directly (client-side
/// routing), on one subnet and with the shards on another; printed for the closing notes and
/// checked for the hop's shape: one more execution pair, more instructions, more rounds across.
#[test]
fn routing_costs_one_hop() {
    for (subnets, across) in [(1u32, false), (2, true)] {
        let mut set = deploy(4, subnets, |_| if across { 1 } else { 0 });
        let _: (Result<u64, Error>, _) = set.call(set.router, "put_batch", &(entries(0..100),));
        let (routed, t_routed): (Result<Option<ByteBuf>, Error>, _) = set.call(set.router, "get", &(key(5),));
        let shard = set.shards[shard_of(&key(5), 4) as usize];
        let (direct, t_direct): (Result<Option<ByteBuf>, Error>, _) = set.call(shard, "shard_get", &(key(5),));
        assert_eq!(routed, direct);
        assert_eq!(t_direct.log.len(), 1);
        assert_eq!(t_routed.log.len(), 3, "the router's method, the shard's, the router's callback");
        assert!(t_routed.instructions() > t_direct.instructions());
        let (len, t_len): (Result<u64, Error>, _) = set.call(set.router, "len", &());
        assert_eq!(len, Ok(100));
        assert_eq!(t_len.log.len(), 1 + 2 * 4, "one call to each shard and its callback");
        // Rounds: on one subnet everything in the ingress message's round; across, a request and
        // a response each take two rounds, and the four calls of `len` travel together.
        let expected_rounds = if across { (5, 5) } else { (1, 1) };
        assert_eq!((t_routed.reply_round, t_len.reply_round), expected_rounds);
        eprintln!(
            "subnets {subnets}: direct get {} instr {} cycles; routed get {} instr {} cycles {} bytes {} rounds; \
             len over 4 shards {} instr {} cycles {} rounds",
            t_direct.instructions(),
            t_direct.cycles(),
            t_routed.instructions(),
            t_routed.cycles(),
            t_routed.bytes_moved(),
            t_routed.reply_round,
            t_len.instructions(),
            t_len.cycles(),
            t_len.reply_round
        );
    }
}

/// Each operation of `stablebench_grid::sharded::KV_OPERATIONS`, in order, on a set of `n`
/// shards holding `KV_ENTRIES` entries (loaded in batches of `KV_LOAD_BATCH`), the shards on the
/// router's subnet or on another one.
fn measure(n: u64, across: bool) -> Vec<Cost> {
    let mut set = deploy(n, if across { 2 } else { 1 }, |_| if across { 1 } else { 0 });
    let (entries_held, batch) = (KV_ENTRIES as u32, KV_LOAD_BATCH as u32);
    for b in 0..entries_held / batch {
        let (stored, _): (Result<u64, Error>, _) =
            set.call(set.router, "put_batch", &(entries(b * batch..(b + 1) * batch),));
        assert_eq!(stored, Ok(batch.into()));
    }
    let shard = set.shards[shard_of(&key(5), n as u32) as usize];
    let router = set.router;
    let mut m = Measuring::new(sharded::Set::Kv);
    m.run(&mut set, "get", router, "get", candid::encode_one(key(5)).unwrap());
    m.run(&mut set, "shard_get", shard, "shard_get", candid::encode_one(key(5)).unwrap());
    m.run(&mut set, "put", router, "put", candid::encode_args((key(5), value(5))).unwrap());
    m.run(&mut set, "shard_put", shard, "shard_put", candid::encode_args((key(5), value(5))).unwrap());
    let new = entries(entries_held..entries_held + 100);
    m.run(&mut set, "put_batch", router, "put_batch", candid::encode_one(new).unwrap());
    m.run(&mut set, "len", router, "len", candid::encode_args(()).unwrap());
    m.run(&mut set, "top", router, "top", candid::encode_one(10u32).unwrap());
    m.run(&mut set, "scan", router, "scan", candid::encode_args((None::<ByteBuf>, 100u32)).unwrap());
    // With one shard the new key is on the same one.
    let to = (10_000..).find(|&t| n == 1 || shard_of(&key(t), n as u32) != shard_of(&key(5), n as u32)).unwrap();
    m.run(&mut set, "move_entry", router, "move_entry", candid::encode_args((key(5), key(to))).unwrap());
    m.costs
}

/// `sharded_results.yml`, from which `scripts/report.sh` writes docs/sharding.md's cost tables
/// and where one canister runs out: what each operation costs against the number of shards
/// (cycles charged to every canister, call and byte fees included, on 13-node subnets; the
/// instructions of every canister, the router's and the busiest shard's), the messages and bytes
/// it takes, and the round its reply comes in, on one subnet and with the shards on another.
/// Written with `STABLEBENCH_REGENERATE_SHARDED=1`, else compared exactly.
#[test]
fn what_each_operation_costs_against_the_number_of_shards() {
    let (same, across) = sets::measure_all(sharded::Set::Kv, measure);
    let measured = sets::results(sharded::Set::Kv, &same, &across);
    // The shape the tables show: a routed call is the direct one plus the router's two
    // executions; a fan-out grows with every shard; on one subnet everything replies in the
    // ingress message's round, across subnets a routed call waits 4 rounds more.
    for c in &same {
        assert_eq!((c[0].executions, c[1].executions), (3, 1));
        assert!(c[0].cycles > c[1].cycles);
        assert_eq!((c[1].router_instructions, c[0].shard_instructions > 0), (0, true));
        assert!(c.iter().all(|c| c.rounds == 1));
    }
    assert!(same.windows(2).all(|w| w[1][5].cycles > w[0][5].cycles), "len grows with the shards");
    assert!(across.iter().all(|c| c[0].rounds == 5 && c[1].rounds == 1));
    // A move is three round trips one after the other: nine executions, and across subnets its
    // reply comes in round 13 (four rounds per round trip after the first).
    assert!(same.iter().all(|c| c[8].executions == 9) && across.iter().all(|c| c[8].rounds == 13));
    sets::keep("sharded_results.yml", SHARDED_HEADER, &measured, "sharded");
}

/// Every acknowledged write is held exactly once: each key of `model` reads back its value, and
/// the set holds as many keys as the model.
fn check_model(set: &mut Set, model: &BTreeMap<Vec<u8>, ByteBuf>) {
    let len: Result<u64, Error> = set.call(set.router, "len", &()).0;
    assert_eq!(len, Ok(model.len() as u64));
    for (k, v) in model {
        let got: Result<Option<ByteBuf>, Error> = set.call(set.router, "get", &(ByteBuf::from(k.clone()),)).0;
        assert_eq!(got, Ok(Some(v.clone())));
    }
}

/// A shard traps in the middle of a bulk load: the batch fails naming it, the other shards keep
/// their part and the trapped one stores none of its own, nothing acknowledged is lost, and
/// sending the batch again completes it.
#[test]
fn a_shard_that_traps_mid_load_loses_no_acknowledged_write() {
    let mut set = deploy(4, 1, |_| 0);
    let mut model: BTreeMap<Vec<u8>, ByteBuf> = BTreeMap::new();
    for batch in 0..6u32 {
        let part = entries(batch * 100..(batch + 1) * 100);
        if batch == 3 {
            set.net.schedule(1, Event::Trap(set.shards[2]));
            let (failed, t): (Result<u64, Error>, _) = set.call(set.router, "put_batch", &(part.clone(),));
            match failed {
                Err(Error::ShardFailed { shard, code: 5, message }) => {
                    assert_eq!(shard, set.shards[2]);
                    assert!(message.contains("injected"), "{message}");
                }
                other => panic!("expected the trapped shard's CANISTER_ERROR, got {other:?}"),
            }
            assert!(t.log.iter().any(|l| l.trap.is_some()));
            // The other shards kept their part of the failed batch; the trapped one stored nothing.
            let lost = part.iter().filter(|(k, _)| shard_of(k, 4) == 2).count() as u64;
            let len: Result<u64, Error> = set.call(set.router, "len", &()).0;
            assert_eq!(len, Ok(model.len() as u64 + 100 - lost));
        }
        let (stored, _): (Result<u64, Error>, _) = set.call(set.router, "put_batch", &(part.clone(),));
        assert_eq!(stored, Ok(100), "batch {batch}");
        model.extend(part.into_iter().map(|(k, v)| (k.into_vec(), v)));
    }
    check_model(&mut set, &model);
}

/// Shards upgraded while the router's calls to them are on their way (the shards on another
/// subnet, so a request spends two rounds in flight): the router keeps serving, every write
/// lands once, and the upgraded shards keep their keys (a StableBTreeMap lives in stable memory).
#[test]
fn shards_upgraded_while_the_router_serves_keep_every_write() {
    let mut set = deploy(4, 2, |_| 1);
    let mut model: BTreeMap<Vec<u8>, ByteBuf> = BTreeMap::new();
    for i in 0..40u32 {
        let shard = set.shards[shard_of(&key(i), 4) as usize];
        // The router sends in round 1; the request reaches the shard in round 3: upgrade it in 2.
        let arg = candid::encode_one(Role::Shard { router: set.router }).unwrap();
        set.net.schedule(2, Event::Upgrade { canister: shard, code: code(), arg });
        let (replaced, t): (Result<Option<ByteBuf>, Error>, _) = set.call(set.router, "put", &(key(i), value(i)));
        assert_eq!(replaced, Ok(None), "put {i}");
        let upgrade = t.log.iter().position(|l| l.what == "upgrade").expect("the upgrade happened");
        let put = t.log.iter().position(|l| l.what == "shard_put").expect("the shard's put ran");
        assert!(upgrade < put && t.log[upgrade].trap.is_none(), "{:?}", t.log);
        model.insert(key(i).into_vec(), value(i));
    }
    check_model(&mut set, &model);
}

/// Values large enough that a page of them would not fit a reply: each shard cuts its page at
/// 1 MiB, the router's merged page stops where a cut shard could still hold earlier keys, and
/// paging on from its last key still returns every entry once, in order.
#[test]
fn pages_of_large_values_stay_under_the_reply_limit_and_skip_nothing() {
    let mut set = deploy(3, 1, |_| 0);
    let big = |i: u32| ByteBuf::from(vec![i as u8; 60 * 1024]);
    let mut model: BTreeMap<Vec<u8>, ByteBuf> = BTreeMap::new();
    for batch in 0..6u32 {
        let part: Vec<Entry> = (batch * 10..(batch + 1) * 10).map(|i| (key(i), big(i))).collect();
        let (stored, _): (Result<u64, Error>, _) = set.call(set.router, "put_batch", &(part.clone(),));
        assert_eq!(stored, Ok(10));
        model.extend(part.into_iter().map(|(k, v)| (k.into_vec(), v)));
    }
    let mut scanned: Vec<Vec<u8>> = Vec::new();
    let mut short = 0;
    loop {
        let after = scanned.last().map(|k| ByteBuf::from(k.clone()));
        let page: Page = set.call::<_, Result<Page, Error>>(set.router, "scan", &(after, 1000u32)).0.unwrap();
        if page.entries.is_empty() {
            break;
        }
        let bytes: usize = page.entries.iter().map(|(k, v)| k.len() + v.len()).sum();
        assert!(bytes <= stablebench_sharded::PAGE_BYTES, "{bytes}");
        short += usize::from(!page.complete);
        scanned.extend(page.entries.into_iter().map(|(k, _)| k.into_vec()));
    }
    assert!(short > 0, "60 entries of 60 KiB do not fit one page");
    assert_eq!(scanned, model.keys().cloned().collect::<Vec<_>>());
    let top: Page = set.call::<_, Result<Page, Error>>(set.router, "top", &(1000u32,)).0.unwrap();
    assert!(!top.complete && !top.entries.is_empty());
    let expected: Vec<&[u8]> = model.keys().rev().take(top.entries.len()).map(Vec::as_slice).collect();
    assert_eq!(top.entries.iter().map(|(k, _)| k.as_slice()).collect::<Vec<_>>(), expected);
}

/// Two keys of `range` on different shards of a set of `n` (the first such pair).
fn across(n: u32, range: std::ops::Range<u32>) -> (u32, u32) {
    let first = range.start;
    let other = range.clone().find(|&i| shard_of(&key(i), n) != shard_of(&key(first), n)).expect("another shard");
    (first, other)
}

/// `from`'s entry moved to `to` in the model.
fn moved(model: &mut BTreeMap<Vec<u8>, ByteBuf>, from: u32, to: u32) {
    let v = model.remove(&key(from).into_vec()).expect("the model holds the source");
    model.insert(key(to).into_vec(), v);
}

/// Moves within a shard and across shards: each lands once, and refusals (a destination that
/// exists, a source that does not, a stranger, the same key twice) change nothing.
#[test]
fn entries_move_between_shards_and_refused_moves_change_nothing() {
    let mut set = deploy(4, 1, |_| 0);
    let _: (Result<u64, Error>, _) = set.call(set.router, "put_batch", &(entries(0..40),));
    let mut model: BTreeMap<Vec<u8>, ByteBuf> = (0..40).map(|i| (key(i).into_vec(), value(i))).collect();
    let (mut within, mut between) = (0, 0);
    for i in 0..20u32 {
        let to = 1000 + i;
        let ok: Result<(), Error> = set.call(set.router, "move_entry", &(key(i), key(to))).0;
        assert_eq!(ok, Ok(()), "move {i}");
        moved(&mut model, i, to);
        if shard_of(&key(i), 4) == shard_of(&key(to), 4) {
            within += 1;
        } else {
            between += 1;
        }
    }
    assert!(within > 0 && between > 0, "{within} within a shard, {between} across");
    type Expected = fn(&Error) -> bool;
    let refused: [(ByteBuf, ByteBuf, Expected); 3] = [
        (key(30), key(31), |e| matches!(e, Error::KeyExists { .. })),
        (key(5), key(5000), |e| matches!(e, Error::NotFound { .. })),
        (key(30), key(30), |e| matches!(e, Error::InvalidArgument { .. })),
    ];
    for (from, to, expected) in refused {
        let r: Result<(), Error> = set.call(set.router, "move_entry", &(from, to)).0;
        assert!(r.as_ref().is_err_and(expected), "{r:?}");
    }
    let stranger = Principal::from_slice(&[9; 29]);
    let r: Result<(), Error> = set.call_as(stranger, set.router, "move_entry", &(key(30), key(6000))).0;
    assert_eq!(r, Err(Error::NotAuthorized { caller: stranger }));
    let pending: Vec<stablebench_sharded::Move> = set.query(set.router, "moves", &());
    assert!(pending.is_empty(), "{pending:?}");
    check_model(&mut set, &model);
}

/// A set whose shards sit on another subnet than the router, loaded with 40 entries, and a
/// move between two of its shards: the router sends the hold in round 1, it reaches the source
/// in round 3 and its answer the router in round 5; the place reaches the destination in round
/// 7, its answer the router in 9; the finishes reach both shards in round 11.
fn moving_set() -> (Set, BTreeMap<Vec<u8>, ByteBuf>, u32, u32, Principal, Principal) {
    let mut set = deploy(4, 2, |_| 1);
    let _: (Result<u64, Error>, _) = set.call(set.router, "put_batch", &(entries(0..40),));
    let model: BTreeMap<Vec<u8>, ByteBuf> = (0..40).map(|i| (key(i).into_vec(), value(i))).collect();
    let (from, to) = across(4, 0..40);
    let to = (1000..).find(|&t| shard_of(&key(t), 4) == shard_of(&key(to), 4)).unwrap();
    let (src, dst) = (set.shards[shard_of(&key(from), 4) as usize], set.shards[shard_of(&key(to), 4) as usize]);
    (set, model, from, to, src, dst)
}

/// The destination traps at the place: the move is undone (the source keeps the entry and
/// takes writes again), the error names the destination, and nothing is left to recover.
#[test]
fn a_destination_that_traps_mid_move_undoes_it() {
    let (mut set, model, from, to, _, dst) = moving_set();
    set.net.schedule(6, Event::Trap(dst));
    let (r, t): (Result<(), Error>, _) = set.call(set.router, "move_entry", &(key(from), key(to)));
    assert!(matches!(&r, Err(Error::ShardFailed { shard, code: 5, .. }) if *shard == dst), "{r:?}");
    assert!(t.log.iter().any(|l| l.canister == dst && l.what == "shard_place" && l.trap.is_some()), "{:?}", t.log);
    let pending: Vec<stablebench_sharded::Move> = set.query(set.router, "moves", &());
    assert!(pending.is_empty(), "{pending:?}");
    let put: Result<Option<ByteBuf>, Error> = set.call(set.router, "put", &(key(from), value(from))).0;
    assert_eq!(put, Ok(Some(value(from))), "the source takes writes again");
    check_model(&mut set, &model);
}

/// The source traps at the commit: the move is decided but unfinished (`MoveUnfinished`,
/// `Committing`), its key refuses writes meanwhile, and `recover` finishes it: the entry is
/// under the new key only.
#[test]
fn a_source_that_traps_at_the_commit_is_finished_by_recover() {
    let (mut set, mut model, from, to, src, _) = moving_set();
    set.net.schedule(10, Event::Trap(src));
    let r: Result<(), Error> = set.call(set.router, "move_entry", &(key(from), key(to))).0;
    let Err(Error::MoveUnfinished { stage: Stage::Committing, cause, .. }) = &r else { panic!("{r:?}") };
    assert!(matches!(**cause, Error::ShardFailed { shard, code: 5, .. } if shard == src), "{cause:?}");
    let put: Result<Option<ByteBuf>, Error> = set.call(set.router, "put", &(key(from), value(1))).0;
    assert!(matches!(put, Err(Error::Held { .. })), "the source's key waits for the move: {put:?}");
    let pending: Vec<stablebench_sharded::Move> = set.query(set.router, "moves", &());
    assert_eq!(pending.iter().map(|m| m.stage).collect::<Vec<_>>(), [Stage::Committing]);
    let left: Result<u64, Error> = set.call(set.router, "recover", &()).0;
    assert_eq!(left, Ok(0));
    moved(&mut model, from, to);
    check_model(&mut set, &model);
}

/// The router itself traps in the callback that has the source's hold: the caller gets a
/// reject, the log keeps the move at `Holding`, and `recover` drives it on from there (the hold,
/// sent again, answers the same value): the entry ends under the new key only. Shards upgraded
/// in the middle of a move keep its holds (they live in stable memory): after the upgrade, and
/// before `recover`, the source still refuses a write to the held key.
#[test]
fn a_router_that_traps_mid_move_and_upgraded_shards_lose_nothing() {
    let (mut set, mut model, from, to, src, dst) = moving_set();
    set.net.schedule(4, Event::Trap(set.router));
    let t = set.net.update(
        set.router,
        "move_entry",
        &candid::encode_args((key(from), key(to))).unwrap(),
        default_controller(),
    );
    assert!(t.result.is_err(), "the router trapped: {:?}", t.result);
    let pending: Vec<stablebench_sharded::Move> = set.query(set.router, "moves", &());
    assert_eq!(pending.iter().map(|m| m.stage).collect::<Vec<_>>(), [Stage::Holding]);
    for shard in [src, dst] {
        let arg = candid::encode_one(Role::Shard { router: set.router }).unwrap();
        set.net.schedule(1, Event::Upgrade { canister: shard, code: code(), arg });
    }
    let (put, t): (Result<Option<ByteBuf>, Error>, _) = set.call(set.router, "put", &(key(from), value(1)));
    assert_eq!(t.log.iter().filter(|l| l.what == "upgrade").count(), 2);
    assert!(matches!(put, Err(Error::Held { .. })), "the hold outlived the upgrade: {put:?}");
    let left: Result<u64, Error> = set.call(set.router, "recover", &()).0;
    assert_eq!(left, Ok(0));
    moved(&mut model, from, to);
    check_model(&mut set, &model);
}
