//! The key-value backends against a `BTreeMap` model: generated operation sequences (from a small
//! key space, so overwrites, duplicate keys within a batch and removals of present keys are
//! common) applied to a backend and to the model, with the same answer required after every
//! operation and the same contents at the end; then the upgrade path of each backend (reopening
//! the SQLite file, re-`init`ing the stable map, saving and loading the heap map) and the
//! transaction and error behaviour the workloads rely on.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use ic_stable_structures::{Memory, VectorMemory};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use rusqlite::Connection;
use stablebench::kv::heap::{self, HeapKv};
use stablebench::kv::sqlite::{self, Layout, SqliteKv};
use stablebench::kv::stable::StableKv;
use stablebench::kv::{Key, KvStore};
use stablebench::pragma::{self, Apply};
use stablebench::{Error, Result};

type Model = BTreeMap<Key, Vec<u8>>;

/// Number of distinct keys the generated operations use: small, so that keys collide.
const KEY_SPACE: u8 = 12;

/// Key number `id`. Half the keys share a 31-byte prefix, so comparisons run to the last byte;
/// the others differ in the first.
fn key(id: u8) -> Key {
    if id.is_multiple_of(2) {
        let mut k = [0x5a; 32];
        k[31] = id;
        k
    } else {
        [id; 32]
    }
}

fn all_keys() -> impl Iterator<Item = Key> {
    (0..KEY_SPACE).map(key)
}

#[derive(Clone, Debug)]
enum Op {
    Get(u8),
    Put(u8, Vec<u8>),
    PutBatch(Vec<(u8, Vec<u8>)>),
    Remove(u8),
    Len,
    DropCaches,
}

/// Mostly small values, some of several KiB: bigger than a SQLite page (overflow pages) and than
/// a stable B-tree node's inline space (unbounded values in chunks).
fn value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        6 => prop::collection::vec(any::<u8>(), 0..48),
        1 => prop::collection::vec(any::<u8>(), 1000..6000),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let id = 0..KEY_SPACE;
    prop_oneof![
        4 => id.clone().prop_map(Op::Get),
        5 => (id.clone(), value()).prop_map(|(k, v)| Op::Put(k, v)),
        // Up to 8 items from 12 keys: duplicates within a batch are frequent.
        2 => prop::collection::vec((id.clone(), value()), 0..8).prop_map(Op::PutBatch),
        3 => id.prop_map(Op::Remove),
        1 => Just(Op::Len),
        1 => Just(Op::DropCaches),
    ]
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(op(), 0..64)
}

/// Taken shared by every `drop_caches` in these tests and exclusively by the tests that measure
/// page caches. SQLite as rusqlite `bundled` builds it (`SQLITE_ENABLE_MEMORY_MANAGEMENT`, as
/// ic-rusqlite's precompiled library) keeps the pages of all connections of a process in one LRU,
/// so `sqlite3_db_release_memory` on any file connection empties every file connection's cache,
/// including those of tests running at the same time on other threads.
static PAGE_CACHES: RwLock<()> = RwLock::new(());

fn caches_shared() -> RwLockReadGuard<'static, ()> {
    PAGE_CACHES.read().unwrap_or_else(|e| e.into_inner())
}

fn caches_exclusive() -> RwLockWriteGuard<'static, ()> {
    PAGE_CACHES.write().unwrap_or_else(|e| e.into_inner())
}

/// `store.drop_caches()` while no test measures page caches.
fn drop_caches(store: &mut (impl KvStore + ?Sized)) -> Result<()> {
    let _shared = caches_shared();
    store.drop_caches()
}

/// A store error as a failed test case (proptest then shrinks the sequence).
fn ok<T>(r: Result<T>) -> std::result::Result<T, TestCaseError> {
    r.map_err(|e| TestCaseError::fail(format!("store error: {e}")))
}

/// Applies `ops` to `store` and `model`, checking every answer against the model's.
fn run(store: &mut impl KvStore, model: &mut Model, ops: &[Op]) -> std::result::Result<(), TestCaseError> {
    for (i, op) in ops.iter().enumerate() {
        match op {
            Op::Get(id) => {
                prop_assert_eq!(ok(store.get(&key(*id)))?, model.get(&key(*id)).cloned(), "op {}: {:?}", i, op)
            }
            Op::Put(id, v) => {
                ok(store.put(&key(*id), v))?;
                model.insert(key(*id), v.clone());
            }
            Op::PutBatch(items) => {
                let items: Vec<(Key, Vec<u8>)> = items.iter().map(|(id, v)| (key(*id), v.clone())).collect();
                ok(store.put_batch(&items))?;
                model.extend(items);
            }
            Op::Remove(id) => {
                prop_assert_eq!(ok(store.remove(&key(*id)))?, model.remove(&key(*id)).is_some(), "op {}: {:?}", i, op)
            }
            Op::Len => prop_assert_eq!(ok(store.len())?, model.len() as u64, "op {}", i),
            Op::DropCaches => ok(drop_caches(store))?,
        }
    }
    check_through_trait(store, model)
}

/// The full contents as far as the trait can see them: every key of the key space and the count.
fn check_through_trait(store: &mut impl KvStore, model: &Model) -> std::result::Result<(), TestCaseError> {
    for k in all_keys() {
        prop_assert_eq!(ok(store.get(&k))?, model.get(&k).cloned(), "key {:02x?}", &k[..]);
    }
    prop_assert_eq!(ok(store.len())?, model.len() as u64);
    prop_assert_eq!(ok(store.is_empty())?, model.is_empty());
    Ok(())
}

/// Every row of a SQLite layout's table, in key order.
fn sqlite_contents(conn: &Connection, layout: Layout) -> Result<Model> {
    let mut stmt = conn.prepare(&format!("SELECT key, value FROM {} ORDER BY key", layout.table()))?;
    let rows = stmt.query_map([], |r| Ok((r.get::<_, Key>(0)?, r.get::<_, Vec<u8>>(1)?)))?;
    Ok(rows.collect::<rusqlite::Result<Model>>()?)
}

fn stable_contents<M: Memory>(store: &StableKv<M>) -> Model {
    store.map().iter().map(|e| (*e.key(), e.value())).collect()
}

/// A database file in the temporary directory, removed when dropped.
struct TempDb {
    path: PathBuf,
}

impl TempDb {
    fn new() -> TempDb {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        // tmpfs when there is one: every autocommit put ends in an fsync (synchronous NORMAL),
        // which on a disk made the two file proptests take 9 s each instead of well under one.
        let shm = std::path::Path::new("/dev/shm");
        let dir = if shm.is_dir() { shm.to_path_buf() } else { std::env::temp_dir() };
        let path = dir.join(format!("stablebench-kv-model-{}-{n}.db", std::process::id()));
        let _ = std::fs::remove_file(&path);
        TempDb { path }
    }

    /// Opens the file with the recommended profile and both layouts' tables, as the canister
    /// does on install and after every upgrade.
    fn open(&self) -> Result<Connection> {
        prepared(Connection::open(&self.path)?, pragma::DEFAULT)
    }
}

impl Drop for TempDb {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// A `:memory:` database with the key-value workloads' profile (`journal_memory_temp_file`) and
/// both tables: an in-memory database keeps its rollback journal in memory whatever
/// `journal_mode` asks, so the recommended profile's PERSIST cannot take (`apply` refuses it).
fn open_in_memory() -> Result<Connection> {
    prepared(Connection::open_in_memory()?, pragma::WORKLOADS)
}

/// `conn` under `profile` with both layouts' tables.
fn prepared(conn: Connection, profile: pragma::Profile) -> Result<Connection> {
    profile.apply(&conn)?;
    for layout in Layout::ALL {
        sqlite::create(&conn, layout)?;
    }
    Ok(conn)
}

/// Runs `ops1`, closes and reopens the file (the upgrade), checks the contents, runs `ops2`.
fn sqlite_file_case(layout: Layout, ops1: &[Op], ops2: &[Op]) -> std::result::Result<(), TestCaseError> {
    let db = TempDb::new();
    let mut model = Model::new();
    {
        let conn = ok(db.open())?;
        run(&mut SqliteKv::new(&conn, layout), &mut model, ops1)?;
        prop_assert_eq!(&ok(sqlite_contents(&conn, layout))?, &model);
    }
    let conn = ok(db.open())?;
    let mut store = SqliteKv::new(&conn, layout);
    check_through_trait(&mut store, &model)?;
    run(&mut store, &mut model, ops2)?;
    prop_assert_eq!(&ok(sqlite_contents(&conn, layout))?, &model);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn sqlite_without_rowid_file_matches_the_model_across_a_reopen(ops1 in ops(), ops2 in ops()) {
        sqlite_file_case(Layout::WithoutRowid, &ops1, &ops2)?;
    }

    #[test]
    fn sqlite_rowid_file_matches_the_model_across_a_reopen(ops1 in ops(), ops2 in ops()) {
        sqlite_file_case(Layout::Rowid, &ops1, &ops2)?;
    }

    /// Both layouts in one `:memory:` database (the `memory` profile's storage), each with its
    /// own model: the two tables must not see each other's writes.
    #[test]
    fn sqlite_in_memory_matches_the_model_in_both_layouts(ops_a in ops(), ops_b in ops()) {
        let conn = ok(open_in_memory())?;
        let (mut model_a, mut model_b) = (Model::new(), Model::new());
        run(&mut SqliteKv::new(&conn, Layout::WithoutRowid), &mut model_a, &ops_a)?;
        run(&mut SqliteKv::new(&conn, Layout::Rowid), &mut model_b, &ops_b)?;
        prop_assert_eq!(&ok(sqlite_contents(&conn, Layout::WithoutRowid))?, &model_a);
        prop_assert_eq!(&ok(sqlite_contents(&conn, Layout::Rowid))?, &model_b);
    }

    /// `ops1`, then a new `StableKv::init` on the same memory (the upgrade), then `ops2`.
    #[test]
    fn stable_btreemap_matches_the_model_across_a_reinit(ops1 in ops(), ops2 in ops()) {
        let memory = VectorMemory::default();
        let mut model = Model::new();
        let mut store = StableKv::init(memory.clone());
        run(&mut store, &mut model, &ops1)?;
        prop_assert_eq!(&stable_contents(&store), &model);
        drop(store);
        let mut store = StableKv::init(memory.clone());
        prop_assert_eq!(&stable_contents(&store), &model);
        run(&mut store, &mut model, &ops2)?;
        prop_assert_eq!(&stable_contents(&store), &model);
    }

    /// `ops1`, save and load (an upgrade), `ops2` on the loaded map, save again into the same
    /// memory (over the first, possibly longer, image) and load.
    #[test]
    fn heap_map_matches_the_model_across_save_and_load(ops1 in ops(), ops2 in ops()) {
        let memory = VectorMemory::default();
        let mut model = Model::new();
        let mut store = HeapKv::new();
        run(&mut store, &mut model, &ops1)?;
        prop_assert_eq!(store.map(), &model);
        let written = ok(store.save(&memory))?;
        prop_assert_eq!(written, store.saved_len());
        let mut store = ok(HeapKv::load(&memory))?;
        prop_assert_eq!(store.map(), &model);
        run(&mut store, &mut model, &ops2)?;
        ok(store.save(&memory))?;
        let loaded = ok(HeapKv::load(&memory))?;
        prop_assert_eq!(loaded.map(), &model);
        prop_assert_eq!(loaded, store);
    }

    /// Any byte of a saved image overwritten, or the image cut short: `load` answers, with the
    /// map or an error, and never traps.
    #[test]
    fn heap_load_never_panics_on_a_damaged_image(
        ops in ops(),
        damage in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
        cut in any::<prop::sample::Index>(),
        truncate in any::<bool>(),
    ) {
        let mut store = HeapKv::new();
        run(&mut store, &mut Model::new(), &ops)?;
        let memory = VectorMemory::default();
        let len = ok(store.save(&memory))? as usize;
        {
            let mut bytes = memory.borrow_mut();
            for (at, byte) in &damage {
                let at = at.index(len);
                bytes[at] = *byte;
            }
            if truncate {
                // Keep whole 64 KiB pages, as a Memory has; zero the rest of the image.
                let from = cut.index(len);
                bytes[from..].fill(0);
            }
        }
        match HeapKv::load(&memory) {
            Ok(_) => {}
            Err(Error::InvalidArgument(m)) => prop_assert!(m.contains("no saved heap map"), "{}", m),
            Err(e) => prop_assert!(false, "unexpected error {}", e),
        }
    }
}

/// Runs `f` on a fresh instance of every backend: both SQLite layouts in a file and in memory,
/// the stable map and the heap map.
fn for_each_backend(mut f: impl FnMut(&str, &mut dyn KvStore) -> Result<()>) -> Result<()> {
    let db = TempDb::new();
    let file = db.open()?;
    let mem = open_in_memory()?;
    for layout in Layout::ALL {
        f(&format!("sqlite file {}", layout.name()), &mut SqliteKv::new(&file, layout))?;
        f(&format!("sqlite :memory: {}", layout.name()), &mut SqliteKv::new(&mem, layout))?;
    }
    f("stable", &mut StableKv::init(VectorMemory::default()))?;
    f("heap", &mut HeapKv::new())
}

/// A deterministic key for `i` (no collisions for distinct `i`).
fn numbered_key(i: u32) -> Key {
    let mut k = [0u8; 32];
    k[..4].copy_from_slice(&i.wrapping_mul(0x9e37_79b9).to_be_bytes());
    k[28..].copy_from_slice(&i.to_le_bytes());
    k
}

/// A deterministic value of `len` bytes for `i`.
fn numbered_value(i: u32, len: usize) -> Vec<u8> {
    (0..len).map(|j| (i as usize * 31 + j) as u8).collect()
}

#[test]
fn put_batch_with_duplicate_keys_keeps_the_last_value() -> Result<()> {
    for_each_backend(|name, store| {
        store.put(&key(1), b"before")?;
        store.put_batch(&[
            (key(1), b"first".to_vec()),
            (key(2), b"a".to_vec()),
            (key(1), b"second".to_vec()),
            (key(2), b"b".to_vec()),
            (key(1), b"last".to_vec()),
        ])?;
        assert_eq!(store.get(&key(1))?.as_deref(), Some(&b"last"[..]), "{name}");
        assert_eq!(store.get(&key(2))?.as_deref(), Some(&b"b"[..]), "{name}");
        assert_eq!(store.len()?, 2, "{name}");
        store.put_batch(&[])?;
        assert_eq!(store.len()?, 2, "{name}");
        Ok(())
    })
}

#[test]
fn empty_values_are_values_and_remove_reports_presence() -> Result<()> {
    for_each_backend(|name, store| {
        assert!(store.is_empty()?, "{name}");
        store.put(&key(3), b"")?;
        assert_eq!(store.get(&key(3))?, Some(Vec::new()), "{name}");
        assert!(!store.is_empty()?, "{name}");
        assert!(store.remove(&key(3))?, "{name}");
        assert!(!store.remove(&key(3))?, "{name}");
        assert_eq!(store.get(&key(3))?, None, "{name}");
        Ok(())
    })
}

#[test]
fn drop_caches_keeps_every_value() -> Result<()> {
    const N: u32 = 3000;
    for_each_backend(|name, store| {
        // About 1.5 MB over a few hundred SQLite pages, in batches and single puts.
        let items: Vec<(Key, Vec<u8>)> =
            (0..N).map(|i| (numbered_key(i), numbered_value(i, 200 + (i % 600) as usize))).collect();
        for chunk in items.chunks(500) {
            store.put_batch(chunk)?;
        }
        store.put(&numbered_key(7), b"overwritten")?;
        drop_caches(store)?;
        assert_eq!(store.len()?, N as u64, "{name}");
        for (i, (k, v)) in items.iter().enumerate() {
            let expected = if i == 7 { &b"overwritten"[..] } else { v.as_slice() };
            assert_eq!(store.get(k)?.as_deref(), Some(expected), "{name}: key {i}");
        }
        drop_caches(store)?;
        assert!(store.remove(&numbered_key(0))?, "{name}");
        drop_caches(store)?;
        assert_eq!(store.get(&numbered_key(0))?, None, "{name}");
        assert_eq!(store.len()?, N as u64 - 1, "{name}");
        Ok(())
    })
}

/// Bytes of heap held by the connection's page cache (`SQLITE_DBSTATUS_CACHE_USED`).
fn page_cache_bytes(conn: &Connection) -> i64 {
    let (mut current, mut highwater) = (0, 0);
    // SAFETY: the handle is live for the borrow of `conn`, and sqlite3_db_status only writes the
    // two integers it is given.
    let rc = unsafe {
        rusqlite::ffi::sqlite3_db_status(
            conn.handle(),
            rusqlite::ffi::SQLITE_DBSTATUS_CACHE_USED,
            &mut current,
            &mut highwater,
            0,
        )
    };
    assert_eq!(rc, rusqlite::ffi::SQLITE_OK);
    current as i64
}

/// What "cold" means for each SQLite storage: `drop_caches` empties the page cache of a file
/// database (the next reads go to the file), while a `:memory:` database keeps every page, since
/// the cache is its only copy of the data.
#[test]
fn drop_caches_empties_the_page_cache_of_a_file_database_but_not_of_memory() -> Result<()> {
    let _exclusive = caches_exclusive();
    let db = TempDb::new();
    let file = db.open()?;
    let mem = open_in_memory()?;
    for conn in [&file, &mem] {
        let items: Vec<(Key, Vec<u8>)> = (0..2000).map(|i| (numbered_key(i), numbered_value(i, 500))).collect();
        SqliteKv::new(conn, Layout::WithoutRowid).put_batch(&items)?;
    }
    let (file_warm, mem_warm) = (page_cache_bytes(&file), page_cache_bytes(&mem));
    // 2000 values of 500 bytes: at least 1 MB of pages in either cache.
    assert!(file_warm > 1_000_000 && mem_warm > 1_000_000, "warm: file {file_warm}, memory {mem_warm}");
    SqliteKv::new(&file, Layout::WithoutRowid).drop_caches()?;
    SqliteKv::new(&mem, Layout::WithoutRowid).drop_caches()?;
    let (file_cold, mem_cold) = (page_cache_bytes(&file), page_cache_bytes(&mem));
    assert!(file_cold < file_warm / 20, "file: {file_warm} bytes before, {file_cold} after");
    assert!(mem_cold >= mem_warm * 9 / 10, ":memory:: {mem_warm} bytes before, {mem_cold} after");
    // And the file's cache fills again from the file as it is read.
    let mut store = SqliteKv::new(&file, Layout::WithoutRowid);
    assert_eq!(store.get(&numbered_key(5))?, Some(numbered_value(5, 500)));
    assert!(page_cache_bytes(&file) > file_cold);
    Ok(())
}

/// The surprise behind [`PAGE_CACHES`]: `drop_caches` on one file connection also empties the
/// page cache of another connection to another file. In a canister, with its one connection,
/// this changes nothing; natively, "cold" means cold for the whole process.
#[test]
fn drop_caches_on_one_connection_empties_the_page_cache_of_every_file_connection() -> Result<()> {
    let _exclusive = caches_exclusive();
    let (db_a, db_b) = (TempDb::new(), TempDb::new());
    let (a, b) = (db_a.open()?, db_b.open()?);
    let items: Vec<(Key, Vec<u8>)> = (0..1000).map(|i| (numbered_key(i), numbered_value(i, 500))).collect();
    SqliteKv::new(&a, Layout::WithoutRowid).put_batch(&items)?;
    SqliteKv::new(&b, Layout::Rowid).put_batch(&items)?;
    let b_warm = page_cache_bytes(&b);
    assert!(b_warm > 500_000, "{b_warm}");
    SqliteKv::new(&a, Layout::WithoutRowid).drop_caches()?;
    let b_after = page_cache_bytes(&b);
    assert!(b_after < b_warm / 20, "b: {b_warm} bytes before a's drop_caches, {b_after} after");
    assert_eq!(SqliteKv::new(&b, Layout::Rowid).get(&numbered_key(9))?, Some(numbered_value(9, 500)));
    Ok(())
}

#[test]
fn put_batch_is_one_transaction_and_a_failure_leaves_nothing() -> Result<()> {
    let db = TempDb::new();
    let conn = db.open()?;
    let poison = key(9);
    for layout in Layout::ALL {
        // The trigger refuses one key, so the batch fails on its third item.
        conn.execute_batch(&format!(
            "CREATE TRIGGER refuse_{name} BEFORE INSERT ON {table} WHEN NEW.key = X'{hex}' \
             BEGIN SELECT RAISE(ABORT, 'refused key'); END",
            name = layout.name(),
            table = layout.table(),
            hex = poison.iter().map(|b| format!("{b:02x}")).collect::<String>(),
        ))?;
        let mut store = SqliteKv::new(&conn, layout);
        store.put(&key(1), b"old")?;
        let batch = [
            (key(1), b"new".to_vec()),
            (key(2), b"two".to_vec()),
            (poison, b"x".to_vec()),
            (key(3), b"three".to_vec()),
        ];
        match store.put_batch(&batch) {
            Err(Error::Sqlite(e)) => assert!(e.to_string().contains("refused key"), "{e}"),
            other => panic!("{layout:?}: expected the trigger's error, got {other:?}"),
        }
        // Nothing of the batch: not the overwrite before the failure, not the insert after it.
        assert_eq!(store.get(&key(1))?.as_deref(), Some(&b"old"[..]), "{layout:?}");
        assert_eq!(store.get(&key(2))?, None, "{layout:?}");
        assert_eq!(store.get(&key(3))?, None, "{layout:?}");
        assert_eq!(store.len()?, 1, "{layout:?}");
        // The transaction was rolled back, not left open: autocommit again, and the next batch
        // commits on its own.
        assert!(conn.is_autocommit());
        store.put_batch(&batch[..2])?;
        assert_eq!(
            sqlite_contents(&conn, layout)?,
            Model::from([(key(1), b"new".to_vec()), (key(2), b"two".to_vec())])
        );
    }
    // Committed means durable: a new connection to the file sees the batches.
    drop(conn);
    let conn = db.open()?;
    for layout in Layout::ALL {
        assert_eq!(SqliteKv::new(&conn, layout).len()?, 2, "{layout:?}");
    }
    Ok(())
}

#[test]
fn put_batch_inside_an_open_transaction_is_refused() -> Result<()> {
    let conn = open_in_memory()?;
    conn.execute_batch("BEGIN")?;
    let mut store = SqliteKv::new(&conn, Layout::WithoutRowid);
    assert!(matches!(store.put_batch(&[(key(1), vec![1])]), Err(Error::Sqlite(_))));
    conn.execute_batch("ROLLBACK")?;
    Ok(())
}

#[test]
fn put_overwrites_in_place_keeping_the_rowid() -> Result<()> {
    let conn = open_in_memory()?;
    let mut store = SqliteKv::new(&conn, Layout::Rowid);
    store.put(&key(1), b"one")?;
    store.put(&key(2), b"two")?;
    let id =
        |k: Key| -> Result<i64> { Ok(conn.query_row("SELECT id FROM kv_rowid WHERE key = ?1", [k], |r| r.get(0))?) };
    let before = (id(key(1))?, id(key(2))?);
    store.put(&key(1), b"uno")?;
    store.put_batch(&[(key(2), b"dos".to_vec()), (key(2), b"zwei".to_vec())])?;
    assert_eq!((id(key(1))?, id(key(2))?), before);
    assert_eq!(store.get(&key(1))?.as_deref(), Some(&b"uno"[..]));
    assert_eq!(store.get(&key(2))?.as_deref(), Some(&b"zwei"[..]));
    Ok(())
}

#[test]
fn create_is_idempotent_and_keeps_the_rows() -> Result<()> {
    let conn = open_in_memory()?;
    for layout in Layout::ALL {
        SqliteKv::new(&conn, layout).put(&key(4), layout.name().as_bytes())?;
        sqlite::create(&conn, layout)?;
        assert_eq!(SqliteKv::new(&conn, layout).get(&key(4))?.as_deref(), Some(layout.name().as_bytes()));
    }
    Ok(())
}

#[test]
fn heap_load_of_a_never_written_memory_is_an_empty_map() -> Result<()> {
    let memory = VectorMemory::default();
    assert_eq!(HeapKv::load(&memory)?, HeapKv::new());
    // Saving an empty map writes just the header, which loads as an empty map too.
    assert_eq!(HeapKv::new().save(&memory)?, heap::HEADER_LEN);
    assert_eq!(HeapKv::load(&memory)?, HeapKv::new());
    Ok(())
}

#[test]
fn heap_save_writes_the_documented_format() -> Result<()> {
    let mut store = HeapKv::new();
    store.put(&key(3), b"abc")?;
    store.put(&key(0), b"")?;
    let memory = VectorMemory::default();
    let written = store.save(&memory)?;
    assert_eq!(written, 32 + (32 + 4) + (32 + 4 + 3));
    assert_eq!(memory.size(), 1);
    let bytes = memory.borrow()[..written as usize].to_vec();
    assert_eq!(&bytes[..8], b"SBKVHEAP");
    assert_eq!(bytes[8..12], 1u32.to_le_bytes());
    assert_eq!(bytes[16..24], 2u64.to_le_bytes());
    assert_eq!(bytes[24..32], (written - 32).to_le_bytes());
    // Entries in key order: key(3) = [3; 32] sorts before key(0) = [0x5a; 31] + [0].
    assert!(key(3) < key(0));
    let mut payload = Vec::new();
    payload.extend_from_slice(&key(3));
    payload.extend_from_slice(&3u32.to_le_bytes());
    payload.extend_from_slice(b"abc");
    payload.extend_from_slice(&key(0));
    payload.extend_from_slice(&0u32.to_le_bytes());
    assert_eq!(&bytes[32..], &payload[..]);
    Ok(())
}

#[test]
fn heap_save_and_load_cross_chunk_boundaries() -> Result<()> {
    // About 4 MiB of small entries (so entries straddle the 1 MiB chunks at arbitrary offsets)
    // and values of exactly one chunk and of more than two (written and read around the buffer).
    let mut store = HeapKv::new();
    for i in 0..4000 {
        store.put(&numbered_key(i), &numbered_value(i, 700 + (i % 777) as usize))?;
    }
    store.put(&[0; 32], &numbered_value(1, heap::CHUNK))?;
    store.put(&[0xff; 32], &numbered_value(2, 2 * heap::CHUNK + 12_345))?;
    let memory = VectorMemory::default();
    let written = store.save(&memory)?;
    assert_eq!(written, store.saved_len());
    assert_eq!(memory.size(), written.div_ceil(65_536));
    assert_eq!(HeapKv::load(&memory)?, store);
    // A smaller map saved over it loads as itself, not as a mix with the old image's tail.
    let mut small = HeapKv::new();
    small.put(&key(1), b"small")?;
    small.save(&memory)?;
    assert_eq!(HeapKv::load(&memory)?, small);
    Ok(())
}

/// A memory that cannot grow past its initial size (as a canister at its stable-memory limit).
struct FixedMemory(std::cell::RefCell<Vec<u8>>);

impl Memory for FixedMemory {
    fn size(&self) -> u64 {
        self.0.borrow().len() as u64 / 65_536
    }
    fn grow(&self, _pages: u64) -> i64 {
        -1
    }
    fn read(&self, offset: u64, dst: &mut [u8]) {
        dst.copy_from_slice(&self.0.borrow()[offset as usize..offset as usize + dst.len()]);
    }
    fn write(&self, offset: u64, src: &[u8]) {
        self.0.borrow_mut()[offset as usize..offset as usize + src.len()].copy_from_slice(src);
    }
}

#[test]
fn heap_save_reports_a_memory_that_cannot_grow_and_leaves_it_unchanged() -> Result<()> {
    let mut store = HeapKv::new();
    store.put(&key(1), b"first")?;
    let memory = FixedMemory(std::cell::RefCell::new(vec![0; 65_536]));
    store.save(&memory)?;
    // Now more than one page: the memory would have to grow.
    store.put(&key(2), &vec![7; 70_000])?;
    match store.save(&memory) {
        Err(Error::InvalidArgument(m)) => assert!(m.contains("could not grow"), "{m}"),
        other => panic!("expected an error, got {other:?}"),
    }
    let loaded = HeapKv::load(&memory)?;
    assert_eq!(loaded.map().len(), 1);
    assert_eq!(loaded.map().get(&key(1)).map(Vec::as_slice), Some(&b"first"[..]));
    Ok(())
}

#[test]
fn heap_load_refuses_garbage_with_an_error() -> Result<()> {
    let mut store = HeapKv::new();
    store.put(&key(1), b"one")?;
    store.put(&key(2), b"two")?;
    let good = VectorMemory::default();
    let len = store.save(&good)? as usize;
    let image = good.borrow().clone();
    // Each case: (what, how to damage the image, text the error must contain).
    type Damage = fn(&mut Vec<u8>, usize);
    let cases: [(&str, Damage, &str); 9] = [
        ("a StableBTreeMap's memory", |b, _| b[..3].copy_from_slice(b"BTR"), "magic"),
        ("zeros (grown, never written)", |b, _| b.fill(0), "magic"),
        ("a newer version", |b, _| b[8..12].copy_from_slice(&2u32.to_le_bytes()), "version 2"),
        ("a payload past the memory", |b, _| b[24..32].copy_from_slice(&u64::MAX.to_le_bytes()), "does not fit"),
        ("more entries than the payload holds", |b, _| b[16..24].copy_from_slice(&1000u64.to_le_bytes()), "cannot fit"),
        ("fewer entries than the payload holds", |b, _| b[16..24].copy_from_slice(&1u64.to_le_bytes()), "left after"),
        ("a value length past the payload", |b, _| b[64..68].copy_from_slice(&u32::MAX.to_le_bytes()), "runs past"),
        (
            "keys out of order",
            |b, len| {
                // Swap the two keys (both values are 3 bytes long).
                let (k1, k2) = (32, 32 + 39);
                let first: Vec<u8> = b[k1..k1 + 32].to_vec();
                b.copy_within(k2..k2 + 32, k1);
                b[k2..k2 + 32].copy_from_slice(&first);
                assert_eq!(len, 32 + 2 * 39);
            },
            "increasing order",
        ),
        (
            "a repeated key",
            |b, _| {
                let first: Vec<u8> = b[32..64].to_vec();
                b[71..103].copy_from_slice(&first);
            },
            "increasing order",
        ),
    ];
    for (what, damage, expected) in cases {
        let memory = VectorMemory::default();
        *memory.borrow_mut() = image.clone();
        damage(&mut memory.borrow_mut(), len);
        match HeapKv::load(&memory) {
            Err(Error::InvalidArgument(m)) => {
                assert!(m.contains(expected), "{what}: {m}");
                assert!(m.contains("no saved heap map"), "{what}: {m}");
            }
            other => panic!("{what}: expected InvalidArgument, got {other:?}"),
        }
    }
    // A live StableBTreeMap's memory is refused too, not misread.
    let stable = VectorMemory::default();
    StableKv::init(stable.clone()).put(&key(1), b"x")?;
    assert!(matches!(HeapKv::load(&stable), Err(Error::InvalidArgument(_))));
    Ok(())
}
