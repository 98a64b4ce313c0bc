//! Measured results keyed by the grid's cells: what `canbench_results.yml` holds, checked against
//! `stablebench_grid::cells::cells()` so that every number a report shows belongs to a known cell
//! (a renamed or removed benchmark is an error, not a silently missing row).

use std::collections::BTreeMap;
use std::fmt;

use stablebench_grid::cells::{self, Backend, Cell, Op};
use stablebench_grid::ic::PageCounts;
use stablebench_grid::profiles::Profile;

pub use super::Model;

/// One canbench measurement: a benchmark's total or one of its scopes (canbench 0.7 fields).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Measurement {
    /// How many times it was entered (the trie cells: 50 timed iterations in `total`, 30 in
    /// `w_avg`).
    pub calls: u64,
    /// Instructions, summed over the calls.
    pub instructions: u64,
    /// Heap growth, 64 KiB wasm pages.
    pub heap_increase: u64,
    /// Stable memory growth, 64 KiB wasm pages.
    pub stable_memory_increase: u64,
}

/// One benchmark's record: its total and its named scopes, and in a mainnet results file the
/// 64 KiB pages it touched.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Record {
    /// What `bench_fn` (or the raw bench's own accounting) measured.
    pub total: Measurement,
    /// The `bench_scope`s by name (`w_avg`, `setup`, `save`, `inserts`, ...).
    pub scopes: BTreeMap<String, Measurement>,
    /// The pages one call accessed and wrote, which mainnet charges (`pages`; mainnet results
    /// only: canbench's PocketIC does not see them).
    pub pages: Option<PageCounts>,
    /// The pages first touched in each scope that ran once inside the measured step
    /// (`scope_pages`; mainnet results only).
    pub scope_pages: BTreeMap<String, PageCounts>,
}

impl Record {
    /// The scope called `name`, if the benchmark recorded it.
    pub fn scope(&self, name: &str) -> Option<&Measurement> {
        self.scopes.get(name)
    }
}

/// Names in a results file that are no cell of the grid.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownCells(pub Vec<String>);

impl fmt::Display for UnknownCells {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} result name(s) are no cell of the grid (stablebench_grid::cells::cells()): {}",
            self.0.len(),
            self.0.join(", ")
        )
    }
}

impl std::error::Error for UnknownCells {}

/// Measured records, each attached to its [`Cell`], in the grid's order.
#[derive(Clone, Debug, Default)]
pub struct Results {
    records: Vec<(Cell, Record)>,
    model: Model,
}

impl Results {
    /// Attaches every named record to its cell (by the cell's canbench name, never by parsing the
    /// name); fails listing every name that is not a cell.
    pub fn new(mut named: BTreeMap<String, Record>) -> Result<Results, UnknownCells> {
        let records = cells::cells().into_iter().filter_map(|c| named.remove(&c.name()).map(|r| (c, r))).collect();
        if !named.is_empty() {
            return Err(UnknownCells(named.into_keys().collect()));
        }
        Ok(Results { records, model: Model::Canbench })
    }

    /// These results, said to follow `model`.
    pub fn with_model(mut self, model: Model) -> Results {
        self.model = model;
        self
    }

    /// The pricing these results follow.
    pub fn model(&self) -> Model {
        self.model
    }

    /// Reads a `canbench_results.yml` (canbench 0.7: `benches.<name>.{total, scopes.<scope>}`,
    /// each with `calls`, `instructions`, `heap_increase`, `stable_memory_increase`) and attaches
    /// every record to its cell; a name that is no cell is an error naming it.
    pub fn from_canbench_yml(text: &str) -> Result<Results, String> {
        Results::from_canbench_ymls(&[("the results file", text)])
    }

    /// [`Results::from_canbench_yml`] over several files, each `(its path, its text)` (one per
    /// canister: `canbench_results.yml` and `vfs/canbench_results.yml`), merged; a name in two
    /// files is an error, and an error names its file. A file whose top-level `model` starts with
    /// `ic` (the runner's `mainnet_results.yml`) is [`Model::Mainnet`], and each of its records
    /// must have its `pages`; files of both models are an error.
    pub fn from_canbench_ymls(files: &[(&str, &str)]) -> Result<Results, String> {
        let mut named = BTreeMap::new();
        let mut models = Vec::new();
        for (file, text) in files {
            let yml: serde_yaml::Value = serde_yaml::from_str(text).map_err(|e| format!("{file}: {e}"))?;
            let model = Results::model_of(&yml);
            models.push(model);
            for (name, record) in Results::named_records(&yml, model).map_err(|e| format!("{file}: {e}"))? {
                if named.insert(name.clone(), record).is_some() {
                    return Err(format!("{name} is in two results files"));
                }
            }
        }
        let model = models.first().copied().unwrap_or_default();
        if models.iter().any(|m| *m != model) {
            return Err("the results files follow different cost models (canbench's and mainnet's)".into());
        }
        Results::new(named).map(|r| r.with_model(model)).map_err(|e| format!("{}: {e}", model.file()))
    }

    fn model_of(yml: &serde_yaml::Value) -> Model {
        match yml["model"].as_str() {
            Some(m) if m.starts_with("ic") => Model::Mainnet,
            _ => Model::Canbench,
        }
    }

    /// The records of a results file by name; in a mainnet one (`model`), each with its pages.
    fn named_records(yml: &serde_yaml::Value, model: Model) -> Result<BTreeMap<String, Record>, String> {
        let benches = yml["benches"].as_mapping().ok_or_else(|| "no `benches` map".to_string())?;
        let measurement = |m: &serde_yaml::Value| {
            let n = |k: &str| m[k].as_u64().unwrap_or(0);
            Measurement {
                calls: n("calls"),
                instructions: n("instructions"),
                heap_increase: n("heap_increase"),
                stable_memory_increase: n("stable_memory_increase"),
            }
        };
        let mut named = BTreeMap::new();
        for (name, r) in benches {
            let name = name.as_str().ok_or_else(|| format!("a bench name is not a string: {name:?}"))?;
            let mut scopes = BTreeMap::new();
            for (k, v) in r["scopes"].as_mapping().into_iter().flatten() {
                let k = k.as_str().ok_or_else(|| format!("{name}: a scope name is not a string"))?;
                scopes.insert(k.to_string(), measurement(v));
            }
            let (pages, scope_pages) = match model {
                Model::Mainnet => (Some(page_counts(&r["pages"], name)?), scope_pages(r, name)?),
                Model::Canbench => (None, BTreeMap::new()),
            };
            named.insert(name.to_string(), Record { total: measurement(&r["total"]), scopes, pages, scope_pages });
        }
        Ok(named)
    }

    /// The record of `cell`, if it was measured.
    pub fn get(&self, cell: &Cell) -> Option<&Record> {
        self.records.iter().find(|(c, _)| c == cell).map(|(_, r)| r)
    }

    /// The measured key-value cell with this operation, size and backend under the backend's
    /// key-value profile ([`Backend::kv_profile`]), and its record.
    pub fn find(&self, op: Op, size: u64, backend: Backend) -> Option<(&Cell, &Record)> {
        self.find_in(op, size, backend, backend.kv_profile())
    }

    /// The measured cell with this operation, size, backend and profile, and its record.
    pub fn find_in(&self, op: Op, size: u64, backend: Backend, profile: Option<Profile>) -> Option<(&Cell, &Record)> {
        self.records
            .iter()
            .find(|(c, _)| c.op == op && c.size == size && c.backend == backend && c.profile == profile)
            .map(|(c, r)| (c, r))
    }

    /// Every measured cell and its record, in the grid's order.
    pub fn iter(&self) -> impl Iterator<Item = (&Cell, &Record)> {
        self.records.iter().map(|(c, r)| (c, r))
    }

    /// Whether any cell matching `pred` was measured.
    pub fn any(&self, pred: impl Fn(&Cell) -> bool) -> bool {
        self.records.iter().any(|(c, _)| pred(c))
    }
}

/// One `pages` map of a mainnet results file; `what` names it in the error.
fn page_counts(p: &serde_yaml::Value, what: &str) -> Result<PageCounts, String> {
    let n = |k: &str| p[k].as_u64().ok_or_else(|| format!("{what}: no pages.{k}"));
    Ok(PageCounts {
        heap_accessed: n("heap_accessed")?,
        heap_written: n("heap_written")?,
        stable_accessed: n("stable_accessed")?,
        stable_written: n("stable_written")?,
    })
}

/// A mainnet benchmark's `scope_pages` (the scopes that ran once inside its measured step), by
/// scope; empty if it has none.
fn scope_pages(r: &serde_yaml::Value, name: &str) -> Result<BTreeMap<String, PageCounts>, String> {
    let mut of = BTreeMap::new();
    for (scope, p) in r.get("scope_pages").and_then(|s| s.as_mapping()).into_iter().flatten() {
        let scope = scope.as_str().ok_or_else(|| format!("{name}: a scope is not a string"))?;
        of.insert(scope.to_string(), page_counts(p, &format!("{name}: scope {scope}"))?);
    }
    Ok(of)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_are_no_cell_are_listed_in_the_error() {
        let mut named = BTreeMap::new();
        named.insert("stable_btreemap_nodestore_10k".to_string(), Record::default());
        named.insert("sqlite_trie_read_7_warm".to_string(), Record::default());
        named.insert("nonsense".to_string(), Record::default());
        let err = Results::new(named).unwrap_err();
        assert_eq!(err.0, vec!["nonsense".to_string(), "sqlite_trie_read_7_warm".to_string()]);
        assert!(err.to_string().contains("nonsense, sqlite_trie_read_7_warm"));
    }

    #[test]
    fn records_are_found_by_cell_not_by_name_prefix() {
        let cell = Cell { op: Op::NodeStore, size: 10_000, backend: Backend::StableBTreeMap, profile: None };
        let record =
            Record { total: Measurement { calls: 1, instructions: 7, ..Default::default() }, ..Default::default() };
        let results = Results::new(BTreeMap::from([(cell.name(), record.clone())])).unwrap();
        assert_eq!(results.get(&cell), Some(&record));
        assert_eq!(results.find(Op::NodeStore, 10_000, Backend::StableBTreeMap).map(|(c, _)| *c), Some(cell));
        assert!(results.find(Op::NodeStore, 100_000, Backend::StableBTreeMap).is_none());
    }

    #[test]
    fn a_mainnet_file_gives_each_record_its_pages_and_a_missing_field_is_an_error() {
        let total = "    total: {calls: 1, instructions: 5, heap_increase: 0, stable_memory_increase: 0}\n";
        let pages = "    pages: {heap_accessed: 3, heap_written: 2, stable_accessed: 1, stable_written: 0}\n";
        let scoped = "    scope_pages:\n      inserts: {heap_accessed: 4, heap_written: 1, stable_accessed: 2, stable_written: 0}\n";
        let cell = Cell { op: Op::NodeStore, size: 10_000, backend: Backend::StableBTreeMap, profile: None };
        let text = format!("model: ic\nbenches:\n  {}:\n{total}{pages}{scoped}", cell.name());
        let results = Results::from_canbench_yml(&text).unwrap();
        let record = results.get(&cell).unwrap();
        let want = PageCounts { heap_accessed: 3, heap_written: 2, stable_accessed: 1, stable_written: 0 };
        assert_eq!(record.pages, Some(want));
        assert_eq!(record.pages.unwrap().accessed(), 4);
        let inserts = PageCounts { heap_accessed: 4, heap_written: 1, stable_accessed: 2, stable_written: 0 };
        assert_eq!(record.scope_pages, BTreeMap::from([("inserts".to_string(), inserts)]));
        // canbench's own files have no pages, and need none.
        let canbench = format!("benches:\n  {}:\n{total}", cell.name());
        assert_eq!(Results::from_canbench_yml(&canbench).unwrap().get(&cell).unwrap().pages, None);
        // A mainnet record without pages, or with a field missing, is an error naming it.
        let no_pages = format!("model: ic\nbenches:\n  {}:\n{total}", cell.name());
        assert!(Results::from_canbench_yml(&no_pages).unwrap_err().contains("no pages.heap_accessed"));
        let short = format!("model: ic\nbenches:\n  {}:\n{total}    pages: {{heap_accessed: 3}}\n", cell.name());
        assert!(Results::from_canbench_yml(&short).unwrap_err().contains("no pages.heap_written"));
        // So is a scope's, and the error names the file it is in.
        let bad_scope = format!(
            "model: ic\nbenches:\n  {}:\n{total}{pages}    scope_pages:\n      x: {{heap_accessed: 4}}\n",
            cell.name()
        );
        let err = Results::from_canbench_ymls(&[("vfs/mainnet_results.yml", &bad_scope)]).unwrap_err();
        assert!(
            err.starts_with("vfs/mainnet_results.yml: ") && err.contains("scope x: no pages.heap_written"),
            "{err}"
        );
        // A record without scope_pages has none.
        let unscoped = format!("model: ic\nbenches:\n  {}:\n{total}{pages}", cell.name());
        assert!(Results::from_canbench_yml(&unscoped).unwrap().get(&cell).unwrap().scope_pages.is_empty());
    }

    #[test]
    fn the_model_comes_from_the_files_and_both_models_at_once_are_an_error() {
        let bench = "benches:\n  stable_btreemap_nodestore_10k:\n    total:\n      calls: 1\n      instructions: 7\n";
        let pages = "    pages: {heap_accessed: 0, heap_written: 0, stable_accessed: 0, stable_written: 0}\n";
        let ic = format!("model: 'ic: mainnet'\n{bench}{pages}");
        let vfs =
            "benches:\n  sqlite_vfs_insert_users_vfs_default:\n    total:\n      calls: 1\n      instructions: 7\n";
        assert_eq!(Results::from_canbench_yml(bench).unwrap().model(), Model::Canbench);
        assert_eq!(Results::from_canbench_yml(&ic).unwrap().model(), Model::Mainnet);
        assert!(Results::from_canbench_ymls(&[("ic", &ic), ("vfs", vfs)])
            .unwrap_err()
            .contains("different cost models"));
    }
}
