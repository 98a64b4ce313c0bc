//! The key-value report: from the grid's measured cells (Substrate's trie benchmark, the heap
//! map's upgrade, rippled's NodeStore timing) to `docs/kv.md`, its charts and the README's
//! DbWeight and NodeStore sections. Every number and every sentence of it is computed from the
//! results and the grid's constants; a cell that was not measured leaves a gap ("–") or a
//! "not measured yet" line, never a panic.

mod charts;
mod markdown;

use stablebench_grid::cells::{Backend, Cache, Op, BACKENDS, DB_WEIGHT_SIZE, TRIE_SIZES};
use stablebench_grid::ic::{self, prices};
use stablebench_grid::profiles::Profile;

use super::ratio_text;
use super::results::{Measurement, Results};

/// The backend every ratio compares with: the first of [`BACKENDS`] (`stable_btreemap`).
pub const BASELINE: Backend = BACKENDS[0];

pub use stablebench_grid::cells::TRIE_OPS;

/// The canbench scope of a trie cell holding the sum of the middle iterations (Substrate's w_avg).
pub const W_AVG_SCOPE: &str = stablebench_grid::scopes::W_AVG;
/// The canbench scope holding a cell's data-set load (canbench-only bulk work).
pub const SETUP_SCOPE: &str = stablebench_grid::scopes::SETUP;
/// The heap map's upgrade cell: writing the map to stable memory (`pre_upgrade`).
pub const SAVE_SCOPE: &str = stablebench_grid::scopes::SAVE;
/// The heap map's upgrade cell: reading it back (`post_upgrade`).
pub const LOAD_SCOPE: &str = stablebench_grid::scopes::LOAD;

/// A title for a trie operation (`Read, warm cache`).
pub fn op_title(op: Op) -> &'static str {
    match op {
        Op::TrieRead(Cache::Warm) => "Read, warm cache",
        Op::TrieRead(Cache::Cold) => "Read, cold cache",
        Op::TrieWrite(Cache::Warm) => "Write, warm cache",
        Op::TrieWrite(Cache::Cold) => "Write, cold cache",
        _ => "other",
    }
}

/// The unit of a trie operation's per-op numbers (`instructions per read`).
pub fn op_unit(op: Op) -> &'static str {
    match op {
        Op::TrieWrite(_) => "instructions per write",
        _ => "instructions per read",
    }
}

/// `value` against `base` (instructions: fewer is faster) in sysrepo's style: "1.23x faster" or
/// "2.10x slower", always at least 1, and "1.00x" within 0.5%.
pub fn versus(value: f64, base: f64) -> String {
    if base <= 0.0 || value <= 0.0 {
        return "–".to_string();
    }
    ratio_text(value / base, 2, "1.00x")
}

/// Substrate's w_avg per operation of a trie read or write cell: the `w_avg` scope (the sum of
/// the middle iterations after sorting) over its `calls` and the operations per iteration.
pub fn w_avg_per_op(results: &Results, op: Op, size: u64, backend: Backend) -> Option<f64> {
    w_avg_per_op_in(results, op, size, backend, backend.kv_profile())
}

/// [`w_avg_per_op`] of the cell under `profile` instead of the backend's key-value profile.
pub fn w_avg_per_op_in(
    results: &Results,
    op: Op,
    size: u64,
    backend: Backend,
    profile: Option<Profile>,
) -> Option<f64> {
    let (cell, record) = results.find_in(op, size, backend, profile)?;
    per_op(record.scope(W_AVG_SCOPE)?, cell.ops_per_iteration())
}

/// The plain mean per operation (Substrate's `avg`): the total over its `calls` (every timed
/// iteration) and the operations per iteration.
pub fn avg_per_op(results: &Results, op: Op, size: u64, backend: Backend) -> Option<f64> {
    let (cell, record) = results.find(op, size, backend)?;
    per_op(&record.total, cell.ops_per_iteration())
}

fn per_op(m: &Measurement, ops_per_iteration: u64) -> Option<f64> {
    (m.calls > 0).then(|| m.instructions as f64 / m.calls as f64 / ops_per_iteration as f64)
}

/// Cycles an operation of `instructions` adds to an update on a 13-node application subnet
/// (`ic::prices`): the per-instruction fee only, since the message's base fee is paid once per
/// message, not per operation. Reads in a query cost no cycles at all.
pub fn cycles_in_update(instructions: f64) -> u64 {
    prices::CYCLES_PER_INSTRUCTION * instructions.round().max(0.0) as u64
}

/// One backend's "IC DbWeight": w_avg per read and per write at [`DB_WEIGHT_SIZE`] keys, the way
/// Substrate derived `RocksDbWeight` (w_avg at 200,000 items), with warm and cold caches.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DbWeight {
    /// The backend.
    pub backend: Backend,
    /// Instructions per read, warm cache.
    pub read_warm: Option<f64>,
    /// Instructions per read, cold cache (as after an upgrade).
    pub read_cold: Option<f64>,
    /// Instructions per write (one put and its commit), warm cache.
    pub write_warm: Option<f64>,
    /// Instructions per write, cold cache.
    pub write_cold: Option<f64>,
}

impl DbWeight {
    fn values(&self) -> [Option<f64>; 4] {
        [self.read_warm, self.read_cold, self.write_warm, self.write_cold]
    }
}

/// The DbWeight of every backend, in [`BACKENDS`] order (unmeasured values are `None`).
pub fn db_weights(results: &Results) -> Vec<DbWeight> {
    BACKENDS
        .into_iter()
        .map(|backend| {
            let w = |op| w_avg_per_op(results, op, DB_WEIGHT_SIZE, backend);
            DbWeight {
                backend,
                read_warm: w(Op::TrieRead(Cache::Warm)),
                read_cold: w(Op::TrieRead(Cache::Cold)),
                write_warm: w(Op::TrieWrite(Cache::Warm)),
                write_cold: w(Op::TrieWrite(Cache::Cold)),
            }
        })
        .collect()
}

pub use stablebench::kv::nodestore::{Hits, Phase};

/// The order the report shows [`Phase::ALL`] in: rippled v2's six columns, then the intended 50/50
/// (an addition of ours, reported last).
pub const COLUMNS: [Phase; 7] = [
    Phase::Inserts,
    Phase::BatchInsert,
    Phase::Fetch5050,
    Phase::OrderedFetch,
    Phase::FetchRandom,
    Phase::FetchMissing,
    Phase::Fetch5050Intended,
];

/// rippled's own six columns ([`COLUMNS`] without our intended 50/50), the README's summary.
pub fn rippled_columns() -> impl Iterator<Item = Phase> {
    COLUMNS.into_iter().filter(|p| *p != Phase::Fetch5050Intended)
}

/// Instructions per operation of a NodeStore phase: the scope over the operations it performed
/// ([`Phase::operations`]: `n`, or the objects of the full batches).
pub fn phase_per_op(results: &Results, backend: Backend, n: u64, phase: Phase) -> Option<f64> {
    phase_per_op_in(results, backend, backend.kv_profile(), n, phase)
}

/// [`phase_per_op`] of the cell under `profile` instead of the backend's key-value profile.
pub fn phase_per_op_in(
    results: &Results,
    backend: Backend,
    profile: Option<Profile>,
    n: u64,
    phase: Phase,
) -> Option<f64> {
    let (cell, record) = results.find_in(Op::NodeStore, n, backend, profile)?;
    let m = record.scope(phase.name())?;
    let ops = phase.operations(cell.size);
    (ops > 0).then(|| m.instructions as f64 / ops as f64)
}

/// Stable memory bytes per object an insert phase added (its scope's growth over the objects it
/// stored).
pub fn phase_stable_bytes_per_object(results: &Results, backend: Backend, n: u64, phase: Phase) -> Option<f64> {
    let (cell, record) = results.find(Op::NodeStore, n, backend)?;
    let m = record.scope(phase.name())?;
    let ops = phase.operations(cell.size);
    (ops > 0).then(|| (m.stable_memory_increase * ic::WASM_PAGE_BYTES) as f64 / ops as f64)
}

/// The heap map's upgrade at one size: `save` (pre_upgrade) and `load` (post_upgrade).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Upgrade {
    /// Keys in the map.
    pub size: u64,
    /// Instructions writing the map to stable memory.
    pub save: u64,
    /// Instructions reading it back.
    pub load: u64,
    /// Stable memory the snapshot grew by, pages.
    pub stable_pages: u64,
    /// Heap the map itself takes, pages (the growth of the setup that built it), if recorded.
    pub heap_pages: Option<u64>,
}

impl Upgrade {
    /// `save + load`: what one upgrade runs (pre_upgrade and post_upgrade share one limit).
    pub fn sum(&self) -> u64 {
        self.save + self.load
    }

    /// Whether it fits one upgrade ([`ic::INSTALL_INSTRUCTION_LIMIT`]).
    pub fn fits(&self) -> bool {
        self.sum() <= ic::INSTALL_INSTRUCTION_LIMIT
    }
}

/// The heap map's measured upgrades, smallest first.
pub fn upgrades(results: &Results) -> Vec<Upgrade> {
    TRIE_SIZES
        .into_iter()
        .filter_map(|size| {
            let (_, r) = results.find(Op::TrieUpgrade, size, Backend::HeapBTreeMap)?;
            let (save, load) = (r.scope(SAVE_SCOPE)?, r.scope(LOAD_SCOPE)?);
            // The upgrade cell records only `save` and `load`: the map's heap is its trie cells' setup.
            let heap_pages = setup(results, Backend::HeapBTreeMap, size).map(|m| m.heap_increase);
            Some(Upgrade {
                size,
                save: save.instructions,
                load: load.instructions,
                stable_pages: save.stable_memory_increase,
                heap_pages,
            })
        })
        .collect()
}

/// The `setup` scope of a backend's trie cells at `size` (the data-set load; every trie cell of
/// that backend and size loads the same data, so the costliest one recorded stands for them).
pub fn setup(results: &Results, backend: Backend, size: u64) -> Option<Measurement> {
    TRIE_OPS
        .into_iter()
        .filter_map(|op| results.find(op, size, backend).and_then(|(_, r)| r.scope(SETUP_SCOPE).copied()))
        .max_by_key(|m| m.instructions)
}

/// Heap bytes per key the setup grew by at `size` (SQLite: mostly its page cache).
pub fn heap_bytes_per_key(results: &Results, backend: Backend, size: u64) -> Option<f64> {
    let m = setup(results, backend, size)?;
    (size > 0).then(|| (m.heap_increase * ic::WASM_PAGE_BYTES) as f64 / size as f64)
}

/// Keys at which `backend`'s heap would reach the default wasm memory limit, extrapolating the
/// heap growth per key of its largest measured setup linearly; `None` if not measured or if the
/// setup did not grow the heap. `stable_btreemap` keeps its nodes in stable memory, so the heap its
/// setup grows is the benchmark's own (the generated data set) and nothing is extrapolated: `None`.
pub fn heap_limit_keys(results: &Results, backend: Backend) -> Option<f64> {
    if backend == Backend::StableBTreeMap {
        return None;
    }
    let size = TRIE_SIZES.into_iter().rev().find(|s| setup(results, backend, *s).is_some())?;
    let per_key = heap_bytes_per_key(results, backend, size)?;
    (per_key > 0.0).then(|| ic::DEFAULT_WASM_MEMORY_LIMIT_BYTES as f64 / per_key)
}

/// Where the production canister stops `backend`'s heap from growing, and at about how many keys
/// (its largest setup's heap growth per key, extrapolated linearly): the heap map's refusal of
/// writes past [`ic::HEAP_MAP_CEILING_BYTES`], SQLite's page-cache bound (a quarter of the default
/// `wasm_memory_limit`, `stablebench_pragmas::cache_bound_kib`; past it the database stays in
/// stable memory and the heap stops growing). `None` for `stable_btreemap` and what was not measured.
pub fn production_heap_bound(results: &Results, backend: Backend) -> Option<(f64, HeapBound)> {
    let bound = match backend {
        Backend::HeapBTreeMap => HeapBound::MapRefusesWrites,
        b if b.is_sqlite() => HeapBound::PageCacheCap,
        _ => return None,
    };
    let size = TRIE_SIZES.into_iter().rev().find(|s| setup(results, backend, *s).is_some())?;
    let per_key = heap_bytes_per_key(results, backend, size)?;
    (per_key > 0.0).then(|| (bound.bytes() as f64 / per_key, bound))
}

/// The bound [`production_heap_bound`] names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeapBound {
    /// `kv_load` and `kv_put` refuse heap-map writes past [`ic::HEAP_MAP_CEILING_BYTES`].
    MapRefusesWrites,
    /// The production canister caps SQLite's page cache at a quarter of `wasm_memory_limit`.
    PageCacheCap,
}

impl HeapBound {
    /// The heap bytes at which it binds, at the default `wasm_memory_limit`.
    pub fn bytes(self) -> u64 {
        match self {
            HeapBound::MapRefusesWrites => ic::HEAP_MAP_CEILING_BYTES,
            HeapBound::PageCacheCap => {
                stablebench_pragmas::cache_bound_kib(stablebench_pragmas::DEFAULT_WASM_MEMORY_LIMIT_BYTES) * 1024
            }
        }
    }
}

/// The generated key-value documents.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KvReport {
    /// `docs/kv.md`.
    pub markdown: String,
    /// `docs/kv_trie.svg`: w_avg per operation against size, one panel per operation.
    pub trie_svg: String,
    /// `docs/kv_nodestore.svg`: instructions per operation per NodeStore phase.
    pub nodestore_svg: String,
    /// The README's DbWeight table (between `<!-- dbweight-table:begin/end -->`).
    pub readme_dbweight: String,
    /// The README's NodeStore summary (between `<!-- nodestore-summary:begin/end -->`).
    pub readme_nodestore: String,
    /// Which backend for which access pattern, in words computed from the numbers: the list
    /// `docs/kv.md` opens with, also in the README (between `<!-- kv-patterns:begin/end -->`).
    pub patterns: String,
}

/// Generates the key-value report. `hits` gives the exact fetch hits of a NodeStore run of `n`
/// objects (see [`Hits`]), or `None` where they are not known; `command` is how the results were
/// produced and `date` when. `shapes` (`message_shapes_results.yml` at the DbWeight size) gives
/// the DbWeight section under mainnet's model, where an operation's cost is not a constant.
pub fn generate(
    results: &Results,
    hits: &dyn Fn(u64) -> Option<Hits>,
    command: &str,
    date: &str,
    shapes: Option<&crate::shapes::Size>,
) -> KvReport {
    let (patterns, dbweight) = (markdown::patterns(results, shapes), markdown::dbweight_table(results));
    KvReport {
        markdown: markdown::document(results, hits, command, date, &patterns, &dbweight, shapes),
        trie_svg: charts::trie(results),
        nodestore_svg: charts::nodestore(results),
        readme_dbweight: markdown::readme_dbweight(results, &dbweight),
        readme_nodestore: markdown::nodestore_summary(results),
        patterns,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use stablebench_grid::cells::{cells, Cell, Workload, NODESTORE_SIZES};

    use super::super::results::Record;
    use super::*;

    #[test]
    fn the_columns_show_every_phase_once_and_rippleds_are_all_but_the_intended_one() {
        let mut columns = COLUMNS.to_vec();
        columns.sort_by_key(|p| *p as usize);
        assert_eq!(columns, Phase::ALL.to_vec(), "kv::COLUMNS lists each NodeStore phase once");
        let rippled: Vec<Phase> = rippled_columns().collect();
        assert_eq!(rippled.len(), 6);
        assert!(!rippled.contains(&Phase::Fetch5050Intended));
    }

    /// A trie read/write record: 50 iterations of `per_iteration`, the middle 30 costing
    /// `per_iteration_mid` each, and a setup.
    fn trie_record(per_iteration: u64, per_iteration_mid: u64, setup: Measurement) -> Record {
        let total = Measurement { calls: 50, instructions: 50 * per_iteration, ..Default::default() };
        let w = Measurement { calls: 30, instructions: 30 * per_iteration_mid, ..Default::default() };
        Record {
            total,
            scopes: BTreeMap::from([(W_AVG_SCOPE.to_string(), w), (SETUP_SCOPE.to_string(), setup)]),
            ..Default::default()
        }
    }

    /// Synthetic results for every key-value cell: `cost(backend, op, size)` instructions per
    /// operation (w_avg); avg 10% above it.
    fn synthetic(skip: impl Fn(&Cell) -> bool) -> Results {
        let mut named = BTreeMap::new();
        for c in cells().into_iter().filter(|c| matches!(c.workload(), Workload::Trie | Workload::NodeStore)) {
            if skip(&c) {
                continue;
            }
            let factor = match c.backend {
                Backend::StableBTreeMap => 2,
                Backend::HeapBTreeMap => 1,
                Backend::Sqlite => 6,
                Backend::SqliteRowid => 8,
                Backend::SqliteVfs => 5,
                Backend::SqliteVfsRowid => 7,
                Backend::Blob => unreachable!("blob is a sysrepo store"),
            };
            let setup = Measurement {
                calls: 1,
                instructions: c.size * 100_000 * factor,
                heap_increase: c.size * factor / 100,
                stable_memory_increase: c.size / 50,
            };
            let record = match c.op {
                Op::TrieRead(cache) | Op::TrieWrite(cache) => {
                    let cold = if cache == Cache::Cold && c.backend.is_sqlite() { 3 } else { 1 };
                    let write = if matches!(c.op, Op::TrieWrite(_)) { 10 } else { 1 };
                    let per_op = 1_000 * factor * cold * write * (1 + c.size.ilog10() as u64);
                    let per_iteration = per_op * c.ops_per_iteration();
                    trie_record(per_iteration * 11 / 10, per_iteration, setup)
                }
                Op::TrieUpgrade => Record {
                    total: Measurement { calls: 1, instructions: c.size * 3_000, ..Default::default() },
                    scopes: BTreeMap::from([
                        (
                            SAVE_SCOPE.into(),
                            Measurement {
                                calls: 1,
                                instructions: c.size * 1_000,
                                stable_memory_increase: 7,
                                ..Default::default()
                            },
                        ),
                        (
                            LOAD_SCOPE.into(),
                            Measurement { calls: 1, instructions: c.size * 2_000, ..Default::default() },
                        ),
                    ]),
                    ..Default::default()
                },
                Op::NodeStore => Record {
                    total: Measurement::default(),
                    scopes: COLUMNS
                        .iter()
                        .enumerate()
                        .map(|(i, p)| {
                            let m = Measurement {
                                calls: 1,
                                instructions: c.size * 1_000 * factor * (i as u64 + 1),
                                heap_increase: 0,
                                stable_memory_increase: if p.is_insert() { c.size / 20 } else { 0 },
                            };
                            (p.name().to_string(), m)
                        })
                        .collect(),
                    ..Default::default()
                },
                Op::UsersOrders(_) | Op::Sysrepo { .. } | Op::Chia(_) | Op::Declared(_) => unreachable!(),
            };
            named.insert(c.name(), record);
        }
        Results::new(named).expect("synthetic names are cells")
    }

    fn hits(n: u64) -> Option<Hits> {
        Some(Hits {
            fetch_50_50: 1,
            fetch_50_50_intended: n / 2,
            ordered_fetch: n,
            fetch_random: n * 63 / 100,
            fetch_missing: 0,
        })
    }

    #[test]
    fn ratios_are_at_least_one_and_say_faster_or_slower() {
        assert_eq!(versus(100.0, 123.0), "1.23x faster");
        assert_eq!(versus(210.0, 100.0), "2.10x slower");
        assert_eq!(versus(1004.0, 1000.0), "1.00x");
        assert_eq!(versus(996.0, 1000.0), "1.00x");
        assert_eq!(versus(10.0, 0.0), "–");
        for (v, b) in [(1.0, 3.0), (3.0, 1.0), (5.0, 7.0)] {
            let text = versus(v, b);
            let x: f64 = text.split('x').next().unwrap().parse().unwrap();
            assert!(x >= 1.0, "{text}");
        }
    }

    #[test]
    fn w_avg_per_op_divides_the_scope_by_its_calls_and_the_ops_per_iteration() {
        let read = Cell { op: Op::TrieRead(Cache::Warm), size: 1_000, backend: Backend::StableBTreeMap, profile: None };
        let write = Cell { op: Op::TrieWrite(Cache::Warm), ..read };
        // 30 middle iterations of 100 reads costing 4,200,000 each: 42,000 per read.
        let named = BTreeMap::from([
            (read.name(), trie_record(5_000_000, 4_200_000, Measurement::default())),
            (write.name(), trie_record(90_000, 80_000, Measurement::default())),
        ]);
        let results = Results::new(named).unwrap();
        assert_eq!(w_avg_per_op(&results, read.op, 1_000, read.backend), Some(42_000.0));
        assert_eq!(avg_per_op(&results, read.op, 1_000, read.backend), Some(50_000.0));
        assert_eq!(w_avg_per_op(&results, write.op, 1_000, write.backend), Some(80_000.0));
        assert_eq!(w_avg_per_op(&results, read.op, 10_000, read.backend), None);
    }

    #[test]
    fn the_dbweight_row_of_each_backend_is_its_w_avg_at_200k_keys() {
        let results = synthetic(|_| false);
        let weights = db_weights(&results);
        assert_eq!(weights.iter().map(|w| w.backend).collect::<Vec<_>>(), BACKENDS.to_vec());
        let digits = (1 + DB_WEIGHT_SIZE.ilog10()) as f64; // the synthetic cost grows with the size's digits
        let sqlite = weights.iter().find(|w| w.backend == Backend::Sqlite).unwrap();
        assert_eq!(sqlite.read_warm, Some(6_000.0 * digits));
        assert_eq!(sqlite.read_cold, Some(18_000.0 * digits));
        assert_eq!(sqlite.write_warm, Some(60_000.0 * digits));
        let table = markdown::dbweight_table(&results);
        assert_eq!(table.lines().count(), 2 + BACKENDS.len());
        let row = table.lines().find(|l| l.starts_with("| `sqlite` |")).unwrap();
        assert!(row.contains("36,000 instructions = 36,000 cycles"), "{row}");
        assert_eq!(cycles_in_update(36_000.4), 36_000);
    }

    #[test]
    fn the_heap_limit_is_extrapolated_for_backends_that_keep_data_in_the_heap_only() {
        let results = synthetic(|_| false);
        // Every synthetic setup grows the heap, the StableBTreeMap's too (as the benchmark's own
        // generated data does); only the heap map and SQLite's page cache are extrapolated.
        assert!(heap_bytes_per_key(&results, Backend::StableBTreeMap, DB_WEIGHT_SIZE).unwrap() > 0.0);
        assert_eq!(heap_limit_keys(&results, Backend::StableBTreeMap), None);
        for b in [Backend::HeapBTreeMap, Backend::Sqlite, Backend::SqliteRowid] {
            let per_key = heap_bytes_per_key(&results, b, DB_WEIGHT_SIZE).unwrap();
            assert_eq!(heap_limit_keys(&results, b), Some(ic::DEFAULT_WASM_MEMORY_LIMIT_BYTES as f64 / per_key));
        }
        let md = generate(&results, &hits, "test", "2026-01-01", None).markdown;
        assert!(md.contains("| none: its data is in stable memory |"));
        assert!(!md.contains("`stable_btreemap` (its heap)"));
    }

    #[test]
    fn the_production_canisters_own_bounds_end_the_heap_extrapolations() {
        let results = synthetic(|_| false);
        assert_eq!(production_heap_bound(&results, Backend::StableBTreeMap), None);
        let per_key = |b| heap_bytes_per_key(&results, b, DB_WEIGHT_SIZE).unwrap();
        let (keys, bound) = production_heap_bound(&results, Backend::HeapBTreeMap).unwrap();
        assert_eq!(
            (keys, bound),
            (ic::HEAP_MAP_CEILING_BYTES as f64 / per_key(Backend::HeapBTreeMap), HeapBound::MapRefusesWrites)
        );
        // Half the limit: the refusal comes at half the keys the limit alone would allow.
        assert_eq!(keys * 2.0, heap_limit_keys(&results, Backend::HeapBTreeMap).unwrap());
        for b in [Backend::Sqlite, Backend::SqliteRowid] {
            let (keys, bound) = production_heap_bound(&results, b).unwrap();
            assert_eq!(bound, HeapBound::PageCacheCap);
            assert_eq!(bound.bytes(), ic::DEFAULT_WASM_MEMORY_LIMIT_BYTES / 4, "a quarter of the limit");
            assert_eq!(keys * 4.0, heap_limit_keys(&results, b).unwrap());
        }
        let patterns = generate(&results, &hits, "test", "2026-01-01", None).patterns;
        let heap = patterns.lines().find(|l| l.starts_with("- **Heap**")).unwrap();
        assert!(
            heap.contains("takes no more writes at about") && heap.contains("reaches the canister's cap"),
            "{heap}"
        );
        assert!(!heap.contains("would be reached by"), "no extrapolation past the bounds: {heap}");
    }

    #[test]
    fn a_nodestore_phase_is_divided_by_the_operations_it_performed() {
        let results = synthetic(|_| false);
        let n = 10_000;
        for (i, phase) in COLUMNS.iter().enumerate() {
            let scope = results.find(Op::NodeStore, n, Backend::Sqlite).unwrap().1.scope(phase.name()).unwrap();
            assert_eq!(scope.instructions, n * 1_000 * 6 * (i as u64 + 1), "the synthetic cost of {phase:?}");
            // The short final batch (10,000 mod 128 = 16 objects) is never stored.
            let ops = if *phase == Phase::BatchInsert { 9_984 } else { n };
            assert_eq!(
                phase_per_op(&results, Backend::Sqlite, n, *phase),
                Some(scope.instructions as f64 / ops as f64),
                "{phase:?}"
            );
        }
    }

    #[test]
    fn a_backend_missing_at_a_size_leaves_a_gap_not_a_crash() {
        let results = synthetic(|c| c.backend == Backend::SqliteRowid && (c.size == 10_000 || c.op == Op::NodeStore));
        let report = generate(&results, &hits, "test", "2026-01-01", None);
        let row = report.markdown.lines().find(|l| l.starts_with("| 10,000 |")).unwrap();
        assert!(row.trim_end().ends_with("| – |"), "{row}");
        assert!(!report.markdown.contains("| `sqlite_rowid` | 10,000 |"));
        assert!(report.trie_svg.contains("sqlite_rowid"));
    }

    #[test]
    fn nothing_measured_gives_not_measured_yet_lines() {
        let report = generate(&Results::default(), &|_| None, "test", "2026-01-01", None);
        assert!(report.readme_dbweight.starts_with("_Not measured yet"));
        assert!(report.readme_nodestore.starts_with("_Not measured yet"));
        assert!(report.markdown.contains("## Which backend for which pattern\n\n_Not measured yet"));
        assert!(report.trie_svg.contains("not measured yet"));
    }

    #[test]
    fn the_patterns_are_computed_from_the_numbers() {
        let results = synthetic(|_| false);
        let text = markdown::patterns(&results, None);
        // heap map (factor 1) against stable_btreemap (factor 2): 2x; sqlite_rowid (8): 8x.
        assert!(text.contains("`heap_btreemap` is the cheapest at 6,000 instructions per read, 2.00x faster than `stable_btreemap` (12,000) and 8.00x faster than `sqlite_rowid` (48,000)"), "{text}");
        assert!(text.contains("**Writes, one put and its commit, cold cache** at 200,000 keys: `heap_btreemap` is the cheapest at 60,000 instructions per write"), "{text}");
        // The heap map's extrapolation ends at the canister's refusal, half the 3 GiB limit.
        assert!(text.contains("`heap_btreemap` takes no more writes at about 2,460,000 keys"), "{text}");
        assert!(text.contains("`sqlite` 3.00x slower"), "{text}");
        assert!(text.contains("`stable_btreemap` 1.00x"), "{text}");
        // Upgrade at the largest size, 1,000,000 keys: 3 B of 300 B.
        assert!(text.contains("at 1,000,000 keys the heap map pays 3.00 B instructions per upgrade"), "{text}");
        // The upgrade's extrapolation (100,000,000 keys) lies past that refusal: it ends there.
        assert!(
            text.contains("at most about 2,460,000 keys (it refuses writes past that), upgrades in about 7.37 B"),
            "{text}"
        );
        assert!(!text.contains("about 100,000,000 keys"), "{text}");
        assert!(
            text.contains(
                // 1.2 B over the 99,968 objects of the full batches
                "pays 6,000 instructions per object with one commit each and 12,004 in batches, 2.00x slower"
            ),
            "{text}"
        );
    }

    #[test]
    fn the_nodestore_table_has_a_ratio_row_under_each_other_backend() {
        let results = synthetic(|_| false);
        let report = generate(&results, &hits, "test", "2026-01-01", None);
        let md = &report.markdown;
        assert_eq!(md.matches("| ↳ vs `stable_btreemap` |").count(), (BACKENDS.len() - 1) * NODESTORE_SIZES.len());
        let sqlite = md.lines().find(|l| l.starts_with("| `sqlite` | 10,000 | 6,000 |")).unwrap();
        assert!(sqlite.contains("| 42,000 |"), "{sqlite}");
        assert!(md.contains("| 10,000 | 1 (0.0100%) | 10,000 (100%) | 6,300 (63.0%) | 0 (0%) | 5,000 (50.0%) |"));
        // 500 pages per 10,000 objects: 3,277 bytes per object; per 9,984 batched objects: 3,282.
        assert!(md.contains("| `stable_btreemap` | 10,000 | 3,277 | 3,282 | 62.5 |"), "{md}");
    }

    #[test]
    fn setups_over_the_update_limit_are_flagged_canbench_only() {
        let results = synthetic(|_| false);
        let report = generate(&results, &hits, "test", "2026-01-01", None);
        // sqlite_rowid at 200,000 keys: 160 B instructions of setup.
        let row =
            report.markdown.lines().find(|l| l.starts_with("| `sqlite_rowid` | trie setup, 200,000 keys |")).unwrap();
        assert!(row.contains("canbench-only, needs chunked setup in production"), "{row}");
        let small =
            report.markdown.lines().find(|l| l.starts_with("| `heap_btreemap` | trie setup, 200 keys |")).unwrap();
        assert!(small.ends_with("| yes |"), "{small}");
    }
}
