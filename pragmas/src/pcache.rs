//! A page cache for SQLite that touches fewer 64 KiB Wasm pages per message than SQLite's own
//! (`pcache1.c`), installed with [`install`] before the first connection opens.
//!
//! On the IC a message pays for every Wasm page it first accesses and again for every page it
//! first writes, so a page cache's bookkeeping costs as much as the data it caches whenever the
//! two lie on different pages. SQLite's default cache keeps each page's header right after the
//! page's 8 KiB or so of data, chains the headers of a hash slot through each other, and keeps
//! unpinned pages on a doubly linked LRU list. So:
//!
//! - a lookup reads the header of every other page on its hash chain, and pinning or unpinning a
//!   page writes the headers of its two LRU neighbours: pages of the heap that hold no data the
//!   call needs, written in every message (stablebench's page profile, `docs/page-budget.md`:
//!   `pcache1Fetch` is the function that first touches most heap pages of a one-row `kv_get` or
//!   `kv_put`);
//! - a commit truncates the cache to the database's size, and when the largest page number the
//!   cache has seen lies more than its hash size past the end (a page split renumbers a page
//!   through `PENDING_BYTE / page_size + 1`, `balance_nonroot` in `btree.c`), it reads the header
//!   of every cached page: one Wasm page per seven cached 8 KiB pages, so a one-row put reads
//!   the whole cache (`pcache1TruncateUnsafe` in `docs/page-budget.md`'s largest calls).
//!
//! This cache keeps what the bookkeeping needs in one dense open-addressing table: a page number
//! and a pointer per slot (8 bytes on wasm32), read and never written when a lookup finds its
//! page, followed by two bits of state per slot (free, pinned, unpinned, unpinned since CLOCK's
//! hand last passed), so that the pins and unpins of a message write a few bytes of one or two
//! Wasm pages. Each page's `sqlite3_pcache_page` lies right after its data and extra, as in
//! SQLite's. Eviction is CLOCK over the state bits (an unpinned page's reference is its second
//! chance), so it never reads another page's data or header, and truncating scans the table, not
//! the pages. All of its memory comes from `sqlite3_malloc64`, so SQLite's memory statistics and
//! any heap limit given to SQLite still count it. `cache_size`, `shrink_memory` and the other cache
//! settings keep their meaning (the semantics of `sqlite3_pcache_methods2`,
//! <https://sqlite.org/c3ref/pcache_methods2.html>, and the behaviour of `pcache1.c` where those
//! leave it open: a new page's extra starts with a null pointer, a cache fetched with
//! `createFlag` 1 refuses a new page once nine tenths of its size are pinned, and an unpin past
//! the cache's size frees the page).
//!
//! Not installed by stablebench's canisters, whose committed figures are SQLite's own cache: on
//! the users/orders endpoints it cuts pages at the reference size but costs more pages than
//! SQLite's own at ten times it, where the table spans more Wasm pages than a call's pages
//! (`docs/per-call.md`, "Tried and not adopted"). Build the production canister with it to measure
//! it: `STABLEBENCH_PRODUCTION_FEATURES=pcache scripts/build.sh production`.
//! One file with no dependency but rusqlite's FFI.

use rusqlite::ffi;
use std::ffi::{c_int, c_uint, c_void};
use std::mem::size_of;
use std::ptr;

/// Installs this page cache for every connection opened afterwards. Call it before SQLite is
/// initialized, i.e. before the first connection of the process (in a canister: first thing in
/// `init` and `post_upgrade`, before ic-rusqlite opens its connection); afterwards SQLite refuses
/// the change and this returns `SQLITE_MISUSE`'s error.
pub fn install() -> rusqlite::Result<()> {
    let methods = ffi::sqlite3_pcache_methods2 {
        iVersion: 1,
        pArg: ptr::null_mut(),
        xInit: Some(x_init),
        xShutdown: Some(x_shutdown),
        xCreate: Some(x_create),
        xCachesize: Some(x_cachesize),
        xPagecount: Some(x_pagecount),
        xFetch: Some(x_fetch),
        xUnpin: Some(x_unpin),
        xRekey: Some(x_rekey),
        xTruncate: Some(x_truncate),
        xDestroy: Some(x_destroy),
        xShrink: Some(x_shrink),
    };
    // SAFETY: SQLITE_CONFIG_PCACHE2 takes one pointer to the methods and copies them.
    let rc =
        unsafe { ffi::sqlite3_config(ffi::SQLITE_CONFIG_PCACHE2, &methods as *const ffi::sqlite3_pcache_methods2) };
    if rc == ffi::SQLITE_OK {
        Ok(())
    } else {
        Err(rusqlite::Error::SqliteFailure(
            ffi::Error::new(rc),
            Some(
                "the page cache must be installed before SQLite is initialized (before the first connection opens)"
                    .into(),
            ),
        ))
    }
}

/// Whether [`install`]'s cache serves the connections: the number of caches it has created in
/// this process (one per open database file, temporary ones included). A check for tests.
pub fn caches_created() -> usize {
    CREATED.load(std::sync::atomic::Ordering::Relaxed)
}

static CREATED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Placed right after a page's data and extra: what SQLite holds while the page is pinned.
#[repr(C)]
struct Header {
    /// Must come first: SQLite is handed a pointer to it.
    page: ffi::sqlite3_pcache_page,
    key: u32,
    /// The next buffer of the free list, while the page is not in the cache.
    next_free: *mut Header,
}

/// One page in the cache, or an empty table slot (`header` null). Read, never written, when a
/// message finds a page: its state lives in the table's flags.
#[derive(Clone, Copy)]
struct Entry {
    key: u32,
    header: *mut Header,
}

/// A slot's state, two bits each in the flags after the table: empty, an unpinned page CLOCK may
/// evict, an unpinned page unpinned since CLOCK's hand last passed (spared once), a pinned page.
const FREE: u8 = 0;
const COLD: u8 = 1;
const WARM: u8 = 2;
const PINNED: u8 = 3;
const EMPTY: Entry = Entry { key: 0, header: ptr::null_mut() };
const MIN_CAPACITY: u32 = 16;
/// Buffers kept for reuse after their page left the cache; more are freed.
const KEPT_FREE: u32 = 32;

struct Cache {
    size_page: usize,
    size_extra: usize,
    purgeable: bool,
    /// `cache_size` in pages (purgeable caches only).
    max: u32,
    pages: u32,
    pinned: u32,
    max_key: u32,
    /// Open addressing with linear probing; `mask + 1` entries, at most half of them in use,
    /// followed in the same allocation by their flags, four to a byte.
    table: *mut Entry,
    flags: *mut u8,
    mask: u32,
    shift: u32,
    hand: u32,
    free: *mut Header,
    free_count: u32,
}

impl Cache {
    fn home(&self, key: u32) -> u32 {
        // Fibonacci hashing: consecutive page numbers spread over the table.
        key.wrapping_mul(0x9E37_79B9) >> self.shift
    }

    unsafe fn entry(&self, i: u32) -> *mut Entry {
        self.table.add(i as usize)
    }

    unsafe fn flag(&self, i: u32) -> u8 {
        (*self.flags.add(i as usize / 4) >> ((i % 4) * 2)) & 3
    }

    unsafe fn set_flag(&mut self, i: u32, f: u8) {
        let b = &mut *self.flags.add(i as usize / 4);
        let shift = (i % 4) * 2;
        *b = (*b & !(3 << shift)) | (f << shift);
    }

    /// The slot holding `key`, or the empty slot where it would go.
    unsafe fn find(&self, key: u32) -> (u32, bool) {
        let mut i = self.home(key);
        loop {
            let e = &*self.entry(i);
            if e.header.is_null() {
                return (i, false);
            }
            if e.key == key {
                return (i, true);
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Empties slot `i`, moving later entries of its probe run back (no tombstones).
    unsafe fn remove_at(&mut self, mut i: u32) {
        let mut j = i;
        loop {
            j = (j + 1) & self.mask;
            let e = *self.entry(j);
            if e.header.is_null() {
                break;
            }
            let h = self.home(e.key);
            // Entry j may move to i unless its home lies cyclically in (i, j].
            let stays = if i <= j { i < h && h <= j } else { i < h || h <= j };
            if !stays {
                *self.entry(i) = e;
                self.set_flag(i, self.flag(j));
                i = j;
            }
        }
        *self.entry(i) = EMPTY;
        self.set_flag(i, FREE);
    }

    unsafe fn grow(&mut self) -> bool {
        let capacity = if self.table.is_null() { MIN_CAPACITY } else { (self.mask + 1) * 2 };
        let bytes = capacity as usize * size_of::<Entry>() + capacity as usize / 4;
        let table = ffi::sqlite3_malloc64(bytes as u64) as *mut Entry;
        if table.is_null() {
            return false;
        }
        for i in 0..capacity as usize {
            table.add(i).write(EMPTY);
        }
        let flags = table.add(capacity as usize) as *mut u8;
        ptr::write_bytes(flags, 0, capacity as usize / 4);
        let (old, old_flags) = (self.table, self.flags);
        let old_capacity = if self.table.is_null() { 0 } else { self.mask + 1 };
        self.table = table;
        self.flags = flags;
        self.mask = capacity - 1;
        self.shift = 32 - capacity.trailing_zeros();
        self.hand = 0;
        for i in 0..old_capacity as usize {
            let e = *old.add(i);
            if !e.header.is_null() {
                let (slot, _) = self.find(e.key);
                *self.entry(slot) = e;
                self.set_flag(slot, (*old_flags.add(i / 4) >> ((i % 4) * 2)) & 3);
            }
        }
        if !old.is_null() {
            ffi::sqlite3_free(old as *mut c_void);
        }
        true
    }

    unsafe fn new_buffer(&mut self) -> *mut Header {
        if self.free.is_null() {
            let size = self.size_page + self.size_extra + size_of::<Header>();
            let data = ffi::sqlite3_malloc64(size as u64) as *mut u8;
            if data.is_null() {
                return ptr::null_mut();
            }
            let header = data.add(self.size_page + self.size_extra) as *mut Header;
            header.write(Header {
                page: ffi::sqlite3_pcache_page {
                    pBuf: data as *mut c_void,
                    pExtra: data.add(self.size_page) as *mut c_void,
                },
                key: 0,
                next_free: ptr::null_mut(),
            });
            header
        } else {
            let header = self.free;
            self.free = (*header).next_free;
            self.free_count -= 1;
            header
        }
    }

    unsafe fn release_buffer(&mut self, header: *mut Header) {
        if self.free_count < KEPT_FREE {
            (*header).next_free = self.free;
            self.free = header;
            self.free_count += 1;
        } else {
            ffi::sqlite3_free((*header).page.pBuf);
        }
    }

    /// Drops the page in slot `i` from the cache.
    unsafe fn discard_at(&mut self, i: u32) {
        let e = *self.entry(i);
        if self.flag(i) == PINNED {
            self.pinned -= 1;
        }
        self.pages -= 1;
        self.remove_at(i);
        self.release_buffer(e.header);
    }

    /// CLOCK: the first unpinned page the hand finds unreferenced, clearing reference bits on the
    /// way (at most two turns of the table).
    unsafe fn victim(&mut self) -> Option<u32> {
        if self.pages == self.pinned {
            return None;
        }
        let capacity = self.mask + 1;
        for _ in 0..2 * capacity {
            let i = self.hand;
            self.hand = (self.hand + 1) & self.mask;
            match self.flag(i) {
                COLD => return Some(i),
                WARM => self.set_flag(i, COLD),
                _ => {}
            }
        }
        None
    }

    /// Frees unpinned pages until at most `max` remain.
    unsafe fn enforce(&mut self, max: u32) {
        while self.pages > max {
            match self.victim() {
                Some(i) => self.discard_at(i),
                None => break,
            }
        }
    }

    unsafe fn fetch(&mut self, key: u32, create: c_int) -> *mut ffi::sqlite3_pcache_page {
        if !self.table.is_null() {
            let (i, found) = self.find(key);
            if found {
                if self.flag(i) != PINNED {
                    self.set_flag(i, PINNED);
                    self.pinned += 1;
                }
                return (*self.entry(i)).header as *mut ffi::sqlite3_pcache_page;
            }
        }
        if create == 0 {
            return ptr::null_mut();
        }
        if create == 1 && self.purgeable && self.pinned as u64 >= self.max as u64 * 9 / 10 {
            return ptr::null_mut();
        }
        // Reuse the buffer of an evicted page once the cache is full.
        let mut header = ptr::null_mut();
        if self.purgeable && self.pages + 1 >= self.max {
            if let Some(i) = self.victim() {
                header = (*self.entry(i)).header;
                self.pages -= 1;
                self.remove_at(i);
            }
        }
        if header.is_null() {
            header = self.new_buffer();
            if header.is_null() {
                return ptr::null_mut();
            }
        }
        if (self.pages + 1) * 2 > self.mask + 1 {
            // The table is kept at most half full (an unallocated one has `mask` 0); a failed
            // growth fails the fetch.
            if !self.grow() {
                self.release_buffer(header);
                return ptr::null_mut();
            }
        }
        (*header).key = key;
        // SQLite expects a new page's extra to start with a null pointer (pcache1.c sets it).
        *((*header).page.pExtra as *mut *mut c_void) = ptr::null_mut();
        let (i, _) = self.find(key);
        *self.entry(i) = Entry { key, header };
        self.set_flag(i, PINNED);
        self.pages += 1;
        self.pinned += 1;
        self.max_key = self.max_key.max(key);
        header as *mut ffi::sqlite3_pcache_page
    }

    unsafe fn unpin(&mut self, header: *mut Header, discard: bool) {
        let (i, found) = self.find((*header).key);
        debug_assert!(found);
        if !found {
            return;
        }
        if discard || (self.purgeable && self.pages > self.max) {
            self.discard_at(i);
        } else {
            if self.flag(i) == PINNED {
                self.pinned -= 1;
            }
            self.set_flag(i, WARM);
        }
    }

    unsafe fn rekey(&mut self, header: *mut Header, old: u32, new: u32) {
        let (i, found) = self.find(old);
        debug_assert!(found);
        if !found {
            return;
        }
        let flag = self.flag(i);
        self.remove_at(i);
        // Any page already under the new number is unpinned and goes.
        let (j, taken) = self.find(new);
        if taken {
            self.discard_at(j);
        }
        (*header).key = new;
        let (j, _) = self.find(new);
        *self.entry(j) = Entry { key: new, header };
        self.set_flag(j, flag);
        self.max_key = self.max_key.max(new);
    }

    unsafe fn truncate(&mut self, limit: u32) {
        if self.table.is_null() || limit > self.max_key {
            return;
        }
        let mut i = 0;
        while i <= self.mask {
            let e = *self.entry(i);
            if !e.header.is_null() && e.key >= limit {
                // The slot now holds a later entry of the run (or none): look at it again. A
                // backward shift only moves entries the scan has not passed, or (in a run that
                // wraps past the table's end) ones it passed and kept, so one pass finds them all.
                self.discard_at(i);
                continue;
            }
            i += 1;
        }
        self.max_key = limit.saturating_sub(1);
    }

    unsafe fn destroy(&mut self) {
        if !self.table.is_null() {
            for i in 0..=self.mask {
                let e = *self.entry(i);
                if !e.header.is_null() {
                    ffi::sqlite3_free((*e.header).page.pBuf);
                }
            }
            ffi::sqlite3_free(self.table as *mut c_void);
            self.table = ptr::null_mut();
        }
        self.free_buffers();
    }

    unsafe fn free_buffers(&mut self) {
        while !self.free.is_null() {
            let next = (*self.free).next_free;
            ffi::sqlite3_free((*self.free).page.pBuf);
            self.free = next;
        }
        self.free_count = 0;
    }
}

unsafe fn cache<'a>(p: *mut ffi::sqlite3_pcache) -> &'a mut Cache {
    &mut *(p as *mut Cache)
}

unsafe extern "C" fn x_init(_: *mut c_void) -> c_int {
    ffi::SQLITE_OK
}

unsafe extern "C" fn x_shutdown(_: *mut c_void) {}

unsafe extern "C" fn x_create(size_page: c_int, size_extra: c_int, purgeable: c_int) -> *mut ffi::sqlite3_pcache {
    let p = ffi::sqlite3_malloc64(size_of::<Cache>() as u64) as *mut Cache;
    if p.is_null() {
        return ptr::null_mut();
    }
    // SQLite rounds the extra to 8 bytes; the header after it needs a pointer's alignment.
    let size_extra = (size_extra as usize).next_multiple_of(8);
    p.write(Cache {
        size_page: size_page as usize,
        size_extra,
        purgeable: purgeable != 0,
        max: 0,
        pages: 0,
        pinned: 0,
        max_key: 0,
        table: ptr::null_mut(),
        flags: ptr::null_mut(),
        mask: 0,
        shift: 32,
        hand: 0,
        free: ptr::null_mut(),
        free_count: 0,
    });
    CREATED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    p as *mut ffi::sqlite3_pcache
}

unsafe extern "C" fn x_cachesize(p: *mut ffi::sqlite3_pcache, pages: c_int) {
    let c = cache(p);
    if c.purgeable {
        c.max = pages.max(0) as u32;
        c.enforce(c.max);
    }
}

unsafe extern "C" fn x_pagecount(p: *mut ffi::sqlite3_pcache) -> c_int {
    cache(p).pages as c_int
}

unsafe extern "C" fn x_fetch(p: *mut ffi::sqlite3_pcache, key: c_uint, create: c_int) -> *mut ffi::sqlite3_pcache_page {
    cache(p).fetch(key, create)
}

unsafe extern "C" fn x_unpin(p: *mut ffi::sqlite3_pcache, page: *mut ffi::sqlite3_pcache_page, discard: c_int) {
    cache(p).unpin(page as *mut Header, discard != 0)
}

unsafe extern "C" fn x_rekey(
    p: *mut ffi::sqlite3_pcache,
    page: *mut ffi::sqlite3_pcache_page,
    old: c_uint,
    new: c_uint,
) {
    cache(p).rekey(page as *mut Header, old, new)
}

unsafe extern "C" fn x_truncate(p: *mut ffi::sqlite3_pcache, limit: c_uint) {
    cache(p).truncate(limit)
}

unsafe extern "C" fn x_destroy(p: *mut ffi::sqlite3_pcache) {
    cache(p).destroy();
    ffi::sqlite3_free(p as *mut c_void);
}

unsafe extern "C" fn x_shrink(p: *mut ffi::sqlite3_pcache) {
    let c = cache(p);
    if c.purgeable {
        c.enforce(0);
    }
    c.free_buffers();
}

#[cfg(test)]
mod tests {
    //! The methods against their contract (<https://sqlite.org/c3ref/pcache_methods2.html>), with
    //! a model of which page numbers are cached and pinned; `tests/pcache.rs` runs SQLite over them.
    use super::*;
    use rand::{Rng, SeedableRng};
    use std::collections::BTreeMap;

    unsafe fn key_of(page: *mut ffi::sqlite3_pcache_page) -> u32 {
        (*(page as *mut Header)).key
    }

    #[test]
    fn fetch_unpin_rekey_and_truncate_keep_the_contract() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        unsafe {
            let p = x_create(1024, 136, 1);
            let max = 40;
            x_cachesize(p, max);
            // Cached page number -> its page and whether it is pinned.
            let mut model: BTreeMap<u32, (*mut ffi::sqlite3_pcache_page, bool)> = BTreeMap::new();
            for step in 0..20_000 {
                let key = rng.random_range(1..120u32);
                match rng.random_range(0..10) {
                    0..=4 => {
                        let create = rng.random_range(0..3);
                        let page = x_fetch(p, key, create);
                        match model.get(&key).copied() {
                            Some((known, _)) => {
                                assert_eq!(page, known, "step {step}: a cached page is found again");
                                model.insert(key, (known, true));
                            }
                            None if create == 0 => assert!(page.is_null(), "step {step}: createFlag 0 creates nothing"),
                            None => {
                                if create == 2 {
                                    assert!(!page.is_null(), "step {step}: createFlag 2 always gets a page");
                                }
                                if !page.is_null() {
                                    assert_eq!(key_of(page), key);
                                    assert!(
                                        (*(*page).pExtra.cast::<*mut c_void>()).is_null(),
                                        "a new page's extra starts null"
                                    );
                                    // Write the page so that a page handed out twice would show.
                                    *(*page).pBuf.cast::<u32>() = key;
                                    model.insert(key, (page, true));
                                }
                            }
                        }
                    }
                    5..=7 => {
                        if let Some((&k, &(page, true))) = model.range(key..).find(|(_, (_, pinned))| *pinned) {
                            let discard = rng.random_range(0..4) == 0;
                            x_unpin(p, page, discard as c_int);
                            model.insert(k, (page, false));
                            if discard {
                                model.remove(&k);
                            }
                        }
                    }
                    8 => {
                        if let Some((&old, &(page, pinned))) = model.range(key..).find(|(_, (_, pinned))| *pinned) {
                            // Half the time onto a cached, unpinned page number, which must go.
                            let unpinned: Vec<u32> = model.iter().filter(|(_, (_, p))| !p).map(|(&k, _)| k).collect();
                            let new = match unpinned.len() {
                                n if n > 0 && rng.random_range(0..2) == 0 => unpinned[rng.random_range(0..n)],
                                _ => rng.random_range(1..200u32),
                            };
                            if new != old && model.get(&new).is_none_or(|(_, pinned)| !pinned) {
                                x_rekey(p, page, old, new);
                                model.remove(&old);
                                model.insert(new, (page, pinned));
                                *(*page).pBuf.cast::<u32>() = new;
                            }
                        }
                    }
                    _ => {
                        let limit = rng.random_range(1..200u32);
                        x_truncate(p, limit);
                        model.retain(|&k, _| k < limit);
                    }
                }
                // Evictions take unpinned pages only: the model may hold more than the cache.
                let unpinned: Vec<u32> = model.iter().filter(|(_, (_, pinned))| !pinned).map(|(&k, _)| k).collect();
                for k in unpinned {
                    if x_fetch(p, k, 0).is_null() {
                        model.remove(&k);
                    } else {
                        x_unpin(p, model[&k].0, 0);
                    }
                }
                assert_eq!(x_pagecount(p) as usize, model.len(), "step {step}: the page count");
                for (&k, &(page, pinned)) in &model {
                    if pinned {
                        assert_eq!(*(*page).pBuf.cast::<u32>(), k, "step {step}: page {k} kept its content");
                    }
                }
                // Every slot's state bits agree with its entry and with the model.
                let c = cache(p);
                for i in (0..=c.mask).filter(|_| !c.table.is_null()) {
                    let (e, f) = (*c.entry(i), c.flag(i));
                    if e.header.is_null() {
                        assert_eq!(f, FREE, "step {step}: empty slot {i}");
                        continue;
                    }
                    let pinned = model.get(&e.key).map(|(_, pinned)| *pinned);
                    let want = if pinned == Some(true) { PINNED } else { f.clamp(COLD, WARM) };
                    assert_eq!(f, want, "step {step}: page {} in slot {i}", e.key);
                }
                let pinned = model.values().filter(|(_, pinned)| *pinned).count();
                assert_eq!(c.pinned as usize, pinned, "step {step}: the pinned count");
                assert!(
                    model.len() <= (max as usize).max(pinned) + 1,
                    "step {step}: {} pages cached, {pinned} pinned",
                    model.len()
                );
            }
            x_destroy(p);
        }
    }
}
