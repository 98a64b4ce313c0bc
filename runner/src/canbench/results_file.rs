//! Ported from canbench 0.7.0 (dfinity/canbench, Apache-2.0), src/results_file.rs.
//!
//! canbench panics (`unwrap`/`expect`) on I/O, YAML and version-parse failures; this port
//! returns those as errors instead, with the same message text where canbench has one.

use super::{BenchResult, CANBENCH_VERSION};
use anyhow::Context;
use semver::Version;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Write};
use std::path::Path;

/// The contents of a canbench results file (`canbench_results.yml` by default).
///
/// Serialized as canbench 0.7.0's `PersistedResults`: `benches` first, then `version`;
/// both keys are required when reading.
/// (`PartialEq` only, no `Clone`: canbench-rs's `BenchResult` derives neither `Eq` nor `Clone`.)
#[derive(Debug, PartialEq, Serialize, Deserialize)]
pub struct Results {
    /// Benchmark results by benchmark name (sorted, as in the file).
    pub benches: BTreeMap<String, BenchResult>,
    /// The version of canbench that wrote the file, e.g. `0.7.0`.
    pub version: String,
}

/// What [`write_results`] serializes: canbench's `PersistedResults` with borrowed fields.
#[derive(Serialize)]
struct PersistedResults<'a> {
    benches: &'a BTreeMap<String, BenchResult>,
    version: &'a str,
}

/// Returned (inside the `anyhow::Error`) by [`read_results`] when the results file was written
/// by a newer canbench than [`CANBENCH_VERSION`]. canbench prints this message to stderr and
/// exits with status 1; get it back with `err.downcast_ref::<VersionError>()`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionError {
    /// Our version ([`CANBENCH_VERSION`]).
    pub our_version: String,
    /// The version recorded in the results file.
    pub their_version: String,
}

impl std::fmt::Display for VersionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Text from canbench 0.7.0 src/lib.rs (`run_benchmarks`).
        write!(
            f,
            "canbench is at version {} while the results were generated with version {}. Please upgrade canbench.",
            self.our_version, self.their_version
        )
    }
}

impl std::error::Error for VersionError {}

/// Reads a canbench results file.
///
/// Returns `Ok(None)` when the file cannot be opened: canbench treats every `File::open`
/// failure (not only a missing file) as "no previous results", and so does this port.
/// (Spec differs: section 6.1 of ic-runtime.md says "a missing file"; the canbench source
/// wins.)
///
/// Errors: the file cannot be read ("error reading results file"), is not a valid results
/// YAML, has a `version` that is not semver ("couldn't parse version in results file"), or
/// was written by a newer canbench than 0.7.0 (a [`VersionError`], whose text is
/// "canbench is at version 0.7.0 while the results were generated with version X. Please
/// upgrade canbench."). Versions are parsed and compared with the `semver` crate's `Version`,
/// as canbench 0.7.0 does (`our_version < their_version`), so a pre-release such as
/// `0.7.0-rc.1` is older than 0.7.0 and `0.7.0+build` is newer (semver 1.x orders build
/// metadata too; the spec only says "newer", the crate canbench uses decides).
pub fn read_results(path: &Path) -> anyhow::Result<Option<Results>> {
    let mut file = match File::open(path) {
        Err(_) => {
            // No current results found.
            return Ok(None);
        }
        Ok(file) => file,
    };

    // Read the current results.
    let mut results_str = String::new();
    file.read_to_string(&mut results_str).with_context(|| format!("error reading results file {}", path.display()))?;

    let results: Results =
        serde_yaml::from_str(&results_str).with_context(|| format!("error parsing results file {}", path.display()))?;

    // Validate that our version of canbench is not older than what was used
    // to generate the file.
    let our_version = Version::parse(CANBENCH_VERSION).expect("CANBENCH_VERSION is semver");
    let their_version = Version::parse(&results.version)
        .with_context(|| format!("couldn't parse version in results file {}: {:?}", path.display(), results.version))?;
    if our_version < their_version {
        return Err(
            VersionError { our_version: CANBENCH_VERSION.to_string(), their_version: results.version.clone() }.into()
        );
    }

    Ok(Some(results))
}

/// Writes `benches` to a results file exactly as canbench 0.7.0 does with `--persist`:
/// serde_yaml 0.9 output of `{benches, version: "0.7.0"}`, benchmarks and scopes sorted by
/// name, every `Measurement` field written (`scopes: {}` when there are none).
/// After writing, canbench prints "Successfully persisted results to <path>" (see
/// [`format_persisted`](super::format_persisted)).
pub fn write_results(path: &Path, benches: &BTreeMap<String, BenchResult>) -> anyhow::Result<()> {
    let persisted_results = PersistedResults { version: CANBENCH_VERSION, benches };
    let yaml = serde_yaml::to_string(&persisted_results).context("serializing results")?;

    let mut file = File::create(path).with_context(|| format!("error creating results file {}", path.display()))?;
    file.write_all(yaml.as_bytes())
        .and_then(|()| file.flush())
        .with_context(|| format!("error writing results file {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{bench, m, results, TempDir};
    use super::super::Measurement;
    use super::*;

    const GOLDEN: &str = "\
benches:
  bench_list_inbox_messages_recent:
    total:
      calls: 1
      instructions: 932142
      heap_increase: 0
      stable_memory_increase: 0
    scopes: {}
  write_node_scale_n1000:
    total:
      calls: 1
      instructions: 11802792
      heap_increase: 3
      stable_memory_increase: 1
    scopes:
      a_scope:
        calls: 2
        instructions: 11801574
        heap_increase: 0
        stable_memory_increase: 0
      write_call:
        calls: 1
        instructions: 11801574
        heap_increase: 0
        stable_memory_increase: 0
version: 0.7.0
";

    fn golden_benches() -> BTreeMap<String, BenchResult> {
        // Inserted out of order: the file is sorted by name.
        results(&[
            (
                "write_node_scale_n1000",
                bench(
                    m(1, 11_802_792, 3, 1),
                    &[("write_call", m(1, 11_801_574, 0, 0)), ("a_scope", m(2, 11_801_574, 0, 0))],
                ),
            ),
            ("bench_list_inbox_messages_recent", bench(m(1, 932_142, 0, 0), &[])),
        ])
    }

    #[test]
    fn results_file_is_written_byte_identical_to_canbench() {
        let dir = TempDir::new("results-write");
        let path = dir.path().join("canbench_results.yml");
        write_results(&path, &golden_benches()).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), GOLDEN);
    }

    #[test]
    fn results_file_round_trips_byte_identical() {
        let dir = TempDir::new("results-round-trip");
        let path = dir.path().join("canbench_results.yml");
        std::fs::write(&path, GOLDEN).unwrap();
        let read = read_results(&path).unwrap().unwrap();
        assert_eq!(read.version, "0.7.0");
        assert_eq!(read.benches, golden_benches());
        let copy = dir.path().join("copy.yml");
        write_results(&copy, &read.benches).unwrap();
        assert_eq!(std::fs::read(&copy).unwrap(), GOLDEN.as_bytes());
    }

    #[test]
    fn results_file_from_older_canbench_is_read_and_rewritten_as_0_7_0() {
        // A file written by canbench 0.4.1 (humandebri/kinic-wiki, canbench_results.yml).
        let old_file = "\
benches:
  write_node_scale_n1000:
    total:
      calls: 1
      instructions: 11802792
      heap_increase: 0
      stable_memory_increase: 0
    scopes:
      write_call:
        calls: 1
        instructions: 11801574
        heap_increase: 0
        stable_memory_increase: 0
version: 0.4.1
";
        let dir = TempDir::new("results-old");
        let path = dir.path().join("canbench_results.yml");
        std::fs::write(&path, old_file).unwrap();
        let read = read_results(&path).unwrap().unwrap();
        assert_eq!(read.version, "0.4.1");
        assert_eq!(read.benches["write_node_scale_n1000"].scopes["write_call"].instructions, 11_801_574);
        write_results(&path, &read.benches).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), old_file.replace("version: 0.4.1", "version: 0.7.0"));
    }

    #[test]
    fn missing_results_file_reads_as_none() {
        let dir = TempDir::new("results-missing");
        assert_eq!(read_results(&dir.path().join("nope.yml")).unwrap(), None);
    }

    #[test]
    fn newer_results_version_is_rejected_with_canbench_message() {
        let dir = TempDir::new("results-newer");
        let path = dir.path().join("canbench_results.yml");
        std::fs::write(&path, "benches: {}\nversion: 0.8.0\n").unwrap();
        let err = read_results(&path).unwrap_err();
        assert_eq!(
            err.to_string(),
            "canbench is at version 0.7.0 while the results were generated with version 0.8.0. Please upgrade canbench."
        );
        assert_eq!(
            err.downcast_ref::<VersionError>(),
            Some(&VersionError { our_version: "0.7.0".to_string(), their_version: "0.8.0".to_string() })
        );
    }

    #[test]
    fn version_check_follows_semver_precedence() {
        let dir = TempDir::new("results-semver");
        let path = dir.path().join("r.yml");
        let check = |v: &str| {
            std::fs::write(&path, format!("benches: {{}}\nversion: {v}\n")).unwrap();
            match read_results(&path) {
                Ok(Some(_)) => "ok",
                Ok(None) => "none",
                Err(e) if e.downcast_ref::<VersionError>().is_some() => "newer",
                Err(_) => "invalid",
            }
        };
        assert_eq!(check("0.7.0"), "ok");
        assert_eq!(check("0.6.99"), "ok");
        assert_eq!(check("0.1.4"), "ok");
        assert_eq!(check("0.7.0-rc.1"), "ok");
        assert_eq!(check("0.7.1"), "newer");
        assert_eq!(check("0.10.0"), "newer");
        assert_eq!(check("1.0.0-alpha"), "newer");
        assert_eq!(check("0.7.0+build.5"), "newer");
        assert_eq!(check("0.7"), "invalid");
        assert_eq!(check("v0.7.0"), "invalid");
        assert_eq!(check("0.07.0"), "invalid");
        assert_eq!(check("0.7.0-01"), "invalid");
    }

    #[test]
    fn version_check_orders_prereleases_and_build_metadata_like_canbench() {
        // Against 0.7.0: any pre-release of it is older, any build metadata makes it newer.
        let dir = TempDir::new("results-semver-pre");
        let path = dir.path().join("r.yml");
        let newer = |v: &str| {
            std::fs::write(&path, format!("benches: {{}}\nversion: {v}\n")).unwrap();
            match read_results(&path) {
                Ok(Some(_)) => false,
                Err(e) if e.downcast_ref::<VersionError>().is_some() => true,
                other => panic!("{v}: {other:?}"),
            }
        };
        for older in ["0.7.0-alpha", "0.7.0-alpha.1", "0.7.0-beta.11", "0.7.0-rc.1", "0.6.1+build.9"] {
            assert!(!newer(older), "{older}");
        }
        for later in ["0.7.0+0", "0.7.0+build", "0.7.1-alpha", "0.8.0-rc.1"] {
            assert!(newer(later), "{later}");
        }
    }

    #[test]
    fn unparsable_version_keeps_canbench_message_and_names_the_file() {
        let dir = TempDir::new("results-semver-bad");
        let path = dir.path().join("r.yml");
        for bad in ["0.7", "0.7.0-", "0.7.0+", "0.7.0-rc..1", "0.7.0-rc.01", "x.y.z"] {
            std::fs::write(&path, format!("benches: {{}}\nversion: \"{bad}\"\n")).unwrap();
            let err = read_results(&path).unwrap_err();
            assert_eq!(err.to_string(), format!("couldn't parse version in results file {}: {bad:?}", path.display()));
            assert!(err.downcast_ref::<VersionError>().is_none());
            // The cause is the semver crate's own message.
            assert!(err.chain().nth(1).is_some_and(|e| e.is::<semver::Error>()), "{bad}: {err:#}");
        }
    }

    #[test]
    fn measurement_fields_default_to_zero_when_missing() {
        // Ported from canbench 0.7.0 src/results_file.rs (test_yaml_backwards_compatibility).
        let decoded = serde_yaml::from_str::<Measurement>("instructions: 1\n").unwrap();
        assert_eq!(decoded, Measurement { calls: 0, instructions: 1, heap_increase: 0, stable_memory_increase: 0 });
        let r: Results =
            serde_yaml::from_str("benches:\n  b:\n    total:\n      instructions: 5\nversion: 0.1.0\n").unwrap();
        assert_eq!(r.benches["b"], bench(m(0, 5, 0, 0), &[]));
    }

    #[test]
    fn unparsable_results_file_is_an_error() {
        let dir = TempDir::new("results-bad");
        let path = dir.path().join("r.yml");
        std::fs::write(&path, "benches: []\n").unwrap();
        assert!(read_results(&path).is_err());
        std::fs::write(&path, "benches: {}\n").unwrap(); // `version` is required
        assert!(read_results(&path).is_err());
    }
}
