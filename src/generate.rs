//! Deterministic data of the reference workload. No randomness: row `i` is a pure function of `i`
//! (and of the user count for orders), so every benchmark and test sees the same rows whatever
//! ran before it, and an oracle can compute every expected result without SQLite.

/// The username of user `id` (ids start at 1): `user{id}`.
pub fn username(id: u64) -> String {
    let mut s = String::new();
    write_username(&mut s, id);
    s
}

/// The email of user `id`: `user{id}@example.com`.
pub fn email(id: u64) -> String {
    let mut s = String::new();
    write_email(&mut s, id);
    s
}

/// Replaces `buf`'s contents with [`username`]`(id)`, reusing its allocation.
pub fn write_username(buf: &mut String, id: u64) {
    buf.clear();
    buf.push_str("user");
    push_decimal(buf, id);
}

/// Replaces `buf`'s contents with [`email`]`(id)`, reusing its allocation.
pub fn write_email(buf: &mut String, id: u64) {
    write_username(buf, id);
    buf.push_str(EMAIL_DOMAIN);
}

/// Writes [`username`]`(id)` into `name` and [`email`]`(id)` into `mail`, reusing both
/// allocations and converting `id` to decimal once. The users insert uses this instead of two
/// `format!` calls (two `core::fmt` runs and two allocations per row): that cut the canister's
/// users insert from 1.88 B to 1.66 B instructions (see the README, "Where the instructions go").
pub fn write_user(name: &mut String, mail: &mut String, id: u64) {
    write_username(name, id);
    mail.clear();
    mail.push_str(name);
    mail.push_str(EMAIL_DOMAIN);
}

/// What an email adds to the username.
const EMAIL_DOMAIN: &str = "@example.com";

/// Appends `n` in decimal, as `Display` writes it.
fn push_decimal(buf: &mut String, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    // Only ASCII digits were written.
    buf.push_str(std::str::from_utf8(&digits[at..]).expect("ASCII digits"));
}

/// The user of order number `i` (0-based generator index): `(i + 1) * 13 mod user_count + 1`,
/// as in the reference. 13 is coprime to 10^5, so with 100,000 users every user gets exactly one
/// order in each run of 100,000 consecutive orders (10 orders each at 1,000,000).
///
/// `user_count` must be at least 1.
pub fn order_user_id(i: u64, user_count: u64) -> u64 {
    (i + 1).wrapping_mul(13) % user_count + 1
}

/// The amount of an order of user `user_id`: `(user_id * 100 + user_id * 17) / 15` in integer
/// arithmetic, as the reference computes it (stored in a REAL column).
pub fn order_amount(user_id: u64) -> i64 {
    ((user_id * 100 + user_id * 17) / 15) as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_user_gets_ten_orders_at_reference_size() {
        let users = 100_000u64;
        let mut per_user = vec![0u32; users as usize + 1];
        for i in 0..1_000_000 {
            per_user[order_user_id(i, users) as usize] += 1;
        }
        assert_eq!(per_user[0], 0, "user ids start at 1");
        assert!(per_user[1..].iter().all(|&n| n == 10));
    }

    #[test]
    fn written_names_match_format() {
        let mut buf = String::from("leftover from a longer previous name");
        for id in [0, 1, 9, 10, 99_999, 100_000, 123_456_789, u64::MAX] {
            write_username(&mut buf, id);
            assert_eq!(buf, format!("user{id}"));
            write_email(&mut buf, id);
            assert_eq!(buf, format!("user{id}@example.com"));
            let mut mail = String::from("leftover");
            write_user(&mut buf, &mut mail, id);
            assert_eq!(
                (buf.as_str(), mail.as_str()),
                (format!("user{id}").as_str(), format!("user{id}@example.com").as_str())
            );
        }
    }

    #[test]
    fn rows_match_the_reference_formulas() {
        assert_eq!(username(7), "user7");
        assert_eq!(email(7), "user7@example.com");
        assert_eq!(order_user_id(0, 100_000), 14);
        assert_eq!(order_user_id(99_999, 100_000), 1);
        assert_eq!(order_amount(14), 109); // (1400 + 238) / 15 = 109.2
    }
}
