//! The nine benchmarks of the reference workload, as data: each has a canbench name, the seed row
//! it reproduces, a setup (never measured), a measured step and an expected outcome from the
//! oracle. The canister's canbench benches and the native tests run exactly these.

use rusqlite::Connection;

pub use stablebench_grid::users_orders::{Bench, SetupStep, Sizes, BENCHES};

use crate::oracle;
use crate::query::{query_rows, QueryLimits, Rows};
use crate::schema::{create_indexes, create_schema, index_names};
use crate::workload::{self, RolledBack};
use crate::{Error, Meter, NoLimit, Result};

/// What a measured step returned, before it is checked (outside the measured region).
#[derive(Debug)]
pub enum Output {
    /// Rows inserted or deleted, or indexes created.
    Count(u64),
    /// The rows of a SELECT.
    Rows(Rows),
    /// What the rolled-back delete saw.
    RolledBack(RolledBack),
}

/// A benchmark's checked result: compared field by field with [`Bench::expected`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// Rows inserted, deleted or returned; indexes present for the index benchmark.
    pub rows: u64,
    /// [`oracle::checksum`] of a SELECT's rows; for the rollback benchmark, the orders counted
    /// inside the transaction; otherwise 0.
    pub checksum: u64,
    /// Users in the table afterwards.
    pub users: u64,
    /// Orders in the table afterwards.
    pub orders: u64,
}

/// Runs a [`SetupStep`] on a connection (`use stablebench::bench::SetupStepRun`).
pub trait SetupStepRun {
    /// Continues the step from unit `done` until it is complete or `meter` runs out (checked
    /// every few hundred rows; a one-statement step always completes); returns the units done
    /// afterwards. Each call commits what it did.
    fn run(self, conn: &mut Connection, sizes: Sizes, done: u64, meter: &dyn Meter) -> Result<u64>;
}

impl SetupStepRun for SetupStep {
    fn run(self, conn: &mut Connection, sizes: Sizes, done: u64, meter: &dyn Meter) -> Result<u64> {
        let units = self.units(sizes);
        if done >= units {
            return Ok(units);
        }
        Ok(match self {
            SetupStep::Schema => {
                create_schema(conn)?;
                1
            }
            SetupStep::Users => done + workload::insert_users(conn, done, units - done, meter)?,
            SetupStep::Orders => done + workload::insert_orders(conn, done, units - done, sizes.users, meter)?,
            SetupStep::Indexes => {
                create_indexes(conn)?;
                1
            }
            SetupStep::DeleteAllOrders => {
                workload::delete_all_orders(conn)?;
                1
            }
        })
    }
}

/// Runs a [`Bench`] on a connection (`use stablebench::bench::BenchRun`).
pub trait BenchRun {
    /// Builds the state the measured step starts from (as the reference does: schema, users,
    /// orders, indexes as needed; for the indexed 1M insert, all orders are then deleted).
    fn setup(self, conn: &mut Connection, sizes: Sizes) -> Result<()>;
    /// The measured step: exactly the reference statement(s), results materialised as a caller
    /// of the canister would get them.
    fn run(self, conn: &mut Connection, sizes: Sizes) -> Result<Output>;
    /// Turns a measured step's output into an [`Outcome`] (checksums, table counts).
    fn outcome(self, conn: &Connection, output: &Output) -> Result<Outcome>;
    /// The outcome the oracle predicts for `sizes`.
    fn expected(self, sizes: Sizes) -> Outcome;
    /// Checks a measured step's output against the oracle; [`Error::WrongResult`] on mismatch.
    fn verify(self, conn: &Connection, sizes: Sizes, output: &Output) -> Result<Outcome>;
}

impl BenchRun for Bench {
    fn setup(self, conn: &mut Connection, sizes: Sizes) -> Result<()> {
        for step in Bench::setup_steps(self) {
            step.run(conn, sizes, 0, &NoLimit)?;
        }
        Ok(())
    }

    fn run(self, conn: &mut Connection, sizes: Sizes) -> Result<Output> {
        let unlimited = &NoLimit as &dyn Meter;
        Ok(match self {
            Bench::InsertUsers => Output::Count(workload::insert_users(conn, 0, sizes.users, unlimited)?),
            Bench::InsertOrders | Bench::InsertOrders1mIndexed => {
                Output::Count(workload::insert_orders(conn, 0, sizes.orders, sizes.users, unlimited)?)
            }
            Bench::CreateIndexes => {
                create_indexes(conn)?;
                Output::Count(crate::schema::CREATE_INDEXES.len() as u64)
            }
            Bench::SelectJoin => Output::Rows(query_rows(
                conn,
                &workload::select_join_sql(sizes.join_max_user_id()),
                QueryLimits::UNLIMITED,
                unlimited,
            )?),
            Bench::SelectLike => {
                Output::Rows(query_rows(conn, workload::SELECT_LIKE, QueryLimits::UNLIMITED, unlimited)?)
            }
            Bench::InsertOrders100Indexed => {
                Output::Count(workload::insert_orders(conn, 0, Sizes::EXTRA_ORDERS, sizes.users, unlimited)?)
            }
            Bench::DeleteOrders1kIndexed => {
                Output::Count(workload::delete_orders_of_users(conn, sizes.delete_max_user_id())?)
            }
            Bench::DeleteOrders100kRollback => {
                Output::RolledBack(workload::delete_orders_and_roll_back(conn, sizes.rollback_min_order_id())?)
            }
        })
    }

    fn outcome(self, conn: &Connection, output: &Output) -> Result<Outcome> {
        let (rows, checksum) = match output {
            Output::Count(_) if self == Bench::CreateIndexes => (index_names(conn)?.len() as u64, 0),
            Output::Count(n) => (*n, 0),
            Output::Rows(r) => (r.rows.len() as u64, oracle::checksum(r)),
            Output::RolledBack(rb) => (rb.deleted, rb.seen_inside),
        };
        Ok(Outcome { rows, checksum, users: workload::count_users(conn)?, orders: workload::count_orders(conn)? })
    }

    fn expected(self, sizes: Sizes) -> Outcome {
        let Sizes { users, orders } = sizes;
        let full = |rows, checksum| Outcome { rows, checksum, users, orders };
        match self {
            Bench::InsertUsers => Outcome { rows: users, checksum: 0, users, orders: 0 },
            Bench::InsertOrders | Bench::InsertOrders1mIndexed => full(orders, 0),
            Bench::CreateIndexes => full(crate::schema::CREATE_INDEXES.len() as u64, 0),
            Bench::SelectJoin => {
                let (n, sum) = oracle::join(users, orders, sizes.join_max_user_id());
                full(n, sum)
            }
            Bench::SelectLike => {
                let (n, sum) = oracle::like(users);
                full(n, sum)
            }
            Bench::InsertOrders100Indexed => {
                Outcome { rows: Sizes::EXTRA_ORDERS, checksum: 0, users, orders: orders + Sizes::EXTRA_ORDERS }
            }
            Bench::DeleteOrders1kIndexed => {
                let gone = oracle::orders_of_users(users, orders, sizes.delete_max_user_id());
                Outcome { rows: gone, checksum: 0, users, orders: orders - gone }
            }
            Bench::DeleteOrders100kRollback => {
                let deleted = orders.saturating_sub(sizes.rollback_min_order_id());
                full(deleted, orders - deleted)
            }
        }
    }

    fn verify(self, conn: &Connection, sizes: Sizes, output: &Output) -> Result<Outcome> {
        let actual = self.outcome(conn, output)?;
        let expected = self.expected(sizes);
        if actual != expected {
            return Err(Error::WrongResult(format!("{}: expected {expected:?}, got {actual:?}", self.name())));
        }
        Ok(actual)
    }
}
