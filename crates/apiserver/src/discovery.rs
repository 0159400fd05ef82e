//! Discovery documents: `/version`, legacy `/api` `/apis` resource lists, and aggregated
//! discovery (`apidiscovery.k8s.io` v2 and v2beta1) when the client asks for it. Besides the
//! catalog's resources they list the create-only review APIs (`authorization.k8s.io`,
//! `authentication.k8s.io`) and the `serviceaccounts/token` subresource.

use serde_json::{Value, json};

use crate::resources::{Catalog, ResourceDef};

/// The `/version` document (Kubernetes v1.33).
pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": "33",
        "gitVersion": "v1.33.0-flotilla",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2025-04-23T00:00:00Z",
        "goVersion": "go1.24.2",
        "compiler": "gc",
        "platform": format!("{}/{}", std::env::consts::OS, go_arch()),
        "emulationMajor": "1",
        "emulationMinor": "33",
        "minCompatibilityMajor": "1",
        "minCompatibilityMinor": "32",
    })
}

fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

/// `/api`.
pub fn api_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    })
}

/// The groups that only serve reviews (not in the catalog: nothing is stored).
fn review_groups() -> Vec<&'static str> {
    let mut groups: Vec<&str> = crate::reviews::RESOURCES.iter().map(|r| r.0).collect();
    groups.dedup();
    groups
}

fn versions_of(catalog: &Catalog, group: &str) -> Option<Vec<String>> {
    catalog
        .versions(group)
        .cloned()
        .or_else(|| review_groups().contains(&group).then(|| vec!["v1".to_owned()]))
}

fn review_resources(group: &str) -> impl Iterator<Item = (&'static str, &'static str, bool)> + '_ {
    crate::reviews::RESOURCES
        .iter()
        .filter(move |r| r.0 == group)
        .map(|r| (r.1, r.2, r.3))
}

/// The `serviceaccounts/token` subresource entry of `/api/v1`.
fn token_subresource() -> Value {
    json!({"name": "serviceaccounts/token", "singularName": "", "namespaced": true,
        "group": "authentication.k8s.io", "version": "v1", "kind": "TokenRequest", "verbs": ["create"]})
}

fn group_json(catalog: &Catalog, group: &str) -> Option<Value> {
    let versions = versions_of(catalog, group)?;
    let list: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
        .collect();
    let preferred = list.first().cloned()?;
    Some(json!({"name": group, "versions": list, "preferredVersion": preferred}))
}

/// `/apis`.
pub fn api_group_list(catalog: &Catalog) -> Value {
    let groups: Vec<Value> = catalog
        .groups()
        .map(|(g, _)| g.as_str())
        .chain(review_groups())
        .filter_map(|g| group_json(catalog, g))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/<group>`.
pub fn api_group(catalog: &Catalog, group: &str) -> Option<Value> {
    let mut g = group_json(catalog, group)?;
    g["kind"] = json!("APIGroup");
    g["apiVersion"] = json!("v1");
    Some(g)
}

/// `/api/v1` or `/apis/<group>/<version>`.
pub fn resource_list(catalog: &Catalog, group: &str, version: &str) -> Option<Value> {
    let defs = catalog.resources(group, version);
    let mut resources = Vec::new();
    if version == "v1" {
        for (plural, kind, namespaced) in review_resources(group) {
            resources.push(
                json!({"name": plural, "singularName": kind.to_lowercase(), "namespaced": namespaced,
                "kind": kind, "verbs": ["create"]}),
            );
        }
    }
    if defs.is_empty() && resources.is_empty() {
        return None;
    }
    for d in &defs {
        let mut r = json!({
            "name": d.plural,
            "singularName": d.singular,
            "namespaced": d.namespaced,
            "kind": d.kind,
            "verbs": d.verbs(),
        });
        if !d.short_names.is_empty() {
            r["shortNames"] = json!(d.short_names);
        }
        if !d.categories.is_empty() {
            r["categories"] = json!(d.categories);
        }
        resources.push(r);
        if d.status {
            resources.push(
                json!({"name": format!("{}/status", d.plural), "singularName": "", "namespaced": d.namespaced,
                "kind": d.kind, "verbs": ["get", "patch", "update"]}),
            );
        }
        if d.scale.is_some() {
            resources.push(json!({"name": format!("{}/scale", d.plural), "singularName": "", "namespaced": d.namespaced,
                "group": "autoscaling", "version": "v1", "kind": "Scale", "verbs": ["get", "patch", "update"]}));
        }
        if d.group.is_empty() && d.plural == "namespaces" {
            resources.push(
                json!({"name": "namespaces/finalize", "singularName": "", "namespaced": false,
                "kind": "Namespace", "verbs": ["update"]}),
            );
        }
        if d.group.is_empty() && d.plural == "serviceaccounts" {
            resources.push(token_subresource());
        }
    }
    let gv = if group.is_empty() {
        version.to_owned()
    } else {
        format!("{group}/{version}")
    };
    Some(json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}))
}

/// Which aggregated discovery version the Accept header asks for, if any.
pub fn aggregated_version(accept: &str) -> Option<&'static str> {
    // Clients list preferences in order; serve the first aggregated form offered.
    for part in accept.split(',') {
        if part.contains("as=APIGroupDiscoveryList") && part.contains("g=apidiscovery.k8s.io") {
            if part.contains("v=v2beta1") {
                return Some("v2beta1");
            }
            if part.contains("v=v2") {
                return Some("v2");
            }
        }
    }
    None
}

fn aggregated_resource(d: &ResourceDef) -> Value {
    let mut r = json!({
        "resource": d.plural,
        "responseKind": {"group": d.group, "version": d.version, "kind": d.kind},
        "scope": if d.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": d.singular,
        "verbs": d.verbs(),
    });
    if !d.short_names.is_empty() {
        r["shortNames"] = json!(d.short_names);
    }
    if !d.categories.is_empty() {
        r["categories"] = json!(d.categories);
    }
    let mut subs = Vec::new();
    if d.status {
        subs.push(json!({"subresource": "status", "responseKind": {"group": d.group, "version": d.version, "kind": d.kind},
            "verbs": ["get", "patch", "update"]}));
    }
    if d.scale.is_some() {
        subs.push(json!({"subresource": "scale", "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
            "verbs": ["get", "patch", "update"]}));
    }
    if d.group.is_empty() && d.plural == "serviceaccounts" {
        subs.push(json!({"subresource": "token", "responseKind": {"group": "authentication.k8s.io", "version": "v1", "kind": "TokenRequest"},
            "verbs": ["create"]}));
    }
    if !subs.is_empty() {
        r["subresources"] = json!(subs);
    }
    r
}

/// Aggregated discovery for the core group (`/api`) or all named groups (`/apis`).
pub fn aggregated(catalog: &Catalog, core: bool, version: &str) -> Value {
    let groups: Vec<String> = if core {
        vec![String::new()]
    } else {
        catalog
            .groups()
            .map(|(g, _)| g.clone())
            .chain(review_groups().into_iter().map(str::to_owned))
            .collect()
    };
    let items: Vec<Value> = groups
        .iter()
        .filter_map(|g| {
            let versions = versions_of(catalog, g)?;
            let versions: Vec<Value> = versions
                .iter()
                .map(|v| {
                    let mut resources: Vec<Value> = catalog
                        .resources(g, v)
                        .iter()
                        .map(|d| aggregated_resource(d))
                        .collect();
                    if v == "v1" {
                        for (plural, kind, namespaced) in review_resources(g) {
                            resources.push(json!({
                                "resource": plural,
                                "responseKind": {"group": g, "version": "v1", "kind": kind},
                                "scope": if namespaced { "Namespaced" } else { "Cluster" },
                                "singularResource": kind.to_lowercase(),
                                "verbs": ["create"],
                            }));
                        }
                    }
                    json!({"version": v, "resources": resources, "freshness": "Current"})
                })
                .collect();
            Some(json!({"metadata": {"name": g}, "versions": versions}))
        })
        .collect();
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": format!("apidiscovery.k8s.io/{version}"),
        "metadata": {},
        "items": items,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn legacy_and_aggregated_discovery() {
        let catalog = Catalog::new(crate::builtin::definitions());
        let core = resource_list(&catalog, "", "v1").unwrap();
        let names: Vec<&str> = core["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect();
        assert!(
            names.contains(&"pods")
                && names.contains(&"pods/status")
                && names.contains(&"namespaces/finalize")
                && names.contains(&"serviceaccounts/token")
        );
        let authz = resource_list(&catalog, "authorization.k8s.io", "v1").unwrap();
        assert!(
            authz["resources"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["name"] == "selfsubjectaccessreviews" && r["verbs"] == json!(["create"]))
        );
        assert!(resource_list(&catalog, "authorization.k8s.io", "v2").is_none());
        assert_eq!(
            api_group(&catalog, "authentication.k8s.io").unwrap()["preferredVersion"]["groupVersion"],
            "authentication.k8s.io/v1"
        );
        let apps = api_group(&catalog, "apps").unwrap();
        assert_eq!(apps["preferredVersion"]["groupVersion"], "apps/v1");
        let list = api_group_list(&catalog);
        assert!(list["groups"].as_array().unwrap().iter().all(|g| g["name"] != ""));
        assert!(
            list["groups"]
                .as_array()
                .unwrap()
                .iter()
                .any(|g| g["name"] == "authorization.k8s.io")
        );
        let agg = aggregated(&catalog, false, "v2");
        let apps = agg["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["metadata"]["name"] == "apps")
            .unwrap();
        let deploy = apps["versions"][0]["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["resource"] == "deployments")
            .unwrap();
        assert_eq!(deploy["subresources"][1]["responseKind"]["kind"], "Scale");
        assert_eq!(
            aggregated_version(
                "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
            ),
            Some("v2")
        );
        assert_eq!(aggregated_version("application/json"), None);
    }
}
