//! Shapes of the built-in Kubernetes kinds, hand-written from the Go types in k8s.io/api
//! (`patchStrategy`/`patchMergeKey` tags, `+listType`, `+listMapKey`, `+mapType`,
//! `+structType` markers and `+default` of list-map keys).
//!
//! Shapes are compact (see [`Shape`]): only fields that deviate from "granular struct with
//! atomic lists" are spelled out. Every kind gets the full [`object_meta`]. Anything unknown gets
//! ObjectMeta plus untyped content, which is how kube-apiserver treats a custom resource that
//! preserves unknown fields.
//!
//! [`zero_object`] gives the JSON of a kind's Go zero value. kube-apiserver tracks a create as an
//! update from that zero value, which is why, for example, `.spec` of a created Deployment has no
//! `.` marker in its managedFields entry while `.spec.template.spec.containers[...]` items do.

use std::sync::OnceLock;

use serde_json::{Value, json};

use crate::shape::{Shape, SmpStrategy};

fn s() -> Shape {
    Shape::Scalar
}

fn obj<const N: usize>(fields: [(&str, Shape); N]) -> Shape {
    Shape::object(fields)
}

fn atomic<const N: usize>(fields: [(&str, Shape); N]) -> Shape {
    Shape::atomic_object(fields)
}

fn strings() -> Shape {
    Shape::map_of(s())
}

fn merge(key: &str) -> SmpStrategy {
    SmpStrategy::Merge {
        key: Some(key.to_string()),
    }
}

/// A list map whose strategic-merge key is the first SSA key (the common case).
fn keyed(keys: &[&str], smp: SmpStrategy, items: Shape) -> Shape {
    Shape::list_map(keys, items).with_list_strategy(smp)
}

/// `metav1.LabelSelector` (`+structType=atomic`).
fn label_selector() -> Shape {
    atomic([
        ("matchLabels", strings()),
        (
            "matchExpressions",
            Shape::atomic_list(obj([("values", Shape::atomic_list(s()))])),
        ),
    ])
}

/// `corev1.LocalObjectReference` (`+structType=atomic`).
fn local_ref() -> Shape {
    atomic([("name", s())])
}

/// `corev1.ObjectReference` (`+structType=atomic`).
fn object_ref() -> Shape {
    atomic([
        ("kind", s()),
        ("namespace", s()),
        ("name", s()),
        ("uid", s()),
        ("apiVersion", s()),
        ("resourceVersion", s()),
        ("fieldPath", s()),
    ])
}

/// `corev1.TypedLocalObjectReference` (`+structType=atomic`).
fn typed_local_ref() -> Shape {
    atomic([("apiGroup", s()), ("kind", s()), ("name", s())])
}

/// Conditions keyed by `type`, strategic-merge key `type` (Deployment, Pod, Node, ...).
fn conditions() -> Shape {
    keyed(&["type"], merge("type"), obj([]))
}

/// Shape of `metav1.ObjectMeta`.
pub fn object_meta() -> Shape {
    obj([
        ("name", s()),
        ("generateName", s()),
        ("namespace", s()),
        ("selfLink", s()),
        ("uid", s()),
        ("resourceVersion", s()),
        ("generation", s()),
        ("creationTimestamp", s()),
        ("deletionTimestamp", s()),
        ("deletionGracePeriodSeconds", s()),
        ("labels", strings()),
        ("annotations", strings()),
        (
            "ownerReferences",
            keyed(
                &["uid"],
                merge("uid"),
                atomic([
                    ("apiVersion", s()),
                    ("kind", s()),
                    ("name", s()),
                    ("uid", s()),
                    ("controller", s()),
                    ("blockOwnerDeletion", s()),
                ]),
            ),
        ),
        (
            "finalizers",
            Shape::set(s()).with_list_strategy(SmpStrategy::Merge { key: None }),
        ),
        ("managedFields", Shape::atomic_list(obj([]))),
    ])
}

/// `corev1.ResourceRequirements`.
fn resource_requirements() -> Shape {
    obj([
        ("limits", strings()),
        ("requests", strings()),
        (
            "claims",
            Shape::list_map(&["name"], obj([("name", s()), ("request", s())])),
        ),
    ])
}

/// `corev1.Container` (and `EphemeralContainer`, which adds `targetContainerName`).
fn container() -> Shape {
    obj([
        ("name", s()),
        ("image", s()),
        ("command", Shape::atomic_list(s())),
        ("args", Shape::atomic_list(s())),
        (
            "ports",
            keyed(
                &["containerPort", "protocol"],
                merge("containerPort"),
                obj([
                    ("name", s()),
                    ("hostPort", s()),
                    ("containerPort", s()),
                    ("protocol", s().with_default(json!("TCP"))),
                    ("hostIP", s()),
                ]),
            ),
        ),
        ("envFrom", Shape::atomic_list(obj([]))),
        (
            "env",
            keyed(
                &["name"],
                merge("name"),
                obj([
                    ("name", s()),
                    ("value", s()),
                    (
                        "valueFrom",
                        obj([
                            ("fieldRef", atomic([("apiVersion", s()), ("fieldPath", s())])),
                            (
                                "resourceFieldRef",
                                atomic([("containerName", s()), ("resource", s()), ("divisor", s())]),
                            ),
                            (
                                "configMapKeyRef",
                                atomic([("name", s()), ("key", s()), ("optional", s())]),
                            ),
                            (
                                "secretKeyRef",
                                atomic([("name", s()), ("key", s()), ("optional", s())]),
                            ),
                            (
                                "fileKeyRef",
                                atomic([
                                    ("volumeName", s()),
                                    ("path", s()),
                                    ("key", s()),
                                    ("optional", s()),
                                ]),
                            ),
                        ]),
                    ),
                ]),
            ),
        ),
        ("resources", resource_requirements()),
        ("resizePolicy", Shape::atomic_list(obj([]))),
        ("restartPolicyRules", Shape::atomic_list(obj([]))),
        ("volumeMounts", keyed(&["mountPath"], merge("mountPath"), obj([]))),
        (
            "volumeDevices",
            keyed(&["devicePath"], merge("devicePath"), obj([])),
        ),
    ])
}

/// `corev1.PersistentVolumeClaimSpec`.
fn pvc_spec() -> Shape {
    obj([
        ("accessModes", Shape::atomic_list(s())),
        ("selector", label_selector()),
        ("resources", obj([("limits", strings()), ("requests", strings())])),
        ("dataSource", typed_local_ref()),
    ])
}

/// `corev1.Volume` (name plus the inlined `VolumeSource`).
fn volume() -> Shape {
    let secret_ref = || obj([("secretRef", local_ref())]);
    obj([
        ("name", s()),
        (
            "csi",
            obj([
                ("volumeAttributes", strings()),
                ("nodePublishSecretRef", local_ref()),
            ]),
        ),
        (
            "ephemeral",
            obj([(
                "volumeClaimTemplate",
                obj([("metadata", object_meta()), ("spec", pvc_spec())]),
            )]),
        ),
        (
            "flexVolume",
            obj([("secretRef", local_ref()), ("options", strings())]),
        ),
        (
            "iscsi",
            obj([("secretRef", local_ref()), ("portals", Shape::atomic_list(s()))]),
        ),
        (
            "rbd",
            obj([("secretRef", local_ref()), ("monitors", Shape::atomic_list(s()))]),
        ),
        (
            "cephfs",
            obj([("secretRef", local_ref()), ("monitors", Shape::atomic_list(s()))]),
        ),
        ("cinder", secret_ref()),
        ("scaleIO", secret_ref()),
        ("storageos", secret_ref()),
    ])
}

/// `corev1.PodSpec`.
fn pod_spec() -> Shape {
    let containers = || keyed(&["name"], merge("name"), container());
    obj([
        (
            "volumes",
            keyed(
                &["name"],
                SmpStrategy::MergeRetainKeys {
                    key: Some("name".into()),
                },
                volume(),
            ),
        ),
        ("initContainers", containers()),
        ("containers", containers()),
        ("ephemeralContainers", containers()),
        ("nodeSelector", Shape::atomic_map()),
        ("imagePullSecrets", keyed(&["name"], merge("name"), local_ref())),
        (
            "affinity",
            obj([(
                "nodeAffinity",
                obj([(
                    "requiredDuringSchedulingIgnoredDuringExecution",
                    atomic([("nodeSelectorTerms", Shape::atomic_list(obj([])))]),
                )]),
            )]),
        ),
        ("tolerations", Shape::atomic_list(obj([]))),
        (
            "hostAliases",
            keyed(
                &["ip"],
                merge("ip"),
                obj([("hostnames", Shape::atomic_list(s()))]),
            ),
        ),
        ("readinessGates", Shape::atomic_list(obj([]))),
        ("overhead", strings()),
        (
            "topologySpreadConstraints",
            keyed(
                &["topologyKey", "whenUnsatisfiable"],
                merge("topologyKey"),
                obj([
                    ("labelSelector", label_selector()),
                    ("matchLabelKeys", Shape::atomic_list(s())),
                ]),
            ),
        ),
        ("schedulingGates", keyed(&["name"], merge("name"), obj([]))),
        (
            "resourceClaims",
            keyed(
                &["name"],
                SmpStrategy::MergeRetainKeys {
                    key: Some("name".into()),
                },
                obj([]),
            ),
        ),
        ("resources", resource_requirements()),
    ])
}

/// `corev1.PodStatus`.
fn pod_status() -> Shape {
    obj([
        ("conditions", conditions()),
        (
            "hostIPs",
            Shape::atomic_list(obj([])).with_list_strategy(merge("ip")),
        ),
        ("podIPs", keyed(&["ip"], merge("ip"), obj([]))),
        ("initContainerStatuses", Shape::atomic_list(obj([]))),
        ("containerStatuses", Shape::atomic_list(obj([]))),
        ("ephemeralContainerStatuses", Shape::atomic_list(obj([]))),
        (
            "resourceClaimStatuses",
            keyed(
                &["name"],
                SmpStrategy::MergeRetainKeys {
                    key: Some("name".into()),
                },
                obj([]),
            ),
        ),
        ("allocatedResources", strings()),
        ("resources", resource_requirements()),
    ])
}

/// `corev1.PodTemplateSpec`.
fn pod_template() -> Shape {
    obj([("metadata", object_meta()), ("spec", pod_spec())])
}

/// A top-level kind: TypeMeta, ObjectMeta and the given fields.
fn kind<const N: usize>(fields: [(&str, Shape); N]) -> Shape {
    let mut all = vec![("apiVersion", s()), ("kind", s()), ("metadata", object_meta())];
    all.extend(fields);
    Shape::object(all)
}

fn workload_status() -> Shape {
    obj([("conditions", conditions())])
}

fn job_spec() -> Shape {
    obj([
        ("selector", label_selector()),
        ("template", pod_template()),
        ("podFailurePolicy", obj([("rules", Shape::atomic_list(obj([])))])),
        ("successPolicy", obj([("rules", Shape::atomic_list(obj([])))])),
    ])
}

fn build(api_version: &str, kind_name: &str) -> Option<Shape> {
    let shape = match (api_version, kind_name) {
        ("v1", "Pod") => kind([("spec", pod_spec()), ("status", pod_status())]),
        ("v1", "PodTemplate") => kind([("template", pod_template())]),
        ("v1", "ReplicationController") => kind([
            (
                "spec",
                obj([("selector", Shape::atomic_map()), ("template", pod_template())]),
            ),
            ("status", workload_status()),
        ]),
        ("v1", "Service") => kind([
            (
                "spec",
                obj([
                    (
                        "ports",
                        keyed(
                            &["port", "protocol"],
                            merge("port"),
                            obj([("port", s()), ("protocol", s().with_default(json!("TCP")))]),
                        ),
                    ),
                    ("selector", Shape::atomic_map()),
                    ("clusterIPs", Shape::atomic_list(s())),
                    ("externalIPs", Shape::atomic_list(s())),
                    ("loadBalancerSourceRanges", Shape::atomic_list(s())),
                    ("ipFamilies", Shape::atomic_list(s())),
                ]),
            ),
            (
                "status",
                obj([
                    ("loadBalancer", obj([("ingress", Shape::atomic_list(obj([])))])),
                    ("conditions", conditions()),
                ]),
            ),
        ]),
        ("v1", "ConfigMap") => kind([("data", strings()), ("binaryData", strings())]),
        ("v1", "Secret") => kind([("data", strings()), ("stringData", strings())]),
        ("v1", "ServiceAccount") => kind([
            ("secrets", keyed(&["name"], merge("name"), object_ref())),
            ("imagePullSecrets", Shape::atomic_list(local_ref())),
        ]),
        ("v1", "PersistentVolumeClaim") => kind([
            ("spec", pvc_spec()),
            (
                "status",
                obj([
                    ("accessModes", Shape::atomic_list(s())),
                    ("capacity", strings()),
                    ("conditions", conditions()),
                    ("allocatedResources", strings()),
                    ("allocatedResourceStatuses", strings()),
                ]),
            ),
        ]),
        ("v1", "Namespace") => kind([
            ("spec", obj([("finalizers", Shape::atomic_list(s()))])),
            ("status", obj([("conditions", conditions())])),
        ]),
        ("v1", "Node") => kind([
            (
                "spec",
                obj([
                    (
                        "podCIDRs",
                        Shape::set(s()).with_list_strategy(SmpStrategy::Merge { key: None }),
                    ),
                    ("taints", Shape::atomic_list(obj([]))),
                ]),
            ),
            (
                "status",
                obj([
                    ("capacity", strings()),
                    ("allocatable", strings()),
                    ("conditions", conditions()),
                    ("addresses", keyed(&["type"], merge("type"), obj([]))),
                    ("images", Shape::atomic_list(obj([]))),
                    ("volumesInUse", Shape::atomic_list(s())),
                    ("volumesAttached", Shape::atomic_list(obj([]))),
                ]),
            ),
        ]),
        ("v1", "Event") => kind([("involvedObject", object_ref()), ("related", object_ref())]),
        ("events.k8s.io/v1", "Event") => kind([("regarding", object_ref()), ("related", object_ref())]),
        ("v1", "Endpoints") => kind([(
            "subsets",
            Shape::atomic_list(obj([
                ("addresses", Shape::atomic_list(obj([]))),
                ("notReadyAddresses", Shape::atomic_list(obj([]))),
                ("ports", Shape::atomic_list(obj([]))),
            ])),
        )]),
        ("apps/v1", "Deployment") => kind([
            (
                "spec",
                obj([
                    ("selector", label_selector()),
                    ("template", pod_template()),
                    ("strategy", obj([]).with_object_strategy(SmpStrategy::RetainKeys)),
                ]),
            ),
            ("status", workload_status()),
        ]),
        ("apps/v1", "StatefulSet") => kind([
            (
                "spec",
                obj([
                    ("selector", label_selector()),
                    ("template", pod_template()),
                    (
                        "volumeClaimTemplates",
                        Shape::atomic_list(obj([("metadata", object_meta()), ("spec", pvc_spec())])),
                    ),
                ]),
            ),
            ("status", workload_status()),
        ]),
        ("apps/v1", "DaemonSet") | ("apps/v1", "ReplicaSet") => kind([
            (
                "spec",
                obj([("selector", label_selector()), ("template", pod_template())]),
            ),
            ("status", workload_status()),
        ]),
        ("batch/v1", "Job") => kind([
            ("spec", job_spec()),
            (
                "status",
                obj([
                    (
                        "conditions",
                        Shape::atomic_list(obj([])).with_list_strategy(merge("type")),
                    ),
                    (
                        "uncountedTerminatedPods",
                        obj([("succeeded", Shape::set(s())), ("failed", Shape::set(s()))]),
                    ),
                ]),
            ),
        ]),
        ("batch/v1", "CronJob") => kind([
            (
                "spec",
                obj([(
                    "jobTemplate",
                    obj([("metadata", object_meta()), ("spec", job_spec())]),
                )]),
            ),
            ("status", obj([("active", Shape::atomic_list(object_ref()))])),
        ]),
        ("networking.k8s.io/v1", "Ingress") => {
            let backend = || {
                obj([
                    (
                        "service",
                        obj([("port", atomic([("name", s()), ("number", s())]))]),
                    ),
                    ("resource", typed_local_ref()),
                ])
            };
            kind([
                (
                    "spec",
                    obj([
                        ("defaultBackend", backend()),
                        (
                            "tls",
                            Shape::atomic_list(obj([("hosts", Shape::atomic_list(s()))])),
                        ),
                        ("rules", Shape::atomic_list(obj([]))),
                    ]),
                ),
                (
                    "status",
                    obj([("loadBalancer", obj([("ingress", Shape::atomic_list(obj([])))]))]),
                ),
            ])
        }
        ("networking.k8s.io/v1", "NetworkPolicy") => kind([(
            "spec",
            obj([
                ("podSelector", label_selector()),
                ("ingress", Shape::atomic_list(obj([]))),
                ("egress", Shape::atomic_list(obj([]))),
                ("policyTypes", Shape::atomic_list(s())),
            ]),
        )]),
        ("coordination.k8s.io/v1", "Lease") => kind([("spec", obj([]))]),
        ("policy/v1", "PodDisruptionBudget") => kind([
            (
                "spec",
                obj([(
                    "selector",
                    label_selector().with_object_strategy(SmpStrategy::Replace),
                )]),
            ),
            (
                "status",
                obj([("disruptedPods", strings()), ("conditions", conditions())]),
            ),
        ]),
        ("rbac.authorization.k8s.io/v1", "Role") => kind([("rules", Shape::atomic_list(obj([])))]),
        ("rbac.authorization.k8s.io/v1", "ClusterRole") => kind([
            ("rules", Shape::atomic_list(obj([]))),
            (
                "aggregationRule",
                obj([("clusterRoleSelectors", Shape::atomic_list(label_selector()))]),
            ),
        ]),
        ("rbac.authorization.k8s.io/v1", "RoleBinding")
        | ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding") => kind([
            ("subjects", Shape::atomic_list(obj([]))),
            (
                "roleRef",
                atomic([("apiGroup", s()), ("kind", s()), ("name", s())]),
            ),
        ]),
        ("autoscaling/v1", "Scale") => kind([("spec", obj([])), ("status", obj([]))]),
        _ => return None,
    };
    Some(shape)
}

/// The built-in kinds [`shape_for`] knows, as `(apiVersion, kind)`.
pub const KINDS: &[(&str, &str)] = &[
    ("v1", "Pod"),
    ("v1", "PodTemplate"),
    ("v1", "ReplicationController"),
    ("v1", "Service"),
    ("v1", "ConfigMap"),
    ("v1", "Secret"),
    ("v1", "ServiceAccount"),
    ("v1", "PersistentVolumeClaim"),
    ("v1", "Namespace"),
    ("v1", "Node"),
    ("v1", "Event"),
    ("v1", "Endpoints"),
    ("events.k8s.io/v1", "Event"),
    ("apps/v1", "Deployment"),
    ("apps/v1", "StatefulSet"),
    ("apps/v1", "DaemonSet"),
    ("apps/v1", "ReplicaSet"),
    ("batch/v1", "Job"),
    ("batch/v1", "CronJob"),
    ("networking.k8s.io/v1", "Ingress"),
    ("networking.k8s.io/v1", "NetworkPolicy"),
    ("coordination.k8s.io/v1", "Lease"),
    ("policy/v1", "PodDisruptionBudget"),
    ("rbac.authorization.k8s.io/v1", "Role"),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
    ("autoscaling/v1", "Scale"),
];

/// Shape of an object of unknown kind: ObjectMeta, everything else untyped.
fn unknown() -> Shape {
    Shape::preserving_unknown([("apiVersion", s()), ("kind", s()), ("metadata", object_meta())])
}

/// Shape of a custom resource from its CRD version's `openAPIV3Schema` (as JSON): the schema's
/// shape ([`Shape::from_openapi_v3`]) with `apiVersion`, `kind` and the full ObjectMeta at the
/// root, as kube-apiserver types custom resources for server-side apply.
pub fn custom_resource_shape(openapi_v3_schema: &Value) -> Shape {
    let root_fields = || {
        [
            ("apiVersion".to_string(), s()),
            ("kind".to_string(), s()),
            ("metadata".to_string(), object_meta()),
        ]
    };
    match Shape::from_openapi_v3(openapi_v3_schema) {
        Shape::Object {
            mut fields,
            additional,
            atomic,
        } => {
            fields.extend(root_fields());
            Shape::Object {
                fields,
                additional,
                atomic,
            }
        }
        _ => Shape::Object {
            fields: root_fields().into_iter().collect(),
            additional: Some(Box::new(Shape::Untyped)),
            atomic: false,
        },
    }
}

/// Shape of a built-in kind; ObjectMeta plus untyped content for anything unknown.
pub fn shape_for(api_version: &str, kind: &str) -> Shape {
    build(api_version, kind).unwrap_or_else(unknown)
}

/// Like [`shape_for`], but built once per kind and shared (cheaper on hot paths).
pub fn shape_ref(api_version: &str, kind: &str) -> &'static Shape {
    static CACHE: OnceLock<Vec<Shape>> = OnceLock::new();
    static UNKNOWN: OnceLock<Shape> = OnceLock::new();
    let cache = CACHE.get_or_init(|| KINDS.iter().map(|&(v, k)| shape_for(v, k)).collect());
    KINDS
        .iter()
        .position(|&(v, k)| v == api_version && k == kind)
        .and_then(|i| cache.get(i))
        .unwrap_or_else(|| UNKNOWN.get_or_init(unknown))
}

/// Whether [`shape_for`] has a hand-written shape for this kind.
pub fn is_known(api_version: &str, kind: &str) -> bool {
    KINDS.contains(&(api_version, kind))
}

/// The JSON kube-apiserver sees for the Go zero value of a built-in kind (without `apiVersion`
/// and `kind`), or `None` for kinds it does not know (custom resources start from `{}`).
///
/// Non-`omitempty` struct fields are always present: nested structs as objects, nil slices,
/// maps and pointers as `null`, unset `metav1.Time` as `null`.
pub fn zero_object(api_version: &str, kind: &str) -> Option<Value> {
    let meta = || json!({"creationTimestamp": null});
    let template = || json!({"metadata": {"creationTimestamp": null}, "spec": {"containers": null}});
    let zero = match (api_version, kind) {
        ("v1", "Pod") => json!({"metadata": meta(), "spec": {"containers": null}, "status": {}}),
        ("v1", "PodTemplate") => json!({"metadata": meta(), "template": template()}),
        ("v1", "ReplicationController") => json!({"metadata": meta(), "spec": {}, "status": {"replicas": 0}}),
        ("v1", "Service") => json!({"metadata": meta(), "spec": {}, "status": {"loadBalancer": {}}}),
        ("v1", "ConfigMap" | "Secret" | "ServiceAccount" | "Endpoints") => json!({"metadata": meta()}),
        ("v1", "PersistentVolumeClaim") => {
            json!({"metadata": meta(), "spec": {"resources": {}}, "status": {}})
        }
        ("v1", "Namespace") => json!({"metadata": meta(), "spec": {}, "status": {}}),
        ("v1", "Node") => json!({
            "metadata": meta(),
            "spec": {},
            "status": {
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 0}},
                "nodeInfo": {
                    "architecture": "", "bootID": "", "containerRuntimeVersion": "", "kernelVersion": "",
                    "kubeProxyVersion": "", "kubeletVersion": "", "machineID": "", "operatingSystem": "",
                    "osImage": "", "systemUUID": ""
                }
            }
        }),
        ("v1", "Event") => json!({
            "metadata": meta(), "involvedObject": {}, "source": {}, "firstTimestamp": null,
            "lastTimestamp": null, "eventTime": null, "reportingComponent": "", "reportingInstance": ""
        }),
        ("events.k8s.io/v1", "Event") => json!({
            "metadata": meta(), "eventTime": null, "regarding": {}, "deprecatedSource": {},
            "deprecatedFirstTimestamp": null, "deprecatedLastTimestamp": null
        }),
        ("apps/v1", "Deployment") => json!({
            "metadata": meta(),
            "spec": {"selector": null, "template": template(), "strategy": {}},
            "status": {}
        }),
        ("apps/v1", "StatefulSet") => json!({
            "metadata": meta(),
            "spec": {"selector": null, "template": template(), "serviceName": "", "updateStrategy": {}},
            "status": {"replicas": 0, "availableReplicas": 0}
        }),
        ("apps/v1", "DaemonSet") => json!({
            "metadata": meta(),
            "spec": {"selector": null, "template": template(), "updateStrategy": {}},
            "status": {
                "currentNumberScheduled": 0, "numberMisscheduled": 0,
                "desiredNumberScheduled": 0, "numberReady": 0
            }
        }),
        ("apps/v1", "ReplicaSet") => json!({
            "metadata": meta(), "spec": {"selector": null, "template": template()}, "status": {"replicas": 0}
        }),
        ("batch/v1", "Job") => json!({"metadata": meta(), "spec": {"template": template()}, "status": {}}),
        ("batch/v1", "CronJob") => json!({
            "metadata": meta(),
            "spec": {"schedule": "", "jobTemplate": {"metadata": {"creationTimestamp": null}, "spec": {"template": template()}}},
            "status": {}
        }),
        ("networking.k8s.io/v1", "Ingress") => {
            json!({"metadata": meta(), "spec": {}, "status": {"loadBalancer": {}}})
        }
        ("networking.k8s.io/v1", "NetworkPolicy") => json!({"metadata": meta(), "spec": {"podSelector": {}}}),
        ("coordination.k8s.io/v1", "Lease") => json!({"metadata": meta(), "spec": {}}),
        ("policy/v1", "PodDisruptionBudget") => json!({
            "metadata": meta(), "spec": {},
            "status": {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}
        }),
        ("rbac.authorization.k8s.io/v1", "Role" | "ClusterRole") => {
            json!({"metadata": meta(), "rules": null})
        }
        ("rbac.authorization.k8s.io/v1", "RoleBinding" | "ClusterRoleBinding") => json!({
            "metadata": meta(), "roleRef": {"apiGroup": "", "kind": "", "name": ""}
        }),
        ("autoscaling/v1", "Scale") => json!({"metadata": meta(), "spec": {}, "status": {"replicas": 0}}),
        _ => return None,
    };
    Some(zero)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::shape::ListType;

    #[test]
    fn every_known_kind_has_object_meta_and_a_zero_value() {
        let meta = object_meta();
        for &(v, k) in KINDS {
            let shape = shape_for(v, k);
            assert_eq!(shape.field("metadata"), &meta, "{v} {k}");
            assert!(zero_object(v, k).is_some(), "{v} {k} has no zero value");
            assert_eq!(shape_ref(v, k), &shape);
        }
    }

    #[test]
    fn object_meta_declares_kubernetes_list_semantics() {
        let meta = object_meta();
        let finalizers = meta.field("finalizers");
        assert_eq!(finalizers.list_strategy(), &SmpStrategy::Merge { key: None });
        assert!(matches!(
            finalizers,
            Shape::List {
                list_type: ListType::Set,
                ..
            }
        ));
        let owners = meta.field("ownerReferences");
        assert_eq!(owners.list_strategy().merge_key(), Some("uid"));
        assert!(owners.items().is_atomic());
        assert!(meta.field("managedFields").is_atomic());
        assert!(!meta.field("labels").declares("app"));
    }

    #[test]
    fn workload_templates_use_the_pod_spec() {
        let pod = shape_for("v1", "Pod");
        let pod_spec = pod.field("spec");
        for (v, k, path) in [
            ("apps/v1", "Deployment", &["spec", "template", "spec"][..]),
            ("apps/v1", "StatefulSet", &["spec", "template", "spec"][..]),
            ("batch/v1", "Job", &["spec", "template", "spec"][..]),
            (
                "batch/v1",
                "CronJob",
                &["spec", "jobTemplate", "spec", "template", "spec"][..],
            ),
            ("v1", "PodTemplate", &["template", "spec"][..]),
        ] {
            let mut s = shape_ref(v, k);
            for p in path {
                s = s.field(p);
            }
            assert_eq!(s, pod_spec, "{k}");
        }
        let ports = pod_spec.field("containers").items().field("ports");
        assert!(
            matches!(ports, Shape::List { list_type: ListType::Map { keys }, .. } if keys == &["containerPort", "protocol"])
        );
        assert_eq!(ports.list_strategy().merge_key(), Some("containerPort"));
        assert_eq!(
            ports.items().field("protocol").default_value(),
            Some(&json!("TCP"))
        );
        assert!(pod_spec.field("tolerations").is_atomic());
        assert!(pod_spec.field("containers").items().field("envFrom").is_atomic());
    }

    #[test]
    fn custom_resource_shapes_follow_the_openapi_schema() {
        let schema = json!({
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "properties": {
                        "replicas": {"type": "integer"},
                        "selector": {"type": "object", "x-kubernetes-map-type": "atomic",
                                     "properties": {"matchLabels": {"type": "object", "additionalProperties": {"type": "string"}}}},
                        "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["port", "protocol"],
                                  "items": {"type": "object", "required": ["port"],
                                            "properties": {"port": {"type": "integer"}, "protocol": {"type": "string", "default": "TCP"}}}},
                        "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                        "args": {"type": "array", "items": {"type": "string"}},
                        "config": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                        "port": {"x-kubernetes-int-or-string": true}
                    }
                },
                "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}
            }
        });
        let shape = custom_resource_shape(&schema);
        assert_eq!(shape.field("metadata"), &object_meta());
        let spec = shape.field("spec");
        assert!(spec.field("selector").is_atomic());
        assert!(!spec.field("selector").field("matchLabels").declares("app"));
        let ports = spec.field("ports");
        assert!(
            matches!(ports, Shape::List { list_type: ListType::Map { keys }, .. } if keys == &["port", "protocol"])
        );
        assert_eq!(
            ports.items().field("protocol").default_value(),
            Some(&json!("TCP"))
        );
        assert!(matches!(
            spec.field("tags"),
            Shape::List {
                list_type: ListType::Set,
                ..
            }
        ));
        assert!(spec.field("args").is_atomic());
        assert_eq!(spec.field("config"), &Shape::Untyped);
        assert_eq!(spec.field("port"), &Shape::Scalar);
        // A schema that preserves everything at the root is untyped below ObjectMeta.
        let open =
            custom_resource_shape(&json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}));
        assert_eq!(open.field("spec"), &Shape::Untyped);
        assert_eq!(open.field("metadata"), &object_meta());
    }

    #[test]
    fn unknown_kinds_are_untyped_with_object_meta() {
        let s = shape_for("example.com/v1", "Widget");
        assert_eq!(s.field("metadata"), &object_meta());
        assert_eq!(s.field("spec"), &Shape::Untyped);
        assert!(!is_known("example.com/v1", "Widget"));
        assert_eq!(zero_object("example.com/v1", "Widget"), None);
    }
}
