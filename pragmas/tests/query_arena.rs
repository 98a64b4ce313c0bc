//! `stablebench_pragmas::query_arena::QueryArena`: outside a discarded message every request is
//! the inner allocator's; in one (after `begin(false)`), generated sequences of allocations, frees
//! and reallocations of every size and alignment get disjoint, aligned blocks that keep their
//! contents, from the reserved region while it lasts and from the inner allocator after; frees in
//! the region never reach the inner allocator, and every other free does, so a query that
//! outgrows the region does not grow the heap without end.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use stablebench_pragmas::query_arena::QueryArena;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// The system allocator, counting what reaches it.
#[derive(Default)]
struct Counting {
    allocs: Cell<usize>,
    frees: Cell<usize>,
    reallocs: Cell<usize>,
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        self.allocs.set(self.allocs.get() + 1);
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        self.frees.set(self.frees.get() + 1);
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        self.reallocs.set(self.reallocs.get() + 1);
        System.realloc(ptr, layout, new_size)
    }
}

const REGION: usize = 256 * 1024;

fn layout(size: usize, align: usize) -> Layout {
    Layout::from_size_align(size, align).unwrap()
}

#[test]
fn outside_a_discarded_message_everything_is_the_inner_allocators() {
    let arena = QueryArena::new(Counting::default());
    // Before a region is reserved, even a discarded message allocates from the inner allocator.
    arena.begin(false);
    assert!(!arena.bumping());
    let p = unsafe { arena.alloc(layout(100, 8)) };
    assert_eq!(arena.inner().allocs.get(), 1);
    unsafe { arena.dealloc(p, layout(100, 8)) };
    assert_eq!(arena.inner().frees.get(), 1);
    assert!(arena.reserve(REGION - 1));
    assert_eq!(arena.reserved(), REGION, "rounded up to 64 KiB pages");
    assert!(arena.reserve(10 * REGION));
    assert_eq!(arena.reserved(), REGION, "a second reserve keeps the first region");
    assert_eq!(arena.inner().allocs.get(), 2);
    // A replicated message (an update) does not bump.
    arena.begin(true);
    assert!(!arena.bumping());
    let p = unsafe { arena.alloc(layout(100, 8)) };
    let q = unsafe { arena.realloc(p, layout(100, 8), 300) };
    unsafe { arena.dealloc(q, layout(300, 8)) };
    assert_eq!((arena.inner().allocs.get(), arena.inner().reallocs.get(), arena.inner().frees.get()), (3, 1, 2));
}

#[test]
fn a_discarded_message_bumps_from_the_region_and_frees_nothing_inside() {
    let arena = QueryArena::new(Counting::default());
    assert!(arena.reserve(REGION));
    let outside = unsafe { arena.alloc(layout(64, 8)) };
    arena.begin(false);
    assert!(arena.bumping());
    let before = (arena.inner().allocs.get(), arena.inner().frees.get());
    let a = unsafe { arena.alloc(layout(10, 1)) };
    let b = unsafe { arena.alloc(layout(24, 8)) };
    assert_eq!(b as usize, (a as usize + 10).next_multiple_of(8), "the next aligned byte");
    let c = unsafe { arena.alloc(layout(1, 64)) };
    assert_eq!(c as usize % 64, 0);
    // Freeing the last block gives its bytes to the next allocation; other frees are dropped.
    unsafe { arena.dealloc(c, layout(1, 64)) };
    let d = unsafe { arena.alloc(layout(1, 64)) };
    assert_eq!(d, c);
    unsafe { arena.dealloc(a, layout(10, 1)) };
    let e = unsafe { arena.alloc(layout(8, 8)) };
    assert!(e as usize > d as usize, "a block that is not the last is not reused");
    // The last block grows in place; another moves to the end, with its bytes.
    let grown = unsafe { arena.realloc(e, layout(8, 8), 4000) };
    assert_eq!(grown, e);
    unsafe { std::ptr::write_bytes(b, 7, 24) };
    let moved = unsafe { arena.realloc(b, layout(24, 8), 48) };
    assert!(moved as usize >= e as usize + 4000);
    assert!(unsafe { std::slice::from_raw_parts(moved, 24) }.iter().all(|&x| x == 7));
    // A block from before the message moves into the region; the inner allocator frees the old one.
    let inside = unsafe { arena.realloc(outside, layout(64, 8), 128) };
    assert_ne!(inside, outside);
    assert!(arena.contains(inside) && !arena.contains(outside));
    assert_eq!((arena.inner().allocs.get(), arena.inner().frees.get()), (before.0, before.1 + 1));
    let before = (arena.inner().allocs.get(), arena.inner().frees.get());
    // Zeroed blocks are zero even over bytes this message wrote before.
    let f = unsafe { arena.alloc(layout(256, 8)) };
    unsafe { std::ptr::write_bytes(f, 0xff, 256) };
    unsafe { arena.dealloc(f, layout(256, 8)) };
    let z = unsafe { arena.alloc_zeroed(layout(256, 8)) };
    assert_eq!(z, f);
    assert!(unsafe { std::slice::from_raw_parts(z, 256) }.iter().all(|&x| x == 0));
    assert_eq!((arena.inner().allocs.get(), arena.inner().frees.get()), before, "nothing in the region reached it");
    // What does not fit goes to the inner allocator, and so does its free.
    let big = unsafe { arena.alloc(layout(REGION, 8)) };
    assert!(!big.is_null() && !arena.contains(big));
    assert_eq!(arena.inner().allocs.get(), before.0 + 1);
    unsafe { arena.dealloc(big, layout(REGION, 8)) };
    assert_eq!(arena.inner().frees.get(), before.1 + 1);
}

#[test]
fn a_query_that_outgrows_the_region_reuses_the_inner_allocators_memory() {
    let arena = QueryArena::new(Counting::default());
    assert!(arena.reserve(REGION));
    arena.begin(false);
    // A block that stays, then a million temporaries freed out of order (never the last block):
    // the region fills up, and what comes after it is freed as it goes.
    let keep = unsafe { arena.alloc(layout(8, 8)) };
    let mut pair = [std::ptr::null_mut(); 2];
    for i in 0..1_000_000usize {
        let p = unsafe { arena.alloc(layout(100, 8)) };
        assert!(!p.is_null());
        let old = std::mem::replace(&mut pair[i % 2], p);
        if !old.is_null() {
            unsafe { arena.dealloc(old, layout(100, 8)) };
        }
    }
    let live = arena.inner().allocs.get() - arena.inner().frees.get();
    // The region itself and at most the two temporaries held at a time.
    assert!(live <= 3, "{live} blocks of the inner allocator still live");
    assert!(
        arena.inner().allocs.get() > 500_000,
        "the temporaries went to the inner allocator once the region was full: {} allocs, {} frees",
        arena.inner().allocs.get(),
        arena.inner().frees.get()
    );
    assert!(arena.contains(keep));
}

struct Block {
    ptr: *mut u8,
    layout: Layout,
    fill: u8,
}

fn check(b: &Block) {
    assert_eq!(b.ptr as usize % b.layout.align(), 0, "misaligned {:?}", b.layout);
    let bytes = unsafe { std::slice::from_raw_parts(b.ptr, b.layout.size()) };
    assert!(bytes.iter().all(|&x| x == b.fill), "a block of {:?} was overwritten", b.layout);
}

#[test]
fn generated_discarded_messages_keep_every_block() {
    for seed in 0..30u64 {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let arena = QueryArena::new(Counting::default());
        assert!(arena.reserve(REGION));
        arena.begin(false);
        let mut live: Vec<Block> = Vec::new();
        let mut outside_frees = 0;
        let random_layout = |rng: &mut ChaCha8Rng| {
            let size = match rng.random_range(0..10) {
                0 => rng.random_range(8_000..40_000),
                1..=3 => rng.random_range(1..=2_000),
                _ => rng.random_range(1..=100),
            };
            layout(size, [1, 2, 4, 8, 8, 8, 16, 64][rng.random_range(0..8)])
        };
        for step in 0..3_000u32 {
            let fill = (step % 251) as u8 + 1;
            match rng.random_range(0..10) {
                0..=4 => {
                    let l = random_layout(&mut rng);
                    let zeroed = rng.random_bool(0.2);
                    let ptr = unsafe {
                        if zeroed {
                            arena.alloc_zeroed(l)
                        } else {
                            arena.alloc(l)
                        }
                    };
                    assert!(!ptr.is_null());
                    if zeroed {
                        check(&Block { ptr, layout: l, fill: 0 });
                    }
                    unsafe { std::ptr::write_bytes(ptr, fill, l.size()) };
                    live.push(Block { ptr, layout: l, fill });
                }
                5..=7 if !live.is_empty() => {
                    // Mostly the newest block, as temporaries are freed.
                    let i = if rng.random_bool(0.5) { live.len() - 1 } else { rng.random_range(0..live.len()) };
                    let b = live.remove(i);
                    check(&b);
                    outside_frees += usize::from(!arena.contains(b.ptr));
                    unsafe { arena.dealloc(b.ptr, b.layout) };
                }
                8..=9 if !live.is_empty() => {
                    let i = if rng.random_bool(0.5) { live.len() - 1 } else { rng.random_range(0..live.len()) };
                    check(&live[i]);
                    let new_size = random_layout(&mut rng).size();
                    let old = &live[i];
                    let ptr = unsafe { arena.realloc(old.ptr, old.layout, new_size) };
                    assert!(!ptr.is_null());
                    // A block that moves is freed where it was.
                    outside_frees += usize::from(ptr != old.ptr && !arena.contains(old.ptr));
                    let kept = old.layout.size().min(new_size);
                    assert!(unsafe { std::slice::from_raw_parts(ptr, kept) }.iter().all(|&x| x == old.fill));
                    let l = layout(new_size, old.layout.align());
                    unsafe { std::ptr::write_bytes(ptr, fill, new_size) };
                    live[i] = Block { ptr, layout: l, fill };
                }
                _ => {}
            }
            if step % 300 == 0 {
                live.iter().for_each(check);
            }
        }
        live.iter().for_each(check);
        let mut spans: Vec<(usize, usize)> =
            live.iter().map(|b| (b.ptr as usize, b.ptr as usize + b.layout.size())).collect();
        spans.sort();
        for pair in spans.windows(2) {
            assert!(pair[0].1 <= pair[1].0, "seed {seed}: blocks overlap: {pair:?}");
        }
        assert_eq!(
            arena.inner().frees.get(),
            outside_frees,
            "seed {seed}: frees outside the region reach the inner allocator, and no others"
        );
        assert!(arena.inner().allocs.get() > 1, "seed {seed}: the region never filled up");
    }
}
