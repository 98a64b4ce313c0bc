//! The statements of the reference workload, as functions over a connection. The canister's
//! endpoints, its canbench benchmarks and the native tests all call these.

use rusqlite::{Connection, OptionalExtension};

use crate::generate::{order_amount, order_user_id, write_user};
use crate::tx::Tx;
use crate::{Error, Meter, Result};

/// The cached, parameterised user insert of the reference (executed once per user).
pub const INSERT_USER: &str = "INSERT INTO users (username, email) VALUES (?1, ?2)";

/// The cached, parameterised order insert of the reference (executed once per order).
pub const INSERT_ORDER: &str = "INSERT INTO orders (user_id, amount) VALUES (?1, ?2)";

/// The LIKE query of the reference: a prefix match on the indexed `email` column.
pub const SELECT_LIKE: &str = "SELECT * FROM users WHERE email LIKE 'user%'";

/// How many rows an insert loop handles between two meter readings.
pub const METER_EVERY_INSERTS: u64 = 256;

/// The join of the reference; `max_user_id` is 1,000 at reference size.
pub fn select_join_sql(max_user_id: u64) -> String {
    format!(
        "SELECT u.user_id, u.username, o.order_id, o.amount FROM users u \
         JOIN orders o ON u.user_id = o.user_id WHERE u.user_id < {max_user_id} \
         ORDER BY o.created_at DESC"
    )
}

/// Inserts users `offset + 1 ..= offset + count` in one transaction with the reference's cached
/// statement. Stops early, committing what it inserted, when `meter` is exhausted; returns the
/// number of users inserted.
pub fn insert_users(conn: &mut Connection, offset: u64, count: u64, meter: &dyn Meter) -> Result<u64> {
    let tx = Tx::begin(conn)?;
    let mut done = 0;
    {
        let mut stmt = tx.prepare_cached(INSERT_USER)?;
        // Two buffers reused for every row (SQLite copies bound text) instead of two `format!`
        // allocations per row.
        let (mut name, mut mail) = (String::new(), String::new());
        while done < count {
            if done % METER_EVERY_INSERTS == 0 && done > 0 && meter.exhausted() {
                break;
            }
            let id = offset + done + 1;
            write_user(&mut name, &mut mail, id);
            stmt.execute((&name, &mail))?;
            done += 1;
        }
    }
    tx.commit()?;
    Ok(done)
}

/// Inserts orders for generator indexes `offset .. offset + count` (user of order `i`:
/// [`order_user_id`]`(i, user_count)`) in one transaction. Stops early, committing what it
/// inserted, when `meter` is exhausted; returns the number of orders inserted.
pub fn insert_orders(
    conn: &mut Connection,
    offset: u64,
    count: u64,
    user_count: u64,
    meter: &dyn Meter,
) -> Result<u64> {
    if user_count == 0 {
        return Err(Error::InvalidArgument("orders need at least one user".into()));
    }
    let tx = Tx::begin(conn)?;
    let mut done = 0;
    {
        let mut stmt = tx.prepare_cached(INSERT_ORDER)?;
        while done < count {
            if done % METER_EVERY_INSERTS == 0 && done > 0 && meter.exhausted() {
                break;
            }
            let user_id = order_user_id(offset + done, user_count);
            stmt.execute((user_id as i64, order_amount(user_id)))?;
            done += 1;
        }
    }
    tx.commit()?;
    Ok(done)
}

/// `DELETE FROM orders WHERE user_id <= max_user_id` (autocommit, as the reference); returns the
/// number of orders deleted.
pub fn delete_orders_of_users(conn: &Connection, max_user_id: u64) -> Result<u64> {
    Ok(conn.execute(&format!("DELETE FROM orders WHERE user_id <= {max_user_id}"), ())? as u64)
}

/// `DELETE FROM orders`; returns the number of orders deleted.
pub fn delete_all_orders(conn: &Connection) -> Result<u64> {
    Ok(conn.execute("DELETE FROM orders", ())? as u64)
}

/// What [`delete_orders_and_roll_back`] saw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RolledBack {
    /// Orders the DELETE removed inside the transaction.
    pub deleted: u64,
    /// `count(*)` of orders inside the transaction, after the DELETE.
    pub seen_inside: u64,
}

/// The reference's rollback step: `BEGIN TRANSACTION; DELETE FROM orders WHERE order_id >
/// min_order_id;` a count inside the transaction, then `ROLLBACK`.
pub fn delete_orders_and_roll_back(conn: &Connection, min_order_id: u64) -> Result<RolledBack> {
    conn.execute_batch("BEGIN TRANSACTION")?;
    let outcome = (|| {
        let deleted = conn.execute(&format!("DELETE FROM orders WHERE order_id > {min_order_id}"), ())? as u64;
        let seen_inside = count_orders(conn)?;
        Ok(RolledBack { deleted, seen_inside })
    })();
    conn.execute_batch("ROLLBACK")?;
    outcome
}

/// `count(*)` of users.
pub fn count_users(conn: &Connection) -> Result<u64> {
    count(conn, "SELECT count(*) FROM users")
}

/// `count(*)` of orders.
pub fn count_orders(conn: &Connection) -> Result<u64> {
    count(conn, "SELECT count(*) FROM orders")
}

/// The generator offset the next insert into `table` continues from: the highest id the table
/// ever handed out (AUTOINCREMENT keeps it in `sqlite_sequence`), 0 for a table never written.
pub fn next_offset(conn: &Connection, table: Table) -> Result<u64> {
    let seq: Option<Option<i64>> = conn
        .prepare_cached("SELECT seq FROM sqlite_sequence WHERE name = ?1")?
        .query_row([table.name()], |r| r.get(0))
        .optional()?;
    Ok(seq.flatten().unwrap_or(0) as u64)
}

/// A table of the schema.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Table {
    /// `users`.
    Users,
    /// `orders`.
    Orders,
}

impl Table {
    /// The table's SQL name.
    pub fn name(self) -> &'static str {
        match self {
            Table::Users => "users",
            Table::Orders => "orders",
        }
    }
}

fn count(conn: &Connection, sql: &str) -> Result<u64> {
    Ok(conn.query_row(sql, (), |r| r.get::<_, i64>(0))? as u64)
}
