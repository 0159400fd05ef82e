//! `policy.karmada.io/v1alpha1` ClusterTaintPolicy (Karmada v1.14): taints added to and removed
//! from Cluster objects when their status conditions match. Field names and semantics are
//! Karmada's (`pkg/apis/policy/v1alpha1/clustertaint_types.go`); flotilla adds a `status` with a
//! `Valid` condition. How execution applies the policies is in `docs/failover.md` and
//! `flotilla_execution::taints`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::policy::ClusterAffinity;

/// The desired behaviour of a ClusterTaintPolicy.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "policy.karmada.io",
    version = "v1alpha1",
    kind = "ClusterTaintPolicy",
    plural = "clustertaintpolicies",
    singular = "clustertaintpolicy",
    category = "karmada-io",
    status = "ClusterTaintPolicyStatus",
    derive = "PartialEq",
    doc = "ClusterTaintPolicy adds taints to the Clusters it targets when their status conditions match addOnConditions, and removes them when they match removeOnConditions. Taints are never removed because the policy is edited or deleted.",
    printcolumn(name = "TAINTS", type_ = "string", json_path = ".status.taints"),
    printcolumn(
        name = "VALID",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Valid\")].status"
    ),
    printcolumn(name = "AGE", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterTaintPolicySpec {
    /// The clusters this policy looks after (same rules as `placement.clusterAffinity`); every
    /// cluster when unset. A cluster that stops matching keeps the taints it has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_clusters: Option<ClusterAffinity>,
    /// When all of these match a cluster's status conditions, the taints are added. Empty:
    /// never added.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub add_on_conditions: Vec<MatchCondition>,
    /// When all of these match a cluster's status conditions, the taints are removed. Empty:
    /// never removed. Evaluated after `addOnConditions`, so removal wins when both match.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remove_on_conditions: Vec<MatchCondition>,
    /// The taints added or removed; at least one, unique by key and effect.
    pub taints: Vec<PolicyTaint>,
}

/// One requirement on a cluster's status condition.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MatchCondition {
    /// The condition type, e.g. `Ready`. A cluster without such a condition never matches.
    pub condition_type: String,
    /// `In` or `NotIn` `statusValues`.
    pub operator: MatchConditionOperator,
    /// Condition statuses: `True`, `False`, `Unknown`.
    pub status_values: Vec<String>,
}

string_enum! {
    /// How a [`MatchCondition`] relates the condition's status to its values.
    pub enum MatchConditionOperator {
        /// The status is one of the values.
        In = "In",
        /// The status is none of the values.
        NotIn = "NotIn",
    }
}

string_enum! {
    /// The effect of a taint (Kubernetes' `TaintEffect`).
    pub enum TaintEffect {
        /// No new placements unless tolerated.
        NoSchedule = "NoSchedule",
        /// New placements avoid the cluster when they can (informational in flotilla).
        PreferNoSchedule = "PreferNoSchedule",
        /// No new placements, and placements that do not tolerate it are evicted.
        NoExecute = "NoExecute",
    }
}

/// A taint a policy adds or removes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PolicyTaint {
    /// The taint key.
    pub key: String,
    /// The taint effect.
    pub effect: TaintEffect,
    /// The taint value; empty for none.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub value: String,
}

/// What flotilla reports about a ClusterTaintPolicy (Karmada's has no status).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterTaintPolicyStatus {
    /// The generation the `Valid` condition describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Valid`: whether the policy is applied (`False`: it is ignored; the message names the
    /// field).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The policy's taints in `kubectl taint` notation (`key[=value]:effect`, comma-separated),
    /// for `kubectl get` (a printer column shows only the first item of a list).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub taints: Option<String>,
}

impl ClusterTaintPolicySpec {
    /// The taints in `kubectl taint` notation, `key[=value]:effect`, comma-separated.
    pub fn taints_summary(&self) -> String {
        self.taints
            .iter()
            .map(|t| {
                if t.value.is_empty() {
                    format!("{}:{}", t.key, t.effect)
                } else {
                    format!("{}={}:{}", t.key, t.value, t.effect)
                }
            })
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Whether the policy has a `NoExecute` taint: with one, NoExecute taints are the policies'
    /// business and execution adds no automatic ones (see `docs/failover.md`).
    pub fn has_no_execute_taint(&self) -> bool {
        self.taints.iter().any(|t| t.effect == TaintEffect::NoExecute)
    }
}
