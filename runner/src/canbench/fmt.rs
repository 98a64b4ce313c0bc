//! Ported from canbench 0.7.0 (dfinity/canbench, Apache-2.0), src/fmt.rs.
//!
//! Number formatting helpers shared by the summary, the table and the CSV report.

const POSITIVE_INFINITY_PERCENT: &str = "1.0E99";
const NEGATIVE_INFINITY_PERCENT: &str = "-1.0E99";

/// Format numbers with unit suffixes (e.g., K, M, B, T) for better readability.
fn format_with_unit(val: f64) -> (f64, &'static str) {
    const UNITS: &[(f64, &str)] = &[(1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")];
    for &(divisor, suffix) in UNITS {
        if val.abs() >= divisor {
            return (val / divisor, suffix);
        }
    }
    (val, "")
}

/// Format an unsigned integer with unit suffixes.
pub(crate) fn fmt_human_u64(value: u64) -> String {
    let (scaled, unit) = format_with_unit(value as f64);
    match unit {
        "" => format!("{scaled}"),
        _ => format!("{scaled:.2}{unit}"),
    }
}

/// Format a signed integer with unit suffixes.
pub(crate) fn fmt_human_i64(value: i64) -> String {
    if value == 0 {
        return "0".to_string(); // No sign for zero values.
    }
    let (scaled, unit) = format_with_unit(value as f64);
    match unit {
        "" => format!("{scaled:+.0}"),
        _ => format!("{scaled:+.2}{unit}"),
    }
}

/// Format a floating-point number with a sign and two decimal places.
/// This is used for displaying percentage changes in human-readable format
/// with a sign in the short table report.
pub(crate) fn fmt_human_percent(value: f64) -> String {
    if value.abs() < 0.01 {
        format!("{:.2}%", value) // Don't show sign for small values.
    } else {
        format!("{:+.2}%", value)
    }
}

/// Format a floating-point number with two decimal places.
/// This is used for displaying absolute values in the CSV report.
pub(crate) fn fmt_percent(value: f64) -> String {
    if value.is_infinite() {
        if value.is_sign_positive() {
            POSITIVE_INFINITY_PERCENT.to_string() // Represents +inf%
        } else {
            NEGATIVE_INFINITY_PERCENT.to_string() // Represents -inf%
        }
    } else {
        format!("{:.2}%", value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_u64_is_plain_below_one_thousand_and_scaled_above() {
        assert_eq!(fmt_human_u64(0), "0");
        assert_eq!(fmt_human_u64(207), "207");
        assert_eq!(fmt_human_u64(999), "999");
        assert_eq!(fmt_human_u64(1_000), "1.00K");
        assert_eq!(fmt_human_u64(3_834), "3.83K");
        assert_eq!(fmt_human_u64(7_999), "8.00K");
        assert_eq!(fmt_human_u64(49_120), "49.12K");
        assert_eq!(fmt_human_u64(3_390_000), "3.39M");
        assert_eq!(fmt_human_u64(56_390_000_000), "56.39B");
        assert_eq!(fmt_human_u64(2_000_000_000_000), "2.00T");
    }

    #[test]
    fn human_i64_has_sign_except_for_zero() {
        assert_eq!(fmt_human_i64(0), "0");
        assert_eq!(fmt_human_i64(47), "+47");
        assert_eq!(fmt_human_i64(-3), "-3");
        assert_eq!(fmt_human_i64(-154_220), "-154.22K");
        assert_eq!(fmt_human_i64(91_480), "+91.48K");
        assert_eq!(fmt_human_i64(-2_890), "-2.89K");
    }

    #[test]
    fn human_percent_drops_sign_below_one_hundredth() {
        assert_eq!(fmt_human_percent(0.0), "0.00%");
        assert_eq!(fmt_human_percent(0.004), "0.00%");
        assert_eq!(fmt_human_percent(-0.004), "-0.00%");
        assert_eq!(fmt_human_percent(5.59), "+5.59%");
        assert_eq!(fmt_human_percent(-93.32), "-93.32%");
        assert_eq!(fmt_human_percent(f64::INFINITY), "+inf%");
        assert_eq!(fmt_human_percent(f64::NEG_INFINITY), "-inf%");
    }

    #[test]
    fn csv_percent_writes_infinity_as_1e99() {
        assert_eq!(fmt_percent(10.0), "10.00%");
        assert_eq!(fmt_percent(-100.0), "-100.00%");
        assert_eq!(fmt_percent(f64::INFINITY), "1.0E99");
        assert_eq!(fmt_percent(f64::NEG_INFINITY), "-1.0E99");
    }
}
