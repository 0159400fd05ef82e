//! Dependencies: the objects a template references and that must follow it to its clusters
//! (Karmada's `dependencies.go` and `helper/pod.go`, extended with PersistentVolume CSI secrets
//! and declarative rules).

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::InterpretError;
use crate::kind::Kind;
use crate::node::{Node, describe};
use crate::rules::{DependencyRules, Rule};

/// A resource a workload references.
///
/// Serializes like Karmada's `DependentObjectReference` (`apiVersion`, `kind`, `namespace`,
/// `name`), so a list of these is the value of the `resourcebinding.karmada.io/dependencies`
/// annotation.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DependencyRef {
    /// API version of the referenced object, e.g. `v1`.
    pub api_version: String,
    /// Kind of the referenced object, e.g. `ConfigMap`.
    pub kind: String,
    /// Namespace of the referenced object; `None` for cluster-scoped objects (and for
    /// references from cluster-scoped workloads that do not say a namespace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Name of the referenced object.
    pub name: String,
}

/// The kinds a pod template can reference.
const CONFIG_MAP: &str = "ConfigMap";
const SECRET: &str = "Secret";
const PVC: &str = "PersistentVolumeClaim";
const SERVICE_ACCOUNT: &str = "ServiceAccount";

/// Volume sources whose secret reference is `<source>.secretRef.name` (Karmada's
/// `VisitPodSecretNames`).
const SECRET_REF_VOLUME_SOURCES: &[&str] = &[
    "cephfs",
    "cinder",
    "flexVolume",
    "iscsi",
    "rbd",
    "scaleIO",
    "storageos",
];

/// The secret references of a CSI PersistentVolume source.
const PV_CSI_SECRET_REFS: &[&str] = &[
    "controllerPublishSecretRef",
    "nodeStageSecretRef",
    "nodePublishSecretRef",
    "controllerExpandSecretRef",
    "nodeExpandSecretRef",
];

/// The dependencies of a template, from its raw form (overrides are not applied), sorted and
/// without duplicates.
///
/// Built in, for `apps/v1` Deployment, StatefulSet, DaemonSet, ReplicaSet, `batch/v1` Job,
/// CronJob (`spec.jobTemplate.spec.template`) and `v1` Pod, over `containers`,
/// `initContainers` and `ephemeralContainers` (Karmada's `GetDependenciesFromPodTemplate`):
///
/// - ConfigMaps: volumes' `configMap.name`, projected `sources[].configMap.name`,
///   `env[].valueFrom.configMapKeyRef.name`, `envFrom[].configMapRef.name`;
/// - Secrets: volumes' `secret.secretName`, projected `sources[].secret.name`,
///   `csi.nodePublishSecretRef.name`, `azureFile.secretName`, and `secretRef.name` of `cephfs`,
///   `cinder`, `flexVolume`, `iscsi`, `rbd`, `scaleIO`, `storageos`;
///   `env[].valueFrom.secretKeyRef.name`, `envFrom[].secretRef.name`, `imagePullSecrets[].name`;
/// - PersistentVolumeClaims: volumes' `persistentVolumeClaim.claimName` (generic `ephemeral`
///   volumes are not dependencies: the pod creates their claims). For a StatefulSet, a claim
///   named like one of its `volumeClaimTemplates` is not a dependency either: the StatefulSet
///   creates it in each member (Karmada's `getStatefulSetDependencies`);
/// - the ServiceAccount named by `serviceAccountName`, or by the deprecated `serviceAccount`
///   when `serviceAccountName` is unset (the API server copies one into the other), unless it is
///   `default` or empty.
///
/// References marked `optional: true` are dependencies all the same, as in Karmada: if the
/// object exists it must follow the workload, or the pods would behave differently in members.
/// Every reference takes the workload's namespace. Empty names are skipped.
///
/// Also built in: `networking.k8s.io/v1` Ingress depends on its `spec.tls[].secretName`
/// Secrets (Karmada's `getIngressDependencies`), and, beyond Karmada, a `v1` PersistentVolume
/// depends on the Secrets its `spec.csi` names in `controllerPublishSecretRef`,
/// `nodeStageSecretRef`, `nodePublishSecretRef`, `controllerExpandSecretRef` and
/// `nodeExpandSecretRef` (`{name, namespace}`; the namespace is required there).
///
/// `rules` add pod-template paths and explicit references for any kind; a rule for a built-in
/// kind adds to the built-in references.
///
/// A field of the wrong type (`volumes: "x"`) is an error naming it; a missing field is simply
/// no dependency.
pub fn dependencies(obj: &Value, rules: &DependencyRules) -> Result<Vec<DependencyRef>, InterpretError> {
    let object = describe(obj);
    let root = Node::root(obj, &object);
    root.object_map()?;
    let api_version = root.opt_str("apiVersion")?.unwrap_or("");
    let kind_name = root.opt_str("kind")?.unwrap_or("");
    let namespace = match root.descend(&["metadata", "namespace"])? {
        Some(node) => Some(node.as_str()?).filter(|ns| !ns.is_empty()),
        None => None,
    };
    let mut found = Found {
        namespace,
        refs: BTreeSet::new(),
    };
    let kind = Kind::from_parts(api_version, kind_name);
    if let Some(path) = kind.and_then(Kind::pod_spec_path) {
        if let Some(spec) = root.descend(path)? {
            pod_spec_dependencies(&spec, &mut found)?;
        }
        if kind == Some(Kind::StatefulSet) {
            drop_volume_claim_templates(&root, &mut found)?;
        }
    }
    match kind {
        Some(Kind::Ingress) => {
            if let Some(spec) = root.field("spec")? {
                for tls in spec.list("tls")? {
                    found.add(SECRET, tls.opt_name("secretName")?);
                }
            }
        }
        Some(Kind::PersistentVolume) => persistent_volume_dependencies(&root, &mut found)?,
        _ => {}
    }
    if let Some(rule) = rules.rule(api_version, kind_name) {
        apply_rule(rule, &root, &mut found)?;
    }
    Ok(found.refs.into_iter().collect())
}

/// References collected so far, with the namespace they default to.
struct Found<'a> {
    namespace: Option<&'a str>,
    refs: BTreeSet<DependencyRef>,
}

impl Found<'_> {
    /// Adds a core `v1` reference in the workload's namespace; `None` names are skipped.
    fn add(&mut self, kind: &str, name: Option<&str>) {
        let namespace = self.namespace.map(str::to_owned);
        self.add_full("v1", kind, namespace, name);
    }

    fn add_full(&mut self, api_version: &str, kind: &str, namespace: Option<String>, name: Option<&str>) {
        let Some(name) = name.filter(|n| !n.is_empty()) else {
            return;
        };
        self.refs.insert(DependencyRef {
            api_version: api_version.to_owned(),
            kind: kind.to_owned(),
            namespace,
            name: name.to_owned(),
        });
    }
}

/// The references of one `PodSpec`.
fn pod_spec_dependencies(spec: &Node<'_>, found: &mut Found<'_>) -> Result<(), InterpretError> {
    for secret in spec.list("imagePullSecrets")? {
        found.add(SECRET, secret.opt_name("name")?);
    }
    for list in ["containers", "initContainers", "ephemeralContainers"] {
        for container in spec.list(list)? {
            container_dependencies(&container, found)?;
        }
    }
    for volume in spec.list("volumes")? {
        volume_dependencies(&volume, found)?;
    }
    let service_account = match spec.opt_name("serviceAccountName")? {
        Some(name) => Some(name),
        None => spec.opt_name("serviceAccount")?,
    };
    found.add(SERVICE_ACCOUNT, service_account.filter(|name| *name != "default"));
    Ok(())
}

fn container_dependencies(container: &Node<'_>, found: &mut Found<'_>) -> Result<(), InterpretError> {
    for source in container.list("envFrom")? {
        if let Some(config_map) = source.field("configMapRef")? {
            found.add(CONFIG_MAP, config_map.opt_name("name")?);
        }
        if let Some(secret) = source.field("secretRef")? {
            found.add(SECRET, secret.opt_name("name")?);
        }
    }
    for env in container.list("env")? {
        let Some(value_from) = env.field("valueFrom")? else {
            continue;
        };
        if let Some(key_ref) = value_from.field("configMapKeyRef")? {
            found.add(CONFIG_MAP, key_ref.opt_name("name")?);
        }
        if let Some(key_ref) = value_from.field("secretKeyRef")? {
            found.add(SECRET, key_ref.opt_name("name")?);
        }
    }
    Ok(())
}

fn volume_dependencies(volume: &Node<'_>, found: &mut Found<'_>) -> Result<(), InterpretError> {
    if let Some(config_map) = volume.field("configMap")? {
        found.add(CONFIG_MAP, config_map.opt_name("name")?);
    }
    if let Some(secret) = volume.field("secret")? {
        found.add(SECRET, secret.opt_name("secretName")?);
    }
    if let Some(projected) = volume.field("projected")? {
        for source in projected.list("sources")? {
            if let Some(config_map) = source.field("configMap")? {
                found.add(CONFIG_MAP, config_map.opt_name("name")?);
            }
            if let Some(secret) = source.field("secret")? {
                found.add(SECRET, secret.opt_name("name")?);
            }
        }
    }
    if let Some(claim) = volume.field("persistentVolumeClaim")? {
        found.add(PVC, claim.opt_name("claimName")?);
    }
    if let Some(csi) = volume.field("csi")?
        && let Some(secret_ref) = csi.field("nodePublishSecretRef")?
    {
        found.add(SECRET, secret_ref.opt_name("name")?);
    }
    if let Some(azure_file) = volume.field("azureFile")? {
        found.add(SECRET, azure_file.opt_name("secretName")?);
    }
    for source in SECRET_REF_VOLUME_SOURCES {
        if let Some(secret_ref) = volume.descend(&[source, "secretRef"])? {
            found.add(SECRET, secret_ref.opt_name("name")?);
        }
    }
    Ok(())
}

/// Removes claims a StatefulSet creates itself from its `volumeClaimTemplates`.
fn drop_volume_claim_templates(root: &Node<'_>, found: &mut Found<'_>) -> Result<(), InterpretError> {
    let Some(spec) = root.field("spec")? else {
        return Ok(());
    };
    let mut templates = BTreeSet::new();
    for template in spec.list("volumeClaimTemplates")? {
        if let Some(name) = template.descend(&["metadata", "name"])? {
            templates.insert(name.as_str()?);
        }
    }
    found
        .refs
        .retain(|dep| !(dep.kind == PVC && dep.api_version == "v1" && templates.contains(dep.name.as_str())));
    Ok(())
}

/// The Secrets a cluster-scoped CSI PersistentVolume references, each with its own namespace.
fn persistent_volume_dependencies(root: &Node<'_>, found: &mut Found<'_>) -> Result<(), InterpretError> {
    let Some(csi) = root.descend(&["spec", "csi"])? else {
        return Ok(());
    };
    for field in PV_CSI_SECRET_REFS {
        let Some(secret_ref) = csi.field(field)? else {
            continue;
        };
        let Some(name) = secret_ref.opt_name("name")? else {
            continue;
        };
        let Some(namespace) = secret_ref.opt_name("namespace")? else {
            return Err(InterpretError::InvalidValue {
                object: root.object().to_owned(),
                path: format!("{}.namespace", secret_ref.path()),
                message: format!(
                    "is required: a PersistentVolume is cluster-scoped, so the Secret {name:?} it references must name its namespace"
                ),
            });
        };
        found.add_full("v1", SECRET, Some(namespace.to_owned()), Some(name));
    }
    Ok(())
}

fn apply_rule(rule: &Rule, root: &Node<'_>, found: &mut Found<'_>) -> Result<(), InterpretError> {
    for path in &rule.pod_template_paths {
        for template in path.resolve(root)? {
            if let Some(spec) = template.field("spec")? {
                pod_spec_dependencies(&spec, found)?;
            }
        }
    }
    for reference in &rule.references {
        let namespace = if reference.cluster_scoped {
            None
        } else {
            let from_path = match &reference.namespace_path {
                Some(path) => match path.resolve(root)?.first() {
                    Some(node) => Some(node.as_str()?).filter(|ns| !ns.is_empty()),
                    None => None,
                },
                None => None,
            };
            from_path.or(found.namespace)
        };
        for path in &reference.name_paths {
            for node in path.resolve(root)? {
                found.add_full(
                    &reference.api_version,
                    &reference.kind,
                    namespace.map(str::to_owned),
                    Some(node.as_str()?),
                );
            }
        }
    }
    Ok(())
}
