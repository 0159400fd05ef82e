//! JSON patch (RFC 6902) `add`, `remove` and `replace` with the semantics and error texts of
//! evanphx/json-patch v5's `Patch.Apply`, which Karmada applies every overrider with:
//!
//! - `remove` of a member or element that does not exist fails (`AllowMissingPathOnRemove` is
//!   off), and so does `replace`; `add` of a member replaces it when it exists;
//! - every parent of the target must exist (`EnsurePathExistsOnAdd` is off);
//! - array indices may be negative, counting from the end (`-1` is the last element; for `add`,
//!   `-1` is the end); `-` appends; an index with a leading `+` or zeros is read as a number;
//! - a path without a leading `/` has its first segment ignored (`spec/replicas` is
//!   `/replicas`); validation refuses such paths before they get here;
//! - a path of `""` is the whole document: `add` and `replace` put the value there (it must be
//!   an object or an array);
//! - a patch is all or nothing: when one operation fails the document is left as it was.
//!
//! One deliberate difference: v5 reads an empty segment *inside* a path at the top level
//! (`//x`) as the whole original document and silently loses the write; here such a path does
//! not apply ("doc is missing path").

use crate::doc::Doc;

/// One operation.
#[derive(Clone, Debug, PartialEq)]
pub enum Operation {
    /// `add` (`None` adds `null`, as v5 does for an operation without a value).
    Add(Option<Doc>),
    /// `remove`.
    Remove,
    /// `replace` (`None` replaces with `null`).
    Replace(Option<Doc>),
}

impl Operation {
    fn name(&self) -> &'static str {
        match self {
            Operation::Add(_) => "add",
            Operation::Remove => "remove",
            Operation::Replace(_) => "replace",
        }
    }
}

/// Applies `operations` (`(path, operation)`, in order) to `doc`; on failure `doc` is unchanged.
pub fn apply(doc: &mut Doc, operations: &[(String, Operation)]) -> Result<(), String> {
    let mut patched = doc.clone();
    for (path, operation) in operations {
        apply_one(&mut patched, path, operation)?;
    }
    *doc = patched;
    Ok(())
}

const MISSING: &str = "missing value";
const INVALID_INDEX: &str = "invalid index referenced";

/// RFC 6901 unescaping as v5 does it (`~1` then `~0`, left to right).
pub fn decode_token(token: &str) -> String {
    let mut out = String::with_capacity(token.len());
    let mut chars = token.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '~' {
            match chars.peek() {
                Some('1') => {
                    chars.next();
                    out.push('/');
                    continue;
                }
                Some('0') => {
                    chars.next();
                    out.push('~');
                    continue;
                }
                _ => {}
            }
        }
        out.push(c);
    }
    out
}

/// RFC 6901 escaping of one reference token.
pub fn encode_token(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

fn apply_one(doc: &mut Doc, path: &str, operation: &Operation) -> Result<(), String> {
    if path.is_empty() {
        return whole_document(doc, operation);
    }
    let kind = operation.name();
    let Some((container, key)) = find_container(doc, path) else {
        return Err(match operation {
            Operation::Replace(_) => {
                format!("replace operation does not apply: doc is missing path: {path}: {MISSING}")
            }
            _ => format!("{kind} operation does not apply: doc is missing path: \"{path}\": {MISSING}"),
        });
    };
    match operation {
        Operation::Add(value) => add(container, &key, value.clone().unwrap_or(Doc::Null))
            .map_err(|e| format!("error in add for path: '{path}': {e}")),
        Operation::Remove => {
            remove(container, &key).map_err(|e| format!("error in remove for path: '{path}': {e}"))
        }
        Operation::Replace(value) => {
            if !exists(container, &key) {
                return Err(format!(
                    "replace operation does not apply: doc is missing key: {path}: {MISSING}"
                ));
            }
            set(container, &key, value.clone().unwrap_or(Doc::Null))
                .map_err(|e| format!("error in remove for path: '{path}': {e}"))
        }
    }
}

fn whole_document(doc: &mut Doc, operation: &Operation) -> Result<(), String> {
    match operation {
        Operation::Add(value) | Operation::Replace(value) => match value {
            Some(value @ (Doc::Object(_) | Doc::Array(_))) => {
                *doc = value.clone();
                Ok(())
            }
            _ => Err(format!(
                "{} operation value must be object or array",
                operation.name()
            )),
        },
        Operation::Remove => remove(doc, "").map_err(|e| format!("error in remove for path: '': {e}")),
    }
}

/// The container (object or array) holding the last token of `path`, and that token
/// (unescaped). `None` when a parent does not exist or is not a container.
fn find_container<'a>(doc: &'a mut Doc, path: &str) -> Option<(&'a mut Doc, String)> {
    let split: Vec<&str> = path.split('/').collect();
    if split.len() < 2 {
        return None;
    }
    let key = decode_token(split[split.len() - 1]);
    let mut current = doc;
    for part in &split[1..split.len() - 1] {
        let part = decode_token(part);
        let next = match current {
            Doc::Object(members) => members.iter_mut().find(|(k, _)| *k == part).map(|(_, v)| v)?,
            Doc::Array(items) => {
                let index = resolve_index(&part, items.len()).ok()?;
                items.get_mut(index)?
            }
            _ => return None,
        };
        current = next;
    }
    matches!(current, Doc::Object(_) | Doc::Array(_)).then_some((current, key))
}

/// Go's `strconv.Atoi`: an optional sign, then decimal digits.
fn atoi(text: &str) -> Result<i64, String> {
    let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("strconv.Atoi: parsing {text:?}: invalid syntax"));
    }
    text.parse::<i64>()
        .map_err(|_| format!("strconv.Atoi: parsing {text:?}: value out of range"))
}

fn invalid_index(index: i64) -> String {
    format!("Unable to access invalid index: {index}: {INVALID_INDEX}")
}

/// The position of an existing element (negative counts from the end).
fn resolve_index(token: &str, len: usize) -> Result<usize, String> {
    let index = atoi(token)?;
    let len = len as i64;
    let resolved = if index < 0 {
        if index < -len {
            return Err(invalid_index(index));
        }
        index + len
    } else {
        index
    };
    if resolved >= len {
        return Err(invalid_index(resolved));
    }
    Ok(resolved as usize)
}

fn exists(container: &Doc, key: &str) -> bool {
    match container {
        // v5 answers a lookup of "" with the container itself: it always "exists".
        Doc::Object(members) => key.is_empty() || members.iter().any(|(k, _)| k == key),
        Doc::Array(items) => resolve_index(key, items.len()).is_ok(),
        _ => false,
    }
}

fn add(container: &mut Doc, key: &str, value: Doc) -> Result<(), String> {
    match container {
        Doc::Object(_) => {
            container.set(key, value);
            Ok(())
        }
        Doc::Array(items) => {
            if key == "-" {
                items.push(value);
                return Ok(());
            }
            let index = atoi(key).map_err(|e| format!("value was not a proper array index: '{key}': {e}"))?;
            let size = items.len() as i64 + 1;
            if index >= size {
                return Err(invalid_index(index));
            }
            let position = if index < 0 {
                if index < -size {
                    return Err(invalid_index(index));
                }
                index + size
            } else {
                index
            };
            items.insert(position as usize, value);
            Ok(())
        }
        _ => Err("invalid value, expected object".to_owned()),
    }
}

fn remove(container: &mut Doc, key: &str) -> Result<(), String> {
    match container {
        Doc::Object(members) => match members.iter().position(|(k, _)| k == key) {
            Some(position) => {
                members.remove(position);
                Ok(())
            }
            None => Err(format!("unable to remove nonexistent key: {key}: {MISSING}")),
        },
        Doc::Array(items) => {
            let index = atoi(key)?;
            let len = items.len() as i64;
            if index >= len {
                return Err(invalid_index(index));
            }
            let position = if index < 0 {
                if index < -len {
                    return Err(invalid_index(index));
                }
                index + len
            } else {
                index
            };
            items.remove(position as usize);
            Ok(())
        }
        _ => Err("invalid value, expected object".to_owned()),
    }
}

fn set(container: &mut Doc, key: &str, value: Doc) -> Result<(), String> {
    match container {
        Doc::Object(_) => {
            container.set(key, value);
            Ok(())
        }
        Doc::Array(items) => {
            let index = resolve_index(key, items.len())?;
            items[index] = value;
            Ok(())
        }
        _ => Err("invalid value, expected object".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use pretty_assertions::assert_eq;

    use super::*;
    use crate::doc::parse;

    fn doc(text: &str) -> Doc {
        parse(text).unwrap()
    }

    fn value(text: &str) -> Option<Doc> {
        Some(doc(text))
    }

    /// `(document, operations, expected document or error)`.
    type Case<'a> = (&'a str, Vec<(&'a str, Operation)>, Result<&'a str, &'a str>);

    fn check(cases: Vec<Case<'_>>) {
        for (input, operations, expected) in cases {
            let operations: Vec<(String, Operation)> =
                operations.into_iter().map(|(p, o)| (p.to_owned(), o)).collect();
            let mut patched = doc(input);
            let result = apply(&mut patched, &operations).map(|()| patched.to_go_json());
            let expected = expected.map(str::to_owned).map_err(str::to_owned);
            assert_eq!(result, expected, "{input} {operations:?}");
        }
    }

    #[test]
    fn add() {
        use Operation::Add;
        check(vec![
            (
                r#"{"a":1}"#,
                vec![("/b", Add(value("2")))],
                Ok(r#"{"a":1,"b":2}"#),
            ),
            // An existing member is replaced in place.
            (
                r#"{"a":1,"b":2}"#,
                vec![("/a", Add(value("3")))],
                Ok(r#"{"a":3,"b":2}"#),
            ),
            (
                r#"{"a":[1,2]}"#,
                vec![("/a/0", Add(value("0")))],
                Ok(r#"{"a":[0,1,2]}"#),
            ),
            (
                r#"{"a":[1,2]}"#,
                vec![("/a/2", Add(value("3")))],
                Ok(r#"{"a":[1,2,3]}"#),
            ),
            (
                r#"{"a":[1,2]}"#,
                vec![("/a/-", Add(value("3")))],
                Ok(r#"{"a":[1,2,3]}"#),
            ),
            // Negative indices count from the end; for add, -1 is the end.
            (
                r#"{"a":[1,2]}"#,
                vec![("/a/-1", Add(value("3")))],
                Ok(r#"{"a":[1,2,3]}"#),
            ),
            (
                r#"{"a":[1,2]}"#,
                vec![("/a/-3", Add(value("0")))],
                Ok(r#"{"a":[0,1,2]}"#),
            ),
            (
                r#"{"a":[1,2]}"#,
                vec![("/a/+1", Add(value("9")))],
                Ok(r#"{"a":[1,9,2]}"#),
            ),
            (
                r#"{"a":[1,2]}"#,
                vec![("/a/3", Add(value("3")))],
                Err(
                    "error in add for path: '/a/3': Unable to access invalid index: 3: invalid index referenced",
                ),
            ),
            (
                r#"{"a":[1,2]}"#,
                vec![("/a/-4", Add(value("3")))],
                Err(
                    "error in add for path: '/a/-4': Unable to access invalid index: -4: invalid index referenced",
                ),
            ),
            (
                r#"{"a":[1,2]}"#,
                vec![("/a/x", Add(value("3")))],
                Err(
                    "error in add for path: '/a/x': value was not a proper array index: 'x': strconv.Atoi: parsing \"x\": invalid syntax",
                ),
            ),
            // The parent must exist.
            (
                r#"{"a":1}"#,
                vec![("/b/c", Add(value("2")))],
                Err("add operation does not apply: doc is missing path: \"/b/c\": missing value"),
            ),
            // A scalar or null is not a parent.
            (
                r#"{"a":1,"n":null}"#,
                vec![("/a/c", Add(value("2")))],
                Err("add operation does not apply: doc is missing path: \"/a/c\": missing value"),
            ),
            (
                r#"{"n":null}"#,
                vec![("/n/c", Add(value("2")))],
                Err("add operation does not apply: doc is missing path: \"/n/c\": missing value"),
            ),
            // No value adds null.
            (r#"{}"#, vec![("/a", Add(None))], Ok(r#"{"a":null}"#)),
            // Escaped tokens.
            (
                r#"{"a/b":{"c~d":1}}"#,
                vec![("/a~1b/c~0d", Add(value("2")))],
                Ok(r#"{"a/b":{"c~d":2}}"#),
            ),
            // A path without a leading slash loses its first segment.
            (
                r#"{"spec":{"replicas":1},"replicas":0}"#,
                vec![("spec/replicas", Add(value("5")))],
                Ok(r#"{"spec":{"replicas":1},"replicas":5}"#),
            ),
            (
                r#"{"a":1}"#,
                vec![("a", Add(value("5")))],
                Err("add operation does not apply: doc is missing path: \"a\": missing value"),
            ),
            // The whole document.
            (
                r#"{"a":1}"#,
                vec![("", Add(value(r#"{"b":2}"#)))],
                Ok(r#"{"b":2}"#),
            ),
            (
                r#"{"a":1}"#,
                vec![("", Add(value("3")))],
                Err("add operation value must be object or array"),
            ),
            // An empty key is a member like any other.
            (r#"{}"#, vec![("/", Add(value("1")))], Ok(r#"{"":1}"#)),
        ]);
    }

    #[test]
    fn remove() {
        use Operation::Remove;
        check(vec![
            (r#"{"a":1,"b":2}"#, vec![("/a", Remove)], Ok(r#"{"b":2}"#)),
            (r#"{"a":[1,2,3]}"#, vec![("/a/1", Remove)], Ok(r#"{"a":[1,3]}"#)),
            (r#"{"a":[1,2,3]}"#, vec![("/a/-1", Remove)], Ok(r#"{"a":[1,2]}"#)),
            // Removing what is not there fails (Karmada does not allow missing paths).
            (
                r#"{"a":1}"#,
                vec![("/b", Remove)],
                Err("error in remove for path: '/b': unable to remove nonexistent key: b: missing value"),
            ),
            (
                r#"{"a":1}"#,
                vec![("/x/y", Remove)],
                Err("remove operation does not apply: doc is missing path: \"/x/y\": missing value"),
            ),
            (
                r#"{"a":[1]}"#,
                vec![("/a/1", Remove)],
                Err(
                    "error in remove for path: '/a/1': Unable to access invalid index: 1: invalid index referenced",
                ),
            ),
            (
                r#"{"a":[1]}"#,
                vec![("/a/-2", Remove)],
                Err(
                    "error in remove for path: '/a/-2': Unable to access invalid index: -2: invalid index referenced",
                ),
            ),
            (
                r#"{"a":[1]}"#,
                vec![("/a/x", Remove)],
                Err("error in remove for path: '/a/x': strconv.Atoi: parsing \"x\": invalid syntax"),
            ),
        ]);
    }

    #[test]
    fn replace() {
        use Operation::Replace;
        check(vec![
            (
                r#"{"a":1,"b":2}"#,
                vec![("/a", Replace(value("3")))],
                Ok(r#"{"a":3,"b":2}"#),
            ),
            (
                r#"{"a":[1,2]}"#,
                vec![("/a/-1", Replace(value("9")))],
                Ok(r#"{"a":[1,9]}"#),
            ),
            // The target must exist.
            (
                r#"{"a":1}"#,
                vec![("/b", Replace(value("3")))],
                Err("replace operation does not apply: doc is missing key: /b: missing value"),
            ),
            (
                r#"{"a":[1]}"#,
                vec![("/a/1", Replace(value("3")))],
                Err("replace operation does not apply: doc is missing key: /a/1: missing value"),
            ),
            (
                r#"{"a":1}"#,
                vec![("/b/c", Replace(value("3")))],
                Err("replace operation does not apply: doc is missing path: /b/c: missing value"),
            ),
            (r#"{"a":1}"#, vec![("", Replace(value("[1]")))], Ok("[1]")),
            (
                r#"{"a":1}"#,
                vec![("", Replace(value("\"s\"")))],
                Err("replace operation value must be object or array"),
            ),
            // v5 treats "" as present in any object.
            (
                r#"{"a":1}"#,
                vec![("/", Replace(value("2")))],
                Ok(r#"{"a":1,"":2}"#),
            ),
        ]);
    }

    #[test]
    fn all_or_nothing_in_order() {
        use Operation::*;
        // Karmada's documented env example: add at the end, insert at 0, replace 1, remove 2.
        check(vec![(
            r#"{"env":[{"name":"region","value":"region1"},{"name":"zone","value":"zone1"}]}"#,
            vec![
                ("/env/-", Add(value(r#"{"name":"cluster","value":"cluster1"}"#))),
                ("/env/0", Add(value(r#"{"name":"provider","value":"provider1"}"#))),
                ("/env/1", Replace(value(r#"{"name":"region","value":"region2"}"#))),
                ("/env/2", Remove),
            ],
            Ok(
                r#"{"env":[{"name":"provider","value":"provider1"},{"name":"region","value":"region2"},{"name":"cluster","value":"cluster1"}]}"#,
            ),
        )]);
        let mut document = doc(r#"{"a":1}"#);
        let result = apply(
            &mut document,
            &[
                ("/b".to_owned(), Add(value("2"))),
                ("/missing".to_owned(), Remove),
            ],
        );
        assert!(result.is_err());
        assert_eq!(document.to_go_json(), r#"{"a":1}"#);
    }

    #[test]
    fn tokens() {
        assert_eq!(decode_token("a~1b~0c"), "a/b~c");
        assert_eq!(decode_token("~01"), "~1");
        assert_eq!(decode_token("~2"), "~2");
        assert_eq!(encode_token("a/b~c"), "a~1b~0c");
        assert_eq!(decode_token(&encode_token("x~1/y")), "x~1/y");
    }
}
