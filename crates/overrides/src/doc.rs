//! The JSON document the overriders work on: object members keep their order and numbers keep
//! the text they were written with, as evanphx/json-patch (which Karmada uses) keeps them, and
//! it is written back compactly the way Go's `encoding/json` writes (HTML characters escaped).
//!
//! Manifests come in and go out as [`serde_json::Value`] (whose keys are sorted anyway); the
//! order and number fidelity matter for the JSON documents a field overrider edits inside a
//! string field (a ConfigMap's `config.json`): Karmada writes them back with their members in
//! the order they were written.

use std::fmt::Write as _;

use serde_json::Value;

/// A JSON value with ordered object members and numbers kept as written.
#[derive(Clone, Debug, PartialEq)]
pub enum Doc {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A number, as written (always valid JSON number syntax).
    Number(String),
    /// A string.
    String(String),
    /// An array.
    Array(Vec<Doc>),
    /// An object, members in order (keys unique).
    Object(Vec<(String, Doc)>),
}

impl Doc {
    /// The member `key` of an object.
    pub fn get(&self, key: &str) -> Option<&Doc> {
        match self {
            Doc::Object(members) => members.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The member `key` of an object, mutably.
    pub fn get_mut(&mut self, key: &str) -> Option<&mut Doc> {
        match self {
            Doc::Object(members) => members.iter_mut().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// Sets member `key` of an object (replacing it in place, or appending it); `false` when
    /// this is not an object.
    pub fn set(&mut self, key: &str, value: Doc) -> bool {
        match self {
            Doc::Object(members) => {
                match members.iter_mut().find(|(k, _)| k == key) {
                    Some((_, existing)) => *existing = value,
                    None => members.push((key.to_owned(), value)),
                }
                true
            }
            _ => false,
        }
    }

    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Doc::String(s) => Some(s),
            _ => None,
        }
    }

    /// A short name of the JSON type, for messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Doc::Null => "null",
            Doc::Bool(_) => "boolean",
            Doc::Number(_) => "number",
            Doc::String(_) => "string",
            Doc::Array(_) => "array",
            Doc::Object(_) => "object",
        }
    }

    /// Compact JSON as Go's `encoding/json` writes it: no whitespace, `<`, `>`, `&`, U+2028
    /// and U+2029 escaped, control characters as `\u00XX` except `\n`, `\r` and `\t`.
    pub fn to_go_json(&self) -> String {
        let mut out = String::new();
        write_go(self, &mut out);
        out
    }
}

impl From<&Value> for Doc {
    fn from(value: &Value) -> Self {
        match value {
            Value::Null => Doc::Null,
            Value::Bool(b) => Doc::Bool(*b),
            Value::Number(n) => Doc::Number(n.to_string()),
            Value::String(s) => Doc::String(s.clone()),
            Value::Array(items) => Doc::Array(items.iter().map(Doc::from).collect()),
            Value::Object(map) => Doc::Object(map.iter().map(|(k, v)| (k.clone(), Doc::from(v))).collect()),
        }
    }
}

impl From<&Doc> for Value {
    fn from(doc: &Doc) -> Self {
        match doc {
            Doc::Null => Value::Null,
            Doc::Bool(b) => Value::Bool(*b),
            Doc::Number(text) => text
                .parse::<serde_json::Number>()
                .map(Value::Number)
                .unwrap_or(Value::Null),
            Doc::String(s) => Value::String(s.clone()),
            Doc::Array(items) => Value::Array(items.iter().map(Value::from).collect()),
            Doc::Object(members) => {
                Value::Object(members.iter().map(|(k, v)| (k.clone(), Value::from(v))).collect())
            }
        }
    }
}

fn write_go(doc: &Doc, out: &mut String) {
    match doc {
        Doc::Null => out.push_str("null"),
        Doc::Bool(true) => out.push_str("true"),
        Doc::Bool(false) => out.push_str("false"),
        Doc::Number(text) => out.push_str(text),
        Doc::String(s) => write_go_string(s, out),
        Doc::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_go(item, out);
            }
            out.push(']');
        }
        Doc::Object(members) => {
            out.push('{');
            for (i, (key, value)) in members.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_go_string(key, out);
                out.push(':');
                write_go(value, out);
            }
            out.push('}');
        }
    }
}

/// A JSON string as Go's `encoding/json` (with HTML escaping) writes it.
pub fn write_go_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Why a JSON text does not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid JSON at byte {offset}: {problem}")]
pub struct ParseError {
    /// Byte offset of the problem.
    pub offset: usize,
    /// What is wrong.
    pub problem: &'static str,
}

/// Parses one JSON value (surrounding whitespace allowed). A key written twice keeps its first
/// position and its last value.
pub fn parse(text: &str) -> Result<Doc, ParseError> {
    let mut parser = Parser {
        bytes: text.as_bytes(),
        text,
        pos: 0,
        depth: 0,
    };
    parser.whitespace();
    let value = parser.value()?;
    parser.whitespace();
    if parser.pos != parser.bytes.len() {
        return Err(parser.error("text after the value"));
    }
    Ok(value)
}

/// Nesting deeper than this is refused (Go's decoder allows 10,000).
const MAX_DEPTH: usize = 10_000;

struct Parser<'a> {
    bytes: &'a [u8],
    text: &'a str,
    pos: usize,
    depth: usize,
}

impl Parser<'_> {
    fn error(&self, problem: &'static str) -> ParseError {
        ParseError {
            offset: self.pos,
            problem,
        }
    }

    fn whitespace(&mut self) {
        while matches!(self.bytes.get(self.pos), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn literal(&mut self, word: &str, value: Doc) -> Result<Doc, ParseError> {
        if self.text[self.pos..].starts_with(word) {
            self.pos += word.len();
            Ok(value)
        } else {
            Err(self.error("unknown literal"))
        }
    }

    fn value(&mut self) -> Result<Doc, ParseError> {
        match self.bytes.get(self.pos) {
            None => Err(self.error("unexpected end")),
            Some(b'n') => self.literal("null", Doc::Null),
            Some(b't') => self.literal("true", Doc::Bool(true)),
            Some(b'f') => self.literal("false", Doc::Bool(false)),
            Some(b'"') => self.string().map(Doc::String),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(b'[') => self.nested(Self::array),
            Some(b'{') => self.nested(Self::object),
            Some(_) => Err(self.error("unexpected character")),
        }
    }

    fn nested(&mut self, parse: fn(&mut Self) -> Result<Doc, ParseError>) -> Result<Doc, ParseError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.error("nested too deeply"));
        }
        let value = parse(self);
        self.depth -= 1;
        value
    }

    fn array(&mut self) -> Result<Doc, ParseError> {
        self.pos += 1;
        let mut items = Vec::new();
        self.whitespace();
        if self.bytes.get(self.pos) == Some(&b']') {
            self.pos += 1;
            return Ok(Doc::Array(items));
        }
        loop {
            self.whitespace();
            items.push(self.value()?);
            self.whitespace();
            match self.bytes.get(self.pos) {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(Doc::Array(items));
                }
                _ => return Err(self.error("expected ',' or ']'")),
            }
        }
    }

    fn object(&mut self) -> Result<Doc, ParseError> {
        self.pos += 1;
        let mut members: Vec<(String, Doc)> = Vec::new();
        self.whitespace();
        if self.bytes.get(self.pos) == Some(&b'}') {
            self.pos += 1;
            return Ok(Doc::Object(members));
        }
        loop {
            self.whitespace();
            if self.bytes.get(self.pos) != Some(&b'"') {
                return Err(self.error("expected a member name"));
            }
            let key = self.string()?;
            self.whitespace();
            if self.bytes.get(self.pos) != Some(&b':') {
                return Err(self.error("expected ':'"));
            }
            self.pos += 1;
            self.whitespace();
            let value = self.value()?;
            match members.iter_mut().find(|(k, _)| *k == key) {
                Some((_, existing)) => *existing = value,
                None => members.push((key, value)),
            }
            self.whitespace();
            match self.bytes.get(self.pos) {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(Doc::Object(members));
                }
                _ => return Err(self.error("expected ',' or '}'")),
            }
        }
    }

    fn number(&mut self) -> Result<Doc, ParseError> {
        let start = self.pos;
        let digits = |p: &mut Self| {
            let from = p.pos;
            while p.bytes.get(p.pos).is_some_and(u8::is_ascii_digit) {
                p.pos += 1;
            }
            p.pos - from
        };
        if self.bytes.get(self.pos) == Some(&b'-') {
            self.pos += 1;
        }
        match self.bytes.get(self.pos) {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => {
                digits(self);
            }
            _ => return Err(self.error("invalid number")),
        }
        if self.bytes.get(self.pos) == Some(&b'.') {
            self.pos += 1;
            if digits(self) == 0 {
                return Err(self.error("invalid number"));
            }
        }
        if matches!(self.bytes.get(self.pos), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.bytes.get(self.pos), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if digits(self) == 0 {
                return Err(self.error("invalid number"));
            }
        }
        Ok(Doc::Number(self.text[start..self.pos].to_owned()))
    }

    fn string(&mut self) -> Result<String, ParseError> {
        self.pos += 1;
        let mut out = String::new();
        loop {
            let Some(&byte) = self.bytes.get(self.pos) else {
                return Err(self.error("unterminated string"));
            };
            match byte {
                b'"' => {
                    self.pos += 1;
                    return Ok(out);
                }
                b'\\' => {
                    self.pos += 1;
                    let escaped = match self.bytes.get(self.pos) {
                        Some(b'"') => '"',
                        Some(b'\\') => '\\',
                        Some(b'/') => '/',
                        Some(b'b') => '\u{8}',
                        Some(b'f') => '\u{c}',
                        Some(b'n') => '\n',
                        Some(b'r') => '\r',
                        Some(b't') => '\t',
                        Some(b'u') => {
                            self.pos += 1;
                            let c = self.unicode_escape()?;
                            out.push(c);
                            continue;
                        }
                        _ => return Err(self.error("invalid escape")),
                    };
                    out.push(escaped);
                    self.pos += 1;
                }
                0..=0x1f => return Err(self.error("control character in string")),
                _ => {
                    // Copy one UTF-8 character (the input is a &str, so this is a boundary).
                    let rest = &self.text[self.pos..];
                    let c = rest
                        .chars()
                        .next()
                        .ok_or_else(|| self.error("unterminated string"))?;
                    out.push(c);
                    self.pos += c.len_utf8();
                }
            }
        }
    }

    fn hex4(&mut self) -> Result<u32, ParseError> {
        let hex = self
            .text
            .get(self.pos..self.pos + 4)
            .ok_or_else(|| self.error("invalid \\u escape"))?;
        let value = u32::from_str_radix(hex, 16).map_err(|_| self.error("invalid \\u escape"))?;
        self.pos += 4;
        Ok(value)
    }

    /// After `\u`: one code point, joining a surrogate pair; a lone surrogate becomes U+FFFD
    /// (as Go's decoder does).
    fn unicode_escape(&mut self) -> Result<char, ParseError> {
        let first = self.hex4()?;
        if (0xD800..0xDC00).contains(&first) && self.text[self.pos..].starts_with("\\u") {
            let saved = self.pos;
            self.pos += 2;
            let second = self.hex4()?;
            if (0xDC00..0xE000).contains(&second) {
                let code = 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00);
                return Ok(char::from_u32(code).unwrap_or('\u{FFFD}'));
            }
            self.pos = saved;
        }
        Ok(char::from_u32(first).unwrap_or('\u{FFFD}'))
    }
}

/// A float as Go's `encoding/json` writes a `float64`: the shortest decimal that round-trips,
/// in exponent form below 1e-6 or from 1e21.
pub fn go_float(value: f64) -> Option<String> {
    if !value.is_finite() {
        return None;
    }
    let magnitude = value.abs();
    if magnitude == 0.0 || (1e-6..1e21).contains(&magnitude) {
        return Some(format!("{value}"));
    }
    // Rust writes `1e21` / `1e-7`; Go writes `1e+21` / `1e-07`.
    let text = format!("{value:e}");
    let (mantissa, exponent) = text.split_once('e')?;
    let (sign, digits) = match exponent.strip_prefix('-') {
        Some(digits) => ('-', digits),
        None => ('+', exponent),
    };
    Some(format!("{mantissa}e{sign}{digits:0>2}"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    #[test]
    fn order_and_numbers_survive_a_round_trip() {
        let text = r#" { "b" : 1.0, "a" : [1e3, -0, 2E-2, true, null], "c": {"z": "x", "y": {}} } "#;
        let doc = parse(text).unwrap();
        assert_eq!(
            doc.to_go_json(),
            r#"{"b":1.0,"a":[1e3,-0,2E-2,true,null],"c":{"z":"x","y":{}}}"#
        );
    }

    #[test]
    fn strings_are_written_as_go_writes_them() {
        let doc = parse(r#"["a\"b\\c\/d", "<tag>&amp;", "tab\there\nnew", "\u0001\b\f", "é\u00e9", "\u2028", "\ud83d\ude00", "\ud800"]"#).unwrap();
        assert_eq!(
            doc.to_go_json(),
            "[\"a\\\"b\\\\c/d\",\"\\u003ctag\\u003e\\u0026amp;\",\"tab\\there\\nnew\",\"\\u0001\\u0008\\u000c\",\"éé\",\"\\u2028\",\"😀\",\"\u{FFFD}\"]"
        );
    }

    #[test]
    fn duplicate_keys_keep_their_first_place_and_last_value() {
        assert_eq!(
            parse(r#"{"a":1,"b":2,"a":3}"#).unwrap().to_go_json(),
            r#"{"a":3,"b":2}"#
        );
    }

    #[test]
    fn invalid_json_is_refused() {
        for bad in [
            "",
            "{",
            "[1,]",
            "{\"a\"}",
            "{a:1}",
            "01",
            "1.",
            "1e",
            "-",
            "\"\\x\"",
            "\"a",
            "[1] x",
            "nul",
            "\"\u{1}\"",
            "{\"a\":1,}",
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
        assert_eq!(parse("  7 ").unwrap(), Doc::Number("7".into()));
    }

    #[test]
    fn serde_json_conversions() {
        let value = json!({"z": [1, 2.5, "s", null, false], "a": {"k": -3}});
        let doc = Doc::from(&value);
        assert_eq!(Value::from(&doc), value);
        // serde_json's keys come sorted.
        assert_eq!(doc.to_go_json(), r#"{"a":{"k":-3},"z":[1,2.5,"s",null,false]}"#);
    }

    #[test]
    fn members() {
        let mut doc = parse(r#"{"a":1}"#).unwrap();
        assert!(doc.set("b", Doc::Bool(true)));
        assert!(doc.set("a", Doc::Null));
        assert_eq!(doc.to_go_json(), r#"{"a":null,"b":true}"#);
        assert_eq!(doc.get("b"), Some(&Doc::Bool(true)));
        assert!(!Doc::Null.set("x", Doc::Null));
        assert_eq!(Doc::Null.type_name(), "null");
    }

    #[test]
    fn floats_as_go_writes_them() {
        let cases = [
            (1000.0, "1000"),
            (1.5, "1.5"),
            (0.0, "0"),
            (-2.0, "-2"),
            (1e21, "1e+21"),
            (1e-7, "1e-07"),
            (1.5e-7, "1.5e-07"),
            (123456789.0, "123456789"),
        ];
        for (value, expected) in cases {
            assert_eq!(go_float(value).unwrap(), expected, "{value}");
        }
        assert_eq!(go_float(f64::NAN), None);
    }
}
