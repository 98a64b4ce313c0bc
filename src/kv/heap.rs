//! The heap backend: a `std::collections::BTreeMap` in the wasm heap, written whole to stable
//! memory in `pre_upgrade` ([`HeapKv::save`]) and read back in `post_upgrade` ([`HeapKv::load`]).
//!
//! This is the most common persistence pattern of IC canisters: every read and write is a heap
//! operation with no stable-memory cost, and the whole cost moves to the upgrade, where it grows
//! with the size of the map and must fit the upgrade's instruction limit.
//!
//! The stable-memory format (all integers little-endian):
//!
//! ```text
//! header:  magic "SBKVHEAP" (8 bytes) | version u32 = 1 | reserved u32 = 0
//!          | entry count u64 | payload length in bytes u64          (32 bytes)
//! payload: per entry, in key order: key (32 bytes) | value length u32 | value
//! ```
//!
//! The payload length lets [`HeapKv::load`] check that the whole image lies inside the memory
//! before reading any entry, so a truncated or foreign memory gives an error instead of a trap.

use std::collections::BTreeMap;

use ic_stable_structures::Memory;

use super::{Key, KvStore};
use crate::{Error, Result};

/// The first 8 bytes of a saved map.
pub const MAGIC: [u8; 8] = *b"SBKVHEAP";

/// The format version [`HeapKv::save`] writes and [`HeapKv::load`] reads.
pub const VERSION: u32 = 1;

/// Size of the header in bytes.
pub const HEADER_LEN: u64 = 32;

/// Bytes of an entry besides its value: the key and the value's length.
const ENTRY_OVERHEAD: u64 = 32 + 4;

/// The bytes per stable-memory write or read during [`HeapKv::save`] and [`HeapKv::load`]. Each
/// call to the stable-memory API costs a fixed overhead plus one instruction per byte, so few
/// large calls are cheapest; 1 MiB makes the fixed part negligible (one call per MiB) while the
/// extra heap stays 1 MiB instead of a second copy of the whole map.
pub const CHUNK: usize = 1 << 20;

const WASM_PAGE: u64 = stablebench_grid::ic::WASM_PAGE_BYTES;

/// A [`KvStore`] over a `BTreeMap` in the heap.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HeapKv {
    map: BTreeMap<Key, Vec<u8>>,
}

impl HeapKv {
    /// An empty map.
    pub fn new() -> Self {
        HeapKv::default()
    }

    /// The underlying map, for reads the trait does not offer (iteration, ranges).
    pub fn map(&self) -> &BTreeMap<Key, Vec<u8>> {
        &self.map
    }

    /// The number of bytes [`HeapKv::save`] writes for the current contents.
    pub fn saved_len(&self) -> u64 {
        HEADER_LEN + self.payload_len()
    }

    fn payload_len(&self) -> u64 {
        self.map.values().map(|v| ENTRY_OVERHEAD + v.len() as u64).sum()
    }

    /// Writes the whole map to `memory` from offset 0 (the `pre_upgrade` step), growing it once
    /// to the exact size needed first; returns the number of bytes written. Anything in `memory`
    /// beyond that is left as it was (and ignored by [`HeapKv::load`]).
    ///
    /// The entries are encoded into one [`CHUNK`]-sized buffer that is written to memory whenever
    /// it fills: the same instructions as encoding everything into one `Vec` and writing it once
    /// (every byte is copied once into the buffer and once into stable memory either way; one
    /// stable write per MiB adds nothing measurable), without a second copy of the whole map in
    /// the heap, which for a large map would hit the wasm memory limit at the worst time. (The
    /// `BufferedWriter` of ic-stable-structures does the same buffering, but needs `&mut M` and
    /// checks the memory's size on every flush, since it does not know the total in advance.)
    pub fn save<M: Memory>(&self, memory: &M) -> Result<u64> {
        // One pass for the size and the longest value, both checked before anything is written,
        // so a failed save leaves the memory as it was.
        let (payload, longest) = self
            .map
            .values()
            .fold((0u64, 0usize), |(sum, max), v| (sum + ENTRY_OVERHEAD + v.len() as u64, max.max(v.len())));
        if u32::try_from(longest).is_err() {
            return Err(Error::InvalidArgument(format!(
                "cannot save the heap map: a value of {longest} bytes does not fit the format's u32 length"
            )));
        }
        let total = HEADER_LEN + payload;
        let pages = total.div_ceil(WASM_PAGE);
        let have = memory.size();
        if pages > have && memory.grow(pages - have) < 0 {
            return Err(Error::InvalidArgument(format!(
                "cannot save the heap map: stable memory could not grow from {have} to {pages} pages \
                 ({total} bytes)"
            )));
        }
        let mut out = ChunkWriter { memory, offset: 0, buf: Vec::with_capacity(CHUNK.min(total as usize)) };
        out.write(&MAGIC);
        out.write(&VERSION.to_le_bytes());
        out.write(&0u32.to_le_bytes());
        out.write(&(self.map.len() as u64).to_le_bytes());
        out.write(&payload.to_le_bytes());
        for (key, value) in &self.map {
            out.write(key);
            out.write(&(value.len() as u32).to_le_bytes());
            out.write(value);
        }
        out.flush();
        debug_assert_eq!(out.offset, total);
        Ok(total)
    }

    /// Reads a map saved by [`HeapKv::save`] from `memory` (the `post_upgrade` step). An empty
    /// memory (size 0: never written) gives an empty map. Anything else that is not a complete
    /// saved map (another magic, another version, lengths that run past the memory or disagree
    /// with each other) gives [`Error::InvalidArgument`] saying what is wrong; it never traps.
    pub fn load<M: Memory>(memory: &M) -> Result<HeapKv> {
        let size = memory.size().saturating_mul(WASM_PAGE);
        if size == 0 {
            return Ok(HeapKv::new());
        }
        let bad = |what: String| Error::InvalidArgument(format!("stable memory holds no saved heap map: {what}"));
        // A non-empty memory is at least one 64 KiB page, so the header is inside it.
        let mut header = [0u8; HEADER_LEN as usize];
        memory.read(0, &mut header);
        if header[..8] != MAGIC {
            return Err(bad(format!("magic {:02x?}, expected {:02x?} (\"SBKVHEAP\")", &header[..8], MAGIC)));
        }
        let version = u32::from_le_bytes(header[8..12].try_into().expect("4 bytes"));
        if version != VERSION {
            return Err(bad(format!("format version {version}, this build reads version {VERSION}")));
        }
        let count = u64::from_le_bytes(header[16..24].try_into().expect("8 bytes"));
        let payload = u64::from_le_bytes(header[24..32].try_into().expect("8 bytes"));
        if payload > size - HEADER_LEN {
            return Err(bad(format!("a payload of {payload} bytes does not fit in {size} bytes of memory")));
        }
        if count.checked_mul(ENTRY_OVERHEAD).is_none_or(|min| min > payload) {
            return Err(bad(format!("{count} entries cannot fit in a payload of {payload} bytes")));
        }
        let mut input = ChunkReader { memory, offset: HEADER_LEN, end: HEADER_LEN + payload, buf: Vec::new(), pos: 0 };
        // Collected into a sorted Vec and built in one go (`BTreeMap::from_iter` on sorted input:
        // a linear bulk build) instead of `count` inserts, each a descent from the root.
        // `try_reserve` rather than `with_capacity` here and for the values: a corrupt length that
        // the heap cannot hold becomes an error instead of an allocation failure, which aborts.
        let mut entries: Vec<(Key, Vec<u8>)> = Vec::new();
        usize::try_from(count)
            .ok()
            .and_then(|n| entries.try_reserve_exact(n).ok())
            .ok_or_else(|| bad(format!("{count} entries do not fit in the heap")))?;
        for i in 0..count {
            let mut key = [0u8; 32];
            let mut len = [0u8; 4];
            if !input.read_exact(&mut key) || !input.read_exact(&mut len) {
                return Err(bad(format!("entry {i} of {count} runs past the payload")));
            }
            let len = u32::from_le_bytes(len) as u64;
            // Checked before allocating, so a corrupt length cannot ask for gigabytes.
            if len > input.remaining() {
                return Err(bad(format!("entry {i} of {count} has a value of {len} bytes that runs past the payload")));
            }
            let mut value = Vec::new();
            usize::try_from(len)
                .ok()
                .and_then(|n| value.try_reserve_exact(n).ok())
                .ok_or_else(|| bad(format!("entry {i}: a value of {len} bytes does not fit in the heap")))?;
            value.resize(len as usize, 0);
            input.read_exact(&mut value);
            // `save` writes keys in strictly increasing order; anything else is not its output
            // (and a repeated key would silently lose an entry).
            if entries.last().is_some_and(|(p, _)| *p >= key) {
                return Err(bad(format!("entry {i} of {count}: keys are not in strictly increasing order")));
            }
            entries.push((key, value));
        }
        if input.remaining() != 0 {
            return Err(bad(format!("{} bytes of payload left after {count} entries", input.remaining())));
        }
        Ok(HeapKv { map: entries.into_iter().collect() })
    }
}

/// Sequential writes to a memory already grown to fit, in [`CHUNK`]s.
struct ChunkWriter<'m, M: Memory> {
    memory: &'m M,
    offset: u64,
    buf: Vec<u8>,
}

impl<M: Memory> ChunkWriter<'_, M> {
    fn write(&mut self, bytes: &[u8]) {
        if self.buf.len() + bytes.len() > CHUNK {
            self.flush();
            if bytes.len() >= CHUNK {
                // A value of a chunk or more goes straight to memory instead of through the buffer.
                self.memory.write(self.offset, bytes);
                self.offset += bytes.len() as u64;
                return;
            }
        }
        self.buf.extend_from_slice(bytes);
    }

    fn flush(&mut self) {
        if !self.buf.is_empty() {
            self.memory.write(self.offset, &self.buf);
            self.offset += self.buf.len() as u64;
            self.buf.clear();
        }
    }
}

/// Sequential reads of `offset..end` (checked to lie inside the memory), in [`CHUNK`]s.
struct ChunkReader<'m, M: Memory> {
    memory: &'m M,
    /// Memory offset of the byte after `buf`.
    offset: u64,
    end: u64,
    buf: Vec<u8>,
    /// Next unread byte of `buf`.
    pos: usize,
}

impl<M: Memory> ChunkReader<'_, M> {
    /// Bytes not yet read.
    fn remaining(&self) -> u64 {
        (self.buf.len() - self.pos) as u64 + (self.end - self.offset)
    }

    /// Fills `dst` from the input; false (with `dst` unspecified) if fewer bytes remain.
    fn read_exact(&mut self, dst: &mut [u8]) -> bool {
        if (dst.len() as u64) > self.remaining() {
            return false;
        }
        let mut done = 0;
        while done < dst.len() {
            if self.pos == self.buf.len() {
                let want = (self.end - self.offset).min(CHUNK as u64) as usize;
                if dst.len() - done >= want {
                    // A large value goes straight from memory into its own buffer.
                    let n = dst.len() - done;
                    self.memory.read(self.offset, &mut dst[done..]);
                    self.offset += n as u64;
                    return true;
                }
                self.buf.resize(want, 0);
                self.memory.read(self.offset, &mut self.buf);
                self.offset += want as u64;
                self.pos = 0;
            }
            let n = (dst.len() - done).min(self.buf.len() - self.pos);
            dst[done..done + n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
            self.pos += n;
            done += n;
        }
        true
    }
}

impl KvStore for HeapKv {
    fn get(&mut self, key: &Key) -> Result<Option<Vec<u8>>> {
        Ok(self.map.get(key).cloned())
    }

    fn put(&mut self, key: &Key, value: &[u8]) -> Result<()> {
        self.map.insert(*key, value.to_vec());
        Ok(())
    }

    fn remove(&mut self, key: &Key) -> Result<bool> {
        Ok(self.map.remove(key).is_some())
    }

    fn len(&mut self) -> Result<u64> {
        Ok(self.map.len() as u64)
    }

    /// Nothing to drop: the heap map is the data, not a cache of it.
    fn drop_caches(&mut self) -> Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use ic_stable_structures::VectorMemory;

    use super::*;

    #[test]
    fn chunk_reader_reads_across_chunks_and_refuses_to_read_past_the_end() {
        let len = 2 * CHUNK + 1000;
        let data: Vec<u8> = (0..len).map(|i| (i * 7 + i / 251) as u8).collect();
        let memory = VectorMemory::default();
        memory.grow((len as u64 + 10).div_ceil(WASM_PAGE));
        memory.write(10, &data);
        let mut input = ChunkReader { memory: &memory, offset: 10, end: 10 + len as u64, buf: Vec::new(), pos: 0 };
        let mut read = Vec::new();
        // Small reads, then one larger than a chunk (read around the buffer), then small again.
        for size in [3, 36, CHUNK - 50, 100, CHUNK + 7, 1, 500].into_iter().cycle() {
            let want = size.min(input.remaining() as usize);
            if want == 0 {
                break;
            }
            let mut dst = vec![0; want];
            assert!(input.read_exact(&mut dst));
            read.extend_from_slice(&dst);
        }
        assert_eq!(read, data);
        assert!(!input.read_exact(&mut [0]));
        assert!(input.read_exact(&mut []));
    }
}
