//! The sharded cells, declared once: a router and N shard canisters of one sharded [`Set`]
//! (`sharded/`, `sharded-orders/`), an [`Operation`] and N ([`SHARD_COUNTS`]). They are not
//! canbench benchmarks (a canbench benchmark runs in one canister): the offline runner's network
//! of canisters measures them (`runner/tests/sharded/`) into one results file per set, from
//! which `docs/sharding.md`'s tables are generated. The tests, the results files and the report
//! take the sets, operations, titles, shard counts and data sizes from here.
//!
//! Names are a public interface, like the grid's: `sharded_<set>_<operation>_<N>`, for example
//! `sharded_orders_top_orders_16`.

/// The numbers of shards every operation is measured on.
pub const SHARD_COUNTS: [u64; 5] = [1, 2, 4, 8, 16];

/// A sharded data set: one wasm, installed as a router and N shards.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Set {
    /// The key-value set (`sharded/`): keys sharded by hash, each shard a `StableBTreeMap`.
    Kv,
    /// The users/orders set (`sharded-orders/`): users sharded by id, each shard's users and their
    /// orders in SQLite under the recommended settings.
    Orders,
}

/// One operation of a set, measured on every number of shards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Operation {
    /// Its name in cell names and results files.
    pub name: &'static str,
    /// Its row title in `docs/sharding.md`'s tables (Markdown).
    pub title: &'static str,
}

const fn op(name: &'static str, title: &'static str) -> Operation {
    Operation { name, title }
}

/// The key-value set's operations, in the tables' order (and the order the test runs them: each
/// on the data the ones before it left).
pub const KV_OPERATIONS: [Operation; 9] = [
    op("get", "`get` through the router"),
    op("shard_get", "`shard_get` on the key's shard (the client routes)"),
    op("put", "`put` through the router (a key that exists)"),
    op("shard_put", "`shard_put` on the key's shard (the client routes)"),
    op("put_batch", "`put_batch`, 100 new entries"),
    op("len", "`len` (every shard)"),
    op("top", "`top(10)` (every shard)"),
    op("scan", "`scan(null, 100)`, the first page (every shard)"),
    op("move_entry", "`move_entry` to a new key on another shard (hold, place, finish)"),
];

/// The users/orders set's operations, in the tables' order (and the order the test runs them).
pub const ORDERS_OPERATIONS: [Operation; 8] = [
    op("orders_of", "`orders_of` a user through the router"),
    op("shard_orders_of", "`shard_orders_of` on the user's shard (the client routes)"),
    op("add_orders", "`add_orders`, 100 new orders of 100 users"),
    op("count_orders", "`count_orders` (every shard)"),
    op("top_orders", "`top_orders(10)`, joined with the users' emails (every shard)"),
    op("scan_orders", "`scan_orders(null, 100)`, the first page of orders by id (every shard)"),
    op("move_order", "`move_order` to a user on another shard (one UPDATE when there is one shard)"),
    op("move_order_within", "`move_order` to a user on the same shard (one UPDATE)"),
];

/// The key-value set's data: entries (32-byte keys, values of about 10 bytes), loaded in batches.
pub const KV_ENTRIES: u64 = 1_600;
/// Entries per `put_batch` of the key-value set's load.
pub const KV_LOAD_BATCH: u64 = 400;
/// The users/orders set's data: users 1 to `ORDERS_USERS`, and orders 1 to `ORDERS_ORDERS`
/// (order `i` belongs to user `i % ORDERS_USERS + 1`, amount `i`), loaded in batches.
pub const ORDERS_USERS: u64 = 200;
/// Orders of the users/orders set's data.
pub const ORDERS_ORDERS: u64 = 2_000;
/// Users or orders per `add_users` / `add_orders` of the users/orders set's load.
pub const ORDERS_LOAD_BATCH: u64 = 500;

impl Set {
    /// Both, in report order.
    pub const ALL: [Set; 2] = [Set::Kv, Set::Orders];

    /// Its name in cell names.
    pub const fn name(self) -> &'static str {
        match self {
            Set::Kv => "kv",
            Set::Orders => "orders",
        }
    }

    /// Its operations, in the tables' order.
    pub const fn operations(self) -> &'static [Operation] {
        match self {
            Set::Kv => &KV_OPERATIONS,
            Set::Orders => &ORDERS_OPERATIONS,
        }
    }

    /// What its results file's `keys` counts: the entries, or the orders, the set holds.
    pub const fn keys(self) -> u64 {
        match self {
            Set::Kv => KV_ENTRIES,
            Set::Orders => ORDERS_ORDERS,
        }
    }

    /// Its results file, at the repository's root.
    pub const fn results_file(self) -> &'static str {
        match self {
            Set::Kv => "sharded_results.yml",
            Set::Orders => "sharded_orders_results.yml",
        }
    }
}

/// One sharded cell: an operation of a set on `shards` shards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cell {
    /// The set.
    pub set: Set,
    /// The operation (one of the set's).
    pub op: &'static Operation,
    /// Shards behind the router.
    pub shards: u64,
}

impl Cell {
    /// `sharded_<set>_<operation>_<N>`.
    pub fn name(&self) -> String {
        format!("sharded_{}_{}_{}", self.set.name(), self.op.name, self.shards)
    }
}

/// Every sharded cell: per set, per operation, per number of shards.
pub fn cells() -> Vec<Cell> {
    Set::ALL
        .iter()
        .flat_map(|&set| {
            set.operations().iter().flat_map(move |op| SHARD_COUNTS.map(|shards| Cell { set, op, shards }))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_cell_has_its_own_name_and_names_say_set_operation_and_shards() {
        let cells = cells();
        assert_eq!(cells.len(), (KV_OPERATIONS.len() + ORDERS_OPERATIONS.len()) * SHARD_COUNTS.len());
        let mut names: Vec<String> = cells.iter().map(Cell::name).collect();
        assert_eq!(names[0], "sharded_kv_get_1");
        assert!(names.contains(&"sharded_orders_top_orders_16".to_string()));
        names.sort();
        names.dedup();
        assert_eq!(names.len(), cells.len(), "a name is repeated");
        for set in Set::ALL {
            let mut titles: Vec<&str> = set.operations().iter().map(|o| o.title).collect();
            titles.sort();
            titles.dedup();
            assert_eq!(titles.len(), set.operations().len(), "{set:?}: a title is repeated");
        }
        assert!(SHARD_COUNTS.windows(2).all(|w| w[0] < w[1]), "ascending, as the tables' columns");
    }
}
