//! The evaluator of k8s.io/client-go/util/jsonpath over decoded JSON, including the
//! `range`/`end` bookkeeping of `FindResults` and the comparison rules of its filters.

use serde_json::Value;

use super::JsonPathError;
use super::parser::{Node, Param};
use crate::gofmt;

fn err(msg: impl Into<String>) -> JsonPathError {
    JsonPathError(msg.into())
}

pub(crate) struct Exec {
    pub allow_missing_keys: bool,
    begin_range: i64,
    in_range: i64,
    end_range: i64,
    last_end_node: Option<usize>,
}

impl Exec {
    pub(crate) fn new(allow_missing_keys: bool) -> Exec {
        Exec {
            allow_missing_keys,
            begin_range: 0,
            in_range: 0,
            end_range: 0,
            last_end_node: None,
        }
    }

    /// `FindResults`: one result list per top-level node (range bodies once per element).
    pub(crate) fn find_results(
        &mut self,
        nodes: &[Node],
        base: usize,
        data: &Value,
    ) -> Result<Vec<Vec<Value>>, JsonPathError> {
        let cur = vec![data.clone()];
        let mut full = Vec::new();
        let mut i = 0;
        while i < nodes.len() {
            let results = self.walk(&cur, &nodes[i])?;
            if self.end_range > 0 && self.end_range <= self.in_range {
                self.end_range -= 1;
                self.last_end_node = Some(base + i);
                break;
            }
            if self.begin_range > 0 {
                self.begin_range -= 1;
                self.in_range += 1;
                if results.is_empty() {
                    self.find_results(&nodes[i + 1..], base + i + 1, &Value::Null)?;
                } else {
                    for v in &results {
                        full.extend(self.find_results(&nodes[i + 1..], base + i + 1, v)?);
                    }
                }
                self.in_range -= 1;
                for k in i + 1..nodes.len() {
                    if Some(base + k) == self.last_end_node {
                        i = k;
                        break;
                    }
                }
                i += 1;
                continue;
            }
            full.push(results);
            i += 1;
        }
        Ok(full)
    }

    fn walk(&mut self, input: &[Value], node: &Node) -> Result<Vec<Value>, JsonPathError> {
        match node {
            Node::List(nodes) => self.eval_list(input, nodes),
            Node::Text(t) => Ok(vec![Value::String(t.clone())]),
            Node::Field(name) => self.eval_field(input, name),
            Node::Array(params) => eval_array(input, params),
            Node::Filter { left, right, op } => self.eval_filter(input, left, right, op),
            Node::Int(i) => Ok(input.iter().map(|_| Value::from(*i)).collect()),
            Node::Float(f) => Ok(input.iter().map(|_| float(*f)).collect()),
            Node::Bool(b) => Ok(input.iter().map(|_| Value::Bool(*b)).collect()),
            Node::Wildcard => Ok(input.iter().flat_map(children).collect()),
            Node::Recursive => Ok(eval_recursive(input)),
            Node::Union(lists) => {
                let mut out = Vec::new();
                for l in lists {
                    out.extend(self.eval_list(input, l)?);
                }
                Ok(out)
            }
            Node::Identifier(name) => match name.as_str() {
                "range" => {
                    self.begin_range += 1;
                    Ok(input.to_vec())
                }
                "end" => {
                    if self.in_range > 0 {
                        self.end_range += 1;
                        Ok(Vec::new())
                    } else {
                        Err(err("not in range, nothing to end"))
                    }
                }
                other => Err(err(format!("unrecognized identifier {other}"))),
            },
        }
    }

    fn eval_list(&mut self, input: &[Value], nodes: &[Node]) -> Result<Vec<Value>, JsonPathError> {
        let mut cur = input.to_vec();
        for n in nodes {
            cur = self.walk(&cur, n)?;
        }
        Ok(cur)
    }

    fn eval_field(&mut self, input: &[Value], name: &str) -> Result<Vec<Value>, JsonPathError> {
        if input.is_empty() {
            return Ok(Vec::new());
        }
        let results: Vec<Value> = input
            .iter()
            .filter_map(|v| v.as_object().and_then(|m| m.get(name)).cloned())
            .collect();
        if results.is_empty() && !self.allow_missing_keys {
            return Err(err(format!("{name} is not found")));
        }
        Ok(results)
    }

    fn eval_filter(
        &mut self,
        input: &[Value],
        left: &[Node],
        right: &[Node],
        op: &str,
    ) -> Result<Vec<Value>, JsonPathError> {
        let mut results = Vec::new();
        for value in input {
            let Value::Array(items) = value else {
                return Err(err(format!(
                    "{} is not array or slice and cannot be filtered",
                    gofmt::sprint(value)
                )));
            };
            for item in items {
                let temp = [item.clone()];
                let lefts = self.eval_list(&temp, left);
                if op == "exists" {
                    if lefts.is_ok_and(|l| !l.is_empty()) {
                        results.push(item.clone());
                    }
                    continue;
                }
                let lefts = lefts?;
                match lefts.len() {
                    0 => continue,
                    1 => {}
                    _ => return Err(err("can only compare one element at a time")),
                }
                let rights = self.eval_list(&temp, right)?;
                match rights.len() {
                    0 => continue,
                    1 => {}
                    _ => return Err(err("can only compare one element at a time")),
                }
                let (l, r) = (&lefts[0], &rights[0]);
                let pass = match op {
                    "<" => less(l, r)?,
                    ">" => !less_equal(l, r)?,
                    "==" => equal(l, r)?,
                    "!=" => !equal(l, r)?,
                    "<=" => less_equal(l, r)?,
                    ">=" => !less(l, r)?,
                    other => return Err(err(format!("unrecognized filter operator {other}"))),
                };
                if pass {
                    results.push(item.clone());
                }
            }
        }
        Ok(results)
    }
}

fn float(f: f64) -> Value {
    serde_json::Number::from_f64(f)
        .map(Value::Number)
        .unwrap_or(Value::Null)
}

/// Elements of a value for `*` and `..`: map values (in key order), list items, string bytes.
fn children(v: &Value) -> Vec<Value> {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            keys.into_iter().map(|k| m[k.as_str()].clone()).collect()
        }
        Value::Array(items) => items.clone(),
        Value::String(s) => s.bytes().map(Value::from).collect(),
        _ => Vec::new(),
    }
}

fn eval_recursive(input: &[Value]) -> Vec<Value> {
    let mut result = Vec::new();
    for v in input {
        let kids = children(v);
        if !kids.is_empty() {
            result.push(v.clone());
            result.extend(eval_recursive(&kids));
        }
    }
    result
}

/// Go's name for the dynamic type of a decoded JSON value.
fn go_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.as_i64().is_some() => "int64",
        Value::Number(_) => "float64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

fn eval_array(input: &[Value], params: &[Param; 3]) -> Result<Vec<Value>, JsonPathError> {
    let mut result = Vec::new();
    for value in input {
        if value.is_null() {
            continue;
        }
        let Value::Array(items) = value else {
            return Err(err(format!("{} is not array or slice", go_type(value))));
        };
        let len = items.len() as i64;
        let mut p = *params;
        if !p[0].known {
            p[0].value = 0;
        }
        if p[0].value < 0 {
            p[0].value += len;
        }
        if !p[1].known {
            p[1].value = len;
        }
        if p[1].value < 0 || (p[1].value == 0 && p[1].derived) {
            p[1].value += len;
        }
        if p[1].value == p[0].value {
            // Zero elements requested: Go returns what it has so far.
            return Ok(result);
        }
        if p[0].value >= len || p[0].value < 0 {
            return Err(err(format!(
                "array index out of bounds: index {}, length {len}",
                p[0].value
            )));
        }
        if p[1].value > len || p[1].value < 0 {
            return Err(err(format!(
                "array index out of bounds: index {}, length {len}",
                p[1].value - 1
            )));
        }
        if p[0].value > p[1].value {
            return Err(err(format!(
                "starting index {} is greater than ending index {}",
                p[0].value, p[1].value
            )));
        }
        let mut step = 1;
        if p[2].known {
            if p[2].value <= 0 {
                return Err(err("step must be > 0"));
            }
            step = p[2].value as usize;
        }
        let slice = &items[p[0].value as usize..p[1].value as usize];
        result.extend(slice.iter().step_by(step).cloned());
    }
    Ok(result)
}

/// Go template comparison kinds.
#[derive(Debug)]
enum Basic {
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
}

fn basic(v: &Value) -> Result<Basic, JsonPathError> {
    match v {
        Value::Bool(b) => Ok(Basic::Bool(*b)),
        Value::Number(n) => Ok(match n.as_i64() {
            Some(i) => Basic::Int(i),
            None => Basic::Float(n.as_f64().unwrap_or(0.0)),
        }),
        Value::String(s) => Ok(Basic::Str(s.clone())),
        _ => Err(err("invalid type for comparison")),
    }
}

fn equal(a: &Value, b: &Value) -> Result<bool, JsonPathError> {
    match (basic(a)?, basic(b)?) {
        (Basic::Bool(x), Basic::Bool(y)) => Ok(x == y),
        (Basic::Int(x), Basic::Int(y)) => Ok(x == y),
        (Basic::Float(x), Basic::Float(y)) => Ok(x == y),
        (Basic::Str(x), Basic::Str(y)) => Ok(x == y),
        _ => Err(err("incompatible types for comparison")),
    }
}

fn less(a: &Value, b: &Value) -> Result<bool, JsonPathError> {
    match (basic(a)?, basic(b)?) {
        (Basic::Bool(_), Basic::Bool(_)) => Err(err("invalid type for comparison")),
        (Basic::Int(x), Basic::Int(y)) => Ok(x < y),
        (Basic::Float(x), Basic::Float(y)) => Ok(x < y),
        (Basic::Str(x), Basic::Str(y)) => Ok(x < y),
        _ => Err(err("incompatible types for comparison")),
    }
}

fn less_equal(a: &Value, b: &Value) -> Result<bool, JsonPathError> {
    if less(a, b)? {
        return Ok(true);
    }
    equal(a, b)
}
