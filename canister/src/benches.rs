//! The nine reference benchmarks as canbench queries (`--features canbench`).
//!
//! canbench runs each `__canbench__<name>` as a query on a freshly installed canister, so every
//! benchmark builds its own starting state (schema, users, orders, indexes) before `bench_fn`;
//! only the seed row's statement is measured. After the measured step the result is checked
//! against the oracle, and a wrong result traps the benchmark instead of reporting a number.

use canbench_rs::{bench, bench_fn, BenchResult};
use stablebench::bench::{Bench, Output, Sizes};
use stablebench::query::Rows;

use crate::db;

fn run(fn_name: &str, bench: Bench) -> BenchResult {
    let fail = |step: &str, e: stablebench::Error| -> ! { ic_cdk::trap(format!("{fn_name}: {step}: {e}")) };
    // The function name is the canbench name; it must be the one the library documents.
    assert_eq!(fn_name, bench.name(), "benchmark function and Bench::name disagree");
    let sizes = Sizes::REFERENCE;
    db::with_conn(|conn| {
        bench.setup(conn, sizes).unwrap_or_else(|e| fail("setup", e));
        let mut output = None;
        let result = bench_fn(|| output = Some(bench.run(conn, sizes)));
        let output = output.expect("bench_fn ran the step").unwrap_or_else(|e| fail("run", e));
        bench.verify(conn, sizes, &output).unwrap_or_else(|e| fail("verify", e));
        report_reply_bytes(output);
        result
    })
}

/// For SELECTs, tells the runner (through the canister log) how many bytes `query_sql` would
/// reply with these rows, so it can say whether the result fits one reply. Outside `bench_fn`.
fn report_reply_bytes(output: Output) {
    if let Output::Rows(rows) = output {
        let reply: Result<Rows, crate::Error> = Ok(rows);
        let bytes = candid::encode_one(reply).map(|b| b.len()).unwrap_or(0);
        ic_cdk::api::debug_print(format!("stablebench: reply_bytes={bytes}"));
    }
}

/// One canbench query per row: `fn_name => Bench variant`.
macro_rules! benches {
    ($($name:ident => $bench:ident),* $(,)?) => {
        $(
            #[bench(raw)]
            fn $name() -> BenchResult {
                run(stringify!($name), Bench::$bench)
            }
        )*
    };
}

benches! {
    sqlite_insert_users_100k => InsertUsers,
    sqlite_insert_orders_1m => InsertOrders,
    sqlite_create_indexes_1m => CreateIndexes,
    sqlite_select_join_1m => SelectJoin,
    sqlite_select_like_100k => SelectLike,
    sqlite_insert_orders_100_indexed => InsertOrders100Indexed,
    sqlite_delete_orders_1k_indexed => DeleteOrders1kIndexed,
    sqlite_insert_orders_1m_indexed => InsertOrders1mIndexed,
    sqlite_delete_orders_100k_rollback => DeleteOrders100kRollback,
}
