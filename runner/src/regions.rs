//! Where a message's pages lie: each 64 KiB Wasm page a message touched ([`crate::host::PageSet`])
//! named by the region of memory it belongs to, with the boundaries read from the wasm and from
//! stable memory, not guessed.
//!
//! **The heap** (linear memory), as wasm-ld lays out a Rust canister: the shadow stack first
//! (`--stack-first`, which Rust's wasm targets pass), from address 0 up to the initial value of
//! `__stack_pointer` (global 0, which wasm-ld always makes the stack pointer; it grows down), then
//! the data segments (static data) and the zeroed statics after them (bss), up to `__heap_base`,
//! then the heap the allocators hand out. The memory's initial size is `__heap_base` rounded up to a page
//! (wasm-ld sizes it so), so the pages below it are static and the page holding `__heap_base`
//! is shared by the last statics and the heap's first bytes; [`HeapLayout::read`] takes
//! `__heap_base` from its export where the module keeps it (the build's shrinking drops it from
//! the production canister) and refuses a module that is not laid out so.
//!
//! **Stable memory**, as ic-stable-structures 0.7's `MemoryManager` lays it out (the layout the
//! ic-sqlite-vfs fork keeps, `src/memory_manager.rs` at 0.7.2): page 0 holds its header (magic
//! `MGR`, version 1, the bucket size in pages, every memory's size) and the bucket table (one byte
//! per bucket: the memory that owns it, 255 for none); bucket k is pages `1 + k * size ..` of
//! `size` pages. [`StableLayout::read`] reads both from the canister's stable memory.

use std::ops::Range;

use wasmparser::{ConstExpr, DataKind, ExternalKind, Operator, Parser, Payload, TypeRef};

use crate::host::WASM_PAGE;

/// Where the heap's regions end, in bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeapLayout {
    /// The stack's top: `__stack_pointer`'s initial value (the stack is `0 .. stack_top`).
    pub stack_top: u64,
    /// The data segments' span (static data with an initializer).
    pub data: Range<u64>,
    /// Where the heap starts: `__heap_base` if exported, else the memory's initial
    /// size (see the module docs).
    pub heap_base: u64,
    /// Whether `heap_base` is the module's own `__heap_base` (else the initial size's page).
    pub heap_base_exported: bool,
}

/// The region of the heap a page lies in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HeapRegion {
    /// The shadow stack (Rust's locals that live in memory, and C's).
    Stack,
    /// Static data and zeroed statics (globals, `thread_local!` slots, string constants).
    Statics,
    /// The page holding the end of the statics and the start of the heap.
    StaticsAndHeapStart,
    /// Above `__heap_base`: what the allocators hand out (Rust's and C's, however many).
    Heap,
}

impl HeapRegion {
    /// Every region, in address order.
    pub const ALL: [HeapRegion; 4] =
        [HeapRegion::Stack, HeapRegion::Statics, HeapRegion::StaticsAndHeapStart, HeapRegion::Heap];

    /// Its public name (results files, reports).
    pub fn name(self) -> &'static str {
        match self {
            HeapRegion::Stack => "stack",
            HeapRegion::Statics => "statics",
            HeapRegion::StaticsAndHeapStart => "statics_and_heap_start",
            HeapRegion::Heap => "heap",
        }
    }
}

impl HeapLayout {
    /// The layout of `wasm` (the module as built, not instrumented).
    pub fn read(wasm: &[u8]) -> Result<HeapLayout, String> {
        let mut globals: Vec<Option<u64>> = Vec::new();
        let mut imported_globals = 0u32;
        let mut data: Option<Range<u64>> = None;
        let mut initial_pages = None;
        let mut heap_base_global = None;
        for payload in Parser::new(0).parse_all(wasm) {
            match payload.map_err(|e| e.to_string())? {
                Payload::ImportSection(r) => {
                    for import in r.into_imports() {
                        match import.map_err(|e| e.to_string())?.ty {
                            TypeRef::Global(_) => imported_globals += 1,
                            TypeRef::Memory(m) => initial_pages = Some(m.initial),
                            _ => {}
                        }
                    }
                }
                Payload::MemorySection(r) => {
                    for m in r {
                        initial_pages = initial_pages.or(Some(m.map_err(|e| e.to_string())?.initial));
                    }
                }
                Payload::GlobalSection(r) => {
                    for g in r {
                        globals.push(const_i32(&g.map_err(|e| e.to_string())?.init_expr));
                    }
                }
                Payload::ExportSection(r) => {
                    for e in r {
                        let e = e.map_err(|e| e.to_string())?;
                        if e.name == "__heap_base" && e.kind == ExternalKind::Global {
                            heap_base_global = Some(e.index);
                        }
                    }
                }
                Payload::DataSection(r) => {
                    for d in r {
                        let d = d.map_err(|e| e.to_string())?;
                        if let DataKind::Active { offset_expr, .. } = d.kind {
                            let at = const_i32(&offset_expr).ok_or("a data segment at a computed offset")?;
                            let end = at + d.data.len() as u64;
                            data = Some(data.map_or(at..end, |r| r.start.min(at)..r.end.max(end)));
                        }
                    }
                }
                _ => {}
            }
        }
        if imported_globals > 0 {
            return Err("the module imports globals: global 0 is not wasm-ld's stack pointer".into());
        }
        let stack_top = globals.first().copied().flatten().ok_or("no global 0 with a constant initial value")?;
        let data = data.ok_or("no data segments")?;
        let initial = initial_pages.ok_or("no memory")? * WASM_PAGE;
        if data.start < stack_top {
            return Err(format!("data at {} below the stack's top {stack_top}: not laid out stack first", data.start));
        }
        let exported = heap_base_global.map(|g| globals.get(g as usize).copied().flatten());
        let (heap_base, heap_base_exported) = match exported {
            Some(Some(b)) => (b, true),
            Some(None) => return Err("`__heap_base` has no constant value".into()),
            None => (initial, false),
        };
        if heap_base < data.end || heap_base > initial {
            return Err(format!(
                "the heap's base {heap_base} is not between the data's end {} and the initial size {initial}",
                data.end
            ));
        }
        Ok(HeapLayout { stack_top, data, heap_base, heap_base_exported })
    }

    /// The region Wasm page `page` lies in. Without `__heap_base`, the last page of the initial
    /// size is the shared one (the heap's base lies in it: see the module docs).
    pub fn region(&self, page: u64) -> HeapRegion {
        let base = if self.heap_base_exported { self.heap_base } else { self.heap_base - 1 };
        let base_page = base / WASM_PAGE;
        let shared = !self.heap_base_exported || !self.heap_base.is_multiple_of(WASM_PAGE);
        if (page + 1) * WASM_PAGE <= self.stack_top {
            HeapRegion::Stack
        } else if page < base_page {
            HeapRegion::Statics
        } else if page == base_page && shared {
            HeapRegion::StaticsAndHeapStart
        } else {
            HeapRegion::Heap
        }
    }
}

/// An `i32.const` expression's value.
fn const_i32(e: &ConstExpr) -> Option<u64> {
    let mut ops = e.get_operators_reader();
    match ops.read().ok()? {
        Operator::I32Const { value } => Some(value as u32 as u64),
        _ => None,
    }
}

/// A `MemoryManager`'s layout of stable memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StableLayout {
    /// Pages per bucket.
    pub bucket_pages: u64,
    /// The memory that owns each bucket (`UNALLOCATED` for none).
    pub owners: Vec<u8>,
}

/// The region of stable memory a page lies in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StableRegion {
    /// The `MemoryManager`'s header and bucket table (page 0).
    ManagerHeader,
    /// A bucket of the memory with this id.
    Memory(u8),
    /// Past the buckets allocated, or in none.
    Unallocated,
}

impl StableLayout {
    /// The marker of a bucket no memory owns.
    pub const UNALLOCATED: u8 = 255;
    /// The header's bytes before the bucket table: magic, version, bucket count, bucket size,
    /// 32 reserved, 255 memory sizes of 8 bytes.
    const TABLE_OFFSET: usize = 3 + 1 + 2 + 2 + 32 + 255 * 8;
    /// Buckets in the table.
    const BUCKETS: usize = 32_768;

    /// The layout in `stable`, if it holds a `MemoryManager` (magic `MGR`, version 1).
    pub fn read(stable: &[u8]) -> Option<StableLayout> {
        if stable.len() < Self::TABLE_OFFSET + Self::BUCKETS || &stable[..3] != b"MGR" || stable[3] != 1 {
            return None;
        }
        let bucket_pages = u16::from_le_bytes([stable[6], stable[7]]) as u64;
        let owners = stable[Self::TABLE_OFFSET..Self::TABLE_OFFSET + Self::BUCKETS].to_vec();
        (bucket_pages > 0).then_some(StableLayout { bucket_pages, owners })
    }

    /// The region Wasm page `page` of stable memory lies in.
    pub fn region(&self, page: u64) -> StableRegion {
        if page == 0 {
            return StableRegion::ManagerHeader;
        }
        match self.owners.get(((page - 1) / self.bucket_pages) as usize) {
            Some(&id) if id != Self::UNALLOCATED => StableRegion::Memory(id),
            _ => StableRegion::Unallocated,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A module of `globals` (i32 constants), one memory of `pages`, data at `data` and maybe an
    /// exported `__heap_base` (global 2).
    fn module(globals: &[i32], pages: u64, data: (i32, usize), heap_base: bool) -> Vec<u8> {
        use wasm_encoder::{
            ConstExpr, DataSection, ExportKind, ExportSection, GlobalSection, GlobalType, MemorySection, MemoryType,
            Module, ValType,
        };
        let mut m = Module::new();
        let mut mem = MemorySection::new();
        mem.memory(MemoryType { minimum: pages, maximum: None, memory64: false, shared: false, page_size_log2: None });
        m.section(&mem);
        let mut g = GlobalSection::new();
        for (i, v) in globals.iter().enumerate() {
            let ty = GlobalType { val_type: ValType::I32, mutable: i == 0, shared: false };
            g.global(ty, &ConstExpr::i32_const(*v));
        }
        m.section(&g);
        if heap_base {
            let mut e = ExportSection::new();
            e.export("__heap_base", ExportKind::Global, 2);
            m.section(&e);
        }
        let mut d = DataSection::new();
        d.active(0, &ConstExpr::i32_const(data.0), vec![1u8; data.1]);
        m.section(&d);
        m.finish()
    }

    #[test]
    fn the_heap_is_read_from_the_stack_pointer_the_data_and_the_heap_base() {
        // Stack first (1 MiB), data to 1.37 MiB, initial size 22 pages: the production layout.
        let l = HeapLayout::read(&module(&[1 << 20], 22, (1 << 20, 382_012), false)).unwrap();
        assert_eq!((l.stack_top, l.heap_base, l.heap_base_exported), (1 << 20, 22 * WASM_PAGE, false));
        let regions: Vec<HeapRegion> = [0, 15, 16, 20, 21, 22, 900].map(|p| l.region(p)).to_vec();
        use HeapRegion::*;
        assert_eq!(regions, [Stack, Stack, Statics, Statics, StaticsAndHeapStart, Heap, Heap]);
        // With `__heap_base` exported: its page is the shared one.
        let l = HeapLayout::read(&module(&[1 << 20, 1_223_897, 1_223_904], 19, (1 << 20, 167_132), true)).unwrap();
        assert_eq!((l.heap_base, l.heap_base_exported), (1_223_904, true));
        assert_eq!([17, 18, 19].map(|p| l.region(p)), [Statics, StaticsAndHeapStart, Heap]);
        // Data below the stack's top is not the layout these names assume.
        assert!(HeapLayout::read(&module(&[1 << 20], 22, (1024, 10), false)).is_err());
    }

    #[test]
    fn stable_pages_are_named_by_the_bucket_table() {
        let mut stable = vec![0u8; 64 * 1024];
        stable[..4].copy_from_slice(b"MGR\x01");
        stable[6..8].copy_from_slice(&128u16.to_le_bytes());
        let table = StableLayout::TABLE_OFFSET;
        stable[table..table + StableLayout::BUCKETS].fill(StableLayout::UNALLOCATED);
        (stable[table], stable[table + 1], stable[table + 2]) = (99, 120, 99);
        let l = StableLayout::read(&stable).unwrap();
        let named = [0, 1, 128, 129, 257, 385, 10_000].map(|p| l.region(p));
        use StableRegion::*;
        assert_eq!(named, [ManagerHeader, Memory(99), Memory(99), Memory(120), Memory(99), Unallocated, Unallocated]);
        assert_eq!(StableLayout::read(&stable[..1000]), None, "too short for a table");
        stable[0] = b'X';
        assert_eq!(StableLayout::read(&stable), None, "no magic, no layout");
    }
}
