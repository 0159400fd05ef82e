//! Go `regexp` (RE2) patterns on the `regex` crate. The two dialects agree on almost all
//! syntax; this module rewrites the places where they differ in meaning: Go's `\d`, `\w`, `\s`
//! and `\b` are ASCII-only, `\Q...\E` quotes literally, and `[`, `&&`, `--`, `~~` inside a
//! character class are plain characters in Go but set operations in Rust.

use regex::Regex;

/// Compiles a Go pattern; the error text is what `must be a valid regular expression` quotes.
pub(crate) fn compile(pattern: &str) -> Result<Regex, String> {
    let translated = translate(pattern)?;
    Regex::new(&translated).map_err(|e| format!("error parsing regexp: {}", first_line(&e.to_string())))
}

fn first_line(s: &str) -> String {
    // The regex crate renders a multi-line diagnostic; the last line names the problem.
    s.lines()
        .rfind(|l| l.starts_with("error:"))
        .unwrap_or(s)
        .trim_start_matches("error: ")
        .to_string()
}

/// Rewrites a Go pattern into an equivalent Rust pattern.
pub(crate) fn translate(pattern: &str) -> Result<String, String> {
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = String::with_capacity(pattern.len() + 8);
    let mut i = 0;
    // Depth inside a character class: 0 outside; the position right after `[` or `[^` matters
    // because a `]` there is literal.
    let mut in_class = false;
    let mut class_start = 0usize;
    while i < chars.len() {
        let c = chars[i];
        if c == '\\' {
            let Some(&e) = chars.get(i + 1) else {
                return Err("error parsing regexp: trailing backslash at end of expression: ``".to_string());
            };
            i += 2;
            match e {
                'd' => out.push_str(if in_class { "0-9" } else { "[0-9]" }),
                'D' => out.push_str(if in_class { "[:^digit:]" } else { "[^0-9]" }),
                'w' => out.push_str(if in_class { "0-9A-Za-z_" } else { "[0-9A-Za-z_]" }),
                'W' => out.push_str(if in_class { "[:^word:]" } else { "[^0-9A-Za-z_]" }),
                's' => out.push_str(if in_class {
                    "\\t\\n\\f\\r "
                } else {
                    "[\\t\\n\\f\\r ]"
                }),
                'S' => out.push_str(if in_class {
                    "[:^space:]"
                } else {
                    "[^\\t\\n\\f\\r ]"
                }),
                'b' if !in_class => out.push_str("(?-u:\\b)"),
                'B' if !in_class => out.push_str("(?-u:\\B)"),
                'Q' => {
                    // Literal text up to `\E` or the end.
                    while i < chars.len() {
                        if chars[i] == '\\' && chars.get(i + 1) == Some(&'E') {
                            i += 2;
                            break;
                        }
                        push_literal(&mut out, chars[i], in_class);
                        i += 1;
                    }
                }
                _ => {
                    out.push('\\');
                    out.push(e);
                }
            }
            continue;
        }
        if in_class {
            match c {
                ']' if i > class_start => {
                    in_class = false;
                    out.push(']');
                }
                '[' if chars.get(i + 1) == Some(&':') => {
                    // A POSIX class `[:alpha:]`: copy through its closing `:]`.
                    let mut j = i + 2;
                    while j + 1 < chars.len() && !(chars[j] == ':' && chars[j + 1] == ']') {
                        j += 1;
                    }
                    if j + 1 < chars.len() {
                        out.extend(&chars[i..j + 2]);
                        i = j + 2;
                        continue;
                    }
                    out.push_str("\\[");
                }
                '[' | '&' | '~' => {
                    out.push('\\');
                    out.push(c);
                }
                '-' if chars.get(i + 1) == Some(&'-') => out.push_str("\\-"),
                _ => out.push(c),
            }
            i += 1;
            continue;
        }
        if c == '[' {
            in_class = true;
            out.push('[');
            i += 1;
            if chars.get(i) == Some(&'^') {
                out.push('^');
                i += 1;
            }
            class_start = i;
            // A leading `]` is a literal in both dialects, but Rust wants it escaped.
            if chars.get(i) == Some(&']') {
                out.push_str("\\]");
                i += 1;
            }
            continue;
        }
        out.push(c);
        i += 1;
    }
    Ok(out)
}

fn push_literal(out: &mut String, c: char, in_class: bool) {
    let special = if in_class {
        "\\]^-[&~"
    } else {
        "\\.+*?()|[]{}^$#&-~"
    };
    if special.contains(c) {
        out.push('\\');
    }
    out.push(c);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ascii_classes() {
        let re = compile(r"^\d+$").unwrap();
        assert!(re.is_match("123"));
        assert!(!re.is_match("١٢٣"), "Go's \\d is ASCII only");
        let re = compile(r"^\w+$").unwrap();
        assert!(!re.is_match("é"));
        let re = compile(r"^[\d\s]+$").unwrap();
        assert!(re.is_match("1 2"));
        let re = compile(r"^[^\D]+$").unwrap();
        assert!(re.is_match("42"));
    }

    #[test]
    fn go_literals_in_classes() {
        let re = compile(r"^[a&&b]+$").unwrap();
        assert!(re.is_match("a&b"));
        let re = compile(r"^[[a]+$").unwrap();
        assert!(re.is_match("[a"));
        let re = compile(r"^[]a]+$").unwrap();
        assert!(re.is_match("]a"));
        let re = compile(r"^[[:alpha:]]+$").unwrap();
        assert!(re.is_match("abc"));
    }

    #[test]
    fn quoting() {
        let re = compile(r"^\Qa.b\E$").unwrap();
        assert!(re.is_match("a.b"));
        assert!(!re.is_match("axb"));
    }

    #[test]
    fn word_boundaries_and_unicode() {
        let re = compile(r"\bfoo\b").unwrap();
        assert!(re.is_match("a foo b"));
        let re = compile(r"^\p{Greek}+$").unwrap();
        assert!(re.is_match("αβ"));
    }

    #[test]
    fn invalid() {
        assert!(compile("(abc").unwrap_err().starts_with("error parsing regexp:"));
        assert!(compile("abc\\").is_err());
    }
}
