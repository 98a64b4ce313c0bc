//! `stablebench::tx::Tx` keeps `rusqlite::Transaction`'s semantics: a commit keeps the writes,
//! a drop without commit (an error returned with `?`, or a failed `COMMIT`) rolls them back,
//! and the connection takes the next transaction after either.

use rusqlite::Connection;
use stablebench::tx::Tx;
use stablebench::{Error, Result};

fn db() -> Connection {
    let conn = Connection::open_in_memory().unwrap();
    conn.execute_batch(
        "CREATE TABLE parent(id INTEGER PRIMARY KEY);
         CREATE TABLE child(id INTEGER PRIMARY KEY,
                            parent INTEGER REFERENCES parent(id) DEFERRABLE INITIALLY DEFERRED);
         PRAGMA foreign_keys = ON;",
    )
    .unwrap();
    conn
}

fn rows(conn: &Connection, table: &str) -> i64 {
    conn.query_row(&format!("SELECT count(*) FROM {table}"), (), |r| r.get(0)).unwrap()
}

fn insert_parent_then_fail(conn: &mut Connection, id: i64) -> Result<()> {
    let tx = Tx::begin(conn)?;
    tx.execute("INSERT INTO parent(id) VALUES (?1)", [id])?;
    tx.execute("INSERT INTO parent(id) VALUES (?1)", [id])?; // a duplicate key: the error returns early
    tx.commit()
}

#[test]
fn commit_keeps_and_drop_rolls_back() {
    let mut conn = db();
    let tx = Tx::begin(&mut conn).unwrap();
    assert!(!tx.is_autocommit(), "BEGIN opened a transaction");
    tx.execute("INSERT INTO parent(id) VALUES (1)", ()).unwrap();
    tx.commit().unwrap();
    assert!(conn.is_autocommit());
    assert_eq!(rows(&conn, "parent"), 1);

    let tx = Tx::begin(&mut conn).unwrap();
    tx.execute("INSERT INTO parent(id) VALUES (2)", ()).unwrap();
    drop(tx);
    assert!(conn.is_autocommit());
    assert_eq!(rows(&conn, "parent"), 1, "the dropped transaction's row is gone");

    assert!(matches!(insert_parent_then_fail(&mut conn, 3), Err(Error::Sqlite(_))));
    assert!(conn.is_autocommit());
    assert_eq!(rows(&conn, "parent"), 1, "the failed call's first insert is rolled back");

    // The cached statements serve the next transaction after a commit and after a rollback.
    for id in 4..7 {
        let tx = Tx::begin(&mut conn).unwrap();
        tx.execute("INSERT INTO parent(id) VALUES (?1)", [id]).unwrap();
        tx.commit().unwrap();
    }
    assert_eq!(rows(&conn, "parent"), 4);
}

#[test]
fn a_failed_commit_rolls_back_when_dropped() {
    let mut conn = db();
    let tx = Tx::begin(&mut conn).unwrap();
    tx.execute("INSERT INTO parent(id) VALUES (1)", ()).unwrap();
    // A deferred foreign key fails at COMMIT, which leaves the transaction open.
    tx.execute("INSERT INTO child(id, parent) VALUES (1, 99)", ()).unwrap();
    assert!(tx.commit().is_err());
    assert!(conn.is_autocommit(), "dropping the failed transaction rolled it back");
    assert_eq!((rows(&conn, "parent"), rows(&conn, "child")), (0, 0));
}

#[test]
fn an_unchecked_transaction_on_a_shared_connection_behaves_the_same_and_refuses_nesting() {
    let conn = db();
    let tx = Tx::begin_unchecked(&conn).unwrap();
    tx.execute("INSERT INTO parent(id) VALUES (1)", ()).unwrap();
    let nested = Tx::begin_unchecked(&conn);
    assert!(
        matches!(nested, Err(Error::Sqlite(ref e)) if e.to_string().contains("within a transaction")),
        "{nested:?}"
    );
    assert!(!conn.is_autocommit(), "the refused BEGIN left the first transaction open");
    tx.commit().unwrap();
    assert_eq!(rows(&conn, "parent"), 1);

    let tx = Tx::begin_unchecked(&conn).unwrap();
    tx.execute("INSERT INTO parent(id) VALUES (2)", ()).unwrap();
    drop(tx);
    assert!(conn.is_autocommit());
    assert_eq!(rows(&conn, "parent"), 1, "the dropped transaction's row is gone");
}
