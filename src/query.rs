//! Running one read-only statement and materialising its rows as typed values: the canister's
//! `query` endpoint and the SELECT benchmarks share this code, so a benchmark measures what a
//! caller pays.

use rusqlite::types::ValueRef;
use rusqlite::Connection;

use crate::{Error, Meter, Result};

/// One SQLite value, typed.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "candid", derive(candid::CandidType, serde::Deserialize))]
pub enum Value {
    /// SQL NULL.
    Null,
    /// A 64-bit signed integer.
    Integer(i64),
    /// A 64-bit float.
    Real(f64),
    /// UTF-8 text (invalid UTF-8 is replaced, never a trap).
    Text(String),
    /// Bytes.
    Blob(Vec<u8>),
}

/// A statement's result: column names and rows.
#[derive(Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "candid", derive(candid::CandidType, serde::Deserialize))]
pub struct Rows {
    /// Column names, in order.
    pub columns: Vec<String>,
    /// Rows, each with one value per column.
    pub rows: Vec<Vec<Value>>,
}

/// Limits checked while rows are read.
#[derive(Clone, Copy, Debug)]
pub struct QueryLimits {
    /// Upper bound on the Candid-encoded size of the rows; past it the query fails with
    /// [`Error::ReplyTooLarge`] instead of the reply trapping.
    pub max_reply_bytes: u64,
}

impl QueryLimits {
    /// No limit (benchmarks and native tests).
    pub const UNLIMITED: QueryLimits = QueryLimits { max_reply_bytes: u64::MAX };
}

/// How often (in rows) the instruction meter is consulted: a performance counter read costs 200
/// instructions on the IC, so reading it per row would distort what is measured.
pub const METER_EVERY_ROWS: u64 = 256;

/// Statements the read-only path accepts, by first keyword. Transaction control, ATTACH/DETACH
/// and PRAGMA report themselves read-only to SQLite but change the connection, so they are not
/// in this list.
const READ_KEYWORDS: [&str; 4] = ["SELECT", "WITH", "VALUES", "EXPLAIN"];

/// Prepares `sql`, refuses anything that is not a single read-only query, and returns its rows.
/// Fails with [`Error::ReplyTooLarge`] or [`Error::InstructionLimit`] when a limit is reached.
pub fn query_rows(conn: &Connection, sql: &str, limits: QueryLimits, meter: &dyn Meter) -> Result<Rows> {
    read_rows(conn, sql, 0, limits, meter, OnLimit::Fail).map(|(rows, _)| rows)
}

/// One page of a read-only query's rows.
#[derive(Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "candid", derive(candid::CandidType, serde::Deserialize))]
pub struct RowsPage {
    /// The rows of this page.
    pub rows: Rows,
    /// Where the next page starts (pass it as `start_row`), if the query has more rows.
    pub next_row: Option<u64>,
}

/// Like [`query_rows`], but skips the first `start_row` rows and, instead of failing, stops at
/// the reply-size limit or the instruction budget and says where to continue. The statement is
/// run again for every page (skipping costs instructions); the typed reads page by key instead.
pub fn query_page(
    conn: &Connection,
    sql: &str,
    start_row: u64,
    limits: QueryLimits,
    meter: &dyn Meter,
) -> Result<RowsPage> {
    let (rows, more) = read_rows(conn, sql, start_row, limits, meter, OnLimit::Stop)?;
    let next_row = more.then(|| start_row + rows.rows.len() as u64);
    if next_row == Some(start_row) {
        return Err(Error::ReplyTooLarge { rows_read: 0, limit_bytes: limits.max_reply_bytes });
    }
    Ok(RowsPage { rows, next_row })
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum OnLimit {
    Fail,
    Stop,
}

/// Reads the rows of `sql` after skipping `skip`; the flag says whether it stopped at a limit
/// with rows left.
fn read_rows(
    conn: &Connection,
    sql: &str,
    skip: u64,
    limits: QueryLimits,
    meter: &dyn Meter,
    on_limit: OnLimit,
) -> Result<(Rows, bool)> {
    let keyword = first_keyword(sql).to_ascii_uppercase();
    if !READ_KEYWORDS.contains(&keyword.as_str()) {
        return Err(Error::NotReadOnly(format!(
            "statements starting with {keyword:?} are not accepted; use SELECT, WITH, VALUES or EXPLAIN"
        )));
    }
    // rusqlite's `prepare` fails with MultipleStatement if anything follows the first statement.
    let mut stmt = conn.prepare(sql)?;
    if !stmt.readonly() {
        return Err(Error::NotReadOnly("the statement writes to the database".into()));
    }
    let columns: Vec<String> = stmt.column_names().into_iter().map(str::to_string).collect();
    let ncol = columns.len();
    let mut bytes: u64 = columns.iter().map(|c| c.len() as u64 + 5).sum();
    let mut out = Vec::new();
    let mut rows = stmt.query(())?;
    let mut seen = 0u64;
    while let Some(row) = rows.next()? {
        seen += 1;
        if seen.is_multiple_of(METER_EVERY_ROWS) && meter.exhausted() {
            if on_limit == OnLimit::Stop {
                return Ok((Rows { columns, rows: out }, true));
            }
            return Err(Error::InstructionLimit { rows_done: out.len() as u64, budget: meter.budget() });
        }
        if seen <= skip {
            continue;
        }
        let mut values = Vec::with_capacity(ncol);
        let mut row_bytes = 0;
        for i in 0..ncol {
            let v = match row.get_ref(i)? {
                ValueRef::Null => Value::Null,
                ValueRef::Integer(x) => Value::Integer(x),
                ValueRef::Real(x) => Value::Real(x),
                ValueRef::Text(t) => Value::Text(text(t)),
                ValueRef::Blob(b) => Value::Blob(b.to_vec()),
            };
            row_bytes += encoded_size(&v);
            values.push(v);
        }
        if bytes + row_bytes > limits.max_reply_bytes {
            if on_limit == OnLimit::Stop {
                return Ok((Rows { columns, rows: out }, true));
            }
            return Err(Error::ReplyTooLarge { rows_read: out.len() as u64 + 1, limit_bytes: limits.max_reply_bytes });
        }
        bytes += row_bytes;
        out.push(values);
    }
    Ok((Rows { columns, rows: out }, false))
}

/// Text from SQLite as an owned `String`: valid UTF-8 is copied as it is (one validation pass),
/// anything else goes through `from_utf8_lossy`, so invalid bytes become U+FFFD and never trap.
/// `from_utf8_lossy` alone walks the text in chunks and costs more on the common, valid path.
fn text(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(s) => s.to_owned(),
        Err(_) => String::from_utf8_lossy(bytes).into_owned(),
    }
}

/// A row of `users`.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "candid", derive(candid::CandidType, serde::Deserialize))]
pub struct User {
    /// `user_id`.
    pub user_id: u64,
    /// `username`.
    pub username: String,
    /// `email`.
    pub email: String,
    /// `created_at`, as SQLite stores it (`YYYY-MM-DD HH:MM:SS`).
    pub created_at: String,
}

/// A row of `orders`.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "candid", derive(candid::CandidType, serde::Deserialize))]
pub struct Order {
    /// `order_id`.
    pub order_id: u64,
    /// `user_id`.
    pub user_id: u64,
    /// `amount`.
    pub amount: f64,
    /// `created_at`.
    pub created_at: String,
}

/// A page of typed rows, in key order.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "candid", derive(candid::CandidType, serde::Deserialize))]
pub struct Page<T> {
    /// The rows.
    pub items: Vec<T>,
    /// The key to pass as `after` for the next page, if there are more rows.
    pub next_after: Option<u64>,
}

/// The statement of [`list_users`]: a page of users after a key (one row more than the page, to
/// tell whether another follows).
pub const LIST_USERS: &str =
    "SELECT user_id, username, email, created_at FROM users WHERE user_id > ?1 ORDER BY user_id LIMIT ?2";

/// The statement of [`list_orders`], like [`LIST_USERS`].
pub const LIST_ORDERS: &str =
    "SELECT order_id, user_id, amount, created_at FROM orders WHERE order_id > ?1 ORDER BY order_id LIMIT ?2";

/// Users with `user_id > after`, in id order, at most `limit` (keyset pagination: a page costs
/// the same wherever it starts). Stops early at the reply-size limit or the budget.
pub fn list_users(
    conn: &Connection,
    after: u64,
    limit: u32,
    limits: QueryLimits,
    meter: &dyn Meter,
) -> Result<Page<User>> {
    keyset_page(conn, LIST_USERS, after, limit, limits, meter, |r| {
        let user = User {
            user_id: r.get::<_, i64>(0)? as u64,
            username: r.get(1)?,
            email: r.get(2)?,
            created_at: r.get::<_, Option<String>>(3)?.unwrap_or_default(),
        };
        let size = 8 + 3 * 5 + (user.username.len() + user.email.len() + user.created_at.len()) as u64;
        Ok((user.user_id, size, user))
    })
}

/// Orders with `order_id > after`, in id order, at most `limit`; like [`list_users`].
pub fn list_orders(
    conn: &Connection,
    after: u64,
    limit: u32,
    limits: QueryLimits,
    meter: &dyn Meter,
) -> Result<Page<Order>> {
    keyset_page(conn, LIST_ORDERS, after, limit, limits, meter, |r| {
        let order = Order {
            order_id: r.get::<_, i64>(0)? as u64,
            user_id: r.get::<_, i64>(1)? as u64,
            amount: r.get(2)?,
            created_at: r.get::<_, Option<String>>(3)?.unwrap_or_default(),
        };
        Ok((order.order_id, 8 * 3 + 5 + order.created_at.len() as u64, order))
    })
}

fn keyset_page<T>(
    conn: &Connection,
    sql: &str,
    after: u64,
    limit: u32,
    limits: QueryLimits,
    meter: &dyn Meter,
    item: impl Fn(&rusqlite::Row<'_>) -> rusqlite::Result<(u64, u64, T)>,
) -> Result<Page<T>> {
    if limit == 0 {
        return Err(Error::InvalidArgument("limit must be at least 1".into()));
    }
    let after =
        i64::try_from(after).map_err(|_| Error::InvalidArgument(format!("after must be at most {}", i64::MAX)))?;
    let mut stmt = conn.prepare_cached(sql)?;
    // One row more than asked for tells whether there is a next page.
    let mut rows = stmt.query((after, limit as i64 + 1))?;
    let (mut items, mut bytes, mut last) = (Vec::new(), 0u64, None);
    while let Some(r) = rows.next()? {
        let (key, size, t) = item(r)?;
        let full = items.len() as u64 >= u64::from(limit) || bytes + size > limits.max_reply_bytes;
        let stop = full || (items.len() as u64 % METER_EVERY_ROWS == METER_EVERY_ROWS - 1 && meter.exhausted());
        if stop {
            if items.is_empty() {
                return Err(Error::ReplyTooLarge { rows_read: 1, limit_bytes: limits.max_reply_bytes });
            }
            return Ok(Page { items, next_after: last });
        }
        bytes += size;
        last = Some(key);
        items.push(t);
    }
    Ok(Page { items, next_after: None })
}

/// Bytes `v` takes in a Candid reply: variant tag (1) plus the payload; text and blob carry a
/// LEB128 length (counted as 5, its maximum for a wasm32 length). Each row adds its own length.
fn encoded_size(v: &Value) -> u64 {
    1 + match v {
        Value::Null => 0,
        Value::Integer(_) | Value::Real(_) => 8,
        Value::Text(t) => 5 + t.len() as u64,
        Value::Blob(b) => 5 + b.len() as u64,
    } + 1
}

/// The first keyword of `sql`, after white space and `--` / `/* */` comments.
fn first_keyword(sql: &str) -> &str {
    let mut s = sql;
    loop {
        s = s.trim_start();
        if let Some(rest) = s.strip_prefix("--") {
            s = rest.find('\n').map_or("", |i| &rest[i + 1..]);
        } else if let Some(rest) = s.strip_prefix("/*") {
            s = rest.find("*/").map_or("", |i| &rest[i + 2..]);
        } else {
            break;
        }
    }
    let end = s.find(|c: char| !c.is_ascii_alphabetic()).unwrap_or(s.len());
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NoLimit;

    fn conn() -> Connection {
        let c = Connection::open_in_memory().unwrap();
        c.execute_batch("CREATE TABLE t (a INTEGER, b TEXT, c REAL, d BLOB); INSERT INTO t VALUES (1, 'x', 2.5, x'00ff'), (NULL, NULL, NULL, NULL);").unwrap();
        c
    }

    #[test]
    fn select_returns_typed_values() -> Result<()> {
        let rows = query_rows(&conn(), "SELECT * FROM t ORDER BY a DESC", QueryLimits::UNLIMITED, &NoLimit)?;
        assert_eq!(rows.columns, ["a", "b", "c", "d"]);
        assert_eq!(
            rows.rows,
            vec![
                vec![Value::Integer(1), Value::Text("x".into()), Value::Real(2.5), Value::Blob(vec![0, 255])],
                vec![Value::Null, Value::Null, Value::Null, Value::Null],
            ]
        );
        Ok(())
    }

    #[test]
    fn invalid_utf8_text_is_replaced_not_refused() -> Result<()> {
        // CAST of a blob to TEXT hands back the bytes unchanged, valid UTF-8 or not.
        let sql = "SELECT CAST(x'61ff62' AS TEXT), CAST(x'c3a9' AS TEXT)";
        let rows = query_rows(&conn(), sql, QueryLimits::UNLIMITED, &NoLimit)?;
        assert_eq!(rows.rows, vec![vec![Value::Text("a\u{FFFD}b".into()), Value::Text("\u{e9}".into())]]);
        Ok(())
    }

    #[test]
    fn writes_and_connection_changes_are_refused_and_change_nothing() {
        let c = conn();
        for sql in [
            "DELETE FROM t",
            "  -- comment\n INSERT INTO t VALUES (3, 'y', 0, NULL)",
            "WITH x AS (SELECT 1) DELETE FROM t",
            "BEGIN",
            "ROLLBACK",
            "PRAGMA journal_mode = OFF",
            "ATTACH ':memory:' AS other",
            "DROP TABLE t",
        ] {
            match query_rows(&c, sql, QueryLimits::UNLIMITED, &NoLimit) {
                Err(Error::NotReadOnly(_)) => {}
                other => panic!("{sql:?}: expected NotReadOnly, got {other:?}"),
            }
        }
        let n: i64 = c.query_row("SELECT count(*) FROM t", (), |r| r.get(0)).unwrap();
        assert_eq!(n, 2);
    }

    #[test]
    fn malformed_and_multiple_statements_are_sql_errors() {
        let c = conn();
        for sql in ["SELECT * FROM nowhere", "SELECT 1; DELETE FROM t", "SELEC 1"] {
            assert!(query_rows(&c, sql, QueryLimits::UNLIMITED, &NoLimit).is_err(), "{sql}");
        }
        let n: i64 = c.query_row("SELECT count(*) FROM t", (), |r| r.get(0)).unwrap();
        assert_eq!(n, 2);
    }

    #[test]
    fn reply_limit_stops_with_a_clear_error() {
        let c = Connection::open_in_memory().unwrap();
        let limits = QueryLimits { max_reply_bytes: 10_000 };
        let sql = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100000) SELECT i, 'some text' FROM n";
        match query_rows(&c, sql, limits, &NoLimit) {
            Err(Error::ReplyTooLarge { rows_read, limit_bytes: 10_000 }) => assert!(rows_read < 1000),
            other => panic!("expected ReplyTooLarge, got {other:?}"),
        }
    }

    #[test]
    fn meter_stops_long_queries() {
        struct After(std::cell::Cell<u32>);
        impl Meter for After {
            fn exhausted(&self) -> bool {
                self.0.set(self.0.get() + 1);
                self.0.get() > 2
            }
            fn budget(&self) -> u64 {
                42
            }
        }
        let c = Connection::open_in_memory().unwrap();
        let sql = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100000) SELECT i FROM n";
        match query_rows(&c, sql, QueryLimits::UNLIMITED, &After(Default::default())) {
            // The third check fires on row 768, before it is kept.
            Err(Error::InstructionLimit { rows_done, budget: 42 }) => assert_eq!(rows_done, 3 * METER_EVERY_ROWS - 1),
            other => panic!("expected InstructionLimit, got {other:?}"),
        }
    }

    #[test]
    fn first_keyword_skips_space_and_comments() {
        assert_eq!(first_keyword("  /* a */ -- b\n select 1"), "select");
        assert_eq!(first_keyword("WITH x"), "WITH");
        assert_eq!(first_keyword("-- only a comment"), "");
    }
}
