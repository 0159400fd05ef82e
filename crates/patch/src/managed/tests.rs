#![allow(clippy::unwrap_used)]

use serde_json::{Value, json};

use super::*;
use crate::builtin::shape_for;

const T0: &str = "2024-05-01T10:00:00Z";
const T1: &str = "2024-05-01T10:05:00Z";
const T2: &str = "2024-05-01T10:10:00Z";

fn deployment_shape() -> Shape {
    shape_for("apps/v1", "Deployment")
}

fn apply_as(
    live: Option<&Value>,
    config: &Value,
    manager: &str,
    force: bool,
    now: &str,
) -> Result<Value, ApplyError> {
    let opts = ApplyOptions {
        manager,
        force,
        api_version: "apps/v1",
        subresource: None,
        now,
    };
    apply(live, config, &deployment_shape(), &opts)
}

fn update_as(old: Option<&Value>, new: &Value, manager: &str, subresource: Option<&str>, now: &str) -> Value {
    let opts = UpdateOptions {
        manager,
        api_version: "apps/v1",
        subresource,
        now,
    };
    track_update(old, new, &deployment_shape(), &opts).unwrap()
}

/// The fieldsV1 of `manager`'s entry with `operation` (and no subresource).
fn fields_of(obj: &Value, manager: &str, operation: &str) -> Value {
    entry_of(obj, manager, operation)["fieldsV1"].clone()
}

fn entry_of<'a>(obj: &'a Value, manager: &str, operation: &str) -> &'a Value {
    obj["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["manager"] == manager && e["operation"] == operation)
        .unwrap_or_else(|| {
            panic!(
                "no {operation} entry for {manager} in {}",
                obj["metadata"]["managedFields"]
            )
        })
}

fn managers(obj: &Value) -> Vec<(String, String)> {
    obj["metadata"]["managedFields"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|e| {
                    (
                        e["manager"].as_str().unwrap().to_string(),
                        e["operation"].as_str().unwrap().to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn config(replicas: Option<i64>, image: &str) -> Value {
    let mut c = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "nginx", "namespace": "default", "labels": {"app": "nginx"}},
        "spec": {
            "selector": {"matchLabels": {"app": "nginx"}},
            "template": {
                "metadata": {"labels": {"app": "nginx"}},
                "spec": {"containers": [{"name": "nginx", "image": image, "ports": [{"containerPort": 80}]}]}
            }
        }
    });
    if let Some(r) = replicas {
        c["spec"]["replicas"] = json!(r);
    }
    c
}

/// What kube-apiserver records for `kubectl apply --server-side` of `config(Some(_), _)`.
fn config_fields() -> Value {
    json!({
        "f:metadata": {"f:labels": {"f:app": {}}},
        "f:spec": {
            "f:replicas": {},
            "f:selector": {},
            "f:template": {
                "f:metadata": {"f:labels": {"f:app": {}}},
                "f:spec": {"f:containers": {"k:{\"name\":\"nginx\"}": {
                    ".": {},
                    "f:image": {},
                    "f:name": {},
                    "f:ports": {"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}}}
                }}}
            }
        }
    })
}

/// The live object after the server stored it (uid, resourceVersion, defaults, status).
fn stored(mut obj: Value) -> Value {
    let meta = obj["metadata"].as_object_mut().unwrap();
    meta.insert("uid".into(), json!("0c7d6d1e"));
    meta.insert("resourceVersion".into(), json!("100"));
    meta.insert("generation".into(), json!(1));
    meta.insert("creationTimestamp".into(), json!(T0));
    obj["spec"]["progressDeadlineSeconds"] = json!(600);
    obj["status"] = json!({"observedGeneration": 1, "replicas": 3});
    obj
}

#[test]
fn create_via_apply() {
    let created = apply_as(None, &config(Some(3), "nginx:1.25"), "kubectl", false, T0).unwrap();
    let mut want = config(Some(3), "nginx:1.25");
    want["metadata"]["managedFields"] = json!([{
        "manager": "kubectl",
        "operation": "Apply",
        "apiVersion": "apps/v1",
        "time": T0,
        "fieldsType": "FieldsV1",
        "fieldsV1": config_fields()
    }]);
    assert_eq!(created, want);
}

#[test]
fn reapply_without_a_field_removes_it() {
    let mut first = config(Some(3), "nginx:1.25");
    first["metadata"]["labels"]["tier"] = json!("web");
    let live = stored(apply_as(None, &first, "kubectl", false, T0).unwrap());
    let second = config(None, "nginx:1.25");
    let got = apply_as(Some(&live), &second, "kubectl", false, T1).unwrap();
    assert_eq!(got["metadata"]["labels"], json!({"app": "nginx"}));
    assert!(
        got["spec"].get("replicas").is_none(),
        "replicas no longer applied and owned by nobody else"
    );
    // Fields nobody applied (server defaults, status, server metadata) stay.
    assert_eq!(got["spec"]["progressDeadlineSeconds"], json!(600));
    assert_eq!(got["status"], live["status"]);
    assert_eq!(got["metadata"]["uid"], json!("0c7d6d1e"));
    let mut want_fields = config_fields();
    want_fields["f:spec"]
        .as_object_mut()
        .unwrap()
        .remove("f:replicas");
    assert_eq!(fields_of(&got, "kubectl", "Apply"), want_fields);
    assert_eq!(entry_of(&got, "kubectl", "Apply")["time"], json!(T1));
}

#[test]
fn second_applier_conflicts_on_a_different_value() {
    let live = stored(apply_as(None, &config(Some(3), "nginx:1.25"), "kubectl", false, T0).unwrap());
    let hpa = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "nginx", "namespace": "default"}, "spec": {"replicas": 5}});
    let err = apply_as(Some(&live), &hpa, "autoscaler", false, T1).unwrap_err();
    assert_eq!(
        err,
        ApplyError::Conflicts(vec![Conflict {
            manager: "kubectl".into(),
            field: ".spec.replicas".into(),
            operation: "Apply".into(),
            api_version: String::new(),
            subresource: String::new(),
        }])
    );
    assert_eq!(
        err.message(),
        "Apply failed with 1 conflict: conflict with \"kubectl\": .spec.replicas"
    );
    assert_eq!(err.http_status(), 409);
}

#[test]
fn force_takes_ownership() {
    let live = stored(apply_as(None, &config(Some(3), "nginx:1.25"), "kubectl", false, T0).unwrap());
    let hpa = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "nginx", "namespace": "default"}, "spec": {"replicas": 5}});
    let got = apply_as(Some(&live), &hpa, "autoscaler", true, T1).unwrap();
    assert_eq!(got["spec"]["replicas"], json!(5));
    assert_eq!(
        fields_of(&got, "autoscaler", "Apply"),
        json!({"f:spec": {"f:replicas": {}}})
    );
    let mut kubectl_fields = config_fields();
    kubectl_fields["f:spec"]
        .as_object_mut()
        .unwrap()
        .remove("f:replicas");
    assert_eq!(fields_of(&got, "kubectl", "Apply"), kubectl_fields);
    // The first applier re-applying its old value now conflicts with the new owner.
    let err = apply_as(Some(&got), &config(Some(3), "nginx:1.25"), "kubectl", false, T2).unwrap_err();
    assert_eq!(
        err.message(),
        "Apply failed with 1 conflict: conflict with \"autoscaler\": .spec.replicas"
    );
}

#[test]
fn equal_values_are_shared_without_conflict() {
    let live = stored(apply_as(None, &config(Some(3), "nginx:1.25"), "kubectl", false, T0).unwrap());
    let other = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "nginx", "namespace": "default"}, "spec": {"replicas": 3}});
    let got = apply_as(Some(&live), &other, "other", false, T1).unwrap();
    assert_eq!(
        fields_of(&got, "other", "Apply"),
        json!({"f:spec": {"f:replicas": {}}})
    );
    assert_eq!(fields_of(&got, "kubectl", "Apply"), config_fields());
    // The object did not change, so the new entry gets no time.
    assert!(entry_of(&got, "other", "Apply").get("time").is_none());
    // One owner dropping a shared field leaves it in place.
    let got = apply_as(Some(&got), &config(None, "nginx:1.25"), "kubectl", false, T2).unwrap();
    assert_eq!(got["spec"]["replicas"], json!(3));
}

#[test]
fn two_appliers_own_different_containers() {
    let live = stored(apply_as(None, &config(Some(1), "nginx:1.25"), "kubectl", false, T0).unwrap());
    let sidecar = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "nginx", "namespace": "default"},
        "spec": {"template": {"spec": {"containers": [{"name": "proxy", "image": "envoy"}]}}}
    });
    let got = apply_as(Some(&live), &sidecar, "mesh", false, T1).unwrap();
    let names: Vec<&str> = got["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["nginx", "proxy"]);
    assert_eq!(
        fields_of(&got, "mesh", "Apply"),
        json!({"f:spec": {"f:template": {"f:spec": {"f:containers": {"k:{\"name\":\"proxy\"}": {".": {}, "f:image": {}, "f:name": {}}}}}}})
    );
    // The sidecar manager removing its container removes only that one.
    let mut no_sidecar = sidecar.clone();
    no_sidecar["spec"]["template"]["spec"]["containers"] = json!([]);
    let got = apply_as(Some(&got), &no_sidecar, "mesh", false, T2).unwrap();
    let containers = got["spec"]["template"]["spec"]["containers"].as_array().unwrap();
    assert_eq!(containers.len(), 1);
    assert_eq!(containers[0]["name"], json!("nginx"));
    // Changing the other manager's container conflicts, naming the item's field.
    let mut takeover = sidecar;
    takeover["spec"]["template"]["spec"]["containers"] = json!([{"name": "nginx", "image": "nginx:2"}]);
    let err = apply_as(Some(&got), &takeover, "mesh", false, T2).unwrap_err();
    assert_eq!(
        err.message(),
        "Apply failed with 1 conflict: conflict with \"kubectl\": .spec.template.spec.containers[name=\"nginx\"].image"
    );
}

#[test]
fn update_after_apply_moves_ownership() {
    let live = stored(apply_as(None, &config(Some(3), "nginx:1.25"), "kubectl", false, T0).unwrap());
    // `kubectl edit` changes the image and the replicas.
    let mut edited = live.clone();
    edited["spec"]["replicas"] = json!(4);
    edited["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:1.26");
    let got = update_as(Some(&live), &edited, "kubectl-edit", None, T1);
    assert_eq!(
        fields_of(&got, "kubectl-edit", "Update"),
        json!({"f:spec": {"f:replicas": {}, "f:template": {"f:spec": {"f:containers": {"k:{\"name\":\"nginx\"}": {"f:image": {}}}}}}})
    );
    assert_eq!(entry_of(&got, "kubectl-edit", "Update")["time"], json!(T1));
    assert_eq!(
        entry_of(&got, "kubectl-edit", "Update")["apiVersion"],
        json!("apps/v1")
    );
    let kubectl = fields_of(&got, "kubectl", "Apply");
    assert!(kubectl["f:spec"].get("f:replicas").is_none());
    assert!(
        kubectl["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"nginx\"}"]
            .get("f:image")
            .is_none()
    );
    // Re-applying the old file now conflicts with the editor, named with its API version.
    let err = apply_as(Some(&got), &config(Some(3), "nginx:1.25"), "kubectl", false, T2).unwrap_err();
    assert_eq!(
        err.message(),
        "Apply failed with 2 conflicts: conflicts with \"kubectl-edit\" using apps/v1:\n- .spec.replicas\n- .spec.template.spec.containers[name=\"nginx\"].image"
    );
    let ApplyError::Conflicts(conflicts) = &err else {
        panic!("{err}")
    };
    assert_eq!(
        conflicts[0].cause_message(),
        "conflict with \"kubectl-edit\" using apps/v1"
    );
}

#[test]
fn conflicts_with_several_managers_are_grouped_by_manager() {
    let live = stored(apply_as(None, &config(Some(3), "nginx:1.25"), "kubectl", false, T0).unwrap());
    let mut edited = live.clone();
    edited["spec"]["replicas"] = json!(4);
    let got = update_as(Some(&live), &edited, "a-scaler", None, T1);
    let takeover = config(Some(9), "busybox");
    let err = apply_as(Some(&got), &takeover, "z-tool", false, T2).unwrap_err();
    assert_eq!(
        err.message(),
        "Apply failed with 2 conflicts: conflicts with \"a-scaler\" using apps/v1:\n- .spec.replicas\nconflicts with \"kubectl\":\n- .spec.template.spec.containers[name=\"nginx\"].image"
    );
}

#[test]
fn create_tracks_fields_against_the_zero_object() {
    // `kubectl create` / client-side `kubectl apply` of a new Deployment, after defaulting.
    let new = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {
            "name": "web", "namespace": "default", "uid": "u1", "resourceVersion": "1", "generation": 1,
            "creationTimestamp": T0, "labels": {"app": "web"},
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}\n"}
        },
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": [{"name": "web", "image": "nginx", "imagePullPolicy": "Always", "resources": {},
                                    "ports": [{"containerPort": 80, "protocol": "TCP"}]}],
                    "restartPolicy": "Always"
                }
            }
        },
        "status": {}
    });
    let got = update_as(None, &new, "kubectl-client-side-apply", None, T0);
    assert_eq!(
        got["metadata"]["managedFields"],
        json!([{
            "manager": "kubectl-client-side-apply",
            "operation": "Update",
            "apiVersion": "apps/v1",
            "time": T0,
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:metadata": {
                    "f:annotations": {".": {}, "f:kubectl.kubernetes.io/last-applied-configuration": {}},
                    "f:labels": {".": {}, "f:app": {}}
                },
                "f:spec": {
                    "f:replicas": {},
                    "f:selector": {},
                    "f:strategy": {"f:rollingUpdate": {".": {}, "f:maxSurge": {}, "f:maxUnavailable": {}}, "f:type": {}},
                    "f:template": {
                        "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                        "f:spec": {
                            "f:containers": {"k:{\"name\":\"web\"}": {
                                ".": {}, "f:image": {}, "f:imagePullPolicy": {}, "f:name": {},
                                "f:ports": {".": {}, "k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}, "f:protocol": {}}},
                                "f:resources": {}
                            }},
                            "f:restartPolicy": {}
                        }
                    }
                }
            }
        }])
    );
    let mut without = got.clone();
    without["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("managedFields");
    assert_eq!(without, new, "track_update changes nothing but managedFields");
}

#[test]
fn updates_of_untracked_objects_stay_untracked_and_reset_clears() {
    let live = stored(config(Some(1), "nginx"));
    let mut new = live.clone();
    new["spec"]["replicas"] = json!(2);
    let got = update_as(Some(&live), &new, "kubectl-edit", None, T1);
    assert!(got["metadata"].get("managedFields").is_none());

    let tracked = stored(apply_as(None, &config(Some(1), "nginx"), "kubectl", false, T0).unwrap());
    let mut reset = tracked.clone();
    reset["metadata"]["managedFields"] = json!([]);
    let got = update_as(Some(&tracked), &reset, "kubectl-edit", None, T1);
    assert!(
        got["metadata"].get("managedFields").is_none(),
        "an empty list clears managedFields"
    );
    let mut reset = tracked.clone();
    reset["metadata"]["managedFields"] = json!([{}]);
    assert!(
        update_as(Some(&tracked), &reset, "kubectl-edit", None, T1)["metadata"]
            .get("managedFields")
            .is_none()
    );

    // A client that drops managedFields (e.g. a PUT of an older copy) keeps the live ones.
    let mut dropped = tracked.clone();
    dropped["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("managedFields");
    let got = update_as(Some(&tracked), &dropped, "kubectl-edit", None, T1);
    assert_eq!(
        got["metadata"]["managedFields"],
        tracked["metadata"]["managedFields"]
    );
}

#[test]
fn removing_a_field_by_update_removes_it_from_every_set() {
    let live = stored(apply_as(None, &config(Some(3), "nginx"), "kubectl", false, T0).unwrap());
    let mut new = live.clone();
    new["metadata"].as_object_mut().unwrap().remove("labels");
    let got = update_as(Some(&live), &new, "janitor", None, T1);
    assert!(fields_of(&got, "kubectl", "Apply")["f:metadata"].is_null());
    assert_eq!(
        managers(&got),
        vec![("kubectl".to_string(), "Apply".to_string())],
        "janitor changed nothing it can own"
    );
    // The applier's next apply sets its labels again.
    let again = apply_as(Some(&got), &config(Some(3), "nginx"), "kubectl", false, T2).unwrap();
    assert_eq!(again["metadata"]["labels"], json!({"app": "nginx"}));
}

#[test]
fn applying_the_live_configuration_again_is_a_no_op() {
    for (manager, cfg) in [
        ("kubectl", config(Some(3), "nginx:1.25")),
        ("ci", config(None, "busybox")),
    ] {
        let live = stored(apply_as(None, &cfg, manager, false, T0).unwrap());
        let again = apply_as(Some(&live), &cfg, manager, false, T1).unwrap();
        assert_eq!(again, live, "{manager}");
    }
}

#[test]
fn first_apply_to_an_untracked_object_attributes_existing_fields() {
    let live = stored(config(Some(1), "nginx"));
    let err = apply_as(Some(&live), &config(Some(2), "nginx"), "kubectl", false, T1).unwrap_err();
    assert_eq!(
        err.message(),
        "Apply failed with 1 conflict: conflict with \"before-first-apply\" using apps/v1: .spec.replicas"
    );
    let got = apply_as(Some(&live), &config(Some(2), "nginx"), "kubectl", true, T1).unwrap();
    assert_eq!(
        managers(&got),
        vec![
            ("kubectl".into(), "Apply".into()),
            ("before-first-apply".into(), "Update".into())
        ]
    );
    assert!(
        fields_of(&got, "before-first-apply", "Update")["f:spec"]
            .get("f:replicas")
            .is_none()
    );
    assert_eq!(
        fields_of(&got, "before-first-apply", "Update")["f:spec"]["f:progressDeadlineSeconds"],
        json!({})
    );
}

#[test]
fn kubectl_server_side_apply_takes_over_from_client_side_apply() {
    let last_applied = r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"annotations":{},"name":"web","namespace":"default"},"spec":{"replicas":2}}"#;
    let created = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {
            "name": "web", "namespace": "default", "uid": "u1",
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": format!("{last_applied}\n")}
        },
        "spec": {"replicas": 2}
    });
    let live = update_as(None, &created, "kubectl-client-side-apply", None, T0);
    let applied = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"}, "spec": {"replicas": 3}});
    // Another manager conflicts as usual...
    let err = apply_as(Some(&live), &applied, "helm", false, T1).unwrap_err();
    assert_eq!(
        err.message(),
        "Apply failed with 1 conflict: conflict with \"kubectl-client-side-apply\" using apps/v1: .spec.replicas"
    );
    // ...but `kubectl apply --server-side` may take what the last-applied annotation shows the
    // user set, and keeps the annotation in step.
    let got = apply_as(Some(&live), &applied, "kubectl", false, T1).unwrap();
    assert_eq!(got["spec"]["replicas"], json!(3));
    assert_eq!(
        fields_of(&got, "kubectl", "Apply"),
        json!({"f:spec": {"f:replicas": {}}})
    );
    assert_eq!(
        got["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"],
        json!(
            "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"name\":\"web\",\"namespace\":\"default\"},\"spec\":{\"replicas\":3}}\n"
        )
    );
}

#[test]
fn status_updates_are_tracked_on_the_status_subresource_only() {
    let live = stored(apply_as(None, &config(Some(3), "nginx"), "kubectl", false, T0).unwrap());
    let mut new = live.clone();
    new["status"] = json!({"observedGeneration": 1, "replicas": 3, "readyReplicas": 3, "conditions": [{"type": "Available", "status": "True"}]});
    let got = update_as(Some(&live), &new, "kube-controller-manager", Some("status"), T1);
    let entry = entry_of(&got, "kube-controller-manager", "Update");
    assert_eq!(entry["subresource"], json!("status"));
    assert_eq!(
        entry["fieldsV1"],
        json!({"f:status": {"f:conditions": {".": {}, "k:{\"type\":\"Available\"}": {".": {}, "f:status": {}, "f:type": {}}}, "f:readyReplicas": {}}})
    );
    // The same change through the main resource is not tracked (status is reset there).
    let got = update_as(Some(&live), &new, "kube-controller-manager", None, T1);
    assert_eq!(managers(&got), vec![("kubectl".to_string(), "Apply".to_string())]);
}

#[test]
fn scale_subresource_owns_replicas_without_a_time() {
    let live = stored(apply_as(None, &config(Some(3), "nginx"), "kubectl", false, T0).unwrap());
    let mut scaled = live.clone();
    scaled["spec"]["replicas"] = json!(5);
    scaled["metadata"]["labels"]["ignored"] = json!("x");
    let got = update_as(Some(&live), &scaled, "kubectl", Some("scale"), T1);
    let entry = entry_of(&got, "kubectl", "Update");
    assert_eq!(
        entry,
        &json!({"manager": "kubectl", "operation": "Update", "apiVersion": "apps/v1", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {"f:replicas": {}}}, "subresource": "scale"})
    );
    assert!(
        fields_of(&got, "kubectl", "Apply")["f:spec"]
            .get("f:replicas")
            .is_none()
    );
}

#[test]
fn at_most_ten_update_entries() {
    let mut obj = stored(apply_as(None, &config(Some(1), "nginx"), "kubectl", false, T0).unwrap());
    for i in 0..12 {
        let mut new = obj.clone();
        new["metadata"]["labels"][format!("l{i}")] = json!("x");
        let now = format!("2024-05-01T11:{i:02}:00Z");
        obj = update_as(Some(&obj), &new, &format!("writer-{i:02}"), None, &now);
    }
    let names: Vec<String> = managers(&obj).into_iter().map(|(m, _)| m).collect();
    assert_eq!(names.len(), 11);
    assert_eq!(names[0], "kubectl");
    assert_eq!(names[1], "ancient-changes");
    assert_eq!(names[2], "writer-03");
    let ancient = fields_of(&obj, "ancient-changes", "Update");
    assert_eq!(
        ancient,
        json!({"f:metadata": {"f:labels": {"f:l0": {}, "f:l1": {}, "f:l2": {}}}})
    );
    assert_eq!(
        entry_of(&obj, "ancient-changes", "Update")["time"],
        json!("2024-05-01T11:02:00Z")
    );
}

#[test]
fn managed_fields_are_ordered_like_kube_apiserver() {
    let live = stored(apply_as(None, &config(Some(1), "nginx"), "kubectl", false, T1).unwrap());
    let mut new = live.clone();
    new["metadata"]["labels"]["b"] = json!("1");
    let obj = update_as(Some(&live), &new, "zeta", None, T0);
    let mut new = obj.clone();
    new["metadata"]["labels"]["c"] = json!("1");
    let obj = update_as(Some(&obj), &new, "alpha", None, T2);
    // Apply entries first, then updates by time, then by name.
    assert_eq!(
        managers(&obj),
        vec![
            ("kubectl".into(), "Apply".into()),
            ("zeta".into(), "Update".into()),
            ("alpha".into(), "Update".into())
        ]
    );
}

#[test]
fn set_items_are_owned_by_value() {
    let mut cfg = config(Some(1), "nginx");
    cfg["metadata"]["finalizers"] = json!(["example.com/a"]);
    let live = stored(apply_as(None, &cfg, "kubectl", false, T0).unwrap());
    assert_eq!(
        fields_of(&live, "kubectl", "Apply")["f:metadata"]["f:finalizers"],
        json!({"v:\"example.com/a\"": {}})
    );
    let mut new = live.clone();
    new["metadata"]["finalizers"] = json!(["example.com/a", "example.com/b"]);
    let got = update_as(Some(&live), &new, "controller", None, T1);
    assert_eq!(
        fields_of(&got, "controller", "Update"),
        json!({"f:metadata": {"f:finalizers": {"v:\"example.com/b\"": {}}}})
    );
    // The applier dropping its finalizer removes only its own value.
    let got = apply_as(Some(&got), &config(Some(1), "nginx"), "kubectl", false, T2).unwrap();
    assert_eq!(got["metadata"]["finalizers"], json!(["example.com/b"]));
}

#[test]
fn invalid_configurations() {
    let live = stored(apply_as(None, &config(Some(1), "nginx"), "kubectl", false, T0).unwrap());
    let mut no_kind = config(Some(1), "nginx");
    no_kind.as_object_mut().unwrap().remove("kind");
    let err = apply_as(Some(&live), &no_kind, "kubectl", false, T1).unwrap_err();
    assert_eq!(
        err.message(),
        "invalid object type: apps/v1, Kind=: the applied configuration must set apiVersion and kind"
    );
    assert_eq!(err.http_status(), 400);

    let mut old_version = config(Some(1), "nginx");
    old_version["apiVersion"] = json!("apps/v1beta2");
    let err = apply_as(Some(&live), &old_version, "kubectl", false, T1).unwrap_err();
    assert_eq!(
        err.message(),
        "Incorrect version specified in apply patch. Specified patch version: apps/v1beta2, expected: apps/v1"
    );

    let mut with_fields = config(Some(1), "nginx");
    with_fields["metadata"]["managedFields"] = json!([]);
    assert_eq!(
        apply_as(Some(&live), &with_fields, "kubectl", false, T1)
            .unwrap_err()
            .message(),
        "metadata.managedFields must be nil"
    );

    let mut dup = config(Some(1), "nginx");
    dup["spec"]["template"]["spec"]["containers"] = json!([{"name": "a"}, {"name": "a"}]);
    let err = apply_as(Some(&live), &dup, "kubectl", false, T1).unwrap_err();
    assert_eq!(
        err.message(),
        "failed to create typed patch object (default/nginx; apps/v1, Kind=Deployment): .spec.template.spec.containers: duplicate entries for key [name=\"a\"]"
    );
    assert_eq!(err.http_status(), 500);

    let mut keyless = config(Some(1), "nginx");
    keyless["spec"]["template"]["spec"]["containers"] = json!([{"image": "a"}]);
    let err = apply_as(Some(&live), &keyless, "kubectl", false, T1).unwrap_err();
    assert!(err.message().ends_with(".spec.template.spec.containers: element 0: associative list with keys has an element that omits all key fields [\"name\"] (and doesn't have default values for any key fields)"), "{err}");
}

#[test]
fn untyped_objects_own_map_entries() {
    let shape = shape_for("example.com/v1", "Widget");
    let opts = ApplyOptions {
        manager: "op",
        force: false,
        api_version: "example.com/v1",
        subresource: None,
        now: T0,
    };
    let widget = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 1, "tags": ["a"], "nested": {"x": true}}});
    let got = apply(None, &widget, &shape, &opts).unwrap();
    assert_eq!(
        fields_of(&got, "op", "Apply"),
        json!({"f:spec": {".": {}, "f:nested": {".": {}, "f:x": {}}, "f:size": {}, "f:tags": {}}})
    );
    // A custom resource without a status subresource owns its status on the main resource.
    let status = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "status": {"ready": true}});
    let got = apply_with_filter(
        Some(&got),
        &status,
        &shape,
        &ApplyOptions {
            manager: "ctl",
            ..opts
        },
        &Filter::All,
    )
    .unwrap();
    assert_eq!(
        fields_of(&got, "ctl", "Apply"),
        json!({"f:status": {".": {}, "f:ready": {}}})
    );
}

#[test]
fn fields_v1_from_a_real_object_survive_an_unrelated_update() {
    // managedFields in the form kube-apiserver serves them for a Deployment created with
    // `kubectl create` and then managed by kube-controller-manager.
    let managed_fields = json!([
        {
            "manager": "kubectl-create", "operation": "Update", "apiVersion": "apps/v1", "time": "2024-04-30T08:00:00Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                "f:spec": {
                    "f:progressDeadlineSeconds": {}, "f:replicas": {}, "f:revisionHistoryLimit": {}, "f:selector": {},
                    "f:strategy": {"f:rollingUpdate": {".": {}, "f:maxSurge": {}, "f:maxUnavailable": {}}, "f:type": {}},
                    "f:template": {
                        "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                        "f:spec": {
                            "f:containers": {"k:{\"name\":\"nginx\"}": {
                                ".": {}, "f:image": {}, "f:imagePullPolicy": {}, "f:name": {}, "f:resources": {},
                                "f:terminationMessagePath": {}, "f:terminationMessagePolicy": {}
                            }},
                            "f:dnsPolicy": {}, "f:restartPolicy": {}, "f:schedulerName": {}, "f:securityContext": {},
                            "f:terminationGracePeriodSeconds": {}
                        }
                    }
                }
            }
        },
        {
            "manager": "kube-controller-manager", "operation": "Update", "apiVersion": "apps/v1", "time": "2024-04-30T08:00:05Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:metadata": {"f:annotations": {".": {}, "f:deployment.kubernetes.io/revision": {}}},
                "f:status": {
                    "f:availableReplicas": {},
                    "f:conditions": {
                        ".": {},
                        "k:{\"type\":\"Available\"}": {".": {}, "f:lastTransitionTime": {}, "f:lastUpdateTime": {}, "f:message": {}, "f:reason": {}, "f:status": {}, "f:type": {}}
                    },
                    "f:observedGeneration": {}, "f:readyReplicas": {}, "f:replicas": {}, "f:updatedReplicas": {}
                }
            },
            "subresource": "status"
        }
    ]);
    let mut live = stored(config(Some(1), "nginx"));
    live["metadata"]["annotations"] = json!({"deployment.kubernetes.io/revision": "1"});
    live["metadata"]["managedFields"] = managed_fields.clone();
    let mut new = live.clone();
    new["metadata"]["annotations"]["note"] = json!("x");
    let got = update_as(Some(&live), &new, "kubectl-annotate", None, T0);
    let entries = got["metadata"]["managedFields"].as_array().unwrap();
    assert_eq!(entries.len(), 3);
    assert_eq!(entries[0], managed_fields[0]);
    assert_eq!(entries[1], managed_fields[1]);
    assert_eq!(
        entries[2]["fieldsV1"],
        json!({"f:metadata": {"f:annotations": {"f:note": {}}}})
    );
}

#[test]
fn filters_by_subresource() {
    let set = FieldSet::from_fields_v1(&json!({"f:spec": {"f:replicas": {}, "f:x": {}}, "f:status": {"f:y": {}}, "f:metadata": {"f:labels": {"f:a": {}}}})).unwrap();
    assert_eq!(
        Filter::for_subresource(None).apply(&set).paths(),
        vec![".metadata.labels.a", ".spec.replicas", ".spec.x"]
    );
    assert_eq!(
        Filter::for_subresource(Some("status")).apply(&set).paths(),
        vec![".metadata.labels.a", ".status.y"]
    );
    assert_eq!(
        Filter::for_subresource(Some("scale")).apply(&set).paths(),
        vec![".spec.replicas"]
    );
    assert_eq!(
        Filter::for_subresource(Some("ephemeralcontainers")).apply(&set),
        set
    );
}

#[test]
fn dropping_a_nested_struct_removes_what_nobody_else_owns() {
    let mut first = config(Some(1), "nginx");
    first["spec"]["strategy"] = json!({"rollingUpdate": {"maxSurge": 2}});
    let mut live = stored(apply_as(None, &first, "kubectl", false, T0).unwrap());
    // Server defaults fill in fields nobody applied.
    live["spec"]["strategy"]["type"] = json!("RollingUpdate");
    live["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] = json!("25%");
    let got = apply_as(Some(&live), &config(Some(1), "nginx"), "kubectl", false, T1).unwrap();
    // The whole struct goes (the server defaults it again); unowned fields elsewhere stay.
    assert!(got["spec"].get("strategy").is_none(), "{}", got["spec"]);
    assert_eq!(got["spec"]["progressDeadlineSeconds"], json!(600));
    assert_eq!(fields_of(&got, "kubectl", "Apply"), config_fields());
    // When another manager owns part of it, only what the applier applied goes; unowned
    // fields it never applied (the defaulted type) stay.
    let mut tuned = live.clone();
    tuned["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] = json!(1);
    let live = update_as(Some(&live), &tuned, "tuner", None, T1);
    let got = apply_as(Some(&live), &config(Some(1), "nginx"), "kubectl", false, T2).unwrap();
    assert_eq!(
        got["spec"]["strategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}})
    );
}

#[test]
fn client_side_apply_takeover_still_conflicts_on_fields_the_user_never_set() {
    let last_applied = r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"default"},"spec":{"replicas":2}}"#;
    let created = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "uid": "u1",
                     "annotations": {"kubectl.kubernetes.io/last-applied-configuration": last_applied}},
        "spec": {"replicas": 2, "paused": false}
    });
    let live = update_as(None, &created, "kubectl-client-side-apply", None, T0);
    let applied = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"}, "spec": {"replicas": 3, "paused": true}});
    let err = apply_as(Some(&live), &applied, "kubectl", false, T1).unwrap_err();
    // replicas is allowed by the annotation; paused was never in it.
    assert_eq!(
        err.message(),
        "Apply failed with 1 conflict: conflict with \"kubectl-client-side-apply\" using apps/v1: .spec.paused"
    );
}

#[test]
fn managed_fields_sent_with_an_update_replace_the_live_ones() {
    let live = stored(apply_as(None, &config(Some(1), "nginx"), "kubectl", false, T0).unwrap());
    let mut new = live.clone();
    new["metadata"]["managedFields"] = json!([{
        "manager": "migrated", "operation": "Update", "apiVersion": "apps/v1", "time": T0,
        "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:replicas": {}}}
    }]);
    let got = update_as(Some(&live), &new, "kubectl-edit", None, T1);
    assert_eq!(got["metadata"]["managedFields"], new["metadata"]["managedFields"]);
    // ...but not on a subresource, which always starts from the live ones.
    let got = update_as(Some(&live), &new, "kubectl-edit", Some("status"), T1);
    assert_eq!(
        got["metadata"]["managedFields"],
        live["metadata"]["managedFields"]
    );
}

/// A small deterministic generator for property tests (xorshift).
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[(self.next() % items.len() as u64) as usize]
    }

    /// A Deployment configuration with random labels, replicas, containers, env and ports.
    fn deployment(&mut self) -> Value {
        let mut cfg = config(None, "nginx");
        if self.next().is_multiple_of(2) {
            cfg["spec"]["replicas"] = json!(self.next() % 5);
        }
        for _ in 0..self.next() % 3 {
            let k = self.pick(&["tier", "team", "env"]);
            cfg["metadata"]["labels"][k] = json!(self.pick(&["a", "b"]));
        }
        let mut containers = Vec::new();
        for name in ["nginx", "sidecar", "init"] {
            if name != "nginx" && self.next().is_multiple_of(2) {
                continue;
            }
            let mut c = json!({"name": name, "image": self.pick(&["img:1", "img:2"])});
            let mut env = Vec::new();
            for n in ["A", "B", "C"] {
                if self.next().is_multiple_of(2) {
                    env.push(json!({"name": n, "value": self.pick(&["1", "2"])}));
                }
            }
            if !env.is_empty() {
                c["env"] = Value::Array(env);
            }
            if self.next().is_multiple_of(2) {
                c["ports"] = json!([{"containerPort": 80 + self.next() % 3}]);
            }
            containers.push(c);
        }
        cfg["spec"]["template"]["spec"]["containers"] = Value::Array(containers);
        cfg
    }
}

#[test]
fn property_applying_your_own_configuration_is_idempotent() {
    let mut g = Gen(0x5eed_1234_abcd_0001);
    for _ in 0..200 {
        let cfg = g.deployment();
        let live = stored(apply_as(None, &cfg, "kubectl", false, T0).unwrap());
        assert_eq!(
            apply_as(Some(&live), &cfg, "kubectl", false, T1).unwrap(),
            live,
            "{cfg}"
        );
        // The applied set is exactly what the configuration sets.
        let set = FieldSet::from_fields_v1(&fields_of(&live, "kubectl", "Apply")).unwrap();
        let expected = typed::to_field_set(&cfg, &deployment_shape()).difference(&strip_set());
        assert_eq!(set, expected);
    }
}

#[test]
fn property_reapplying_a_new_configuration_converges() {
    let mut g = Gen(0xfeed_0042_0000_0007);
    for _ in 0..200 {
        let (first, second) = (g.deployment(), g.deployment());
        let live = stored(apply_as(None, &first, "kubectl", false, T0).unwrap());
        let after = apply_as(Some(&live), &second, "kubectl", false, T1).unwrap();
        // A sole applier ends with exactly its new configuration (plus what the server added).
        let mut expected = stored(apply_as(None, &second, "kubectl", false, T1).unwrap());
        expected["metadata"]["managedFields"][0]["time"] =
            after["metadata"]["managedFields"][0]["time"].clone();
        assert_eq!(
            without_managed_fields(&after)["spec"]["template"],
            without_managed_fields(&expected)["spec"]["template"],
            "{first} -> {second}"
        );
        assert_eq!(after["metadata"]["labels"], expected["metadata"]["labels"]);
        assert_eq!(after["spec"].get("replicas"), expected["spec"].get("replicas"));
        assert_eq!(
            fields_of(&after, "kubectl", "Apply"),
            fields_of(&expected, "kubectl", "Apply")
        );
    }
}

#[test]
fn property_update_tracking_owns_exactly_the_changes() {
    let mut g = Gen(0x0bad_cafe_0000_0003);
    for _ in 0..200 {
        let (a, b) = (g.deployment(), g.deployment());
        let live = stored(update_as(None, &stored(a), "creator", None, T0));
        let mut new = stored(b);
        new["metadata"]["managedFields"] = live["metadata"]["managedFields"].clone();
        let got = update_as(Some(&live), &new, "editor", None, T1);
        let cmp = typed::compare(
            &without_managed_fields(&live),
            &without_managed_fields(&new),
            &deployment_shape(),
        );
        let changed = Filter::for_subresource(None)
            .apply(&cmp.modified.union(&cmp.added))
            .difference(&strip_set());
        let owned = got["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["manager"] == "editor")
            .map(|e| FieldSet::from_fields_v1(&e["fieldsV1"]).unwrap())
            .unwrap_or_default();
        assert_eq!(owned, changed);
        // No other manager keeps a changed or removed field.
        for e in got["metadata"]["managedFields"].as_array().unwrap() {
            if e["manager"] != "editor" {
                let set = FieldSet::from_fields_v1(&e["fieldsV1"]).unwrap();
                assert!(set.intersection(&changed).is_empty());
                assert!(set.intersection(&cmp.removed).is_empty());
            }
        }
    }
}

#[test]
fn manager_names_from_requests() {
    assert_eq!(
        manager_or_user_agent(
            Some("kubectl-edit"),
            "kubectl/v1.30.0 (linux/amd64) kubernetes/7c48c2b"
        ),
        "kubectl-edit"
    );
    assert_eq!(
        manager_or_user_agent(None, "kubectl/v1.30.0 (linux/amd64) kubernetes/7c48c2b"),
        "kubectl"
    );
    assert_eq!(manager_or_user_agent(Some(""), "kube-rs/0.99"), "kube-rs");
    assert_eq!(manager_or_user_agent(None, &"x".repeat(300)).len(), 128);
    assert_eq!(manager_or_user_agent(None, "a\u{7}b"), "ab");
}

#[test]
fn kubectl_managed_fields_migration_by_json_patch_is_honoured() {
    // kubectl's client-side-apply upgrade rewrites managedFields with a JSON patch; the server
    // keeps what the client sent and tracks nothing else (nothing else changed).
    let created = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "uid": "u1"},
        "spec": {"replicas": 2}
    });
    let live = update_as(None, &created, "kubectl-client-side-apply", None, T0);
    let upgraded_entries = json!([{
        "manager": "kubectl", "operation": "Apply", "apiVersion": "apps/v1", "time": T0,
        "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:replicas": {}}}
    }]);
    let ops = json!([{"op": "replace", "path": "/metadata/managedFields", "value": upgraded_entries}]);
    let patched = crate::json_patch(&live, &ops).unwrap();
    let got = update_as(Some(&live), &patched, "kubectl", None, T1);
    assert_eq!(got["metadata"]["managedFields"], upgraded_entries);
    // Undecodable managedFields from a client fall back to the live ones.
    let mut bad = live.clone();
    bad["metadata"]["managedFields"] = json!([{"manager": "x", "operation": "Frobnicate"}]);
    let got = update_as(Some(&live), &bad, "kubectl", None, T1);
    assert_eq!(
        got["metadata"]["managedFields"],
        live["metadata"]["managedFields"]
    );
}

#[test]
fn custom_resources_typed_by_their_crd_schema() {
    let schema = json!({
        "type": "object",
        "properties": {
            "spec": {"type": "object", "properties": {
                "size": {"type": "integer"},
                "endpoints": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                              "items": {"type": "object", "properties": {"name": {"type": "string"}, "url": {"type": "string"}}}}
            }},
            "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}
        }
    });
    let shape = crate::builtin::custom_resource_shape(&schema);
    let opts = ApplyOptions {
        manager: "op",
        force: false,
        api_version: "example.com/v1",
        subresource: None,
        now: T0,
    };
    let cr = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
                    "spec": {"size": 1, "endpoints": [{"name": "a", "url": "http://a"}]}});
    let got = apply(None, &cr, &shape, &opts).unwrap();
    assert_eq!(
        fields_of(&got, "op", "Apply"),
        json!({"f:spec": {"f:endpoints": {"k:{\"name\":\"a\"}": {".": {}, "f:name": {}, "f:url": {}}}, "f:size": {}}})
    );
    // A second applier adds an endpoint without touching the first one's.
    let other = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
                       "spec": {"endpoints": [{"name": "b", "url": "http://b"}]}});
    let got = apply(
        Some(&got),
        &other,
        &shape,
        &ApplyOptions {
            manager: "other",
            ..opts
        },
    )
    .unwrap();
    assert_eq!(
        got["spec"]["endpoints"],
        json!([{"name": "a", "url": "http://a"}, {"name": "b", "url": "http://b"}])
    );
}

#[test]
fn tracking_in_place_matches_tracking_on_copies_and_leaves_the_old_object_as_it_was() {
    let mut g = Gen(0x1a2b_3c4d_5e6f_0011);
    let opts = UpdateOptions {
        manager: "controller",
        api_version: "apps/v1",
        subresource: None,
        now: T1,
    };
    let shape = deployment_shape();
    let filter = Filter::for_subresource(None);
    for _ in 0..100 {
        let (first, second) = (g.deployment(), g.deployment());
        let tracked = stored(apply_as(None, &first, "kubectl", false, T0).unwrap());
        let untracked = without_managed_fields(&tracked);
        let mut sent = second.clone();
        sent["metadata"]["managedFields"] = tracked["metadata"]["managedFields"].clone();
        for old in [Some(&tracked), Some(&untracked), None] {
            for new in [&second, &sent] {
                let expected = track_update(old, new, &shape, &opts).unwrap();
                let mut owned = old.cloned();
                let got = track_update_in_place(owned.as_mut(), new.clone(), &shape, &opts, &filter);
                assert_eq!(got, expected, "{first} -> {new}");
                assert_eq!(owned.as_ref(), old, "the old object is given back whole");
            }
        }
    }
    // Not an object: given back untouched.
    assert_eq!(
        track_update_in_place(None, json!([1]), &shape, &opts, &filter),
        json!([1])
    );
}

#[test]
fn fields_set_aside_as_unchanged_leave_the_tracking_as_it_was() {
    let mut g = Gen(0x7e57_a51d_e000_0017);
    let shape = deployment_shape();
    for _ in 0..100 {
        let (first, second) = (g.deployment(), g.deployment());
        let mut live = stored(apply_as(None, &first, "kubectl", false, T0).unwrap());
        live["status"] = json!({"replicas": g.next() % 3, "readyReplicas": 0});
        // A status write (`spec` as it was), a spec write (`status` as it was), and one that
        // changes neither (both listed).
        let mut status_write = live.clone();
        status_write["status"] = json!({"replicas": g.next() % 3, "readyReplicas": 1});
        let mut spec_write = live.clone();
        spec_write["spec"] = second["spec"].clone();
        spec_write["metadata"]["labels"] = second["metadata"]["labels"].clone();
        let cases: [(&Value, Option<&str>, &[&str]); 4] = [
            (&status_write, Some("status"), &["spec"]),
            (&spec_write, None, &["status"]),
            (&live, None, &["spec", "status"]),
            (&live, Some("status"), &["spec", "status", "metadata", "kind"]),
        ];
        for (new, subresource, unchanged) in cases {
            let opts = UpdateOptions {
                manager: "controller",
                api_version: "apps/v1",
                subresource,
                now: T1,
            };
            let filter = Filter::for_subresource(subresource);
            let mut whole = live.clone();
            let expected = track_update_in_place(Some(&mut whole), new.clone(), &shape, &opts, &filter);
            let mut owned = live.clone();
            let got = track_update_in_place_except(
                Some(&mut owned),
                new.clone(),
                &shape,
                &opts,
                &filter,
                unchanged,
            );
            assert_eq!(got, expected, "{subresource:?} {unchanged:?}: {live} -> {new}");
            assert_eq!(owned, live, "the old object is given back whole");
            if new["spec"] != live["spec"] || new["status"] != live["status"] {
                assert_ne!(
                    got["metadata"]["managedFields"], live["metadata"]["managedFields"],
                    "the write was tracked"
                );
            }
        }
    }
    // Nothing to compare against: nothing set aside, a create tracked as ever.
    let opts = UpdateOptions {
        manager: "controller",
        api_version: "apps/v1",
        subresource: None,
        now: T1,
    };
    let filter = Filter::for_subresource(None);
    let new = g.deployment();
    assert_eq!(
        track_update_in_place_except(None, new.clone(), &shape, &opts, &filter, &["spec"]),
        track_update_in_place(None, new, &shape, &opts, &filter)
    );
}

#[test]
fn stored_entries_are_decoded_only_where_the_write_changes_them() {
    // `z:` is an element type this version does not know: decoding drops it, so it shows
    // whether an entry went through a decode and an encode or came back as it was stored.
    let creator = json!({
        "manager": "kubectl-create", "operation": "Update", "apiVersion": "apps/v1", "time": "2024-04-30T08:00:00Z",
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}}, "f:spec": {"f:replicas": {}, "z:future": {}}}
    });
    let controller = json!({
        "manager": "kube-controller-manager", "operation": "Update", "apiVersion": "apps/v1", "time": "2024-04-30T08:00:05Z",
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:status": {"f:readyReplicas": {}, "f:replicas": {}}},
        "subresource": "status"
    });
    let mut live = stored(config(Some(1), "nginx"));
    live["status"] = json!({"replicas": 1, "readyReplicas": 1});
    live["metadata"]["managedFields"] = json!([creator, controller]);

    // A status write by someone else: the creator's entry, with nothing under `status`, is
    // written back as it was; the controller's loses the field taken from it.
    let mut new = live.clone();
    new["status"]["readyReplicas"] = json!(3);
    let got = update_as(Some(&live), &new, "flotilla-execution", Some("status"), T1);
    assert_eq!(entry_of(&got, "kubectl-create", "Update"), &creator);
    assert_eq!(
        fields_of(&got, "kube-controller-manager", "Update"),
        json!({"f:status": {"f:replicas": {}}})
    );
    assert_eq!(
        entry_of(&got, "flotilla-execution", "Update")["fieldsV1"],
        json!({"f:status": {"f:readyReplicas": {}}})
    );

    // A write under `spec` decodes the creator's entry: it loses `spec.replicas`, and the
    // element it cannot read is gone with the encoding.
    let mut scaled = got.clone();
    scaled["spec"]["replicas"] = json!(2);
    let got = update_as(Some(&got), &scaled, "kubectl-scale", None, T2);
    assert_eq!(
        fields_of(&got, "kubectl-create", "Update"),
        json!({"f:metadata": {"f:labels": {".": {}, "f:app": {}}}})
    );
    assert_eq!(
        fields_of(&got, "kubectl-scale", "Update"),
        json!({"f:spec": {"f:replicas": {}}})
    );
    // The controller's entry, only under `status`, stays as the first write left it.
    assert_eq!(
        fields_of(&got, "kube-controller-manager", "Update"),
        json!({"f:status": {"f:replicas": {}}})
    );
}
