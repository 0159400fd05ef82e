//! The review APIs clients ask authorization and authentication questions with, answered by
//! the same authorizer and authenticator that guard requests:
//! `authorization.k8s.io/v1` SelfSubjectAccessReview (`kubectl auth can-i`),
//! SubjectAccessReview, LocalSubjectAccessReview and SelfSubjectRulesReview
//! (`kubectl auth can-i --list`), and `authentication.k8s.io/v1` SelfSubjectReview
//! (`kubectl auth whoami`) and TokenReview. Each is create-only and stores nothing.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::auth::{MASTERS, User};
use crate::errors::{ApiError, ApiResult, Cause};
use crate::rbac::rules::{Attributes, PolicyRule};
use crate::rbac::{Decision, Index, authorize};

/// A review resource: (group, plural, kind, namespaced).
pub const RESOURCES: [(&str, &str, &str, bool); 6] = [
    (
        "authorization.k8s.io",
        "selfsubjectaccessreviews",
        "SelfSubjectAccessReview",
        false,
    ),
    (
        "authorization.k8s.io",
        "subjectaccessreviews",
        "SubjectAccessReview",
        false,
    ),
    (
        "authorization.k8s.io",
        "localsubjectaccessreviews",
        "LocalSubjectAccessReview",
        true,
    ),
    (
        "authorization.k8s.io",
        "selfsubjectrulesreviews",
        "SelfSubjectRulesReview",
        false,
    ),
    (
        "authentication.k8s.io",
        "selfsubjectreviews",
        "SelfSubjectReview",
        false,
    ),
    ("authentication.k8s.io", "tokenreviews", "TokenReview", false),
];

/// The kind served at `group`/`plural`, and whether it is namespaced.
pub fn kind_of(group: &str, plural: &str) -> Option<(&'static str, bool)> {
    RESOURCES
        .iter()
        .find(|(g, p, _, _)| *g == group && *p == plural)
        .map(|(_, _, kind, namespaced)| (*kind, *namespaced))
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The request a review's `spec` describes (exactly one of resourceAttributes and
/// nonResourceAttributes).
fn attributes_of(spec: &Value, group: &str, kind: &str) -> ApiResult<Attributes> {
    let resource = spec.get("resourceAttributes").filter(|v| !v.is_null());
    let non_resource = spec.get("nonResourceAttributes").filter(|v| !v.is_null());
    let s = |v: &Value, field: &str| v[field].as_str().unwrap_or_default().to_owned();
    match (resource, non_resource) {
        (Some(r), None) => Ok(Attributes {
            resource_request: true,
            verb: s(r, "verb"),
            api_group: s(r, "group"),
            api_version: s(r, "version"),
            namespace: s(r, "namespace"),
            resource: s(r, "resource"),
            subresource: s(r, "subresource"),
            name: s(r, "name"),
            path: String::new(),
        }),
        (None, Some(n)) => Ok(Attributes {
            verb: s(n, "verb"),
            path: s(n, "path"),
            ..Attributes::default()
        }),
        (resource, _) => Err(ApiError::invalid(
            group,
            kind,
            "",
            vec![Cause::invalid(
                if resource.is_some() {
                    "spec.nonResourceAttributes"
                } else {
                    "spec.resourceAttributes"
                },
                spec,
                "exactly one of nonResourceAttributes or resourceAttributes must be specified",
            )],
        )),
    }
}

fn status_of(decision: &Decision) -> Value {
    match decision {
        Decision::Allow(reason) => {
            let mut status = json!({"allowed": true});
            if !reason.is_empty() {
                status["reason"] = json!(reason);
            }
            status
        }
        Decision::Deny(reason) => {
            let mut status = json!({"allowed": false});
            if !reason.is_empty() {
                status["reason"] = json!(reason);
            }
            status
        }
    }
}

/// A rule as SelfSubjectRulesReview lists it.
fn resource_rule(rule: &PolicyRule) -> Value {
    let mut out = json!({"verbs": rule.verbs, "apiGroups": rule.api_groups, "resources": rule.resources});
    if !rule.resource_names.is_empty() {
        out["resourceNames"] = json!(rule.resource_names);
    }
    out
}

/// Answers a review: `body` is the posted object, `user` the requester, `namespace` the URL's
/// (LocalSubjectAccessReview), `token_review` authenticates a TokenReview's token.
pub fn answer(
    index: &Index,
    user: &User,
    group: &str,
    plural: &str,
    namespace: Option<&str>,
    body: &Value,
    token_review: impl FnOnce(&str, &[String]) -> Result<User, String>,
) -> ApiResult<Value> {
    let (kind, _) = kind_of(group, plural).ok_or_else(ApiError::not_found_path)?;
    if body["kind"].as_str().is_some_and(|k| !k.is_empty() && k != kind) {
        return Err(ApiError::bad_request(format!(
            "the body is a {}, not a {kind}",
            body["kind"].as_str().unwrap_or_default()
        )));
    }
    let spec = body.get("spec").cloned().unwrap_or_else(|| json!({}));
    let status = match kind {
        "SelfSubjectAccessReview" => {
            let attrs = attributes_of(&spec, group, kind)?;
            status_of(&authorize(index, user, &attrs))
        }
        "SubjectAccessReview" | "LocalSubjectAccessReview" => {
            let mut attrs = attributes_of(&spec, group, kind)?;
            if kind == "LocalSubjectAccessReview" {
                let ns = namespace.unwrap_or_default();
                if !attrs.resource_request && attrs.namespace.is_empty() {
                    attrs.namespace = ns.to_owned();
                }
                if attrs.resource_request && attrs.namespace != ns {
                    return Err(ApiError::invalid(
                        group,
                        kind,
                        "",
                        vec![Cause::invalid(
                            "spec.resourceAttributes.namespace",
                            &json!(attrs.namespace),
                            "must match metadata.namespace",
                        )],
                    ));
                }
            }
            let subject = User {
                name: spec["user"].as_str().unwrap_or_default().to_owned(),
                uid: spec["uid"].as_str().unwrap_or_default().to_owned(),
                groups: strings(&spec["groups"]),
                extra: serde_json::from_value::<BTreeMap<String, Vec<String>>>(spec["extra"].clone())
                    .unwrap_or_default(),
            };
            if subject.name.is_empty() && subject.groups.is_empty() {
                return Err(ApiError::invalid(
                    group,
                    kind,
                    "",
                    vec![Cause::invalid(
                        "spec.user",
                        &json!(""),
                        "at least one of user or group must be specified",
                    )],
                ));
            }
            status_of(&authorize(index, &subject, &attrs))
        }
        "SelfSubjectRulesReview" => {
            let ns = spec["namespace"].as_str().unwrap_or_default();
            let mut resource_rules = Vec::new();
            let mut non_resource_rules = Vec::new();
            if user.in_group(MASTERS) {
                resource_rules.push(json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}));
                non_resource_rules.push(json!({"verbs": ["*"], "nonResourceURLs": ["*"]}));
            }
            let (rules, errors) = index.rules_for(user, ns);
            for rule in &rules {
                if !rule.resources.is_empty() {
                    resource_rules.push(resource_rule(rule));
                }
                if !rule.non_resource_urls.is_empty() {
                    non_resource_rules
                        .push(json!({"verbs": rule.verbs, "nonResourceURLs": rule.non_resource_urls}));
                }
            }
            let mut status = json!({
                "resourceRules": resource_rules,
                "nonResourceRules": non_resource_rules,
                "incomplete": false,
            });
            if !errors.is_empty() {
                status["evaluationError"] = json!(crate::rbac::aggregate(&errors));
            }
            status
        }
        "SelfSubjectReview" => json!({"userInfo": user.to_json()}),
        "TokenReview" => {
            let token = spec["token"].as_str().unwrap_or_default();
            let audiences = strings(&spec["audiences"]);
            match token_review(token, &audiences) {
                Ok(reviewed) => {
                    json!({"authenticated": true, "user": reviewed.to_json(), "audiences": audiences})
                }
                Err(error) => json!({"authenticated": false, "user": {}, "error": error}),
            }
        }
        _ => return Err(ApiError::not_found_path()),
    };
    let mut out = json!({
        "kind": kind,
        "apiVersion": format!("{group}/v1"),
        "metadata": {"creationTimestamp": null},
        "spec": spec,
        "status": status,
    });
    if let Some(ns) = namespace {
        out["metadata"]["namespace"] = json!(ns);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn index() -> Index {
        Index::from_objects([
            json!({"kind": "ClusterRole", "metadata": {"name": "reader"},
                "rules": [{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]},
                          {"verbs": ["get"], "nonResourceURLs": ["/healthz"]}]}),
            json!({"kind": "RoleBinding", "metadata": {"name": "b", "namespace": "ns"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "reader"},
                "subjects": [{"kind": "User", "name": "bob"}]}),
        ])
    }

    fn bob() -> User {
        User {
            name: "bob".into(),
            groups: vec!["system:authenticated".into()],
            ..User::default()
        }
    }

    fn no_tokens(_: &str, _: &[String]) -> Result<User, String> {
        Err("no".into())
    }

    fn pods(verb: &str, ns: &str) -> Value {
        json!({"spec": {"resourceAttributes": {"verb": verb, "resource": "pods", "namespace": ns}}})
    }

    #[test]
    fn access_reviews_answer_with_the_authorizer() {
        let index = index();
        let ssar = |body: &Value| {
            answer(
                &index,
                &bob(),
                "authorization.k8s.io",
                "selfsubjectaccessreviews",
                None,
                body,
                no_tokens,
            )
            .unwrap()
        };
        let yes = ssar(&pods("list", "ns"));
        assert_eq!(yes["status"]["allowed"], true);
        assert_eq!(
            yes["status"]["reason"],
            "RBAC: allowed by RoleBinding \"b/ns\" of ClusterRole \"reader\" to User \"bob\""
        );
        assert_eq!(yes["kind"], "SelfSubjectAccessReview");
        assert_eq!(ssar(&pods("delete", "ns"))["status"], json!({"allowed": false}));
        assert_eq!(ssar(&pods("list", "other"))["status"]["allowed"], false);
        let health = json!({"spec": {"nonResourceAttributes": {"verb": "get", "path": "/healthz"}}});
        assert_eq!(
            ssar(&health)["status"]["allowed"],
            false,
            "the role is bound in a namespace only"
        );

        let sar = |body: Value| {
            answer(
                &index,
                &bob(),
                "authorization.k8s.io",
                "subjectaccessreviews",
                None,
                &body,
                no_tokens,
            )
        };
        let mut about_bob = pods("get", "ns");
        about_bob["spec"]["user"] = json!("bob");
        assert_eq!(sar(about_bob).unwrap()["status"]["allowed"], true);
        let mut masters = pods("delete", "kube-system");
        masters["spec"]["groups"] = json!(["system:masters"]);
        assert_eq!(sar(masters).unwrap()["status"], json!({"allowed": true}));
        assert_eq!(
            sar(pods("get", "ns")).unwrap_err().code,
            422,
            "no user and no group"
        );
        let both = json!({"spec": {"user": "bob", "resourceAttributes": {"verb": "get"}, "nonResourceAttributes": {"verb": "get"}}});
        assert_eq!(sar(both).unwrap_err().code, 422);
        let neither = json!({"spec": {"user": "bob"}});
        assert_eq!(sar(neither).unwrap_err().code, 422);

        let lsar = |ns: &str, body: Value| {
            answer(
                &index,
                &bob(),
                "authorization.k8s.io",
                "localsubjectaccessreviews",
                Some(ns),
                &body,
                no_tokens,
            )
        };
        let mut local = pods("get", "ns");
        local["spec"]["user"] = json!("bob");
        assert_eq!(lsar("ns", local.clone()).unwrap()["status"]["allowed"], true);
        assert_eq!(lsar("ns", local.clone()).unwrap()["metadata"]["namespace"], "ns");
        assert_eq!(lsar("elsewhere", local).unwrap_err().code, 422);
    }

    #[test]
    fn rules_reviews_list_what_applies_in_the_namespace() {
        let index = index();
        let review = |user: &User, ns: &str| {
            answer(
                &index,
                user,
                "authorization.k8s.io",
                "selfsubjectrulesreviews",
                None,
                &json!({"spec": {"namespace": ns}}),
                no_tokens,
            )
            .unwrap()["status"]
                .clone()
        };
        let status = review(&bob(), "ns");
        assert_eq!(
            status["resourceRules"],
            json!([{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]}])
        );
        assert_eq!(
            status["nonResourceRules"],
            json!([{"verbs": ["get"], "nonResourceURLs": ["/healthz"]}])
        );
        assert_eq!(status["incomplete"], false);
        assert_eq!(review(&bob(), "other")["resourceRules"], json!([]));
        let admin = User {
            name: "admin".into(),
            groups: vec![MASTERS.into()],
            ..User::default()
        };
        assert_eq!(review(&admin, "x")["resourceRules"][0]["verbs"], json!(["*"]));
    }

    #[test]
    fn authentication_reviews() {
        let index = index();
        let me = answer(
            &index,
            &bob(),
            "authentication.k8s.io",
            "selfsubjectreviews",
            None,
            &json!({}),
            no_tokens,
        )
        .unwrap();
        assert_eq!(
            me["status"]["userInfo"],
            json!({"username": "bob", "groups": ["system:authenticated"]})
        );
        let good = answer(
            &index,
            &bob(),
            "authentication.k8s.io",
            "tokenreviews",
            None,
            &json!({"spec": {"token": "t"}}),
            |token, _| {
                assert_eq!(token, "t");
                Ok(bob())
            },
        )
        .unwrap();
        assert_eq!(good["status"]["authenticated"], true);
        assert_eq!(good["status"]["user"]["username"], "bob");
        let bad = answer(
            &index,
            &bob(),
            "authentication.k8s.io",
            "tokenreviews",
            None,
            &json!({"spec": {"token": "t"}}),
            no_tokens,
        )
        .unwrap();
        assert_eq!(bad["status"]["authenticated"], false);
        let wrong_kind = answer(
            &index,
            &bob(),
            "authentication.k8s.io",
            "selfsubjectreviews",
            None,
            &json!({"kind": "TokenReview"}),
            no_tokens,
        );
        assert_eq!(wrong_kind.unwrap_err().code, 400);
    }
}
