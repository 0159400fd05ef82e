//! CustomResourceDefinitions: turning CRD objects into served resources, CRD-specific
//! validation and the server-owned CRD status (NamesAccepted/Established).

use std::sync::Arc;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaProps;
use serde_json::{Value, json};

use crate::errors::Cause;
use crate::resources::{Flavor, ResourceDef, ScaleSpec, storage_prefix};

/// One additionalPrinterColumn.
#[derive(Clone, Debug, PartialEq)]
pub struct PrinterColumn {
    /// Column header.
    pub name: String,
    /// OpenAPI type (`string`, `integer`, `date`, ...).
    pub column_type: String,
    /// Format hint.
    pub format: String,
    /// Description.
    pub description: String,
    /// Priority (0 = shown by default).
    pub priority: i64,
    /// JSONPath of the value.
    pub json_path: String,
}

/// What serving one version of a CRD needs to know.
#[derive(Clone, Debug)]
pub struct CrdVersion {
    /// CRD object name (`<plural>.<group>`).
    pub crd_name: String,
    /// The version's `openAPIV3Schema`, if any.
    pub schema: Option<Value>,
    /// The compiled structural schema (pruning, defaulting, validation).
    pub compiled: Option<Arc<flotilla_schema::Schema>>,
    /// Shape for strategic merge and server-side apply.
    pub shape: Arc<flotilla_patch::Shape>,
    /// Printer columns of this version.
    pub printer_columns: Vec<PrinterColumn>,
    /// Whether more than one version is served (objects may need their apiVersion rewritten).
    pub multi_version: bool,
}

/// Served resource definitions of one CRD object (none while it is not established).
pub fn definitions(crd: &Value) -> Vec<ResourceDef> {
    let spec = &crd["spec"];
    let (Some(group), Some(kind), Some(plural)) = (
        spec["group"].as_str(),
        spec["names"]["kind"].as_str(),
        spec["names"]["plural"].as_str(),
    ) else {
        return Vec::new();
    };
    let crd_name = crd["metadata"]["name"].as_str().unwrap_or_default().to_owned();
    let singular = spec["names"]["singular"]
        .as_str()
        .map_or_else(|| kind.to_lowercase(), str::to_owned);
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_owned)).collect())
            .unwrap_or_default()
    };
    let versions = spec["versions"].as_array().cloned().unwrap_or_default();
    let served: Vec<&Value> = versions
        .iter()
        .filter(|v| v["served"].as_bool().unwrap_or(false))
        .collect();
    let deleting = crate::objects::is_deleting(crd);
    served
        .iter()
        .filter_map(|v| {
            let version = v["name"].as_str()?;
            let printer_columns = v["additionalPrinterColumns"]
                .as_array()
                .map(|cols| {
                    cols.iter()
                        .filter_map(|c| {
                            Some(PrinterColumn {
                                name: c["name"].as_str()?.to_owned(),
                                column_type: c["type"].as_str().unwrap_or("string").to_owned(),
                                format: c["format"].as_str().unwrap_or("").to_owned(),
                                description: c["description"].as_str().unwrap_or("").to_owned(),
                                priority: c["priority"].as_i64().unwrap_or(0),
                                json_path: c["jsonPath"].as_str()?.to_owned(),
                            })
                        })
                        .collect()
                })
                .unwrap_or_default();
            let sub = &v["subresources"];
            let scale = sub.get("scale").filter(|s| s.is_object()).map(|s| ScaleSpec {
                spec_replicas: s["specReplicasPath"]
                    .as_str()
                    .unwrap_or(".spec.replicas")
                    .to_owned(),
                status_replicas: s["statusReplicasPath"]
                    .as_str()
                    .unwrap_or(".status.replicas")
                    .to_owned(),
                label_selector: s["labelSelectorPath"].as_str().map(str::to_owned),
            });
            let schema = v
                .get("schema")
                .and_then(|s| s.get("openAPIV3Schema"))
                .filter(|s| !s.is_null())
                .cloned();
            let compiled = schema
                .as_ref()
                .and_then(|s| serde_json::from_value::<JSONSchemaProps>(s.clone()).ok())
                .map(|props| Arc::new(flotilla_schema::Schema::new_unchecked(&props)));
            let shape = Arc::new(flotilla_patch::builtin::custom_resource_shape(
                schema
                    .as_ref()
                    .unwrap_or(&json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})),
            ));
            Some(ResourceDef {
                group: group.to_owned(),
                version: version.to_owned(),
                kind: kind.to_owned(),
                plural: plural.to_owned(),
                singular: singular.clone(),
                namespaced: spec["scope"].as_str() != Some("Cluster"),
                short_names: strings(&spec["names"]["shortNames"]),
                categories: strings(&spec["names"]["categories"]),
                status: sub.get("status").is_some_and(|s| !s.is_null()),
                scale,
                preferred: v["storage"].as_bool().unwrap_or(false),
                flavor: Flavor::Custom(Arc::new(CrdVersion {
                    crd_name: crd_name.clone(),
                    schema,
                    compiled,
                    shape,
                    printer_columns,
                    multi_version: served.len() > 1,
                })),
                prefix: storage_prefix(group, plural),
                creatable: !deleting,
            })
        })
        .collect()
}

/// CRD-specific validation (422 causes).
pub fn validate(crd: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let spec = &crd["spec"];
    let group = spec["group"].as_str().unwrap_or("");
    let plural = spec["names"]["plural"].as_str().unwrap_or("");
    let name = crd["metadata"]["name"].as_str().unwrap_or("");
    if group.is_empty() {
        causes.push(Cause::required("spec.group", ""));
    } else if !group.contains('.') {
        causes.push(Cause::invalid(
            "spec.group",
            &json!(group),
            "should be a domain with at least one dot",
        ));
    }
    if plural.is_empty() {
        causes.push(Cause::required("spec.names.plural", ""));
    }
    if spec["names"]["kind"].as_str().is_none_or(str::is_empty) {
        causes.push(Cause::required("spec.names.kind", ""));
    }
    if !group.is_empty() && !plural.is_empty() && name != format!("{plural}.{group}") {
        causes.push(Cause::invalid(
            "metadata.name",
            &json!(name),
            "must be spec.names.plural+\".\"+spec.group",
        ));
    }
    match spec["scope"].as_str() {
        Some("Namespaced") | Some("Cluster") => {}
        other => causes.push(Cause::unsupported(
            "spec.scope",
            &json!(other.unwrap_or("")),
            &["Cluster", "Namespaced"],
        )),
    }
    let versions = spec["versions"].as_array().cloned().unwrap_or_default();
    if versions.is_empty() {
        causes.push(Cause::invalid(
            "spec.versions",
            &json!([]),
            "must have exactly one version marked as storage version",
        ));
    } else {
        let storage = versions
            .iter()
            .filter(|v| v["storage"].as_bool() == Some(true))
            .count();
        if storage != 1 {
            causes.push(Cause::invalid(
                "spec.versions",
                &Value::Null,
                "must have exactly one version marked as storage version",
            ));
        }
        for (i, v) in versions.iter().enumerate() {
            if v.get("schema")
                .and_then(|s| s.get("openAPIV3Schema"))
                .is_none_or(Value::is_null)
            {
                causes.push(Cause::required(
                    format!("spec.versions[{i}].schema.openAPIV3Schema"),
                    "schemas are required",
                ));
            }
        }
    }
    causes
}

/// A schema library field error as a Status cause (message without the field prefix).
pub fn cause_of(e: &flotilla_schema::FieldError) -> Cause {
    let prefix = format!("{}: ", e.field);
    let message = e.message.strip_prefix(&prefix).unwrap_or(&e.message).to_owned();
    Cause::new(e.kind.cause_type(), e.field.clone(), message)
}

/// Sets the server-owned CRD status: names accepted, established, stored versions.
pub fn set_status(crd: &mut Value, old: Option<&Value>) {
    let names = crd["spec"]["names"].clone();
    let now = crate::objects::now_rfc3339();
    let mut stored: Vec<String> = old
        .and_then(|o| o["status"]["storedVersions"].as_array())
        .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect())
        .unwrap_or_default();
    if let Some(storage) = crd["spec"]["versions"]
        .as_array()
        .and_then(|vs| vs.iter().find(|v| v["storage"].as_bool() == Some(true)))
        .and_then(|v| v["name"].as_str())
        && !stored.iter().any(|s| s == storage)
    {
        stored.push(storage.to_owned());
    }
    let keep_time = |ty: &str| -> String {
        old.and_then(|o| o["status"]["conditions"].as_array())
            .and_then(|cs| cs.iter().find(|c| c["type"] == ty && c["status"] == "True"))
            .and_then(|c| c["lastTransitionTime"].as_str())
            .map_or_else(|| now.clone(), str::to_owned)
    };
    let mut conditions = vec![
        json!({"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
               "message": "no conflicts found", "lastTransitionTime": keep_time("NamesAccepted")}),
        json!({"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
               "message": "the initial names have been accepted", "lastTransitionTime": keep_time("Established")}),
    ];
    if crate::objects::is_deleting(crd) {
        conditions.push(
            json!({"type": "Terminating", "status": "True", "reason": "InstanceDeletionInProgress",
            "message": "CustomResource deletion is in progress", "lastTransitionTime": now}),
        );
    }
    crd["status"] = json!({
        "acceptedNames": names,
        "conditions": conditions,
        "storedVersions": stored,
    });
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn crd() -> Value {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {
                "group": "example.com", "scope": "Namespaced",
                "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "shortNames": ["wd"]},
                "versions": [
                    {"name": "v1", "served": true, "storage": true,
                     "schema": {"openAPIV3Schema": {"type": "object"}},
                     "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.size", "statusReplicasPath": ".status.size"}},
                     "additionalPrinterColumns": [{"name": "Size", "type": "integer", "jsonPath": ".spec.size"}]},
                    {"name": "v1beta1", "served": true, "storage": false,
                     "schema": {"openAPIV3Schema": {"type": "object"}}},
                    {"name": "v1alpha1", "served": false, "storage": false,
                     "schema": {"openAPIV3Schema": {"type": "object"}}}
                ]
            }
        })
    }

    #[test]
    fn served_versions_become_resources() {
        let defs = definitions(&crd());
        assert_eq!(defs.len(), 2);
        let v1 = &defs[0];
        assert_eq!(
            (v1.group.as_str(), v1.version.as_str(), v1.plural.as_str()),
            ("example.com", "v1", "widgets")
        );
        assert!(v1.status && v1.preferred && v1.namespaced);
        assert_eq!(v1.scale.as_ref().unwrap().spec_replicas, ".spec.size");
        assert_eq!(v1.prefix, "/registry/example.com/widgets/");
        let Flavor::Custom(info) = &v1.flavor else {
            panic!()
        };
        assert_eq!(info.printer_columns[0].name, "Size");
        assert!(info.multi_version);
        assert!(!defs[1].status);
    }

    #[test]
    fn validation_catches_bad_names_and_storage() {
        assert!(validate(&crd()).is_empty());
        let mut bad = crd();
        bad["metadata"]["name"] = json!("wrong");
        bad["spec"]["versions"][1]["storage"] = json!(true);
        let fields: Vec<String> = validate(&bad).into_iter().map(|c| c.field).collect();
        assert_eq!(fields, vec!["metadata.name", "spec.versions"]);
    }

    #[test]
    fn status_is_established_and_tracks_stored_versions() {
        let mut c = crd();
        set_status(&mut c, None);
        assert_eq!(c["status"]["conditions"][1]["type"], "Established");
        assert_eq!(c["status"]["storedVersions"], json!(["v1"]));
        assert_eq!(c["status"]["acceptedNames"]["kind"], "Widget");
    }
}
