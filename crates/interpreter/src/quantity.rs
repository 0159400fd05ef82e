//! Kubernetes resource quantities (`100m`, `1.5Gi`, `2e3`): exact parsing, rounding up to whole
//! units or milli-units, and canonical formatting.
//!
//! `k8s_openapi`'s `Quantity` is only a string, and per-replica requests have to be added and
//! compared, so this module parses them exactly (no floating point) the way Kubernetes'
//! `resource.Quantity` does, and formats sums back in Kubernetes' canonical form.

/// A parsed, non-negative quantity: `mantissa * 1024^binary_power * 10^exponent`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Quantity {
    mantissa: i128,
    binary_power: u32,
    exponent: i32,
}

/// Most significant digits kept exactly; more would not fit the arithmetic below.
const MAX_DIGITS: usize = 30;

impl Quantity {
    /// Parses `text` in Kubernetes' quantity syntax; the error says what is wrong.
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        let bad = || format!("{text:?} is not a quantity; use for example 500m, 2, 1.5Gi or 128Mi");
        let body = text.trim();
        let body = body.strip_prefix('+').unwrap_or(body);
        if body.starts_with('-') {
            return Err(format!(
                "{text:?} is negative; resource requests must not be negative"
            ));
        }
        let number_end = body
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(body.len());
        let (number, suffix) = body.split_at(number_end);
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if whole.is_empty() && fraction.is_empty() || fraction.contains('.') {
            return Err(bad());
        }
        let (binary_power, suffix_exponent) = match suffix {
            "" => (0, 0),
            "Ki" => (1, 0),
            "Mi" => (2, 0),
            "Gi" => (3, 0),
            "Ti" => (4, 0),
            "Pi" => (5, 0),
            "Ei" => (6, 0),
            "n" => (0, -9),
            "u" => (0, -6),
            "m" => (0, -3),
            "k" => (0, 3),
            "M" => (0, 6),
            "G" => (0, 9),
            "T" => (0, 12),
            "P" => (0, 15),
            "E" => (0, 18),
            other => {
                let exponent = other
                    .strip_prefix(['e', 'E'])
                    .and_then(|exp| exp.parse::<i32>().ok())
                    .filter(|exp| exp.abs() <= 100)
                    .ok_or_else(bad)?;
                (0, exponent)
            }
        };
        let digits: String = format!("{whole}{fraction}");
        let digits = digits.trim_start_matches('0');
        let mut exponent = suffix_exponent - i32::try_from(fraction.len()).map_err(|_| bad())?;
        // Trailing zeros carry no precision; dropping them keeps long decimals in range.
        let trimmed = digits.trim_end_matches('0');
        exponent += i32::try_from(digits.len() - trimmed.len()).map_err(|_| bad())?;
        if trimmed.len() > MAX_DIGITS {
            return Err(format!("{text:?} has more than {MAX_DIGITS} significant digits"));
        }
        let mantissa = if trimmed.is_empty() {
            0
        } else {
            trimmed.parse::<i128>().map_err(|_| bad())?
        };
        Ok(Self {
            mantissa,
            binary_power,
            exponent,
        })
    }

    /// The value times `10^scale`, rounded up to an integer, as Kubernetes' `ScaledValue` does;
    /// `None` when it does not fit an `i64`.
    pub(crate) fn ceil_scaled(&self, scale: i32) -> Option<i64> {
        let mut n = self.mantissa;
        for _ in 0..self.binary_power {
            n = n.checked_mul(1024)?;
        }
        let exponent = self.exponent + scale;
        let result = if exponent >= 0 {
            n.checked_mul(10_i128.checked_pow(u32::try_from(exponent).ok()?)?)?
        } else {
            match 10_i128.checked_pow(exponent.unsigned_abs()) {
                Some(divisor) => n / divisor + i128::from(n % divisor != 0),
                // Smaller than any representable unit: rounds up to one unit unless zero.
                None => i128::from(n != 0),
            }
        };
        i64::try_from(result).ok()
    }
}

/// Canonical decimal (`DecimalSI`) form of `value * 10^exponent`: `1500m`, `2`, `3k`.
pub(crate) fn format_decimal(mut value: i64, mut exponent: i32) -> String {
    if value == 0 {
        return "0".to_owned();
    }
    while value % 10 == 0 {
        value /= 10;
        exponent += 1;
    }
    let mut group = exponent.div_euclid(3) * 3;
    if group > 18 {
        group = 18;
    }
    for _ in group..exponent {
        value = value.saturating_mul(10);
    }
    let suffix = match group {
        -9 => "n",
        -6 => "u",
        -3 => "m",
        3 => "k",
        6 => "M",
        9 => "G",
        12 => "T",
        15 => "P",
        18 => "E",
        _ => "",
    };
    format!("{value}{suffix}")
}

/// Canonical binary (`BinarySI`) form of a byte count: `512`, `1k`, `128Mi`, `1000001`.
pub(crate) fn format_binary(value: i64) -> String {
    // Kubernetes prints small binary quantities in decimal form.
    if value.abs() < 1024 {
        return format_decimal(value, 0);
    }
    const SUFFIXES: [&str; 7] = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
    let mut mantissa = value;
    let mut power = 0;
    while power < 6 && mantissa % 1024 == 0 {
        mantissa /= 1024;
        power += 1;
    }
    format!("{mantissa}{}", SUFFIXES[power])
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn milli(text: &str) -> i64 {
        Quantity::parse(text).unwrap().ceil_scaled(3).unwrap()
    }

    fn whole(text: &str) -> i64 {
        Quantity::parse(text).unwrap().ceil_scaled(0).unwrap()
    }

    #[test]
    fn parses_every_suffix() {
        assert_eq!(milli("100m"), 100);
        assert_eq!(milli("1"), 1000);
        assert_eq!(milli("1.5"), 1500);
        assert_eq!(milli("0.1"), 100);
        assert_eq!(milli(".5"), 500);
        assert_eq!(milli("2."), 2000);
        assert_eq!(milli("+3"), 3000);
        assert_eq!(milli("500u"), 1, "rounds up");
        assert_eq!(milli("1n"), 1, "rounds up");
        assert_eq!(whole("1Ki"), 1024);
        assert_eq!(whole("1Mi"), 1 << 20);
        assert_eq!(whole("1.5Gi"), 3 << 29);
        assert_eq!(whole("2Ti"), 2 << 40);
        assert_eq!(whole("1Pi"), 1 << 50);
        assert_eq!(whole("1Ei"), 1 << 60);
        assert_eq!(whole("1k"), 1000);
        assert_eq!(whole("1M"), 1_000_000);
        assert_eq!(whole("1G"), 1_000_000_000);
        assert_eq!(whole("1T"), 1_000_000_000_000);
        assert_eq!(whole("1P"), 1_000_000_000_000_000);
        assert_eq!(whole("1E"), 1_000_000_000_000_000_000);
        assert_eq!(whole("1e3"), 1000);
        assert_eq!(whole("15E-1"), 2, "1.5 rounds up");
        assert_eq!(whole("100m"), 1, "rounds up");
        assert_eq!(whole("0"), 0);
        assert_eq!(whole("0.000"), 0);
    }

    #[test]
    fn rejects_malformed_quantities() {
        for text in ["", "abc", "1Qi", "1.2.3", "-1", "1e", "e3", ".", "1 Gi", "1e1000"] {
            assert!(Quantity::parse(text).is_err(), "{text:?}");
        }
        assert!(Quantity::parse("-1").unwrap_err().contains("negative"));
    }

    #[test]
    fn out_of_range_is_none() {
        assert_eq!(Quantity::parse("100E").unwrap().ceil_scaled(0), None);
        assert_eq!(Quantity::parse("1e40").unwrap().ceil_scaled(0), None);
        assert_eq!(Quantity::parse("1e-50").unwrap().ceil_scaled(0), Some(1));
    }

    #[test]
    fn formats_canonically() {
        assert_eq!(format_decimal(1500, -3), "1500m");
        assert_eq!(format_decimal(2000, -3), "2");
        assert_eq!(format_decimal(100, -3), "100m");
        assert_eq!(format_decimal(1_000_000, -3), "1k");
        assert_eq!(format_decimal(1500, 0), "1500");
        assert_eq!(format_decimal(3000, 0), "3k");
        assert_eq!(format_decimal(0, -3), "0");
        assert_eq!(format_binary(512), "512");
        assert_eq!(format_binary(1000), "1k");
        assert_eq!(format_binary(1024), "1Ki");
        assert_eq!(format_binary(3 << 29), "1536Mi");
        assert_eq!(format_binary(1 << 30), "1Gi");
        assert_eq!(format_binary(1_000_001), "1000001");
    }

    #[test]
    fn round_trips() {
        for text in ["1500m", "2", "100m", "1Gi", "128Mi", "3k"] {
            let q = Quantity::parse(text).unwrap();
            let back = if text.ends_with('i') {
                format_binary(q.ceil_scaled(0).unwrap())
            } else {
                format_decimal(q.ceil_scaled(3).unwrap(), -3)
            };
            assert_eq!(back, text);
        }
    }
}
