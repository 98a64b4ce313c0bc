//! `stablebench-runner load`: fills the production canister with the users/orders data set in
//! resumable calls, each under an instruction budget, then builds the indexes: the way to load
//! more than one 40 B-instruction message can. `create_schema`, then `add_users` and
//! `add_orders` from offset 0, each call continuing from the previous reply's `next_offset` until
//! `complete`, then `create_indexes` until `complete`; finally the `stats` query on stdout (Candid
//! text). Progress lines and a per-method cost table go to stderr.
//!
//! Every call is idempotent (rows already present are skipped), so a load stopped halfway (a lost
//! reply, an upgrade, Ctrl-C) continues when run again with the same sizes, and a load that is
//! complete loads nothing twice. Offline (default), the canister is the one saved in `--state`
//! (installed there from `--wasm` when the directory holds none) and is saved after every
//! update; with `--dfx` it is the deployed dfx canister, called as the current identity.
//!
//! The replies are decoded with the types below, declared here because the canister crate
//! (`stablebench-canister`) cannot be a dependency of the runner: natively it compiles SQLite
//! from source (in the canister, ic-rusqlite's precompiled wasm SQLite). A test checks them
//! against `canister/stablebench.did` with candid_parser's subtype check: every method the
//! load calls must accept these arguments and reply something these types decode.

use std::path::PathBuf;

use anyhow::{bail, Result};
use candid::CandidType;

use crate::candid_text::decode_reply;
use crate::target::{self, call, Dfx, Offline, Target};

/// How much to load, in how large calls.
#[derive(clap::Args, Clone, Debug)]
pub struct Plan {
    /// Users to load (ids 1 ..= N).
    #[arg(long, default_value_t = 100_000)]
    pub users: u64,
    /// Orders to load, spread over the users.
    #[arg(long, default_value_t = 1_000_000)]
    pub orders: u64,
    /// Instruction budget of each add_users/add_orders call (default: the canister's, 30 B).
    #[arg(long)]
    pub budget: Option<u64>,
    /// Instruction budget of each create_indexes call (default: the canister's, 30 B). An index
    /// that does not fit it is built through a shadow table over several calls.
    #[arg(long)]
    pub index_budget: Option<u64>,
}

/// Arguments of `stablebench-runner load`.
#[derive(clap::Args, Debug)]
pub struct LoadArgs {
    /// How much to load, in how large calls.
    #[command(flatten)]
    pub plan: Plan,
    /// Where the offline canister is kept (installed from --wasm if it holds none).
    #[arg(long, default_value = ".stablebench/canister")]
    pub state: PathBuf,
    /// The wasm installed into an empty --state (offline only).
    #[arg(long, default_value = "target/canister/stablebench.wasm")]
    pub wasm: PathBuf,
    /// Call a canister deployed with dfx (`dfx deploy stablebench`) instead of the runner.
    #[arg(long)]
    pub dfx: bool,
    /// The dfx network (`ic` for mainnet); implies --dfx.
    #[arg(long)]
    pub network: Option<String>,
    /// The dfx canister name.
    #[arg(long, default_value = "stablebench")]
    pub canister: String,
}

// The reply types are the canister's own (declared once in the grid, no SQLite compiled here);
// `load_types_fit_the_production_did` checks the methods against canister/stablebench.did.
pub use stablebench_grid::api::{ActivePragma, Batch, Cost, IndexProgress, Stats};

/// The arguments of `add_users` and `add_orders`: offset, count, budget.
type RowsArgs = (u64, u64, Option<u64>);
/// The argument of `create_indexes`: the budget.
type IndexArgs = (Option<u64>,);

/// One method's calls during a load: a row of the cost table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MethodCost {
    /// The method.
    pub method: &'static str,
    /// Calls made.
    pub calls: u64,
    /// Rows inserted (`add_users`, `add_orders`) or indexes created (`create_indexes`); `None`
    /// for `create_schema`, whose reply does not say.
    pub added: Option<u64>,
    /// The sum of the `instructions` the replies report.
    pub instructions: u64,
}

/// Runs the whole load: `create_schema`, users, orders, indexes. Prints a line per call on
/// stderr; returns what each method's calls cost.
pub fn load(target: &mut dyn Target, plan: &Plan) -> Result<Vec<MethodCost>> {
    let schema: Cost = call(target, "create_schema", (), false)?;
    let schema = MethodCost { method: "create_schema", calls: 1, added: None, instructions: schema.instructions };
    let users = rows(target, "add_users", plan.users, plan.budget)?;
    let orders = rows(target, "add_orders", plan.orders, plan.budget)?;
    let indexes = indexes(target, plan.index_budget)?;
    Ok(vec![schema, users, orders, indexes])
}

/// Calls `method` (`add_users` or `add_orders`) from offset 0, each call from the previous
/// reply's `next_offset`, until `complete`. Nothing to do for 0 rows.
fn rows(target: &mut dyn Target, method: &'static str, total: u64, budget: Option<u64>) -> Result<MethodCost> {
    let (mut calls, mut inserted, mut instructions, mut offset) = (0, 0, 0, 0);
    while total > offset {
        let arg: RowsArgs = (offset, total - offset, budget);
        let b: Batch = call(target, method, arg, false)?;
        (calls, inserted, instructions) = (calls + 1, inserted + b.inserted, instructions + b.instructions);
        eprintln!(
            "{method}: {} of {total} rows present (call {calls}, {} instructions)",
            b.next_offset, b.instructions
        );
        if b.complete {
            break;
        }
        if b.next_offset <= offset {
            bail!("{method} made no progress from offset {offset}: {b:?}");
        }
        offset = b.next_offset;
    }
    Ok(MethodCost { method, calls, added: Some(inserted), instructions })
}

/// Calls `create_indexes` until `complete`.
fn indexes(target: &mut dyn Target, budget: Option<u64>) -> Result<MethodCost> {
    let (mut calls, mut created, mut instructions) = (0, 0, 0);
    loop {
        let arg: IndexArgs = (budget,);
        let p: IndexProgress = call(target, "create_indexes", arg, false)?;
        (calls, created, instructions) = (calls + 1, created + p.created.len() as u64, instructions + p.instructions);
        let building = match &p.building {
            Some(b) => format!(
                "; building {} through a shadow table: rowids up to {} of {} copied, {} by this call",
                b.index, b.copied_up_to, b.last_rowid, b.copied_rows
            ),
            None => String::new(),
        };
        eprintln!(
            "create_indexes: created [{}], remaining [{}]{building} (call {calls}, {} instructions)",
            p.created.join(", "),
            p.remaining.join(", "),
            p.instructions
        );
        if p.complete {
            return Ok(MethodCost { method: "create_indexes", calls, added: Some(created), instructions });
        }
        // A call that created nothing either started a shadow build or copied part of one.
        if p.created.is_empty() && p.building.is_none() {
            bail!("create_indexes made no progress: {p:?}");
        }
    }
}

/// The per-method cost table (Markdown): calls, what they added, and the instructions their
/// replies report. An update call costs 5 M cycles plus 1 cycle per instruction on a 13-node
/// subnet (`stablebench_grid::ic`).
pub fn cost_table(costs: &[MethodCost]) -> String {
    let mut out = String::from(
        "| method | calls | rows or indexes added | instructions (sum of the replies) |\n|---|---:|---:|---:|\n",
    );
    for c in costs {
        let added = c.added.map_or_else(|| "-".to_string(), |n| n.to_string());
        out += &format!("| {} | {} | {} | {} |\n", c.method, c.calls, added, c.instructions);
    }
    out
}

/// The `stats` query: its value, and the reply in Candid text (through the target's interface,
/// as `stablebench-runner call stats` and `dfx canister call` print it; through [`Stats`] if the
/// target has no interface).
pub fn stats(target: &mut dyn Target) -> Result<(Stats, String)> {
    let reply = target.call("stats", candid::encode_args(())?, true)?;
    let stats: Stats = target::decode_ok(target, "stats", &reply)?;
    let text = match target.interface() {
        Some(iface) => decode_reply(&reply, "stats", Some(&iface))?,
        None => typed_text(&reply)?,
    };
    Ok((stats, text))
}

/// `reply` (`stats`'s) in Candid text with the field names of [`Stats`].
fn typed_text(reply: &[u8]) -> Result<String> {
    let ty = <std::result::Result<Stats, candid::Reserved> as CandidType>::ty();
    Ok(candid::IDLArgs::from_bytes_with_types(reply, &candid::types::TypeEnv::new(), &[ty])?.to_string())
}

/// `stablebench-runner load`.
pub fn main(args: &LoadArgs) -> Result<()> {
    let mut target: Box<dyn Target> = if args.dfx || args.network.is_some() {
        Box::new(Dfx::new(args.network.clone(), args.canister.clone(), "canister/stablebench.did".into()))
    } else {
        let (target, installed) = Offline::open(&args.state, &args.wasm)?;
        if installed {
            eprintln!("installed {} in {}", args.wasm.display(), args.state.display());
        }
        Box::new(target)
    };
    let costs = load(target.as_mut(), &args.plan)?;
    eprint!("{}", cost_table(&costs));
    let (_, text) = stats(target.as_mut())?;
    println!("{text}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use candid::types::internal::TypeContainer;
    use candid::types::{FuncMode, Function, Type, TypeInner};
    use candid::Deserialize;
    use candid_parser::utils::{service_compatible, CandidSource};

    type Reply<T> = std::result::Result<T, candid::Reserved>;

    /// The argument types of a method taking the tuple `T`.
    fn args<T: CandidType>(tc: &mut TypeContainer) -> Vec<Type> {
        match tc.add::<T>().as_ref() {
            TypeInner::Record(fields) => fields.iter().map(|f| f.ty.clone()).collect(),
            other => panic!("not a tuple: {other:?}"),
        }
    }

    fn method(args: Vec<Type>, ret: Type, query: bool) -> Type {
        let modes = if query { vec![FuncMode::Query] } else { vec![] };
        TypeInner::Func(Function { modes, args, rets: vec![ret] }).into()
    }

    /// The methods the load calls, with the Rust types it encodes and decodes.
    fn expected_methods(tc: &mut TypeContainer) -> Vec<(&'static str, Type)> {
        vec![
            ("add_orders", method(args::<RowsArgs>(tc), tc.add::<Reply<Batch>>(), false)),
            ("add_users", method(args::<RowsArgs>(tc), tc.add::<Reply<Batch>>(), false)),
            ("create_indexes", method(args::<IndexArgs>(tc), tc.add::<Reply<IndexProgress>>(), false)),
            ("create_schema", method(vec![], tc.add::<Reply<Cost>>(), false)),
            ("stats", method(vec![], tc.add::<Reply<Stats>>(), true)),
        ]
    }

    /// `methods` as a service in `.did` text.
    fn did(tc: &TypeContainer, methods: Vec<(&'static str, Type)>) -> String {
        let service = TypeInner::Service(methods.into_iter().map(|(n, t)| (n.to_string(), t)).collect()).into();
        candid::pretty::candid::compile(&tc.env, &Some(service))
    }

    /// Whether the canister's `canister/stablebench.did` serves `methods`: accepts their
    /// arguments and replies what their return types decode.
    fn fits(tc: &TypeContainer, methods: Vec<(&'static str, Type)>) -> Result<(), String> {
        let file = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../canister/stablebench.did"))
            .expect("canister/stablebench.did");
        let expected = did(tc, methods);
        service_compatible(CandidSource::Text(&file), CandidSource::Text(&expected))
            .map_err(|e| format!("{e}\n--- the load expects:\n{expected}"))
    }

    #[test]
    fn load_types_fit_the_production_did() {
        let mut tc = TypeContainer::new();
        let methods = expected_methods(&mut tc);
        fits(&tc, methods).unwrap_or_else(|e| panic!("canister/stablebench.did does not serve the load: {e}"));
    }

    /// `Batch` with a field the canister's does not have.
    #[derive(CandidType, Deserialize)]
    struct BatchWithMore {
        inserted: u64,
        next_offset: u64,
        complete: bool,
        instructions: u64,
        skipped: u64,
    }

    #[test]
    fn the_did_check_refuses_what_the_canister_does_not_serve() {
        let mut tc = TypeContainer::new();
        let mut methods = expected_methods(&mut tc);
        let swap = |methods: &mut Vec<(&'static str, Type)>, name: &str, t: Type| {
            methods.iter_mut().find(|(n, _)| *n == name).unwrap().1 = t;
        };
        // A reply field the canister does not send.
        let mut more = methods.clone();
        swap(&mut more, "add_users", method(args::<RowsArgs>(&mut tc), tc.add::<Reply<BatchWithMore>>(), false));
        // An argument of another type (a count as text).
        let mut arg = methods.clone();
        swap(
            &mut arg,
            "add_orders",
            method(args::<(u64, String, Option<u64>)>(&mut tc), tc.add::<Reply<Batch>>(), false),
        );
        // The query `stats` called as an update.
        let mut update = methods.clone();
        swap(&mut update, "stats", method(vec![], tc.add::<Reply<Stats>>(), false));
        // A method the canister does not have.
        methods.push(("add_user", method(args::<RowsArgs>(&mut tc), tc.add::<Reply<Batch>>(), false)));
        for (what, m) in [("reply field", more), ("argument", arg), ("mode", update), ("method", methods)] {
            assert!(fits(&tc, m).is_err(), "a wrong {what} passes the check");
        }
    }

    #[test]
    fn cost_table_lists_each_method() {
        let costs = [
            MethodCost { method: "create_schema", calls: 1, added: None, instructions: 7 },
            MethodCost { method: "add_users", calls: 2, added: Some(300), instructions: 1_000 },
        ];
        assert_eq!(
            cost_table(&costs),
            "| method | calls | rows or indexes added | instructions (sum of the replies) |\n\
             |---|---:|---:|---:|\n\
             | create_schema | 1 | - | 7 |\n\
             | add_users | 2 | 300 | 1000 |\n"
        );
    }

    #[test]
    fn stats_text_without_an_interface_names_the_fields() {
        let stats = Stats {
            schema: true,
            users: 2_000,
            orders: 20_000,
            indexes: vec![],
            page_size: 4096,
            page_count: 1,
            freelist_count: 0,
            database_bytes: 4096,
            stable_memory_bytes: 0,
            heap_bytes: 0,
            profile: "p".into(),
            pragmas: vec![],
        };
        let reply = candid::encode_one(Reply::<Stats>::Ok(stats)).unwrap();
        let text = typed_text(&reply).unwrap();
        assert!(text.contains("users = 2_000 : nat64") && text.contains("orders = 20_000 : nat64"), "{text}");
    }
}
