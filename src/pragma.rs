//! Pragma profiles: named, ordered SQLite settings with the reason for each value.
//!
//! Order matters, and is part of a profile:
//! 1. `page_size` first: it is written into the database header when the first table is created
//!    and is ignored afterwards (short of a VACUUM), so it must precede any schema.
//! 2. `locking_mode` before `journal_mode`: SQLite can run WAL without shared memory (which the
//!    WASI polyfill does not provide) only when EXCLUSIVE locking is set before WAL is entered
//!    (<https://sqlite.org/wal.html#noshm>).
//! 3. The per-connection settings (`synchronous`, `temp_store`, `cache_size`) last; they are not
//!    stored in the file, so they are applied again on every open (init and post_upgrade).

use rusqlite::Connection;

use crate::{Error, Result};

/// One setting of a profile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pragma {
    /// Pragma name, e.g. `journal_mode`.
    pub name: &'static str,
    /// Value as written after `PRAGMA name = `.
    pub value: &'static str,
    /// Why this value: the trade-off it makes on the IC.
    pub why: &'static str,
}

/// A named, ordered list of settings applied right after a connection is opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Profile {
    /// Profile name, used in stats and (later) in benchmark names.
    pub name: &'static str,
    /// Where the values come from.
    pub source: &'static str,
    /// The settings, in the order they are applied.
    pub pragmas: &'static [Pragma],
}

/// The settings of the reference benchmark (the seed document's pragma table), in our order.
pub const REFERENCE: Profile = Profile {
    name: "reference",
    source: "the pragma table of the ic-rusqlite users-orders benchmark (shared/seeds)",
    pragmas: &[
        Pragma {
            name: "page_size",
            value: "4096",
            why: "SQLite's default. One 4 KiB SQLite page is one 4 KiB OS page of stable memory, \
                  the unit the IC charges 1,000 instructions for when a message first dirties it. \
                  Only takes effect before the first table exists, so it is applied first.",
        },
        Pragma {
            name: "locking_mode",
            value: "EXCLUSIVE",
            why: "The canister is the database's only client: take the file lock once and keep \
                  it instead of locking and unlocking around every transaction. Applied before \
                  journal_mode so that WAL, if chosen, never needs shared memory.",
        },
        Pragma {
            name: "journal_mode",
            value: "PERSIST",
            why: "Keeps the rollback journal file and zeroes its header at commit instead of \
                  deleting and re-creating it: fewer file-system calls through the WASI \
                  polyfill, while COMMIT and ROLLBACK stay atomic (OFF is faster but loses \
                  ROLLBACK).",
        },
        Pragma {
            name: "synchronous",
            value: "NORMAL",
            why: "The reference's value. On the IC a message's stable-memory writes are \
                  committed or discarded as a whole, so the level only changes how many \
                  sync calls reach the polyfill; the pragma guide measures OFF.",
        },
        Pragma {
            name: "temp_store",
            value: "MEMORY",
            why: "Temporary tables and sort spills (the join's ORDER BY) stay in the heap \
                  instead of temporary files in the polyfill's file system, which also avoids \
                  SQLite failing to create a temp file during complex queries.",
        },
        Pragma {
            name: "cache_size",
            value: "1000000",
            why: "Up to 1,000,000 pages (about 4 GB at 4 KiB, in practice the whole database, \
                  tens of MiB for the reference data) stay in the heap page cache, so repeated \
                  reads do not go back to stable memory (20 instructions + 1 per byte per \
                  read). Costs heap, which counts against the wasm memory limit.",
        },
    ],
};

/// ic-rusqlite 0.5's own defaults (`ConnectionConfig::default`), applied in our order instead of
/// the library's `HashMap` order.
pub const IC_RUSQLITE: Profile = Profile {
    name: "ic-rusqlite",
    source: "ic-rusqlite 0.5 ConnectionConfig::default",
    pragmas: &[
        Pragma { name: "page_size", value: "4096", why: "ic-rusqlite's default page size." },
        Pragma { name: "locking_mode", value: "EXCLUSIVE", why: "Single client: keep the lock." },
        Pragma { name: "journal_mode", value: "PERSIST", why: "Reuse the journal file." },
        Pragma { name: "synchronous", value: "OFF", why: "No sync calls at all." },
        Pragma { name: "temp_store", value: "MEMORY", why: "No temporary files." },
        Pragma { name: "cache_size", value: "500000", why: "Mostly work in the heap cache." },
    ],
};

/// Every profile this crate defines.
pub const PROFILES: [Profile; 2] = [REFERENCE, IC_RUSQLITE];

/// The profile the canister applies today: the seed's table, until the pragma guide measures
/// alternatives.
pub const DEFAULT: Profile = REFERENCE;

/// The pragmas reported by [`read_active`], in this order.
pub const REPORTED: [&str; 8] = [
    "page_size",
    "locking_mode",
    "journal_mode",
    "synchronous",
    "temp_store",
    "cache_size",
    "foreign_keys",
    "auto_vacuum",
];

impl Profile {
    /// Finds a profile by name.
    pub fn by_name(name: &str) -> Option<Profile> {
        PROFILES.into_iter().find(|p| p.name == name)
    }

    /// Applies the settings in order, then reads each back and fails with
    /// [`Error::PragmaNotApplied`] if SQLite did not take it (for example `page_size` on a
    /// database whose tables already exist with another page size).
    pub fn apply(&self, conn: &Connection) -> Result<()> {
        for p in self.pragmas {
            // `pragma_update` quotes text values; SQLite accepts keywords either way.
            conn.pragma_update(None, p.name, p.value)?;
        }
        for p in self.pragmas {
            let effective = read_pragma(conn, p.name)?;
            if normalize(p.name, p.value) != normalize(p.name, &effective) {
                return Err(Error::PragmaNotApplied {
                    name: p.name.to_string(),
                    requested: p.value.to_string(),
                    effective,
                });
            }
        }
        Ok(())
    }
}

/// Reads one pragma's current value as text.
pub fn read_pragma(conn: &Connection, name: &str) -> Result<String> {
    let value: rusqlite::types::Value = conn.pragma_query_value(None, name, |r| r.get(0))?;
    Ok(match value {
        rusqlite::types::Value::Integer(i) => i.to_string(),
        rusqlite::types::Value::Text(t) => t,
        rusqlite::types::Value::Real(r) => r.to_string(),
        rusqlite::types::Value::Null => String::new(),
        rusqlite::types::Value::Blob(b) => format!("{b:?}"),
    })
}

/// The current values of the [`REPORTED`] pragmas, as (name, value) pairs.
pub fn read_active(conn: &Connection) -> Result<Vec<(String, String)>> {
    REPORTED.iter().map(|&n| Ok((n.to_string(), read_pragma(conn, n)?))).collect()
}

/// Maps the spellings SQLite accepts to the one it reports back (`NORMAL` -> `1`,
/// `persist` -> `PERSIST`), so a requested value can be compared with the effective one.
fn normalize(name: &str, value: &str) -> String {
    let v = value.trim().to_ascii_uppercase();
    let code = match (name, v.as_str()) {
        ("synchronous", "OFF") | ("temp_store", "DEFAULT") | ("auto_vacuum", "NONE") => "0",
        ("synchronous", "NORMAL") | ("temp_store", "FILE") | ("auto_vacuum", "FULL") => "1",
        ("synchronous", "FULL") | ("temp_store", "MEMORY") | ("auto_vacuum", "INCREMENTAL") => "2",
        ("synchronous", "EXTRA") => "3",
        _ => return v,
    };
    code.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_size_comes_first_and_locking_mode_before_journal_mode() {
        for profile in PROFILES {
            let names: Vec<_> = profile.pragmas.iter().map(|p| p.name).collect();
            assert_eq!(names.first(), Some(&"page_size"), "{}", profile.name);
            let pos = |n| names.iter().position(|&x| x == n).unwrap();
            assert!(pos("locking_mode") < pos("journal_mode"), "{}", profile.name);
        }
    }

    #[test]
    fn profiles_apply_and_read_back_on_a_new_database() -> Result<()> {
        for profile in PROFILES {
            let dir = std::env::temp_dir().join(format!("stablebench-pragma-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            let path = dir.join(format!("{}.db", profile.name));
            let _ = std::fs::remove_file(&path);
            let conn = Connection::open(&path)?;
            profile.apply(&conn)?;
            let active = read_active(&conn)?;
            let get = |n: &str| active.iter().find(|(k, _)| k == n).unwrap().1.clone();
            assert_eq!(get("journal_mode"), "persist");
            assert_eq!(get("locking_mode"), "exclusive");
            assert_eq!(get("temp_store"), "2");
            drop(conn);
            std::fs::remove_dir_all(&dir).ok();
        }
        Ok(())
    }

    #[test]
    fn page_size_change_on_an_existing_database_is_reported() -> Result<()> {
        let conn = Connection::open_in_memory()?;
        conn.execute("PRAGMA page_size = 8192", ())?;
        conn.execute("CREATE TABLE t (x)", ())?;
        match REFERENCE.apply(&conn) {
            Err(Error::PragmaNotApplied { name, effective, .. }) => {
                assert_eq!(name, "page_size");
                assert_eq!(effective, "8192");
            }
            other => panic!("expected PragmaNotApplied, got {other:?}"),
        }
        Ok(())
    }

    #[test]
    fn normalize_maps_keywords_to_reported_codes() {
        assert_eq!(normalize("synchronous", "normal"), "1");
        assert_eq!(normalize("temp_store", "MEMORY"), "2");
        assert_eq!(normalize("journal_mode", "persist"), "PERSIST");
    }
}
