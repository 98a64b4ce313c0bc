//! What a message of n key-value operations costs: the committed `message_shapes_results.yml`
//! (measured by `runner/tests/message_shapes.rs` on the production wasm) as the base of a message
//! and the marginal cost of one more operation, per backend, shape and key pattern, and the
//! answers derived from them (`docs/message-shapes.md`, the README's `message-shapes` block).
//!
//! Every figure names its shape: on mainnet a message pays for the pages it touches, so an
//! operation's cost depends on how many others share its message; the marginal cost between two
//! operation counts is what the later operations added, never the message divided by its count.

use std::collections::BTreeMap;
use std::fmt::Write;

use stablebench_grid::ic::{PageCounts, UPDATE_INSTRUCTION_LIMIT};
use stablebench_grid::shapes::{Pattern, Shape, BACKENDS, OPS_PER_MESSAGE};

use crate::grouped;

/// One point: the messages of one (backend, model, shape, pattern, operation count).
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct Point {
    /// Messages measured.
    pub messages: u64,
    /// Their median instructions (the whole message: decoding, the operations, the commit, the reply).
    pub median: u64,
    /// The smallest.
    pub min: u64,
    /// The largest.
    pub max: u64,
    /// The 64 KiB Wasm pages of the median message.
    pub pages: PageCounts,
}

impl Point {
    /// The point of some messages (instructions, pages): the median by instructions, with its
    /// pages, and the smallest and largest.
    pub fn median_of(mut messages: Vec<(u64, PageCounts)>) -> Point {
        messages.sort_by_key(|&(n, _)| n);
        let (median, pages) = messages[messages.len() / 2];
        let (min, max) = (messages[0].0, messages[messages.len() - 1].0);
        Point { messages: messages.len() as u64, median, min, max, pages }
    }
}

/// Per operation count.
pub type Counts = BTreeMap<u64, Point>;

/// Per shape name, per pattern name.
pub type Shapes = BTreeMap<String, BTreeMap<String, Counts>>;

/// One backend under both cost models.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq, Default)]
pub struct Models {
    /// canbench 0.7's model (PocketIC 13: no page fees).
    pub canbench: Shapes,
    /// Mainnet's since the memory tracker (`ic`).
    pub mainnet: Shapes,
}

/// One data set size.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq, Default)]
pub struct Size {
    /// Keys in the store (the trie data set's entries; its 100 warm-up keys besides).
    pub keys: u64,
    /// Per backend name.
    pub backends: BTreeMap<String, Models>,
    /// The SHA-256 of the wasm files it was measured on, by file name.
    pub wasm: BTreeMap<String, String>,
    /// The SHA-256 of the sources that produced it besides the wasm (the runner, the grid, the
    /// generators, the test, the lock file, the toolchain), where recorded.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub sources: String,
}

/// The committed file: per size label (`1x`, `10x`).
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq, Default)]
pub struct Results {
    /// Per size label.
    pub sizes: BTreeMap<String, Size>,
}

/// Which model's figures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Model {
    /// canbench 0.7 on PocketIC 13.
    Canbench,
    /// Mainnet since the memory tracker.
    Mainnet,
}

impl Models {
    /// The shapes under `model`.
    pub fn of(&self, model: Model) -> &Shapes {
        match model {
            Model::Canbench => &self.canbench,
            Model::Mainnet => &self.mainnet,
        }
    }
}

/// One (backend, shape, pattern)'s points at every operation count, under one model.
pub fn counts<'a>(size: &'a Size, backend: &str, model: Model, shape: Shape, pattern: Pattern) -> Option<&'a Counts> {
    size.backends.get(backend)?.of(model).get(shape.name())?.get(pattern.name())
}

/// The marginal cost of one more operation between each pair of neighbouring operation counts:
/// `(from, to, (C(to) - C(from)) / (to - from))`, medians, rounded to the instruction.
pub fn marginals(c: &Counts) -> Vec<(u64, u64, i64)> {
    OPS_PER_MESSAGE
        .windows(2)
        .filter_map(|w| {
            let (a, b) = (c.get(&w[0])?, c.get(&w[1])?);
            let d = b.median as i64 - a.median as i64;
            Some((w[0], w[1], (d as f64 / (w[1] - w[0]) as f64).round() as i64))
        })
        .collect()
}

/// The base (n = 0) and the marginal between the two largest operation counts: what a message of
/// n operations costs at large n is about `base + n * marginal`.
pub fn base_and_marginal(c: &Counts) -> Option<(u64, i64)> {
    let base = c.get(&0)?.median;
    let (_, _, m) = *marginals(c).last()?;
    Some((base, m))
}

/// How many operations of this shape fit one update message's 40 B instruction limit, counted
/// from the base and the last marginal (linear past the largest count measured; `None` when the
/// marginal is not positive). One `kv_put_many` call takes at most `MAX_KEYS_PER_CALL` entries,
/// which [`summary`] says beside it.
pub fn fit_in_update(c: &Counts) -> Option<u64> {
    let (base, m) = base_and_marginal(c)?;
    (m > 0).then(|| UPDATE_INSTRUCTION_LIMIT.saturating_sub(base) / m as u64)
}

fn pages(p: &PageCounts) -> String {
    format!("{} / {}", grouped(p.accessed()), grouped(p.written()))
}

/// A marginal cost as the tables print it: grouped, with its sign when negative (a later
/// operation can cost less than nothing within the messages' spread).
pub fn signed(v: i64) -> String {
    if v < 0 {
        format!("-{}", grouped(v.unsigned_abs()))
    } else {
        grouped(v as u64)
    }
}

/// One table per shape at `size` under `model`: per backend and pattern the base, the marginal
/// between each pair of counts, the largest message and its pages.
pub fn tables(size: &Size, model: Model) -> String {
    let mut out = String::new();
    for shape in Shape::ALL {
        let _ = writeln!(out, "**{}** (`{}`):\n", shape.title(), shape.name());
        let steps: Vec<String> =
            OPS_PER_MESSAGE.windows(2).map(|w| format!("{} → {}", grouped(w[0]), grouped(w[1]))).collect();
        let _ = writeln!(
            out,
            "| backend | pattern | base (n = 0) | per operation, n {} | n = {} | its pages |",
            steps.join(" | n "),
            grouped(OPS_PER_MESSAGE[OPS_PER_MESSAGE.len() - 1])
        );
        let _ = writeln!(out, "|---|---|---:|{}---:|---:|", "---:|".repeat(steps.len()));
        for b in BACKENDS.into_iter().filter(|&b| shape.applies_to(b)) {
            for p in Pattern::ALL {
                let Some(c) = counts(size, b.name(), model, shape, p) else { continue };
                let last = OPS_PER_MESSAGE[OPS_PER_MESSAGE.len() - 1];
                let m: Vec<String> = marginals(c).iter().map(|&(_, _, m)| signed(m)).collect();
                let _ = writeln!(
                    out,
                    "| `{}` | {} | {} | {} | {} | {} |",
                    b.name(),
                    p.name(),
                    c.get(&0).map_or("–".into(), |x| grouped(x.median)),
                    m.join(" | "),
                    c.get(&last).map_or("–".into(), |x| grouped(x.median)),
                    c.get(&last).map_or("–".into(), |x| pages(&x.pages)),
                );
            }
        }
        out.push('\n');
    }
    out
}

/// The README's answer: per backend, under the uniform pattern on mainnet at `size`, a message's
/// base and the marginal cost of one more operation at n 100 → 1,000, per shape; then how many
/// writes fit one update.
pub fn summary(size: &Size) -> String {
    summary_linking(size, "docs/message-shapes.md")
}

/// [`summary`], its link to `docs/message-shapes.md` written as `link` (relative to the page that
/// shows it).
pub fn summary_linking(size: &Size, link: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Instructions on mainnet (the memory tracker's page fees included) of one message on the production wasm at {} keys (SQLite under the recommended profile `{}`; `{}`: the ic-sqlite-vfs canister's production wasm, its settings `{}`), uniformly random keys: the message's base (n = 0) + the cost of each further operation at n 100 → 1,000. Skewed and sequential keys, every n, pages and canbench's figures: [docs/message-shapes.md]({link}).\n",
        grouped(size.keys),
        stablebench_grid::profiles::DEFAULT.name,
        stablebench_grid::cells::Backend::SqliteVfsRowid.name(),
        stablebench_grid::profiles::VFS_CACHE_768MIB.name
    );
    let _ = writeln!(
        out,
        "| backend | {} | writes that fit the 40 B update limit (one transaction, linear past n = 1,000; one call takes {}) |",
        Shape::ALL.map(|s| s.title()).join(" | "),
        grouped(stablebench_grid::api::MAX_KEYS_PER_CALL as u64)
    );
    let _ = writeln!(out, "|---|{}---|", "---:|".repeat(Shape::ALL.len()));
    for b in BACKENDS {
        let cell = |shape: Shape| -> String {
            if !shape.applies_to(b) {
                return "– (no transactions)".into();
            }
            counts(size, b.name(), Model::Mainnet, shape, Pattern::Uniform)
                .and_then(base_and_marginal)
                .map_or("–".into(), |(base, m)| format!("{} + n × {}", grouped(base), signed(m)))
        };
        let fit = counts(size, b.name(), Model::Mainnet, Shape::WriteOneTransaction, Pattern::Uniform)
            .and_then(fit_in_update)
            .map_or("–".into(), |n| format!("about {}", crate::approx(n as f64)));
        let cells: Vec<String> = Shape::ALL.into_iter().map(cell).collect();
        let _ = writeln!(out, "| `{}` | {} | {} |", b.name(), cells.join(" | "), fit);
    }
    out
}

/// `docs/message-shapes.md`, whole.
pub fn page(r: &Results) -> String {
    let mut out = String::from(
        "# What a message of n operations costs\n\nGenerated by `STABLEBENCH_REGENERATE_SHAPES=1 cargo test --release -p stablebench-runner --test message_shapes` from `message_shapes_results.yml` (CI measures 200,000 keys again and fails on any difference; the 2,000,000-key size is measured with `STABLEBENCH_SHAPES_10X=1` too, outside CI, and refused once either production wasm, `stablebench.wasm` or `stablebench_vfs.wasm`, differs from the one it was measured on). Do not edit.\n\n",
    );
    let _ = write!(
        out,
        "Mainnet bills a message, not an operation: since the IC's memory tracker each message pays 80,000 instructions for every 64 KiB Wasm page it first accesses and 80,000 more for every page it first writes (a query: accessed pages only; [mainnet.md](mainnet.md)). An operation's cost therefore depends on what shares its message. Each row below is one message shape on the production wasm (`target/canister/stablebench.wasm`, each backend in a canister of its own installed with the defaults, so SQLite under the recommended profile `{}`; `{}` is the ic-sqlite-vfs canister's production wasm, `target/canister/stablebench_vfs.wasm`, with its one rowid table under its settings `{}`; the data set `kv_load` writes: the trie data set of seed 50), loaded once under mainnet's model and then measured under each model from the same state:\n\n",
        stablebench_grid::profiles::DEFAULT.name,
        stablebench_grid::cells::Backend::SqliteVfsRowid.name(),
        stablebench_grid::profiles::VFS_CACHE_768MIB.name
    );
    for s in Shape::ALL {
        let what = match s {
            Shape::ReadQuery => "`kv_get_many(backend, keys)` as a query (ic-sqlite-vfs: `kv_get_many(keys)`, one `Db::query`)",
            Shape::ReadInUpdate => "the same call priced as reads inside an update: each page it writes is charged the write fee too (SQLite's page cache writes as it reads)",
            Shape::WriteOneTransaction => "`kv_put_many(backend, entries, variant { one })`: one transaction (the maps: n puts in the message; ic-sqlite-vfs: `kv_put_many(entries, variant { one })`, one `Db::update`, published once)",
            Shape::WriteEachCommitted => "`kv_put_many(backend, entries, variant { each })`: one commit per entry, SQLite only (ic-sqlite-vfs: one `Db::update` per entry, each published to stable memory)",
        };
        let _ = writeln!(out, "- **{}** (`{}`): {what}.", s.title(), s.name());
    }
    out.push_str("\nKey patterns (seeded, `stablebench_grid::shapes`):\n\n");
    for p in Pattern::ALL {
        let what = match p {
            Pattern::Uniform => "reads draw entries uniformly at random; writes insert fresh random keys with 128-byte values (as Substrate's trie write benchmark)",
            Pattern::Zipf => "reads draw entries by Zipf rank (exponent 1: rank r with probability proportional to 1/r; the entries' keys are random, so hot keys lie anywhere in key order); writes overwrite entries drawn the same way with new 128-byte values",
            Pattern::Sequential => "reads take n entries neighbouring in key order from a random start; writes insert n fresh keys right after a random entry's key (appends at one place)",
        };
        let _ = writeln!(out, "- **{}**: {what}.", p.name());
    }
    let _ = writeln!(
        out,
        "\nEvery point is the median of {} messages with their own keys (the message index seeds them), after one of the same shape that is not measured (what the message before left in the heap and caches moves a small message by up to a few hundred thousand instructions; `message_shapes_results.yml` has each point's smallest and largest). **base** is the message with no operation (n = 0: Candid, the entry point, the reply, and for SQLite the statement lookup); **per operation, n a → b** is (C(b) − C(a)) / (b − a), what each operation between the two counts added. It shrinks with n where later operations find pages the message has already paid for; a message of n operations costs about base + the sum of these, never n times one operation's own message.\n",
        stablebench_grid::shapes::MESSAGES_PER_POINT
    );
    for (label, size) in ["1x", "10x"].into_iter().filter_map(|l| Some((l, r.sizes.get(l)?))) {
        for (model, title) in
            [(Model::Mainnet, "mainnet, since the memory tracker"), (Model::Canbench, "canbench 0.7 on PocketIC 13")]
        {
            let _ = writeln!(out, "## {} keys ({label}), {title}\n", grouped(size.keys));
            out.push_str(&tables(size, model));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(median: u64) -> Point {
        Point { messages: 1, median, min: median, max: median, pages: PageCounts::default() }
    }

    fn linear(base: u64, per: u64) -> Counts {
        OPS_PER_MESSAGE.iter().map(|&n| (n, point(base + n * per))).collect()
    }

    #[test]
    fn marginals_are_differences_between_counts_not_divisions() {
        let mut c = linear(1_000_000, 500);
        // The first operation pays for its pages: 100,000 more than the later ones.
        c.get_mut(&1).unwrap().median += 100_000;
        let m = marginals(&c);
        assert_eq!(m[0], (0, 1, 100_500));
        assert_eq!(m[1].2, (500.0 - 100_000.0 / 9.0_f64).round() as i64);
        assert_eq!(m[3], (100, 1_000, 500));
        assert_eq!(base_and_marginal(&c), Some((1_000_000, 500)));
    }

    #[test]
    fn fit_is_counted_from_the_base_and_the_marginal() {
        // 40 B - 1 M at 10 M per write: 3,999 writes.
        assert_eq!(fit_in_update(&linear(1_000_000, 10_000_000)), Some(3_999));
        assert_eq!(fit_in_update(&linear(0, 1_000)), Some(40_000_000));
        assert_eq!(fit_in_update(&linear(1_000_000, 0)), None, "no marginal, no count");
        let mut partial = linear(0, 1);
        partial.remove(&1_000);
        assert_eq!(base_and_marginal(&partial).map(|b| b.1), Some(1), "the last pair measured");
        assert_eq!(fit_in_update(&Counts::new()), None);
    }
}
