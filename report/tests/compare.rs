//! The `stablebench-report compare` command, run as `scripts/test.sh` and `scripts/site-compare.sh`
//! run it: canbench's CSV files in, one HTML page out, and a clear error for a file it cannot
//! read. (Its integration test is also what makes `cargo test --workspace` build the binary that
//! `scripts/test.sh` hands to the compare page.)

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_stablebench-report");

/// Two benchmarks of a canbench `--csv` file: one moved beyond the noise, one did not.
const CSV: &str = "status,name,scope_calls,scope_calls Δ,scope_calls Δ%,instructions,instructions Δ,instructions Δ%,heap_increase,heap_increase Δ,heap_increase Δ%,stable_memory_increase,stable_memory_increase Δ,stable_memory_increase Δ%
,moved,,,,1000,100,11.11%,2,0,0.00%,0,0,0.00%
,steady,,,,1000,-1,-0.10%,1,0,0.00%,0,0,0.00%
";

fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("stablebench-report-test-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn compare_writes_one_page_with_what_moved() {
    let dir = scratch("page");
    let (csv, out) = (dir.join("canbench_results.csv"), dir.join("site/compare.html"));
    std::fs::write(&csv, CSV).unwrap();
    let run = Command::new(BIN).arg("compare").arg(&csv).arg("--out").arg(&out).output().unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let html = std::fs::read_to_string(&out).unwrap();
    assert!(html.contains("2 benchmarks in <code>"), "{html}");
    assert!(html.contains("1 moved by 2% or more"), "{html}");
    assert!(html.contains("<code>moved</code>") && !html.contains("<code>steady</code></td>"), "{html}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn compare_names_a_file_it_cannot_read_and_writes_nothing() {
    let dir = scratch("missing");
    let (csv, out) = (dir.join("no_such.csv"), dir.join("compare.html"));
    let run = Command::new(BIN).arg("compare").arg(&csv).arg("--out").arg(&out).output().unwrap();
    assert!(!run.status.success());
    assert!(String::from_utf8_lossy(&run.stderr).contains("no_such.csv"));
    assert!(!out.exists());
    std::fs::remove_dir_all(dir).unwrap();
}
