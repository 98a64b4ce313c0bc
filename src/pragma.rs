//! Pragma profiles applied to a connection. The profiles themselves (names, ordered settings and
//! the reason for each value) are data of the grid (`stablebench_grid::profiles`), re-exported
//! here; this module applies them to SQLite and reads the values back.
//!
//! Order matters, and is part of a profile (see the `stablebench-pragmas` crate, `pragmas/`, whose
//! apply-and-verify this module calls: the code users' canisters depend on).

use rusqlite::Connection;

pub use stablebench_grid::profiles::*;

use crate::{Error, Result};

/// Applies a [`Profile`] to a connection (`use stablebench::pragma::Apply`).
pub trait Apply {
    /// Applies the settings in order, then reads each back and fails with
    /// [`Error::PragmaNotApplied`] if SQLite did not take it (for example `page_size` on a
    /// database whose tables already exist with another page size).
    fn apply(&self, conn: &Connection) -> Result<()>;
}

impl Apply for Profile {
    fn apply(&self, conn: &Connection) -> Result<()> {
        stablebench_pragmas::apply(conn, self.pragmas).map_err(|e| match e {
            stablebench_pragmas::Error::Sqlite(e) => Error::Sqlite(e),
            stablebench_pragmas::Error::NotApplied { name, requested, effective } => {
                Error::PragmaNotApplied { name: name.to_string(), requested: requested.to_string(), effective }
            }
        })
    }
}

/// Reads one pragma's current value as text.
pub fn read_pragma(conn: &Connection, name: &str) -> Result<String> {
    Ok(stablebench_pragmas::read(conn, name)?)
}

/// The current values of the [`REPORTED`] pragmas, as (name, value) pairs.
pub fn read_active(conn: &Connection) -> Result<Vec<(String, String)>> {
    REPORTED.iter().map(|&n| Ok((n.to_string(), read_pragma(conn, n)?))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use stablebench_pragmas::normalize;

    #[test]
    fn page_size_comes_first_and_locking_mode_before_journal_mode() {
        for profile in PROFILES {
            let names: Vec<_> = profile.pragmas.iter().map(|p| p.name).collect();
            assert_eq!(names.first(), Some(&"page_size"), "{}", profile.name);
            if let (Some(lock), Some(journal)) =
                (names.iter().position(|&x| x == "locking_mode"), names.iter().position(|&x| x == "journal_mode"))
            {
                assert!(lock < journal, "{}", profile.name);
            }
        }
    }

    #[test]
    fn names_are_unique_identifiers_and_only_safe_profiles_deploy() {
        let mut names: Vec<_> = PROFILES.iter().map(|p| p.name).collect();
        assert!(names.iter().all(|n| n.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')));
        names.sort();
        names.dedup();
        assert_eq!(names.len(), PROFILES.len());
        assert!(REFERENCE.deployable().is_ok() && IC_RUSQLITE.deployable().is_ok());
        assert!(MEMORY.deployable().unwrap_err().contains("heap"));
        assert!(Profile::by_name("journal_off").unwrap().deployable().unwrap_err().contains("not atomic"));
    }

    #[test]
    fn profiles_apply_and_read_back_on_a_new_database() -> Result<()> {
        for profile in PROFILES.into_iter().filter(|p| p.storage == Storage::StableMemory) {
            let dir = std::env::temp_dir().join(format!("stablebench-pragma-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            let path = dir.join(format!("{}.db", profile.name));
            let _ = std::fs::remove_file(&path);
            let conn = Connection::open(&path)?;
            profile.apply(&conn)?;
            let active = read_active(&conn)?;
            let get = |n: &str| active.iter().find(|(k, _)| k == n).unwrap().1.clone();
            for p in profile.pragmas {
                assert_eq!(normalize(p.name, &get(p.name)), normalize(p.name, p.value), "{} {}", profile.name, p.name);
            }
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
}
