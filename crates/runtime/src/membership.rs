//! Replica membership on Leases, for services that shard their work (execution shards member
//! clusters): each replica renews its own Lease `<group>-<identity>` in the coordination
//! namespace, labelled `flotilla.io/membership: <group>`; the live members are the Leases whose
//! record changed within their lease duration (on this replica's clock); each key is owned by
//! exactly one live member ([`crate::lease::owner`], rendezvous hashing).
//!
//! Handover without double ownership:
//! - a member stops acting on a key as soon as its view says another member owns it (the view
//!   is refreshed every retry period);
//! - a member that found other live members when it joined acts on nothing for one lease
//!   duration ([`crate::lease::settled`]): the previous owners of its keys see it within a retry
//!   period and stop;
//! - a member that cannot renew its own Lease within the renew deadline (shorter than the lease
//!   duration) owns nothing from then on and the process exits ([`Membership::exit_on_loss`]), so
//!   it has stopped before the others may treat its Lease as expired and take its keys;
//! - on graceful shutdown a member deletes its Lease after its workers stopped, and the others
//!   take its keys at their next refresh.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use flotilla_rpc::Readiness;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, PostParams, Preconditions};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::leader::{ensure_namespace, new_lease};
use crate::lease::{
    DEFAULT_NAMESPACE, LeaseTimings, Observations, name_fragment, owner, parse_duration, settled,
};

/// The label that marks membership Leases; its value is the group (e.g. `flotilla-execution`).
pub const MEMBERSHIP_LABEL: &str = "flotilla.io/membership";

/// The readiness check a sharded service reports.
pub const READINESS_CHECK: &str = "membership";

/// Sharding flags.
#[derive(Clone, Debug, clap::Args)]
pub struct MembershipArgs {
    /// Split the work between replicas by Lease membership. `--sharding=false`: this replica
    /// does everything (a single replica only).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub sharding: bool,
    /// How long a member's Lease unchanged means the member is gone (failover time).
    #[arg(long, default_value = "15s", value_parser = parse_duration)]
    pub membership_lease_duration: std::time::Duration,
    /// How long a member keeps trying to renew its Lease before it gives up and exits.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub membership_renew_deadline: std::time::Duration,
    /// How often members renew their Leases and refresh their view of the others.
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub membership_retry_period: std::time::Duration,
    /// Namespace of the membership Leases.
    #[arg(long, default_value = DEFAULT_NAMESPACE)]
    pub membership_namespace: String,
}

impl MembershipArgs {
    /// The timings, validated (`retry < renew deadline < lease duration`).
    pub fn timings(&self) -> Result<LeaseTimings, String> {
        let timings = LeaseTimings {
            lease_duration: self.membership_lease_duration,
            renew_deadline: self.membership_renew_deadline,
            retry_period: self.membership_retry_period,
        };
        timings.validate("membership")?;
        Ok(timings)
    }
}

/// One replica's view of the membership.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct View {
    /// This replica.
    pub me: String,
    /// Live members, sorted (this replica included while its own Lease is renewed).
    pub members: Vec<String>,
    /// Whether this replica may act on the keys it owns (see [`crate::lease::settled`]).
    pub settled: bool,
    /// Whether this replica lost its membership (it owns nothing and exits).
    pub lost: bool,
}

impl View {
    /// A view in which `me` is the only member and acts on everything (no sharding).
    pub fn everything(me: &str) -> Self {
        Self {
            me: me.to_owned(),
            members: vec![me.to_owned()],
            settled: true,
            lost: false,
        }
    }

    /// Whether this replica owns `key` and may act on it now.
    pub fn owns(&self, key: &str) -> bool {
        self.settled && !self.lost && owner(key, &self.members) == Some(self.me.as_str())
    }

    /// The owner of `key` in this view.
    pub fn owner_of(&self, key: &str) -> Option<&str> {
        owner(key, &self.members)
    }
}

/// A member Lease whose record has not changed for this many of its lease durations belongs to
/// a replica that is gone for good (killed without leaving, or its Pod deleted): any member
/// deletes it, so the Leases of replaced Pods do not pile up.
pub const ABANDONED_AFTER_DURATIONS: u32 = 4;

/// A member Lease as read: name, holder, stated duration, and how long its record was unchanged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberLease {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.resourceVersion` as read (the precondition of its deletion).
    pub resource_version: String,
    /// `spec.holderIdentity`.
    pub holder: Option<String>,
    /// `spec.leaseDurationSeconds`, or our own duration when unset.
    pub duration: std::time::Duration,
    /// How long this replica has seen the record unchanged.
    pub unchanged_for: std::time::Duration,
}

/// The live members among `leases`, sorted and deduplicated; `me` is included when
/// `me_renewed` (this replica's own Lease was renewed within the renew deadline), whatever its
/// record looks like.
pub fn live_members(leases: &[MemberLease], me: &str, me_renewed: bool) -> Vec<String> {
    let mut members: Vec<String> = leases
        .iter()
        .filter(|l| l.unchanged_for < l.duration)
        .filter_map(|l| l.holder.as_deref().map(str::trim).filter(|h| !h.is_empty()))
        .filter(|h| *h != me)
        .map(str::to_owned)
        .collect();
    if me_renewed {
        members.push(me.to_owned());
    }
    members.sort();
    members.dedup();
    members
}

/// The Leases among `leases` to delete: unchanged for [`ABANDONED_AFTER_DURATIONS`] lease
/// durations on this replica's clock, and not this replica's own (`own_lease`).
pub fn abandoned<'a>(leases: &'a [MemberLease], own_lease: &str) -> Vec<&'a MemberLease> {
    leases
        .iter()
        .filter(|l| l.name != own_lease)
        .filter(|l| l.unchanged_for >= l.duration.saturating_mul(ABANDONED_AFTER_DURATIONS))
        .collect()
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ServiceLabels {
    service: String,
}

fn members_gauge() -> &'static Family<ServiceLabels, Gauge> {
    static GAUGE: std::sync::OnceLock<Family<ServiceLabels, Gauge>> = std::sync::OnceLock::new();
    GAUGE.get_or_init(|| {
        let family = Family::<ServiceLabels, Gauge>::default();
        flotilla_telemetry::metrics::register(
            "membership_members",
            "Live replicas of a sharded service, as this replica sees them",
            family.clone(),
        );
        family
    })
}

struct Inner {
    api: Api<Lease>,
    namespaces: Api<Namespace>,
    namespace: String,
    group: String,
    lease_name: String,
    timings: LeaseTimings,
    view: watch::Sender<View>,
    readiness: Option<Readiness>,
    stop: CancellationToken,
    task: Mutex<Option<JoinHandle<()>>>,
}

/// This replica's membership; cheap to clone.
#[derive(Clone)]
pub struct Membership {
    view: watch::Receiver<View>,
    inner: Option<Arc<Inner>>,
}

impl std::fmt::Debug for Membership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Membership")
            .field("view", &*self.view.borrow())
            .finish()
    }
}

impl Membership {
    /// No sharding: this replica owns every key.
    pub fn everything(me: &str) -> Self {
        let (_, view) = watch::channel(View::everything(me));
        Self { view, inner: None }
    }

    /// Joins group `group` (e.g. `flotilla-execution`) as `identity`: renews the Lease
    /// `<group>-<identity>` in `namespace` and watches the others'.
    pub fn start(
        client: kube::Client,
        namespace: &str,
        group: &str,
        identity: &str,
        timings: LeaseTimings,
        readiness: Option<Readiness>,
    ) -> Self {
        if let Some(readiness) = &readiness {
            readiness.set(READINESS_CHECK, false, "joining");
        }
        let (sender, view) = watch::channel(View {
            me: identity.to_owned(),
            ..Default::default()
        });
        let inner = Arc::new(Inner {
            api: Api::namespaced(client.clone(), namespace),
            namespaces: Api::all(client),
            namespace: namespace.to_owned(),
            group: group.to_owned(),
            lease_name: format!("{group}-{}", name_fragment(identity, 200)),
            timings,
            view: sender,
            readiness,
            stop: CancellationToken::new(),
            task: Mutex::new(None),
        });
        let task = tokio::spawn(run(Arc::clone(&inner)));
        *inner.task.lock().unwrap_or_else(|p| p.into_inner()) = Some(task);
        Self {
            view,
            inner: Some(inner),
        }
    }

    /// The current view.
    pub fn view(&self) -> View {
        self.view.borrow().clone()
    }

    /// Whether this replica owns `key` and may act on it now.
    pub fn owns(&self, key: &str) -> bool {
        self.view.borrow().owns(key)
    }

    /// A receiver that changes with the view.
    pub fn subscribe(&self) -> watch::Receiver<View> {
        self.view.clone()
    }

    /// Exits the process (status 1) when membership is lost (see the module docs).
    pub fn exit_on_loss(&self) {
        let mut view = self.view.clone();
        tokio::spawn(async move {
            if view.wait_for(|v| v.lost).await.is_ok() {
                tracing::error!(
                    "membership Lease not renewed within the renew deadline; exiting so that this replica restarts"
                );
                std::process::exit(1);
            }
        });
    }

    /// Stops renewing and deletes this replica's Lease, so the others take its keys at their
    /// next refresh. Call after the workers stopped.
    pub async fn leave(&self) {
        let Some(inner) = &self.inner else { return };
        inner.stop.cancel();
        let task = inner.task.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(task) = task {
            let _ = task.await;
        }
        inner.view.send_modify(|v| {
            v.members.clear();
            v.settled = false;
        });
        match inner
            .api
            .delete(&inner.lease_name, &DeleteParams::default())
            .await
        {
            Ok(_) => tracing::info!(lease = %inner.lease_name, "left the membership"),
            Err(error) => {
                tracing::warn!(lease = %inner.lease_name, %error, "cannot delete the membership Lease; the others take over when it expires")
            }
        }
    }
}

async fn run(inner: Arc<Inner>) {
    let me = inner.view.borrow().me.clone();
    let mut observations = Observations::default();
    let mut last_renewal: Option<Instant> = None;
    let mut joined: Option<(Instant, bool)> = None;
    loop {
        let attempt = Instant::now();
        match renew(&inner, &me).await {
            Ok(()) => last_renewal = Some(attempt),
            Err(error) => {
                tracing::warn!(lease = %inner.lease_name, %error, "cannot renew the membership Lease")
            }
        }
        let me_renewed = last_renewal.is_some_and(|at| at.elapsed() <= inner.timings.renew_deadline);
        if last_renewal.is_some() && !me_renewed {
            inner.view.send_modify(|v| {
                v.lost = true;
                v.settled = false;
            });
            if let Some(readiness) = &inner.readiness {
                readiness.set(READINESS_CHECK, false, "membership lost; restarting");
            }
            return;
        }
        match list(&inner, &mut observations).await {
            Ok(leases) if me_renewed => {
                delete_abandoned(&inner, &leases).await;
                let members = live_members(&leases, &me, true);
                let (joined_at, alone) = *joined.get_or_insert((attempt, members.len() == 1));
                let view = View {
                    me: me.clone(),
                    settled: settled(alone, joined_at.elapsed(), inner.timings.lease_duration),
                    members,
                    lost: false,
                };
                members_gauge()
                    .get_or_create(&ServiceLabels {
                        service: inner.group.clone(),
                    })
                    .set(i64::try_from(view.members.len()).unwrap_or(i64::MAX));
                if let Some(readiness) = &inner.readiness {
                    readiness.set(
                        READINESS_CHECK,
                        true,
                        format!(
                            "{} of {} members ({}){}",
                            me,
                            view.members.len(),
                            view.members.join(", "),
                            if view.settled {
                                ""
                            } else {
                                "; waiting one lease duration before taking over keys"
                            }
                        ),
                    );
                }
                inner.view.send_if_modified(|current| {
                    if *current != view {
                        tracing::info!(members = ?view.members, settled = view.settled, "membership changed");
                        *current = view;
                        true
                    } else {
                        false
                    }
                });
            }
            Ok(_) => {}
            Err(error) => tracing::warn!(%error, "cannot list membership Leases"),
        }
        tokio::select! {
            _ = inner.stop.cancelled() => return,
            _ = tokio::time::sleep(inner.timings.retry_period) => {}
        }
    }
}

async fn renew(inner: &Inner, me: &str) -> Result<(), kube::Error> {
    match inner.api.get_opt(&inner.lease_name).await? {
        None => {
            let labels = BTreeMap::from([(MEMBERSHIP_LABEL.to_owned(), inner.group.clone())]);
            let lease = new_lease(&inner.lease_name, me, &inner.timings, labels);
            match inner.api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(()),
                Err(kube::Error::Api(status)) if status.code == 404 => {
                    ensure_namespace(&inner.namespaces, &inner.namespace).await?;
                    inner.api.create(&PostParams::default(), &lease).await.map(|_| ())
                }
                Err(error) => Err(error),
            }
        }
        Some(mut lease) => {
            // Our own Lease (its name embeds our identity): renew it whatever it says.
            let spec = lease.spec.clone().unwrap_or_default();
            lease.spec = Some(LeaseSpec {
                holder_identity: Some(me.to_owned()),
                renew_time: Some(MicroTime(Timestamp::now())),
                lease_duration_seconds: Some(inner.timings.lease_duration_seconds()),
                ..spec
            });
            inner
                .api
                .replace(&inner.lease_name, &PostParams::default(), &lease)
                .await
                .map(|_| ())
        }
    }
}

/// Deletes the abandoned Leases among `leases` (see [`abandoned`]), each only if unchanged since
/// it was read; another member deleting it first, or its replica renewing it meanwhile, is fine.
async fn delete_abandoned(inner: &Inner, leases: &[MemberLease]) {
    for lease in abandoned(leases, &inner.lease_name) {
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                resource_version: Some(lease.resource_version.clone()),
                uid: None,
            }),
            ..DeleteParams::default()
        };
        match inner.api.delete(&lease.name, &params).await {
            Ok(_) => tracing::info!(
                lease = %lease.name,
                holder = lease.holder.as_deref().unwrap_or_default(),
                unchanged_for = ?lease.unchanged_for,
                "deleted an abandoned membership Lease"
            ),
            Err(error) => {
                tracing::debug!(lease = %lease.name, %error, "abandoned membership Lease not deleted")
            }
        }
    }
}

async fn list(inner: &Inner, observations: &mut Observations) -> Result<Vec<MemberLease>, kube::Error> {
    let now = Instant::now();
    let selector = format!("{MEMBERSHIP_LABEL}={}", inner.group);
    let leases = inner.api.list(&ListParams::default().labels(&selector)).await?;
    let names: Vec<String> = leases.items.iter().map(|l| l.name_any()).collect();
    observations.retain(&names);
    Ok(leases
        .items
        .iter()
        .map(|lease| {
            let spec = lease.spec.clone().unwrap_or_default();
            MemberLease {
                name: lease.name_any(),
                resource_version: lease.metadata.resource_version.clone().unwrap_or_default(),
                holder: spec.holder_identity,
                duration: inner.timings.record_duration(spec.lease_duration_seconds),
                unchanged_for: observations.observe(
                    &lease.name_any(),
                    lease.metadata.resource_version.as_deref().unwrap_or_default(),
                    now,
                ),
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::time::Duration;

    use clap::Parser;

    use super::*;

    fn lease(holder: Option<&str>, unchanged_for: u64) -> MemberLease {
        MemberLease {
            name: format!("flotilla-execution-{}", holder.unwrap_or("none")),
            resource_version: "1".to_owned(),
            holder: holder.map(str::to_owned),
            duration: Duration::from_secs(15),
            unchanged_for: Duration::from_secs(unchanged_for),
        }
    }

    #[test]
    fn live_members_are_unexpired_holders_and_me() {
        let leases = vec![
            lease(Some("b"), 3),
            lease(Some("c"), 15),
            lease(Some("a"), 100),
            lease(None, 0),
            lease(Some(" "), 0),
            lease(Some("d"), 14),
            lease(Some("b"), 0),
        ];
        assert_eq!(live_members(&leases, "a", true), vec!["a", "b", "d"]);
        assert_eq!(live_members(&leases, "a", false), vec!["b", "d"]);
        assert_eq!(live_members(&[], "a", true), vec!["a"]);
        assert!(live_members(&[], "a", false).is_empty());
    }

    #[test]
    fn leases_unchanged_for_four_durations_are_abandoned_except_our_own() {
        let mine = lease(Some("a"), 600);
        let leases = vec![
            lease(Some("b"), 59),
            lease(Some("c"), 60),
            lease(Some("d"), 14),
            lease(None, 3_600),
            mine.clone(),
        ];
        let names: Vec<&str> = abandoned(&leases, &mine.name)
            .iter()
            .map(|l| l.name.as_str())
            .collect();
        assert_eq!(names, vec!["flotilla-execution-c", "flotilla-execution-none"]);
        assert!(abandoned(&[], "x").is_empty());
    }

    #[test]
    fn views_own_keys_only_when_settled_and_not_lost() {
        let view = View {
            me: "a".into(),
            members: vec!["a".into(), "b".into()],
            settled: true,
            lost: false,
        };
        let keys: Vec<String> = (0..50).map(|i| format!("cluster/member{i}")).collect();
        let mine: Vec<&String> = keys.iter().filter(|k| view.owns(k)).collect();
        assert!(
            !mine.is_empty() && mine.len() < keys.len(),
            "{} of 50",
            mine.len()
        );
        for key in &keys {
            assert_eq!(view.owns(key), view.owner_of(key) == Some("a"));
        }
        let unsettled = View {
            settled: false,
            ..view.clone()
        };
        assert!(keys.iter().all(|k| !unsettled.owns(k)));
        let lost = View { lost: true, ..view };
        assert!(keys.iter().all(|k| !lost.owns(k)));
        let everything = View::everything("a");
        assert!(keys.iter().all(|k| everything.owns(k)));
        assert!(!View::default().owns("x"));
    }

    #[derive(Debug, Parser)]
    struct Flags {
        #[command(flatten)]
        membership: MembershipArgs,
    }

    #[test]
    fn flags() {
        let flags = Flags::try_parse_from(["x"]).unwrap().membership;
        assert!(flags.sharding);
        assert_eq!(flags.timings().unwrap(), LeaseTimings::default());
        let flags = Flags::try_parse_from([
            "x",
            "--sharding=false",
            "--membership-lease-duration",
            "3s",
            "--membership-renew-deadline",
            "2s",
            "--membership-retry-period",
            "500ms",
        ])
        .unwrap()
        .membership;
        assert!(!flags.sharding);
        assert_eq!(flags.timings().unwrap().lease_duration, Duration::from_secs(3));
        let bad = Flags::try_parse_from(["x", "--membership-retry-period", "1m"])
            .unwrap()
            .membership;
        assert!(bad.timings().is_err());
    }

    #[tokio::test]
    async fn without_sharding_one_replica_owns_everything() {
        let membership = Membership::everything("solo");
        assert!(membership.owns("cluster/member1"));
        assert_eq!(membership.view().members, vec!["solo"]);
        membership.leave().await;
        assert!(membership.owns("cluster/member1"));
    }
}
