//! Counting the heap's Wasm pages by memory protection, the way the replica's memory tracker
//! counts them (`crate::replica::memory_tracker`), instead of by marks the rewritten module sets
//! before every load and store (`crate::instrument`, "Pages touched").
//!
//! Where a message starts to be tracked, the heap is made inaccessible (`mprotect` to
//! `PROT_NONE`). The first fault in a 64 KiB Wasm page is its first access: the page becomes
//! readable and is recorded. A write to it faults once more: its first write; the page becomes
//! writable and is recorded again. A write to a page the message has not touched yet faults
//! twice, access then write, as the replica charges it. After that the page runs at full speed:
//! the wasm code carries no tracking code at all, where the marks cost about a fifth of every
//! SQLite-bound run (`docs/runner.md`, "Pages by faults").
//!
//! The pieces:
//! - [`Creator`], the engine's memory creator ([`wasmtime::Config::with_host_memory`]): every
//!   linear memory is a reservation of the runner's own (`mmap`), so that growing a tracked heap
//!   leaves the new pages inaccessible instead of making them writable (wasmtime's own memories
//!   `mprotect` them read-write).
//! - [`Tracker`], one per memory: the protection state of each Wasm page, and the pages that
//!   faulted since the host last collected them. [`Tracker::on_fault`] is the handler wasmtime
//!   calls first for any fault on a thread inside a wasm call, host functions and wasmtime's own
//!   bulk-memory code included (`wasmtime::unix::StoreExt::set_signal_handler`; wasmtime 48.0.8
//!   `src/runtime/vm/traphandlers.rs`, `test_if_trap`).
//! - The host ([`crate::host`]) protects the heap where page tracking starts afresh (each
//!   execution, each measured step), collects the faulted pages where it collected the marks
//!   (every `performance_counter` read and the end of the execution; the fees land there, as
//!   before), opens the pages it accesses itself after marking them as it always did, and makes
//!   the heap accessible again when the execution ends, before anything else reads it.
//!
//! The counts are the marks' exactly (every committed figure was recorded with the marks and
//! is checked exactly); `STABLEBENCH_PAGE_MARKS=1` selects the marks, which every platform
//! supports. Each isolated protected page splits a mapping: if the kernel runs out of them
//! (`vm.max_map_count`, 65,530 by default), the heap is opened and the execution's counts are
//! reported as lost ([`Tracker::take_broken`]) rather than wrong.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

/// The Wasm page, the unit the tracker counts.
const WASM_PAGE: usize = 1 << 16;
/// The memory's size the runner reserves when wasmtime does not say (it always does for 32-bit
/// memories, the only kind the runner runs: 4 GiB).
const DEFAULT_RESERVATION: usize = 4 << 30;

/// A page's protection while tracking: inaccessible, readable (accessed), writable (written).
const NONE: u8 = 0;
const READ: u8 = 1;
const WRITE: u8 = 3;

/// Whether this platform counts pages by faults (Linux on x86-64 and aarch64, where the runner
/// is tested); elsewhere, and with `STABLEBENCH_PAGE_MARKS` set, the module marks them.
pub fn counting() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| {
        cfg!(all(target_os = "linux", any(target_arch = "x86_64", target_arch = "aarch64")))
            && std::env::var_os("STABLEBENCH_PAGE_MARKS").is_none_or(|v| v.is_empty() || v == "0")
    })
}

/// What the fault handler touches: allocated when the tracker first protects its memory (only
/// the heap is ever tracked; the other memories never need them).
struct Maps {
    /// Per Wasm page of the reservation: [`NONE`], [`READ`] or [`WRITE`].
    state: Box<[AtomicU8]>,
    /// The pages that faulted since the last collection (a page at most twice per protection).
    pending: Box<[AtomicU32]>,
    pending_len: AtomicUsize,
}

/// One linear memory the runner allocated, and, once it is tracked, which of its Wasm pages
/// the current message has accessed and written (see the module docs).
pub struct Tracker {
    base: usize,
    /// Bytes reserved for the memory (its capacity; it never moves).
    reserved: usize,
    /// Bytes of inaccessible guard after the reservation.
    guard: usize,
    /// The memory's current size in bytes.
    size: AtomicUsize,
    /// Whether the memory is protected and faults count.
    active: AtomicBool,
    /// An `mprotect` failed while tracking: the counts of this protection are incomplete.
    broken: AtomicBool,
    maps: OnceLock<Maps>,
}

impl std::fmt::Debug for Tracker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracker")
            .field("base", &format_args!("{:#x}", self.base))
            .field("size", &self.size.load(Ordering::Relaxed))
            .field("active", &self.active.load(Ordering::Relaxed))
            .finish()
    }
}

fn mprotect(at: usize, len: usize, prot: libc::c_int) -> bool {
    // SAFETY: `at .. at + len` lies in a reservation this module mapped and still owns.
    len == 0 || unsafe { libc::mprotect(at as *mut libc::c_void, len, prot) } == 0
}

fn prot(state: u8) -> libc::c_int {
    match state {
        NONE => libc::PROT_NONE,
        READ => libc::PROT_READ,
        _ => libc::PROT_READ | libc::PROT_WRITE,
    }
}

impl Tracker {
    fn maps(&self) -> &Maps {
        self.maps.get_or_init(|| {
            let pages = self.reserved / WASM_PAGE;
            Maps {
                state: (0..pages).map(|_| AtomicU8::new(NONE)).collect(),
                pending: (0..2 * pages).map(|_| AtomicU32::new(0)).collect(),
                pending_len: AtomicUsize::new(0),
            }
        })
    }

    fn pages(&self) -> usize {
        self.size.load(Ordering::Acquire).div_ceil(WASM_PAGE)
    }

    /// Starts tracking afresh: every page of the memory inaccessible, none recorded.
    pub fn protect(&self) {
        let maps = self.maps();
        for s in &maps.state[..self.pages()] {
            s.store(NONE, Ordering::Relaxed);
        }
        maps.pending_len.store(0, Ordering::Relaxed);
        if !mprotect(self.base, self.size.load(Ordering::Acquire), libc::PROT_NONE) {
            self.broken.store(true, Ordering::Relaxed);
            self.release();
            return;
        }
        self.active.store(true, Ordering::Release);
    }

    /// Stops tracking: the whole memory readable and writable again, for the host.
    pub fn release(&self) {
        self.active.store(false, Ordering::Release);
        let size = self.size.load(Ordering::Acquire);
        assert!(
            mprotect(self.base, size, libc::PROT_READ | libc::PROT_WRITE),
            "making the heap accessible again: {}",
            std::io::Error::last_os_error()
        );
    }

    /// Hands each page that faulted since the last call to `f`, with what the message has done
    /// to it by now ([`READ`] 1: accessed, [`WRITE`] 3: written too); a page may come twice.
    pub fn drain(&self, mut f: impl FnMut(u64, u8)) {
        let Some(maps) = self.maps.get() else { return };
        let n = maps.pending_len.swap(0, Ordering::Acquire).min(maps.pending.len());
        for slot in &maps.pending[..n] {
            let p = slot.load(Ordering::Relaxed);
            f(u64::from(p), maps.state[p as usize].load(Ordering::Relaxed));
        }
    }

    /// Whether a protection since the last call lost pages (the kernel refused an `mprotect`:
    /// `vm.max_map_count`); clears it.
    pub fn take_broken(&self) -> bool {
        self.broken.swap(false, Ordering::Relaxed)
    }

    /// The host is about to access `[at, at + len)` (`bits` 1 a read, 3 a write), which it has
    /// counted itself (`crate::host::touch_heap`): opens its pages that far, without recording.
    pub fn open(&self, at: u64, len: u64, bits: u8) {
        if len == 0 || !self.active.load(Ordering::Acquire) {
            return;
        }
        let maps = self.maps();
        let last = (self.pages() as u64).saturating_sub(1);
        for p in (at >> 16)..=(at.saturating_add(len - 1) >> 16).min(last) {
            let s = &maps.state[p as usize];
            if s.load(Ordering::Relaxed) & bits != bits {
                if !mprotect(self.base + ((p as usize) << 16), WASM_PAGE, prot(bits)) {
                    self.lose();
                    return;
                }
                s.store(bits, Ordering::Relaxed);
            }
        }
    }

    /// Runs `f`, a host access to `[at, at + len)` that the tracker must not count (the marks
    /// never saw it either): the range writable for `f`, its protection restored after.
    pub fn unseen<R>(&self, at: u64, len: u64, f: impl FnOnce() -> R) -> R {
        if len == 0 || !self.active.load(Ordering::Acquire) {
            return f();
        }
        let first = (at >> 16) as usize;
        let last = ((at.saturating_add(len - 1) >> 16) as usize).min(self.pages().saturating_sub(1));
        let span = (first << 16)..((last + 1) << 16);
        if !mprotect(self.base + span.start, span.len(), libc::PROT_READ | libc::PROT_WRITE) {
            self.lose();
            return f();
        }
        let r = f();
        let maps = self.maps();
        for p in first..=last {
            if !mprotect(self.base + (p << 16), WASM_PAGE, prot(maps.state[p].load(Ordering::Relaxed))) {
                self.lose();
                break;
            }
        }
        r
    }

    /// Gives up on this protection: the heap open, the counts marked incomplete.
    fn lose(&self) {
        self.broken.store(true, Ordering::Relaxed);
        self.active.store(false, Ordering::Release);
        // A single range back to read-write merges the mappings again, so this succeeds.
        mprotect(self.base, self.size.load(Ordering::Acquire), libc::PROT_READ | libc::PROT_WRITE);
    }

    /// The signal handler ([`wasmtime::unix::StoreExt::set_signal_handler`]): a fault in a
    /// protected page of this memory is its first access, or its first write; records it, opens
    /// the page that far and resumes the access. Anything else is not this tracker's (a wasm
    /// trap, a fault in another memory). Async-signal-safe: atomics and `mprotect` only.
    ///
    /// # Safety
    ///
    /// `info` must be what the kernel handed the signal handler for `signum`.
    pub unsafe fn on_fault(&self, signum: libc::c_int, info: *const libc::siginfo_t) -> bool {
        if (signum != libc::SIGSEGV && signum != libc::SIGBUS) || !self.active.load(Ordering::Acquire) {
            return false;
        }
        // SAFETY: the kernel hands a valid siginfo_t to a SIGSEGV or SIGBUS handler.
        let addr = unsafe { (*info).si_addr() } as usize;
        let size = self.size.load(Ordering::Acquire);
        if addr < self.base || addr >= self.base + size {
            return false;
        }
        let Some(maps) = self.maps.get() else { return false };
        let p = (addr - self.base) >> 16;
        let next = match maps.state[p].load(Ordering::Relaxed) {
            NONE => READ,
            READ => WRITE,
            _ => return false,
        };
        if !mprotect(self.base + (p << 16), WASM_PAGE, prot(next)) {
            self.lose();
            return true;
        }
        maps.state[p].store(next, Ordering::Relaxed);
        let i = maps.pending_len.fetch_add(1, Ordering::AcqRel);
        match maps.pending.get(i) {
            Some(slot) => slot.store(p as u32, Ordering::Relaxed),
            None => self.lose(),
        }
        true
    }

    fn grow_to(&self, new_size: usize) -> wasmtime::Result<()> {
        let old = self.size.load(Ordering::Acquire);
        if new_size > self.reserved {
            wasmtime::bail!("cannot grow a memory of {} bytes reserved to {new_size} bytes", self.reserved);
        }
        // While tracking, the new pages stay inaccessible (as reserved): their first access
        // faults like any other page's.
        if new_size > old
            && !self.active.load(Ordering::Acquire)
            && !mprotect(self.base + old, new_size - old, libc::PROT_READ | libc::PROT_WRITE)
        {
            wasmtime::bail!("growing the memory: {}", std::io::Error::last_os_error());
        }
        self.size.store(new_size.max(old), Ordering::Release);
        Ok(())
    }
}

impl Drop for Tracker {
    fn drop(&mut self) {
        // SAFETY: the reservation was mapped by `Creator::new_memory` and nothing refers to it
        // any more (the memory, the host and the store's handler each held this tracker).
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.reserved + self.guard) };
    }
}

/// Each memory's base address and tracker.
type Registry = Vec<(usize, Weak<Tracker>)>;

/// The memories the runner created, by base address, for the host to find its heap's tracker
/// ([`tracker_of`]).
fn registry() -> &'static Mutex<Registry> {
    static R: OnceLock<Mutex<Registry>> = OnceLock::new();
    R.get_or_init(Default::default)
}

/// The tracker of the memory whose data starts at `base`, if the runner created it.
pub fn tracker_of(base: *const u8) -> Option<Arc<Tracker>> {
    let r = registry().lock().unwrap_or_else(|e| e.into_inner());
    r.iter().filter(|(b, _)| *b == base as usize).find_map(|(_, t)| t.upgrade())
}

struct TrackedMemory(Arc<Tracker>);

// SAFETY: the memory is a reservation of `reserved + guard` bytes that never moves, whose first
// `byte_size` bytes are accessible (or protected by the tracker, which opens them on fault) and
// the rest, guard included, inaccessible.
unsafe impl wasmtime::LinearMemory for TrackedMemory {
    fn byte_size(&self) -> usize {
        self.0.size.load(Ordering::Acquire)
    }

    fn byte_capacity(&self) -> usize {
        self.0.reserved
    }

    fn grow_to(&mut self, new_size: usize) -> wasmtime::Result<()> {
        self.0.grow_to(new_size)
    }

    fn as_ptr(&self) -> *mut u8 {
        self.0.base as *mut u8
    }
}

/// The engine's memory creator when pages are counted by faults (see the module docs).
pub struct Creator;

// SAFETY: every memory is a fresh zero-filled anonymous mapping of the reservation wasmtime asks
// for plus its guard, which never moves (see `TrackedMemory`).
unsafe impl wasmtime::MemoryCreator for Creator {
    fn new_memory(
        &self,
        _ty: wasmtime::MemoryType,
        minimum: usize,
        maximum: Option<usize>,
        reserved_size_in_bytes: Option<usize>,
        guard_size_in_bytes: usize,
    ) -> Result<Box<dyn wasmtime::LinearMemory>, String> {
        let os_page = 4096;
        let reserved = reserved_size_in_bytes
            .unwrap_or(maximum.unwrap_or(DEFAULT_RESERVATION))
            .max(minimum)
            .next_multiple_of(WASM_PAGE);
        let guard = guard_size_in_bytes.next_multiple_of(os_page);
        // SAFETY: a new private anonymous mapping; nothing else refers to it.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                reserved + guard,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(format!(
                "reserving {} bytes for a memory: {}",
                reserved + guard,
                std::io::Error::last_os_error()
            ));
        }
        let tracker = Arc::new(Tracker {
            base: base as usize,
            reserved,
            guard,
            size: AtomicUsize::new(0),
            active: AtomicBool::new(false),
            broken: AtomicBool::new(false),
            maps: OnceLock::new(),
        });
        tracker.grow_to(minimum).map_err(|e| e.to_string())?;
        let mut r = registry().lock().unwrap_or_else(|e| e.into_inner());
        r.retain(|(_, t)| t.strong_count() > 0);
        r.push((base as usize, Arc::downgrade(&tracker)));
        Ok(Box::new(TrackedMemory(tracker)))
    }
}
