//! The repository's own CRDs (`deploy/crds/*.yaml`): every version's schema is accepted, and
//! PropagationPolicy and Work objects validate, prune, default and print as on a cluster.
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

use flotilla_schema::Schema;
use flotilla_schema::jsonpath::{JsonPath, cell_at};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::{Value, json};

fn crds_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../deploy/crds")
}

fn load(file: &str) -> CustomResourceDefinition {
    let text = std::fs::read_to_string(crds_dir().join(file)).unwrap();
    serde_yaml::from_str(&text).unwrap()
}

fn schema_of(crd: &CustomResourceDefinition) -> Schema {
    let v = &crd.spec.versions[0];
    Schema::new(v.schema.as_ref().unwrap().open_api_v3_schema.as_ref().unwrap()).unwrap()
}

fn messages(errs: Vec<flotilla_schema::FieldError>) -> Vec<String> {
    errs.into_iter().map(|e| e.message).collect()
}

#[test]
fn every_crd_version_schema_is_accepted_and_printer_columns_parse() {
    let (mut files, mut count) = (0, 0);
    for entry in std::fs::read_dir(crds_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
            continue;
        }
        files += 1;
        let crd: CustomResourceDefinition =
            serde_yaml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        for (i, v) in crd.spec.versions.iter().enumerate() {
            let props = v
                .schema
                .as_ref()
                .and_then(|s| s.open_api_v3_schema.as_ref())
                .unwrap();
            let prefix = format!("spec.versions[{i}].schema.openAPIV3Schema");
            if let Err(errs) = Schema::new_at(props, &prefix) {
                panic!("{}: {:#?}", path.display(), messages(errs));
            }
            for col in v.additional_printer_columns.iter().flatten() {
                JsonPath::parse_column(&col.json_path).unwrap();
            }
            count += 1;
        }
    }
    assert!(files > 0, "no CRD found in {}", crds_dir().display());
    assert_eq!(count, files, "one served version per CRD");
}

#[test]
fn propagation_policy_validation_pruning_and_defaults() {
    let crd = load("policy.karmada.io_propagationpolicies.yaml");
    let s = schema_of(&crd);

    let mut policy = json!({
        "apiVersion": "policy.karmada.io/v1alpha1",
        "kind": "PropagationPolicy",
        "metadata": {"name": "nginx", "namespace": "default"},
        "spec": {
            "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "nginx", "unknownSelectorField": 1}],
            "placement": {"clusterAffinity": {"clusterNames": ["member1", "member2"]}},
            "priority": 10,
            "activationPreference": "Lazy",
            "conflictResolution": "Overwrite",
            "suspension": {"dispatching": false, "dispatchingOnClusters": {"clusterNames": ["member1"]}},
            "typo": true
        }
    });
    let pruned = s.prune(&mut policy);
    assert_eq!(
        pruned,
        vec!["spec.resourceSelectors[0].unknownSelectorField", "spec.typo"]
    );
    s.apply_defaults(&mut policy);
    assert_eq!(messages(s.validate(&policy)), Vec::<String>::new());

    // Defaults fill absent fields inside existing objects.
    let mut minimal = json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": "m"}, "spec": {"placement": {}}});
    s.apply_defaults(&mut minimal);
    assert_eq!(minimal["spec"]["resourceSelectors"], json!([]));

    let invalid = json!({
        "apiVersion": "policy.karmada.io/v1alpha1",
        "kind": "PropagationPolicy",
        "metadata": {"name": "bad"},
        "spec": {
            "resourceSelectors": [{"kind": "Deployment"}],
            "priority": "high",
            "conflictResolution": "Sometimes",
            "placement": {}
        }
    });
    assert_eq!(
        messages(s.validate(&invalid)),
        vec![
            r#"spec.conflictResolution: Unsupported value: "Sometimes": supported values: "Overwrite", "Abort", "null""#.to_string(),
            r#"spec.priority: Invalid value: "string": spec.priority in body must be of type integer: "string""#.to_string(),
            "spec.resourceSelectors[0].apiVersion: Required value".to_string(),
        ]
    );

    // A nullable enum field sent as explicit null fails the enum like on kube-apiserver.
    let null_enum = json!({"spec": {"resourceSelectors": [], "placement": {}, "conflictResolution": null}});
    assert_eq!(
        messages(s.validate(&null_enum)),
        vec![
            r#"spec.conflictResolution: Unsupported value: null: supported values: "Overwrite", "Abort", "null""#
        ]
    );

    // Printer columns.
    let columns = &crd.spec.versions[0].additional_printer_columns.clone().unwrap();
    let col = |name: &str, obj: &Value| {
        let c = columns.iter().find(|c| c.name == name).unwrap();
        let path = JsonPath::parse_column(&c.json_path).unwrap();
        let results = path.find_results(obj, true).unwrap_or_default();
        cell_at(results.first().map(Vec::as_slice).unwrap_or(&[]), &c.type_, 0)
    };
    let mut with_status = policy.clone();
    with_status["status"] = json!({"conditions": [
        {"type": "Other", "status": "False"},
        {"type": "Valid", "status": "True", "reason": "Ok", "message": "", "lastTransitionTime": "2024-01-01T00:00:00Z"}
    ]});
    assert_eq!(col("VALID", &with_status), json!("True"));
    assert_eq!(col("VALID", &policy), Value::Null);
    assert_eq!(col("CONFLICT-RESOLUTION", &policy), json!("Overwrite"));
    assert_eq!(col("ACTIVATION", &policy), json!("Lazy"));
}

#[test]
fn work_manifests_are_preserved_and_printed() {
    let crd = load("work.karmada.io_works.yaml");
    let s = schema_of(&crd);
    let mut work = json!({
        "apiVersion": "work.karmada.io/v1alpha1",
        "kind": "Work",
        "metadata": {"name": "nginx-deployment", "namespace": "karmada-es-member1"},
        "spec": {
            "workload": {"manifests": [
                {"apiVersion": "apps/v1", "kind": "Deployment",
                 "metadata": {"name": "nginx", "labels": {"app": "nginx"}, "notAMetaField": 1},
                 "spec": {"replicas": 2, "template": {"anything": {"goes": true}}}},
                {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"k": "v"}}
            ]},
            "suspendDispatching": true
        },
        "status": {"conditions": [
            {"type": "Applied", "status": "True", "reason": "AppliedSuccessful", "message": "", "lastTransitionTime": "2024-01-01T00:00:00Z"}
        ]}
    });
    let pruned = s.prune(&mut work);
    assert_eq!(pruned, vec!["spec.workload.manifests[0].metadata.notAMetaField"]);
    assert_eq!(
        work["spec"]["workload"]["manifests"][0]["spec"]["template"],
        json!({"anything": {"goes": true}})
    );
    assert_eq!(
        work["spec"]["workload"]["manifests"][0]["metadata"],
        json!({"name": "nginx", "labels": {"app": "nginx"}})
    );
    s.apply_defaults(&mut work);
    assert_eq!(messages(s.validate(&work)), Vec::<String>::new());

    // Embedded manifests need apiVersion and kind.
    let mut bad = work.clone();
    bad["spec"]["workload"]["manifests"][1] = json!({"data": {}});
    assert_eq!(
        messages(s.validate(&bad)),
        vec![
            "spec.workload.manifests[1].apiVersion: Required value",
            "spec.workload.manifests[1].kind: Required value"
        ]
    );

    // A condition without its required fields.
    let mut bad_status = work.clone();
    bad_status["status"]["conditions"][0] = json!({"type": "Applied"});
    let msgs = messages(s.validate(&bad_status));
    assert_eq!(
        msgs,
        vec![
            "status.conditions[0].lastTransitionTime: Required value",
            "status.conditions[0].message: Required value",
            "status.conditions[0].reason: Required value",
            "status.conditions[0].status: Required value",
        ]
    );

    let columns = crd.spec.versions[0].additional_printer_columns.clone().unwrap();
    let col = |name: &str| {
        let c = columns.iter().find(|c| c.name == name).unwrap();
        JsonPath::parse_column(&c.json_path).unwrap().find(&work)
    };
    assert_eq!(
        col("WORKLOAD-KIND"),
        vec![json!("Deployment"), json!("ConfigMap")]
    );
    assert_eq!(col("APPLIED"), vec![json!("True")]);
    assert_eq!(col("DISPATCHING"), Vec::<Value>::new());
    assert_eq!(col("SUSPENDED"), vec![json!(true)]);
    let kind_col = columns.iter().find(|c| c.name == "WORKLOAD-KIND").unwrap();
    // kube-apiserver's table shows the first result only.
    assert_eq!(
        JsonPath::parse_column(&kind_col.json_path)
            .unwrap()
            .cell(&work, "string"),
        json!("Deployment")
    );
}

#[test]
fn binding_scheduled_condition_column() {
    let crd = load("work.karmada.io_resourcebindings.yaml");
    let s = schema_of(&crd);
    assert!(!s.has_cel_rules());
    let obj = json!({"status": {"conditions": [
        {"type": "FullyApplied", "status": "False"},
        {"type": "Scheduled", "status": "True"}
    ]}});
    let p = JsonPath::parse_column(r#".status.conditions[?(@.type=="Scheduled")].status"#).unwrap();
    assert_eq!(p.find(&obj), vec![json!("True")]);
    assert_eq!(p.cell(&obj, "string"), json!("True"));
}
