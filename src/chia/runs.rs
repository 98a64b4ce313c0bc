//! The sorted-runs schema, the analog of the original's `cdb/schemas/flat_file_schema.py` and
//! `sqlite_row_schema.py` (`cdb/hashdb/row_array_db.py`, `flat_file_array_storage.py`): the hash-db
//! tables ([`super::hashdb`]) in SQLite, and the name → id lookup as append-only **sorted runs** of
//! 40-byte rows in stable memory, which REPORT.md calls a "baby LSM tree".
//!
//! Every flush writes its new (name, id) rows as one run, sorted by name; a lookup binary-searches
//! each run, newest first. When there are [`MERGE_AT`] (10) runs or more, the two smallest are
//! merged into one (the original's `RowArrayDB.merge`), so at most 9 runs remain after every
//! flush. A row is a 32-byte name and the id as a big-endian u64 (the original's flat files pack
//! the id in the machine's byte order, `struct` format `32sQ`, also 40 bytes).
//!
//! **Space.** A run is never rewritten in place: a merge appends the merged run at the end of the
//! used space, and the space of the two runs it replaces is not reused (the original deletes their
//! files). [`RunStore::wasted_bytes`] reports that space; with flushes of equal size, each row is
//! rewritten about log2(flushes / 9) times, so the waste is that many times the live rows.
//!
//! **Rewind.** Runs are append-only, so a rewind does not delete rows: it records the ids it drops
//! as a *dead range* (SQLite's `AUTOINCREMENT` never hands them out again), lookups skip rows with
//! dead ids, and merges drop them, as an LSM tree's range tombstones do. At most
//! [`MAX_DEAD_RANGES`] are kept; one more compacts every run into one without dead rows and clears
//! them.
//!
//! **Reverse lookup.** As for [`super::kv`], the coin-name array ([`super::names`]) in a second
//! `Memory`.
//!
//! **Layout** of the runs' `Memory` (integers little-endian, except the ids in the rows):
//!
//! ```text
//! 0     magic "SBCHRUNS" | version u32 = 1 | run count u32
//! 16    end of the used space u64 | wasted bytes u64 | largest id added u64
//! 40    dead range count u32 | reserved u32
//! 48    16 run slots: byte offset u64, row count u64 (oldest run first)
//! 304   32 dead ranges: first id u64, last id u64
//! 1024  the runs
//! ```
//!
//! The header is rewritten whenever the directory changes, so the store survives reopening its
//! memory ([`RunStore::init`]).

use std::cmp::{Ordering, Reverse};

use ic_stable_structures::Memory;
use rusqlite::Connection;

use super::hashdb::{self, CoinIndex, HashDb};
use super::names::{grow_to, Names};
use super::Hash;
use crate::{Error, Result};

/// The first 8 bytes of the runs' memory.
pub const MAGIC: [u8; 8] = *b"SBCHRUNS";

/// The layout version [`RunStore`] writes and reads.
pub const VERSION: u32 = 1;

/// Bytes per row: a 32-byte name and a u64 id.
pub const ROW_LEN: u64 = 40;

/// Runs at which the two smallest are merged (the original's threshold).
pub const MERGE_AT: usize = 10;

/// Dead ranges kept before a rewind compacts every run into one.
pub const MAX_DEAD_RANGES: usize = 32;

/// Run slots in the header (more than ever used: at most [`MERGE_AT`] runs exist at once).
const RUN_SLOTS: usize = 16;
const RUNS_AT: u64 = 48;
const DEAD_AT: u64 = RUNS_AT + 16 * RUN_SLOTS as u64;
const HEADER_LEN: u64 = DEAD_AT + 16 * MAX_DEAD_RANGES as u64;

/// Where the first run starts.
pub const DATA_START: u64 = 1024;

/// Rows read or written per stable-memory call while merging (40 KiB).
const CHUNK_ROWS: u64 = 1024;

/// One sorted run: `rows` rows from byte `offset`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run {
    /// Byte offset of the first row.
    pub offset: u64,
    /// Number of rows.
    pub rows: u64,
}

impl Run {
    fn bytes(&self) -> u64 {
        self.rows * ROW_LEN
    }
}

/// The sorted runs of (name, id) rows in one `Memory`.
pub struct RunStore<M: Memory> {
    memory: M,
    runs: Vec<Run>,
    end: u64,
    wasted: u64,
    max_id: u64,
    dead: Vec<(u64, u64)>,
}

impl<M: Memory> RunStore<M> {
    /// Opens the store in `memory`, or starts an empty one if the memory is empty or all zeros
    /// where the header goes. Fails if the memory holds something else.
    pub fn init(memory: M) -> Result<Self> {
        let mut header = vec![0u8; HEADER_LEN as usize];
        if memory.size() > 0 {
            memory.read(0, &mut header);
        }
        if header[..8] == [0; 8] {
            grow_to(&memory, DATA_START, "the sorted runs")?;
            let store = RunStore { memory, runs: Vec::new(), end: DATA_START, wasted: 0, max_id: 0, dead: Vec::new() };
            store.write_header();
            return Ok(store);
        }
        let bad = |what: String| Error::InvalidArgument(format!("chia: the memory holds no sorted runs: {what}"));
        if header[..8] != MAGIC {
            return Err(bad("wrong magic".into()));
        }
        let u32_at = |at: usize| u32::from_le_bytes(header[at..at + 4].try_into().expect("4 bytes"));
        let u64_at = |at: usize| u64::from_le_bytes(header[at..at + 8].try_into().expect("8 bytes"));
        if u32_at(8) != VERSION {
            return Err(bad(format!("version {}", u32_at(8))));
        }
        let (run_count, end, wasted, max_id, dead_count) =
            (u32_at(12) as usize, u64_at(16), u64_at(24), u64_at(32), u32_at(40) as usize);
        if run_count > RUN_SLOTS || dead_count > MAX_DEAD_RANGES {
            return Err(bad(format!("{run_count} runs, {dead_count} dead ranges")));
        }
        if end < DATA_START || end > memory.size() * stablebench_grid::ic::WASM_PAGE_BYTES {
            return Err(bad(format!("used space ends at {end}, past the memory")));
        }
        let runs: Vec<Run> = (0..run_count)
            .map(|i| Run { offset: u64_at(RUNS_AT as usize + 16 * i), rows: u64_at(RUNS_AT as usize + 16 * i + 8) })
            .collect();
        if runs.iter().any(|r| r.offset < DATA_START || r.offset.saturating_add(r.bytes()) > end) {
            return Err(bad("a run lies outside the used space".into()));
        }
        let dead = (0..dead_count)
            .map(|i| (u64_at(DEAD_AT as usize + 16 * i), u64_at(DEAD_AT as usize + 16 * i + 8)))
            .collect();
        Ok(RunStore { memory, runs, end, wasted, max_id, dead })
    }

    /// The runs, oldest first.
    pub fn runs(&self) -> &[Run] {
        &self.runs
    }

    /// Rows in all runs (dead ones included until a merge drops them).
    pub fn rows(&self) -> u64 {
        self.runs.iter().map(|r| r.rows).sum()
    }

    /// Bytes of the memory in use: the header and every run written, merged-away ones included.
    pub fn used_bytes(&self) -> u64 {
        self.end
    }

    /// Bytes of runs that merges replaced: written once, no longer read, never reused.
    pub fn wasted_bytes(&self) -> u64 {
        self.wasted
    }

    /// The largest id ever added.
    pub fn max_id(&self) -> u64 {
        self.max_id
    }

    /// The ids dropped by rewinds whose rows may still be in runs, as inclusive ranges.
    pub fn dead_ranges(&self) -> &[(u64, u64)] {
        &self.dead
    }

    /// Writes `rows` as a new run (sorted here), then merges the two smallest runs while there
    /// are [`MERGE_AT`] or more. Names must not be stored yet under a live id.
    pub fn add(&mut self, mut rows: Vec<(Hash, u64)>) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        rows.sort_by_key(|row| row.0);
        let bytes = rows.len() as u64 * ROW_LEN;
        grow_to(&self.memory, self.end + bytes, "the sorted runs")?;
        let mut buf = Vec::with_capacity(bytes as usize);
        for (name, id) in &rows {
            buf.extend_from_slice(name);
            buf.extend_from_slice(&id.to_be_bytes());
            self.max_id = self.max_id.max(*id);
        }
        self.memory.write(self.end, &buf);
        self.runs.push(Run { offset: self.end, rows: rows.len() as u64 });
        self.end += bytes;
        while self.runs.len() >= MERGE_AT {
            self.merge_two_smallest()?;
        }
        self.write_header();
        Ok(())
    }

    /// The live id of `name`: each run binary-searched, newest first; rows with dead ids skipped.
    pub fn get(&self, name: &Hash) -> Option<u64> {
        self.runs.iter().rev().filter_map(|run| self.search(run, name)).find(|&id| !self.is_dead(id))
    }

    /// Drops every id above `last` (a rewind): records them as a dead range, merged with the
    /// ranges it touches; compacts if that makes more than [`MAX_DEAD_RANGES`].
    pub fn forget_above(&mut self, last: u64) -> Result<()> {
        if last >= self.max_id {
            return Ok(());
        }
        let (mut first, final_id) = (last + 1, self.max_id);
        // Every range ends at or below `max_id`: those reaching `first - 1` or beyond join the new one.
        self.dead.retain(|&(lo, hi)| {
            if hi + 1 >= first {
                first = first.min(lo);
                false
            } else {
                true
            }
        });
        self.dead.push((first, final_id));
        if self.dead.len() > MAX_DEAD_RANGES {
            self.compact()?;
        }
        self.write_header();
        Ok(())
    }

    /// Merges every run into one, dropping the rows with dead ids, and clears the dead ranges.
    pub fn compact(&mut self) -> Result<()> {
        let all = std::mem::take(&mut self.runs);
        if !all.is_empty() {
            let merged = self.merge(&all)?;
            self.wasted += all.iter().map(Run::bytes).sum::<u64>();
            self.runs.extend(merged);
        }
        self.dead.clear();
        self.write_header();
        Ok(())
    }

    fn is_dead(&self, id: u64) -> bool {
        self.dead.iter().any(|&(lo, hi)| lo <= id && id <= hi)
    }

    /// Binary search of one run.
    fn search(&self, run: &Run, name: &Hash) -> Option<u64> {
        let (mut lo, mut hi) = (0, run.rows);
        let mut row = [0u8; ROW_LEN as usize];
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            self.memory.read(run.offset + mid * ROW_LEN, &mut row);
            match row[..32].cmp(&name[..]) {
                Ordering::Equal => return Some(u64::from_be_bytes(row[32..].try_into().expect("8 bytes"))),
                Ordering::Less => lo = mid + 1,
                Ordering::Greater => hi = mid,
            }
        }
        None
    }

    /// Replaces the two smallest runs (the older first on ties) by their merge, appended as the
    /// newest run.
    fn merge_two_smallest(&mut self) -> Result<()> {
        let mut order: Vec<usize> = (0..self.runs.len()).collect();
        order.sort_by_key(|&i| (self.runs[i].rows, i));
        let (a, b) = (order[0].min(order[1]), order[0].max(order[1]));
        let pair = [self.runs[a], self.runs[b]];
        let merged = self.merge(&pair)?;
        self.runs.remove(b);
        self.runs.remove(a);
        self.wasted += pair.iter().map(Run::bytes).sum::<u64>();
        self.runs.extend(merged);
        Ok(())
    }

    /// Writes the merge of `inputs` at the end of the used space, without rows of dead ids; of two
    /// rows with the same name (which live data never has) the larger id is kept. Returns the new
    /// run, or `None` if no row is left.
    fn merge(&mut self, inputs: &[Run]) -> Result<Option<Run>> {
        let total: u64 = inputs.iter().map(Run::bytes).sum();
        grow_to(&self.memory, self.end + total, "the sorted runs")?;
        let mut readers: Vec<RunReader> = inputs.iter().map(|&run| RunReader::new(run)).collect();
        let mut heads: Vec<Option<(Hash, u64)>> = readers.iter_mut().map(|r| r.next(&self.memory)).collect();
        let start = self.end;
        let mut out = Vec::with_capacity((CHUNK_ROWS * ROW_LEN) as usize);
        let mut written = 0u64;
        let mut last: Option<Hash> = None;
        while let Some(i) = smallest(&heads) {
            let (name, id) = heads[i].take().expect("a head");
            heads[i] = readers[i].next(&self.memory);
            if self.is_dead(id) || last == Some(name) {
                continue;
            }
            last = Some(name);
            out.extend_from_slice(&name);
            out.extend_from_slice(&id.to_be_bytes());
            written += 1;
            if out.len() as u64 >= CHUNK_ROWS * ROW_LEN {
                self.memory.write(self.end, &out);
                self.end += out.len() as u64;
                out.clear();
            }
        }
        if !out.is_empty() {
            self.memory.write(self.end, &out);
            self.end += out.len() as u64;
        }
        Ok((written > 0).then_some(Run { offset: start, rows: written }))
    }

    fn write_header(&self) {
        let mut header = Vec::with_capacity(HEADER_LEN as usize);
        header.extend_from_slice(&MAGIC);
        header.extend_from_slice(&VERSION.to_le_bytes());
        header.extend_from_slice(&(self.runs.len() as u32).to_le_bytes());
        header.extend_from_slice(&self.end.to_le_bytes());
        header.extend_from_slice(&self.wasted.to_le_bytes());
        header.extend_from_slice(&self.max_id.to_le_bytes());
        header.extend_from_slice(&(self.dead.len() as u32).to_le_bytes());
        header.extend_from_slice(&0u32.to_le_bytes());
        for i in 0..RUN_SLOTS {
            let run = self.runs.get(i).copied().unwrap_or(Run { offset: 0, rows: 0 });
            header.extend_from_slice(&run.offset.to_le_bytes());
            header.extend_from_slice(&run.rows.to_le_bytes());
        }
        for i in 0..MAX_DEAD_RANGES {
            let (lo, hi) = self.dead.get(i).copied().unwrap_or((0, 0));
            header.extend_from_slice(&lo.to_le_bytes());
            header.extend_from_slice(&hi.to_le_bytes());
        }
        debug_assert_eq!(header.len() as u64, HEADER_LEN);
        self.memory.write(0, &header);
    }
}

/// The input whose head row comes first: the smallest name, and of equal names the larger id
/// (k ≤ 16 inputs: a linear scan is enough).
fn smallest(heads: &[Option<(Hash, u64)>]) -> Option<usize> {
    heads.iter().enumerate().filter_map(|(i, h)| h.map(|(name, id)| (name, Reverse(id), i))).min().map(|(_, _, i)| i)
}

/// Reads a run's rows in order, [`CHUNK_ROWS`] per stable read.
struct RunReader {
    run: Run,
    next_row: u64,
    buf: Vec<u8>,
    at: usize,
}

impl RunReader {
    fn new(run: Run) -> Self {
        RunReader { run, next_row: 0, buf: Vec::new(), at: 0 }
    }

    fn next<M: Memory>(&mut self, memory: &M) -> Option<(Hash, u64)> {
        if self.at == self.buf.len() {
            let rows = CHUNK_ROWS.min(self.run.rows - self.next_row);
            if rows == 0 {
                return None;
            }
            self.buf.resize((rows * ROW_LEN) as usize, 0);
            memory.read(self.run.offset + self.next_row * ROW_LEN, &mut self.buf);
            self.next_row += rows;
            self.at = 0;
        }
        let row = &self.buf[self.at..self.at + ROW_LEN as usize];
        self.at += ROW_LEN as usize;
        Some((row[..32].try_into().expect("32 bytes"), u64::from_be_bytes(row[32..].try_into().expect("8 bytes"))))
    }
}

/// Creates the `coin` and `block` tables if they do not exist.
pub fn create(conn: &Connection) -> Result<()> {
    hashdb::create_tables(conn)
}

/// The schema: [`HashDb`] over [`RunIndex`].
pub type Runs<'c, M> = HashDb<'c, RunIndex<M>>;

/// The schema over `conn`'s tables (see [`create`]), the runs in `runs_memory` and the coin-name
/// array in `names_memory` (each opened as it is, or started if empty), with the original's batch
/// size.
pub fn open<M: Memory>(conn: &Connection, runs_memory: M, names_memory: M) -> Result<Runs<'_, M>> {
    Ok(HashDb::new(conn, RunIndex::init(runs_memory, names_memory)?))
}

/// The lookup: the sorted runs, and the coin-name array for the reverse.
pub struct RunIndex<M: Memory> {
    runs: RunStore<M>,
    names: Names<M>,
}

impl<M: Memory> RunIndex<M> {
    /// Opens (or starts) the runs in `runs_memory` and the array in `names_memory`.
    pub fn init(runs_memory: M, names_memory: M) -> Result<Self> {
        Ok(RunIndex { runs: RunStore::init(runs_memory)?, names: Names::init(names_memory)? })
    }

    /// The runs.
    pub fn store(&self) -> &RunStore<M> {
        &self.runs
    }
}

impl<M: Memory> CoinIndex for RunIndex<M> {
    /// One [`RunStore::get`] per name.
    fn ids(&mut self, names: &[Hash]) -> Result<Vec<Option<u64>>> {
        Ok(names.iter().map(|n| self.runs.get(n)).collect())
    }

    /// The names into the array, the rows as a new run.
    fn add(&mut self, rows: Vec<(Hash, u64)>) -> Result<()> {
        self.names.put_all(&rows)?;
        self.runs.add(rows)
    }

    /// One array read per id.
    fn names(&mut self, ids: &[u64]) -> Result<Vec<Hash>> {
        ids.iter().map(|&id| self.names.get(id)).collect()
    }

    /// A dead range in the runs, and the array truncated.
    fn truncate(&mut self, last: u64) -> Result<()> {
        self.runs.forget_above(last)?;
        self.names.truncate(last);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use ic_stable_structures::VectorMemory;

    use super::*;

    fn name(i: u64) -> Hash {
        let mut h = [0u8; 32];
        h[..8].copy_from_slice(&i.wrapping_mul(0x9e37_79b9_7f4a_7c15).to_be_bytes());
        h[24..].copy_from_slice(&i.to_be_bytes());
        h
    }

    #[test]
    fn dead_ranges_merge_and_hide_rows_until_a_merge_drops_them() -> Result<()> {
        let mut store = RunStore::init(VectorMemory::default())?;
        store.add((1..=10).map(|i| (name(i), i)).collect())?;
        store.forget_above(6)?;
        assert_eq!(store.dead_ranges(), &[(7, 10)]);
        assert_eq!(store.get(&name(6)), Some(6));
        assert_eq!(store.get(&name(7)), None);
        // Name 8 again under a new id: found, although the dead row is still in the first run.
        store.add(vec![(name(8), 11), (name(12), 12)])?;
        assert_eq!(store.get(&name(8)), Some(11));
        store.forget_above(11)?;
        assert_eq!(store.dead_ranges(), &[(7, 10), (12, 12)]);
        store.forget_above(9)?;
        assert_eq!(store.dead_ranges(), &[(7, 12)]);
        assert_eq!(store.get(&name(8)), None);
        store.compact()?;
        assert_eq!(store.runs().len(), 1);
        assert_eq!(store.rows(), 6);
        assert!(store.dead_ranges().is_empty());
        for i in 1..=6 {
            assert_eq!(store.get(&name(i)), Some(i));
        }
        Ok(())
    }
}
