//! API errors and their `Status` rendering: the reasons and codes Kubernetes clients switch on.

use serde_json::{Value, json};

/// One field-level problem of an `Invalid` error (a `StatusCause`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cause {
    /// Cause type as kube-apiserver spells it, e.g. `FieldValueRequired`, `FieldValueInvalid`.
    pub reason: String,
    /// Human-readable explanation (already prefixed like kube-apiserver's `Required value: ...`).
    pub message: String,
    /// JSON path of the field.
    pub field: String,
}

impl Cause {
    /// A cause with an explicit type.
    pub fn new(reason: &str, field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            reason: reason.to_owned(),
            field: field.into(),
            message: message.into(),
        }
    }

    /// `Required value: <detail>`.
    pub fn required(field: impl Into<String>, detail: &str) -> Self {
        let message = if detail.is_empty() {
            "Required value".to_owned()
        } else {
            format!("Required value: {detail}")
        };
        Self::new("FieldValueRequired", field, message)
    }

    /// `Invalid value: <value>: <detail>`.
    pub fn invalid(field: impl Into<String>, value: &Value, detail: &str) -> Self {
        Self::new(
            "FieldValueInvalid",
            field,
            format!("Invalid value: {}: {detail}", render_value(value)),
        )
    }

    /// `Unsupported value: <value>: supported values: ...`.
    pub fn unsupported(field: impl Into<String>, value: &Value, supported: &[&str]) -> Self {
        let list: Vec<String> = supported.iter().map(|s| format!("\"{s}\"")).collect();
        Self::new(
            "FieldValueNotSupported",
            field,
            format!(
                "Unsupported value: {}: supported values: {}",
                render_value(value),
                list.join(", ")
            ),
        )
    }

    /// `Forbidden: <detail>`.
    pub fn forbidden(field: impl Into<String>, detail: &str) -> Self {
        Self::new("FieldValueForbidden", field, format!("Forbidden: {detail}"))
    }

    /// The `field: message` form used in an Invalid error's message.
    pub fn summary(&self) -> String {
        if self.field.is_empty() {
            self.message.clone()
        } else {
            format!("{}: {}", self.field, self.message)
        }
    }
}

/// Renders a value the way kube-apiserver quotes it in field errors.
pub fn render_value(value: &Value) -> String {
    match value {
        Value::String(s) => format!("\"{s}\""),
        Value::Null => "null".into(),
        other => other.to_string(),
    }
}

/// A failed API request, rendered as a `Status` object.
#[derive(Clone, Debug, PartialEq)]
pub struct ApiError {
    /// HTTP status code.
    pub code: u16,
    /// Machine-readable reason (`NotFound`, `AlreadyExists`, ...).
    pub reason: &'static str,
    /// Human-readable message.
    pub message: String,
    /// `details` of the Status, if any.
    pub details: Option<Value>,
}

/// Result of API operations.
pub type ApiResult<T> = Result<T, ApiError>;

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}): {}", self.reason, self.code, self.message)
    }
}

impl std::error::Error for ApiError {}

/// `deployments.apps` style name of a resource in a group.
pub fn qualified(resource: &str, group: &str) -> String {
    if group.is_empty() {
        resource.to_owned()
    } else {
        format!("{resource}.{group}")
    }
}

fn details(name: &str, group: &str, kind: &str) -> Value {
    let mut d = json!({ "name": name, "kind": kind });
    if !group.is_empty() {
        d["group"] = json!(group);
    }
    d
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    /// 404 NotFound for one object.
    pub fn not_found(group: &str, resource: &str, name: &str) -> Self {
        let mut e = Self::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", qualified(resource, group)),
        );
        e.details = Some(details(name, group, resource));
        e
    }

    /// 404 NotFound for a path that serves nothing.
    pub fn not_found_path() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
    }

    /// 409 AlreadyExists.
    pub fn already_exists(group: &str, resource: &str, name: &str) -> Self {
        let mut e = Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", qualified(resource, group)),
        );
        e.details = Some(details(name, group, resource));
        e
    }

    /// 409 Conflict on a stale resourceVersion.
    pub fn conflict(group: &str, resource: &str, name: &str, why: &str) -> Self {
        let mut e = Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": {why}",
                qualified(resource, group)
            ),
        );
        e.details = Some(details(name, group, resource));
        e
    }

    /// The standard optimistic-concurrency conflict.
    pub fn stale(group: &str, resource: &str, name: &str) -> Self {
        Self::conflict(
            group,
            resource,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 409 Conflict with a free message (server-side apply conflicts).
    pub fn conflict_message(
        group: &str,
        resource: &str,
        name: &str,
        message: String,
        causes: Vec<Cause>,
    ) -> Self {
        let mut d = details(name, group, resource);
        d["causes"] = causes_json(&causes);
        Self {
            code: 409,
            reason: "Conflict",
            message,
            details: Some(d),
        }
    }

    /// 422 Invalid with field causes; `kind` is the object's Kind.
    pub fn invalid(group: &str, kind: &str, name: &str, causes: Vec<Cause>) -> Self {
        let summary: Vec<String> = causes.iter().map(Cause::summary).collect();
        let what = qualified(kind, group);
        let message = if summary.len() == 1 {
            format!("{what} \"{name}\" is invalid: {}", summary[0])
        } else {
            format!("{what} \"{name}\" is invalid: [{}]", summary.join(", "))
        };
        let mut d = details(name, group, kind);
        d["causes"] = causes_json(&causes);
        Self {
            code: 422,
            reason: "Invalid",
            message,
            details: Some(d),
        }
    }

    /// 400 BadRequest.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 401 Unauthorized.
    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    /// 403 Forbidden, as kube's `NewForbidden` words it: `<resource>.<group> "<name>" is
    /// forbidden: <why>` (without the name for collections, `forbidden: <why>` for paths).
    pub fn forbidden(group: &str, resource: &str, name: &str, why: &str) -> Self {
        let message = if group.is_empty() && resource.is_empty() {
            format!("forbidden: {why}")
        } else if name.is_empty() {
            format!("{} is forbidden: {why}", qualified(resource, group))
        } else {
            format!("{} \"{name}\" is forbidden: {why}", qualified(resource, group))
        };
        let mut e = Self::new(403, "Forbidden", message);
        let mut d = json!({});
        for (field, value) in [("name", name), ("group", group), ("kind", resource)] {
            if !value.is_empty() {
                d[field] = json!(value);
            }
        }
        e.details = Some(d);
        e
    }

    /// 405 MethodNotAllowed.
    pub fn method_not_allowed(method: &str) -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            format!("the server does not allow this method on the requested resource ({method})"),
        )
    }

    /// 406 NotAcceptable.
    pub fn not_acceptable(accept: &str) -> Self {
        Self::new(
            406,
            "NotAcceptable",
            format!(
                "only the following media types are accepted: application/json, application/yaml (asked for {accept})"
            ),
        )
    }

    /// 410 Gone / Expired.
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// 413 RequestEntityTooLarge.
    pub fn too_large(limit: usize) -> Self {
        Self::new(
            413,
            "RequestEntityTooLarge",
            format!("Request entity too large: limit is {limit}"),
        )
    }

    /// 415 UnsupportedMediaType.
    pub fn unsupported_media_type(content_type: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json (got {content_type})"
            ),
        )
    }

    /// 500 InternalError.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(
            500,
            "InternalError",
            format!("Internal error occurred: {}", message.into()),
        )
    }

    /// 504 Timeout.
    pub fn timeout(message: impl Into<String>) -> Self {
        Self::new(504, "Timeout", message)
    }

    /// 429 TooManyRequests.
    pub fn too_many_requests(message: impl Into<String>) -> Self {
        Self::new(429, "TooManyRequests", message)
    }

    /// The `Status` object.
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(d) = &self.details {
            status["details"] = d.clone();
        }
        status
    }
}

fn causes_json(causes: &[Cause]) -> Value {
    Value::Array(
        causes
            .iter()
            .map(|c| json!({ "reason": c.reason, "message": c.message, "field": c.field }))
            .collect(),
    )
}

impl From<flotilla_store::StoreError> for ApiError {
    fn from(e: flotilla_store::StoreError) -> Self {
        ApiError::internal(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_matches_kube_apiserver() {
        let status = ApiError::not_found("apps", "deployments", "web").to_status();
        assert_eq!(status["message"], "deployments.apps \"web\" not found");
        assert_eq!(status["reason"], "NotFound");
        assert_eq!(status["code"], 404);
        assert_eq!(status["details"]["group"], "apps");
        let core = ApiError::not_found("", "configmaps", "c").to_status();
        assert_eq!(core["message"], "configmaps \"c\" not found");
        assert!(core["details"].get("group").is_none());
    }

    #[test]
    fn forbidden_matches_kube_apiserver() {
        let list = ApiError::forbidden("", "pods", "", "User \"x\" cannot list").to_status();
        assert_eq!(list["message"], "pods is forbidden: User \"x\" cannot list");
        assert_eq!(list["details"], json!({"kind": "pods"}));
        let one = ApiError::forbidden("apps", "deployments", "web", "no").to_status();
        assert_eq!(one["message"], "deployments.apps \"web\" is forbidden: no");
        assert_eq!(
            one["details"],
            json!({"name": "web", "group": "apps", "kind": "deployments"})
        );
        let path = ApiError::forbidden("", "", "", "User \"x\" cannot get path \"/\"").to_status();
        assert_eq!(path["message"], "forbidden: User \"x\" cannot get path \"/\"");
        assert_eq!(path["details"], json!({}));
        assert_eq!(path["code"], 403);
        assert_eq!(path["reason"], "Forbidden");
    }

    #[test]
    fn invalid_lists_causes() {
        let one = ApiError::invalid(
            "",
            "ConfigMap",
            "Bad_Name",
            vec![Cause::invalid(
                "metadata.name",
                &json!("Bad_Name"),
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters",
            )],
        );
        assert_eq!(one.code, 422);
        assert!(
            one.message
                .starts_with("ConfigMap \"Bad_Name\" is invalid: metadata.name: Invalid value: \"Bad_Name\"")
        );
        let two = ApiError::invalid(
            "apps",
            "Deployment",
            "d",
            vec![
                Cause::required("spec.selector", ""),
                Cause::required("spec.template.spec.containers", ""),
            ],
        );
        assert!(
            two.message
                .contains("is invalid: [spec.selector: Required value, spec.template")
        );
        assert_eq!(two.to_status()["details"]["causes"].as_array().unwrap().len(), 2);
    }
}
