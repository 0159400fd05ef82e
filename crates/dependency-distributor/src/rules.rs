//! Declarative dependency rules and where they come from: the `--dependency-rules FILE` flag
//! and the ConfigMap `flotilla-system/flotilla-dependency-rules` (key `rules.yaml`), both in
//! the `flotilla.io/v1alpha1 DependencyRules` format of [`flotilla_interpreter`].
//!
//! - Both sources are optional. When both define a rule for the same workload kind, the
//!   ConfigMap's wins: the file is the installation's baseline, the ConfigMap the operator's
//!   runtime adjustment.
//! - Each source is validated on its own, so an error names the source and the field.
//! - A source that becomes invalid keeps its last good rules; the error is surfaced (log, a
//!   Warning event on the ConfigMap, the `flotilla_dependency_rules_valid` metric and the
//!   `dependency-rules` line of `/readyz?verbose`) until it is fixed. Invalid rules at start
//!   mean that source contributes nothing yet; the service runs with the built-in rules.
//! - A source that disappears (file deleted, ConfigMap deleted) contributes nothing.

use std::fmt;

use flotilla_api::well_known::SYSTEM_NAMESPACE;
use flotilla_interpreter::{DependencyRules, RULES_API_VERSION, RULES_KIND};
use serde_json::{Value, json};

/// Namespace of the rules ConfigMap.
pub const CONFIG_MAP_NAMESPACE: &str = SYSTEM_NAMESPACE;
/// Name of the rules ConfigMap.
pub const CONFIG_MAP_NAME: &str = "flotilla-dependency-rules";
/// The ConfigMap key holding the rules document.
pub const CONFIG_MAP_KEY: &str = "rules.yaml";

/// Where rules come from.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Source {
    /// The `--dependency-rules` file at this path.
    File(String),
    /// The ConfigMap `flotilla-system/flotilla-dependency-rules`.
    ConfigMap,
}

impl Source {
    /// The metric label of the source.
    pub fn label(&self) -> &'static str {
        match self {
            Source::File(_) => "file",
            Source::ConfigMap => "configmap",
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::File(path) => write!(f, "--dependency-rules file {path}"),
            Source::ConfigMap => write!(
                f,
                "ConfigMap {CONFIG_MAP_NAMESPACE}/{CONFIG_MAP_NAME} key {CONFIG_MAP_KEY}"
            ),
        }
    }
}

#[derive(Clone, Debug, Default)]
struct SourceState {
    /// The text last seen (`None`: the source is absent).
    text: Option<String>,
    /// The rules of the last valid text, as a parsed document.
    last_good: Option<Value>,
    /// Why the text last seen is invalid.
    error: Option<String>,
}

/// The outcome of [`RulesSet::update`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Update {
    /// The effective rules changed: every binding's dependencies must be recomputed.
    pub changed: bool,
    /// The new text is invalid (message names the source and every problem).
    pub error: Option<String>,
}

/// The effective rules and the state of each source.
#[derive(Clone, Debug)]
pub struct RulesSet {
    file: SourceState,
    config_map: SourceState,
    effective: DependencyRules,
    /// How many times the rules in force changed: dependencies read under another generation
    /// are read again (see [`crate::index::Index::settled`]).
    generation: u64,
}

impl Default for RulesSet {
    fn default() -> Self {
        Self {
            file: SourceState::default(),
            config_map: SourceState::default(),
            effective: DependencyRules::builtin(),
            generation: 0,
        }
    }
}

/// Reads the ConfigMap's rules text: `Ok(None)` when the ConfigMap has no rules key is an error
/// too, so the operator learns about a misnamed key.
pub fn config_map_text(data: Option<&std::collections::BTreeMap<String, String>>) -> Result<String, String> {
    match data.and_then(|d| d.get(CONFIG_MAP_KEY)) {
        Some(text) => Ok(text.clone()),
        None => {
            let keys: Vec<&str> = data
                .map(|d| d.keys().map(String::as_str).collect())
                .unwrap_or_default();
            Err(format!(
                "{}: has no data key {CONFIG_MAP_KEY} (keys: [{}]); put the DependencyRules document under data.\"{CONFIG_MAP_KEY}\"",
                Source::ConfigMap,
                keys.join(", ")
            ))
        }
    }
}

impl RulesSet {
    /// Built-in rules only.
    pub fn new() -> Self {
        Self::default()
    }

    /// The rules in force.
    pub fn rules(&self) -> &DependencyRules {
        &self.effective
    }

    /// Which rules are in force: it moves each time they change.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The current error of each source that has one.
    pub fn errors(&self) -> Vec<String> {
        [&self.file, &self.config_map]
            .into_iter()
            .filter_map(|s| s.error.clone())
            .collect()
    }

    /// Whether `source`'s latest text is valid (an absent source is valid).
    pub fn is_valid(&self, source: &Source) -> bool {
        self.state(source).error.is_none()
    }

    fn state(&self, source: &Source) -> &SourceState {
        match source {
            Source::File(_) => &self.file,
            Source::ConfigMap => &self.config_map,
        }
    }

    fn state_mut(&mut self, source: &Source) -> &mut SourceState {
        match source {
            Source::File(_) => &mut self.file,
            Source::ConfigMap => &mut self.config_map,
        }
    }

    /// Records `source`'s current content (`Ok(None)`: the source is absent; `Err`: it exists
    /// but its content cannot be read, e.g. a ConfigMap without the rules key).
    pub fn update(&mut self, source: &Source, content: Result<Option<String>, String>) -> Update {
        let state = self.state_mut(source);
        match content {
            Ok(text) => {
                if state.text == text
                    && state.error.is_none()
                    && (text.is_none() || state.last_good.is_some())
                {
                    return Update {
                        changed: false,
                        error: None,
                    };
                }
                match &text {
                    None => {
                        state.last_good = None;
                        state.error = None;
                    }
                    Some(body) => match parse(body) {
                        Ok(document) => {
                            state.last_good = Some(document);
                            state.error = None;
                        }
                        Err(message) => {
                            state.error = Some(format!("{source}: {message}; keeping the last good rules"));
                        }
                    },
                }
                state.text = text;
            }
            Err(message) => {
                state.text = None;
                state.error = Some(format!("{message}; keeping the last good rules"));
            }
        }
        let error = self.state(source).error.clone();
        let changed = self.recompute();
        Update { changed, error }
    }

    /// Rebuilds the effective rules from each source's last good document; returns whether
    /// they changed.
    fn recompute(&mut self) -> bool {
        let overriding: Vec<(String, String)> = rule_list(self.config_map.last_good.as_ref())
            .iter()
            .filter_map(rule_kind)
            .collect();
        let mut rules: Vec<Value> = rule_list(self.file.last_good.as_ref())
            .into_iter()
            .filter(|rule| rule_kind(rule).is_none_or(|kind| !overriding.contains(&kind)))
            .collect();
        rules.extend(rule_list(self.config_map.last_good.as_ref()));
        let combined = if rules.is_empty() {
            Ok(DependencyRules::builtin())
        } else {
            let document = json!({"apiVersion": RULES_API_VERSION, "kind": RULES_KIND, "rules": rules});
            DependencyRules::from_yaml(&document.to_string())
        };
        match combined {
            Ok(rules) => {
                let changed = rules != self.effective;
                self.effective = rules;
                if changed {
                    self.generation += 1;
                }
                changed
            }
            // Each source validated on its own and per-kind duplicates were removed, so this
            // cannot fail; if it ever does, the rules in force stay.
            Err(error) => {
                tracing::error!(%error, "combining the dependency rules sources failed; keeping the rules in force");
                false
            }
        }
    }
}

/// Validates a rules document and returns it parsed.
fn parse(text: &str) -> Result<Value, String> {
    DependencyRules::from_yaml(text).map_err(|e| e.to_string())?;
    serde_yaml::from_str::<Value>(text).map_err(|e| format!("is not valid YAML: {e}"))
}

fn rule_list(document: Option<&Value>) -> Vec<Value> {
    document
        .and_then(|d| d.get("rules"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn rule_kind(rule: &Value) -> Option<(String, String)> {
    Some((
        rule.get("apiVersion")?.as_str()?.to_owned(),
        rule.get("kind")?.as_str()?.to_owned(),
    ))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use flotilla_interpreter::dependencies;

    use super::*;

    const HEADER: &str = "apiVersion: flotilla.io/v1alpha1\nkind: DependencyRules\n";

    fn rule(kind: &str, path: &str) -> String {
        format!(
            "{HEADER}rules:\n- apiVersion: example.io/v1\n  kind: {kind}\n  references:\n  - apiVersion: v1\n    kind: ConfigMap\n    namePaths: [\"{path}\"]\n"
        )
    }

    fn workflow(kind: &str) -> Value {
        json!({
            "apiVersion": "example.io/v1", "kind": kind,
            "metadata": {"namespace": "ns", "name": "w"},
            "spec": {"a": "from-a", "b": "from-b"},
        })
    }

    fn names(set: &RulesSet, kind: &str) -> Vec<String> {
        dependencies(&workflow(kind), set.rules())
            .unwrap()
            .into_iter()
            .map(|d| d.name)
            .collect()
    }

    fn file() -> Source {
        Source::File("/etc/flotilla/rules.yaml".into())
    }

    #[test]
    fn starts_with_builtin_rules() {
        let set = RulesSet::new();
        assert!(set.rules().is_empty());
        assert!(set.errors().is_empty());
        assert!(set.is_valid(&Source::ConfigMap));
    }

    #[test]
    fn loads_and_replaces_rules() {
        let mut set = RulesSet::new();
        let update = set.update(&Source::ConfigMap, Ok(Some(rule("Workflow", ".spec.a"))));
        assert_eq!(
            update,
            Update {
                changed: true,
                error: None
            }
        );
        assert_eq!(names(&set, "Workflow"), vec!["from-a"]);
        assert_eq!(set.generation(), 1);
        // The same text again changes nothing, generation included.
        assert!(
            !set.update(&Source::ConfigMap, Ok(Some(rule("Workflow", ".spec.a"))))
                .changed
        );
        assert_eq!(set.generation(), 1);
        assert!(
            set.update(&Source::ConfigMap, Ok(Some(rule("Workflow", ".spec.b"))))
                .changed
        );
        assert_eq!(names(&set, "Workflow"), vec!["from-b"]);
        assert_eq!(set.generation(), 2);
        // Deleting the ConfigMap removes its rules.
        assert!(set.update(&Source::ConfigMap, Ok(None)).changed);
        assert!(names(&set, "Workflow").is_empty());
        assert_eq!(set.generation(), 3);
    }

    #[test]
    fn invalid_rules_keep_the_last_good_ones_and_name_the_source() {
        let mut set = RulesSet::new();
        set.update(&Source::ConfigMap, Ok(Some(rule("Workflow", ".spec.a"))));
        let bad = format!(
            "{HEADER}rules:\n- apiVersion: example.io/v1\n  kind: Workflow\n  references:\n  - apiVersion: v1\n    kind: ConfigMap\n    namePaths: [\"spec.a\"]\n"
        );
        let generation = set.generation();
        let update = set.update(&Source::ConfigMap, Ok(Some(bad)));
        assert!(!update.changed);
        assert_eq!(
            set.generation(),
            generation,
            "rejected rules leave the rules in force"
        );
        let error = update.error.unwrap();
        assert!(
            error.starts_with(
                "ConfigMap flotilla-system/flotilla-dependency-rules key rules.yaml: invalid DependencyRules: rules[0].references[0].namePaths[0]:"
            ),
            "{error}"
        );
        assert!(error.ends_with("; keeping the last good rules"), "{error}");
        assert_eq!(names(&set, "Workflow"), vec!["from-a"]);
        assert!(!set.is_valid(&Source::ConfigMap));
        assert_eq!(set.errors().len(), 1);
        // Fixing it clears the error.
        let update = set.update(&Source::ConfigMap, Ok(Some(rule("Workflow", ".spec.b"))));
        assert_eq!(
            update,
            Update {
                changed: true,
                error: None
            }
        );
        assert!(set.errors().is_empty());
    }

    #[test]
    fn invalid_rules_at_start_leave_the_builtin_rules() {
        let mut set = RulesSet::new();
        let update = set.update(&file(), Ok(Some("rules: [\n".into())));
        assert!(!update.changed);
        assert!(
            update
                .error
                .unwrap()
                .starts_with("--dependency-rules file /etc/flotilla/rules.yaml: invalid DependencyRules: (document): is not valid YAML"),
        );
        assert!(set.rules().is_empty());
        // The same invalid text again is still invalid (and still reported).
        assert!(set.update(&file(), Ok(Some("rules: [\n".into()))).error.is_some());
    }

    #[test]
    fn the_config_map_overrides_the_file_per_kind() {
        let mut set = RulesSet::new();
        let both = format!(
            "{HEADER}rules:\n- apiVersion: example.io/v1\n  kind: Workflow\n  references:\n  - {{apiVersion: v1, kind: ConfigMap, namePaths: [.spec.a]}}\n- apiVersion: example.io/v1\n  kind: Pipeline\n  references:\n  - {{apiVersion: v1, kind: ConfigMap, namePaths: [.spec.a]}}\n"
        );
        set.update(&file(), Ok(Some(both)));
        set.update(&Source::ConfigMap, Ok(Some(rule("Workflow", ".spec.b"))));
        assert_eq!(names(&set, "Workflow"), vec!["from-b"]);
        assert_eq!(names(&set, "Pipeline"), vec!["from-a"]);
        set.update(&Source::ConfigMap, Ok(None));
        assert_eq!(names(&set, "Workflow"), vec!["from-a"]);
    }

    #[test]
    fn unreadable_config_maps_are_errors() {
        let mut data = BTreeMap::new();
        data.insert("rules.yml".to_owned(), "x".to_owned());
        let error = config_map_text(Some(&data)).unwrap_err();
        assert_eq!(
            error,
            "ConfigMap flotilla-system/flotilla-dependency-rules key rules.yaml: has no data key rules.yaml (keys: [rules.yml]); put the DependencyRules document under data.\"rules.yaml\""
        );
        let mut set = RulesSet::new();
        set.update(&Source::ConfigMap, Ok(Some(rule("Workflow", ".spec.a"))));
        let update = set.update(&Source::ConfigMap, Err(error));
        assert!(update.error.is_some());
        assert!(!update.changed, "the last good rules stay");
        assert_eq!(names(&set, "Workflow"), vec!["from-a"]);
        data.insert(CONFIG_MAP_KEY.to_owned(), "y".to_owned());
        assert_eq!(config_map_text(Some(&data)).unwrap(), "y");
        assert!(config_map_text(None).is_err());
    }
}
