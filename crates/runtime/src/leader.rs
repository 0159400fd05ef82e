//! Active/standby leader election on a `coordination.k8s.io/v1` Lease.
//!
//! Every replica runs a [`LeaderElection`]; the one holding the Lease is the leader and the only
//! one that writes. The holder renews every retry period with a `resourceVersion` precondition
//! (two candidates can never both win one update); a candidate takes the Lease when it is
//! released or when its record stayed unchanged for `leaseDurationSeconds` on the candidate's
//! own clock ([`crate::lease::claim`]).
//!
//! Losing leadership is final for the process: a leader that cannot renew within the renew
//! deadline (shorter than the lease duration, so it stops before anyone may take over) or finds
//! another holder moves to [`Role::Lost`]; services call [`LeaderElection::exit_on_loss`], which
//! exits the process so the supervisor (kubelet, `flotilla up`) starts it again as a standby.
//! Exiting is the simplest way to guarantee that no write of the old leader is still in flight
//! once another replica leads. On graceful shutdown a leader [`LeaderElection::release`]s the
//! Lease, so a standby takes over at its next retry instead of after the lease duration.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use flotilla_rpc::Readiness;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::lease::{Claim, DEFAULT_NAMESPACE, LeaseTimings, Observations, claim, parse_duration};

/// The readiness check a leader-elected service reports (`leader` or `standby`; both ready).
pub const READINESS_CHECK: &str = "leader-election";

/// Leader-election flags (client-go's names).
#[derive(Clone, Debug, clap::Args)]
pub struct LeaderElectArgs {
    /// Run active/standby on a Lease: only the holder writes. `--leader-elect=false` runs
    /// without a Lease (a single replica only).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub leader_elect: bool,
    /// How long a Lease record unchanged means its holder is gone (failover time).
    #[arg(long, default_value = "15s", value_parser = parse_duration)]
    pub leader_elect_lease_duration: Duration,
    /// How long a leader keeps trying to renew before it gives up and exits.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub leader_elect_renew_deadline: Duration,
    /// How often the leader renews and a standby retries.
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub leader_elect_retry_period: Duration,
    /// Namespace of the Lease.
    #[arg(long, default_value = DEFAULT_NAMESPACE)]
    pub leader_elect_namespace: String,
}

impl Default for LeaderElectArgs {
    fn default() -> Self {
        let timings = LeaseTimings::default();
        Self {
            leader_elect: true,
            leader_elect_lease_duration: timings.lease_duration,
            leader_elect_renew_deadline: timings.renew_deadline,
            leader_elect_retry_period: timings.retry_period,
            leader_elect_namespace: DEFAULT_NAMESPACE.to_owned(),
        }
    }
}

impl LeaderElectArgs {
    /// The timings, validated (`retry < renew deadline < lease duration`).
    pub fn timings(&self) -> Result<LeaseTimings, String> {
        let timings = LeaseTimings {
            lease_duration: self.leader_elect_lease_duration,
            renew_deadline: self.leader_elect_renew_deadline,
            retry_period: self.leader_elect_retry_period,
        };
        timings.validate("leader-elect")?;
        Ok(timings)
    }
}

/// Where a replica stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Role {
    /// Waiting for the Lease; `holder` is the current leader, if known.
    Standby {
        /// The current holder.
        holder: Option<String>,
    },
    /// Holding the Lease: this replica writes.
    Leader,
    /// Was leader and is not any more: must not write again (the process exits).
    Lost,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ServiceLabels {
    service: String,
}

fn leader_gauge() -> &'static Family<ServiceLabels, Gauge> {
    static GAUGE: std::sync::OnceLock<Family<ServiceLabels, Gauge>> = std::sync::OnceLock::new();
    GAUGE.get_or_init(|| {
        let family = Family::<ServiceLabels, Gauge>::default();
        flotilla_telemetry::metrics::register(
            "leader",
            "1 while this replica holds its service's leader Lease, 0 while standby",
            family.clone(),
        );
        family
    })
}

fn set_leader_metric(service: &str, leader: bool) {
    leader_gauge()
        .get_or_create(&ServiceLabels {
            service: service.to_owned(),
        })
        .set(i64::from(leader));
}

struct Inner {
    api: Option<Api<Lease>>,
    namespaces: Option<Api<Namespace>>,
    namespace: String,
    name: String,
    identity: String,
    service: String,
    timings: LeaseTimings,
    role: watch::Sender<Role>,
    readiness: Option<Readiness>,
    stop: CancellationToken,
    task: Mutex<Option<JoinHandle<()>>>,
}

/// One replica's part in the election of a service's leader; cheap to clone.
#[derive(Clone)]
pub struct LeaderElection {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for LeaderElection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderElection")
            .field("lease", &self.inner.name)
            .field("identity", &self.inner.identity)
            .field("role", &*self.inner.role.borrow())
            .finish()
    }
}

impl LeaderElection {
    /// No election: this replica is always the leader (`--leader-elect=false`, tests).
    pub fn always_leader(service: &str) -> Self {
        set_leader_metric(service, true);
        Self {
            inner: Arc::new(Inner {
                api: None,
                namespaces: None,
                namespace: String::new(),
                name: String::new(),
                identity: String::new(),
                service: service.to_owned(),
                timings: LeaseTimings::default(),
                role: watch::Sender::new(Role::Leader),
                readiness: None,
                stop: CancellationToken::new(),
                task: Mutex::new(None),
            }),
        }
    }

    /// Starts competing for Lease `namespace/name` as `identity`; reports the role in
    /// `readiness` (check [`READINESS_CHECK`]) and the `flotilla_leader{service}` gauge.
    pub fn start(
        client: kube::Client,
        namespace: &str,
        name: &str,
        identity: &str,
        service: &str,
        timings: LeaseTimings,
        readiness: Option<Readiness>,
    ) -> Self {
        set_leader_metric(service, false);
        if let Some(readiness) = &readiness {
            readiness.set(READINESS_CHECK, false, "not elected yet");
        }
        let inner = Arc::new(Inner {
            api: Some(Api::namespaced(client.clone(), namespace)),
            namespaces: Some(Api::all(client)),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            identity: identity.to_owned(),
            service: service.to_owned(),
            timings,
            role: watch::Sender::new(Role::Standby { holder: None }),
            readiness,
            stop: CancellationToken::new(),
            task: Mutex::new(None),
        });
        let task = tokio::spawn(run(Arc::clone(&inner)));
        *inner.task.lock().unwrap_or_else(|p| p.into_inner()) = Some(task);
        tracing::info!(lease = %format!("{namespace}/{name}"), identity, "leader election started");
        Self { inner }
    }

    /// The current role.
    pub fn role(&self) -> Role {
        self.inner.role.borrow().clone()
    }

    /// Whether this replica may write now.
    pub fn is_leader(&self) -> bool {
        *self.inner.role.borrow() == Role::Leader
    }

    /// This replica's identity (empty without an election).
    pub fn identity(&self) -> &str {
        &self.inner.identity
    }

    /// Waits until this replica leads; `false` when it never will (lost, or stopped).
    pub async fn wait_leader(&self) -> bool {
        let mut role = self.inner.role.subscribe();
        match role.wait_for(|r| matches!(r, Role::Leader | Role::Lost)).await {
            Ok(r) => *r == Role::Leader,
            Err(_) => false,
        }
    }

    /// Waits until leadership is lost.
    pub async fn wait_lost(&self) {
        let mut role = self.inner.role.subscribe();
        let _ = role.wait_for(|r| *r == Role::Lost).await;
    }

    /// Exits the process (status 1) when leadership is lost, so that nothing this replica
    /// still has in flight can race the new leader; the supervisor restarts it as a standby.
    pub fn exit_on_loss(&self) {
        let this = self.clone();
        tokio::spawn(async move {
            this.wait_lost().await;
            tracing::error!(
                lease = %this.inner.name,
                identity = %this.inner.identity,
                "leadership lost; exiting so that this replica restarts as a standby"
            );
            std::process::exit(1);
        });
    }

    /// Stops competing and, if leading, releases the Lease (holder cleared) so a standby takes
    /// over at its next retry. Call after the writers have stopped.
    pub async fn release(&self) {
        self.inner.stop.cancel();
        let task = self.inner.task.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(task) = task {
            let _ = task.await;
        }
        let was_leader = self.is_leader();
        if let Some(api) = &self.inner.api
            && was_leader
        {
            match release(api, &self.inner.name, &self.inner.identity).await {
                Ok(true) => tracing::info!(lease = %self.inner.name, "leader Lease released"),
                Ok(false) => {}
                Err(error) => {
                    tracing::warn!(lease = %self.inner.name, %error, "cannot release the leader Lease; a standby takes over when it expires")
                }
            }
            self.inner.role.send_replace(Role::Standby { holder: None });
            set_leader_metric(&self.inner.service, false);
        }
    }
}

async fn run(inner: Arc<Inner>) {
    let Some(api) = inner.api.clone() else { return };
    let mut observations = Observations::default();
    let mut last_renewal: Option<Instant> = None;
    loop {
        let attempt = Instant::now();
        let leading = *inner.role.borrow() == Role::Leader;
        match try_acquire_or_renew(&inner, &api, &mut observations).await {
            Ok(Attempt::Holding) => {
                last_renewal = Some(attempt);
                if !leading {
                    tracing::info!(identity = %inner.identity, lease = %inner.name, "became leader");
                    inner.role.send_replace(Role::Leader);
                    set_leader_metric(&inner.service, true);
                    if let Some(readiness) = &inner.readiness {
                        readiness.set(READINESS_CHECK, true, format!("leader ({})", inner.identity));
                    }
                }
            }
            Ok(Attempt::HeldBy(holder)) => {
                if leading {
                    tracing::error!(
                        holder = holder.as_deref().unwrap_or(""),
                        "another replica holds the leader Lease"
                    );
                    return lose(&inner);
                }
                if let Some(readiness) = &inner.readiness {
                    readiness.set(
                        READINESS_CHECK,
                        true,
                        format!("standby (leader: {})", holder.as_deref().unwrap_or("none")),
                    );
                }
                inner.role.send_if_modified(|role| {
                    let standby = Role::Standby { holder };
                    if *role != standby {
                        *role = standby;
                        true
                    } else {
                        false
                    }
                });
            }
            Err(error) => {
                tracing::warn!(lease = %inner.name, %error, "leader election: cannot read or write the Lease");
                if !leading && let Some(readiness) = &inner.readiness {
                    readiness.set(READINESS_CHECK, false, format!("cannot reach the Lease: {error}"));
                }
            }
        }
        if *inner.role.borrow() == Role::Leader
            && last_renewal.is_none_or(|at| at.elapsed() > inner.timings.renew_deadline)
        {
            tracing::error!(deadline = ?inner.timings.renew_deadline, "could not renew the leader Lease within the renew deadline");
            return lose(&inner);
        }
        tokio::select! {
            _ = inner.stop.cancelled() => return,
            _ = tokio::time::sleep(inner.timings.retry_period) => {}
        }
    }
}

fn lose(inner: &Inner) {
    inner.role.send_replace(Role::Lost);
    set_leader_metric(&inner.service, false);
    if let Some(readiness) = &inner.readiness {
        readiness.set(READINESS_CHECK, false, "leadership lost; restarting");
    }
}

enum Attempt {
    Holding,
    HeldBy(Option<String>),
}

fn is_status(error: &kube::Error, code: u16) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == code)
}

async fn try_acquire_or_renew(
    inner: &Inner,
    api: &Api<Lease>,
    observations: &mut Observations,
) -> Result<Attempt, kube::Error> {
    let now = Instant::now();
    let Some(mut lease) = api.get_opt(&inner.name).await? else {
        let lease = new_lease(&inner.name, &inner.identity, &inner.timings, Default::default());
        return match api.create(&PostParams::default(), &lease).await {
            Ok(_) => Ok(Attempt::Holding),
            Err(error) if is_status(&error, 409) => Ok(Attempt::HeldBy(None)),
            Err(error) if is_status(&error, 404) => {
                if let Some(namespaces) = &inner.namespaces {
                    ensure_namespace(namespaces, &inner.namespace).await?;
                }
                // Try again at once: waiting a retry period as a standby would leave a fresh
                // installation without a leader for no reason.
                match api.create(&PostParams::default(), &lease).await {
                    Ok(_) => Ok(Attempt::Holding),
                    Err(error) if is_status(&error, 409) => Ok(Attempt::HeldBy(None)),
                    Err(error) => Err(error),
                }
            }
            Err(error) => Err(error),
        };
    };
    let spec = lease.spec.clone().unwrap_or_default();
    let unchanged_for = observations.observe(
        &inner.name,
        lease.metadata.resource_version.as_deref().unwrap_or_default(),
        now,
    );
    let duration = inner.timings.record_duration(spec.lease_duration_seconds);
    let decision = claim(
        spec.holder_identity.as_deref(),
        &inner.identity,
        duration,
        unchanged_for,
    );
    let stamp = MicroTime(Timestamp::now());
    let next = match decision {
        Claim::Wait(_) => return Ok(Attempt::HeldBy(spec.holder_identity)),
        Claim::Renew => LeaseSpec {
            renew_time: Some(stamp),
            lease_duration_seconds: Some(inner.timings.lease_duration_seconds()),
            ..spec
        },
        Claim::Acquire => LeaseSpec {
            holder_identity: Some(inner.identity.clone()),
            acquire_time: Some(stamp.clone()),
            renew_time: Some(stamp),
            lease_duration_seconds: Some(inner.timings.lease_duration_seconds()),
            lease_transitions: Some(spec.lease_transitions.unwrap_or(0) + 1),
            ..spec
        },
    };
    lease.spec = Some(next);
    // `lease.metadata.resourceVersion` is the one read: the replace is a compare-and-swap.
    match api.replace(&inner.name, &PostParams::default(), &lease).await {
        Ok(_) => Ok(Attempt::Holding),
        Err(error) if is_status(&error, 409) => Ok(Attempt::HeldBy(None)),
        Err(error) => Err(error),
    }
}

/// A Lease held by `identity`, acquired now.
pub(crate) fn new_lease(
    name: &str,
    identity: &str,
    timings: &LeaseTimings,
    labels: std::collections::BTreeMap<String, String>,
) -> Lease {
    let stamp = MicroTime(Timestamp::now());
    Lease {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: (!labels.is_empty()).then_some(labels),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(identity.to_owned()),
            acquire_time: Some(stamp.clone()),
            renew_time: Some(stamp),
            lease_duration_seconds: Some(timings.lease_duration_seconds()),
            lease_transitions: Some(0),
            ..Default::default()
        }),
    }
}

/// Creates `name` if it does not exist (the Lease namespace on a fresh control plane).
pub(crate) async fn ensure_namespace(api: &Api<Namespace>, name: &str) -> Result<(), kube::Error> {
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..Default::default()
        },
        ..Default::default()
    };
    match api.create(&PostParams::default(), &namespace).await {
        Ok(_) => Ok(()),
        Err(error) if is_status(&error, 409) => Ok(()),
        Err(error) => Err(error),
    }
}

/// Clears the holder of Lease `name` if `identity` holds it; `true` when released.
async fn release(api: &Api<Lease>, name: &str, identity: &str) -> Result<bool, kube::Error> {
    let Some(mut lease) = api.get_opt(name).await? else {
        return Ok(false);
    };
    let mut spec = lease.spec.clone().unwrap_or_default();
    if spec.holder_identity.as_deref() != Some(identity) {
        return Ok(false);
    }
    spec.holder_identity = None;
    spec.lease_duration_seconds = Some(1);
    spec.renew_time = Some(MicroTime(Timestamp::now()));
    lease.spec = Some(spec);
    match api.replace(name, &PostParams::default(), &lease).await {
        Ok(_) => Ok(true),
        Err(error) if is_status(&error, 409) => Ok(false),
        Err(error) => Err(error),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Flags {
        #[command(flatten)]
        leader: LeaderElectArgs,
    }

    #[test]
    fn flags_and_defaults() {
        let flags = Flags::try_parse_from(["x"]).unwrap().leader;
        assert!(flags.leader_elect);
        assert_eq!(flags.timings().unwrap(), LeaseTimings::default());
        assert_eq!(flags.leader_elect_namespace, "flotilla-system");
        for off in [
            &["x", "--leader-elect=false"][..],
            &["x", "--leader-elect", "false"][..],
        ] {
            assert!(
                !Flags::try_parse_from(off).unwrap().leader.leader_elect,
                "{off:?}"
            );
        }
        assert!(
            Flags::try_parse_from(["x", "--leader-elect"])
                .unwrap()
                .leader
                .leader_elect
        );
        let flags = Flags::try_parse_from([
            "x",
            "--leader-elect-lease-duration",
            "3s",
            "--leader-elect-renew-deadline",
            "2s",
            "--leader-elect-retry-period",
            "500ms",
            "--leader-elect-namespace",
            "ops",
        ])
        .unwrap()
        .leader;
        assert_eq!(flags.timings().unwrap().retry_period, Duration::from_millis(500));
        assert_eq!(flags.leader_elect_namespace, "ops");
        let bad = Flags::try_parse_from(["x", "--leader-elect-renew-deadline", "20s"])
            .unwrap()
            .leader;
        assert!(
            bad.timings()
                .unwrap_err()
                .contains("--leader-elect-renew-deadline")
        );
    }

    #[tokio::test]
    async fn without_election_the_replica_leads() {
        let election = LeaderElection::always_leader("test");
        assert!(election.is_leader());
        assert!(election.wait_leader().await);
        election.release().await;
        assert!(election.is_leader(), "nothing to release without a Lease");
        let text = flotilla_telemetry::metrics::encode_text();
        assert!(text.contains("flotilla_leader{service=\"test\"} 1"), "{text}");
    }
}
