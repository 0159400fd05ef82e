//! Go's text renderings of values, so messages read byte for byte like kube-apiserver's:
//! `%q` for strings, `%v` for numbers, and `encoding/json` for everything else.

use serde_json::Value;

/// Go's `strconv.Quote`: double quotes, with Go's escapes for control and non-printable runes.
pub(crate) fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if !is_go_printable(c) => {
                if (c as u32) < 0x10000 {
                    out.push_str(&format!("\\u{:04x}", c as u32));
                } else {
                    out.push_str(&format!("\\U{:08x}", c as u32));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// An approximation of Go's `unicode.IsPrint` for non-ASCII runes: letters, marks, numbers,
/// punctuation and symbols print; separators, controls and format characters are escaped.
fn is_go_printable(c: char) -> bool {
    if c.is_ascii() {
        return (' '..='~').contains(&c);
    }
    if c.is_control() || c.is_whitespace() {
        return false;
    }
    !matches!(
        c,
        '\u{ad}'
            | '\u{600}'..='\u{605}'
            | '\u{200b}'..='\u{200f}'
            | '\u{2028}'..='\u{202e}'
            | '\u{2060}'..='\u{2064}'
            | '\u{feff}'
            | '\u{e000}'..='\u{f8ff}'
    )
}

/// Go's `%v` for a float64 (`strconv.FormatFloat(f, 'g', -1, 64)` with `%v`'s exponent rule).
pub(crate) fn float_v(f: f64) -> String {
    if f.is_nan() {
        return "NaN".to_string();
    }
    if f.is_infinite() {
        return if f > 0.0 {
            "+Inf".to_string()
        } else {
            "-Inf".to_string()
        };
    }
    if f == 0.0 {
        return if f.is_sign_negative() {
            "-0".to_string()
        } else {
            "0".to_string()
        };
    }
    let (mantissa, exp) = split_exponent(f);
    // %v uses %g with the shortest precision, which switches to an exponent outside [-4, 6).
    if !(-4..6).contains(&exp) {
        return go_exponent(&mantissa, exp);
    }
    format!("{f}")
}

/// Go's `encoding/json` rendering of a float64.
pub(crate) fn float_json(f: f64) -> String {
    if f == 0.0 {
        return if f.is_sign_negative() {
            "-0".to_string()
        } else {
            "0".to_string()
        };
    }
    let abs = f.abs();
    if !(1e-6..1e21).contains(&abs) {
        let (mantissa, exp) = split_exponent(f);
        let mut s = go_exponent(&mantissa, exp);
        // encoding/json shortens a two-digit negative exponent: e-07 becomes e-7.
        let bytes = s.as_bytes();
        let n = bytes.len();
        if n >= 4 && bytes[n - 4] == b'e' && bytes[n - 3] == b'-' && bytes[n - 2] == b'0' {
            let last = s.pop();
            s.pop();
            if let Some(last) = last {
                s.push(last);
            }
        }
        return s;
    }
    format!("{f}")
}

/// Rust's shortest scientific rendering split into mantissa and decimal exponent.
fn split_exponent(f: f64) -> (String, i32) {
    let sci = format!("{f:e}");
    match sci.split_once('e') {
        Some((m, e)) => (m.to_string(), e.parse().unwrap_or(0)),
        None => (sci, 0),
    }
}

/// Go's `%e` layout: mantissa, `e`, sign, at least two exponent digits.
fn go_exponent(mantissa: &str, exp: i32) -> String {
    let sign = if exp < 0 { '-' } else { '+' };
    format!("{mantissa}e{sign}{:02}", exp.abs())
}

/// A JSON number the way Go holds it after decoding into `interface{}` (int64, else float64),
/// rendered with `%v`.
pub(crate) fn number_v(n: &serde_json::Number) -> String {
    if let Some(i) = n.as_i64() {
        i.to_string()
    } else {
        float_v(n.as_f64().unwrap_or(0.0))
    }
}

/// Go's `encoding/json.Marshal` of a decoded JSON value: sorted keys, HTML-safe escapes, Go's
/// number layout.
pub(crate) fn json(v: &Value) -> String {
    let mut out = String::new();
    write_json(v, &mut out);
    out
}

fn write_json(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                out.push_str(&i.to_string());
            } else {
                out.push_str(&float_json(n.as_f64().unwrap_or(0.0)));
            }
        }
        Value::String(s) => write_json_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json_string(k, out);
                out.push(':');
                if let Some(item) = map.get(k) {
                    write_json(item, out);
                }
            }
            out.push('}');
        }
    }
}

fn write_json_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// `fmt.Sprint` of a decoded JSON value (`%v`): strings bare, numbers as Go prints them,
/// `[a b]` for arrays and `map[k:v]` for objects.
pub(crate) fn sprint(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => number_v(n),
        Value::String(s) => s.clone(),
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().map(sprint).collect();
            format!("[{}]", parts.join(" "))
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{k}:{}", map.get(k).map(sprint).unwrap_or_default()))
                .collect();
            format!("map[{}]", parts.join(" "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    // Expected strings were produced by Go 1.19's fmt and encoding/json.
    #[test]
    fn float_v_matches_go() {
        let cases = [
            (1e6, "1e+06"),
            (123456.0, "123456"),
            (1234567.0, "1.234567e+06"),
            (1.5, "1.5"),
            (3.0, "3"),
            (1e20, "1e+20"),
            (1e21, "1e+21"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (100000.0, "100000"),
            (2.5e-5, "2.5e-05"),
            (-7.25, "-7.25"),
        ];
        for (f, want) in cases {
            assert_eq!(float_v(f), want, "{f}");
        }
    }

    #[test]
    fn json_matches_go() {
        assert_eq!(
            json(&json!({"b": 1.0, "a": "<x>&", "c": 1e21, "d": 1e20})),
            r#"{"a":"\u003cx\u003e\u0026","b":1,"c":1e+21,"d":100000000000000000000}"#
        );
        assert_eq!(json(&json!(1e-7)), "1e-7");
        assert_eq!(json(&json!([null, true, "a\nb"])), r#"[null,true,"a\nb"]"#);
    }

    #[test]
    fn quote_matches_go() {
        assert_eq!(quote("a\"b\u{e9}\u{1}\n"), r#""a\"bé\x01\n""#);
        assert_eq!(quote("日本"), "\"日本\"");
        assert_eq!(quote("\u{a0}"), r#""\u00a0""#);
    }

    #[test]
    fn sprint_matches_go() {
        assert_eq!(
            sprint(&json!(["a", 1, 1.5, null, true, {"a": 1}])),
            "[a 1 1.5 <nil> true map[a:1]]"
        );
    }
}
