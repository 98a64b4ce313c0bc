//! A router and its shards in the runner's network of canisters, as the sharded sets' tests
//! (`tests/sharded/`) deploy and call them: every canister priced as mainnet
//! prices it (the `ic` cost model), the shards registered with the router.

use std::sync::Arc;

use candid::utils::ArgumentEncoder;
use candid::Principal;
use serde::de::DeserializeOwned;
use stablebench_grid::sharded;
use stablebench_report::sharding::{Cost, Operation, Sharded};
use stablebench_runner::canister::{default_controller, Code, Options};
use stablebench_runner::network::{Network, SubnetId, Traced};
use stablebench_runner::replica::CostModel;
use stablebench_sharded::{Error, Role};

/// A canister id: `n`, then the set's `tag`.
pub fn id(n: u64, tag: u8) -> Principal {
    let mut bytes = n.to_be_bytes().to_vec();
    bytes.extend([tag, 1]);
    Principal::from_slice(&bytes)
}

/// A router and its shards in a network.
pub struct Set {
    pub net: Network,
    pub router: Principal,
    pub shards: Vec<Principal>,
}

/// `code` installed as a router on subnet 0 and `n` shards, shard `i` on subnet `subnet_of(i)`
/// (ids tagged `tag`), the shards registered with `add_shards`.
pub fn deploy(code: Arc<Code>, tag: u8, n: u64, subnets: u32, subnet_of: impl Fn(u64) -> SubnetId) -> Set {
    let mut net = Network::new(subnets);
    let opts = |i| Options { canister_id: id(i, tag), cost_model: CostModel::Ic, ..Options::default() };
    let router = net.install(code.clone(), &candid::encode_one(Role::Router).unwrap(), opts(1000), 0).unwrap();
    let shards: Vec<Principal> = (0..n)
        .map(|i| {
            let role = candid::encode_one(Role::Shard { router }).unwrap();
            net.install(code.clone(), &role, opts(i), subnet_of(i)).unwrap()
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
    pub fn call<A: ArgumentEncoder + Clone, R: DeserializeOwned + candid::CandidType>(
        &mut self,
        to: Principal,
        method: &str,
        args: &A,
    ) -> (R, Traced) {
        self.call_as(default_controller(), to, method, args)
    }

    /// The same from `caller`.
    pub fn call_as<A: ArgumentEncoder + Clone, R: DeserializeOwned + candid::CandidType>(
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

    /// Query `method` on `to` from the controller, decoded.
    pub fn query<A: ArgumentEncoder + Clone, R: DeserializeOwned + candid::CandidType>(
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

    /// Makes `shard` full: its `memory_allocation` at what its heap and stable memory use now, so
    /// neither may grow (`room` gives it room again).
    pub fn fill(&mut self, shard: Principal) {
        let c = self.net.canister(shard).expect("the shard");
        let used = c.heap_bytes() + c.stable_memory().len() as u64;
        c.set_memory_allocation(used).unwrap();
    }

    /// Gives `shard` room again: no memory allocation (best effort).
    pub fn room(&mut self, shard: Principal) {
        self.net.canister(shard).expect("the shard").set_memory_allocation(0).unwrap();
    }

    /// What an operation's ingress message `t` cost (its rounds on the subnets it ran on;
    /// `rounds_across` is left 0 for the caller to fill in).
    pub fn cost_of(&self, t: &Traced) -> Cost {
        Cost {
            cycles: u64::try_from(t.cycles()).expect("cycles fit u64"),
            instructions: t.instructions(),
            router_instructions: t.usage(self.router).instructions,
            shard_instructions: self.shards.iter().map(|&s| t.usage(s).instructions).max().unwrap_or(0),
            executions: t.canisters.values().map(|u| u.executions).sum(),
            bytes: t.bytes_moved(),
            rounds: t.reply_round,
            rounds_across: 0,
        }
    }
}

/// The results file of `set`'s cost test: its operations (`stablebench_grid::sharded`) measured
/// on every number of shards, on one subnet (`same`, per number of shards, per operation) and
/// with the shards on another (`across`: only their rounds are kept).
pub fn results(set: sharded::Set, same: &[Vec<Cost>], across: &[Vec<Cost>]) -> Sharded {
    let operations = set
        .operations()
        .iter()
        .enumerate()
        .map(|(i, op)| Operation {
            name: op.name.to_string(),
            title: op.title.to_string(),
            shards: sharded::SHARD_COUNTS
                .iter()
                .enumerate()
                .map(|(j, &n)| (n, Cost { rounds_across: across[j][i].rounds, ..same[j][i] }))
                .collect(),
        })
        .collect();
    Sharded { keys: set.keys(), nodes: stablebench_grid::ic::prices::SUBNET_NODES, operations }
}

/// What `measure(n, across_subnets)` measured for every number of shards, on one subnet and
/// across two: each a cost per operation of the set, in its order.
pub fn measure_all(set: sharded::Set, measure: impl Fn(u64, bool) -> Vec<Cost>) -> (Vec<Vec<Cost>>, Vec<Vec<Cost>>) {
    let [same, across] =
        [false, true].map(|a| sharded::SHARD_COUNTS.iter().map(|&n| measure(n, a)).collect::<Vec<_>>());
    for costs in same.iter().chain(&across) {
        assert_eq!(costs.len(), set.operations().len(), "{set:?}: one cost per operation");
    }
    (same, across)
}

/// A cost test's measurements on one set of shards: each operation's ingress message, in the
/// order `stablebench_grid::sharded` declares them.
pub struct Measuring {
    ops: &'static [sharded::Operation],
    /// The costs so far.
    pub costs: Vec<Cost>,
}

impl Measuring {
    /// Nothing measured yet of `set`'s operations.
    pub fn new(set: sharded::Set) -> Measuring {
        Measuring { ops: set.operations(), costs: Vec::new() }
    }

    /// Measures operation `op` (the next one declared): `method` on `to` with `arg`, from the
    /// controller, which must succeed (`Ok` when it answers a `Result`).
    pub fn run(&mut self, set: &mut Set, op: &str, to: Principal, method: &str, arg: Vec<u8>) {
        let declared = self.ops.get(self.costs.len()).map(|o| o.name);
        assert_eq!(declared, Some(op), "operations measured out of their declared order");
        let t = set.net.update(to, method, &arg, default_controller());
        let reply = t.result.as_ref().unwrap_or_else(|e| panic!("{op}: {e}"));
        if let Ok(r) = candid::decode_one::<Result<candid::Reserved, Error>>(reply) {
            assert!(r.is_ok(), "{op}: {r:?}");
        }
        self.costs.push(set.cost_of(&t));
    }
}

/// Writes `measured` to the repository's `file` (after `header`) with
/// `STABLEBENCH_REGENERATE_SHARDED=1`, else requires the committed file to hold exactly it (the
/// runner is deterministic). `test` names the test binary that measures it.
pub fn keep(file: &str, header: &str, measured: &Sharded, test: &str) {
    let path = format!("{}/../{file}", env!("CARGO_MANIFEST_DIR"));
    println!("{}", stablebench_report::sharding::cost_tables(measured));
    if std::env::var_os("STABLEBENCH_REGENERATE_SHARDED").is_some() {
        std::fs::write(&path, format!("{header}{}", serde_yaml::to_string(measured).unwrap())).unwrap();
        return;
    }
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{file}: {e}"));
    let committed: Sharded = serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{file}: {e}"));
    assert!(
        committed == *measured,
        "{file} differs from what was measured: regenerate with STABLEBENCH_REGENERATE_SHARDED=1 cargo test \
         --release -p stablebench-runner --test {test}, then scripts/report.sh"
    );
}
