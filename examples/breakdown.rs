//! Where a step's instructions go, natively: run one step of the reference workload under
//! callgrind and read the per-function split (see README, "Where the instructions go").
//!
//! ```sh
//! cargo build --release --example breakdown
//! valgrind --tool=callgrind --collect-atstart=no --toggle-collect='breakdown::measured' \
//!     target/release/examples/breakdown users
//! callgrind_annotate --inclusive=yes callgrind.out.* | head -40
//! ```
//!
//! Steps: `users`, `orders`, `like`, `join`. Setup runs outside `measured`, so only the step is
//! counted. Sizes are the reference's.

use rusqlite::Connection;
use stablebench::bench::{Bench, BenchRun, Output, Sizes};
use stablebench::pragma::Apply;

/// The measured step. Its output is returned and dropped by the caller, outside the measured
/// region, as in the canister's benchmarks (freeing 100,000 rows is not the query's cost).
#[inline(never)]
fn measured(bench: Bench, conn: &mut Connection) -> Output {
    bench.run(conn, Sizes::REFERENCE).expect("step")
}

fn main() {
    let step = std::env::args().nth(1).unwrap_or_default();
    let bench = match step.as_str() {
        "users" => Bench::InsertUsers,
        "orders" => Bench::InsertOrders,
        "like" => Bench::SelectLike,
        "join" => Bench::SelectJoin,
        other => panic!("unknown step {other:?}: users, orders, like or join"),
    };
    let mut conn = Connection::open_in_memory().expect("open");
    stablebench::pragma::MEMORY.apply(&conn).expect("pragmas");
    bench.setup(&mut conn, Sizes::REFERENCE).expect("setup");
    let out = measured(bench, &mut conn);
    drop(std::hint::black_box(out));
}
