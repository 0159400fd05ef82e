//! Replicas and requirements of every kind, revising replicas per cluster and splitting Job
//! completions.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use flotilla_api::work::{ReplicaRequirements, TargetCluster};
use flotilla_interpreter::{
    ReplicaInfo, divide_job_completions, replicas, revise_job_completions, revise_replicas,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde_json::{Value, json};

fn object(api_version: &str, kind: &str, spec: Value) -> Value {
    json!({"apiVersion": api_version, "kind": kind, "metadata": {"namespace": "ns", "name": "w"}, "spec": spec})
}

fn count(obj: &Value) -> Option<i32> {
    replicas(obj).unwrap().map(|info| info.replicas)
}

fn with_template(mut spec: Value, pod_spec: Value) -> Value {
    spec["template"] = json!({"spec": pod_spec});
    spec
}

#[test]
fn replica_set_like_kinds_read_spec_replicas_defaulting_to_one() {
    for kind in ["Deployment", "StatefulSet", "ReplicaSet"] {
        assert_eq!(
            count(&object("apps/v1", kind, json!({"replicas": 5}))),
            Some(5),
            "{kind}"
        );
        assert_eq!(
            count(&object("apps/v1", kind, json!({"replicas": 0}))),
            Some(0),
            "{kind}"
        );
        assert_eq!(
            count(&object("apps/v1", kind, json!({}))),
            Some(1),
            "{kind}: absent"
        );
        assert_eq!(
            count(&object("apps/v1", kind, json!({"replicas": null}))),
            Some(1),
            "{kind}: null"
        );
        let no_spec = json!({"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": "x"}});
        assert_eq!(count(&no_spec), Some(1), "{kind}: no spec");
    }
}

#[test]
fn job_replicas_follow_parallelism_and_completions() {
    for (spec, expected, why) in [
        (
            json!({"parallelism": 3, "completions": 5}),
            3,
            "parallelism below completions",
        ),
        (
            json!({"parallelism": 5, "completions": 2}),
            2,
            "never more pods than completions",
        ),
        (json!({}), 1, "both default to 1"),
        (json!({"completions": 3}), 1, "parallelism defaults to 1"),
        (json!({"parallelism": 4}), 4, "work queue: completions unset"),
        (
            json!({"parallelism": 0, "completions": 4}),
            0,
            "suspended by parallelism 0",
        ),
        (json!({"parallelism": 4, "completions": 0}), 0, "zero completions"),
    ] {
        assert_eq!(count(&object("batch/v1", "Job", spec)), Some(expected), "{why}");
    }
}

#[test]
fn pods_have_one_replica() {
    assert_eq!(count(&object("v1", "Pod", json!({"containers": []}))), Some(1));
}

#[test]
fn other_kinds_have_no_replicas() {
    for (api_version, kind) in [
        ("apps/v1", "DaemonSet"),
        ("batch/v1", "CronJob"),
        ("v1", "ConfigMap"),
        ("v1", "Service"),
        ("example.io/v1", "Workflow"),
        ("apps/v1beta2", "Deployment"),
    ] {
        assert_eq!(
            replicas(&object(api_version, kind, json!({"replicas": 3}))).unwrap(),
            None,
            "{kind}"
        );
    }
    assert_eq!(replicas(&json!({"kind": "Deployment"})).unwrap(), None);
}

#[test]
fn bad_counts_are_errors() {
    let err = replicas(&object("apps/v1", "Deployment", json!({"replicas": "3"}))).unwrap_err();
    assert_eq!(
        err.to_string(),
        "apps/v1 Deployment ns/w: spec.replicas: expected an integer, got a string; fix the field's type in the template"
    );
    let err = replicas(&object("apps/v1", "StatefulSet", json!({"replicas": -2}))).unwrap_err();
    assert_eq!(
        err.to_string(),
        "apps/v1 StatefulSet ns/w: spec.replicas: -2 is negative; set 0 or more"
    );
    let err = replicas(&object("batch/v1", "Job", json!({"parallelism": 1.5}))).unwrap_err();
    assert_eq!(err.path(), "spec.parallelism");
    let err = replicas(&object(
        "batch/v1",
        "Job",
        json!({"completions": 9_999_999_999_i64}),
    ))
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("spec.completions: 9999999999 is out of range"),
        "{err}"
    );
    let err = replicas(&object("apps/v1", "ReplicaSet", json!([]))).unwrap_err();
    assert_eq!(err.path(), "spec");
}

fn quantities(list: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
    list.iter()
        .map(|(k, v)| ((*k).to_owned(), Quantity((*v).to_owned())))
        .collect()
}

fn requirements(obj: &Value) -> ReplicaRequirements {
    replicas(obj).unwrap().unwrap().requirements.unwrap()
}

/// One pod spec in every kind that has replicas.
fn every_replicated_kind(pod_spec: Value) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for kind in ["Deployment", "StatefulSet", "ReplicaSet"] {
        out.push((
            kind.to_owned(),
            object(
                "apps/v1",
                kind,
                with_template(json!({"replicas": 2}), pod_spec.clone()),
            ),
        ));
    }
    out.push((
        "Job".to_owned(),
        object("batch/v1", "Job", with_template(json!({}), pod_spec.clone())),
    ));
    out.push(("Pod".to_owned(), object("v1", "Pod", pod_spec)));
    out
}

#[test]
fn requests_are_summed_over_containers_and_raised_to_init_containers() {
    let pod_spec = json!({
        "containers": [
            {"name": "a", "resources": {"requests": {"cpu": "100m", "memory": "128Mi", "nvidia.com/gpu": 1}}},
            {"name": "b", "resources": {"requests": {"cpu": "250m", "memory": "1Gi", "ephemeral-storage": "1G"}}},
            {"name": "c", "resources": {"limits": {"cpu": "150m", "hugepages-2Mi": "4Mi"}}},
            {"name": "d", "resources": {"requests": {"cpu": "50m"}, "limits": {"cpu": "2", "memory": "64Mi"}}},
            {"name": "e"},
        ],
        "initContainers": [
            {"name": "setup", "resources": {"requests": {"cpu": "1", "memory": "100Mi", "pods": 2}}},
            {"name": "migrate", "resources": {"limits": {"nvidia.com/gpu": 3}}},
        ],
        "overhead": {"cpu": "10m", "memory": "1Mi"},
    });
    for (kind, obj) in every_replicated_kind(pod_spec) {
        let got = requirements(&obj);
        assert_eq!(
            got.resource_request,
            quantities(&[
                // containers: 100m + 250m + 150m (limit) + 50m = 550m; init 1 wins; +10m overhead.
                ("cpu", "1010m"),
                // 128Mi + 1Gi + 64Mi (limit) = 1216Mi, above init's 100Mi; + 1Mi overhead.
                ("memory", "1217Mi"),
                // 1G is not a whole number of KiB, so it stays in bytes (Kubernetes' canonical form).
                ("ephemeral-storage", "1000000000"),
                ("hugepages-2Mi", "4Mi"),
                ("nvidia.com/gpu", "3"),
                ("pods", "2"),
            ]),
            "{kind}"
        );
        assert_eq!(got.namespace.as_deref(), Some("ns"), "{kind}");
        assert_eq!(got.node_claim, None, "{kind}");
        assert_eq!(got.priority_class_name, None, "{kind}");
    }
}

#[test]
fn unknown_unprefixed_resources_are_ignored() {
    let pod_spec = json!({"containers": [{"name": "a", "resources": {"requests": {"cpu": "1", "widgets": "5", "requests.example.com/x": "1"}}}]});
    let got = requirements(&object("v1", "Pod", pod_spec));
    assert_eq!(got.resource_request, quantities(&[("cpu", "1")]));
}

#[test]
fn node_claim_priority_and_namespace_come_from_the_pod_template() {
    let pod_spec = json!({
        "nodeSelector": {"zone": "a", "disk": "ssd"},
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}],
        "affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "arch", "operator": "In", "values": ["arm64"]}]}
            ]},
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 1, "preference": {"matchExpressions": [{"key": "x", "operator": "Exists"}]}}
            ],
        }},
        "priorityClassName": "high",
        "containers": [{"name": "a"}],
    });
    for (kind, obj) in every_replicated_kind(pod_spec) {
        let got = requirements(&obj);
        let claim = got.node_claim.clone().unwrap();
        assert_eq!(
            claim.node_selector,
            [
                ("disk".to_owned(), "ssd".to_owned()),
                ("zone".to_owned(), "a".to_owned())
            ]
            .into(),
            "{kind}"
        );
        assert_eq!(claim.tolerations.len(), 1, "{kind}");
        assert_eq!(claim.tolerations[0].key.as_deref(), Some("dedicated"), "{kind}");
        let affinity = claim.hard_node_affinity.unwrap();
        let term = &affinity.node_selector_terms[0];
        assert_eq!(term.match_expressions.as_ref().unwrap()[0].key, "arch", "{kind}");
        assert!(got.resource_request.is_empty(), "{kind}");
        assert_eq!(got.priority_class_name.as_deref(), Some("high"), "{kind}");
        assert_eq!(got.namespace.as_deref(), Some("ns"), "{kind}");
    }
}

#[test]
fn no_requests_and_no_node_constraints_means_no_requirements() {
    let pod_spec = json!({"containers": [{"name": "a", "image": "nginx"}], "priorityClassName": "high", "nodeSelector": {}});
    for (kind, obj) in every_replicated_kind(pod_spec) {
        assert_eq!(
            replicas(&obj).unwrap(),
            Some(ReplicaInfo {
                replicas: if kind == "Job" || kind == "Pod" { 1 } else { 2 },
                requirements: None
            }),
            "{kind}"
        );
    }
    // A workload without any pod template still has replicas.
    assert_eq!(
        replicas(&object("apps/v1", "Deployment", json!({"replicas": 4}))).unwrap(),
        Some(ReplicaInfo {
            replicas: 4,
            requirements: None
        })
    );
}

#[test]
fn requirements_without_a_namespace_have_none() {
    let obj = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"nodeSelector": {"a": "b"}}});
    assert_eq!(requirements(&obj).namespace, None);
}

#[test]
fn malformed_requirements_are_errors_naming_the_field() {
    for (pod_spec, needle) in [
        (
            json!({"containers": [{"name": "a", "resources": {"requests": {"cpu": "lots"}}}]}),
            "spec.template.spec.containers[0].resources.requests.cpu: \"lots\" is not a quantity",
        ),
        (
            json!({"containers": [{"name": "a", "resources": {"requests": {"memory": "-1Gi"}}}]}),
            "spec.template.spec.containers[0].resources.requests.memory: \"-1Gi\" is negative",
        ),
        (
            json!({"containers": [{"name": "a", "resources": {"limits": {"cpu": ["1"]}}}]}),
            "spec.template.spec.containers[0].resources.limits.cpu: expected a quantity string such as 500m or 1Gi, got a list",
        ),
        (
            json!({"initContainers": [{"name": "a", "resources": {"requests": {"memory": "100E"}}}]}),
            "spec.template.spec.initContainers[0].resources.requests.memory: \"100E\" is too large",
        ),
        (
            json!({"containers": "x"}),
            "spec.template.spec.containers: expected a list, got a string",
        ),
        (
            json!({"tolerations": {"key": "x"}}),
            "spec.template.spec.tolerations: expected a list, got an object",
        ),
        (
            json!({"tolerations": [{"key": 3}]}),
            "spec.template.spec.tolerations: is not a valid list of tolerations",
        ),
        (
            json!({"nodeSelector": {"a": 1}}),
            "spec.template.spec.nodeSelector: is not a valid node selector (a map of strings)",
        ),
        (
            json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": "x"}}}}),
            "spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution: is not a valid node selector",
        ),
        (
            json!({"overhead": "x"}),
            "spec.template.spec.overhead: expected an object, got a string",
        ),
        (
            json!({"nodeSelector": {"a": "b"}, "priorityClassName": 1}),
            "spec.template.spec.priorityClassName: expected a string, got a number",
        ),
    ] {
        let obj = object("apps/v1", "Deployment", with_template(json!({}), pod_spec));
        let err = replicas(&obj).unwrap_err().to_string();
        assert!(err.contains(needle), "{err}\n  does not contain\n{needle}");
        assert!(err.starts_with("apps/v1 Deployment ns/w: "), "{err}");
    }
}

// ---------------------------------------------------------------------------------------------
// Revising replicas.
// ---------------------------------------------------------------------------------------------

#[test]
fn revise_sets_spec_replicas_of_replica_set_like_kinds() {
    for kind in ["Deployment", "StatefulSet", "ReplicaSet"] {
        let mut obj = object("apps/v1", kind, json!({"replicas": 10, "template": {"spec": {}}}));
        revise_replicas(&mut obj, 3).unwrap();
        assert_eq!(obj["spec"]["replicas"], json!(3), "{kind}");
        assert_eq!(
            obj["spec"]["template"],
            json!({"spec": {}}),
            "{kind}: rest untouched"
        );
        // Absent means 1 in the template; a cluster's share is written all the same.
        let mut obj = object("apps/v1", kind, json!({}));
        revise_replicas(&mut obj, 0).unwrap();
        assert_eq!(obj["spec"]["replicas"], json!(0), "{kind}");
        let mut obj = json!({"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": "x"}, "spec": null});
        revise_replicas(&mut obj, 2).unwrap();
        assert_eq!(obj["spec"], json!({"replicas": 2}), "{kind}");
        assert_eq!(count(&obj), Some(2), "{kind}: revised count reads back");
    }
}

#[test]
fn revise_sets_job_parallelism_only() {
    let mut job = object("batch/v1", "Job", json!({"parallelism": 6, "completions": 12}));
    revise_replicas(&mut job, 2).unwrap();
    assert_eq!(job["spec"], json!({"parallelism": 2, "completions": 12}));
    let mut job = object("batch/v1", "Job", json!({}));
    revise_replicas(&mut job, 4).unwrap();
    assert_eq!(job["spec"], json!({"parallelism": 4}));
}

#[test]
fn revise_leaves_kinds_without_replicas_alone() {
    for (api_version, kind) in [
        ("v1", "Pod"),
        ("apps/v1", "DaemonSet"),
        ("batch/v1", "CronJob"),
        ("v1", "ConfigMap"),
        ("example.io/v1", "Workflow"),
    ] {
        let original = object(api_version, kind, json!({"replicas": 7}));
        let mut obj = original.clone();
        revise_replicas(&mut obj, 1).unwrap();
        assert_eq!(obj, original, "{kind}");
    }
}

#[test]
fn revise_rejects_negative_counts_and_bad_specs() {
    let mut obj = object("apps/v1", "Deployment", json!({"replicas": 1}));
    let err = revise_replicas(&mut obj, -1).unwrap_err();
    assert_eq!(
        err.to_string(),
        "apps/v1 Deployment ns/w: spec.replicas: cannot set -1: replica counts must not be negative"
    );
    let mut obj = object("batch/v1", "Job", json!("x"));
    let err = revise_replicas(&mut obj, 1).unwrap_err();
    assert_eq!(
        err.to_string(),
        "batch/v1 Job ns/w: spec: expected an object, got a string; fix the field's type in the template"
    );
}

// ---------------------------------------------------------------------------------------------
// Job completions.
// ---------------------------------------------------------------------------------------------

fn clusters(list: &[(&str, i32)]) -> Vec<TargetCluster> {
    list.iter()
        .map(|(name, replicas)| TargetCluster {
            name: (*name).to_owned(),
            replicas: *replicas,
        })
        .collect()
}

fn shares(list: &[(&str, i32)]) -> BTreeMap<String, i32> {
    list.iter().map(|(n, s)| ((*n).to_owned(), *s)).collect()
}

#[test]
fn job_completions_split_in_proportion_to_replicas() {
    let job = object("batch/v1", "Job", json!({"parallelism": 5, "completions": 10}));
    let got = divide_job_completions(&job, &clusters(&[("m1", 1), ("m2", 1), ("m3", 3)])).unwrap();
    assert_eq!(got, Some(shares(&[("m1", 2), ("m2", 2), ("m3", 6)])));
    let got = divide_job_completions(&job, &clusters(&[("m1", 2), ("m2", 3)])).unwrap();
    assert_eq!(got, Some(shares(&[("m1", 4), ("m2", 6)])));
    // A cluster without replicas gets no completions.
    let got = divide_job_completions(&job, &clusters(&[("m1", 5), ("m2", 0)])).unwrap();
    assert_eq!(got, Some(shares(&[("m1", 10), ("m2", 0)])));
}

#[test]
fn job_completion_ties_follow_the_template_uid() {
    // Three completions over two equal clusters: the tie for the third goes by name, in the
    // order the uid's FNV-1a parity picks ("a" hashes even: ascending; "b" odd: descending).
    let mut job = object("batch/v1", "Job", json!({"parallelism": 2, "completions": 3}));
    let two = clusters(&[("m1", 1), ("m2", 1)]);
    assert_eq!(
        divide_job_completions(&job, &two).unwrap(),
        Some(shares(&[("m1", 2), ("m2", 1)]))
    );
    job["metadata"]["uid"] = json!("a");
    assert_eq!(
        divide_job_completions(&job, &two).unwrap(),
        Some(shares(&[("m1", 2), ("m2", 1)]))
    );
    job["metadata"]["uid"] = json!("b");
    assert_eq!(
        divide_job_completions(&job, &two).unwrap(),
        Some(shares(&[("m1", 1), ("m2", 2)]))
    );
}

#[test]
fn job_completions_are_not_split_without_completions_or_weights() {
    let work_queue = object("batch/v1", "Job", json!({"parallelism": 5}));
    assert_eq!(
        divide_job_completions(&work_queue, &clusters(&[("m1", 1)])).unwrap(),
        None
    );
    let job = object("batch/v1", "Job", json!({"completions": 5}));
    assert_eq!(
        divide_job_completions(&job, &clusters(&[("m1", 0), ("m2", 0)])).unwrap(),
        None
    );
    assert_eq!(divide_job_completions(&job, &[]).unwrap(), None);
    let deploy = object("apps/v1", "Deployment", json!({"completions": 5}));
    assert_eq!(
        divide_job_completions(&deploy, &clusters(&[("m1", 1)])).unwrap(),
        None
    );
    let bad = object("batch/v1", "Job", json!({"completions": "5"}));
    assert_eq!(
        divide_job_completions(&bad, &clusters(&[("m1", 1)]))
            .unwrap_err()
            .path(),
        "spec.completions"
    );
}

#[test]
fn revise_job_completions_only_where_the_template_sets_them() {
    let mut job = object("batch/v1", "Job", json!({"parallelism": 5, "completions": 10}));
    revise_job_completions(&mut job, 4).unwrap();
    assert_eq!(job["spec"], json!({"parallelism": 5, "completions": 4}));
    let mut work_queue = object("batch/v1", "Job", json!({"parallelism": 5}));
    revise_job_completions(&mut work_queue, 4).unwrap();
    assert_eq!(work_queue["spec"], json!({"parallelism": 5}));
    let mut deploy = object("apps/v1", "Deployment", json!({"completions": 10}));
    revise_job_completions(&mut deploy, 4).unwrap();
    assert_eq!(deploy["spec"], json!({"completions": 10}));
}

#[test]
fn divided_job_manifests_add_up_to_the_template() {
    let job = object("batch/v1", "Job", json!({"parallelism": 7, "completions": 20}));
    let targets = clusters(&[("m1", 2), ("m2", 1), ("m3", 4)]);
    let split = divide_job_completions(&job, &targets).unwrap().unwrap();
    let mut total_parallelism = 0;
    let mut total_completions = 0;
    for target in &targets {
        let mut manifest = job.clone();
        revise_replicas(&mut manifest, target.replicas).unwrap();
        revise_job_completions(&mut manifest, split[&target.name]).unwrap();
        total_parallelism += manifest["spec"]["parallelism"].as_i64().unwrap();
        total_completions += manifest["spec"]["completions"].as_i64().unwrap();
    }
    assert_eq!(total_parallelism, 7);
    assert_eq!(total_completions, 20);
}
