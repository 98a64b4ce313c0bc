//! The nine benchmarks of the reference workload, as data: each has a canbench name, the seed row
//! it reproduces, a setup (never measured), a measured step and an expected outcome from the
//! oracle. The canister's canbench benches and the native tests run exactly these.

use rusqlite::Connection;

use crate::oracle;
use crate::pragma::Profile;
use crate::query::{query_rows, QueryLimits, Rows};
use crate::schema::{create_indexes, create_schema, index_names};
use crate::workload::{self, RolledBack};
use crate::{Error, Meter, NoLimit, Result};

/// Table sizes of a run, and the statement constants derived from them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sizes {
    /// Users inserted (100,000 in the reference).
    pub users: u64,
    /// Orders inserted (1,000,000 in the reference).
    pub orders: u64,
}

impl Sizes {
    /// The reference run: 100,000 users and 1,000,000 orders.
    pub const REFERENCE: Sizes = Sizes { users: 100_000, orders: 1_000_000 };

    /// Orders added on top of a full, indexed table by the "100 extra orders" benchmark.
    pub const EXTRA_ORDERS: u64 = 100;

    /// The join selects users with `user_id <` this: 1,000 at reference size.
    pub fn join_max_user_id(self) -> u64 {
        self.users / 100
    }

    /// The delete removes the orders of users with `user_id <=` this: 100 at reference size.
    pub fn delete_max_user_id(self) -> u64 {
        self.users / 1000
    }

    /// The rolled-back delete removes orders with `order_id >` this: 900,000 at reference size.
    pub fn rollback_min_order_id(self) -> u64 {
        self.orders / 10 * 9
    }
}

/// One benchmark of the reference workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bench {
    /// Seed row 1: insert 100,000 users with a cached, parameterised INSERT.
    InsertUsers,
    /// Seed row 2: insert 1,000,000 orders, no secondary index.
    InsertOrders,
    /// Seed row 3: create both indexes over 100,000 users and 1,000,000 orders.
    CreateIndexes,
    /// Seed row 4: the join for users below 1,000, ordered by `created_at`.
    SelectJoin,
    /// Seed row 5: `LIKE 'user%'` on the indexed email column.
    SelectLike,
    /// Seed row 6: 100 more orders into the full, indexed table.
    InsertOrders100Indexed,
    /// Seed row 7: delete the 1,000 orders of the first 100 users.
    DeleteOrders1kIndexed,
    /// Seed row 8: insert 1,000,000 orders with both indexes present.
    InsertOrders1mIndexed,
    /// Seed row 9: delete 100,000 orders inside a transaction, then ROLLBACK.
    DeleteOrders100kRollback,
}

/// All nine, in the seed document's order.
pub const BENCHES: [Bench; 9] = [
    Bench::InsertUsers,
    Bench::InsertOrders,
    Bench::CreateIndexes,
    Bench::SelectJoin,
    Bench::SelectLike,
    Bench::InsertOrders100Indexed,
    Bench::DeleteOrders1kIndexed,
    Bench::InsertOrders1mIndexed,
    Bench::DeleteOrders100kRollback,
];

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

/// How much of the workload a benchmark's setup builds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Stage {
    Schema,
    Users,
    Orders,
    Indexed,
    IndexedEmptyOrders,
}

impl Bench {
    /// The canbench name: `<backend>_<operation>_<shape>_<size>`, a public interface.
    pub fn name(self) -> &'static str {
        match self {
            Bench::InsertUsers => "sqlite_insert_users_100k",
            Bench::InsertOrders => "sqlite_insert_orders_1m",
            Bench::CreateIndexes => "sqlite_create_indexes_1m",
            Bench::SelectJoin => "sqlite_select_join_1m",
            Bench::SelectLike => "sqlite_select_like_100k",
            Bench::InsertOrders100Indexed => "sqlite_insert_orders_100_indexed",
            Bench::DeleteOrders1kIndexed => "sqlite_delete_orders_1k_indexed",
            Bench::InsertOrders1mIndexed => "sqlite_insert_orders_1m_indexed",
            Bench::DeleteOrders100kRollback => "sqlite_delete_orders_100k_rollback",
        }
    }

    /// The seed document's description of the row this benchmark reproduces.
    pub fn seed_row(self) -> &'static str {
        match self {
            Bench::InsertUsers => "Create 100 000 users (cached INSERT query with parameters executed 100000 times)",
            Bench::InsertOrders => "Create 1M orders (each refers to one of the users, no extra indexes present)",
            Bench::CreateIndexes => "Create indexes, when there are 1M orders in the table",
            Bench::SelectJoin => "Make a joint selection (100K users, 1M orders)",
            Bench::SelectLike => "Select using LIKE on an indexed field",
            Bench::InsertOrders100Indexed => {
                "Create 100 extra orders after there were already 1M orders and field indexes created"
            }
            Bench::DeleteOrders1kIndexed => "Remove 1000 orders (we remove all orders from the first 100 users)",
            Bench::InsertOrders1mIndexed => "Create 1M orders after indices were created",
            Bench::DeleteOrders100kRollback => "Delete 100000 orders with transaction rollback",
        }
    }

    /// The name of this benchmark under `profile`: `<name>_<profile>`, as canbench sees it.
    pub fn profiled_name(self, profile: &Profile) -> String {
        format!("{}_{}", self.name(), profile.name)
    }

    /// Finds a benchmark by its canbench name.
    pub fn by_name(name: &str) -> Option<Bench> {
        BENCHES.into_iter().find(|b| b.name() == name)
    }

    fn stage(self) -> Stage {
        match self {
            Bench::InsertUsers => Stage::Schema,
            Bench::InsertOrders => Stage::Users,
            Bench::CreateIndexes => Stage::Orders,
            Bench::InsertOrders1mIndexed => Stage::IndexedEmptyOrders,
            _ => Stage::Indexed,
        }
    }

    /// Builds the state the measured step starts from (as the reference does: schema, users,
    /// orders, indexes as needed; for the indexed 1M insert, all orders are then deleted).
    pub fn setup(self, conn: &mut Connection, sizes: Sizes) -> Result<()> {
        let stage = self.stage();
        create_schema(conn)?;
        if stage >= Stage::Users {
            workload::insert_users(conn, 0, sizes.users, &NoLimit)?;
        }
        if stage >= Stage::Orders {
            workload::insert_orders(conn, 0, sizes.orders, sizes.users, &NoLimit)?;
        }
        if stage >= Stage::Indexed {
            create_indexes(conn)?;
        }
        if stage == Stage::IndexedEmptyOrders {
            workload::delete_all_orders(conn)?;
        }
        Ok(())
    }

    /// The measured step: exactly the reference statement(s), results materialised as a caller
    /// of the canister would get them.
    pub fn run(self, conn: &mut Connection, sizes: Sizes) -> Result<Output> {
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

    /// Turns a measured step's output into an [`Outcome`] (checksums, table counts).
    pub fn outcome(self, conn: &Connection, output: &Output) -> Result<Outcome> {
        let (rows, checksum) = match output {
            Output::Count(_) if self == Bench::CreateIndexes => (index_names(conn)?.len() as u64, 0),
            Output::Count(n) => (*n, 0),
            Output::Rows(r) => (r.rows.len() as u64, oracle::checksum(r)),
            Output::RolledBack(rb) => (rb.deleted, rb.seen_inside),
        };
        Ok(Outcome { rows, checksum, users: workload::count_users(conn)?, orders: workload::count_orders(conn)? })
    }

    /// The outcome the oracle predicts for `sizes`.
    pub fn expected(self, sizes: Sizes) -> Outcome {
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

    /// Checks a measured step's output against the oracle; [`Error::WrongResult`] on mismatch.
    pub fn verify(self, conn: &Connection, sizes: Sizes, output: &Output) -> Result<Outcome> {
        let actual = self.outcome(conn, output)?;
        let expected = self.expected(sizes);
        if actual != expected {
            return Err(Error::WrongResult(format!("{}: expected {expected:?}, got {actual:?}", self.name())));
        }
        Ok(actual)
    }
}
