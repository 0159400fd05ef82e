//! `cluster.karmada.io/v1alpha1`: Cluster, a member cluster registered with the control plane.

use k8s_openapi::api::core::v1::Taint;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// API group of Cluster.
pub const GROUP: &str = "cluster.karmada.io";
/// API version of Cluster.
pub const VERSION: &str = "v1alpha1";

/// Key of the bearer token in a cluster's credentials Secret.
pub const SECRET_TOKEN_KEY: &str = "token";
/// Key of the CA bundle (PEM) in a cluster's credentials Secret.
pub const SECRET_CA_DATA_KEY: &str = "caBundle";

/// A member cluster: how to reach it and what it offers.
///
/// Labels on the Cluster object (not in the spec) are what `clusterAffinity.labelSelector`
/// matches.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "cluster.karmada.io",
    version = "v1alpha1",
    kind = "Cluster",
    plural = "clusters",
    singular = "cluster",
    category = "karmada-io",
    status = "ClusterStatus",
    derive = "PartialEq",
    doc = "Cluster is a member cluster that flotilla propagates resources to.",
    printcolumn(name = "VERSION", type_ = "string", json_path = ".status.kubernetesVersion"),
    printcolumn(name = "MODE", type_ = "string", json_path = ".spec.syncMode"),
    printcolumn(
        name = "READY",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(name = "AGE", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSpec {
    /// Unique identifier of the cluster (e.g. the kube-system namespace UID).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// `Push` (the control plane applies to the member) or `Pull` (an agent pulls). flotilla
    /// implements `Push`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync_mode: Option<ClusterSyncMode>,
    /// The member's API server URL.
    #[serde(rename = "apiEndpoint", default, skip_serializing_if = "Option::is_none")]
    pub api_endpoint: Option<String>,
    /// Secret holding `token` and optionally `caBundle` for the member's API server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<LocalSecretReference>,
    /// Secret for impersonation (Karmada compatibility; unused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub impersonator_secret_ref: Option<LocalSecretReference>,
    /// Skip TLS verification of the member's API server.
    #[serde(
        default,
        rename = "insecureSkipTLSVerification",
        skip_serializing_if = "std::ops::Not::not"
    )]
    pub insecure_skip_tls_verification: bool,
    /// Proxy URL (Karmada compatibility; unused).
    #[serde(default, rename = "proxyURL", skip_serializing_if = "Option::is_none")]
    pub proxy_url: Option<String>,
    /// Cloud provider, matched by `fieldSelector` key `provider`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// Region, matched by `fieldSelector` key `region`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// Zone, matched by `fieldSelector` key `zone`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// Zones.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub zones: Vec<String>,
    /// Taints; only templates whose placement tolerates them are scheduled here.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,
}

string_enum! {
    /// How a member cluster is synchronised.
    pub enum ClusterSyncMode {
        /// The control plane applies to the member.
        Push = "Push",
        /// An agent in the member pulls.
        Pull = "Pull",
    }
}

/// A reference to a Secret in a given namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LocalSecretReference {
    /// Namespace of the Secret.
    pub namespace: String,
    /// Name of the Secret.
    pub name: String,
}

/// The observed state of a member cluster.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterStatus {
    /// The member's Kubernetes version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes_version: Option<String>,
    /// The member's API groups and resources.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub api_enablements: Vec<ApiEnablement>,
    /// `Ready` and further conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// The resources of one group/version served by a member.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApiEnablement {
    /// Group/version, e.g. `apps/v1`.
    pub group_version: String,
    /// The resources.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<ApiResourceName>,
}

/// One served resource.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApiResourceName {
    /// Plural resource name.
    pub name: String,
    /// Kind.
    pub kind: String,
}
