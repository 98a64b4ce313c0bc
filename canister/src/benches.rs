//! The nine reference benchmarks as canbench queries (`--features canbench`).
//!
//! Each benchmark runs under each pragma profile of `stablebench::pragma::PROFILES`, named
//! `<benchmark>_<profile>`. canbench runs each `__canbench__<name>` as a query on a freshly
//! installed canister, so every benchmark opens an empty database with its profile and builds its
//! own starting state (schema, users, orders, indexes) before `bench_fn`; only the seed row's
//! statement is measured. After the measured step the result is checked
//! against the oracle, and a wrong result traps the benchmark instead of reporting a number.

use canbench_rs::{bench, bench_fn, BenchResult};
use stablebench::bench::{Bench, Output, Sizes};
use stablebench::pragma::Profile;
use stablebench::query::Rows;

use crate::db;

fn run(fn_name: &str, bench: Bench, profile: &str) -> BenchResult {
    let fail = |step: &str, e: stablebench::Error| -> ! { ic_cdk::trap(format!("{fn_name}: {step}: {e}")) };
    let profile = Profile::by_name(profile).unwrap_or_else(|| ic_cdk::trap(format!("{fn_name}: no profile {profile}")));
    // The function name is the canbench name; it must be the one the library documents.
    assert_eq!(fn_name, bench.profiled_name(&profile), "benchmark function and names disagree");
    let sizes = Sizes::REFERENCE;
    // A fresh, empty database with this profile (the query's changes are discarded afterwards).
    db::reopen(&profile).unwrap_or_else(|e| fail("open", e));
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

/// One benchmark `<name>_<profile>`.
macro_rules! bench {
    ($profile:ident, $name:ident => $bench:ident) => {
        paste::paste! {
            #[bench(raw)]
            fn [<$name _ $profile>]() -> BenchResult {
                run(stringify!([<$name _ $profile>]), Bench::$bench, stringify!($profile))
            }
        }
    };
}

/// The nine benchmarks of one profile; `without_rollback` leaves out the rollback benchmark
/// (for a journal that cannot roll back, whose result would be wrong).
macro_rules! benches_for {
    ($profile:ident) => {
        benches_for!($profile, without_rollback);
        bench!($profile, sqlite_delete_orders_100k_rollback => DeleteOrders100kRollback);
    };
    ($profile:ident, without_rollback) => {
        bench!($profile, sqlite_insert_users_100k => InsertUsers);
        bench!($profile, sqlite_insert_orders_1m => InsertOrders);
        bench!($profile, sqlite_create_indexes_1m => CreateIndexes);
        bench!($profile, sqlite_select_join_1m => SelectJoin);
        bench!($profile, sqlite_select_like_100k => SelectLike);
        bench!($profile, sqlite_insert_orders_100_indexed => InsertOrders100Indexed);
        bench!($profile, sqlite_delete_orders_1k_indexed => DeleteOrders1kIndexed);
        bench!($profile, sqlite_insert_orders_1m_indexed => InsertOrders1mIndexed);
    };
}

// Every profile of stablebench::pragma::PROFILES, in its order.
benches_for!(reference);
benches_for!(ic_rusqlite);
benches_for!(memory);
benches_for!(journal_truncate);
benches_for!(journal_memory);
benches_for!(journal_wal);
benches_for!(journal_off, without_rollback);
benches_for!(sync_off);
benches_for!(sync_full);
benches_for!(page_8k);
benches_for!(page_16k);
benches_for!(page_32k);
benches_for!(page_64k);
benches_for!(cache_8mib);
benches_for!(cache_40mib);
benches_for!(locking_normal);
benches_for!(temp_file);
benches_for!(foreign_keys_off);
benches_for!(journal_memory_temp_file);
benches_for!(temp_file_cache_8mib);
