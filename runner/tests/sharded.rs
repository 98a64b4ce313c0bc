//! The sharded set (`sharded/`): a router and N shards run together in the offline runner's
//! network of canisters, checked against a model (a `BTreeMap` and `shard_of`), with its refusals,
//! a missing shard, and what routing costs beside calling the shard directly.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use candid::utils::ArgumentEncoder;
use candid::Principal;
use serde::de::DeserializeOwned;
use serde_bytes::ByteBuf;
use sha2::{Digest, Sha256};
use stablebench_runner::canister::{default_controller, Code, Options};
use stablebench_runner::instrument::Metering;
use stablebench_runner::network::{Network, SubnetId, Traced};
use stablebench_sharded::{shard_of, Entry, Error, Role};

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

fn id(n: u64) -> Principal {
    let mut bytes = n.to_be_bytes().to_vec();
    bytes.extend([1, 1]);
    Principal::from_slice(&bytes)
}

/// A router and `n` shards; shard `i` on subnet `subnet_of(i)`, the router on subnet 0.
struct Set {
    net: Network,
    router: Principal,
    shards: Vec<Principal>,
}

fn deploy(n: u64, subnets: u32, subnet_of: impl Fn(u64) -> SubnetId) -> Set {
    let mut net = Network::new(subnets);
    let opts = |i| Options { canister_id: id(i), ..Options::default() };
    let router = net.install(code(), &candid::encode_one(Role::Router).unwrap(), opts(1000), 0).unwrap();
    let shards: Vec<Principal> = (0..n)
        .map(|i| {
            let role = candid::encode_one(Role::Shard { router }).unwrap();
            net.install(code(), &role, opts(i), subnet_of(i)).unwrap()
        })
        .collect();
    let mut set = Set { net, router, shards };
    let shards = set.shards.clone();
    let ok: Result<(), Error> = set.call(set.router, "add_shards", &(shards,)).0;
    assert_eq!(ok, Ok(()));
    set
}

impl Set {
    /// Update `method` on `to` from the controller; its decoded reply and the trace.
    fn call<A: ArgumentEncoder + Clone, R: DeserializeOwned + candid::CandidType>(
        &mut self,
        to: Principal,
        method: &str,
        args: &A,
    ) -> (R, Traced) {
        self.call_as(default_controller(), to, method, args)
    }

    fn call_as<A: ArgumentEncoder + Clone, R: DeserializeOwned + candid::CandidType>(
        &mut self,
        caller: Principal,
        to: Principal,
        method: &str,
        args: &A,
    ) -> (R, Traced) {
        let t = self.net.update(to, method, &candid::encode_args(args.clone()).unwrap(), caller);
        let bytes = t.result.clone().unwrap_or_else(|e| panic!("{method}: {e}"));
        (candid::decode_one(&bytes).unwrap_or_else(|e| panic!("{method}: {e}")), t)
    }

    fn query<A: ArgumentEncoder + Clone, R: DeserializeOwned + candid::CandidType>(
        &mut self,
        to: Principal,
        method: &str,
        args: &A,
    ) -> R {
        let out = self.net.canister(to).unwrap().query(
            method,
            &candid::encode_args(args.clone()).unwrap(),
            default_controller(),
        );
        candid::decode_one(&out.result.unwrap()).unwrap()
    }
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

#[test]
fn a_sharded_set_holds_what_a_model_holds() {
    const KEYS: u32 = 300;
    for n in [1u64, 3, 4] {
        let mut set = deploy(n, 1, |_| 0);
        let stored: Result<u64, Error> = set.call(set.router, "put_batch", &(entries(0..KEYS),)).0;
        assert_eq!(stored, Ok(KEYS as u64));
        let model: BTreeMap<Vec<u8>, ByteBuf> = entries(0..KEYS).into_iter().map(|(k, v)| (k.into_vec(), v)).collect();
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
        let top: Result<Vec<Entry>, Error> = set.call(set.router, "top", &(5u32,)).0;
        let expected: Vec<Entry> =
            model.iter().rev().take(5).map(|(k, v)| (ByteBuf::from(k.clone()), v.clone())).collect();
        assert_eq!(top, Ok(expected));
        let mut scanned: Vec<Entry> = Vec::new();
        loop {
            let after = scanned.last().map(|(k, _)| k.clone());
            let page: Vec<Entry> =
                set.call::<_, Result<Vec<Entry>, Error>>(set.router, "scan", &(after, 64u32)).0.unwrap();
            if page.is_empty() {
                break;
            }
            scanned.extend(page);
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
    let wrong: Result<u64, Error> = set.query(set.router, "shard_len", &());
    assert_eq!(wrong, Err(Error::WrongRole { role: "router".into() }));
    let page: Result<Vec<Entry>, Error> = set.call(set.router, "scan", &(None::<ByteBuf>, 0u32)).0;
    assert!(matches!(page, Err(Error::InvalidArgument { .. })), "{page:?}");
    // A router without shards says so.
    let mut net = Network::new(1);
    let lone = Options { canister_id: id(7), ..Options::default() };
    net.install(code(), &candid::encode_one(Role::Router).unwrap(), lone, 0).unwrap();
    let t = net.update(id(7), "get", &candid::encode_one(key(1)).unwrap(), default_controller());
    let got: Result<Option<ByteBuf>, Error> = candid::decode_one(&t.result.unwrap()).unwrap();
    assert_eq!(got, Err(Error::NoShards));
}

#[test]
fn a_missing_shard_gives_a_clear_error_and_the_others_keep_everything() {
    const KEYS: u32 = 100;
    let mut set = deploy(4, 1, |_| 0);
    let stored: Result<u64, Error> = set.call(set.router, "put_batch", &(entries(0..KEYS),)).0;
    assert_eq!(stored, Ok(KEYS as u64));
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
