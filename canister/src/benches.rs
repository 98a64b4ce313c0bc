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
    assert_eq!(fn_name, format!("{}_{}", bench.name(), profile.name), "benchmark function and names disagree");
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

/// Benchmarks `<name>_<profile>` for one profile: `profile; fn_name => Bench variant, ...`.
macro_rules! benches_for {
    ($profile:ident; $($name:ident => $bench:ident),* $(,)?) => {
        paste::paste! {
            $(
                #[bench(raw)]
                fn [<$name _ $profile>]() -> BenchResult {
                    run(stringify!([<$name _ $profile>]), Bench::$bench, stringify!($profile))
                }
            )*
        }
    };
}

/// The nine benchmarks for each listed profile.
macro_rules! nine_for {
    ($($profile:ident),* $(,)?) => {
        $(
            benches_for!($profile;
                sqlite_insert_users_100k => InsertUsers,
                sqlite_insert_orders_1m => InsertOrders,
                sqlite_create_indexes_1m => CreateIndexes,
                sqlite_select_join_1m => SelectJoin,
                sqlite_select_like_100k => SelectLike,
                sqlite_insert_orders_100_indexed => InsertOrders100Indexed,
                sqlite_delete_orders_1k_indexed => DeleteOrders1kIndexed,
                sqlite_insert_orders_1m_indexed => InsertOrders1mIndexed,
                sqlite_delete_orders_100k_rollback => DeleteOrders100kRollback,
            );
        )*
    };
}

// Every profile of stablebench::pragma::PROFILES, in its order.
nine_for!(
    reference, ic_rusqlite, memory, journal_truncate, journal_memory, journal_wal,
);
// journal_mode OFF cannot roll back: it has no rollback benchmark (the result would be wrong).
benches_for!(journal_off;
    sqlite_insert_users_100k => InsertUsers,
    sqlite_insert_orders_1m => InsertOrders,
    sqlite_create_indexes_1m => CreateIndexes,
    sqlite_select_join_1m => SelectJoin,
    sqlite_select_like_100k => SelectLike,
    sqlite_insert_orders_100_indexed => InsertOrders100Indexed,
    sqlite_delete_orders_1k_indexed => DeleteOrders1kIndexed,
    sqlite_insert_orders_1m_indexed => InsertOrders1mIndexed,
);
nine_for!(
    sync_off, sync_full, page_8k, page_16k, page_32k, page_64k, cache_8mib, cache_40mib,
    locking_normal, temp_file,
);
