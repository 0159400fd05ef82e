//! Member objects: the marks execution puts on what it applies, who owns an existing object
//! (conflict detection), and whether a member object already says what the Work says (so no
//! write is issued and watches do not loop).

use flotilla_api::ConflictResolution;
use flotilla_api::well_known::{
    DESIRED_REVISION_ANNOTATION, MANAGED_LABEL, WORK_NAME_ANNOTATION, WORK_NAMESPACE_ANNOTATION,
    WORK_PERMANENT_ID_LABEL,
};
use serde_json::{Map, Value};

use crate::manifest::{Revision, annotation, label};
use crate::naming::namespace_work_name;

/// The Work a member object belongs to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkRef<'a> {
    /// The Work's namespace (`karmada-es-<cluster>`).
    pub namespace: &'a str,
    /// The Work's name.
    pub name: &'a str,
    /// The Work's uid (its permanent id).
    pub uid: &'a str,
}

/// The object execution applies: the manifest plus flotilla's marks (label
/// `karmada.io/managed: "true"`, label `work.karmada.io/permanent-id`, annotations
/// `work.karmada.io/name`, `work.karmada.io/namespace` and `flotilla.io/desired-revision`).
/// The `resourcetemplate.karmada.io/*` annotations are already in the manifest.
pub fn with_marks(manifest: &Value, work: &WorkRef<'_>, revision: &Revision) -> Value {
    let mut object = manifest.clone();
    if let Some(map) = object.as_object_mut() {
        let metadata = object_field(map, "metadata");
        let labels = object_field(metadata, "labels");
        labels.insert(MANAGED_LABEL.to_owned(), Value::from("true"));
        labels.insert(WORK_PERMANENT_ID_LABEL.to_owned(), Value::from(work.uid));
        let annotations = object_field(metadata, "annotations");
        annotations.insert(WORK_NAME_ANNOTATION.to_owned(), Value::from(work.name));
        annotations.insert(WORK_NAMESPACE_ANNOTATION.to_owned(), Value::from(work.namespace));
        annotations.insert(
            DESIRED_REVISION_ANNOTATION.to_owned(),
            Value::from(revision.to_string()),
        );
    }
    object
}

fn object_field<'a>(map: &'a mut Map<String, Value>, field: &str) -> &'a mut Map<String, Value> {
    if !map.get(field).is_some_and(Value::is_object) {
        map.insert(field.to_owned(), Value::Object(Map::new()));
    }
    match map.get_mut(field) {
        Some(Value::Object(inner)) => inner,
        // Inserted as an object just above.
        _ => unreachable!("{field} was just made an object"),
    }
}

/// Who an existing member object belongs to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ownership {
    /// There is no member object.
    Absent,
    /// flotilla applied it for this Work.
    Ours,
    /// flotilla applied it for another Work (`namespace/name`).
    OtherWork(String),
    /// Someone else created it.
    Foreign,
}

/// Who owns `live`. An object is this Work's when it carries `karmada.io/managed: "true"` and
/// names this Work in `work.karmada.io/namespace` and `work.karmada.io/name`; the Work's uid is
/// not compared, so a Work re-created under the same name (the same binding and cluster) keeps
/// its objects.
pub fn ownership(live: Option<&Value>, work: &WorkRef<'_>) -> Ownership {
    let Some(live) = live else {
        return Ownership::Absent;
    };
    if label(live, MANAGED_LABEL) != Some("true") {
        return Ownership::Foreign;
    }
    match (
        annotation(live, WORK_NAMESPACE_ANNOTATION),
        annotation(live, WORK_NAME_ANNOTATION),
    ) {
        (Some(namespace), Some(name)) if namespace == work.namespace && name == work.name => Ownership::Ours,
        (Some(namespace), Some(name)) => Ownership::OtherWork(format!("{namespace}/{name}")),
        _ => Ownership::Foreign,
    }
}

/// Whether applying would take over an object flotilla did not create for this Work while the
/// conflict resolution forbids it.
pub fn is_conflict(ownership: &Ownership, resolution: &ConflictResolution) -> bool {
    matches!(ownership, Ownership::Foreign | Ownership::OtherWork(_))
        && *resolution != ConflictResolution::Overwrite
}

/// Whether a binding's Work leaves the member Namespace `name` to namespace auto-propagation:
/// the object is owned by the namespace Work of the same name in the same execution namespace.
///
/// A ClusterPropagationPolicy may select a Namespace that is also auto-propagated. Karmada gives
/// both Works the same name, so they share one Work; flotilla keeps them apart, and two Works
/// taking one object from each other would loop (and the binding Work's finalizer would delete
/// a namespace auto-propagation still wants). So the namespace Work owns the member Namespace
/// and the binding Work defers to it: no write, no conflict, nothing deleted when it goes.
pub fn defers_to_namespace_work(
    api_version: &str,
    kind: &str,
    name: &str,
    owner: &Ownership,
    work: &WorkRef<'_>,
) -> bool {
    let namespace_work = namespace_work_name(name);
    api_version == "v1"
        && kind == "Namespace"
        && work.name != namespace_work
        && *owner == Ownership::OtherWork(format!("{}/{namespace_work}", work.namespace))
}

/// A human-readable reason for a conflict.
pub fn conflict_message(ownership: &Ownership, object: &str) -> String {
    match ownership {
        Ownership::OtherWork(work) => format!(
            "{object} exists in the member cluster and is managed by Work {work}; conflictResolution is Abort \
             (set conflictResolution: Overwrite in the policy to take it over)"
        ),
        _ => format!(
            "{object} exists in the member cluster and was not created by flotilla; conflictResolution is \
             Abort (set conflictResolution: Overwrite in the policy to take it over)"
        ),
    }
}

/// The desired revision recorded on a member object flotilla owns.
pub fn recorded_revision(live: &Value) -> Option<&str> {
    annotation(live, DESIRED_REVISION_ANNOTATION)
}

/// Whether `live` already holds everything `desired` sets (so an apply would change nothing).
///
/// Fields `desired` does not mention are ignored (defaults, fields of other managers, status).
/// Objects match key by key; `null` or an empty object or list in `desired` matches an absent
/// field. Lists whose items all carry a string `name` (containers, ports, env, volumes) match
/// item by name, the way server-side apply merges them, so items other managers add do not
/// count as drift; other lists must match item by item in order. Numbers compare by value.
pub fn matches(desired: &Value, live: &Value) -> bool {
    match (desired, live) {
        (Value::Object(want), Value::Object(have)) => want.iter().all(|(key, value)| match have.get(key) {
            Some(actual) => matches(value, actual),
            None => is_empty_value(value),
        }),
        (Value::Array(want), Value::Array(have)) => {
            if let Some(names) = item_names(want) {
                names.iter().zip(want).all(|(name, item)| {
                    have.iter()
                        .find(|candidate| candidate.get("name").and_then(Value::as_str) == Some(name))
                        .is_some_and(|candidate| matches(item, candidate))
                })
            } else {
                want.len() == have.len() && want.iter().zip(have).all(|(w, h)| matches(w, h))
            }
        }
        (Value::Number(want), Value::Number(have)) => want == have || want.as_f64() == have.as_f64(),
        (want, _) if is_empty_value(want) && matches!(live, Value::Null) => true,
        (want, have) => want == have,
    }
}

fn is_empty_value(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Object(map) => map.is_empty(),
        Value::Array(items) => items.is_empty(),
        _ => false,
    }
}

fn item_names(items: &[Value]) -> Option<Vec<&str>> {
    if items.is_empty() {
        return None;
    }
    items
        .iter()
        .map(|item| item.get("name").and_then(Value::as_str))
        .collect()
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    const WORK: WorkRef<'static> = WorkRef {
        namespace: "karmada-es-member1",
        name: "nginx-deployment-1a2b3c4d",
        uid: "work-uid",
    };

    fn manifest() -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "nginx", "namespace": "default", "labels": {"app": "nginx"}},
            "spec": {"replicas": 2},
        })
    }

    fn revision() -> Revision {
        Revision {
            generation: 1,
            hash: "0123456789abcdef".into(),
        }
    }

    #[test]
    fn marks() {
        let marked = with_marks(&manifest(), &WORK, &revision());
        assert_eq!(
            marked["metadata"],
            json!({
                "name": "nginx", "namespace": "default",
                "labels": {"app": "nginx", "karmada.io/managed": "true", "work.karmada.io/permanent-id": "work-uid"},
                "annotations": {
                    "work.karmada.io/name": "nginx-deployment-1a2b3c4d",
                    "work.karmada.io/namespace": "karmada-es-member1",
                    "flotilla.io/desired-revision": "1/0123456789abcdef",
                },
            })
        );
        assert_eq!(recorded_revision(&marked), Some("1/0123456789abcdef"));
        assert_eq!(ownership(Some(&marked), &WORK), Ownership::Ours);
    }

    #[test]
    fn ownership_cases() {
        assert_eq!(ownership(None, &WORK), Ownership::Absent);
        assert_eq!(ownership(Some(&manifest()), &WORK), Ownership::Foreign);
        let other = WorkRef {
            namespace: "karmada-es-member1",
            name: "other-work",
            uid: "u2",
        };
        let theirs = with_marks(&manifest(), &other, &revision());
        assert_eq!(
            ownership(Some(&theirs), &WORK),
            Ownership::OtherWork("karmada-es-member1/other-work".into())
        );
        // Managed label without the Work annotations: not provably ours.
        let half = json!({"metadata": {"labels": {"karmada.io/managed": "true"}}});
        assert_eq!(ownership(Some(&half), &WORK), Ownership::Foreign);
        // A re-created Work (new uid, same name) still owns the object.
        let recreated = WorkRef {
            uid: "new-uid",
            ..WORK
        };
        let ours = with_marks(&manifest(), &WORK, &revision());
        assert_eq!(ownership(Some(&ours), &recreated), Ownership::Ours);
    }

    #[test]
    fn conflict_detection() {
        use ConflictResolution::{Abort, Overwrite};
        let cases = [
            (Ownership::Absent, Abort, false),
            (Ownership::Absent, Overwrite, false),
            (Ownership::Ours, Abort, false),
            (Ownership::Ours, Overwrite, false),
            (Ownership::Foreign, Abort, true),
            (Ownership::Foreign, Overwrite, false),
            (Ownership::OtherWork("a/b".into()), Abort, true),
            (Ownership::OtherWork("a/b".into()), Overwrite, false),
            (Ownership::Foreign, ConflictResolution::Other("x".into()), true),
        ];
        for (ownership, resolution, expected) in cases {
            assert_eq!(
                is_conflict(&ownership, &resolution),
                expected,
                "{ownership:?} {resolution:?}"
            );
        }
        assert!(
            conflict_message(&Ownership::Foreign, "Deployment default/nginx")
                .contains("not created by flotilla")
        );
        assert!(conflict_message(&Ownership::OtherWork("a/b".into()), "X").contains("Work a/b"));
    }

    #[test]
    fn live_objects_with_defaults_and_status_match() {
        let desired = with_marks(
            &json!({
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "nginx", "namespace": "default"},
                "spec": {
                    "replicas": 2,
                    "template": {"spec": {"containers": [{"name": "nginx", "image": "nginx:1.25", "resources": {}}]}},
                },
            }),
            &WORK,
            &revision(),
        );
        let mut live = desired.clone();
        live["metadata"]["uid"] = json!("member-uid");
        live["metadata"]["resourceVersion"] = json!("7");
        live["metadata"]["labels"]["extra"] = json!("x");
        live["spec"]["strategy"] = json!({"type": "RollingUpdate"});
        live["spec"]["template"]["spec"]["containers"] = json!([
            {"name": "sidecar", "image": "envoy"},
            {"name": "nginx", "image": "nginx:1.25", "imagePullPolicy": "IfNotPresent"},
        ]);
        live["status"] = json!({"readyReplicas": 2});
        assert!(matches(&desired, &live));
    }

    #[test]
    fn drift_is_detected() {
        let desired = json!({
            "metadata": {"name": "nginx", "annotations": {"flotilla.io/desired-revision": "1/aa"}},
            "spec": {
                "replicas": 2,
                "template": {"spec": {"containers": [{"name": "nginx", "image": "nginx:1.25", "args": ["-a", "-b"]}]}},
            },
        });
        let mut image = desired.clone();
        image["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:evil");
        let mut replicas = desired.clone();
        replicas["spec"]["replicas"] = json!(5);
        let mut missing = desired.clone();
        missing["spec"].as_object_mut().unwrap().remove("replicas");
        let mut args = desired.clone();
        args["spec"]["template"]["spec"]["containers"][0]["args"] = json!(["-a", "-b", "-c"]);
        let mut container_gone = desired.clone();
        container_gone["spec"]["template"]["spec"]["containers"] = json!([{"name": "other"}]);
        let mut revision = desired.clone();
        revision["metadata"]["annotations"]["flotilla.io/desired-revision"] = json!("0/aa");
        for (what, live) in [
            ("image", image),
            ("replicas", replicas),
            ("missing field", missing),
            ("atomic list", args),
            ("container removed", container_gone),
            ("revision", revision),
        ] {
            assert!(!matches(&desired, &live), "{what} drift not detected");
        }
        assert!(matches(&desired, &desired));
    }

    #[test]
    fn scalars_and_empties() {
        assert!(matches(&json!(1), &json!(1.0)));
        assert!(!matches(&json!(1), &json!("1")));
        assert!(matches(&json!({"a": null}), &json!({})));
        assert!(matches(&json!({"a": {}}), &json!({})));
        assert!(matches(&json!({"a": []}), &json!({})));
        assert!(matches(&json!({"a": []}), &json!({"a": null})));
        assert!(!matches(&json!({"a": "x"}), &json!({})));
        assert!(!matches(&json!({"a": "x"}), &json!("x")));
    }

    #[test]
    fn binding_works_defer_to_the_namespace_work_of_the_same_namespace() {
        let ns_work = namespace_work_name("team-b");
        let owned_by = |work: &str| Ownership::OtherWork(format!("karmada-es-member1/{work}"));
        let binding_work = WorkRef {
            namespace: "karmada-es-member1",
            name: "team-b-namespace-451b060e",
            uid: "u",
        };
        assert!(defers_to_namespace_work(
            "v1",
            "Namespace",
            "team-b",
            &owned_by(&ns_work),
            &binding_work
        ));
        // Not a Namespace, another namespace's Work, another cluster's, or not owned at all.
        assert!(!defers_to_namespace_work(
            "v1",
            "ConfigMap",
            "team-b",
            &owned_by(&ns_work),
            &binding_work
        ));
        assert!(!defers_to_namespace_work(
            "v2",
            "Namespace",
            "team-b",
            &owned_by(&ns_work),
            &binding_work
        ));
        let other = namespace_work_name("team-c");
        assert!(!defers_to_namespace_work(
            "v1",
            "Namespace",
            "team-b",
            &owned_by(&other),
            &binding_work
        ));
        let elsewhere = Ownership::OtherWork(format!("karmada-es-member2/{ns_work}"));
        assert!(!defers_to_namespace_work(
            "v1",
            "Namespace",
            "team-b",
            &elsewhere,
            &binding_work
        ));
        for owner in [
            Ownership::Absent,
            Ownership::Ours,
            Ownership::Foreign,
            owned_by("someone-else"),
        ] {
            assert!(!defers_to_namespace_work(
                "v1",
                "Namespace",
                "team-b",
                &owner,
                &binding_work
            ));
        }
        // The namespace Work itself never defers (it owns the object).
        let itself = WorkRef {
            namespace: "karmada-es-member1",
            name: &ns_work,
            uid: "u",
        };
        assert!(!defers_to_namespace_work(
            "v1",
            "Namespace",
            "team-b",
            &owned_by(&ns_work),
            &itself
        ));
    }
}
