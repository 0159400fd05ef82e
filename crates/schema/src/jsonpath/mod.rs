//! Kubernetes JSONPath (k8s.io/client-go/util/jsonpath), as used by CRD
//! `additionalPrinterColumns` and `kubectl -o jsonpath`: `.a.b`, `.a[0]`, `.a[-1]`,
//! `.a[1:3]`, `.a[*].b`, `..b`, `[?(@.type=="Ready")]` with `== != < > <= >=` and existence,
//! `['a.b']`, unions `[a,b]`, `{range}`/`{end}` and literal text around `{...}` actions; plus
//! [`cell`], the printer-column cell kube-apiserver's table convertor renders.

mod eval;
mod parser;

use serde_json::Value;

use crate::gofmt;

/// A malformed expression or an evaluation failure, with client-go's message
/// (`unclosed action`, `array index out of bounds: index 3, length 2`, ...).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct JsonPathError(pub String);

/// A parsed JSONPath template.
#[derive(Clone, Debug)]
pub struct JsonPath {
    nodes: Vec<parser::Node>,
}

impl JsonPath {
    /// Parses an expression. Text with `{...}` is a template (`{.a}{"\n"}`); text without
    /// braces is a relaxed expression (`.status.x` or `status.x`) and is wrapped the way
    /// kubectl and printer columns do.
    pub fn parse(expr: &str) -> Result<JsonPath, JsonPathError> {
        if expr.contains('{') {
            return JsonPath::parse_template(expr);
        }
        let inner = if expr.starts_with('.') || expr.starts_with('[') {
            expr.to_string()
        } else {
            format!(".{expr}")
        };
        JsonPath::parse_template(&format!("{{{inner}}}"))
    }

    /// Parses a CRD printer column's `jsonPath` exactly as kube-apiserver does
    /// (`{` + path + `}`).
    pub fn parse_column(json_path: &str) -> Result<JsonPath, JsonPathError> {
        JsonPath::parse_template(&format!("{{{json_path}}}"))
    }

    /// Parses a template verbatim (client-go's `Parse`).
    pub fn parse_template(text: &str) -> Result<JsonPath, JsonPathError> {
        Ok(JsonPath {
            nodes: parser::parse(text)?,
        })
    }

    /// Every value the template selects, in order, with missing keys allowed; an evaluation
    /// error yields no values.
    pub fn find(&self, value: &Value) -> Vec<Value> {
        self.find_results(value, true)
            .map(|r| r.into_iter().flatten().collect())
            .unwrap_or_default()
    }

    /// client-go's `FindResults`: one list per top-level template node (per element inside
    /// `range`). With `allow_missing_keys` false a missing field is an error
    /// (`x is not found`).
    pub fn find_results(
        &self,
        value: &Value,
        allow_missing_keys: bool,
    ) -> Result<Vec<Vec<Value>>, JsonPathError> {
        eval::Exec::new(allow_missing_keys).find_results(&self.nodes, 0, value)
    }

    /// client-go's `Execute`: the printed template (`kubectl -o jsonpath`). Objects and lists
    /// print as JSON, strings bare, several results separated by spaces.
    pub fn execute(&self, value: &Value, allow_missing_keys: bool) -> Result<String, JsonPathError> {
        let mut out = String::new();
        for results in self.find_results(value, allow_missing_keys)? {
            let parts: Vec<String> = results.iter().map(print_value).collect();
            out.push_str(&parts.join(" "));
        }
        Ok(out)
    }

    /// The printer-column cell for `object` (see [`cell`]).
    pub fn cell(&self, object: &Value, column_type: &str) -> Value {
        match self.find_results(object, true) {
            Ok(results) => cell(results.first().map(Vec::as_slice).unwrap_or(&[]), column_type),
            Err(_) => Value::Null,
        }
    }
}

/// How `PrintResults` prints one selected value.
fn print_value(v: &Value) -> String {
    match v {
        Value::Object(_) | Value::Array(_) => gofmt::json(v),
        Value::Null => "null".to_string(),
        other => gofmt::sprint(other),
    }
}

/// A printer-column cell as kube-apiserver's table convertor renders it from the results of
/// the column's path (its first result list): only the first result counts; `string`
/// columns print it (objects and lists as JSON, `null` as `<no value>`); `integer`,
/// `number` and `boolean` columns convert it or give `null`; `date` columns give the age
/// (`5m`, `3d4h`, `<invalid>` for a malformed timestamp); no result gives `null` (kubectl
/// shows `<none>`).
pub fn cell(results: &[Value], column_type: &str) -> Value {
    cell_at(results, column_type, crate::time::now_unix())
}

/// [`cell`] with an explicit current time (Unix seconds) for `date` columns.
pub fn cell_at(results: &[Value], column_type: &str, now_unix: i64) -> Value {
    let Some(value) = results.first() else {
        return Value::Null;
    };
    if column_type == "string" {
        return Value::String(match value {
            Value::Null => "<no value>".to_string(),
            other => print_value(other),
        });
    }
    match (column_type, value) {
        (_, Value::Null) => Value::Null,
        ("integer", Value::Number(n)) => match n.as_i64() {
            Some(i) => Value::from(i),
            None => Value::from(n.as_f64().unwrap_or(0.0) as i64),
        },
        ("number", Value::Number(n)) => serde_json::Number::from_f64(n.as_f64().unwrap_or(0.0))
            .map(Value::Number)
            .unwrap_or(Value::Null),
        ("boolean", Value::Bool(b)) => Value::Bool(*b),
        ("date", Value::String(s)) => {
            if s.is_empty() || s == "null" {
                return Value::String("<unknown>".into());
            }
            match crate::time::parse_rfc3339(s) {
                Some(t) => Value::String(human_duration(now_unix - t)),
                None => Value::String("<invalid>".into()),
            }
        }
        _ => Value::Null,
    }
}

/// apimachinery's `duration.HumanDuration` for whole seconds.
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    }
    if seconds < 0 {
        return "0s".into();
    }
    if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = seconds / 3600;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        return if dy == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{dy}d", hours / 24 / 365)
        };
    }
    format!("{}y", hours / 24 / 365)
}
