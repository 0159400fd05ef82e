//! The JSONPath subset that dependency rules use: `.a.b`, `[*]` and `[N]`.
//!
//! Enough to reach any field of a CRD (`.spec.steps[*].configMap`) while staying obvious to
//! read and impossible to misinterpret: no filters, no recursive descent, no quoting.

use std::fmt;

use crate::error::InterpretError;
use crate::node::Node;

/// One step of a path.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Segment {
    /// `.name`: a field of an object.
    Field(String),
    /// `[N]`: one element of a list.
    Index(usize),
    /// `[*]`: every element of a list.
    All,
}

/// A parsed path such as `.spec.steps[*].configMap`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct JsonPath {
    text: String,
    segments: Vec<Segment>,
}

/// How paths look, for error messages.
const PATH_HELP: &str =
    "paths look like .spec.configRef.name, .spec.steps[*].configMap or .spec.items[0].name";

impl JsonPath {
    /// Parses `text`; the error says what is wrong and how paths look.
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        if !text.starts_with('.') {
            return Err(format!("{text:?} must start with '.'; {PATH_HELP}"));
        }
        let mut segments = Vec::new();
        let mut rest = text;
        while !rest.is_empty() {
            if let Some(after_dot) = rest.strip_prefix('.') {
                let end = after_dot.find(['.', '[', ']']).unwrap_or(after_dot.len());
                let name = &after_dot[..end];
                if name.is_empty() {
                    return Err(format!("{text:?} has an empty field name; {PATH_HELP}"));
                }
                segments.push(Segment::Field(name.to_owned()));
                rest = &after_dot[end..];
            } else if let Some(after_bracket) = rest.strip_prefix('[') {
                let Some(end) = after_bracket.find(']') else {
                    return Err(format!("{text:?} has an unclosed '['; {PATH_HELP}"));
                };
                let inner = &after_bracket[..end];
                let segment = if inner == "*" {
                    Segment::All
                } else if !inner.is_empty() && inner.bytes().all(|b| b.is_ascii_digit()) {
                    let index = inner
                        .parse()
                        .map_err(|_| format!("{text:?} has an index [{inner}] that is too large"))?;
                    Segment::Index(index)
                } else {
                    return Err(format!(
                        "{text:?} has [{inner}]: only [*] and list indexes such as [0] are supported; {PATH_HELP}"
                    ));
                };
                segments.push(segment);
                rest = &after_bracket[end + 1..];
            } else {
                return Err(format!(
                    "{text:?} has an unexpected {:?}; {PATH_HELP}",
                    rest.chars().next().unwrap_or(' ')
                ));
            }
        }
        if segments.is_empty() {
            return Err(format!("{text:?} names no field; {PATH_HELP}"));
        }
        Ok(Self {
            text: text.to_owned(),
            segments,
        })
    }

    /// Whether the path can match more than one value.
    pub(crate) fn has_wildcard(&self) -> bool {
        self.segments.contains(&Segment::All)
    }

    /// Every value the path reaches below `root`. Absent fields, null values and indexes past
    /// the end reach nothing; stepping into a value of the wrong type is an error naming it.
    pub(crate) fn resolve<'a>(&self, root: &Node<'a>) -> Result<Vec<Node<'a>>, InterpretError> {
        let mut current = vec![root.clone()];
        for segment in &self.segments {
            let mut next = Vec::new();
            for node in &current {
                match segment {
                    Segment::Field(name) => next.extend(node.field(name)?),
                    Segment::Index(index) => next.extend(
                        node.items()?
                            .into_iter()
                            .nth(*index)
                            .filter(|n| !n.value().is_null()),
                    ),
                    Segment::All => next.extend(node.items()?.into_iter().filter(|n| !n.value().is_null())),
                }
            }
            current = next;
        }
        Ok(current)
    }
}

impl fmt::Display for JsonPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    fn values(path: &str, obj: &serde_json::Value) -> Vec<serde_json::Value> {
        let root = Node::root(obj, "obj");
        JsonPath::parse(path)
            .unwrap()
            .resolve(&root)
            .unwrap()
            .into_iter()
            .map(|n| n.value().clone())
            .collect()
    }

    #[test]
    fn parses_supported_forms() {
        for text in [
            ".a",
            ".a.b",
            ".a[*]",
            ".a[0].b",
            ".a[*].b[*].c",
            ".a-b.c_d",
            ".a[12]",
        ] {
            assert!(JsonPath::parse(text).is_ok(), "{text}");
        }
        assert!(!JsonPath::parse(".a.b[0]").unwrap().has_wildcard());
        assert!(JsonPath::parse(".a[*].b").unwrap().has_wildcard());
    }

    #[test]
    fn rejects_everything_else() {
        for (text, needle) in [
            ("a.b", "must start with '.'"),
            ("", "must start with '.'"),
            (".", "empty field name"),
            (".a..b", "empty field name"),
            (".a[", "unclosed"),
            (".a[x]", "only [*] and list indexes"),
            (".a[-1]", "only [*] and list indexes"),
            (".a[?(@.x)]", "only [*] and list indexes"),
            (".a]", "unexpected"),
            (".a[0]b", "unexpected"),
            (".a[99999999999999999999999]", "too large"),
        ] {
            let err = JsonPath::parse(text).unwrap_err();
            assert!(err.contains(needle), "{text}: {err}");
        }
    }

    #[test]
    fn resolves_fields_indexes_and_wildcards() {
        let obj = json!({"spec": {"ref": {"name": "a"}, "steps": [{"cm": "x"}, {"cm": "y"}, {}, null]}});
        assert_eq!(values(".spec.ref.name", &obj), vec![json!("a")]);
        assert_eq!(values(".spec.steps[*].cm", &obj), vec![json!("x"), json!("y")]);
        assert_eq!(values(".spec.steps[1].cm", &obj), vec![json!("y")]);
        assert_eq!(values(".spec.steps[7].cm", &obj), Vec::<serde_json::Value>::new());
        assert_eq!(
            values(".spec.missing.name", &obj),
            Vec::<serde_json::Value>::new()
        );
    }

    #[test]
    fn wrong_types_name_the_field() {
        let obj = json!({"spec": {"steps": "x", "ref": 3}});
        let root = Node::root(&obj, "obj");
        let err = JsonPath::parse(".spec.steps[*].cm")
            .unwrap()
            .resolve(&root)
            .unwrap_err();
        assert_eq!(err.path(), "spec.steps");
        assert!(err.to_string().contains("expected a list, got a string"));
        let err = JsonPath::parse(".spec.ref.name")
            .unwrap()
            .resolve(&root)
            .unwrap_err();
        assert_eq!(err.path(), "spec.ref");
    }
}
