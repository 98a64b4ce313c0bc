//! The users/orders data set on one shard, in SQLite (feature `sqlite`): users and their orders,
//! sharded by user (a user's shard is [`shard_of`](crate::shard_of) of [`user_key`], and every
//! order lives on its user's shard), and the [`Store`] through which an order moves to a user on
//! another shard with the same protocol as a key-value entry (`hold`, `place`, `finish`; the
//! router rewrites the order's user before it places it).
//!
//! It is written against rusqlite, the version ic-rusqlite re-exports: tested natively here, and
//! served by the users/orders canister (`sharded-orders/`, through ic-rusqlite).

use rusqlite::{params, Connection, OptionalExtension};
use serde_bytes::ByteBuf;

use crate::{place, Error, OrderRow, Store, UserOrder};

/// The tables of a users/orders shard: `held` records the orders an unfinished move holds.
pub const SCHEMA: &str = "\
    CREATE TABLE IF NOT EXISTS users (id INTEGER PRIMARY KEY, email TEXT NOT NULL);\n\
    CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, user_id INTEGER NOT NULL REFERENCES users(id), \
        amount INTEGER NOT NULL);\n\
    CREATE INDEX IF NOT EXISTS orders_by_user ON orders (user_id);\n\
    CREATE TABLE IF NOT EXISTS held (order_id INTEGER PRIMARY KEY, move_id INTEGER NOT NULL);";

/// The key that routes a user (and its orders) to its shard: the user id, 8 bytes big-endian.
pub fn user_key(user: u64) -> [u8; 8] {
    user.to_be_bytes()
}

/// The key of an order in the move protocol: its id, 8 bytes big-endian.
pub fn order_key(order: u64) -> [u8; 8] {
    order.to_be_bytes()
}

/// An order as the move protocol carries it between shards: its user and amount.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Order {
    /// The user it belongs to.
    pub user: u64,
    /// Its amount.
    pub amount: i64,
}

impl Order {
    /// 16 bytes: the user, then the amount, big-endian.
    pub fn encode(self) -> Vec<u8> {
        let mut v = self.user.to_be_bytes().to_vec();
        v.extend(self.amount.to_be_bytes());
        v
    }

    /// The order [`Order::encode`] wrote, or `None` for anything else.
    pub fn decode(bytes: &[u8]) -> Option<Order> {
        let (user, amount) = (bytes.get(..8)?, bytes.get(8..16)?);
        (bytes.len() == 16).then(|| Order {
            user: u64::from_be_bytes(user.try_into().expect("8 bytes")),
            amount: i64::from_be_bytes(amount.try_into().expect("8 bytes")),
        })
    }
}

/// One shard's users and orders in a SQLite connection.
pub struct OrdersShard<'c> {
    conn: &'c Connection,
}

fn order_id(key: &[u8]) -> i64 {
    i64::from_be_bytes(key.try_into().expect("an order key is 8 bytes"))
}

impl<'c> OrdersShard<'c> {
    /// The shard in `conn`, its tables created if need be.
    pub fn open(conn: &'c Connection) -> rusqlite::Result<OrdersShard<'c>> {
        conn.execute_batch(SCHEMA)?;
        Ok(OrdersShard { conn })
    }

    /// The shard in `conn`, whose tables exist ([`OrdersShard::open`] made them).
    pub fn on(conn: &'c Connection) -> OrdersShard<'c> {
        OrdersShard { conn }
    }

    /// Adds users (id, email) in one transaction.
    pub fn add_users(&self, users: &[(u64, String)]) -> rusqlite::Result<()> {
        let tx = self.conn.unchecked_transaction()?;
        {
            let mut st = tx.prepare_cached("INSERT INTO users (id, email) VALUES (?1, ?2)")?;
            for (id, email) in users {
                st.execute(params![*id as i64, email])?;
            }
        }
        tx.commit()
    }

    /// Adds orders in one transaction.
    pub fn add_orders(&self, orders: &[OrderRow]) -> rusqlite::Result<()> {
        let tx = self.conn.unchecked_transaction()?;
        {
            let mut st = tx.prepare_cached("INSERT INTO orders (id, user_id, amount) VALUES (?1, ?2, ?3)")?;
            for o in orders {
                st.execute(params![o.id as i64, o.user as i64, o.amount])?;
            }
        }
        tx.commit()
    }

    /// Gives order `order` of user `from` to user `to`, both of this shard: refused if the order
    /// is not `from`'s, `to` does not live here, or a move holds the order.
    pub fn reassign(&mut self, order: u64, from: u64, to: u64) -> Result<(), Error> {
        let key = order_key(order);
        crate::writable(self, &key)?;
        match self.get(&key).and_then(|v| Order::decode(&v)) {
            Some(o) if o.user == from => {}
            _ => return Err(Error::NotFound { key: ByteBuf::from(key.to_vec()) }),
        }
        if !self.has_user(to).expect("SQLite") {
            return Err(Error::NotFound { key: ByteBuf::from(user_key(to).to_vec()) });
        }
        self.conn
            .execute("UPDATE orders SET user_id = ?2 WHERE id = ?1", params![order as i64, to as i64])
            .expect("SQLite");
        Ok(())
    }

    /// Adds a user.
    pub fn add_user(&self, id: u64, email: &str) -> rusqlite::Result<()> {
        self.conn.execute("INSERT INTO users (id, email) VALUES (?1, ?2)", params![id as i64, email])?;
        Ok(())
    }

    /// Whether the user lives here.
    pub fn has_user(&self, id: u64) -> rusqlite::Result<bool> {
        Ok(self.conn.query_row("SELECT 1 FROM users WHERE id = ?1", [id as i64], |_| Ok(())).optional()?.is_some())
    }

    /// Adds an order of a user of this shard.
    pub fn add_order(&self, id: u64, order: Order) -> rusqlite::Result<()> {
        self.conn.execute(
            "INSERT INTO orders (id, user_id, amount) VALUES (?1, ?2, ?3)",
            params![id as i64, order.user as i64, order.amount],
        )?;
        Ok(())
    }

    /// A user's orders (id, amount), by id.
    pub fn orders_of(&self, user: u64) -> rusqlite::Result<Vec<(u64, i64)>> {
        let mut st = self.conn.prepare_cached("SELECT id, amount FROM orders WHERE user_id = ?1 ORDER BY id")?;
        let rows = st.query_map([user as i64], |r| Ok((r.get::<_, i64>(0)? as u64, r.get(1)?)))?;
        rows.collect()
    }

    /// This shard's `k` largest orders (largest amount first, then smallest id: [`by_amount`](crate::by_amount)),
    /// each joined with its user's email. No index orders amounts: each shard reads all its
    /// orders, so the work per shard falls as shards are added.
    pub fn top_orders(&self, k: u32) -> rusqlite::Result<Vec<UserOrder>> {
        let mut st = self.conn.prepare_cached(
            "SELECT o.id, o.user_id, o.amount, u.email FROM orders o JOIN users u ON u.id = o.user_id \
             ORDER BY o.amount DESC, o.id LIMIT ?1",
        )?;
        let rows = st.query_map([k], |r| {
            let order =
                OrderRow { id: r.get::<_, i64>(0)? as u64, user: r.get::<_, i64>(1)? as u64, amount: r.get(2)? };
            Ok(UserOrder { order, email: r.get(3)? })
        })?;
        rows.collect()
    }

    /// Up to `limit` of this shard's orders by id, after `after` (from the first without it).
    pub fn orders_after(&self, after: Option<u64>, limit: u32) -> rusqlite::Result<Vec<OrderRow>> {
        // Ids are at most i64::MAX (the router refuses larger ones), so none follows a larger `after`.
        let Ok(after) = after.map_or(Ok(-1), i64::try_from) else { return Ok(Vec::new()) };
        let mut st =
            self.conn.prepare_cached("SELECT id, user_id, amount FROM orders WHERE id > ?1 ORDER BY id LIMIT ?2")?;
        let rows = st.query_map(params![after, limit], |r| {
            Ok(OrderRow { id: r.get::<_, i64>(0)? as u64, user: r.get::<_, i64>(1)? as u64, amount: r.get(2)? })
        })?;
        rows.collect()
    }

    /// The orders this shard holds.
    pub fn count_orders(&self) -> rusqlite::Result<u64> {
        self.conn.query_row("SELECT count(*) FROM orders", [], |r| r.get::<_, i64>(0)).map(|n| n as u64)
    }

    /// A move's step 2 for an order: refuses unless the order's (rewritten) user lives here, then
    /// [`place`]s it.
    pub fn place_order(&mut self, key: &[u8], value: Vec<u8>, id: u64) -> Result<(), Error> {
        let order = Order::decode(&value)
            .ok_or_else(|| Error::InvalidArgument { message: format!("{} bytes are no order", value.len()) })?;
        if !self.has_user(order.user).expect("SQLite") {
            return Err(Error::NotFound { key: ByteBuf::from(user_key(order.user).to_vec()) });
        }
        place(self, key, value, id)
    }
}

/// An order's row as the move steps see it. A SQLite error panics: in a canister it traps, which
/// undoes the message, as a step that failed must.
impl Store for OrdersShard<'_> {
    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.conn
            .query_row("SELECT user_id, amount FROM orders WHERE id = ?1", [order_id(key)], |r| {
                Ok(Order { user: r.get::<_, i64>(0)? as u64, amount: r.get(1)? })
            })
            .optional()
            .expect("SQLite")
            .map(Order::encode)
    }
    fn insert(&mut self, key: &[u8], value: Vec<u8>) {
        let order = Order::decode(&value).expect("an order");
        self.conn
            .execute(
                "INSERT OR REPLACE INTO orders (id, user_id, amount) VALUES (?1, ?2, ?3)",
                params![order_id(key), order.user as i64, order.amount],
            )
            .expect("SQLite");
    }
    fn remove(&mut self, key: &[u8]) {
        self.conn.execute("DELETE FROM orders WHERE id = ?1", [order_id(key)]).expect("SQLite");
    }
    fn holder(&self, key: &[u8]) -> Option<u64> {
        self.conn
            .query_row("SELECT move_id FROM held WHERE order_id = ?1", [order_id(key)], |r| r.get::<_, i64>(0))
            .optional()
            .expect("SQLite")
            .map(|id| id as u64)
    }
    fn set_holder(&mut self, key: &[u8], id: Option<u64>) {
        match id {
            Some(id) => self.conn.execute(
                "INSERT OR REPLACE INTO held (order_id, move_id) VALUES (?1, ?2)",
                params![order_id(key), id as i64],
            ),
            None => self.conn.execute("DELETE FROM held WHERE order_id = ?1", [order_id(key)]),
        }
        .expect("SQLite");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{hold, shard_of, sim, Stage};

    /// Two shards in memory, users 1..=20 placed by `shard_of`, each with one order (id = user
    /// id × 100) of amount = user id.
    fn shards(conns: &[Connection; 2]) -> [OrdersShard<'_>; 2] {
        let shards = [OrdersShard::open(&conns[0]).unwrap(), OrdersShard::open(&conns[1]).unwrap()];
        for user in 1..=20u64 {
            let s = &shards[shard_of(&user_key(user), 2) as usize];
            s.add_user(user, &format!("user{user}@example.com")).unwrap();
            s.add_order(user * 100, Order { user, amount: user as i64 }).unwrap();
        }
        shards
    }

    fn conns() -> [Connection; 2] {
        [Connection::open_in_memory().unwrap(), Connection::open_in_memory().unwrap()]
    }

    /// Two users on different shards: (a, b).
    fn across() -> (u64, u64) {
        let a = 1;
        let b = (2..=20).find(|&u| shard_of(&user_key(u), 2) != shard_of(&user_key(a), 2)).unwrap();
        (a, b)
    }

    /// Three shards of 30 users and 400 orders (amounts with ties): each shard's top-k and pages,
    /// merged as the router merges them, answer what one table of every order answers.
    #[test]
    fn top_orders_and_pages_gathered_from_every_shard_are_those_of_all_orders() {
        use crate::{by_amount, merge_sorted};
        let conns = [(); 3].map(|_| Connection::open_in_memory().unwrap());
        let shards = conns.each_ref().map(|c| OrdersShard::open(c).unwrap());
        let on = |user: u64| &shards[shard_of(&user_key(user), 3) as usize];
        for user in 1..=30u64 {
            on(user).add_user(user, &format!("user{user}@example.com")).unwrap();
        }
        let mut all: Vec<OrderRow> = (1..=400u64)
            .map(|i| OrderRow { id: i * 7, user: i % 30 + 1, amount: ((i * 37) % 50) as i64 - 10 })
            .collect();
        for o in &all {
            on(o.user).add_order(o.id, Order { user: o.user, amount: o.amount }).unwrap();
        }
        assert!(shards.iter().all(|s| s.count_orders().unwrap() > 0));
        for k in [1, 5, 17, 400, 1000] {
            let parts = shards.iter().map(|s| s.top_orders(k).unwrap()).collect();
            let got = merge_sorted(parts, k as usize, |a: &UserOrder, b| by_amount(&a.order, &b.order));
            let mut want = all.clone();
            want.sort_by(by_amount);
            want.truncate(k as usize);
            assert_eq!(got.iter().map(|u| u.order).collect::<Vec<_>>(), want, "k = {k}");
            assert!(got.iter().all(|u| u.email == format!("user{}@example.com", u.order.user)));
        }
        all.sort();
        for limit in [1, 7, 64, 1000] {
            let (mut after, mut paged) = (None, Vec::new());
            loop {
                let parts = shards.iter().map(|s| s.orders_after(after, limit).unwrap()).collect();
                let page = merge_sorted(parts, limit as usize, |a: &OrderRow, b| a.id.cmp(&b.id));
                let Some(last) = page.last() else { break };
                after = Some(last.id);
                paged.extend(page);
            }
            assert_eq!(paged, all, "pages of {limit}");
        }
        assert!(shards[0].orders_after(Some(u64::MAX), 10).unwrap().is_empty());
    }

    #[test]
    fn an_order_moves_to_a_user_on_another_shard_whatever_fails() {
        let (a, b) = across();
        let (sa, sb) = (shard_of(&user_key(a), 2) as usize, shard_of(&user_key(b), 2) as usize);
        let key = order_key(a * 100);
        let mut outcomes = std::collections::BTreeSet::new();
        for pattern in 0u32..1 << 8 {
            for stop in (1..=4).flat_map(|steps| [(steps, true), (steps, false)]) {
                let c = conns();
                let [s0, s1] = shards(&c);
                let (mut src, mut dst) = if sa == 0 { (s0, s1) } else { (s1, s0) };
                assert_eq!(sb, 1 - sa);
                // The router gives the order to user b before it places it (the rewrite is a
                // fixed function here: user b is the test's).
                fn to_b(v: Vec<u8>) -> Vec<u8> {
                    let (a, b) = across();
                    let o = Order::decode(&v).unwrap();
                    assert_eq!(o.user, a);
                    Order { user: b, ..o }.encode()
                }
                let mv = sim::Move { from: &key, to: &key, id: 3, rewrite: to_b };
                let mut call = 0;
                let mut fail = || {
                    call += 1;
                    call <= 8 && pattern & (1 << (call - 1)) != 0
                };
                let mut stage = sim::drive(&mv, Stage::Holding, &mut src, &mut dst, stop, &mut fail);
                for _ in 0..3 {
                    stage = sim::drive(&mv, stage, &mut src, &mut dst, (usize::MAX, true), &mut || false);
                }
                assert!(stage.is_over(), "pattern {pattern:b}, stopped at {stop:?}: {stage:?}");
                // Exactly one shard holds the order: b's once committed, a's once undone.
                let (at_a, at_b) = (src.orders_of(a).unwrap(), dst.orders_of(b).unwrap());
                let expected = vec![(a * 100, a as i64)];
                match stage {
                    Stage::Done => assert_eq!((at_a, at_b.contains(&expected[0])), (vec![], true)),
                    _ => assert_eq!((at_a, at_b.contains(&expected[0])), (expected, false)),
                }
                assert_eq!(src.count_orders().unwrap() + dst.count_orders().unwrap(), 20, "pattern {pattern:b}");
                assert_eq!((src.holder(&key), dst.holder(&key)), (None, None));
                outcomes.insert(stage == Stage::Done);
            }
        }
        assert_eq!(outcomes.len(), 2, "some patterns commit, some abort");
    }

    #[test]
    fn an_order_is_placed_only_with_its_user_and_held_orders_stay_readable() {
        let c = conns();
        let [mut s0, mut s1] = shards(&c);
        let (a, _) = across();
        let (src, dst) = if shard_of(&user_key(a), 2) == 0 { (&mut s0, &mut s1) } else { (&mut s1, &mut s0) };
        let key = order_key(a * 100);
        let v = hold(src, &key, 1).unwrap();
        assert_eq!(Order::decode(&v), Some(Order { user: a, amount: a as i64 }));
        assert_eq!(src.orders_of(a).unwrap(), [(a * 100, a as i64)], "a held order is still read");
        // User a does not live on the destination: the place is refused and nothing is stored.
        assert_eq!(
            dst.place_order(&key, v.clone(), 1),
            Err(Error::NotFound { key: ByteBuf::from(user_key(a).to_vec()) })
        );
        assert_eq!(dst.get(&key), None);
        assert_eq!(
            dst.place_order(&key, vec![1, 2, 3], 1).map_err(|e| matches!(e, Error::InvalidArgument { .. })),
            Err(true)
        );
        assert_eq!(Order::decode(&[0; 15]), None);
    }
}
