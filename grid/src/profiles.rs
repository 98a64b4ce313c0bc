//! Pragma profiles (the settings axis of the grid): named, ordered SQLite settings with the reason for each value.
//!
//! Order matters, and is part of a profile: see the `stablebench-pragmas` crate (`pragmas/`), which
//! holds the recommended and bulk-load settings (users' canisters depend on it) and applies them.

pub use stablebench_pragmas::Pragma;

/// Where a profile keeps the database.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Storage {
    /// A file in stable memory (ic-rusqlite's mounted memory): survives upgrades.
    StableMemory,
    /// SQLite's `:memory:` database in the wasm heap: no stable-memory cost at all, and lost on
    /// upgrade. The floor no stable-memory setup can beat; benchmarks only.
    Heap,
}

/// A named, ordered list of settings applied right after a connection is opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Profile {
    /// Profile name: an identifier, used in benchmark names (`..._<name>`) and the init argument.
    pub name: &'static str,
    /// Where the values come from, or what this profile changes against `reference`.
    pub source: &'static str,
    /// Where the database lives.
    pub storage: Storage,
    /// Whether COMMIT and ROLLBACK stay atomic (false for `journal_mode = OFF`).
    pub atomic: bool,
    /// A guarantee of the reference's schema this profile gives up, if any (for example
    /// foreign-key enforcement). Such a profile may be deployed by a canister that checks the
    /// rule itself, but is never the recommendation: it measures a different database.
    pub relaxes: Option<&'static str>,
    /// The settings, in the order they are applied.
    pub pragmas: &'static [Pragma],
}

const PAGE_4K: Pragma = stablebench_pragmas::PAGE_SIZE_4K;
const LOCK_EXCLUSIVE: Pragma = stablebench_pragmas::LOCKING_EXCLUSIVE;
const JOURNAL_PERSIST: Pragma = stablebench_pragmas::JOURNAL_PERSIST;
const SYNC_NORMAL: Pragma = stablebench_pragmas::SYNCHRONOUS_NORMAL;
const TEMP_MEMORY: Pragma = stablebench_pragmas::TEMP_STORE_MEMORY;
const CACHE_WHOLE: Pragma = stablebench_pragmas::CACHE_WHOLE;

/// One of the reference's settings replaced by `value` (the sweep's one-factor-at-a-time change).
const fn set(base: Pragma, value: &'static str, why: &'static str) -> Pragma {
    Pragma { name: base.name, value, why }
}

/// A sweep profile: the reference with one setting changed.
const fn sweep(name: &'static str, source: &'static str, atomic: bool, pragmas: &'static [Pragma]) -> Profile {
    Profile { name, source, storage: Storage::StableMemory, atomic, relaxes: None, pragmas }
}

/// The settings of the reference benchmark (the seed document's pragma table), in our order.
pub const REFERENCE: Profile = Profile {
    name: "reference",
    source: "the pragma table of the ic-rusqlite users-orders benchmark (wasm-forge/ic-rusqlite benchmarks)",
    storage: Storage::StableMemory,
    atomic: true,
    relaxes: None,
    pragmas: &[PAGE_4K, LOCK_EXCLUSIVE, JOURNAL_PERSIST, SYNC_NORMAL, TEMP_MEMORY, CACHE_WHOLE],
};

/// ic-rusqlite 0.5's own defaults (`ConnectionConfig::default`), applied in our order instead of
/// the library's `HashMap` order.
pub const IC_RUSQLITE: Profile = Profile {
    name: "ic_rusqlite",
    source: "ic-rusqlite 0.5 ConnectionConfig::default",
    storage: Storage::StableMemory,
    atomic: true,
    relaxes: None,
    pragmas: &[
        PAGE_4K,
        LOCK_EXCLUSIVE,
        JOURNAL_PERSIST,
        set(SYNC_NORMAL, "OFF", "ic-rusqlite's default: no sync calls at all."),
        TEMP_MEMORY,
        set(CACHE_WHOLE, "500000", "ic-rusqlite's default: 500,000 pages."),
    ],
};

/// The database in the heap (`:memory:`): the floor for every stable-memory profile.
pub const MEMORY: Profile = Profile {
    name: "memory",
    source: "SQLite's :memory: database in the wasm heap, no stable memory, temp_store FILE (the floor)",
    storage: Storage::Heap,
    atomic: true,
    relaxes: None,
    pragmas: &[
        PAGE_4K,
        set(SYNC_NORMAL, "OFF", "Nothing to sync in the heap."),
        set(
            TEMP_MEMORY,
            "FILE",
            "FILE, as in journal_memory_temp_file, so that the floor's sorter collects its keys \
             in one buffer as that profile's does (see temp_store FILE there); with the whole \
             cache no sort reaches a file. With MEMORY that profile built the indexes faster \
             than the floor.",
        ),
        set(CACHE_WHOLE, "1000000", "An in-memory database lives in its page cache."),
    ],
};

const JOURNAL_IN_HEAP: Pragma = stablebench_pragmas::JOURNAL_MEMORY;
const TEMP_FILE: Pragma = stablebench_pragmas::TEMP_STORE_FILE;
const CACHE_SMALL: Pragma = set(CACHE_WHOLE, "2000", "A small cache: 2,000 pages (8 MiB at 4 KiB).");

/// The reference with the rollback journal in the heap.
pub const JOURNAL_MEMORY: Profile = sweep(
    "journal_memory",
    "journal_mode MEMORY",
    true,
    &[PAGE_4K, LOCK_EXCLUSIVE, JOURNAL_IN_HEAP, SYNC_NORMAL, TEMP_MEMORY, CACHE_WHOLE],
);

/// The two settings that each beat the reference under canbench's model while keeping its
/// guarantees, together: the rollback journal in the heap and the sorter's single buffer. The
/// recommendation until the IC's memory tracker, now the bulk-load profile
/// (`stablebench_pragmas::BULK_LOAD`), and the profile the key-value, scaling and Chia cells run
/// under ([`WORKLOADS`]).
pub const JOURNAL_MEMORY_TEMP_FILE: Profile = sweep(
    "journal_memory_temp_file",
    "journal_mode MEMORY and temp_store FILE (combined)",
    true,
    &stablebench_pragmas::BULK_LOAD,
);

/// The reference with an 8 MiB page cache.
pub const CACHE_8MIB: Profile = sweep(
    "cache_8mib",
    "cache_size 2000 pages (8 MiB)",
    true,
    &[PAGE_4K, LOCK_EXCLUSIVE, JOURNAL_PERSIST, SYNC_NORMAL, TEMP_MEMORY, CACHE_SMALL],
);

/// The reference with 16 KiB pages and an 8 MiB page cache: the recommendation from the first
/// pass over mainnet's pricing until journal MEMORY beat PERSIST with the same cache and pages.
pub const CACHE_8MIB_PAGE_16K: Profile = sweep(
    "cache_8mib_page_16k",
    "page_size 16384 and an 8 MiB cache (cache_size -8192 KiB), combined",
    true,
    &[
        stablebench_pragmas::PAGE_SIZE_16K,
        LOCK_EXCLUSIVE,
        JOURNAL_PERSIST,
        SYNC_NORMAL,
        TEMP_MEMORY,
        stablebench_pragmas::CACHE_8MIB,
    ],
);

/// [`CACHE_8MIB_PAGE_16K`] with the rollback journal in the heap: the recommendation chosen by the
/// nine users/orders steps on mainnet, until the choice went to the everyday calls among the
/// profiles whose heap stays bounded (its `temp_store` MEMORY is not).
pub const CACHE_8MIB_PAGE_16K_JOURNAL_MEMORY: Profile = sweep(
    "cache_8mib_page_16k_journal_memory",
    "page_size 16384, an 8 MiB cache and journal_mode MEMORY, combined",
    true,
    &[
        stablebench_pragmas::PAGE_SIZE_16K,
        LOCK_EXCLUSIVE,
        stablebench_pragmas::JOURNAL_MEMORY,
        SYNC_NORMAL,
        TEMP_MEMORY,
        stablebench_pragmas::CACHE_8MIB,
    ],
);

/// `page_8k` with `temp_store` FILE: the recommendation (`stablebench_pragmas::RECOMMENDED`), the
/// profile whose per-call mix costs least on mainnet among those whose heap stays bounded
/// (`report::recommend`).
pub const PAGE_8K_TEMP_FILE: Profile = sweep(
    "page_8k_temp_file",
    "page_size 8192 and temp_store FILE, combined (sorts spill to a temporary file)",
    true,
    &stablebench_pragmas::RECOMMENDED,
);

/// The reference with `page_size` `$bytes` and an 8 MiB page cache (the page-size axis around the
/// recommendation).
macro_rules! small_cache_pages {
    ($name:literal, $source:literal, $bytes:literal $(,)?) => {
        sweep(
            $name,
            $source,
            true,
            &[
                set(PAGE_4K, $bytes, "Larger pages with the small cache."),
                LOCK_EXCLUSIVE,
                JOURNAL_PERSIST,
                SYNC_NORMAL,
                TEMP_MEMORY,
                stablebench_pragmas::CACHE_8MIB,
            ],
        )
    };
}

/// The profile the key-value workloads (trie, NodeStore, sysrepo), the scaling curves and the Chia
/// replay's cache-rich run use: `journal_memory_temp_file`, named in every such cell's name. It
/// was the recommendation when those workloads were written; keeping it keeps their names and
/// history comparable, and `docs/per_call_profiles.md` prices one key-value call under every
/// profile, the recommended one included.
pub const WORKLOADS: Profile = JOURNAL_MEMORY_TEMP_FILE;

/// [`JOURNAL_MEMORY_TEMP_FILE`] with 16 KiB pages, the page size ic-sqlite-vfs fixes: where a table's
/// rows are large (an index-tree entry over about a quarter of a page spills to an overflow page)
/// or a read touches many rows of one page, a larger page does less work per row, and every
/// page a write dirties is four OS pages of stable memory. Swept over users/orders and run on the
/// key-value workloads next to [`WORKLOADS`] (`cells::KV_PAGE_16K_PROFILE`).
pub const JOURNAL_MEMORY_TEMP_FILE_PAGE_16K: Profile = sweep(
    "journal_memory_temp_file_page_16k",
    "journal_mode MEMORY and temp_store FILE (combined) with page_size 16384",
    true,
    &[
        set(
            PAGE_4K,
            "16384",
            "16 KiB pages, ic-sqlite-vfs's page size: an index-tree entry of up to 4,086 bytes \
             stays on its page (1,002 at 4 KiB), and every page a write dirties is four OS pages \
             of stable memory.",
        ),
        LOCK_EXCLUSIVE,
        JOURNAL_IN_HEAP,
        SYNC_NORMAL,
        TEMP_FILE,
        CACHE_WHOLE,
    ],
);

/// [`JOURNAL_MEMORY_TEMP_FILE`] with a small page cache (2,000 pages, 8 MiB): the cache-poor setting of
/// the Chia replay, in place of the original's slow machine (a database larger than the cache
/// reads and writes stable memory). Not one of [`PROFILES`]: it is not swept over users/orders.
pub const JOURNAL_MEMORY_TEMP_FILE_CACHE_8MIB: Profile = sweep(
    "journal_memory_temp_file_cache_8mib",
    "journal_mode MEMORY and temp_store FILE with cache_size 2000 (a small cache)",
    true,
    &[PAGE_4K, LOCK_EXCLUSIVE, JOURNAL_IN_HEAP, SYNC_NORMAL, TEMP_FILE, CACHE_SMALL],
);

/// ic-sqlite-vfs 2.1's own settings, as its update connections apply them (`src/db/pragmas.rs`;
/// its read-only query connections set the same cache, `query_only` and `locking_mode`). The
/// library fixes all of them except the per-connection `cache_size`: 16 KiB pages are its VFS's
/// unit (`SQLITE_PAGE_SIZE`, the overlay's dirty-page size), the journal is in the heap, and its
/// SQLite is built with `SQLITE_TEMP_STORE=3`, so temporary storage is always in memory whatever
/// `temp_store` says (`journal_memory_temp_file`'s `temp_store = FILE` cannot be had). The
/// `sqlite_vfs` cells of the grid only (the ic-sqlite-vfs canister, `vfs/`).
pub const VFS_DEFAULT: Profile = Profile {
    name: "vfs_default",
    source: "ic-sqlite-vfs 2.1 as shipped (src/db/pragmas.rs): 16 KiB pages, journal MEMORY, a 32 MiB cache",
    storage: Storage::StableMemory,
    atomic: true,
    relaxes: None,
    pragmas: &[VFS_PAGE_16K, LOCK_EXCLUSIVE, JOURNAL_IN_HEAP, VFS_SYNC_OFF, TEMP_MEMORY, VFS_CACHE_32MIB],
};

/// [`VFS_DEFAULT`] with [`WORKLOADS`]'s cache budget: 768 MiB, the bound our canister puts on
/// `cache_size` under the default 3 GiB `wasm_memory_limit` (a quarter of it), so that a
/// comparison with the key-value workloads' ic-rusqlite cells is not a comparison of caches.
pub const VFS_CACHE_768MIB: Profile = Profile {
    name: "vfs_cache_768mib",
    source: "ic-sqlite-vfs 2.1 with cache_size -786432 (768 MiB, journal_memory_temp_file's budget)",
    storage: Storage::StableMemory,
    atomic: true,
    relaxes: None,
    pragmas: &[
        VFS_PAGE_16K,
        LOCK_EXCLUSIVE,
        JOURNAL_IN_HEAP,
        VFS_SYNC_OFF,
        TEMP_MEMORY,
        set(
            CACHE_WHOLE,
            "-786432",
            "768 MiB of page cache (a negative cache_size is KiB): the budget \
             journal_memory_temp_file gets under the default 3 GiB wasm_memory_limit, set on \
             every connection the library opens.",
        ),
    ],
};

/// The settings of the ic-sqlite-vfs profiles, in the order the library applies them.
pub const VFS_PROFILES: [Profile; 2] = [VFS_DEFAULT, VFS_CACHE_768MIB];

const VFS_PAGE_16K: Pragma = set(
    PAGE_4K,
    "16384",
    "Fixed by ic-sqlite-vfs: its VFS reports a 16 KiB sector and keeps dirty pages in a heap \
     overlay in 16 KiB units until the commit publishes them.",
);
const VFS_SYNC_OFF: Pragma =
    set(SYNC_NORMAL, "OFF", "ic-sqlite-vfs's value: durability comes from the IC's message atomicity.");
const VFS_CACHE_32MIB: Pragma = set(CACHE_WHOLE, "-32768", "ic-sqlite-vfs's default: 32 MiB (2,048 pages of 16 KiB).");

/// The reference without foreign-key enforcement, which SQLite as ic-rusqlite builds it turns on
/// by default (`SQLITE_DEFAULT_FOREIGN_KEYS=1`): what the check on every order insert costs.
pub const FOREIGN_KEYS_OFF: Profile = Profile {
    name: "foreign_keys_off",
    source: "foreign_keys OFF (changes semantics: orders of missing users are accepted)",
    storage: Storage::StableMemory,
    atomic: true,
    relaxes: Some("foreign keys are not enforced: an order may name a user that does not exist"),
    pragmas: &[
        PAGE_4K,
        LOCK_EXCLUSIVE,
        JOURNAL_PERSIST,
        SYNC_NORMAL,
        TEMP_MEMORY,
        CACHE_WHOLE,
        Pragma {
            name: "foreign_keys",
            value: "OFF",
            why: "No lookup of the order's user for each order inserted; DELETE on orders can \
                  run in one pass again instead of collecting the rowids first and reading each \
                  deleted order's user_id for the constraint counter; no search for orders \
                  when a user is deleted. The schema's FOREIGN KEY clause \
                  becomes documentation; the canister must keep orders pointing at real users \
                  itself.",
        },
    ],
};

/// Every profile, in the order benchmarks and reports list them: the reference, the library's
/// defaults, the heap floor, the sweep (the reference with one setting changed), then
/// combinations of two settings.
pub const PROFILES: [Profile; 27] = [
    REFERENCE,
    IC_RUSQLITE,
    MEMORY,
    sweep(
        "journal_truncate",
        "journal_mode TRUNCATE",
        true,
        &[
            PAGE_4K,
            LOCK_EXCLUSIVE,
            set(JOURNAL_PERSIST, "TRUNCATE", "Truncate the journal to 0 bytes at commit."),
            SYNC_NORMAL,
            TEMP_MEMORY,
            CACHE_WHOLE,
        ],
    ),
    JOURNAL_MEMORY,
    sweep(
        "journal_wal",
        "journal_mode WAL (EXCLUSIVE locking, so no shared memory)",
        true,
        &[
            PAGE_4K,
            LOCK_EXCLUSIVE,
            set(JOURNAL_PERSIST, "WAL", "Write-ahead log in a second file of the polyfill's file system."),
            SYNC_NORMAL,
            TEMP_MEMORY,
            CACHE_WHOLE,
        ],
    ),
    sweep(
        "journal_off",
        "journal_mode OFF (ROLLBACK does nothing: not atomic)",
        false,
        &[
            PAGE_4K,
            LOCK_EXCLUSIVE,
            set(JOURNAL_PERSIST, "OFF", "No journal: ROLLBACK cannot undo anything."),
            SYNC_NORMAL,
            TEMP_MEMORY,
            CACHE_WHOLE,
        ],
    ),
    sweep(
        "sync_off",
        "synchronous OFF",
        true,
        &[
            PAGE_4K,
            LOCK_EXCLUSIVE,
            JOURNAL_PERSIST,
            set(SYNC_NORMAL, "OFF", "No sync calls."),
            TEMP_MEMORY,
            CACHE_WHOLE,
        ],
    ),
    sweep(
        "sync_full",
        "synchronous FULL",
        true,
        &[
            PAGE_4K,
            LOCK_EXCLUSIVE,
            JOURNAL_PERSIST,
            set(SYNC_NORMAL, "FULL", "Sync after every journal write."),
            TEMP_MEMORY,
            CACHE_WHOLE,
        ],
    ),
    sweep(
        "page_8k",
        "page_size 8192",
        true,
        &[
            set(PAGE_4K, "8192", "8 KiB pages: two OS pages each."),
            LOCK_EXCLUSIVE,
            JOURNAL_PERSIST,
            SYNC_NORMAL,
            TEMP_MEMORY,
            CACHE_WHOLE,
        ],
    ),
    sweep(
        "page_16k",
        "page_size 16384",
        true,
        &[
            set(PAGE_4K, "16384", "16 KiB pages."),
            LOCK_EXCLUSIVE,
            JOURNAL_PERSIST,
            SYNC_NORMAL,
            TEMP_MEMORY,
            CACHE_WHOLE,
        ],
    ),
    sweep(
        "page_32k",
        "page_size 32768",
        true,
        &[
            set(PAGE_4K, "32768", "32 KiB pages."),
            LOCK_EXCLUSIVE,
            JOURNAL_PERSIST,
            SYNC_NORMAL,
            TEMP_MEMORY,
            CACHE_WHOLE,
        ],
    ),
    sweep(
        "page_64k",
        "page_size 65536",
        true,
        &[
            set(PAGE_4K, "65536", "64 KiB pages, SQLite's largest."),
            LOCK_EXCLUSIVE,
            JOURNAL_PERSIST,
            SYNC_NORMAL,
            TEMP_MEMORY,
            CACHE_WHOLE,
        ],
    ),
    CACHE_8MIB,
    sweep(
        "cache_40mib",
        "cache_size 10000 pages (40 MiB)",
        true,
        &[
            PAGE_4K,
            LOCK_EXCLUSIVE,
            JOURNAL_PERSIST,
            SYNC_NORMAL,
            TEMP_MEMORY,
            set(CACHE_WHOLE, "10000", "10,000 pages: about half the reference database."),
        ],
    ),
    sweep(
        "locking_normal",
        "locking_mode NORMAL",
        true,
        &[
            PAGE_4K,
            set(LOCK_EXCLUSIVE, "NORMAL", "Lock and unlock around every transaction."),
            JOURNAL_PERSIST,
            SYNC_NORMAL,
            TEMP_MEMORY,
            CACHE_WHOLE,
        ],
    ),
    sweep(
        "temp_file",
        "temp_store FILE",
        true,
        &[PAGE_4K, LOCK_EXCLUSIVE, JOURNAL_PERSIST, SYNC_NORMAL, TEMP_FILE, CACHE_WHOLE],
    ),
    FOREIGN_KEYS_OFF,
    JOURNAL_MEMORY_TEMP_FILE,
    JOURNAL_MEMORY_TEMP_FILE_PAGE_16K,
    sweep(
        "temp_file_cache_8mib",
        "temp_store FILE and cache_size 2000 pages, combined (sorts spill to a temporary file)",
        true,
        &[PAGE_4K, LOCK_EXCLUSIVE, JOURNAL_PERSIST, SYNC_NORMAL, TEMP_FILE, CACHE_SMALL],
    ),
    // The small cache with each of the other settings that made calls cheaper on mainnet: WAL,
    // and larger pages (8 MiB of cache whatever the page size).
    sweep(
        "cache_8mib_journal_wal",
        "journal_mode WAL and cache_size 2000 pages (8 MiB), combined",
        true,
        &[
            PAGE_4K,
            LOCK_EXCLUSIVE,
            set(JOURNAL_PERSIST, "WAL", "Write-ahead log in a second file of the polyfill's file system."),
            SYNC_NORMAL,
            TEMP_MEMORY,
            CACHE_SMALL,
        ],
    ),
    small_cache_pages!(
        "cache_8mib_page_8k",
        "page_size 8192 and an 8 MiB cache (cache_size -8192 KiB), combined",
        "8192"
    ),
    CACHE_8MIB_PAGE_16K,
    CACHE_8MIB_PAGE_16K_JOURNAL_MEMORY,
    small_cache_pages!(
        "cache_8mib_page_32k",
        "page_size 32768 and an 8 MiB cache (cache_size -8192 KiB), combined",
        "32768",
    ),
    PAGE_8K_TEMP_FILE,
];

/// The profile the canister applies unless its install argument names another: the pragma
/// guide's recommendation, chosen by `report::recommend` (`report/tests/readme.rs` checks it against
/// the committed results): the cheapest per-call mix on mainnet among the profiles that keep
/// COMMIT/ROLLBACK atomic, the database in stable memory, foreign keys enforced and the heap bounded.
pub const DEFAULT: Profile = PAGE_8K_TEMP_FILE;

/// The pragmas reported by `stablebench::pragma::read_active`, in this order.
pub const REPORTED: [&str; 8] = [
    "page_size",
    "locking_mode",
    "journal_mode",
    "synchronous",
    "temp_store",
    "cache_size",
    "foreign_keys",
    "auto_vacuum",
];

impl Profile {
    /// Finds a profile by name.
    pub fn by_name(name: &str) -> Option<Profile> {
        PROFILES.into_iter().find(|p| p.name == name)
    }

    /// Whether a canister may run this profile: its database must survive upgrades (stable
    /// memory) and COMMIT/ROLLBACK must stay atomic. The error says why not.
    pub fn deployable(&self) -> std::result::Result<(), String> {
        if self.storage == Storage::Heap {
            return Err(format!(
                "profile {} keeps the database in the heap, which every upgrade discards: it is for benchmarks only",
                self.name
            ));
        }
        if !self.atomic {
            return Err(format!("profile {} is not atomic ({}): it is for benchmarks only", self.name, self.source));
        }
        Ok(())
    }
}
