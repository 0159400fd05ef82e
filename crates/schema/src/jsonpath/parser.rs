//! The template parser of k8s.io/client-go/util/jsonpath, token for token: text outside
//! `{...}` is literal, actions inside are fields, indexes, slices, filters, unions, recursive
//! descent, literals and `range`/`end`.

use super::JsonPathError;

/// One slice parameter (`[start:end:step]`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Param {
    pub value: i64,
    pub known: bool,
    /// `end` derived from a plain index (`[i]` means `[i:i+1]`).
    pub derived: bool,
}

/// A parsed node.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Node {
    List(Vec<Node>),
    Text(String),
    Field(String),
    Array([Param; 3]),
    Filter {
        left: Vec<Node>,
        right: Vec<Node>,
        op: String,
    },
    Int(i64),
    Float(f64),
    Bool(bool),
    Wildcard,
    Recursive,
    Union(Vec<Vec<Node>>),
    Identifier(String),
}

fn err(msg: impl Into<String>) -> JsonPathError {
    JsonPathError(msg.into())
}

/// Parses a template into its root node list.
pub(crate) fn parse(text: &str) -> Result<Vec<Node>, JsonPathError> {
    let mut p = Parser {
        input: text.chars().collect(),
        pos: 0,
        start: 0,
        width: 0,
        root: Vec::new(),
    };
    p.parse_text()?;
    Ok(p.root)
}

/// `parseAction`: parses `{text}` and returns the single action's nodes.
fn parse_action(text: &str) -> Result<Vec<Node>, JsonPathError> {
    let mut root = parse(&format!("{{{text}}}"))?;
    match root.drain(..).next() {
        Some(Node::List(nodes)) => Ok(nodes),
        _ => Ok(Vec::new()),
    }
}

struct Parser {
    input: Vec<char>,
    pos: usize,
    start: usize,
    width: usize,
    root: Vec<Node>,
}

const EOF: char = '\u{0}';

impl Parser {
    fn rest_starts_with(&self, s: &str) -> bool {
        (self.pos..)
            .zip(s.chars())
            .all(|(i, c)| self.input.get(i) == Some(&c))
    }

    fn consume_text(&mut self) -> String {
        let v: String = self.input[self.start..self.pos].iter().collect();
        self.start = self.pos;
        v
    }

    fn next(&mut self) -> Option<char> {
        if self.pos >= self.input.len() {
            self.width = 0;
            return None;
        }
        let c = self.input[self.pos];
        self.width = 1;
        self.pos += 1;
        Some(c)
    }

    fn peek(&mut self) -> Option<char> {
        self.input.get(self.pos).copied()
    }

    fn backup(&mut self) {
        self.pos -= self.width;
    }

    fn parse_text(&mut self) -> Result<(), JsonPathError> {
        loop {
            if self.rest_starts_with("{") {
                if self.pos > self.start {
                    let t = self.consume_text();
                    self.root.push(Node::Text(t));
                }
                return self.parse_left_delim();
            }
            if self.next().is_none() {
                break;
            }
        }
        if self.pos > self.start {
            let t = self.consume_text();
            self.root.push(Node::Text(t));
        }
        Ok(())
    }

    fn parse_left_delim(&mut self) -> Result<(), JsonPathError> {
        self.pos += 1;
        self.consume_text();
        let mut action = Vec::new();
        let result = self.parse_inside_action(&mut action);
        // The action list is attached even when parsing stops early, as Go appends it first.
        let closed = result?;
        self.root.push(Node::List(action));
        if closed { self.parse_text() } else { Ok(()) }
    }

    /// Parses tokens until the closing `}`; returns whether the action was closed.
    fn parse_inside_action(&mut self, cur: &mut Vec<Node>) -> Result<bool, JsonPathError> {
        loop {
            if self.rest_starts_with("}") {
                self.pos += 1;
                self.consume_text();
                return Ok(true);
            }
            if self.rest_starts_with("[?(") {
                self.parse_filter(cur)?;
                continue;
            }
            if self.rest_starts_with("..") {
                self.parse_recursive(cur)?;
                continue;
            }
            let r = self.next();
            match r {
                None | Some('\r') | Some('\n') => return Err(err("unclosed action")),
                Some(' ') => {
                    self.consume_text();
                }
                Some('@') | Some('$') => {
                    self.consume_text();
                }
                Some('[') => self.parse_array(cur)?,
                Some(q @ ('"' | '\'')) => self.parse_quote(cur, q)?,
                Some('.') => self.parse_field(cur)?,
                Some(c) if c == '+' || c == '-' || c.is_numeric() => {
                    self.backup();
                    self.parse_number(cur)?;
                }
                Some(c) if is_alphanumeric(c) => {
                    self.backup();
                    self.parse_identifier(cur)?;
                }
                Some(c) => {
                    return Err(err(format!(
                        "unrecognized character in action: U+{:04X} '{c}'",
                        c as u32
                    )));
                }
            }
        }
    }

    fn parse_identifier(&mut self, cur: &mut Vec<Node>) -> Result<(), JsonPathError> {
        loop {
            let r = self.next();
            if is_terminator(r) {
                if r.is_some() {
                    self.backup();
                }
                break;
            }
        }
        let value = self.consume_text();
        match value.as_str() {
            "true" => cur.push(Node::Bool(true)),
            "false" => cur.push(Node::Bool(false)),
            _ => cur.push(Node::Identifier(value)),
        }
        Ok(())
    }

    fn parse_recursive(&mut self, cur: &mut Vec<Node>) -> Result<(), JsonPathError> {
        if matches!(cur.last(), Some(Node::Recursive)) {
            return Err(err("invalid multiple recursive descent"));
        }
        self.pos += 2;
        self.consume_text();
        cur.push(Node::Recursive);
        if self.peek().is_some_and(is_alphanumeric) {
            return self.parse_field(cur);
        }
        Ok(())
    }

    fn parse_number(&mut self, cur: &mut Vec<Node>) -> Result<(), JsonPathError> {
        if matches!(self.peek(), Some('+') | Some('-')) {
            self.next();
        }
        loop {
            match self.next() {
                Some(c) if c == '.' || c.is_numeric() => {}
                Some(_) => {
                    self.backup();
                    break;
                }
                None => break,
            }
        }
        let value = self.consume_text();
        if let Ok(i) = value.parse::<i64>() {
            cur.push(Node::Int(i));
            return Ok(());
        }
        if let Ok(f) = value.parse::<f64>() {
            cur.push(Node::Float(f));
            return Ok(());
        }
        Err(err(format!("cannot parse number {value}")))
    }

    fn parse_array(&mut self, cur: &mut Vec<Node>) -> Result<(), JsonPathError> {
        loop {
            match self.next() {
                None | Some('\n') => return Err(err("unterminated array")),
                Some(']') => break,
                Some(_) => {}
            }
        }
        let text = self.consume_text();
        let inner: String = {
            let chars: Vec<char> = text.chars().collect();
            chars[1..chars.len() - 1].iter().collect()
        };
        let inner = if inner == "*" { ":".to_string() } else { inner };
        let parts: Vec<&str> = inner.split(',').collect();
        if parts.len() > 1 {
            let mut union = Vec::new();
            for part in parts {
                union.push(parse_action(&format!("[{}]", part.trim_matches(' ')))?);
            }
            cur.push(Node::Union(union));
            return Ok(());
        }
        // `['key']` is a field.
        if inner.len() >= 2
            && inner.starts_with('\'')
            && inner.ends_with('\'')
            && !inner[1..inner.len() - 1].contains('\'')
        {
            let nodes = parse_action(&format!(".{}", &inner[1..inner.len() - 1]))?;
            cur.extend(nodes);
            return Ok(());
        }
        let Some(groups) = slice_groups(&inner) else {
            return Err(err(format!("invalid array index {inner}")));
        };
        let mut params = [Param::default(); 3];
        for i in 0..3 {
            let mut v = groups[i].clone();
            if !v.is_empty() {
                if i > 0 {
                    v.remove(0);
                }
                if i > 0 && v.is_empty() {
                    params[i].known = false;
                } else {
                    params[i].known = true;
                    params[i].value = v
                        .parse::<i64>()
                        .map_err(|_| err(format!("array index {v} is not a number")))?;
                }
            } else if i == 1 {
                params[i].known = true;
                params[i].value = params[0].value + 1;
                params[i].derived = true;
            } else {
                params[i].known = false;
                params[i].value = 0;
            }
        }
        cur.push(Node::Array(params));
        Ok(())
    }

    fn parse_filter(&mut self, cur: &mut Vec<Node>) -> Result<(), JsonPathError> {
        self.pos += 3;
        self.consume_text();
        let mut begin = false;
        let mut end = false;
        let mut pair = EOF;
        loop {
            let r = self.next();
            match r {
                None | Some('\n') => return Err(err("unterminated filter")),
                Some(q @ ('"' | '\'')) => {
                    if !begin {
                        begin = true;
                        pair = q;
                        continue;
                    }
                    if self.input[self.pos - 2] != '\\' && q == pair {
                        end = true;
                    }
                }
                Some(')') => {
                    if begin == end {
                        break;
                    }
                }
                Some(_) => {}
            }
        }
        if self.next() != Some(']') {
            return Err(err("unclosed array expect ]"));
        }
        let text = self.consume_text();
        let chars: Vec<char> = text.chars().collect();
        let text: String = chars[..chars.len() - 2].iter().collect();
        match split_filter(&text) {
            None => {
                let left = parse_action(&text)?;
                cur.push(Node::Filter {
                    left,
                    right: Vec::new(),
                    op: "exists".into(),
                });
            }
            Some((l, op, r)) => {
                let left = parse_action(&l)?;
                let right = parse_action(&r)?;
                cur.push(Node::Filter { left, right, op });
            }
        }
        Ok(())
    }

    fn parse_quote(&mut self, cur: &mut Vec<Node>, end: char) -> Result<(), JsonPathError> {
        loop {
            match self.next() {
                None | Some('\n') => return Err(err("unterminated quoted string")),
                Some(c) if c == end => {
                    if self.input[self.pos - 2] != '\\' {
                        break;
                    }
                }
                Some(_) => {}
            }
        }
        let value = self.consume_text();
        let s = unquote_extend(&value).map_err(|e| err(format!("unquote string {value} error {e}")))?;
        cur.push(Node::Text(s));
        Ok(())
    }

    fn parse_field(&mut self, cur: &mut Vec<Node>) -> Result<(), JsonPathError> {
        self.consume_text();
        while self.advance() {}
        let value = self.consume_text();
        if value == "*" {
            cur.push(Node::Wildcard);
        } else {
            cur.push(Node::Field(value.replace('\\', "")));
        }
        Ok(())
    }

    fn advance(&mut self) -> bool {
        let r = self.next();
        if r == Some('\\') {
            self.next();
        } else if is_terminator(r) {
            if r.is_some() {
                self.backup();
            }
            return false;
        }
        true
    }
}

fn is_terminator(r: Option<char>) -> bool {
    match r {
        None => true,
        Some(c) => matches!(
            c,
            ' ' | '\t' | '\r' | '\n' | '.' | ',' | '[' | ']' | '$' | '@' | '{' | '}'
        ),
    }
}

fn is_alphanumeric(c: char) -> bool {
    c == '_' || c.is_alphabetic() || c.is_numeric()
}

/// `^(-?[\d]*)(:-?[\d]*)?(:-?[\d]*)?$`, returning the three groups ("" when absent).
fn slice_groups(s: &str) -> Option<[String; 3]> {
    let mut groups = [String::new(), String::new(), String::new()];
    let parts: Vec<&str> = s.split(':').collect();
    if parts.len() > 3 {
        return None;
    }
    let number = |x: &str| {
        let digits = x.strip_prefix('-').unwrap_or(x);
        digits.chars().all(|c| c.is_ascii_digit())
    };
    for (i, part) in parts.iter().enumerate() {
        if !number(part) {
            return None;
        }
        groups[i] = if i == 0 {
            part.to_string()
        } else {
            format!(":{part}")
        };
    }
    Some(groups)
}

/// `^([^!<>=]+)([!<>=]+)(.+?)$`.
fn split_filter(text: &str) -> Option<(String, String, String)> {
    let op_start = text.find(['!', '<', '>', '='])?;
    if op_start == 0 {
        return None;
    }
    let rest = &text[op_start..];
    let op_len = rest
        .find(|c: char| !matches!(c, '!' | '<' | '>' | '='))
        .unwrap_or(rest.len());
    let right = &rest[op_len..];
    if right.is_empty() || right.contains('\n') {
        return None;
    }
    Some((
        text[..op_start].to_string(),
        rest[..op_len].to_string(),
        right.to_string(),
    ))
}

/// `UnquoteExtend`: Go's unquoting for both `"` and `'` strings.
fn unquote_extend(s: &str) -> Result<String, String> {
    let chars: Vec<char> = s.chars().collect();
    if chars.len() < 2 {
        return Err("invalid syntax".into());
    }
    let quote = chars[0];
    if quote != chars[chars.len() - 1] || (quote != '"' && quote != '\'') {
        return Err("invalid syntax".into());
    }
    let body = &chars[1..chars.len() - 1];
    let mut out = String::new();
    let mut i = 0;
    while i < body.len() {
        let c = body[i];
        if c == quote {
            return Err("invalid syntax".into());
        }
        if c != '\\' {
            out.push(c);
            i += 1;
            continue;
        }
        let e = *body.get(i + 1).ok_or("invalid syntax")?;
        i += 2;
        match e {
            'a' => out.push('\u{7}'),
            'b' => out.push('\u{8}'),
            'f' => out.push('\u{c}'),
            'n' => out.push('\n'),
            'r' => out.push('\r'),
            't' => out.push('\t'),
            'v' => out.push('\u{b}'),
            '\\' => out.push('\\'),
            '\'' | '"' if e == quote => out.push(e),
            'x' | 'u' | 'U' => {
                let n = match e {
                    'x' => 2,
                    'u' => 4,
                    _ => 8,
                };
                let hex: String = body.get(i..i + n).ok_or("invalid syntax")?.iter().collect();
                let v = u32::from_str_radix(&hex, 16).map_err(|_| "invalid syntax")?;
                out.push(char::from_u32(v).ok_or("invalid syntax")?);
                i += n;
            }
            '0'..='7' => {
                let oct: String = body.get(i - 1..i + 2).ok_or("invalid syntax")?.iter().collect();
                let v = u32::from_str_radix(&oct, 8).map_err(|_| "invalid syntax")?;
                out.push(char::from_u32(v).ok_or("invalid syntax")?);
                i += 2;
            }
            _ => return Err("invalid syntax".into()),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_printer_column_paths() {
        let nodes = parse("{.status.conditions[?(@.type==\"Ready\")].status}").unwrap();
        assert_eq!(
            nodes,
            vec![Node::List(vec![
                Node::Field("status".into()),
                Node::Field("conditions".into()),
                Node::Filter {
                    left: vec![Node::Field("type".into())],
                    right: vec![Node::Text("Ready".into())],
                    op: "==".into()
                },
                Node::Field("status".into()),
            ])]
        );
    }

    #[test]
    fn parses_text_and_ranges() {
        let nodes = parse("a {range .items[*]}{.name}{end} b").unwrap();
        assert_eq!(nodes.len(), 5);
        assert_eq!(nodes[0], Node::Text("a ".into()));
        assert_eq!(nodes[3], Node::List(vec![Node::Identifier("end".into())]));
        assert_eq!(nodes[4], Node::Text(" b".into()));
    }

    #[test]
    fn slices() {
        let nodes = parse("{[1:3]}").unwrap();
        let Node::List(l) = &nodes[0] else { panic!() };
        let Node::Array(p) = &l[0] else { panic!() };
        assert_eq!((p[0].value, p[1].value, p[2].known), (1, 3, false));
        assert!(slice_groups("a").is_none());
    }

    #[test]
    fn errors() {
        let cases = [
            ("{.a", "unclosed action"),
            ("{.a[1}", "unterminated array"),
            ("{.a[x]}", "invalid array index x"),
            ("{.a[?(@.b}", "unterminated filter"),
            ("{....a}", "invalid multiple recursive descent"),
            ("{\"abc}", "unterminated quoted string"),
            ("{#}", "unrecognized character in action: U+0023 '#'"),
            ("{.a[1:2:3:4]}", "invalid array index 1:2:3:4"),
        ];
        for (expr, want) in cases {
            assert_eq!(parse(expr).unwrap_err().0, want, "{expr}");
        }
    }
}
