//! The IC system API (`ic0.*`) as wasmtime host functions, with the replica's fees.
//!
//! Fees follow docs/sources.md (dfinity/ic `system_api_complexity.rs`
//! `overhead`, `linker.rs` `charge_for_cpu*`): every call first charges its fixed overhead plus
//! 1 instruction per byte copied (50 per byte for data leaving the canister), then does its work.
//! Stable memory follows the native-stable-memory rules of section 4
//! (`system_api_replacements.rs`): 20 + len per read or write, 1,000 per 4 KiB page a message
//! writes for the first time, 100 per grow, and per-message page budgets. The wasm `call` (5)
//! that reaches a host function is charged by the instrumented caller, as on the IC.

use std::fmt;

use candid::Principal;
use wasmtime::{Caller, Global, Linker, Memory, Val};

/// 4 KiB: the OS page, the unit of the dirty-page fee and the page budgets.
pub const OS_PAGE: u64 = 4096;
/// 64 KiB: the wasm page, the unit of `stable64_size` and `stable64_grow`.
pub const WASM_PAGE: u64 = stablebench_grid::ic::WASM_PAGE_BYTES;
/// Fee per 4 KiB page a message writes to stable memory for the first time
/// (`DEFAULT_DIRTY_PAGE_OVERHEAD`, application subnets).
pub const DIRTY_PAGE_FEE: u64 = 1_000;
/// Largest stable memory, in wasm pages (500 GiB, `max_stable_memory_size`).
pub const MAX_STABLE_PAGES: u64 = 500 * (1 << 30) / WASM_PAGE;
/// Canister log capacity in bytes (MAX_ALLOWED_CANISTER_LOG_BUFFER_SIZE).
pub const LOG_CAPACITY: u64 = 4096;
/// Multiplier for bytes that leave the canister (BYTE_TRANSMISSION_COST_FACTOR).
pub const TRANSMISSION_FACTOR: u64 = 50;

/// Which entry point a message runs; decides which APIs are allowed, the reply rules and the
/// stable-memory page budgets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The module's start function (install and upgrade).
    Start,
    /// `canister_init`.
    Init,
    /// `canister_pre_upgrade`.
    PreUpgrade,
    /// `canister_post_upgrade`.
    PostUpgrade,
    /// `canister_update <name>`.
    Update,
    /// `canister_query <name>`, non-replicated.
    Query,
}

impl Kind {
    /// Per-execution page budgets in 4 KiB pages: (dirty, accessed) (rs/config/src/embedders.rs).
    pub fn page_budgets(self) -> (u64, u64) {
        match self {
            Kind::Update => (524_288, 524_288),
            Kind::Query => (262_144, 262_144),
            Kind::Start | Kind::Init | Kind::PreUpgrade | Kind::PostUpgrade => (2_097_152, 2_097_152),
        }
    }
}

/// Why a message stopped with a trap. Carried through wasmtime as the host function's error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Trap {
    /// The instruction counter went below zero (the message's limit was reached).
    OutOfInstructions,
    /// The canister called `ic0.trap`, or trapped in wasm (unreachable, out of bounds, ...).
    Canister(String),
    /// The canister used the system API in a way the IC forbids.
    ContractViolation(String),
    /// A stable memory access outside its size.
    StableOutOfBounds,
    /// A heap range outside the wasm memory.
    HeapOutOfBounds,
    /// A page budget of this execution was exceeded.
    PageLimit(&'static str),
    /// The runner does not implement this API offline.
    Unsupported(String),
}

impl fmt::Display for Trap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Trap::OutOfInstructions => {
                write!(f, "Canister exceeded the limit of instructions for a single message execution")
            }
            Trap::Canister(m) => write!(f, "Canister trapped: {m}"),
            Trap::ContractViolation(m) => write!(f, "Canister violated contract: {m}"),
            Trap::StableOutOfBounds => write!(f, "Canister trapped: stable memory out of bounds"),
            Trap::HeapOutOfBounds => write!(f, "Canister trapped: heap out of bounds"),
            Trap::PageLimit(which) => write!(
                f,
                "Exceeded the limit for the number of {which} pages in the stable memory in a single execution"
            ),
            Trap::Unsupported(api) => write!(f, "ic0.{api} is not supported by the offline runner"),
        }
    }
}

impl std::error::Error for Trap {}

type HostResult<T> = wasmtime::Result<T>;

fn trap<T>(t: Trap) -> HostResult<T> {
    Err(wasmtime::Error::new(t))
}

/// Stable memory with the replica's per-message bookkeeping, plus an undo log so that a
/// message's writes can be rolled back (trapped updates, every query).
#[derive(Clone, Debug, Default)]
pub struct StableMemory {
    /// The bytes; the length is a multiple of 64 KiB.
    pub bytes: Vec<u8>,
    /// Per 4 KiB page, this message: bit 0 written, bit 1 accessed (the replica's bytemap).
    state: Vec<u8>,
    /// Pages whose `state` is non-zero, to reset them at the next message.
    touched: Vec<u64>,
    /// Original content of each page this message wrote, for rollback.
    undo: Vec<(u64, Box<[u8]>)>,
    /// Size at the start of the message, for rollback.
    len_at_start: usize,
    dirty_left: u64,
    accessed_left: u64,
    /// Pages written for the first time in this message.
    pub dirtied: u64,
}

impl StableMemory {
    /// Stable memory holding `bytes`, rounded up to whole 64 KiB pages.
    pub fn from_bytes(mut bytes: Vec<u8>) -> StableMemory {
        let len = bytes.len().div_ceil(WASM_PAGE as usize) * WASM_PAGE as usize;
        bytes.resize(len, 0);
        let state = vec![0; len / OS_PAGE as usize];
        StableMemory { len_at_start: len, bytes, state, ..Default::default() }
    }

    /// Size in wasm pages.
    pub fn pages(&self) -> u64 {
        self.bytes.len() as u64 / WASM_PAGE
    }

    /// Starts a message of `kind`: resets the bytemap and budgets, starts a new undo log.
    pub fn begin(&mut self, kind: Kind) {
        for p in self.touched.drain(..) {
            self.state[p as usize] = 0;
        }
        self.undo.clear();
        self.len_at_start = self.bytes.len();
        (self.dirty_left, self.accessed_left) = kind.page_budgets();
        self.dirtied = 0;
    }

    /// Undoes every write and grow of the current message.
    pub fn rollback(&mut self) {
        for (page, old) in self.undo.drain(..).rev() {
            let at = (page * OS_PAGE) as usize;
            if at < self.len_at_start {
                self.bytes[at..at + old.len()].copy_from_slice(&old);
            }
        }
        self.bytes.truncate(self.len_at_start);
        self.state.truncate(self.len_at_start / OS_PAGE as usize);
        self.touched.retain(|&p| (p as usize) < self.state.len());
    }

    fn grow(&mut self, new_pages: u64) -> Option<u64> {
        let old = self.pages();
        let total = old.checked_add(new_pages)?;
        if total > MAX_STABLE_PAGES {
            return None;
        }
        self.bytes.resize((total * WASM_PAGE) as usize, 0);
        self.state.resize((total * WASM_PAGE / OS_PAGE) as usize, 0);
        Some(old)
    }

    fn check_range(&self, off: u64, len: u64) -> Result<(), Trap> {
        match off.checked_add(len) {
            Some(end) if end <= self.bytes.len() as u64 => Ok(()),
            _ => Err(Trap::StableOutOfBounds),
        }
    }

    /// Pages of [off, off + len) without `bit`.
    fn count_without(&self, off: u64, len: u64, bit: u8) -> u64 {
        let (first, last) = (off / OS_PAGE, (off + len - 1) / OS_PAGE);
        (first..=last).filter(|&p| self.state[p as usize] & bit == 0).count() as u64
    }

    fn mark(&mut self, off: u64, len: u64, bits: u8, save: bool) {
        let (first, last) = (off / OS_PAGE, (off + len - 1) / OS_PAGE);
        for p in first..=last {
            let s = &mut self.state[p as usize];
            if *s == 0 {
                self.touched.push(p);
            }
            let at = (p * OS_PAGE) as usize;
            // Pages grown by this message are cut off by `rollback`, never restored: no copy.
            if save && *s & 1 == 0 && at < self.len_at_start {
                self.undo.push((p, self.bytes[at..at + OS_PAGE as usize].into()));
            }
            *s |= bits;
        }
    }
}

/// Per-message context.
#[derive(Clone, Debug)]
pub struct Message {
    /// The entry point kind.
    pub kind: Kind,
    /// Argument bytes.
    pub arg: Vec<u8>,
    /// Caller principal.
    pub caller: Principal,
    /// Reply bytes appended so far.
    pub reply: Vec<u8>,
    /// `msg_reply` was called.
    pub replied: bool,
    /// `msg_reject` was called, with this message.
    pub rejected: Option<String>,
    /// Reply size limit in bytes (2 MiB replicated, 3 MiB query).
    pub max_reply: u64,
    /// `ic0.time` for this message, ns since 1970.
    pub time: u64,
}

pub use stablebench_grid::ic::{MAX_QUERY_REPLY_BYTES, MAX_UPDATE_REPLY_BYTES};

impl Message {
    /// A message of `kind` from `caller` with `arg`.
    pub fn new(kind: Kind, arg: Vec<u8>, caller: Principal, time: u64) -> Message {
        let max_reply = if kind == Kind::Query { MAX_QUERY_REPLY_BYTES } else { MAX_UPDATE_REPLY_BYTES };
        Message { kind, arg, caller, reply: Vec::new(), replied: false, rejected: None, max_reply, time }
    }
}

/// The state host functions work on (wasmtime store data).
#[derive(Debug)]
pub struct Host {
    /// The current message.
    pub msg: Message,
    /// Stable memory.
    pub stable: StableMemory,
    /// This canister's id.
    pub canister_id: Principal,
    /// Its controllers.
    pub controllers: Vec<Principal>,
    /// Cycle balance reported to the canister.
    pub cycles: u128,
    /// Installs + upgrades so far (`canister_version`).
    pub version: u64,
    /// The global timer (ns), 0 if unset.
    pub timer: u64,
    /// Certified data set by the canister.
    pub certified_data: Vec<u8>,
    /// Bytes of the canister log in use (debug_print and trap fees depend on the room left).
    pub log_used: u64,
    /// Print `debug_print` output to stderr.
    pub print_output: bool,
    /// Captured `debug_print` lines of the current message.
    pub output: Vec<String>,
    /// Instruction limit of the current message (the counter's start value).
    pub limit: u64,
    /// The running profile of the current message (code instrumented with `Metering::Profiled`).
    pub profile: Option<Box<crate::profile::Profiler>>,
    counter: Option<Global>,
    memory: Option<Memory>,
}

impl Host {
    /// A host for canister `canister_id` controlled by `controllers`.
    pub fn new(canister_id: Principal, controllers: Vec<Principal>) -> Host {
        Host {
            msg: Message::new(Kind::Init, Vec::new(), Principal::anonymous(), 0),
            stable: StableMemory::default(),
            canister_id,
            controllers,
            cycles: 1_000_000_000_000_000,
            version: 0,
            timer: 0,
            certified_data: Vec::new(),
            log_used: 0,
            print_output: false,
            output: Vec::new(),
            limit: 0,
            profile: None,
            counter: None,
            memory: None,
        }
    }

    /// Binds the instance's counter global and heap (after each instantiation).
    pub fn bind(&mut self, counter: Global, memory: Option<Memory>) {
        self.counter = Some(counter);
        self.memory = memory;
    }
}

/// Charges `fee` instructions; traps with [`Trap::OutOfInstructions`] below zero (DTS off).
fn charge(caller: &mut Caller<'_, Host>, fee: u64) -> HostResult<()> {
    let g = caller.data().counter.expect("counter bound");
    let v = g.get(&mut *caller).unwrap_i64();
    let left = v.saturating_sub(fee.min(i64::MAX as u64) as i64);
    g.set(&mut *caller, Val::I64(left))?;
    if left < 0 {
        return trap(Trap::OutOfInstructions);
    }
    Ok(())
}

/// Instructions executed so far in this message: limit - counter, floored at 0.
pub fn executed(limit: u64, counter: i64) -> u64 {
    (limit as i128 - counter as i128).clamp(0, u64::MAX as i128) as u64
}

fn heap<'a>(caller: &'a mut Caller<'_, Host>) -> HostResult<(&'a mut [u8], &'a mut Host)> {
    match caller.data().memory {
        Some(m) => Ok(m.data_and_store_mut(caller)),
        None => trap(Trap::HeapOutOfBounds),
    }
}

fn heap_range(heap_len: usize, at: u64, len: u64) -> HostResult<std::ops::Range<usize>> {
    match at.checked_add(len) {
        Some(end) if end <= heap_len as u64 => Ok(at as usize..end as usize),
        _ => trap(Trap::HeapOutOfBounds),
    }
}

/// Copies `src[offset..offset + size]` to the heap at `dst` (the `*_copy` idiom).
fn copy_out(
    caller: &mut Caller<'_, Host>,
    src: Vec<u8>,
    dst: u64,
    offset: u64,
    size: u64,
    what: &str,
) -> HostResult<()> {
    let end = offset.checked_add(size);
    if end.is_none_or(|e| e > src.len() as u64) {
        return trap(Trap::ContractViolation(format!("{what}: offset + size exceeds the length {}", src.len())));
    }
    let (mem, _) = heap(caller)?;
    let r = heap_range(mem.len(), dst, size)?;
    mem[r].copy_from_slice(&src[offset as usize..(offset + size) as usize]);
    Ok(())
}

fn read_heap(caller: &mut Caller<'_, Host>, src: u64, size: u64) -> HostResult<Vec<u8>> {
    let (mem, _) = heap(caller)?;
    let r = heap_range(mem.len(), src, size)?;
    Ok(mem[r].to_vec())
}

fn require(caller: &Caller<'_, Host>, api: &str, allowed: &[Kind]) -> HostResult<()> {
    let kind = caller.data().msg.kind;
    if allowed.contains(&kind) {
        Ok(())
    } else {
        trap(Trap::ContractViolation(format!("\"ic0_{api}\" cannot be executed in {kind:?} mode")))
    }
}

const NOT_START: &[Kind] = &[Kind::Init, Kind::PreUpgrade, Kind::PostUpgrade, Kind::Update, Kind::Query];
const REPLYING: &[Kind] = &[Kind::Update, Kind::Query];
const WITH_ARG: &[Kind] = &[Kind::Init, Kind::PostUpgrade, Kind::Update, Kind::Query];

fn write_u128(caller: &mut Caller<'_, Host>, dst: u64, v: u128) -> HostResult<()> {
    let (mem, _) = heap(caller)?;
    let r = heap_range(mem.len(), dst, 16)?;
    mem[r].copy_from_slice(&v.to_le_bytes());
    Ok(())
}

/// Logging fee on top of the fixed one: len (printing enabled) + 2 per byte up to the log
/// capacity + 50 per byte that still fits in the log (spec 3.2, debug_print and trap).
fn log_fee(host: &mut Host, len: u64) -> u64 {
    let room = LOG_CAPACITY - host.log_used.min(LOG_CAPACITY);
    let stored = len.min(room);
    host.log_used += stored;
    len + 2 * len.min(LOG_CAPACITY) + TRANSMISSION_FACTOR * stored
}

/// Adds every supported `ic0` function for a wasm32 canister to `linker`. A canister importing
/// anything else fails to instantiate with wasmtime's error naming the import.
pub fn add_to_linker(linker: &mut Linker<Host>) -> wasmtime::Result<()> {
    // --- message arguments, caller, method name ---
    linker.func_wrap("ic0", "msg_arg_data_size", |mut c: Caller<'_, Host>| -> HostResult<i32> {
        charge(&mut c, 500)?;
        require(&c, "msg_arg_data_size", WITH_ARG)?;
        Ok(c.data().msg.arg.len() as i32)
    })?;
    linker.func_wrap(
        "ic0",
        "msg_arg_data_copy",
        |mut c: Caller<'_, Host>, dst: i32, off: i32, size: i32| -> HostResult<()> {
            charge(&mut c, 500 + size as u32 as u64)?;
            require(&c, "msg_arg_data_copy", WITH_ARG)?;
            let arg = c.data().msg.arg.clone();
            copy_out(&mut c, arg, dst as u32 as u64, off as u32 as u64, size as u32 as u64, "msg_arg_data_copy")
        },
    )?;
    linker.func_wrap("ic0", "msg_caller_size", |mut c: Caller<'_, Host>| -> HostResult<i32> {
        charge(&mut c, 500)?;
        require(&c, "msg_caller_size", NOT_START)?;
        Ok(c.data().msg.caller.as_slice().len() as i32)
    })?;
    linker.func_wrap(
        "ic0",
        "msg_caller_copy",
        |mut c: Caller<'_, Host>, dst: i32, off: i32, size: i32| -> HostResult<()> {
            charge(&mut c, 500 + size as u32 as u64)?;
            require(&c, "msg_caller_copy", NOT_START)?;
            let who = c.data().msg.caller.as_slice().to_vec();
            copy_out(&mut c, who, dst as u32 as u64, off as u32 as u64, size as u32 as u64, "msg_caller_copy")
        },
    )?;
    linker.func_wrap("ic0", "msg_method_name_size", |mut c: Caller<'_, Host>| -> HostResult<i32> {
        charge(&mut c, 500)?;
        trap(Trap::ContractViolation("msg_method_name_size is only allowed in canister_inspect_message".into()))
    })?;
    linker.func_wrap("ic0", "accept_message", |mut c: Caller<'_, Host>| -> HostResult<()> {
        charge(&mut c, 500)?;
        trap(Trap::ContractViolation("accept_message is only allowed in canister_inspect_message".into()))
    })?;

    // --- replies ---
    linker.func_wrap(
        "ic0",
        "msg_reply_data_append",
        |mut c: Caller<'_, Host>, src: i32, size: i32| -> HostResult<()> {
            let size = size as u32 as u64;
            charge(&mut c, 500 + TRANSMISSION_FACTOR * size)?;
            require(&c, "msg_reply_data_append", REPLYING)?;
            let data = read_heap(&mut c, src as u32 as u64, size)?;
            let msg = &mut c.data_mut().msg;
            if msg.replied || msg.rejected.is_some() {
                return trap(Trap::ContractViolation("msg_reply_data_append: the call was already answered".into()));
            }
            if msg.reply.len() as u64 + size > msg.max_reply {
                return trap(Trap::ContractViolation(format!(
                    "msg_reply_data_append: the reply exceeds the maximum of {} bytes",
                    msg.max_reply
                )));
            }
            msg.reply.extend_from_slice(&data);
            Ok(())
        },
    )?;
    linker.func_wrap("ic0", "msg_reply", |mut c: Caller<'_, Host>| -> HostResult<()> {
        charge(&mut c, 500)?;
        require(&c, "msg_reply", REPLYING)?;
        let msg = &mut c.data_mut().msg;
        if msg.replied || msg.rejected.is_some() {
            return trap(Trap::ContractViolation("msg_reply: the call was already answered".into()));
        }
        msg.replied = true;
        Ok(())
    })?;
    linker.func_wrap("ic0", "msg_reject", |mut c: Caller<'_, Host>, src: i32, size: i32| -> HostResult<()> {
        let size = size as u32 as u64;
        charge(&mut c, 500 + TRANSMISSION_FACTOR * size)?;
        require(&c, "msg_reject", REPLYING)?;
        let text = String::from_utf8(read_heap(&mut c, src as u32 as u64, size)?).map_err(|_| {
            wasmtime::Error::new(Trap::ContractViolation("msg_reject: the message is not UTF-8".into()))
        })?;
        let msg = &mut c.data_mut().msg;
        if msg.replied || msg.rejected.is_some() {
            return trap(Trap::ContractViolation("msg_reject: the call was already answered".into()));
        }
        msg.reply.clear();
        msg.rejected = Some(text);
        Ok(())
    })?;

    // --- cycles (the runner's canister holds a fixed balance; calls carry no cycles) ---
    linker.func_wrap("ic0", "msg_cycles_available128", |mut c: Caller<'_, Host>, dst: i32| -> HostResult<()> {
        charge(&mut c, 500)?;
        write_u128(&mut c, dst as u32 as u64, 0)
    })?;
    linker.func_wrap("ic0", "msg_cycles_refunded128", |mut c: Caller<'_, Host>, dst: i32| -> HostResult<()> {
        charge(&mut c, 500)?;
        write_u128(&mut c, dst as u32 as u64, 0)
    })?;
    linker.func_wrap(
        "ic0",
        "msg_cycles_accept128",
        |mut c: Caller<'_, Host>, _hi: i64, _lo: i64, dst: i32| -> HostResult<()> {
            charge(&mut c, 500)?;
            write_u128(&mut c, dst as u32 as u64, 0)
        },
    )?;
    linker.func_wrap("ic0", "canister_cycle_balance128", |mut c: Caller<'_, Host>, dst: i32| -> HostResult<()> {
        charge(&mut c, 500)?;
        let v = c.data().cycles;
        write_u128(&mut c, dst as u32 as u64, v)
    })?;
    linker.func_wrap(
        "ic0",
        "canister_liquid_cycle_balance128",
        |mut c: Caller<'_, Host>, dst: i32| -> HostResult<()> {
            charge(&mut c, 500)?;
            let v = c.data().cycles;
            write_u128(&mut c, dst as u32 as u64, v)
        },
    )?;
    linker.func_wrap(
        "ic0",
        "cycles_burn128",
        |mut c: Caller<'_, Host>, hi: i64, lo: i64, dst: i32| -> HostResult<()> {
            charge(&mut c, 500)?;
            let amount = ((hi as u64 as u128) << 64) | lo as u64 as u128;
            let burnt = amount.min(c.data().cycles);
            c.data_mut().cycles -= burnt;
            write_u128(&mut c, dst as u32 as u64, burnt)
        },
    )?;

    // --- canister identity and status ---
    linker.func_wrap("ic0", "canister_self_size", |mut c: Caller<'_, Host>| -> HostResult<i32> {
        charge(&mut c, 500)?;
        Ok(c.data().canister_id.as_slice().len() as i32)
    })?;
    linker.func_wrap(
        "ic0",
        "canister_self_copy",
        |mut c: Caller<'_, Host>, dst: i32, off: i32, size: i32| -> HostResult<()> {
            charge(&mut c, 500 + size as u32 as u64)?;
            let id = c.data().canister_id.as_slice().to_vec();
            copy_out(&mut c, id, dst as u32 as u64, off as u32 as u64, size as u32 as u64, "canister_self_copy")
        },
    )?;
    linker.func_wrap("ic0", "canister_status", |mut c: Caller<'_, Host>| -> HostResult<i32> {
        charge(&mut c, 500)?;
        Ok(1) // running
    })?;
    linker.func_wrap("ic0", "canister_version", |mut c: Caller<'_, Host>| -> HostResult<i64> {
        charge(&mut c, 500)?;
        Ok(c.data().version as i64)
    })?;
    linker.func_wrap("ic0", "is_controller", |mut c: Caller<'_, Host>, src: i32, size: i32| -> HostResult<i32> {
        charge(&mut c, 1000 + size as u32 as u64)?;
        let bytes = read_heap(&mut c, src as u32 as u64, size as u32 as u64)?;
        let p = Principal::try_from_slice(&bytes).map_err(|e| {
            wasmtime::Error::new(Trap::ContractViolation(format!("is_controller: invalid principal: {e}")))
        })?;
        Ok(c.data().controllers.contains(&p) as i32)
    })?;
    linker.func_wrap("ic0", "in_replicated_execution", |mut c: Caller<'_, Host>| -> HostResult<i32> {
        charge(&mut c, 500)?;
        Ok((c.data().msg.kind != Kind::Query) as i32)
    })?;
    linker.func_wrap("ic0", "time", |mut c: Caller<'_, Host>| -> HostResult<i64> {
        charge(&mut c, 500)?;
        require(&c, "time", NOT_START)?;
        Ok(c.data().msg.time as i64)
    })?;
    linker.func_wrap("ic0", "msg_deadline", |mut c: Caller<'_, Host>| -> HostResult<i64> {
        charge(&mut c, 500)?;
        Ok(0) // ingress messages have no deadline
    })?;
    linker.func_wrap("ic0", "global_timer_set", |mut c: Caller<'_, Host>, ts: i64| -> HostResult<i64> {
        charge(&mut c, 500)?;
        Ok(std::mem::replace(&mut c.data_mut().timer, ts as u64) as i64)
    })?;
    linker.func_wrap("ic0", "performance_counter", |mut c: Caller<'_, Host>, kind: i32| -> HostResult<i64> {
        // Charged before the counter is read, as in the replica.
        charge(&mut c, 200)?;
        if kind != 0 && kind != 1 {
            return trap(Trap::ContractViolation(format!("performance_counter: unknown counter type {kind}")));
        }
        let g = c.data().counter.expect("counter bound");
        let counter = g.get(&mut c).unwrap_i64();
        crate::profile::mark(c.data_mut(), counter);
        Ok(executed(c.data().limit, counter) as i64)
    })?;
    linker.func_wrap(
        "ic0",
        "certified_data_set",
        |mut c: Caller<'_, Host>, src: i32, size: i32| -> HostResult<()> {
            charge(&mut c, 500 + size as u32 as u64)?;
            if size > 32 {
                return trap(Trap::ContractViolation("certified_data_set: more than 32 bytes".into()));
            }
            let data = read_heap(&mut c, src as u32 as u64, size as u32 as u64)?;
            c.data_mut().certified_data = data;
            Ok(())
        },
    )?;
    linker.func_wrap("ic0", "data_certificate_present", |mut c: Caller<'_, Host>| -> HostResult<i32> {
        charge(&mut c, 500)?;
        Ok(0) // the offline runner has no subnet to certify anything
    })?;

    // --- logging and traps ---
    linker.func_wrap("ic0", "debug_print", |mut c: Caller<'_, Host>, src: i32, size: i32| -> HostResult<()> {
        let size = size as u32 as u64;
        let fee = 100 + log_fee(c.data_mut(), size);
        charge(&mut c, fee)?;
        // Never traps, even out of bounds.
        let text = read_heap(&mut c, src as u32 as u64, size).unwrap_or_default();
        let line = String::from_utf8_lossy(&text).into_owned();
        if c.data().print_output {
            eprintln!("[canister] {line}");
        }
        c.data_mut().output.push(line);
        Ok(())
    })?;
    linker.func_wrap("ic0", "trap", |mut c: Caller<'_, Host>, src: i32, size: i32| -> HostResult<()> {
        let size = size as u32 as u64;
        let fee = 500 + log_fee(c.data_mut(), size);
        charge(&mut c, fee)?;
        let text = read_heap(&mut c, src as u32 as u64, size).unwrap_or_default();
        trap(Trap::Canister(String::from_utf8_lossy(&text).into_owned()))
    })?;

    // --- stable memory (native stable memory rules) ---
    linker.func_wrap("ic0", "stable64_size", |c: Caller<'_, Host>| -> HostResult<i64> {
        Ok(c.data().stable.pages() as i64)
    })?;
    linker.func_wrap("ic0", "stable64_grow", |mut c: Caller<'_, Host>, pages: i64| -> HostResult<i64> {
        charge(&mut c, 100)?;
        Ok(c.data_mut().stable.grow(pages as u64).map_or(-1, |old| old as i64))
    })?;
    linker.func_wrap(
        "ic0",
        "stable64_read",
        |mut c: Caller<'_, Host>, dst: i64, off: i64, len: i64| -> HostResult<()> {
            stable_read(&mut c, dst as u64, off as u64, len as u64)
        },
    )?;
    linker.func_wrap(
        "ic0",
        "stable64_write",
        |mut c: Caller<'_, Host>, off: i64, src: i64, len: i64| -> HostResult<()> {
            stable_write(&mut c, off as u64, src as u64, len as u64)
        },
    )?;
    linker.func_wrap("ic0", "stable_size", |c: Caller<'_, Host>| -> HostResult<i32> {
        let pages = c.data().stable.pages();
        if pages > 65_536 {
            return trap(Trap::ContractViolation(
                "stable_size: stable memory is larger than 4 GiB, use stable64_size".into(),
            ));
        }
        Ok(pages as i32)
    })?;
    linker.func_wrap("ic0", "stable_grow", |mut c: Caller<'_, Host>, pages: i32| -> HostResult<i32> {
        charge(&mut c, 100)?;
        let s = &mut c.data_mut().stable;
        if s.pages() + pages as u32 as u64 > 65_536 {
            return Ok(-1);
        }
        Ok(s.grow(pages as u32 as u64).map_or(-1, |old| old as i32))
    })?;
    linker.func_wrap(
        "ic0",
        "stable_read",
        |mut c: Caller<'_, Host>, dst: i32, off: i32, len: i32| -> HostResult<()> {
            stable_read(&mut c, dst as u32 as u64, off as u32 as u64, len as u32 as u64)
        },
    )?;
    linker.func_wrap(
        "ic0",
        "stable_write",
        |mut c: Caller<'_, Host>, off: i32, src: i32, len: i32| -> HostResult<()> {
            stable_write(&mut c, off as u32 as u64, src as u32 as u64, len as u32 as u64)
        },
    )?;

    // --- inter-canister calls: there is no other canister offline ---
    for (name, params) in
        [("call_new", 8), ("call_on_cleanup", 2), ("call_data_append", 2), ("call_with_best_effort_response", 1)]
    {
        let name: &'static str = name;
        let ty = wasmtime::FuncType::new(linker.engine(), vec![wasmtime::ValType::I32; params], vec![]);
        linker.func_new("ic0", name, ty, move |_c, _args, _res| trap(Trap::Unsupported(name.into())))?;
    }
    linker.func_wrap("ic0", "call_cycles_add128", |_c: Caller<'_, Host>, _hi: i64, _lo: i64| -> HostResult<()> {
        trap(Trap::Unsupported("call_cycles_add128".into()))
    })?;
    linker.func_wrap("ic0", "call_perform", |_c: Caller<'_, Host>| -> HostResult<i32> {
        trap(Trap::Unsupported("call_perform".into()))
    })?;
    Ok(())
}

fn stable_read(c: &mut Caller<'_, Host>, dst: u64, off: u64, len: u64) -> HostResult<()> {
    charge(c, 20u64.saturating_add(len))?;
    if len == 0 {
        return Ok(());
    }
    let (mem, host) = heap(c)?;
    let s = &mut host.stable;
    s.check_range(off, len).map_err(wasmtime::Error::new)?;
    let r = heap_range(mem.len(), dst, len)?;
    let new = s.count_without(off, len, 2);
    if new > s.accessed_left {
        return trap(Trap::PageLimit("accessed"));
    }
    s.mark(off, len, 2, false);
    s.accessed_left -= new;
    mem[r].copy_from_slice(&s.bytes[off as usize..(off + len) as usize]);
    Ok(())
}

fn stable_write(c: &mut Caller<'_, Host>, off: u64, src: u64, len: u64) -> HostResult<()> {
    charge(c, 20u64.saturating_add(len))?;
    if len == 0 {
        return Ok(());
    }
    let dirty = {
        let (mem, host) = heap(c)?;
        let s = &host.stable;
        s.check_range(off, len).map_err(wasmtime::Error::new)?;
        heap_range(mem.len(), src, len)?;
        let (dirty, accessed) = (s.count_without(off, len, 1), s.count_without(off, len, 2));
        if dirty > s.dirty_left {
            return trap(Trap::PageLimit("modified"));
        }
        if accessed > s.accessed_left {
            return trap(Trap::PageLimit("accessed"));
        }
        dirty
    };
    charge(c, DIRTY_PAGE_FEE * dirty)?;
    let (mem, host) = heap(c)?;
    let s = &mut host.stable;
    let accessed = s.count_without(off, len, 2);
    s.mark(off, len, 3, true);
    s.dirty_left -= dirty;
    s.accessed_left -= accessed;
    s.dirtied += dirty;
    s.bytes[off as usize..(off + len) as usize].copy_from_slice(&mem[src as usize..(src + len) as usize]);
    Ok(())
}
