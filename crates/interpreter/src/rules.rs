//! Declarative dependency rules: which objects a kind references, for kinds the built-in
//! interpreter does not know (CRDs) or knows only in part. The format is documented in the
//! crate docs; [`DependencyRules::from_yaml`] validates a document completely and reports every
//! problem with its rule index and field.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::error::{RuleProblem, RulesError};
use crate::json_path::JsonPath;

/// `apiVersion` of a rules document.
pub const RULES_API_VERSION: &str = "flotilla.io/v1alpha1";
/// `kind` of a rules document.
pub const RULES_KIND: &str = "DependencyRules";

/// Dependency rules per workload kind, on top of the built-in ones.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DependencyRules {
    by_kind: BTreeMap<(String, String), Rule>,
}

/// The rule for one workload kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Rule {
    /// Where the kind holds pod templates (`PodTemplateSpec`s).
    pub(crate) pod_template_paths: Vec<JsonPath>,
    /// Explicit references.
    pub(crate) references: Vec<Reference>,
}

/// One explicit reference of a rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Reference {
    /// API version of the referenced objects.
    pub(crate) api_version: String,
    /// Kind of the referenced objects.
    pub(crate) kind: String,
    /// Where their names are.
    pub(crate) name_paths: Vec<JsonPath>,
    /// Where their namespace is, if not the workload's.
    pub(crate) namespace_path: Option<JsonPath>,
    /// The referenced kind is cluster-scoped: references carry no namespace.
    pub(crate) cluster_scoped: bool,
}

impl DependencyRules {
    /// No rules beyond the built-in ones.
    pub fn builtin() -> Self {
        Self::default()
    }

    /// Loads and validates a `flotilla.io/v1alpha1` `DependencyRules` document (YAML or JSON).
    ///
    /// Unknown fields, missing or empty `apiVersion`/`kind`, bad paths, a rule with nothing to
    /// do, and two rules for the same kind are all errors; every problem is reported.
    pub fn from_yaml(text: &str) -> Result<Self, RulesError> {
        let document: Value = serde_yaml::from_str(text)
            .map_err(|err| RulesError::single("(document)", format!("is not valid YAML: {err}")))?;
        let mut problems = Problems::default();
        let rules = parse_document(&document, &mut problems);
        if problems.0.is_empty() {
            Ok(rules)
        } else {
            Err(RulesError { problems: problems.0 })
        }
    }

    /// Whether there are no rules beyond the built-in ones.
    pub fn is_empty(&self) -> bool {
        self.by_kind.is_empty()
    }

    /// The `(apiVersion, kind)` pairs that have a rule, sorted.
    pub fn kinds(&self) -> impl Iterator<Item = (&str, &str)> {
        self.by_kind.keys().map(|(v, k)| (v.as_str(), k.as_str()))
    }

    /// The rule for a workload kind.
    pub(crate) fn rule(&self, api_version: &str, kind: &str) -> Option<&Rule> {
        self.by_kind.get(&(api_version.to_owned(), kind.to_owned()))
    }
}

#[derive(Default)]
struct Problems(Vec<RuleProblem>);

impl Problems {
    fn push(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.0.push(RuleProblem {
            field: field.into(),
            message: message.into(),
        });
    }
}

fn type_of(value: &Value) -> &'static str {
    crate::node::type_name(value)
}

/// Reports every key of `map` not in `allowed`.
fn check_keys(path: &str, map: &Map<String, Value>, allowed: &[&str], problems: &mut Problems) {
    for key in map.keys() {
        if !allowed.contains(&key.as_str()) {
            let field = if path.is_empty() {
                key.clone()
            } else {
                format!("{path}.{key}")
            };
            problems.push(
                field,
                format!("unknown field; remove it (allowed here: {})", allowed.join(", ")),
            );
        }
    }
}

/// A required non-empty string field; reports and returns `None` when it is not one.
fn required_string(
    path: &str,
    map: &Map<String, Value>,
    key: &str,
    example: &str,
    problems: &mut Problems,
) -> Option<String> {
    let field = format!("{path}.{key}");
    match map.get(key) {
        None | Some(Value::Null) => {
            problems.push(field, format!("is required, for example {example}"));
            None
        }
        Some(Value::String(text)) if text.trim().is_empty() => {
            problems.push(field, format!("must not be empty; set it, for example {example}"));
            None
        }
        Some(Value::String(text)) => Some(text.clone()),
        Some(other) => {
            problems.push(
                field,
                format!("expected a string, got {}; for example {example}", type_of(other)),
            );
            None
        }
    }
}

/// Checks that `api_version` looks like `v1` or `group/version`.
fn check_api_version(field: &str, api_version: &str, problems: &mut Problems) {
    let version = match api_version.split_once('/') {
        Some((group, version)) if !group.is_empty() && !group.contains('/') => version,
        Some(_) => "",
        None => api_version,
    };
    if version.is_empty() || version.contains('/') || version.contains(char::is_whitespace) {
        problems.push(
            field,
            format!("{api_version:?} is not <version> or <group>/<version>, for example v1 or example.io/v1"),
        );
    }
}

/// A list of paths; reports each bad entry by index.
fn path_list(field: &str, value: &Value, problems: &mut Problems) -> Vec<JsonPath> {
    let Some(items) = value.as_array() else {
        problems.push(
            field,
            format!(
                "expected a list of paths, got {}; for example [\".spec.template\"]",
                type_of(value)
            ),
        );
        return Vec::new();
    };
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let item_field = format!("{field}[{i}]");
        match item.as_str() {
            Some(text) => match JsonPath::parse(text) {
                Ok(path) => out.push(path),
                Err(message) => problems.push(item_field, message),
            },
            None => problems.push(
                item_field,
                format!("expected a path string, got {}", type_of(item)),
            ),
        }
    }
    out
}

fn parse_document(document: &Value, problems: &mut Problems) -> DependencyRules {
    let mut rules = DependencyRules::default();
    let Some(map) = document.as_object() else {
        problems.push(
            "(document)",
            format!(
                "expected an object with apiVersion: {RULES_API_VERSION}, kind: {RULES_KIND} and rules, got {}",
                type_of(document)
            ),
        );
        return rules;
    };
    check_keys("", map, &["apiVersion", "kind", "metadata", "rules"], problems);
    match map.get("apiVersion").and_then(Value::as_str) {
        Some(RULES_API_VERSION) => {}
        _ => problems.push("apiVersion", format!("must be {RULES_API_VERSION}")),
    }
    match map.get("kind").and_then(Value::as_str) {
        Some(RULES_KIND) => {}
        _ => problems.push("kind", format!("must be {RULES_KIND}")),
    }
    let items = match map.get("rules") {
        None | Some(Value::Null) => {
            problems.push("rules", "is required: list one rule per workload kind");
            return rules;
        }
        Some(Value::Array(items)) => items,
        Some(other) => {
            problems.push(
                "rules",
                format!("expected a list of rules, got {}", type_of(other)),
            );
            return rules;
        }
    };
    let mut first_index: BTreeMap<(String, String), usize> = BTreeMap::new();
    for (i, item) in items.iter().enumerate() {
        let path = format!("rules[{i}]");
        let Some((key, rule)) = parse_rule(&path, item, problems) else {
            continue;
        };
        if let Some(first) = first_index.get(&key) {
            problems.push(
                path,
                format!(
                    "duplicates rules[{first}] for {} {}: merge the two rules into one",
                    key.0, key.1
                ),
            );
            continue;
        }
        first_index.insert(key.clone(), i);
        rules.by_kind.insert(key, rule);
    }
    rules
}

fn parse_rule(path: &str, item: &Value, problems: &mut Problems) -> Option<((String, String), Rule)> {
    let Some(map) = item.as_object() else {
        problems.push(path, format!("expected a rule object, got {}", type_of(item)));
        return None;
    };
    let before = problems.0.len();
    check_keys(
        path,
        map,
        &["apiVersion", "kind", "podTemplatePaths", "references"],
        problems,
    );
    let api_version = required_string(path, map, "apiVersion", "example.io/v1", problems);
    if let Some(api_version) = &api_version {
        check_api_version(&format!("{path}.apiVersion"), api_version, problems);
    }
    let kind = required_string(path, map, "kind", "Workflow", problems);
    let pod_template_paths = match map.get("podTemplatePaths") {
        None | Some(Value::Null) => Vec::new(),
        Some(value) => path_list(&format!("{path}.podTemplatePaths"), value, problems),
    };
    let mut references = Vec::new();
    match map.get("references") {
        None | Some(Value::Null) => {}
        Some(Value::Array(items)) => {
            for (j, item) in items.iter().enumerate() {
                if let Some(reference) = parse_reference(&format!("{path}.references[{j}]"), item, problems) {
                    references.push(reference);
                }
            }
        }
        Some(other) => problems.push(
            format!("{path}.references"),
            format!("expected a list of references, got {}", type_of(other)),
        ),
    }
    let has_paths = map
        .get("podTemplatePaths")
        .and_then(Value::as_array)
        .is_some_and(|v| !v.is_empty());
    let has_references = map
        .get("references")
        .and_then(Value::as_array)
        .is_some_and(|v| !v.is_empty());
    if !has_paths && !has_references {
        problems.push(
            path,
            "has neither podTemplatePaths nor references: add at least one, or remove the rule",
        );
    }
    if problems.0.len() > before {
        return None;
    }
    Some((
        (api_version?, kind?),
        Rule {
            pod_template_paths,
            references,
        },
    ))
}

fn parse_reference(path: &str, item: &Value, problems: &mut Problems) -> Option<Reference> {
    let Some(map) = item.as_object() else {
        problems.push(
            path,
            format!("expected a reference object, got {}", type_of(item)),
        );
        return None;
    };
    let before = problems.0.len();
    check_keys(
        path,
        map,
        &[
            "apiVersion",
            "kind",
            "namePaths",
            "namespacePath",
            "clusterScoped",
        ],
        problems,
    );
    let api_version = required_string(path, map, "apiVersion", "v1", problems);
    if let Some(api_version) = &api_version {
        check_api_version(&format!("{path}.apiVersion"), api_version, problems);
    }
    let kind = required_string(path, map, "kind", "ConfigMap", problems);
    let name_paths = match map.get("namePaths") {
        None | Some(Value::Null) => {
            problems.push(
                format!("{path}.namePaths"),
                "is required: list where the referenced names are, for example [\".spec.configRef.name\"]",
            );
            Vec::new()
        }
        Some(value) => {
            let paths = path_list(&format!("{path}.namePaths"), value, problems);
            if value.as_array().is_some_and(Vec::is_empty) {
                problems.push(
                    format!("{path}.namePaths"),
                    "must not be empty: list where the referenced names are, for example [\".spec.configRef.name\"]",
                );
            }
            paths
        }
    };
    let namespace_path = match map.get("namespacePath") {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => match JsonPath::parse(text) {
            Ok(parsed) if parsed.has_wildcard() => {
                problems.push(
                    format!("{path}.namespacePath"),
                    format!("{text:?} uses [*]: the namespace path must reach one value; use a field path or an index such as [0]"),
                );
                None
            }
            Ok(parsed) => Some(parsed),
            Err(message) => {
                problems.push(format!("{path}.namespacePath"), message);
                None
            }
        },
        Some(other) => {
            problems.push(
                format!("{path}.namespacePath"),
                format!("expected a path string, got {}", type_of(other)),
            );
            None
        }
    };
    let cluster_scoped = match map.get("clusterScoped") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(flag)) => *flag,
        Some(other) => {
            problems.push(
                format!("{path}.clusterScoped"),
                format!("expected true or false, got {}", type_of(other)),
            );
            false
        }
    };
    if cluster_scoped && namespace_path.is_some() {
        problems.push(
            format!("{path}.namespacePath"),
            "cannot be combined with clusterScoped: true (cluster-scoped objects have no namespace); remove one",
        );
    }
    if problems.0.len() > before {
        return None;
    }
    Some(Reference {
        api_version: api_version?,
        kind: kind?,
        name_paths,
        namespace_path,
        cluster_scoped,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn problems(text: &str) -> Vec<String> {
        DependencyRules::from_yaml(text)
            .unwrap_err()
            .problems
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    const HEADER: &str = "apiVersion: flotilla.io/v1alpha1\nkind: DependencyRules\n";

    #[test]
    fn builtin_has_no_rules() {
        assert!(DependencyRules::builtin().is_empty());
        assert_eq!(DependencyRules::builtin(), DependencyRules::default());
    }

    #[test]
    fn loads_a_valid_document() {
        let text = format!(
            "{HEADER}metadata:\n  name: x\nrules:\n\
             - apiVersion: example.io/v1\n  kind: Workflow\n  podTemplatePaths: [\".spec.template\"]\n  references:\n\
             \x20 - apiVersion: v1\n    kind: ConfigMap\n    namePaths: [\".spec.configRef.name\", \".spec.steps[*].configMap\"]\n    namespacePath: .spec.configRef.namespace\n\
             \x20 - apiVersion: storage.k8s.io/v1\n    kind: StorageClass\n    namePaths: [.spec.storageClass]\n    clusterScoped: true\n\
             - apiVersion: apps/v1\n  kind: Deployment\n  references:\n  - {{apiVersion: v1, kind: Secret, namePaths: [.metadata.annotations.tls]}}\n"
        );
        let rules = DependencyRules::from_yaml(&text).unwrap();
        let kinds: Vec<_> = rules.kinds().collect();
        assert_eq!(
            kinds,
            vec![("apps/v1", "Deployment"), ("example.io/v1", "Workflow")]
        );
        let rule = rules.rule("example.io/v1", "Workflow").unwrap();
        assert_eq!(rule.pod_template_paths.len(), 1);
        assert_eq!(rule.references.len(), 2);
        assert_eq!(rule.references[0].name_paths.len(), 2);
        assert!(rule.references[0].namespace_path.is_some());
        assert!(rule.references[1].cluster_scoped);
    }

    #[test]
    fn json_documents_load_too() {
        let text = r#"{"apiVersion":"flotilla.io/v1alpha1","kind":"DependencyRules","rules":[
            {"apiVersion":"example.io/v1","kind":"Job","podTemplatePaths":[".spec.template"]}]}"#;
        assert!(DependencyRules::from_yaml(text).is_ok());
    }

    #[test]
    fn rejects_bad_headers() {
        assert_eq!(
            problems("apiVersion: v1\nkind: ConfigMap\nrules: []\n"),
            vec![
                "apiVersion: must be flotilla.io/v1alpha1".to_owned(),
                "kind: must be DependencyRules".to_owned()
            ]
        );
        assert_eq!(
            problems(HEADER),
            vec!["rules: is required: list one rule per workload kind".to_owned()]
        );
        assert_eq!(
            problems(&format!("{HEADER}rules: {{}}\n")),
            vec!["rules: expected a list of rules, got an object".to_owned()]
        );
        assert_eq!(
            problems(&format!("{HEADER}rules: []\nextra: 1\n")),
            vec![
                "extra: unknown field; remove it (allowed here: apiVersion, kind, metadata, rules)"
                    .to_owned()
            ]
        );
        assert!(problems("- a\n- b\n")[0].starts_with("(document): expected an object"));
        assert!(problems("rules: [\n")[0].starts_with("(document): is not valid YAML"));
    }

    #[test]
    fn rejects_unknown_fields_in_rules_and_references() {
        let text = format!(
            "{HEADER}rules:\n- apiVersion: example.io/v1\n  kind: W\n  podTemplatePath: [.spec.template]\n  references:\n  - {{apiVersion: v1, kind: ConfigMap, namePaths: [.a], name: x}}\n"
        );
        let got = problems(&text);
        assert_eq!(
            got,
            vec![
                "rules[0].podTemplatePath: unknown field; remove it (allowed here: apiVersion, kind, podTemplatePaths, references)".to_owned(),
                "rules[0].references[0].name: unknown field; remove it (allowed here: apiVersion, kind, namePaths, namespacePath, clusterScoped)".to_owned(),
            ]
        );
    }

    #[test]
    fn rejects_missing_and_empty_kinds() {
        let text = format!(
            "{HEADER}rules:\n- apiVersion: example.io/v1\n  kind: \"\"\n  podTemplatePaths: [.spec.template]\n- kind: W\n  podTemplatePaths: [.spec.template]\n- apiVersion: 3\n  kind: W2\n  podTemplatePaths: [.spec.template]\n"
        );
        assert_eq!(
            problems(&text),
            vec![
                "rules[0].kind: must not be empty; set it, for example Workflow".to_owned(),
                "rules[1].apiVersion: is required, for example example.io/v1".to_owned(),
                "rules[2].apiVersion: expected a string, got a number; for example example.io/v1".to_owned(),
            ]
        );
    }

    #[test]
    fn rejects_bad_api_versions() {
        for bad in ["a/b/c", "/v1", "example.io/"] {
            let text = format!(
                "{HEADER}rules:\n- apiVersion: \"{bad}\"\n  kind: W\n  podTemplatePaths: [.spec.template]\n"
            );
            let got = problems(&text);
            assert_eq!(got.len(), 1, "{bad}: {got:?}");
            assert!(got[0].starts_with("rules[0].apiVersion:"), "{got:?}");
            assert!(
                got[0].contains("is not <version> or <group>/<version>"),
                "{got:?}"
            );
        }
    }

    #[test]
    fn rejects_bad_paths() {
        let text = format!(
            "{HEADER}rules:\n- apiVersion: example.io/v1\n  kind: W\n  podTemplatePaths: [spec.template, 3]\n  references:\n  - apiVersion: v1\n    kind: ConfigMap\n    namePaths: [\".spec.steps[x]\"]\n    namespacePath: \".spec.items[*].ns\"\n"
        );
        let got = problems(&text);
        assert_eq!(got.len(), 4, "{got:?}");
        assert!(got[0].starts_with("rules[0].podTemplatePaths[0]: \"spec.template\" must start with '.'"));
        assert_eq!(
            got[1],
            "rules[0].podTemplatePaths[1]: expected a path string, got a number"
        );
        assert!(got[2].starts_with(
            "rules[0].references[0].namePaths[0]: \".spec.steps[x]\" has [x]: only [*] and list indexes such as [0] are supported"
        ));
        assert!(got[3].starts_with("rules[0].references[0].namespacePath: \".spec.items[*].ns\" uses [*]"));
    }

    #[test]
    fn rejects_rules_and_references_with_nothing_to_do() {
        let text = format!(
            "{HEADER}rules:\n- apiVersion: example.io/v1\n  kind: W\n- apiVersion: example.io/v1\n  kind: X\n  references:\n  - {{apiVersion: v1, kind: ConfigMap}}\n  - {{apiVersion: v1, kind: ConfigMap, namePaths: []}}\n"
        );
        assert_eq!(
            problems(&text),
            vec![
                "rules[0]: has neither podTemplatePaths nor references: add at least one, or remove the rule".to_owned(),
                "rules[1].references[0].namePaths: is required: list where the referenced names are, for example [\".spec.configRef.name\"]".to_owned(),
                "rules[1].references[1].namePaths: must not be empty: list where the referenced names are, for example [\".spec.configRef.name\"]".to_owned(),
            ]
        );
    }

    #[test]
    fn rejects_duplicate_kinds() {
        let text = format!(
            "{HEADER}rules:\n- {{apiVersion: example.io/v1, kind: W, podTemplatePaths: [.spec.a]}}\n- {{apiVersion: example.io/v1, kind: W2, podTemplatePaths: [.spec.a]}}\n- {{apiVersion: example.io/v1, kind: W, podTemplatePaths: [.spec.b]}}\n"
        );
        assert_eq!(
            problems(&text),
            vec![
                "rules[2]: duplicates rules[0] for example.io/v1 W: merge the two rules into one".to_owned()
            ]
        );
    }

    #[test]
    fn rejects_bad_reference_shapes() {
        let text = format!(
            "{HEADER}rules:\n- apiVersion: example.io/v1\n  kind: W\n  references:\n  - x\n  - {{apiVersion: v1, kind: Secret, namePaths: .a}}\n  - {{apiVersion: v1, kind: Secret, namePaths: [.a], clusterScoped: \"yes\"}}\n  - {{apiVersion: v1, kind: Secret, namePaths: [.a], clusterScoped: true, namespacePath: .b}}\n  - {{apiVersion: v1, kind: Secret, namePaths: [.a], namespacePath: 4}}\n- {{apiVersion: example.io/v1, kind: X, references: {{}}}}\n- 7\n"
        );
        assert_eq!(
            problems(&text),
            vec![
                "rules[0].references[0]: expected a reference object, got a string".to_owned(),
                "rules[0].references[1].namePaths: expected a list of paths, got a string; for example [\".spec.template\"]".to_owned(),
                "rules[0].references[2].clusterScoped: expected true or false, got a string".to_owned(),
                "rules[0].references[3].namespacePath: cannot be combined with clusterScoped: true (cluster-scoped objects have no namespace); remove one".to_owned(),
                "rules[0].references[4].namespacePath: expected a path string, got a number".to_owned(),
                "rules[1].references: expected a list of references, got an object".to_owned(),
                "rules[1]: has neither podTemplatePaths nor references: add at least one, or remove the rule".to_owned(),
                "rules[2]: expected a rule object, got a number".to_owned(),
            ]
        );
    }

    #[test]
    fn error_display_lists_every_problem() {
        let err = DependencyRules::from_yaml("apiVersion: x\nkind: y\nrules: []\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid DependencyRules: apiVersion: must be flotilla.io/v1alpha1; kind: must be DependencyRules"
        );
    }
}
