//! The library's error type.

use std::fmt;

/// Everything the workload can fail with. The canister maps each variant to a Candid error.
#[derive(Debug)]
pub enum Error {
    /// SQLite rejected a statement or failed running it.
    Sqlite(rusqlite::Error),
    /// An argument is out of range or inconsistent with the database (the text says which).
    InvalidArgument(String),
    /// The read-only query path was given a statement that can write or change the connection.
    NotReadOnly(String),
    /// A pragma did not take the value a profile asked for.
    PragmaNotApplied {
        /// Pragma name.
        name: String,
        /// Value the profile asked for.
        requested: String,
        /// Value SQLite reports.
        effective: String,
    },
    /// The result would not fit in one reply; nothing was returned.
    ReplyTooLarge {
        /// Rows read before the limit was reached.
        rows_read: u64,
        /// The byte limit.
        limit_bytes: u64,
    },
    /// A benchmark's result differs from the oracle's prediction (the text has both).
    WrongResult(String),
    /// The work stopped before the message's instruction limit; nothing was changed or returned.
    InstructionLimit {
        /// Rows processed before stopping.
        rows_done: u64,
        /// The instruction budget that was reached.
        budget: u64,
    },
}

/// `Result` with the library's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl From<rusqlite::Error> for Error {
    fn from(e: rusqlite::Error) -> Self {
        Error::Sqlite(e)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Sqlite(e) => write!(f, "SQLite error: {e}"),
            Error::InvalidArgument(m) => write!(f, "invalid argument: {m}"),
            Error::NotReadOnly(m) => write!(f, "not a read-only statement: {m}"),
            Error::PragmaNotApplied { name, requested, effective } => {
                write!(f, "PRAGMA {name} = {requested} did not take effect (SQLite reports {effective})")
            }
            Error::ReplyTooLarge { rows_read, limit_bytes } => write!(
                f,
                "the result exceeds {limit_bytes} bytes after {rows_read} rows; \
                 narrow the query (WHERE, LIMIT)"
            ),
            Error::WrongResult(m) => write!(f, "wrong result: {m}"),
            Error::InstructionLimit { rows_done, budget } => write!(
                f,
                "stopped at the instruction budget of {budget} after {rows_done} rows; \
                 nothing was changed"
            ),
        }
    }
}

impl std::error::Error for Error {}
