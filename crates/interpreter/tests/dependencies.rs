//! Dependencies of templates: every workload kind against every reference form, the
//! exclusions, PersistentVolume CSI secrets, Ingress TLS, declarative rules and malformed
//! templates (seed: dependencies-automatic-propagation.md).

#![allow(clippy::unwrap_used)]

use flotilla_interpreter::{DependencyRef, DependencyRules, dependencies};
use serde_json::{Value, json};

/// The workload kinds whose pod template the built-in interpreter reads.
const WORKLOAD_KINDS: &[(&str, &str)] = &[
    ("apps/v1", "Deployment"),
    ("apps/v1", "StatefulSet"),
    ("apps/v1", "DaemonSet"),
    ("apps/v1", "ReplicaSet"),
    ("batch/v1", "Job"),
    ("batch/v1", "CronJob"),
    ("v1", "Pod"),
];

/// A workload of `kind` in namespace `ns` whose pod spec is `pod_spec`.
fn workload(api_version: &str, kind: &str, pod_spec: Value) -> Value {
    let template = json!({"metadata": {"labels": {"app": "x"}}, "spec": pod_spec});
    let spec = match kind {
        "Pod" => pod_spec,
        "CronJob" => json!({"schedule": "* * * * *", "jobTemplate": {"spec": {"template": template}}}),
        _ => json!({"selector": {"matchLabels": {"app": "x"}}, "template": template}),
    };
    json!({
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"namespace": "ns", "name": "w"},
        "spec": spec,
    })
}

fn dep(kind: &str, namespace: Option<&str>, name: &str) -> DependencyRef {
    DependencyRef {
        api_version: "v1".to_owned(),
        kind: kind.to_owned(),
        namespace: namespace.map(str::to_owned),
        name: name.to_owned(),
    }
}

fn in_ns(kind: &str, name: &str) -> DependencyRef {
    dep(kind, Some("ns"), name)
}

fn container(extra: Value) -> Value {
    let mut c = json!({"name": "c", "image": "nginx"});
    for (k, v) in extra.as_object().unwrap() {
        c[k] = v.clone();
    }
    c
}

fn builtin(obj: &Value) -> Vec<DependencyRef> {
    dependencies(obj, &DependencyRules::builtin()).unwrap()
}

/// Every reference form: a pod spec and the dependencies it yields (in namespace `ns`).
fn reference_forms() -> Vec<(String, Value, Vec<DependencyRef>)> {
    let volume = |source: Value| json!({"containers": [container(json!({}))], "volumes": [source]});
    let env = |list: &str, entry: Value| {
        let mut spec = json!({"containers": [container(json!({}))]});
        spec[list] = json!([container(entry)]);
        spec
    };
    let mut forms = vec![
        (
            "volume configMap".to_owned(),
            volume(json!({"name": "v", "configMap": {"name": "cm-vol"}})),
            vec![in_ns("ConfigMap", "cm-vol")],
        ),
        (
            "volume secret".to_owned(),
            volume(json!({"name": "v", "secret": {"secretName": "s-vol"}})),
            vec![in_ns("Secret", "s-vol")],
        ),
        (
            "projected configMap and secret".to_owned(),
            volume(json!({"name": "v", "projected": {"sources": [
                {"configMap": {"name": "cm-proj"}},
                {"secret": {"name": "s-proj"}},
                {"serviceAccountToken": {"path": "token"}},
                {"downwardAPI": {"items": []}},
            ]}})),
            vec![in_ns("ConfigMap", "cm-proj"), in_ns("Secret", "s-proj")],
        ),
        (
            "volume persistentVolumeClaim".to_owned(),
            volume(json!({"name": "v", "persistentVolumeClaim": {"claimName": "claim"}})),
            vec![in_ns("PersistentVolumeClaim", "claim")],
        ),
        (
            "volume csi nodePublishSecretRef".to_owned(),
            volume(json!({"name": "v", "csi": {"driver": "d", "nodePublishSecretRef": {"name": "s-csi"}}})),
            vec![in_ns("Secret", "s-csi")],
        ),
        (
            "volume azureFile".to_owned(),
            volume(json!({"name": "v", "azureFile": {"secretName": "s-azure", "shareName": "x"}})),
            vec![in_ns("Secret", "s-azure")],
        ),
        (
            "optional references".to_owned(),
            json!({"containers": [container(json!({
                "env": [{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "cm-opt", "key": "k", "optional": true}}}],
                "envFrom": [{"secretRef": {"name": "s-opt", "optional": true}}],
            }))], "volumes": [{"name": "v", "configMap": {"name": "cm-opt-vol", "optional": true}}]}),
            vec![
                in_ns("ConfigMap", "cm-opt"),
                in_ns("ConfigMap", "cm-opt-vol"),
                in_ns("Secret", "s-opt"),
            ],
        ),
        (
            "imagePullSecrets".to_owned(),
            json!({"containers": [container(json!({}))], "imagePullSecrets": [{"name": "pull-1"}, {"name": "pull-2"}]}),
            vec![in_ns("Secret", "pull-1"), in_ns("Secret", "pull-2")],
        ),
        (
            "serviceAccountName".to_owned(),
            json!({"containers": [container(json!({}))], "serviceAccountName": "robot"}),
            vec![in_ns("ServiceAccount", "robot")],
        ),
        (
            "deprecated serviceAccount".to_owned(),
            json!({"containers": [container(json!({}))], "serviceAccount": "old-robot"}),
            vec![in_ns("ServiceAccount", "old-robot")],
        ),
    ];
    for source in [
        "cephfs",
        "cinder",
        "flexVolume",
        "iscsi",
        "rbd",
        "scaleIO",
        "storageos",
    ] {
        let name = format!("s-{}", source.to_lowercase());
        let mut vol = json!({"name": "v"});
        vol[source] = json!({"secretRef": {"name": name}});
        forms.push((
            format!("volume {source} secretRef"),
            volume(vol),
            vec![in_ns("Secret", &name)],
        ));
    }
    for list in ["containers", "initContainers", "ephemeralContainers"] {
        let label = |what: &str| format!("{list} {what}");
        forms.push((
            label("env configMapKeyRef"),
            env(list, json!({"env": [{"name": "A", "valueFrom": {"configMapKeyRef": {"name": format!("cm-env-{list}"), "key": "k"}}}]})),
            vec![in_ns("ConfigMap", &format!("cm-env-{list}"))],
        ));
        forms.push((
            label("env secretKeyRef"),
            env(list, json!({"env": [
                {"name": "PLAIN", "value": "x"},
                {"name": "FIELD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {"name": "A", "valueFrom": {"secretKeyRef": {"name": format!("s-env-{list}"), "key": "k"}}},
            ]})),
            vec![in_ns("Secret", &format!("s-env-{list}"))],
        ));
        forms.push((
            label("envFrom configMapRef"),
            env(
                list,
                json!({"envFrom": [{"configMapRef": {"name": format!("cm-from-{list}")}}]}),
            ),
            vec![in_ns("ConfigMap", &format!("cm-from-{list}"))],
        ));
        forms.push((
            label("envFrom secretRef"),
            env(
                list,
                json!({"envFrom": [{"prefix": "P_", "secretRef": {"name": format!("s-from-{list}")}}]}),
            ),
            vec![in_ns("Secret", &format!("s-from-{list}"))],
        ));
    }
    forms
}

#[test]
fn every_workload_kind_finds_every_reference_form() {
    let forms = reference_forms();
    assert_eq!(forms.len(), 29, "every form is listed once");
    for (api_version, kind) in WORKLOAD_KINDS {
        for (form, pod_spec, expected) in &forms {
            let obj = workload(api_version, kind, pod_spec.clone());
            assert_eq!(&builtin(&obj), expected, "{kind}: {form}");
        }
    }
}

#[test]
fn every_workload_kind_combines_all_forms_sorted_and_deduplicated() {
    let forms = reference_forms();
    // All forms in one pod spec: merge the lists of each form's pod spec.
    let mut spec = json!({});
    let mut expected: Vec<DependencyRef> = Vec::new();
    for (_, pod_spec, deps) in &forms {
        for (key, value) in pod_spec.as_object().unwrap() {
            match value {
                Value::Array(items) => {
                    let list = spec[key].as_array().cloned().unwrap_or_default();
                    spec[key] = Value::Array(list.into_iter().chain(items.iter().cloned()).collect());
                }
                other if key == "serviceAccountName" => spec[key] = other.clone(),
                _ => {}
            }
        }
        if !pod_spec.as_object().unwrap().contains_key("serviceAccount") {
            expected.extend(deps.iter().cloned());
        }
    }
    expected.sort();
    expected.dedup();
    for (api_version, kind) in WORKLOAD_KINDS {
        let obj = workload(api_version, kind, spec.clone());
        let got = builtin(&obj);
        assert_eq!(got, expected, "{kind}");
        assert!(got.windows(2).all(|w| w[0] < w[1]), "{kind}: sorted and unique");
    }
}

#[test]
fn duplicates_collapse_into_one_reference() {
    let spec = json!({
        "initContainers": [container(json!({"envFrom": [{"configMapRef": {"name": "shared"}}]}))],
        "containers": [
            container(json!({"env": [{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "shared", "key": "a"}}}]})),
            container(json!({"envFrom": [{"configMapRef": {"name": "shared"}}, {"secretRef": {"name": "shared"}}]})),
        ],
        "volumes": [
            {"name": "a", "configMap": {"name": "shared"}},
            {"name": "b", "projected": {"sources": [{"configMap": {"name": "shared"}}, {"secret": {"name": "shared"}}]}},
            {"name": "c", "secret": {"secretName": "shared"}},
        ],
        "imagePullSecrets": [{"name": "shared"}],
    });
    for (api_version, kind) in WORKLOAD_KINDS {
        let got = builtin(&workload(api_version, kind, spec.clone()));
        assert_eq!(
            got,
            vec![in_ns("ConfigMap", "shared"), in_ns("Secret", "shared")],
            "{kind}"
        );
    }
}

#[test]
fn default_and_empty_service_accounts_are_not_dependencies() {
    for (api_version, kind) in WORKLOAD_KINDS {
        for spec in [
            json!({"containers": [], "serviceAccountName": "default"}),
            json!({"containers": [], "serviceAccountName": ""}),
            json!({"containers": [], "serviceAccount": "default"}),
            json!({"containers": [], "serviceAccountName": "", "serviceAccount": ""}),
            json!({"containers": []}),
        ] {
            assert_eq!(
                builtin(&workload(api_version, kind, spec.clone())),
                vec![],
                "{kind}: {spec}"
            );
        }
        // serviceAccountName wins over the deprecated field, as the API server's defaulting does.
        let spec = json!({"serviceAccountName": "new", "serviceAccount": "old"});
        assert_eq!(
            builtin(&workload(api_version, kind, spec)),
            vec![in_ns("ServiceAccount", "new")],
            "{kind}"
        );
        // An explicit `default` in serviceAccountName hides the deprecated field too.
        let spec = json!({"serviceAccountName": "default", "serviceAccount": "old"});
        assert_eq!(builtin(&workload(api_version, kind, spec)), vec![], "{kind}");
    }
}

#[test]
fn empty_names_and_non_references_are_skipped() {
    let spec = json!({
        "containers": [container(json!({
            "env": [{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "", "key": "k"}}}],
            "envFrom": [{"secretRef": {}}],
        }))],
        "volumes": [
            {"name": "a", "configMap": {}},
            {"name": "b", "secret": {"secretName": ""}},
            {"name": "c", "emptyDir": {}},
            {"name": "d", "hostPath": {"path": "/x"}},
            {"name": "e", "persistentVolumeClaim": {"claimName": ""}},
            {"name": "f", "ephemeral": {"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"]}}}},
            {"name": "g", "csi": {"driver": "d"}},
            {"name": "h", "rbd": {"monitors": ["m"], "image": "i"}},
        ],
        "imagePullSecrets": [{"name": ""}, {}],
    });
    for (api_version, kind) in WORKLOAD_KINDS {
        assert_eq!(
            builtin(&workload(api_version, kind, spec.clone())),
            vec![],
            "{kind}"
        );
    }
}

#[test]
fn stateful_set_volume_claim_templates_are_not_dependencies() {
    let spec = json!({
        "containers": [container(json!({"volumeMounts": [{"name": "data", "mountPath": "/d"}]}))],
        "volumes": [
            {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
            {"name": "shared", "persistentVolumeClaim": {"claimName": "shared"}},
        ],
    });
    let mut sts = workload("apps/v1", "StatefulSet", spec.clone());
    sts["spec"]["volumeClaimTemplates"] = json!([
        {"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"]}},
        {"metadata": {"name": "logs"}, "spec": {"accessModes": ["ReadWriteOnce"]}},
    ]);
    assert_eq!(builtin(&sts), vec![in_ns("PersistentVolumeClaim", "shared")]);
    // Only StatefulSets create claims from templates; a Deployment's claim is a dependency.
    let mut deploy = workload("apps/v1", "Deployment", spec);
    deploy["spec"]["volumeClaimTemplates"] = sts["spec"]["volumeClaimTemplates"].clone();
    assert_eq!(
        builtin(&deploy),
        vec![
            in_ns("PersistentVolumeClaim", "data"),
            in_ns("PersistentVolumeClaim", "shared")
        ]
    );
    // A StatefulSet without templates keeps its claims.
    let plain = workload(
        "apps/v1",
        "StatefulSet",
        json!({"volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]}),
    );
    assert_eq!(builtin(&plain), vec![in_ns("PersistentVolumeClaim", "data")]);
}

#[test]
fn cron_job_reads_the_nested_job_template_only() {
    let spec = json!({"volumes": [{"name": "v", "configMap": {"name": "cm"}}]});
    let cron = workload("batch/v1", "CronJob", spec.clone());
    assert_eq!(
        cron["spec"]["jobTemplate"]["spec"]["template"]["spec"], spec,
        "fixture nests the pod spec"
    );
    assert_eq!(builtin(&cron), vec![in_ns("ConfigMap", "cm")]);
    // A pod template in the wrong place of a CronJob is not read.
    let misplaced = json!({
        "apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"namespace": "ns", "name": "c"},
        "spec": {"template": {"spec": spec}},
    });
    assert_eq!(builtin(&misplaced), vec![]);
}

#[test]
fn references_take_the_workload_namespace() {
    let spec = json!({"volumes": [{"name": "v", "configMap": {"name": "cm"}}]});
    let mut obj = workload("apps/v1", "Deployment", spec.clone());
    obj["metadata"]["namespace"] = json!("team-b");
    assert_eq!(builtin(&obj), vec![dep("ConfigMap", Some("team-b"), "cm")]);
    // No namespace (not yet defaulted): references carry none either.
    let mut obj = workload("v1", "Pod", spec.clone());
    obj["metadata"].as_object_mut().unwrap().remove("namespace");
    assert_eq!(builtin(&obj), vec![dep("ConfigMap", None, "cm")]);
    obj["metadata"]["namespace"] = json!("");
    assert_eq!(builtin(&obj), vec![dep("ConfigMap", None, "cm")]);
}

#[test]
fn other_kinds_have_no_builtin_dependencies() {
    let spec = json!({"volumes": [{"name": "v", "configMap": {"name": "cm"}}]});
    for (api_version, kind) in [
        ("v1", "ConfigMap"),
        ("v1", "Service"),
        ("apps/v1beta1", "Deployment"),
        ("example.io/v1", "Workflow"),
    ] {
        let mut obj = workload(api_version, kind, spec.clone());
        obj["spec"]["template"] = json!({"spec": spec});
        assert_eq!(builtin(&obj), vec![], "{api_version} {kind}");
    }
}

#[test]
fn ingress_depends_on_its_tls_secrets() {
    let ingress = json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"namespace": "ns", "name": "web"},
        "spec": {"tls": [
            {"hosts": ["a.example"], "secretName": "tls-a"},
            {"hosts": ["b.example"], "secretName": "tls-a"},
            {"hosts": ["c.example"]},
            {"secretName": "tls-c"},
        ]},
    });
    assert_eq!(
        builtin(&ingress),
        vec![in_ns("Secret", "tls-a"), in_ns("Secret", "tls-c")]
    );
}

fn persistent_volume(csi: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv-1"},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "csi": csi},
    })
}

#[test]
fn persistent_volume_depends_on_its_csi_secrets() {
    let pv = persistent_volume(json!({
        "driver": "ebs.csi.aws.com",
        "volumeHandle": "vol-1",
        "controllerPublishSecretRef": {"name": "publish", "namespace": "storage"},
        "nodeStageSecretRef": {"name": "stage", "namespace": "storage"},
        "nodePublishSecretRef": {"name": "node-publish", "namespace": "kube-system"},
        "controllerExpandSecretRef": {"name": "expand", "namespace": "storage"},
        "nodeExpandSecretRef": {"name": "publish", "namespace": "storage"},
    }));
    assert_eq!(
        builtin(&pv),
        vec![
            dep("Secret", Some("kube-system"), "node-publish"),
            dep("Secret", Some("storage"), "expand"),
            dep("Secret", Some("storage"), "publish"),
            dep("Secret", Some("storage"), "stage"),
        ]
    );
    for field in [
        "controllerPublishSecretRef",
        "nodeStageSecretRef",
        "nodePublishSecretRef",
        "controllerExpandSecretRef",
        "nodeExpandSecretRef",
    ] {
        let mut csi = json!({"driver": "d", "volumeHandle": "h"});
        csi[field] = json!({"name": "s", "namespace": "storage"});
        assert_eq!(
            builtin(&persistent_volume(csi)),
            vec![dep("Secret", Some("storage"), "s")],
            "{field}"
        );
    }
}

#[test]
fn persistent_volume_without_csi_secrets_has_no_dependencies() {
    assert_eq!(
        builtin(&persistent_volume(json!({"driver": "d", "volumeHandle": "h"}))),
        vec![]
    );
    let host_path = json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv"}, "spec": {"hostPath": {"path": "/x"}}});
    assert_eq!(builtin(&host_path), vec![]);
    assert_eq!(
        builtin(&persistent_volume(
            json!({"driver": "d", "nodeStageSecretRef": {"name": ""}})
        )),
        vec![]
    );
}

#[test]
fn persistent_volume_csi_secret_without_namespace_is_an_error() {
    let pv = persistent_volume(json!({"driver": "d", "nodeStageSecretRef": {"name": "stage"}}));
    let err = dependencies(&pv, &DependencyRules::builtin()).unwrap_err();
    assert_eq!(err.path(), "spec.csi.nodeStageSecretRef.namespace");
    assert_eq!(
        err.to_string(),
        "v1 PersistentVolume pv-1: spec.csi.nodeStageSecretRef.namespace: is required: a PersistentVolume is \
         cluster-scoped, so the Secret \"stage\" it references must name its namespace"
    );
}

#[test]
fn dependency_refs_serialize_like_karmada_dependent_object_references() {
    let refs = vec![in_ns("ConfigMap", "cm"), dep("StorageClass", None, "fast")];
    let text = serde_json::to_string(&refs).unwrap();
    assert_eq!(
        text,
        r#"[{"apiVersion":"v1","kind":"ConfigMap","namespace":"ns","name":"cm"},{"apiVersion":"v1","kind":"StorageClass","name":"fast"}]"#
    );
    let back: Vec<DependencyRef> = serde_json::from_str(&text).unwrap();
    assert_eq!(back, refs);
}

// ---------------------------------------------------------------------------------------------
// Malformed templates.
// ---------------------------------------------------------------------------------------------

fn error_of(obj: &Value) -> String {
    dependencies(obj, &DependencyRules::builtin())
        .unwrap_err()
        .to_string()
}

#[test]
fn wrong_types_are_errors_naming_the_field() {
    let cases = [
        (
            workload("apps/v1", "Deployment", json!({"volumes": "x"})),
            "apps/v1 Deployment ns/w: spec.template.spec.volumes: expected a list, got a string",
        ),
        (
            workload("v1", "Pod", json!({"volumes": "x"})),
            "v1 Pod ns/w: spec.volumes: expected a list, got a string",
        ),
        (
            workload("batch/v1", "CronJob", json!({"containers": {"name": "c"}})),
            "batch/v1 CronJob ns/w: spec.jobTemplate.spec.template.spec.containers: expected a list, got an object",
        ),
        (
            workload(
                "apps/v1",
                "DaemonSet",
                json!({"containers": [container(json!({"env": [{"name": "A", "valueFrom": "x"}]}))]}),
            ),
            "spec.template.spec.containers[0].env[0].valueFrom: expected an object, got a string",
        ),
        (
            workload(
                "batch/v1",
                "Job",
                json!({"volumes": [{"name": "v", "configMap": {"name": 5}}]}),
            ),
            "spec.template.spec.volumes[0].configMap.name: expected a string, got a number",
        ),
        (
            workload(
                "apps/v1",
                "ReplicaSet",
                json!({"initContainers": [container(json!({"envFrom": [{"secretRef": ["x"]}]}))]}),
            ),
            "spec.template.spec.initContainers[0].envFrom[0].secretRef: expected an object, got a list",
        ),
        (
            workload(
                "apps/v1",
                "StatefulSet",
                json!({"imagePullSecrets": [{"name": true}]}),
            ),
            "spec.template.spec.imagePullSecrets[0].name: expected a string, got a boolean",
        ),
        (
            workload("v1", "Pod", json!({"serviceAccountName": 7})),
            "spec.serviceAccountName: expected a string, got a number",
        ),
        (
            workload(
                "v1",
                "Pod",
                json!({"volumes": [{"name": "p", "projected": {"sources": {"secret": {}}}}]}),
            ),
            "spec.volumes[0].projected.sources: expected a list, got an object",
        ),
        (
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {"template": "x"}}),
            "apps/v1 Deployment d: spec.template: expected an object, got a string",
        ),
        (
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": 3}}),
            "metadata.namespace: expected a string, got a number",
        ),
        (
            json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "s"}, "spec": {"volumeClaimTemplates": "x"}}),
            "spec.volumeClaimTemplates: expected a list, got a string",
        ),
        (
            json!({"apiVersion": 1, "kind": "Deployment"}),
            "Deployment <unnamed>: apiVersion: expected a string, got a number",
        ),
        (
            json!("just a string"),
            "<unnamed>: .: expected an object, got a string",
        ),
    ];
    for (obj, needle) in cases {
        let message = error_of(&obj);
        assert!(
            message.contains(needle),
            "{message}\n  does not contain\n{needle}"
        );
    }
}

#[test]
fn missing_fields_are_simply_no_dependencies() {
    for (api_version, kind) in WORKLOAD_KINDS {
        let bare = json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": "x"}});
        assert_eq!(builtin(&bare), vec![], "{kind}");
        let null_spec = json!({"apiVersion": api_version, "kind": kind, "spec": null});
        assert_eq!(builtin(&null_spec), vec![], "{kind}");
        let null_lists = workload(
            api_version,
            kind,
            json!({"containers": null, "volumes": null, "imagePullSecrets": null}),
        );
        assert_eq!(builtin(&null_lists), vec![], "{kind}");
    }
}

/// Every value in `obj`, replaced in turn by values of every JSON type, must never make any
/// interpreter function panic.
#[test]
fn no_shape_of_template_panics() {
    let mut base = workload(
        "apps/v1",
        "Deployment",
        json!({
            "containers": [container(json!({
                "env": [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}],
                "envFrom": [{"configMapRef": {"name": "c"}}],
                "resources": {"requests": {"cpu": "100m", "memory": "1Gi"}, "limits": {"cpu": "1"}},
            }))],
            "initContainers": [container(json!({"resources": {"requests": {"cpu": "2"}}}))],
            "volumes": [
                {"name": "a", "projected": {"sources": [{"secret": {"name": "p"}}]}},
                {"name": "b", "persistentVolumeClaim": {"claimName": "c"}},
                {"name": "c", "rbd": {"secretRef": {"name": "r"}}},
            ],
            "nodeSelector": {"zone": "a"},
            "tolerations": [{"key": "k", "operator": "Exists"}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}},
            "imagePullSecrets": [{"name": "pull"}],
            "serviceAccountName": "sa",
        }),
    );
    base["spec"]["replicas"] = json!(3);
    base["status"] = json!({"replicas": 3, "conditions": [{"type": "Available", "status": "True"}]});
    let replacements = [
        json!(null),
        json!("x"),
        json!(-1),
        json!(1.5),
        json!(true),
        json!([1]),
        json!({"a": 1}),
    ];
    let mut paths = Vec::new();
    collect_paths(&base, &mut Vec::new(), &mut paths);
    assert!(paths.len() > 50, "{} paths", paths.len());
    let rules = DependencyRules::from_yaml(
        "apiVersion: flotilla.io/v1alpha1\nkind: DependencyRules\nrules:\n- apiVersion: apps/v1\n  kind: Deployment\n  podTemplatePaths: [.spec.template]\n  references:\n  - {apiVersion: v1, kind: Secret, namePaths: [\".spec.template.spec.volumes[*].name\"], namespacePath: .metadata.namespace}\n",
    )
    .unwrap();
    for path in &paths {
        for replacement in &replacements {
            let mut obj = base.clone();
            *pointer_mut(&mut obj, path) = replacement.clone();
            if let Err(err) = dependencies(&obj, &rules) {
                assert!(!err.path().is_empty());
            }
            let _ = flotilla_interpreter::replicas(&obj);
            let _ = flotilla_interpreter::revise_replicas(&mut obj.clone(), 2);
            let _ = flotilla_interpreter::health(&obj);
            let _ = flotilla_interpreter::reflect_status(&obj);
            let _ = flotilla_interpreter::aggregate_status(&obj, &[("m1".to_owned(), obj["status"].clone())]);
        }
    }
}

fn collect_paths(value: &Value, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                prefix.push(key.clone());
                out.push(prefix.clone());
                collect_paths(child, prefix, out);
                prefix.pop();
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                prefix.push(i.to_string());
                out.push(prefix.clone());
                collect_paths(child, prefix, out);
                prefix.pop();
            }
        }
        _ => {}
    }
}

fn pointer_mut<'a>(value: &'a mut Value, path: &[String]) -> &'a mut Value {
    let pointer: String = path.iter().map(|p| format!("/{p}")).collect();
    value.pointer_mut(&pointer).unwrap()
}

// ---------------------------------------------------------------------------------------------
// Declarative rules.
// ---------------------------------------------------------------------------------------------

fn rules(body: &str) -> DependencyRules {
    DependencyRules::from_yaml(&format!(
        "apiVersion: flotilla.io/v1alpha1\nkind: DependencyRules\nrules:\n{body}"
    ))
    .unwrap()
}

fn workflow(spec: Value) -> Value {
    json!({"apiVersion": "example.io/v1", "kind": "Workflow", "metadata": {"namespace": "ns", "name": "wf"}, "spec": spec})
}

#[test]
fn rule_references_on_a_crd_kind() {
    let rules = rules(
        r#"
- apiVersion: example.io/v1
  kind: Workflow
  references:
  - apiVersion: v1
    kind: ConfigMap
    namePaths: [".spec.configRef.name", ".spec.steps[*].configMap"]
    namespacePath: ".spec.configRef.namespace"
  - apiVersion: v1
    kind: Secret
    namePaths: [".spec.steps[1].secret", ".spec.credentials"]
  - apiVersion: storage.k8s.io/v1
    kind: StorageClass
    namePaths: [".spec.storageClass"]
    clusterScoped: true
"#,
    );
    let obj = workflow(json!({
        "configRef": {"name": "main", "namespace": "shared"},
        "steps": [{"configMap": "step-0", "secret": "s0"}, {"configMap": "step-1", "secret": "s1"}, {}],
        "credentials": "creds",
        "storageClass": "fast",
    }));
    let got = dependencies(&obj, &rules).unwrap();
    let storage_class = DependencyRef {
        api_version: "storage.k8s.io/v1".to_owned(),
        kind: "StorageClass".to_owned(),
        namespace: None,
        name: "fast".to_owned(),
    };
    assert_eq!(
        got,
        vec![
            storage_class,
            dep("ConfigMap", Some("shared"), "main"),
            dep("ConfigMap", Some("shared"), "step-0"),
            dep("ConfigMap", Some("shared"), "step-1"),
            in_ns("Secret", "creds"),
            in_ns("Secret", "s1"),
        ]
    );
    // The namespace path reaching nothing falls back to the workload's namespace.
    let obj = workflow(json!({"configRef": {"name": "main"}}));
    assert_eq!(
        dependencies(&obj, &rules).unwrap(),
        vec![in_ns("ConfigMap", "main")]
    );
    // The same kind in another version is not covered by the rule.
    let mut other = obj.clone();
    other["apiVersion"] = json!("example.io/v2");
    assert_eq!(dependencies(&other, &rules).unwrap(), vec![]);
    // Without rules a CRD has no dependencies.
    assert_eq!(builtin(&obj), vec![]);
}

#[test]
fn rule_pod_template_paths_apply_builtin_pod_rules() {
    let rules = rules(
        r#"
- apiVersion: example.io/v1
  kind: Workflow
  podTemplatePaths: [".spec.template", ".spec.stages[*].template"]
"#,
    );
    let obj = workflow(json!({
        "template": {"spec": {"serviceAccountName": "runner", "volumes": [{"name": "v", "secret": {"secretName": "s"}}]}},
        "stages": [
            {"template": {"spec": {"containers": [container(json!({"envFrom": [{"configMapRef": {"name": "stage-0"}}]}))]}}},
            {"template": {"metadata": {"name": "no spec"}}},
            {"template": {"spec": {"initContainers": [container(json!({"envFrom": [{"configMapRef": {"name": "stage-2"}}]}))]}}},
        ],
    }));
    assert_eq!(
        dependencies(&obj, &rules).unwrap(),
        vec![
            in_ns("ConfigMap", "stage-0"),
            in_ns("ConfigMap", "stage-2"),
            in_ns("Secret", "s"),
            in_ns("ServiceAccount", "runner"),
        ]
    );
}

#[test]
fn rule_for_a_builtin_kind_adds_to_builtin_references() {
    let rules = rules(
        r#"
- apiVersion: apps/v1
  kind: Deployment
  references:
  - apiVersion: v1
    kind: Secret
    namePaths: [".metadata.annotations.tls-secret"]
"#,
    );
    let mut obj = workload(
        "apps/v1",
        "Deployment",
        json!({"volumes": [{"name": "v", "configMap": {"name": "cm"}}]}),
    );
    obj["metadata"]["annotations"] = json!({"tls-secret": "tls"});
    assert_eq!(
        dependencies(&obj, &rules).unwrap(),
        vec![in_ns("ConfigMap", "cm"), in_ns("Secret", "tls")]
    );
    // Other built-in kinds keep only their built-in references.
    let mut sts = workload(
        "apps/v1",
        "StatefulSet",
        json!({"volumes": [{"name": "v", "configMap": {"name": "cm"}}]}),
    );
    sts["metadata"]["annotations"] = json!({"tls-secret": "tls"});
    assert_eq!(
        dependencies(&sts, &rules).unwrap(),
        vec![in_ns("ConfigMap", "cm")]
    );
}

#[test]
fn rule_on_a_cluster_scoped_workload_uses_the_namespace_path() {
    let rules = rules(
        r#"
- apiVersion: example.io/v1
  kind: ClusterApp
  references:
  - apiVersion: v1
    kind: Secret
    namePaths: [".spec.secret.name"]
    namespacePath: ".spec.secret.namespace"
  podTemplatePaths: [".spec.template"]
"#,
    );
    let obj = json!({
        "apiVersion": "example.io/v1", "kind": "ClusterApp", "metadata": {"name": "app"},
        "spec": {"secret": {"name": "s", "namespace": "apps"}, "template": {"spec": {"serviceAccountName": "sa"}}},
    });
    assert_eq!(
        dependencies(&obj, &rules).unwrap(),
        vec![
            dep("Secret", Some("apps"), "s"),
            dep("ServiceAccount", None, "sa")
        ]
    );
}

#[test]
fn rule_paths_reaching_wrong_types_are_errors() {
    let rules = rules(
        r#"
- apiVersion: example.io/v1
  kind: Workflow
  podTemplatePaths: [".spec.template"]
  references:
  - apiVersion: v1
    kind: ConfigMap
    namePaths: [".spec.steps[*].configMap"]
    namespacePath: ".spec.ns"
"#,
    );
    for (spec, needle) in [
        (
            json!({"steps": {"configMap": "x"}}),
            "example.io/v1 Workflow ns/wf: spec.steps: expected a list, got an object",
        ),
        (
            json!({"steps": [{"configMap": ["x"]}]}),
            "spec.steps[0].configMap: expected a string, got a list",
        ),
        (
            json!({"steps": [{"configMap": "x"}], "ns": 1}),
            "spec.ns: expected a string, got a number",
        ),
        (
            json!({"template": {"spec": {"volumes": 1}}}),
            "spec.template.spec.volumes: expected a list, got a number",
        ),
        (
            json!({"template": "x"}),
            "spec.template: expected an object, got a string",
        ),
    ] {
        let err = dependencies(&workflow(spec), &rules).unwrap_err().to_string();
        assert!(err.contains(needle), "{err}\n  does not contain\n{needle}");
    }
}
