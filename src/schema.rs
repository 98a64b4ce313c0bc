//! The users/orders schema of the reference workload (wasm-forge/ic-rusqlite, `benchmarks/users-orders`; see docs/sources.md).

use rusqlite::Connection;

use crate::tx::Tx;
use crate::Result;

/// `users`: 100,000 rows in the reference run. `created_at` is filled by SQLite from the clock
/// (on the IC: `ic0.time` through the WASI polyfill), exactly as the reference does.
pub const CREATE_USERS: &str = "CREATE TABLE IF NOT EXISTS users (
    user_id INTEGER PRIMARY KEY AUTOINCREMENT,
    username TEXT NOT NULL,
    email TEXT NOT NULL,
    created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP
)";

/// `orders`: 1,000,000 rows in the reference run, each referring to one user.
pub const CREATE_ORDERS: &str = "CREATE TABLE IF NOT EXISTS orders (
    order_id INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id INTEGER NOT NULL,
    amount REAL NOT NULL,
    created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
    FOREIGN KEY (user_id) REFERENCES users(user_id)
)";

/// The two secondary indexes of the "create indexes" benchmark, in the reference's order.
pub const CREATE_INDEXES: [&str; 2] = [
    "CREATE INDEX IF NOT EXISTS idx_users_email ON users(email)",
    "CREATE INDEX IF NOT EXISTS idx_orders_user_id ON orders(user_id)",
];

/// Creates both tables if they do not exist yet (idempotent), in one transaction.
pub fn create_schema(conn: &mut Connection) -> Result<()> {
    let tx = Tx::begin(conn)?;
    tx.execute(CREATE_USERS, ())?;
    tx.execute(CREATE_ORDERS, ())?;
    tx.commit()?;
    Ok(())
}

/// Creates the two secondary indexes if they do not exist yet (idempotent), in one transaction.
pub fn create_indexes(conn: &mut Connection) -> Result<()> {
    let tx = Tx::begin(conn)?;
    for sql in CREATE_INDEXES {
        tx.execute(sql, ())?;
    }
    tx.commit()?;
    Ok(())
}

/// True when both tables of the schema exist.
pub fn schema_exists(conn: &Connection) -> Result<bool> {
    // Cached, as the other statements every call runs: preparing costs more than running it.
    let n: i64 = conn
        .prepare_cached("SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name IN ('users', 'orders')")?
        .query_row((), |r| r.get(0))?;
    Ok(n == 2)
}

/// Names of the user-created indexes that exist, sorted.
pub fn index_names(conn: &Connection) -> Result<Vec<String>> {
    let mut stmt =
        // Not those of a shadow copy being built (`shadow`): they are not usable yet.
        conn.prepare_cached(
            "SELECT name FROM sqlite_schema WHERE type = 'index' AND sql IS NOT NULL \
             AND tbl_name NOT LIKE 'stablebench\\_shadow\\_%' ESCAPE '\\' ORDER BY name",
        )?;
    let names = stmt.query_map((), |r| r.get(0))?.collect::<rusqlite::Result<_>>()?;
    Ok(names)
}
