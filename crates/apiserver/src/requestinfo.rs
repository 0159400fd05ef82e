//! Request attributes from the URL, as kube-apiserver's `RequestInfoFactory` derives them:
//! resource vs non-resource request, kube verb (list/watch/get/create/update/patch/delete/
//! deletecollection), API group and version, namespace, resource, subresource and name. The
//! authorizer and the audit log both read these, and the router decides list vs watch with the
//! same [`watch_requested`], so what is authorized is what is served.

use crate::rbac::rules::Attributes;

/// Subresources of a namespace: `/api/v1/namespaces/<ns>/status` is the namespace's status, not
/// a resource named `status` in namespace `<ns>`.
const NAMESPACE_SUBRESOURCES: [&str; 2] = ["status", "finalize"];

/// Whether the `watch` query parameter asks for a watch: its first value is anything but `0`,
/// `f` or `false` (case-insensitive), as kube's parameter decoding reads it.
pub fn watch_requested(query: &[(String, String)]) -> bool {
    query
        .iter()
        .find(|(k, _)| k == "watch")
        .is_some_and(|(_, v)| !matches!(v.to_ascii_lowercase().as_str(), "false" | "f" | "0"))
}

/// The name a list or watch is limited to by `fieldSelector=metadata.name=<name>` (kube
/// authorizes such a request for that one name, so `resourceNames` rules can allow it).
fn selected_name(query: &[(String, String)]) -> Option<String> {
    let selector = query.iter().rev().find(|(k, _)| k == "fieldSelector")?.1.as_str();
    selector.split(',').find_map(|term| {
        let term = term.trim();
        if term.contains("!=") {
            return None;
        }
        let (field, value) = term.split_once("==").or_else(|| term.split_once('='))?;
        (field.trim() == "metadata.name").then(|| value.trim().to_owned())
    })
}

/// Whether `name` is a valid path segment name (kube's `IsValidPathSegmentName`).
fn valid_path_segment(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains('/') && !name.contains('%')
}

/// The attributes of a request with `method` on `path` with decoded `query` pairs.
pub fn attributes(method: &str, path: &str, query: &[(String, String)]) -> Attributes {
    let mut attrs = Attributes {
        resource_request: false,
        path: path.to_owned(),
        verb: method.to_ascii_lowercase(),
        ..Attributes::default()
    };
    let parts: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|p| !p.is_empty())
        .collect();
    if parts.len() < 3 {
        return attrs;
    }
    let (group, rest) = match parts[0] {
        "api" => ("", &parts[1..]),
        "apis" if parts.len() >= 4 => (parts[1], &parts[2..]),
        _ => return attrs,
    };
    attrs.resource_request = true;
    attrs.api_group = group.to_owned();
    attrs.api_version = rest[0].to_owned();
    let mut rest = &rest[1..];
    if rest.first() == Some(&"watch") {
        attrs.verb = "watch".to_owned();
        rest = &rest[1..];
        if rest.is_empty() {
            return attrs;
        }
    } else {
        attrs.verb = match method {
            "POST" => "create",
            "GET" | "HEAD" => "get",
            "PUT" => "update",
            "PATCH" => "patch",
            "DELETE" => "delete",
            _ => "",
        }
        .to_owned();
    }
    if rest.first() == Some(&"namespaces") && rest.len() > 1 {
        attrs.namespace = rest[1].to_owned();
        if rest.len() > 2 && !NAMESPACE_SUBRESOURCES.contains(&rest[2]) {
            rest = &rest[2..];
        }
    }
    if let Some(resource) = rest.first() {
        attrs.resource = (*resource).to_owned();
    }
    if let Some(name) = rest.get(1) {
        attrs.name = (*name).to_owned();
    }
    if let Some(sub) = rest.get(2) {
        attrs.subresource = (*sub).to_owned();
    }
    if attrs.name.is_empty() && attrs.verb == "get" {
        attrs.verb = if watch_requested(query) { "watch" } else { "list" }.to_owned();
    }
    if attrs.name.is_empty()
        && (attrs.verb == "list" || attrs.verb == "watch")
        && let Some(name) = selected_name(query).filter(|n| valid_path_segment(n))
    {
        attrs.name = name;
    }
    if attrs.name.is_empty() && attrs.verb == "delete" {
        attrs.verb = "deletecollection".to_owned();
    }
    attrs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// (method, path, query) -> (resource request, verb, group, version, namespace, resource,
    /// subresource, name)
    #[test]
    fn derives_attributes_like_kube_request_info_factory() {
        type Row<'a> = (
            &'a str,
            &'a str,
            &'a [(&'a str, &'a str)],
            (
                bool,
                &'a str,
                &'a str,
                &'a str,
                &'a str,
                &'a str,
                &'a str,
                &'a str,
            ),
        );
        let table: &[Row] = &[
            // Non-resource paths keep the lowercase HTTP method.
            ("GET", "/healthz", &[], (false, "get", "", "", "", "", "", "")),
            ("HEAD", "/readyz", &[], (false, "head", "", "", "", "", "", "")),
            ("GET", "/", &[], (false, "get", "", "", "", "", "", "")),
            ("GET", "/api", &[], (false, "get", "", "", "", "", "", "")),
            ("GET", "/api/v1", &[], (false, "get", "", "", "", "", "", "")),
            ("GET", "/apis", &[], (false, "get", "", "", "", "", "", "")),
            ("GET", "/apis/apps", &[], (false, "get", "", "", "", "", "", "")),
            (
                "GET",
                "/apis/apps/v1",
                &[],
                (false, "get", "", "", "", "", "", ""),
            ),
            (
                "GET",
                "/openapi/v3/apis/apps/v1",
                &[],
                (false, "get", "", "", "", "", "", ""),
            ),
            ("POST", "/version", &[], (false, "post", "", "", "", "", "", "")),
            // Collections: list, watch, create, deletecollection.
            (
                "GET",
                "/api/v1/pods",
                &[],
                (true, "list", "", "v1", "", "pods", "", ""),
            ),
            (
                "GET",
                "/api/v1/namespaces/ns/pods",
                &[],
                (true, "list", "", "v1", "ns", "pods", "", ""),
            ),
            (
                "GET",
                "/api/v1/namespaces/ns/pods",
                &[("watch", "true")],
                (true, "watch", "", "v1", "ns", "pods", "", ""),
            ),
            (
                "GET",
                "/api/v1/namespaces/ns/pods",
                &[("watch", "1")],
                (true, "watch", "", "v1", "ns", "pods", "", ""),
            ),
            (
                "GET",
                "/api/v1/namespaces/ns/pods",
                &[("watch", "false")],
                (true, "list", "", "v1", "ns", "pods", "", ""),
            ),
            (
                "GET",
                "/api/v1/namespaces/ns/pods",
                &[("watch", "0")],
                (true, "list", "", "v1", "ns", "pods", "", ""),
            ),
            (
                "GET",
                "/api/v1/namespaces/ns/pods",
                &[("watch", "FALSE")],
                (true, "list", "", "v1", "ns", "pods", "", ""),
            ),
            (
                "HEAD",
                "/api/v1/namespaces/ns/pods",
                &[],
                (true, "list", "", "v1", "ns", "pods", "", ""),
            ),
            (
                "POST",
                "/api/v1/namespaces/ns/pods",
                &[],
                (true, "create", "", "v1", "ns", "pods", "", ""),
            ),
            (
                "DELETE",
                "/api/v1/namespaces/ns/pods",
                &[],
                (true, "deletecollection", "", "v1", "ns", "pods", "", ""),
            ),
            (
                "DELETE",
                "/apis/apps/v1/deployments",
                &[],
                (true, "deletecollection", "apps", "v1", "", "deployments", "", ""),
            ),
            // Objects: get, update, patch, delete.
            (
                "GET",
                "/apis/apps/v1/namespaces/ns/deployments/web",
                &[],
                (true, "get", "apps", "v1", "ns", "deployments", "", "web"),
            ),
            (
                "PUT",
                "/apis/apps/v1/namespaces/ns/deployments/web",
                &[],
                (true, "update", "apps", "v1", "ns", "deployments", "", "web"),
            ),
            (
                "PATCH",
                "/apis/apps/v1/namespaces/ns/deployments/web",
                &[],
                (true, "patch", "apps", "v1", "ns", "deployments", "", "web"),
            ),
            (
                "DELETE",
                "/apis/apps/v1/namespaces/ns/deployments/web",
                &[],
                (true, "delete", "apps", "v1", "ns", "deployments", "", "web"),
            ),
            // A named GET stays a get even with ?watch (kube serves the object).
            (
                "GET",
                "/api/v1/namespaces/ns/pods/p",
                &[("watch", "true")],
                (true, "get", "", "v1", "ns", "pods", "", "p"),
            ),
            (
                "OPTIONS",
                "/api/v1/namespaces/ns/pods/p",
                &[],
                (true, "", "", "v1", "ns", "pods", "", "p"),
            ),
            // Subresources.
            (
                "GET",
                "/api/v1/namespaces/ns/pods/p/log",
                &[],
                (true, "get", "", "v1", "ns", "pods", "log", "p"),
            ),
            (
                "PUT",
                "/apis/apps/v1/namespaces/ns/deployments/web/status",
                &[],
                (true, "update", "apps", "v1", "ns", "deployments", "status", "web"),
            ),
            (
                "PATCH",
                "/apis/apps/v1/namespaces/ns/deployments/web/scale",
                &[],
                (true, "patch", "apps", "v1", "ns", "deployments", "scale", "web"),
            ),
            (
                "POST",
                "/api/v1/namespaces/ns/serviceaccounts/sa/token",
                &[],
                (true, "create", "", "v1", "ns", "serviceaccounts", "token", "sa"),
            ),
            (
                "GET",
                "/api/v1/namespaces/ns/pods/p/log/extra",
                &[],
                (true, "get", "", "v1", "ns", "pods", "log", "p"),
            ),
            // Namespaces: the namespace of a namespace is itself; status and finalize are its
            // subresources.
            (
                "GET",
                "/api/v1/namespaces",
                &[],
                (true, "list", "", "v1", "", "namespaces", "", ""),
            ),
            (
                "POST",
                "/api/v1/namespaces",
                &[],
                (true, "create", "", "v1", "", "namespaces", "", ""),
            ),
            (
                "GET",
                "/api/v1/namespaces/ns",
                &[],
                (true, "get", "", "v1", "ns", "namespaces", "", "ns"),
            ),
            (
                "DELETE",
                "/api/v1/namespaces/ns",
                &[],
                (true, "delete", "", "v1", "ns", "namespaces", "", "ns"),
            ),
            (
                "PUT",
                "/api/v1/namespaces/ns/status",
                &[],
                (true, "update", "", "v1", "ns", "namespaces", "status", "ns"),
            ),
            (
                "PUT",
                "/api/v1/namespaces/ns/finalize",
                &[],
                (true, "update", "", "v1", "ns", "namespaces", "finalize", "ns"),
            ),
            // Cluster-scoped resources.
            (
                "GET",
                "/apis/rbac.authorization.k8s.io/v1/clusterroles/admin",
                &[],
                (
                    true,
                    "get",
                    "rbac.authorization.k8s.io",
                    "v1",
                    "",
                    "clusterroles",
                    "",
                    "admin",
                ),
            ),
            (
                "POST",
                "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                &[],
                (
                    true,
                    "create",
                    "authorization.k8s.io",
                    "v1",
                    "",
                    "selfsubjectaccessreviews",
                    "",
                    "",
                ),
            ),
            (
                "POST",
                "/apis/authorization.k8s.io/v1/namespaces/ns/localsubjectaccessreviews",
                &[],
                (
                    true,
                    "create",
                    "authorization.k8s.io",
                    "v1",
                    "ns",
                    "localsubjectaccessreviews",
                    "",
                    "",
                ),
            ),
            // The deprecated /watch/ prefix.
            (
                "GET",
                "/api/v1/watch/pods",
                &[],
                (true, "watch", "", "v1", "", "pods", "", ""),
            ),
            (
                "GET",
                "/api/v1/watch/namespaces/ns/pods",
                &[],
                (true, "watch", "", "v1", "ns", "pods", "", ""),
            ),
            (
                "GET",
                "/api/v1/watch/namespaces/ns/pods/p",
                &[],
                (true, "watch", "", "v1", "ns", "pods", "", "p"),
            ),
            (
                "GET",
                "/apis/x.io/v1/watch/widgets",
                &[],
                (true, "watch", "x.io", "v1", "", "widgets", "", ""),
            ),
            // A list or watch of one name (fieldSelector metadata.name) is authorized for it.
            (
                "GET",
                "/api/v1/namespaces/ns/configmaps",
                &[("fieldSelector", "metadata.name=cm")],
                (true, "list", "", "v1", "ns", "configmaps", "", "cm"),
            ),
            (
                "GET",
                "/api/v1/namespaces/ns/configmaps",
                &[("fieldSelector", "metadata.name==cm"), ("watch", "true")],
                (true, "watch", "", "v1", "ns", "configmaps", "", "cm"),
            ),
            (
                "GET",
                "/api/v1/namespaces/ns/configmaps",
                &[("fieldSelector", "metadata.namespace=ns,metadata.name=cm")],
                (true, "list", "", "v1", "ns", "configmaps", "", "cm"),
            ),
            (
                "GET",
                "/api/v1/namespaces/ns/configmaps",
                &[("fieldSelector", "metadata.name!=cm")],
                (true, "list", "", "v1", "ns", "configmaps", "", ""),
            ),
            (
                "GET",
                "/api/v1/namespaces/ns/configmaps",
                &[("fieldSelector", "metadata.name=a/b")],
                (true, "list", "", "v1", "ns", "configmaps", "", ""),
            ),
            (
                "GET",
                "/api/v1/namespaces/ns/configmaps",
                &[("fieldSelector", "status.phase=x")],
                (true, "list", "", "v1", "ns", "configmaps", "", ""),
            ),
            // A selected name never turns a deletecollection into a delete.
            (
                "DELETE",
                "/api/v1/namespaces/ns/configmaps",
                &[("fieldSelector", "metadata.name=cm")],
                (true, "deletecollection", "", "v1", "ns", "configmaps", "", ""),
            ),
        ];
        for (method, path, query, want) in table {
            let a = attributes(method, path, &q(query));
            let got = (
                a.resource_request,
                a.verb.as_str(),
                a.api_group.as_str(),
                a.api_version.as_str(),
                a.namespace.as_str(),
                a.resource.as_str(),
                a.subresource.as_str(),
                a.name.as_str(),
            );
            assert_eq!(got, *want, "{method} {path} {query:?}");
            assert_eq!(a.path, *path);
        }
    }

    #[test]
    fn watch_parameter_values() {
        assert!(!watch_requested(&q(&[])));
        assert!(watch_requested(&q(&[("watch", "true")])));
        assert!(watch_requested(&q(&[("watch", "yes")])));
        assert!(!watch_requested(&q(&[("watch", "False")])));
        assert!(!watch_requested(&q(&[("watch", "f")])));
        assert!(watch_requested(&q(&[("watch", "1"), ("watch", "0")])));
        assert!(!watch_requested(&q(&[("limit", "1")])));
    }
}
