//! HTTP front end: authentication, authorization and audit of every request, routing of
//! Kubernetes API paths, content negotiation (JSON, YAML bodies, Table and
//! PartialObjectMetadata views) and watch streaming.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use flotilla_store::KeyValue;
use futures::StreamExt;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use serde_json::{Value, json};

use crate::auth::{Authenticator, ClientCertificate, User};
use crate::errors::{ApiError, ApiResult};
use crate::ops::{
    Api, DeleteOptions, DeleteOutcome, FieldValidation, ListOptions, MAX_BODY_BYTES, Patch, Propagation,
    Subresource, WriteOptions, Written,
};
use crate::rbac::rules::Attributes;
use crate::resources::{Flavor, ResourceDef};
use crate::selectors::{FieldSelector, LabelSelector, supported_fields};
use crate::table::IncludeObject;

/// Response body type.
pub type Body = BoxBody<Bytes, Infallible>;

/// Everything a request handler needs.
pub struct Frontend {
    /// The object layer.
    pub api: Arc<Api>,
    /// Who a request is.
    pub authn: Authenticator,
    /// Where requests are recorded (`--audit-log-path`).
    pub audit: Option<crate::audit::AuditLog>,
    /// `host:port` clients reach us at.
    pub address: String,
    /// OpenAPI documents.
    pub openapi: crate::openapi::OpenApi,
}

/// What is known about a client connection.
#[derive(Clone, Debug)]
pub struct Connection {
    /// The peer's address.
    pub peer: std::net::SocketAddr,
    /// Its client certificate, verified or not.
    pub certificate: ClientCertificate,
}

/// The Status reason and message of an error response, kept for the audit log.
#[derive(Clone, Debug)]
struct Failure {
    reason: &'static str,
    message: String,
}

fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into()).boxed()
}

fn json_response(code: StatusCode, value: &Value) -> Response<Body> {
    let bytes = serde_json::to_vec(value).unwrap_or_default();
    bytes_response(code, bytes, "application/json")
}

fn bytes_response(code: StatusCode, bytes: Vec<u8>, content_type: &str) -> Response<Body> {
    let mut resp = Response::new(full(bytes));
    *resp.status_mut() = code;
    if let Ok(v) = HeaderValue::from_str(content_type) {
        resp.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    resp
}

fn error_response(e: &ApiError) -> Response<Body> {
    let mut resp = json_response(
        StatusCode::from_u16(e.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        &e.to_status(),
    );
    resp.extensions_mut().insert(Failure {
        reason: e.reason,
        message: e.message.clone(),
    });
    resp
}

fn text_response(code: StatusCode, text: &str) -> Response<Body> {
    bytes_response(code, text.as_bytes().to_vec(), "text/plain; charset=utf-8")
}

/// Parsed query string (last value wins, like url.Values.Get).
type Query = HashMap<String, String>;

fn parse_query(q: Option<&str>) -> Query {
    form_urlencoded::parse(q.unwrap_or("").as_bytes())
        .into_owned()
        .collect()
}

/// Serves one request: authenticates it (401 when presented credentials are invalid or none
/// are presented without `--anonymous-auth`), authorizes it (403 with kube-apiserver's
/// message), serves it, and records it in the audit log.
pub async fn handle(
    frontend: Arc<Frontend>,
    connection: Arc<Connection>,
    req: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    let method = req.method().clone();
    let path = req.uri().path().to_owned();
    // What only the audit log reads is not built without one.
    let audited = frontend.audit.is_some();
    let request_uri = if audited {
        req.uri()
            .path_and_query()
            .map_or_else(|| path.clone(), |pq| pq.as_str().to_owned())
    } else {
        String::new()
    };
    let received = if audited {
        crate::objects::now_micro()
    } else {
        String::new()
    };
    let started = std::time::Instant::now();
    let req = drain(req).await;
    let pairs: Vec<(String, String)> = form_urlencoded::parse(req.uri().query().unwrap_or("").as_bytes())
        .into_owned()
        .collect();
    let attrs = crate::requestinfo::attributes(method.as_str(), &path, &pairs);
    let user_agent = if audited {
        req.headers()
            .get(header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned()
    } else {
        String::new()
    };
    let authorization = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let mut acting_as = None;
    let (resp, user, decision) = match frontend.authn.authenticate(
        &frontend.api,
        &connection.certificate,
        authorization,
    ) {
        Err(why) => {
            tracing::debug!(%method, %path, peer = %connection.peer, reason = %why, "request not authenticated");
            (error_response(&ApiError::unauthorized()), None, None)
        }
        Ok(user) => {
            let index = frontend.api.rbac.index(&frontend.api.store);
            let requester = user;
            match crate::impersonation::impersonate(&index, &requester, req.headers()) {
                Err(refused) => {
                    let crate::impersonation::Refused { error, reason } = *refused;
                    tracing::debug!(%method, %path, user = %requester.name, "impersonation refused");
                    let decision = (error.code == 403).then_some(crate::rbac::Decision::Deny(reason));
                    (error_response(&error), Some(requester), decision)
                }
                Ok(acting) => {
                    let acting = acting.map(Arc::new);
                    let effective = acting.clone().unwrap_or_else(|| requester.clone());
                    acting_as = acting;
                    let decision = if audited {
                        crate::rbac::authorize(&index, &effective, &attrs)
                    } else {
                        crate::rbac::authorize_unexplained(&index, &effective, &attrs)
                    };
                    drop(index);
                    let resp = match &decision {
                        crate::rbac::Decision::Deny(reason) => {
                            tracing::debug!(%method, %path, user = %effective.name, verb = %attrs.verb, "request forbidden");
                            error_response(&forbidden(&effective, &attrs, reason))
                        }
                        crate::rbac::Decision::Allow(_) => {
                            route(frontend.clone(), req, effective, &pairs).await
                        }
                    };
                    (resp, Some(requester), Some(decision))
                }
            }
        }
    };
    let code = resp.status().as_u16();
    if let Some(audit) = &frontend.audit {
        let failure = resp.extensions().get::<Failure>();
        let decision = decision.as_ref().map(|d| match d {
            crate::rbac::Decision::Allow(reason) => (true, reason.as_str()),
            crate::rbac::Decision::Deny(reason) => (false, reason.as_str()),
        });
        audit.record(&crate::audit::Record {
            received: &received,
            request_uri: &request_uri,
            attributes: &attrs,
            user: user.as_deref(),
            impersonated: acting_as.as_deref(),
            source_ip: connection.peer.ip(),
            user_agent: &user_agent,
            code,
            failure: failure.map(|f| (f.reason, f.message.as_str())),
            decision,
            started: attrs.verb == "watch" && code == 200,
        });
    }
    tracing::debug!(%method, %path, code, elapsed_ms = started.elapsed().as_millis() as u64, "request");
    Ok(resp)
}

/// kube-apiserver's 403 for a request the authorizer did not allow:
/// `pods is forbidden: User "x" cannot list resource "pods" in API group "" in the namespace "ns"`.
pub fn forbidden(user: &User, attrs: &Attributes, reason: &str) -> ApiError {
    let action = if !attrs.resource_request {
        format!("User {:?} cannot {} path {:?}", user.name, attrs.verb, attrs.path)
    } else if attrs.namespace.is_empty() {
        format!(
            "User {:?} cannot {} resource {:?} in API group {:?} at the cluster scope",
            user.name,
            attrs.verb,
            attrs.combined_resource(),
            attrs.api_group
        )
    } else {
        format!(
            "User {:?} cannot {} resource {:?} in API group {:?} in the namespace {:?}",
            user.name,
            attrs.verb,
            attrs.combined_resource(),
            attrs.api_group,
            attrs.namespace
        )
    };
    let why = if reason.is_empty() {
        action
    } else {
        format!("{action}: {reason}")
    };
    let resource = if attrs.resource_request {
        attrs.resource.as_str()
    } else {
        ""
    };
    ApiError::forbidden(&attrs.api_group, resource, &attrs.name, &why)
}

async fn route(
    frontend: Arc<Frontend>,
    req: Request<Pending>,
    user: Arc<User>,
    pairs: &[(String, String)],
) -> Response<Body> {
    let path = req.uri().path().to_owned();
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    match parts.first().copied() {
        Some("healthz") | Some("livez") | Some("readyz") => {
            if req.method() != Method::GET && req.method() != Method::HEAD {
                return error_response(&ApiError::method_not_allowed(req.method().as_str()));
            }
            return text_response(StatusCode::OK, "ok");
        }
        _ => {}
    }
    let accept = req
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let catalog = frontend.api.catalog();
    let get_only = |resp: Response<Body>, method: &Method| {
        if *method == Method::GET || *method == Method::HEAD {
            resp
        } else {
            error_response(&ApiError::method_not_allowed(method.as_str()))
        }
    };
    let method = req.method().clone();
    match parts.as_slice() {
        ["version"] => get_only(
            json_response(StatusCode::OK, &crate::discovery::version()),
            &method,
        ),
        ["api"] => get_only(
            match crate::discovery::aggregated_version(&accept) {
                Some(v) => aggregated_response(crate::discovery::aggregated(&catalog, true, v), v),
                None => json_response(StatusCode::OK, &crate::discovery::api_versions(&frontend.address)),
            },
            &method,
        ),
        ["apis"] => get_only(
            match crate::discovery::aggregated_version(&accept) {
                Some(v) => aggregated_response(crate::discovery::aggregated(&catalog, false, v), v),
                None => json_response(StatusCode::OK, &crate::discovery::api_group_list(&catalog)),
            },
            &method,
        ),
        ["api", "v1"] => get_only(
            crate::discovery::resource_list(&catalog, "", "v1").map_or_else(
                || error_response(&ApiError::not_found_path()),
                |v| json_response(StatusCode::OK, &v),
            ),
            &method,
        ),
        ["apis", group] => get_only(
            crate::discovery::api_group(&catalog, group).map_or_else(
                || error_response(&ApiError::not_found_path()),
                |v| json_response(StatusCode::OK, &v),
            ),
            &method,
        ),
        ["apis", group, version] => get_only(
            crate::discovery::resource_list(&catalog, group, version).map_or_else(
                || error_response(&ApiError::not_found_path()),
                |v| json_response(StatusCode::OK, &v),
            ),
            &method,
        ),
        ["openapi", "v2"] => get_only(frontend.openapi.v2(&catalog, &accept), &method),
        ["openapi", "v3"] => get_only(
            json_response(StatusCode::OK, &frontend.openapi.v3_index(&catalog)),
            &method,
        ),
        ["openapi", "v3", rest @ ..] => get_only(
            frontend
                .openapi
                .v3_document(&catalog, &rest.join("/"))
                .map_or_else(
                    || error_response(&ApiError::not_found_path()),
                    |v| json_response(StatusCode::OK, &v),
                ),
            &method,
        ),
        [
            "apis",
            group @ ("authorization.k8s.io" | "authentication.k8s.io"),
            "v1",
            rest @ ..,
        ] => {
            let (namespace, plural) = match rest {
                [plural] => (None, *plural),
                ["namespaces", ns, plural] => (Some((*ns).to_owned()), *plural),
                _ => return error_response(&ApiError::not_found_path()),
            };
            match review(&frontend, req, &user, group, plural, namespace).await {
                Ok(resp) => resp,
                Err(e) => error_response(&e),
            }
        }
        ["api", "v1", rest @ ..] => {
            let rest: Vec<String> = rest.iter().map(|s| s.to_string()).collect();
            resource(
                frontend,
                req,
                String::new(),
                "v1".into(),
                rest,
                accept,
                user,
                pairs,
            )
            .await
        }
        ["apis", group, version, rest @ ..] => {
            let (g, v) = (group.to_string(), version.to_string());
            let rest: Vec<String> = rest.iter().map(|s| s.to_string()).collect();
            resource(frontend, req, g, v, rest, accept, user, pairs).await
        }
        _ => error_response(&ApiError::not_found_path()),
    }
}

/// `POST` of a review object (see [`crate::reviews`]).
async fn review(
    frontend: &Frontend,
    req: Request<Pending>,
    user: &User,
    group: &str,
    plural: &str,
    namespace: Option<String>,
) -> ApiResult<Response<Body>> {
    let (_, namespaced) = crate::reviews::kind_of(group, plural).ok_or_else(ApiError::not_found_path)?;
    if namespaced != namespace.is_some() {
        return Err(ApiError::not_found_path());
    }
    if req.method() != Method::POST {
        return Err(ApiError::method_not_allowed(req.method().as_str()));
    }
    let (parts, body) = read_body(req).await?;
    let body = decode_object(&body, &content_type(&parts))?;
    let index = frontend.api.rbac.index(&frontend.api.store);
    let api = &frontend.api;
    let authn = &frontend.authn;
    let answer = crate::reviews::answer(
        &index,
        user,
        group,
        plural,
        namespace.as_deref(),
        &body,
        |token, audiences| {
            if let Some(user) = authn.tokens.authenticate(token) {
                return Ok(user.clone().authenticated());
            }
            let user = authn.service_accounts.authenticate(api, token)?;
            if !audiences.is_empty()
                && !audiences
                    .iter()
                    .any(|a| authn.service_accounts.audiences().contains(a))
            {
                return Err("the token's audiences are not among those asked for".to_owned());
            }
            Ok(User::clone(&user))
        },
    )?;
    Ok(json_response(StatusCode::CREATED, &answer))
}

fn aggregated_response(doc: Value, version: &str) -> Response<Body> {
    let bytes = serde_json::to_vec(&doc).unwrap_or_default();
    bytes_response(
        StatusCode::OK,
        bytes,
        &format!("application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList"),
    )
}

/// A parsed resource path.
struct Target {
    def: Arc<ResourceDef>,
    namespace: Option<String>,
    name: Option<String>,
    sub: Option<String>,
    watch_path: bool,
}

fn parse_target(frontend: &Frontend, group: &str, version: &str, mut rest: Vec<String>) -> ApiResult<Target> {
    let mut watch_path = false;
    if rest.first().map(String::as_str) == Some("watch") {
        watch_path = true;
        rest.remove(0);
    }
    let mut namespace = None;
    if rest.first().map(String::as_str) == Some("namespaces") && rest.len() > 1 {
        // `namespaces/<ns>/<resource>...` unless the third segment is a namespace subresource.
        if rest.len() > 2 && rest[2] != "status" && rest[2] != "finalize" {
            namespace = Some(rest[1].clone());
            rest.drain(0..2);
        }
    }
    if rest.is_empty() || rest.len() > 3 {
        return Err(ApiError::not_found_path());
    }
    let catalog = frontend.api.catalog();
    let def = catalog
        .get(group, version, &rest[0])
        .ok_or_else(ApiError::not_found_path)?;
    let name = rest.get(1).cloned();
    let sub = rest.get(2).cloned();
    if namespace.is_some() && !def.namespaced {
        return Err(ApiError::not_found_path());
    }
    if def.namespaced && namespace.is_none() && name.is_some() {
        return Err(ApiError::not_found_path());
    }
    if let Some(s) = &sub {
        let ok = match s.as_str() {
            "status" => def.status,
            "scale" => def.scale.is_some(),
            "finalize" => def.group.is_empty() && def.plural == "namespaces",
            "token" => def.group.is_empty() && def.plural == "serviceaccounts",
            _ => false,
        };
        if !ok {
            return Err(ApiError::not_found_path());
        }
    }
    Ok(Target {
        def,
        namespace,
        name,
        sub,
        watch_path,
    })
}

/// What representation the client asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum View {
    Object,
    Table,
    PartialMetadata,
}

fn negotiate(accept: &str) -> ApiResult<View> {
    if accept.is_empty() {
        return Ok(View::Object);
    }
    let mut acceptable = false;
    for part in accept.split(',') {
        let part = part.trim();
        let media = part.split(';').next().unwrap_or("").trim();
        let json_like = matches!(
            media,
            "application/json" | "*/*" | "application/*" | "application/yaml" | ""
        );
        if !json_like {
            continue;
        }
        if part.contains("as=Table") {
            if part.contains("g=meta.k8s.io") {
                return Ok(View::Table);
            }
            continue;
        }
        if part.contains("as=PartialObjectMetadata") {
            return Ok(View::PartialMetadata);
        }
        if part.contains("as=") {
            continue;
        }
        acceptable = true;
        break;
    }
    if acceptable {
        Ok(View::Object)
    } else {
        Err(ApiError::not_acceptable(accept))
    }
}

/// A request whose body has been read (or found too large).
type Pending = ApiResult<Bytes>;

/// The request's parts and body (or the body's error).
async fn read_body(req: Request<Pending>) -> ApiResult<(http::request::Parts, Bytes)> {
    let (parts, body) = req.into_parts();
    Ok((parts, body?))
}

/// Reads the whole body up front, so every response (errors included) is sent after the
/// client finished sending and never races a reset stream.
async fn drain(req: Request<Incoming>) -> Request<Pending> {
    let (parts, mut body) = req.into_parts();
    let mut buf = bytes::BytesMut::new();
    let mut too_large = false;
    // Past the limit the rest is drained (up to a bound) so the client reads our 413 instead
    // of a reset stream.
    const DRAIN_LIMIT: usize = 16 * 1024 * 1024;
    let mut seen = 0usize;
    while let Some(frame) = body.frame().await {
        let frame = match frame {
            Ok(f) => f,
            Err(e) => {
                let err = ApiError::bad_request(format!("reading the request body: {e}"));
                return Request::from_parts(parts, Err(err));
            }
        };
        if let Ok(data) = frame.into_data() {
            seen += data.len();
            if seen > MAX_BODY_BYTES {
                too_large = true;
                buf.clear();
            } else {
                buf.extend_from_slice(&data);
            }
            if seen > DRAIN_LIMIT {
                break;
            }
        }
    }
    let result = if too_large {
        Err(ApiError::too_large(MAX_BODY_BYTES))
    } else {
        Ok(buf.freeze())
    };
    Request::from_parts(parts, result)
}

fn content_type(parts: &http::request::Parts) -> String {
    parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

/// Parses a YAML body. Clients send most YAML bodies as JSON (kube-rs and client-go send every
/// server-side apply configuration as JSON under `application/apply-patch+yaml`), and JSON is
/// YAML: the JSON parser, many times faster than the YAML one, reads the body first (it gives
/// up on the first token that is not JSON); the YAML parser reads what JSON does not accept
/// (block or flow-style YAML such as `{a: b}`) and gives the error.
fn parse_yaml(body: &[u8]) -> Result<Value, serde_yaml::Error> {
    serde_json::from_slice(body).or_else(|_| serde_yaml::from_slice(body))
}

/// Decodes a JSON or YAML object body.
fn decode_object(body: &[u8], content_type: &str) -> ApiResult<Value> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::bad_request(
            "the request body is empty: send a JSON or YAML object",
        ));
    }
    let value: Value = match content_type {
        "application/json" | "" | "*/*" => serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("the request body is not valid JSON: {e}")))?,
        crate::protobuf::MEDIA_TYPE => crate::protobuf::decode(body).map_err(|e| {
            ApiError::bad_request(format!("the protobuf request body could not be decoded: {e}"))
        })?,
        "application/yaml" | "application/x-yaml" | "text/yaml" | "application/apply-patch+yaml" => {
            parse_yaml(body)
                .map_err(|e| ApiError::bad_request(format!("the request body is not valid YAML: {e}")))?
        }
        other => return Err(ApiError::unsupported_media_type(other)),
    };
    if !value.is_object() {
        return Err(ApiError::bad_request(
            "the request body must be a JSON or YAML object",
        ));
    }
    Ok(value)
}

fn write_options(q: &Query, user_agent: &str, user: &Arc<User>) -> ApiResult<WriteOptions> {
    let dry_run = match q.get("dryRun").map(String::as_str) {
        None | Some("") => false,
        Some("All") => true,
        Some(other) => {
            return Err(ApiError::invalid(
                "meta.k8s.io",
                "CreateOptions",
                "",
                vec![crate::errors::Cause::unsupported(
                    "dryRun",
                    &json!(other),
                    &["All"],
                )],
            ));
        }
    };
    let field_validation = match q.get("fieldValidation").map(String::as_str) {
        None | Some("") | Some("Warn") => FieldValidation::Warn,
        Some("Strict") => FieldValidation::Strict,
        Some("Ignore") => FieldValidation::Ignore,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "fieldValidation must be one of \"Ignore\", \"Warn\" or \"Strict\", got {other:?}"
            )));
        }
    };
    Ok(WriteOptions {
        dry_run,
        field_validation,
        field_manager: q.get("fieldManager").cloned(),
        force: q.get("force").is_some_and(|v| v == "true"),
        user_agent: user_agent.to_owned(),
        managed_precomputed: false,
        user: Some(user.clone()),
    })
}

fn list_options(def: &ResourceDef, q: &Query) -> ApiResult<ListOptions> {
    let labels = LabelSelector::parse(q.get("labelSelector").map_or("", String::as_str)).map_err(|e| {
        ApiError::bad_request(format!(
            "unable to parse requirement: {}",
            e.trim_start_matches("unable to parse requirement: ")
        ))
    })?;
    let fields = FieldSelector::parse(
        q.get("fieldSelector").map_or("", String::as_str),
        &supported_fields(&def.kind),
    )
    .map_err(ApiError::bad_request)?;
    let limit = match q.get("limit").map(String::as_str) {
        None | Some("") => 0,
        Some(l) => l
            .parse::<i64>()
            .map_err(|_| ApiError::bad_request(format!("limit must be an integer, got {l:?}")))?
            .max(0) as usize,
    };
    Ok(ListOptions {
        labels,
        fields,
        limit,
        continue_token: q.get("continue").filter(|c| !c.is_empty()).cloned(),
        resource_version: q.get("resourceVersion").cloned(),
        resource_version_match: q.get("resourceVersionMatch").filter(|c| !c.is_empty()).cloned(),
    })
}

fn delete_options(q: &Query, body: &[u8]) -> ApiResult<DeleteOptions> {
    let mut opts = DeleteOptions::default();
    let mut propagation = q.get("propagationPolicy").cloned();
    if let Some(o) = q.get("orphanDependents")
        && o == "true"
    {
        propagation.get_or_insert_with(|| "Orphan".into());
    }
    if !body.iter().all(u8::is_ascii_whitespace) {
        let v: Value = parse_yaml(body)
            .map_err(|e| ApiError::bad_request(format!("the DeleteOptions body is not valid JSON: {e}")))?;
        if let Some(p) = v["propagationPolicy"].as_str() {
            propagation = Some(p.to_owned());
        }
        if v["orphanDependents"].as_bool() == Some(true) && propagation.is_none() {
            propagation = Some("Orphan".into());
        }
        if let Some(uid) = v["preconditions"]["uid"].as_str() {
            opts.uid = Some(uid.to_owned());
        }
        if let Some(rv) = v["preconditions"]["resourceVersion"].as_str() {
            opts.resource_version = Some(rv.to_owned());
        }
        if let Some(dr) = v["dryRun"].as_array()
            && dr.iter().any(|d| d == "All")
        {
            opts.dry_run = true;
        }
    }
    if q.get("dryRun").is_some_and(|d| d == "All") {
        opts.dry_run = true;
    }
    opts.propagation = match propagation.as_deref() {
        None | Some("") => None,
        Some("Orphan") => Some(Propagation::Orphan),
        Some("Background") => Some(Propagation::Background),
        Some("Foreground") => Some(Propagation::Foreground),
        Some(other) => {
            return Err(ApiError::invalid(
                "meta.k8s.io",
                "DeleteOptions",
                "",
                vec![crate::errors::Cause::unsupported(
                    "propagationPolicy",
                    &json!(other),
                    &["Background", "Foreground", "Orphan"],
                )],
            ));
        }
    };
    Ok(opts)
}

fn with_warnings(mut resp: Response<Body>, warnings: &[String]) -> Response<Body> {
    for w in warnings {
        let escaped = w.replace('\\', "\\\\").replace('"', "\\\"");
        if let Ok(v) = HeaderValue::from_str(&format!("299 - \"{escaped}\"")) {
            resp.headers_mut().append("Warning", v);
        }
    }
    resp
}

#[allow(clippy::too_many_arguments)]
async fn resource(
    frontend: Arc<Frontend>,
    req: Request<Pending>,
    group: String,
    version: String,
    rest: Vec<String>,
    accept: String,
    user: Arc<User>,
    pairs: &[(String, String)],
) -> Response<Body> {
    match resource_inner(frontend, req, group, version, rest, accept, user, pairs).await {
        Ok(r) => r,
        Err(e) => error_response(&e),
    }
}

#[allow(clippy::too_many_arguments)]
async fn resource_inner(
    frontend: Arc<Frontend>,
    req: Request<Pending>,
    group: String,
    version: String,
    rest: Vec<String>,
    accept: String,
    user: Arc<User>,
    pairs: &[(String, String)],
) -> ApiResult<Response<Body>> {
    let target = parse_target(&frontend, &group, &version, rest)?;
    let q = parse_query(req.uri().query());
    let view = negotiate(&accept)?;
    let api = frontend.api.clone();
    let def = target.def.clone();
    let ns = target.namespace.clone();
    let sub = match target.sub.as_deref() {
        Some("status") => Subresource::Status,
        Some("scale") => Subresource::Scale,
        _ => Subresource::Main,
    };
    let method = req.method().clone();
    if target.sub.as_deref() == Some("token") && method != Method::POST {
        return Err(ApiError::method_not_allowed(method.as_str()));
    }
    let user_agent = req
        .headers()
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    // The same reading of `watch` the authorizer made: a collection GET with it is a watch, a
    // named GET stays a get (the deprecated `/watch/` prefix watches one object).
    let watch = target.watch_path || (target.name.is_none() && crate::requestinfo::watch_requested(pairs));
    match (method, target.name.clone()) {
        (Method::GET, None) if watch => Ok(crate::watch::serve(
            api,
            def,
            ns,
            &q,
            view == View::Table,
            view == View::PartialMetadata,
        )
        .await?),
        (Method::GET, Some(name)) if watch => {
            let mut q = q;
            let mut fs = format!("metadata.name={name}");
            if let Some(existing) = q.get("fieldSelector").filter(|f| !f.is_empty()) {
                fs = format!("{existing},{fs}");
            }
            q.insert("fieldSelector".into(), fs);
            Ok(crate::watch::serve(
                api,
                def,
                ns,
                &q,
                view == View::Table,
                view == View::PartialMetadata,
            )
            .await?)
        }
        (Method::GET, None) | (Method::HEAD, None) => {
            if target.sub.is_some() {
                return Err(ApiError::not_found_path());
            }
            list_response(&api, &def, ns.as_deref(), &q, view).await
        }
        (Method::GET, Some(name)) | (Method::HEAD, Some(name)) => {
            let answer = match sub {
                Subresource::Scale => Answer::Object(api.get_scale(&def, ns.as_deref(), &name)?),
                _ => Answer::Stored(api.get_kv(&def, ns.as_deref(), &name)?),
            };
            single_response(&api, &def, answer, view, &q, StatusCode::OK, &[])
        }
        (Method::POST, Some(name)) if target.sub.as_deref() == Some("token") => {
            let (parts, body) = read_body(req).await?;
            let obj = decode_object(&body, &content_type(&parts))?;
            let ns = ns.ok_or_else(ApiError::not_found_path)?;
            let answer = frontend
                .authn
                .service_accounts
                .token_request(&api, &ns, &name, &obj)?;
            Ok(json_response(StatusCode::CREATED, &answer))
        }
        (Method::POST, None) => {
            let opts = write_options(&q, &user_agent, &user)?;
            let (parts, body) = read_body(req).await?;
            let obj = decode_object(&body, &content_type(&parts))?;
            let written = api.create(&def, ns.as_deref(), obj, &opts).await?;
            written_response(&api, &def, written, view, &q)
        }
        (Method::PUT, Some(name)) => {
            let opts = write_options(&q, &user_agent, &user)?;
            let (parts, body) = read_body(req).await?;
            let obj = decode_object(&body, &content_type(&parts))?;
            if target.sub.as_deref() == Some("finalize") {
                let written = crate::gc::finalize_namespace(&api, &def, &name, obj, &opts).await?;
                return written_response(&api, &def, written, view, &q);
            }
            let written = api.update(&def, ns.as_deref(), &name, obj, sub, &opts).await?;
            written_response(&api, &def, written, view, &q)
        }
        (Method::PATCH, Some(name)) => {
            let opts = write_options(&q, &user_agent, &user)?;
            let (parts, body) = read_body(req).await?;
            let ct = content_type(&parts);
            let patch = decode_patch(&ct, &body)?;
            if matches!(patch, Patch::Apply(_)) && opts.field_manager.as_deref().is_none_or(str::is_empty) {
                return Err(ApiError::invalid(
                    "meta.k8s.io",
                    "PatchOptions",
                    "",
                    vec![crate::errors::Cause::required(
                        "fieldManager",
                        "is required for apply patch",
                    )],
                ));
            }
            let written = api.patch(&def, ns.as_deref(), &name, &patch, sub, &opts).await?;
            written_response(&api, &def, written, view, &q)
        }
        (Method::DELETE, Some(name)) => {
            if target.sub.is_some() {
                return Err(ApiError::method_not_allowed("DELETE"));
            }
            let (_, body) = read_body(req).await?;
            let opts = delete_options(&q, &body)?;
            match api.delete(&def, ns.as_deref(), &name, &opts).await? {
                // A pending deletion, and a custom resource's, answer with the object.
                DeleteOutcome::Pending(obj) => Ok(json_response(StatusCode::OK, &obj)),
                DeleteOutcome::Deleted(obj) if def.is_custom() => Ok(json_response(StatusCode::OK, &obj)),
                // A built-in's finished deletion answers with a Status, as kube-apiserver does.
                DeleteOutcome::Deleted(obj) => {
                    let mut details =
                        json!({"name": name, "kind": def.plural, "uid": obj["metadata"]["uid"]});
                    if !def.group.is_empty() {
                        details["group"] = json!(def.group);
                    }
                    Ok(json_response(
                        StatusCode::OK,
                        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}),
                    ))
                }
            }
        }
        (Method::DELETE, None) => {
            let list = list_options(&def, &q)?;
            let (_, body) = read_body(req).await?;
            let opts = delete_options(&q, &body)?;
            let deleted = api.delete_collection(&def, ns.as_deref(), &list, &opts).await?;
            let mut out = Vec::new();
            out.extend_from_slice(
                format!(
                    "{{\"kind\":\"{}\",\"apiVersion\":\"{}\",\"metadata\":{{\"resourceVersion\":\"{}\"}},\"items\":",
                    def.list_kind(),
                    def.api_version(),
                    api.store.revision()
                )
                .as_bytes(),
            );
            let _ = serde_json::to_writer(&mut out, &deleted);
            out.push(b'}');
            Ok(bytes_response(StatusCode::OK, out, "application/json"))
        }
        (m, _) => Err(ApiError::method_not_allowed(m.as_str())),
    }
}

fn decode_patch(content_type: &str, body: &[u8]) -> ApiResult<Patch> {
    let parse_json = |what: &str| -> ApiResult<Value> {
        serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("the {what} is not valid JSON: {e}")))
    };
    match content_type {
        "application/json-patch+json" => {
            let v = parse_json("JSON patch")?;
            if !v.is_array() {
                return Err(ApiError::bad_request(
                    "a JSON patch must be an array of operations",
                ));
            }
            Ok(Patch::Json(v))
        }
        "application/merge-patch+json" => Ok(Patch::Merge(parse_json("merge patch")?)),
        "application/strategic-merge-patch+json" => {
            Ok(Patch::Strategic(parse_json("strategic merge patch")?))
        }
        "application/apply-patch+yaml" | "application/apply-patch+json" => {
            let v: Value = parse_yaml(body).map_err(|e| {
                ApiError::bad_request(format!("the apply configuration is not valid YAML: {e}"))
            })?;
            if !v.is_object() {
                return Err(ApiError::bad_request("the apply configuration must be an object"));
            }
            Ok(Patch::Apply(v))
        }
        other => Err(ApiError::unsupported_media_type(other)),
    }
}

/// What a single-object answer is made from.
enum Answer {
    /// An object built by this request.
    Object(Value),
    /// An object as stored: its bytes are served with the resourceVersion spliced in, and
    /// decoded only for a table.
    Stored(Arc<KeyValue>),
}

/// A write's answer: 201 Created when it created the object, else 200 OK, rendered from the
/// bytes it stored when `object` is what they hold, with its warnings.
fn written_response(
    api: &Api,
    def: &ResourceDef,
    written: Written,
    view: View,
    q: &Query,
) -> ApiResult<Response<Body>> {
    let code = if written.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let answer = match written.stored {
        Some(kv) => Answer::Stored(kv),
        None => Answer::Object(written.object),
    };
    single_response(api, def, answer, view, q, code, &written.warnings)
}

fn single_response(
    api: &Api,
    def: &ResourceDef,
    answer: Answer,
    view: View,
    q: &Query,
    code: StatusCode,
    warnings: &[String],
) -> ApiResult<Response<Body>> {
    let resp = match (view, answer) {
        (View::Object, Answer::Object(obj)) => json_response(code, &obj),
        (View::Object, Answer::Stored(kv)) => {
            let mut out = Vec::with_capacity(kv.value.len() + 32);
            api.render_into(def, &kv.value, kv.mod_revision, &mut out);
            bytes_response(code, out, "application/json")
        }
        (View::PartialMetadata, Answer::Object(obj)) => {
            let mut out = Vec::new();
            crate::objects::partial_metadata_into(&obj, &mut out);
            bytes_response(code, out, "application/json")
        }
        (View::PartialMetadata, Answer::Stored(kv)) => {
            let mut out = Vec::with_capacity(kv.value.len() + 96);
            api.render_partial_into(def, &kv.value, kv.mod_revision, &mut out);
            bytes_response(code, out, "application/json")
        }
        (View::Table, answer) => {
            let obj = match answer {
                Answer::Object(obj) => obj,
                Answer::Stored(kv) => api.to_value(def, &kv.value, kv.mod_revision),
            };
            let include = IncludeObject::parse(q.get("includeObject").map(String::as_str))
                .map_err(ApiError::bad_request)?;
            let rv = obj["metadata"]["resourceVersion"]
                .as_str()
                .unwrap_or("")
                .to_owned();
            if obj["kind"] == "Scale" || obj["kind"] == "Status" {
                json_response(code, &obj)
            } else {
                json_response(code, &crate::table::table(def, &[obj], include, true, &rv, None))
            }
        }
    };
    Ok(with_warnings(resp, warnings))
}

async fn list_response(
    api: &Api,
    def: &ResourceDef,
    ns: Option<&str>,
    q: &Query,
    view: View,
) -> ApiResult<Response<Body>> {
    let opts = list_options(def, q)?;
    let page = api.list(def, ns, &opts).await?;
    let rv = page.revision.to_string();
    let (list_kind, api_version) = match view {
        View::PartialMetadata => (
            "PartialObjectMetadataList".to_owned(),
            "meta.k8s.io/v1".to_owned(),
        ),
        _ => (def.list_kind(), def.api_version()),
    };
    match view {
        View::Object | View::PartialMetadata => {
            let mut out =
                Vec::with_capacity(page.items.iter().map(|kv| kv.value.len() + 40).sum::<usize>() + 256);
            out.extend_from_slice(
                format!(
                    "{{\"kind\":\"{list_kind}\",\"apiVersion\":\"{api_version}\",\"metadata\":{{\"resourceVersion\":\"{rv}\""
                )
                .as_bytes(),
            );
            if let Some(c) = &page.continue_token {
                out.extend_from_slice(format!(",\"continue\":\"{c}\"").as_bytes());
            }
            if let Some(r) = page.remaining {
                out.extend_from_slice(format!(",\"remainingItemCount\":{r}").as_bytes());
            }
            out.extend_from_slice(b"},\"items\":[");
            for (i, kv) in page.items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                if view == View::PartialMetadata {
                    api.render_partial_into(def, &kv.value, kv.mod_revision, &mut out);
                } else {
                    api.render_into(def, &kv.value, kv.mod_revision, &mut out);
                }
            }
            out.extend_from_slice(b"]}");
            Ok(bytes_response(StatusCode::OK, out, "application/json"))
        }
        View::Table => {
            let include = IncludeObject::parse(q.get("includeObject").map(String::as_str))
                .map_err(ApiError::bad_request)?;
            let objs: Vec<Value> = page
                .items
                .iter()
                .map(|kv| api.to_value(def, &kv.value, kv.mod_revision))
                .collect();
            let table = crate::table::table(def, &objs, include, true, &rv, page.continue_token.as_deref());
            Ok(json_response(StatusCode::OK, &table))
        }
    }
}

/// Streams watch events as newline-delimited JSON.
pub fn stream_response(rx: tokio::sync::mpsc::Receiver<Bytes>) -> Response<Body> {
    let stream = tokio_stream_from(rx).map(|b| Ok::<_, Infallible>(Frame::data(b)));
    let body = BodyExt::boxed(StreamBody::new(stream));
    let mut resp = Response::new(body);
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, private"),
    );
    resp
}

fn tokio_stream_from(mut rx: tokio::sync::mpsc::Receiver<Bytes>) -> impl futures::Stream<Item = Bytes> {
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

/// Convenience for watch.rs: a default timeout when the client gave none.
pub fn default_watch_timeout() -> Duration {
    let secs = 1800 + rand::random::<u64>() % 1800;
    Duration::from_secs(secs)
}

/// Which Flavor a def has, for watch conversions.
pub fn is_event_v1(def: &ResourceDef) -> bool {
    matches!(def.flavor, Flavor::Builtin(crate::builtin::BuiltinKind::EventV1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation() {
        assert_eq!(negotiate("").unwrap(), View::Object);
        assert_eq!(negotiate("application/json").unwrap(), View::Object);
        assert_eq!(
            negotiate("application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json").unwrap(),
            View::Table
        );
        assert_eq!(
            negotiate("application/vnd.kubernetes.protobuf, */*").unwrap(),
            View::Object
        );
        assert_eq!(
            negotiate("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1").unwrap(),
            View::PartialMetadata
        );
        assert_eq!(
            negotiate("application/vnd.kubernetes.protobuf").unwrap_err().code,
            406
        );
    }

    #[test]
    fn patch_types() {
        assert!(matches!(
            decode_patch("application/json-patch+json", b"[]"),
            Ok(Patch::Json(_))
        ));
        assert_eq!(
            decode_patch("application/json-patch+json", b"{}")
                .unwrap_err()
                .code,
            400
        );
        assert_eq!(decode_patch("application/xml", b"{}").unwrap_err().code, 415);
        assert!(matches!(
            decode_patch("application/apply-patch+yaml", b"a: 1"),
            Ok(Patch::Apply(_))
        ));
    }

    #[test]
    fn bodies() {
        assert_eq!(
            decode_object(b"{not json", "application/json").unwrap_err().code,
            400
        );
        assert_eq!(decode_object(b"[1]", "application/json").unwrap_err().code, 400);
        assert!(decode_object(b"kind: X\n", "application/yaml").is_ok());
        assert_eq!(decode_object(b"{}", "text/html").unwrap_err().code, 415);
    }

    /// A YAML body written as JSON reads as JSON would; flow-style YAML that is not JSON, YAML
    /// documents and YAML errors are still the YAML parser's.
    #[test]
    fn yaml_bodies_sent_as_json() {
        let apply = |body: &[u8]| match decode_patch("application/apply-patch+yaml", body) {
            Ok(Patch::Apply(v)) => Ok(v),
            Ok(_) => panic!("an apply configuration decoded as another patch type"),
            Err(e) => Err(e),
        };
        let json = br#" {"kind": "ConfigMap", "data": {"on": "yes", "n": "1"}, "replicas": 3, "f": 1.5}"#;
        let expected = json!({"kind": "ConfigMap", "data": {"on": "yes", "n": "1"}, "replicas": 3, "f": 1.5});
        assert_eq!(apply(json).unwrap(), expected);
        assert_eq!(decode_object(json, "application/yaml").unwrap(), expected);
        // JSON escapes the YAML scanner rejects (a surrogate pair) are read.
        assert_eq!(
            apply(br#"{"data": {"smile": "\ud83d\ude00"}}"#).unwrap(),
            json!({"data": {"smile": "\u{1f600}"}})
        );
        // Flow-style YAML is not JSON: the YAML parser reads it, with YAML's types.
        assert_eq!(
            apply(b"{kind: ConfigMap, data: {a: b}, n: 2}").unwrap(),
            json!({"kind": "ConfigMap", "data": {"a": "b"}, "n": 2})
        );
        assert_eq!(
            apply(b"kind: ConfigMap\nn: 2\n").unwrap(),
            json!({"kind": "ConfigMap", "n": 2})
        );
        // What neither reads is a YAML error, named as before.
        let error = apply(b"{\"kind\": [}").unwrap_err();
        assert_eq!(error.code, 400);
        assert!(
            error
                .message
                .contains("the apply configuration is not valid YAML"),
            "{}",
            error.message
        );
        assert_eq!(apply(b"[1, 2]").unwrap_err().code, 400);
    }
}
