//! Rewrites a canister wasm the way the replica does before it compiles it, so that running the
//! result on wasmtime counts exactly the instructions the IC counts.
//!
//! Mirrors dfinity/ic `rs/embedders/src/wasm_utils/instrumentation.rs` (`instruction_to_cost`,
//! `injections`, `inject_metering`, `export_additional_symbols`; docs/sources.md lists the
//! revisions):
//! - an i64 counter global, exported as `canister counter_instructions`, that the host sets to
//!   the message's limit and wasm code decrements;
//! - per basic block, the block's whole cost charged at its **start** (function entry +1, `loop`
//!   bodies re-entrant with an out-of-instructions check, `if`/`else`/branches/`end` opening new
//!   blocks, `block` and `call` not splitting);
//! - bulk memory and table operations charged their size operand at run time, before they run;
//! - the `start` function removed and exported as `canister_start`;
//! - every mutable global exported as `__persistent_mutable_global_<i>` so the host can save and
//!   restore it (the replica persists exactly memories and these globals).
//!
//! The injected code itself is never metered, as in the replica. Two functions are appended (the
//! out-of-instructions handler and the bulk-charge helper), so no existing index moves.
//!
//! [`Metering::Profiled`] adds, unmetered too, the profiler's hooks (crate::profile): a call to
//! the imported `stablebench.profile_enter` at every function entry, before the entry block's
//! charge, and to `stablebench.profile_exit` before every way out of the function (`return`, the
//! tail calls `return_call*`, and the function's final `end`, which the body is wrapped in a
//! `block` for, so that a branch to the function's own label passes the hook too). Each hook gets
//! the function's index in the original module and the counter's value, and nothing else changes:
//! the charges, and so the counts, are those of [`Metering::On`]. The two imports come after the
//! module's own, so every defined function moves up by two; every function index (calls,
//! `ref.func`, exports, elements, tables, globals, the start function and the name section) is
//! re-encoded accordingly. The bulk-charge helper reports itself as the pseudo-function
//! [`BULK_FRAME`], so that the per-byte charge of `memory.copy` and `memory.fill`, which compilers
//! emit inline for memcpy and memset, is a frame of its own.
//!
//! **Heap pages written** (not the replica's; it tracks them with memory protection): so that
//! the host can undo an execution, and keep the heap's last committed image, by copying only the
//! pages the execution wrote instead of the whole heap, the rewritten module marks every 4 KiB
//! page of memory 0 it writes in a byte map, a memory of its own exported as [`DIRTY_EXPORT`]
//! (byte `p` non-zero: page `p` was written). Before every store to memory 0 the address is
//! taken into a temporary global and bytes `p` and `p + 1` of the map set with one `i32.store16`
//! (a store of up to 16 bytes ends in the page after its first at the latest); `memory.fill` and
//! `memory.copy` into memory 0 mark their destination range through an appended helper. The
//! host marks what it writes itself (`*_copy`, `stable_read`). Like the charges, this code is
//! never metered. A module that can change memory or tables in ways the map does not follow
//! (`memory.init`, `data.drop`, table writes, element drops) is not tracked
//! ([`Instrumented::tracks_heap`] is false) and the host copies the whole heap instead.
//!
//! **Pages touched** (what the IC's deterministic memory tracker charges since August 2026; see
//! `crate::replica::memory_tracker`): the replica maps a 64 KiB Wasm page on the first fault in
//! it and charges the page's first access and its first write. On Linux `bench` does the same
//! (`crate::faults`, [`PageCounting::Faults`]): the module carries no tracking code for pages, and
//! the host counts the faults of the protected heap. Canisters that keep their executions (many
//! short messages), other platforms and `STABLEBENCH_PAGE_MARKS=1` use [`PageCounting::Marks`]:
//! the rewritten module marks them. Two more memories, exported as [`PAGES_READ_EXPORT`] and
//! [`PAGES_WRITTEN_EXPORT`], hold a byte per Wasm page of memory 0, and before every load the
//! code sets the byte of the page the load reads in the first map, before every store the byte of
//! the page it writes in the second (one `i32.store8` of 1, no branch: the page is
//! `(address + offset) >> 16`). An access whose alignment hint is at least its size, at an offset
//! that keeps it aligned, marks the page of its first byte only: aligned, it cannot cross a page
//! (compilers give that hint only where the type's alignment holds; breaking it is undefined
//! behaviour in Rust and C). Any other access marks the pages of its first and last byte.
//! `memory.fill`, `memory.copy` and `memory.init` mark their ranges through an appended helper
//! (the copy's source read, then its destination written). The host collects the marks into its
//! own per-page state and clears them at every `performance_counter` read and at the end of
//! every execution, and charges the new pages' fees there (`crate::host::collect_pages`); it
//! marks its own copies itself. The marking code is never metered; the scratch locals it uses
//! are appended to each function's own.

use anyhow::{bail, Context, Result};
use wasm_encoder::reencode::{self, Reencode};
use wasm_encoder::{
    BlockType, CodeSection, ConstExpr, ExportKind, ExportSection, Function, FunctionSection, GlobalSection, GlobalType,
    Instruction, Module, RawSection, TypeSection, ValType,
};
use wasmparser::{ExternalKind, Operator, Parser, Payload, TypeRef};

/// Export name of the instruction counter (the replica's name).
pub const COUNTER_EXPORT: &str = "canister counter_instructions";
/// Export name of the flag the out-of-instructions handler sets before it traps.
pub const OUT_OF_INSTRUCTIONS_FLAG_EXPORT: &str = "stablebench out_of_instructions";
/// Export name given to the module's `start` function, which the host runs at install/upgrade.
pub const START_EXPORT: &str = "canister_start";
/// Export name of memory 0 (the heap), for the host.
pub const MEMORY_EXPORT: &str = "stablebench memory";
/// Export name of table 0 (the indirect function table), so the host can run the callbacks a
/// canister names by table index in `ic0.call_new` (the replica exports it as `table`).
pub const TABLE_EXPORT: &str = "stablebench table";
/// Prefix of the exports of mutable globals (the replica's name).
pub const PERSISTENT_GLOBAL_PREFIX: &str = "__persistent_mutable_global_";
/// Import module of the profiler's hooks ([`Metering::Profiled`]).
pub const PROFILE_MODULE: &str = "stablebench";
/// The hook called at every function entry: `(func: i32, counter: i64) -> ()`.
pub const PROFILE_ENTER: &str = "profile_enter";
/// The hook called before every function exit: `(func: i32, counter: i64) -> ()`.
pub const PROFILE_EXIT: &str = "profile_exit";
/// Functions the profiling mode imports before the module's own.
const PROFILE_HOOKS: u32 = 2;
/// The function index the hooks report for the per-byte charge of bulk memory and table
/// operations (`memory.copy`, `memory.fill`, ...; a pseudo-function: no module has that many).
pub const BULK_FRAME: u32 = u32::MAX - 1;

/// Export name of the byte map of written heap pages (see the module docs).
pub const DIRTY_EXPORT: &str = "stablebench dirty";
/// log2 of the page size the byte map tracks (4 KiB, the OS page).
pub const DIRTY_PAGE_SHIFT: u32 = 12;
/// The highest page index the map holds for a 32-bit heap (4 GiB / 4 KiB); the map has this
/// many entries plus two (a store in the last page marks the one after it).
const DIRTY_MAX_PAGE_32: u64 = 1 << (32 - DIRTY_PAGE_SHIFT);
/// The same for a 64-bit heap: 16 GiB, above what the IC lets a canister's heap reach.
const DIRTY_MAX_PAGE_64: u64 = 1 << (34 - DIRTY_PAGE_SHIFT);

/// The highest page the byte map holds for `mem`.
fn dirty_max_page(mem: MemType) -> u64 {
    match mem {
        MemType::Wasm32 => DIRTY_MAX_PAGE_32,
        MemType::Wasm64 => DIRTY_MAX_PAGE_64,
    }
}

/// Export name of the byte map of heap Wasm pages read (see the module docs, "Pages touched"):
/// the code sets byte `p` to 1 when it reads page `p`; the host collects and clears the marks.
pub const PAGES_READ_EXPORT: &str = "stablebench pages read";
/// The same for pages written.
pub const PAGES_WRITTEN_EXPORT: &str = "stablebench pages written";
/// log2 of the page size the page map tracks: the 64 KiB Wasm page, the unit the replica's
/// deterministic memory tracker maps and charges (see `crate::replica::memory_tracker`).
pub const PAGE_SHIFT: u32 = 16;
/// Entries of the page map of a 64-bit heap: 16 GiB, as the map of written pages.
const PAGE_MAP_64: u64 = 1 << (34 - PAGE_SHIFT);
/// The page-map bits of an access: read, and write (a write accesses too).
pub const TOUCH_READ: i32 = 1;
/// See [`TOUCH_READ`].
pub const TOUCH_WRITE: i32 = 3;

/// What the rewritten module tracks besides the metering.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tracking {
    /// The 4 KiB heap pages written ([`DIRTY_EXPORT`]), so the host can undo an execution by
    /// copying only those.
    pub heap: bool,
    /// The 64 KiB heap pages touched: what the IC's memory tracker charges.
    pub pages: PageCounting,
}

/// Whether, and how, the 64 KiB heap pages a message touches are counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PageCounting {
    /// Not counted.
    Off,
    /// The module marks them ([`PAGES_READ_EXPORT`], [`PAGES_WRITTEN_EXPORT`]; see the module
    /// docs): every platform.
    Marks,
    /// The host counts the faults of the protected heap (`crate::faults`); the module is
    /// rewritten as with [`PageCounting::Off`].
    Faults,
}

impl PageCounting {
    /// Counted, by faults where the platform supports them (`crate::faults::counting`), by marks
    /// elsewhere.
    pub fn on() -> PageCounting {
        #[cfg(unix)]
        let faults = crate::faults::counting();
        #[cfg(not(unix))]
        let faults = false;
        if faults {
            PageCounting::Faults
        } else {
            PageCounting::Marks
        }
    }

    /// [`PageCounting::on`] if `on`, else [`PageCounting::Off`].
    pub fn when(on: bool) -> PageCounting {
        if on {
            PageCounting::on()
        } else {
            PageCounting::Off
        }
    }
}

/// Whether to inject the metering code. `Off` keeps everything else (counter global, exports)
/// so the same host runs it: host fees are still charged, wasm code is free. Only for measuring
/// the cost of metering itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metering {
    /// The replica's metering (the default).
    On,
    /// No per-block or bulk charges.
    Off,
    /// The replica's metering plus the profiler's entry and exit hooks (see the module docs):
    /// the same counts as `On`, attributed to functions by `crate::profile`.
    Profiled,
}

/// Memory mode of the module: its first memory decides, as in the replica.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemType {
    /// 32-bit memory: loads and stores cost 1.
    Wasm32,
    /// 64-bit memory: loads and stores cost 2.
    Wasm64,
}

/// What the instrumentation found, for the host.
#[derive(Clone, Debug)]
pub struct Instrumented {
    /// The rewritten module.
    pub wasm: Vec<u8>,
    /// Memory mode.
    pub mem_type: MemType,
    /// Whether the module had a `start` function (now exported as [`START_EXPORT`]).
    pub has_start: bool,
    /// Indices of the mutable globals exported for persistence.
    pub persistent_globals: Vec<u32>,
    /// Custom sections by name (e.g. `icp:public candid:service`).
    pub custom_sections: Vec<(String, Vec<u8>)>,
    /// Whether the module marks the heap pages it writes in [`DIRTY_EXPORT`] (see the module
    /// docs): it has a memory and no operation the map does not follow.
    pub tracks_heap: bool,
    /// Whether the 64 KiB heap pages the module touches are counted (see the module docs):
    /// asked for, and it defines its memory.
    pub tracks_pages: bool,
    /// Whether they are counted by faults (`crate::faults`) rather than by the module's marks.
    pub page_faults: bool,
}

/// The replica's cost of one operator (`instruction_to_cost`).
pub fn instruction_cost(op: &Operator<'_>, mem: MemType) -> u64 {
    use Operator::*;
    let mem_access = if mem == MemType::Wasm64 { 2 } else { 1 };
    match op {
        Block { .. } | Loop { .. } | Else | End => 0,

        I32DivS | I32DivU | I32RemS | I32RemU | I64DivS | I64DivU | I64RemS | I64RemU => 10,

        F32Add | F32Sub | F32Mul | F32Ceil | F32Floor | F32Trunc | F32Nearest | F64Add | F64Sub | F64Mul | F64Ceil
        | F64Floor | F64Trunc | F64Nearest => 2,
        F32Div => 3,
        F64Div => 5,
        F32Min | F32Max | F64Min | F64Max => 18,
        F32Copysign => 2,
        F64Copysign => 3,
        F32Sqrt => 5,
        F64Sqrt => 8,
        F32Eq | F32Ne | F32Lt | F32Gt | F32Le | F32Ge | F64Eq | F64Ne | F64Lt | F64Gt | F64Le | F64Ge => 3,
        F32ConvertI32S | F32ConvertI64S | F64ConvertI32S | F64ConvertI64S => 3,
        F32ConvertI32U | F32ConvertI64U | F64ConvertI32U | F64ConvertI64U => 16,
        I32TruncF32S | I32TruncF32U | I32TruncF64S | I32TruncF64U | I64TruncF32S | I64TruncF32U | I64TruncF64S
        | I64TruncF64U => 20,
        I32TruncSatF32S | I32TruncSatF32U | I32TruncSatF64S | I32TruncSatF64U | I64TruncSatF32S | I64TruncSatF32U
        | I64TruncSatF64S | I64TruncSatF64U => 20,

        I32Load { .. }
        | I64Load { .. }
        | F32Load { .. }
        | F64Load { .. }
        | I32Load8S { .. }
        | I32Load8U { .. }
        | I32Load16S { .. }
        | I32Load16U { .. }
        | I64Load8S { .. }
        | I64Load8U { .. }
        | I64Load16S { .. }
        | I64Load16U { .. }
        | I64Load32S { .. }
        | I64Load32U { .. }
        | I32Store { .. }
        | I64Store { .. }
        | F32Store { .. }
        | F64Store { .. }
        | I32Store8 { .. }
        | I32Store16 { .. }
        | I64Store8 { .. }
        | I64Store16 { .. }
        | I64Store32 { .. } => mem_access,
        V128Load { .. }
        | V128Load8x8S { .. }
        | V128Load8x8U { .. }
        | V128Load16x4S { .. }
        | V128Load16x4U { .. }
        | V128Load32x2S { .. }
        | V128Load32x2U { .. }
        | V128Load8Splat { .. }
        | V128Load16Splat { .. }
        | V128Load32Splat { .. }
        | V128Load64Splat { .. }
        | V128Load32Zero { .. }
        | V128Load64Zero { .. }
        | V128Store { .. }
        | V128Load8Lane { .. }
        | V128Load16Lane { .. }
        | V128Load32Lane { .. }
        | V128Load64Lane { .. }
        | V128Store8Lane { .. }
        | V128Store16Lane { .. }
        | V128Store32Lane { .. }
        | V128Store64Lane { .. } => mem_access,

        GlobalGet { .. } | GlobalSet { .. } => 2,
        TableGet { .. } | TableSet { .. } => 5,
        TableSize { .. } => 100,
        TableGrow { .. } => 300,
        MemorySize { .. } => 20,
        MemoryGrow { .. } => 300,
        MemoryFill { .. }
        | MemoryCopy { .. }
        | MemoryInit { .. }
        | TableFill { .. }
        | TableCopy { .. }
        | TableInit { .. } => 100,
        DataDrop { .. } | ElemDrop { .. } => 300,
        Call { .. } => 5,
        CallIndirect { .. } => 10,
        ReturnCall { .. } => 3,
        ReturnCallIndirect { .. } => 60,
        If { .. } | Br { .. } | BrIf { .. } | BrTable { .. } => 2,
        RefIsNull => 5,
        RefFunc { .. } => 130,

        I8x16Shuffle { .. } | I8x16Popcnt | I8x16Shl | I8x16ShrS => 3,
        I8x16ShrU | I16x8Shl | I16x8ShrS | I16x8ShrU | I32x4Shl | I32x4ShrS | I32x4ShrU | I64x2Shl | I64x2ShrU => 2,
        I64x2ShrS => 3,
        I8x16LtU | I8x16GtU | I16x8LtU | I16x8GtU | I32x4LtU | I32x4GtU => 2,
        I16x8ExtAddPairwiseI8x16U => 2,
        I32x4ExtAddPairwiseI16x8U => 3,
        I16x8ExtMulHighI8x16S | I16x8ExtMulHighI8x16U => 2,
        I32x4Mul | I32x4ExtMulLowI16x8S | I32x4ExtMulHighI16x8S | I32x4ExtMulLowI16x8U | I32x4ExtMulHighI16x8U => 2,
        I64x2Mul => 4,
        F32x4Ceil | F32x4Floor | F32x4Trunc | F32x4Nearest | F32x4Abs | F32x4Neg | F32x4Add | F32x4Sub | F32x4Mul
        | F64x2Ceil | F64x2Floor | F64x2Trunc | F64x2Nearest | F64x2Abs | F64x2Neg | F64x2Add | F64x2Sub | F64x2Mul => {
            2
        }
        F32x4Sqrt => 5,
        F64x2Sqrt => 14,
        F32x4Div => 10,
        F64x2Div => 12,
        F32x4Min | F32x4Max | F64x2Min => 4,
        F64x2Max => 5,
        I32x4TruncSatF32x4S => 2,
        I32x4TruncSatF32x4U | F32x4ConvertI32x4U => 4,
        I32x4TruncSatF64x2SZero => 2,
        I32x4TruncSatF64x2UZero => 3,

        // Constants, integer ALU and compares, locals, select, drop, nop, return, unreachable,
        // conversions, ref.null, everything else: 1.
        _ => 1,
    }
}

/// Where a block's charge goes, and whether it re-checks the counter (replica `Scope`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scope {
    /// Function entry or loop body: always injected, with the out-of-instructions check.
    Reentrant,
    /// Any other block start: injected only if its cost is positive, no check.
    Plain,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Injection {
    /// Charge `cost` before the operator at this position.
    Static { scope: Scope, cost: u64 },
    /// Charge the bulk operation's size operand before it runs.
    Dynamic,
}

/// The injection points of a function body (replica `injections`), sorted by position: a
/// position is the index of the operator the charge is inserted before. Static charges precede
/// a dynamic one at the same position.
fn injections(ops: &[Operator<'_>], mem: MemType) -> Vec<(usize, Injection)> {
    use Operator::*;
    let mut out = Vec::new();
    let mut cur = (0usize, Scope::Reentrant, 1u64); // +1: function entry
    for (i, op) in ops.iter().enumerate() {
        cur.2 += instruction_cost(op, mem);
        let next = match op {
            Loop { .. } => Some(Scope::Reentrant),
            If { .. }
            | Else
            | Br { .. }
            | BrIf { .. }
            | BrTable { .. }
            | End
            | Return
            | Unreachable
            | ReturnCall { .. }
            | ReturnCallIndirect { .. } => Some(Scope::Plain),
            MemoryFill { .. }
            | MemoryCopy { .. }
            | MemoryInit { .. }
            | TableFill { .. }
            | TableCopy { .. }
            | TableInit { .. } => {
                out.push((i, Injection::Dynamic));
                None
            }
            _ => None,
        };
        if let Some(scope) = next {
            out.push((cur.0, Injection::Static { scope: cur.1, cost: cur.2 }));
            cur = (i + 1, scope, 0);
        }
    }
    out.push((cur.0, Injection::Static { scope: cur.1, cost: cur.2 }));
    // Stable: a static point opened at i + 1 sorts before a dynamic point at i + 1.
    out.sort_by_key(|(pos, inj)| (*pos, matches!(inj, Injection::Dynamic)));
    out
}

/// Indices of what the injected code uses.
#[derive(Clone, Copy)]
struct Injected {
    counter: u32,
    ooi_func: u32,
    bulk_func: u32,
    /// Heap tracking, if on: the byte map's memory, the range-marking helper, the temporaries.
    dirty: Option<Dirty>,
    /// Page tracking, if on.
    pages: Option<Paged>,
}

/// What the page-tracking code uses (see the module docs, "Pages touched").
#[derive(Clone, Copy)]
struct Paged {
    /// The map of pages read; the map of pages written is the next memory.
    map: u32,
    touch_func: u32,
}

/// The value types of a function's scratch locals for page tracking, after its three of the
/// address type.
const SCRATCH_VALUES: [ValType; 5] = [ValType::I32, ValType::I64, ValType::F32, ValType::F64, ValType::V128];

/// A function's scratch locals for the page-tracking code: three of the address type (an
/// access's address; a bulk operation's operands), then one of each [`SCRATCH_VALUES`] type.
#[derive(Clone, Copy)]
struct Scratch {
    base: u32,
}

impl Scratch {
    /// The `nth` (0..3) address local.
    fn addr(self, nth: u32) -> u32 {
        self.base + nth
    }
    /// The value local of type `ty`.
    fn value(self, ty: ValType) -> u32 {
        let i = SCRATCH_VALUES.iter().position(|t| *t == ty).expect("a scratch local of every value type");
        self.base + 3 + i as u32
    }
}

/// Entries of the page map of `mem`: one per Wasm page it can have.
fn page_map_entries(mem: MemType) -> u64 {
    match mem {
        MemType::Wasm32 => 1 << (32 - PAGE_SHIFT),
        MemType::Wasm64 => PAGE_MAP_64,
    }
}

/// What the heap-tracking code uses (see the module docs).
#[derive(Clone, Copy)]
struct Dirty {
    map: u32,
    mark_func: u32,
    /// First of the temporary globals, in [`TEMP_TYPES`] order.
    temps: u32,
}

/// The temporary globals of the heap-tracking code: three each of i32 and i64 (a bulk
/// operation's three operands, or a store's address and value), one of each other value type.
const TEMP_TYPES: [ValType; 9] = [
    ValType::I32,
    ValType::I32,
    ValType::I32,
    ValType::I64,
    ValType::I64,
    ValType::I64,
    ValType::F32,
    ValType::F64,
    ValType::V128,
];

impl Dirty {
    /// The `nth` (0-based) temporary of type `ty`.
    fn temp(self, ty: ValType, nth: u32) -> u32 {
        let i = TEMP_TYPES.iter().position(|t| *t == ty).expect("a temporary of every value type");
        self.temps + i as u32 + nth
    }
}

/// The operand type and static offset of a store to memory 0, if `op` is one: what the
/// heap-tracking code keeps aside, and adds to the address, while it marks the page.
fn store_to_heap(op: &Operator<'_>) -> Option<(ValType, u64)> {
    use Operator::*;
    let (ty, memarg) = match op {
        I32Store { memarg } | I32Store8 { memarg } | I32Store16 { memarg } => (ValType::I32, memarg),
        I64Store { memarg } | I64Store8 { memarg } | I64Store16 { memarg } | I64Store32 { memarg } => {
            (ValType::I64, memarg)
        }
        F32Store { memarg } => (ValType::F32, memarg),
        F64Store { memarg } => (ValType::F64, memarg),
        V128Store { memarg }
        | V128Store8Lane { memarg, .. }
        | V128Store16Lane { memarg, .. }
        | V128Store32Lane { memarg, .. }
        | V128Store64Lane { memarg, .. } => (ValType::V128, memarg),
        _ => return None,
    };
    (memarg.memory == 0).then_some((ty, memarg.offset))
}

/// The address type of a memory: i64 for a 64-bit one.
fn addr_type(mem: MemType) -> ValType {
    if mem == MemType::Wasm64 {
        ValType::I64
    } else {
        ValType::I32
    }
}

/// Operations after which the byte map no longer tells every change of the heap and the
/// tables: a module with any of them is not tracked.
fn untrackable(op: &Operator<'_>) -> bool {
    use Operator::*;
    matches!(
        op,
        MemoryInit { .. }
            | DataDrop { .. }
            | TableSet { .. }
            | TableGrow { .. }
            | TableFill { .. }
            | TableCopy { .. }
            | TableInit { .. }
            | ElemDrop { .. }
    )
}

fn map_memarg(map: u32) -> wasm_encoder::MemArg {
    wasm_encoder::MemArg { offset: 0, align: 0, memory_index: map }
}

/// Before a store to memory 0 (operands `[address, value]` on the stack): marks the pages of
/// `address + offset` and the one after it, and puts the operands back.
fn emit_store_mark(f: &mut Function, d: Dirty, value: ValType, offset: u64, mem: MemType) {
    // An integer value takes the third temporary of its type: the address and the page may take
    // the first two.
    let tv = d.temp(value, if matches!(value, ValType::I32 | ValType::I64) { 2 } else { 0 });
    f.instruction(&Instruction::GlobalSet(tv));
    match mem {
        MemType::Wasm32 => {
            let ta = d.temp(ValType::I32, 0);
            f.instruction(&Instruction::GlobalSet(ta));
            f.instruction(&Instruction::GlobalGet(ta));
            f.instruction(&Instruction::I32Const(offset as u32 as i32));
            f.instruction(&Instruction::I32Add);
            f.instruction(&Instruction::I32Const(DIRTY_PAGE_SHIFT as i32));
            f.instruction(&Instruction::I32ShrU);
            f.instruction(&Instruction::I32Const(0x0101));
            f.instruction(&Instruction::I32Store16(map_memarg(d.map)));
            f.instruction(&Instruction::GlobalGet(ta));
        }
        MemType::Wasm64 => {
            let (ta, tp) = (d.temp(ValType::I64, 0), d.temp(ValType::I64, 1));
            f.instruction(&Instruction::GlobalSet(ta));
            f.instruction(&Instruction::GlobalGet(ta));
            f.instruction(&Instruction::I64Const(offset as i64));
            f.instruction(&Instruction::I64Add);
            f.instruction(&Instruction::I64Const(i64::from(DIRTY_PAGE_SHIFT)));
            f.instruction(&Instruction::I64ShrU);
            // min(page, the map's last page): a store past it traps on the heap anyway.
            f.instruction(&Instruction::GlobalSet(tp));
            f.instruction(&Instruction::GlobalGet(tp));
            f.instruction(&Instruction::I64Const(DIRTY_MAX_PAGE_64 as i64));
            f.instruction(&Instruction::GlobalGet(tp));
            f.instruction(&Instruction::I64Const(DIRTY_MAX_PAGE_64 as i64));
            f.instruction(&Instruction::I64LtU);
            f.instruction(&Instruction::Select);
            f.instruction(&Instruction::I32WrapI64);
            f.instruction(&Instruction::I32Const(0x0101));
            f.instruction(&Instruction::I32Store16(map_memarg(d.map)));
            f.instruction(&Instruction::GlobalGet(ta));
        }
    }
    f.instruction(&Instruction::GlobalGet(tv));
}

/// Before `memory.fill` or `memory.copy` into memory 0 (operands `[dst, x, n]`): marks the pages
/// of `dst .. dst + n` with the helper and puts the operands back. `x` is the fill value (i32)
/// or the copy's source (an address).
fn emit_bulk_mark(f: &mut Function, d: Dirty, x: ValType, mem: MemType) {
    let addr = addr_type(mem);
    let (ta, tn) = (d.temp(addr, 0), d.temp(addr, 1));
    let tx = if x == addr { d.temp(x, 2) } else { d.temp(x, 0) };
    f.instruction(&Instruction::GlobalSet(tn));
    f.instruction(&Instruction::GlobalSet(tx));
    f.instruction(&Instruction::GlobalSet(ta));
    f.instruction(&Instruction::GlobalGet(ta));
    f.instruction(&Instruction::GlobalGet(tn));
    f.instruction(&Instruction::Call(d.mark_func));
    f.instruction(&Instruction::GlobalGet(ta));
    f.instruction(&Instruction::GlobalGet(tx));
    f.instruction(&Instruction::GlobalGet(tn));
}

fn emit_static(f: &mut Function, ix: Injected, scope: Scope, cost: u64) {
    if scope == Scope::Plain && cost == 0 {
        return;
    }
    f.instruction(&Instruction::GlobalGet(ix.counter));
    f.instruction(&Instruction::I64Const(cost as i64));
    f.instruction(&Instruction::I64Sub);
    f.instruction(&Instruction::GlobalSet(ix.counter));
    if scope == Scope::Reentrant {
        f.instruction(&Instruction::GlobalGet(ix.counter));
        f.instruction(&Instruction::I64Const(0));
        f.instruction(&Instruction::I64LtS);
        f.instruction(&Instruction::If(BlockType::Empty));
        f.instruction(&Instruction::Call(ix.ooi_func));
        f.instruction(&Instruction::End);
    }
}

/// Charges the size operand on top of the stack, leaving it in place.
fn emit_dynamic(f: &mut Function, ix: Injected, op: &Operator<'_>, mem: MemType) {
    let size_is_i64 = matches!(op, Operator::MemoryFill { .. } | Operator::MemoryCopy { .. }) && mem == MemType::Wasm64;
    if size_is_i64 {
        f.instruction(&Instruction::Call(ix.bulk_func));
    } else {
        f.instruction(&Instruction::I64ExtendI32U);
        f.instruction(&Instruction::Call(ix.bulk_func));
        f.instruction(&Instruction::I32WrapI64);
    }
}

/// Section order ranks (the binary format's required order; custom sections have none).
fn rank(p: &Payload<'_>) -> Option<u8> {
    Some(match p {
        Payload::TypeSection(_) => 1,
        Payload::ImportSection(_) => 2,
        Payload::FunctionSection(_) => 3,
        Payload::TableSection(_) => 4,
        Payload::MemorySection(_) => 5,
        Payload::TagSection(_) => 6,
        Payload::GlobalSection(_) => 7,
        Payload::ExportSection(_) => 8,
        Payload::StartSection { .. } => 9,
        Payload::ElementSection(_) => 10,
        Payload::DataCountSection { .. } => 11,
        Payload::CodeSectionStart { .. } => 12,
        Payload::DataSection(_) => 13,
        Payload::End(_) => 14,
        _ => return None,
    })
}

const IMPORT_RANK: u8 = 2;
const GLOBAL_RANK: u8 = 7;
const EXPORT_RANK: u8 = 8;

/// The re-encoder: a round trip, except that in profiling mode every defined function moves up
/// by `shift` (the profiler's imports are appended to the module's).
struct Reencoder {
    imported_funcs: u32,
    shift: u32,
}

impl Reencode for Reencoder {
    type Error = std::convert::Infallible;

    fn function_index(&mut self, func: u32) -> Result<u32, reencode::Error<Self::Error>> {
        Ok(if func >= self.imported_funcs { func + self.shift } else { func })
    }
}

/// What the profiling hooks of one function need.
#[derive(Clone, Copy)]
struct Hooks {
    enter: u32,
    exit: u32,
    /// The function's index in the original module (what the hooks report).
    func: u32,
    /// The type of the block the body is wrapped in: the function's results.
    block: BlockType,
}

/// Rewrites `wasm` (see the module docs). `metering` selects whether charges, and the profiler's
/// hooks, are injected; the heap pages the module writes are tracked where it can be.
pub fn instrument(wasm: &[u8], metering: Metering) -> Result<Instrumented> {
    instrument_with(wasm, metering, true)
}

/// [`instrument`], with heap tracking only if `track_heap` (and the module can be tracked). A
/// canister whose executions are never undone (`stablebench-runner bench` runs each benchmark in a
/// process of its own, see `crate::shared`) does not need it, and runs faster without; the counts
/// are the same either way.
pub fn instrument_with(wasm: &[u8], metering: Metering, track_heap: bool) -> Result<Instrumented> {
    instrument_tracked(wasm, metering, Tracking { heap: track_heap, pages: PageCounting::Off })
}

/// [`instrument`], with what `tracking` asks for: the written 4 KiB heap pages if the module can
/// be tracked (see [`instrument_with`]), the touched 64 KiB heap pages if it defines its memory.
pub fn instrument_tracked(wasm: &[u8], metering: Metering, tracking: Tracking) -> Result<Instrumented> {
    let plan = Plan::of(wasm, tracking)?;
    let mut rewrite = Rewrite::new(wasm, metering, plan);
    for payload in Parser::new(0).parse_all(wasm) {
        rewrite.payload(payload.context("parsing the wasm")?)?;
    }
    rewrite.finish(tracking)
}

/// What a first pass over the module decides: which of its memories the rewrite tracks, counts
/// and marks, and where the maps go (the memories after the module's own).
struct Plan {
    /// The start function, which the export section (before the start section) must name.
    start: Option<u32>,
    /// Memory 0, if its written pages are tracked: asked for, defined here (not imported), and
    /// no operation the byte map does not follow.
    tracked_mem: Option<MemType>,
    /// Memory 0, if its touched pages are counted (marked or by faults): asked for and defined here.
    counted_mem: Option<MemType>,
    /// Memory 0, if the module marks the pages it touches (counted, and not by faults).
    paged_mem: Option<MemType>,
    /// The written-pages map's memory index.
    dirty_map: Option<u32>,
    /// The touched-pages maps' first memory index (pages read, then pages written).
    pages_map: Option<u32>,
}

impl Plan {
    fn of(wasm: &[u8], tracking: Tracking) -> Result<Plan> {
        let mut start = None;
        let (mut imported_mems, mut defined_mems, mut trackable, mut first_mem) = (0u32, 0u32, true, None);
        for payload in Parser::new(0).parse_all(wasm) {
            match payload.context("parsing the wasm")? {
                Payload::StartSection { func, .. } => start = Some(func),
                Payload::ImportSection(reader) => {
                    for imp in reader.into_imports() {
                        if let TypeRef::Memory(m) = imp?.ty {
                            imported_mems += 1;
                            first_mem.get_or_insert(m.memory64);
                        }
                    }
                }
                Payload::MemorySection(reader) => {
                    for m in reader {
                        first_mem.get_or_insert(m?.memory64);
                        defined_mems += 1;
                    }
                }
                Payload::CodeSectionEntry(body) if trackable => {
                    let mut ops = body.get_operators_reader()?;
                    while !ops.eof() {
                        if untrackable(&ops.read()?) {
                            trackable = false;
                            break;
                        }
                    }
                }
                _ => {}
            }
        }
        let own = |wanted: bool| match first_mem {
            Some(m64) if wanted && imported_mems == 0 && defined_mems > 0 => {
                Some(if m64 { MemType::Wasm64 } else { MemType::Wasm32 })
            }
            _ => None,
        };
        let tracked_mem = own(tracking.heap && trackable);
        let counted_mem = own(tracking.pages != PageCounting::Off);
        let dirty_map = tracked_mem.map(|_| imported_mems + defined_mems);
        // The marks, unless the host counts faults instead.
        let paged_mem = counted_mem.filter(|_| tracking.pages == PageCounting::Marks);
        let pages_map = paged_mem.map(|_| imported_mems + defined_mems + u32::from(dirty_map.is_some()));
        Ok(Plan { start, tracked_mem, counted_mem, paged_mem, dirty_map, pages_map })
    }

    /// Whether the injected code needs the scratch globals (to hold an address while it marks).
    fn temps(&self) -> bool {
        self.tracked_mem.is_some() || self.paged_mem.is_some()
    }
}

/// The second pass: each section rewritten in turn, with what earlier sections told it.
struct Rewrite<'a> {
    wasm: &'a [u8],
    metering: Metering,
    plan: Plan,
    re: Reencoder,
    module: Module,
    num_types: u32,
    imported_globals: u32,
    defined_funcs: u32,
    defined_globals: u32,
    mem_type: Option<MemType>,
    /// Profiling: the block type of each type's results, and each defined function's type.
    result_blocks: Vec<BlockType>,
    func_types: Vec<u32>,
    /// Each type's number of parameters (where a function's own locals start).
    type_params: Vec<u32>,
    /// The helpers' types: the range marker's and the touch helper's.
    mark_type: u32,
    touch_type: u32,
    persistent_globals: Vec<u32>,
    custom_sections: Vec<(String, Vec<u8>)>,
    /// Whether our imports, globals and exports are in the module yet.
    import_done: bool,
    global_done: bool,
    export_done: bool,
    code_entries_left: u32,
    code_entry: u32,
    code: Option<CodeSection>,
    has_code: bool,
    has_table: bool,
}

impl<'a> Rewrite<'a> {
    fn new(wasm: &'a [u8], metering: Metering, plan: Plan) -> Rewrite<'a> {
        let profiled = metering == Metering::Profiled;
        Rewrite {
            wasm,
            metering,
            plan,
            re: Reencoder { imported_funcs: 0, shift: if profiled { PROFILE_HOOKS } else { 0 } },
            module: Module::new(),
            num_types: 0,
            imported_globals: 0,
            defined_funcs: 0,
            defined_globals: 0,
            mem_type: None,
            result_blocks: Vec::new(),
            func_types: Vec::new(),
            type_params: Vec::new(),
            mark_type: 0,
            touch_type: 0,
            persistent_globals: Vec::new(),
            custom_sections: Vec::new(),
            import_done: !profiled,
            global_done: false,
            export_done: false,
            code_entries_left: 0,
            code_entry: 0,
            code: None,
            has_code: false,
            has_table: false,
        }
    }

    fn profiled(&self) -> bool {
        self.metering == Metering::Profiled
    }

    fn payload(&mut self, payload: Payload<'a>) -> Result<()> {
        if let Payload::TableSection(_) = payload {
            self.has_table = true;
        }
        if let Some(r) = rank(&payload) {
            self.insert_missing(r)?;
        }
        let profiled = self.profiled();
        match payload {
            Payload::Version { .. } | Payload::End(_) => {}
            Payload::TypeSection(reader) => self.types(reader)?,
            Payload::ImportSection(reader) => self.imports(reader)?,
            Payload::FunctionSection(reader) => self.functions(reader)?,
            Payload::MemorySection(reader) => self.memories(reader)?,
            Payload::GlobalSection(reader) => self.globals(reader)?,
            Payload::ExportSection(reader) => self.exports(reader)?,
            Payload::StartSection { .. } => {
                // Removed: exported as START_EXPORT and run by the host, as the replica does.
            }
            Payload::CodeSectionStart { count, .. } => {
                self.code_entries_left = count;
                self.has_code = true;
                self.code = Some(CodeSection::new());
            }
            Payload::CodeSectionEntry(body) => self.code_entry(body)?,
            Payload::CustomSection(c) => {
                self.custom_sections.push((c.name().to_string(), c.data().to_vec()));
                if profiled && c.name() == "name" {
                    // Function names move with the functions (wasmtime's backtraces read them).
                    self.re.parse_custom_section(&mut self.module, c)?;
                } else {
                    self.module.section(&RawSection { id: 0, data: &self.wasm[c.range()] });
                }
            }
            Payload::TableSection(reader) if profiled => {
                // Table initialisers may hold `ref.func`.
                let mut tables = wasm_encoder::TableSection::new();
                self.re.parse_table_section(&mut tables, reader)?;
                self.module.section(&tables);
            }
            Payload::ElementSection(reader) if profiled => {
                let mut elements = wasm_encoder::ElementSection::new();
                self.re.parse_element_section(&mut elements, reader)?;
                self.module.section(&elements);
            }
            other => {
                // Tables, tags, elements, data count, data: copied as they are.
                if let Some((id, range)) = other.as_section() {
                    self.module.section(&RawSection { id, data: &self.wasm[range] });
                } else {
                    bail!("unsupported wasm payload: {other:?}");
                }
            }
        }
        Ok(())
    }

    /// Inserts our import, global and export sections where the module has none, before the
    /// first section of rank `r` that comes after them.
    fn insert_missing(&mut self, r: u8) -> Result<()> {
        if r > IMPORT_RANK && !self.import_done {
            let mut imports = wasm_encoder::ImportSection::new();
            push_profile_imports(&mut imports, self.num_types);
            self.module.section(&imports);
            self.import_done = true;
        }
        if r > GLOBAL_RANK && !self.global_done {
            let mut g = GlobalSection::new();
            push_counter_globals(&mut g, self.plan.temps());
            self.module.section(&g);
            self.global_done = true;
        }
        if r > EXPORT_RANK && !self.export_done {
            let mut e = ExportSection::new();
            self.push_our_exports(&mut e)?;
            self.module.section(&e);
            self.export_done = true;
        }
        Ok(())
    }

    fn push_our_exports(&mut self, e: &mut ExportSection) -> Result<()> {
        let start = self.plan.start.map(|f| self.re.function_index(f)).transpose()?;
        push_exports(
            e,
            self.imported_globals + self.defined_globals,
            start,
            &self.persistent_globals,
            self.mem_type.is_some(),
            self.has_table,
            Maps { dirty: self.plan.dirty_map, pages: self.plan.pages_map },
        );
        Ok(())
    }

    fn types(&mut self, reader: wasmparser::TypeSectionReader<'a>) -> Result<()> {
        let mut types = TypeSection::new();
        let mut multi_results = Vec::new();
        for group in reader {
            let group = group?;
            for sub in group.types() {
                let (params, results) = match &sub.composite_type.inner {
                    wasmparser::CompositeInnerType::Func(f) => (f.params().len() as u32, f.results()),
                    _ => (0, &[][..]),
                };
                self.type_params.push(params);
                self.result_blocks.push(match results {
                    [] => BlockType::Empty,
                    [one] => BlockType::Result(self.re.val_type(*one)?),
                    many => {
                        multi_results.push(many.to_vec());
                        // Appended after ours, below: three helper types, then these.
                        BlockType::FunctionType(u32::MAX)
                    }
                });
            }
            self.num_types += group.types().len() as u32;
            self.re.parse_recursive_type_group(types.ty(), group)?;
        }
        types.ty().function([], []);
        types.ty().function([ValType::I64], [ValType::I64]);
        if self.profiled() {
            types.ty().function([ValType::I32, ValType::I64], []);
            let placeholders = self.result_blocks.iter_mut().filter(|b| matches!(b, BlockType::FunctionType(u32::MAX)));
            for (ty, b) in (self.num_types + 3..).zip(placeholders) {
                *b = BlockType::FunctionType(ty);
            }
            for results in multi_results {
                let results = results.into_iter().map(|t| self.re.val_type(t)).collect::<Result<Vec<_>, _>>()?;
                types.ty().function([], results);
            }
        }
        if let Some(mem) = self.plan.tracked_mem {
            // The range-marking helper, [dst, n] -> [], last of all types.
            self.mark_type = types.len();
            types.ty().function([addr_type(mem), addr_type(mem)], []);
        }
        if let Some(mem) = self.plan.paged_mem {
            // The touch helper, [start, n, bits] -> [].
            self.touch_type = types.len();
            types.ty().function([addr_type(mem), addr_type(mem), ValType::I32], []);
        }
        self.module.section(&types);
        Ok(())
    }

    fn imports(&mut self, reader: wasmparser::ImportSectionReader<'a>) -> Result<()> {
        let mut section = wasm_encoder::ImportSection::new();
        for imp in reader.into_imports() {
            let imp = imp?;
            match imp.ty {
                TypeRef::Func(_) | TypeRef::FuncExact(_) => {
                    self.re.imported_funcs += 1;
                }
                TypeRef::Global(g) => {
                    if g.mutable {
                        bail!("imported mutable globals are not supported");
                    }
                    self.imported_globals += 1;
                }
                TypeRef::Memory(m) => {
                    self.mem_type.get_or_insert(if m.memory64 { MemType::Wasm64 } else { MemType::Wasm32 });
                }
                TypeRef::Table(_) => self.has_table = true,
                _ => {}
            }
            self.re.parse_import(&mut section, imp)?;
        }
        if self.profiled() {
            push_profile_imports(&mut section, self.num_types);
            self.import_done = true;
        }
        self.module.section(&section);
        Ok(())
    }

    fn functions(&mut self, reader: wasmparser::FunctionSectionReader<'a>) -> Result<()> {
        let mut funcs = FunctionSection::new();
        self.defined_funcs = reader.count();
        for ty in reader {
            let ty = ty?;
            self.func_types.push(ty);
            funcs.function(self.re.type_index(ty)?);
        }
        // The helpers' types were appended to the type section: [] -> [], [i64] -> [i64].
        funcs.function(self.num_types);
        funcs.function(self.num_types + 1);
        if self.plan.tracked_mem.is_some() {
            funcs.function(self.mark_type);
        }
        if self.plan.paged_mem.is_some() {
            funcs.function(self.touch_type);
        }
        self.module.section(&funcs);
        Ok(())
    }

    fn memories(&mut self, reader: wasmparser::MemorySectionReader<'a>) -> Result<()> {
        let mut mems = wasm_encoder::MemorySection::new();
        for m in reader {
            let m = m?;
            self.mem_type.get_or_insert(if m.memory64 { MemType::Wasm64 } else { MemType::Wasm32 });
            mems.memory(self.re.memory_type(m)?);
        }
        // The maps: fixed-size 32-bit memories of their own.
        let map = |entries: u64| {
            let pages = entries.div_ceil(1 << 16);
            wasm_encoder::MemoryType {
                minimum: pages,
                maximum: Some(pages),
                memory64: false,
                shared: false,
                page_size_log2: None,
            }
        };
        if let Some(mem) = self.plan.tracked_mem {
            mems.memory(map(dirty_max_page(mem) + 2));
        }
        if let Some(mem) = self.plan.paged_mem {
            // Pages read, pages written.
            mems.memory(map(page_map_entries(mem)));
            mems.memory(map(page_map_entries(mem)));
        }
        self.module.section(&mems);
        Ok(())
    }

    fn globals(&mut self, reader: wasmparser::GlobalSectionReader<'a>) -> Result<()> {
        let mut globals = GlobalSection::new();
        for (i, g) in reader.into_iter().enumerate() {
            let g = g?;
            if g.ty.mutable {
                self.persistent_globals.push(self.imported_globals + i as u32);
            }
            self.defined_globals += 1;
            self.re.parse_global(&mut globals, g)?;
        }
        push_counter_globals(&mut globals, self.plan.temps());
        self.module.section(&globals);
        self.global_done = true;
        Ok(())
    }

    fn exports(&mut self, reader: wasmparser::ExportSectionReader<'a>) -> Result<()> {
        let mut exports = ExportSection::new();
        for e in reader {
            let e = e?;
            if e.name == COUNTER_EXPORT
                || e.name == MEMORY_EXPORT
                || e.name == OUT_OF_INSTRUCTIONS_FLAG_EXPORT
                || e.name == TABLE_EXPORT
                || e.name.starts_with(PERSISTENT_GLOBAL_PREFIX)
            {
                bail!("the module already exports {:?}, a name the runner reserves", e.name);
            }
            self.re.parse_export(&mut exports, e)?;
        }
        self.push_our_exports(&mut exports)?;
        self.module.section(&exports);
        self.export_done = true;
        Ok(())
    }

    /// One function body, instrumented; after the last, the helpers' bodies and the section.
    fn code_entry(&mut self, body: wasmparser::FunctionBody<'a>) -> Result<()> {
        let globals = self.imported_globals + self.defined_globals;
        let ooi_func = self.re.imported_funcs + self.re.shift + self.defined_funcs;
        let dirty = self.plan.dirty_map.map(|map| Dirty { map, mark_func: ooi_func + 2, temps: globals + 2 });
        let pages = self.plan.pages_map.map(|map| Paged { map, touch_func: ooi_func + 2 + u32::from(dirty.is_some()) });
        let ix = Injected { counter: globals, ooi_func, bulk_func: ooi_func + 1, dirty, pages };
        let entry = self.code_entry as usize;
        let profiled = self.profiled();
        let hooks = if profiled {
            let ty = *self.func_types.get(entry).context("more bodies than functions")?;
            Some(Hooks {
                enter: self.re.imported_funcs,
                exit: self.re.imported_funcs + 1,
                func: self.re.imported_funcs + self.code_entry,
                block: *self.result_blocks.get(ty as usize).context("a function type out of range")?,
            })
        } else {
            None
        };
        let section = self.code.as_mut().expect("code section started");
        let mem = self.mem_type.unwrap_or(MemType::Wasm32);
        let params = self
            .func_types
            .get(entry)
            .and_then(|t| self.type_params.get(*t as usize))
            .copied()
            .context("a function body without a type")?;
        instrument_body(section, body, ix, mem, self.metering, hooks, params, &mut self.re)?;
        self.code_entry += 1;
        self.code_entries_left -= 1;
        if self.code_entries_left == 0 {
            let bulk_hooks = profiled.then_some(Hooks {
                enter: self.re.imported_funcs,
                exit: self.re.imported_funcs + 1,
                func: BULK_FRAME,
                block: BlockType::Empty,
            });
            push_helper_bodies(section, ix, bulk_hooks, self.plan.tracked_mem, self.plan.paged_mem);
            self.module.section(&*section);
        }
        Ok(())
    }

    fn finish(self, tracking: Tracking) -> Result<Instrumented> {
        if !self.has_code {
            bail!("the module defines no functions");
        }
        let counted = self.plan.counted_mem.is_some();
        Ok(Instrumented {
            wasm: self.module.finish(),
            mem_type: self.mem_type.unwrap_or(MemType::Wasm32),
            has_start: self.plan.start.is_some(),
            persistent_globals: self.persistent_globals,
            custom_sections: self.custom_sections,
            tracks_heap: self.plan.tracked_mem.is_some(),
            tracks_pages: counted,
            page_faults: counted && tracking.pages == PageCounting::Faults,
        })
    }
}

/// The profiler's two hooks, of type `num_types + 2` (`[i32, i64] -> []`).
fn push_profile_imports(imports: &mut wasm_encoder::ImportSection, num_types: u32) {
    imports.import(PROFILE_MODULE, PROFILE_ENTER, wasm_encoder::EntityType::Function(num_types + 2));
    imports.import(PROFILE_MODULE, PROFILE_EXIT, wasm_encoder::EntityType::Function(num_types + 2));
}

/// The counter (i64, mutable) and the out-of-instructions flag (i32, mutable), then, for heap
/// tracking, its temporaries ([`TEMP_TYPES`]).
fn push_counter_globals(g: &mut GlobalSection, temps: bool) {
    g.global(GlobalType { val_type: ValType::I64, mutable: true, shared: false }, &ConstExpr::i64_const(0));
    g.global(GlobalType { val_type: ValType::I32, mutable: true, shared: false }, &ConstExpr::i32_const(0));
    if temps {
        for ty in TEMP_TYPES {
            let init = match ty {
                ValType::I32 => ConstExpr::i32_const(0),
                ValType::I64 => ConstExpr::i64_const(0),
                ValType::F32 => ConstExpr::f32_const(0.0f32.into()),
                ValType::F64 => ConstExpr::f64_const(0.0f64.into()),
                _ => ConstExpr::v128_const(0),
            };
            g.global(GlobalType { val_type: ty, mutable: true, shared: false }, &init);
        }
    }
}

/// The tracking maps a module gets: the written 4 KiB pages' and the first of the two Wasm-page
/// maps (each the index of its memory).
#[derive(Clone, Copy)]
struct Maps {
    dirty: Option<u32>,
    pages: Option<u32>,
}

fn push_exports(
    e: &mut ExportSection,
    counter: u32,
    start: Option<u32>,
    persistent: &[u32],
    memory: bool,
    table: bool,
    maps: Maps,
) {
    if let Some(m) = maps.dirty {
        e.export(DIRTY_EXPORT, ExportKind::Memory, m);
    }
    if let Some(map) = maps.pages {
        e.export(PAGES_READ_EXPORT, ExportKind::Memory, map);
        e.export(PAGES_WRITTEN_EXPORT, ExportKind::Memory, map + 1);
    }
    if table {
        e.export(TABLE_EXPORT, ExportKind::Table, 0);
    }
    e.export(COUNTER_EXPORT, ExportKind::Global, counter);
    if memory {
        e.export(MEMORY_EXPORT, ExportKind::Memory, 0);
    }
    e.export(OUT_OF_INSTRUCTIONS_FLAG_EXPORT, ExportKind::Global, counter + 1);
    for g in persistent {
        e.export(&format!("{PERSISTENT_GLOBAL_PREFIX}{g}"), ExportKind::Global, *g);
    }
    if let Some(f) = start {
        e.export(START_EXPORT, ExportKind::Func, f);
    }
}

#[allow(clippy::too_many_arguments)]
fn instrument_body(
    code: &mut CodeSection,
    body: wasmparser::FunctionBody<'_>,
    ix: Injected,
    mem: MemType,
    metering: Metering,
    hooks: Option<Hooks>,
    params: u32,
    re: &mut Reencoder,
) -> Result<()> {
    // The function's own locals, then (page tracking) its scratch locals: fast, unlike globals.
    let mut locals = Vec::new();
    let mut declared = 0u32;
    for pair in body.get_locals_reader()? {
        let (count, ty) = pair?;
        declared += count;
        locals.push((count, re.val_type(ty)?));
    }
    let scratch = ix.pages.map(|_| {
        let addr = addr_type(mem);
        locals.extend([addr, addr, addr].map(|t| (1, t)));
        locals.extend(SCRATCH_VALUES.map(|t| (1, t)));
        Scratch { base: params + declared }
    });
    let mut f = Function::new(locals);
    let mut reader = body.get_operators_reader()?;
    let mut ops = Vec::new();
    while !reader.eof() {
        ops.push(reader.read()?);
    }
    let points = if metering == Metering::Off { Vec::new() } else { injections(&ops, mem) };
    let mut next = points.iter().peekable();
    let last = ops.len().saturating_sub(1);
    if let Some(h) = hooks {
        // Before the entry block's charge, so that the charge is the function's own.
        emit_hook(&mut f, ix, h, h.enter);
        f.instruction(&Instruction::Block(h.block));
    }
    for (i, op) in ops.into_iter().enumerate() {
        while let Some(&&(pos, inj)) = next.peek() {
            if pos != i {
                break;
            }
            match inj {
                Injection::Static { scope, cost } => emit_static(&mut f, ix, scope, cost),
                Injection::Dynamic => emit_dynamic(&mut f, ix, &op, mem),
            }
            next.next();
        }
        if let Some(h) = hooks {
            if i == last {
                // The function's `end`: close the wrapper block first (a branch to the function's
                // label lands after it too), then the exit hook.
                f.instruction(&Instruction::End);
                emit_hook(&mut f, ix, h, h.exit);
            } else if matches!(
                op,
                Operator::Return
                    | Operator::ReturnCall { .. }
                    | Operator::ReturnCallIndirect { .. }
                    | Operator::ReturnCallRef { .. }
            ) {
                // Leaves the operands in place; a tail call's callee enters on its own.
                emit_hook(&mut f, ix, h, h.exit);
            }
        }
        if let (Some(pg), Some(sc)) = (ix.pages, scratch) {
            emit_touch(&mut f, pg, sc, &op, mem);
        }
        if let Some(d) = ix.dirty {
            if let Some((value, offset)) = store_to_heap(&op) {
                emit_store_mark(&mut f, d, value, offset, mem);
            } else if matches!(op, Operator::MemoryFill { mem: 0 }) {
                emit_bulk_mark(&mut f, d, ValType::I32, mem);
            } else if matches!(op, Operator::MemoryCopy { dst_mem: 0, .. }) {
                emit_bulk_mark(&mut f, d, addr_type(mem), mem);
            }
        }
        f.instruction(&re.instruction(op)?);
    }
    code.function(&f);
    Ok(())
}

/// `hook(func, counter)`: the function's original index and the counter's current value.
fn emit_hook(f: &mut Function, ix: Injected, h: Hooks, hook: u32) {
    f.instruction(&Instruction::I32Const(h.func as i32));
    f.instruction(&Instruction::GlobalGet(ix.counter));
    f.instruction(&Instruction::Call(hook));
}

/// The out-of-instructions handler (sets the flag, traps) and the bulk-charge helper.
fn push_helper_bodies(
    code: &mut CodeSection,
    ix: Injected,
    hooks: Option<Hooks>,
    tracked: Option<MemType>,
    paged: Option<MemType>,
) {
    let flag = ix.counter + 1;
    let mut ooi = Function::new([]);
    ooi.instruction(&Instruction::I32Const(1));
    ooi.instruction(&Instruction::GlobalSet(flag));
    ooi.instruction(&Instruction::Unreachable);
    ooi.instruction(&Instruction::End);
    code.function(&ooi);

    let mut bulk = Function::new([]);
    if let Some(h) = hooks {
        // The per-byte charge of bulk operations, which compilers inline (memcpy and memset are
        // `memory.copy` and `memory.fill` in the caller), as a frame of its own.
        emit_hook(&mut bulk, ix, h, h.enter);
    }
    bulk.instruction(&Instruction::GlobalGet(ix.counter));
    bulk.instruction(&Instruction::LocalGet(0));
    bulk.instruction(&Instruction::I64Sub);
    bulk.instruction(&Instruction::GlobalSet(ix.counter));
    bulk.instruction(&Instruction::GlobalGet(ix.counter));
    bulk.instruction(&Instruction::I64Const(0));
    bulk.instruction(&Instruction::I64LtS);
    bulk.instruction(&Instruction::If(BlockType::Empty));
    bulk.instruction(&Instruction::Call(ix.ooi_func));
    bulk.instruction(&Instruction::End);
    if let Some(h) = hooks {
        emit_hook(&mut bulk, ix, h, h.exit);
    }
    bulk.instruction(&Instruction::LocalGet(0));
    bulk.instruction(&Instruction::End);
    code.function(&bulk);

    if let (Some(mem), Some(d)) = (tracked, ix.dirty) {
        code.function(&mark_range_body(mem, d));
    }
    if let (Some(mem), Some(pg)) = (paged, ix.pages) {
        code.function(&touch_body(mem, pg));
    }
}

/// What an operation does to memory 0, for page tracking: `(bits, memarg, size, value)` of an
/// access of `size` bytes at `address + offset`, where `value` is the type of the operand above
/// the address (stores and lane loads), or `None` for a bulk operation, which the caller handles.
fn access_of<'a>(op: &'a Operator<'_>) -> Option<(i32, &'a wasmparser::MemArg, u64, Option<ValType>)> {
    use Operator::*;
    let (bits, memarg, size, value) = match op {
        I32Load { memarg } | F32Load { memarg } | I64Load32S { memarg } | I64Load32U { memarg } => {
            (TOUCH_READ, memarg, 4, None)
        }
        I64Load { memarg } | F64Load { memarg } => (TOUCH_READ, memarg, 8, None),
        I32Load8S { memarg } | I32Load8U { memarg } | I64Load8S { memarg } | I64Load8U { memarg } => {
            (TOUCH_READ, memarg, 1, None)
        }
        I32Load16S { memarg } | I32Load16U { memarg } | I64Load16S { memarg } | I64Load16U { memarg } => {
            (TOUCH_READ, memarg, 2, None)
        }
        V128Load { memarg } => (TOUCH_READ, memarg, 16, None),
        V128Load8x8S { memarg }
        | V128Load8x8U { memarg }
        | V128Load16x4S { memarg }
        | V128Load16x4U { memarg }
        | V128Load32x2S { memarg }
        | V128Load32x2U { memarg }
        | V128Load64Splat { memarg }
        | V128Load64Zero { memarg } => (TOUCH_READ, memarg, 8, None),
        V128Load8Splat { memarg } => (TOUCH_READ, memarg, 1, None),
        V128Load16Splat { memarg } => (TOUCH_READ, memarg, 2, None),
        V128Load32Splat { memarg } | V128Load32Zero { memarg } => (TOUCH_READ, memarg, 4, None),
        V128Load8Lane { memarg, .. } => (TOUCH_READ, memarg, 1, Some(ValType::V128)),
        V128Load16Lane { memarg, .. } => (TOUCH_READ, memarg, 2, Some(ValType::V128)),
        V128Load32Lane { memarg, .. } => (TOUCH_READ, memarg, 4, Some(ValType::V128)),
        V128Load64Lane { memarg, .. } => (TOUCH_READ, memarg, 8, Some(ValType::V128)),
        I32Store { memarg } => (TOUCH_WRITE, memarg, 4, Some(ValType::I32)),
        I32Store8 { memarg } => (TOUCH_WRITE, memarg, 1, Some(ValType::I32)),
        I32Store16 { memarg } => (TOUCH_WRITE, memarg, 2, Some(ValType::I32)),
        I64Store { memarg } => (TOUCH_WRITE, memarg, 8, Some(ValType::I64)),
        I64Store8 { memarg } => (TOUCH_WRITE, memarg, 1, Some(ValType::I64)),
        I64Store16 { memarg } => (TOUCH_WRITE, memarg, 2, Some(ValType::I64)),
        I64Store32 { memarg } => (TOUCH_WRITE, memarg, 4, Some(ValType::I64)),
        F32Store { memarg } => (TOUCH_WRITE, memarg, 4, Some(ValType::F32)),
        F64Store { memarg } => (TOUCH_WRITE, memarg, 8, Some(ValType::F64)),
        V128Store { memarg } => (TOUCH_WRITE, memarg, 16, Some(ValType::V128)),
        V128Store8Lane { memarg, .. } => (TOUCH_WRITE, memarg, 1, Some(ValType::V128)),
        V128Store16Lane { memarg, .. } => (TOUCH_WRITE, memarg, 2, Some(ValType::V128)),
        V128Store32Lane { memarg, .. } => (TOUCH_WRITE, memarg, 4, Some(ValType::V128)),
        V128Store64Lane { memarg, .. } => (TOUCH_WRITE, memarg, 8, Some(ValType::V128)),
        _ => return None,
    };
    (memarg.memory == 0).then_some((bits, memarg, size, value))
}

/// Before an operation on memory 0: marks the Wasm pages it touches in the page map (see the
/// module docs, "Pages touched"), leaving its operands as they were. A load or store checks the
/// map entries of its first and last byte inline and calls the touch helper only when one of
/// them lacks its bits; `memory.fill`, `memory.copy` and `memory.init` call it for their ranges
/// (the source first, then the destination).
fn emit_touch(f: &mut Function, pg: Paged, sc: Scratch, op: &Operator<'_>, mem: MemType) {
    use Instruction as I;
    let wide = mem == MemType::Wasm64;
    let c = |v: u64| if wide { I::I64Const(v as i64) } else { I::I32Const(v as u32 as i32) };
    let add = if wide { I::I64Add } else { I::I32Add };
    let emit = |f: &mut Function, is: &[I]| {
        for i in is {
            f.instruction(i);
        }
    };
    let (a, b, n) = (sc.addr(0), sc.addr(1), sc.addr(2));
    match op {
        Operator::MemoryFill { mem: 0 } => {
            // [dst, value, n]
            let v = sc.value(ValType::I32);
            emit(f, &[I::LocalSet(n), I::LocalSet(v), I::LocalSet(a)]);
            emit(f, &[I::LocalGet(a), I::LocalGet(n), I::I32Const(TOUCH_WRITE), I::Call(pg.touch_func)]);
            emit(f, &[I::LocalGet(a), I::LocalGet(v), I::LocalGet(n)]);
        }
        Operator::MemoryCopy { dst_mem: 0, src_mem: 0 } => {
            // [dst, src, n]: the source read, then the destination written.
            emit(f, &[I::LocalSet(n), I::LocalSet(b), I::LocalSet(a)]);
            emit(f, &[I::LocalGet(b), I::LocalGet(n), I::I32Const(TOUCH_READ), I::Call(pg.touch_func)]);
            emit(f, &[I::LocalGet(a), I::LocalGet(n), I::I32Const(TOUCH_WRITE), I::Call(pg.touch_func)]);
            emit(f, &[I::LocalGet(a), I::LocalGet(b), I::LocalGet(n)]);
        }
        Operator::MemoryInit { mem: 0, .. } => {
            // [dst (address), offset (i32), n (i32)]
            let (o, k) = (sc.value(ValType::I32), sc.value(ValType::I64));
            // n is an i32: kept in the i64 local, widened (the helper takes an address-typed n).
            emit(
                f,
                &[I::I64ExtendI32U, I::LocalSet(k), I::LocalSet(o), I::LocalSet(a), I::LocalGet(a), I::LocalGet(k)],
            );
            if !wide {
                f.instruction(&I::I32WrapI64);
            }
            emit(
                f,
                &[I::I32Const(TOUCH_WRITE), I::Call(pg.touch_func), I::LocalGet(a), I::LocalGet(o), I::LocalGet(k)],
            );
            emit(f, &[I::I32WrapI64]);
        }
        _ => {
            let Some((bits, memarg, size, value)) = access_of(op) else { return };
            let offset = memarg.offset;
            // With its natural alignment (the hint says so: compilers give it only where the
            // type's alignment holds, and an access that broke it would be undefined behaviour
            // in Rust and C), an access of at most 16 bytes cannot cross a 64 KiB page: its
            // first byte's page is its only one.
            let one_page = size <= 16 && (1u64 << memarg.align) >= size && offset % size == 0;
            // The value above the address waits in a local of its type.
            let v = value.map(|v| sc.value(v));
            if let Some(v) = v {
                f.instruction(&I::LocalSet(v));
            }
            f.instruction(&I::LocalSet(a));
            if wide {
                // 64-bit heaps are rare: the helper marks them.
                emit(f, &[I::LocalGet(a), c(offset), add.clone(), c(size), I::I32Const(bits), I::Call(pg.touch_func)]);
            } else {
                // map[(address + at) >> 16] = 1, in the map of reads or of writes: no branch.
                let map = if bits == TOUCH_READ { pg.map } else { pg.map + 1 };
                let mark = |f: &mut Function, at: i64| {
                    emit(
                        f,
                        &[
                            I::LocalGet(a),
                            I::I32Const(at as u32 as i32),
                            I::I32Add,
                            I::I32Const(PAGE_SHIFT as i32),
                            I::I32ShrU,
                            I::I32Const(1),
                            I::I32Store8(map_memarg(map)),
                        ],
                    )
                };
                mark(f, offset as i64);
                if !one_page {
                    mark(f, offset.wrapping_add(size - 1) as i64);
                }
            }
            f.instruction(&I::LocalGet(a));
            if let Some(v) = v {
                f.instruction(&I::LocalGet(v));
            }
        }
    }
}

/// The marking helper `(start, n, bits)`: sets the entries of the Wasm pages of
/// `start .. start + n` (none if `n` is 0) to 1 in the map of reads (`bits` 1) or of writes
/// (`bits` 3). A range that wraps around the address space, or runs past a 64-bit map, ends at
/// the map's last page: the access traps on the heap anyway.
fn touch_body(mem: MemType, pg: Paged) -> Function {
    use Instruction as I;
    let wide = mem == MemType::Wasm64;
    let ty = addr_type(mem);
    let max = page_map_entries(mem) - 1;
    let c = |v: u64| if wide { I::I64Const(v as i64) } else { I::I32Const(v as u32 as i32) };
    let (eqz, shr, add, sub, lt, gt, le) = if wide {
        (I::I64Eqz, I::I64ShrU, I::I64Add, I::I64Sub, I::I64LtU, I::I64GtU, I::I64LeU)
    } else {
        (I::I32Eqz, I::I32ShrU, I::I32Add, I::I32Sub, I::I32LtU, I::I32GtU, I::I32LeU)
    };
    // Params 0 (start), 1 (n), 2 (bits); locals 3 (page), 4 (last page).
    let mut f = Function::new([(2, ty)]);
    let mut emit = |is: &[I]| {
        for i in is {
            f.instruction(i);
        }
    };
    emit(&[I::LocalGet(1), eqz, I::If(BlockType::Empty), I::Return, I::End]);
    emit(&[I::LocalGet(0), c(u64::from(PAGE_SHIFT)), shr.clone(), I::LocalSet(3)]);
    emit(&[I::LocalGet(0), I::LocalGet(1), add.clone(), c(1), sub, c(u64::from(PAGE_SHIFT)), shr, I::LocalSet(4)]);
    // Wrapped around: up to the map's last page. Past the map: clamp.
    emit(&[I::LocalGet(4), I::LocalGet(3), lt, I::If(BlockType::Empty), c(max), I::LocalSet(4), I::End]);
    emit(&[I::LocalGet(4), c(max), gt.clone(), I::If(BlockType::Empty), c(max), I::LocalSet(4), I::End]);
    emit(&[I::LocalGet(3), c(max), gt, I::If(BlockType::Empty), I::Return, I::End]);
    emit(&[I::Loop(BlockType::Empty), I::LocalGet(2), I::I32Const(TOUCH_WRITE), I::I32Eq, I::If(BlockType::Empty)]);
    // The map of writes, else the map of reads: [page, 1].
    for map in [pg.map + 1, pg.map] {
        emit(&[I::LocalGet(3)]);
        if wide {
            emit(&[I::I32WrapI64]);
        }
        emit(&[I::I32Const(1), I::I32Store8(map_memarg(map))]);
        if map == pg.map + 1 {
            emit(&[I::Else]);
        }
    }
    emit(&[I::End]);
    emit(&[I::LocalGet(3), c(1), add, I::LocalTee(3), I::LocalGet(4), le, I::BrIf(0), I::End, I::End]);
    f
}

/// The range-marking helper `(dst, n)`: sets the byte map's entries of the pages of
/// `dst .. dst + n` (none if `n` is 0), clamped to the map's last page (a range past the heap
/// traps in the operation that follows anyway).
fn mark_range_body(mem: MemType, d: Dirty) -> Function {
    use Instruction as I;
    let max = dirty_max_page(mem);
    let wide = mem == MemType::Wasm64;
    let ty = addr_type(mem);
    // Params 0 (dst) and 1 (n); locals 2 (page), 3 (last page).
    let mut f = Function::new([(2, ty)]);
    let c = |v: u64| if wide { I::I64Const(v as i64) } else { I::I32Const(v as u32 as i32) };
    let (eqz, shr, add, sub, lt, gt, le) = if wide {
        (I::I64Eqz, I::I64ShrU, I::I64Add, I::I64Sub, I::I64LtU, I::I64GtU, I::I64LeU)
    } else {
        (I::I32Eqz, I::I32ShrU, I::I32Add, I::I32Sub, I::I32LtU, I::I32GtU, I::I32LeU)
    };
    for i in [I::LocalGet(1), eqz, I::If(BlockType::Empty), I::Return, I::End] {
        f.instruction(&i);
    }
    for i in [I::LocalGet(0), c(u64::from(DIRTY_PAGE_SHIFT)), shr.clone(), I::LocalSet(2)] {
        f.instruction(&i);
    }
    for i in
        [I::LocalGet(0), I::LocalGet(1), add.clone(), c(1), sub, c(u64::from(DIRTY_PAGE_SHIFT)), shr, I::LocalSet(3)]
    {
        f.instruction(&i);
    }
    // dst + n - 1 wrapped around: up to the map's last page. Past the map: clamp.
    for i in [I::LocalGet(3), I::LocalGet(2), lt, I::If(BlockType::Empty), c(max), I::LocalSet(3), I::End] {
        f.instruction(&i);
    }
    for i in [I::LocalGet(3), c(max), gt.clone(), I::If(BlockType::Empty), c(max), I::LocalSet(3), I::End] {
        f.instruction(&i);
    }
    for i in [I::LocalGet(2), c(max), gt, I::If(BlockType::Empty), I::Return, I::End] {
        f.instruction(&i);
    }
    f.instruction(&I::Loop(BlockType::Empty));
    f.instruction(&I::LocalGet(2));
    if wide {
        f.instruction(&I::I32WrapI64);
    }
    f.instruction(&I::I32Const(1));
    f.instruction(&I::I32Store8(map_memarg(d.map)));
    for i in [I::LocalGet(2), c(1), add, I::LocalTee(2), I::LocalGet(3), le, I::BrIf(0), I::End, I::End] {
        f.instruction(&i);
    }
    f
}

/// The exports of a module whose kind is a function, by name (for discovering methods).
pub fn exported_functions(wasm: &[u8]) -> Result<Vec<String>> {
    let mut names = Vec::new();
    for payload in Parser::new(0).parse_all(wasm) {
        if let Payload::ExportSection(reader) = payload? {
            for e in reader {
                let e = e?;
                if e.kind == ExternalKind::Func {
                    names.push(e.name.to_string());
                }
            }
        }
    }
    Ok(names)
}

/// A custom section's content, if present.
pub fn custom_section<'a>(sections: &'a [(String, Vec<u8>)], name: &str) -> Option<&'a [u8]> {
    sections.iter().find(|(n, _)| n == name).map(|(_, d)| d.as_slice())
}
