//! The object layer: kube-apiserver's generic registry semantics on top of the store.
//!
//! Create, update, patch, delete and list with uid/resourceVersion/generation rules, optimistic
//! concurrency, status and scale subresources, finalizers and deletionTimestamp, dry run,
//! defaulting, validation and admission. Both the HTTP handlers and the in-process controllers
//! (garbage collector, namespace lifecycle, workload simulation) call these functions, so
//! controllers obey exactly the rules clients do.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use flotilla_store::{Compare, KeyValue, Snapshot, Store, Txn, TxnOutcome};
use parking_lot::{Mutex, RwLock};
use serde_json::{Value, json};

use crate::builtin::{self, BuiltinKind};
use crate::errors::{ApiError, ApiResult, Cause};
use crate::names::{self, NameRule};
use crate::objects::{self, decode_stored, encode_for_storage, render};
use crate::resources::{Catalog, Flavor, ResourceDef};
use crate::selectors::{FieldSelector, LabelSelector};

/// Largest request body accepted (kube-apiserver's limit).
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;
/// Largest stored object (etcd's default request limit is 1.5 MiB; ours follows the body limit).
const MAX_OBJECT_BYTES: usize = MAX_BODY_BYTES;
/// How long a paginated list's snapshot is kept for its continue tokens.
const SNAPSHOT_TTL: Duration = Duration::from_secs(300);
/// Namespaces every server has.
pub const SYSTEM_NAMESPACES: [&str; 4] = ["default", "kube-system", "kube-public", "kube-node-lease"];

/// `fieldValidation` query parameter.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FieldValidation {
    /// Drop unknown fields silently.
    Ignore,
    /// Drop unknown fields and warn (kube-apiserver's default).
    #[default]
    Warn,
    /// Reject unknown fields with 400.
    Strict,
}

/// Options shared by every write.
#[derive(Clone, Debug, Default)]
pub struct WriteOptions {
    /// `dryRun=All`: run everything but the write.
    pub dry_run: bool,
    /// Unknown-field handling.
    pub field_validation: FieldValidation,
    /// `fieldManager`.
    pub field_manager: Option<String>,
    /// `force` (server-side apply).
    pub force: bool,
    /// The client's User-Agent (names the field manager when `fieldManager` is absent).
    pub user_agent: String,
    /// Set internally when server-side apply already computed `metadata.managedFields`.
    pub managed_precomputed: bool,
    /// Who asks (None for the server's own controllers): RBAC writes are checked for
    /// privilege escalation against this user.
    pub user: Option<Arc<crate::auth::User>>,
}

impl WriteOptions {
    /// The field manager kube-apiserver records for this request.
    pub fn manager(&self) -> String {
        flotilla_patch::managed::manager_or_user_agent(self.field_manager.as_deref(), &self.user_agent)
    }
}

/// A successful write.
#[derive(Clone, Debug)]
pub struct Written {
    /// The object as stored (with resourceVersion). After a status patch that kept the
    /// stored object's other fields as bytes it holds only [`objects::STATUS_WRITE_FIELDS`];
    /// `stored` is then always set.
    pub object: Value,
    /// Warnings for the `Warning` header.
    pub warnings: Vec<String>,
    /// Whether the write created the object.
    pub created: bool,
    /// The stored bytes `object` was built from, when it is what is stored (not after a dry
    /// run, a deletion or a scale view): answers are rendered from them instead of
    /// serializing `object` again.
    pub stored: Option<Arc<KeyValue>>,
}

/// What [`Api::prepare`] checks of an update: the subresource written and the stored
/// object's fields left out of it as bytes ([`objects::Split`]).
struct Scope<'a> {
    sub: Option<&'a str>,
    kept: &'a [(String, &'a serde_json::value::RawValue)],
}

impl Scope<'_> {
    /// A create or an update of the main resource.
    const WHOLE: Scope<'static> = Scope { sub: None, kept: &[] };
}

/// Which part of an object a write addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Subresource {
    /// The main resource: status changes are ignored.
    Main,
    /// `/status`: only status changes are kept.
    Status,
    /// `/scale`: the autoscaling/v1 Scale view.
    Scale,
}

impl Subresource {
    /// The subresource's URL segment (None for the main resource).
    pub fn name(self) -> Option<&'static str> {
        match self {
            Subresource::Main => None,
            Subresource::Status => Some("status"),
            Subresource::Scale => Some("scale"),
        }
    }
}

/// Cascading deletion policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Propagation {
    /// Dependents lose their owner reference.
    Orphan,
    /// The owner goes at once; the garbage collector deletes dependents.
    Background,
    /// The owner waits (finalizer `foregroundDeletion`) until blocking dependents are gone.
    Foreground,
}

/// DELETE options.
#[derive(Clone, Debug, Default)]
pub struct DeleteOptions {
    /// Cascading policy (default Background).
    pub propagation: Option<Propagation>,
    /// Precondition on uid.
    pub uid: Option<String>,
    /// Precondition on resourceVersion.
    pub resource_version: Option<String>,
    /// Dry run.
    pub dry_run: bool,
}

/// Result of a delete.
#[derive(Clone, Debug)]
pub enum DeleteOutcome {
    /// Gone; the last state (resourceVersion = deletion revision).
    Deleted(Value),
    /// Marked for deletion, waiting for finalizers.
    Pending(Value),
}

/// LIST options.
#[derive(Clone, Debug, Default)]
pub struct ListOptions {
    /// Label selector.
    pub labels: LabelSelector,
    /// Field selector.
    pub fields: FieldSelector,
    /// Page size (0 = all).
    pub limit: usize,
    /// Continue token.
    pub continue_token: Option<String>,
    /// `resourceVersion`.
    pub resource_version: Option<String>,
    /// `resourceVersionMatch`.
    pub resource_version_match: Option<String>,
}

/// One page of a list.
pub struct ListPage {
    /// Revision of the snapshot listed.
    pub revision: u64,
    /// Matching objects in key order.
    pub items: Vec<Arc<KeyValue>>,
    /// Token for the next page.
    pub continue_token: Option<String>,
    /// Objects after this page (only without selectors).
    pub remaining: Option<u64>,
}

/// A patch body and its type.
#[derive(Clone, Debug)]
pub enum Patch {
    /// RFC 6902.
    Json(Value),
    /// RFC 7386.
    Merge(Value),
    /// Kubernetes strategic merge patch.
    Strategic(Value),
    /// Server-side apply configuration.
    Apply(Value),
}

/// The API object layer.
pub struct Api {
    /// The store.
    pub store: Store,
    catalog: RwLock<Arc<Catalog>>,
    /// Serialises catalog rebuilds: without it, a rebuild from an older snapshot (one CRD
    /// write) could replace a rebuild from a newer one (a concurrent CRD write) and stop
    /// serving a CRD just created.
    catalog_rebuild: Mutex<()>,
    snapshots: Mutex<HashMap<u64, (Snapshot, Instant)>>,
    /// The RBAC index the authorizer reads (rebuilt after RBAC writes).
    pub rbac: crate::rbac::Cache,
    admission: crate::admission::Options,
}

impl Api {
    /// Builds the layer on an open store: serves CRDs found in it and makes sure the system
    /// namespaces exist.
    pub async fn new(store: Store) -> ApiResult<Arc<Api>> {
        Self::with_admission(store, crate::admission::Options::default()).await
    }

    /// [`Api::new`] with admission `options`.
    pub async fn with_admission(store: Store, admission: crate::admission::Options) -> ApiResult<Arc<Api>> {
        let api = Arc::new(Api {
            store,
            catalog: RwLock::new(Arc::new(Catalog::new(builtin::definitions()))),
            catalog_rebuild: Mutex::new(()),
            snapshots: Mutex::new(HashMap::new()),
            rbac: crate::rbac::Cache::default(),
            admission,
        });
        api.refresh_catalog();
        let catalog = api.catalog();
        let ns_def = catalog
            .get("", "v1", "namespaces")
            .ok_or_else(|| ApiError::internal("namespaces are not served"))?;
        for ns in SYSTEM_NAMESPACES {
            if api.store.get(&ns_def.key(None, ns)).is_none() {
                let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
                match api.create(&ns_def, None, body, &WriteOptions::default()).await {
                    Ok(_) => {}
                    Err(e) if e.reason == "AlreadyExists" => {}
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(api)
    }

    /// The current catalog.
    pub fn catalog(&self) -> Arc<Catalog> {
        self.catalog.read().clone()
    }

    /// Rebuilds the catalog from the built-ins and the CRDs in the store.
    pub fn refresh_catalog(&self) {
        // The snapshot is taken under the lock, so the last rebuild sees every CRD write that
        // finished before it started.
        let _rebuild = self.catalog_rebuild.lock();
        let mut defs = builtin::definitions();
        let snapshot = self.store.snapshot();
        for kv in snapshot.range("/registry/apiextensions.k8s.io/customresourcedefinitions/", None) {
            let crd = decode_stored(&kv.value, kv.mod_revision);
            for def in crate::crd::definitions(&crd) {
                // A CRD cannot take over a built-in resource.
                if !defs
                    .iter()
                    .any(|d| d.group == def.group && d.plural == def.plural && !d.is_custom())
                {
                    defs.push(def);
                }
            }
        }
        *self.catalog.write() = Arc::new(Catalog::new(defs));
    }

    fn after_write(&self, def: &ResourceDef) {
        if def.plural == "customresourcedefinitions" && def.group == "apiextensions.k8s.io" {
            self.refresh_catalog();
        }
        if def.group == crate::rbac::GROUP {
            self.rbac.invalidate();
        }
    }

    // ----- reading -----

    /// Serializes a stored object as served by `def` (resourceVersion spliced in; apiVersion
    /// converted where the stored form differs).
    pub fn render_into(&self, def: &ResourceDef, value: &[u8], rv: u64, out: &mut Vec<u8>) {
        match &def.flavor {
            Flavor::Builtin(BuiltinKind::EventV1) => {
                let obj = builtin::event_core_to_v1(decode_stored(value, rv));
                let _ = serde_json::to_writer(out, &obj);
            }
            Flavor::Custom(info) if info.multi_version => {
                let mut obj = decode_stored(value, rv);
                obj["apiVersion"] = json!(def.api_version());
                let _ = serde_json::to_writer(out, &obj);
            }
            _ => render(value, rv, out),
        }
    }

    /// Serializes a stored object as a `PartialObjectMetadata` served by `def` (the
    /// metadata's bytes with the resourceVersion spliced in).
    pub fn render_partial_into(&self, def: &ResourceDef, value: &[u8], rv: u64, out: &mut Vec<u8>) {
        match &def.flavor {
            // The served form differs from the stored one: convert, then take its metadata.
            Flavor::Builtin(BuiltinKind::EventV1) => {
                objects::partial_metadata_into(&self.to_value(def, value, rv), out);
            }
            _ => objects::render_partial(value, rv, out),
        }
    }

    /// Whether a stored object is selected by `labels` and `fields`. Selectors on metadata
    /// alone (labels, `metadata.name`, `metadata.namespace`) read the metadata's name,
    /// namespace and labels and skip the rest; other field selectors decode the object.
    pub fn selects(
        &self,
        def: &ResourceDef,
        kv: &KeyValue,
        labels: &LabelSelector,
        fields: &FieldSelector,
    ) -> bool {
        if labels.is_empty() && fields.is_empty() {
            return true;
        }
        if only_meta_fields(fields) {
            let meta: objects::MetaFields = objects::decode_stored_metadata(&kv.value).unwrap_or_default();
            if !labels.matches(&meta.labels.unwrap_or_default()) {
                return false;
            }
            return fields.is_empty()
                || fields.matches(&json!({"metadata": {"name": meta.name, "namespace": meta.namespace}}));
        }
        let obj = self.to_value(def, &kv.value, kv.mod_revision);
        labels.matches(&objects::labels(&obj)) && fields.matches(&obj)
    }

    /// A stored object as a served `Value`.
    pub fn to_value(&self, def: &ResourceDef, value: &[u8], rv: u64) -> Value {
        as_served(def, decode_stored(value, rv))
    }

    /// GET one object.
    pub fn get(&self, def: &ResourceDef, ns: Option<&str>, name: &str) -> ApiResult<Value> {
        let kv = self.get_kv(def, ns, name)?;
        Ok(self.to_value(def, &kv.value, kv.mod_revision))
    }

    /// The stored key-value of one object.
    pub fn get_kv(&self, def: &ResourceDef, ns: Option<&str>, name: &str) -> ApiResult<Arc<KeyValue>> {
        self.store
            .get(&def.key(ns, name))
            .ok_or_else(|| ApiError::not_found(&def.group, &def.plural, name))
    }

    /// LIST with selectors, pagination and resourceVersion semantics.
    pub async fn list(&self, def: &ResourceDef, ns: Option<&str>, opts: &ListOptions) -> ApiResult<ListPage> {
        let prefix = def.list_prefix(ns);
        let (snapshot, start_after) = match &opts.continue_token {
            Some(token) => {
                let (rev, start) = decode_continue(token)?;
                let snapshot = self.snapshot_for_continue(rev)?;
                (snapshot, Some(format!("{prefix}{start}")))
            }
            None => (self.snapshot_for_list(opts).await?, None),
        };
        let matches = |kv: &KeyValue| self.selects(def, kv, &opts.labels, &opts.fields);
        let mut items = Vec::new();
        let mut last_key = None;
        let mut more = false;
        // A name equality selector needs one key, not a scan.
        if let (Some(name), true, None) = (opts.fields.name(), def.namespaced || ns.is_none(), &start_after)
            && (ns.is_some() || !def.namespaced)
        {
            if let Some(kv) = snapshot.get(&def.key(ns, name))
                && matches(kv)
            {
                items.push(kv.clone());
            }
        } else {
            for kv in snapshot.range(&prefix, start_after.as_deref()) {
                if opts.limit > 0 && items.len() == opts.limit {
                    more = true;
                    break;
                }
                last_key = Some(kv.key.clone());
                if matches(kv) {
                    items.push(kv.clone());
                }
            }
        }
        let mut continue_token = None;
        let mut remaining = None;
        if more && let Some(last) = last_key {
            let start = last.strip_prefix(&prefix).unwrap_or(&last).to_owned();
            continue_token = Some(encode_continue(snapshot.revision(), &start));
            if opts.labels.is_empty() && opts.fields.is_empty() {
                remaining = Some(snapshot.range(&prefix, Some(&last)).count() as u64);
            }
            self.snapshots
                .lock()
                .insert(snapshot.revision(), (snapshot.clone(), Instant::now()));
        }
        Ok(ListPage {
            revision: snapshot.revision(),
            items,
            continue_token,
            remaining,
        })
    }

    async fn snapshot_for_list(&self, opts: &ListOptions) -> ApiResult<Snapshot> {
        let rv = match opts.resource_version.as_deref() {
            None | Some("") => {
                if opts.resource_version_match.is_some() {
                    return Err(ApiError::invalid(
                        "meta.k8s.io",
                        "ListOptions",
                        "",
                        vec![Cause::forbidden(
                            "resourceVersionMatch",
                            "resourceVersionMatch is forbidden unless resourceVersion is provided",
                        )],
                    ));
                }
                return Ok(self.store.snapshot());
            }
            Some(rv) => parse_rv(rv)?,
        };
        match opts.resource_version_match.as_deref() {
            Some("Exact") => {
                if rv == 0 {
                    return Err(ApiError::invalid(
                        "meta.k8s.io",
                        "ListOptions",
                        "",
                        vec![Cause::forbidden(
                            "resourceVersionMatch",
                            "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
                        )],
                    ));
                }
                let current = self.store.revision();
                if rv > current {
                    return Err(too_large_rv(rv, current));
                }
                self.snapshot_for_continue(rv).map_err(|_| {
                    ApiError::expired(format!(
                        "too old resource version: {rv} ({})",
                        self.store.compacted_revision()
                    ))
                })
            }
            None | Some("NotOlderThan") => {
                let deadline = Instant::now() + Duration::from_secs(3);
                loop {
                    let snap = self.store.snapshot();
                    if snap.revision() >= rv {
                        return Ok(snap);
                    }
                    if Instant::now() > deadline {
                        return Err(too_large_rv(rv, snap.revision()));
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
            Some(other) => Err(ApiError::invalid(
                "meta.k8s.io",
                "ListOptions",
                "",
                vec![Cause::unsupported(
                    "resourceVersionMatch",
                    &json!(other),
                    &["Exact", "NotOlderThan"],
                )],
            )),
        }
    }

    fn snapshot_for_continue(&self, rev: u64) -> ApiResult<Snapshot> {
        let mut cache = self.snapshots.lock();
        cache.retain(|_, (_, at)| at.elapsed() < SNAPSHOT_TTL);
        if let Some((snap, at)) = cache.get_mut(&rev) {
            *at = Instant::now();
            return Ok(snap.clone());
        }
        drop(cache);
        if rev == self.store.revision() {
            return Ok(self.store.snapshot());
        }
        let snap = self.store.snapshot_at(rev).map_err(|_| {
            ApiError::expired(
                "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.",
            )
        })?;
        self.snapshots.lock().insert(rev, (snap.clone(), Instant::now()));
        Ok(snap)
    }

    // ----- writing -----

    /// POST: creates an object.
    pub async fn create(
        &self,
        def: &ResourceDef,
        url_ns: Option<&str>,
        mut body: Value,
        opts: &WriteOptions,
    ) -> ApiResult<Written> {
        check_type(def, &mut body)?;
        if !def.creatable {
            return Err(ApiError::method_not_allowed(
                "create: the resource's CustomResourceDefinition is terminating",
            ));
        }
        let ns = resolve_namespace(def, url_ns, &mut body)?;
        let meta = objects::metadata_mut(&mut body)
            .ok_or_else(|| ApiError::bad_request("object is not a JSON object"))?;
        let name = match meta.get("name").and_then(Value::as_str).filter(|n| !n.is_empty()) {
            Some(n) => n.to_owned(),
            None => match meta
                .get("generateName")
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty())
            {
                Some(prefix) => objects::generate_name(prefix),
                None => {
                    return Err(ApiError::invalid(
                        &def.group,
                        &def.kind,
                        "",
                        vec![Cause::required(
                            "metadata.name",
                            "name or generateName is required",
                        )],
                    ));
                }
            },
        };
        if meta
            .get("resourceVersion")
            .and_then(Value::as_str)
            .is_some_and(|rv| !rv.is_empty())
        {
            return Err(ApiError::bad_request(
                "resourceVersion should not be set on objects to be created",
            ));
        }
        meta.insert("name".into(), json!(name));
        let uid = objects::new_uid();
        meta.insert("uid".into(), json!(uid));
        meta.insert("creationTimestamp".into(), json!(objects::now_rfc3339()));
        for f in [
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "selfLink",
            "generation",
        ] {
            meta.remove(f);
        }
        if !opts.managed_precomputed {
            meta.remove("managedFields");
        }
        if tracks_generation(def) {
            meta.insert("generation".into(), json!(1));
        }
        if let Some(ns) = &ns {
            self.check_namespace_open(ns)?;
        }
        match &def.flavor {
            Flavor::Builtin(kind) => {
                kind.initial_status(&mut body);
                prepare_builtin_create(*kind, &mut body, &uid, &name);
            }
            Flavor::Custom(_) => {
                if def.status
                    && let Some(map) = body.as_object_mut()
                {
                    map.remove("status");
                }
            }
        }
        let mut warnings = Vec::new();
        let mut obj = self.prepare(def, body, None, opts, &Scope::WHOLE, &mut warnings)?;
        if !opts.managed_precomputed {
            obj = track_fields(def, None, obj, opts, None, &[]);
        }
        let key = def.key(ns.as_deref(), &name);
        if opts.dry_run {
            if self.store.get(&key).is_some() {
                return Err(ApiError::already_exists(&def.group, &def.plural, &name));
            }
            return Ok(Written {
                object: self.served(def, obj),
                warnings,
                created: true,
                stored: None,
            });
        }
        let bytes = encode_for_storage(&obj);
        if bytes.len() > MAX_OBJECT_BYTES {
            return Err(ApiError::too_large(MAX_OBJECT_BYTES));
        }
        match self
            .store
            .txn(Txn::new().when(&key, Compare::Absent).put(&key, bytes))
            .await?
        {
            TxnOutcome::Committed { revision, results } => {
                self.after_write(def);
                // The stored bytes are this object: answer from it instead of re-parsing them.
                let mut object = self.served(def, obj);
                objects::set_resource_version(&mut object, revision);
                Ok(Written {
                    object,
                    warnings,
                    created: true,
                    stored: results.into_iter().flatten().next(),
                })
            }
            TxnOutcome::ConditionFailed { .. } => {
                Err(ApiError::already_exists(&def.group, &def.plural, &name))
            }
        }
    }

    /// PUT: replaces an object (or its status / scale).
    pub async fn update(
        &self,
        def: &ResourceDef,
        url_ns: Option<&str>,
        name: &str,
        mut body: Value,
        sub: Subresource,
        opts: &WriteOptions,
    ) -> ApiResult<Written> {
        if sub == Subresource::Scale {
            return self.update_scale(def, url_ns, name, body, opts).await;
        }
        check_type(def, &mut body)?;
        let ns = resolve_namespace(def, url_ns, &mut body)?;
        let body_name = objects::meta_str(&body, "name").unwrap_or("").to_owned();
        if body_name.is_empty() {
            if let Some(meta) = objects::metadata_mut(&mut body) {
                meta.insert("name".into(), json!(name));
            }
        } else if body_name != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        let precondition = match objects::meta_str(&body, "resourceVersion").filter(|s| !s.is_empty()) {
            Some(rv) => Some(parse_rv(rv)?),
            None => None,
        };
        let key = def.key(ns.as_deref(), name);
        let Some(current) = self.store.get(&key) else {
            if allows_create_on_update(def) && sub == Subresource::Main {
                if let Some(meta) = objects::metadata_mut(&mut body) {
                    meta.remove("resourceVersion");
                }
                return self.create(def, ns.as_deref(), body, opts).await;
            }
            return Err(ApiError::not_found(&def.group, &def.plural, name));
        };
        if precondition.is_none() && def.is_custom() {
            return Err(ApiError::invalid(
                &def.group,
                &def.kind,
                name,
                vec![Cause::invalid(
                    "metadata.resourceVersion",
                    &json!("0x0"),
                    "must be specified for an update",
                )],
            ));
        }
        if let Some(rv) = precondition
            && rv != current.mod_revision
        {
            return Err(ApiError::stale(&def.group, &def.plural, name));
        }
        let old = self.to_value(def, &current.value, current.mod_revision);
        let new = merge_subresource(def, &old, body, sub);
        self.commit_update(def, &current, old, new, opts, sub.name())
            .await
    }

    /// PATCH: applies a patch to the current object, retrying on write races when the patch
    /// carries no resourceVersion. Server-side apply creates the object when it is missing.
    pub async fn patch(
        &self,
        def: &ResourceDef,
        ns: Option<&str>,
        name: &str,
        patch: &Patch,
        sub: Subresource,
        opts: &WriteOptions,
    ) -> ApiResult<Written> {
        let status_only = status_only_patch(def, patch, sub, opts);
        for _ in 0..16 {
            let key = def.key(ns, name);
            let current = self.store.get(&key);
            if let Patch::Apply(config) = patch {
                let result = self
                    .server_side_apply(def, ns, name, config, current.as_ref(), sub, opts)
                    .await;
                match result {
                    Err(e)
                        if e.reason == "Conflict"
                            && e.details.as_ref().is_some_and(|d| d.get("causes").is_none()) =>
                    {
                        continue;
                    }
                    Err(e) if e.reason == "AlreadyExists" && current.is_none() => continue,
                    other => return other,
                }
            }
            let Some(current) = current else {
                return Err(ApiError::not_found(&def.group, &def.plural, name));
            };
            let split = if status_only {
                self.to_split(def, &current)
            } else {
                None
            };
            let (old, kept) = match split {
                Some(split) => (split.decoded, split.kept),
                None => (
                    self.to_value(def, &current.value, current.mod_revision),
                    Vec::new(),
                ),
            };
            let scale = sub == Subresource::Scale;
            let scaled = if scale { Some(scale_view(def, &old)?) } else { None };
            let view = scaled.as_ref().unwrap_or(&old);
            let patched = apply_patch(def, view, patch, name, scale)?;
            // Only a resourceVersion the patch itself sets pins the write: the patched object
            // inherits the current one's, which must not turn a race into a 409.
            let pinned = pinned_revision(view, &patched)?;
            if let Some(rv) = pinned
                && rv != current.mod_revision
            {
                return Err(ApiError::stale(&def.group, &def.plural, name));
            }
            let new = if scale {
                apply_scale(def, &old, &patched)?
            } else {
                let mut patched = patched;
                if patched.get("apiVersion") != old.get("apiVersion")
                    || patched.get("kind") != old.get("kind")
                {
                    check_type(def, &mut patched)?;
                }
                if objects::meta_str(&patched, "name") != Some(name) {
                    return Err(ApiError::bad_request(format!(
                        "the name of the object ({}) does not match the name on the URL ({name})",
                        objects::meta_str(&patched, "name").unwrap_or("")
                    )));
                }
                merge_subresource(def, &old, patched, sub)
            };
            match self
                .commit_update_keeping(def, &current, old, new, opts, sub.name(), &kept)
                .await
            {
                Err(e)
                    if e.reason == "Conflict"
                        && pinned.is_none()
                        && e.details.as_ref().is_some_and(|d| d.get("causes").is_none()) =>
                {
                    continue;
                }
                other => {
                    return other.and_then(|mut w| {
                        if scale {
                            w.object = scale_view(def, &w.object)?;
                            w.stored = None;
                        }
                        Ok(w)
                    });
                }
            }
        }
        Err(ApiError::conflict(
            &def.group,
            &def.plural,
            name,
            "too many concurrent writes; try again",
        ))
    }

    /// Server-side apply (`application/apply-patch+yaml`).
    #[allow(clippy::too_many_arguments)]
    async fn server_side_apply(
        &self,
        def: &ResourceDef,
        ns: Option<&str>,
        name: &str,
        config: &Value,
        current: Option<&Arc<KeyValue>>,
        sub: Subresource,
        opts: &WriteOptions,
    ) -> ApiResult<Written> {
        if sub == Subresource::Scale {
            return Err(ApiError::unsupported_media_type(
                "application/apply-patch+yaml on /scale",
            ));
        }
        if objects::meta_str(config, "name").is_some_and(|n| n != name) {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({}) does not match the name on the URL ({name})",
                objects::meta_str(config, "name").unwrap_or("")
            )));
        }
        let manager = opts.manager();
        let now = objects::now_rfc3339();
        let api_version = def.api_version();
        let apply_opts = flotilla_patch::managed::ApplyOptions {
            manager: &manager,
            force: opts.force,
            api_version: &api_version,
            subresource: sub.name(),
            now: &now,
        };
        let old = current.map(|kv| self.to_value(def, &kv.value, kv.mod_revision));
        let mut config = config.clone();
        if let Some(meta) = objects::metadata_mut(&mut config) {
            meta.entry("name").or_insert_with(|| json!(name));
            if let (true, Some(ns)) = (def.namespaced, ns) {
                meta.entry("namespace").or_insert_with(|| json!(ns));
            }
        }
        let filter = field_filter(def, sub.name());
        let applied = with_shape(def, |shape| {
            flotilla_patch::managed::apply_with_filter(old.as_ref(), &config, shape, &apply_opts, &filter)
        })
        .map_err(|e| apply_error(def, name, e))?;
        let opts = WriteOptions {
            managed_precomputed: true,
            ..opts.clone()
        };
        match (current, old) {
            (None, _) => {
                if sub != Subresource::Main {
                    return Err(ApiError::not_found(&def.group, &def.plural, name));
                }
                self.create(def, ns, applied, &opts).await
            }
            (Some(kv), Some(old)) => {
                let new = merge_subresource(def, &old, applied, sub);
                self.commit_update(def, kv, old, new, &opts, sub.name()).await
            }
            (Some(_), None) => Err(ApiError::internal("inconsistent read")),
        }
    }

    async fn update_scale(
        &self,
        def: &ResourceDef,
        ns: Option<&str>,
        name: &str,
        body: Value,
        opts: &WriteOptions,
    ) -> ApiResult<Written> {
        let current = self.get_kv(def, ns, name)?;
        if let Some(rv) = objects::meta_str(&body, "resourceVersion").filter(|s| !s.is_empty())
            && parse_rv(rv)? != current.mod_revision
        {
            return Err(ApiError::stale(&def.group, &def.plural, name));
        }
        let old = self.to_value(def, &current.value, current.mod_revision);
        let new = apply_scale(def, &old, &body)?;
        let mut written = self
            .commit_update(def, &current, old, new, opts, Some("scale"))
            .await?;
        written.object = scale_view(def, &written.object)?;
        written.stored = None;
        Ok(written)
    }

    /// GET /scale.
    pub fn get_scale(&self, def: &ResourceDef, ns: Option<&str>, name: &str) -> ApiResult<Value> {
        scale_view(def, &self.get(def, ns, name)?)
    }

    /// The shared update path: immutable metadata, validation, generation, finalizer-driven
    /// deletion, no-op detection and the conditional write.
    pub async fn commit_update(
        &self,
        def: &ResourceDef,
        current: &Arc<KeyValue>,
        old: Value,
        new: Value,
        opts: &WriteOptions,
        sub: Option<&str>,
    ) -> ApiResult<Written> {
        self.commit_update_keeping(def, current, old, new, opts, sub, &[])
            .await
    }

    /// A stored custom resource as a served [`objects::Split`], as [`Api::to_value`] serves it
    /// whole; `None` when the bytes do not decode or the object is being deleted (a write that
    /// finishes a deletion answers with the object built, not stored bytes).
    fn to_split<'a>(&self, def: &ResourceDef, current: &'a KeyValue) -> Option<objects::Split<'a>> {
        let split = objects::decode_split(&current.value, current.mod_revision)?;
        if objects::is_deleting(&split.decoded) {
            return None;
        }
        Some(objects::Split {
            decoded: as_served(def, split.decoded),
            kept: split.kept,
        })
    }

    /// [`Api::commit_update`] of objects that leave out the stored object's fields `kept`
    /// (bytes, from [`Api::to_split`]; empty for whole objects): a write through `/status`
    /// that cannot change them. They are written back as they are, and the answer is always
    /// rendered from the bytes stored.
    #[allow(clippy::too_many_arguments)]
    async fn commit_update_keeping(
        &self,
        def: &ResourceDef,
        current: &Arc<KeyValue>,
        mut old: Value,
        mut new: Value,
        opts: &WriteOptions,
        sub: Option<&str>,
        kept: &[(String, &serde_json::value::RawValue)],
    ) -> ApiResult<Written> {
        let name = objects::meta_str(&old, "name").unwrap_or_default().to_owned();
        let new_uid = objects::meta_str(&new, "uid").unwrap_or("").to_owned();
        let old_uid = objects::meta_str(&old, "uid").unwrap_or("").to_owned();
        if !new_uid.is_empty() && new_uid != old_uid {
            return Err(ApiError::conflict(
                &def.group,
                &def.plural,
                &name,
                &format!(
                    "Precondition failed: UID in precondition: {new_uid}, UID in object meta: {old_uid}"
                ),
            ));
        }
        {
            let old_meta = &old["metadata"];
            let meta = objects::metadata_mut(&mut new)
                .ok_or_else(|| ApiError::bad_request("object is not a JSON object"))?;
            for f in [
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "namespace",
                "generation",
            ] {
                match old_meta.get(f) {
                    Some(v) if !v.is_null() => {
                        meta.insert(f.into(), v.clone());
                    }
                    _ => {
                        meta.remove(f);
                    }
                }
            }
            meta.remove("resourceVersion");
            meta.remove("selfLink");
            if !meta.contains_key("managedFields")
                && let Some(mf) = old_meta.get("managedFields")
            {
                meta.insert("managedFields".into(), mf.clone());
            }
        }
        if objects::is_deleting(&old) {
            let old_f = objects::finalizers(&old);
            let added: Vec<String> = objects::finalizers(&new)
                .into_iter()
                .filter(|f| !old_f.contains(f))
                .collect();
            if !added.is_empty() {
                let list: Vec<String> = added.iter().map(|f| format!("\"{f}\"")).collect();
                return Err(ApiError::invalid(
                    &def.group,
                    &def.kind,
                    &name,
                    vec![Cause::forbidden(
                        "metadata.finalizers",
                        &format!(
                            "no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
                            list.join(", ")
                        ),
                    )],
                ));
            }
        }
        let mut warnings = Vec::new();
        let scope = Scope { sub, kept };
        let mut new = self.prepare(def, new, Some(&old), opts, &scope, &mut warnings)?;
        // Only metadata changes from here on.
        let changes = Changes::of(&old, &new);
        if tracks_generation(def) {
            let generation = old["metadata"]["generation"].as_i64().unwrap_or(0);
            let bump = changes.spec_changed();
            if let Some(meta) = objects::metadata_mut(&mut new) {
                meta.insert(
                    "generation".into(),
                    json!(if bump { generation + 1 } else { generation.max(1) }),
                );
            }
        }
        let key = current.key.clone();
        // An object being deleted goes away once its last finalizer does.
        let finished = objects::is_deleting(&new)
            && objects::finalizers(&new).is_empty()
            && spec_finalizers_empty(def, &new);
        if !finished && changes.same_but_managed_times(&old, &new) {
            return Ok(Written {
                object: old,
                warnings,
                created: false,
                stored: Some(current.clone()),
            });
        }
        if !opts.managed_precomputed {
            // Compared without its resourceVersion (`new` has none): taken out and put back
            // rather than compared on a copy.
            let version = objects::metadata_mut(&mut old).and_then(|meta| meta.remove("resourceVersion"));
            let unchanged: Vec<&str> = changes.unchanged.iter().map(String::as_str).collect();
            new = track_fields(def, Some(&mut old), new, opts, sub, &unchanged);
            if let (Some(version), Some(meta)) = (version, objects::metadata_mut(&mut old)) {
                meta.insert("resourceVersion".into(), version);
            }
            if !finished && changes.same_but_managed_times(&old, &new) {
                return Ok(Written {
                    object: old,
                    warnings,
                    created: false,
                    stored: Some(current.clone()),
                });
            }
        }
        if opts.dry_run {
            return Ok(Written {
                object: self.served(def, new),
                warnings,
                created: false,
                stored: None,
            });
        }
        let txn = Txn::new().when(&key, Compare::ModRevision(current.mod_revision));
        let txn = if finished {
            txn.delete(&key)
        } else {
            txn.put(&key, objects::encode_with_kept(&new, kept))
        };
        match self.store.txn(txn).await? {
            TxnOutcome::Committed { revision, results } => {
                self.after_write(def);
                let mut object = self.served(def, new);
                objects::set_resource_version(&mut object, revision);
                // A finished deletion's result is the removed key-value, not `object`.
                let stored = if finished {
                    None
                } else {
                    results.into_iter().flatten().next()
                };
                if stored.is_none() && !kept.is_empty() {
                    // `object` lacks the kept fields: it must not be the answer.
                    return Err(ApiError::internal(format!(
                        "the store did not return {} {name} as written",
                        def.kind
                    )));
                }
                Ok(Written {
                    object,
                    warnings,
                    created: false,
                    stored,
                })
            }
            TxnOutcome::ConditionFailed { .. } => Err(ApiError::stale(&def.group, &def.plural, &name)),
        }
    }

    /// DELETE one object.
    pub async fn delete(
        &self,
        def: &ResourceDef,
        ns: Option<&str>,
        name: &str,
        opts: &DeleteOptions,
    ) -> ApiResult<DeleteOutcome> {
        for _ in 0..16 {
            let current = self.get_kv(def, ns, name)?;
            let old = self.to_value(def, &current.value, current.mod_revision);
            let uid = objects::meta_str(&old, "uid").unwrap_or("").to_owned();
            if let Some(want) = &opts.uid
                && *want != uid
            {
                return Err(ApiError::conflict(
                    &def.group,
                    &def.plural,
                    name,
                    &format!("Precondition failed: UID in precondition: {want}, UID in object meta: {uid}"),
                ));
            }
            if let Some(want) = &opts.resource_version
                && *want != current.mod_revision.to_string()
            {
                return Err(ApiError::conflict(
                    &def.group,
                    &def.plural,
                    name,
                    &format!(
                        "Precondition failed: ResourceVersion in precondition: {want}, ResourceVersion in object meta: {}",
                        current.mod_revision
                    ),
                ));
            }
            let mut finalizers = objects::finalizers(&old);
            match opts.propagation {
                Some(Propagation::Orphan) => add_unique(&mut finalizers, crate::gc::ORPHAN_FINALIZER),
                Some(Propagation::Foreground) => add_unique(&mut finalizers, crate::gc::FOREGROUND_FINALIZER),
                _ => {}
            }
            let is_namespace = def.group.is_empty() && def.plural == "namespaces";
            let is_crd = def.group == "apiextensions.k8s.io" && def.plural == "customresourcedefinitions";
            if is_crd {
                add_unique(&mut finalizers, crate::gc::CRD_CLEANUP_FINALIZER);
            }
            let pending = !finalizers.is_empty() || (is_namespace && !spec_finalizers_empty(def, &old));
            if pending {
                let mut new = old.clone();
                objects::set_finalizers(&mut new, finalizers);
                if !objects::is_deleting(&new)
                    && let Some(meta) = objects::metadata_mut(&mut new)
                {
                    meta.insert("deletionTimestamp".into(), json!(objects::now_rfc3339()));
                    meta.insert("deletionGracePeriodSeconds".into(), json!(0));
                }
                if is_namespace {
                    new["status"]["phase"] = json!("Terminating");
                }
                if is_crd {
                    crate::crd::set_status(&mut new, Some(&old));
                }
                if opts.dry_run {
                    return Ok(DeleteOutcome::Pending(new));
                }
                let write = self.write_deletion_mark(def, &current, new).await;
                match write {
                    Ok(obj) => return Ok(DeleteOutcome::Pending(obj)),
                    Err(e) if e.reason == "Conflict" => continue,
                    Err(e) => return Err(e),
                }
            }
            if opts.dry_run {
                return Ok(DeleteOutcome::Deleted(old));
            }
            let key = current.key.clone();
            match self
                .store
                .txn(
                    Txn::new()
                        .when(&key, Compare::ModRevision(current.mod_revision))
                        .delete(&key),
                )
                .await?
            {
                TxnOutcome::Committed { revision, .. } => {
                    self.after_write(def);
                    let mut obj = old;
                    objects::set_resource_version(&mut obj, revision);
                    return Ok(DeleteOutcome::Deleted(obj));
                }
                TxnOutcome::ConditionFailed { .. } => continue,
            }
        }
        Err(ApiError::conflict(
            &def.group,
            &def.plural,
            name,
            "too many concurrent writes; try again",
        ))
    }

    async fn write_deletion_mark(
        &self,
        def: &ResourceDef,
        current: &KeyValue,
        new: Value,
    ) -> ApiResult<Value> {
        let key = current.key.clone();
        let mut new = new;
        if let Some(meta) = objects::metadata_mut(&mut new) {
            meta.remove("resourceVersion");
        }
        match self
            .store
            .txn(
                Txn::new()
                    .when(&key, Compare::ModRevision(current.mod_revision))
                    .put(&key, encode_for_storage(&new)),
            )
            .await?
        {
            TxnOutcome::Committed { results, .. } => {
                self.after_write(def);
                let kv = results
                    .into_iter()
                    .flatten()
                    .next()
                    .ok_or_else(|| ApiError::internal("update returned nothing"))?;
                Ok(self.to_value(def, &kv.value, kv.mod_revision))
            }
            TxnOutcome::ConditionFailed { .. } => Err(ApiError::stale(&def.group, &def.plural, "")),
        }
    }

    /// DELETE a collection: every matching object, one by one.
    pub async fn delete_collection(
        &self,
        def: &ResourceDef,
        ns: Option<&str>,
        list: &ListOptions,
        opts: &DeleteOptions,
    ) -> ApiResult<Vec<Value>> {
        let page = self.list(def, ns, list).await?;
        let mut out = Vec::new();
        for kv in page.items {
            let obj = self.to_value(def, &kv.value, kv.mod_revision);
            let name = objects::meta_str(&obj, "name").unwrap_or_default().to_owned();
            let item_ns = objects::meta_str(&obj, "namespace").map(str::to_owned);
            match self.delete(def, item_ns.as_deref(), &name, opts).await {
                Ok(DeleteOutcome::Deleted(o)) | Ok(DeleteOutcome::Pending(o)) => out.push(o),
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    // ----- helpers -----

    fn served(&self, def: &ResourceDef, mut obj: Value) -> Value {
        if let Flavor::Builtin(BuiltinKind::EventV1) = def.flavor {
            obj = builtin::event_core_to_v1(obj);
        }
        obj
    }

    fn check_namespace_open(&self, ns: &str) -> ApiResult<()> {
        let key = crate::resources::storage_prefix("", "namespaces") + ns;
        match self.store.get(&key) {
            None => Err(ApiError::not_found("", "namespaces", ns)),
            Some(kv) => {
                let meta: objects::MetaFields =
                    objects::decode_stored_metadata(&kv.value).unwrap_or_default();
                if meta.deletion_timestamp.is_some() {
                    Err(ApiError::forbidden(
                        "",
                        "namespaces",
                        ns,
                        &format!(
                            "unable to create new content in namespace {ns} because it is being terminated"
                        ),
                    ))
                } else {
                    Ok(())
                }
            }
        }
    }

    /// Decoding, defaulting, metadata and semantic validation, conversion to the stored form,
    /// admission. Returns the object to store (no resourceVersion).
    fn prepare(
        &self,
        def: &ResourceDef,
        body: Value,
        old: Option<&Value>,
        opts: &WriteOptions,
        scope: &Scope<'_>,
        warnings: &mut Vec<String>,
    ) -> ApiResult<Value> {
        let name = objects::meta_str(&body, "name").unwrap_or_default().to_owned();
        let mut causes = validate_metadata(def, &body, old.is_none());
        let mut obj = match &def.flavor {
            Flavor::Builtin(kind) => {
                let status_write = def.status && scope.sub == Some("status") && old.is_some();
                let (decoded, mut unknown) = decode_builtin(*kind, body, status_write).map_err(|e| {
                    ApiError::bad_request(format!(
                        "{kind_name} in version \"{version}\" cannot be handled as a {kind_name}: {field}{message}",
                        kind_name = def.kind,
                        version = def.version,
                        field = if e.field.is_empty() || e.field == "." { String::new() } else { format!("{}: ", e.field) },
                        message = e.message
                    ))
                })?;
                unknown.retain(|f| f != "metadata.resourceVersion");
                self.report_unknown(&unknown, opts, warnings)?;
                let mut obj = decoded;
                if *kind == BuiltinKind::EventV1 {
                    obj = builtin::event_v1_to_core(obj);
                }
                kind.apply_defaults(&mut obj);
                causes.extend(kind.validate(&obj));
                if *kind == BuiltinKind::Secret {
                    // After validation, so a bad key there is still named `stringData[key]`.
                    // Every write verb (create, update, patches, server-side apply) ends here.
                    builtin::fold_secret_string_data(&mut obj);
                }
                if *kind == BuiltinKind::CustomResourceDefinition {
                    causes.extend(crate::crd::validate(&obj));
                    crate::crd::set_status(&mut obj, old);
                }
                obj
            }
            Flavor::Custom(info) => {
                if !body.is_object() {
                    return Err(ApiError::bad_request("the object must be a JSON object"));
                }
                let mut obj = body;
                if let Some(schema) = &info.compiled {
                    let unknown = schema.prune(&mut obj);
                    self.report_unknown(&unknown, opts, warnings)?;
                    schema.apply_defaults(&mut obj);
                    // A default of a kept field (say `spec: {default: {}}`) is not the
                    // stored value, which stays.
                    if let Some(map) = obj.as_object_mut() {
                        for (field, _) in scope.kept {
                            map.remove(field);
                        }
                    }
                    // As kube-apiserver validates a custom resource's status update: the
                    // status against its schema, the rest is the stored object's.
                    let errors = if def.status && scope.sub == Some("status") {
                        schema.validate_status(&obj)
                    } else {
                        schema.validate(&obj)
                    };
                    causes.extend(errors.iter().map(crate::crd::cause_of));
                }
                obj
            }
        };
        if !causes.is_empty() {
            return Err(ApiError::invalid(&def.group, &def.kind, &name, causes));
        }
        if let Some(meta) = objects::metadata_mut(&mut obj) {
            meta.remove("resourceVersion");
            for empty in ["labels", "annotations", "finalizers", "ownerReferences"] {
                let is_empty = match meta.get(empty) {
                    Some(Value::Null) => true,
                    Some(Value::Object(m)) => m.is_empty(),
                    Some(Value::Array(a)) => a.is_empty(),
                    _ => false,
                };
                if is_empty {
                    meta.remove(empty);
                }
            }
            if let Some(Value::Null) = meta.get("creationTimestamp") {
                meta.remove("creationTimestamp");
            }
        }
        // Ratcheting, as kube-apiserver does for unchanged fields: an object that reached the
        // store with an invalid spec (e.g. written before admission existed) must still accept
        // writes that leave the spec alone, such as the detector's `Valid=False` status.
        if old.is_none_or(|old| old.get("spec") != obj.get("spec")) {
            crate::admission::admit(&self.admission, &def.group, &def.kind, &obj)?;
        }
        crate::rbac::escalation::check(self, def, &obj, old, opts.user.as_deref())?;
        Ok(obj)
    }

    fn report_unknown(
        &self,
        unknown: &[String],
        opts: &WriteOptions,
        warnings: &mut Vec<String>,
    ) -> ApiResult<()> {
        if unknown.is_empty() {
            return Ok(());
        }
        match opts.field_validation {
            FieldValidation::Ignore => Ok(()),
            FieldValidation::Warn => {
                warnings.extend(unknown.iter().map(|f| format!("unknown field \"{f}\"")));
                Ok(())
            }
            FieldValidation::Strict => {
                let list: Vec<String> = unknown.iter().map(|f| format!("unknown field \"{f}\"")).collect();
                Err(ApiError::bad_request(format!(
                    "strict decoding error: {}",
                    list.join(", ")
                )))
            }
        }
    }
}

fn too_large_rv(rv: u64, current: u64) -> ApiError {
    let mut e = ApiError::timeout(format!("Too large resource version: {rv}, current: {current}"));
    e.details = Some(
        json!({"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}], "retryAfterSeconds": 1}),
    );
    e
}

/// Parses a resourceVersion parameter.
pub fn parse_rv(rv: &str) -> ApiResult<u64> {
    rv.parse::<u64>().map_err(|_| {
        ApiError::bad_request(format!(
            "invalid resource version \"{rv}\": expected a decimal revision"
        ))
    })
}

fn encode_continue(rev: u64, start: &str) -> String {
    let token = json!({"v": "meta.k8s.io/v1", "rv": rev, "start": start});
    base64::engine::general_purpose::URL_SAFE.encode(token.to_string())
}

fn decode_continue(token: &str) -> ApiResult<(u64, String)> {
    let bad = |why: &str| ApiError::bad_request(format!("continue key is not valid: {why}"));
    let bytes = base64::engine::general_purpose::URL_SAFE
        .decode(token)
        .or_else(|_| base64::engine::general_purpose::STANDARD.decode(token))
        .map_err(|_| bad("not base64"))?;
    let v: Value = serde_json::from_slice(&bytes).map_err(|_| bad("not JSON"))?;
    if v["v"] != "meta.k8s.io/v1" {
        return Err(bad(
            "incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
        ));
    }
    let rev = v["rv"]
        .as_u64()
        .filter(|r| *r > 0)
        .ok_or_else(|| bad("incorrect encoded start resourceVersion"))?;
    let start = v["start"].as_str().ok_or_else(|| bad("missing start key"))?;
    if start.contains("..") || start.starts_with('/') {
        return Err(bad("invalid start key"));
    }
    Ok((rev, start.to_owned()))
}

fn only_meta_fields(fields: &FieldSelector) -> bool {
    fields
        .terms
        .iter()
        .all(|(f, _, _)| f == "metadata.name" || f == "metadata.namespace")
}

fn add_unique(list: &mut Vec<String>, item: &str) {
    if !list.iter().any(|f| f == item) {
        list.push(item.to_owned());
    }
}

fn tracks_generation(def: &ResourceDef) -> bool {
    match &def.flavor {
        Flavor::Builtin(kind) => kind.tracks_generation(),
        Flavor::Custom(_) => true,
    }
}

fn allows_create_on_update(def: &ResourceDef) -> bool {
    match &def.flavor {
        Flavor::Builtin(kind) => kind.allows_create_on_update(),
        Flavor::Custom(_) => false,
    }
}

fn spec_finalizers_empty(def: &ResourceDef, obj: &Value) -> bool {
    if def.group.is_empty() && def.plural == "namespaces" {
        obj["spec"]["finalizers"].as_array().is_none_or(|a| a.is_empty())
    } else {
        true
    }
}

/// Checks the body's apiVersion/kind against the URL; missing ones are defaulted from the URL
/// (as kube-apiserver's decoder does).
fn check_type(def: &ResourceDef, body: &mut Value) -> ApiResult<()> {
    let Some(map) = body.as_object_mut() else {
        return Err(ApiError::bad_request(
            "the request body must be a JSON or YAML object",
        ));
    };
    let missing = |v: Option<&Value>| v.and_then(Value::as_str).is_none_or(str::is_empty);
    if missing(map.get("kind")) {
        map.insert("kind".into(), json!(def.kind));
    }
    if missing(map.get("apiVersion")) {
        map.insert("apiVersion".into(), json!(def.api_version()));
    }
    let kind = map.get("kind").and_then(Value::as_str).unwrap_or("");
    let api_version = map.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    if api_version != def.api_version() {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({api_version}) does not match the expected API version ({})",
            def.api_version()
        )));
    }
    if kind != def.kind {
        return Err(ApiError::bad_request(format!(
            "the kind in the data ({kind}) does not match the expected kind ({}) for this resource",
            def.kind
        )));
    }
    Ok(())
}

/// Sets the object's namespace from the URL (or checks they agree); returns it.
fn resolve_namespace(def: &ResourceDef, url_ns: Option<&str>, body: &mut Value) -> ApiResult<Option<String>> {
    let meta =
        objects::metadata_mut(body).ok_or_else(|| ApiError::bad_request("object is not a JSON object"))?;
    if !def.namespaced {
        meta.remove("namespace");
        return Ok(None);
    }
    let body_ns = meta
        .get("namespace")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned);
    let ns = match (url_ns, body_ns) {
        (Some(u), Some(b)) if u != b => {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        (Some(u), _) => u.to_owned(),
        (None, Some(b)) => b,
        (None, None) => {
            return Err(ApiError::bad_request(
                "the namespace of the object must be set in the URL or the object",
            ));
        }
    };
    meta.insert("namespace".into(), json!(ns));
    Ok(Some(ns))
}

fn validate_metadata(def: &ResourceDef, obj: &Value, creating: bool) -> Vec<Cause> {
    let mut causes = Vec::new();
    let meta = &obj["metadata"];
    if let Some(name) = meta["name"].as_str() {
        let rule = if def.group.is_empty() && def.plural == "namespaces" {
            NameRule::Label
        } else if def.group.is_empty() && def.plural == "services" {
            NameRule::Dns1035
        } else if def.group == crate::rbac::GROUP {
            NameRule::PathSegment
        } else {
            NameRule::Subdomain
        };
        let generated =
            creating && meta["generateName"].as_str().is_some_and(|g| !g.is_empty()) && name.is_empty();
        if !generated {
            for msg in names::check(rule, name) {
                causes.push(Cause::invalid("metadata.name", &json!(name), &msg));
            }
        }
    }
    if let Some(labels) = meta.get("labels").and_then(Value::as_object) {
        for (k, v) in labels {
            if let Some(msg) = names::check_qualified_name(k) {
                causes.push(Cause::invalid("metadata.labels", &json!(k), &msg));
            }
            match v.as_str() {
                Some(s) => {
                    if let Some(msg) = names::check_label_value(s) {
                        causes.push(Cause::invalid("metadata.labels", v, &msg));
                    }
                }
                None => causes.push(Cause::invalid(
                    "metadata.labels",
                    v,
                    "label values must be strings",
                )),
            }
        }
    }
    if let Some(annotations) = meta.get("annotations").and_then(Value::as_object) {
        let mut total = 0;
        for (k, v) in annotations {
            total += k.len() + v.as_str().map_or(0, str::len);
            if let Some(msg) = names::check_qualified_name(&k.to_lowercase()) {
                causes.push(Cause::invalid("metadata.annotations", &json!(k), &msg));
            }
        }
        if total > 256 * 1024 {
            causes.push(Cause::new(
                "FieldValueTooLong",
                "metadata.annotations",
                format!("Too long: must have at most {} bytes", 256 * 1024),
            ));
        }
    }
    if let Some(refs) = meta.get("ownerReferences").and_then(Value::as_array) {
        let mut controllers = 0;
        for (i, r) in refs.iter().enumerate() {
            for f in ["apiVersion", "kind", "name", "uid"] {
                if r[f].as_str().is_none_or(str::is_empty) {
                    causes.push(Cause::invalid(
                        format!("metadata.ownerReferences[{i}].{f}"),
                        &json!(r[f].as_str().unwrap_or("")),
                        &format!("{f} must not be empty"),
                    ));
                }
            }
            if r["controller"].as_bool() == Some(true) {
                controllers += 1;
            }
        }
        if controllers > 1 {
            causes.push(Cause::invalid(
                "metadata.ownerReferences",
                &Value::Null,
                "Only one reference can have Controller set to true",
            ));
        }
    }
    if let Some(finalizers) = meta.get("finalizers").and_then(Value::as_array) {
        for (i, f) in finalizers.iter().enumerate() {
            let s = f.as_str().unwrap_or("");
            if let Some(msg) = names::check_qualified_name(s) {
                causes.push(Cause::invalid(format!("metadata.finalizers[{i}]"), f, &msg));
            }
        }
    }
    causes
}

/// Finds fields of `original` that `decoded` (its typed round trip) lost, as paths under
/// `path` (`spec.foo`, `spec.items[0].bar`).
pub fn unknown_fields(original: &Value, decoded: &Value, path: &str, out: &mut Vec<String>) {
    let mut path = path.to_owned();
    unknown_fields_at(original, decoded, &mut path, out);
}

/// [`unknown_fields`] with one path buffer, extended and truncated as the walk goes: a path
/// is copied only for a field that was lost.
fn unknown_fields_at(original: &Value, decoded: &Value, path: &mut String, out: &mut Vec<String>) {
    let len = path.len();
    match (original, decoded) {
        (Value::Object(o), Value::Object(d)) => {
            // Both maps iterate in key order (serde_json's maps are sorted): walked side by
            // side, each key is compared once instead of looked up.
            let mut rest = d.iter().peekable();
            for (k, v) in o {
                while rest.next_if(|(dk, _)| dk.as_str() < k.as_str()).is_some() {}
                let dv = rest.next_if(|(dk, _)| *dk == k).map(|(_, dv)| dv);
                if dv.is_none() && v.is_null() {
                    continue;
                }
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(k);
                match dv {
                    Some(dv) => unknown_fields_at(v, dv, path, out),
                    None => out.push(path.clone()),
                }
                path.truncate(len);
            }
        }
        (Value::Array(o), Value::Array(d)) if o.len() == d.len() => {
            for (i, (ov, dv)) in o.iter().zip(d).enumerate() {
                let _ = write!(path, "[{i}]");
                unknown_fields_at(ov, dv, path, out);
                path.truncate(len);
            }
        }
        // An object whose typed form keeps no structure (e.g. a free-form map decoded to a
        // different shape), scalars, and arrays whose lengths differ: nothing to compare.
        _ => {}
    }
}

/// Creation-time fields kube-apiserver fills for some built-ins (Service cluster IPs, Job
/// selectors).
fn prepare_builtin_create(kind: BuiltinKind, obj: &mut Value, uid: &str, name: &str) {
    match kind {
        BuiltinKind::Service => {
            let ty = obj["spec"]["type"].as_str().unwrap_or("ClusterIP").to_owned();
            if ty != "ExternalName" && obj["spec"]["clusterIP"].as_str().is_none_or(str::is_empty) {
                let bytes = uid.as_bytes();
                let a = bytes
                    .iter()
                    .fold(0u32, |acc, b| acc.wrapping_mul(31).wrapping_add(*b as u32));
                let ip = format!("10.96.{}.{}", (a >> 8) % 256, (a % 254) + 1);
                obj["spec"]["clusterIP"] = json!(ip);
                obj["spec"]["clusterIPs"] = json!([ip]);
            } else if let Some(ip) = obj["spec"]["clusterIP"].as_str().map(str::to_owned)
                && obj["spec"].get("clusterIPs").is_none()
                && ty != "ExternalName"
            {
                obj["spec"]["clusterIPs"] = json!([ip]);
            }
        }
        BuiltinKind::Job
            if obj["spec"]["manualSelector"].as_bool() != Some(true)
                && obj["spec"].get("selector").is_none_or(Value::is_null) =>
        {
            obj["spec"]["selector"] = json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}});
            let labels = &mut obj["spec"]["template"]["metadata"]["labels"];
            if !labels.is_object() {
                *labels = json!({});
            }
            for (k, v) in [
                ("batch.kubernetes.io/controller-uid", uid),
                ("batch.kubernetes.io/job-name", name),
                ("controller-uid", uid),
                ("job-name", name),
            ] {
                labels[k] = json!(v);
            }
        }
        _ => {}
    }
}

/// A decoded stored object in the form `def` serves it: an Event in events.k8s.io/v1's shape,
/// a custom resource of a CRD with several versions with `def`'s apiVersion.
fn as_served(def: &ResourceDef, mut obj: Value) -> Value {
    match &def.flavor {
        Flavor::Builtin(BuiltinKind::EventV1) => obj = builtin::event_core_to_v1(obj),
        Flavor::Custom(info) if info.multi_version => obj["apiVersion"] = json!(def.api_version()),
        _ => {}
    }
    obj
}

/// Whether a patch of `def` can be applied to the stored object decoded as a
/// [`objects::Split`]: a merge patch through `/status` of a custom resource that names no
/// field but [`objects::STATUS_WRITE_FIELDS`] (what the services send to report a Work's or a
/// binding's status). Other fields of its result would be dropped by the subresource's
/// isolation anyway; a JSON or strategic patch could fail on them, so it reads the whole
/// object. Not for a dry run, whose answer is the object built, not the bytes stored.
fn status_only_patch(def: &ResourceDef, patch: &Patch, sub: Subresource, opts: &WriteOptions) -> bool {
    sub == Subresource::Status
        && def.status
        && def.is_custom()
        && !opts.dry_run
        && match patch {
            Patch::Merge(Value::Object(fields)) => fields
                .keys()
                .all(|field| objects::STATUS_WRITE_FIELDS.contains(&field.as_str())),
            _ => false,
        }
}

/// The top-level fields of a built-in object that a write through `/status` decodes
/// ([`decode_builtin`]).
const STATUS_DECODED_FIELDS: [&str; 3] = ["apiVersion", "kind", "status"];

/// The typed round trip of a built-in kind's `body` ([`BuiltinKind::decode`]: unknown fields
/// dropped, malformed ones an error) and the fields it dropped ([`unknown_fields`]).
///
/// A `status_write` (through `/status`, onto a stored object) changes nothing but the status:
/// every other top-level field, `metadata` included, is the stored object's
/// ([`merge_subresource`]; `commit_update_keeping` sets the server's own metadata fields from it
/// too), which went through this round trip when it was written and comes out of it unchanged.
/// Only [`STATUS_DECODED_FIELDS`] are decoded then, as kube-apiserver's status strategies check
/// a status update's status (its metadata is checked by `validate_metadata`); the rest (a
/// Deployment's pod template, and its managedFields, which name every field of it) is set aside
/// and put back as it was, over the empty values a type fills in for required fields it did not
/// see (a CustomResourceDefinition's `spec`). A body whose part does not decode goes through
/// the whole round trip, so an error names the same field as before.
fn decode_builtin(
    kind: BuiltinKind,
    mut body: Value,
    status_write: bool,
) -> Result<(Value, Vec<String>), builtin::DecodeError> {
    if status_write && let Value::Object(fields) = &mut body {
        let (part, mut kept): (serde_json::Map<String, Value>, serde_json::Map<String, Value>) =
            std::mem::take(fields)
                .into_iter()
                .partition(|(field, _)| STATUS_DECODED_FIELDS.contains(&field.as_str()));
        let part = Value::Object(part);
        // A typed value always encodes as an object, so the stored fields always go back.
        if let Ok(mut decoded @ Value::Object(_)) = kind.decode(&part) {
            let mut unknown = Vec::new();
            unknown_fields(&part, &decoded, "", &mut unknown);
            if let Value::Object(decoded_fields) = &mut decoded {
                decoded_fields.append(&mut kept);
            }
            return Ok((decoded, unknown));
        }
        if let Value::Object(part) = part {
            *fields = part;
        }
        fields.append(&mut kept);
    }
    let decoded = kind.decode(&body)?;
    let mut unknown = Vec::new();
    unknown_fields(&body, &decoded, "", &mut unknown);
    Ok((decoded, unknown))
}

/// Status subresource isolation: the main resource keeps the old status; `/status` keeps
/// everything but status from the old object.
fn merge_subresource(def: &ResourceDef, old: &Value, mut body: Value, sub: Subresource) -> Value {
    if !def.status {
        return body;
    }
    match sub {
        Subresource::Main => {
            if let Some(map) = body.as_object_mut() {
                match old.get("status") {
                    Some(s) => {
                        map.insert("status".into(), s.clone());
                    }
                    None => {
                        map.remove("status");
                    }
                }
            }
            body
        }
        Subresource::Status | Subresource::Scale => {
            // The patched or sent object usually differs from the stored one in its status
            // only: then it is the result as it is, without a copy of the stored object.
            if let (Some(old_map), Some(body_map)) = (old.as_object(), body.as_object())
                && same_but(old_map, body_map, &["status"])
            {
                return body;
            }
            let mut new = old.clone();
            match body.as_object_mut().and_then(|m| m.remove("status")) {
                Some(status) => new["status"] = status,
                None => {
                    if let Some(map) = new.as_object_mut() {
                        map.remove("status");
                    }
                }
            }
            // Labels and annotations may change through /status too (kube keeps them for
            // custom resources); keep the old ones for simplicity of isolation.
            let _ = body;
            new
        }
    }
}

fn pointer_of(path: &str) -> String {
    path.trim_start_matches('.')
        .split('.')
        .fold(String::new(), |mut acc, p| {
            acc.push('/');
            acc.push_str(p);
            acc
        })
}

/// The autoscaling/v1 Scale view of an object.
fn scale_view(def: &ResourceDef, obj: &Value) -> ApiResult<Value> {
    let spec = def.scale.as_ref().ok_or_else(ApiError::not_found_path)?;
    let replicas = obj
        .pointer(&pointer_of(&spec.spec_replicas))
        .cloned()
        .unwrap_or(json!(0));
    let status_replicas = obj
        .pointer(&pointer_of(&spec.status_replicas))
        .cloned()
        .unwrap_or(json!(0));
    let selector = match &def.flavor {
        Flavor::Builtin(_) => obj["spec"]["selector"].clone(),
        Flavor::Custom(_) => spec
            .label_selector
            .as_ref()
            .and_then(|p| obj.pointer(&pointer_of(p)).cloned())
            .unwrap_or(Value::Null),
    };
    let selector = match selector {
        Value::String(s) => s,
        Value::Object(_) => format_selector(&selector),
        _ => String::new(),
    };
    let meta = &obj["metadata"];
    let mut scale = json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": meta["name"], "uid": meta["uid"],
            "resourceVersion": meta["resourceVersion"], "creationTimestamp": meta["creationTimestamp"],
        },
        "spec": {"replicas": replicas},
        "status": {"replicas": status_replicas},
    });
    if let Some(ns) = meta.get("namespace") {
        scale["metadata"]["namespace"] = ns.clone();
    }
    if !selector.is_empty() {
        scale["status"]["selector"] = json!(selector);
    }
    Ok(scale)
}

/// `metav1.FormatLabelSelector`: a LabelSelector as a selector string.
pub fn format_selector(sel: &Value) -> String {
    let mut parts = Vec::new();
    if let Some(m) = sel["matchLabels"].as_object() {
        for (k, v) in m {
            parts.push(format!("{k}={}", v.as_str().unwrap_or("")));
        }
    }
    if let Some(exprs) = sel["matchExpressions"].as_array() {
        for e in exprs {
            let key = e["key"].as_str().unwrap_or("");
            let values: Vec<&str> = e["values"]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            match e["operator"].as_str() {
                Some("In") => parts.push(format!("{key} in ({})", values.join(","))),
                Some("NotIn") => parts.push(format!("{key} notin ({})", values.join(","))),
                Some("Exists") => parts.push(key.to_owned()),
                Some("DoesNotExist") => parts.push(format!("!{key}")),
                _ => {}
            }
        }
    }
    parts.join(",")
}

fn apply_scale(def: &ResourceDef, old: &Value, scale: &Value) -> ApiResult<Value> {
    let spec = def.scale.as_ref().ok_or_else(ApiError::not_found_path)?;
    let name = objects::meta_str(old, "name").unwrap_or_default();
    let replicas = scale["spec"]["replicas"].as_i64().ok_or_else(|| {
        ApiError::invalid(
            "autoscaling",
            "Scale",
            name,
            vec![Cause::required("spec.replicas", "")],
        )
    })?;
    if replicas < 0 {
        return Err(ApiError::invalid(
            "autoscaling",
            "Scale",
            name,
            vec![Cause::invalid(
                "spec.replicas",
                &json!(replicas),
                "must be greater than or equal to 0",
            )],
        ));
    }
    let mut new = old.clone();
    let pointer = pointer_of(&spec.spec_replicas);
    let mut cur = &mut new;
    let parts: Vec<&str> = pointer.trim_start_matches('/').split('/').collect();
    for (i, p) in parts.iter().enumerate() {
        if !cur.is_object() {
            *cur = json!({});
        }
        if i == parts.len() - 1 {
            cur[*p] = json!(replicas);
            break;
        }
        cur = &mut cur[*p];
    }
    Ok(new)
}

/// Applies a JSON, merge or strategic patch to `current`.
fn apply_patch(
    def: &ResourceDef,
    current: &Value,
    patch: &Patch,
    name: &str,
    scale: bool,
) -> ApiResult<Value> {
    let result = match patch {
        Patch::Json(ops) => flotilla_patch::json_patch(current, ops),
        Patch::Merge(p) => flotilla_patch::merge_patch(current, p),
        Patch::Strategic(p) => {
            if def.is_custom() && !scale {
                return Err(ApiError::unsupported_media_type(
                    "application/strategic-merge-patch+json (strategic merge patch is not supported for custom resources; use a JSON merge patch)",
                ));
            }
            if scale {
                flotilla_patch::strategic_merge_patch(
                    current,
                    p,
                    flotilla_patch::builtin::shape_ref("autoscaling/v1", "Scale"),
                )
            } else {
                with_shape(def, |shape| {
                    flotilla_patch::strategic_merge_patch(current, p, shape)
                })
            }
        }
        Patch::Apply(_) => return Err(ApiError::internal("server-side apply is not a plain patch")),
    };
    result.map_err(|e| patch_error(def, name, e))
}

fn patch_rejected(def: &ResourceDef, name: &str, why: &str) -> ApiError {
    let mut e = ApiError::invalid(
        &def.group,
        &def.kind,
        name,
        vec![Cause::invalid("", &Value::Null, why)],
    );
    e.message = format!("the server rejected our request due to an error in our request: {why}");
    e
}

/// The shape of a resource's objects (strategic merge patch, field management).
fn with_shape<R>(def: &ResourceDef, f: impl FnOnce(&flotilla_patch::Shape) -> R) -> R {
    match &def.flavor {
        Flavor::Custom(info) => f(&info.shape),
        Flavor::Builtin(_) => f(flotilla_patch::builtin::shape_ref(&def.api_version(), &def.kind)),
    }
}

/// Updates `metadata.managedFields` for a non-apply write by `opts.manager()`; the top-level
/// fields `unchanged` are equal in `old` and `new` and left out of the comparison.
fn track_fields(
    def: &ResourceDef,
    old: Option<&mut Value>,
    new: Value,
    opts: &WriteOptions,
    sub: Option<&str>,
    unchanged: &[&str],
) -> Value {
    if matches!(def.flavor, Flavor::Builtin(BuiltinKind::EventV1)) {
        // Stored in core/v1 form; the events.k8s.io view has a different shape.
        return new;
    }
    let manager = opts.manager();
    let now = objects::now_rfc3339();
    let api_version = def.api_version();
    let update = flotilla_patch::managed::UpdateOptions {
        manager: &manager,
        api_version: &api_version,
        subresource: sub,
        now: &now,
    };
    let filter = field_filter(def, sub);
    with_shape(def, |shape| {
        flotilla_patch::managed::track_update_in_place_except(old, new, shape, &update, &filter, unchanged)
    })
}

/// The fields a write through subresource `sub` may own: all of them for a custom resource
/// without a status subresource, else those of that subresource.
fn field_filter(def: &ResourceDef, sub: Option<&str>) -> flotilla_patch::managed::Filter {
    if def.is_custom() && !def.status {
        flotilla_patch::managed::Filter::All
    } else {
        flotilla_patch::managed::Filter::for_subresource(sub)
    }
}

/// What an update of `old` to `new` changes outside `metadata`, compared once per write: the
/// generation, both no-op checks and the field tracking read it, so a write of a Work's status
/// walks its manifests once rather than once for each of them.
struct Changes {
    /// Top-level fields other than `metadata` that differ (in one object only, or unequal).
    changed: Vec<String>,
    /// Top-level fields other than `metadata` equal in both.
    unchanged: Vec<String>,
    /// `old` and `new` are not both JSON objects and differ.
    differ_whole: bool,
}

impl Changes {
    fn of(old: &Value, new: &Value) -> Changes {
        let (Some(old), Some(new)) = (old.as_object(), new.as_object()) else {
            return Changes {
                changed: Vec::new(),
                unchanged: Vec::new(),
                differ_whole: old != new,
            };
        };
        let (mut changed, mut unchanged) = (Vec::new(), Vec::new());
        for (field, value) in old {
            if field == "metadata" {
                continue;
            }
            if new.get(field) == Some(value) {
                unchanged.push(field.clone());
            } else {
                changed.push(field.clone());
            }
        }
        changed.extend(
            new.keys()
                .filter(|field| *field != "metadata" && !old.contains_key(*field))
                .cloned(),
        );
        Changes {
            changed,
            unchanged,
            differ_whole: false,
        }
    }

    /// Whether the update changes more than metadata and status (and the type fields): what
    /// moves `metadata.generation`.
    fn spec_changed(&self) -> bool {
        const NOT_SPEC: [&str; 3] = ["status", "apiVersion", "kind"];
        self.differ_whole
            || self
                .changed
                .iter()
                .any(|field| !NOT_SPEC.contains(&field.as_str()))
    }

    /// Whether writing `new` over `old` would store nothing new: equal but for
    /// `metadata.resourceVersion` and the `time` of each `metadata.managedFields` entry (a write
    /// that changes only those is a no-op, as in kube-apiserver: the object keeps its
    /// resourceVersion). Only `metadata` is compared here: the rest was when these `Changes`
    /// were taken, and metadata is all the write path changes after that.
    fn same_but_managed_times(&self, old: &Value, new: &Value) -> bool {
        if self.differ_whole || !self.changed.is_empty() {
            return false;
        }
        let (old_meta, new_meta) = (old.get("metadata"), new.get("metadata"));
        let (Some(old_meta), Some(new_meta)) = (
            old_meta.and_then(Value::as_object),
            new_meta.and_then(Value::as_object),
        ) else {
            return old_meta == new_meta;
        };
        if !same_but(old_meta, new_meta, &["resourceVersion", "managedFields"]) {
            return false;
        }
        match (old_meta.get("managedFields"), new_meta.get("managedFields")) {
            (Some(Value::Array(old_entries)), Some(Value::Array(new_entries))) => {
                old_entries.len() == new_entries.len()
                    && old_entries.iter().zip(new_entries).all(|(o, n)| {
                        match (o.as_object(), n.as_object()) {
                            (Some(o), Some(n)) => same_but(o, n, &["time"]),
                            _ => o == n,
                        }
                    })
            }
            (old_entries, new_entries) => old_entries == new_entries,
        }
    }
}

/// Whether maps `a` and `b` hold the same entries once the keys `ignored` are left out.
fn same_but(
    a: &serde_json::Map<String, Value>,
    b: &serde_json::Map<String, Value>,
    ignored: &[&str],
) -> bool {
    let kept = |(key, _): &(&String, &Value)| !ignored.contains(&key.as_str());
    a.iter().filter(kept).count() == b.iter().filter(kept).count()
        && a.iter()
            .filter(kept)
            .all(|(key, value)| b.get(key) == Some(value))
}

fn apply_error(def: &ResourceDef, name: &str, e: flotilla_patch::ApplyError) -> ApiError {
    match &e {
        flotilla_patch::ApplyError::Conflicts(conflicts) => {
            let causes = conflicts
                .iter()
                .map(|c| Cause::new("FieldManagerConflict", c.field.clone(), c.cause_message()))
                .collect();
            ApiError::conflict_message(&def.group, &def.plural, name, e.message(), causes)
        }
        flotilla_patch::ApplyError::Invalid(m) => match e.http_status() {
            400 => ApiError::bad_request(m.clone()),
            _ => ApiError::internal(m.clone()),
        },
    }
}

fn patch_error(def: &ResourceDef, name: &str, e: flotilla_patch::PatchError) -> ApiError {
    match e.http_status() {
        400 => ApiError::bad_request(e.message().to_owned()),
        413 => {
            let mut err = ApiError::too_large(MAX_BODY_BYTES);
            err.message = e.message().to_owned();
            err
        }
        422 => patch_rejected(def, name, e.message()),
        _ => ApiError::internal(e.message().to_owned()),
    }
}

/// The resourceVersion a patch pins (sets to something other than what the object it was
/// applied to already had); `None` when the patch leaves it alone.
fn pinned_revision(before: &Value, patched: &Value) -> ApiResult<Option<u64>> {
    let rv = objects::meta_str(patched, "resourceVersion").filter(|rv| !rv.is_empty());
    if rv.is_none() || rv == objects::meta_str(before, "resourceVersion") {
        return Ok(None);
    }
    rv.map(parse_rv).transpose()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn same_but_managed_times(old: &Value, new: &Value) -> bool {
        Changes::of(old, new).same_but_managed_times(old, new)
    }

    fn spec_changed(old: &Value, new: &Value) -> bool {
        Changes::of(old, new).spec_changed()
    }

    #[test]
    fn only_merge_patches_of_status_fields_through_status_keep_the_rest_as_bytes() {
        let crd = json!({
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"kind": "Widget", "plural": "widgets"},
                "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}}}]},
            "status": {"conditions": [{"type": "Established", "status": "True"}]}
        });
        let custom = crate::crd::definitions(&crd).pop().unwrap();
        assert!(custom.status && custom.is_custom());
        let mut no_status = custom.clone();
        no_status.status = false;
        let deployments = builtin::definitions()
            .into_iter()
            .find(|d| d.group == "apps" && d.plural == "deployments")
            .unwrap();
        let opts = WriteOptions::default();
        let dry_run = WriteOptions {
            dry_run: true,
            ..WriteOptions::default()
        };
        let status =
            Patch::Merge(json!({"metadata": {"resourceVersion": "3"}, "status": {"phase": "Ready"}}));
        let typed = Patch::Merge(json!({"apiVersion": "example.com/v1", "kind": "Widget", "status": {}}));
        assert!(status_only_patch(&custom, &status, Subresource::Status, &opts));
        assert!(status_only_patch(&custom, &typed, Subresource::Status, &opts));
        for (def, patch, sub, opts, why) in [
            (&custom, &status, Subresource::Main, &opts, "the main resource"),
            (
                &custom,
                &status,
                Subresource::Scale,
                &opts,
                "the scale subresource",
            ),
            (&custom, &status, Subresource::Status, &dry_run, "a dry run"),
            (
                &no_status,
                &status,
                Subresource::Status,
                &opts,
                "no status subresource",
            ),
            (&deployments, &status, Subresource::Status, &opts, "a built-in"),
            (
                &custom,
                &Patch::Merge(json!({"status": {}, "spec": {"size": 1}})),
                Subresource::Status,
                &opts,
                "a merge patch naming the spec",
            ),
            (
                &custom,
                &Patch::Merge(json!(null)),
                Subresource::Status,
                &opts,
                "a patch that is no object",
            ),
            (
                &custom,
                &Patch::Json(json!([{"op": "add", "path": "/status/phase", "value": "x"}])),
                Subresource::Status,
                &opts,
                "a JSON patch",
            ),
        ] {
            assert!(!status_only_patch(def, patch, sub, opts), "{why}");
        }
    }

    fn stored() -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {
                "name": "web", "resourceVersion": "7", "generation": 2,
                "managedFields": [
                    {"manager": "kubectl", "operation": "Apply", "time": "2026-11-29T00:00:00Z",
                     "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:replicas": {}}}},
                    {"manager": "simulator", "operation": "Update", "subresource": "status",
                     "time": "2026-11-29T00:00:01Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {}}},
                ],
            },
            "spec": {"replicas": 2},
            "status": {"readyReplicas": 2},
        })
    }

    #[test]
    fn a_write_that_moves_only_resource_version_and_managed_times_stores_nothing_new() {
        let old = stored();
        let mut new = old.clone();
        objects::metadata_mut(&mut new).unwrap().remove("resourceVersion");
        assert!(same_but_managed_times(&old, &new));
        new["metadata"]["managedFields"][0]["time"] = json!("2026-11-29T01:00:00Z");
        new["metadata"]["managedFields"][1]
            .as_object_mut()
            .unwrap()
            .remove("time");
        assert!(same_but_managed_times(&old, &new), "times are not content");
        assert!(same_but_managed_times(&new, &old), "symmetric");
    }

    #[test]
    fn any_other_difference_is_a_change() {
        let old = stored();
        type Change = (&'static str, fn(&mut Value));
        let changes: [Change; 9] = [
            ("spec", |v| v["spec"]["replicas"] = json!(3)),
            ("status", |v| v["status"]["readyReplicas"] = json!(1)),
            ("a new top-level field", |v| v["data"] = json!({})),
            ("a removed top-level field", |v| {
                v.as_object_mut().unwrap().remove("status");
            }),
            ("a label", |v| v["metadata"]["labels"] = json!({"a": "b"})),
            ("an entry's manager", |v| {
                v["metadata"]["managedFields"][0]["manager"] = json!("helm")
            }),
            ("an entry's fields", |v| {
                v["metadata"]["managedFields"][1]["fieldsV1"] = json!({})
            }),
            ("an entry fewer", |v| {
                v["metadata"]["managedFields"].as_array_mut().unwrap().pop();
            }),
            ("no managedFields where there were some", |v| {
                objects::metadata_mut(v).unwrap().remove("managedFields");
            }),
        ];
        for (what, change) in changes {
            let mut new = old.clone();
            change(&mut new);
            assert!(!same_but_managed_times(&old, &new), "{what}");
            assert!(!same_but_managed_times(&new, &old), "{what}, reversed");
        }
        let mut empty = old.clone();
        empty["metadata"]["managedFields"] = json!([]);
        let mut missing = old.clone();
        objects::metadata_mut(&mut missing)
            .unwrap()
            .remove("managedFields");
        assert!(!same_but_managed_times(&empty, &missing), "[] is not absent");
        assert!(same_but_managed_times(&json!("x"), &json!("x")));
        assert!(!same_but_managed_times(
            &json!({"metadata": 1}),
            &json!({"metadata": 2})
        ));
    }

    #[test]
    fn changes_name_the_top_level_fields_that_differ_and_those_that_do_not() {
        let old = stored();
        let mut new = old.clone();
        new["status"]["readyReplicas"] = json!(1);
        new["data"] = json!({});
        new["metadata"]["labels"] = json!({"a": "b"});
        let changes = Changes::of(&old, &new);
        assert_eq!(
            changes.changed,
            ["status", "data"],
            "metadata is compared on its own"
        );
        assert_eq!(changes.unchanged, ["apiVersion", "kind", "spec"]);
        let mut removed = old.clone();
        removed.as_object_mut().unwrap().remove("spec");
        assert_eq!(Changes::of(&old, &removed).changed, ["spec"]);
        assert_eq!(Changes::of(&removed, &old).changed, ["spec"], "added");
    }

    #[test]
    fn generation_moves_with_everything_but_metadata_status_and_type() {
        let old = stored();
        let mut new = old.clone();
        new["metadata"]["labels"] = json!({"a": "b"});
        new["status"] = json!({});
        new["apiVersion"] = json!("apps/v1beta2");
        new["kind"] = json!("Other");
        assert!(!spec_changed(&old, &new));
        new["spec"]["paused"] = json!(true);
        assert!(spec_changed(&old, &new));
        let mut data = old.clone();
        data["data"] = json!({"k": "v"});
        assert!(spec_changed(&old, &data), "any field outside metadata and status");
        assert!(spec_changed(&data, &old), "removed too");
        assert!(!spec_changed(&json!(1), &json!(1)));
    }

    #[test]
    fn only_a_resource_version_set_by_the_patch_pins_it() {
        let before = json!({"metadata": {"name": "web", "resourceVersion": "7"}});
        // A patch that does not mention resourceVersion inherits the current one: not pinned,
        // so a write race is retried instead of answered with 409.
        let untouched = json!({"metadata": {"name": "web", "resourceVersion": "7"}, "spec": {}});
        assert_eq!(pinned_revision(&before, &untouched).unwrap(), None);
        let pinned = json!({"metadata": {"name": "web", "resourceVersion": "5"}});
        assert_eq!(pinned_revision(&before, &pinned).unwrap(), Some(5));
        let cleared = json!({"metadata": {"name": "web", "resourceVersion": ""}});
        assert_eq!(pinned_revision(&before, &cleared).unwrap(), None);
        let garbage = json!({"metadata": {"name": "web", "resourceVersion": "x"}});
        assert!(pinned_revision(&before, &garbage).is_err());
    }

    #[test]
    fn continue_tokens_round_trip_and_reject_garbage() {
        let t = encode_continue(42, "ns/name");
        assert_eq!(decode_continue(&t).unwrap(), (42, "ns/name".to_string()));
        assert!(decode_continue("!!!").is_err());
        let forged = base64::engine::general_purpose::URL_SAFE
            .encode(r#"{"v":"meta.k8s.io/v1","rv":1,"start":"../x"}"#);
        assert!(decode_continue(&forged).is_err());
    }

    #[test]
    fn unknown_field_paths() {
        let original = json!({"spec": {"a": 1, "b": {"c": 2, "z": 3}, "n": null, "l": [{"x": 1, "y": 2}]}});
        let decoded = json!({"spec": {"a": 1, "b": {"c": 2}, "l": [{"x": 1}]}});
        let mut out = Vec::new();
        unknown_fields(&original, &decoded, "", &mut out);
        assert_eq!(out, vec!["spec.b.z", "spec.l[0].y"]);

        // Under a starting path, in nested lists, after siblings that lost nothing; lists
        // whose lengths differ and objects the typed form reshaped are not compared.
        let original = json!({"a": [[{"k": 1}], [{"k": 2, "lost": true}]], "b": {"q": 1},
            "c": [1, 2], "d": {"free": {"x": 1}}, "z": 0});
        let decoded = json!({"a": [[{"k": 1}], [{"k": 2}]], "b": {"q": 1}, "c": [1], "d": "text"});
        let mut out = Vec::new();
        unknown_fields(&original, &decoded, "spec", &mut out);
        assert_eq!(out, vec!["spec.a[1][0].lost", "spec.z"]);

        // Keys only the typed form has (defaults), before, between and after the original's,
        // and lost keys at both ends.
        let original = json!({"0": 1, "b": 2, "bb": null, "d": {"y": 1}, "zz": 3});
        let decoded = json!({"a": 0, "b": 2, "c": 0, "d": {"x": 0, "y": 1}, "e": 0});
        let mut out = Vec::new();
        unknown_fields(&original, &decoded, "", &mut out);
        assert_eq!(out, vec!["0", "zz"]);
    }

    /// A Deployment as the store holds it: through the typed round trip, managedFields and all.
    fn stored_deployment() -> Value {
        let written = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default", "uid": "u-1", "generation": 2,
                "creationTimestamp": "2026-12-07T00:00:00Z", "labels": {"app": "web"},
                "managedFields": [{"manager": "flotilla", "operation": "Apply", "apiVersion": "apps/v1",
                    "time": "2026-12-07T00:00:00Z", "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:spec": {"f:replicas": {}}}}]},
            "spec": {
                "replicas": 3,
                "selector": {"matchLabels": {"app": "web"}},
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "nginx", "image": "nginx:1.25",
                        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                        "ports": [{"containerPort": 80, "protocol": "TCP"}]}]}
                }
            },
            "status": {"observedGeneration": 1, "replicas": 3}
        });
        BuiltinKind::Deployment.decode(&written).unwrap()
    }

    #[test]
    fn a_status_write_decodes_what_the_whole_round_trip_decodes() {
        let reported = |status: Value| {
            let mut new = stored_deployment();
            new["status"] = status;
            new
        };
        let cases = [
            // What a controller reports.
            json!({"observedGeneration": 2, "replicas": 3, "readyReplicas": 3, "availableReplicas": 3,
                "conditions": [{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
                    "lastTransitionTime": "2026-12-07T00:00:01Z", "lastUpdateTime": "2026-12-07T00:00:01Z"}]}),
            // Unknown fields, at the top of the status and deep in it.
            json!({"replicas": 3, "bogus": 1, "conditions": [{"type": "Available", "status": "True", "extra": "x"}]}),
            // Nulls and an empty status.
            json!({"replicas": null, "readyReplicas": 1}),
            json!({}),
        ];
        for status in cases {
            let whole = decode_builtin(BuiltinKind::Deployment, reported(status.clone()), false).unwrap();
            let status_only =
                decode_builtin(BuiltinKind::Deployment, reported(status.clone()), true).unwrap();
            assert_eq!(status_only, whole, "status {status}");
        }
        let (_, unknown) = decode_builtin(
            BuiltinKind::Deployment,
            reported(
                json!({"bogus": 1, "conditions": [{"type": "Available", "status": "True", "extra": "x"}]}),
            ),
            true,
        )
        .unwrap();
        assert_eq!(unknown, ["status.bogus", "status.conditions[0].extra"]);

        // A status that does not decode is named as the whole round trip names it.
        let bad = reported(json!({"replicas": "three"}));
        let whole = decode_builtin(BuiltinKind::Deployment, bad.clone(), false).unwrap_err();
        let status_only = decode_builtin(BuiltinKind::Deployment, bad, true).unwrap_err();
        assert_eq!(status_only, whole);
        assert_eq!(status_only.field, "status.replicas");
    }

    #[test]
    fn a_status_write_of_a_kind_with_a_required_spec_keeps_the_stored_spec() {
        // A CustomResourceDefinition's type requires `spec`: decoded without it, it fills in an
        // empty one, which the stored spec set aside replaces.
        let crd = json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"kind": "Widget", "plural": "widgets"},
                "versions": [{"name": "v1", "served": true, "storage": true}]},
            "status": {"conditions": [{"type": "Established", "status": "True", "bogus": 1}]}
        });
        let kind = BuiltinKind::CustomResourceDefinition;
        let stripped = json!({"apiVersion": crd["apiVersion"], "kind": crd["kind"], "metadata": crd["metadata"], "status": crd["status"]});
        assert_eq!(
            kind.decode(&stripped).unwrap()["spec"]["group"],
            "",
            "an empty spec is filled in"
        );
        let whole = decode_builtin(kind, crd.clone(), false).unwrap();
        assert_eq!(decode_builtin(kind, crd, true).unwrap(), whole);
        assert_eq!(whole.0["spec"]["group"], "example.com");
        assert_eq!(whole.1, ["status.conditions[0].bogus"]);
    }

    #[test]
    fn selectors_format_like_kube() {
        let sel = json!({"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "env", "operator": "In", "values": ["a", "b"]}]});
        assert_eq!(format_selector(&sel), "app=web,env in (a,b)");
    }
}
