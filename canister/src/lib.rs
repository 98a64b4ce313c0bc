//! # stablebench canister
//!
//! SQLite in stable memory through ic-rusqlite, with the users/orders workload of the
//! `stablebench` library behind a Candid interface (`stablebench.did`), and the nine reference
//! benchmarks as canbench queries when built with the `canbench` feature.
//!
//! Every endpoint that changes data or runs caller-supplied SQL is for controllers only; others
//! get [`Error::NotController`]. Every failure is an `Err` value, never a trap, and a failed
//! update leaves the database as it was (each write runs in one SQLite transaction).
#![warn(missing_docs)]

mod db;
mod limits;

#[cfg(feature = "canbench")]
mod benches;

use candid::{CandidType, Deserialize, Principal};
use stablebench::pragma::{self, Profile};
use stablebench::query::{query_rows, QueryLimits, Rows};
use stablebench::schema::{self, schema_exists};
use stablebench::workload::{self, next_offset, Table};

use limits::{InstructionBudget, MAX_REPLY_BYTES, QUERY_BUDGET, UPDATE_BUDGET};

/// The pragma profile the canister applies on every open. The seed document's table until the
/// pragma guide measures alternatives.
const PROFILE: Profile = pragma::DEFAULT;

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

/// What one batch insert did. Call again with `offset = next_offset` until `complete`.
#[derive(CandidType, Deserialize, Clone, Debug, PartialEq)]
pub struct Batch {
    /// Rows inserted by this call (committed).
    pub inserted: u64,
    /// The offset the next call continues from.
    pub next_offset: u64,
    /// False if the call stopped at its instruction budget before inserting `count` rows.
    pub complete: bool,
}

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

/// A pragma's current value as SQLite reports it.
#[derive(CandidType, Deserialize, Clone, Debug, PartialEq)]
pub struct ActivePragma {
    /// Pragma name.
    pub name: String,
    /// Current value (SQLite's spelling: `persist`, `1`, ...).
    pub value: String,
}

/// Sizes and settings of the database.
#[derive(CandidType, Deserialize, Clone, Debug, PartialEq)]
pub struct Stats {
    /// Whether `create_schema` has run.
    pub schema: bool,
    /// Rows in `users`.
    pub users: u64,
    /// Rows in `orders`.
    pub orders: u64,
    /// Secondary indexes present.
    pub indexes: Vec<String>,
    /// SQLite page size, bytes.
    pub page_size: u64,
    /// Pages in the database file.
    pub page_count: u64,
    /// Unused pages in the file.
    pub freelist_count: u64,
    /// `page_size * page_count`.
    pub database_bytes: u64,
    /// Stable memory the canister has grown to, bytes.
    pub stable_memory_bytes: u64,
    /// Wasm heap size, bytes (includes SQLite's page cache).
    pub heap_bytes: u64,
    /// Name of the active pragma profile.
    pub profile: String,
    /// Current values of the reported pragmas.
    pub pragmas: Vec<ActivePragma>,
}

fn open_or_trap() {
    if let Err(e) = db::open(&PROFILE) {
        ic_cdk::trap(format!("opening the database with profile {}: {e}", PROFILE.name));
    }
}

#[ic_cdk::init]
fn init() {
    open_or_trap();
}

#[ic_cdk::pre_upgrade]
fn pre_upgrade() {
    db::close();
}

#[ic_cdk::post_upgrade]
fn post_upgrade() {
    open_or_trap();
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
    if schema_exists(conn)? {
        Ok(())
    } else {
        Err(Error::SchemaMissing)
    }
}

/// Batches append: `offset` must be where the table's generator left off, so a retried call
/// gets an error instead of inserting its rows twice.
fn check_batch(table: Table, offset: u64, count: u64, next: u64) -> Result<(), Error> {
    let invalid = |message: String| Err(Error::InvalidArgument { message });
    if count == 0 {
        return invalid("count must be at least 1".into());
    }
    if offset.checked_add(count).is_none_or(|end| end > i64::MAX as u64) {
        return invalid(format!("offset + count exceeds {} (SQLite's largest row id)", i64::MAX));
    }
    if offset != next {
        return invalid(format!(
            "offset {offset} does not continue table {}: the next offset is {next}",
            table.name()
        ));
    }
    Ok(())
}

/// Creates the `users` and `orders` tables if they do not exist. Controllers only.
#[ic_cdk::update]
fn create_schema() -> Result<(), Error> {
    require_controller()?;
    db::with_conn(|conn| Ok(schema::create_schema(conn)?))
}

/// Inserts users `offset + 1 ..= offset + count` (`user{id}`, `user{id}@example.com`) in one
/// transaction, stopping early (and committing) at the instruction budget. Controllers only.
#[ic_cdk::update]
fn add_users(offset: u64, count: u64) -> Result<Batch, Error> {
    require_controller()?;
    db::with_conn(|conn| {
        require_schema(conn)?;
        check_batch(Table::Users, offset, count, next_offset(conn, Table::Users)?)?;
        let inserted = workload::insert_users(conn, offset, count, &InstructionBudget(UPDATE_BUDGET))?;
        Ok(Batch { inserted, next_offset: offset + inserted, complete: inserted == count })
    })
}

/// Inserts orders for generator indexes `offset .. offset + count`, spread over the users that
/// exist (user of order i: `(i + 1) * 13 mod users + 1`), in one transaction, stopping early (and
/// committing) at the instruction budget. Controllers only.
#[ic_cdk::update]
fn add_orders(offset: u64, count: u64) -> Result<Batch, Error> {
    require_controller()?;
    db::with_conn(|conn| {
        require_schema(conn)?;
        let users = workload::count_users(conn)?;
        if users == 0 {
            return Err(Error::InvalidArgument { message: "there are no users yet: call add_users first".into() });
        }
        check_batch(Table::Orders, offset, count, next_offset(conn, Table::Orders)?)?;
        let budget = InstructionBudget(UPDATE_BUDGET);
        let inserted = workload::insert_orders(conn, offset, count, users, &budget)?;
        Ok(Batch { inserted, next_offset: offset + inserted, complete: inserted == count })
    })
}

/// Creates the indexes on `users(email)` and `orders(user_id)` if they do not exist.
/// Controllers only.
#[ic_cdk::update]
fn create_indexes() -> Result<(), Error> {
    require_controller()?;
    db::with_conn(|conn| {
        require_schema(conn)?;
        Ok(schema::create_indexes(conn)?)
    })
}

/// `DELETE FROM orders WHERE user_id <= max_user_id`; returns the number of orders deleted.
/// Controllers only.
#[ic_cdk::update]
fn delete_orders(max_user_id: u64) -> Result<u64, Error> {
    require_controller()?;
    if max_user_id > i64::MAX as u64 {
        return Err(Error::InvalidArgument { message: format!("max_user_id must be at most {}", i64::MAX) });
    }
    db::with_conn(|conn| {
        require_schema(conn)?;
        Ok(workload::delete_orders_of_users(conn, max_user_id)?)
    })
}

/// Runs one read-only statement (SELECT, WITH, VALUES or EXPLAIN) and returns its rows as typed
/// values. Refuses writes, stops with an error before the reply would pass 2,000,000 bytes or
/// the query passes its instruction budget. Controllers only (raw SQL).
#[ic_cdk::query]
fn query_sql(sql: String) -> Result<Rows, Error> {
    require_controller()?;
    let limits = QueryLimits { max_reply_bytes: MAX_REPLY_BYTES };
    db::with_conn(|conn| Ok(query_rows(conn, &sql, limits, &InstructionBudget(QUERY_BUDGET))?))
}

/// Row counts, file and memory sizes, and the active pragmas.
#[ic_cdk::query]
fn stats() -> Result<Stats, Error> {
    db::with_conn(|conn| {
        let schema = schema_exists(conn)?;
        let (users, orders, indexes) = if schema {
            (workload::count_users(conn)?, workload::count_orders(conn)?, schema::index_names(conn)?)
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
            profile: PROFILE.name.to_string(),
            pragmas: pragma::read_active(conn)?
                .into_iter()
                .map(|(name, value)| ActivePragma { name, value })
                .collect(),
        })
    })
}

/// The active pragma profile with the reason for each value, in the order it is applied.
#[ic_cdk::query]
fn pragma_profile() -> ProfileInfo {
    ProfileInfo {
        name: PROFILE.name.into(),
        source: PROFILE.source.into(),
        pragmas: PROFILE
            .pragmas
            .iter()
            .map(|p| PragmaSetting { name: p.name.into(), value: p.value.into(), why: p.why.into() })
            .collect(),
    }
}

mod memory {
    //! Memory sizes in bytes (0 natively).

    /// Bytes of stable memory.
    pub fn stable_bytes() -> u64 {
        #[cfg(target_arch = "wasm32")]
        {
            ic_cdk::stable::stable_size() * 65_536
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
            core::arch::wasm32::memory_size(0) as u64 * 65_536
        }
        #[cfg(not(target_arch = "wasm32"))]
        {
            0
        }
    }
}

#[allow(missing_docs)]
mod candid_export {
    use super::*;
    ic_cdk::export_candid!();

    /// Checks that `stablebench.did` describes exactly the service the code exports.
    /// Regenerate with `STABLEBENCH_REGENERATE_DID=1 cargo test -p stablebench-canister`.
    #[test]
    fn did_file_matches_the_code() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/stablebench.did");
        let code = __export_service();
        if std::env::var_os("STABLEBENCH_REGENERATE_DID").is_some() {
            std::fs::write(path, &code).unwrap();
        }
        let file = std::fs::read_to_string(path).unwrap();
        candid_parser::utils::service_equal(
            candid_parser::utils::CandidSource::Text(&file),
            candid_parser::utils::CandidSource::Text(&code),
        )
        .unwrap_or_else(|e| panic!("stablebench.did differs from the code: {e}\n--- code:\n{code}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_must_continue_the_table_and_fit_row_ids() {
        let err = |r: Result<(), Error>| match r {
            Err(Error::InvalidArgument { message }) => message,
            other => panic!("expected InvalidArgument, got {other:?}"),
        };
        assert!(check_batch(Table::Users, 0, 10, 0).is_ok());
        assert!(err(check_batch(Table::Users, 0, 0, 0)).contains("at least 1"));
        assert!(err(check_batch(Table::Users, 0, u64::MAX, 0)).contains("largest row id"));
        assert!(err(check_batch(Table::Orders, 5, 10, 20)).contains("next offset is 20"));
    }

    #[test]
    fn library_errors_map_to_their_candid_variants() {
        let e: Error = stablebench::Error::NotReadOnly("x".into()).into();
        assert_eq!(e, Error::NotReadOnly { message: "x".into() });
        let e: Error = stablebench::Error::ReplyTooLarge { rows_read: 3, limit_bytes: 9 }.into();
        assert_eq!(e, Error::ReplyTooLarge { rows_read: 3, limit_bytes: 9 });
    }
}
