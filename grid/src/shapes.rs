//! Message shapes: what one message of n key-value operations costs, declared once for the
//! runner that measures them (`runner/tests/message_shapes.rs`, `message_shapes_results.yml`) and
//! the report that answers from them (`docs/message-shapes.md`, the README's message block).
//!
//! Mainnet's memory tracker charges a message for every 64 KiB Wasm page it first accesses and
//! first writes, so the cost of an operation depends on what shares its message: a message of n
//! operations costs a base (the message's own pages and work, measured with n = 0) plus n
//! marginal costs that shrink as the operations find pages the message already paid for. The
//! shapes are the production canister's `kv_get_many` (a query, and the same reads priced as in
//! an update) and `kv_put_many` (one transaction, or one commit per entry), for every key-value
//! backend, at the operation counts of [`OPS_PER_MESSAGE`] and under the key patterns of
//! [`Pattern::ALL`].

use crate::cells::{Backend, DB_WEIGHT_SIZE};

/// The backends measured: the production canister's four key-value backends
/// (`crate::cells::BACKENDS`), then the ic-sqlite-vfs canister's rowid table (its own
/// `kv_get_many` and `kv_put_many`, without a backend argument).
pub const BACKENDS: [Backend; 5] = [
    crate::cells::BACKENDS[0],
    crate::cells::BACKENDS[1],
    crate::cells::BACKENDS[2],
    crate::cells::BACKENDS[3],
    Backend::SqliteVfsRowid,
];

/// Operations per message: 0 (the base: the message with nothing to do), then 1 to 1,000.
pub const OPS_PER_MESSAGE: [u64; 5] = [0, 1, 10, 100, 1_000];

/// Messages measured per point (pattern, shape, operation count), after one of the same shape that
/// is not: each with its own keys (the message index seeds them); the median is reported, with the
/// smallest and largest.
pub const MESSAGES_PER_POINT: u64 = 5;

/// The data set sizes: [`DB_WEIGHT_SIZE`] (in CI) and ten times that (measured only when asked,
/// `STABLEBENCH_SHAPES_10X=1`: its figures are refused when the wasm they were measured on changes).
pub const SIZES: [u64; 2] = [DB_WEIGHT_SIZE, 10 * DB_WEIGHT_SIZE];

/// The Zipf exponent of the skewed pattern (rank r drawn with probability proportional to 1/r).
pub const ZIPF_EXPONENT: f64 = 1.0;

/// The seed of every key draw (with the pattern, the shape, the operation count and the message
/// index): recorded here once.
pub const SHAPES_SEED: u64 = 52;

/// How the keys of one message are chosen from the data set (the trie data set of
/// `stablebench::kv::gen::TrieDataset`, seed `KV_SEED`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Pattern {
    /// Reads: entries drawn uniformly at random (with repetition). Writes: fresh random keys
    /// (inserts), as Substrate's trie write benchmark writes.
    Uniform,
    /// Reads: entries drawn by Zipf rank ([`ZIPF_EXPONENT`]; rank 1 the hottest, the entries'
    /// keys random, so hot keys lie anywhere in key order). Writes: overwrites of entries drawn
    /// the same way, with new 128-byte values (hot-key updates).
    Zipf,
    /// Reads: n entries neighbouring in key order, from a uniformly random start. Writes: n fresh
    /// keys that follow a random entry's key in key order (its key plus 1 to n, big-endian), so
    /// they land between it and the next entry: appends at one place.
    Sequential,
}

impl Pattern {
    /// Every pattern, in report order.
    pub const ALL: [Pattern; 3] = [Pattern::Uniform, Pattern::Zipf, Pattern::Sequential];

    /// Its public name (results files, reports).
    pub fn name(self) -> &'static str {
        match self {
            Pattern::Uniform => "uniform",
            Pattern::Zipf => "zipf",
            Pattern::Sequential => "sequential",
        }
    }

    /// The pattern named `name`.
    pub fn named(name: &str) -> Option<Pattern> {
        Pattern::ALL.into_iter().find(|p| p.name() == name)
    }
}

/// What one message does with its n operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Shape {
    /// `kv_get_many` of n keys, a query (the memory tracker charges a query the pages it
    /// accesses, not the ones it writes).
    ReadQuery,
    /// The same reads priced as in an update: every page they write is charged the write fee
    /// too (what n reads cost inside an update that does nothing else).
    ReadInUpdate,
    /// `kv_put_many` of n entries, one transaction (for the maps: n puts in the message).
    WriteOneTransaction,
    /// `kv_put_many` of n entries, one commit each (SQLite only: the maps have no transactions).
    WriteEachCommitted,
}

impl Shape {
    /// Every shape, in report order.
    pub const ALL: [Shape; 4] =
        [Shape::ReadQuery, Shape::ReadInUpdate, Shape::WriteOneTransaction, Shape::WriteEachCommitted];

    /// Its public name (results files, reports).
    pub fn name(self) -> &'static str {
        match self {
            Shape::ReadQuery => "read_query",
            Shape::ReadInUpdate => "read_in_update",
            Shape::WriteOneTransaction => "write_one_transaction",
            Shape::WriteEachCommitted => "write_each_committed",
        }
    }

    /// How the reports title it.
    pub fn title(self) -> &'static str {
        match self {
            Shape::ReadQuery => "n reads, a query",
            Shape::ReadInUpdate => "n reads in an update",
            Shape::WriteOneTransaction => "n writes, one transaction",
            Shape::WriteEachCommitted => "n writes, one commit each",
        }
    }

    /// The shape named `name`.
    pub fn named(name: &str) -> Option<Shape> {
        Shape::ALL.into_iter().find(|s| s.name() == name)
    }

    /// Whether the shape writes.
    pub fn writes(self) -> bool {
        matches!(self, Shape::WriteOneTransaction | Shape::WriteEachCommitted)
    }

    /// Whether `backend` has this shape: one commit per entry only where the backend commits
    /// (SQLite, on either canister); a map's n puts in one message are
    /// [`Shape::WriteOneTransaction`].
    pub fn applies_to(self, backend: Backend) -> bool {
        self != Shape::WriteEachCommitted
            || matches!(backend, Backend::Sqlite | Backend::SqliteRowid | Backend::SqliteVfsRowid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_unique() {
        for p in Pattern::ALL {
            assert_eq!(Pattern::named(p.name()), Some(p));
        }
        for s in Shape::ALL {
            assert_eq!(Shape::named(s.name()), Some(s));
        }
        assert_eq!(Pattern::named("gaussian"), None);
        assert_eq!(Shape::named("read"), None);
    }

    #[test]
    fn one_commit_per_entry_is_sqlite_only() {
        let each: Vec<Backend> = BACKENDS.into_iter().filter(|&b| Shape::WriteEachCommitted.applies_to(b)).collect();
        assert_eq!(each, [Backend::Sqlite, Backend::SqliteRowid, Backend::SqliteVfsRowid]);
        assert!(BACKENDS.into_iter().all(|b| Shape::ReadQuery.applies_to(b)));
        assert_eq!(BACKENDS[..4], crate::cells::BACKENDS, "the production canister's four, then ic-sqlite-vfs");
    }

    #[test]
    fn the_base_is_measured_and_counts_grow() {
        assert_eq!(OPS_PER_MESSAGE[0], 0);
        assert!(OPS_PER_MESSAGE.windows(2).all(|w| w[0] < w[1]));
        assert!(*OPS_PER_MESSAGE.last().unwrap() as usize <= crate::api::MAX_KEYS_PER_CALL);
    }
}
