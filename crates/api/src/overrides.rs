//! `policy.karmada.io/v1alpha1`: OverridePolicy (namespaced) and ClusterOverridePolicy
//! (cluster-scoped), the per-cluster changes applied to a resource template when its Works are
//! rendered. Field names follow Karmada's Go types (`pkg/apis/policy/v1alpha1/override_types.go`)
//! so Karmada YAML applies unchanged; `activationPreference` is flotilla's extension (Karmada
//! issue #7874) and `status` is flotilla's (Karmada's override policies have none).
//!
//! The engine that applies them is the `flotilla-overrides` crate; the semantic checks are in
//! [`crate::validation`].

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::ops::{Deref, DerefMut};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::policy::{ActivationPreference, ClusterAffinity, GenerationRevision, ResourceSelector};

/// The desired behaviour of an OverridePolicy: which templates it changes and how, per cluster.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "policy.karmada.io",
    version = "v1alpha1",
    kind = "OverridePolicy",
    plural = "overridepolicies",
    singular = "overridepolicy",
    shortname = "op",
    category = "karmada-io",
    namespaced,
    status = "OverridePolicyStatus",
    derive = "PartialEq",
    doc = "OverridePolicy changes the resource templates it selects in its own namespace, per member cluster, when they are propagated.",
    printcolumn(
        name = "RESOURCES",
        type_ = "string",
        json_path = ".spec.resourceSelectors[*].kind"
    ),
    printcolumn(
        name = "ACTIVATION",
        type_ = "string",
        json_path = ".spec.activationPreference"
    ),
    printcolumn(
        name = "VALID",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Valid\")].status"
    ),
    printcolumn(name = "AGE", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct OverrideSpec {
    /// The resource templates this policy changes; none means every template in scope (the
    /// policy's namespace for an OverridePolicy, everywhere for a ClusterOverridePolicy).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_selectors: Vec<ResourceSelector>,

    /// The rules, each for the clusters its `targetCluster` selects, applied in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub override_rules: Vec<RuleWithCluster>,

    /// Deprecated (Karmada v1.0): the clusters `overriders` apply to. Cannot be combined with
    /// `overrideRules`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_cluster: Option<ClusterAffinity>,

    /// Deprecated (Karmada v1.0): the overriders of the one rule. Cannot be combined with
    /// `overrideRules`.
    #[serde(default, skip_serializing_if = "Overriders::is_empty")]
    pub overriders: Overriders,

    /// `Lazy` defers the effect of this policy's changes on a template until the template
    /// itself next changes (or `flotilla activate`). flotilla's extension.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub activation_preference: Option<ActivationPreference>,
}

impl OverrideSpec {
    /// The rules in effect: `overrideRules`, or the deprecated `targetCluster` + `overriders`
    /// as one rule when `overrideRules` is empty (Karmada's `getOverridersFromOverridePolicies`).
    pub fn rules(&self) -> Cow<'_, [RuleWithCluster]> {
        if self.override_rules.is_empty() {
            Cow::Owned(vec![RuleWithCluster {
                target_cluster: self.target_cluster.clone(),
                overriders: self.overriders.clone(),
            }])
        } else {
            Cow::Borrowed(&self.override_rules)
        }
    }

    /// Whether the rules come from the deprecated `targetCluster` + `overriders` form.
    pub fn uses_deprecated_form(&self) -> bool {
        self.override_rules.is_empty()
    }

    /// Whether the policy asks for lazy activation.
    pub fn is_lazy(&self) -> bool {
        self.activation_preference == Some(ActivationPreference::Lazy)
    }
}

/// The spec of a ClusterOverridePolicy: the same fields as an OverridePolicy's.
///
/// A newtype only because the CRD derive needs one struct per kind; it dereferences to
/// [`OverrideSpec`] so code handles both kinds alike.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "policy.karmada.io",
    version = "v1alpha1",
    kind = "ClusterOverridePolicy",
    plural = "clusteroverridepolicies",
    singular = "clusteroverridepolicy",
    shortname = "cop",
    category = "karmada-io",
    status = "OverridePolicyStatus",
    derive = "PartialEq",
    doc = "ClusterOverridePolicy changes cluster-scoped templates, and namespaced templates in any namespace, per member cluster, when they are propagated.",
    printcolumn(
        name = "RESOURCES",
        type_ = "string",
        json_path = ".spec.resourceSelectors[*].kind"
    ),
    printcolumn(
        name = "ACTIVATION",
        type_ = "string",
        json_path = ".spec.activationPreference"
    ),
    printcolumn(
        name = "VALID",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Valid\")].status"
    ),
    printcolumn(name = "AGE", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(transparent)]
pub struct ClusterOverrideSpec(pub OverrideSpec);

impl Deref for ClusterOverrideSpec {
    type Target = OverrideSpec;
    fn deref(&self) -> &OverrideSpec {
        &self.0
    }
}

impl DerefMut for ClusterOverrideSpec {
    fn deref_mut(&mut self) -> &mut OverrideSpec {
        &mut self.0
    }
}

impl From<OverrideSpec> for ClusterOverrideSpec {
    fn from(spec: OverrideSpec) -> Self {
        Self(spec)
    }
}

/// Status flotilla maintains on both override policy kinds (written by the detector).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OverridePolicyStatus {
    /// The policy generation the detector last processed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// `Valid` (semantic validation).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,

    /// The write that produced the current `metadata.generation` of the spec: a Lazy policy's
    /// generation applies to templates whose content was written after it
    /// (`docs/overrides.md`, "Lazy activation").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation_revision: Option<GenerationRevision>,
}

/// Override rules for the clusters one `targetCluster` selects.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RuleWithCluster {
    /// The clusters this rule applies to; none means every cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_cluster: Option<ClusterAffinity>,
    /// What the rule changes.
    pub overriders: Overriders,
}

/// The changes of one rule. Within a rule they apply in Karmada's order: `imageOverrider`,
/// `commandOverrider`, `argsOverrider`, `labelsOverrider`, `annotationsOverrider`,
/// `fieldOverrider`, then `plaintext`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Overriders {
    /// JSON patch operations (RFC 6902) on the whole object.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub plaintext: Vec<PlaintextOverrider>,
    /// Changes to container images.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub image_overrider: Vec<ImageOverrider>,
    /// Changes to a container's `command`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command_overrider: Vec<CommandArgsOverrider>,
    /// Changes to a container's `args`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args_overrider: Vec<CommandArgsOverrider>,
    /// Changes to `metadata.labels`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub labels_overrider: Vec<LabelAnnotationOverrider>,
    /// Changes to `metadata.annotations`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub annotations_overrider: Vec<LabelAnnotationOverrider>,
    /// Changes inside a string field holding a JSON or YAML document (a ConfigMap key, say).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub field_overrider: Vec<FieldOverrider>,
}

impl Overriders {
    /// Whether no overrider is set.
    pub fn is_empty(&self) -> bool {
        self == &Overriders::default()
    }
}

string_enum! {
    /// An overrider's operation.
    pub enum OverriderOperator {
        /// Add (JSON patch `add`; append for lists; set for maps).
        Add = "add",
        /// Remove.
        Remove = "remove",
        /// Replace an existing value.
        Replace = "replace",
    }
}

string_enum! {
    /// A command or args overrider's operation (no `replace`).
    pub enum CommandArgsOperator {
        /// Append the values.
        Add = "add",
        /// Remove every item equal to one of the values.
        Remove = "remove",
    }
}

string_enum! {
    /// The part of an image reference `[registry/]repository[:tag|@digest]` an image overrider
    /// changes.
    pub enum ImageComponent {
        /// The registry host (and port), e.g. `registry.k8s.io` or `example.com:5000`.
        Registry = "Registry",
        /// The repository path, e.g. `library/nginx`.
        Repository = "Repository",
        /// The tag or digest, e.g. `1.25` or `sha256:...`.
        Tag = "Tag",
    }
}

/// One JSON patch operation on the whole object.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlaintextOverrider {
    /// JSON pointer (RFC 6901) of the target field, e.g. `/spec/replicas`.
    pub path: String,
    /// `add`, `remove` or `replace`.
    pub operator: OverriderOperator,
    /// The value to add or replace with; unused by `remove`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::any_json")]
    pub value: Option<serde_json::Value>,
}

/// Changes one component of container images.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageOverrider {
    /// Only the image at this path; without it, every container image of a Pod, ReplicaSet,
    /// Deployment, DaemonSet, StatefulSet or Job (`spec.containers` or
    /// `spec.template.spec.containers`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicate: Option<ImagePredicate>,
    /// `Registry`, `Repository` or `Tag`.
    pub component: ImageComponent,
    /// `add` (append to the component), `remove` or `replace`.
    pub operator: OverriderOperator,
    /// The value to append or replace with; must be empty for `remove`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub value: String,
}

/// Selects the one image an image overrider changes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImagePredicate {
    /// Path of the image field, e.g. `/spec/template/spec/initContainers/0/image`.
    pub path: String,
}

/// Changes the `command` or `args` of one container.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommandArgsOverrider {
    /// The container's name.
    pub container_name: String,
    /// `add` (append) or `remove` (every item equal to one of the values).
    pub operator: CommandArgsOperator,
    /// The items to append or remove.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub value: Vec<String>,
}

/// Changes `metadata.labels` or `metadata.annotations`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LabelAnnotationOverrider {
    /// `add` (set), `remove` (keys that exist) or `replace` (keys that exist).
    pub operator: OverriderOperator,
    /// The keys and values.
    pub value: BTreeMap<String, String>,
}

/// Changes inside a string field that holds a JSON or YAML document.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FieldOverrider {
    /// JSON pointer of the string field, e.g. `/data/config.yaml`.
    pub field_path: String,
    /// Operations on the field's JSON document. Set this or `yaml`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub json: Vec<SubDocumentOperation>,
    /// Operations on the field's YAML document. Set this or `json`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub yaml: Vec<SubDocumentOperation>,
}

/// One operation inside a field overrider's document (Karmada's `JSONPatchOperation` and
/// `YAMLPatchOperation`, which are the same).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubDocumentOperation {
    /// JSON pointer inside the document, e.g. `/app/database/port`.
    pub sub_path: String,
    /// `add`, `remove` or `replace`.
    pub operator: OverriderOperator,
    /// The value to add or replace with; must be absent for `remove`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::any_json")]
    pub value: Option<serde_json::Value>,
}

/// One override policy generation in effect for a binding: an entry of the binding annotation
/// `flotilla.io/overrides` the detector writes (the override content execution renders the
/// binding's Works with; see `docs/overrides.md`, "What is in effect").
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OverrideSnapshot {
    /// ClusterOverridePolicy or OverridePolicy.
    pub kind: OverridePolicyKind,
    /// The OverridePolicy's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The policy's name.
    pub name: String,
    /// The policy's uid (a policy deleted and created again is another policy).
    pub uid: String,
    /// The policy generation this is.
    pub generation: i64,
    /// That generation's spec.
    pub spec: OverrideSpec,
}

impl OverrideSnapshot {
    /// `<uid>/<generation>`.
    pub fn generation_ref(&self) -> String {
        format!("{}/{}", self.uid, self.generation)
    }

    /// Reads the `flotilla.io/overrides` annotation; a value that does not parse reads as no
    /// entries (the detector writes it again).
    pub fn parse_annotation(value: Option<&str>) -> Vec<OverrideSnapshot> {
        value
            .and_then(|v| serde_json::from_str(v).ok())
            .unwrap_or_default()
    }

    /// The `flotilla.io/overrides` annotation value for `entries` (`None` when empty).
    pub fn annotation_value(entries: &[OverrideSnapshot]) -> Option<String> {
        if entries.is_empty() {
            return None;
        }
        serde_json::to_string(entries).ok()
    }
}

/// Which kind of override policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum OverridePolicyKind {
    /// A ClusterOverridePolicy (applied first).
    ClusterOverridePolicy,
    /// An OverridePolicy (applied after every ClusterOverridePolicy).
    OverridePolicy,
}

impl OverridePolicyKind {
    /// The kind's name.
    pub fn as_str(self) -> &'static str {
        match self {
            OverridePolicyKind::ClusterOverridePolicy => "ClusterOverridePolicy",
            OverridePolicyKind::OverridePolicy => "OverridePolicy",
        }
    }
}

impl std::fmt::Display for OverridePolicyKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    /// Karmada's documented example applies unchanged and round-trips.
    #[test]
    fn karmada_yaml_round_trips() {
        let yaml = r#"
apiVersion: policy.karmada.io/v1alpha1
kind: OverridePolicy
metadata:
  name: example
  namespace: test
spec:
  resourceSelectors:
    - apiVersion: apps/v1
      kind: Deployment
      name: nginx
  overrideRules:
    - targetCluster:
        clusterNames: [member1]
      overriders:
        imageOverrider:
          - component: Registry
            operator: replace
            value: fictional.registry.us
        plaintext:
          - path: /spec/replicas
            operator: replace
            value: 3
        fieldOverrider:
          - fieldPath: /data/config.yaml
            yaml:
              - subPath: /app/database/port
                operator: replace
                value: "3306"
"#;
        let policy: OverridePolicy = serde_yaml::from_str(yaml).unwrap();
        let rule = &policy.spec.override_rules[0];
        assert_eq!(
            rule.target_cluster.as_ref().unwrap().cluster_names,
            vec!["member1"]
        );
        assert_eq!(
            rule.overriders.image_overrider[0].component,
            ImageComponent::Registry
        );
        assert_eq!(rule.overriders.plaintext[0].value, Some(json!(3)));
        assert_eq!(
            rule.overriders.field_overrider[0].yaml[0].value,
            Some(json!("3306"))
        );
        let back = serde_json::to_value(&policy).unwrap();
        let again: OverridePolicy = serde_json::from_value(back).unwrap();
        assert_eq!(again, policy);
    }

    #[test]
    fn deprecated_form_is_one_rule() {
        let spec: OverrideSpec = serde_json::from_value(json!({
            "targetCluster": {"clusterNames": ["member2"]},
            "overriders": {"labelsOverrider": [{"operator": "add", "value": {"a": "b"}}]},
        }))
        .unwrap();
        assert!(spec.uses_deprecated_form());
        let rules = spec.rules();
        assert_eq!(rules.len(), 1);
        assert_eq!(
            rules[0].target_cluster.as_ref().unwrap().cluster_names,
            vec!["member2"]
        );
        assert_eq!(rules[0].overriders.labels_overrider.len(), 1);
        // With overrideRules, those are the rules.
        let spec = OverrideSpec {
            override_rules: vec![RuleWithCluster::default(), RuleWithCluster::default()],
            ..Default::default()
        };
        assert_eq!(spec.rules().len(), 2);
    }

    #[test]
    fn unknown_operators_survive_for_validation_to_report() {
        let overrider: PlaintextOverrider =
            serde_json::from_value(json!({"path": "/x", "operator": "move"})).unwrap();
        assert_eq!(overrider.operator, OverriderOperator::Other("move".into()));
        assert!(!overrider.operator.is_known());
    }
}
