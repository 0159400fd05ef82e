//! Member clusters: access built from `Cluster` objects and their credentials Secrets, one
//! Work queue and worker per cluster (an unreachable member never blocks another), the health
//! probe that writes each Cluster's `Ready` condition and version, the watches on the member
//! objects execution manages, and the Works whose report waits for the member's controllers.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use base64::Engine;
use flotilla_api::cluster::{SECRET_CA_DATA_KEY, SECRET_TOKEN_KEY};
use flotilla_api::conditions;
use flotilla_api::lean::Lean;
use flotilla_api::well_known::{
    MANAGED_LABEL, WORK_NAME_ANNOTATION, WORK_NAMESPACE_ANNOTATION, conditions as condition_types,
    execution_namespace,
};
use flotilla_api::{Cluster, Work};
use flotilla_runtime::queue::WorkQueue;
use flotilla_runtime::transport::DeadlineLayer;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::Timestamp;
use kube::api::{DynamicObject, PartialObjectMeta, Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use serde_json::json;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::arrivals::{Arrivals, Budget};
use crate::context::Context;
use crate::error::{ExecutionError, is_connection_error};
use crate::kinds::{Kind, KindCache};

/// Reason of `Ready=True`.
pub const CLUSTER_READY: &str = "ClusterReady";
/// Reason of `Ready=False` when the member does not answer.
pub const CLUSTER_NOT_REACHABLE: &str = "ClusterNotReachable";
/// Reason of `Ready=False` when the Cluster's access is misconfigured.
pub const CLUSTER_ACCESS_INVALID: &str = "ClusterAccessInvalid";

/// How execution reaches one member.
pub struct MemberClient {
    /// For requests: a short connect timeout and a deadline per request (`--member-timeout`),
    /// so an unreachable or stalled member fails fast.
    pub api: Client,
    /// For watches: long-lived requests, no deadline.
    pub watch: Client,
    /// Kinds the member serves.
    pub kinds: KindCache,
}

/// What a member's access is built from (the Cluster spec); a change means a new client. A
/// rotated Secret is picked up when the member answers 401/403 (see [`Member::invalidate`]).
type AccessKey = String;

/// One member cluster's runtime state.
pub struct Member {
    /// The cluster name.
    pub name: String,
    /// Names of the Works in `karmada-es-<name>` to reconcile.
    pub queue: WorkQueue<Arc<str>>,
    /// Wakes the health probe early (a worker saw the member fail).
    pub probe_now: Notify,
    /// Wakes the probe task to recompute the cluster's taints without probing (its conditions
    /// or the ClusterTaintPolicies changed).
    pub taints_now: Notify,
    client: Mutex<Option<(AccessKey, Arc<MemberClient>)>>,
    watches: Mutex<HashMap<(String, String), JoinHandle<()>>>,
    /// Member objects a worker is applying or has just applied ([`Member::begin_apply`]).
    echoes: Mutex<HashMap<EchoKey, Echo>>,
    /// The kinds (apiVersion, kind) a member watch has listed, kept when the watches are
    /// dropped ([`Member::listed_again`]).
    listed: Mutex<HashSet<(String, String)>>,
    /// Works whose report waits for the member's controllers, each as the waiting reconcile
    /// read it, with the wait's end ([`Member::wait_for_report`]).
    reports_due: Mutex<HashMap<Arc<str>, (Work, tokio::time::Instant)>>,
    /// Works the control-plane watch delivered and queued, held for the worker
    /// ([`crate::arrivals`]).
    pub arrivals: Arrivals,
}

/// A member object: apiVersion, kind, namespace (empty if cluster-scoped), name.
pub type EchoKey = (String, String, String, String);

/// What the member watch knows of a worker's apply of one member object.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Echo {
    /// The apply is in flight. The watch holds back the object's events meanwhile (the last
    /// one's resourceVersion and the Work it names): the apply's answer tells whether it was
    /// the apply's own echo.
    Applying(Option<(String, String)>),
    /// The apply answered with this resourceVersion and its event has not arrived yet.
    Expected(String),
}

/// An apply in flight ([`Member::begin_apply`]). [`InFlightApply::end`] reports its answer;
/// dropped without it (the worker's future was cancelled), the apply counts as failed, so the
/// object's events are never held back for good.
pub struct InFlightApply {
    member: Arc<Member>,
    key: Option<EchoKey>,
}

impl InFlightApply {
    /// The apply answered with resourceVersion `answered` (`None`: it failed); the object had
    /// `before` when the worker read it. Queues the Work of an event held back meanwhile that
    /// was not the apply's own echo.
    pub fn end(mut self, answered: Option<&str>, before: Option<&str>) {
        self.finish(answered, before);
    }

    fn finish(&mut self, answered: Option<&str>, before: Option<&str>) {
        if let Some(key) = self.key.take()
            && let Some(work) = self.member.end_apply(key, answered, before)
        {
            self.member.queue.add(work.into());
        }
    }
}

impl Drop for InFlightApply {
    fn drop(&mut self) {
        self.finish(None, None);
    }
}

/// What the member watch does with an event of a member object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum EventAction {
    /// Queue the Work the object names.
    Queue,
    /// Nothing: the echo of execution's own apply, or held back until the apply in flight ends.
    Skip,
}

impl Member {
    fn new(name: &str, held_works: Arc<Budget>) -> Self {
        Self {
            name: name.to_owned(),
            queue: WorkQueue::new(Duration::from_millis(200), Duration::from_secs(30)),
            probe_now: Notify::new(),
            taints_now: Notify::new(),
            client: Mutex::new(None),
            watches: Mutex::new(HashMap::new()),
            echoes: Mutex::new(HashMap::new()),
            listed: Mutex::new(HashSet::new()),
            reports_due: Mutex::new(HashMap::new()),
            arrivals: Arrivals::new(held_works),
        }
    }

    fn reports_due(&self) -> MutexGuard<'_, HashMap<Arc<str>, (Work, tokio::time::Instant)>> {
        self.reports_due.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Leaves Work `name`'s report to a later reconcile: the one the member watch queues when
    /// a controller of the member reports on what was applied, or else the one the queue's
    /// delayed add brings once `wait` has passed. A reconcile of the Work in between ends the
    /// wait ([`Member::report_taken`]) and cancels that add. `work` is the Work as the waiting
    /// reconcile read it: the reconcile that reports need not read it again.
    pub fn wait_for_report(&self, name: Arc<str>, wait: Duration, work: Work) {
        let due = tokio::time::Instant::now() + wait;
        self.reports_due().insert(Arc::clone(&name), (work, due));
        self.queue.add_after(name, wait);
    }

    /// A reconcile of Work `name` began (or its worker left it to another replica): a wait
    /// begun earlier is over. Returns the Work as the waiting reconcile read it.
    pub fn report_taken(&self, name: &str) -> Option<Work> {
        let (work, timed_out) = self.take_report(name)?;
        crate::metrics::metrics().report_wait_ended(&self.name, timed_out);
        Some(work)
    }

    /// [`Member::report_taken`] without the metric: the Work as read, and whether the wait had
    /// passed (`false`: a reconcile came first, usually because a controller reported, or a
    /// retry's add that was due earlier than the wait's).
    fn take_report(&self, name: &str) -> Option<(Work, bool)> {
        let (work, due) = self.reports_due().remove(name)?;
        // The wait's delayed add, if still pending, is not needed any more.
        self.queue.cancel_after(name);
        Some((work, tokio::time::Instant::now() >= due))
    }

    /// How many Works' reports are waiting.
    #[cfg(test)]
    fn reports_waiting(&self) -> usize {
        self.reports_due().len()
    }

    /// A member watch of `kind` finished listing: whether `kind` was listed before, by this
    /// watch or by one it replaced (new credentials drop the watches). Such a listing follows a
    /// gap in which an object may have been deleted without an event.
    fn listed_again(&self, kind: &(String, String)) -> bool {
        !self
            .listed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(kind.clone())
    }

    fn echoes(&self) -> MutexGuard<'_, HashMap<EchoKey, Echo>> {
        self.echoes.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A worker is about to apply the member object `key`; it reports the answer with
    /// [`InFlightApply::end`].
    ///
    /// The watch event of a worker's own apply carries nothing the applying reconcile did not
    /// see (it writes the Work's status from the apply's answer), so it must not queue the Work
    /// again: that would cost a Work read, a member read and often a status write per member
    /// object. The event may arrive before the apply's answer or after it; while the apply is in
    /// flight the watch holds the object's events back, and the answer decides.
    pub fn begin_apply(self: &Arc<Self>, key: EchoKey) -> InFlightApply {
        self.echoes().insert(key.clone(), Echo::Applying(None));
        InFlightApply {
            member: Arc::clone(self),
            key: Some(key),
        }
    }

    /// The apply of `key` begun with [`Member::begin_apply`] ended: `answered` is the
    /// resourceVersion the member answered with (`None`: the apply failed), `before` the one
    /// the object had when the worker read it (`None`: it did not exist). Returns the Work to
    /// queue for an event held back meanwhile that was not the apply's echo.
    fn end_apply(&self, key: EchoKey, answered: Option<&str>, before: Option<&str>) -> Option<String> {
        let mut echoes = self.echoes();
        match echoes.remove(&key) {
            // The echo came first, and no other event after it.
            Some(Echo::Applying(Some((seen, _)))) if answered == Some(seen.as_str()) => None,
            // Another change (or the apply failed): the Work is looked at again.
            Some(Echo::Applying(Some((_, work)))) => Some(work),
            // An apply that changed nothing has no event to wait for.
            Some(Echo::Applying(None)) => {
                if let Some(answered) = answered.filter(|answered| Some(*answered) != before) {
                    echoes.insert(key, Echo::Expected(answered.to_owned()));
                }
                None
            }
            // Never begun here, or dropped meanwhile (a deletion event queued the Work, the
            // member's client was replaced): nothing to decide.
            Some(Echo::Expected(_)) | None => None,
        }
    }

    /// What the watch does with an event of the member object `key` at `resource_version`
    /// naming `work`. A deletion is never an echo (and ends any expectation); an event during an
    /// apply is held back for [`Member::end_apply`]; the expected echo is skipped, and any
    /// other event queues the Work (and ends the expectation: a later change is not an echo).
    fn on_event(
        &self,
        key: &EchoKey,
        resource_version: Option<&str>,
        deleted: bool,
        work: &str,
    ) -> EventAction {
        let mut echoes = self.echoes();
        if deleted {
            echoes.remove(key);
            return EventAction::Queue;
        }
        match echoes.get_mut(key) {
            Some(Echo::Applying(seen)) => {
                *seen = Some((resource_version.unwrap_or_default().to_owned(), work.to_owned()));
                EventAction::Skip
            }
            Some(Echo::Expected(expected)) => {
                let echo = Some(expected.as_str()) == resource_version;
                echoes.remove(key);
                if echo {
                    EventAction::Skip
                } else {
                    EventAction::Queue
                }
            }
            None => EventAction::Queue,
        }
    }

    /// The execution namespace of this member.
    pub fn namespace(&self) -> String {
        execution_namespace(&self.name)
    }

    fn cached(&self) -> MutexGuard<'_, Option<(AccessKey, Arc<MemberClient>)>> {
        self.client.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn watches(&self) -> MutexGuard<'_, HashMap<(String, String), JoinHandle<()>>> {
        self.watches.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Drops the cached client (credentials may have changed) and its watches.
    pub fn invalidate(&self) {
        *self.cached() = None;
        for (_, watch) in self.watches().drain() {
            watch.abort();
        }
        self.echoes().clear();
    }
}

/// Every member cluster execution knows of (from Cluster objects and execution namespaces).
#[derive(Default)]
pub struct Members {
    members: Mutex<HashMap<String, Arc<Member>>>,
}

impl Members {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Arc<Member>>> {
        self.members.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The member `name`, if known.
    pub fn get(&self, name: &str) -> Option<Arc<Member>> {
        self.lock().get(name).cloned()
    }

    /// Every known member.
    pub fn all(&self) -> Vec<Arc<Member>> {
        self.lock().values().cloned().collect()
    }

    /// Works waiting in every known member's Work queue (not those being applied or delayed
    /// by a retry's backoff): what the burst binding workers are held back by.
    pub fn queued_works(&self) -> usize {
        self.lock().values().map(|member| member.queue.len()).sum()
    }

    /// The member `name`, starting its Work workers and health probe on first sight.
    pub fn ensure(ctx: &Arc<Context>, name: &str) -> Arc<Member> {
        let (member, created) = {
            let mut members = ctx.members.lock();
            match members.get(name) {
                Some(member) => (member.clone(), false),
                None => {
                    let member = Arc::new(Member::new(name, Arc::clone(&ctx.held_works)));
                    members.insert(name.to_owned(), member.clone());
                    (member, true)
                }
            }
        };
        if created {
            for _ in 0..ctx.settings.work_workers.max(1) {
                tokio::spawn(crate::apply::run_worker(ctx.clone(), member.clone()));
            }
            tokio::spawn(run_probe(ctx.clone(), member.clone()));
        }
        member
    }
}

/// The kubeconfig for a member reached at `endpoint` with `token`, trusting `ca_pem` (or
/// nothing but the system roots), optionally without TLS verification.
pub fn member_kubeconfig(
    endpoint: &str,
    token: &str,
    ca_pem: Option<&[u8]>,
    insecure: bool,
) -> Result<Kubeconfig, serde_json::Error> {
    let mut cluster = json!({"server": endpoint});
    if insecure {
        cluster["insecure-skip-tls-verify"] = json!(true);
    }
    if let Some(ca) = ca_pem {
        cluster["certificate-authority-data"] = json!(base64::engine::general_purpose::STANDARD.encode(ca));
    }
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "member", "cluster": cluster}],
        "users": [{"name": "member", "user": {"token": token}}],
        "contexts": [{"name": "member", "context": {"cluster": "member", "user": "member"}}],
        "current-context": "member",
    }))
}

/// The client of `member`, built from its Cluster object and credentials Secret (cached until
/// either changes).
pub async fn member_client(ctx: &Context, member: &Member) -> Result<Arc<MemberClient>, ExecutionError> {
    let access_error = |problem: String| ExecutionError::Access {
        cluster: member.name.clone(),
        problem,
    };
    let Some(cluster) = ctx.stores.clusters.get(&ObjectRef::new(&member.name)) else {
        return Err(access_error(format!(
            "no Cluster object named {:?}; register it with `flotilla join`",
            member.name
        )));
    };
    let spec_key = serde_json::to_string(&cluster.spec).unwrap_or_default();
    if let Some((key, client)) = member.cached().as_ref()
        && *key == spec_key
    {
        return Ok(client.clone());
    }
    let endpoint = cluster
        .spec
        .api_endpoint
        .clone()
        .filter(|e| !e.is_empty())
        .ok_or_else(|| {
            access_error("spec.apiEndpoint is not set; set it to the member's API server URL".into())
        })?;
    let secret_ref = cluster.spec.secret_ref.clone().ok_or_else(|| {
        access_error("spec.secretRef is not set; point it at the credentials Secret".into())
    })?;
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &secret_ref.namespace);
    let secret = secrets
        .get_opt(&secret_ref.name)
        .await
        .map_err(ExecutionError::control_plane(format!(
            "read Secret {}/{}",
            secret_ref.namespace, secret_ref.name
        )))?
        .ok_or_else(|| {
            access_error(format!(
                "spec.secretRef names Secret {}/{}, which does not exist",
                secret_ref.namespace, secret_ref.name
            ))
        })?;
    let data = secret.data.clone().unwrap_or_default();
    let token = data
        .get(SECRET_TOKEN_KEY)
        .map(|t| String::from_utf8_lossy(&t.0).trim().to_owned())
        .filter(|t| !t.is_empty())
        .ok_or_else(|| {
            access_error(format!(
                "Secret {}/{} has no {SECRET_TOKEN_KEY:?} key",
                secret_ref.namespace, secret_ref.name
            ))
        })?;
    let ca = data.get(SECRET_CA_DATA_KEY).map(|c| c.0.clone());
    let kubeconfig = member_kubeconfig(
        &endpoint,
        &token,
        ca.as_deref(),
        cluster.spec.insecure_skip_tls_verification,
    )
    .map_err(|e| access_error(format!("cannot build a kubeconfig: {e}")))?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| access_error(format!("invalid access: {e}")))?;
    // Over HTTP/2 when the member offers it, as the control-plane client (ADR 0031): a member's
    // requests share one connection and its watches another. A request's deadline is
    // `--member-timeout`, its whole answer included; a connection is given 3 s to open.
    let builder = |config: &kube::Config| {
        flotilla_runtime::transport::client_builder(config)
            .map_err(|e| access_error(format!("cannot build a client: {e}")))
    };
    let mut api_config = config.clone();
    api_config.connect_timeout = Some(Duration::from_secs(3));
    let api = builder(&api_config)?
        .with_layer(&DeadlineLayer::new(ctx.settings.member_timeout))
        .build();
    let watch = builder(&config)?.build();
    let client = Arc::new(MemberClient {
        api,
        watch,
        kinds: KindCache::default(),
    });
    member.invalidate();
    *member.cached() = Some((spec_key, client.clone()));
    Ok(client)
}

/// Maps a member request error: connection failures are [`ExecutionError::Unreachable`].
pub fn member_error(cluster: &str, action: impl Into<String>, error: kube::Error) -> ExecutionError {
    if is_connection_error(&error) {
        ExecutionError::Unreachable {
            cluster: cluster.to_owned(),
            message: error.to_string(),
        }
    } else {
        ExecutionError::Member {
            cluster: cluster.to_owned(),
            action: action.into(),
            source: error,
        }
    }
}

/// Makes sure the member objects of `kind` carrying `karmada.io/managed=true` are watched in
/// `member`, so a drifted or deleted object re-queues its Work at once; when a watch lists a kind
/// listed before (it lost its place, or it replaced a dropped watch), every Work of the cluster
/// is queued, since an object deleted meanwhile sends no event and the resync leaves settled
/// Works alone. The watch asks for metadata only: the Work's annotations are all it reads, and
/// whole objects would cost the member API server and this service a serialization each. An
/// `Api<PartialObjectMeta<_>>` lists and watches with `Accept: application/json;as=PartialObjectMetadata[List];g=meta.k8s.io;v=v1`
/// (kube >= 3.1; kube-runtime's deprecated `metadata_watcher` sends the same requests), so the
/// server sends metadata, not whole objects (`crates/apiserver/tests/kube_client.rs`,
/// `metadata_only_list_and_watch`); the metadata's `managedFields` are skipped as they are read
/// ([`Lean`]).
pub fn ensure_watch(ctx: &Arc<Context>, member: &Arc<Member>, client: &MemberClient, kind: &Kind) {
    let key = (kind.resource.api_version.clone(), kind.resource.kind.clone());
    let mut watches = member.watches();
    if watches.get(&key).is_some_and(|w| !w.is_finished()) {
        return;
    }
    let api: Api<Lean<PartialObjectMeta<DynamicObject>>> =
        Api::all_with(client.watch.clone(), &kind.resource);
    let queue = member.queue.clone();
    let namespace = member.namespace();
    let shutdown = ctx.shutdown.clone();
    let watched = key.clone();
    let cluster = member.name.clone();
    let kind_name = kind.resource.kind.clone();
    let ctx = Arc::clone(ctx);
    let member = Arc::clone(member);
    let handle = tokio::spawn(async move {
        let config = watcher::Config::default().labels(&format!("{MANAGED_LABEL}=true"));
        let mut events = watcher(api, config).default_backoff().boxed();
        loop {
            let event = tokio::select! {
                _ = shutdown.cancelled() => return,
                event = events.next() => event,
            };
            let Some(event) = event else { return };
            let (object, deleted) = match event {
                Ok(watcher::Event::Apply(object) | watcher::Event::InitApply(object)) => (object, false),
                Ok(watcher::Event::Delete(object)) => (object, true),
                Ok(watcher::Event::InitDone) => {
                    // Listing again means the watch lost its place (the member restarted, its
                    // history moved on while the watch was away, or new credentials replaced
                    // the watch). An object deleted in the gap sends no event, and the resync
                    // leaves settled Works alone: every Work of the cluster is checked again.
                    if member.listed_again(&watched) {
                        tracing::info!(%cluster, kind = %kind_name, "member watch listed again; queueing the cluster's Works");
                        enqueue_cluster_works(&ctx, &member);
                    }
                    continue;
                }
                Ok(watcher::Event::Init) => continue,
                Err(error) => {
                    tracing::debug!(%cluster, kind = %kind_name, %error, "member watch failed; retrying");
                    continue;
                }
            };
            let annotations = object.annotations();
            let Some(work) = annotations
                .get(WORK_NAME_ANNOTATION)
                .filter(|_| annotations.get(WORK_NAMESPACE_ANNOTATION) == Some(&namespace))
            else {
                continue;
            };
            let echo_key = (
                watched.0.clone(),
                watched.1.clone(),
                object.namespace().unwrap_or_default(),
                object.name_any(),
            );
            match member.on_event(&echo_key, object.resource_version().as_deref(), deleted, work) {
                EventAction::Queue => queue.add(work.as_str().into()),
                EventAction::Skip => {}
            }
        }
    });
    watches.insert(key, handle);
}

/// The first retry of a member not seen ready yet; doubles up to the probe period.
const FIRST_PROBE_RETRY: Duration = Duration::from_millis(250);

/// Probes `member` every probe period (or when a worker saw it fail) and writes the Cluster's
/// `Ready` condition and `kubernetesVersion`, then its taints ([`crate::taints`]); recomputes
/// the taints alone when [`Member::taints_now`] fires. When the member becomes ready again,
/// every Work of the cluster is queued so it catches up at once.
pub async fn run_probe(ctx: Arc<Context>, member: Arc<Member>) {
    let mut was_ready: Option<bool> = None;
    // Until the member has been seen ready once (a cluster just joined, its credentials or this
    // replica's ownership not there yet), probe again soon instead of a whole period later.
    let mut retry = FIRST_PROBE_RETRY;
    let mut next_probe = tokio::time::Instant::now();
    let mut taints_due: Option<tokio::time::Instant> = None;
    loop {
        let now = tokio::time::Instant::now();
        // Only the cluster's owner probes it and writes its status and taints.
        let owner = ctx.owns(&crate::context::cluster_shard(&member.name));
        if now >= next_probe {
            let (ready, due) = if owner {
                probe_once(&ctx, &member).await
            } else {
                was_ready = None;
                (None, None)
            };
            if ready == Some(true) && was_ready != Some(true) {
                enqueue_cluster_works(&ctx, &member);
            }
            if ready.is_some() {
                was_ready = ready;
            }
            let wait = if was_ready == Some(true) {
                ctx.settings.probe_period
            } else {
                let wait = retry.min(ctx.settings.probe_period);
                retry = retry.saturating_mul(2);
                wait
            };
            next_probe = tokio::time::Instant::now() + wait;
            taints_due = due.map(|due| tokio::time::Instant::now() + due);
        } else if owner {
            let due = sync_taints_only(&ctx, &member).await;
            taints_due = due.map(|due| tokio::time::Instant::now() + due);
        }
        // A NoExecute taint falling due before the next probe is written on time.
        let wake = taints_due.map_or(next_probe, |due| next_probe.min(due + Duration::from_millis(50)));
        tokio::select! {
            _ = ctx.shutdown.cancelled() => return,
            _ = tokio::time::sleep_until(wake) => {}
            _ = member.probe_now.notified() => next_probe = tokio::time::Instant::now(),
            _ = member.taints_now.notified() => {}
        }
    }
}

/// Recomputes the taints of `member`'s Cluster as cached, without probing; returns when they
/// are next due.
async fn sync_taints_only(ctx: &Context, member: &Member) -> Option<Duration> {
    let cluster = ctx.stores.clusters.get(&ObjectRef::new(&member.name))?;
    crate::taints::sync_taints(ctx, &cluster).await
}

/// Queues every Work in the member's execution namespace.
pub fn enqueue_cluster_works(ctx: &Context, member: &Member) {
    let namespace = member.namespace();
    for work in ctx
        .stores
        .works
        .state()
        .iter()
        .filter(|w| w.namespace() == namespace)
    {
        member.queue.add(work.queue_name());
    }
}

/// One probe: whether the member is ready (`None` when there is no Cluster object: nothing to
/// write), and when its failover taints are next due.
async fn probe_once(ctx: &Context, member: &Member) -> (Option<bool>, Option<Duration>) {
    let Some(cluster) = ctx.stores.clusters.get(&ObjectRef::new(&member.name)) else {
        return (None, None);
    };
    let started = Instant::now();
    let (ready, reason, message, version) = match member_client(ctx, member).await {
        Err(error) => (false, CLUSTER_ACCESS_INVALID, error.to_string(), None),
        Ok(client) => match client.api.apiserver_version().await {
            Ok(info) => (
                true,
                CLUSTER_READY,
                "cluster is healthy and ready to accept workloads".to_owned(),
                Some(info.git_version),
            ),
            Err(error) => {
                if matches!(&error, kube::Error::Api(status) if status.code == 401 || status.code == 403) {
                    member.invalidate();
                }
                (
                    false,
                    CLUSTER_NOT_REACHABLE,
                    format!("cluster {} is not reachable: {error}", member.name),
                    None,
                )
            }
        },
    };
    tracing::trace!(cluster = %member.name, ready, elapsed = ?started.elapsed(), "probed member");
    let due = match write_cluster_status(ctx, &cluster, ready, reason, &message, version).await {
        Ok(written) => crate::taints::sync_taints(ctx, written.as_ref().unwrap_or(&cluster)).await,
        Err(error) => {
            tracing::debug!(cluster = %member.name, %error, "cannot write Cluster status");
            None
        }
    };
    (Some(ready), due)
}

/// Writes the Cluster's `Ready` condition and version when they changed; returns the Cluster
/// as written (`None`: nothing to write).
async fn write_cluster_status(
    ctx: &Context,
    cluster: &Cluster,
    ready: bool,
    reason: &str,
    message: &str,
    version: Option<String>,
) -> Result<Option<Cluster>, kube::Error> {
    let mut status = cluster.status.clone().unwrap_or_default();
    let mut changed = conditions::set(
        &mut status.conditions,
        condition_types::READY,
        ready,
        reason,
        message,
        None,
        Timestamp::now(),
    );
    if let Some(version) = version
        && status.kubernetes_version.as_deref() != Some(version.as_str())
    {
        status.kubernetes_version = Some(version);
        changed = true;
    }
    if !changed {
        return Ok(None);
    }
    let api: Api<Cluster> = Api::all(ctx.client.clone());
    let patch = json!({
        "metadata": {"resourceVersion": cluster.resource_version()},
        "status": status,
    });
    let written = api
        .patch_status(
            &cluster.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await?;
    Ok(Some(written))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The burst binding workers' measure: Works waiting in every member's queue, not those a
    /// worker is applying, nor those waiting out a retry's backoff.
    #[tokio::test(start_paused = true)]
    async fn queued_works_count_what_waits_in_every_member_queue() {
        use futures::FutureExt;
        let members = Members::default();
        assert_eq!(members.queued_works(), 0, "no member");
        for name in ["member1", "member2"] {
            members
                .lock()
                .insert(name.to_owned(), Arc::new(Member::new(name, Budget::new(0))));
        }
        let member1 = members.get("member1").expect("member1");
        let member2 = members.get("member2").expect("member2");
        for work in ["a", "b", "c"] {
            member1.queue.add(Arc::from(work));
        }
        member1.queue.add(Arc::from("a"));
        member2.queue.add(Arc::from("d"));
        assert_eq!(members.queued_works(), 4, "a Work queued twice waits once");
        let taken = member1.queue.next().now_or_never().flatten().expect("a");
        assert_eq!(members.queued_works(), 3, "a Work being applied does not wait");
        member1.queue.add_rate_limited(taken.clone());
        member1.queue.done(&taken);
        assert_eq!(members.queued_works(), 3, "nor one waiting out a retry's backoff");
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(members.queued_works(), 4, "until the backoff ends");
    }

    /// A waiting report is queued when its wait ends, unless a reconcile of the Work took it
    /// first; waiting again moves the end; the Work as read is kept until a reconcile takes it.
    #[tokio::test(start_paused = true)]
    async fn a_waiting_report_is_queued_once_unless_taken() {
        use futures::FutureExt;
        let member = Arc::new(Member::new("member1", Budget::new(0)));
        let wait = Duration::from_millis(500);
        let read = |name: &str| Work::new(name, flotilla_api::work::WorkSpec::default());
        let queued = |member: &Member| {
            let mut names = Vec::new();
            while !member.queue.is_empty() {
                let name = member
                    .queue
                    .next()
                    .now_or_never()
                    .flatten()
                    .expect("a queued name");
                member.queue.done(&name);
                names.push(name.to_string());
            }
            names
        };
        member.wait_for_report("work-a".into(), wait, read("work-a"));
        member.wait_for_report("work-b".into(), wait, read("work-b"));
        assert_eq!(member.reports_waiting(), 2);
        tokio::time::sleep(Duration::from_millis(499)).await;
        assert!(queued(&member).is_empty(), "not before the wait ends");
        // The member watch queued work-b and its reconcile began: its report is taken.
        let taken = member.report_taken("work-b").expect("work-b waits");
        assert_eq!(taken.metadata.name.as_deref(), Some("work-b"), "the Work as read");
        assert!(member.report_taken("work-b").is_none(), "taken once");
        tokio::time::sleep(Duration::from_millis(2)).await;
        assert_eq!(queued(&member), ["work-a"]);
        // The reconcile the wait's end queued takes the Work as read.
        assert_eq!(member.reports_waiting(), 1);
        let taken = member.report_taken("work-a").expect("work-a waited");
        assert_eq!(taken.metadata.name.as_deref(), Some("work-a"));
        assert_eq!(member.reports_waiting(), 0);
        tokio::time::sleep(wait).await;
        assert!(queued(&member).is_empty(), "each wait queues at most once");

        // Waiting again (a reconcile applied once more): only the later end queues.
        member.wait_for_report("work-c".into(), wait, read("work-c"));
        tokio::time::sleep(Duration::from_millis(300)).await;
        member.report_taken("work-c");
        member.wait_for_report("work-c".into(), wait, read("work-c"));
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(queued(&member).is_empty(), "the first wait was taken");
        tokio::time::sleep(Duration::from_millis(201)).await;
        assert_eq!(queued(&member), ["work-c"]);
        let (_, timed_out) = member.take_report("work-c").expect("work-c waited");
        assert!(timed_out, "brought by the wait's end");

        // A retry's add due before the wait's end: the wait adds nothing (the queue keeps the
        // earlier add), and the reconcile the retry brings takes the report before the wait
        // passed.
        member.queue.add_rate_limited("work-d".into());
        member.wait_for_report("work-d".into(), wait, read("work-d"));
        tokio::time::sleep(Duration::from_millis(201)).await;
        assert_eq!(queued(&member), ["work-d"]);
        let (_, timed_out) = member.take_report("work-d").expect("work-d waits");
        assert!(!timed_out, "taken by the retry's reconcile, not the wait's end");
        tokio::time::sleep(wait).await;
        assert!(queued(&member).is_empty(), "the wait's add was never pending");
    }

    #[test]
    fn only_the_event_of_its_own_apply_is_an_echo() {
        use EventAction::{Queue, Skip};
        let member = Arc::new(Member::new("member1", Budget::new(0)));
        let key = |name: &str| -> EchoKey {
            (
                "apps/v1".into(),
                "Deployment".into(),
                "default".into(),
                name.into(),
            )
        };
        let event = |name: &str, rv: &str| member.on_event(&key(name), Some(rv), false, "work-a");
        let held = || member.echoes().len();
        assert_eq!(event("web", "5"), Queue, "nothing applied");

        // The answer first, then the echo: skipped once; the next event queues.
        member.begin_apply(key("web")).end(Some("6"), Some("5"));
        assert_eq!(event("api", "6"), Queue, "another object");
        assert_eq!(event("web", "6"), Skip);
        assert_eq!(event("web", "6"), Queue, "used up by its echo");
        assert_eq!(held(), 0);

        // The echo first (held back while the apply is in flight), then the answer.
        let apply = member.begin_apply(key("web"));
        assert_eq!(event("web", "7"), Skip);
        apply.end(Some("7"), Some("6"));
        assert_eq!(held(), 0, "nothing left to expect");
        assert_eq!(member.queue.len(), 0, "the echo queued nothing");

        // Another writer's change held back during the apply queues the Work it names.
        let apply = member.begin_apply(key("web"));
        assert_eq!(member.on_event(&key("web"), Some("8"), false, "work-b"), Skip);
        apply.end(Some("9"), Some("7"));
        assert_eq!(member.queue.len(), 1);
        assert_eq!(held(), 0);

        // Another writer's change after the answer: not the echo; the expectation goes.
        member.begin_apply(key("web")).end(Some("11"), Some("9"));
        assert_eq!(event("web", "10"), Queue);
        assert_eq!(event("web", "11"), Queue);

        // An apply that changed nothing has no echo to wait for: nothing is kept.
        member.begin_apply(key("web")).end(Some("11"), Some("11"));
        assert_eq!(held(), 0);
        // Neither does a failed one; an event held back meanwhile queues its Work.
        member.begin_apply(key("web")).end(None, Some("11"));
        assert_eq!(held(), 0);
        let apply = member.begin_apply(key("web"));
        assert_eq!(event("web", "12"), Skip);
        drop(apply);
        assert_eq!(
            (held(), member.queue.len()),
            (0, 2),
            "a cancelled apply counts as failed"
        );

        // A deletion is never an echo and ends the expectation.
        member.begin_apply(key("web")).end(Some("13"), Some("12"));
        assert_eq!(member.on_event(&key("web"), Some("13"), true, "work-a"), Queue);
        assert_eq!(event("web", "13"), Queue);

        // New credentials drop the watches, and the expectations with them.
        member.begin_apply(key("web")).end(Some("14"), Some("13"));
        member.invalidate();
        assert_eq!(event("web", "14"), Queue);
    }

    #[test]
    fn a_kind_listed_before_is_listed_again_even_by_a_new_watch() {
        let member = Member::new("member1", Budget::new(0));
        let deployments = ("apps/v1".to_owned(), "Deployment".to_owned());
        let config_maps = ("v1".to_owned(), "ConfigMap".to_owned());
        assert!(!member.listed_again(&deployments), "the first listing");
        assert!(!member.listed_again(&config_maps), "kinds are apart");
        assert!(member.listed_again(&deployments), "a relist of the same watch");
        // New credentials drop the watches; the next watch's first listing follows a gap too.
        member.invalidate();
        assert!(member.listed_again(&config_maps));
    }

    #[test]
    fn kubeconfig_from_cluster_access() {
        let config = member_kubeconfig("https://127.0.0.1:6443", "s3cret", Some(b"PEM"), false).unwrap();
        assert_eq!(config.current_context.as_deref(), Some("member"));
        let cluster = config.clusters[0].cluster.as_ref().unwrap();
        assert_eq!(cluster.server.as_deref(), Some("https://127.0.0.1:6443"));
        assert_eq!(cluster.certificate_authority_data.as_deref(), Some("UEVN"));
        assert_eq!(cluster.insecure_skip_tls_verify, None);
        let user = config.auth_infos[0].auth_info.as_ref().unwrap();
        assert!(user.token.is_some());

        let insecure = member_kubeconfig("https://m:1", "t", None, true).unwrap();
        let cluster = insecure.clusters[0].cluster.as_ref().unwrap();
        assert_eq!(cluster.insecure_skip_tls_verify, Some(true));
        assert_eq!(cluster.certificate_authority_data, None);
    }
}
