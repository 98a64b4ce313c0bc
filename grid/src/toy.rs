//! A toy workload, for the tests only (feature `toy`): a counter in a key-value store. It is
//! what docs/grid.md's recipe for a new workload produces, followed to the letter: this
//! declaration, one line in `cells()`, its measurement in the bench host
//! (`stablebench_host::workload::toy`) and its test (`runner/tests/toy.rs`, which runs the two
//! cells end to end through the runner in the ic-sqlite-vfs benchmark canister built with the
//! feature).
//! No result file holds it and no release wasm contains it.

use crate::cells::{Backend, Cell, Declared, Op};

/// The workload's name.
pub const WORKLOAD: &str = "counter";

/// `SIZE` increments of the counter, each a read and a write of its key: the counter must end
/// at `SIZE`.
pub static INCREMENT: Declared = Declared {
    workload: WORKLOAD,
    op: "counter_increment",
    repeatable: false,
    read: false,
    one_message: true,
    scopes: &[],
};

/// `SIZE` reads of a counter set to `SIZE` (the first one also as scope [`FIRST_READ`]): every
/// read must return `SIZE`.
pub static READ: Declared = Declared {
    workload: WORKLOAD,
    op: "counter_read",
    repeatable: true,
    read: true,
    one_message: true,
    scopes: &[FIRST_READ],
};

/// The scope of a read cell's first read.
pub const FIRST_READ: &str = "first_read";

/// Increments or reads per cell.
pub const SIZE: u64 = 100;

/// The key the counter is stored under.
pub const KEY: [u8; 32] = [7; 32];

/// The toy's two cells, on ic-sqlite-vfs's key-value table: the second canister, whose
/// benchmark wasm builds in seconds where the first's takes minutes.
pub fn cells() -> [Cell; 2] {
    let profile = Some(crate::profiles::VFS_DEFAULT);
    [&INCREMENT, &READ].map(|d| Cell { op: Op::Declared(d), size: SIZE, backend: Backend::SqliteVfs, profile })
}
