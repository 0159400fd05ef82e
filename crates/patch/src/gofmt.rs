//! Go-compatible rendering of JSON values.
//!
//! kube-apiserver's messages and byte-level encodings come from Go's `fmt` and `encoding/json`
//! packages. Clients and people compare them with what a real cluster says, so this module
//! reproduces the few Go behaviours that show through: `%v` of unstructured values, `%q`
//! quoting, Go type names in error messages, and `encoding/json`'s output (sorted keys, HTML-safe
//! escaping, float formatting).

use serde_json::{Number, Value};

/// Go's `%v` of a value decoded into `interface{}` (maps print as `map[k:v ...]` with sorted keys,
/// slices as `[a b]`, `nil` as `<nil>`).
pub(crate) fn go_value(v: &Value) -> String {
    let mut out = String::new();
    write_go_value(v, &mut out);
    out
}

fn write_go_value(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("<nil>"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&go_number(n)),
        Value::String(s) => out.push_str(s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                write_go_value(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push_str("map[");
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                out.push_str(k);
                out.push(':');
                if let Some(item) = map.get(k.as_str()) {
                    write_go_value(item, out);
                }
            }
            out.push(']');
        }
    }
}

/// `%v` of a JSON number as kube-apiserver holds it: whole numbers are `int64`, others `float64`.
pub(crate) fn go_number(n: &Number) -> String {
    if let Some(i) = n.as_i64() {
        i.to_string()
    } else if let Some(u) = n.as_u64() {
        u.to_string()
    } else {
        go_float(n.as_f64().unwrap_or(0.0))
    }
}

/// Go's `%v` (shortest `%g`) of a float64: exponent form below 1e-4 and from 1e6 up.
pub(crate) fn go_float(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf".into() } else { "-Inf".into() };
    }
    if f == 0.0 {
        return if f.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    let (negative, digits, exp) = shortest_digits(f);
    let sign = if negative { "-" } else { "" };
    if !(-4..6).contains(&exp) {
        let mut mantissa = digits[..1].to_string();
        if digits.len() > 1 {
            mantissa.push('.');
            mantissa.push_str(&digits[1..]);
        }
        let (esign, eabs) = if exp < 0 { ('-', -exp) } else { ('+', exp) };
        format!("{sign}{mantissa}e{esign}{eabs:02}")
    } else {
        format!("{sign}{}", place_decimal(&digits, exp))
    }
}

/// Shortest round-trip digits of `f` and the decimal exponent of the first digit.
fn shortest_digits(f: f64) -> (bool, String, i32) {
    // Rust's `{:e}` prints the shortest round-trip representation, e.g. `1.2345e6`.
    let s = format!("{:e}", f.abs());
    let (mantissa, exp) = s.split_once('e').unwrap_or((s.as_str(), "0"));
    let digits: String = mantissa.chars().filter(|c| c.is_ascii_digit()).collect();
    let digits = digits.trim_end_matches('0').to_string();
    let digits = if digits.is_empty() {
        "0".to_string()
    } else {
        digits
    };
    (f < 0.0, digits, exp.parse().unwrap_or(0))
}

/// Plain decimal notation for `digits` × 10^(exp - len + 1).
fn place_decimal(digits: &str, exp: i32) -> String {
    let len = digits.len() as i32;
    if exp < 0 {
        let zeros = "0".repeat((-exp - 1) as usize);
        format!("0.{zeros}{digits}")
    } else if exp + 1 >= len {
        let zeros = "0".repeat((exp + 1 - len) as usize);
        format!("{digits}{zeros}")
    } else {
        let split = (exp + 1) as usize;
        format!("{}.{}", &digits[..split], &digits[split..])
    }
}

/// Go's `%q` of a string.
pub(crate) fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{07}' => out.push_str("\\a"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            '\u{0b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Go's `%q` of a `[]string` (`["a" "b"]`).
pub(crate) fn go_quote_list(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| go_quote(s)).collect();
    format!("[{}]", quoted.join(" "))
}

/// The Go type name of a value decoded into `interface{}` by kube-apiserver's JSON decoder.
pub(crate) fn go_type_name(v: Option<&Value>) -> &'static str {
    match v {
        None | Some(Value::Null) => "<nil>",
        Some(Value::Bool(_)) => "bool",
        Some(Value::Number(n)) => {
            if n.is_i64() || n.is_u64() {
                "int64"
            } else {
                "float64"
            }
        }
        Some(Value::String(_)) => "string",
        Some(Value::Array(_)) => "[]interface {}",
        Some(Value::Object(_)) => "map[string]interface {}",
    }
}

/// `encoding/json` output of a value: object keys sorted, `<`, `>`, `&`, U+2028 and U+2029
/// escaped, floats in Go's notation.
pub(crate) fn go_json(v: &Value) -> String {
    let mut out = String::new();
    write_go_json(v, &mut out);
    out
}

pub(crate) fn write_go_json(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => {
            if n.is_i64() || n.is_u64() {
                out.push_str(&n.to_string());
            } else {
                out.push_str(&go_json_float(n.as_f64().unwrap_or(0.0)));
            }
        }
        Value::String(s) => write_go_json_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_go_json(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_go_json_string(k, out);
                out.push(':');
                if let Some(item) = map.get(k.as_str()) {
                    write_go_json(item, out);
                }
            }
            out.push('}');
        }
    }
}

/// A JSON string literal as `encoding/json` writes it.
pub(crate) fn go_json_string(s: &str) -> String {
    let mut out = String::new();
    write_go_json_string(s, &mut out);
    out
}

pub(crate) fn write_go_json_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// `encoding/json`'s float64 notation: plain decimal for 1e-6 <= |f| < 1e21, exponent otherwise
/// (with `e-07` shortened to `e-7`).
fn go_json_float(f: f64) -> String {
    if f == 0.0 || !f.is_finite() {
        return "0".into();
    }
    let abs = f.abs();
    let (negative, digits, exp) = shortest_digits(f);
    let sign = if negative { "-" } else { "" };
    if !(1e-6..1e21).contains(&abs) {
        let mut mantissa = digits[..1].to_string();
        if digits.len() > 1 {
            mantissa.push('.');
            mantissa.push_str(&digits[1..]);
        }
        let (esign, eabs) = if exp < 0 { ('-', -exp) } else { ('+', exp) };
        format!("{sign}{mantissa}e{esign}{eabs}")
    } else {
        format!("{sign}{}", place_decimal(&digits, exp))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn go_value_formats_like_fmt_v() {
        assert_eq!(
            go_value(&json!({"name": "a", "image": "nginx"})),
            "map[image:nginx name:a]"
        );
        assert_eq!(go_value(&json!([1, "b", null, true])), "[1 b <nil> true]");
        assert_eq!(go_value(&json!({"n": {"x": [1.5]}})), "map[n:map[x:[1.5]]]");
    }

    #[test]
    fn go_float_uses_shortest_g() {
        assert_eq!(go_float(1.5), "1.5");
        assert_eq!(go_float(123456.0), "123456");
        assert_eq!(go_float(1e6), "1e+06");
        assert_eq!(go_float(1234567.0), "1.234567e+06");
        assert_eq!(go_float(0.0001), "0.0001");
        assert_eq!(go_float(0.00001), "1e-05");
        assert_eq!(go_float(-2.25), "-2.25");
    }

    #[test]
    fn go_json_escapes_html_and_sorts_keys() {
        assert_eq!(
            go_json(&json!({"b": "<a&b>", "a": 1})),
            r#"{"a":1,"b":"\u003ca\u0026b\u003e"}"#
        );
        assert_eq!(go_json(&json!(80.0)), "80");
        assert_eq!(go_json(&json!(1e21)), "1e+21");
        assert_eq!(go_json(&json!(0.0000001)), "1e-7");
        assert_eq!(go_json(&json!(0.5)), "0.5");
    }

    #[test]
    fn go_quote_escapes() {
        assert_eq!(go_quote("a\"b\n"), r#""a\"b\n""#);
        assert_eq!(
            go_quote_list(&["name".into(), "protocol".into()]),
            r#"["name" "protocol"]"#
        );
    }
}
