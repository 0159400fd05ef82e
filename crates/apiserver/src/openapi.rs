//! OpenAPI v3 documents (`/openapi/v3` index and one document per group/version): component
//! schemas for built-in kinds (from k8s-openapi's schemars impls) and CRD kinds (their
//! `openAPIV3Schema`), with `x-kubernetes-group-version-kind`, and paths whose operations
//! declare the `fieldValidation` query parameter so kubectl delegates validation to the server.
//! `/openapi/v2` is an empty placeholder; see `docs/adr/0005-apiserver-openapi.md` for why
//! kubectl works with that.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, OnceLock};

use http::{Response, StatusCode};
use serde_json::{Map, Value, json};

use crate::builtin::BuiltinKind;
use crate::http::Body;
use crate::resources::{Catalog, Flavor, ResourceDef};

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

/// Built-in schemas, generated once.
struct Builtins {
    definitions: Map<String, Value>,
    names: HashMap<BuiltinKind, String>,
}

/// OpenAPI document source.
#[derive(Default)]
pub struct OpenApi {
    builtins: OnceLock<Arc<Builtins>>,
}

fn generate_builtins() -> Builtins {
    use k8s_openapi::api::{apps, batch, coordination, core, networking, policy, rbac};
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiext;
    use schemars::JsonSchema;
    let mut generator = schemars::generate::SchemaSettings::openapi3().into_generator();
    let mut names = HashMap::new();
    macro_rules! add {
        ($kind:expr, $ty:ty) => {{
            let _ = generator.subschema_for::<$ty>();
            names.insert($kind, <$ty as JsonSchema>::schema_name().into_owned());
        }};
    }
    add!(BuiltinKind::Namespace, core::v1::Namespace);
    add!(BuiltinKind::ConfigMap, core::v1::ConfigMap);
    add!(BuiltinKind::Secret, core::v1::Secret);
    add!(BuiltinKind::Service, core::v1::Service);
    add!(BuiltinKind::ServiceAccount, core::v1::ServiceAccount);
    add!(
        BuiltinKind::PersistentVolumeClaim,
        core::v1::PersistentVolumeClaim
    );
    add!(BuiltinKind::PersistentVolume, core::v1::PersistentVolume);
    add!(BuiltinKind::Pod, core::v1::Pod);
    add!(BuiltinKind::Node, core::v1::Node);
    add!(BuiltinKind::Event, core::v1::Event);
    add!(BuiltinKind::Endpoints, core::v1::Endpoints);
    add!(BuiltinKind::EventV1, k8s_openapi::api::events::v1::Event);
    add!(BuiltinKind::Deployment, apps::v1::Deployment);
    add!(BuiltinKind::StatefulSet, apps::v1::StatefulSet);
    add!(BuiltinKind::DaemonSet, apps::v1::DaemonSet);
    add!(BuiltinKind::ReplicaSet, apps::v1::ReplicaSet);
    add!(BuiltinKind::Job, batch::v1::Job);
    add!(BuiltinKind::CronJob, batch::v1::CronJob);
    add!(BuiltinKind::Ingress, networking::v1::Ingress);
    add!(BuiltinKind::Lease, coordination::v1::Lease);
    add!(BuiltinKind::ClusterRole, rbac::v1::ClusterRole);
    add!(BuiltinKind::ClusterRoleBinding, rbac::v1::ClusterRoleBinding);
    add!(BuiltinKind::Role, rbac::v1::Role);
    add!(BuiltinKind::RoleBinding, rbac::v1::RoleBinding);
    add!(BuiltinKind::PodDisruptionBudget, policy::v1::PodDisruptionBudget);
    add!(
        BuiltinKind::CustomResourceDefinition,
        apiext::CustomResourceDefinition
    );
    let _ = generator.subschema_for::<k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>();
    let definitions = generator.take_definitions(true);
    Builtins { definitions, names }
}

/// Component schema name of a CRD kind, as kube-apiserver names it (`com.example.v1.Widget`).
pub fn crd_schema_name(group: &str, version: &str, kind: &str) -> String {
    let reversed: Vec<&str> = group.split('.').rev().collect();
    format!("{}.{version}.{kind}", reversed.join("."))
}

fn gvk(def: &ResourceDef) -> Value {
    json!({"group": def.group, "version": def.version, "kind": def.kind})
}

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

fn query_param(name: &str, description: &str) -> Value {
    json!({"name": name, "in": "query", "description": description, "schema": {"type": "string", "uniqueItems": true}})
}

fn operation(def: &ResourceDef, action: &str, schema_ref: &str, list: bool, body: Option<&[&str]>) -> Value {
    let mut params = vec![query_param(
        "pretty",
        "If 'true', then the output is pretty printed.",
    )];
    if matches!(action, "post" | "put" | "patch") {
        params.push(query_param(
            "dryRun",
            "When present, indicates that modifications should not be persisted.",
        ));
        params.push(query_param(
            "fieldManager",
            "fieldManager is a name associated with the actor or entity that is making these changes.",
        ));
        params.push(query_param(
            "fieldValidation",
            "fieldValidation instructs the server on how to handle objects in the request containing unknown or duplicate fields. Valid values are: Ignore, Warn (default) and Strict.",
        ));
    }
    if action == "patch" {
        params.push(
            json!({"name": "force", "in": "query", "schema": {"type": "boolean", "uniqueItems": true}}),
        );
    }
    let response_schema = if list {
        json!({"type": "object"})
    } else {
        json!({"$ref": schema_ref})
    };
    let mut op = json!({
        "operationId": format!("{action}{}", def.kind),
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": gvk(def),
        "parameters": params,
        "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": response_schema}}}},
    });
    if let Some(types) = body {
        let content: Map<String, Value> = types
            .iter()
            .map(|t| ((*t).to_owned(), json!({"schema": if action == "patch" { json!({"type": "object"}) } else { json!({"$ref": schema_ref}) }})))
            .collect();
        op["requestBody"] = json!({"content": content, "required": true});
    }
    op
}

fn paths_for(def: &ResourceDef, schema_ref: &str) -> Vec<(String, Value)> {
    let base = format!("/{}", gv_path(&def.group, &def.version));
    let collection = if def.namespaced {
        format!("{base}/namespaces/{{namespace}}/{}", def.plural)
    } else {
        format!("{base}/{}", def.plural)
    };
    let item = format!("{collection}/{{name}}");
    let json_body: &[&str] = &["application/json", "application/yaml"];
    // Strategic merge patch is deliberately not advertised: kubectl then computes client-side
    // apply patches from its compiled-in types (built-ins) or as merge patches (CRDs).
    let patch_body: &[&str] = &[
        "application/json-patch+json",
        "application/merge-patch+json",
        "application/apply-patch+yaml",
    ];
    let mut out = vec![
        (
            collection,
            json!({
                "get": operation(def, "list", schema_ref, true, None),
                "post": operation(def, "post", schema_ref, false, Some(json_body)),
                "delete": operation(def, "deletecollection", schema_ref, true, None),
            }),
        ),
        (
            item.clone(),
            json!({
                "get": operation(def, "get", schema_ref, false, None),
                "put": operation(def, "put", schema_ref, false, Some(json_body)),
                "patch": operation(def, "patch", schema_ref, false, Some(patch_body)),
                "delete": operation(def, "delete", schema_ref, false, None),
            }),
        ),
    ];
    if def.status {
        out.push((
            format!("{item}/status"),
            json!({
                "get": operation(def, "get", schema_ref, false, None),
                "put": operation(def, "put", schema_ref, false, Some(json_body)),
                "patch": operation(def, "patch", schema_ref, false, Some(patch_body)),
            }),
        ));
    }
    out
}

/// The schema published for one CRD version.
fn crd_schema(def: &ResourceDef, schema: Option<&Value>) -> Value {
    let mut s = schema
        .cloned()
        .unwrap_or_else(|| json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}));
    if !s.is_object() {
        s = json!({"type": "object"});
    }
    if s.get("type").is_none() {
        s["type"] = json!("object");
    }
    let props = s["properties"].as_object().cloned().unwrap_or_default();
    let mut props = props;
    props.insert(
        "apiVersion".into(),
        json!({"type": "string", "description": "APIVersion defines the versioned schema of this representation of an object."}),
    );
    props.insert(
        "kind".into(),
        json!({"type": "string", "description": "Kind is a string value representing the REST resource this object represents."}),
    );
    props.insert(
        "metadata".into(),
        json!({"allOf": [{"$ref": format!("#/components/schemas/{OBJECT_META}")}], "description": "Standard object's metadata."}),
    );
    s["properties"] = Value::Object(props);
    s["x-kubernetes-group-version-kind"] = json!([gvk(def)]);
    s
}

impl OpenApi {
    fn builtins(&self) -> Arc<Builtins> {
        self.builtins
            .get_or_init(|| Arc::new(generate_builtins()))
            .clone()
    }

    /// The document for one `api/v1` / `apis/<group>/<version>` path.
    pub fn v3_document(&self, catalog: &Catalog, path: &str) -> Option<Value> {
        let (group, version) = match path.split('/').collect::<Vec<_>>().as_slice() {
            ["api", v] => (String::new(), v.to_string()),
            ["apis", g, v] => (g.to_string(), v.to_string()),
            _ => return None,
        };
        let defs = catalog.resources(&group, &version);
        if defs.is_empty() {
            return None;
        }
        let builtins = self.builtins();
        let mut schemas = builtins.definitions.clone();
        let mut paths = Map::new();
        for def in &defs {
            let name = match &def.flavor {
                Flavor::Builtin(kind) => {
                    let name = builtins.names.get(kind).cloned().unwrap_or_default();
                    if let Some(s) = schemas.get_mut(&name) {
                        s["x-kubernetes-group-version-kind"] = json!([gvk(def)]);
                    }
                    name
                }
                Flavor::Custom(info) => {
                    let name = crd_schema_name(&def.group, &def.version, &def.kind);
                    schemas.insert(name.clone(), crd_schema(def, info.schema.as_ref()));
                    name
                }
            };
            for (p, item) in paths_for(def, &format!("#/components/schemas/{name}")) {
                paths.insert(p, item);
            }
        }
        Some(json!({
            "openapi": "3.0.0",
            "info": {"title": "Kubernetes", "version": "v1.33.0"},
            "paths": paths,
            "components": {"schemas": schemas},
        }))
    }

    /// `/openapi/v3`: one entry per group/version with a content hash.
    pub fn v3_index(&self, catalog: &Catalog) -> Value {
        let mut gvs: Vec<(String, String)> = Vec::new();
        for def in catalog.all() {
            let gv = (def.group.clone(), def.version.clone());
            if !gvs.contains(&gv) {
                gvs.push(gv);
            }
        }
        let mut paths = Map::new();
        for (g, v) in gvs {
            let path = gv_path(&g, &v);
            // The hash only needs to change when the served resources change.
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            for def in catalog.resources(&g, &v) {
                def.plural.hash(&mut hasher);
                def.kind.hash(&mut hasher);
                if let Flavor::Custom(info) = &def.flavor {
                    info.schema.as_ref().map(|s| s.to_string()).hash(&mut hasher);
                    info.crd_name.hash(&mut hasher);
                }
            }
            let hash = format!("{:016X}", hasher.finish());
            paths.insert(
                path.clone(),
                json!({"serverRelativeURL": format!("/openapi/v3/{path}?hash={hash}")}),
            );
        }
        json!({"paths": paths})
    }

    /// `/openapi/v2`: a valid but empty Swagger 2.0 document (protobuf or JSON). kubectl 1.27
    /// and 1.28 refuse to build a validator without one; with no definitions in it they fall
    /// back to server-side field validation (advertised in v3) and their compiled-in types.
    pub fn v2(&self, _catalog: &Catalog, accept: &str) -> Response<Body> {
        let (bytes, content_type) = if accept.contains("protobuf") {
            (
                v2_protobuf(),
                "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
            )
        } else {
            let doc = json!({"swagger": "2.0", "info": {"title": "Kubernetes", "version": "v1.33.0"}, "paths": {}, "definitions": {}});
            (serde_json::to_vec(&doc).unwrap_or_default(), "application/json")
        };
        let mut resp = Response::new(http_body_util::BodyExt::boxed(http_body_util::Full::new(
            bytes::Bytes::from(bytes),
        )));
        *resp.status_mut() = StatusCode::OK;
        if let Ok(v) = http::HeaderValue::from_str(content_type) {
            resp.headers_mut().insert(http::header::CONTENT_TYPE, v);
        }
        resp
    }
}

/// gnostic `openapi_v2.Document{swagger: "2.0", info: {title, version}, paths: {}}` in
/// protobuf wire format.
fn v2_protobuf() -> Vec<u8> {
    fn field(out: &mut Vec<u8>, number: u8, payload: &[u8]) {
        out.push((number << 3) | 2);
        out.push(payload.len() as u8);
        out.extend_from_slice(payload);
    }
    let mut info = Vec::new();
    field(&mut info, 1, b"Kubernetes");
    field(&mut info, 2, b"v1.33.0");
    let mut doc = Vec::new();
    field(&mut doc, 1, b"2.0");
    field(&mut doc, 2, &info);
    field(&mut doc, 8, &[]);
    doc
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn builtin_documents_have_gvk_and_field_validation() {
        let catalog = Catalog::new(crate::builtin::definitions());
        let openapi = OpenApi::default();
        let doc = openapi.v3_document(&catalog, "apis/apps/v1").unwrap();
        let deploy = &doc["components"]["schemas"]["io.k8s.api.apps.v1.Deployment"];
        assert_eq!(deploy["x-kubernetes-group-version-kind"][0]["kind"], "Deployment");
        let spec = &deploy["properties"]["spec"];
        let reference = spec["$ref"]
            .as_str()
            .or(spec["allOf"][0]["$ref"].as_str())
            .unwrap();
        assert_eq!(
            reference,
            "#/components/schemas/io.k8s.api.apps.v1.DeploymentSpec"
        );
        let patch = &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"];
        assert!(
            patch["parameters"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["name"] == "fieldValidation")
        );
        assert!(
            patch["requestBody"]["content"]
                .get("application/strategic-merge-patch+json")
                .is_none()
        );
        let index = openapi.v3_index(&catalog);
        assert!(
            index["paths"]["api/v1"]["serverRelativeURL"]
                .as_str()
                .unwrap()
                .starts_with("/openapi/v3/api/v1?hash=")
        );
        assert!(openapi.v3_document(&catalog, "apis/nope/v1").is_none());
    }

    #[test]
    fn v2_placeholder_is_well_formed_protobuf() {
        let bytes = v2_protobuf();
        // swagger = "2.0" is field 1, length-delimited.
        assert_eq!(&bytes[..5], &[0x0a, 3, b'2', b'.', b'0']);
        assert_eq!(bytes[bytes.len() - 2..], [0x42, 0]);
    }

    #[test]
    fn crd_names() {
        assert_eq!(
            crd_schema_name("policy.karmada.io", "v1alpha1", "PropagationPolicy"),
            "io.karmada.policy.v1alpha1.PropagationPolicy"
        );
    }
}
