//! The page cache of `stablebench_pragmas::pcache` against a model: SQLite over it must keep
//! exactly what a `BTreeMap` keeps, through evictions (a cache far smaller than the database),
//! rollbacks, page splits and merges, auto-vacuum's page moves (rekeys) and truncations, VACUUM,
//! cache size changes, `shrink_memory`, temporary tables and in-memory databases (caches SQLite
//! never evicts). Its own test binary: the cache must be installed before SQLite is initialized.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rusqlite::{params, Connection};
use std::collections::BTreeMap;
use std::sync::Once;

fn installed() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| stablebench_pragmas::pcache::install().expect("installed before SQLite starts"));
}

fn temp_db(name: &str) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!("stablebench-pcache-{}-{name}.db", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(path.with_extension("db-journal"));
    path
}

fn contents(conn: &Connection) -> BTreeMap<i64, Vec<u8>> {
    let mut stmt = conn.prepare("SELECT k, v FROM kv ORDER BY k").unwrap();
    stmt.query_map((), |r| Ok((r.get(0)?, r.get(1)?))).unwrap().map(|r| r.unwrap()).collect()
}

fn check(conn: &Connection, model: &BTreeMap<i64, Vec<u8>>, when: &str) {
    assert_eq!(&contents(conn), model, "{when}: the table differs from the model");
    let ok: String = conn.query_row("PRAGMA integrity_check", (), |r| r.get(0)).unwrap();
    assert_eq!(ok, "ok", "{when}");
}

/// Random transactions of inserts, updates and deletes, a fifth of them rolled back.
fn churn(conn: &mut Connection, model: &mut BTreeMap<i64, Vec<u8>>, rng: &mut ChaCha8Rng, rounds: usize, keys: i64) {
    for round in 0..rounds {
        let tx = conn.transaction().unwrap();
        let mut next = model.clone();
        for _ in 0..rng.random_range(1..200) {
            let k = rng.random_range(0..keys);
            match rng.random_range(0..10) {
                0..=5 => {
                    let v: Vec<u8> = (0..rng.random_range(0..600)).map(|_| rng.random()).collect();
                    tx.execute("INSERT OR REPLACE INTO kv (k, v) VALUES (?1, ?2)", params![k, v]).unwrap();
                    next.insert(k, v);
                }
                6..=8 => {
                    tx.execute("DELETE FROM kv WHERE k = ?1", [k]).unwrap();
                    next.remove(&k);
                }
                _ => {
                    let end = k + rng.random_range(1..300);
                    tx.execute("DELETE FROM kv WHERE k >= ?1 AND k < ?2", [k, end]).unwrap();
                    next.retain(|&key, _| key < k || key >= end);
                }
            }
        }
        if rng.random_range(0..5) == 0 {
            tx.rollback().unwrap();
        } else {
            tx.commit().unwrap();
            *model = next;
        }
        if round % 25 == 24 {
            check(conn, model, &format!("round {round}"));
        }
    }
}

#[test]
fn a_file_database_through_evictions_rekeys_and_truncations() {
    installed();
    let before = stablebench_pragmas::pcache::caches_created();
    for (name, auto_vacuum) in [("plain", "NONE"), ("auto_vacuum", "FULL")] {
        let path = temp_db(name);
        let mut conn = Connection::open(&path).unwrap();
        conn.execute_batch(&format!(
            "PRAGMA page_size = 1024; PRAGMA auto_vacuum = {auto_vacuum}; PRAGMA cache_size = 20;
             CREATE TABLE kv (k INTEGER PRIMARY KEY, v BLOB NOT NULL);"
        ))
        .unwrap();
        let mut model = BTreeMap::new();
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        churn(&mut conn, &mut model, &mut rng, 150, 8_000);
        let pages: i64 = conn.query_row("PRAGMA page_count", (), |r| r.get(0)).unwrap();
        assert!(pages > 60, "{name}: the database ({pages} pages) is over three times the 20-page cache");
        // Resizing the cache, releasing its memory and rebuilding the file all keep the data.
        conn.execute_batch("PRAGMA cache_size = 5").unwrap();
        churn(&mut conn, &mut model, &mut rng, 50, 4_000);
        conn.execute_batch("PRAGMA shrink_memory; PRAGMA cache_size = 2000").unwrap();
        churn(&mut conn, &mut model, &mut rng, 50, 4_000);
        conn.execute_batch("VACUUM").unwrap();
        check(&conn, &model, &format!("{name}: after VACUUM"));
        // Deleting most rows shrinks an auto-vacuumed file: its commits move pages and truncate.
        conn.execute("DELETE FROM kv WHERE k % 7 != 0", ()).unwrap();
        model.retain(|k, _| k % 7 == 0);
        check(&conn, &model, &format!("{name}: after the large delete"));
        drop(conn);
        // What reached the file is what the model holds.
        let conn = Connection::open(&path).unwrap();
        check(&conn, &model, &format!("{name}: reopened"));
        drop(conn);
        let _ = std::fs::remove_file(&path);
    }
    assert!(stablebench_pragmas::pcache::caches_created() > before, "the connections used this page cache");
}

#[test]
fn in_memory_and_temporary_databases() {
    installed();
    let before = stablebench_pragmas::pcache::caches_created();
    let mut conn = Connection::open_in_memory().unwrap();
    conn.execute_batch("PRAGMA cache_size = 10; CREATE TABLE kv (k INTEGER PRIMARY KEY, v BLOB NOT NULL);").unwrap();
    let mut model = BTreeMap::new();
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    // An in-memory database lives in its cache alone: nothing may be evicted whatever cache_size says.
    churn(&mut conn, &mut model, &mut rng, 100, 3_000);
    check(&conn, &model, "in memory");
    // A sort and a temporary table spill through temporary caches.
    conn.execute_batch("PRAGMA temp_store = MEMORY; CREATE TEMP TABLE t AS SELECT k, v FROM kv ORDER BY v, k").unwrap();
    let mut by_value: Vec<(i64, Vec<u8>)> = model.iter().map(|(k, v)| (*k, v.clone())).collect();
    by_value.sort_by(|a, b| (&a.1, a.0).cmp(&(&b.1, b.0)));
    let sorted: Vec<(i64, Vec<u8>)> = conn
        .prepare("SELECT k, v FROM t ORDER BY v, k")
        .unwrap()
        .query_map((), |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(sorted, by_value);
    assert!(
        stablebench_pragmas::pcache::caches_created() >= before + 2,
        "the main and temporary databases each had one"
    );
}
