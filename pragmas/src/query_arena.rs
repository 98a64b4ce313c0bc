//! A global allocator for single-threaded Wasm canisters that puts a query's allocations on the
//! fewest 64 KiB pages: in a message whose changes the IC discards (a non-replicated query),
//! everything is bump-allocated from one region reserved beforehand, and nothing in it is freed.
//!
//! On the IC a message pays for every Wasm page it first accesses and again for every page it
//! first writes. A general-purpose allocator such as dlmalloc (Rust's on wasm32, and the
//! `dlmalloc` crate) keeps its free chunks on doubly linked bins threaded through the free chunks
//! themselves: taking a chunk writes its neighbours in the bin, freeing one merges it with the
//! chunks beside it and links it into a bin. Once the canister's long-lived data has grown and
//! fragmented the heap, those chunks lie all over it, so a query that only decodes an argument
//! and encodes a reply touches tens of pages for its temporaries (stablebench's page profile,
//! `docs/page-budget.md`: `dlmalloc::dlmalloc::Dlmalloc<A>::malloc` first touches most of the
//! pages of a heap map's `kv_get` and `kv_len`). Size classes with LIFO free lists do not help:
//! they hand a message the slots the previous messages freed, which are as scattered.
//!
//! A non-replicated query's changes to the heap are thrown away when it ends, so it needs no
//! free at all: [`QueryArena`] serves every allocation of such a message from a region reserved
//! in an update ([`QueryArena::reserve`]), at the next free byte, and makes every free of a block
//! in the region a no-op (a free of the last block allocated gives its bytes back, so a message's
//! short-lived temporaries reuse the same bytes). So a query's temporaries take as many pages as their bytes
//! need, next to each other, whatever the rest of the heap looks like. The region's pages are
//! never written by an update, so they cost nothing until a query uses them, and no query ever
//! sees what another wrote there. When the region is full the rest of the query's allocations go
//! to the inner allocator, and their frees too, as they would without it, so a query that
//! allocates more than the region holds reuses that memory instead of growing the heap.
//!
//! Bump mode starts only with [`QueryArena::begin`] and only when its caller says the message
//! runs non-replicated (`ic_cdk::api::in_replicated_execution()` false: a query called as a
//! query, whose state is always discarded). Everything else, updates and queries called as
//! updates included, goes to the inner allocator unchanged, so calling `begin` at the top of an
//! update is harmless. In ic-cdk a query's guard runs before its argument is decoded, so a guard
//! that calls `begin` covers the whole message:
//!
//! ```ignore
//! #[global_allocator]
//! static ALLOCATOR: stablebench_pragmas::query_arena::QueryArena<dlmalloc::GlobalDlmalloc> =
//!     stablebench_pragmas::query_arena::QueryArena::new(dlmalloc::GlobalDlmalloc);
//!
//! #[ic_cdk::init]
//! fn init() {
//!     ALLOCATOR.reserve(stablebench_pragmas::query_arena::RECOMMENDED_BYTES); // and in post_upgrade
//! }
//!
//! fn discarded() -> Result<(), String> {
//!     ALLOCATOR.begin(ic_cdk::api::in_replicated_execution());
//!     Ok(())
//! }
//!
//! #[ic_cdk::query(guard = "discarded")]
//! fn get(key: u64) -> Option<Vec<u8>> { /* ... */ }
//! ```
//!
//! Not installed by stablebench's canisters yet: measured on both production canisters at 200,000
//! keys it cut the pages of the heap map's and the ic-sqlite-vfs canister's queries by half or
//! more, but with this region's 16-byte alignment the users/orders endpoints of the ic-rusqlite
//! canister touched a page more, updates too (`docs/per-call.md`, "Tried and not yet adopted").
//! Build the production canister with it to measure it:
//! `STABLEBENCH_PRODUCTION_FEATURES=query_arena scripts/build.sh production`.
//!
//! Only for single-threaded Wasm (the IC runs one message at a time): its state is a plain cell,
//! so the type is `Sync`, as a `#[global_allocator]` must be, only on wasm without atomics.
//! Written here rather than taken from a crate: the bump allocators on crates.io (`bumpalo`,
//! `bump_alloc`) either are not global allocators or cannot fall back to another allocator for the
//! messages whose memory must be freed.

use core::alloc::{GlobalAlloc, Layout};
use core::cell::UnsafeCell;
use core::ptr;

/// The region to reserve: 4 MiB, room for a query's largest reply (the IC allows 3 MiB; the
/// canisters stop at 2,000,000 bytes) grown in place at the region's end, with the rows and
/// temporaries before it. Its 64 pages add to the canister's memory but cost no
/// instructions until a query touches them.
pub const RECOMMENDED_BYTES: usize = 4 << 20;

/// The allocator's state: the reserved region and, in bump mode, its next free byte.
struct State {
    start: usize,
    end: usize,
    /// The next free byte of the region while a discarded message runs; 0 otherwise.
    next: usize,
    /// The start of the last block bump-allocated (what a free or a grow may reuse in place).
    last: usize,
}

impl State {
    /// Whether `p` lies in the reserved region.
    fn holds(&self, p: *const u8) -> bool {
        (self.start..self.end).contains(&(p as usize))
    }
}

/// Bump allocation from a reserved region in non-replicated queries, `A` for everything else
/// (see the module's docs).
pub struct QueryArena<A> {
    inner: A,
    state: UnsafeCell<State>,
}

// SAFETY: a Wasm module without the atomics feature runs one thread, so the cell is never shared.
#[cfg(all(target_family = "wasm", not(target_feature = "atomics")))]
unsafe impl<A: Sync> Sync for QueryArena<A> {}

impl<A> QueryArena<A> {
    /// `inner` with no region reserved yet: until [`Self::reserve`] every allocation is `inner`'s.
    pub const fn new(inner: A) -> Self {
        QueryArena { inner, state: UnsafeCell::new(State { start: 0, end: 0, next: 0, last: 0 }) }
    }

    /// The allocator behind the region.
    pub fn inner(&self) -> &A {
        &self.inner
    }

    /// The bytes of the reserved region (0 before [`Self::reserve`]).
    pub fn reserved(&self) -> usize {
        // SAFETY: single-threaded and not inside an allocation (see the type's docs).
        let s = unsafe { &*self.state.get() };
        s.end - s.start
    }

    /// Whether `p` lies in the reserved region.
    pub fn contains(&self, p: *const u8) -> bool {
        // SAFETY: as in `reserved`.
        unsafe { &*self.state.get() }.holds(p)
    }

    /// Whether this message bump-allocates (after [`Self::begin`] in a non-replicated message).
    pub fn bumping(&self) -> bool {
        // SAFETY: as in `reserved`.
        unsafe { (*self.state.get()).next != 0 }
    }

    /// Starts bump allocation for the rest of this message if `replicated` is false, i.e. if the
    /// IC will discard the message's changes (pass `ic_cdk::api::in_replicated_execution()`).
    /// Call it first thing in every query (an ic-cdk guard runs before the argument is decoded);
    /// in a replicated message it does nothing. Does nothing before [`Self::reserve`].
    ///
    /// Never call it with `false` in a message whose changes are kept: its frees would be lost
    /// and a later query would hand out the bytes again.
    pub fn begin(&self, replicated: bool) {
        // SAFETY: as in `reserved`.
        let s = unsafe { &mut *self.state.get() };
        if !replicated && s.start != 0 {
            s.next = s.start;
            s.last = 0;
        }
    }
}

impl<A: GlobalAlloc> QueryArena<A> {
    /// Reserves the region (`bytes`, rounded up to 64 KiB pages, aligned to 16 bytes: a page
    /// alignment would leave a free chunk before it that the inner allocator then hands out, away
    /// from its other chunks) from the inner allocator, once: in `init` and in `post_upgrade`, which run replicated. Returns
    /// whether a region is reserved now (false if the inner allocator refused it; the canister
    /// then works as without this type). A second call keeps the first region.
    pub fn reserve(&self, bytes: usize) -> bool {
        const PAGE: usize = 64 * 1024;
        // SAFETY: as in `reserved`; the layout's size is a non-zero multiple of its alignment.
        unsafe {
            let s = &mut *self.state.get();
            if s.start == 0 && s.next == 0 {
                let size = bytes.div_ceil(PAGE).max(1) * PAGE;
                let region = self.inner.alloc(Layout::from_size_align_unchecked(size, 16));
                if !region.is_null() {
                    s.start = region as usize;
                    s.end = s.start + size;
                }
            }
            s.start != 0
        }
    }

    /// A block of `layout` at the next free byte of the region, or null if it does not fit.
    ///
    /// # Safety
    /// Bump mode is on (`next != 0`); not reentrant.
    unsafe fn bump(&self, s: &mut State, layout: Layout) -> *mut u8 {
        let at = match s.next.checked_add(layout.align() - 1) {
            Some(up) => up & !(layout.align() - 1),
            None => return ptr::null_mut(),
        };
        match at.checked_add(layout.size()) {
            Some(end) if end <= s.end => {
                s.last = at;
                s.next = end;
                at as *mut u8
            }
            _ => ptr::null_mut(),
        }
    }
}

unsafe impl<A: GlobalAlloc> GlobalAlloc for QueryArena<A> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let s = &mut *self.state.get();
        if s.next != 0 {
            let p = self.bump(s, layout);
            if !p.is_null() {
                return p;
            }
        }
        self.inner.alloc(layout)
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let s = &mut *self.state.get();
        if s.next != 0 {
            let p = self.bump(s, layout);
            if !p.is_null() {
                // The region's bytes may hold what an earlier query wrote (its pages' changes
                // were discarded, but this message may have reused them already).
                ptr::write_bytes(p, 0, layout.size());
                return p;
            }
        }
        self.inner.alloc_zeroed(layout)
    }

    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        let s = &mut *self.state.get();
        if s.next == 0 || !s.holds(p) {
            // Outside the region (an update's block, or one from before the message or from
            // after the region filled up) the inner allocator frees it as always: a long query
            // that outgrows the region then reuses its memory instead of growing the heap.
            self.inner.dealloc(p, layout)
        } else if p as usize == s.last {
            // The last block: its bytes are the next allocation's.
            s.next = s.last;
            s.last = 0;
        }
        // Any other free of a block in the region is dropped: the heap's changes are thrown away
        // when the message ends, so there is nothing to give back.
    }

    unsafe fn realloc(&self, old: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let s = &mut *self.state.get();
        if s.next == 0 {
            return self.inner.realloc(old, layout, new_size);
        }
        if old as usize == s.last && s.last != 0 && s.last + new_size <= s.end {
            // The last block grows or shrinks in place.
            s.next = s.last + new_size;
            return old;
        }
        if s.holds(old) && new_size <= layout.size() {
            return old;
        }
        let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
        let new = self.alloc(new_layout);
        if !new.is_null() {
            ptr::copy_nonoverlapping(old, new, layout.size().min(new_size));
            self.dealloc(old, layout);
        }
        new
    }
}
