//! `flotilla suspend` / `flotilla resume`: edit a (Cluster)PropagationPolicy's
//! `spec.suspension` for the user, so dispatching to all or some member clusters is frozen and
//! released without hand-written YAML (the ordered rollout of the dispatch-suspension seed).
//!
//! The new suspension is computed by pure functions ([`suspended`], [`resumed`]) from the
//! policy's current one, and written in canonical spelling with a JSON merge patch that carries
//! the read `resourceVersion` (retried on 409), so a concurrent edit is never overwritten.

use std::collections::BTreeSet;

use flotilla_api::policy::{EffectiveSuspension, SuspendClusters};
use flotilla_api::validation::is_dns1123_label;
use flotilla_api::{Cluster, ClusterPropagationPolicy, PropagationPolicy, Suspension};
use kube::api::{ApiResource, DynamicObject, ListParams, Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};

/// How many times a write that lost a race (409) is retried with a fresh read.
const ATTEMPTS: usize = 5;

/// Errors of `flotilla suspend` / `flotilla resume`.
#[derive(Debug, thiserror::Error)]
pub enum SuspendError {
    /// A `--clusters` entry is not a cluster name.
    #[error("--clusters: {0:?} is not a cluster name (a DNS-1123 label: lower-case letters, digits, '-')")]
    BadClusterName(String),
    /// `--clusters` was given without any name.
    #[error("--clusters needs at least one cluster name; omit it to act on every cluster")]
    NoClusters,
    /// The policy does not exist.
    #[error("{policy} not found; check the name, the namespace (-n) and --cluster-scoped")]
    NotFound {
        /// `kind namespace/name` of the policy.
        policy: String,
    },
    /// The policy's `spec.suspension` cannot be read.
    #[error("{policy} has an unreadable spec.suspension: {source}")]
    Unreadable {
        /// `kind namespace/name` of the policy.
        policy: String,
        /// Why.
        source: serde_json::Error,
    },
    /// The policy kept changing under us.
    #[error("{policy} changed concurrently {ATTEMPTS} times in a row; run the command again")]
    Contended {
        /// `kind namespace/name` of the policy.
        policy: String,
    },
    /// The control-plane API refused a request.
    #[error("cannot {action}: {source}")]
    Api {
        /// What was attempted.
        action: String,
        /// Why it failed.
        source: kube::Error,
    },
}

/// Which clusters a command acts on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Clusters {
    /// Every cluster (no `--clusters`).
    All,
    /// The named clusters.
    Named(BTreeSet<String>),
}

impl Clusters {
    /// Parses `--clusters` values (already split at commas); `None` means every cluster.
    pub fn parse(values: Option<&[String]>) -> Result<Clusters, SuspendError> {
        let Some(values) = values else {
            return Ok(Clusters::All);
        };
        let mut names = BTreeSet::new();
        for value in values.iter().map(|v| v.trim()).filter(|v| !v.is_empty()) {
            if !is_dns1123_label(value) {
                return Err(SuspendError::BadClusterName(value.to_owned()));
            }
            names.insert(value.to_owned());
        }
        if names.is_empty() {
            return Err(SuspendError::NoClusters);
        }
        Ok(Clusters::Named(names))
    }
}

/// The policy a command edits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyRef {
    /// Its name.
    pub name: String,
    /// Its namespace; `None` for a ClusterPropagationPolicy.
    pub namespace: Option<String>,
}

impl std::fmt::Display for PolicyRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(namespace) => write!(f, "propagationpolicy {namespace}/{}", self.name),
            None => write!(f, "clusterpropagationpolicy {}", self.name),
        }
    }
}

/// The suspension after suspending `target` on top of `current`. Naming clusters while every
/// cluster is suspended changes nothing (they already are).
pub fn suspended(current: &EffectiveSuspension, target: &Clusters) -> EffectiveSuspension {
    match target {
        Clusters::All => EffectiveSuspension {
            all_clusters: true,
            clusters: BTreeSet::new(),
        },
        Clusters::Named(_) if current.all_clusters => current.clone(),
        Clusters::Named(names) => EffectiveSuspension {
            all_clusters: false,
            clusters: current.clusters.union(names).cloned().collect(),
        },
    }
}

/// The suspension after resuming `target` on top of `current`. Resuming some clusters while
/// every cluster is suspended keeps the other `registered` clusters suspended, by name.
pub fn resumed(
    current: &EffectiveSuspension,
    target: &Clusters,
    registered: &BTreeSet<String>,
) -> EffectiveSuspension {
    match target {
        Clusters::All => EffectiveSuspension::default(),
        Clusters::Named(names) => {
            let still: &BTreeSet<String> = if current.all_clusters {
                registered
            } else {
                &current.clusters
            };
            EffectiveSuspension {
                all_clusters: false,
                clusters: still.difference(names).cloned().collect(),
            }
        }
    }
}

/// The canonical `spec.suspension` for `effective`; `None` when nothing is suspended.
pub fn to_suspension(effective: &EffectiveSuspension) -> Option<Suspension> {
    if effective.all_clusters {
        Some(Suspension {
            dispatching: Some(true),
            ..Default::default()
        })
    } else if effective.clusters.is_empty() {
        None
    } else {
        Some(Suspension {
            dispatching_on_clusters: Some(SuspendClusters {
                cluster_names: effective.clusters.iter().cloned().collect(),
            }),
            ..Default::default()
        })
    }
}

/// Whether the policy's stored `current` suspension already is `wanted`, written canonically
/// (no alias spelling left), so no write is needed.
pub fn is_unchanged(current: Option<&Suspension>, wanted: Option<&Suspension>) -> bool {
    let normal = |s: Option<&Suspension>| s.and_then(|s| to_suspension(&s.effective()));
    let written_canonically = current.is_none_or(|s| *s == s.canonical());
    written_canonically && normal(current) == wanted.cloned()
}

/// The JSON merge patch that replaces `spec.suspension` with `wanted`, guarded by
/// `resource_version`. Every spelling is named so alias fields of the old value are removed.
pub fn suspension_patch(wanted: Option<&Suspension>, resource_version: Option<&str>) -> Value {
    let suspension = match wanted {
        None => Value::Null,
        Some(s) => json!({
            "dispatching": s.dispatching,
            "dispatchingOnClusters": s.dispatching_on_clusters.as_ref().map(|c| json!({"clusterNames": c.cluster_names})),
            "suspendDispatching": null,
            "suspendDispatchingOnClusters": null,
        }),
    };
    let mut patch = json!({"spec": {"suspension": suspension}});
    if let Some(rv) = resource_version {
        patch["metadata"] = json!({"resourceVersion": rv});
    }
    patch
}

/// One line describing a suspension, e.g. `dispatching suspended on member2, member3`.
pub fn describe(effective: &EffectiveSuspension) -> String {
    if effective.all_clusters {
        "dispatching suspended on every cluster".to_owned()
    } else if effective.clusters.is_empty() {
        "dispatching to every cluster (not suspended)".to_owned()
    } else {
        let names: Vec<&str> = effective.clusters.iter().map(String::as_str).collect();
        format!("dispatching suspended on {}", names.join(", "))
    }
}

/// What a command did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// The policy.
    pub policy: PolicyRef,
    /// The suspension stored after the command.
    pub state: EffectiveSuspension,
    /// Whether the policy was written.
    pub changed: bool,
    /// Named clusters that are not registered (likely typos).
    pub unknown_clusters: Vec<String>,
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {}{}",
            self.policy,
            describe(&self.state),
            if self.changed { "" } else { " (unchanged)" }
        )?;
        for cluster in &self.unknown_clusters {
            write!(f, "\nwarning: {cluster} is not a registered cluster")?;
        }
        Ok(())
    }
}

/// Whether a command suspends or resumes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// `flotilla suspend`.
    Suspend,
    /// `flotilla resume`.
    Resume,
}

fn api_for(client: &Client, policy: &PolicyRef) -> Api<DynamicObject> {
    match &policy.namespace {
        Some(namespace) => {
            let resource = ApiResource::erase::<PropagationPolicy>(&());
            Api::namespaced_with(client.clone(), namespace, &resource)
        }
        None => {
            let resource = ApiResource::erase::<ClusterPropagationPolicy>(&());
            Api::all_with(client.clone(), &resource)
        }
    }
}

async fn registered_clusters(client: &Client) -> Result<BTreeSet<String>, SuspendError> {
    let api: Api<Cluster> = Api::all(client.clone());
    let list = api
        .list(&ListParams::default())
        .await
        .map_err(|source| SuspendError::Api {
            action: "list the registered clusters".to_owned(),
            source,
        })?;
    Ok(list.items.iter().map(|c| c.name_any()).collect())
}

fn stored_suspension(policy: &PolicyRef, object: &DynamicObject) -> Result<Option<Suspension>, SuspendError> {
    match object.data.get("spec").and_then(|s| s.get("suspension")) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => {
            serde_json::from_value(value.clone())
                .map(Some)
                .map_err(|source| SuspendError::Unreadable {
                    policy: policy.to_string(),
                    source,
                })
        }
    }
}

/// Suspends or resumes dispatching of `policy` to `target` and reports the stored result.
pub async fn run(
    client: &Client,
    policy: &PolicyRef,
    action: Action,
    target: &Clusters,
) -> Result<Report, SuspendError> {
    let api = api_for(client, policy);
    let registered = registered_clusters(client).await?;
    let unknown_clusters = match target {
        Clusters::All => vec![],
        Clusters::Named(names) => names.difference(&registered).cloned().collect(),
    };
    for _ in 0..ATTEMPTS {
        let object = match api.get(&policy.name).await {
            Ok(o) => o,
            Err(kube::Error::Api(e)) if e.code == 404 => {
                return Err(SuspendError::NotFound {
                    policy: policy.to_string(),
                });
            }
            Err(source) => {
                return Err(SuspendError::Api {
                    action: format!("read {policy}"),
                    source,
                });
            }
        };
        let current = stored_suspension(policy, &object)?;
        let effective = current.as_ref().map(Suspension::effective).unwrap_or_default();
        let next = match action {
            Action::Suspend => suspended(&effective, target),
            Action::Resume => resumed(&effective, target, &registered),
        };
        let wanted = to_suspension(&next);
        if is_unchanged(current.as_ref(), wanted.as_ref()) {
            return Ok(Report {
                policy: policy.clone(),
                state: next,
                changed: false,
                unknown_clusters,
            });
        }
        let patch = suspension_patch(wanted.as_ref(), object.metadata.resource_version.as_deref());
        match api
            .patch(&policy.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(stored) => {
                let state = stored_suspension(policy, &stored)?
                    .map(|s| s.effective())
                    .unwrap_or_default();
                return Ok(Report {
                    policy: policy.clone(),
                    state,
                    changed: true,
                    unknown_clusters,
                });
            }
            Err(kube::Error::Api(e)) if e.code == 409 => continue,
            Err(source) => {
                return Err(SuspendError::Api {
                    action: format!("update spec.suspension of {policy}"),
                    source,
                });
            }
        }
    }
    Err(SuspendError::Contended {
        policy: policy.to_string(),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| (*n).to_owned()).collect()
    }

    fn on(names: &[&str]) -> EffectiveSuspension {
        EffectiveSuspension {
            all_clusters: false,
            clusters: set(names),
        }
    }

    fn all() -> EffectiveSuspension {
        EffectiveSuspension {
            all_clusters: true,
            clusters: BTreeSet::new(),
        }
    }

    fn named(names: &[&str]) -> Clusters {
        Clusters::Named(set(names))
    }

    #[test]
    fn parse_clusters() {
        assert_eq!(Clusters::parse(None).unwrap(), Clusters::All);
        let values = vec!["member2".to_owned(), " member1 ".to_owned(), "member2".to_owned()];
        assert_eq!(
            Clusters::parse(Some(&values)).unwrap(),
            named(&["member1", "member2"])
        );
        assert!(matches!(
            Clusters::parse(Some(&["Member1".to_owned()])),
            Err(SuspendError::BadClusterName(n)) if n == "Member1"
        ));
        assert!(matches!(
            Clusters::parse(Some(&[" ".to_owned()])),
            Err(SuspendError::NoClusters)
        ));
        assert!(matches!(
            Clusters::parse(Some(&[])),
            Err(SuspendError::NoClusters)
        ));
    }

    #[test]
    fn suspend_transitions() {
        let none = EffectiveSuspension::default();
        assert_eq!(suspended(&none, &Clusters::All), all());
        assert_eq!(suspended(&on(&["member2"]), &Clusters::All), all());
        assert_eq!(
            suspended(&none, &named(&["member2", "member3"])),
            on(&["member2", "member3"])
        );
        assert_eq!(
            suspended(&on(&["member3"]), &named(&["member2"])),
            on(&["member2", "member3"])
        );
        assert_eq!(
            suspended(&on(&["member2"]), &named(&["member2"])),
            on(&["member2"])
        );
        // Every cluster is already suspended: naming some changes nothing.
        assert_eq!(suspended(&all(), &named(&["member2"])), all());
    }

    #[test]
    fn resume_transitions() {
        let registered = set(&["member1", "member2", "member3"]);
        let none = EffectiveSuspension::default();
        assert_eq!(resumed(&all(), &Clusters::All, &registered), none);
        assert_eq!(resumed(&on(&["member2"]), &Clusters::All, &registered), none);
        assert_eq!(resumed(&none, &Clusters::All, &registered), none);
        assert_eq!(
            resumed(&on(&["member2", "member3"]), &named(&["member2"]), &registered),
            on(&["member3"])
        );
        assert_eq!(
            resumed(&on(&["member2"]), &named(&["member1"]), &registered),
            on(&["member2"])
        );
        assert_eq!(
            resumed(&on(&["member2"]), &named(&["member2"]), &registered),
            none
        );
        // From "every cluster": the other registered clusters stay suspended by name.
        assert_eq!(
            resumed(&all(), &named(&["member1"]), &registered),
            on(&["member2", "member3"])
        );
        assert_eq!(
            resumed(&all(), &named(&["member1", "member2", "member3"]), &registered),
            none
        );
    }

    #[test]
    fn canonical_suspension() {
        assert_eq!(to_suspension(&EffectiveSuspension::default()), None);
        assert_eq!(to_suspension(&all()).unwrap().dispatching, Some(true));
        let s = to_suspension(&on(&["member3", "member2"])).unwrap();
        assert_eq!(s.dispatching, None);
        assert_eq!(
            s.dispatching_on_clusters.unwrap().cluster_names,
            vec!["member2".to_owned(), "member3".to_owned()]
        );
    }

    #[test]
    fn unchanged_only_when_equal_and_canonical() {
        let wanted = to_suspension(&all());
        assert!(is_unchanged(wanted.as_ref(), wanted.as_ref()));
        assert!(is_unchanged(None, None));
        assert!(!is_unchanged(None, wanted.as_ref()));
        assert!(!is_unchanged(wanted.as_ref(), None));
        // The alias spelling means the same but is rewritten canonically.
        let alias = Suspension {
            suspend_dispatching: Some(true),
            ..Default::default()
        };
        assert!(!is_unchanged(Some(&alias), wanted.as_ref()));
        // `dispatching: false` is no suspension at all.
        let off = Suspension {
            dispatching: Some(false),
            ..Default::default()
        };
        assert!(is_unchanged(Some(&off), None));
        // Order of names does not matter; the stored list is compared as written though.
        let stored = Suspension {
            dispatching_on_clusters: Some(SuspendClusters {
                cluster_names: vec!["member2".into(), "member3".into()],
            }),
            ..Default::default()
        };
        assert!(is_unchanged(
            Some(&stored),
            to_suspension(&on(&["member3", "member2"])).as_ref()
        ));
    }

    #[test]
    fn patch_names_every_spelling() {
        let patch = suspension_patch(to_suspension(&on(&["member2"])).as_ref(), Some("42"));
        assert_eq!(
            patch,
            json!({
                "metadata": {"resourceVersion": "42"},
                "spec": {"suspension": {
                    "dispatching": null,
                    "dispatchingOnClusters": {"clusterNames": ["member2"]},
                    "suspendDispatching": null,
                    "suspendDispatchingOnClusters": null,
                }},
            })
        );
        let patch = suspension_patch(to_suspension(&all()).as_ref(), None);
        assert_eq!(
            patch,
            json!({"spec": {"suspension": {
                "dispatching": true,
                "dispatchingOnClusters": null,
                "suspendDispatching": null,
                "suspendDispatchingOnClusters": null,
            }}})
        );
        assert_eq!(
            suspension_patch(None, None),
            json!({"spec": {"suspension": null}})
        );
    }

    #[test]
    fn report_lines() {
        let policy = PolicyRef {
            name: "nginx".into(),
            namespace: Some("default".into()),
        };
        let report = Report {
            policy: policy.clone(),
            state: on(&["member2", "member3"]),
            changed: true,
            unknown_clusters: vec![],
        };
        assert_eq!(
            report.to_string(),
            "propagationpolicy default/nginx: dispatching suspended on member2, member3"
        );
        let report = Report {
            policy: PolicyRef {
                name: "all".into(),
                namespace: None,
            },
            state: EffectiveSuspension::default(),
            changed: false,
            unknown_clusters: vec!["membr2".into()],
        };
        assert_eq!(
            report.to_string(),
            "clusterpropagationpolicy all: dispatching to every cluster (not suspended) (unchanged)\n\
             warning: membr2 is not a registered cluster"
        );
        assert_eq!(describe(&all()), "dispatching suspended on every cluster");
    }
}
