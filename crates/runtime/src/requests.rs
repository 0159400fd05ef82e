//! Counting the requests a service sends to the control-plane API.
//!
//! Every service's kube client goes through [`CountRequests`], which adds one to
//! `flotilla_control_plane_requests_total{verb, group, resource, code}` per request once it is
//! answered. `flotilla bench` reads it to report where the control plane's writes come from
//! (writes per member object, and how many of them lost a conflict), and operators can alert on
//! a service that starts writing more than its work needs.
//!
//! `verb` follows the API server's audit vocabulary: `get`, `list`, `watch`, `create`,
//! `update`, `patch`, `delete`, `deletecollection`; `resource` carries the subresource as
//! `works/status`; `group` is empty for the core group; `code` is the response's HTTP status
//! (`200`, `409`, ...) or `error` when none came (connection failures, timeouts).

use std::sync::OnceLock;

use flotilla_telemetry::metrics::register;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

/// The labels of one request.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`.
    pub verb: String,
    /// The API group (`""` for the core group).
    pub group: String,
    /// The resource, `resource/subresource` for a subresource.
    pub resource: String,
    /// The response's HTTP status, or `error` when none came.
    pub code: String,
}

fn family() -> &'static Family<RequestLabels, Counter> {
    static FAMILY: OnceLock<Family<RequestLabels, Counter>> = OnceLock::new();
    FAMILY.get_or_init(|| {
        let family = Family::default();
        register(
            "control_plane_requests",
            "Requests sent to the control-plane API, by verb, group and resource",
            family.clone(),
        );
        family
    })
}

/// Registers the family, so `/metrics` lists it before the first request.
pub fn register_metrics() {
    family();
}

/// The labels of a request to `path` (without query) with `method`; `watch` tells a watch from
/// a list. `None` for paths that are not resources (`/version`, `/healthz`, discovery).
pub fn classify(method: &http::Method, path: &str, watch: bool) -> Option<RequestLabels> {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    // Strip `/api/v1` or `/apis/<group>/<version>`.
    let (group, rest) = match segments.as_slice() {
        ["api", _version, rest @ ..] => ("", rest),
        ["apis", group, _version, rest @ ..] => (*group, rest),
        _ => return None,
    };
    // Strip `namespaces/<ns>` unless the request is for the namespace itself (its `status` and
    // `finalize` subresources included).
    let rest = match rest {
        ["namespaces", _ns, resource, tail @ ..] if !matches!(*resource, "status" | "finalize") => {
            let mut v = vec![*resource];
            v.extend_from_slice(tail);
            v
        }
        other => other.to_vec(),
    };
    let (resource, named, subresource) = match rest.as_slice() {
        [] => return None,
        [resource] => (*resource, false, None),
        [resource, _name] => (*resource, true, None),
        [resource, _name, sub, ..] => (*resource, true, Some(*sub)),
    };
    let verb = match (method.as_str(), named) {
        ("GET", _) if watch => "watch",
        ("GET", true) => "get",
        ("GET", false) => "list",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        _ => return None,
    };
    Some(RequestLabels {
        verb: verb.to_owned(),
        group: group.to_owned(),
        resource: match subresource {
            Some(sub) => format!("{resource}/{sub}"),
            None => resource.to_owned(),
        },
        code: String::new(),
    })
}

fn labels_of<B>(request: &http::Request<B>) -> Option<RequestLabels> {
    let watch = request
        .uri()
        .query()
        .is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"));
    classify(request.method(), request.uri().path(), watch)
}

/// The tower layer counting every request of a kube client, by its answer.
#[derive(Clone, Copy, Debug, Default)]
pub struct CountRequests;

impl<S> tower::Layer<S> for CountRequests {
    type Service = CountedService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        CountedService { inner }
    }
}

/// A service whose requests are counted ([`CountRequests`]).
#[derive(Clone, Debug)]
pub struct CountedService<S> {
    inner: S,
}

impl<S, B, R> tower::Service<http::Request<B>> for CountedService<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<R>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = futures::future::BoxFuture<'static, Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let labels = labels_of(&request);
        let response = self.inner.call(request);
        Box::pin(async move {
            let result = response.await;
            if let Some(mut labels) = labels {
                labels.code = match &result {
                    Ok(response) => response.status().as_u16().to_string(),
                    Err(_) => "error".to_owned(),
                };
                family().get_or_create(&labels).inc();
            }
            result
        })
    }
}

/// A [`CountRequests`] layer.
pub fn count_requests() -> CountRequests {
    CountRequests
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Method;

    fn labels(method: Method, path: &str, watch: bool) -> Option<(String, String, String)> {
        classify(&method, path, watch).map(|l| (l.verb, l.group, l.resource))
    }

    fn expect(verb: &str, group: &str, resource: &str) -> Option<(String, String, String)> {
        Some((verb.to_owned(), group.to_owned(), resource.to_owned()))
    }

    #[test]
    fn core_and_grouped_resources_namespaced_or_not() {
        assert_eq!(
            labels(Method::GET, "/api/v1/namespaces/default/configmaps/web", false),
            expect("get", "", "configmaps")
        );
        assert_eq!(
            labels(Method::GET, "/api/v1/namespaces/default/configmaps", false),
            expect("list", "", "configmaps")
        );
        assert_eq!(
            labels(Method::GET, "/api/v1/configmaps", true),
            expect("watch", "", "configmaps")
        );
        assert_eq!(
            labels(
                Method::POST,
                "/apis/work.karmada.io/v1alpha1/namespaces/karmada-es-m1/works",
                false
            ),
            expect("create", "work.karmada.io", "works")
        );
        assert_eq!(
            labels(
                Method::PUT,
                "/apis/work.karmada.io/v1alpha1/namespaces/karmada-es-m1/works/w/status",
                false
            ),
            expect("update", "work.karmada.io", "works/status")
        );
        assert_eq!(
            labels(
                Method::PATCH,
                "/apis/work.karmada.io/v1alpha2/namespaces/ns/resourcebindings/b/status",
                false
            ),
            expect("patch", "work.karmada.io", "resourcebindings/status")
        );
        assert_eq!(
            labels(
                Method::PATCH,
                "/apis/cluster.karmada.io/v1alpha1/clusters/m1",
                false
            ),
            expect("patch", "cluster.karmada.io", "clusters")
        );
        assert_eq!(
            labels(Method::DELETE, "/api/v1/namespaces/ns/secrets/s", false),
            expect("delete", "", "secrets")
        );
        assert_eq!(
            labels(Method::DELETE, "/api/v1/namespaces/ns/secrets", false),
            expect("deletecollection", "", "secrets")
        );
    }

    #[test]
    fn namespaces_themselves_are_a_resource() {
        assert_eq!(
            labels(Method::GET, "/api/v1/namespaces/default", false),
            expect("get", "", "namespaces")
        );
        assert_eq!(
            labels(Method::GET, "/api/v1/namespaces", false),
            expect("list", "", "namespaces")
        );
        assert_eq!(
            labels(Method::PUT, "/api/v1/namespaces/ns/finalize", false),
            expect("update", "", "namespaces/finalize")
        );
    }

    #[test]
    fn requests_are_counted_by_their_answer() {
        use tower::{Layer, Service};
        let counted = |code: &str| {
            family()
                .get_or_create(&RequestLabels {
                    verb: "patch".into(),
                    group: "work.karmada.io".into(),
                    resource: "resourcebindings/status".into(),
                    code: code.into(),
                })
                .get()
        };
        let (ok, conflict, error) = (counted("200"), counted("409"), counted("error"));
        let mut service =
            count_requests().layer(tower::service_fn(|request: http::Request<()>| async move {
                match request.uri().query() {
                    Some("fail") => Err("connection refused"),
                    Some(code) => Ok(http::Response::builder()
                        .status(code.parse::<u16>().unwrap_or(500))
                        .body(())
                        .unwrap_or_default()),
                    None => Ok(http::Response::new(())),
                }
            }));
        for query in ["", "?409", "?409", "?fail"] {
            let request = http::Request::builder()
                .method(Method::PATCH)
                .uri(format!(
                    "/apis/work.karmada.io/v1alpha2/namespaces/ns/resourcebindings/b/status{query}"
                ))
                .body(())
                .unwrap_or_default();
            let _ = futures::executor::block_on(service.call(request));
        }
        assert_eq!(counted("200") - ok, 1);
        assert_eq!(counted("409") - conflict, 2);
        assert_eq!(counted("error") - error, 1);
    }

    #[test]
    fn paths_that_are_not_resources_are_not_counted() {
        assert_eq!(labels(Method::GET, "/version", false), None);
        assert_eq!(labels(Method::GET, "/healthz", false), None);
        assert_eq!(labels(Method::GET, "/api", false), None);
        assert_eq!(labels(Method::GET, "/apis/apps/v1", false), None);
        assert_eq!(labels(Method::OPTIONS, "/api/v1/pods", false), None);
    }
}
