//! Transactions whose `BEGIN` and `COMMIT` come from rusqlite's statement cache.
//!
//! `rusqlite::Connection::transaction` runs `execute_batch("BEGIN DEFERRED")` and, to commit,
//! `execute_batch("COMMIT")`: SQLite parses both statements again in every transaction. A
//! canister that writes a few rows per message pays that parse in every call, a visible part of
//! a one-row insert (`docs/per-call.md` measures it). [`Tx`] runs the same statements
//! prepared once per connection, with the same semantics: a deferred transaction, rolled back
//! when it is dropped without a successful [`Tx::commit`] (an error, an early return, a panic).

use std::ops::Deref;

use rusqlite::Connection;

use crate::Result;

/// An open deferred transaction on a connection; derefs to the [`Connection`] for statements.
/// Borrowing the connection mutably, as `Connection::transaction` does, rules out nesting.
#[derive(Debug)]
pub struct Tx<'c> {
    conn: &'c Connection,
}

impl<'c> Tx<'c> {
    /// `BEGIN` (deferred, as `Connection::transaction`).
    pub fn begin(conn: &'c mut Connection) -> Result<Self> {
        conn.prepare_cached("BEGIN")?.execute(())?;
        Ok(Tx { conn })
    }

    /// `BEGIN` on a shared connection, as `Connection::unchecked_transaction`: for code that
    /// holds `&Connection` (a store that keeps one). Nothing stops a second transaction from
    /// being begun on the same connection at compile time; SQLite refuses it at run time
    /// ("cannot start a transaction within a transaction"), and the first one is unaffected.
    pub fn begin_unchecked(conn: &'c Connection) -> Result<Self> {
        conn.prepare_cached("BEGIN")?.execute(())?;
        Ok(Tx { conn })
    }

    /// `COMMIT`. If it fails, the transaction is still open and dropping `self` rolls it back,
    /// as `rusqlite::Transaction::commit` does.
    pub fn commit(self) -> Result<()> {
        self.conn.prepare_cached("COMMIT")?.execute(())?;
        Ok(())
    }
}

impl Deref for Tx<'_> {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        self.conn
    }
}

impl Drop for Tx<'_> {
    fn drop(&mut self) {
        // After a successful COMMIT the connection is back in autocommit and nothing is left to do.
        if !self.conn.is_autocommit() {
            // As rusqlite's Transaction: a failed rollback on drop has nowhere to be reported
            // (SQLite then rolls the transaction back when the connection closes).
            let _ = self.conn.prepare_cached("ROLLBACK").and_then(|mut s| s.execute(()));
        }
    }
}
