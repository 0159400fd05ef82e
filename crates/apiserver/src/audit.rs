//! The audit log (`--audit-log-path`): one JSON line per request, shaped like kube-apiserver's
//! `audit.k8s.io/v1` Event at the `Metadata` level — who (user, groups, source IP, user agent)
//! did what (verb, request URI, object reference) and how it ended (response code, the
//! authorization decision and reason). Never request or response bodies, never credentials:
//! a response's message is kept only for 401 and 403, whose messages name users and resources,
//! not object data. Watches are recorded when their response starts (`ResponseStarted`), every
//! other request when it completes (`ResponseComplete`).

use std::io::Write;
use std::net::IpAddr;
use std::path::Path;

use anyhow::Context;
use serde_json::{Value, json};

use crate::auth::User;
use crate::rbac::rules::Attributes;

/// An open audit log.
pub struct AuditLog {
    file: parking_lot::Mutex<std::fs::File>,
}

/// One request, as the audit log records it.
pub struct Record<'a> {
    /// When the request arrived (RFC 3339, microseconds).
    pub received: &'a str,
    /// Path and query.
    pub request_uri: &'a str,
    /// The request's attributes (verb, object reference).
    pub attributes: &'a Attributes,
    /// The authenticated user (None when authentication failed).
    pub user: Option<&'a User>,
    /// The user it acted as (`kubectl --as`), if any.
    pub impersonated: Option<&'a User>,
    /// The peer's address.
    pub source_ip: IpAddr,
    /// The User-Agent header.
    pub user_agent: &'a str,
    /// The response's status code.
    pub code: u16,
    /// The response's Status reason and message, for failures.
    pub failure: Option<(&'a str, &'a str)>,
    /// The authorization decision and reason, when one was made.
    pub decision: Option<(bool, &'a str)>,
    /// Whether this is the start of a long-running (watch) response.
    pub started: bool,
}

impl AuditLog {
    /// Opens (appending to) or creates the log with mode 0600.
    pub fn open(path: &Path) -> anyhow::Result<AuditLog> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        let mut options = std::fs::OpenOptions::new();
        options.create(true).append(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let file = options
            .open(path)
            .with_context(|| format!("opening the audit log {} (--audit-log-path)", path.display()))?;
        Ok(AuditLog {
            file: parking_lot::Mutex::new(file),
        })
    }

    /// Appends one event line.
    pub fn record(&self, record: &Record<'_>) {
        let mut line = serde_json::to_vec(&event(record)).unwrap_or_default();
        line.push(b'\n');
        // One write per line under the lock: concurrent requests never interleave.
        if let Err(error) = self.file.lock().write_all(&line) {
            tracing::warn!(%error, "cannot write to the audit log");
        }
    }
}

/// The `audit.k8s.io/v1` Event of a request.
pub fn event(record: &Record<'_>) -> Value {
    let a = record.attributes;
    let mut event = json!({
        "kind": "Event",
        "apiVersion": "audit.k8s.io/v1",
        "level": "Metadata",
        "auditID": crate::objects::new_uid(),
        "stage": if record.started { "ResponseStarted" } else { "ResponseComplete" },
        "requestURI": record.request_uri,
        "verb": a.verb,
        "user": record.user.map_or_else(|| json!({}), User::to_json),
        "sourceIPs": [record.source_ip.to_string()],
        "userAgent": record.user_agent,
        "responseStatus": {"metadata": {}, "code": record.code},
        "requestReceivedTimestamp": record.received,
        "stageTimestamp": crate::objects::now_micro(),
    });
    if let Some(acting) = record.impersonated {
        event["impersonatedUser"] = acting.to_json();
    }
    if a.resource_request {
        let mut object = json!({"resource": a.resource, "apiVersion": a.api_version});
        for (field, value) in [
            ("namespace", &a.namespace),
            ("name", &a.name),
            ("apiGroup", &a.api_group),
            ("subresource", &a.subresource),
        ] {
            if !value.is_empty() {
                object[field] = json!(value);
            }
        }
        event["objectRef"] = object;
    }
    if let Some((reason, message)) = record.failure {
        event["responseStatus"]["status"] = json!("Failure");
        event["responseStatus"]["reason"] = json!(reason);
        if record.code == 401 || record.code == 403 {
            event["responseStatus"]["message"] = json!(message);
        }
    }
    if let Some((allowed, reason)) = record.decision {
        event["annotations"] = json!({
            "authorization.k8s.io/decision": if allowed { "allow" } else { "forbid" },
            "authorization.k8s.io/reason": reason,
        });
    }
    event
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn attrs() -> Attributes {
        crate::requestinfo::attributes("GET", "/api/v1/namespaces/ns/secrets/s", &[])
    }

    #[test]
    fn events_are_kube_audit_events_without_bodies() {
        let user = User {
            name: "bob".into(),
            groups: vec!["system:authenticated".into()],
            ..User::default()
        };
        let a = attrs();
        let record = Record {
            received: "2026-01-01T00:00:00.000000Z",
            request_uri: "/api/v1/namespaces/ns/secrets/s",
            attributes: &a,
            user: Some(&user),
            impersonated: None,
            source_ip: "127.0.0.1".parse().unwrap(),
            user_agent: "kubectl/v1.33",
            code: 403,
            failure: Some((
                "Forbidden",
                "secrets \"s\" is forbidden: User \"bob\" cannot get resource",
            )),
            decision: Some((false, "")),
            started: false,
        };
        let e = event(&record);
        assert_eq!(e["apiVersion"], "audit.k8s.io/v1");
        assert_eq!(e["level"], "Metadata");
        assert_eq!(e["stage"], "ResponseComplete");
        assert_eq!(e["verb"], "get");
        assert_eq!(e["user"]["username"], "bob");
        assert_eq!(e["sourceIPs"], json!(["127.0.0.1"]));
        assert_eq!(
            e["objectRef"],
            json!({"resource": "secrets", "namespace": "ns", "name": "s", "apiVersion": "v1"})
        );
        assert_eq!(e["responseStatus"]["code"], 403);
        assert_eq!(e["annotations"]["authorization.k8s.io/decision"], "forbid");
        assert!(e.get("requestObject").is_none() && e.get("responseObject").is_none());
        // Messages of other failures may quote object data: only the reason is kept.
        let invalid = Record {
            code: 422,
            failure: Some(("Invalid", "data: Invalid value: \"c2VjcmV0\"")),
            ..record
        };
        let e = event(&invalid);
        assert_eq!(e["responseStatus"]["reason"], "Invalid");
        assert!(e["responseStatus"].get("message").is_none());
        assert!(!e.to_string().contains("c2VjcmV0"));
    }

    #[test]
    fn lines_are_appended() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit/log.jsonl");
        let log = AuditLog::open(&path).unwrap();
        let a = crate::requestinfo::attributes("GET", "/healthz", &[]);
        let record = Record {
            received: "t",
            request_uri: "/healthz",
            attributes: &a,
            user: None,
            impersonated: None,
            source_ip: "::1".parse().unwrap(),
            user_agent: "",
            code: 401,
            failure: Some(("Unauthorized", "Unauthorized")),
            decision: None,
            started: false,
        };
        log.record(&record);
        log.record(&record);
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["user"], json!({}));
        assert!(lines[0].get("objectRef").is_none());
        assert_eq!(lines[0]["responseStatus"]["message"], "Unauthorized");
    }
}
