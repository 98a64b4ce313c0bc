//! A canister to copy whole: a table of notes in SQLite over stable memory (ic-rusqlite), opened
//! with stablebench's recommended settings exactly as the README shows, every setting read back,
//! surviving upgrades, refusing to start when a setting did not take.
//!
//! Built by `scripts/build.sh examples` (wasm32-wasip1, then wasi2ic); tested through the
//! offline runner by `runner/tests/examples.rs`; its interface is `examples/sqlite/example_sqlite.did`.
#![cfg(target_arch = "wasm32")]

// README:open:begin
use candid::{CandidType, Deserialize};
use ic_rusqlite::{close_connection, with_connection, OptionalExtension};

/// Rust's allocations in a heap of their own (the dlmalloc crate, `features = ["global"]`), away
/// from SQLite's page cache in wasi-libc's `malloc`: a message's short-lived allocations then reuse
/// a few Wasm pages instead of free chunks scattered among the cached pages, each of which
/// mainnet's memory tracker charges.
#[global_allocator]
static ALLOCATOR: dlmalloc::GlobalDlmalloc = dlmalloc::GlobalDlmalloc;

/// Install and upgrade argument: `dfx deploy --argument '(opt record { wasm_memory_limit = opt 1_073_741_824 })'`.
#[derive(CandidType, Deserialize, Default)]
pub struct InitArgs {
    /// The canister's `wasm_memory_limit` in bytes (what `dfx canister update-settings
    /// --wasm-memory-limit` set; a canister cannot read it). Default: the value given at the last
    /// install or upgrade, else the IC's 3 GiB.
    pub wasm_memory_limit: Option<u64>,
}

/// The smallest `wasm_memory_limit` accepted: below it the page cache (a quarter) is too small.
const MIN_WASM_MEMORY_LIMIT: u64 = 64 << 20;

const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY, text TEXT NOT NULL);
    CREATE TABLE IF NOT EXISTS settings (name TEXT PRIMARY KEY, value INTEGER NOT NULL)";

/// Opens the database in stable memory with the recommended settings, in their order, reads each
/// back, and bounds the page cache to a quarter of the heap limit (the one given, else the one
/// saved). Call it from init and post_upgrade: the per-connection settings are not stored in the file.
fn open(wasm_memory_limit: Option<u64>) -> Result<(), String> {
    if let Some(limit) = wasm_memory_limit.filter(|&l| l < MIN_WASM_MEMORY_LIMIT) {
        return Err(format!(
            "wasm_memory_limit {limit} is below the {MIN_WASM_MEMORY_LIMIT} bytes this canister needs"
        ));
    }
    // An empty map: ic-rusqlite would otherwise apply its own defaults from a HashMap, in no
    // fixed order (page_size could come after the first table exists).
    ic_rusqlite::set_connection_config(ic_rusqlite::ConnectionConfig {
        pragma_settings: Default::default(),
        ..Default::default()
    });
    with_connection(|conn| {
        stablebench_pragmas::apply(&conn, &stablebench_pragmas::RECOMMENDED).map_err(|e| e.to_string())?;
        let sql = |e: ic_rusqlite::Error| e.to_string();
        conn.execute_batch(SCHEMA).map_err(sql)?;
        if let Some(limit) = wasm_memory_limit {
            conn.execute("INSERT OR REPLACE INTO settings VALUES ('wasm_memory_limit', ?1)", [limit as i64])
                .map_err(sql)?;
        }
        let saved: Option<i64> = conn
            .query_row("SELECT value FROM settings WHERE name = 'wasm_memory_limit'", (), |r| r.get(0))
            .optional()
            .map_err(sql)?;
        let limit = saved.map_or(stablebench_pragmas::DEFAULT_WASM_MEMORY_LIMIT_BYTES, |l| l as u64);
        stablebench_pragmas::bound_cache(&conn, limit).map_err(sql)?;
        Ok(())
    })
}

#[ic_cdk::init]
fn init(args: Option<InitArgs>) {
    start(args);
}

#[ic_cdk::pre_upgrade]
fn pre_upgrade() {
    // Committed data is already in stable memory: release the lock and the page cache.
    close_connection();
}

#[ic_cdk::post_upgrade]
fn post_upgrade(args: Option<InitArgs>) {
    start(args);
}

/// A trap in init or post_upgrade leaves the canister as it was (an upgrade is rolled back, the
/// saved limit with it).
fn start(args: Option<InitArgs>) {
    if let Err(e) = open(args.and_then(|a| a.wasm_memory_limit)) {
        ic_cdk::trap(format!("refusing to start: {e}"));
    }
}
// README:open:end

/// The longest note accepted, bytes.
const MAX_NOTE_BYTES: usize = 1024;
/// The most notes one `add_notes` call takes.
const MAX_NOTES_PER_CALL: usize = 1000;
/// The most notes one `notes` reply holds.
const MAX_PAGE: u32 = 100;

/// A stored note.
#[derive(CandidType, Deserialize)]
pub struct Note {
    /// Its id (SQLite's rowid).
    pub id: u64,
    /// Its text.
    pub text: String,
}

/// Adds the notes in one transaction, so that all of them or none are stored, and returns their
/// ids. Controllers only. A transaction never outlives its message: with the journal in the heap
/// (journal_mode MEMORY) that is the rule that keeps COMMIT and ROLLBACK atomic.
#[ic_cdk::update]
fn add_notes(texts: Vec<String>) -> Result<Vec<u64>, String> {
    if !ic_cdk::api::is_controller(&ic_cdk::api::msg_caller()) {
        return Err("only a controller can add notes".into());
    }
    if texts.len() > MAX_NOTES_PER_CALL {
        return Err(format!("{} notes: at most {MAX_NOTES_PER_CALL} per call", texts.len()));
    }
    if let Some(i) = texts.iter().position(|t| t.is_empty() || t.len() > MAX_NOTE_BYTES) {
        return Err(format!("note {i} is empty or longer than {MAX_NOTE_BYTES} bytes; nothing was added"));
    }
    with_connection(|mut conn| {
        let tx = conn.transaction()?;
        let mut ids = Vec::with_capacity(texts.len());
        {
            let mut insert = tx.prepare_cached("INSERT INTO notes (text) VALUES (?1)")?;
            for text in &texts {
                insert.execute([text])?;
                ids.push(tx.last_insert_rowid() as u64);
            }
        }
        tx.commit()?;
        Ok(ids)
    })
    .map_err(|e: ic_rusqlite::Error| e.to_string())
}

/// Up to `limit` notes (at most 100) with ids above `after`, in id order: page by passing the
/// last id you got.
#[ic_cdk::query]
fn notes(after: Option<u64>, limit: u32) -> Result<Vec<Note>, String> {
    with_connection(|conn| {
        let mut select = conn.prepare_cached("SELECT id, text FROM notes WHERE id > ?1 ORDER BY id LIMIT ?2")?;
        let rows = select.query_map((after.unwrap_or(0) as i64, limit.min(MAX_PAGE)), |r| {
            Ok(Note { id: r.get::<_, i64>(0)? as u64, text: r.get(1)? })
        })?;
        rows.collect::<Result<Vec<_>, _>>()
    })
    .map_err(|e| e.to_string())
}

/// The settings in force, read back from SQLite, in the order they were applied: how to check in
/// production that the settings took (`dfx canister call example_sqlite pragmas`).
#[ic_cdk::query]
fn pragmas() -> Result<Vec<(String, String)>, String> {
    with_connection(|conn| {
        stablebench_pragmas::RECOMMENDED
            .iter()
            .map(|p| Ok((p.name.to_string(), stablebench_pragmas::read(&conn, p.name)?)))
            .collect::<Result<Vec<_>, ic_rusqlite::Error>>()
    })
    .map_err(|e| e.to_string())
}
