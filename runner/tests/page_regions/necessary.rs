//! The pages each structure must touch for one call, computed natively from the structure for
//! the same keys, in the same order, after the same load as the canister's calls
//! (`page_regions.rs`), so that a call reads as floor + necessary + avoidable:
//! - **`StableBTreeMap`**: the 64 KiB pages of its memory that its own reads and writes touch,
//!   counted exactly over a traced `VectorMemory`. They are the canister's pages: the
//!   `MemoryManager` maps whole Wasm pages (a bucket is a run of them), so distinct pages of the
//!   map's memory are distinct pages of stable memory.
//! - **SQLite**: the database pages the statement visits (page 1, which every transaction reads,
//!   and each B-tree path, whose length `dbstat` gives), one heap page each (the page cache
//!   holds them); for a write also the pages its commit changes (the database file compared
//!   before and after), written in the heap (the cached copy) and in the file's 64 KiB pages of
//!   stable memory they lie in (ic-rusqlite and ic-sqlite-vfs keep the file's bytes in order in
//!   one memory). The rollback journal's writes are not counted.
//! - **The heap map**: its B-tree path, at least the levels 200,000 keys take at eleven keys a
//!   node (`std`'s `BTreeMap` does not show its height), and the value, one heap page each.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::rc::Rc;

use ic_stable_structures::{Memory, VectorMemory};
use rusqlite::Connection;
use stablebench::kv::gen::TrieDataset;
use stablebench::kv::sqlite::{self, Layout, SqliteKv};
use stablebench::kv::stable::StableKv;
use stablebench::kv::{trie, KvStore};
use stablebench_grid::cells::Backend;
use stablebench_grid::ic::WASM_PAGE_BYTES;
use stablebench_grid::profiles::{Profile, DEFAULT, VFS_DEFAULT};
use stablebench_report::page_regions::{Necessary, Split};

/// Entries per load transaction: the ic-rusqlite canister's `kv_load` chunk and the
/// ic-sqlite-vfs canister's (`vfs/src/lib.rs`).
const LOAD_CHUNK: usize = 500;
const VFS_LOAD_CHUNK: usize = 10_000;

/// Keys and children of a full node of `std`'s `BTreeMap` (its `CAPACITY`, `2 * B - 1` with
/// `B = 6`).
const STD_NODE_KEYS: u64 = 11;

/// The necessary pages of each measured call, by call name: `kv_put` of write entries
/// `1..=calls`, then `kv_get` of query keys `1..=calls`, each after entry 0 not measured, as the
/// canister is called.
pub fn of(backend: Backend, data: &TrieDataset, calls: u64) -> BTreeMap<String, Vec<Necessary>> {
    match backend {
        Backend::StableBTreeMap => stable_btreemap(data, calls),
        Backend::HeapBTreeMap => heap_btreemap(data, calls),
        Backend::Sqlite => sqlite_kv(backend, Layout::WithoutRowid, DEFAULT, LOAD_CHUNK, data, calls),
        Backend::SqliteRowid => sqlite_kv(backend, Layout::Rowid, DEFAULT, LOAD_CHUNK, data, calls),
        Backend::SqliteVfsRowid => sqlite_kv(backend, Layout::Rowid, VFS_DEFAULT, VFS_LOAD_CHUNK, data, calls),
        other => panic!("{other:?}: no key-value structure"),
    }
}

/// Runs `put` for each write entry and then `get` for each query key, keeping the measured ones.
fn calls_of(
    data: &TrieDataset,
    calls: u64,
    mut put: impl FnMut(&[u8; 32], &[u8]) -> Necessary,
    mut get: impl FnMut(&[u8; 32]) -> Necessary,
) -> BTreeMap<String, Vec<Necessary>> {
    let queries = data.query_keys();
    let puts = (0..=calls).map(|i| {
        let (key, value) = data.write_entry(i);
        put(&key, &value)
    });
    let puts: Vec<Necessary> = puts.collect::<Vec<_>>().into_iter().skip(1).collect();
    let gets: Vec<Necessary> = (0..=calls as usize).map(|i| get(&queries[i].0)).skip(1).collect();
    BTreeMap::from([("kv_put".to_string(), puts), ("kv_get".to_string(), gets)])
}

/// A `VectorMemory` that records the 64 KiB pages read and written since it was last taken.
#[derive(Clone, Default)]
struct Traced {
    memory: VectorMemory,
    pages: Rc<RefCell<(BTreeSet<u64>, BTreeSet<u64>)>>,
}

impl Traced {
    fn touch(&self, offset: u64, len: usize, write: bool) {
        if len == 0 {
            return;
        }
        let (accessed, written) = &mut *self.pages.borrow_mut();
        for page in offset / WASM_PAGE_BYTES..=(offset + len as u64 - 1) / WASM_PAGE_BYTES {
            accessed.insert(page);
            if write {
                written.insert(page);
            }
        }
    }

    fn take(&self) -> Split {
        let (accessed, written) = std::mem::take(&mut *self.pages.borrow_mut());
        Split { accessed: accessed.len() as u64, written: written.len() as u64 }
    }
}

impl Memory for Traced {
    fn size(&self) -> u64 {
        self.memory.size()
    }

    fn grow(&self, pages: u64) -> i64 {
        self.memory.grow(pages)
    }

    fn read(&self, offset: u64, dst: &mut [u8]) {
        self.touch(offset, dst.len(), false);
        self.memory.read(offset, dst)
    }

    fn write(&self, offset: u64, src: &[u8]) {
        self.touch(offset, src.len(), true);
        self.memory.write(offset, src)
    }
}

fn stable_btreemap(data: &TrieDataset, calls: u64) -> BTreeMap<String, Vec<Necessary>> {
    let memory = Traced::default();
    let kv = RefCell::new(StableKv::new(memory.clone()));
    trie::load(&mut *kv.borrow_mut(), data, 0..data.size, LOAD_CHUNK).expect("loads");
    let traced = |what: &str| {
        let stable = memory.take();
        Necessary { what: format!("{what} its memory's pages (traced)"), heap: Split::default(), stable }
    };
    calls_of(
        data,
        calls,
        |key, value| {
            memory.take();
            kv.borrow_mut().put(key, value).expect("put");
            traced("the nodes it reads and writes:")
        },
        |key| {
            memory.take();
            assert!(kv.borrow_mut().get(key).expect("get").is_some(), "a stored key");
            traced("the nodes it reads:")
        },
    )
}

/// The fewest levels a `std` `BTreeMap` of `n` keys can have: a tree of `l` levels of full nodes
/// holds `(STD_NODE_KEYS + 1)^l - 1` keys.
fn std_btree_levels(n: u64) -> u64 {
    let (mut levels, mut holds) = (1, STD_NODE_KEYS);
    while holds < n {
        levels += 1;
        holds = holds * (STD_NODE_KEYS + 1) + STD_NODE_KEYS;
    }
    levels
}

fn heap_btreemap(data: &TrieDataset, calls: u64) -> BTreeMap<String, Vec<Necessary>> {
    let keys = RefCell::new(data.len());
    let path = |keys: u64| std_btree_levels(keys);
    calls_of(
        data,
        calls,
        |_, _| {
            let levels = path(*keys.borrow());
            *keys.borrow_mut() += 1;
            Necessary {
                what: format!("a path of at least {levels} nodes, the leaf written"),
                heap: Split { accessed: levels, written: 1 },
                stable: Split::default(),
            }
        },
        |_| {
            let levels = path(*keys.borrow());
            Necessary {
                what: format!("a path of at least {levels} nodes and the value"),
                heap: Split { accessed: levels + 1, written: 0 },
                stable: Split::default(),
            }
        },
    )
}

/// The database pages a statement fetched since the last call (page cache hits and misses;
/// `sqlite3_db_status`, reset each time).
fn fetches(conn: &Connection) -> u64 {
    use rusqlite::ffi;
    [ffi::SQLITE_DBSTATUS_CACHE_HIT, ffi::SQLITE_DBSTATUS_CACHE_MISS]
        .into_iter()
        .map(|op| {
            let (mut current, mut highest) = (0, 0);
            // SAFETY: a valid open connection; the two out-pointers are live locals.
            let rc = unsafe { ffi::sqlite3_db_status(conn.handle(), op, &mut current, &mut highest, 1) };
            assert_eq!(rc, ffi::SQLITE_OK, "sqlite3_db_status");
            current as u64
        })
        .sum()
}

/// The levels of the B-tree `name` (a table or an index), from `dbstat`: a page's path is `/` for
/// the root and four characters more per level.
pub fn depth(conn: &Connection, name: &str) -> u64 {
    conn.query_row(
        "SELECT max((length(path) - 1) / 4 + 1) FROM dbstat WHERE name = ?1 AND pagetype != 'overflow'",
        [name],
        |r| r.get::<_, i64>(0),
    )
    .expect("dbstat") as u64
}

/// The database pages (numbered from 1) that differ between two images of the file.
pub fn changed(before: &[u8], after: &[u8], page_size: usize) -> Vec<u64> {
    fn page(b: &[u8], p: usize, size: usize) -> &[u8] {
        b.get(p * size..((p + 1) * size).min(b.len())).unwrap_or(&[])
    }
    let pages = before.len().max(after.len()).div_ceil(page_size);
    (0..pages).filter(|&p| page(before, p, page_size) != page(after, p, page_size)).map(|p| p as u64 + 1).collect()
}

fn sqlite_kv(
    backend: Backend,
    layout: Layout,
    profile: Profile,
    chunk: usize,
    data: &TrieDataset,
    calls: u64,
) -> BTreeMap<String, Vec<Necessary>> {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("necessary_{}.db", backend.name()));
    for suffix in ["", "-journal"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    let conn = Connection::open(&path).expect("opens");
    stablebench_pragmas::apply(&conn, profile.pragmas).expect("the profile applies");
    sqlite::create(&conn, layout).expect("creates");
    sqlite::prepare(&conn, layout).expect("prepares");
    trie::load(&mut SqliteKv::new(&conn, layout), data, 0..data.size, chunk).expect("loads");
    let page_size = conn.query_row("PRAGMA page_size", [], |r| r.get::<_, i64>(0)).unwrap() as u64;
    let trees: Vec<(&str, u64)> = match layout {
        Layout::WithoutRowid => vec![("the", depth(&conn, layout.table()))],
        Layout::Rowid => vec![
            ("the index's", depth(&conn, "sqlite_autoindex_kv_rowid_1")),
            ("the table's", depth(&conn, layout.table())),
        ],
    };
    let visited = 1 + trees.iter().map(|t| t.1).sum::<u64>();
    let paths = trees.iter().map(|(whose, d)| format!("{whose} {d}-page path")).collect::<Vec<_>>().join(" and ");
    let conn = RefCell::new(conn);
    let file = || std::fs::read(&path).expect("the database file");
    calls_of(
        data,
        calls,
        |key, value| {
            let before = file();
            fetches(&conn.borrow());
            SqliteKv::new(&conn.borrow(), layout).put(key, value).expect("put");
            let fetched = fetches(&conn.borrow());
            assert!(fetched >= visited, "{backend:?}: a put fetches page 1 and its paths ({fetched} < {visited})");
            let pages = changed(&before, &file(), page_size as usize);
            let in_file: BTreeSet<u64> = pages.iter().map(|p| (p - 1) * page_size / WASM_PAGE_BYTES).collect();
            let n = pages.len() as u64;
            Necessary {
                what: format!("page 1 and {paths}; {n} changed, in {} 64 KiB file pages", in_file.len()),
                heap: Split { accessed: visited.max(n), written: n },
                stable: Split { accessed: in_file.len() as u64, written: in_file.len() as u64 },
            }
        },
        |key| {
            fetches(&conn.borrow());
            assert!(SqliteKv::new(&conn.borrow(), layout).get(key).expect("get").is_some(), "a stored key");
            let fetched = fetches(&conn.borrow());
            assert_eq!(fetched, visited, "{backend:?}: a lookup fetches page 1 and its paths, once each");
            Necessary {
                what: format!("page 1 and {paths}"),
                heap: Split { accessed: visited, written: 0 },
                stable: Split::default(),
            }
        },
    )
}
