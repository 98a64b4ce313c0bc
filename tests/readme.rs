//! The README's pragma, benchmark and results tables are generated from what they describe (the
//! code, and canbench_results.yml);
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

/// The measured numbers, from the committed canbench_results.yml (never typed by hand).
fn results_table() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/canbench_results.yml");
    let yml: serde_yaml::Value = serde_yaml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut t = String::from(
        "| seed row | benchmark | instructions | heap increase | stable memory increase | fits a 5 B query | fits a 40 B update |\n|---|---|---:|---:|---:|---|---|\n",
    );
    for (i, b) in BENCHES.iter().enumerate() {
        let total = &yml["benches"][b.name()]["total"];
        let n = |k: &str| total[k].as_u64().unwrap_or_else(|| panic!("{} has no {k} in canbench_results.yml", b.name()));
        let ins = n("instructions");
        let yes = |ok: bool| if ok { "yes" } else { "no" };
        t += &format!(
            "| {} | `{}` | {} ({}) | {} pages | {} pages | {} | {} |\n",
            i + 1,
            b.name(),
            human(ins),
            group(ins),
            n("heap_increase"),
            n("stable_memory_increase"),
            yes(ins <= 5_000_000_000),
            yes(ins <= 40_000_000_000)
        );
    }
    t
}

fn human(v: u64) -> String {
    match v {
        v if v < 1_000_000 => format!("{:.2} K", v as f64 / 1e3),
        v if v < 1_000_000_000 => format!("{:.2} M", v as f64 / 1e6),
        v => format!("{:.2} B", v as f64 / 1e9),
    }
}

fn group(v: u64) -> String {
    let s = v.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
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
    let want = splice(&doc, "pragma-table", &pragma_table());
    let want = splice(&want, "bench-table", &bench_table());
    let want = splice(&want, "results-table", &results_table());
    if std::env::var_os("STABLEBENCH_REGENERATE_README").is_some() {
        std::fs::write(README, &want).unwrap();
        return;
    }
    assert!(doc == want, "README.md tables are stale: run STABLEBENCH_REGENERATE_README=1 cargo test --test readme");
}
