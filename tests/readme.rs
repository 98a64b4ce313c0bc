//! The README's pragma table and benchmark table are generated from the code they describe;
//! this test fails when they drift apart (the reference README's table did not match what its
//! library applied). Regenerate with `STABLEBENCH_REGENERATE_README=1 cargo test --test readme`.

use stablebench::bench::BENCHES;
use stablebench::pragma::DEFAULT;

const README: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/README.md");

fn pragma_table() -> String {
    let mut t = String::from("| # | pragma | value | why |\n|---|---|---|---|\n");
    for (i, p) in DEFAULT.pragmas.iter().enumerate() {
        let why = p.why.split_whitespace().collect::<Vec<_>>().join(" ");
        t += &format!("| {} | `{}` | `{}` | {} |\n", i + 1, p.name, p.value, why);
    }
    t
}

fn bench_table() -> String {
    let mut t = String::from("| seed row | benchmark (canbench name) | reference step |\n|---|---|---|\n");
    for (i, b) in BENCHES.iter().enumerate() {
        t += &format!("| {} | `{}` | {} |\n", i + 1, b.name(), b.seed_row());
    }
    t
}

/// Replaces the text between `<!-- NAME:begin -->` and `<!-- NAME:end -->`.
fn splice(doc: &str, name: &str, body: &str) -> String {
    let (begin, end) = (format!("<!-- {name}:begin -->\n"), format!("<!-- {name}:end -->"));
    let b = doc.find(&begin).unwrap_or_else(|| panic!("README has no {begin}")) + begin.len();
    let e = doc[b..].find(&end).unwrap_or_else(|| panic!("README has no {end}")) + b;
    format!("{}{}{}", &doc[..b], body, &doc[e..])
}

#[test]
fn readme_tables_match_the_code() {
    let doc = std::fs::read_to_string(README).unwrap();
    let want = splice(&splice(&doc, "pragma-table", &pragma_table()), "bench-table", &bench_table());
    if std::env::var_os("STABLEBENCH_REGENERATE_README").is_some() {
        std::fs::write(README, &want).unwrap();
    }
    assert!(doc == want, "README.md tables are stale: run STABLEBENCH_REGENERATE_README=1 cargo test --test readme");
}
