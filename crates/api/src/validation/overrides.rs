//! Semantic validation of OverridePolicy and ClusterOverridePolicy: Karmada's webhook checks
//! (`pkg/util/validation`, `ValidateOverrideSpec`) plus what flotilla can reject statically that
//! Karmada only finds when it renders a Work (a path that is not a JSON pointer, an image
//! component value that cannot be part of an image reference, a missing `value`).

use crate::image_reference::{is_domain, is_path, is_supported_digest, is_tag};
use crate::overrides::{
    ClusterOverridePolicy, CommandArgsOverrider, FieldOverrider, ImageComponent, ImageOverrider,
    LabelAnnotationOverrider, OverridePolicy, OverrideSpec, OverriderOperator, Overriders,
    PlaintextOverrider, SubDocumentOperation,
};

use super::{
    Violation, Violations, check_cluster_affinity, check_resource_selector, is_label_value,
    is_qualified_name, unsupported,
};

/// Kubernetes' limit on the total size of an object's annotations (keys and values).
const ANNOTATIONS_MAX_BYTES: usize = 256 * 1024;

const OPERATORS: &[&str] = &["add", "remove", "replace"];

impl OverridePolicy {
    /// Checks the policy; returns every violation found.
    pub fn validate(&self) -> Result<(), Violations> {
        let mut out = Vec::new();
        validate_override_spec(&self.spec, self.metadata.namespace.as_deref(), &mut out);
        Violations(out).into_result()
    }
}

impl ClusterOverridePolicy {
    /// Checks the policy; returns every violation found.
    pub fn validate(&self) -> Result<(), Violations> {
        let mut out = Vec::new();
        validate_override_spec(&self.spec, None, &mut out);
        Violations(out).into_result()
    }
}

/// Checks an override spec; `policy_namespace` is the OverridePolicy's namespace (`None` for a
/// ClusterOverridePolicy).
pub fn validate_override_spec(spec: &OverrideSpec, policy_namespace: Option<&str>, out: &mut Vec<Violation>) {
    for (i, selector) in spec.resource_selectors.iter().enumerate() {
        check_resource_selector(
            &format!("spec.resourceSelectors[{i}]"),
            selector,
            policy_namespace,
            "an OverridePolicy only changes templates in its own namespace; remove the field or use a \
             ClusterOverridePolicy",
            out,
        );
    }
    let deprecated = spec.target_cluster.is_some() || !spec.overriders.is_empty();
    if !spec.override_rules.is_empty() && deprecated {
        let field = if spec.target_cluster.is_some() {
            "spec.targetCluster"
        } else {
            "spec.overriders"
        };
        out.push(Violation::new(
            field,
            "overrideRules and the deprecated targetCluster/overriders can't co-exist: move them into an entry of \
             overrideRules",
        ));
    }
    if let Some(target) = &spec.target_cluster {
        check_cluster_affinity("spec.targetCluster", target, out);
    }
    check_overriders("spec.overriders", &spec.overriders, out);
    for (i, rule) in spec.override_rules.iter().enumerate() {
        let path = format!("spec.overrideRules[{i}]");
        if let Some(target) = &rule.target_cluster {
            check_cluster_affinity(&format!("{path}.targetCluster"), target, out);
        }
        check_overriders(&format!("{path}.overriders"), &rule.overriders, out);
    }
    if let Some(activation) = &spec.activation_preference
        && !activation.is_known()
    {
        out.push(Violation::new(
            "spec.activationPreference",
            format!(
                "unsupported value {:?}: the only supported value is Lazy; omit the field for immediate activation",
                activation.as_str()
            ),
        ));
    }
}

fn check_overriders(path: &str, overriders: &Overriders, out: &mut Vec<Violation>) {
    for (i, plaintext) in overriders.plaintext.iter().enumerate() {
        check_plaintext(&format!("{path}.plaintext[{i}]"), plaintext, out);
    }
    for (i, image) in overriders.image_overrider.iter().enumerate() {
        check_image(&format!("{path}.imageOverrider[{i}]"), image, out);
    }
    for (field, list) in [
        ("commandOverrider", &overriders.command_overrider),
        ("argsOverrider", &overriders.args_overrider),
    ] {
        for (i, overrider) in list.iter().enumerate() {
            check_command_args(&format!("{path}.{field}[{i}]"), overrider, out);
        }
    }
    for (i, labels) in overriders.labels_overrider.iter().enumerate() {
        check_labels(&format!("{path}.labelsOverrider[{i}]"), labels, out);
    }
    for (i, annotations) in overriders.annotations_overrider.iter().enumerate() {
        check_annotations(&format!("{path}.annotationsOverrider[{i}]"), annotations, out);
    }
    for (i, field) in overriders.field_overrider.iter().enumerate() {
        check_field(&format!("{path}.fieldOverrider[{i}]"), field, out);
    }
}

/// Whether `path` is an RFC 6901 JSON pointer (empty, or starting with `/`).
pub fn is_json_pointer(path: &str) -> bool {
    path.is_empty() || path.starts_with('/')
}

fn check_pointer(path: &str, pointer: &str, allow_whole_document: bool, out: &mut Vec<Violation>) {
    if pointer.is_empty() && !allow_whole_document {
        out.push(Violation::new(
            path,
            "must name a field: a JSON pointer starting with /, for example /spec/replicas",
        ));
    } else if !is_json_pointer(pointer) {
        out.push(Violation::new(
            path,
            format!("{pointer:?} is not a JSON pointer: it must start with /, for example /spec/replicas"),
        ));
    }
}

fn check_operator(path: &str, operator: &OverriderOperator, out: &mut Vec<Violation>) -> bool {
    if operator.is_known() {
        return true;
    }
    out.push(unsupported(path, operator.as_str(), OPERATORS));
    false
}

fn check_plaintext(path: &str, plaintext: &PlaintextOverrider, out: &mut Vec<Violation>) {
    check_pointer(&format!("{path}.path"), &plaintext.path, false, out);
    if check_operator(&format!("{path}.operator"), &plaintext.operator, out)
        && plaintext.operator != OverriderOperator::Remove
        && plaintext.value.is_none()
    {
        out.push(Violation::new(
            format!("{path}.value"),
            format!("is required for operator {}", plaintext.operator),
        ));
    }
}

fn check_image(path: &str, image: &ImageOverrider, out: &mut Vec<Violation>) {
    if let Some(predicate) = &image.predicate {
        check_pointer(&format!("{path}.predicate.path"), &predicate.path, false, out);
    }
    if !image.component.is_known() {
        out.push(unsupported(
            &format!("{path}.component"),
            image.component.as_str(),
            ImageComponent::KNOWN,
        ));
    }
    if !check_operator(&format!("{path}.operator"), &image.operator, out)
        || !image.component.is_known()
        || image.operator == OverriderOperator::Remove
    {
        return;
    }
    let value_path = format!("{path}.value");
    let value = image.value.as_str();
    if value.is_empty() {
        out.push(Violation::new(
            value_path,
            format!("is required for operator {}", image.operator),
        ));
        return;
    }
    let replace = image.operator == OverriderOperator::Replace;
    let problem = match (&image.component, replace) {
        (ImageComponent::Registry, true) if !is_domain(value) => Some(
            "is not a registry: a host name or [IPv6] address with an optional :port, for example registry.k8s.io or \
             example.com:5000",
        ),
        (ImageComponent::Registry, false)
            if !value
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']')) =>
        {
            Some("cannot be appended to a registry: use letters, digits, '.', '-' and ':' only")
        }
        (ImageComponent::Repository, true) if !is_path(value) => Some(
            "is not a repository: lowercase letters and digits in /-separated parts joined by '.', '_' or '-', for \
             example library/nginx",
        ),
        (ImageComponent::Repository, false)
            if !value.bytes().all(|b| {
                b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-' | b'/')
            }) =>
        {
            Some(
                "cannot be appended to a repository: use lowercase letters, digits, '.', '_', '-' and '/' only",
            )
        }
        (ImageComponent::Tag, true) if !is_tag(value) && !is_supported_digest(value) => Some(
            "is neither a tag (letters, digits, '_', '.' and '-', at most 128, not starting with '.' or '-') nor a \
             digest (sha256:<64 lowercase hex digits>)",
        ),
        (ImageComponent::Tag, false)
            if !value
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-')) =>
        {
            Some("cannot be appended to a tag: use letters, digits, '_', '.' and '-' only")
        }
        _ => None,
    };
    if let Some(problem) = problem {
        out.push(Violation::new(value_path, format!("{value:?} {problem}")));
    }
}

fn check_command_args(path: &str, overrider: &CommandArgsOverrider, out: &mut Vec<Violation>) {
    if overrider.container_name.is_empty() {
        out.push(Violation::new(
            format!("{path}.containerName"),
            "is required: the name of the container to change",
        ));
    }
    if !overrider.operator.is_known() {
        out.push(unsupported(
            &format!("{path}.operator"),
            overrider.operator.as_str(),
            &["add", "remove"],
        ));
    }
}

fn check_labels(path: &str, overrider: &LabelAnnotationOverrider, out: &mut Vec<Violation>) {
    check_operator(&format!("{path}.operator"), &overrider.operator, out);
    for (key, value) in &overrider.value {
        if !is_qualified_name(key) {
            out.push(Violation::new(
                format!("{path}.value"),
                format!("{key:?} is not a valid label key"),
            ));
        }
        if !is_label_value(value) {
            out.push(Violation::new(
                format!("{path}.value.{key}"),
                format!(
                    "{value:?} is not a valid label value (at most 63 characters: letters, digits, '-', '_', '.', \
                     starting and ending with a letter or digit)"
                ),
            ));
        }
    }
}

fn check_annotations(path: &str, overrider: &LabelAnnotationOverrider, out: &mut Vec<Violation>) {
    check_operator(&format!("{path}.operator"), &overrider.operator, out);
    let mut size = 0;
    for (key, value) in &overrider.value {
        if !is_qualified_name(&key.to_lowercase()) {
            out.push(Violation::new(
                format!("{path}.value"),
                format!("{key:?} is not a valid annotation key"),
            ));
        }
        size += key.len() + value.len();
    }
    if size > ANNOTATIONS_MAX_BYTES {
        out.push(Violation::new(
            format!("{path}.value"),
            format!(
                "annotations are {size} bytes, more than the {ANNOTATIONS_MAX_BYTES} an object may carry"
            ),
        ));
    }
}

fn check_field(path: &str, field: &FieldOverrider, out: &mut Vec<Violation>) {
    check_pointer(&format!("{path}.fieldPath"), &field.field_path, true, out);
    match (field.json.is_empty(), field.yaml.is_empty()) {
        (false, false) => out.push(Violation::new(
            path,
            "has both json and yaml set; only one is allowed: json for a JSON document, yaml for a YAML one",
        )),
        (true, true) => out.push(Violation::new(
            path,
            "must have either json or yaml set: the operations on the field's document",
        )),
        _ => {}
    }
    for (format, operations) in [("json", &field.json), ("yaml", &field.yaml)] {
        for (i, operation) in operations.iter().enumerate() {
            check_sub_document_operation(&format!("{path}.{format}[{i}]"), operation, out);
        }
    }
}

fn check_sub_document_operation(path: &str, operation: &SubDocumentOperation, out: &mut Vec<Violation>) {
    check_pointer(&format!("{path}.subPath"), &operation.sub_path, true, out);
    if !check_operator(&format!("{path}.operator"), &operation.operator, out) {
        return;
    }
    match (&operation.operator, &operation.value) {
        (OverriderOperator::Remove, Some(_)) => out.push(Violation::new(
            format!("{path}.value"),
            "is not allowed for operator remove; remove the value",
        )),
        (OverriderOperator::Add | OverriderOperator::Replace, None) => out.push(Violation::new(
            format!("{path}.value"),
            format!("is required for operator {}", operation.operator),
        )),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use pretty_assertions::assert_eq;
    use serde_json::{Value, json};

    use super::*;

    fn op(namespace: &str, spec: Value) -> OverridePolicy {
        serde_json::from_value(json!({
            "apiVersion": "policy.karmada.io/v1alpha1", "kind": "OverridePolicy",
            "metadata": {"name": "op", "namespace": namespace},
            "spec": spec,
        }))
        .unwrap()
    }

    fn fields(policy: &OverridePolicy) -> Vec<String> {
        match policy.validate() {
            Ok(()) => Vec::new(),
            Err(violations) => violations.0.into_iter().map(|v| v.field).collect(),
        }
    }

    fn rule(overriders: Value) -> Value {
        json!({"overrideRules": [{"overriders": overriders}]})
    }

    #[test]
    fn a_selector_in_another_namespace_names_the_cluster_kind_to_use() {
        let policy = op(
            "default",
            json!({"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "other"}]}),
        );
        let messages: Vec<String> = policy
            .validate()
            .unwrap_err()
            .0
            .into_iter()
            .map(|v| v.to_string())
            .collect();
        assert_eq!(
            messages,
            vec![
                "spec.resourceSelectors[0].namespace: \"other\" differs from the policy's namespace \"default\": an \
                 OverridePolicy only changes templates in its own namespace; remove the field or use a \
                 ClusterOverridePolicy"
                    .to_owned()
            ]
        );
    }

    #[test]
    fn karmada_documented_examples_are_valid() {
        let examples = [
            json!({"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "test",
                   "labelSelector": {"matchLabels": {"app": "nginx"}}}]}),
            rule(
                json!({"imageOverrider": [{"component": "Registry", "operator": "add", "value": "test-repo"}]}),
            ),
            rule(
                json!({"imageOverrider": [{"component": "Repository", "operator": "replace", "value": "myapp2"}]}),
            ),
            rule(json!({"imageOverrider": [{"component": "Tag", "operator": "remove"}]})),
            rule(
                json!({"commandOverrider": [{"containerName": "myapp", "operator": "add", "value": ["--cluster=member1"]}]}),
            ),
            rule(json!({"labelsOverrider": [
                {"operator": "add", "value": {"bar": "bar"}},
                {"operator": "replace", "value": {"foo": "exist"}},
                {"operator": "remove", "value": {"baz": "baz"}},
            ]})),
            rule(json!({"fieldOverrider": [{"fieldPath": "/data/config.yaml",
                "yaml": [{"subPath": "/app/database/port", "operator": "replace", "value": "3306"}]}]})),
            rule(json!({"plaintext": [
                {"path": "/spec/template/spec/containers/0/env/-", "operator": "add", "value": {"name": "cluster", "value": "cluster1"}},
                {"path": "/spec/template/spec/containers/0/env/2", "operator": "remove"},
            ]})),
            json!({"targetCluster": {"clusterNames": ["member1"]},
                   "overriders": {"plaintext": [{"path": "/spec/replicas", "operator": "replace", "value": 2}]}}),
            json!({"overrideRules": [{"targetCluster": {"fieldSelector": {"matchExpressions": [
                {"key": "region", "operator": "In", "values": ["cn-north-1"]}]}}, "overriders": {}}]}),
            json!({"activationPreference": "Lazy"}),
        ];
        for spec in examples {
            assert_eq!(fields(&op("test", spec.clone())), Vec::<String>::new(), "{spec}");
        }
    }

    #[test]
    fn every_static_mistake_is_named() {
        let cases: Vec<(Value, Vec<&str>)> = vec![
            (
                json!({"resourceSelectors": [{"apiVersion": "", "kind": ""}]}),
                vec![
                    "spec.resourceSelectors[0].apiVersion",
                    "spec.resourceSelectors[0].kind",
                ],
            ),
            (
                json!({"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "other"}]}),
                vec!["spec.resourceSelectors[0].namespace"],
            ),
            (
                json!({"targetCluster": {"clusterNames": ["a"]}, "overrideRules": [{"overriders": {}}]}),
                vec!["spec.targetCluster"],
            ),
            (
                json!({"overriders": {"plaintext": [{"path": "/a", "operator": "remove"}]}, "overrideRules": [{"overriders": {}}]}),
                vec!["spec.overriders"],
            ),
            (
                rule(json!({"plaintext": [{"path": "spec/replicas", "operator": "replace", "value": 1}]})),
                vec!["spec.overrideRules[0].overriders.plaintext[0].path"],
            ),
            (
                rule(json!({"plaintext": [{"path": "", "operator": "replace", "value": 1}]})),
                vec!["spec.overrideRules[0].overriders.plaintext[0].path"],
            ),
            (
                rule(json!({"plaintext": [{"path": "/a", "operator": "move", "value": 1}]})),
                vec!["spec.overrideRules[0].overriders.plaintext[0].operator"],
            ),
            (
                rule(json!({"plaintext": [{"path": "/a", "operator": "add"}]})),
                vec!["spec.overrideRules[0].overriders.plaintext[0].value"],
            ),
            (
                rule(json!({"imageOverrider": [{"component": "Digest", "operator": "add", "value": "x"}]})),
                vec!["spec.overrideRules[0].overriders.imageOverrider[0].component"],
            ),
            (
                rule(json!({"imageOverrider": [{"component": "Tag", "operator": "replace"}]})),
                vec!["spec.overrideRules[0].overriders.imageOverrider[0].value"],
            ),
            (
                rule(
                    json!({"imageOverrider": [{"component": "Registry", "operator": "replace", "value": "not a host"}]}),
                ),
                vec!["spec.overrideRules[0].overriders.imageOverrider[0].value"],
            ),
            (
                rule(
                    json!({"imageOverrider": [{"component": "Repository", "operator": "replace", "value": "Upper/Case"}]}),
                ),
                vec!["spec.overrideRules[0].overriders.imageOverrider[0].value"],
            ),
            (
                rule(
                    json!({"imageOverrider": [{"component": "Tag", "operator": "replace", "value": "-bad"}]}),
                ),
                vec!["spec.overrideRules[0].overriders.imageOverrider[0].value"],
            ),
            (
                rule(json!({"imageOverrider": [{"component": "Tag", "operator": "add", "value": "a/b"}]})),
                vec!["spec.overrideRules[0].overriders.imageOverrider[0].value"],
            ),
            (
                rule(
                    json!({"imageOverrider": [{"predicate": {"path": "spec/x"}, "component": "Tag", "operator": "remove"}]}),
                ),
                vec!["spec.overrideRules[0].overriders.imageOverrider[0].predicate.path"],
            ),
            (
                rule(json!({"commandOverrider": [{"containerName": "", "operator": "replace"}]})),
                vec![
                    "spec.overrideRules[0].overriders.commandOverrider[0].containerName",
                    "spec.overrideRules[0].overriders.commandOverrider[0].operator",
                ],
            ),
            (
                rule(
                    json!({"labelsOverrider": [{"operator": "add", "value": {"bad key!": "v", "k": "bad value!"}}]}),
                ),
                vec![
                    "spec.overrideRules[0].overriders.labelsOverrider[0].value",
                    "spec.overrideRules[0].overriders.labelsOverrider[0].value.k",
                ],
            ),
            (
                rule(json!({"annotationsOverrider": [{"operator": "upsert", "value": {"a/b/c": "v"}}]})),
                vec![
                    "spec.overrideRules[0].overriders.annotationsOverrider[0].operator",
                    "spec.overrideRules[0].overriders.annotationsOverrider[0].value",
                ],
            ),
            (
                rule(
                    json!({"fieldOverrider": [{"fieldPath": "data/x", "json": [{"subPath": "/a", "operator": "add", "value": 1}],
                    "yaml": [{"subPath": "a", "operator": "remove", "value": 1}]}]}),
                ),
                vec![
                    "spec.overrideRules[0].overriders.fieldOverrider[0].fieldPath",
                    "spec.overrideRules[0].overriders.fieldOverrider[0]",
                    "spec.overrideRules[0].overriders.fieldOverrider[0].yaml[0].subPath",
                    "spec.overrideRules[0].overriders.fieldOverrider[0].yaml[0].value",
                ],
            ),
            (
                rule(json!({"fieldOverrider": [{"fieldPath": "/data/x"}]})),
                vec!["spec.overrideRules[0].overriders.fieldOverrider[0]"],
            ),
            (
                rule(
                    json!({"fieldOverrider": [{"fieldPath": "/data/x", "json": [{"subPath": "/a", "operator": "replace"}]}]}),
                ),
                vec!["spec.overrideRules[0].overriders.fieldOverrider[0].json[0].value"],
            ),
            (
                json!({"overrideRules": [{"targetCluster": {"fieldSelector": {"matchExpressions": [
                    {"key": "color", "operator": "In", "values": ["x"]}]}}, "overriders": {}}]}),
                vec!["spec.overrideRules[0].targetCluster.fieldSelector.matchExpressions[0].key"],
            ),
            (
                json!({"activationPreference": "Eager"}),
                vec!["spec.activationPreference"],
            ),
        ];
        for (spec, expected) in cases {
            assert_eq!(fields(&op("test", spec.clone())), expected, "{spec}");
        }
    }

    #[test]
    fn image_values_accepted() {
        let ok = [
            ("Registry", "replace", "example.com:5000"),
            ("Registry", "replace", "[::1]:5000"),
            ("Registry", "add", ".cn"),
            ("Repository", "replace", "library/nginx"),
            ("Repository", "add", "-debug"),
            ("Tag", "replace", "v1.2.3"),
            (
                "Tag",
                "replace",
                "sha256:dbcc1c35ac38df41fd2f5e4130b32ffdb93ebae8b3dbe638c23575912276fc9c",
            ),
            ("Tag", "add", "-alpine"),
        ];
        for (component, operator, value) in ok {
            let policy = op(
                "ns",
                rule(
                    json!({"imageOverrider": [{"component": component, "operator": operator, "value": value}]}),
                ),
            );
            assert_eq!(
                fields(&policy),
                Vec::<String>::new(),
                "{component} {operator} {value}"
            );
        }
    }

    #[test]
    fn cluster_override_policies_select_any_namespace() {
        let cop: ClusterOverridePolicy = serde_json::from_value(json!({
            "apiVersion": "policy.karmada.io/v1alpha1", "kind": "ClusterOverridePolicy",
            "metadata": {"name": "cop"},
            "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap", "namespace": "anywhere"}]},
        }))
        .unwrap();
        assert_eq!(cop.validate(), Ok(()));
    }

    #[test]
    fn messages_say_how_to_fix() {
        let policy = op(
            "ns",
            rule(json!({"plaintext": [{"path": "spec/replicas", "operator": "replace", "value": 1}]})),
        );
        let message = policy.validate().unwrap_err().to_string();
        assert_eq!(
            message,
            "spec.overrideRules[0].overriders.plaintext[0].path: \"spec/replicas\" is not a JSON pointer: it must \
             start with /, for example /spec/replicas"
        );
    }
}
