//! Work manifests: a resource template turned into what one member cluster receives, and the
//! hash and revision that identify one rendering of it.
//!
//! [`prepare_manifest`] is the contract of `docs/architecture.md` ("Works and member
//! objects"): the template with control-plane-only metadata removed, claim labels and
//! annotations kept as provenance, replicas revised per cluster for `Divided` scheduling, and
//! the conflict-resolution annotation.

use flotilla_api::ConflictResolution;
use flotilla_api::well_known::{
    APPLY_ONCE_ONLY_ANNOTATION, CONFLICT_RESOLUTION_ANNOTATION, RESOURCE_TEMPLATE_GENERATION_ANNOTATION,
    RESOURCE_TEMPLATE_UID_ANNOTATION, is_system_metadata_key,
};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::error::ManifestError;

/// Metadata fields that only mean something on the control plane.
const CONTROL_PLANE_METADATA: &[&str] = &[
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "managedFields",
    "ownerReferences",
    "finalizers",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "selfLink",
];

/// Labels the Job controller generates on the control plane; the member's own Job controller
/// generates its own (Karmada removes them the same way).
const GENERATED_JOB_LABELS: &[&str] = &[
    "controller-uid",
    "batch.kubernetes.io/controller-uid",
    "job-name",
    "batch.kubernetes.io/job-name",
];

/// How one cluster's manifest differs from the template.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterShare {
    /// The cluster's replicas under `Divided` scheduling; `None` keeps the template's count.
    pub replicas: Option<i32>,
    /// The cluster's share of a Divided Job's `spec.completions`.
    pub job_completions: Option<i32>,
}

/// The manifest one cluster receives for `template`.
///
/// - `metadata`: `uid`, `resourceVersion`, `generation`, `creationTimestamp`, `managedFields`,
///   `ownerReferences`, `finalizers`, `deletionTimestamp`, `deletionGracePeriodSeconds` and
///   `selfLink` are removed; the template's uid and generation are recorded in the
///   `resourcetemplate.karmada.io/uid` and `resourcetemplate.karmada.io/generation`
///   annotations (status aggregation compares the generation);
/// - flotilla's own bookkeeping annotations and labels (`flotilla.io/*`) are removed, except
///   `flotilla.io/apply-once-only`, which execution reads from the manifest; Karmada's claim
///   labels and annotations are kept as provenance;
/// - `status` is removed;
/// - a Service's allocated `clusterIP`/`clusterIPs` (not `None`), a Job's generated selector
///   and pod labels (unless `manualSelector`), and a ServiceAccount's generated token secrets
///   are removed, since the member allocates its own (as Karmada does);
/// - `share` revises replicas ([`flotilla_interpreter::revise_replicas`]) and Job completions;
/// - the `work.karmada.io/conflict-resolution` annotation says how to treat an existing member
///   object (`overwrite` or `abort`).
pub fn prepare_manifest(
    template: &Value,
    share: &ClusterShare,
    conflict_resolution: &ConflictResolution,
) -> Result<Value, ManifestError> {
    let mut manifest = template.clone();
    let Some(object) = manifest.as_object_mut() else {
        return Err(ManifestError::NotAnObject);
    };
    let kind = object
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let api_version = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    if kind.is_empty() || api_version.is_empty() {
        return Err(ManifestError::MissingTypeMeta);
    }
    object.remove("status");
    let metadata = object
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(metadata) = metadata.as_object_mut() else {
        return Err(ManifestError::MetadataNotAnObject);
    };
    let uid = metadata.get("uid").and_then(Value::as_str).map(str::to_owned);
    let generation = metadata.get("generation").and_then(Value::as_i64);
    for field in CONTROL_PLANE_METADATA {
        metadata.remove(*field);
    }
    strip_bookkeeping(metadata, "labels");
    strip_bookkeeping(metadata, "annotations");
    let annotations = string_map(metadata, "annotations");
    if let Some(uid) = uid {
        annotations.insert(RESOURCE_TEMPLATE_UID_ANNOTATION.to_owned(), Value::from(uid));
    }
    if let Some(generation) = generation {
        annotations.insert(
            RESOURCE_TEMPLATE_GENERATION_ANNOTATION.to_owned(),
            Value::from(generation.to_string()),
        );
    }
    annotations.insert(
        CONFLICT_RESOLUTION_ANNOTATION.to_owned(),
        Value::from(conflict_resolution_value(conflict_resolution)),
    );

    match (api_version.as_str(), kind.as_str()) {
        ("v1", "Service") => strip_service_cluster_ip(&mut manifest),
        ("batch/v1", "Job") => strip_generated_job_selector(&mut manifest),
        ("v1", "ServiceAccount") => strip_token_secrets(&mut manifest),
        _ => {}
    }

    if let Some(replicas) = share.replicas {
        flotilla_interpreter::revise_replicas(&mut manifest, replicas)?;
    }
    if let Some(completions) = share.job_completions {
        flotilla_interpreter::revise_job_completions(&mut manifest, completions)?;
    }
    Ok(manifest)
}

/// The annotation value for a conflict resolution: `overwrite` or `abort` (anything unknown is
/// treated as the safe `abort`).
pub fn conflict_resolution_value(conflict_resolution: &ConflictResolution) -> &'static str {
    match conflict_resolution {
        ConflictResolution::Overwrite => "overwrite",
        _ => "abort",
    }
}

/// The conflict resolution a manifest asks for; `Abort` when the annotation is absent or not
/// `overwrite`.
pub fn manifest_conflict_resolution(manifest: &Value) -> ConflictResolution {
    match annotation(manifest, CONFLICT_RESOLUTION_ANNOTATION) {
        Some(value) if value.eq_ignore_ascii_case("overwrite") => ConflictResolution::Overwrite,
        _ => ConflictResolution::Abort,
    }
}

/// The `flotilla.io/apply-once-only` annotation of a manifest, if set.
pub fn manifest_apply_once_override(manifest: &Value) -> Option<&str> {
    annotation(manifest, APPLY_ONCE_ONLY_ANNOTATION)
}

/// An annotation of an object.
pub fn annotation<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    object.get("metadata")?.get("annotations")?.get(key)?.as_str()
}

/// A label of an object.
pub fn label<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    object.get("metadata")?.get("labels")?.get(key)?.as_str()
}

fn string_map<'a>(metadata: &'a mut Map<String, Value>, field: &str) -> &'a mut Map<String, Value> {
    let entry = metadata.entry(field).or_insert_with(|| Value::Object(Map::new()));
    if !entry.is_object() {
        *entry = Value::Object(Map::new());
    }
    match entry {
        Value::Object(map) => map,
        // Replaced by an object just above.
        _ => unreachable!("metadata.{field} was just made an object"),
    }
}

/// Removes flotilla's own bookkeeping keys (the control plane's, not the workload's) from
/// `metadata.<field>`, keeping the per-template apply-once-only override.
fn strip_bookkeeping(metadata: &mut Map<String, Value>, field: &str) {
    let Some(Value::Object(map)) = metadata.get_mut(field) else {
        return;
    };
    map.retain(|key, _| key == APPLY_ONCE_ONLY_ANNOTATION || !is_flotilla_key(key));
    if map.is_empty() {
        metadata.remove(field);
    }
}

fn is_flotilla_key(key: &str) -> bool {
    is_system_metadata_key(key)
        && key
            .split_once('/')
            .is_some_and(|(prefix, _)| prefix == "flotilla.io" || prefix.ends_with(".flotilla.io"))
}

fn strip_service_cluster_ip(manifest: &mut Value) {
    let Some(spec) = manifest.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    let headless = spec.get("clusterIP").and_then(Value::as_str) == Some("None");
    if !headless {
        spec.remove("clusterIP");
        spec.remove("clusterIPs");
    }
}

fn strip_generated_job_selector(manifest: &mut Value) {
    let Some(spec) = manifest.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    if spec.get("manualSelector").and_then(Value::as_bool) == Some(true) {
        return;
    }
    if let Some(Value::Object(selector)) = spec.get_mut("selector") {
        if let Some(Value::Object(match_labels)) = selector.get_mut("matchLabels") {
            for label in GENERATED_JOB_LABELS {
                match_labels.remove(*label);
            }
            if match_labels.is_empty() {
                selector.remove("matchLabels");
            }
        }
        if selector.is_empty() {
            spec.remove("selector");
        }
    }
    if let Some(Value::Object(labels)) = spec
        .get_mut("template")
        .and_then(|t| t.get_mut("metadata"))
        .and_then(|m| m.get_mut("labels"))
    {
        for label in GENERATED_JOB_LABELS {
            labels.remove(*label);
        }
    }
}

fn strip_token_secrets(manifest: &mut Value) {
    let name = manifest
        .get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let token_prefix = format!("{name}-token-");
    let Some(object) = manifest.as_object_mut() else {
        return;
    };
    if let Some(Value::Array(secrets)) = object.get_mut("secrets") {
        secrets.retain(|s| {
            !s.get("name")
                .and_then(Value::as_str)
                .is_some_and(|n| n.starts_with(&token_prefix))
        });
        if secrets.is_empty() {
            object.remove("secrets");
        }
    }
}

/// Canonical JSON: object keys sorted at every level, no whitespace. Two equal values always
/// give the same text, whatever order their maps were built in.
pub fn canonical_json(value: &Value) -> String {
    let mut out = Vec::new();
    write_canonical(value, &mut out);
    // Only serde_json's output, strings' own UTF-8 and ASCII punctuation were written.
    String::from_utf8(out).unwrap_or_default()
}

/// Appends `value`'s canonical JSON to `out`. [`manifest_digest`] hashes the text once it is
/// written (execution hashes every manifest of every Work event and of every Work it plans):
/// fed to the hasher piece by piece, the pieces' calls had cost more than the hashing.
fn write_canonical(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(map) if maps_iterate_in_key_order() => write_entries(map.iter(), out),
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            write_entries(entries.into_iter(), out);
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, out);
            }
            out.push(b']');
        }
        Value::String(text) => write_json_string(text, out),
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        // Writing to a vector cannot fail.
        Value::Number(number) => {
            let _ = serde_json::to_writer(&mut *out, number);
        }
    }
}

/// An object's `entries`, in the order given, as `{"key":value,...}`.
fn write_entries<'a>(entries: impl Iterator<Item = (&'a String, &'a Value)>, out: &mut Vec<u8>) {
    out.push(b'{');
    for (i, (key, item)) in entries.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_json_string(key, out);
        out.push(b':');
        write_canonical(item, out);
    }
    out.push(b'}');
}

/// Whether serde_json's maps iterate in key order in this build: they do unless its
/// `preserve_order` feature is on somewhere in the build (then [`write_canonical`] sorts).
fn maps_iterate_in_key_order() -> bool {
    static SORTED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *SORTED.get_or_init(|| {
        let mut map = serde_json::Map::new();
        map.insert("b".to_owned(), Value::Null);
        map.insert("a".to_owned(), Value::Null);
        map.keys().next().is_some_and(|first| first == "a")
    })
}

/// `text` as serde_json writes a JSON string: as it is between quotes when nothing in it needs
/// an escape (a quote, a backslash or a control character), else through serde_json.
fn write_json_string(text: &str, out: &mut Vec<u8>) {
    if text.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push(b'"');
        out.extend_from_slice(text.as_bytes());
        out.push(b'"');
    } else {
        // Writing to a vector cannot fail.
        let _ = serde_json::to_writer(&mut *out, text);
    }
}

/// SHA-256 of the manifest's canonical JSON, first 16 hex digits.
pub fn manifest_hash(manifest: &Value) -> String {
    digest_hex(manifest_digest(manifest))
}

/// A [`manifest_digest`] as [`manifest_hash`] writes it: 16 hex digits.
fn digest_hex(digest: u64) -> String {
    format!("{digest:016x}")
}

/// [`manifest_hash`] as a number (the first 64 bits of the SHA-256 of the canonical JSON): what
/// execution's Work cache keeps of each manifest.
pub fn manifest_digest(manifest: &Value) -> u64 {
    let mut text = Vec::with_capacity(1024);
    write_canonical(manifest, &mut text);
    let digest = Sha256::digest(&text);
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(first)
}

/// A desired revision: the Work generation and the hash of the rendered manifest, written as
/// `<generation>/<hash>` in the `flotilla.io/desired-revision` annotation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Revision {
    /// The Work's `metadata.generation`.
    pub generation: i64,
    /// [`manifest_hash`] of the manifest.
    pub hash: String,
}

impl Revision {
    /// The revision of `manifest` in a Work at `generation`.
    pub fn of(generation: i64, manifest: &Value) -> Self {
        Self::of_digest(generation, manifest_digest(manifest))
    }

    /// The revision of a manifest whose [`manifest_digest`] is `digest`.
    pub fn of_digest(generation: i64, digest: u64) -> Self {
        Self {
            generation,
            hash: digest_hex(digest),
        }
    }

    /// Parses `<generation>/<hash>`; `None` when malformed (treated as "no revision recorded").
    pub fn parse(text: &str) -> Option<Self> {
        let (generation, hash) = text.split_once('/')?;
        let generation = generation.parse().ok()?;
        if hash.is_empty() || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        Some(Self {
            generation,
            hash: hash.to_owned(),
        })
    }
}

impl std::fmt::Display for Revision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.generation, self.hash)
    }
}

/// What identifies a manifest's member object.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectIdentity {
    /// `apiVersion`.
    pub api_version: String,
    /// `kind`.
    pub kind: String,
    /// Namespace; empty for cluster-scoped objects.
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl ObjectIdentity {
    /// The identity of a manifest.
    pub fn of(manifest: &Value) -> Result<Self, ManifestError> {
        let text = |value: Option<&Value>| value.and_then(Value::as_str).unwrap_or("").to_owned();
        let metadata = manifest.get("metadata");
        let identity = Self {
            api_version: text(manifest.get("apiVersion")),
            kind: text(manifest.get("kind")),
            namespace: text(metadata.and_then(|m| m.get("namespace"))),
            name: text(metadata.and_then(|m| m.get("name"))),
        };
        if identity.api_version.is_empty() || identity.kind.is_empty() {
            return Err(ManifestError::MissingTypeMeta);
        }
        if identity.name.is_empty() {
            return Err(ManifestError::MissingName);
        }
        Ok(identity)
    }

    /// `(group, version)` of the apiVersion.
    pub fn group_version(&self) -> (&str, &str) {
        match self.api_version.split_once('/') {
            Some((group, version)) => (group, version),
            None => ("", self.api_version.as_str()),
        }
    }
}

impl std::fmt::Display for ObjectIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.namespace.is_empty() {
            write!(f, "{} {}", self.kind, self.name)
        } else {
            write!(f, "{} {}/{}", self.kind, self.namespace, self.name)
        }
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    fn deployment() -> Value {
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {
                "name": "nginx",
                "namespace": "default",
                "uid": "template-uid",
                "resourceVersion": "42",
                "generation": 3,
                "creationTimestamp": "2024-01-01T00:00:00Z",
                "deletionTimestamp": "2024-01-02T00:00:00Z",
                "deletionGracePeriodSeconds": 30,
                "selfLink": "/apis/apps/v1/namespaces/default/deployments/nginx",
                "managedFields": [{"manager": "kubectl"}],
                "ownerReferences": [{"apiVersion": "v1", "kind": "X", "name": "o", "uid": "u"}],
                "finalizers": ["example.com/keep"],
                "labels": {
                    "app": "nginx",
                    "propagationpolicy.karmada.io/permanent-id": "pp-uid",
                    "flotilla.io/internal": "x",
                },
                "annotations": {
                    "propagationpolicy.karmada.io/name": "pp",
                    "propagationpolicy.karmada.io/namespace": "default",
                    "flotilla.io/lazy-baseline": "abc",
                    "flotilla.io/traceparent": "00-aa-bb-01",
                    "flotilla.io/apply-once-only": "on",
                    "team": "web",
                },
            },
            "spec": {
                "replicas": 5,
                "template": {"spec": {"containers": [{"name": "nginx", "image": "nginx:1.25"}]}},
            },
            "status": {"readyReplicas": 5},
        })
    }

    #[test]
    fn strips_every_control_plane_field_and_keeps_provenance() {
        let manifest = prepare_manifest(
            &deployment(),
            &ClusterShare::default(),
            &ConflictResolution::Abort,
        )
        .unwrap();
        assert_eq!(
            manifest,
            json!({
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {
                    "name": "nginx",
                    "namespace": "default",
                    "labels": {
                        "app": "nginx",
                        "propagationpolicy.karmada.io/permanent-id": "pp-uid",
                    },
                    "annotations": {
                        "propagationpolicy.karmada.io/name": "pp",
                        "propagationpolicy.karmada.io/namespace": "default",
                        "flotilla.io/apply-once-only": "on",
                        "team": "web",
                        "resourcetemplate.karmada.io/uid": "template-uid",
                        "resourcetemplate.karmada.io/generation": "3",
                        "work.karmada.io/conflict-resolution": "abort",
                    },
                },
                "spec": {
                    "replicas": 5,
                    "template": {"spec": {"containers": [{"name": "nginx", "image": "nginx:1.25"}]}},
                },
            })
        );
    }

    #[test]
    fn each_control_plane_field_is_stripped_on_its_own() {
        for field in CONTROL_PLANE_METADATA {
            let template = json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "c", (*field): "x"},
            });
            let manifest =
                prepare_manifest(&template, &ClusterShare::default(), &ConflictResolution::Abort).unwrap();
            assert!(manifest["metadata"].get(*field).is_none(), "{field} kept");
        }
    }

    #[test]
    fn divided_replicas_are_revised_per_cluster() {
        let share = ClusterShare {
            replicas: Some(2),
            job_completions: None,
        };
        let manifest = prepare_manifest(&deployment(), &share, &ConflictResolution::Abort).unwrap();
        assert_eq!(manifest["spec"]["replicas"], 2);
        let zero = ClusterShare {
            replicas: Some(0),
            job_completions: None,
        };
        let manifest = prepare_manifest(&deployment(), &zero, &ConflictResolution::Abort).unwrap();
        assert_eq!(manifest["spec"]["replicas"], 0);
    }

    #[test]
    fn job_gets_parallelism_and_completions_and_loses_generated_selector() {
        let job = json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "pi", "namespace": "default", "uid": "job-uid"},
            "spec": {
                "parallelism": 4,
                "completions": 10,
                "selector": {"matchLabels": {"controller-uid": "cp-uid", "batch.kubernetes.io/controller-uid": "cp-uid"}},
                "template": {"metadata": {"labels": {
                    "app": "pi",
                    "controller-uid": "cp-uid",
                    "job-name": "pi",
                    "batch.kubernetes.io/controller-uid": "cp-uid",
                    "batch.kubernetes.io/job-name": "pi",
                }}},
            },
        });
        let share = ClusterShare {
            replicas: Some(1),
            job_completions: Some(3),
        };
        let manifest = prepare_manifest(&job, &share, &ConflictResolution::Overwrite).unwrap();
        assert_eq!(manifest["spec"]["parallelism"], 1);
        assert_eq!(manifest["spec"]["completions"], 3);
        assert!(manifest["spec"].get("selector").is_none());
        assert_eq!(
            manifest["spec"]["template"]["metadata"]["labels"],
            json!({"app": "pi"})
        );
        assert_eq!(
            manifest["metadata"]["annotations"]["work.karmada.io/conflict-resolution"],
            "overwrite"
        );
    }

    #[test]
    fn manual_job_selector_is_kept() {
        let job = json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "pi"},
            "spec": {"manualSelector": true, "selector": {"matchLabels": {"controller-uid": "mine"}}},
        });
        let manifest = prepare_manifest(&job, &ClusterShare::default(), &ConflictResolution::Abort).unwrap();
        assert_eq!(
            manifest["spec"]["selector"],
            json!({"matchLabels": {"controller-uid": "mine"}})
        );
    }

    #[test]
    fn service_cluster_ip_is_left_to_the_member_unless_headless() {
        let service = json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "web"},
            "spec": {"clusterIP": "10.0.0.7", "clusterIPs": ["10.0.0.7"], "ports": [{"port": 80}]},
        });
        let manifest =
            prepare_manifest(&service, &ClusterShare::default(), &ConflictResolution::Abort).unwrap();
        assert_eq!(manifest["spec"], json!({"ports": [{"port": 80}]}));
        let headless = json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "db"},
            "spec": {"clusterIP": "None", "clusterIPs": ["None"]},
        });
        let manifest =
            prepare_manifest(&headless, &ClusterShare::default(), &ConflictResolution::Abort).unwrap();
        assert_eq!(manifest["spec"]["clusterIP"], "None");
    }

    #[test]
    fn service_account_token_secrets_are_dropped() {
        let sa = json!({
            "apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": "robot"},
            "secrets": [{"name": "robot-token-abcde"}, {"name": "registry"}],
        });
        let manifest = prepare_manifest(&sa, &ClusterShare::default(), &ConflictResolution::Abort).unwrap();
        assert_eq!(manifest["secrets"], json!([{"name": "registry"}]));
    }

    #[test]
    fn conflict_resolution_round_trips_through_the_annotation() {
        for (resolution, value) in [
            (ConflictResolution::Overwrite, "overwrite"),
            (ConflictResolution::Abort, "abort"),
            (ConflictResolution::Other("Bogus".into()), "abort"),
        ] {
            let manifest = prepare_manifest(&deployment(), &ClusterShare::default(), &resolution).unwrap();
            assert_eq!(
                manifest["metadata"]["annotations"]["work.karmada.io/conflict-resolution"],
                value
            );
            let read = manifest_conflict_resolution(&manifest);
            let expected = if value == "overwrite" {
                ConflictResolution::Overwrite
            } else {
                ConflictResolution::Abort
            };
            assert_eq!(read, expected);
        }
        assert_eq!(
            manifest_conflict_resolution(&json!({"metadata": {}})),
            ConflictResolution::Abort
        );
    }

    #[test]
    fn malformed_templates_are_errors_not_panics() {
        let cases = [
            json!("text"),
            json!({"kind": "Deployment", "metadata": {"name": "x"}}),
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": "bad"}),
        ];
        for template in cases {
            assert!(
                prepare_manifest(&template, &ClusterShare::default(), &ConflictResolution::Abort).is_err(),
                "{template}"
            );
        }
        let bad_spec =
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"}, "spec": 3});
        let share = ClusterShare {
            replicas: Some(1),
            job_completions: None,
        };
        let err = prepare_manifest(&bad_spec, &share, &ConflictResolution::Abort).unwrap_err();
        assert!(err.to_string().contains("spec"), "{err}");
    }

    #[test]
    fn hash_is_independent_of_key_order_and_sensitive_to_content() {
        let a: Value = serde_json::from_str(r#"{"b":1,"a":{"y":[1,2],"x":"s"}}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"a":{"x":"s","y":[1,2]},"b":1}"#).unwrap();
        assert_eq!(canonical_json(&a), r#"{"a":{"x":"s","y":[1,2]},"b":1}"#);
        assert_eq!(manifest_hash(&a), manifest_hash(&b));
        assert_eq!(manifest_hash(&a).len(), 16);
        let c: Value = serde_json::from_str(r#"{"a":{"x":"s","y":[2,1]},"b":1}"#).unwrap();
        assert_ne!(manifest_hash(&a), manifest_hash(&c));
        // The hash is recorded in Works (applied revisions), so its text must not change: the
        // first 8 bytes of the SHA-256 of the canonical JSON, in hex; the digest is the same 64
        // bits as a number.
        let sha: String = Sha256::digest(canonical_json(&a).as_bytes())
            .iter()
            .take(8)
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(manifest_hash(&a), sha);
        assert_eq!(u64::from_str_radix(&sha, 16), Ok(manifest_digest(&a)));
    }

    /// The canonical JSON as it was first written (a `String` per key and scalar): the text
    /// hashed into every recorded revision, so the streamed writer must give the same bytes.
    fn canonical_as_first_written(value: &Value, out: &mut String) {
        match value {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                out.push('{');
                for (i, key) in keys.into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::from(key.as_str()).to_string());
                    out.push(':');
                    canonical_as_first_written(&map[key], out);
                }
                out.push('}');
            }
            Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    canonical_as_first_written(item, out);
                }
                out.push(']');
            }
            scalar => out.push_str(&scalar.to_string()),
        }
    }

    #[test]
    fn the_streamed_canonical_json_and_its_hash_are_those_recorded_before() {
        let values = [
            deployment(),
            json!({"z": null, "a": true, "m": false, "\u{e9}t\u{e9}": "caf\u{e9} \u{1f600}",
                   "esc\"aped\\": "line\nbreak\ttab\u{1}", "": ""}),
            json!({"n": [0, -1, 1.5, -2.25e-7, 1e300, u64::MAX, i64::MIN, 3.0]}),
            json!([[], {}, [{}], {"a": []}, "", 0]),
            json!("just a string"),
            json!(42),
            json!(null),
            json!({"b": {"d": {"f": [1, {"h": 2, "g": 3}]}, "c": 1}, "a": 0}),
            // Bytes serde_json leaves alone (a slash, DEL, the last control character's
            // neighbours) and escapes in keys.
            json!({"path/to": "a/b\u{7f} ~\u{1f}!", "k\"ey\\": "\\", "\u{0}": [" ", "\"\""]}),
        ];
        for value in values {
            let mut expected = String::new();
            canonical_as_first_written(&value, &mut expected);
            assert_eq!(canonical_json(&value), expected, "{value}");
            let mut first = [0u8; 8];
            first.copy_from_slice(&Sha256::digest(expected.as_bytes())[..8]);
            assert_eq!(manifest_digest(&value), u64::from_be_bytes(first), "{value}");
        }
    }

    #[test]
    fn revisions_parse_and_print() {
        let revision = Revision::of(4, &deployment());
        let text = revision.to_string();
        assert!(text.starts_with("4/"), "{text}");
        assert_eq!(Revision::parse(&text), Some(revision));
        for bad in ["", "4", "x/abc", "4/", "4/not-hex", "/abc"] {
            assert_eq!(Revision::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn identities() {
        let id = ObjectIdentity::of(&deployment()).unwrap();
        assert_eq!(id.group_version(), ("apps", "v1"));
        assert_eq!(id.to_string(), "Deployment default/nginx");
        let ns =
            ObjectIdentity::of(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}}))
                .unwrap();
        assert_eq!(ns.group_version(), ("", "v1"));
        assert_eq!(ns.to_string(), "Namespace a");
        assert!(ObjectIdentity::of(&json!({"apiVersion": "v1", "kind": "Namespace"})).is_err());
    }
}
