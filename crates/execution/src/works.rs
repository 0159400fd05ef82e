//! From a scheduled binding to its Works: which Works must exist, with what spec, and which go
//! (pure; the binding controller does the writes).
//!
//! Dispatch suspension is decided here per cluster (`binding.spec.suspension.effective()`),
//! into `Work.spec.suspendDispatching`. A suspended cluster's Work keeps being updated with the
//! latest desired state (users inspect it; seed Story 4), and a Work whose cluster left the
//! placement while that cluster is suspended is kept until dispatching resumes.
//!
//! Failover: a cluster the binding is being evicted from (`spec.gracefulEvictionTasks`) keeps
//! its Work, as it is, while the task lasts, unless the task's purge mode is `Directly` (or
//! `Immediately`): then the Work is deleted at once, and, as in Karmada ("delete the old ones
//! first, then create the new ones"), no Work of the binding is created or updated until it is
//! gone. Suspension wins over both: a suspended cluster's Work is kept, and does not hold the
//! others back.

use std::collections::{BTreeMap, BTreeSet};

use flotilla_api::policy::{EffectiveSuspension, ReplicaSchedulingType};
use flotilla_api::well_known::{
    CLUSTER_RESOURCE_BINDING_NAME_ANNOTATION, CLUSTER_RESOURCE_BINDING_PERMANENT_ID_LABEL,
    RESOURCE_BINDING_NAME_ANNOTATION, RESOURCE_BINDING_NAMESPACE_ANNOTATION,
    RESOURCE_BINDING_PERMANENT_ID_LABEL, execution_namespace,
};
use flotilla_api::work::WorkloadTemplate;
use flotilla_api::{ResourceBindingSpec, Work, WorkSpec};
use flotilla_overrides::{APPLIED_CLUSTER_OVERRIDES_ANNOTATION, APPLIED_OVERRIDES_ANNOTATION};
use serde_json::Value;

use crate::error::ManifestError;
use crate::manifest::{ClusterShare, Revision, prepare_manifest};
use crate::naming::work_name;
use crate::overrides::OverrideInputs;

/// Annotation on a Work written by executions before the applied revisions moved into
/// `status.manifestStatuses[].appliedRevision` (still read, never written): the revision last applied per manifest,
/// `<ordinal>=<generation>/<hash>` joined by `,`. It lets `--apply-once-only=force` remember that
/// a revision was applied after the member object is gone.
pub const APPLIED_REVISIONS_ANNOTATION: &str = "flotilla.io/applied-revisions";

/// The finalizer execution keeps on bindings: their Works are deleted first. Bindings are
/// created with it; execution adds it to one created without.
pub const BINDING_FINALIZER: &str = flotilla_api::well_known::BINDING_CONTROLLER_FINALIZER;
/// The finalizer execution puts on Works: their member objects are deleted first (unless
/// `preserveResourcesOnDeletion`).
pub const WORK_FINALIZER: &str = "karmada.io/execution-controller";

/// Which kind of binding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BindingKind {
    /// A namespaced ResourceBinding.
    ResourceBinding,
    /// A cluster-scoped ClusterResourceBinding.
    ClusterResourceBinding,
}

impl BindingKind {
    /// The label that carries the binding's uid on its Works.
    pub fn permanent_id_label(self) -> &'static str {
        match self {
            BindingKind::ResourceBinding => RESOURCE_BINDING_PERMANENT_ID_LABEL,
            BindingKind::ClusterResourceBinding => CLUSTER_RESOURCE_BINDING_PERMANENT_ID_LABEL,
        }
    }
}

/// A binding as far as Work planning needs it.
#[derive(Clone, Copy, Debug)]
pub struct BindingView<'a> {
    /// Kind.
    pub kind: BindingKind,
    /// Namespace; empty for a ClusterResourceBinding.
    pub namespace: &'a str,
    /// Name.
    pub name: &'a str,
    /// UID (the Works' permanent-id label).
    pub uid: &'a str,
    /// Spec.
    pub spec: &'a ResourceBindingSpec,
}

impl BindingView<'_> {
    /// The permanent-id label key of this kind of binding.
    pub fn permanent_id_label(&self) -> &'static str {
        self.kind.permanent_id_label()
    }

    /// The suspension the binding asks for, aliases resolved.
    pub fn suspension(&self) -> EffectiveSuspension {
        self.spec
            .suspension
            .as_ref()
            .map(|s| s.effective())
            .unwrap_or_default()
    }

    /// The labels every Work of this binding carries.
    pub fn work_labels(&self) -> BTreeMap<String, String> {
        BTreeMap::from([(self.permanent_id_label().to_owned(), self.uid.to_owned())])
    }

    /// The annotations every Work of this binding carries (the traceparent is added by the
    /// writer).
    pub fn work_annotations(&self) -> BTreeMap<String, String> {
        match self.kind {
            BindingKind::ResourceBinding => BTreeMap::from([
                (
                    RESOURCE_BINDING_NAMESPACE_ANNOTATION.to_owned(),
                    self.namespace.to_owned(),
                ),
                (RESOURCE_BINDING_NAME_ANNOTATION.to_owned(), self.name.to_owned()),
            ]),
            BindingKind::ClusterResourceBinding => BTreeMap::from([(
                CLUSTER_RESOURCE_BINDING_NAME_ANNOTATION.to_owned(),
                self.name.to_owned(),
            )]),
        }
    }

    /// The name of this binding's Works.
    pub fn work_name(&self) -> String {
        work_name(self.namespace, self.name)
    }
}

/// A Work as it must be.
#[derive(Clone, Debug, PartialEq)]
pub struct DesiredWork {
    /// The target cluster.
    pub cluster: String,
    /// `karmada-es-<cluster>`.
    pub namespace: String,
    /// The Work name.
    pub name: String,
    /// Labels (the binding's permanent id).
    pub labels: BTreeMap<String, String>,
    /// Annotations (the binding's name and namespace).
    pub annotations: BTreeMap<String, String>,
    /// The spec.
    pub spec: WorkSpec,
}

/// What to do with a binding's Works.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WorkPlan {
    /// Works to create or update (one per target cluster).
    pub upsert: Vec<DesiredWork>,
    /// Clusters whose existing Work stays as it is, suspended: the cluster left the placement
    /// while dispatching to it is suspended, so its member object must not change yet.
    pub keep_suspended: Vec<String>,
    /// Clusters whose Work is deleted.
    pub delete: Vec<String>,
    /// Clusters whose existing Work stays as it is while the binding is evicted from them
    /// (an eviction task whose purge mode keeps the old copy for now).
    pub keep_evicting: Vec<String>,
    /// A cluster evicted with purge mode `Directly` whose Work still exists: `upsert` must wait
    /// until it is gone.
    pub waiting_for: Option<String>,
    /// Whether any override policy is in effect for the binding.
    pub overrides_in_effect: bool,
    /// Override rules skipped because they failed, by cluster.
    pub override_failures: Vec<(String, flotilla_overrides::RuleFailure)>,
}

/// Whether the binding divides replicas over its clusters (Karmada's `needReviseReplicas`:
/// replicas set and the placement's scheduling type `Divided`; an absent `replicaScheduling` is
/// `Duplicated`).
pub fn divides_replicas(spec: &ResourceBindingSpec) -> bool {
    spec.replicas > 0
        && spec
            .placement
            .as_ref()
            .and_then(|p| p.replica_scheduling.as_ref())
            .is_some_and(|s| s.scheduling_type() == ReplicaSchedulingType::Divided)
}

/// The Works `binding` needs, given its `template`, the clusters that already have a Work of
/// it, and the override policies in effect (applied per cluster after the manifest is prepared,
/// replicas included, as Karmada applies them last; each Work records the rules that applied in
/// Karmada's `policy.karmada.io/applied-overrides` / `applied-cluster-overrides`).
pub fn plan_works(
    binding: &BindingView<'_>,
    template: &Value,
    existing: &BTreeSet<String>,
    overrides: &OverrideInputs,
) -> Result<WorkPlan, ManifestError> {
    let spec = binding.spec;
    let suspension = binding.suspension();
    let divided = divides_replicas(spec);
    let completions = if divided {
        flotilla_interpreter::divide_job_completions(template, &spec.clusters)?
    } else {
        None
    };
    let conflict_resolution = spec.conflict_resolution();
    let preserve = spec.preserve_resources_on_deletion();
    let mut plan = WorkPlan {
        overrides_in_effect: !overrides.policies.is_empty(),
        ..Default::default()
    };
    let mut targeted = BTreeSet::new();
    for target in &spec.clusters {
        if !targeted.insert(target.name.clone()) {
            continue;
        }
        let share = ClusterShare {
            replicas: divided.then_some(target.replicas),
            job_completions: completions.as_ref().and_then(|c| c.get(&target.name).copied()),
        };
        let mut manifest = prepare_manifest(template, &share, &conflict_resolution)?;
        let mut annotations = binding.work_annotations();
        if !overrides.policies.is_empty() {
            let rendered =
                flotilla_overrides::render(&manifest, &overrides.cluster(&target.name), &overrides.policies);
            manifest = rendered.manifest;
            for (key, value) in [
                (
                    APPLIED_CLUSTER_OVERRIDES_ANNOTATION,
                    rendered.applied_cluster_overrides,
                ),
                (APPLIED_OVERRIDES_ANNOTATION, rendered.applied_overrides),
            ] {
                if let Some(value) = value {
                    annotations.insert(key.to_owned(), value);
                }
            }
            plan.override_failures.extend(
                rendered
                    .failures
                    .into_iter()
                    .map(|failure| (target.name.clone(), failure)),
            );
        }
        plan.upsert.push(DesiredWork {
            cluster: target.name.clone(),
            namespace: execution_namespace(&target.name),
            name: binding.work_name(),
            labels: binding.work_labels(),
            annotations,
            spec: WorkSpec {
                workload: WorkloadTemplate {
                    manifests: vec![manifest],
                },
                suspend_dispatching: Some(suspension.is_suspended(&target.name)),
                preserve_resources_on_deletion: Some(preserve),
            },
        });
    }
    for cluster in existing.difference(&targeted) {
        let task = spec.eviction_task(cluster);
        if suspension.is_suspended(cluster) {
            plan.keep_suspended.push(cluster.clone());
        } else if task.is_some_and(|t| !t.purge_mode().is_directly()) {
            plan.keep_evicting.push(cluster.clone());
        } else {
            if task.is_some() && plan.waiting_for.is_none() {
                plan.waiting_for = Some(cluster.clone());
            }
            plan.delete.push(cluster.clone());
        }
    }
    Ok(plan)
}

/// The revision last applied per manifest ordinal: `status.manifestStatuses[].appliedRevision`,
/// or, for a Work last written by an older execution, its `flotilla.io/applied-revisions`
/// annotation. Malformed revisions read as "nothing recorded" (at worst one more apply).
pub fn applied_revisions(work: &Work) -> BTreeMap<usize, String> {
    let from_status: BTreeMap<usize, String> = work
        .status
        .iter()
        .flat_map(|s| &s.manifest_statuses)
        .filter_map(|m| {
            let revision = m.applied_revision.as_ref()?;
            Revision::parse(revision)?;
            Some((usize::try_from(m.identifier.ordinal).ok()?, revision.clone()))
        })
        .collect();
    if !from_status.is_empty() {
        return from_status;
    }
    work.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(APPLIED_REVISIONS_ANNOTATION))
        .map(|text| parse_applied_revisions(text))
        .unwrap_or_default()
}

/// The `flotilla.io/applied-revisions` annotation value for `revisions` (by manifest ordinal).
pub fn format_applied_revisions(revisions: &BTreeMap<usize, String>) -> String {
    revisions
        .iter()
        .map(|(ordinal, revision)| format!("{ordinal}={revision}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Parses the `flotilla.io/applied-revisions` annotation; malformed entries are ignored (read
/// as "nothing recorded", which at worst applies once more).
pub fn parse_applied_revisions(text: &str) -> BTreeMap<usize, String> {
    text.split(',')
        .filter_map(|entry| {
            let (ordinal, revision) = entry.trim().split_once('=')?;
            let ordinal = ordinal.parse().ok()?;
            Revision::parse(revision)?;
            Some((ordinal, revision.to_owned()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use flotilla_api::policy::{ReplicaSchedulingStrategy, SuspendClusters, Suspension};
    use flotilla_api::{ConflictResolution, Placement, TargetCluster};
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    fn template() -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "nginx", "namespace": "default", "uid": "t-uid", "generation": 2},
            "spec": {"replicas": 5},
        })
    }

    fn clusters(list: &[(&str, i32)]) -> Vec<TargetCluster> {
        list.iter()
            .map(|(name, replicas)| TargetCluster {
                name: (*name).into(),
                replicas: *replicas,
            })
            .collect()
    }

    fn divided() -> Option<Placement> {
        Some(Placement {
            replica_scheduling: Some(ReplicaSchedulingStrategy {
                replica_scheduling_type: Some(ReplicaSchedulingType::Divided),
                ..Default::default()
            }),
            ..Default::default()
        })
    }

    fn view(spec: &ResourceBindingSpec) -> BindingView<'_> {
        BindingView {
            kind: BindingKind::ResourceBinding,
            namespace: "default",
            name: "nginx-deployment",
            uid: "rb-uid",
            spec,
        }
    }

    fn existing(list: &[&str]) -> BTreeSet<String> {
        list.iter().map(|c| (*c).to_owned()).collect()
    }

    fn evicted_from(cluster: &str, purge: &str) -> flotilla_api::GracefulEvictionTask {
        flotilla_api::GracefulEvictionTask {
            from_cluster: cluster.into(),
            purge_mode: Some(flotilla_api::policy::PurgeMode::from(purge)),
            reason: "TaintUntolerated".into(),
            producer: "TaintManager".into(),
            ..Default::default()
        }
    }

    #[test]
    fn evicted_clusters_keep_or_purge_their_work_by_purge_mode() {
        for (purge, kept) in [
            ("Gracefully", true),
            ("Graciously", true),
            ("Never", true),
            ("Directly", false),
            ("Immediately", false),
        ] {
            let spec = ResourceBindingSpec {
                replicas: 5,
                clusters: clusters(&[("member2", 5)]),
                graceful_eviction_tasks: vec![evicted_from("member1", purge)],
                ..Default::default()
            };
            let plan = plan_works(
                &view(&spec),
                &template(),
                &existing(&["member1", "member2", "member3"]),
                &OverrideInputs::default(),
            )
            .unwrap();
            assert_eq!(plan.upsert.len(), 1, "{purge}");
            // member3 left the placement without eviction: deleted as ever.
            if kept {
                assert_eq!(plan.keep_evicting, vec!["member1".to_owned()], "{purge}");
                assert_eq!(plan.delete, vec!["member3".to_owned()], "{purge}");
                assert_eq!(plan.waiting_for, None, "{purge}");
            } else {
                assert!(plan.keep_evicting.is_empty(), "{purge}");
                assert_eq!(
                    plan.delete,
                    vec!["member1".to_owned(), "member3".to_owned()],
                    "{purge}"
                );
                assert_eq!(
                    plan.waiting_for.as_deref(),
                    Some("member1"),
                    "{purge}: the rest waits"
                );
            }
        }
        // Once the Directly copy is gone, nothing waits.
        let spec = ResourceBindingSpec {
            clusters: clusters(&[("member2", 0)]),
            graceful_eviction_tasks: vec![evicted_from("member1", "Directly")],
            ..Default::default()
        };
        let plan = plan_works(
            &view(&spec),
            &template(),
            &existing(&["member2"]),
            &OverrideInputs::default(),
        )
        .unwrap();
        assert_eq!(plan.waiting_for, None);
        assert!(plan.delete.is_empty());
    }

    #[test]
    fn suspension_wins_over_failover() {
        for purge in ["Gracefully", "Directly", "Never"] {
            let spec = ResourceBindingSpec {
                clusters: clusters(&[("member2", 0)]),
                graceful_eviction_tasks: vec![evicted_from("member1", purge)],
                suspension: Some(Suspension {
                    dispatching_on_clusters: Some(SuspendClusters {
                        cluster_names: vec!["member1".into()],
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            };
            let plan = plan_works(
                &view(&spec),
                &template(),
                &existing(&["member1"]),
                &OverrideInputs::default(),
            )
            .unwrap();
            assert_eq!(plan.keep_suspended, vec!["member1".to_owned()], "{purge}");
            assert!(plan.delete.is_empty() && plan.keep_evicting.is_empty(), "{purge}");
            assert_eq!(
                plan.waiting_for, None,
                "{purge}: a suspended copy holds nothing back"
            );
            assert_eq!(plan.upsert.len(), 1, "{purge}");
        }
    }

    #[test]
    fn one_work_per_target_cluster_with_labels_and_annotations() {
        let spec = ResourceBindingSpec {
            replicas: 5,
            clusters: clusters(&[("member1", 5), ("member2", 5)]),
            ..Default::default()
        };
        let plan = plan_works(
            &view(&spec),
            &template(),
            &existing(&[]),
            &OverrideInputs::default(),
        )
        .unwrap();
        assert_eq!(plan.upsert.len(), 2);
        let work = &plan.upsert[0];
        assert_eq!(work.cluster, "member1");
        assert_eq!(work.namespace, "karmada-es-member1");
        assert_eq!(work.name, work_name("default", "nginx-deployment"));
        assert_eq!(
            work.labels,
            BTreeMap::from([(
                "resourcebinding.karmada.io/permanent-id".to_owned(),
                "rb-uid".to_owned()
            )])
        );
        assert_eq!(
            work.annotations,
            BTreeMap::from([
                (
                    "resourcebinding.karmada.io/name".to_owned(),
                    "nginx-deployment".to_owned()
                ),
                (
                    "resourcebinding.karmada.io/namespace".to_owned(),
                    "default".to_owned()
                ),
            ])
        );
        // Duplicated: the template's replicas everywhere.
        assert_eq!(work.spec.workload.manifests[0]["spec"]["replicas"], 5);
        assert_eq!(work.spec.suspend_dispatching, Some(false));
        assert_eq!(work.spec.preserve_resources_on_deletion, Some(false));
        assert!(plan.delete.is_empty() && plan.keep_suspended.is_empty());
    }

    #[test]
    fn cluster_resource_binding_works() {
        let spec = ResourceBindingSpec {
            clusters: clusters(&[("member1", 0)]),
            ..Default::default()
        };
        let binding = BindingView {
            kind: BindingKind::ClusterResourceBinding,
            namespace: "",
            name: "admin-clusterrole",
            uid: "crb-uid",
            spec: &spec,
        };
        let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "admin"}});
        let plan = plan_works(&binding, &role, &existing(&[]), &OverrideInputs::default()).unwrap();
        let work = &plan.upsert[0];
        assert_eq!(work.name, work_name("", "admin-clusterrole"));
        assert_eq!(
            work.labels.get("clusterresourcebinding.karmada.io/permanent-id"),
            Some(&"crb-uid".to_owned())
        );
        assert_eq!(
            work.annotations,
            BTreeMap::from([(
                "clusterresourcebinding.karmada.io/name".to_owned(),
                "admin-clusterrole".to_owned()
            )])
        );
    }

    #[test]
    fn divided_replicas_per_cluster() {
        let spec = ResourceBindingSpec {
            replicas: 5,
            placement: divided(),
            clusters: clusters(&[("member1", 3), ("member2", 2)]),
            ..Default::default()
        };
        let plan = plan_works(
            &view(&spec),
            &template(),
            &existing(&[]),
            &OverrideInputs::default(),
        )
        .unwrap();
        let replicas: Vec<_> = plan
            .upsert
            .iter()
            .map(|w| w.spec.workload.manifests[0]["spec"]["replicas"].clone())
            .collect();
        assert_eq!(replicas, vec![json!(3), json!(2)]);
    }

    #[test]
    fn divided_job_completions_are_split() {
        let job = json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "pi", "namespace": "default", "uid": "u"},
            "spec": {"parallelism": 4, "completions": 8},
        });
        let spec = ResourceBindingSpec {
            replicas: 4,
            placement: divided(),
            clusters: clusters(&[("member1", 3), ("member2", 1)]),
            ..Default::default()
        };
        let plan = plan_works(&view(&spec), &job, &existing(&[]), &OverrideInputs::default()).unwrap();
        let shares: Vec<_> = plan
            .upsert
            .iter()
            .map(|w| {
                let s = &w.spec.workload.manifests[0]["spec"];
                (s["parallelism"].clone(), s["completions"].clone())
            })
            .collect();
        assert_eq!(shares, vec![(json!(3), json!(6)), (json!(1), json!(2))]);
    }

    #[test]
    fn duplicated_without_replica_scheduling_keeps_template_replicas() {
        let spec = ResourceBindingSpec {
            replicas: 5,
            placement: Some(Placement::default()),
            clusters: clusters(&[("member1", 2)]),
            ..Default::default()
        };
        assert!(!divides_replicas(&spec));
        let plan = plan_works(
            &view(&spec),
            &template(),
            &existing(&[]),
            &OverrideInputs::default(),
        )
        .unwrap();
        assert_eq!(plan.upsert[0].spec.workload.manifests[0]["spec"]["replicas"], 5);
    }

    #[test]
    fn works_of_clusters_no_longer_targeted_are_deleted() {
        let spec = ResourceBindingSpec {
            clusters: clusters(&[("member1", 0)]),
            ..Default::default()
        };
        let plan = plan_works(
            &view(&spec),
            &template(),
            &existing(&["member1", "member2"]),
            &OverrideInputs::default(),
        )
        .unwrap();
        assert_eq!(plan.delete, vec!["member2".to_owned()]);
        assert_eq!(plan.upsert.len(), 1);
    }

    #[test]
    fn suspension_per_cluster() {
        let all = Suspension {
            dispatching: Some(true),
            ..Default::default()
        };
        let named = Suspension {
            dispatching_on_clusters: Some(SuspendClusters {
                cluster_names: vec!["member2".into()],
            }),
            ..Default::default()
        };
        let alias = Suspension {
            suspend_dispatching_on_clusters: Some(SuspendClusters {
                cluster_names: vec!["member1".into()],
            }),
            ..Default::default()
        };
        let explicit_false = Suspension {
            dispatching: Some(false),
            ..Default::default()
        };
        let cases: [(Option<Suspension>, [bool; 3]); 5] = [
            (None, [false, false, false]),
            (Some(all), [true, true, true]),
            (Some(named), [false, true, false]),
            (Some(alias), [true, false, false]),
            (Some(explicit_false), [false, false, false]),
        ];
        for (suspension, expected) in cases {
            let spec = ResourceBindingSpec {
                clusters: clusters(&[("member1", 0), ("member2", 0), ("member3", 0)]),
                suspension: suspension.clone(),
                ..Default::default()
            };
            let plan = plan_works(
                &view(&spec),
                &template(),
                &existing(&[]),
                &OverrideInputs::default(),
            )
            .unwrap();
            let got: Vec<bool> = plan
                .upsert
                .iter()
                .map(|w| w.spec.suspend_dispatching.unwrap_or(false))
                .collect();
            assert_eq!(got, expected.to_vec(), "{suspension:?}");
        }
    }

    #[test]
    fn a_suspended_cluster_that_left_the_placement_keeps_its_work() {
        let spec = ResourceBindingSpec {
            clusters: clusters(&[("member1", 0)]),
            suspension: Some(Suspension {
                dispatching_on_clusters: Some(SuspendClusters {
                    cluster_names: vec!["member2".into()],
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let plan = plan_works(
            &view(&spec),
            &template(),
            &existing(&["member1", "member2", "member3"]),
            &OverrideInputs::default(),
        )
        .unwrap();
        assert_eq!(plan.keep_suspended, vec!["member2".to_owned()]);
        assert_eq!(plan.delete, vec!["member3".to_owned()]);
        // Resumed: the Work goes.
        let resumed = ResourceBindingSpec {
            suspension: None,
            ..spec
        };
        let plan = plan_works(
            &view(&resumed),
            &template(),
            &existing(&["member1", "member2"]),
            &OverrideInputs::default(),
        )
        .unwrap();
        assert_eq!(plan.delete, vec!["member2".to_owned()]);
        assert!(plan.keep_suspended.is_empty());
    }

    #[test]
    fn suspended_divided_scale_down_still_updates_the_desired_state() {
        // The suspended cluster's Work gets the new share (users can inspect it); the Work is
        // what is not dispatched.
        let spec = ResourceBindingSpec {
            replicas: 2,
            placement: divided(),
            clusters: clusters(&[("member1", 1), ("member2", 1)]),
            suspension: Some(Suspension {
                dispatching_on_clusters: Some(SuspendClusters {
                    cluster_names: vec!["member2".into()],
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let plan = plan_works(
            &view(&spec),
            &template(),
            &existing(&["member1", "member2"]),
            &OverrideInputs::default(),
        )
        .unwrap();
        let member2 = &plan.upsert[1];
        assert_eq!(member2.cluster, "member2");
        assert_eq!(member2.spec.suspend_dispatching, Some(true));
        assert_eq!(member2.spec.workload.manifests[0]["spec"]["replicas"], 1);
    }

    #[test]
    fn preserve_and_conflict_resolution_are_carried() {
        let spec = ResourceBindingSpec {
            clusters: clusters(&[("member1", 0)]),
            preserve_resources_on_deletion: Some(true),
            conflict_resolution: Some(ConflictResolution::Overwrite),
            ..Default::default()
        };
        let plan = plan_works(
            &view(&spec),
            &template(),
            &existing(&[]),
            &OverrideInputs::default(),
        )
        .unwrap();
        let work = &plan.upsert[0];
        assert_eq!(work.spec.preserve_resources_on_deletion, Some(true));
        assert_eq!(
            work.spec.workload.manifests[0]["metadata"]["annotations"]["work.karmada.io/conflict-resolution"],
            "overwrite"
        );
    }

    #[test]
    fn duplicate_target_clusters_give_one_work() {
        let spec = ResourceBindingSpec {
            clusters: clusters(&[("member1", 0), ("member1", 0)]),
            ..Default::default()
        };
        let plan = plan_works(
            &view(&spec),
            &template(),
            &existing(&[]),
            &OverrideInputs::default(),
        )
        .unwrap();
        assert_eq!(plan.upsert.len(), 1);
    }

    #[test]
    fn applied_revisions_round_trip() {
        let revisions = BTreeMap::from([(0, "3/0123abcd".to_owned()), (2, "1/ffff".to_owned())]);
        let text = format_applied_revisions(&revisions);
        assert_eq!(text, "0=3/0123abcd,2=1/ffff");
        assert_eq!(parse_applied_revisions(&text), revisions);
        assert_eq!(
            parse_applied_revisions("0=3/0123abcd, x=1/aa, 1=bad, 2"),
            BTreeMap::from([(0, "3/0123abcd".to_owned())])
        );
        assert!(parse_applied_revisions("").is_empty());
    }

    #[test]
    fn applied_revisions_come_from_the_status_then_the_legacy_annotation() {
        use flotilla_api::work::{ManifestStatus, ResourceIdentifier, WorkStatus};
        let manifest = |ordinal: i64, revision: Option<&str>| ManifestStatus {
            identifier: ResourceIdentifier {
                ordinal,
                ..Default::default()
            },
            applied_revision: revision.map(str::to_owned),
            ..Default::default()
        };
        let mut work = Work::new("w", Default::default());
        assert!(applied_revisions(&work).is_empty());
        work.metadata.annotations =
            Some([(APPLIED_REVISIONS_ANNOTATION.to_owned(), "0=1/aaaa".to_owned())].into());
        assert_eq!(
            applied_revisions(&work),
            BTreeMap::from([(0, "1/aaaa".to_owned())])
        );
        work.status = Some(WorkStatus {
            manifest_statuses: vec![
                manifest(0, Some("2/bbbb")),
                manifest(1, None),
                manifest(2, Some("not a revision")),
                manifest(3, Some("2/cccc")),
            ],
            ..Default::default()
        });
        assert_eq!(
            applied_revisions(&work),
            BTreeMap::from([(0, "2/bbbb".to_owned()), (3, "2/cccc".to_owned())])
        );
    }

    #[test]
    fn override_policies_render_each_cluster_after_the_replicas_and_are_recorded() {
        use flotilla_api::overrides::OverridePolicyKind;
        use flotilla_overrides::PolicySource;
        let spec = ResourceBindingSpec {
            replicas: 5,
            placement: divided(),
            clusters: clusters(&[("member1", 3), ("member2", 2)]),
            ..Default::default()
        };
        let policy = PolicySource {
            kind: OverridePolicyKind::OverridePolicy,
            namespace: Some("default".into()),
            name: "op".into(),
            spec: serde_json::from_value(json!({"overrideRules": [
                // Karmada applies overrides after dividing replicas: this wins in member1.
                {"targetCluster": {"clusterNames": ["member1"]},
                 "overriders": {"plaintext": [{"path": "/spec/replicas", "operator": "replace", "value": 7}]}},
                // Fails in member2 only (no such annotation there): skipped there.
                {"targetCluster": {"clusterNames": ["member2"]},
                 "overriders": {"plaintext": [{"path": "/metadata/annotations/nope", "operator": "remove"}]}},
            ]}))
            .unwrap(),
        };
        let overrides = OverrideInputs {
            policies: vec![policy],
            clusters: BTreeMap::new(),
        };
        let plan = plan_works(&view(&spec), &template(), &existing(&[]), &overrides).unwrap();
        let (member1, member2) = (&plan.upsert[0], &plan.upsert[1]);
        assert_eq!(member1.spec.workload.manifests[0]["spec"]["replicas"], 7);
        assert_eq!(member2.spec.workload.manifests[0]["spec"]["replicas"], 2);
        assert_eq!(
            member1
                .annotations
                .get(APPLIED_OVERRIDES_ANNOTATION)
                .map(String::as_str),
            Some(
                r#"[{"policyName":"op","overriders":{"plaintext":[{"path":"/spec/replicas","operator":"replace","value":7}]}}]"#
            )
        );
        assert_eq!(member2.annotations.get(APPLIED_OVERRIDES_ANNOTATION), None);
        assert_eq!(
            member1.annotations.get(APPLIED_CLUSTER_OVERRIDES_ANNOTATION),
            None
        );
        assert!(plan.overrides_in_effect);
        assert_eq!(plan.override_failures.len(), 1);
        assert_eq!(plan.override_failures[0].0, "member2");
        assert_eq!(plan.override_failures[0].1.rule, "spec.overrideRules[1]");
        // Without policies: no records, nothing in effect.
        let plain = plan_works(
            &view(&spec),
            &template(),
            &existing(&[]),
            &OverrideInputs::default(),
        )
        .unwrap();
        assert!(!plain.overrides_in_effect);
        assert!(
            !plain.upsert[0]
                .annotations
                .contains_key(APPLIED_OVERRIDES_ANNOTATION)
        );
    }
}
