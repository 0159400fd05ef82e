//! RBAC policy rules: what a request asks for ([`Attributes`]), whether one rule allows it
//! (kube's `RuleAllows`), and whether a set of rules covers another (kube's `Covers`, used by
//! escalation prevention). Pure functions; the authorizer and the reviews build on them.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

/// `*`: every verb, group, resource or non-resource URL.
pub const ALL: &str = "*";

/// One `rules[]` entry of a Role or ClusterRole.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyRule {
    /// Verbs (`get`, `list`, ... or `*`).
    #[serde(default)]
    pub verbs: Vec<String>,
    /// API groups (`""` is core, `*` any).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub api_groups: Vec<String>,
    /// Resources, optionally with a subresource (`pods/log`, `*/status`, `*`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<String>,
    /// Object names the rule is limited to (empty: any).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_names: Vec<String>,
    /// Non-resource paths (`/healthz`, `/apis/*`, `*`).
    #[serde(default, rename = "nonResourceURLs", skip_serializing_if = "Vec::is_empty")]
    pub non_resource_urls: Vec<String>,
}

/// What a request asks to do, as kube-apiserver's authorizers see it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Attributes {
    /// Whether the request is for an API resource (else a non-resource path).
    pub resource_request: bool,
    /// Kube verb (`list`, `watch`, `create`, ...) or the lowercase HTTP method for paths.
    pub verb: String,
    /// API group (`""` for core).
    pub api_group: String,
    /// API version.
    pub api_version: String,
    /// Namespace (`""` for cluster scope).
    pub namespace: String,
    /// Resource (`pods`).
    pub resource: String,
    /// Subresource (`status`, `log`, `token`).
    pub subresource: String,
    /// Object name (`""` for collections).
    pub name: String,
    /// The URL path (non-resource requests).
    pub path: String,
}

impl Attributes {
    /// `resource` or `resource/subresource`.
    pub fn combined_resource(&self) -> String {
        if self.subresource.is_empty() {
            self.resource.clone()
        } else {
            format!("{}/{}", self.resource, self.subresource)
        }
    }
}

fn has(set: &[String], element: &str) -> bool {
    set.iter().any(|s| s == element)
}

/// Whether the rule names `verb` (or `*`).
pub fn verb_matches(rule: &PolicyRule, verb: &str) -> bool {
    rule.verbs.iter().any(|v| v == ALL || v == verb)
}

/// Whether the rule names `group` (or `*`).
pub fn api_group_matches(rule: &PolicyRule, group: &str) -> bool {
    rule.api_groups.iter().any(|g| g == ALL || g == group)
}

/// Whether the rule names the resource: `*`, exactly `resource[/subresource]`, or
/// `*/subresource`. (`pods/*` is not a wildcard in RBAC.)
pub fn resource_matches(rule: &PolicyRule, combined: &str, subresource: &str) -> bool {
    rule.resources.iter().any(|r| {
        r == ALL
            || r == combined
            || (!subresource.is_empty() && r.strip_prefix("*/").is_some_and(|sub| sub == subresource))
    })
}

/// Whether the rule's resourceNames (empty: any) include `name`.
pub fn resource_name_matches(rule: &PolicyRule, name: &str) -> bool {
    rule.resource_names.is_empty() || has(&rule.resource_names, name)
}

/// Whether the rule's nonResourceURLs include `path`: `*`, exactly, or a `prefix*`.
pub fn non_resource_url_matches(rule: &PolicyRule, path: &str) -> bool {
    rule.non_resource_urls.iter().any(|u| {
        u == ALL
            || u == path
            || u.strip_suffix('*')
                .is_some_and(|prefix| path.starts_with(prefix.trim_end_matches('*')))
    })
}

/// Whether `rule` allows the request (kube's `RuleAllows`).
pub fn rule_allows(attrs: &Attributes, rule: &PolicyRule) -> bool {
    if attrs.resource_request {
        verb_matches(rule, &attrs.verb)
            && api_group_matches(rule, &attrs.api_group)
            && resource_matches(rule, &attrs.combined_resource(), &attrs.subresource)
            && resource_name_matches(rule, &attrs.name)
    } else {
        verb_matches(rule, &attrs.verb) && non_resource_url_matches(rule, &attrs.path)
    }
}

/// Splits a rule into rules of one verb, one group, one resource and at most one name (kube's
/// `BreakdownRule`): the unit escalation checks compare.
pub fn breakdown(rule: &PolicyRule) -> Vec<PolicyRule> {
    let mut out = Vec::new();
    for group in &rule.api_groups {
        for resource in &rule.resources {
            for verb in &rule.verbs {
                let one = |names: Vec<String>| PolicyRule {
                    verbs: vec![verb.clone()],
                    api_groups: vec![group.clone()],
                    resources: vec![resource.clone()],
                    resource_names: names,
                    non_resource_urls: vec![],
                };
                if rule.resource_names.is_empty() {
                    out.push(one(vec![]));
                } else {
                    out.extend(rule.resource_names.iter().map(|n| one(vec![n.clone()])));
                }
            }
        }
    }
    for url in &rule.non_resource_urls {
        for verb in &rule.verbs {
            out.push(PolicyRule {
                verbs: vec![verb.clone()],
                non_resource_urls: vec![url.clone()],
                ..PolicyRule::default()
            });
        }
    }
    out
}

fn has_all(set: &[String], wanted: &[String]) -> bool {
    wanted.iter().all(|w| has(set, w))
}

fn resources_cover(owner: &[String], wanted: &[String]) -> bool {
    if has(owner, ALL) || has_all(owner, wanted) {
        return true;
    }
    wanted.iter().all(|path| {
        has(owner, path)
            || path
                .split_once('/')
                .is_some_and(|(_, sub)| has(owner, &format!("*/{sub}")))
    })
}

fn url_covers(owner: &str, path: &str) -> bool {
    owner == path
        || owner
            .strip_suffix('*')
            .is_some_and(|prefix| path.starts_with(prefix.trim_end_matches('*')))
}

/// Whether `owner` covers `sub` (a rule from [`breakdown`]): kube's `ruleCovers`.
pub fn rule_covers(owner: &PolicyRule, sub: &PolicyRule) -> bool {
    let verbs = has(&owner.verbs, ALL) || has_all(&owner.verbs, &sub.verbs);
    let groups = has(&owner.api_groups, ALL) || has_all(&owner.api_groups, &sub.api_groups);
    let resources = resources_cover(&owner.resources, &sub.resources);
    let urls = sub
        .non_resource_urls
        .iter()
        .all(|p| owner.non_resource_urls.iter().any(|o| url_covers(o, p)));
    let names = if sub.resource_names.is_empty() {
        owner.resource_names.is_empty()
    } else {
        owner.resource_names.is_empty() || has_all(&owner.resource_names, &sub.resource_names)
    };
    verbs && groups && resources && urls && names
}

/// Whether `owner` covers every rule of `wanted`; else the pieces it does not cover.
pub fn covers(owner: &[PolicyRule], wanted: &[PolicyRule]) -> Result<(), Vec<PolicyRule>> {
    let missing: Vec<PolicyRule> = wanted
        .iter()
        .flat_map(breakdown)
        .filter(|sub| !owner.iter().any(|o| rule_covers(o, sub)))
        .collect();
    if missing.is_empty() { Ok(()) } else { Err(missing) }
}

/// Merges broken-down rules that differ only in their verb (kube's `CompactRules`), so an
/// escalation message lists `Verbs:["get" "list"]` once per resource.
pub fn compact(rules: &[PolicyRule]) -> Vec<PolicyRule> {
    let mut out: Vec<PolicyRule> = Vec::new();
    for rule in rules {
        let simple = rule.resources.len() == 1
            && rule.api_groups.len() == 1
            && rule.resource_names.len() <= 1
            && rule.non_resource_urls.is_empty();
        if simple
            && let Some(existing) = out.iter_mut().find(|o| {
                o.resources == rule.resources
                    && o.api_groups == rule.api_groups
                    && o.resource_names == rule.resource_names
                    && o.non_resource_urls.is_empty()
            })
        {
            for verb in &rule.verbs {
                if !has(&existing.verbs, verb) {
                    existing.verbs.push(verb.clone());
                }
            }
            continue;
        }
        out.push(rule.clone());
    }
    out
}

/// A string list as Go's `%q` prints it: `["a" "b"]`.
pub fn go_quoted_list(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|i| format!("{i:?}")).collect();
    format!("[{}]", quoted.join(" "))
}

/// The compact form kube-apiserver prints in escalation errors:
/// `{APIGroups:["apps"], Resources:["deployments"], Verbs:["get" "list"]}`.
pub fn compact_string(rule: &PolicyRule) -> String {
    let mut parts = Vec::new();
    if !rule.api_groups.is_empty() {
        parts.push(format!("APIGroups:{}", go_quoted_list(&rule.api_groups)));
    }
    if !rule.resources.is_empty() {
        parts.push(format!("Resources:{}", go_quoted_list(&rule.resources)));
    }
    if !rule.non_resource_urls.is_empty() {
        parts.push(format!(
            "NonResourceURLs:{}",
            go_quoted_list(&rule.non_resource_urls)
        ));
    }
    if !rule.resource_names.is_empty() {
        parts.push(format!("ResourceNames:{}", go_quoted_list(&rule.resource_names)));
    }
    if !rule.verbs.is_empty() {
        parts.push(format!("Verbs:{}", go_quoted_list(&rule.verbs)));
    }
    format!("{{{}}}", parts.join(", "))
}

/// The missing rights of an escalation attempt, one compact line each, sorted and unique.
pub fn describe_missing(missing: &[PolicyRule]) -> Vec<String> {
    compact(missing)
        .iter()
        .map(compact_string)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(verbs: &[&str], groups: &[&str], resources: &[&str], names: &[&str]) -> PolicyRule {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect();
        PolicyRule {
            verbs: v(verbs),
            api_groups: v(groups),
            resources: v(resources),
            resource_names: v(names),
            non_resource_urls: vec![],
        }
    }

    fn urls(verbs: &[&str], urls: &[&str]) -> PolicyRule {
        PolicyRule {
            verbs: verbs.iter().map(|x| x.to_string()).collect(),
            non_resource_urls: urls.iter().map(|x| x.to_string()).collect(),
            ..PolicyRule::default()
        }
    }

    fn request(verb: &str, group: &str, resource: &str, sub: &str, name: &str) -> Attributes {
        Attributes {
            resource_request: true,
            verb: verb.into(),
            api_group: group.into(),
            api_version: "v1".into(),
            namespace: "ns".into(),
            resource: resource.into(),
            subresource: sub.into(),
            name: name.into(),
            path: String::new(),
        }
    }

    fn path(verb: &str, path: &str) -> Attributes {
        Attributes {
            verb: verb.into(),
            path: path.into(),
            ..Attributes::default()
        }
    }

    #[test]
    fn resource_rules_match_like_kube() {
        let pods_get = rule(&["get"], &[""], &["pods"], &[]);
        let any = rule(&["*"], &["*"], &["*"], &[]);
        let status_any = rule(&["update"], &["*"], &["*/status"], &[]);
        let pods_star = rule(&["get"], &[""], &["pods/*"], &[]);
        let pods_log = rule(&["get"], &[""], &["pods/log"], &[]);
        let named = rule(&["get", "update"], &["apps"], &["deployments"], &["web", "api"]);
        let leases = rule(&["get"], &["coordination.k8s.io"], &["leases"], &["a"]);
        // (rule, request, allowed)
        let table: Vec<(&PolicyRule, Attributes, bool)> = vec![
            (&pods_get, request("get", "", "pods", "", "p"), true),
            (&pods_get, request("get", "", "pods", "", ""), true),
            (&pods_get, request("list", "", "pods", "", ""), false),
            (&pods_get, request("get", "apps", "pods", "", "p"), false),
            (&pods_get, request("get", "", "services", "", "p"), false),
            (&pods_get, request("get", "", "pods", "log", "p"), false),
            (&pods_get, request("get", "", "pods", "status", "p"), false),
            (&any, request("deletecollection", "x.io", "widgets", "", ""), true),
            (&any, request("get", "", "pods", "log", "p"), true),
            (
                &any,
                request("escalate", "rbac.authorization.k8s.io", "roles", "", "r"),
                true,
            ),
            (
                &status_any,
                request("update", "apps", "deployments", "status", "d"),
                true,
            ),
            (
                &status_any,
                request("update", "apps", "deployments", "", "d"),
                false,
            ),
            (
                &status_any,
                request("update", "apps", "deployments", "scale", "d"),
                false,
            ),
            (
                &status_any,
                request("get", "apps", "deployments", "status", "d"),
                false,
            ),
            // `pods/*` is not a wildcard: only `*/sub` is.
            (&pods_star, request("get", "", "pods", "log", "p"), false),
            (&pods_star, request("get", "", "pods", "*", "p"), true),
            (&pods_log, request("get", "", "pods", "log", "p"), true),
            (&pods_log, request("get", "", "pods", "", "p"), false),
            (&named, request("get", "apps", "deployments", "", "web"), true),
            (&named, request("update", "apps", "deployments", "", "api"), true),
            (&named, request("get", "apps", "deployments", "", "db"), false),
            // A list has no name: resourceNames never allow it.
            (&named, request("list", "apps", "deployments", "", ""), false),
            (&named, request("get", "apps", "deployments", "", ""), false),
            (
                &leases,
                request("get", "coordination.k8s.io", "leases", "", "a"),
                true,
            ),
            // Resource rules never match paths, and vice versa.
            (&any, path("get", "/healthz"), false),
        ];
        for (i, (rule, attrs, want)) in table.iter().enumerate() {
            assert_eq!(rule_allows(attrs, rule), *want, "case {i}: {rule:?} vs {attrs:?}");
        }
    }

    #[test]
    fn non_resource_rules_match_like_kube() {
        let health = urls(&["get"], &["/healthz", "/version", "/version/"]);
        let apis = urls(&["get"], &["/apis/*", "/api"]);
        let everything = urls(&["*"], &["*"]);
        let table: Vec<(&PolicyRule, Attributes, bool)> = vec![
            (&health, path("get", "/healthz"), true),
            (&health, path("head", "/healthz"), false),
            (&health, path("get", "/healthz/etcd"), false),
            (&health, path("get", "/version/"), true),
            (&health, path("get", "/livez"), false),
            (&apis, path("get", "/apis/apps/v1"), true),
            (&apis, path("get", "/apis/"), true),
            (&apis, path("get", "/apis"), false),
            (&apis, path("get", "/api"), true),
            (&apis, path("get", "/api/v1"), false),
            (&everything, path("post", "/anything/at/all"), true),
            (&health, request("get", "", "healthz", "", ""), false),
        ];
        for (i, (rule, attrs, want)) in table.iter().enumerate() {
            assert_eq!(rule_allows(attrs, rule), *want, "case {i}: {rule:?} vs {attrs:?}");
        }
    }

    #[test]
    fn breakdown_is_one_verb_group_resource_name_each() {
        let r = rule(&["get", "list"], &["", "apps"], &["pods"], &["a", "b"]);
        let parts = breakdown(&r);
        assert_eq!(parts.len(), 2 * 2 * 2);
        assert!(parts.iter().all(|p| p.verbs.len() == 1
            && p.api_groups.len() == 1
            && p.resources.len() == 1
            && p.resource_names.len() == 1));
        let u = urls(&["get", "post"], &["/a", "/b"]);
        assert_eq!(breakdown(&u).len(), 4);
        assert!(breakdown(&PolicyRule::default()).is_empty());
    }

    #[test]
    fn covers_like_kube() {
        let admin = vec![rule(&["*"], &["*"], &["*"], &[]), urls(&["*"], &["*"])];
        let reader = vec![rule(&["get", "list", "watch"], &["*"], &["*"], &[])];
        let status = vec![rule(&["update"], &[""], &["*/status"], &[])];
        let named = vec![rule(&["get"], &[""], &["configmaps"], &["a", "b"])];
        let paths = vec![urls(&["get"], &["/apis/*"])];
        // (owner, wanted, covered)
        let table: Vec<(&Vec<PolicyRule>, PolicyRule, bool)> = vec![
            (
                &admin,
                rule(
                    &["escalate", "bind"],
                    &["rbac.authorization.k8s.io"],
                    &["roles"],
                    &[],
                ),
                true,
            ),
            (&admin, urls(&["get"], &["/healthz"]), true),
            (&reader, rule(&["get"], &["apps"], &["deployments"], &[]), true),
            (
                &reader,
                rule(&["get", "delete"], &["apps"], &["deployments"], &[]),
                false,
            ),
            (&reader, rule(&["*"], &[""], &["pods"], &[]), false),
            (&reader, urls(&["get"], &["/healthz"]), false),
            (&status, rule(&["update"], &[""], &["pods/status"], &[]), true),
            (&status, rule(&["update"], &[""], &["pods"], &[]), false),
            (
                &status,
                rule(&["update"], &["apps"], &["deployments/status"], &[]),
                false,
            ),
            (&named, rule(&["get"], &[""], &["configmaps"], &["a"]), true),
            (&named, rule(&["get"], &[""], &["configmaps"], &["c"]), false),
            // A rule without names grants more than any named rule.
            (&named, rule(&["get"], &[""], &["configmaps"], &[]), false),
            (&reader, rule(&["get"], &[""], &["configmaps"], &["a"]), true),
            (&paths, urls(&["get"], &["/apis/apps"]), true),
            (&paths, urls(&["get"], &["/apis/*"]), true),
            (&paths, urls(&["get"], &["/api"]), false),
            (&paths, urls(&["get"], &["*"]), false),
        ];
        for (i, (owner, wanted, want)) in table.iter().enumerate() {
            assert_eq!(
                covers(owner, std::slice::from_ref(wanted)).is_ok(),
                *want,
                "case {i}: {owner:?} covers {wanted:?}"
            );
        }
    }

    #[test]
    fn missing_rights_are_described_compactly() {
        let owner = vec![rule(&["get"], &[""], &["pods"], &[])];
        let wanted = vec![
            rule(&["get", "list", "watch"], &[""], &["pods", "secrets"], &[]),
            urls(&["get"], &["/metrics"]),
        ];
        let missing = covers(&owner, &wanted).unwrap_err();
        assert_eq!(
            describe_missing(&missing),
            vec![
                r#"{APIGroups:[""], Resources:["pods"], Verbs:["list" "watch"]}"#,
                r#"{APIGroups:[""], Resources:["secrets"], Verbs:["get" "list" "watch"]}"#,
                r#"{NonResourceURLs:["/metrics"], Verbs:["get"]}"#,
            ]
        );
        let named = rule(&["get"], &["apps"], &["deployments"], &["web"]);
        assert_eq!(
            compact_string(&named),
            r#"{APIGroups:["apps"], Resources:["deployments"], ResourceNames:["web"], Verbs:["get"]}"#
        );
    }

    #[test]
    fn rules_round_trip_kube_json() {
        let json = serde_json::json!({
            "apiGroups": [""], "resources": ["pods"], "verbs": ["get"], "resourceNames": ["a"]
        });
        let parsed: PolicyRule = serde_json::from_value(json.clone()).unwrap_or_default();
        assert_eq!(parsed, rule(&["get"], &[""], &["pods"], &["a"]));
        let paths: PolicyRule =
            serde_json::from_value(serde_json::json!({"nonResourceURLs": ["/x"], "verbs": ["get"]}))
                .unwrap_or_default();
        assert_eq!(paths, urls(&["get"], &["/x"]));
        assert_eq!(
            serde_json::to_value(&paths).ok(),
            Some(serde_json::json!({"nonResourceURLs": ["/x"], "verbs": ["get"]}))
        );
    }
}
