//! Value validation against an OpenAPI v3 schema, as k8s.io/kube-openapi's
//! `validate.SchemaValidator` does it for custom resources: the same validators in the same
//! order, the same error de-duplication, the same `anyOf`/`oneOf` "best failure" choice, and
//! the same translation into field errors as apiextensions-apiserver's
//! `kubeOpenAPIResultToFieldErrors`.

use serde_json::{Map, Value};

use crate::error::FieldError;
use crate::formats;
use crate::gofmt;
use crate::node::{Additional, Node};

const IN: &str = "body";

/// The path of the value being validated, as kube-openapi writes it into its messages
/// (`spec.items[0].name`). It is printed only when an error names it: a valid object costs no
/// path strings.
#[derive(Clone, Copy)]
enum Path<'a> {
    /// The validated value itself: the empty path.
    Root,
    /// A property: `parent.name`, or `name` alone under an empty parent.
    Field(&'a Path<'a>, &'a str),
    /// `parent.key` even under an empty parent (`.key`): additional properties and required
    /// fields, as kube-openapi joins them.
    Dot(&'a Path<'a>, &'a str),
    /// `parent[i]`.
    Index(&'a Path<'a>, usize),
}

impl Path<'_> {
    /// Whether the path prints as nothing.
    fn is_empty(&self) -> bool {
        match self {
            Path::Root => true,
            Path::Field(parent, name) => name.is_empty() && parent.is_empty(),
            Path::Dot(..) | Path::Index(..) => false,
        }
    }
}

impl std::fmt::Display for Path<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Path::Root => Ok(()),
            Path::Field(parent, name) => {
                if parent.is_empty() {
                    f.write_str(name)
                } else {
                    write!(f, "{parent}.{name}")
                }
            }
            Path::Dot(parent, key) => write!(f, "{parent}.{key}"),
            Path::Index(parent, i) => write!(f, "{parent}[{i}]"),
        }
    }
}

/// The kube-openapi error codes that the field-error translation distinguishes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Code {
    InvalidType,
    Required,
    TooLong,
    Enum,
    MaxItems,
    TooManyProperties,
    Other,
}

/// A kube-openapi error: either an `errors.Validation` or a plain Go error.
#[derive(Clone, Debug)]
enum OErr {
    Validation {
        code: Code,
        name: String,
        value: Option<Value>,
        valid: Option<i64>,
        values: Vec<Value>,
        message: String,
    },
    Plain(String),
}

impl OErr {
    fn message(&self) -> &str {
        match self {
            OErr::Validation { message, .. } => message,
            OErr::Plain(m) => m,
        }
    }

    fn v(code: Code, name: &Path<'_>, value: Option<Value>, message: String) -> OErr {
        OErr::Validation {
            code,
            name: name.to_string(),
            value,
            valid: None,
            values: Vec::new(),
            message,
        }
    }
}

/// `validate.Result`: errors de-duplicated by message, and the match count used to pick the
/// most relevant failing `anyOf`/`oneOf` branch.
#[derive(Clone, Debug, Default)]
struct Res {
    errors: Vec<OErr>,
    match_count: i64,
}

impl Res {
    fn err(e: OErr) -> Res {
        Res {
            errors: vec![e],
            match_count: 0,
        }
    }

    fn add(&mut self, e: OErr) {
        if !self.errors.iter().any(|x| x.message() == e.message()) {
            self.errors.push(e);
        }
    }

    fn merge(&mut self, other: Res) {
        for e in other.errors {
            self.add(e);
        }
        self.match_count += other.match_count;
    }

    fn inc(&mut self) {
        self.match_count += 1;
    }

    fn is_valid(&self) -> bool {
        self.errors.is_empty()
    }
}

/// How Go holds a decoded JSON number: int64 when it fits, else float64.
#[derive(Clone, Copy, Debug)]
enum Num {
    Int(i64),
    Float(f64),
}

impl Num {
    fn of(n: &serde_json::Number) -> Num {
        match n.as_i64() {
            Some(i) => Num::Int(i),
            None => Num::Float(n.as_f64().unwrap_or(0.0)),
        }
    }

    fn as_f64(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        }
    }
}

fn float_value(f: f64) -> Value {
    serde_json::Number::from_f64(f)
        .map(Value::Number)
        .unwrap_or(Value::Null)
}

/// Validates `data` against `schema` and returns kube-apiserver's field errors. `prefix` is
/// the field path of `data` (empty for a whole object, whose pathless errors print `<nil>`).
pub(crate) fn validate(schema: &Node, data: &Value, prefix: &str) -> Vec<FieldError> {
    let res = validate_schema(schema, &Path::Root, data);
    to_field_errors(prefix, res)
}

/// `kubeOpenAPIResultToFieldErrors`.
fn to_field_errors(prefix: &str, res: Res) -> Vec<FieldError> {
    let base = if prefix.is_empty() {
        "<nil>".to_string()
    } else {
        prefix.to_string()
    };
    res.errors
        .into_iter()
        .map(|e| match e {
            OErr::Validation {
                code,
                name,
                value,
                valid,
                values,
                message,
            } => {
                let path = if name.is_empty() || name == "." {
                    base.clone()
                } else {
                    let rel = name.strip_prefix('.').unwrap_or(&name);
                    if prefix.is_empty() {
                        rel.to_string()
                    } else {
                        format!("{prefix}.{rel}")
                    }
                };
                match code {
                    Code::Required => FieldError::required(path, ""),
                    Code::Enum => {
                        let supported: Vec<String> = values
                            .iter()
                            .map(|v| match v {
                                Value::String(s) => s.clone(),
                                other => gofmt::json(other),
                            })
                            .collect();
                        FieldError::not_supported(path, value.unwrap_or(Value::Null), &supported)
                    }
                    Code::TooLong => FieldError::too_long(path, valid.unwrap_or(-1)),
                    Code::MaxItems | Code::TooManyProperties => {
                        let actual = value.as_ref().and_then(Value::as_i64).unwrap_or(-1);
                        FieldError::too_many(path, actual, valid.unwrap_or(-1))
                    }
                    Code::InvalidType => {
                        FieldError::type_invalid(path, value.unwrap_or(Value::String(String::new())), message)
                    }
                    Code::Other => {
                        FieldError::invalid(path, value.unwrap_or(Value::String(String::new())), message)
                    }
                }
            }
            OErr::Plain(message) => FieldError::invalid(base.clone(), Value::String(String::new()), message),
        })
        .collect()
}

/// `SchemaValidator.Validate`.
fn validate_schema(s: &Node, path: &Path<'_>, data: &Value) -> Res {
    let mut result = Res::default();
    if data.is_null() {
        result.merge(validate_type(s, path, data));
        result.merge(validate_common(s, path, data));
        return result;
    }
    if !s.types.is_empty() || !s.format.is_empty() {
        result.merge(validate_type(s, path, data));
        result.inc();
    }
    result.merge(validate_schema_props(s, path, data));
    result.inc();
    if let Value::String(text) = data {
        result.merge(validate_string(s, path, text));
        result.inc();
        if !s.format.is_empty() && formats::is_supported(&s.format) {
            if !formats::validates(&s.format, text) {
                result.merge(Res::err(invalid_type(
                    path,
                    &s.format,
                    Value::String(text.clone()),
                )));
            }
            result.inc();
        }
    }
    if let Value::Number(n) = data {
        result.merge(validate_number(s, path, Num::of(n)));
        result.inc();
    }
    if let Value::Array(items) = data {
        result.merge(validate_slice(s, path, items));
        result.inc();
    }
    result.merge(validate_common(s, path, data));
    result.inc();
    if let Value::Object(map) = data {
        result.merge(validate_object(s, path, map));
        result.inc();
    }
    result.inc();
    result
}

/// `errors.InvalidType`: the message quotes the value when it is a string.
fn invalid_type(path: &Path<'_>, type_name: &str, value: Value) -> OErr {
    let message = match &value {
        Value::String(v) => format!("{path} in {IN} must be of type {type_name}: {}", gofmt::quote(v)),
        _ => format!("{path} in {IN} must be of type {type_name}"),
    };
    OErr::v(Code::InvalidType, path, Some(value), message)
}

/// The (type, format) kube-openapi infers for a decoded JSON value.
fn schema_info(data: &Value) -> (&'static str, &'static str) {
    match data {
        Value::Bool(_) => ("boolean", ""),
        Value::String(_) => ("string", ""),
        Value::Number(n) => match Num::of(n) {
            Num::Int(_) => ("integer", "int64"),
            Num::Float(_) => ("number", "float64"),
        },
        Value::Array(_) => ("array", ""),
        Value::Object(_) => ("object", ""),
        Value::Null => ("", ""),
    }
}

/// `swag.IsFloat64AJSONInteger`: integral within a relative error of 1e-9.
fn is_float_a_json_integer(f: f64) -> bool {
    const MAX_JSON_FLOAT: f64 = 9_007_199_254_740_992.0; // 2^53
    const EPSILON: f64 = 1e-9;
    let smallest_nonzero = f64::from_bits(1);
    if f.is_nan() || f.is_infinite() || !(-MAX_JSON_FLOAT..=MAX_JSON_FLOAT).contains(&f) {
        return false;
    }
    // Go's uint64(f) of a negative float yields 2^64 on amd64; emulate it so the comparisons
    // below see the same numbers.
    let g = if f < 0.0 {
        18_446_744_073_709_551_616.0
    } else {
        (f as u64) as f64
    };
    let diff = (f - g).abs();
    if f == g || f == (f as i64) as f64 {
        return true;
    }
    if f == 0.0 || g == 0.0 || diff < smallest_nonzero {
        return diff < EPSILON * smallest_nonzero;
    }
    diff / (f.abs() + g.abs()).min(f64::MAX) < EPSILON
}

/// `typeValidator.Validate`.
// The conditions are kept in kube-openapi's shape so they can be compared line by line.
#[allow(clippy::nonminimal_bool)]
fn validate_type(s: &Node, path: &Path<'_>, data: &Value) -> Res {
    let has = |t: &str| s.types.iter().any(|x| x == t);
    if data.is_null() {
        if !s.types.is_empty() && !has("null") && !s.nullable {
            return Res::err(invalid_type(
                path,
                &s.types.join(","),
                Value::String("null".to_string()),
            ));
        }
        return Res {
            errors: Vec::new(),
            match_count: 1,
        };
    }
    let (sch_type, format) = schema_info(data);
    let is_float_int = match data {
        Value::Number(n) => {
            matches!(Num::of(n), Num::Float(f) if is_float_a_json_integer(f)) && has("integer")
        }
        _ => false,
    };
    let is_int_float = sch_type == "integer" && has("number");
    let stringish = matches!(data, Value::String(_) | Value::Array(_));
    if !stringish
        && !s.format.is_empty()
        && !(has(sch_type) || format == s.format || is_float_int || is_int_float)
    {
        return Res::err(invalid_type(path, &s.format, Value::String(format.to_string())));
    }
    if !(has("number") || has("integer")) && !s.format.is_empty() && stringish {
        return Res {
            errors: Vec::new(),
            match_count: 1,
        };
    }
    if !(has(sch_type) || is_float_int || is_int_float) {
        return Res::err(invalid_type(
            path,
            &s.types.join(","),
            Value::String(sch_type.to_string()),
        ));
    }
    Res {
        errors: Vec::new(),
        match_count: 1,
    }
}

/// `schemaPropsValidator.Validate`: allOf, oneOf, anyOf, not.
fn validate_schema_props(s: &Node, path: &Path<'_>, data: &Value) -> Res {
    let mut main = Res::default();
    if !s.any_of.is_empty() {
        let mut best: Option<Res> = None;
        let mut first_success: Option<Res> = None;
        let mut succeeded = false;
        for sub in &s.any_of {
            let r = validate_schema(sub, path, data);
            if r.is_valid() {
                best = None;
                succeeded = true;
                first_success.get_or_insert(r);
                break;
            }
            if best.as_ref().is_none_or(|b| r.match_count > b.match_count) {
                best = Some(r);
            }
        }
        if !succeeded {
            main.add(OErr::Plain(format!(
                "{} must validate at least one schema (anyOf)",
                gofmt::quote(&path.to_string())
            )));
        }
        if let Some(b) = best {
            main.merge(b);
        } else if let Some(f) = first_success {
            main.merge(f);
        }
    }
    if !s.one_of.is_empty() {
        let mut best: Option<Res> = None;
        let mut first_success: Option<Res> = None;
        let mut validated = 0;
        for sub in &s.one_of {
            let r = validate_schema(sub, path, data);
            if r.is_valid() {
                validated += 1;
                best = None;
                if first_success.is_none() {
                    first_success = Some(r);
                }
                continue;
            }
            if validated == 0 && best.as_ref().is_none_or(|b| r.match_count > b.match_count) {
                best = Some(r);
            }
        }
        if validated != 1 {
            let additional = if validated == 0 {
                "Found none valid".to_string()
            } else {
                format!("Found {validated} valid alternatives")
            };
            main.add(OErr::Plain(format!(
                "{} must validate one and only one schema (oneOf). {additional}",
                gofmt::quote(&path.to_string())
            )));
            if let Some(b) = best {
                main.merge(b);
            }
        } else if let Some(f) = first_success {
            main.merge(f);
        }
    }
    if !s.all_of.is_empty() {
        let mut validated = 0;
        for sub in &s.all_of {
            let r = validate_schema(sub, path, data);
            if r.is_valid() {
                validated += 1;
            }
            main.merge(r);
        }
        if validated != s.all_of.len() {
            let additional = if validated == 0 { ". None validated" } else { "" };
            main.add(OErr::Plain(format!(
                "{} must validate all the schemas (allOf){additional}",
                gofmt::quote(&path.to_string())
            )));
        }
    }
    if let Some(not) = &s.not
        && validate_schema(not, path, data).is_valid()
    {
        main.add(OErr::Plain(format!(
            "{} must not validate the schema (not)",
            gofmt::quote(&path.to_string())
        )));
    }
    main.inc();
    main
}

/// `stringValidator.Validate`: only the first failing check is reported.
fn validate_string(s: &Node, path: &Path<'_>, data: &str) -> Res {
    let len = data.chars().count() as i64;
    if let Some(max) = s.max_length
        && len > max
    {
        return Res::err(OErr::Validation {
            code: Code::TooLong,
            name: path.to_string(),
            value: Some(Value::String(data.to_string())),
            valid: Some(max),
            values: Vec::new(),
            message: format!("{path} in {IN} should be at most {max} chars long"),
        });
    }
    if let Some(min) = s.min_length
        && len < min
    {
        return Res::err(OErr::v(
            Code::Other,
            path,
            Some(Value::String(data.to_string())),
            format!("{path} in {IN} should be at least {min} chars long"),
        ));
    }
    if let Some((pattern, compiled)) = &s.pattern {
        let shown = match compiled {
            Ok(re) if re.is_match(data) => return Res::default(),
            Ok(_) => pattern.clone(),
            Err(e) => format!("{pattern}, but pattern is invalid: {e}"),
        };
        return Res::err(OErr::v(
            Code::Other,
            path,
            Some(Value::String(data.to_string())),
            format!("{path} in {IN} should match '{shown}'"),
        ));
    }
    Res::default()
}

/// `IsValueValidAgainstRange`: whether a number (the value or a bound) fits the declared
/// integer/number format.
fn value_fits_range(val: Num, type_name: &str, format: &str, prefix: &str, path: &Path<'_>) -> Option<OErr> {
    if fits_range(val, type_name, format) {
        return None;
    }
    let message = if format.is_empty() {
        format!("{prefix} value must be of type {type_name} (default format) in {path}")
    } else {
        format!("{prefix} value must be of type {type_name} with format {format} in {path}")
    };
    Some(OErr::Plain(message))
}

/// The test of `IsValueValidAgainstRange`, without printing the usual numbers: an integer, or
/// a float below 2^53 in magnitude (printed with all its digits), fits an integer format when
/// it is integral and in range; a float prints in the fewest digits that read back as itself.
fn fits_range(val: Num, type_name: &str, format: &str) -> bool {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
    match (type_name, val) {
        ("integer", Num::Int(i)) => format != "int32" || i32::try_from(i).is_ok(),
        ("integer", Num::Float(f)) if f.abs() < EXACT => {
            f.fract() == 0.0
                && (format != "int32" || (f64::from(i32::MIN)..=f64::from(i32::MAX)).contains(&f))
        }
        ("integer", Num::Float(_)) => fits_range_as_printed(val, type_name, format),
        (_, Num::Int(_)) => true,
        (_, Num::Float(f)) => format != "float" || (f.is_finite() && f.abs() <= f64::from(f32::MAX)),
    }
}

/// `IsValueValidAgainstRange` as kube-openapi writes it: print the number, parse it back.
fn fits_range_as_printed(val: Num, type_name: &str, format: &str) -> bool {
    let rep = match val {
        Num::Int(i) => i.to_string(),
        Num::Float(f) => format_float_f(f),
    };
    match type_name {
        "integer" => match format {
            "int32" => rep.parse::<i32>().is_ok(),
            _ => rep.parse::<i64>().is_ok(),
        },
        _ => match format {
            "float" => rep
                .parse::<f64>()
                .map(|f| f.is_finite() && f.abs() <= f32::MAX as f64)
                .unwrap_or(false),
            _ => true,
        },
    }
}

/// `strconv.FormatFloat(f, 'f', -1, 64)`.
fn format_float_f(f: f64) -> String {
    format!("{f}")
}

/// `numberValidator.Validate`.
fn validate_number(s: &Node, path: &Path<'_>, val: Num) -> Res {
    let mut res = Res::default();
    let single = if s.types.len() == 1 {
        s.types[0].as_str()
    } else {
        ""
    };
    let (type_name, format) = match single {
        "integer" => (
            "integer",
            if s.format == "int32" || s.format == "int64" {
                s.format.as_str()
            } else {
                ""
            },
        ),
        "number" => (
            "number",
            if s.format == "float" || s.format == "double" {
                s.format.as_str()
            } else {
                ""
            },
        ),
        _ => ("", ""),
    };
    if let Some(e) = value_fits_range(val, type_name, format, "Checked", path) {
        res.add(e);
    }
    let data_f = val.as_f64();

    let mut res_multiple = Res::default();
    if let Some(factor) = s.multiple_of {
        match value_fits_range(Num::Float(factor), type_name, format, "MultipleOf", path) {
            None => {
                if let Some(e) = multiple_of_native(path, val, factor) {
                    res_multiple.add(e);
                }
            }
            Some(range_err) => {
                res_multiple.add(range_err);
                if let Some(e) = multiple_of_float(path, data_f, factor) {
                    res_multiple.add(e);
                }
            }
        }
    }
    let mut res_maximum = Res::default();
    if let Some(max) = s.maximum {
        match value_fits_range(Num::Float(max), type_name, format, "Maximum boundary", path) {
            None => {
                if let Some(e) = maximum_native(path, val, max, s.exclusive_maximum) {
                    res_maximum.add(e);
                }
            }
            Some(range_err) => {
                res_maximum.add(range_err);
                if let Some(e) = bound_float(path, data_f, max, s.exclusive_maximum, true) {
                    res_maximum.add(e);
                }
            }
        }
    }
    let mut res_minimum = Res::default();
    if let Some(min) = s.minimum {
        match value_fits_range(Num::Float(min), type_name, format, "Minimum boundary", path) {
            None => {
                if let Some(e) = minimum_native(path, val, min, s.exclusive_minimum) {
                    res_minimum.add(e);
                }
            }
            Some(range_err) => {
                res_minimum.add(range_err);
                if let Some(e) = bound_float(path, data_f, min, s.exclusive_minimum, false) {
                    res_minimum.add(e);
                }
            }
        }
    }
    res.merge(res_multiple);
    res.merge(res_minimum);
    res.merge(res_maximum);
    res.inc();
    res
}

fn multiple_of_native(path: &Path<'_>, val: Num, factor: f64) -> Option<OErr> {
    match val {
        Num::Int(data) => {
            let factor = factor as i64;
            if factor <= 0 {
                return Some(OErr::v(
                    Code::Other,
                    path,
                    Some(Value::from(factor)),
                    format!("factor MultipleOf declared for {path} must be positive: {factor}"),
                ));
            }
            let mult = data / factor;
            if mult.wrapping_mul(factor) != data {
                return Some(OErr::v(
                    Code::Other,
                    path,
                    Some(Value::from(data)),
                    format!("{path} in {IN} should be a multiple of {factor}"),
                ));
            }
            None
        }
        Num::Float(data) => multiple_of_float(path, data, factor),
    }
}

fn multiple_of_float(path: &Path<'_>, data: f64, factor: f64) -> Option<OErr> {
    if factor <= 0.0 {
        return Some(OErr::v(
            Code::Other,
            path,
            Some(float_value(factor)),
            format!(
                "factor MultipleOf declared for {path} must be positive: {}",
                gofmt::float_v(factor)
            ),
        ));
    }
    let mult = if factor < 1.0 {
        1.0 / factor * data
    } else {
        data / factor
    };
    if !is_float_a_json_integer(mult) {
        return Some(OErr::v(
            Code::Other,
            path,
            Some(float_value(data)),
            format!(
                "{path} in {IN} should be a multiple of {}",
                gofmt::float_v(factor)
            ),
        ));
    }
    None
}

fn bound_message(path: &Path<'_>, bound: &str, exclusive: bool, is_max: bool) -> String {
    let relation = match (is_max, exclusive) {
        (true, false) => "less than or equal to",
        (true, true) => "less than",
        (false, false) => "greater than or equal to",
        (false, true) => "greater than",
    };
    format!("{path} in {IN} should be {relation} {bound}")
}

fn bound_float(path: &Path<'_>, data: f64, bound: f64, exclusive: bool, is_max: bool) -> Option<OErr> {
    let fails = if is_max {
        (!exclusive && data > bound) || (exclusive && data >= bound)
    } else {
        (!exclusive && data < bound) || (exclusive && data <= bound)
    };
    fails.then(|| {
        OErr::v(
            Code::Other,
            path,
            Some(float_value(data)),
            bound_message(path, &gofmt::float_v(bound), exclusive, is_max),
        )
    })
}

fn maximum_native(path: &Path<'_>, val: Num, max: f64, exclusive: bool) -> Option<OErr> {
    match val {
        Num::Int(data) => {
            let max = max as i64;
            let fails = (!exclusive && data > max) || (exclusive && data >= max);
            fails.then(|| {
                OErr::v(
                    Code::Other,
                    path,
                    Some(Value::from(data)),
                    bound_message(path, &max.to_string(), exclusive, true),
                )
            })
        }
        Num::Float(data) => bound_float(path, data, max, exclusive, true),
    }
}

fn minimum_native(path: &Path<'_>, val: Num, min: f64, exclusive: bool) -> Option<OErr> {
    match val {
        Num::Int(data) => {
            let min = min as i64;
            let fails = (!exclusive && data < min) || (exclusive && data <= min);
            fails.then(|| {
                OErr::v(
                    Code::Other,
                    path,
                    Some(Value::from(data)),
                    bound_message(path, &min.to_string(), exclusive, false),
                )
            })
        }
        Num::Float(data) => bound_float(path, data, min, exclusive, false),
    }
}

/// `schemaSliceValidator.Validate`.
fn validate_slice(s: &Node, path: &Path<'_>, items: &[Value]) -> Res {
    let mut result = Res::default();
    if let Some(item_schema) = &s.items {
        for (i, item) in items.iter().enumerate() {
            result.merge(validate_schema(item_schema, &Path::Index(path, i), item));
        }
    }
    let size = items.len() as i64;
    if let Some(min) = s.min_items
        && size < min
    {
        result.add(OErr::Validation {
            code: Code::Other,
            name: path.to_string(),
            value: Some(Value::from(size)),
            valid: Some(min),
            values: Vec::new(),
            message: format!("{path} in {IN} should have at least {min} items"),
        });
    }
    if let Some(max) = s.max_items
        && size > max
    {
        result.add(OErr::Validation {
            code: Code::MaxItems,
            name: path.to_string(),
            value: Some(Value::from(size)),
            valid: Some(max),
            values: Vec::new(),
            message: format!("{path} in {IN} should have at most {max} items"),
        });
    }
    if s.unique_items {
        let duplicate = items
            .iter()
            .enumerate()
            .any(|(i, a)| items[..i].iter().any(|b| go_deep_equal(a, b)));
        if duplicate {
            result.add(OErr::v(
                Code::Other,
                path,
                None,
                format!("{path} in {IN} shouldn't contain duplicates"),
            ));
        }
    }
    result.inc();
    result
}

/// `basicCommonValidator.Validate`: the enum check, with Go's conversion rules.
fn validate_common(s: &Node, path: &Path<'_>, data: &Value) -> Res {
    if s.enum_.is_empty() || s.enum_.iter().any(|e| enum_matches(data, e)) {
        return Res::default();
    }
    let message = format!(
        "{path} in {IN} should be one of {}",
        gofmt::sprint(&Value::Array(s.enum_.clone()))
    );
    Res::err(OErr::Validation {
        code: Code::Enum,
        name: path.to_string(),
        value: (!data.is_null()).then(|| data.clone()),
        valid: None,
        values: s.enum_.clone(),
        message,
    })
}

/// Whether `data`, converted to the Go type of `allowed`, deep-equals it. A `null` enum entry
/// has no type and never matches, as in kube-apiserver.
fn enum_matches(data: &Value, allowed: &Value) -> bool {
    match (allowed, data) {
        (Value::Null, _) | (_, Value::Null) => false,
        (Value::String(a), Value::String(d)) => a == d,
        (Value::String(a), Value::Number(n)) => match Num::of(n) {
            // Go converts an integer to the string of that rune.
            Num::Int(i) => {
                let c = u32::try_from(i)
                    .ok()
                    .and_then(char::from_u32)
                    .unwrap_or('\u{FFFD}');
                *a == c.to_string()
            }
            Num::Float(_) => false,
        },
        (Value::Number(a), Value::Number(d)) => match (Num::of(a), Num::of(d)) {
            (Num::Int(a), Num::Int(d)) => a == d,
            (Num::Int(a), Num::Float(d)) => a == d as i64,
            (Num::Float(a), Num::Int(d)) => a == d as f64,
            (Num::Float(a), Num::Float(d)) => a == d,
        },
        (Value::Bool(a), Value::Bool(d)) => a == d,
        (Value::Array(_), Value::Array(_)) | (Value::Object(_), Value::Object(_)) => {
            go_deep_equal(allowed, data)
        }
        _ => false,
    }
}

/// `reflect.DeepEqual` on decoded JSON: int64 and float64 never compare equal.
pub(crate) fn go_deep_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (Num::of(x), Num::of(y)) {
            (Num::Int(x), Num::Int(y)) => x == y,
            (Num::Float(x), Num::Float(y)) => x == y,
            _ => false,
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| go_deep_equal(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| go_deep_equal(v, w)))
        }
        _ => a == b,
    }
}

/// `objectValidator.Validate`.
fn validate_object(s: &Node, path: &Path<'_>, map: &Map<String, Value>) -> Res {
    let mut res = Res::default();
    let size = map.len() as i64;
    if let Some(min) = s.min_properties
        && size < min
    {
        res.add(OErr::Validation {
            code: Code::Other,
            name: path.to_string(),
            value: Some(Value::from(size)),
            valid: Some(min),
            values: Vec::new(),
            message: format!("{path} in {IN} should have at least {min} properties"),
        });
    }
    if let Some(max) = s.max_properties
        && size > max
    {
        res.add(OErr::Validation {
            code: Code::TooManyProperties,
            name: path.to_string(),
            value: Some(Value::from(size)),
            valid: Some(max),
            values: Vec::new(),
            message: format!("{path} in {IN} should have at most {max} properties"),
        });
    }
    // In key order: serde_json's maps are sorted, as kube-openapi sorts the keys.
    match &s.additional_properties {
        Some(Additional::Bool(false)) => {
            for k in map.keys() {
                if !s.properties.contains_key(k.as_str()) {
                    res.add(OErr::v(
                        Code::Other,
                        path,
                        Some(Value::String(k.clone())),
                        format!("{path}.{k} in {IN} is a forbidden property"),
                    ));
                }
            }
        }
        Some(Additional::Schema(extra)) => {
            for (k, v) in map {
                if !s.properties.contains_key(k.as_str()) {
                    res.merge(validate_schema(extra, &Path::Dot(path, k), v));
                }
            }
        }
        _ => {}
    }
    for (name, prop) in &s.properties {
        if let Some(v) = map.get(name) {
            res.merge(validate_schema(prop, &Path::Field(path, name), v));
        }
    }
    for k in &s.required {
        if !map.contains_key(k) {
            let name = Path::Dot(path, k);
            let message = format!("{name} in {IN} is required");
            res.add(OErr::v(Code::Required, &name, None, message));
        }
    }
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_fits_as_the_printed_number_parses() {
        let ints = [
            0,
            1,
            -1,
            42,
            i64::from(i32::MAX),
            i64::from(i32::MAX) + 1,
            i64::from(i32::MIN),
            i64::from(i32::MIN) - 1,
            i64::MAX,
            i64::MIN,
        ];
        let floats = [
            0.0,
            -0.0,
            0.5,
            -0.5,
            1.0,
            3.0,
            -7.0,
            1e-300,
            2147483647.0,
            2147483648.0,
            -2147483648.0,
            -2147483649.0,
            2147483647.5,
            9_223_372_036_854_774_784.0,
            9_223_372_036_854_775_808.0,
            -9_223_372_036_854_775_808.0,
            -9_223_372_036_854_777_856.0,
            1e21,
            1e300,
            f64::from(f32::MAX),
            f64::from(f32::MAX) * 1.000_001,
            -f64::from(f32::MAX),
            f64::MAX,
            f64::MIN_POSITIVE,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
        ];
        let values = ints
            .iter()
            .map(|&i| Num::Int(i))
            .chain(floats.iter().map(|&f| Num::Float(f)));
        for val in values {
            for (type_name, format) in [
                ("integer", "int32"),
                ("integer", "int64"),
                ("integer", ""),
                ("number", "float"),
                ("number", "double"),
                ("number", ""),
                ("", ""),
            ] {
                assert_eq!(
                    fits_range(val, type_name, format),
                    fits_range_as_printed(val, type_name, format),
                    "{val:?} as {type_name}/{format}"
                );
            }
        }
    }

    #[test]
    fn paths_print_as_kube_openapi_joins_them() {
        let root = Path::Root;
        let spec = Path::Field(&root, "spec");
        let items = Path::Field(&spec, "items");
        let first = Path::Index(&items, 0);
        assert_eq!(Path::Field(&first, "name").to_string(), "spec.items[0].name");
        assert_eq!(Path::Dot(&root, "extra").to_string(), ".extra");
        assert_eq!(Path::Dot(&spec, "extra").to_string(), "spec.extra");
        assert_eq!(Path::Index(&root, 2).to_string(), "[2]");
        // A property named "" prints as nothing, so its own property has no leading dot.
        let unnamed = Path::Field(&root, "");
        assert!(unnamed.is_empty());
        assert_eq!(Path::Field(&unnamed, "a").to_string(), "a");
        assert_eq!(Path::Field(&Path::Dot(&root, ""), "a").to_string(), "..a");
    }

    #[test]
    fn maps_iterate_in_key_order() {
        // The validators visit keys in map order and kube-openapi sorts them: that is the same
        // order only while serde_json's `Map` is a BTreeMap (no `preserve_order` feature).
        let map: Map<String, Value> = serde_json::from_str(r#"{"b": 1, "a": 2, "c": 3, "B": 4}"#).unwrap();
        let keys: Vec<&str> = map.keys().map(String::as_str).collect();
        assert_eq!(keys, ["B", "a", "b", "c"]);
    }

    #[test]
    fn float_integers_like_swag() {
        assert!(is_float_a_json_integer(3.0));
        assert!(is_float_a_json_integer(-3.0));
        assert!(
            is_float_a_json_integer(3.0000000001),
            "relative error below 1e-9 counts as integral"
        );
        assert!(!is_float_a_json_integer(1.5));
        assert!(!is_float_a_json_integer(-1.5));
        assert!(!is_float_a_json_integer(1e300));
    }
}
