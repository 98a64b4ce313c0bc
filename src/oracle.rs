//! Expected results computed from the generators alone, without SQLite: the oracle every
//! benchmark's outcome is checked against (the idea of speedtest1's `--verify`).

use crate::generate::{email, order_amount, order_user_id, username};
use crate::query::{Rows, Value};

/// Columns left out of checksums because SQLite fills them from the clock.
pub const CLOCK_COLUMNS: [&str; 1] = ["created_at"];

/// An order-independent checksum of a result: the wrapping sum of a 64-bit FNV-1a hash of each
/// row, over the columns not in [`CLOCK_COLUMNS`]. Row order is not part of it because the
/// reference join orders by a timestamp that is equal for all rows inserted in one message.
pub fn checksum(rows: &Rows) -> u64 {
    let keep: Vec<bool> = rows.columns.iter().map(|c| !CLOCK_COLUMNS.contains(&c.as_str())).collect();
    rows.rows.iter().fold(0u64, |acc, row| {
        let kept = row.iter().zip(&keep).filter(|(_, k)| **k).map(|(v, _)| v);
        acc.wrapping_add(row_hash(kept))
    })
}

/// 64-bit FNV-1a over the values, each prefixed with a type tag.
pub fn row_hash<'a>(values: impl IntoIterator<Item = &'a Value>) -> u64 {
    let mut h = Fnv::default();
    for v in values {
        match v {
            Value::Null => h.write(&[0]),
            Value::Integer(i) => {
                h.write(&[1]);
                h.write(&i.to_le_bytes());
            }
            Value::Real(r) => {
                h.write(&[2]);
                h.write(&r.to_bits().to_le_bytes());
            }
            Value::Text(t) => {
                h.write(&[3]);
                h.write(&(t.len() as u64).to_le_bytes());
                h.write(t.as_bytes());
            }
            Value::Blob(b) => {
                h.write(&[4]);
                h.write(&(b.len() as u64).to_le_bytes());
                h.write(b);
            }
        }
    }
    h.0
}

/// Expected (row count, checksum) of the join over freshly inserted orders `0 .. orders`
/// (order id = generator index + 1).
pub fn join(users: u64, orders: u64, max_user_id: u64) -> (u64, u64) {
    let mut n = 0;
    let mut sum = 0u64;
    for i in 0..orders {
        let uid = order_user_id(i, users);
        if uid < max_user_id {
            let row = [
                Value::Integer(uid as i64),
                Value::Text(username(uid)),
                Value::Integer(i as i64 + 1),
                Value::Real(order_amount(uid) as f64),
            ];
            n += 1;
            sum = sum.wrapping_add(row_hash(&row));
        }
    }
    (n, sum)
}

/// Expected (row count, checksum) of `SELECT * FROM users WHERE email LIKE 'user%'`.
pub fn like(users: u64) -> (u64, u64) {
    let sum = (1..=users).fold(0u64, |acc, id| {
        let row = [Value::Integer(id as i64), Value::Text(username(id)), Value::Text(email(id))];
        acc.wrapping_add(row_hash(&row))
    });
    (users, sum)
}

/// Orders among generator indexes `0 .. orders` whose user id is at most `max_user_id`.
pub fn orders_of_users(users: u64, orders: u64, max_user_id: u64) -> u64 {
    (0..orders).filter(|&i| order_user_id(i, users) <= max_user_id).count() as u64
}

#[derive(Clone, Copy)]
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv {
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksum_ignores_row_order_and_clock_columns() {
        let a = Rows {
            columns: vec!["id".into(), "created_at".into()],
            rows: vec![
                vec![Value::Integer(1), Value::Text("2026-01-01".into())],
                vec![Value::Integer(2), Value::Text("2026-01-02".into())],
            ],
        };
        let mut b = a.clone();
        b.rows.reverse();
        b.rows[0][1] = Value::Text("1999-12-31".into());
        assert_eq!(checksum(&a), checksum(&b));
        b.rows[0][0] = Value::Integer(3);
        assert_ne!(checksum(&a), checksum(&b));
    }

    #[test]
    fn reference_sizes_give_the_seed_document_counts() {
        assert_eq!(orders_of_users(100_000, 1_000_000, 100), 1_000);
        assert_eq!(join(100_000, 1_000_000, 1_000).0, 9_990);
        assert_eq!(like(100_000).0, 100_000);
    }
}
