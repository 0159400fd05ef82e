//! The detector's I/O: caches of policies (kube-runtime reflectors), bindings (compact caches
//! of [`CachedBinding`], ADR 0016) and every template kind the policies select, two work
//! queues (policies, templates), and the reconcile functions that read the caches, call the
//! pure planners and perform the writes.
//!
//! Caches may lag behind the API. Every write is idempotent and every change produces a watch
//! event that queues the object again, so a decision taken on a stale cache is corrected on the
//! next pass — with one exception that matters for lazy activation: a decision that *refreshes
//! a binding of a Lazy policy* (or records a lazy baseline) is taken again on objects read fresh
//! from the API before anything is written, so a lagging cache can never make a pending policy
//! change take effect.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use flotilla_api::lean::Lean;
use flotilla_api::overrides::{
    ClusterOverridePolicy, OverridePolicy, OverridePolicyKind, OverridePolicyStatus,
};
use flotilla_api::policy::{ClusterPropagationPolicy, PolicyStatus, PropagationPolicy, PropagationSpec};
use flotilla_api::watched::Watched;
use flotilla_api::well_known::{
    CLUSTER_PROPAGATION_POLICY_FINALIZER, CLUSTER_PROPAGATION_POLICY_PERMANENT_ID_LABEL,
    PROPAGATION_POLICY_FINALIZER, PROPAGATION_POLICY_PERMANENT_ID_LABEL, reasons,
};
use flotilla_api::work::{ClusterResourceBinding, ResourceBinding};
use flotilla_proto::v1::scheduler_client::SchedulerClient;
use flotilla_proto::v1::{BindingRef, ScheduleRequest};
use flotilla_rpc::{Readiness, RetryPolicy, TracedChannel};
use flotilla_runtime::cache::{self, Cache, CacheWriter, Update};
use flotilla_runtime::queue::{DEFAULT_BASE_BACKOFF, DEFAULT_MAX_BACKOFF, WorkQueue, backoff};
use flotilla_runtime::watch::{Change, run as watch};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use kube::api::{DynamicObject, Patch};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::{Api, Client};
use serde_json::{Value, json};
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, field};

use crate::api::{ApiError, BindingApi, binding_ref, get_template, patch_params, patch_template};
use crate::binding::{BindingView, CachedBinding};
use crate::claim::Claim;
use crate::content::{CachedTemplate, TemplateContent};
use crate::events::EventRecorder;
use crate::keys::{Gvk, PolicyKey, PolicyKind, TemplateKey};
use crate::matching::PolicyView;
use crate::metrics::metrics;
use crate::overrides::{OverrideKey, OverrideView};
use crate::plan::{BindingWrite, ConditionChange, Outcome, TemplateInput, TemplatePlan, plan_template};
use crate::policy::{Counts, cluster_propagation_policy_view, desired_status, propagation_policy_view};
use crate::revision::revisions_to_record;

/// Tunables of the controller.
#[derive(Clone, Debug)]
pub struct ControllerOptions {
    /// The scheduler's gRPC address (`http://host:port`); `None` disables the fast-path call.
    pub scheduler_addr: Option<String>,
    /// Template workers.
    pub workers: usize,
    /// How often every template is reconciled again even without events (a safety net).
    pub resync: Duration,
    /// The longest wait between attempts to watch a kind that is not served (yet).
    pub kind_retry_max: Duration,
    /// Leader election: workers start only once this replica leads (`None`: always leads). A
    /// standby keeps its caches warm and writes nothing.
    pub leadership: Option<flotilla_runtime::leader::LeaderElection>,
}

impl Default for ControllerOptions {
    fn default() -> Self {
        Self {
            scheduler_addr: None,
            workers: 8,
            resync: Duration::from_secs(600),
            kind_retry_max: Duration::from_secs(10),
            leadership: None,
        }
    }
}

/// Errors of one reconcile; the key is retried with backoff.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// An API call failed.
    #[error(transparent)]
    Api(#[from] ApiError),
    /// The template or its binding changed between the read and the write; retried.
    #[error("{0} changed concurrently; retrying")]
    Race(String),
}

/// One watched template kind.
struct KindWatch {
    resource: ApiResource,
    cache: Cache<CachedTemplate>,
    synced: Arc<AtomicBool>,
    task: JoinHandle<()>,
}

impl Drop for KindWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[derive(Default)]
struct Synced {
    propagation_policies: AtomicBool,
    cluster_propagation_policies: AtomicBool,
    override_policies: AtomicBool,
    cluster_override_policies: AtomicBool,
    resource_bindings: AtomicBool,
    cluster_resource_bindings: AtomicBool,
}

impl Synced {
    fn all(&self) -> bool {
        self.propagation_policies.load(Ordering::Acquire)
            && self.cluster_propagation_policies.load(Ordering::Acquire)
            && self.override_policies.load(Ordering::Acquire)
            && self.cluster_override_policies.load(Ordering::Acquire)
            && self.resource_bindings.load(Ordering::Acquire)
            && self.cluster_resource_bindings.load(Ordering::Acquire)
    }
}

/// How often policies whose templates changed get their status (the counts) refreshed, at most.
const STATUS_REFRESH_PERIOD: Duration = Duration::from_millis(500);

/// Status refreshes driven by template changes are at least this many times as far apart as a
/// count of the templates takes, so counting costs at most this share of one core whatever
/// the number of templates.
const STATUS_REFRESH_COST_FACTOR: u32 = 20;

/// State shared by the detector's tasks.
pub struct Detector {
    client: Client,
    options: ControllerOptions,
    propagation_policies: Store<PropagationPolicy>,
    cluster_propagation_policies: Store<ClusterPropagationPolicy>,
    resource_bindings: Cache<CachedBinding>,
    cluster_resource_bindings: Cache<CachedBinding>,
    override_policies: Store<OverridePolicy>,
    cluster_override_policies: Store<ClusterOverridePolicy>,
    synced: Synced,
    kinds: RwLock<BTreeMap<Gvk, Arc<KindWatch>>>,
    views: RwLock<BTreeMap<PolicyKey, PolicyView>>,
    /// Every override policy, as the template planner reads them.
    override_views: RwLock<BTreeMap<OverrideKey, OverrideView>>,
    /// `(generation, valid)` per override policy uid whose templates were last queued (an
    /// optimisation, like `fanned_out`).
    overrides_fanned_out: Mutex<HashMap<String, (i64, bool)>>,
    override_queue: WorkQueue<OverrideKey>,
    /// `(generation, valid, deleting)` per policy uid whose templates were last queued: an
    /// optimisation only (a restart queues everything again), never an input of a decision.
    fanned_out: Mutex<HashMap<String, (i64, bool, bool)>>,
    /// [`crate::policy::watch_signature`] of every cached policy: a policy event queues the
    /// policy only when it moved (status writes do not; an optimisation like the above).
    policy_signatures: Mutex<HashMap<PolicyKey, u64>>,
    /// How long the last count of a policy's templates took, in microseconds: status refreshes
    /// driven by template changes are spaced by [`STATUS_REFRESH_COST_FACTOR`] times it.
    counts_cost_micros: AtomicU64,
    templates: WorkQueue<TemplateKey>,
    policies: WorkQueue<PolicyKey>,
    status_dirty: Mutex<BTreeSet<PolicyKey>>,
    kinds_changed: tokio::sync::watch::Sender<u64>,
    events: EventRecorder,
    scheduler: Option<SchedulerClient<TracedChannel>>,
    schedule_slots: Arc<Semaphore>,
    readiness: Readiness,
}

/// The write sides of the detector's typed caches, handed from [`Detector::new`] to
/// [`Detector::run`].
pub struct CacheWriters {
    propagation_policies: reflector::store::Writer<PropagationPolicy>,
    cluster_propagation_policies: reflector::store::Writer<ClusterPropagationPolicy>,
    override_policies: reflector::store::Writer<OverridePolicy>,
    cluster_override_policies: reflector::store::Writer<ClusterOverridePolicy>,
    resource_bindings: CacheWriter<CachedBinding>,
    cluster_resource_bindings: CacheWriter<CachedBinding>,
}

impl Detector {
    /// A detector over `client`; [`Detector::run`] starts it.
    pub fn new(
        client: Client,
        options: ControllerOptions,
        readiness: Readiness,
    ) -> Result<(Arc<Self>, CacheWriters), flotilla_rpc::client::ClientError> {
        let scheduler = match options.scheduler_addr.as_deref().filter(|a| !a.is_empty()) {
            Some(address) => Some(SchedulerClient::new(flotilla_rpc::connect(
                address,
                &flotilla_rpc::ClientOptions::default(),
            )?)),
            None => None,
        };
        let pp = reflector::store::Writer::default();
        let cpp = reflector::store::Writer::default();
        let (resource_bindings, rb) = Cache::new();
        let (cluster_resource_bindings, crb) = Cache::new();
        let op = reflector::store::Writer::default();
        let cop = reflector::store::Writer::default();
        let detector = Arc::new(Self {
            propagation_policies: pp.as_reader(),
            cluster_propagation_policies: cpp.as_reader(),
            resource_bindings,
            cluster_resource_bindings,
            override_policies: op.as_reader(),
            cluster_override_policies: cop.as_reader(),
            override_views: RwLock::default(),
            overrides_fanned_out: Mutex::default(),
            override_queue: WorkQueue::default(),
            events: EventRecorder::new(client.clone()),
            client,
            options,
            synced: Synced::default(),
            kinds: RwLock::default(),
            views: RwLock::default(),
            fanned_out: Mutex::default(),
            policy_signatures: Mutex::default(),
            counts_cost_micros: AtomicU64::new(0),
            templates: WorkQueue::default(),
            policies: WorkQueue::default(),
            status_dirty: Mutex::default(),
            kinds_changed: tokio::sync::watch::channel(0).0,
            scheduler,
            schedule_slots: Arc::new(Semaphore::new(64)),
            readiness,
        });
        let writers = CacheWriters {
            propagation_policies: pp,
            cluster_propagation_policies: cpp,
            override_policies: op,
            cluster_override_policies: cop,
            resource_bindings: rb,
            cluster_resource_bindings: crb,
        };
        Ok((detector, writers))
    }

    /// Runs until `shutdown`: watches, kind management, workers, status upkeep.
    pub async fn run(self: Arc<Self>, writers: CacheWriters, shutdown: CancellationToken) {
        let CacheWriters {
            propagation_policies: pp,
            cluster_propagation_policies: cpp,
            override_policies: op,
            cluster_override_policies: cop,
            resource_bindings: rb,
            cluster_resource_bindings: crb,
        } = writers;
        self.readiness.set("caches", false, "syncing");
        let mut tasks: Vec<JoinHandle<()>> = vec![
            tokio::spawn(flotilla_runtime::api_probe::run(
                self.client.clone(),
                self.readiness.clone(),
                shutdown.clone(),
            )),
            tokio::spawn(Arc::clone(&self).watch_policies(pp, cpp)),
            tokio::spawn(Arc::clone(&self).watch_bindings(rb, crb)),
            tokio::spawn(Arc::clone(&self).watch_override_policies(op, cop)),
            tokio::spawn(Arc::clone(&self).override_worker()),
            tokio::spawn(Arc::clone(&self).manage_kinds()),
            tokio::spawn(Arc::clone(&self).upkeep()),
            tokio::spawn(Arc::clone(&self).policy_worker()),
        ];
        for _ in 0..self.options.workers.max(1) {
            tasks.push(tokio::spawn(Arc::clone(&self).template_worker()));
        }
        shutdown.cancelled().await;
        for task in &tasks {
            task.abort();
        }
        self.kinds.write().unwrap_or_else(|p| p.into_inner()).clear();
    }

    // ------------------------------------------------------------------------------------------
    // Watches.
    // ------------------------------------------------------------------------------------------

    async fn watch_policies(
        self: Arc<Self>,
        pp: reflector::store::Writer<PropagationPolicy>,
        cpp: reflector::store::Writer<ClusterPropagationPolicy>,
    ) {
        let this = Arc::clone(&self);
        let pps = watch(
            Api::<PropagationPolicy>::all(self.client.clone()),
            pp,
            move |event| match event {
                Change::Applied(policy) => {
                    this.policy_applied(policy_key_of_pp(policy), &policy.metadata, &policy.spec)
                }
                Change::Deleted(policy) => this.policy_deleted(policy_key_of_pp(policy)),
                Change::Synced => {
                    this.synced.propagation_policies.store(true, Ordering::Release);
                    this.resync_policies();
                    // With no policies nothing else re-evaluates readiness until the kind
                    // manager's next 30 s tick; the last cache to sync must do it.
                    this.update_readiness();
                }
            },
        );
        let this = Arc::clone(&self);
        let cpps = watch(
            Api::<ClusterPropagationPolicy>::all(self.client.clone()),
            cpp,
            move |event| match event {
                Change::Applied(policy) => this.policy_applied(
                    PolicyKey::cluster(policy.metadata.name.clone().unwrap_or_default()),
                    &policy.metadata,
                    &policy.spec.0,
                ),
                Change::Deleted(policy) => this.policy_deleted(PolicyKey::cluster(
                    policy.metadata.name.clone().unwrap_or_default(),
                )),
                Change::Synced => {
                    this.synced
                        .cluster_propagation_policies
                        .store(true, Ordering::Release);
                    this.resync_policies();
                    this.update_readiness();
                }
            },
        );
        futures::join!(pps, cpps);
    }

    /// Bindings are cached as the [`CachedBinding`] the planner reads, and a binding event
    /// requeues its template only when [`crate::binding::watch_signature`] moved.
    async fn watch_bindings(
        self: Arc<Self>,
        rb: CacheWriter<CachedBinding>,
        crb: CacheWriter<CachedBinding>,
    ) {
        let this = Arc::clone(&self);
        let rbs = cache::run(
            Api::<Watched<ResourceBinding>>::all(self.client.clone()),
            rb,
            |binding| CachedBinding::of_resource_binding(&binding.into_binding()),
            move |update| match update {
                Update::Synced => {
                    this.synced.resource_bindings.store(true, Ordering::Release);
                    this.update_readiness();
                }
                update => this.binding_updated(&update),
            },
        );
        let this = Arc::clone(&self);
        let crbs = cache::run(
            Api::<Watched<ClusterResourceBinding>>::all(self.client.clone()),
            crb,
            |binding| CachedBinding::of_cluster_resource_binding(&binding.into_binding()),
            move |update| match update {
                Update::Synced => {
                    this.synced
                        .cluster_resource_bindings
                        .store(true, Ordering::Release);
                    this.update_readiness();
                }
                update => this.binding_updated(&update),
            },
        );
        futures::join!(rbs, crbs);
    }

    /// Override policies: the views the template planner reads, and a reconcile of the
    /// policy's status. A policy's templates are queued when its generation or validity moves
    /// (see [`Detector::reconcile_override`]) and when it is deleted.
    async fn watch_override_policies(
        self: Arc<Self>,
        op: reflector::store::Writer<OverridePolicy>,
        cop: reflector::store::Writer<ClusterOverridePolicy>,
    ) {
        let this = Arc::clone(&self);
        let ops = watch(
            Api::<OverridePolicy>::all(self.client.clone()),
            op,
            move |event| match event {
                Change::Applied(policy) => this.override_changed(OverrideView::of_override_policy(policy)),
                Change::Deleted(policy) => this.override_deleted(&OverrideView::of_override_policy(policy)),
                Change::Synced => {
                    this.synced.override_policies.store(true, Ordering::Release);
                    this.resync_overrides();
                    this.update_readiness();
                }
            },
        );
        let this = Arc::clone(&self);
        let cops = watch(
            Api::<ClusterOverridePolicy>::all(self.client.clone()),
            cop,
            move |event| match event {
                Change::Applied(policy) => {
                    this.override_changed(OverrideView::of_cluster_override_policy(policy))
                }
                Change::Deleted(policy) => {
                    this.override_deleted(&OverrideView::of_cluster_override_policy(policy))
                }
                Change::Synced => {
                    this.synced
                        .cluster_override_policies
                        .store(true, Ordering::Release);
                    this.resync_overrides();
                    this.update_readiness();
                }
            },
        );
        futures::join!(ops, cops);
    }

    fn override_changed(&self, view: OverrideView) {
        let key = view.key.clone();
        self.override_views
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key.clone(), view);
        self.override_queue.add(key);
    }

    fn override_deleted(&self, view: &OverrideView) {
        self.override_views
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&view.key);
        self.overrides_fanned_out
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&view.uid);
        self.queue_templates_of_override(view);
    }

    /// After a (re)list, drops the views of policies deleted while the watch was down (no event
    /// told) and queues their templates.
    fn resync_overrides(&self) {
        let existing: BTreeSet<OverrideKey> = self
            .override_policies
            .state()
            .iter()
            .map(|p| OverrideView::of_override_policy(p).key)
            .chain(
                self.cluster_override_policies
                    .state()
                    .iter()
                    .map(|p| OverrideView::of_cluster_override_policy(p).key),
            )
            .collect();
        let gone: Vec<OverrideView> = self
            .read_override_views()
            .iter()
            .filter(|(key, _)| !existing.contains(*key))
            .map(|(_, view)| view.clone())
            .collect();
        for view in gone {
            self.override_deleted(&view);
        }
    }

    fn read_override_views(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<OverrideKey, OverrideView>> {
        self.override_views.read().unwrap_or_else(|p| p.into_inner())
    }

    /// The override policies a template in `namespace` may be affected by: every
    /// ClusterOverridePolicy and the OverridePolicies of its namespace.
    fn override_candidates(&self, namespace: Option<&str>) -> Vec<OverrideView> {
        self.read_override_views()
            .values()
            .filter(|v| match v.key.kind {
                OverridePolicyKind::ClusterOverridePolicy => true,
                OverridePolicyKind::OverridePolicy => {
                    namespace.is_some() && v.key.namespace.as_deref() == namespace
                }
            })
            .cloned()
            .collect()
    }

    /// Queues every watched template the policy may select (its kinds, in its scope) and
    /// every template whose binding records it.
    fn queue_templates_of_override(&self, view: &OverrideView) {
        let kinds: Vec<(Gvk, Arc<KindWatch>)> = self
            .read_kinds()
            .iter()
            .map(|(g, w)| (g.clone(), Arc::clone(w)))
            .collect();
        for (gvk, watch) in kinds {
            let selects_kind = view.spec.resource_selectors.is_empty()
                || view
                    .spec
                    .resource_selectors
                    .iter()
                    .any(|r| gvk.is(&r.api_version, &r.kind));
            for object in watch.cache.state() {
                let in_scope = match view.key.kind {
                    OverridePolicyKind::OverridePolicy => object.namespace() == view.key.namespace.as_deref(),
                    OverridePolicyKind::ClusterOverridePolicy => true,
                };
                if selects_kind && in_scope {
                    self.template_changed(&gvk, &object);
                }
            }
        }
        let marker = format!("\"uid\":\"{}\"", view.uid);
        for cache in [&self.resource_bindings, &self.cluster_resource_bindings] {
            for binding in cache.state() {
                if binding
                    .annotation(flotilla_api::well_known::OVERRIDES_ANNOTATION)
                    .is_some_and(|value| value.contains(&marker))
                {
                    self.binding_changed(binding.template());
                }
            }
        }
    }

    async fn override_worker(self: Arc<Self>) {
        if !self.wait_active().await {
            return;
        }
        let span_of = |key: &OverrideKey| {
            tracing::info_span!(
                parent: None,
                "detector.reconcile",
                otel.kind = "internal",
                controller = "override-policy",
                object = %key,
                outcome = field::Empty,
            )
        };
        work_through(&self.override_queue, "override-policy", span_of, |key| {
            let detector = Arc::clone(&self);
            async move { detector.reconcile_override(&key).await }
        })
        .await;
    }

    /// Records the policy's status (`Valid`, the generation revision: before anything else
    /// reads the generation as written, see [`crate::overrides`]) and queues its templates when
    /// its generation or validity moved.
    async fn reconcile_override(&self, key: &OverrideKey) -> Result<&'static str, ReconcileError> {
        let (metadata, status, violations) = match key.kind {
            OverridePolicyKind::OverridePolicy => {
                let Some(policy) = self
                    .override_policies
                    .get(&ObjectRef::new(&key.name).within(key.namespace.as_deref().unwrap_or_default()))
                else {
                    return Ok("gone");
                };
                (
                    policy.metadata.clone(),
                    policy.status.clone(),
                    policy.validate().err().map(|v| v.to_string()),
                )
            }
            OverridePolicyKind::ClusterOverridePolicy => {
                let Some(policy) = self.cluster_override_policies.get(&ObjectRef::new(&key.name)) else {
                    return Ok("gone");
                };
                (
                    policy.metadata.clone(),
                    policy.status.clone(),
                    policy.validate().err().map(|v| v.to_string()),
                )
            }
        };
        let reference = ObjectReference {
            api_version: Some(format!(
                "{}/{}",
                flotilla_api::policy::GROUP,
                flotilla_api::policy::VERSION
            )),
            kind: Some(key.kind.as_str().to_owned()),
            name: Some(key.name.clone()),
            namespace: key.namespace.clone(),
            uid: metadata.uid.clone(),
            resource_version: metadata.resource_version.clone(),
            ..Default::default()
        };
        if let Some(message) = &violations {
            tracing::warn!(policy = %key, "invalid override policy, not applied: {message}");
            self.events
                .warn(reference, reasons::INVALID_POLICY, message)
                .await;
        }
        let desired = crate::overrides::desired_status(
            status.as_ref(),
            &metadata,
            violations.clone(),
            Timestamp::now(),
        );
        if status.as_ref() != Some(&desired) {
            self.write_override_status(key, &metadata, &desired).await?;
        }
        let uid = metadata.uid.clone().unwrap_or_default();
        let fingerprint = (metadata.generation.unwrap_or(0), violations.is_none());
        let fan_out = self
            .overrides_fanned_out
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(uid, fingerprint)
            != Some(fingerprint);
        if fan_out && let Some(view) = self.read_override_views().get(key).cloned() {
            self.queue_templates_of_override(&view);
        }
        Ok(match (violations.is_some(), fan_out) {
            (true, _) => "invalid-policy",
            (false, true) => "changed",
            (false, false) => "unchanged",
        })
    }

    /// Writes an override policy's status with the read resourceVersion as precondition; a
    /// policy gone or changed since comes back through the watch.
    async fn write_override_status(
        &self,
        key: &OverrideKey,
        metadata: &ObjectMeta,
        desired: &OverridePolicyStatus,
    ) -> Result<(), ReconcileError> {
        let patch = json!({
            "metadata": {"resourceVersion": metadata.resource_version},
            "status": desired,
        });
        let result = match key.kind {
            OverridePolicyKind::OverridePolicy => Api::<OverridePolicy>::namespaced(
                self.client.clone(),
                key.namespace.as_deref().unwrap_or_default(),
            )
            .patch_status(&key.name, &patch_params(), &Patch::Merge(&patch))
            .await
            .map(|_| ()),
            OverridePolicyKind::ClusterOverridePolicy => {
                Api::<ClusterOverridePolicy>::all(self.client.clone())
                    .patch_status(&key.name, &patch_params(), &Patch::Merge(&patch))
                    .await
                    .map(|_| ())
            }
        };
        match result {
            Ok(()) => Ok(()),
            Err(kube::Error::Api(e)) if matches!(e.code, 404 | 409) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 422 => {
                tracing::warn!(policy = %key, message = %e.message, "the API refuses the policy's status while its spec is invalid");
                Ok(())
            }
            Err(source) => Err(ApiError::Kube {
                action: "writing override policy status",
                object: key.to_string(),
                source,
            }
            .into()),
        }
    }

    /// A binding was created, changed or deleted: its template is queued unless what the
    /// detector reads of the binding stayed the same (its signature did not move).
    fn binding_updated(&self, update: &Update<'_, CachedBinding>) {
        match update {
            Update::Applied { old, new } => {
                if old.map(|old| old.signature) != Some(new.signature) {
                    self.binding_changed(new.template());
                }
            }
            Update::Deleted(binding) => self.binding_changed(binding.template()),
            Update::Synced => {}
        }
    }

    /// A policy was created or changed: queued unless only its status (or resourceVersion)
    /// moved; its view is rebuilt either way.
    fn policy_applied(&self, key: PolicyKey, metadata: &ObjectMeta, spec: &PropagationSpec) {
        let signature = crate::policy::watch_signature(metadata, spec);
        let previous = self
            .policy_signatures
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key.clone(), signature);
        if previous == Some(signature) {
            self.rebuild_view(&key);
        } else {
            self.policy_changed(key);
        }
    }

    fn policy_deleted(&self, key: PolicyKey) {
        self.policy_signatures
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&key);
        self.policy_changed(key);
    }

    fn policy_changed(&self, key: PolicyKey) {
        self.rebuild_view(&key);
        self.policies.add(key);
        self.kinds_changed.send_modify(|n| *n = n.wrapping_add(1));
        self.update_readiness();
    }

    /// After a (re)list, policies deleted while the watch was down produced no event: queue
    /// every known policy so the gone ones are noticed.
    fn resync_policies(&self) {
        let keys: Vec<PolicyKey> = self.read_views().keys().cloned().collect();
        for key in keys {
            self.policy_changed(key);
        }
        for policy in self.propagation_policies.state() {
            self.policy_changed(policy_key_of_pp(&policy));
        }
        for policy in self.cluster_propagation_policies.state() {
            self.policy_changed(PolicyKey::cluster(
                policy.metadata.name.clone().unwrap_or_default(),
            ));
        }
    }

    fn binding_changed(&self, template: &TemplateKey) {
        if self.read_kinds().contains_key(&template.gvk) {
            self.templates.add(template.clone());
        }
    }

    fn template_changed(&self, gvk: &Gvk, template: &CachedTemplate) {
        self.templates.add(template.key(gvk));
    }

    // ------------------------------------------------------------------------------------------
    // Policy views.
    // ------------------------------------------------------------------------------------------

    fn read_views(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<PolicyKey, PolicyView>> {
        self.views.read().unwrap_or_else(|p| p.into_inner())
    }

    fn read_kinds(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<Gvk, Arc<KindWatch>>> {
        self.kinds.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Rebuilds the cached view of one policy from the store.
    fn rebuild_view(&self, key: &PolicyKey) {
        let view = match key.kind {
            PolicyKind::PropagationPolicy => self
                .propagation_policies
                .get(&ObjectRef::new(&key.name).within(key.namespace.as_deref().unwrap_or_default()))
                .map(|p| propagation_policy_view(&p)),
            PolicyKind::ClusterPropagationPolicy => self
                .cluster_propagation_policies
                .get(&ObjectRef::new(&key.name))
                .map(|p| cluster_propagation_policy_view(&p)),
        };
        let mut views = self.views.write().unwrap_or_else(|p| p.into_inner());
        match view {
            Some(view) => {
                views.insert(key.clone(), view);
            }
            None => {
                views.remove(key);
            }
        }
    }

    /// The policies that may claim a template of `gvk`: every policy with a selector for the
    /// kind, plus the current claimant (so an invalid claimant is seen and freezes the
    /// template even if its broken selectors no longer name the kind).
    fn candidate_policies(&self, gvk: &Gvk, claim: Option<&Claim>) -> Vec<PolicyView> {
        let views = self.read_views();
        let claimant = claim.map(Claim::policy_key);
        views
            .iter()
            .filter(|(key, view)| {
                Some(*key) == claimant.as_ref()
                    || view
                        .spec
                        .resource_selectors
                        .iter()
                        .any(|s| gvk.is(&s.api_version, &s.kind))
            })
            .map(|(_, view)| view.clone())
            .collect()
    }

    // ------------------------------------------------------------------------------------------
    // Template kinds.
    // ------------------------------------------------------------------------------------------

    /// Kinds to watch: every kind any policy (valid or not) selects, and every watched kind
    /// that still has claimed templates (so their claims can be released when the last
    /// selector for the kind goes away).
    fn desired_kinds(&self) -> BTreeSet<Gvk> {
        let mut kinds: BTreeSet<Gvk> = self
            .read_views()
            .values()
            .flat_map(|v| v.spec.resource_selectors.iter())
            .map(|s| Gvk::new(&s.api_version, &s.kind))
            .filter(|gvk| gvk.is_well_formed() && !gvk.is_own_group())
            .collect();
        for (gvk, watch) in self.read_kinds().iter() {
            if !kinds.contains(gvk) && watch.cache.state().iter().any(|o| o.claim().is_some()) {
                kinds.insert(gvk.clone());
            }
        }
        kinds
    }

    async fn manage_kinds(self: Arc<Self>) {
        let mut retry: HashMap<Gvk, (u32, Instant)> = HashMap::new();
        let mut changes = self.kinds_changed.subscribe();
        loop {
            changes.borrow_and_update();
            let desired = self.desired_kinds();
            let current: BTreeSet<Gvk> = self.read_kinds().keys().cloned().collect();
            for gvk in current.difference(&desired) {
                tracing::info!(kind = %gvk, "no policy selects the kind any more; stopping its watch");
                self.kinds.write().unwrap_or_else(|p| p.into_inner()).remove(gvk);
            }
            retry.retain(|gvk, _| desired.contains(gvk));
            for gvk in desired.difference(&current) {
                if retry.get(gvk).is_some_and(|(_, at)| *at > Instant::now()) {
                    continue;
                }
                match self.start_kind(gvk).await {
                    Ok(()) => {
                        retry.remove(gvk);
                    }
                    Err(error) => {
                        let failures = retry.get(gvk).map_or(1, |(n, _)| n + 1);
                        let delay = backoff(DEFAULT_BASE_BACKOFF, DEFAULT_MAX_BACKOFF, failures + 3)
                            .min(self.options.kind_retry_max);
                        if failures == 1 {
                            tracing::info!(kind = %gvk, %error, "kind is not served (yet); retrying until it is");
                        }
                        retry.insert(gvk.clone(), (failures, Instant::now() + delay));
                    }
                }
            }
            metrics().watched_kinds(self.read_kinds().len());
            self.update_readiness();
            let wait = if retry.is_empty() {
                Duration::from_secs(30)
            } else {
                Duration::from_millis(250)
            };
            tokio::select! {
                _ = changes.changed() => {}
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }

    async fn start_kind(self: &Arc<Self>, gvk: &Gvk) -> Result<(), kube::Error> {
        let gvk_ref = GroupVersionKind::gvk(gvk.group(), gvk.version(), &gvk.kind);
        let (resource, _capabilities) = kube::discovery::pinned_kind(&self.client, &gvk_ref).await?;
        let (cache, writer) = Cache::new();
        let synced = Arc::new(AtomicBool::new(false));
        let api: Api<Lean<DynamicObject>> = Api::all_with(self.client.clone(), &resource);
        let this = Arc::clone(self);
        let flag = Arc::clone(&synced);
        let kind = gvk.clone();
        let converted_kind = gvk.clone();
        // The cache keeps the metadata and what is read of the content (see crate::content);
        // the watch skips managedFields as it reads them.
        let convert = move |Lean(object): Lean<DynamicObject>| CachedTemplate::of(&converted_kind, object);
        let task = tokio::spawn(cache::run(api, writer, convert, move |update| match update {
            Update::Applied { new: template, .. } | Update::Deleted(template) => {
                this.template_changed(&kind, template);
            }
            Update::Synced => {
                flag.store(true, Ordering::Release);
                this.update_readiness();
            }
        }));
        tracing::info!(kind = %gvk, resource = %resource.plural, "watching templates");
        self.kinds.write().unwrap_or_else(|p| p.into_inner()).insert(
            gvk.clone(),
            Arc::new(KindWatch {
                resource,
                cache,
                synced,
                task,
            }),
        );
        Ok(())
    }

    fn update_readiness(&self) {
        let kinds = self.read_kinds();
        let unsynced: Vec<String> = kinds
            .iter()
            .filter(|(_, w)| !w.synced.load(Ordering::Acquire))
            .map(|(gvk, _)| gvk.to_string())
            .collect();
        if !self.synced.all() {
            self.readiness
                .set("caches", false, "policies and bindings syncing");
        } else if !unsynced.is_empty() {
            self.readiness.set(
                "caches",
                false,
                format!("syncing templates: {}", unsynced.join(", ")),
            );
        } else {
            self.readiness
                .set("caches", true, format!("synced ({} template kinds)", kinds.len()));
        }
    }

    /// The cached template and its kind's API resource.
    fn cached_template(&self, key: &TemplateKey) -> Option<(Arc<CachedTemplate>, ApiResource)> {
        let kinds = self.read_kinds();
        let watch = kinds.get(&key.gvk)?;
        let template = watch.cache.get(key.namespace.as_deref(), &key.name)?;
        Some((template, watch.resource.clone()))
    }

    /// The template's binding as cached.
    fn cached(&self, key: &TemplateKey) -> Option<Arc<CachedBinding>> {
        let cache = match &key.namespace {
            Some(_) => &self.resource_bindings,
            None => &self.cluster_resource_bindings,
        };
        cache.get(key.namespace.as_deref(), &key.binding_name())
    }

    fn cached_binding(&self, key: &TemplateKey) -> Option<BindingView> {
        self.cached(key).map(|b| b.view())
    }

    // ------------------------------------------------------------------------------------------
    // Workers.
    // ------------------------------------------------------------------------------------------

    async fn wait_synced(&self) {
        while !self.synced.all() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits until the caches are synced and this replica leads; `false` when it never will
    /// (leadership lost: the process is exiting).
    async fn wait_active(&self) -> bool {
        self.wait_synced().await;
        match &self.options.leadership {
            Some(leadership) => leadership.wait_leader().await,
            None => true,
        }
    }

    async fn template_worker(self: Arc<Self>) {
        // Deciding claims before every policy and binding is known would release claims of
        // policies not yet seen.
        if !self.wait_active().await {
            return;
        }
        let span_of = |key: &TemplateKey| {
            tracing::info_span!(
                parent: None,
                "detector.reconcile",
                otel.kind = "internal",
                controller = "template",
                object = %key,
                policy = field::Empty,
                outcome = field::Empty,
            )
        };
        work_through(&self.templates, "template", span_of, |key| {
            let detector = Arc::clone(&self);
            async move { detector.reconcile_template(&key).await.map(Outcome::as_str) }
        })
        .await;
    }

    async fn policy_worker(self: Arc<Self>) {
        if !self.wait_active().await {
            return;
        }
        let span_of = |key: &PolicyKey| {
            tracing::info_span!(
                parent: None,
                "detector.reconcile",
                otel.kind = "internal",
                controller = "policy",
                object = %key,
                policy = %key,
                outcome = field::Empty,
            )
        };
        work_through(&self.policies, "policy", span_of, |key| {
            let detector = Arc::clone(&self);
            async move { detector.reconcile_policy(&key).await }
        })
        .await;
    }

    /// Periodic upkeep: policy status counts (debounced), the pending-lazy gauge, resyncs.
    async fn upkeep(self: Arc<Self>) {
        if !self.wait_active().await {
            return;
        }
        let mut last_resync = Instant::now();
        let mut last_refresh: Option<Instant> = None;
        loop {
            tokio::time::sleep(STATUS_REFRESH_PERIOD).await;
            // A refresh counts every cached template: spaced so that counting takes at most
            // 1/STATUS_REFRESH_COST_FACTOR of the time, however many templates there are.
            let cost = Duration::from_micros(self.counts_cost_micros.load(Ordering::Relaxed));
            let spacing = STATUS_REFRESH_PERIOD.max(cost * STATUS_REFRESH_COST_FACTOR);
            let due = last_refresh.is_none_or(|at| at.elapsed() >= spacing);
            let dirty: Vec<PolicyKey> = if due {
                std::mem::take(&mut *self.status_dirty.lock().unwrap_or_else(|p| p.into_inner()))
                    .into_iter()
                    .collect()
            } else {
                Vec::new()
            };
            if !dirty.is_empty() {
                last_refresh = Some(Instant::now());
                for key in dirty {
                    self.policies.add(key);
                }
                let pending = [&self.resource_bindings, &self.cluster_resource_bindings]
                    .into_iter()
                    .flat_map(Cache::state)
                    .filter(|b| b.lazy_pending())
                    .count();
                metrics().pending_lazy(pending);
            }
            metrics().queue_depth("template", self.templates.len());
            metrics().queue_depth("policy", self.policies.len());
            flotilla_telemetry::metrics::report_queue(
                "flotilla-detector",
                "template",
                self.templates.len(),
                self.templates.oldest_wait(),
            );
            flotilla_telemetry::metrics::report_queue(
                "flotilla-detector",
                "policy",
                self.policies.len(),
                self.policies.oldest_wait(),
            );
            if last_resync.elapsed() >= self.options.resync {
                last_resync = Instant::now();
                self.queue_all_templates();
            }
        }
    }

    fn queue_all_templates(&self) {
        let kinds: Vec<(Gvk, Arc<KindWatch>)> = self
            .read_kinds()
            .iter()
            .map(|(g, w)| (g.clone(), Arc::clone(w)))
            .collect();
        for (gvk, watch) in kinds {
            for object in watch.cache.state() {
                self.template_changed(&gvk, &object);
            }
        }
    }

    fn mark_status_dirty(&self, key: Option<PolicyKey>) {
        if let Some(key) = key {
            self.status_dirty
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(key);
        }
    }

    // ------------------------------------------------------------------------------------------
    // Template reconcile.
    // ------------------------------------------------------------------------------------------

    async fn reconcile_template(self: &Arc<Self>, key: &TemplateKey) -> Result<Outcome, ReconcileError> {
        let Some((cached, resource)) = self.cached_template(key) else {
            // Deleted (the binding goes with it through its ownerReference) or no longer
            // watched.
            return Ok(Outcome::Ignored);
        };
        let mut object = cached.json(&key.gvk);
        let mut content = cached.content.clone();
        let previous = cached.claim();
        let policies = self.candidate_policies(&key.gvk, previous);
        let traceparent = flotilla_telemetry::propagation::current_traceparent();
        let mut binding = self.cached_binding(key);
        let overrides = self.override_candidates(key.namespace.as_deref());
        let mut plan = plan_template(&TemplateInput {
            key,
            object: &object,
            content: &content,
            policies: &policies,
            binding: binding.as_ref(),
            traceparent: traceparent.as_deref(),
            overrides: &overrides,
        });
        if needs_confirmation(&plan) {
            // A binding's spec is written from the API's state, not from caches that may lag
            // behind each other: decide again on the template, its binding and the claiming
            // policy read fresh (a policy edit made before a template edit, say a suspension,
            // must be in the binding that carries the template edit).
            let Some(fresh) = get_template(&self.client, &resource, key).await? else {
                return Ok(Outcome::Ignored);
            };
            content = TemplateContent::of(&fresh);
            object = fresh;
            binding = BindingApi::for_template(&self.client, key)
                .get(&key.binding_name())
                .await?;
            let previous = Claim::read_object(&object);
            let mut policies = self.candidate_policies(&key.gvk, previous.as_ref());
            if let Some(claimant) = &plan.policy {
                self.refresh_candidate(&mut policies, claimant).await?;
            }
            plan = plan_template(&TemplateInput {
                key,
                object: &object,
                content: &content,
                policies: &policies,
                binding: binding.as_ref(),
                traceparent: traceparent.as_deref(),
                overrides: &overrides,
            });
        }
        let span = tracing::Span::current();
        if let Some(policy) = &plan.policy {
            span.record("policy", field::display(policy));
        }
        self.mark_status_dirty(previous.map(Claim::policy_key));
        self.mark_status_dirty(plan.policy.clone());
        self.execute(key, &resource, &object, binding, &plan).await?;
        Ok(plan.outcome)
    }

    /// Replaces `key`'s view among `policies` with one read from the API (removes it when the
    /// policy is gone).
    async fn refresh_candidate(
        &self,
        policies: &mut Vec<PolicyView>,
        key: &PolicyKey,
    ) -> Result<(), ReconcileError> {
        let fresh = match key.kind {
            PolicyKind::PropagationPolicy => self
                .pp_api(key)
                .get_opt(&key.name)
                .await
                .map(|p| p.as_ref().map(propagation_policy_view)),
            PolicyKind::ClusterPropagationPolicy => self
                .cpp_api()
                .get_opt(&key.name)
                .await
                .map(|p| p.as_ref().map(cluster_propagation_policy_view)),
        }
        .map_err(|source| ApiError::Kube {
            action: "reading policy",
            object: key.to_string(),
            source,
        })?;
        policies.retain(|p| p.key != *key);
        policies.extend(fresh);
        Ok(())
    }

    async fn execute(
        self: &Arc<Self>,
        key: &TemplateKey,
        resource: &ApiResource,
        object: &Value,
        binding: Option<BindingView>,
        plan: &TemplatePlan,
    ) -> Result<(), ReconcileError> {
        if let Some(warning) = &plan.warning {
            tracing::warn!(template = %key, reason = warning.reason, "{}", warning.message);
            self.events
                .warn(template_reference(key, object), warning.reason, &warning.message)
                .await;
        }
        if let Some(patch) = &plan.template_patch {
            match patch_template(&self.client, resource, key, patch).await {
                Ok(true) => {}
                Ok(false) => return Ok(()),
                // The template changed since it was read (the patch carries its
                // resourceVersion): plan again on the new version.
                Err(error) if error.is_conflict() => {
                    return Err(ReconcileError::Race(format!("template {key}")));
                }
                Err(error) => return Err(error.into()),
            }
        }
        let api = BindingApi::for_template(&self.client, key);
        let now = Timestamp::now();
        match &plan.binding {
            BindingWrite::None => {}
            BindingWrite::Create { object, conditions } => {
                let created = match api.create(object).await {
                    Ok(created) => created,
                    Err(error) if error.is_conflict() => {
                        return Err(ReconcileError::Race(format!("binding {}", key.binding_name())));
                    }
                    Err(error) => return Err(error.into()),
                };
                metrics().binding_write("create");
                tracing::info!(template = %key, binding = %created.name, "created binding");
                self.write_conditions(&api, created.clone(), conditions, now)
                    .await?;
                self.schedule(&created);
            }
            BindingWrite::Update {
                patch,
                spec_changed,
                conditions,
            } => {
                let Some(mut current) = binding else {
                    return Err(ReconcileError::Race(format!("binding {}", key.binding_name())));
                };
                if let Some(patch) = patch {
                    current = match api.patch(&current.name, patch, false).await {
                        Ok(patched) => patched,
                        Err(error) if error.is_not_found() => {
                            return Err(ReconcileError::Race(format!("binding {}", key.binding_name())));
                        }
                        Err(error) => return Err(error.into()),
                    };
                    metrics().binding_write(if *spec_changed { "spec" } else { "metadata" });
                    if *spec_changed {
                        tracing::info!(template = %key, binding = %current.name, "refreshed binding");
                    }
                }
                if !conditions.is_empty() {
                    self.write_conditions(&api, current.clone(), conditions, now)
                        .await?;
                }
                if *spec_changed {
                    self.schedule(&current);
                }
            }
        }
        Ok(())
    }

    /// Read-modify-writes the detector's conditions with a resourceVersion precondition,
    /// re-reading on conflict so other writers' conditions are kept.
    async fn write_conditions(
        &self,
        api: &BindingApi,
        mut binding: BindingView,
        changes: &[ConditionChange],
        now: Timestamp,
    ) -> Result<(), ReconcileError> {
        for _ in 0..5 {
            let mut conditions = binding.conditions.clone();
            if !ConditionChange::apply_all(changes, &mut conditions, now) {
                return Ok(());
            }
            let patch = json!({
                "metadata": {"resourceVersion": binding.resource_version},
                "status": {"conditions": conditions},
            });
            match api
                .patch_status_answering_metadata(&self.client, &binding.name, &patch)
                .await
            {
                Ok(()) => {
                    metrics().binding_write("status");
                    return Ok(());
                }
                Err(error) if error.is_conflict() => {
                    let Some(fresh) = api.get(&binding.name).await? else {
                        return Ok(());
                    };
                    binding = fresh;
                }
                Err(error) if error.is_not_found() => return Ok(()),
                Err(error) => return Err(error.into()),
            }
        }
        Err(ReconcileError::Race(format!("binding {}", binding.name)))
    }

    /// Tells the scheduler (fast path, in the background, carrying the current trace). A
    /// failure only delays scheduling: the scheduler watches bindings too.
    fn schedule(&self, binding: &BindingView) {
        let Some(client) = self.scheduler.clone() else {
            return;
        };
        let reference: BindingRef = binding_ref(binding);
        let slots = Arc::clone(&self.schedule_slots);
        tokio::spawn(
            async move {
                let Ok(_permit) = slots.acquire_owned().await else {
                    return;
                };
                let result =
                    flotilla_rpc::call("flotilla.v1.Scheduler/Schedule", &RetryPolicy::default(), || {
                        let mut client = client.clone();
                        let request = ScheduleRequest {
                            binding: Some(reference.clone()),
                        };
                        async move { client.schedule(request).await.map(tonic::Response::into_inner) }
                    })
                    .await;
                match result {
                    Ok(response) => {
                        tracing::debug!(binding = %reference.key(), outcome = response.outcome, "scheduled")
                    }
                    Err(status) => tracing::info!(
                        binding = %reference.key(),
                        code = ?status.code(),
                        message = status.message(),
                        "Schedule call failed; the scheduler's watch picks the binding up"
                    ),
                }
            }
            .in_current_span(),
        );
    }

    // ------------------------------------------------------------------------------------------
    // Policy reconcile.
    // ------------------------------------------------------------------------------------------

    async fn reconcile_policy(self: &Arc<Self>, key: &PolicyKey) -> Result<&'static str, ReconcileError> {
        let Some(policy) = self.policy_object(key) else {
            return Ok(self.policy_gone(key));
        };
        let now = Timestamp::now();
        let uid = policy.metadata.uid.clone().unwrap_or_default();
        self.rebuild_view(key);
        let Some(view) = self.read_views().get(key).cloned() else {
            return Ok("gone");
        };
        let violations = policy.violations.clone();
        if let Some(message) = &violations {
            tracing::warn!(policy = %key, "invalid policy, ignored for matching: {message}");
            self.events
                .warn(policy.reference(key), reasons::INVALID_POLICY, message)
                .await;
        }
        if view.deleting {
            // Karmada's finalizer: released once no template carries the policy's claim (its
            // templates were queued when the deletion was first seen, below).
            if self.counts(&view).bound == 0 {
                self.remove_finalizer(key, &policy).await?;
            }
        } else {
            // The status records when this generation (and these selectors) were written
            // before anything else writes the policy: the label or finalizer written first
            // would date them by that write (see crate::revision).
            let revisions = revisions_to_record(&policy.spec, &policy.metadata, policy.status.as_ref());
            let desired = desired_status(
                policy.status.as_ref(),
                policy.metadata.generation,
                violations.clone(),
                self.counts(&view),
                revisions,
                now,
            );
            let resource_version = if policy.status.as_ref() != Some(&desired) {
                self.write_policy_status(key, &policy, desired).await?
            } else {
                policy.metadata.resource_version.clone()
            };
            if let Some(resource_version) = resource_version {
                self.ensure_metadata(key, &policy, &resource_version).await?;
            }
        }
        let fingerprint = (view.generation, view.valid, view.deleting);
        let fan_out = self
            .fanned_out
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(uid, fingerprint)
            != Some(fingerprint);
        if fan_out {
            self.queue_templates_of(key, Some(&view.spec));
        }
        self.kinds_changed.send_modify(|n| *n = n.wrapping_add(1));
        Ok(match (violations.is_some(), fan_out) {
            (true, _) => "invalid-policy",
            (false, true) => "changed",
            (false, false) => "unchanged",
        })
    }

    fn policy_gone(&self, key: &PolicyKey) -> &'static str {
        let uid = self.read_views().get(key).map(|v| v.uid.clone());
        self.rebuild_view(key);
        if let Some(uid) = uid {
            self.fanned_out
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&uid);
        }
        self.queue_templates_of(key, None);
        self.kinds_changed.send_modify(|n| *n = n.wrapping_add(1));
        "deleted"
    }

    /// Queues every template the policy may match (its kinds) and every template it claims.
    fn queue_templates_of(&self, key: &PolicyKey, spec: Option<&PropagationSpec>) {
        let kinds: Vec<(Gvk, Arc<KindWatch>)> = self
            .read_kinds()
            .iter()
            .map(|(g, w)| (g.clone(), Arc::clone(w)))
            .collect();
        for (gvk, watch) in kinds {
            let selected = spec.is_some_and(|s| {
                s.resource_selectors
                    .iter()
                    .any(|r| gvk.is(&r.api_version, &r.kind))
            });
            for object in watch.cache.state() {
                let claimed_by_policy = || object.claim().is_some_and(|c| c.policy_key() == *key);
                let in_scope = match key.kind {
                    PolicyKind::PropagationPolicy => object.namespace() == key.namespace.as_deref(),
                    PolicyKind::ClusterPropagationPolicy => true,
                };
                if (selected && in_scope) || claimed_by_policy() {
                    self.template_changed(&gvk, &object);
                }
            }
        }
    }

    /// The policy's template counts from the caches. Runs over every cached template each
    /// time a policy's status is refreshed, so it reads the cached objects in place: no
    /// metadata converted to JSON or claim copied out, no binding view built (this scan was 3/4
    /// of the detector's CPU in a 4,000-template run before). Records how long it took, which
    /// spaces the refreshes (see `upkeep`).
    fn counts(&self, view: &PolicyView) -> Counts {
        let started = Instant::now();
        let counts = self.count_templates(view);
        let micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        self.counts_cost_micros.store(micros, Ordering::Relaxed);
        counts
    }

    fn count_templates(&self, view: &PolicyView) -> Counts {
        let kinds: Vec<(Gvk, Arc<KindWatch>)> = self
            .read_kinds()
            .iter()
            .map(|(g, w)| (g.clone(), Arc::clone(w)))
            .collect();
        let generation = view.generation_ref();
        let mut counts = Counts::default();
        for (gvk, watch) in kinds {
            for object in watch.cache.state() {
                if !object.claim().is_some_and(|c| c.is_of(&view.key, &view.uid)) {
                    continue;
                }
                counts.bound += 1;
                let key = object.key(&gvk);
                if self
                    .cached(&key)
                    .is_none_or(|b| b.policy_generation() != Some(generation.as_str()))
                {
                    counts.pending += 1;
                }
            }
        }
        counts
    }

    fn policy_object(&self, key: &PolicyKey) -> Option<PolicyObject> {
        match key.kind {
            PolicyKind::PropagationPolicy => {
                let policy = self
                    .propagation_policies
                    .get(&ObjectRef::new(&key.name).within(key.namespace.as_deref().unwrap_or_default()))?;
                Some(PolicyObject {
                    metadata: policy.metadata.clone(),
                    spec: policy.spec.clone(),
                    status: policy.status.clone(),
                    violations: policy.validate().err().map(|v| v.to_string()),
                })
            }
            PolicyKind::ClusterPropagationPolicy => {
                let policy = self
                    .cluster_propagation_policies
                    .get(&ObjectRef::new(&key.name))?;
                Some(PolicyObject {
                    metadata: policy.metadata.clone(),
                    spec: policy.spec.0.clone(),
                    status: policy.status.clone(),
                    violations: policy.validate().err().map(|v| v.to_string()),
                })
            }
        }
    }

    /// Labels the policy with its permanent id and adds Karmada's finalizer, with
    /// `resource_version` (the policy as last read or written) as precondition: a user edit in
    /// between is recorded in the status first.
    async fn ensure_metadata(
        &self,
        key: &PolicyKey,
        policy: &PolicyObject,
        resource_version: &str,
    ) -> Result<(), ReconcileError> {
        let (label, finalizer) = policy_metadata_keys(key.kind);
        let Some(uid) = &policy.metadata.uid else {
            return Ok(());
        };
        let mut metadata = serde_json::Map::new();
        if policy.metadata.labels.as_ref().and_then(|l| l.get(label)) != Some(uid) {
            metadata.insert("labels".into(), json!({ label: uid }));
        }
        let mut finalizers = policy.metadata.finalizers.clone().unwrap_or_default();
        if !finalizers.iter().any(|f| f == finalizer) {
            finalizers.push(finalizer.to_owned());
            metadata.insert("finalizers".into(), json!(finalizers));
        }
        if metadata.is_empty() {
            return Ok(());
        }
        metadata.insert("resourceVersion".into(), json!(resource_version));
        self.patch_policy(key, &json!({ "metadata": metadata }), "labelling policy")
            .await
    }

    /// Removes Karmada's finalizer from a deleting policy whose templates are all released.
    async fn remove_finalizer(&self, key: &PolicyKey, policy: &PolicyObject) -> Result<(), ReconcileError> {
        let (_, finalizer) = policy_metadata_keys(key.kind);
        let finalizers = policy.metadata.finalizers.clone().unwrap_or_default();
        if !finalizers.iter().any(|f| f == finalizer) {
            return Ok(());
        }
        let rest: Vec<&String> = finalizers.iter().filter(|f| *f != finalizer).collect();
        let patch = json!({"metadata": {
            "resourceVersion": policy.metadata.resource_version,
            "finalizers": rest,
        }});
        self.patch_policy(key, &patch, "removing the finalizer of policy")
            .await?;
        tracing::info!(policy = %key, "every template released; the policy's deletion can complete");
        Ok(())
    }

    /// Merge-patches a policy's metadata. 404 (gone) and 409 (changed since: the watch queues
    /// it again) are not errors; neither is 422: an API server that validates the whole object
    /// refuses every write to a policy whose stored spec is invalid (see
    /// `write_policy_status`).
    async fn patch_policy(
        &self,
        key: &PolicyKey,
        patch: &Value,
        action: &'static str,
    ) -> Result<(), ReconcileError> {
        let result = match key.kind {
            PolicyKind::PropagationPolicy => self
                .pp_api(key)
                .patch(&key.name, &patch_params(), &Patch::Merge(patch))
                .await
                .map(|_| ()),
            PolicyKind::ClusterPropagationPolicy => self
                .cpp_api()
                .patch(&key.name, &patch_params(), &Patch::Merge(patch))
                .await
                .map(|_| ()),
        };
        match result {
            Ok(()) => Ok(()),
            Err(kube::Error::Api(e)) if matches!(e.code, 404 | 409 | 422) => Ok(()),
            Err(source) => Err(ApiError::Kube {
                action,
                object: key.to_string(),
                source,
            }
            .into()),
        }
    }

    fn pp_api(&self, key: &PolicyKey) -> Api<PropagationPolicy> {
        Api::namespaced(self.client.clone(), key.namespace.as_deref().unwrap_or_default())
    }

    fn cpp_api(&self) -> Api<ClusterPropagationPolicy> {
        Api::all(self.client.clone())
    }

    /// Writes the policy's status with the read resourceVersion as precondition; returns the
    /// policy's new resourceVersion, or `None` when nothing was written (gone, changed since,
    /// or refused).
    async fn write_policy_status(
        &self,
        key: &PolicyKey,
        policy: &PolicyObject,
        desired: PolicyStatus,
    ) -> Result<Option<String>, ReconcileError> {
        let patch = json!({
            "metadata": {"resourceVersion": policy.metadata.resource_version},
            "status": desired,
        });
        let result = match key.kind {
            PolicyKind::PropagationPolicy => self
                .pp_api(key)
                .patch_status(&key.name, &patch_params(), &Patch::Merge(&patch))
                .await
                .map(|p| p.metadata.resource_version),
            PolicyKind::ClusterPropagationPolicy => self
                .cpp_api()
                .patch_status(&key.name, &patch_params(), &Patch::Merge(&patch))
                .await
                .map(|p| p.metadata.resource_version),
        };
        match result {
            Ok(resource_version) => Ok(resource_version),
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(None),
            // A newer version is on its way through the watch; a status-only change does not
            // queue the policy (see `policy_applied`), so the next refresh writes it.
            Err(kube::Error::Api(e)) if e.code == 409 => {
                self.mark_status_dirty(Some(key.clone()));
                Ok(None)
            }
            // An API server that validates the whole object on status writes refuses any
            // status of a policy whose stored spec is invalid; retrying cannot help. The
            // Warning event and the log still report the problem.
            Err(kube::Error::Api(e)) if e.code == 422 => {
                tracing::warn!(policy = %key, message = %e.message, "the API refuses the policy's status while its spec is invalid");
                Ok(None)
            }
            Err(source) => Err(ApiError::Kube {
                action: "writing policy status",
                object: key.to_string(),
                source,
            }
            .into()),
        }
    }
}

/// A policy of either kind, as the policy reconcile needs it.
struct PolicyObject {
    metadata: ObjectMeta,
    spec: PropagationSpec,
    status: Option<PolicyStatus>,
    violations: Option<String>,
}

impl PolicyObject {
    fn reference(&self, key: &PolicyKey) -> ObjectReference {
        ObjectReference {
            api_version: Some(format!(
                "{}/{}",
                flotilla_api::policy::GROUP,
                flotilla_api::policy::VERSION
            )),
            kind: Some(key.kind.as_str().to_owned()),
            name: Some(key.name.clone()),
            namespace: key.namespace.clone(),
            uid: self.metadata.uid.clone(),
            resource_version: self.metadata.resource_version.clone(),
            ..Default::default()
        }
    }
}

/// The permanent-id label and the finalizer of a policy kind.
fn policy_metadata_keys(kind: PolicyKind) -> (&'static str, &'static str) {
    match kind {
        PolicyKind::PropagationPolicy => (
            PROPAGATION_POLICY_PERMANENT_ID_LABEL,
            PROPAGATION_POLICY_FINALIZER,
        ),
        PolicyKind::ClusterPropagationPolicy => (
            CLUSTER_PROPAGATION_POLICY_PERMANENT_ID_LABEL,
            CLUSTER_PROPAGATION_POLICY_FINALIZER,
        ),
    }
}

fn policy_key_of_pp(policy: &PropagationPolicy) -> PolicyKey {
    PolicyKey::propagation(
        policy.metadata.namespace.clone().unwrap_or_default(),
        policy.metadata.name.clone().unwrap_or_default(),
    )
}

fn template_reference(key: &TemplateKey, object: &Value) -> ObjectReference {
    ObjectReference {
        api_version: Some(key.gvk.api_version.to_string()),
        kind: Some(key.gvk.kind.to_string()),
        name: Some(key.name.to_string()),
        namespace: key.namespace.as_deref().map(str::to_owned),
        uid: object
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .map(str::to_owned),
        ..Default::default()
    }
}

/// Whether a plan writes a binding's spec (creates it or changes it): such a write is decided
/// again on objects read fresh from the API before anything is written, so caches that lag
/// behind each other never put a stale policy generation (or a stale template) into a binding,
/// nor activate a pending Lazy change.
pub fn needs_confirmation(plan: &TemplatePlan) -> bool {
    // A change of the override policies in effect too: a binding cache that lags behind the
    // detector's own last write would otherwise bring back what that write replaced.
    plan.binding.changes_spec() || plan.overrides_changed
}

/// Works through `queue` until it closes, one key at a time: each reconcile runs in the span
/// `span_of` makes for its key (its `outcome` recorded), with the queue depth, outcome and
/// duration in the metrics under `controller`; a key is forgotten when its reconcile succeeds
/// and queued again, rate-limited, when it fails.
async fn work_through<K, Fut>(
    queue: &WorkQueue<K>,
    controller: &'static str,
    span_of: impl Fn(&K) -> tracing::Span,
    reconcile: impl Fn(K) -> Fut,
) where
    K: Clone + Eq + std::hash::Hash + Send + std::fmt::Display + 'static,
    Fut: std::future::Future<Output = Result<&'static str, ReconcileError>>,
{
    while let Some(key) = queue.next().await {
        metrics().queue_depth(controller, queue.len());
        let started = Instant::now();
        let span = span_of(&key);
        match reconcile(key.clone()).instrument(span.clone()).await {
            Ok(outcome) => {
                span.record("outcome", outcome);
                metrics().reconciled(controller, outcome, started.elapsed());
                queue.forget(&key);
            }
            Err(error) => {
                span.record("outcome", "error");
                tracing::warn!(parent: &span, object = %key, %error, "{controller} reconcile failed; retrying");
                metrics().failed(controller, started.elapsed());
                queue.add_rate_limited(key.clone());
            }
        }
        queue.done(&key);
    }
}
