//! # stablebench canister
//!
//! SQLite in stable memory through ic-rusqlite, with the users/orders workload of the
//! `stablebench` library and the four key-value backends behind a Candid interface
//! (`stablebench.did`), and every cell of the benchmark grid as a canbench query when built with
//! the `canbench` feature.
//!
//! Every endpoint that changes data or runs caller-supplied SQL is for controllers only; others
//! get [`Error::NotController`]. Every failure is an `Err` value, never a trap, and a failed
//! update leaves the database as it was (each write runs in one SQLite transaction).
#![warn(missing_docs)]

mod db;
mod kv;
mod limits;

// The benchmark canister (feature `canbench`): the generated canbench queries and the live API.
#[cfg(feature = "canbench")]
mod benches;
#[cfg(feature = "canbench")]
mod floor;
#[cfg(feature = "canbench")]
mod live;

use candid::{CandidType, Deserialize, Principal};
use stablebench::counts;
use stablebench::jobs::{self, guarded};
use stablebench::pragma::{self, Profile};
use stablebench::query::{self, Order, Page, QueryLimits, Rows, RowsPage, User};
use stablebench::schema;

pub use kv::KvBackend;
pub use stablebench::jobs::{Batch, Deleted, IndexBuild, IndexProgress};

use limits::{InstructionBudget, MAX_REPLY_BYTES, MAX_UPDATE_BUDGET, MIN_BUDGET, QUERY_BUDGET, UPDATE_BUDGET};

/// Why a call failed. Identical in `stablebench.did` (checked by a test).
#[derive(CandidType, Deserialize, Clone, Debug, PartialEq)]
pub enum Error {
    /// The caller is not a controller of this canister.
    NotController {
        /// Who called.
        caller: Principal,
    },
    /// The tables do not exist yet: call `create_schema` first.
    SchemaMissing,
    /// An argument is out of range or does not fit the database's state.
    InvalidArgument {
        /// What is wrong and what would be accepted.
        message: String,
    },
    /// `query` was given a statement that writes or changes the connection.
    NotReadOnly {
        /// Why it was refused.
        message: String,
    },
    /// SQLite rejected the statement or failed running it; nothing was changed.
    Sqlite {
        /// SQLite's message.
        message: String,
    },
    /// The result would not fit in one reply; narrow the query.
    ReplyTooLarge {
        /// Rows read before the limit.
        rows_read: u64,
        /// The byte limit.
        limit_bytes: u64,
    },
    /// The work reached the message's instruction budget; nothing was changed or returned.
    InstructionLimit {
        /// Rows processed before stopping.
        rows_done: u64,
        /// The budget, in instructions.
        budget: u64,
    },
    /// An internal invariant failed (a pragma did not apply, a result was wrong).
    Internal {
        /// What failed.
        message: String,
    },
}

impl From<stablebench::Error> for Error {
    fn from(e: stablebench::Error) -> Self {
        use stablebench::Error as E;
        match e {
            E::Sqlite(e) => Error::Sqlite { message: e.to_string() },
            E::InvalidArgument(message) => Error::InvalidArgument { message },
            E::NotReadOnly(message) => Error::NotReadOnly { message },
            E::ReplyTooLarge { rows_read, limit_bytes } => Error::ReplyTooLarge { rows_read, limit_bytes },
            E::InstructionLimit { rows_done, budget } => Error::InstructionLimit { rows_done, budget },
            e @ (E::PragmaNotApplied { .. } | E::WrongResult(_)) => Error::Internal { message: e.to_string() },
        }
    }
}

pub use stablebench_grid::api::{ActivePragma, Commit, Cost, Stats, MAX_KEYS_PER_CALL};

/// The instructions this message has executed so far, as a [`Cost`] reply.
pub fn cost_now() -> Cost {
    Cost { instructions: limits::instructions() }
}

/// Install and upgrade argument: `dfx deploy --argument '(opt record { profile = opt "reference" })'`.
#[derive(CandidType, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct InitArgs {
    /// The pragma profile to open the database with (see `pragma_profile`). At install the
    /// default: `page_8k_temp_file`, recommended; at upgrade, the one in use. Benchmark-only profiles (the
    /// heap database, a non-atomic journal) are refused. `page_size` cannot change once
    /// tables exist: an upgrade asking for another one fails and changes nothing.
    pub profile: Option<String>,
    /// The canister's `wasm_memory_limit` setting in bytes (what `dfx canister update-settings
    /// --wasm-memory-limit` set; the IC's default is 3 GiB). SQLite's page cache is bounded to a
    /// quarter of it, so that a database larger than the heap keeps working instead of trapping at
    /// the limit. Default: the value given at the last install or upgrade, else 3 GiB.
    pub wasm_memory_limit: Option<u64>,
}

/// The smallest `wasm_memory_limit` the canister accepts as its argument: below it SQLite's page
/// cache would be too small to be useful (64 MiB, a 16 MiB cache).
pub const MIN_WASM_MEMORY_LIMIT: u64 = 64 << 20;

/// One setting of the active pragma profile.
#[derive(CandidType, Deserialize, Clone, Debug, PartialEq)]
pub struct PragmaSetting {
    /// Pragma name.
    pub name: String,
    /// Value the profile sets.
    pub value: String,
    /// Why this value.
    pub why: String,
}

/// The active pragma profile, in the order it is applied.
#[derive(CandidType, Deserialize, Clone, Debug, PartialEq)]
pub struct ProfileInfo {
    /// Profile name.
    pub name: String,
    /// Where the values come from.
    pub source: String,
    /// Settings in application order.
    pub pragmas: Vec<PragmaSetting>,
}

/// The active profile: the one saved at install or the last upgrade.
fn active_profile() -> Profile {
    Profile::by_name(&db::saved_profile()).unwrap_or(pragma::DEFAULT)
}

/// Opens the database with the profile `args` names (or `fallback`), saves its name, and traps
/// with the reason if the name is unknown or the profile does not apply: an install or upgrade
/// that traps leaves the canister as it was.
fn open_with(args: Option<InitArgs>, fallback: Profile) {
    let InitArgs { profile, wasm_memory_limit } = measured_builds(args).unwrap_or_default();
    let limit = wasm_memory_limit
        .or(Some(db::saved_memory_limit()).filter(|&l| l > 0))
        .unwrap_or(stablebench_grid::ic::DEFAULT_WASM_MEMORY_LIMIT_BYTES);
    if limit < MIN_WASM_MEMORY_LIMIT {
        ic_cdk::trap(format!(
            "wasm_memory_limit {limit} is below the {MIN_WASM_MEMORY_LIMIT} bytes this canister needs"
        ));
    }
    let profile = match profile {
        Some(name) => Profile::by_name(&name).unwrap_or_else(|| {
            let known: Vec<_> = pragma::PROFILES.iter().map(|p| p.name).collect();
            ic_cdk::trap(format!("unknown pragma profile {name:?}; known profiles: {}", known.join(", ")))
        }),
        None => fallback,
    };
    if let Err(why) = profile.deployable() {
        ic_cdk::trap(why);
    }
    if let Err(e) = db::open(&profile) {
        ic_cdk::trap(format!("opening the database with profile {}: {e}", profile.name));
    }
    if let Err(e) = db::bound_cache(limit) {
        ic_cdk::trap(format!("bounding the page cache to a quarter of {limit} bytes: {e}"));
    }
    db::save_profile(profile.name);
    db::save_memory_limit(limit);
}

/// Rust's heap allocations get an allocator of their own: the dlmalloc crate (the one Rust's
/// standard library uses on wasm32-unknown-unknown), growing its own regions, instead of
/// wasi-libc's `malloc`, which SQLite's page cache uses. On one shared heap every message's short-lived
/// allocations (Candid's decoding, replies, statement arguments) land in free chunks scattered
/// among the cached pages, so a message touches tens of Wasm pages for them, each of which the
/// IC's memory tracker charges (80,000 instructions per page accessed, 80,000 more per page
/// written); in a region of their own they reuse a few pages. A build with feature `query_arena`
/// puts the queries' region in front of it ([`QUERIES`], at the end of this file) to measure it.
#[cfg(all(target_arch = "wasm32", not(feature = "query_arena")))]
#[global_allocator]
static ALLOCATOR: dlmalloc::GlobalDlmalloc = dlmalloc::GlobalDlmalloc;

#[ic_cdk::init]
fn init(args: Option<InitArgs>) {
    open_with(args, pragma::DEFAULT);
    kv::open();
    warm_queries();
}

#[ic_cdk::pre_upgrade]
fn pre_upgrade() {
    kv::save_heap();
    db::close();
}

#[ic_cdk::post_upgrade]
fn post_upgrade(args: Option<InitArgs>) {
    open_with(args, active_profile());
    kv::open();
    kv::load_heap();
    count_orders_once();
    warm_queries();
}

/// Builds the type tables of the query methods' replies in an update, for every query after it
/// (see `stablebench_grid::reply`).
fn warm_query_replies() {
    stablebench_grid::reply::warm::<Result<Rows, Error>>();
    stablebench_grid::reply::warm::<Result<RowsPage, Error>>();
    stablebench_grid::reply::warm::<Result<Page<User>, Error>>();
    stablebench_grid::reply::warm::<Result<Page<Order>, Error>>();
    stablebench_grid::reply::warm::<Result<Stats, Error>>();
    stablebench_grid::reply::warm::<ProfileInfo>();
    kv::warm_query_replies();
}

/// Prepares what the query endpoints need (statements, reply type tables) in an update, so that
/// the queries after it find them. The benchmark canister skips it: a benchmark must start from
/// the heap canbench's fresh canister has (the allocator's state moves a measurement by a few
/// tenths of a percent), so that a live run costs exactly what canbench measures
/// (`runner/tests/live.rs`).
fn warm_queries() {
    if cfg!(feature = "canbench") {
        return;
    }
    warm_query_statements();
    warm_query_replies();
}

/// Runs, in an update, the statements the query endpoints `stats`, `list_users` and `list_orders`
/// run, so that rusqlite's statement cache holds them prepared for every query after it: a query
/// prepares what it does not find there in every call (its heap changes are discarded), and
/// preparing a one-row statement costs more than running it. Called after install, upgrade and
/// every schema change (a change expires the prepared statements; running them prepares them
/// again). A failure only means a query prepares the statement itself, so it is ignored.
fn warm_query_statements() {
    let meter = InstructionBudget(QUERY_BUDGET);
    let _ = db::with_conn(|conn| -> stablebench::Result<()> {
        for name in ["page_size", "page_count", "freelist_count"] {
            pragma::read_pragma(conn, name)?;
        }
        pragma::read_active(conn)?;
        if db::schema_ready(conn)? {
            counts::users(conn)?;
            counts::orders(conn, &db::StableKept)?;
            schema::index_names(conn)?;
            let end = i64::MAX as u64;
            query::list_users(conn, end, 1, QUERY_LIMITS, &meter)?;
            query::list_orders(conn, end, 1, QUERY_LIMITS, &meter)?;
        }
        Ok(())
    });
}

/// Counts the orders of a database written before the canister kept their count, so that
/// `stats` answers in constant time from this upgrade on. Bounded to half the upgrade's
/// instruction limit; past it nothing changes and the first `delete_orders` counts them
/// instead.
fn count_orders_once() {
    let meter = InstructionBudget(stablebench_grid::ic::INSTALL_INSTRUCTION_LIMIT / 2);
    let counted = db::with_conn(|conn| -> stablebench::Result<()> {
        if db::schema_ready(conn)? {
            guarded(conn, &meter, || counts::init(conn, &mut db::StableKept))?;
        }
        Ok(())
    });
    if let Err(e) = counted {
        ic_cdk::api::debug_print(format!("post_upgrade: the orders stay uncounted until the next load or delete: {e}"));
    }
}

/// Replies with `value` (its Candid type table built once, `stablebench_grid::reply`) and hands it
/// back for ic-cdk to drop: the endpoints are `manual_reply`, which keeps their declared types
/// in the exported `.did` (ic-cdk's `encode_with` would declare every reply a `blob`).
pub(crate) fn send<T: CandidType + 'static>(value: T) -> T {
    ic_cdk::api::msg_reply(stablebench_grid::reply::reply(&value));
    value
}

fn require_controller() -> Result<(), Error> {
    let caller = ic_cdk::api::msg_caller();
    if ic_cdk::api::is_controller(&caller) {
        Ok(())
    } else {
        Err(Error::NotController { caller })
    }
}

fn require_schema(conn: &db::Connection) -> Result<(), Error> {
    if db::schema_ready(conn)? {
        Ok(())
    } else {
        Err(Error::SchemaMissing)
    }
}

/// The instruction budget of an update: `budget` if given and within
/// [`MIN_BUDGET`, `MAX_UPDATE_BUDGET`], else [`UPDATE_BUDGET`].
fn update_budget(budget: Option<u64>) -> Result<InstructionBudget, Error> {
    match budget {
        None => Ok(InstructionBudget(UPDATE_BUDGET)),
        Some(b) if (MIN_BUDGET..=MAX_UPDATE_BUDGET).contains(&b) => Ok(InstructionBudget(b)),
        Some(b) => Err(Error::InvalidArgument {
            message: format!("budget {b} is outside {MIN_BUDGET} ..= {MAX_UPDATE_BUDGET} instructions"),
        }),
    }
}

const QUERY_LIMITS: QueryLimits = QueryLimits { max_reply_bytes: MAX_REPLY_BYTES };

/// The frame every budgeted write runs in: controllers only, the budget checked, the schema
/// required, then `job` with the connection and the budget's meter.
fn budgeted_job<T>(
    budget: Option<u64>,
    job: impl FnOnce(&mut db::Connection, &InstructionBudget) -> stablebench::Result<T>,
) -> Result<T, Error> {
    require_controller()?;
    let meter = update_budget(budget)?;
    db::with_conn(|conn| {
        require_schema(conn)?;
        Ok(job(conn, &meter)?)
    })
}

/// The frame every read runs in: the query budget, the schema required if `need_schema`, and
/// `read` under the progress-handler guard that stops it at that budget. Callers check the
/// controller first where it is required.
fn guarded_read<T>(
    need_schema: bool,
    read: impl FnOnce(&db::Connection, &InstructionBudget) -> stablebench::Result<T>,
) -> Result<T, Error> {
    let meter = InstructionBudget(QUERY_BUDGET);
    db::with_conn(|conn| {
        if need_schema {
            require_schema(conn)?;
        }
        Ok(guarded(conn, &meter, || read(conn, &meter))?)
    })
}

/// Creates the `users` and `orders` tables if they do not exist. Controllers only.
#[ic_cdk::update(manual_reply = true)]
fn create_schema() -> Result<Cost, Error> {
    send((|| -> Result<Cost, Error> {
        require_controller()?;
        let meter = InstructionBudget(UPDATE_BUDGET);
        let created = db::with_conn(|conn| -> stablebench::Result<bool> {
            let created = !db::schema_ready(conn)?;
            if created {
                schema::create_schema(conn)?;
                // New tables: a count kept for tables that no longer exist does not apply.
                counts::Kept::forget(&mut db::StableKept);
            }
            guarded(conn, &meter, || counts::init(conn, &mut db::StableKept))?;
            Ok(created)
        })?;
        if created {
            warm_query_statements();
        }
        Ok(cost_now())
    })())
}

/// Loads users `offset + 1 ..= offset + count` (`user{id}`, `user{id}@example.com`) in one
/// transaction, stopping (and committing) at the instruction budget (default 30 B). Rows that
/// already exist are skipped, so a repeated call inserts nothing twice; call again from
/// `next_offset` until `complete`. Controllers only.
#[ic_cdk::update(manual_reply = true)]
fn add_users(offset: u64, count: u64, budget: Option<u64>) -> Result<Batch, Error> {
    send(budgeted_job(budget, |conn, meter| jobs::load_users(conn, offset, count, meter)))
}

/// Loads orders for generator indexes `offset .. offset + count`, spread over the users that
/// exist (user of order i: `(i + 1) * 13 mod users + 1`), with the same budget and resume rules
/// as `add_users`. Controllers only.
#[ic_cdk::update(manual_reply = true)]
fn add_orders(offset: u64, count: u64, budget: Option<u64>) -> Result<Batch, Error> {
    send(budgeted_job(budget, |conn, meter| jobs::load_orders(conn, offset, count, meter)))
}

/// Creates the missing indexes on `users(email)` and `orders(user_id)`, one per transaction,
/// until the budget is used; call again until `complete`. An index too big for one message is
/// built through a shadow copy of its table instead, window by window over the next calls
/// (`building` says how far it got); the table serves reads and writes meanwhile. Controllers only.
#[ic_cdk::update(manual_reply = true)]
fn create_indexes(budget: Option<u64>) -> Result<IndexProgress, Error> {
    send((|| -> Result<IndexProgress, Error> {
        let progress = budgeted_job(budget, jobs::create_indexes)?;
        if !progress.created.is_empty() {
            warm_query_statements();
        }
        Ok(progress)
    })())
}

/// Deletes the orders of users `1 ..= max_user_id` (`DELETE FROM orders WHERE user_id <= ?`),
/// window by window from `from_order_id` (default 0) until the budget is used; call again from
/// `next_order_id` until `complete`. Controllers only.
#[ic_cdk::update(manual_reply = true)]
fn delete_orders(max_user_id: u64, from_order_id: Option<u64>, budget: Option<u64>) -> Result<Deleted, Error> {
    send(budgeted_job(budget, |conn, meter| {
        jobs::delete_orders_of_users(conn, &mut db::StableKept, max_user_id, from_order_id.unwrap_or(0), meter)
    }))
}

/// Runs one read-only statement (SELECT, WITH, VALUES or EXPLAIN) and returns its rows as typed
/// values. Refuses writes, stops with an error before the reply would pass 2,000,000 bytes or
/// the query passes its instruction budget. Controllers only (raw SQL).
#[ic_cdk::query(manual_reply = true, guard = "crate::discarded")]
fn query_sql(sql: String) -> Result<Rows, Error> {
    send((|| -> Result<Rows, Error> {
        require_controller()?;
        guarded_read(false, |conn, meter| query::query_rows(conn, &sql, QUERY_LIMITS, meter))
    })())
}

/// Like `query_sql`, from row `start_row` on, returning as many rows as fit one reply and the
/// instruction budget, and `next_row` to continue from. Controllers only (raw SQL).
#[ic_cdk::query(manual_reply = true, guard = "crate::discarded")]
fn query_sql_page(sql: String, start_row: u64) -> Result<RowsPage, Error> {
    send((|| -> Result<RowsPage, Error> {
        require_controller()?;
        guarded_read(false, |conn, meter| query::query_page(conn, &sql, start_row, QUERY_LIMITS, meter))
    })())
}

/// Users with `user_id > after`, in id order, at most `limit`, as many as fit one reply; pass
/// `next_after` back for the next page.
#[ic_cdk::query(manual_reply = true, guard = "crate::discarded")]
fn list_users(after: u64, limit: u32) -> Result<Page<User>, Error> {
    send(guarded_read(true, |conn, meter| query::list_users(conn, after, limit, QUERY_LIMITS, meter)))
}

/// Orders with `order_id > after`, in id order, at most `limit`; like `list_users`.
#[ic_cdk::query(manual_reply = true, guard = "crate::discarded")]
fn list_orders(after: u64, limit: u32) -> Result<Page<Order>, Error> {
    send(guarded_read(true, |conn, meter| query::list_orders(conn, after, limit, QUERY_LIMITS, meter)))
}

/// Row counts, file and memory sizes, and the active pragmas. The counts come from the highest
/// ids handed out and the orders deleted, which `delete_orders` adds up, so this costs the same
/// at any size (a database from before the canister kept them is counted once, at the upgrade or
/// by the first delete).
#[ic_cdk::query(manual_reply = true, guard = "crate::discarded")]
fn stats() -> Result<Stats, Error> {
    send(db::with_conn(|conn| {
        let schema = db::schema_ready(conn)?;
        let (users, orders, indexes) = if schema {
            (counts::users(conn)?, counts::orders_or_count(conn, &db::StableKept)?, schema::index_names(conn)?)
        } else {
            (0, 0, Vec::new())
        };
        let num = |name| -> Result<u64, Error> { Ok(pragma::read_pragma(conn, name)?.parse().unwrap_or(0)) };
        let (page_size, page_count) = (num("page_size")?, num("page_count")?);
        Ok(Stats {
            schema,
            users,
            orders,
            indexes,
            page_size,
            page_count,
            freelist_count: num("freelist_count")?,
            database_bytes: page_size * page_count,
            stable_memory_bytes: memory::stable_bytes(),
            heap_bytes: memory::heap_bytes(),
            profile: active_profile().name.to_string(),
            pragmas: pragma::read_active(conn)?.into_iter().map(|(name, value)| ActivePragma { name, value }).collect(),
        })
    }))
}

/// The active pragma profile with the reason for each value, in the order it is applied.
#[ic_cdk::query(manual_reply = true, guard = "crate::discarded")]
fn pragma_profile() -> ProfileInfo {
    send({
        let profile = active_profile();
        ProfileInfo {
            name: profile.name.into(),
            source: profile.source.into(),
            pragmas: profile
                .pragmas
                .iter()
                .map(|p| PragmaSetting { name: p.name.into(), value: p.value.into(), why: p.why.into() })
                .collect(),
        }
    })
}

/// Memory sizes in bytes (0 natively).
mod memory {
    /// Bytes of stable memory.
    pub fn stable_bytes() -> u64 {
        #[cfg(target_arch = "wasm32")]
        {
            ic_cdk::stable::stable_size() * stablebench_grid::ic::WASM_PAGE_BYTES
        }
        #[cfg(not(target_arch = "wasm32"))]
        {
            0
        }
    }
    /// Bytes of wasm heap.
    pub fn heap_bytes() -> u64 {
        #[cfg(target_arch = "wasm32")]
        {
            core::arch::wasm32::memory_size(0) as u64 * stablebench_grid::ic::WASM_PAGE_BYTES
        }
        #[cfg(not(target_arch = "wasm32"))]
        {
            0
        }
    }
}
#[cfg(not(feature = "canbench"))] // Before `export_candid!`, which lists the methods defined before it.
mod kv_many;

#[allow(missing_docs)]
mod candid_export {
    use super::*;
    use serde_bytes::ByteBuf;
    #[cfg(feature = "canbench")]
    use stablebench_grid::live::{BenchCell, BenchReport, ChiaProgress, SetupProgress};
    ic_cdk::export_candid!();

    /// The interface file of this build: the production canister's, or with feature `canbench`
    /// the benchmark canister's (the production interface plus the live benchmark methods).
    #[cfg(test)]
    const DID: &str = if cfg!(feature = "canbench") { "stablebench_bench.did" } else { "stablebench.did" };

    /// Checks that the `.did` file describes exactly the service the code exports. Regenerate with
    /// `STABLEBENCH_REGENERATE_DID=1 cargo test -p stablebench-canister [--features canbench]`.
    #[test]
    fn did_file_matches_the_code() {
        let path = format!("{}/{DID}", env!("CARGO_MANIFEST_DIR"));
        let code = __export_service();
        if std::env::var_os("STABLEBENCH_REGENERATE_DID").is_some() {
            std::fs::write(&path, &code).unwrap();
        }
        let file = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        candid_parser::utils::service_equal(
            candid_parser::utils::CandidSource::Text(&file),
            candid_parser::utils::CandidSource::Text(&code),
        )
        .unwrap_or_else(|e| panic!("{DID} differs from the code: {e}\n--- code:\n{code}"));
    }
}

/// `args` as given, after reserving the queries' region in a build with feature `query_arena`
/// ([`QUERIES`]) and installing `stablebench_pragmas::pcache` as SQLite's page cache in a build
/// with feature `pcache` (`STABLEBENCH_PRODUCTION_FEATURES=pcache scripts/build.sh production`):
/// builds to measure them in, not the production wasm, which keeps SQLite's own cache and the
/// plain allocator (docs/per-call.md says why). Called by `open_with` (in `init` and
/// `post_upgrade`), before the first connection opens; it takes and returns `args` so that the
/// call adds no line there, and the wasm's code and panic locations stay those its committed
/// results were measured on.
fn measured_builds(args: Option<InitArgs>) -> Option<InitArgs> {
    #[cfg(all(target_arch = "wasm32", feature = "query_arena"))]
    QUERIES.reserve(stablebench_pragmas::query_arena::RECOMMENDED_BYTES);
    #[cfg(feature = "pcache")]
    if let Err(e) = stablebench_pragmas::pcache::install() {
        ic_cdk::trap(format!("installing the page cache: {e}"));
    }
    args
}

/// The allocator of a build with feature `query_arena` (`STABLEBENCH_PRODUCTION_FEATURES=query_arena
/// scripts/build.sh production`), to measure it; the production wasm keeps [`ALLOCATOR`] alone
/// (docs/per-call.md, "Tried and not yet adopted", says why): `stablebench_pragmas::query_arena` in
/// front of the dlmalloc crate. A non-replicated query (whose heap changes the IC discards)
/// bump-allocates from a region reserved at `init` and `post_upgrade` ([`measured_builds`]), so its
/// temporaries lie on as few Wasm pages as their bytes need instead of in dlmalloc's free chunks
/// all over the heap ([`discarded`], every query's guard, starts it).
#[cfg(all(target_arch = "wasm32", feature = "query_arena"))]
#[global_allocator]
static QUERIES: stablebench_pragmas::query_arena::QueryArena<dlmalloc::GlobalDlmalloc> =
    stablebench_pragmas::query_arena::QueryArena::new(dlmalloc::GlobalDlmalloc);

/// Every query's guard (an ic-cdk guard runs before the argument is decoded): the rest of a
/// non-replicated query allocates from the queries' region. A query called as an update runs
/// replicated and allocates as updates do.
pub(crate) fn discarded() -> Result<(), String> {
    #[cfg(all(target_arch = "wasm32", feature = "query_arena"))]
    QUERIES.begin(ic_cdk::api::in_replicated_execution());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_outside_the_allowed_range_are_refused() {
        assert_eq!(update_budget(None).unwrap().0, UPDATE_BUDGET);
        assert_eq!(update_budget(Some(MIN_BUDGET)).unwrap().0, MIN_BUDGET);
        for b in [0, MIN_BUDGET - 1, MAX_UPDATE_BUDGET + 1, u64::MAX] {
            assert!(matches!(update_budget(Some(b)), Err(Error::InvalidArgument { .. })), "{b}");
        }
    }

    #[test]
    fn library_errors_map_to_their_candid_variants() {
        let e: Error = stablebench::Error::NotReadOnly("x".into()).into();
        assert_eq!(e, Error::NotReadOnly { message: "x".into() });
        let e: Error = stablebench::Error::ReplyTooLarge { rows_read: 3, limit_bytes: 9 }.into();
        assert_eq!(e, Error::ReplyTooLarge { rows_read: 3, limit_bytes: 9 });
    }
}
