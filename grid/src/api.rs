//! Reply types of the production canister's Candid API that more than one crate needs: the
//! library's resumable jobs return them, the canister serves them, and the runner's `load`
//! command decodes them. Declared once here, where no SQLite is compiled; with feature `candid`
//! they derive `CandidType`/`Deserialize`.

/// What one batch of a resumable load did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "candid", derive(candid::CandidType, serde::Deserialize))]
pub struct Batch {
    /// Rows inserted by this call (committed).
    pub inserted: u64,
    /// The offset the next call continues from.
    pub next_offset: u64,
    /// True when every row of `offset .. offset + count` is present.
    pub complete: bool,
    /// Instructions the call had executed when the job finished (the IC performance counter:
    /// decoding the argument included, encoding the reply and the per-message fee not; 0 natively).
    pub instructions: u64,
}

/// Progress of `create_indexes`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "candid", derive(candid::CandidType, serde::Deserialize))]
pub struct IndexProgress {
    /// Indexes created by this call.
    pub created: Vec<String>,
    /// Indexes still to create.
    pub remaining: Vec<String>,
    /// True when all indexes exist.
    pub complete: bool,
    /// An index too large for one message, being built through a shadow copy of its table
    /// across calls (none when every missing index fits a message).
    pub building: Option<IndexBuild>,
    /// Instructions the call had executed when the job finished (the IC performance counter:
    /// decoding the argument included, encoding the reply and the per-message fee not; 0 natively).
    pub instructions: u64,
}

/// Where the build of an index through a shadow copy of its table stands.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "candid", derive(candid::CandidType, serde::Deserialize))]
pub struct IndexBuild {
    /// The index.
    pub index: String,
    /// Its table.
    pub table: String,
    /// Rows with rowids up to this one are copied (and indexed).
    pub copied_up_to: u64,
    /// The table's last rowid when the call ended: the copy is done when it gets there.
    pub last_rowid: u64,
    /// Rows this call copied.
    pub copied_rows: u64,
}

/// What one call of `delete_orders_of_users` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "candid", derive(candid::CandidType, serde::Deserialize))]
pub struct Deleted {
    /// Orders deleted by this call (committed).
    pub deleted: u64,
    /// Orders up to this id have been processed: pass it as `from_order_id` to continue.
    pub next_order_id: u64,
    /// True when every order has been processed.
    pub complete: bool,
    /// Instructions the call had executed when the job finished (the IC performance counter:
    /// decoding the argument included, encoding the reply and the per-message fee not; 0 natively).
    pub instructions: u64,
}

/// What a write that has no rows to report cost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "candid", derive(candid::CandidType, serde::Deserialize))]
pub struct Cost {
    /// Instructions the call had executed when it replied (the IC performance counter: decoding
    /// the argument included, encoding the reply and the per-message fee not).
    pub instructions: u64,
}

/// A pragma's current value as SQLite reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "candid", derive(candid::CandidType, serde::Deserialize))]
pub struct ActivePragma {
    /// Pragma name.
    pub name: String,
    /// Current value (SQLite's spelling: `persist`, `1`, ...).
    pub value: String,
}

/// Sizes and settings of the database.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "candid", derive(candid::CandidType, serde::Deserialize))]
pub struct Stats {
    /// Whether `create_schema` has run.
    pub schema: bool,
    /// Rows in `users`.
    pub users: u64,
    /// Rows in `orders`.
    pub orders: u64,
    /// Secondary indexes present.
    pub indexes: Vec<String>,
    /// SQLite page size, bytes.
    pub page_size: u64,
    /// Pages in the database file.
    pub page_count: u64,
    /// Unused pages in the file.
    pub freelist_count: u64,
    /// `page_size * page_count`.
    pub database_bytes: u64,
    /// Stable memory the canister has grown to, bytes.
    pub stable_memory_bytes: u64,
    /// Wasm heap size, bytes (includes SQLite's page cache).
    pub heap_bytes: u64,
    /// Name of the active pragma profile.
    pub profile: String,
    /// Current values of the reported pragmas.
    pub pragmas: Vec<ActivePragma>,
}

/// The ic-sqlite-vfs canister's API (`vfs/stablebench_vfs.did`): its error type and limits,
/// here so that the runner's tests decode its replies without linking the canister.
#[cfg(feature = "candid")]
pub mod vfs {
    /// The largest value `kv_put` accepts: 1 MiB (an ingress message carries at most 2 MiB).
    pub const MAX_VALUE_BYTES: usize = 1 << 20;

    /// The most trie entries one `kv_load` call stores (with their warm-ups, in transactions of
    /// 10,000): about 4 B instructions at 200,000 keys, far inside one 40 B update.
    pub const MAX_LOAD_PER_CALL: u64 = 50_000;

    /// Why a call failed.
    #[derive(Clone, Debug, PartialEq, candid::CandidType, serde::Deserialize)]
    pub enum Error {
        /// The caller is not a controller of this canister.
        NotController {
            /// Who called.
            caller: candid::Principal,
        },
        /// An argument is out of range (the text says which); nothing was changed.
        InvalidArgument {
            /// What is wrong.
            message: String,
        },
        /// SQLite or ic-sqlite-vfs failed; nothing was changed.
        Storage {
            /// The error as the library reports it.
            message: String,
        },
    }
}

/// How `kv_put_many` commits its entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "candid", derive(candid::CandidType, serde::Deserialize))]
pub enum Commit {
    /// One transaction for the whole batch (SQLite: `BEGIN`, one upsert per entry, `COMMIT`).
    #[cfg_attr(feature = "candid", serde(rename = "one"))]
    One,
    /// Each entry its own transaction (SQLite: one autocommitted upsert per entry). The maps have
    /// no transactions (a message's writes are kept or discarded as a whole): for them it is `One`.
    #[cfg_attr(feature = "candid", serde(rename = "each"))]
    Each,
}

/// The most keys one `kv_get_many` call reads, and entries one `kv_put_many` call writes.
pub const MAX_KEYS_PER_CALL: usize = 10_000;

/// The bytes of rows or values a reply carries at most: under the 2 MiB reply limit of a
/// replicated call (`ic::MAX_UPDATE_REPLY_BYTES`), with room left for the Candid header, column
/// names and per-value tags.
pub const MAX_REPLY_BYTES: u64 = 2_000_000;
