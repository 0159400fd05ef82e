//! Interim evaluator for the JSONPath subset printer columns use (`.a.b`, `.a[0]`,
//! `.a[*].b`, `.a[?(@.k=="v")].b`), until flotilla-schema's `jsonpath` is wired in.

use serde_json::Value;

enum Step {
    Field(String),
    Index(usize),
    All,
    Filter(String, String),
}

fn parse(path: &str) -> Option<Vec<Step>> {
    let path = path.trim().trim_start_matches('{').trim_end_matches('}');
    let mut steps = Vec::new();
    let mut rest = path.trim_start_matches('$');
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            if end > 0 {
                steps.push(Step::Field(r[..end].to_owned()));
            }
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']')?;
            let inner = &r[..end];
            rest = &r[end + 1..];
            if inner == "*" {
                steps.push(Step::All);
            } else if let Ok(i) = inner.parse() {
                steps.push(Step::Index(i));
            } else if let Some(f) = inner.strip_prefix("?(@.").and_then(|f| f.strip_suffix(')')) {
                let (k, v) = f.split_once("==")?;
                steps.push(Step::Filter(
                    k.trim().to_owned(),
                    v.trim().trim_matches(['"', '\'']).to_owned(),
                ));
            } else {
                let key = inner.trim_matches(['"', '\'']);
                steps.push(Step::Field(key.to_owned()));
            }
        } else {
            let end = rest.find(['.', '[']).unwrap_or(rest.len());
            steps.push(Step::Field(rest[..end].to_owned()));
            rest = &rest[end..];
        }
    }
    Some(steps)
}

/// Every value `path` selects in `obj` (empty if the path does not parse or matches nothing).
pub fn find<'a>(path: &str, obj: &'a Value) -> Vec<&'a Value> {
    let Some(steps) = parse(path) else {
        return Vec::new();
    };
    let mut cur = vec![obj];
    for step in steps {
        let mut next = Vec::new();
        for v in cur {
            match &step {
                Step::Field(f) => next.extend(v.get(f)),
                Step::Index(i) => next.extend(v.get(*i)),
                Step::All => next.extend(v.as_array().into_iter().flatten()),
                Step::Filter(k, want) => next.extend(v.as_array().into_iter().flatten().filter(|item| {
                    item.get(k).is_some_and(|x| match x.as_str() {
                        Some(s) => s == want,
                        None => x.to_string().as_str() == want.as_str(),
                    })
                })),
            }
        }
        cur = next;
    }
    cur.into_iter().filter(|v| !v.is_null()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn printer_column_paths() {
        let obj = json!({"spec": {"size": 3, "items": [{"n": "a"}, {"n": "b"}]},
            "status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "Other", "status": "False"}]}});
        assert_eq!(find(".spec.size", &obj), vec![&json!(3)]);
        assert_eq!(find(".spec.items[1].n", &obj), vec![&json!("b")]);
        assert_eq!(find(".spec.items[*].n", &obj).len(), 2);
        assert_eq!(
            find(".status.conditions[?(@.type==\"Ready\")].status", &obj),
            vec![&json!("True")]
        );
        assert!(find(".spec.missing", &obj).is_empty());
    }
}
