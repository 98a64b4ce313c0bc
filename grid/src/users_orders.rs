//! The users/orders workload's nine steps (the reference benchmark of ic-rusqlite, seed rows 1-9)
//! as data: names, seed rows and sizes. The library (`stablebench::bench`) runs them.

use crate::profiles::Profile;

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
    pub const REFERENCE: Sizes = Sizes::at(1_000_000);

    /// A database of `orders` orders and one user per ten orders, the reference's ratio (the
    /// sizes of the scaling curves, [`SCALES`]).
    pub const fn at(orders: u64) -> Sizes {
        Sizes { users: orders / 10, orders }
    }

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

/// The database sizes (orders) the nine steps run at for the scaling curves, under
/// `profiles::WORKLOADS` only: a hundredth of the reference to ten times it. The reference size's
/// cells are the published ones; the others are named `sqlite_users_orders_<size>_<step>_<profile>`.
pub const SCALES: [u64; 4] = [10_000, 100_000, 1_000_000, 10_000_000];

/// The size the curves are projected to and not run: 100 M orders is about 10 GB of database (969 MB at 10 M),
/// and every one of the nine cells would build it in its setup (about 3 T instructions, some ten
/// minutes of the offline runner each), which no CI run can afford.
pub const PROJECTED_SCALE: u64 = 100_000_000;

/// One step of a users/orders benchmark's setup. The canbench benchmarks run them all in one
/// message; the benchmark canister's `bench_setup` runs them call by call under an instruction
/// budget, each step resumable at a row offset, so that a setup larger than one message can still
/// be built. The library runs them (`stablebench::bench::SetupStepRun`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetupStep {
    /// Both tables.
    Schema,
    /// All users, in one transaction per call.
    Users,
    /// All orders, in one transaction per call.
    Orders,
    /// Both indexes, one statement.
    Indexes,
    /// `DELETE FROM orders`, one statement (the indexed 1M insert starts from an indexed,
    /// empty orders table whose pages are on the freelist).
    DeleteAllOrders,
}

impl SetupStep {
    /// Its name in progress reports and setup stage keys.
    pub const fn name(self) -> &'static str {
        match self {
            SetupStep::Schema => "schema",
            SetupStep::Users => "users",
            SetupStep::Orders => "orders",
            SetupStep::Indexes => "indexes",
            SetupStep::DeleteAllOrders => "delete_all_orders",
        }
    }

    /// Units of work of the step at `sizes`: rows for the loads, 1 for a statement.
    pub const fn units(self, sizes: Sizes) -> u64 {
        match self {
            SetupStep::Users => sizes.users,
            SetupStep::Orders => sizes.orders,
            SetupStep::Schema | SetupStep::Indexes | SetupStep::DeleteAllOrders => 1,
        }
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

    /// The step without its sizes, as the scaling cells name it (`insert_orders_indexed`).
    pub fn step(self) -> &'static str {
        match self {
            Bench::InsertUsers => "insert_users",
            Bench::InsertOrders => "insert_orders",
            Bench::CreateIndexes => "create_indexes",
            Bench::SelectJoin => "select_join",
            Bench::SelectLike => "select_like",
            Bench::InsertOrders100Indexed => "insert_100_orders_indexed",
            Bench::DeleteOrders1kIndexed => "delete_orders_indexed",
            Bench::InsertOrders1mIndexed => "insert_orders_indexed",
            Bench::DeleteOrders100kRollback => "delete_orders_rollback",
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

    /// The name of this benchmark under `profile`, as canbench sees it: its grid cell's name
    /// (`<name>_<profile>`).
    pub fn profiled_name(self, profile: &Profile) -> String {
        crate::cells::Cell::users_orders(self, *profile).name()
    }

    /// The steps of its setup, in order: every benchmark starts from the same schema, and each
    /// setup is a prefix of the next (the shared setups of `stablebench-runner bench` rely on it).
    pub const fn setup_steps(self) -> &'static [SetupStep] {
        use SetupStep::*;
        match self {
            Bench::InsertUsers => &[Schema],
            Bench::InsertOrders => &[Schema, Users],
            Bench::CreateIndexes => &[Schema, Users, Orders],
            Bench::InsertOrders1mIndexed => &[Schema, Users, Orders, Indexes, DeleteAllOrders],
            _ => &[Schema, Users, Orders, Indexes],
        }
    }

    /// Finds a benchmark by its name without the profile.
    pub fn by_name(name: &str) -> Option<Bench> {
        BENCHES.into_iter().find(|b| b.name() == name)
    }
}
