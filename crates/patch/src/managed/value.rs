//! structured-merge-diff's value semantics: numeric equality across ints and floats, and the
//! total order it uses to sort path elements (numbers < strings < booleans < lists < maps < null).

use std::cmp::Ordering;

use serde_json::{Number, Value};

fn rank(v: &Value) -> u8 {
    match v {
        Value::Number(_) => 0,
        Value::String(_) => 1,
        Value::Bool(_) => 2,
        Value::Array(_) => 3,
        Value::Object(_) => 4,
        Value::Null => 5,
    }
}

fn is_float(n: &Number) -> bool {
    !(n.is_i64() || n.is_u64())
}

fn as_f64(n: &Number) -> f64 {
    n.as_f64().unwrap_or(0.0)
}

fn as_i128(n: &Number) -> i128 {
    n.as_i64()
        .map(i128::from)
        .or_else(|| n.as_u64().map(i128::from))
        .unwrap_or(0)
}

fn compare_numbers(a: &Number, b: &Number) -> Ordering {
    if is_float(a) || is_float(b) {
        as_f64(a).partial_cmp(&as_f64(b)).unwrap_or(Ordering::Equal)
    } else {
        as_i128(a).cmp(&as_i128(b))
    }
}

/// `value.Compare`.
pub(crate) fn compare(a: &Value, b: &Value) -> Ordering {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => compare_numbers(x, y),
        (Value::String(x), Value::String(y)) => x.cmp(y),
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        (Value::Array(x), Value::Array(y)) => {
            for (l, r) in x.iter().zip(y.iter()) {
                let c = compare(l, r);
                if c != Ordering::Equal {
                    return c;
                }
            }
            x.len().cmp(&y.len())
        }
        (Value::Object(x), Value::Object(y)) => {
            if x.is_empty() && y.is_empty() {
                return Ordering::Equal;
            }
            // `MapCompare`: walk the union of keys in lexical order.
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            for (i, k) in keys.iter().enumerate() {
                let c = if i == x.len() {
                    Ordering::Less
                } else if i == y.len() {
                    Ordering::Greater
                } else {
                    match (x.get(k.as_str()), y.get(k.as_str())) {
                        (None, _) => Ordering::Greater,
                        (_, None) => Ordering::Less,
                        (Some(l), Some(r)) => compare(l, r),
                    }
                };
                if c != Ordering::Equal {
                    return c;
                }
            }
            Ordering::Equal
        }
        (Value::Null, Value::Null) => Ordering::Equal,
        _ => rank(a).cmp(&rank(b)),
    }
}

/// `value.Equals`: structural equality where `1` equals `1.0`.
pub(crate) fn equals(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => compare_numbers(x, y) == Ordering::Equal,
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(l, r)| equals(l, r))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, l)| y.get(k).is_some_and(|r| equals(l, r)))
        }
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn order_across_types() {
        let ordered = [
            json!(1),
            json!(1.5),
            json!(2),
            json!("a"),
            json!("b"),
            json!(false),
            json!(true),
            json!([1]),
            json!({"a": 1}),
            json!(null),
        ];
        for w in ordered.windows(2) {
            assert_eq!(compare(&w[0], &w[1]), Ordering::Less, "{} < {}", w[0], w[1]);
            assert_eq!(compare(&w[1], &w[0]), Ordering::Greater);
        }
        assert_eq!(compare(&json!(1), &json!(1.0)), Ordering::Equal);
        assert_eq!(
            compare(&json!({"a": 1}), &json!({"a": 1, "b": 2})),
            Ordering::Less
        );
    }

    #[test]
    fn numeric_equality() {
        assert!(equals(&json!({"a": [1, 2.0]}), &json!({"a": [1.0, 2]})));
        assert!(!equals(&json!({"a": 1}), &json!({"a": "1"})));
        assert!(!equals(&json!({"a": 1}), &json!({"a": 1, "b": null})));
    }
}
