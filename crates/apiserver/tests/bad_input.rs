//! Bad input: every malformed request gets kube-apiserver's status code and reason, a clear
//! message, and changes nothing (the global revision stays put).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use serde_json::{Value, json};

use common::Server;

struct Case {
    name: &'static str,
    method: &'static str,
    path: String,
    content_type: Option<&'static str>,
    body: Vec<u8>,
    code: u16,
    reason: &'static str,
    message: &'static str,
}

fn revision(server: &Server) -> String {
    let (code, list) = server.curl_json("GET", "/api/v1/namespaces/bad/configmaps", None, None);
    assert_eq!(code, 200);
    list["metadata"]["resourceVersion"].as_str().unwrap().to_owned()
}

#[test]
fn bad_requests_get_kube_status_and_change_nothing() {
    let server = Server::start(&[]);
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bad"}});
    assert_eq!(
        server
            .curl(
                "POST",
                "/api/v1/namespaces",
                Some("application/json"),
                Some(ns.to_string().as_bytes()),
                None
            )
            .0,
        201
    );
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "existing", "namespace": "bad"}, "data": {"a": "1"}});
    assert_eq!(
        server
            .curl(
                "POST",
                "/api/v1/namespaces/bad/configmaps",
                Some("application/json"),
                Some(cm.to_string().as_bytes()),
                None
            )
            .0,
        201
    );
    let cms = "/api/v1/namespaces/bad/configmaps".to_string();
    let obj = |v: Value| v.to_string().into_bytes();
    let big = {
        let data = "x".repeat(3 * 1024 * 1024 + 10);
        obj(
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big"}, "data": {"d": data}}),
        )
    };
    let cases = vec![
        Case {
            name: "malformed JSON",
            method: "POST",
            path: cms.clone(),
            content_type: Some("application/json"),
            body: b"{\"apiVersion\": \"v1\", \"kind\": ".to_vec(),
            code: 400,
            reason: "BadRequest",
            message: "not valid JSON",
        },
        Case {
            name: "malformed YAML",
            method: "POST",
            path: cms.clone(),
            content_type: Some("application/yaml"),
            body: b"apiVersion: v1\nkind: [ConfigMap\n".to_vec(),
            code: 400,
            reason: "BadRequest",
            message: "not valid YAML",
        },
        Case {
            name: "wrong apiVersion for the URL",
            method: "POST",
            path: cms.clone(),
            content_type: Some("application/json"),
            body: obj(json!({"apiVersion": "apps/v1", "kind": "ConfigMap", "metadata": {"name": "x"}})),
            code: 400,
            reason: "BadRequest",
            message: "the API version in the data (apps/v1) does not match the expected API version (v1)",
        },
        Case {
            name: "wrong kind for the URL",
            method: "POST",
            path: cms.clone(),
            content_type: Some("application/json"),
            body: obj(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x"}})),
            code: 400,
            reason: "BadRequest",
            message: "the kind in the data (Secret) does not match the expected kind (ConfigMap)",
        },
        Case {
            name: "missing name",
            method: "POST",
            path: cms.clone(),
            content_type: Some("application/json"),
            body: obj(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}})),
            code: 422,
            reason: "Invalid",
            message: "metadata.name: Required value: name or generateName is required",
        },
        Case {
            name: "invalid name",
            method: "POST",
            path: cms.clone(),
            content_type: Some("application/json"),
            body: obj(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "Not_Valid"}})),
            code: 422,
            reason: "Invalid",
            message: "ConfigMap \"Not_Valid\" is invalid: metadata.name: Invalid value: \"Not_Valid\": a lowercase RFC 1123 subdomain",
        },
        Case {
            name: "invalid namespace name",
            method: "POST",
            path: "/api/v1/namespaces".into(),
            content_type: Some("application/json"),
            body: obj(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a.b"}})),
            code: 422,
            reason: "Invalid",
            message: "a lowercase RFC 1123 label must consist of",
        },
        Case {
            name: "invalid label value",
            method: "POST",
            path: cms.clone(),
            content_type: Some("application/json"),
            body: obj(
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "l", "labels": {"a": "b c"}}}),
            ),
            code: 422,
            reason: "Invalid",
            message: "metadata.labels: Invalid value: \"b c\"",
        },
        Case {
            name: "namespace mismatch",
            method: "POST",
            path: cms.clone(),
            content_type: Some("application/json"),
            body: obj(
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "m", "namespace": "other"}}),
            ),
            code: 400,
            reason: "BadRequest",
            message: "the namespace of the provided object does not match the namespace sent on the request",
        },
        Case {
            name: "malformed built-in field",
            method: "POST",
            path: "/apis/apps/v1/namespaces/bad/deployments".into(),
            content_type: Some("application/json"),
            body: obj(
                json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {"replicas": "three"}}),
            ),
            code: 400,
            reason: "BadRequest",
            message: "spec.replicas",
        },
        Case {
            name: "invalid built-in object",
            method: "POST",
            path: "/apis/apps/v1/namespaces/bad/deployments".into(),
            content_type: Some("application/json"),
            body: obj(
                json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "c"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}}),
            ),
            code: 422,
            reason: "Invalid",
            message: "`selector` does not match template `labels`",
        },
        Case {
            name: "resourceVersion on create",
            method: "POST",
            path: cms.clone(),
            content_type: Some("application/json"),
            body: obj(
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "rv", "resourceVersion": "5"}}),
            ),
            code: 400,
            reason: "BadRequest",
            message: "resourceVersion should not be set on objects to be created",
        },
        Case {
            name: "already exists",
            method: "POST",
            path: cms.clone(),
            content_type: Some("application/json"),
            body: obj(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "existing"}})),
            code: 409,
            reason: "AlreadyExists",
            message: "configmaps \"existing\" already exists",
        },
        Case {
            name: "body over 3 MiB",
            method: "POST",
            path: cms.clone(),
            content_type: Some("application/json"),
            body: big,
            code: 413,
            reason: "RequestEntityTooLarge",
            message: "Request entity too large: limit is 3145728",
        },
        Case {
            name: "unknown resource",
            method: "GET",
            path: "/api/v1/namespaces/bad/widgets".into(),
            content_type: None,
            body: vec![],
            code: 404,
            reason: "NotFound",
            message: "the server could not find the requested resource",
        },
        Case {
            name: "unknown group",
            method: "GET",
            path: "/apis/nope.example.com/v1/things".into(),
            content_type: None,
            body: vec![],
            code: 404,
            reason: "NotFound",
            message: "the server could not find the requested resource",
        },
        Case {
            name: "missing object",
            method: "GET",
            path: format!("{cms}/missing"),
            content_type: None,
            body: vec![],
            code: 404,
            reason: "NotFound",
            message: "configmaps \"missing\" not found",
        },
        Case {
            name: "unsupported patch type",
            method: "PATCH",
            path: format!("{cms}/existing"),
            content_type: Some("application/xml"),
            body: b"<a/>".to_vec(),
            code: 415,
            reason: "UnsupportedMediaType",
            message: "application/xml",
        },
        Case {
            name: "malformed JSON patch",
            method: "PATCH",
            path: format!("{cms}/existing"),
            content_type: Some("application/json-patch+json"),
            body: b"{\"op\": \"add\"}".to_vec(),
            code: 400,
            reason: "BadRequest",
            message: "JSON patch",
        },
        Case {
            name: "failing JSON patch test",
            method: "PATCH",
            path: format!("{cms}/existing"),
            content_type: Some("application/json-patch+json"),
            body: obj(
                json!([{"op": "test", "path": "/data/a", "value": "2"}, {"op": "replace", "path": "/data/a", "value": "3"}]),
            ),
            code: 422,
            reason: "Invalid",
            message: "the server rejected our request due to an error in our request",
        },
        Case {
            name: "stale resourceVersion",
            method: "PUT",
            path: format!("{cms}/existing"),
            content_type: Some("application/json"),
            body: obj(
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "existing", "resourceVersion": "1"}, "data": {"a": "2"}}),
            ),
            code: 409,
            reason: "Conflict",
            message: "the object has been modified; please apply your changes to the latest version and try again",
        },
        Case {
            name: "name mismatch on update",
            method: "PUT",
            path: format!("{cms}/existing"),
            content_type: Some("application/json"),
            body: obj(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "other"}})),
            code: 400,
            reason: "BadRequest",
            message: "the name of the object (other) does not match the name on the URL (existing)",
        },
        Case {
            name: "label selector that does not parse",
            method: "GET",
            path: format!("{cms}?labelSelector=a%20in%20b"),
            content_type: None,
            body: vec![],
            code: 400,
            reason: "BadRequest",
            message: "unable to parse requirement",
        },
        Case {
            name: "unsupported field selector",
            method: "GET",
            path: format!("{cms}?fieldSelector=spec.nope%3Dx"),
            content_type: None,
            body: vec![],
            code: 400,
            reason: "BadRequest",
            message: "field label not supported: spec.nope",
        },
        Case {
            name: "invalid resourceVersion",
            method: "GET",
            path: format!("{cms}?resourceVersion=abc"),
            content_type: None,
            body: vec![],
            code: 400,
            reason: "BadRequest",
            message: "invalid resource version",
        },
        Case {
            name: "invalid continue token",
            method: "GET",
            path: format!("{cms}?limit=1&continue=garbage"),
            content_type: None,
            body: vec![],
            code: 400,
            reason: "BadRequest",
            message: "continue key is not valid",
        },
        Case {
            name: "method not allowed",
            method: "POST",
            path: format!("{cms}/existing"),
            content_type: Some("application/json"),
            body: obj(json!({})),
            code: 405,
            reason: "MethodNotAllowed",
            message: "does not allow this method",
        },
        Case {
            name: "invalid dryRun",
            method: "POST",
            path: format!("{cms}?dryRun=Maybe"),
            content_type: Some("application/json"),
            body: obj(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "dr"}})),
            code: 422,
            reason: "Invalid",
            message: "Unsupported value: \"Maybe\"",
        },
        Case {
            name: "invalid propagationPolicy",
            method: "DELETE",
            path: format!("{cms}/existing?propagationPolicy=Sometimes"),
            content_type: None,
            body: vec![],
            code: 422,
            reason: "Invalid",
            message: "Unsupported value: \"Sometimes\"",
        },
    ];
    for case in cases {
        let before = revision(&server);
        let ct = case.content_type;
        let body = if case.body.is_empty() {
            None
        } else {
            Some(case.body.as_slice())
        };
        let (code, text) = server.curl(case.method, &case.path, ct, body, None);
        let status: Value =
            serde_json::from_str(&text).unwrap_or_else(|_| panic!("{}: not a Status: {text}", case.name));
        assert_eq!(code, case.code, "{}: {text}", case.name);
        assert_eq!(status["kind"], "Status", "{}", case.name);
        assert_eq!(status["code"], case.code, "{}", case.name);
        assert_eq!(status["reason"], case.reason, "{}: {text}", case.name);
        let message = status["message"].as_str().unwrap_or("");
        assert!(
            message.contains(case.message),
            "{}: message {message:?} lacks {:?}",
            case.name,
            case.message
        );
        assert_eq!(revision(&server), before, "{} changed the store", case.name);
    }
    let (_, existing) = server.curl_json("GET", &format!("{cms}/existing"), None, None);
    assert_eq!(
        existing["data"]["a"], "1",
        "the object survived every bad request unchanged"
    );

    // Missing apiVersion and kind are taken from the URL, as kube-apiserver's decoder does.
    let (code, created) = server.curl_json(
        "POST",
        &cms,
        Some("application/json"),
        Some(br#"{"metadata":{"name":"untyped"}}"#),
    );
    assert_eq!(code, 201, "{created}");
    assert_eq!(
        (created["apiVersion"].as_str(), created["kind"].as_str()),
        (Some("v1"), Some("ConfigMap"))
    );

    // Without a token the request is system:anonymous, which RBAC forbids to list namespaces
    // (kube-apiserver's default --anonymous-auth=true); a wrong token is 401.
    let (code, text) = server.curl("GET", "/api/v1/namespaces", None, None, Some(""));
    assert_eq!(code, 403, "{text}");
    let (code, text) = server.curl("GET", "/api/v1/namespaces", None, None, Some("wrong-token"));
    assert_eq!(code, 401);
    let status: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        status,
        serde_json::json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "Unauthorized", "reason": "Unauthorized", "code": 401})
    );
    // Health endpoints answer without one.
    assert_eq!(server.curl("GET", "/readyz", None, None, Some("")).0, 200);
}

#[test]
fn anonymous_access_is_subject_to_rbac_and_can_be_turned_off() {
    let server = Server::start(&[]);
    let (code, text) = server.curl("GET", "/api/v1/namespaces/default", None, None, Some(""));
    assert_eq!(code, 403, "{text}");
    let (code, version) = server.curl("GET", "/version", None, None, Some(""));
    assert_eq!(code, 200);
    let version: serde_json::Value = serde_json::from_str(&version).unwrap();
    assert_eq!(version["gitVersion"], "v1.33.0-flotilla");
    assert_eq!(version["minor"], "33");
    // A binding to system:unauthenticated opens what it grants, at once.
    server
        .kubectl(&[
            "create",
            "clusterrole",
            "ns-reader",
            "--verb=get",
            "--resource=namespaces",
        ])
        .success();
    server
        .kubectl(&[
            "create",
            "clusterrolebinding",
            "anonymous-ns-reader",
            "--clusterrole=ns-reader",
            "--group=system:unauthenticated",
        ])
        .success();
    let (code, text) = server.curl("GET", "/api/v1/namespaces/default", None, None, Some(""));
    assert_eq!(code, 200, "{text}");

    let closed = Server::start(&["--anonymous-auth=false"]);
    for path in ["/readyz", "/version", "/api/v1/namespaces/default"] {
        assert_eq!(closed.curl("GET", path, None, None, Some("")).0, 401, "{path}");
    }
    assert_eq!(
        closed.curl("GET", "/readyz", None, None, None).0,
        200,
        "with the admin token"
    );
}
