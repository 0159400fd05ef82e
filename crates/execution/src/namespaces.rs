//! Namespace auto-propagation (as Karmada's namespace sync controller): every control-plane
//! namespace that is not reserved (`kube-*`, `karmada-*`, `flotilla-system`), not `default`
//! (every cluster has its own) and not labelled `namespace.karmada.io/skip-auto-propagation:
//! "true"` gets a Work in every member cluster, so a namespaced template in a new namespace lands
//! without extra steps. Namespace Works take existing member namespaces over
//! (`conflictResolution: Overwrite`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;

use flotilla_api::well_known::{
    NAMESPACE_SKIP_AUTO_PROPAGATION_LABEL, execution_namespace, is_reserved_namespace,
};
use flotilla_api::work::WorkloadTemplate;
use flotilla_api::{ConflictResolution, WorkSpec};
use k8s_openapi::api::core::v1::Namespace;
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;
use serde_json::{Value, json};

use crate::context::Context;
use crate::dispatch::{apply_work, cached_works_named, delete_work, needs_write};
use crate::error::{ExecutionError, ManifestError};
use crate::manifest::{ClusterShare, prepare_manifest};
use crate::metrics::metrics;
use crate::naming::namespace_work_name;
use crate::overrides::{ClusterFailures, OverrideInputs, current_policies};
use crate::works::DesiredWork;
use flotilla_api::well_known::reasons;
use flotilla_overrides::APPLIED_CLUSTER_OVERRIDES_ANNOTATION;
use kube::Resource;
use kube::runtime::events::EventType;

/// Label on a namespace's Works: the control-plane namespace they propagate.
pub const PROPAGATED_NAMESPACE_LABEL: &str = "flotilla.io/propagated-namespace";

/// Whether a control-plane namespace is propagated to member clusters.
pub fn should_propagate(namespace: &Namespace) -> bool {
    let name = namespace.name_any();
    namespace.metadata.deletion_timestamp.is_none()
        && !is_reserved_namespace(&name)
        && name != "default"
        && namespace
            .labels()
            .get(NAMESPACE_SKIP_AUTO_PROPAGATION_LABEL)
            .map(String::as_str)
            != Some("true")
}

/// The manifest of a namespace's Work: name, labels and annotations (no spec or status),
/// prepared like any template.
pub fn namespace_manifest(namespace: &Namespace) -> Result<Value, ManifestError> {
    let template = json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": namespace.name_any(),
            "labels": namespace.metadata.labels,
            "annotations": namespace.metadata.annotations,
        },
    });
    let mut manifest = prepare_manifest(
        &template,
        &ClusterShare::default(),
        &ConflictResolution::Overwrite,
    )?;
    if let Some(metadata) = manifest.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.retain(|_, v| !v.is_null());
    }
    Ok(manifest)
}

/// The Works namespace `namespace` needs, one per cluster in `clusters`, with the
/// ClusterOverridePolicies in `overrides` applied per cluster (as Karmada's namespace sync
/// does); the rules that failed come back beside them.
pub fn desired_namespace_works(
    namespace: &Namespace,
    clusters: &BTreeSet<String>,
    overrides: &OverrideInputs,
) -> Result<(Vec<DesiredWork>, ClusterFailures), ManifestError> {
    if !should_propagate(namespace) {
        return Ok((Vec::new(), Vec::new()));
    }
    let manifest = namespace_manifest(namespace)?;
    let name = namespace.name_any();
    let mut failures = Vec::new();
    let works = clusters
        .iter()
        .map(|cluster| {
            let mut annotations = BTreeMap::new();
            let mut manifest = manifest.clone();
            if !overrides.policies.is_empty() {
                let rendered =
                    flotilla_overrides::render(&manifest, &overrides.cluster(cluster), &overrides.policies);
                manifest = rendered.manifest;
                if let Some(applied) = rendered.applied_cluster_overrides {
                    annotations.insert(APPLIED_CLUSTER_OVERRIDES_ANNOTATION.to_owned(), applied);
                }
                failures.extend(rendered.failures.into_iter().map(|f| (cluster.clone(), f)));
            }
            DesiredWork {
                cluster: cluster.clone(),
                namespace: execution_namespace(cluster),
                name: namespace_work_name(&name),
                labels: BTreeMap::from([(PROPAGATED_NAMESPACE_LABEL.to_owned(), name.clone())]),
                annotations,
                spec: WorkSpec {
                    workload: WorkloadTemplate {
                        manifests: vec![manifest],
                    },
                    suspend_dispatching: Some(false),
                    preserve_resources_on_deletion: Some(false),
                },
            }
        })
        .collect();
    Ok((works, failures))
}

/// Makes namespace `name`'s Works match the registered clusters.
pub async fn reconcile_namespace(ctx: &Arc<Context>, name: &str) -> Result<(), ExecutionError> {
    if !ctx.owns(&crate::context::namespace_shard(name)) {
        return Ok(());
    }
    let started = Instant::now();
    let result = reconcile(ctx, name).await;
    metrics().reconciled("namespace", result.is_ok(), started.elapsed());
    result
}

async fn reconcile(ctx: &Arc<Context>, name: &str) -> Result<(), ExecutionError> {
    let clusters: BTreeSet<String> = ctx
        .stores
        .clusters
        .state()
        .iter()
        .filter(|c| c.metadata.deletion_timestamp.is_none())
        .map(|c| c.name_any())
        .collect();
    let policies = current_policies(
        &ctx.stores.override_policies.state(),
        &ctx.stores.cluster_override_policies.state(),
        None,
    );
    let overrides = OverrideInputs {
        clusters: if policies.is_empty() {
            BTreeMap::new()
        } else {
            ctx.stores
                .clusters
                .state()
                .iter()
                .map(|c| (c.name_any(), flotilla_overrides::ClusterFacts::of(c)))
                .collect()
        },
        policies,
    };
    let namespace = ctx.stores.namespaces.get(&ObjectRef::new(name));
    let (desired, failures) = match &namespace {
        Some(namespace) => desired_namespace_works(namespace, &clusters, &overrides).map_err(|source| {
            ExecutionError::Manifest {
                object: format!("Namespace {name}"),
                source,
            }
        })?,
        None => (Vec::new(), Vec::new()),
    };
    let existing: BTreeMap<String, Arc<crate::cache::CachedWork>> =
        cached_works_named(ctx, &namespace_work_name(name))
            .into_iter()
            .filter(|(_, w)| w.propagated_namespace() == Some(name))
            .collect();
    for work in &desired {
        if needs_write(existing.get(&work.cluster).map(Arc::as_ref), work) {
            // Its cluster's worker takes it from the Work watch, as a binding's Works.
            apply_work(ctx, work, None).await?;
            // Reported with the write that skipped them (a namespace has no status to hold a
            // condition).
            for (cluster, failure) in failures.iter().filter(|(c, _)| *c == work.cluster) {
                tracing::warn!(namespace = name, cluster, "override rule skipped: {failure}");
                if let Some(namespace) = &namespace {
                    ctx.event(
                        &namespace.object_ref(&()),
                        EventType::Warning,
                        reasons::APPLY_OVERRIDE_POLICY_FAILED,
                        "ApplyOverrides",
                        format!("cluster {cluster}: {failure}"),
                    )
                    .await;
                }
            }
        }
    }
    let wanted: BTreeSet<&str> = desired.iter().map(|w| w.cluster.as_str()).collect();
    for (cluster, work) in &existing {
        if !wanted.contains(cluster.as_str()) {
            delete_work(ctx, work.namespace(), work.name(), work.deleting).await?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use pretty_assertions::assert_eq;

    use super::*;

    fn namespace(name: &str, labels: &[(&str, &str)]) -> Namespace {
        Namespace {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                uid: Some("ns-uid".to_owned()),
                resource_version: Some("9".to_owned()),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                        .collect(),
                ),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn which_namespaces_propagate() {
        assert!(should_propagate(&namespace("team-a", &[])));
        for reserved in ["kube-system", "karmada-es-member1", "flotilla-system", "default"] {
            assert!(!should_propagate(&namespace(reserved, &[])), "{reserved}");
        }
        assert!(!should_propagate(&namespace(
            "private",
            &[("namespace.karmada.io/skip-auto-propagation", "true")]
        )));
        assert!(should_propagate(&namespace(
            "public",
            &[("namespace.karmada.io/skip-auto-propagation", "false")]
        )));
        let mut deleting = namespace("going", &[]);
        deleting.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
        ));
        assert!(!should_propagate(&deleting));
    }

    #[test]
    fn one_work_per_cluster_with_a_clean_namespace_manifest() {
        let clusters: BTreeSet<String> = ["member1", "member2"].iter().map(|c| (*c).to_owned()).collect();
        let (works, _) = desired_namespace_works(
            &namespace("team-a", &[("team", "a")]),
            &clusters,
            &OverrideInputs::default(),
        )
        .unwrap();
        assert_eq!(works.len(), 2);
        assert_eq!(works[1].namespace, "karmada-es-member2");
        assert_eq!(works[0].name, namespace_work_name("team-a"));
        assert_eq!(
            works[0]
                .labels
                .get(PROPAGATED_NAMESPACE_LABEL)
                .map(String::as_str),
            Some("team-a")
        );
        assert_eq!(
            works[0].spec.workload.manifests[0],
            json!({
                "apiVersion": "v1", "kind": "Namespace",
                "metadata": {
                    "name": "team-a",
                    "labels": {"team": "a"},
                    "annotations": {"work.karmada.io/conflict-resolution": "overwrite"},
                },
            })
        );
        assert!(
            desired_namespace_works(
                &namespace("kube-public", &[]),
                &clusters,
                &OverrideInputs::default()
            )
            .unwrap()
            .0
            .is_empty()
        );
    }
}
