//! Built-in kinds: the served table, decoding through the k8s-openapi types (which is what
//! rejects a malformed object with the offending field), kube-apiserver's defaults, the
//! semantic checks clients commonly hit, and the conversions kube-apiserver makes on the way to
//! storage (events.k8s.io Events, a Secret's write-only `stringData`).

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use crate::errors::Cause;
use crate::resources::{Flavor, ResourceDef, ScaleSpec, storage_prefix};

/// The built-in kinds this server knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BuiltinKind {
    /// core/v1 Namespace.
    Namespace,
    /// core/v1 ConfigMap.
    ConfigMap,
    /// core/v1 Secret.
    Secret,
    /// core/v1 Service.
    Service,
    /// core/v1 ServiceAccount.
    ServiceAccount,
    /// core/v1 PersistentVolumeClaim.
    PersistentVolumeClaim,
    /// core/v1 PersistentVolume.
    PersistentVolume,
    /// core/v1 Pod.
    Pod,
    /// core/v1 Node.
    Node,
    /// core/v1 Event.
    Event,
    /// core/v1 Endpoints.
    Endpoints,
    /// events.k8s.io/v1 Event (stored as core/v1 Event).
    EventV1,
    /// apps/v1 Deployment.
    Deployment,
    /// apps/v1 StatefulSet.
    StatefulSet,
    /// apps/v1 DaemonSet.
    DaemonSet,
    /// apps/v1 ReplicaSet.
    ReplicaSet,
    /// batch/v1 Job.
    Job,
    /// batch/v1 CronJob.
    CronJob,
    /// networking.k8s.io/v1 Ingress.
    Ingress,
    /// coordination.k8s.io/v1 Lease.
    Lease,
    /// apiextensions.k8s.io/v1 CustomResourceDefinition.
    CustomResourceDefinition,
    /// rbac.authorization.k8s.io/v1 ClusterRole (stored, not enforced).
    ClusterRole,
    /// rbac.authorization.k8s.io/v1 ClusterRoleBinding (stored, not enforced).
    ClusterRoleBinding,
    /// rbac.authorization.k8s.io/v1 Role (stored, not enforced).
    Role,
    /// rbac.authorization.k8s.io/v1 RoleBinding (stored, not enforced).
    RoleBinding,
    /// policy/v1 PodDisruptionBudget.
    PodDisruptionBudget,
}

struct Row {
    kind: BuiltinKind,
    group: &'static str,
    name: &'static str,
    plural: &'static str,
    namespaced: bool,
    short: &'static [&'static str],
    all: bool,
    status: bool,
    scale: bool,
    storage: (&'static str, &'static str),
}

#[allow(clippy::too_many_arguments)]
const fn row(
    kind: BuiltinKind,
    group: &'static str,
    name: &'static str,
    plural: &'static str,
    namespaced: bool,
    short: &'static [&'static str],
    all: bool,
    status: bool,
    scale: bool,
) -> Row {
    Row {
        kind,
        group,
        name,
        plural,
        namespaced,
        short,
        all,
        status,
        scale,
        storage: (group, plural),
    }
}

const ROWS: &[Row] = &[
    row(
        BuiltinKind::Namespace,
        "",
        "Namespace",
        "namespaces",
        false,
        &["ns"],
        false,
        true,
        false,
    ),
    row(
        BuiltinKind::ConfigMap,
        "",
        "ConfigMap",
        "configmaps",
        true,
        &["cm"],
        false,
        false,
        false,
    ),
    row(
        BuiltinKind::Secret,
        "",
        "Secret",
        "secrets",
        true,
        &[],
        false,
        false,
        false,
    ),
    row(
        BuiltinKind::Service,
        "",
        "Service",
        "services",
        true,
        &["svc"],
        true,
        true,
        false,
    ),
    row(
        BuiltinKind::ServiceAccount,
        "",
        "ServiceAccount",
        "serviceaccounts",
        true,
        &["sa"],
        false,
        false,
        false,
    ),
    row(
        BuiltinKind::PersistentVolumeClaim,
        "",
        "PersistentVolumeClaim",
        "persistentvolumeclaims",
        true,
        &["pvc"],
        false,
        true,
        false,
    ),
    row(
        BuiltinKind::PersistentVolume,
        "",
        "PersistentVolume",
        "persistentvolumes",
        false,
        &["pv"],
        false,
        true,
        false,
    ),
    row(
        BuiltinKind::Pod,
        "",
        "Pod",
        "pods",
        true,
        &["po"],
        true,
        true,
        false,
    ),
    row(
        BuiltinKind::Node,
        "",
        "Node",
        "nodes",
        false,
        &["no"],
        false,
        true,
        false,
    ),
    row(
        BuiltinKind::Event,
        "",
        "Event",
        "events",
        true,
        &["ev"],
        false,
        false,
        false,
    ),
    row(
        BuiltinKind::Endpoints,
        "",
        "Endpoints",
        "endpoints",
        true,
        &["ep"],
        false,
        false,
        false,
    ),
    Row {
        storage: ("", "events"),
        ..row(
            BuiltinKind::EventV1,
            "events.k8s.io",
            "Event",
            "events",
            true,
            &["ev"],
            false,
            false,
            false,
        )
    },
    row(
        BuiltinKind::Deployment,
        "apps",
        "Deployment",
        "deployments",
        true,
        &["deploy"],
        true,
        true,
        true,
    ),
    row(
        BuiltinKind::StatefulSet,
        "apps",
        "StatefulSet",
        "statefulsets",
        true,
        &["sts"],
        true,
        true,
        true,
    ),
    row(
        BuiltinKind::DaemonSet,
        "apps",
        "DaemonSet",
        "daemonsets",
        true,
        &["ds"],
        true,
        true,
        false,
    ),
    row(
        BuiltinKind::ReplicaSet,
        "apps",
        "ReplicaSet",
        "replicasets",
        true,
        &["rs"],
        true,
        true,
        true,
    ),
    row(
        BuiltinKind::Job,
        "batch",
        "Job",
        "jobs",
        true,
        &[],
        true,
        true,
        false,
    ),
    row(
        BuiltinKind::CronJob,
        "batch",
        "CronJob",
        "cronjobs",
        true,
        &["cj"],
        true,
        true,
        false,
    ),
    row(
        BuiltinKind::Ingress,
        "networking.k8s.io",
        "Ingress",
        "ingresses",
        true,
        &["ing"],
        false,
        true,
        false,
    ),
    row(
        BuiltinKind::Lease,
        "coordination.k8s.io",
        "Lease",
        "leases",
        true,
        &[],
        false,
        false,
        false,
    ),
    row(
        BuiltinKind::ClusterRole,
        "rbac.authorization.k8s.io",
        "ClusterRole",
        "clusterroles",
        false,
        &[],
        false,
        false,
        false,
    ),
    row(
        BuiltinKind::ClusterRoleBinding,
        "rbac.authorization.k8s.io",
        "ClusterRoleBinding",
        "clusterrolebindings",
        false,
        &[],
        false,
        false,
        false,
    ),
    row(
        BuiltinKind::Role,
        "rbac.authorization.k8s.io",
        "Role",
        "roles",
        true,
        &[],
        false,
        false,
        false,
    ),
    row(
        BuiltinKind::RoleBinding,
        "rbac.authorization.k8s.io",
        "RoleBinding",
        "rolebindings",
        true,
        &[],
        false,
        false,
        false,
    ),
    row(
        BuiltinKind::PodDisruptionBudget,
        "policy",
        "PodDisruptionBudget",
        "poddisruptionbudgets",
        true,
        &["pdb"],
        false,
        true,
        false,
    ),
    row(
        BuiltinKind::CustomResourceDefinition,
        "apiextensions.k8s.io",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        false,
        &["crd", "crds"],
        false,
        true,
        false,
    ),
];

/// Every built-in resource definition.
pub fn definitions() -> Vec<ResourceDef> {
    ROWS.iter()
        .map(|r| {
            let singular = r.name.to_lowercase();
            ResourceDef {
                group: r.group.into(),
                version: "v1".into(),
                kind: r.name.into(),
                plural: r.plural.into(),
                singular,
                namespaced: r.namespaced,
                short_names: r.short.iter().map(|s| s.to_string()).collect(),
                categories: if r.all { vec!["all".into()] } else { vec![] },
                status: r.status,
                scale: r.scale.then(|| ScaleSpec {
                    spec_replicas: ".spec.replicas".into(),
                    status_replicas: ".status.replicas".into(),
                    label_selector: Some(".status.selector".into()),
                }),
                preferred: true,
                flavor: Flavor::Builtin(r.kind),
                prefix: storage_prefix(r.storage.0, r.storage.1),
                creatable: true,
            }
        })
        .collect()
}

/// A body that does not decode into its kind's type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodeError {
    /// Path of the offending field (`spec.replicas`).
    pub field: String,
    /// What the decoder said.
    pub message: String,
}

fn round_trip<T: DeserializeOwned + Serialize>(value: &Value) -> Result<Value, DecodeError> {
    // Decoded plainly first: tracking the path costs a string per field, and only an error
    // needs it, so a value that does not decode is decoded once more to name the field.
    let typed: T = match T::deserialize(value) {
        Ok(typed) => typed,
        Err(_) => serde_path_to_error::deserialize(value).map_err(|e| DecodeError {
            field: e.path().to_string(),
            message: e.inner().to_string(),
        })?,
    };
    serde_json::to_value(&typed).map_err(|e| DecodeError {
        field: String::new(),
        message: e.to_string(),
    })
}

impl BuiltinKind {
    /// Decodes `value` through the k8s-openapi type and re-encodes it: unknown fields are
    /// dropped, malformed fields are an error naming the field.
    pub fn decode(self, value: &Value) -> Result<Value, DecodeError> {
        use k8s_openapi::api::{apps, batch, coordination, core, networking, policy, rbac};
        use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiext;
        match self {
            BuiltinKind::Namespace => round_trip::<core::v1::Namespace>(value),
            BuiltinKind::ConfigMap => round_trip::<core::v1::ConfigMap>(value),
            BuiltinKind::Secret => round_trip::<core::v1::Secret>(value),
            BuiltinKind::Service => round_trip::<core::v1::Service>(value),
            BuiltinKind::ServiceAccount => round_trip::<core::v1::ServiceAccount>(value),
            BuiltinKind::PersistentVolumeClaim => round_trip::<core::v1::PersistentVolumeClaim>(value),
            BuiltinKind::PersistentVolume => round_trip::<core::v1::PersistentVolume>(value),
            BuiltinKind::Pod => round_trip::<core::v1::Pod>(value),
            BuiltinKind::Node => round_trip::<core::v1::Node>(value),
            BuiltinKind::Event => round_trip::<core::v1::Event>(value),
            BuiltinKind::Endpoints => round_trip::<core::v1::Endpoints>(value),
            BuiltinKind::EventV1 => round_trip::<k8s_openapi::api::events::v1::Event>(value),
            BuiltinKind::Deployment => round_trip::<apps::v1::Deployment>(value),
            BuiltinKind::StatefulSet => round_trip::<apps::v1::StatefulSet>(value),
            BuiltinKind::DaemonSet => round_trip::<apps::v1::DaemonSet>(value),
            BuiltinKind::ReplicaSet => round_trip::<apps::v1::ReplicaSet>(value),
            BuiltinKind::Job => round_trip::<batch::v1::Job>(value),
            BuiltinKind::CronJob => round_trip::<batch::v1::CronJob>(value),
            BuiltinKind::Ingress => round_trip::<networking::v1::Ingress>(value),
            BuiltinKind::Lease => round_trip::<coordination::v1::Lease>(value),
            BuiltinKind::CustomResourceDefinition => round_trip::<apiext::CustomResourceDefinition>(value),
            BuiltinKind::ClusterRole => round_trip::<rbac::v1::ClusterRole>(value),
            BuiltinKind::ClusterRoleBinding => round_trip::<rbac::v1::ClusterRoleBinding>(value),
            BuiltinKind::Role => round_trip::<rbac::v1::Role>(value),
            BuiltinKind::RoleBinding => round_trip::<rbac::v1::RoleBinding>(value),
            BuiltinKind::PodDisruptionBudget => round_trip::<policy::v1::PodDisruptionBudget>(value),
        }
    }

    /// Fills kube-apiserver's defaults for fields left empty.
    pub fn apply_defaults(self, obj: &mut Value) {
        match self {
            BuiltinKind::Deployment => {
                default(obj, &["spec", "replicas"], json!(1));
                default(obj, &["spec", "revisionHistoryLimit"], json!(10));
                default(obj, &["spec", "progressDeadlineSeconds"], json!(600));
                default(obj, &["spec", "strategy", "type"], json!("RollingUpdate"));
                if get(obj, &["spec", "strategy", "type"]) == Some(&json!("RollingUpdate")) {
                    default(
                        obj,
                        &["spec", "strategy", "rollingUpdate", "maxSurge"],
                        json!("25%"),
                    );
                    default(
                        obj,
                        &["spec", "strategy", "rollingUpdate", "maxUnavailable"],
                        json!("25%"),
                    );
                }
                pod_template_defaults(obj);
            }
            BuiltinKind::StatefulSet => {
                default(obj, &["spec", "replicas"], json!(1));
                default(obj, &["spec", "revisionHistoryLimit"], json!(10));
                default(obj, &["spec", "podManagementPolicy"], json!("OrderedReady"));
                default(obj, &["spec", "updateStrategy", "type"], json!("RollingUpdate"));
                if get(obj, &["spec", "updateStrategy", "type"]) == Some(&json!("RollingUpdate")) {
                    default(
                        obj,
                        &["spec", "updateStrategy", "rollingUpdate", "partition"],
                        json!(0),
                    );
                }
                default(
                    obj,
                    &["spec", "persistentVolumeClaimRetentionPolicy"],
                    json!({"whenDeleted": "Retain", "whenScaled": "Retain"}),
                );
                pod_template_defaults(obj);
            }
            BuiltinKind::DaemonSet => {
                default(obj, &["spec", "revisionHistoryLimit"], json!(10));
                default(obj, &["spec", "updateStrategy", "type"], json!("RollingUpdate"));
                if get(obj, &["spec", "updateStrategy", "type"]) == Some(&json!("RollingUpdate")) {
                    default(
                        obj,
                        &["spec", "updateStrategy", "rollingUpdate", "maxUnavailable"],
                        json!(1),
                    );
                    default(
                        obj,
                        &["spec", "updateStrategy", "rollingUpdate", "maxSurge"],
                        json!(0),
                    );
                }
                pod_template_defaults(obj);
            }
            BuiltinKind::ReplicaSet => {
                default(obj, &["spec", "replicas"], json!(1));
                pod_template_defaults(obj);
            }
            BuiltinKind::Job => {
                default(obj, &["spec", "parallelism"], json!(1));
                default(obj, &["spec", "backoffLimit"], json!(6));
                default(obj, &["spec", "completionMode"], json!("NonIndexed"));
                default(obj, &["spec", "suspend"], json!(false));
                default(obj, &["spec", "manualSelector"], Value::Null);
                if get(obj, &["spec", "completions"]).is_none()
                    && get(obj, &["spec", "parallelism"]) == Some(&json!(1))
                {
                    default(obj, &["spec", "completions"], json!(1));
                }
                default(
                    obj,
                    &["spec", "podReplacementPolicy"],
                    json!("TerminatingOrFailed"),
                );
                pod_template_defaults(obj);
            }
            BuiltinKind::CronJob => {
                default(obj, &["spec", "concurrencyPolicy"], json!("Allow"));
                default(obj, &["spec", "suspend"], json!(false));
                default(obj, &["spec", "successfulJobsHistoryLimit"], json!(3));
                default(obj, &["spec", "failedJobsHistoryLimit"], json!(1));
                if let Some(spec) = get_mut(obj, &["spec", "jobTemplate"]) {
                    default(spec, &["spec", "backoffLimit"], json!(6));
                    default(spec, &["spec", "completionMode"], json!("NonIndexed"));
                    pod_template_defaults(spec);
                }
            }
            BuiltinKind::Pod => {
                if let Some(spec) = obj.get_mut("spec") {
                    pod_spec_defaults(spec);
                }
            }
            BuiltinKind::Service => service_defaults(obj),
            BuiltinKind::Secret => default(obj, &["type"], json!("Opaque")),
            BuiltinKind::PersistentVolumeClaim => {
                default(obj, &["spec", "volumeMode"], json!("Filesystem"));
            }
            BuiltinKind::PersistentVolume => {
                default(obj, &["spec", "persistentVolumeReclaimPolicy"], json!("Retain"));
                default(obj, &["spec", "volumeMode"], json!("Filesystem"));
            }
            BuiltinKind::Namespace => {
                default(obj, &["spec", "finalizers"], json!(["kubernetes"]));
            }
            BuiltinKind::CustomResourceDefinition => {
                if let Some(names) = get_mut(obj, &["spec", "names"]) {
                    let kind = names.get("kind").and_then(Value::as_str).map(str::to_owned);
                    if let Some(kind) = kind {
                        default(names, &["listKind"], json!(format!("{kind}List")));
                        default(names, &["singular"], json!(kind.to_lowercase()));
                    }
                }
                default(obj, &["spec", "conversion", "strategy"], json!("None"));
            }
            _ => {}
        }
    }

    /// Status a freshly created object starts with (kube-apiserver's create strategies).
    pub fn initial_status(self, obj: &mut Value) {
        match self {
            BuiltinKind::Namespace => {
                obj["status"] = json!({"phase": "Active"});
            }
            BuiltinKind::Pod => {
                let qos = "BestEffort";
                obj["status"] = json!({"phase": "Pending", "qosClass": qos});
            }
            BuiltinKind::PersistentVolumeClaim | BuiltinKind::PersistentVolume => {
                obj["status"] = json!({"phase": "Pending"});
            }
            BuiltinKind::Service => {
                obj["status"] = json!({"loadBalancer": {}});
            }
            BuiltinKind::Deployment
            | BuiltinKind::StatefulSet
            | BuiltinKind::DaemonSet
            | BuiltinKind::ReplicaSet
            | BuiltinKind::Job
            | BuiltinKind::CronJob
            | BuiltinKind::Ingress => {
                if let Some(map) = obj.as_object_mut() {
                    map.remove("status");
                }
                if matches!(
                    self,
                    BuiltinKind::StatefulSet | BuiltinKind::ReplicaSet | BuiltinKind::DaemonSet
                ) {
                    obj["status"] = match self {
                        BuiltinKind::DaemonSet => json!({
                            "currentNumberScheduled": 0, "desiredNumberScheduled": 0,
                            "numberMisscheduled": 0, "numberReady": 0
                        }),
                        BuiltinKind::StatefulSet => json!({"replicas": 0, "availableReplicas": 0}),
                        _ => json!({"replicas": 0}),
                    };
                }
                if self == BuiltinKind::Ingress {
                    obj["status"] = json!({"loadBalancer": {}});
                }
            }
            _ => {}
        }
    }

    /// Semantic checks (422 Invalid causes) beyond what decoding catches.
    pub fn validate(self, obj: &Value) -> Vec<Cause> {
        let mut causes = Vec::new();
        match self {
            BuiltinKind::Deployment
            | BuiltinKind::ReplicaSet
            | BuiltinKind::StatefulSet
            | BuiltinKind::DaemonSet => {
                check_replicas(obj, &mut causes);
                check_selector_matches_template(obj, &mut causes);
                check_pod_spec(
                    get(obj, &["spec", "template", "spec"]),
                    "spec.template.spec",
                    &mut causes,
                );
            }
            BuiltinKind::Job => {
                check_pod_spec(
                    get(obj, &["spec", "template", "spec"]),
                    "spec.template.spec",
                    &mut causes,
                );
                let policy = get(obj, &["spec", "template", "spec", "restartPolicy"]);
                if let Some(p) = policy
                    && p != "OnFailure"
                    && p != "Never"
                {
                    causes.push(Cause::unsupported(
                        "spec.template.spec.restartPolicy",
                        p,
                        &["OnFailure", "Never"],
                    ));
                }
            }
            BuiltinKind::CronJob => {
                match get(obj, &["spec", "schedule"]).and_then(Value::as_str) {
                    None | Some("") => causes.push(Cause::required("spec.schedule", "")),
                    Some(s) if !valid_cron(s) => causes.push(Cause::invalid(
                        "spec.schedule",
                        &json!(s),
                        "unparseable cron schedule: expected exactly 5 fields or a descriptor such as @hourly",
                    )),
                    _ => {}
                }
                check_pod_spec(
                    get(obj, &["spec", "jobTemplate", "spec", "template", "spec"]),
                    "spec.jobTemplate.spec.template.spec",
                    &mut causes,
                );
            }
            BuiltinKind::Pod => check_pod_spec(get(obj, &["spec"]), "spec", &mut causes),
            BuiltinKind::Service => check_service(obj, &mut causes),
            BuiltinKind::ConfigMap | BuiltinKind::Secret => {
                for section in ["data", "binaryData", "stringData"] {
                    if let Some(map) = obj.get(section).and_then(Value::as_object) {
                        for key in map.keys() {
                            if !valid_config_key(key) {
                                causes.push(Cause::invalid(
                                    format!("{section}[{key}]"),
                                    &json!(key),
                                    "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
                                ));
                            }
                        }
                    }
                }
            }
            _ => {}
        }
        causes
    }

    /// Whether a change to this path is a spec change (bumps `metadata.generation`).
    pub fn tracks_generation(self) -> bool {
        !matches!(
            self,
            BuiltinKind::ConfigMap
                | BuiltinKind::Secret
                | BuiltinKind::Event
                | BuiltinKind::EventV1
                | BuiltinKind::Endpoints
                | BuiltinKind::ServiceAccount
                | BuiltinKind::Lease
                | BuiltinKind::ClusterRole
                | BuiltinKind::ClusterRoleBinding
                | BuiltinKind::Role
                | BuiltinKind::RoleBinding
                | BuiltinKind::Namespace
                | BuiltinKind::Node
                | BuiltinKind::Pod
                | BuiltinKind::Service
                | BuiltinKind::PersistentVolumeClaim
                | BuiltinKind::PersistentVolume
        )
    }

    /// Whether an update without resourceVersion is accepted.
    pub fn allows_unconditional_update(self) -> bool {
        true
    }

    /// Whether PUT on a missing object creates it.
    pub fn allows_create_on_update(self) -> bool {
        matches!(
            self,
            BuiltinKind::Event | BuiltinKind::EventV1 | BuiltinKind::Endpoints
        )
    }
}

/// Converts an events.k8s.io/v1 Event to the stored core/v1 form.
pub fn event_v1_to_core(mut obj: Value) -> Value {
    if let Some(map) = obj.as_object_mut() {
        rename(map, "regarding", "involvedObject");
        rename(map, "note", "message");
        rename(map, "deprecatedSource", "source");
        rename(map, "deprecatedFirstTimestamp", "firstTimestamp");
        rename(map, "deprecatedLastTimestamp", "lastTimestamp");
        rename(map, "deprecatedCount", "count");
        rename(map, "reportingController", "reportingComponent");
        map.insert("apiVersion".into(), json!("v1"));
    }
    obj
}

/// Converts a stored core/v1 Event to events.k8s.io/v1.
pub fn event_core_to_v1(mut obj: Value) -> Value {
    if let Some(map) = obj.as_object_mut() {
        rename(map, "involvedObject", "regarding");
        rename(map, "message", "note");
        rename(map, "source", "deprecatedSource");
        rename(map, "firstTimestamp", "deprecatedFirstTimestamp");
        rename(map, "lastTimestamp", "deprecatedLastTimestamp");
        rename(map, "count", "deprecatedCount");
        rename(map, "reportingComponent", "reportingController");
        map.insert("apiVersion".into(), json!("events.k8s.io/v1"));
    }
    obj
}

/// Folds a decoded Secret's write-only `stringData` into `data`, as kube-apiserver's v1 to
/// internal conversion does on every write: each entry is stored base64-encoded (standard
/// alphabet, padded) under its key and wins over the same key in `data`; `stringData` itself
/// (empty or not) is never stored nor served. Decoding has already rejected non-string values
/// with a 400, as kube-apiserver's decoder does, so only strings reach this.
pub fn fold_secret_string_data(obj: &mut Value) {
    let Some(map) = obj.as_object_mut() else {
        return;
    };
    let Some(Value::Object(strings)) = map.remove("stringData") else {
        return;
    };
    if strings.is_empty() {
        return;
    }
    if !map.get("data").is_some_and(Value::is_object) {
        map.insert("data".into(), Value::Object(Map::new()));
    }
    let Some(Value::Object(data)) = map.get_mut("data") else {
        return;
    };
    for (key, value) in strings {
        if let Value::String(text) = value {
            data.insert(key, Value::String(BASE64.encode(text)));
        }
    }
}

fn rename(map: &mut Map<String, Value>, from: &str, to: &str) {
    if let Some(v) = map.remove(from) {
        map.insert(to.into(), v);
    }
}

/// Reads a nested field.
pub fn get<'a>(obj: &'a Value, path: &[&str]) -> Option<&'a Value> {
    let mut cur = obj;
    for p in path {
        cur = cur.get(p)?;
    }
    Some(cur)
}

fn get_mut<'a>(obj: &'a mut Value, path: &[&str]) -> Option<&'a mut Value> {
    let mut cur = obj;
    for p in path {
        cur = cur.get_mut(p)?;
    }
    Some(cur)
}

/// Sets `path` to `value` unless something non-null is there; creates parents as objects.
/// A `Null` default only ensures nothing (used as a no-op marker).
fn default(obj: &mut Value, path: &[&str], value: Value) {
    if value.is_null() {
        return;
    }
    let mut cur = obj;
    for (i, p) in path.iter().enumerate() {
        let Some(map) = cur.as_object_mut() else {
            return;
        };
        if i == path.len() - 1 {
            match map.get(*p) {
                Some(v) if !v.is_null() => {}
                _ => {
                    map.insert((*p).into(), value);
                }
            }
            return;
        }
        let entry = map.entry((*p).to_string()).or_insert_with(|| json!({}));
        if entry.is_null() {
            *entry = json!({});
        }
        cur = entry;
    }
}

fn pod_template_defaults(obj: &mut Value) {
    if let Some(spec) = get_mut(obj, &["spec", "template", "spec"]) {
        pod_spec_defaults(spec);
    }
}

fn pod_spec_defaults(spec: &mut Value) {
    default(spec, &["restartPolicy"], json!("Always"));
    default(spec, &["terminationGracePeriodSeconds"], json!(30));
    default(spec, &["dnsPolicy"], json!("ClusterFirst"));
    default(spec, &["securityContext"], json!({}));
    default(spec, &["schedulerName"], json!("default-scheduler"));
    for list in ["containers", "initContainers"] {
        if let Some(containers) = spec.get_mut(list).and_then(Value::as_array_mut) {
            for c in containers {
                default(c, &["terminationMessagePath"], json!("/dev/termination-log"));
                default(c, &["terminationMessagePolicy"], json!("File"));
                let image = c.get("image").and_then(Value::as_str).unwrap_or("");
                let policy = if image_is_latest(image) {
                    "Always"
                } else {
                    "IfNotPresent"
                };
                default(c, &["imagePullPolicy"], json!(policy));
                default(c, &["resources"], json!({}));
                if let Some(ports) = c.get_mut("ports").and_then(Value::as_array_mut) {
                    for p in ports {
                        default(p, &["protocol"], json!("TCP"));
                    }
                }
            }
        }
    }
}

fn image_is_latest(image: &str) -> bool {
    if image.contains('@') {
        return false;
    }
    let last = image.rsplit('/').next().unwrap_or(image);
    match last.split_once(':') {
        None => true,
        Some((_, tag)) => tag == "latest",
    }
}

fn service_defaults(obj: &mut Value) {
    let ty = get(obj, &["spec", "type"])
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP")
        .to_owned();
    default(obj, &["spec", "type"], json!(ty));
    default(obj, &["spec", "sessionAffinity"], json!("None"));
    if ty != "ExternalName" {
        default(obj, &["spec", "ipFamilies"], json!(["IPv4"]));
        default(obj, &["spec", "ipFamilyPolicy"], json!("SingleStack"));
        default(obj, &["spec", "internalTrafficPolicy"], json!("Cluster"));
    }
    if let Some(ports) = get_mut(obj, &["spec", "ports"]).and_then(Value::as_array_mut) {
        for p in ports {
            default(p, &["protocol"], json!("TCP"));
            if let Some(port) = p.get("port").cloned() {
                default(p, &["targetPort"], port);
            }
        }
    }
}

fn check_replicas(obj: &Value, causes: &mut Vec<Cause>) {
    if let Some(r) = get(obj, &["spec", "replicas"]).and_then(Value::as_i64)
        && r < 0
    {
        causes.push(Cause::invalid(
            "spec.replicas",
            &json!(r),
            "must be greater than or equal to 0",
        ));
    }
}

fn check_selector_matches_template(obj: &Value, causes: &mut Vec<Cause>) {
    let selector = get(obj, &["spec", "selector"]);
    let Some(selector) = selector.filter(|s| !s.is_null()) else {
        causes.push(Cause::required("spec.selector", ""));
        return;
    };
    let labels = get(obj, &["spec", "template", "metadata", "labels"])
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let labels: std::collections::BTreeMap<String, String> = labels
        .into_iter()
        .filter_map(|(k, v)| v.as_str().map(|v| (k, v.to_owned())))
        .collect();
    let empty = selector
        .get("matchLabels")
        .is_none_or(|m| m.as_object().is_none_or(|m| m.is_empty()))
        && selector
            .get("matchExpressions")
            .is_none_or(|m| m.as_array().is_none_or(|m| m.is_empty()));
    if empty {
        causes.push(Cause::invalid(
            "spec.selector",
            selector,
            "empty selector is invalid for deployment",
        ));
        return;
    }
    match crate::selectors::LabelSelector::from_json(selector) {
        Ok(sel) => {
            if !sel.matches(&labels) {
                causes.push(Cause::invalid(
                    "spec.template.metadata.labels",
                    &json!(labels),
                    "`selector` does not match template `labels`",
                ));
            }
        }
        Err(message) => causes.push(Cause::invalid("spec.selector", selector, &message)),
    }
}

fn check_pod_spec(spec: Option<&Value>, path: &str, causes: &mut Vec<Cause>) {
    let containers = spec.and_then(|s| s.get("containers")).and_then(Value::as_array);
    match containers {
        None => causes.push(Cause::required(format!("{path}.containers"), "")),
        Some(list) if list.is_empty() => causes.push(Cause::required(format!("{path}.containers"), "")),
        Some(list) => {
            let mut seen = std::collections::HashSet::new();
            for (i, c) in list.iter().enumerate() {
                let base = format!("{path}.containers[{i}]");
                match c.get("name").and_then(Value::as_str) {
                    None | Some("") => causes.push(Cause::required(format!("{base}.name"), "")),
                    Some(name) => {
                        if !crate::names::is_dns1123_label(name) {
                            causes.push(Cause::invalid(
                                format!("{base}.name"),
                                &json!(name),
                                crate::names::DNS1123_LABEL_MESSAGE,
                            ));
                        }
                        if !seen.insert(name.to_owned()) {
                            causes.push(Cause::new(
                                "FieldValueDuplicate",
                                format!("{base}.name"),
                                format!("Duplicate value: \"{name}\""),
                            ));
                        }
                    }
                }
                if c.get("image").and_then(Value::as_str).is_none_or(str::is_empty) {
                    causes.push(Cause::required(format!("{base}.image"), ""));
                }
            }
        }
    }
}

fn check_service(obj: &Value, causes: &mut Vec<Cause>) {
    let ty = get(obj, &["spec", "type"])
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP");
    let ports = get(obj, &["spec", "ports"]).and_then(Value::as_array);
    let headless = get(obj, &["spec", "clusterIP"]).and_then(Value::as_str) == Some("None");
    if ty != "ExternalName" && !headless && ports.is_none_or(|p| p.is_empty()) {
        causes.push(Cause::required("spec.ports", ""));
    }
    if !["ClusterIP", "NodePort", "LoadBalancer", "ExternalName"].contains(&ty) {
        causes.push(Cause::unsupported(
            "spec.type",
            &json!(ty),
            &["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"],
        ));
    }
    for (i, p) in ports.into_iter().flatten().enumerate() {
        match p.get("port").and_then(Value::as_i64) {
            Some(port) if (1..=65535).contains(&port) => {}
            Some(port) => causes.push(Cause::invalid(
                format!("spec.ports[{i}].port"),
                &json!(port),
                "must be between 1 and 65535, inclusive",
            )),
            None => causes.push(Cause::required(format!("spec.ports[{i}].port"), "")),
        }
        if ports.is_some_and(|ps| ps.len() > 1)
            && p.get("name").and_then(Value::as_str).is_none_or(str::is_empty)
        {
            causes.push(Cause::required(format!("spec.ports[{i}].name"), ""));
        }
    }
}

fn valid_config_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= 253
        && key != "."
        && key != ".."
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
}

fn valid_cron(s: &str) -> bool {
    let s = s.trim();
    if let Some(descriptor) = s.strip_prefix('@') {
        return [
            "yearly", "annually", "monthly", "weekly", "daily", "midnight", "hourly",
        ]
        .contains(&descriptor)
            || descriptor.starts_with("every ");
    }
    let fields: Vec<&str> = s.split_whitespace().collect();
    let fields = match fields.first() {
        Some(f) if f.starts_with("TZ=") || f.starts_with("CRON_TZ=") => &fields[1..],
        _ => &fields[..],
    };
    fields.len() == 5
        && fields.iter().all(|f| {
            f.chars()
                .all(|c| c.is_ascii_alphanumeric() || "*/,-?".contains(c))
        })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn deployment() -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "nginx", "image": "nginx:1.25", "ports": [{"containerPort": 80}]}]}
                }
            }
        })
    }

    #[test]
    fn decode_drops_unknown_fields_and_names_bad_ones() {
        let mut d = deployment();
        d["spec"]["bogus"] = json!(1);
        let decoded = BuiltinKind::Deployment.decode(&d).unwrap();
        assert!(decoded["spec"].get("bogus").is_none());
        let mut bad = deployment();
        bad["spec"]["replicas"] = json!("three");
        let err = BuiltinKind::Deployment.decode(&bad).unwrap_err();
        assert_eq!(err.field, "spec.replicas");
    }

    #[test]
    fn deployment_defaults_match_kube_apiserver() {
        let mut d = deployment();
        BuiltinKind::Deployment.apply_defaults(&mut d);
        assert_eq!(d["spec"]["replicas"], 1);
        assert_eq!(d["spec"]["strategy"]["rollingUpdate"]["maxSurge"], "25%");
        assert_eq!(d["spec"]["revisionHistoryLimit"], 10);
        let c = &d["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(c["imagePullPolicy"], "IfNotPresent");
        assert_eq!(c["ports"][0]["protocol"], "TCP");
        assert_eq!(d["spec"]["template"]["spec"]["restartPolicy"], "Always");
        // Defaulting is idempotent and keeps explicit values.
        let mut again = d.clone();
        BuiltinKind::Deployment.apply_defaults(&mut again);
        assert_eq!(again, d);
    }

    #[test]
    fn latest_images_default_to_always() {
        assert!(image_is_latest("nginx"));
        assert!(image_is_latest("registry:5000/nginx"));
        assert!(image_is_latest("nginx:latest"));
        assert!(!image_is_latest("nginx:1.2"));
        assert!(!image_is_latest("nginx@sha256:abc"));
    }

    #[test]
    fn workload_validation_catches_common_mistakes() {
        assert!(BuiltinKind::Deployment.validate(&deployment()).is_empty());
        let mut d = deployment();
        d["spec"]["template"]["metadata"]["labels"]["app"] = json!("other");
        let causes = BuiltinKind::Deployment.validate(&d);
        assert_eq!(causes[0].field, "spec.template.metadata.labels");
        let mut d = deployment();
        d["spec"].as_object_mut().unwrap().remove("selector");
        d["spec"]["template"]["spec"]["containers"][0]
            .as_object_mut()
            .unwrap()
            .remove("image");
        let fields: Vec<String> = BuiltinKind::Deployment
            .validate(&d)
            .into_iter()
            .map(|c| c.field)
            .collect();
        assert_eq!(
            fields,
            vec!["spec.selector", "spec.template.spec.containers[0].image"]
        );
    }

    #[test]
    fn service_defaults_and_checks() {
        let mut svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
            "spec": {"ports": [{"port": 80}]}});
        service_defaults(&mut svc);
        assert_eq!(svc["spec"]["type"], "ClusterIP");
        assert_eq!(svc["spec"]["ports"][0]["targetPort"], 80);
        assert!(BuiltinKind::Service.validate(&svc).is_empty());
        svc["spec"]["ports"][0]["port"] = json!(70000);
        assert_eq!(BuiltinKind::Service.validate(&svc)[0].field, "spec.ports[0].port");
    }

    #[test]
    fn event_conversion_round_trips() {
        let v1 = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e"},
            "regarding": {"kind": "Pod", "name": "p"}, "note": "hello", "reason": "Started",
            "reportingController": "me", "reportingInstance": "me-1", "eventTime": "2024-01-01T00:00:00.000000Z"});
        let core = event_v1_to_core(v1.clone());
        assert_eq!(core["involvedObject"]["name"], "p");
        assert_eq!(core["message"], "hello");
        assert_eq!(core["apiVersion"], "v1");
        assert_eq!(event_core_to_v1(core), v1);
    }

    fn secret(extra: Value) -> Value {
        let mut obj = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}});
        if let (Some(obj), Some(extra)) = (obj.as_object_mut(), extra.as_object()) {
            obj.extend(extra.clone());
        }
        obj
    }

    #[test]
    fn string_data_alone_becomes_base64_data() {
        let mut obj = secret(json!({"stringData": {"token": "s3cret", "pad": "ab"}}));
        fold_secret_string_data(&mut obj);
        assert_eq!(obj, secret(json!({"data": {"token": "czNjcmV0", "pad": "YWI="}})));
    }

    #[test]
    fn a_string_data_key_overrides_the_same_data_key_and_keeps_the_others() {
        let mut obj = secret(json!({
            "type": "Opaque",
            "data": {"token": "b2xk", "kept": "a2VwdA=="},
            "stringData": {"token": "new", "added": "x"},
        }));
        fold_secret_string_data(&mut obj);
        assert_eq!(
            obj,
            secret(json!({
                "type": "Opaque",
                "data": {"token": "bmV3", "kept": "a2VwdA==", "added": "eA=="},
            }))
        );
    }

    #[test]
    fn empty_or_null_string_data_is_removed_without_creating_data() {
        for string_data in [json!({}), Value::Null] {
            let mut obj = secret(json!({"stringData": string_data}));
            fold_secret_string_data(&mut obj);
            assert_eq!(obj, secret(json!({})));
            let mut obj = secret(json!({"data": {"k": "dg=="}, "stringData": string_data}));
            fold_secret_string_data(&mut obj);
            assert_eq!(obj, secret(json!({"data": {"k": "dg=="}})));
        }
        // Nothing to fold leaves the object as it is.
        let mut obj = secret(json!({"data": {"k": "dg=="}}));
        fold_secret_string_data(&mut obj);
        assert_eq!(obj, secret(json!({"data": {"k": "dg=="}})));
    }

    #[test]
    fn utf8_string_data_is_standard_padded_base64_of_its_bytes() {
        // '/' and '+' belong to the standard alphabet (the URL-safe one has '_' and '-').
        let mut obj = secret(json!({"stringData": {
            "accents": "héllo wörld ✓",
            "slash": "ÿ?>",
            "wide": "Grüße, 世界 🚀",
            "empty": "",
        }}));
        fold_secret_string_data(&mut obj);
        assert_eq!(
            obj["data"],
            json!({
                "accents": "aMOpbGxvIHfDtnJsZCDinJM=",
                "slash": "w78/Pg==",
                "wide": "R3LDvMOfZSwg5LiW55WMIPCfmoA=",
                "empty": "",
            })
        );
        // What is stored decodes as a Secret and gives back the exact bytes written.
        let decoded: k8s_openapi::api::core::v1::Secret =
            serde_json::from_value(BuiltinKind::Secret.decode(&obj).unwrap()).unwrap();
        let data = decoded.data.unwrap();
        assert_eq!(data["wide"].0, "Grüße, 世界 🚀".as_bytes());
        assert_eq!(data["slash"].0, "ÿ?>".as_bytes());
        assert!(decoded.string_data.is_none());
    }

    #[test]
    fn a_non_string_string_data_value_is_a_decode_error_naming_the_field() {
        // kube-apiserver's decoder rejects it too (400 BadRequest) before any conversion.
        for value in [json!(42), json!(true), json!({"nested": "x"}), json!(["x"])] {
            let err = BuiltinKind::Secret
                .decode(&secret(json!({"stringData": {"token": value}})))
                .unwrap_err();
            assert_eq!(err.field, "stringData.token", "{value}");
        }
    }

    #[test]
    fn a_bad_string_data_key_is_named_in_string_data() {
        let causes = BuiltinKind::Secret.validate(&secret(json!({
            "data": {"ok": "dg=="},
            "stringData": {"bad key": "v"},
        })));
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].field, "stringData[bad key]");
        assert!(
            causes[0]
                .message
                .contains("a valid config key must consist of alphanumeric characters")
        );
    }

    #[test]
    fn cron_schedules() {
        assert!(valid_cron("*/5 * * * *"));
        assert!(valid_cron("@hourly"));
        assert!(valid_cron("TZ=UTC 0 0 * * *"));
        assert!(!valid_cron("every minute"));
        assert!(!valid_cron("* * *"));
    }
}
