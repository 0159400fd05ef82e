//! Server-side apply and field ownership (`metadata.managedFields`), following
//! sigs.k8s.io/structured-merge-diff (`merge.Updater`) and the managers kube-apiserver stacks
//! around it (k8s.io/apimachinery `managedfields/internal`):
//!
//! - strip-meta: `apiVersion`, `kind`, `metadata` and its server-owned fields (`name`,
//!   `namespace`, `uid`, `resourceVersion`, `generation`, `creationTimestamp`, `selfLink`,
//!   `managedFields`, ...) are never owned;
//! - time: an entry's `time` is set when its operation changed the object;
//! - manager identity: one entry per (manager, operation, subresource), plus API version for
//!   updates;
//! - at most ten update entries: the oldest are merged into `ancient-changes`;
//! - objects without managedFields: the first apply attributes the existing fields to
//!   `before-first-apply`; updates of such objects (other than creates) are not tracked;
//! - `kubectl` (the default manager of `kubectl apply --server-side`) may take over fields from
//!   client-side apply without a conflict when the last-applied annotation shows the user set
//!   them, and keeps that annotation in sync.
//!
//! Fields outside what a request may change are not tracked: `status` for the main resource,
//! `spec` for `/status`, everything but `spec.replicas` for `/scale` (see [`Filter`]).
//!
//! All managers' sets are compared as if they were at the same API version: objects are not
//! converted between versions.

mod entries;
mod fieldset;
mod typed;
mod value;

use std::sync::LazyLock;

use serde_json::{Map, Value, json};

pub use fieldset::{FieldSet, PathElement, path_string};

use entries::{Managed, ManagerKey, Operation, VersionedSet};

use crate::error::PatchError;
use crate::gofmt::{go_json, go_quote};
use crate::shape::Shape;
use crate::{ApplyError, Conflict};

/// The annotation client-side `kubectl apply` keeps its last configuration in.
pub const LAST_APPLIED_ANNOTATION: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// kube-apiserver's cap on update entries before old ones are merged.
pub const MAX_UPDATE_MANAGERS: usize = 10;

/// Options of a server-side apply request.
#[derive(Debug, Clone, Copy)]
pub struct ApplyOptions<'a> {
    /// `fieldManager` of the request (kubectl's default is `kubectl`).
    pub manager: &'a str,
    /// `force=true`: take over conflicting fields.
    pub force: bool,
    /// The request's group/version (`apps/v1`, `v1`); the applied object must use it.
    pub api_version: &'a str,
    /// The subresource applied to (`status`, `scale`), if any.
    pub subresource: Option<&'a str>,
    /// The request time, RFC 3339.
    pub now: &'a str,
}

/// Options of a create, update or non-apply patch request.
#[derive(Debug, Clone, Copy)]
pub struct UpdateOptions<'a> {
    /// `fieldManager` of the request, or the name derived from the user agent
    /// (`kubectl-client-side-apply`, `kubectl-edit`, ...).
    pub manager: &'a str,
    /// The request's group/version. For `/scale` pass the parent resource's version: the entry
    /// records it, as kube-apiserver's scale handler does.
    pub api_version: &'a str,
    /// The subresource written (`status`, `scale`), if any.
    pub subresource: Option<&'a str>,
    /// The request time, RFC 3339.
    pub now: &'a str,
}

/// Which changed fields a request gets to own (kube-apiserver's reset-fields filters).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Filter {
    /// Track every field.
    All,
    /// Track everything except these paths and what is below them.
    Exclude(FieldSet),
    /// Track only these paths and what is below them.
    Include(FieldSet),
}

impl Filter {
    /// The filter kube-apiserver uses for a request to `subresource`: the main resource does
    /// not own `status`, `/status` does not own `spec`, `/scale` owns only `spec.replicas`,
    /// other subresources own what they change.
    ///
    /// Custom resources without a status subresource own their `status` on the main resource:
    /// use [`Filter::All`] for them.
    pub fn for_subresource(subresource: Option<&str>) -> Filter {
        let field = |names: &[&str]| {
            let path: Vec<PathElement> = names.iter().map(|n| PathElement::Field(n.to_string())).collect();
            FieldSet::from_paths([path.as_slice()])
        };
        match subresource {
            None => Filter::Exclude(field(&["status"])),
            Some("status") => Filter::Exclude(field(&["spec"])),
            Some("scale") => Filter::Include(field(&["spec", "replicas"])),
            Some(_) => Filter::All,
        }
    }

    /// The part of `set` this filter keeps.
    pub fn apply(&self, set: &FieldSet) -> FieldSet {
        self.apply_to(set.clone())
    }

    /// [`Filter::apply`] to a set the caller gives up: nothing is copied but for
    /// [`Filter::Include`].
    pub fn apply_to(&self, mut set: FieldSet) -> FieldSet {
        match self {
            Filter::All => set,
            Filter::Exclude(excluded) => {
                set.recursive_difference_with(excluded);
                set
            }
            Filter::Include(included) => set.filter_include(included),
        }
    }
}

/// The manager name kube-apiserver records for a request: the `fieldManager` parameter if set,
/// else the user agent up to its first `/` (`kubectl/v1.30.0 (linux/amd64)` gives `kubectl`),
/// without unprintable characters and cut at 128 characters.
pub fn manager_or_user_agent(field_manager: Option<&str>, user_agent: &str) -> String {
    if let Some(m) = field_manager.filter(|m| !m.is_empty()) {
        return m.to_string();
    }
    let prefix = user_agent.split('/').next().unwrap_or("");
    let mut out = String::new();
    for c in prefix.chars().filter(|c| !c.is_control()) {
        if out.len() >= 128 {
            break;
        }
        out.push(c);
    }
    out
}

/// Server-side apply: merge `applied` (the user's configuration) into `live` (`None` creates),
/// update `metadata.managedFields`, and fail with [`ApplyError::Conflicts`] when the
/// configuration changes a field another manager owns (unless `force`).
///
/// Fields the manager applied before but leaves out now are removed from the object unless
/// another manager owns them. Server-owned metadata is kept from `live`. `null` members are
/// dropped from the result, as decoding into the Go type does.
pub fn apply(
    live: Option<&Value>,
    applied: &Value,
    shape: &Shape,
    opts: &ApplyOptions,
) -> Result<Value, ApplyError> {
    apply_with_filter(
        live,
        applied,
        shape,
        opts,
        &Filter::for_subresource(opts.subresource),
    )
}

/// Field tracking for create, update and non-apply patch requests: returns `new` with
/// `metadata.managedFields` updated so that `opts.manager` (operation `Update`) owns every field
/// it changed or added; those fields are taken from other managers, and removed fields vanish
/// from every entry.
///
/// As in kube-apiserver, managedFields sent in `new` replace the live ones (an empty list or a
/// list of one empty entry clears them), except for subresources; an existing object without
/// managedFields is not tracked; and if the objects do not fit `shape`, `new` keeps the live
/// managedFields instead of failing the request.
pub fn track_update(
    old: Option<&Value>,
    new: &Value,
    shape: &Shape,
    opts: &UpdateOptions,
) -> Result<Value, PatchError> {
    track_update_with_filter(old, new, shape, opts, &Filter::for_subresource(opts.subresource))
}

struct Ctx<'a> {
    shape: &'a Shape,
    filter: &'a Filter,
    api_version: &'a str,
    subresource: &'a str,
    now: String,
    /// kube-apiserver's scale handler does not refresh entry times.
    keep_time: bool,
}

impl Ctx<'_> {
    fn new<'a>(
        shape: &'a Shape,
        filter: &'a Filter,
        api_version: &'a str,
        subresource: Option<&'a str>,
        now: &str,
    ) -> Ctx<'a> {
        Ctx {
            shape,
            filter,
            api_version,
            subresource: subresource.unwrap_or(""),
            now: crate::time::normalize(now).unwrap_or_else(|| now.to_string()),
            keep_time: subresource == Some("scale"),
        }
    }
}

fn metadata(obj: &Value) -> Option<&Map<String, Value>> {
    obj.get("metadata").and_then(Value::as_object)
}

fn meta_str<'a>(obj: &'a Value, field: &str) -> &'a str {
    metadata(obj)
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// A copy of `obj` without `metadata.managedFields` (which are never copied).
fn without_managed_fields(obj: &Value) -> Value {
    let Value::Object(map) = obj else {
        return obj.clone();
    };
    let copy = |(key, value): (&String, &Value)| {
        let value = match (key.as_str(), value) {
            ("metadata", Value::Object(meta)) => Value::Object(
                meta.iter()
                    .filter(|(key, _)| *key != "managedFields")
                    .map(|(key, value)| (key.clone(), value.clone()))
                    .collect(),
            ),
            _ => value.clone(),
        };
        (key.clone(), value)
    };
    Value::Object(map.iter().map(copy).collect())
}

fn set_managed_fields(obj: &mut Value, entries: Option<Value>) {
    let Value::Object(root) = obj else {
        return;
    };
    match entries {
        Some(e) => {
            let meta = root
                .entry("metadata")
                .or_insert_with(|| Value::Object(Map::new()));
            if !meta.is_object() {
                *meta = Value::Object(Map::new());
            }
            if let Value::Object(m) = meta {
                m.insert("managedFields".into(), e);
            }
        }
        None => {
            if let Some(m) = root.get_mut("metadata").and_then(Value::as_object_mut) {
                m.remove("managedFields");
            }
        }
    }
}

/// The JSON of `obj`'s kind at its Go zero value, with `apiVersion` and `kind` set (what
/// kube-apiserver compares a create against).
fn zero_baseline(obj: &Value) -> Value {
    let api_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
    let mut zero = crate::builtin::zero_object(api_version, kind).unwrap_or_else(|| json!({}));
    if let Value::Object(m) = &mut zero {
        if !api_version.is_empty() {
            m.insert("apiVersion".into(), Value::String(api_version.into()));
        }
        if !kind.is_empty() {
            m.insert("kind".into(), Value::String(kind.into()));
        }
    }
    zero
}

/// Paths kube-apiserver never records as owned ([`strip_set`]), built once.
static STRIP_SET: LazyLock<FieldSet> = LazyLock::new(strip_set);

/// Paths kube-apiserver never records as owned.
fn strip_set() -> FieldSet {
    let f = |n: &str| PathElement::Field(n.to_string());
    let mut s = FieldSet::new();
    s.insert(&[f("apiVersion")]);
    s.insert(&[f("kind")]);
    s.insert(&[f("metadata")]);
    for field in [
        "name",
        "namespace",
        "creationTimestamp",
        "selfLink",
        "uid",
        "clusterName",
        "generation",
        "managedFields",
        "resourceVersion",
    ] {
        s.insert(&[f("metadata"), f(field)]);
    }
    s
}

/// `stripMetaManager.stripFields` for one manager.
fn strip_meta(fields: &mut std::collections::BTreeMap<ManagerKey, VersionedSet>, key: &ManagerKey) {
    if let Some(vs) = fields.get_mut(key) {
        let set = vs.set.set_mut();
        set.difference_with(&STRIP_SET);
        if set.is_empty() {
            fields.remove(key);
        }
    }
}

type Conflicts = Vec<(ManagerKey, Vec<PathElement>)>;

/// `Updater.update`: take changed fields away from other managers (failing on conflicts unless
/// `force`), remove deleted fields from them, drop empty entries. Returns the fields that
/// changed (modified or added, through the filter).
///
/// The sets are changed in place: a manager's conflict with the change is the part of its set
/// the change touches, and taking that part away is taking the change away
/// (`set - (set ∩ changed) = set - changed`), so the intersections are built only for the
/// error that lists them.
fn smd_update(
    live: &Value,
    new: &Value,
    fields: &mut std::collections::BTreeMap<ManagerKey, VersionedSet>,
    workflow: Option<&ManagerKey>,
    force: bool,
    ctx: &Ctx,
) -> Result<FieldSet, Conflicts> {
    let typed::Comparison {
        removed,
        modified,
        added,
    } = typed::compare(live, new, ctx.shape).filtered(ctx.filter);
    let mut changed = modified;
    changed.union_with(&added);
    // An entry still stored has nothing to lose or conflict on unless it has fields under one
    // of the top-level fields changed or removed; the others are not decoded at all.
    let roots: Vec<String> = changed.root_keys().chain(removed.root_keys()).collect();
    for vs in fields.values_mut() {
        if vs.set.may_touch(&roots) {
            vs.set.set_mut();
        }
    }
    let others = |key: &ManagerKey| Some(key) != workflow;
    let touched = |vs: &VersionedSet| vs.set.decoded().is_some_and(|set| set.intersects(&changed));
    let conflicting = fields.iter().any(|(key, vs)| others(key) && touched(vs));
    if conflicting && !force {
        let mut conflicts: Vec<(ManagerKey, FieldSet)> = fields
            .iter()
            .filter(|(key, vs)| others(key) && touched(vs))
            .filter_map(|(key, vs)| Some((key.clone(), vs.set.decoded()?.intersection(&changed))))
            .collect();
        conflicts.sort_by_key(|(k, _)| k.identifier());
        return Err(conflicts
            .into_iter()
            .flat_map(|(k, set)| set.iter_paths().into_iter().map(move |p| (k.clone(), p)))
            .collect());
    }
    if conflicting || !removed.is_empty() {
        for (key, vs) in fields.iter_mut() {
            let Some(set) = vs.set.decoded_mut().filter(|_| others(key)) else {
                continue;
            };
            if conflicting {
                set.difference_with(&changed);
            }
            if !removed.is_empty() {
                set.difference_with(&removed);
            }
        }
    }
    fields.retain(|_, vs| !vs.set.is_empty());
    Ok(changed)
}

/// `Updater.prune`: remove what the manager applied last time and no longer applies, unless
/// someone else owns it.
fn prune(
    merged: Value,
    fields: &std::collections::BTreeMap<ManagerKey, VersionedSet>,
    last: Option<FieldSet>,
    shape: &Shape,
) -> Value {
    let Some(last) = last.filter(|s| !s.is_empty()) else {
        return merged;
    };
    let ensure = |s: FieldSet| typed::ensure_named_fields_are_members(s, shape);
    let last = ensure(last);
    let pruned = typed::remove_items(&merged, &last, shape);
    // Add back what any manager (including this one's new configuration) owns.
    let mut owned = FieldSet::new();
    for vs in fields.values() {
        match vs.set.decoded() {
            Some(set) => owned.union_with(set),
            None => owned.union_with(&vs.set.clone().into_set()),
        }
    }
    let merged_set = ensure(typed::to_field_set(&merged, shape));
    let mut keep = ensure(typed::to_field_set(&pruned, shape));
    keep.union_with(&ensure(owned));
    let mut drop = merged_set.clone();
    drop.difference_with(&keep);
    let pruned = typed::remove_items(&merged, &drop, shape);
    // Only remove what this manager applied last time; unowned fields it never applied stay.
    let mut drop = merged_set;
    drop.difference_with(&ensure(typed::to_field_set(&pruned, shape)));
    drop.intersection_with(&last);
    typed::remove_items(&merged, &drop, shape)
}

/// buildManagerInfo + managedFieldsUpdater + stripMeta + `Updater.Apply`.
fn apply_layers(
    live: &Value,
    applied: &Value,
    managed: &mut Managed,
    manager: &str,
    force: bool,
    ctx: &Ctx,
) -> Result<Value, Conflicts> {
    let key = ManagerKey::new(
        if manager.is_empty() { "unknown" } else { manager },
        Operation::Apply,
        ctx.api_version,
        ctx.subresource,
    );
    let merged = typed::merge(live, applied, ctx.shape);
    let set = ctx.filter.apply_to(typed::to_field_set(applied, ctx.shape));
    let last = managed
        .fields
        .insert(
            key.clone(),
            VersionedSet {
                set: set.into(),
                api_version: ctx.api_version.to_string(),
                applied: true,
            },
        )
        .map(|previous| previous.set.into_set());
    let new_obj = prune(merged, &managed.fields, last, ctx.shape);
    smd_update(live, &new_obj, &mut managed.fields, Some(&key), force, ctx)?;
    strip_meta(&mut managed.fields, &key);
    if !ctx.keep_time && !value::equals(live, &new_obj) {
        managed.times.insert(key, ctx.now.clone());
    }
    Ok(new_obj)
}

/// capManagers + buildManagerInfo + managedFieldsUpdater + stripMeta + `Updater.Update`.
fn update_layers(live: &Value, new: &Value, managed: &mut Managed, manager: &str, ctx: &Ctx) {
    let key = ManagerKey::new(
        if manager.is_empty() { "unknown" } else { manager },
        Operation::Update,
        ctx.api_version,
        ctx.subresource,
    );
    // The operation is tracked as a fresh manager ("current-operation"), so the manager's own
    // earlier entry loses changed fields like everyone else's, then gets them back.
    // What smd_update returns (the changed fields) has been through the filter already.
    let Ok(mut set) = smd_update(live, new, &mut managed.fields, None, true, ctx) else {
        return;
    };
    set.difference_with(&STRIP_SET);
    if !set.is_empty() {
        let set = match managed.fields.remove(&key) {
            Some(mut previous) => {
                previous.set.set_mut().union_with(&set);
                previous.set
            }
            None => set.into(),
        };
        managed.fields.insert(
            key.clone(),
            VersionedSet {
                set,
                api_version: ctx.api_version.to_string(),
                applied: false,
            },
        );
        if !ctx.keep_time {
            managed.times.insert(key, ctx.now.clone());
        }
    }
    cap_update_managers(managed, MAX_UPDATE_MANAGERS);
}

/// `capManagersManager`: merge the oldest update entries into per-version `ancient-changes`
/// entries until at most `max` update entries remain.
fn cap_update_managers(managed: &mut Managed, max: usize) {
    let mut updaters: Vec<ManagerKey> = managed
        .fields
        .iter()
        .filter(|(_, vs)| !vs.applied)
        .map(|(k, _)| k.clone())
        .collect();
    if updaters.len() <= max {
        return;
    }
    let seconds = |k: &ManagerKey| {
        managed
            .times
            .get(k)
            .and_then(|t| crate::time::parse_rfc3339(t))
            .unwrap_or(0)
    };
    updaters.sort_by(|a, b| {
        seconds(a)
            .cmp(&seconds(b))
            .then_with(|| a.identifier().cmp(&b.identifier()))
    });
    let mut first_of_version: std::collections::BTreeMap<String, ManagerKey> =
        std::collections::BTreeMap::new();
    let mut length = updaters.len();
    for key in updaters {
        if length <= max {
            break;
        }
        let Some(vs) = managed.fields.get(&key).cloned() else {
            continue;
        };
        let time = managed.times.get(&key).cloned();
        let bucket = ManagerKey::new("ancient-changes", Operation::Update, &vs.api_version, "");
        match first_of_version.get(&vs.api_version) {
            Some(first) => {
                if !managed.fields.contains_key(&bucket)
                    && let Some(first_set) = managed.fields.remove(first)
                {
                    managed.fields.insert(bucket.clone(), first_set);
                }
                let bucket_set = managed
                    .fields
                    .get(&bucket)
                    .map(|b| b.set.clone().into_set())
                    .unwrap_or_default();
                managed.fields.insert(
                    bucket.clone(),
                    VersionedSet {
                        set: vs.set.into_set().union(&bucket_set).into(),
                        api_version: vs.api_version.clone(),
                        applied: false,
                    },
                );
                managed.fields.remove(&key);
                length -= 1;
                match time {
                    Some(t) => managed.times.insert(bucket, t),
                    None => managed.times.remove(&bucket),
                };
            }
            None => {
                first_of_version.insert(vs.api_version.clone(), key);
            }
        }
    }
}

fn gvk_string(obj: &Value) -> String {
    let api_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
    let (group, version) = match api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    };
    format!("{group}/{version}, Kind={kind}")
}

fn object_ref(obj: &Value) -> String {
    format!(
        "{}/{}; {}",
        meta_str(obj, "namespace"),
        meta_str(obj, "name"),
        gvk_string(obj)
    )
}

/// Server-side apply with an explicit [`Filter`] (for custom resources without a status
/// subresource, pass [`Filter::All`]).
pub fn apply_with_filter(
    live: Option<&Value>,
    applied: &Value,
    shape: &Shape,
    opts: &ApplyOptions,
    filter: &Filter,
) -> Result<Value, ApplyError> {
    if !applied.is_object() {
        return Err(ApplyError::Invalid(
            "the applied configuration must be a JSON object".into(),
        ));
    }
    let applied_version = applied.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let applied_kind = applied.get("kind").and_then(Value::as_str).unwrap_or("");
    if applied_version.is_empty() || applied_kind.is_empty() {
        return Err(ApplyError::Invalid(format!(
            "invalid object type: {}: the applied configuration must set apiVersion and kind",
            gvk_string(applied)
        )));
    }
    if let Some(live) = live {
        let live_kind = live.get("kind").and_then(Value::as_str).unwrap_or("");
        if !live_kind.is_empty() && live_kind != applied_kind {
            return Err(ApplyError::Invalid(format!(
                "invalid object type: {}",
                gvk_string(applied)
            )));
        }
    }
    if applied_version != opts.api_version {
        return Err(ApplyError::Invalid(format!(
            "Incorrect version specified in apply patch. Specified patch version: {applied_version}, expected: {}",
            opts.api_version
        )));
    }
    if metadata(applied)
        .and_then(|m| m.get("managedFields"))
        .is_some_and(Value::is_array)
    {
        return Err(ApplyError::Invalid("metadata.managedFields must be nil".into()));
    }
    let none = Value::Object(Map::new());
    let live_obj = match live {
        Some(v @ Value::Object(_)) => v,
        Some(_) => {
            return Err(ApplyError::Invalid(
                "the live object must be a JSON object".into(),
            ));
        }
        None => &none,
    };
    let managed = entries::decode(metadata(live_obj).and_then(|m| m.get("managedFields")))
        .map_err(|e| ApplyError::Invalid(format!("failed to decode managed fields: {e}")))?;
    let live_clean = without_managed_fields(live_obj);
    typed::validate(applied, shape, false).map_err(|e| {
        ApplyError::Invalid(format!(
            "failed to create typed patch object ({}): {e}",
            object_ref(applied)
        ))
    })?;
    typed::validate(&live_clean, shape, true).map_err(|e| {
        ApplyError::Invalid(format!(
            "failed to create typed live object ({}): {e}",
            object_ref(applied)
        ))
    })?;

    let ctx = Ctx::new(shape, filter, opts.api_version, opts.subresource, opts.now);
    let run = |force: bool| -> Result<(Value, Managed), Conflicts> {
        let mut managed = managed.clone();
        if managed.fields.is_empty() {
            update_layers(
                &zero_baseline(applied),
                &live_clean,
                &mut managed,
                "before-first-apply",
                &ctx,
            );
        }
        let obj = apply_layers(&live_clean, applied, &mut managed, opts.manager, force, &ctx)?;
        Ok((obj, managed))
    };
    let (mut obj, managed) = match run(opts.force) {
        Ok(done) => done,
        Err(conflicts) => {
            let allowed = if opts.manager == "kubectl" {
                allowed_conflicts_from_last_applied(&live_clean, shape, opts.api_version)
            } else {
                None
            };
            let remaining: Conflicts = match &allowed {
                Some(allowed) => conflicts.into_iter().filter(|(_, p)| !allowed.has(p)).collect(),
                None => conflicts,
            };
            if allowed.is_none() || !remaining.is_empty() {
                return Err(ApplyError::Conflicts(
                    remaining.into_iter().map(to_conflict).collect(),
                ));
            }
            run(true).map_err(|c| ApplyError::Conflicts(c.into_iter().map(to_conflict).collect()))?
        }
    };
    if obj.is_null() {
        obj = json!({});
    }
    crate::merge_patch::prune_nulls(&mut obj);
    if opts.manager == "kubectl" && has_last_applied(&obj) {
        set_annotation(&mut obj, LAST_APPLIED_ANNOTATION, build_last_applied(applied));
    }
    set_managed_fields(&mut obj, entries::encode(&managed));
    Ok(obj)
}

fn to_conflict((key, path): (ManagerKey, Vec<PathElement>)) -> Conflict {
    Conflict {
        manager: key.manager,
        field: path_string(&path),
        operation: key.operation.as_str().to_string(),
        api_version: key.api_version,
        subresource: key.subresource,
    }
}

fn has_last_applied(obj: &Value) -> bool {
    metadata(obj)
        .and_then(|m| m.get("annotations"))
        .and_then(|a| a.get(LAST_APPLIED_ANNOTATION))
        .and_then(Value::as_str)
        .is_some_and(|s| !s.is_empty())
}

fn set_annotation(obj: &mut Value, key: &str, value: String) {
    if let Some(annotations) = obj
        .get_mut("metadata")
        .and_then(|m| m.get_mut("annotations"))
        .and_then(Value::as_object_mut)
    {
        annotations.insert(key.to_string(), Value::String(value));
    }
}

/// `buildLastApplied`: the applied configuration without the annotation, encoded the way
/// kube-apiserver encodes unstructured objects.
fn build_last_applied(applied: &Value) -> String {
    let mut obj = applied.clone();
    if let Some(annotations) = obj
        .get_mut("metadata")
        .and_then(|m| m.get_mut("annotations"))
        .and_then(Value::as_object_mut)
    {
        annotations.remove(LAST_APPLIED_ANNOTATION);
    }
    format!("{}\n", go_json(&obj))
}

/// `lastAppliedManager.allowedConflictsFromLastApplied`: the fields the client-side apply
/// annotation shows the user set, and that still hold those values.
fn allowed_conflicts_from_last_applied(live: &Value, shape: &Shape, api_version: &str) -> Option<FieldSet> {
    let annotation = metadata(live)?
        .get("annotations")?
        .get(LAST_APPLIED_ANNOTATION)?
        .as_str()?;
    if annotation.is_empty() {
        return None;
    }
    let last: Value = serde_json::from_str(annotation).ok()?;
    if last.get("apiVersion").and_then(Value::as_str) != Some(api_version) {
        return None;
    }
    typed::validate(&last, shape, false).ok()?;
    typed::validate(live, shape, false).ok()?;
    let set = typed::to_field_set(&last, shape);
    let cmp = typed::compare(&last, live, shape);
    Some(
        set.difference(&cmp.modified)
            .difference(&cmp.added)
            .difference(&cmp.removed),
    )
}

/// Field tracking with an explicit [`Filter`] (see [`track_update`]).
pub fn track_update_with_filter(
    old: Option<&Value>,
    new: &Value,
    shape: &Shape,
    opts: &UpdateOptions,
    filter: &Filter,
) -> Result<Value, PatchError> {
    if !new.is_object() {
        return Err(PatchError::BadRequest(
            "the object to track must be a JSON object".into(),
        ));
    }
    let mut old = old.cloned();
    Ok(track_update_in_place(
        old.as_mut(),
        new.clone(),
        shape,
        opts,
        filter,
    ))
}

/// [`track_update_with_filter`] without copying either object, for a caller that owns them
/// (an API server's write path): `new` is taken and returned with its managedFields, and
/// `old`'s `metadata.managedFields` are taken out for the comparison and put back before this
/// returns. A `new` that is not a JSON object is returned as it is.
pub fn track_update_in_place(
    old: Option<&mut Value>,
    new: Value,
    shape: &Shape,
    opts: &UpdateOptions,
    filter: &Filter,
) -> Value {
    track_update_in_place_except(old, new, shape, opts, filter, &[])
}

/// [`track_update_in_place`] for a caller that already knows which top-level fields of `old`
/// and `new` are equal (`unchanged`: a status write leaves `spec` as it was, a spec write
/// `status`). Those are set aside while the objects are compared and put back after, so a
/// Work's manifests are not walked again for a write of its status.
///
/// An equal field adds nothing to the comparison (nothing in it was modified, added or
/// removed), so the managedFields are those [`track_update_in_place`] records, with one
/// difference: the fields set aside are not type-checked either. kube-apiserver keeps the live
/// managedFields when either object does not match its schema; here only the fields that
/// changed are checked, so a write that leaves a non-conforming `spec` as it was (stored before
/// its schema changed, say) still has its changes tracked. `metadata`, `apiVersion` and `kind`
/// are never set aside. Listing a field that differs is the caller's error: it is checked in
/// debug builds only.
pub fn track_update_in_place_except(
    mut old: Option<&mut Value>,
    mut new: Value,
    shape: &Shape,
    opts: &UpdateOptions,
    filter: &Filter,
    unchanged: &[&str],
) -> Value {
    if !new.is_object() {
        return new;
    }
    let old_entries = old.as_deref_mut().and_then(take_managed_fields);
    let new_entries = take_managed_fields(&mut new);
    let aside = match old.as_deref_mut() {
        Some(old) => set_aside(old, &mut new, unchanged),
        None => Vec::new(),
    };
    let mut out = track_stripped(
        old.as_deref(),
        old_entries.as_ref(),
        new,
        new_entries.as_ref(),
        shape,
        opts,
        filter,
    );
    if let Some(old) = old {
        put_back(old, &mut out, aside);
        if let Some(entries) = old_entries {
            set_managed_fields(old, Some(entries));
        }
    }
    out
}

/// A top-level field taken out of both objects: its name, `old`'s value, `new`'s value.
type SetAside = (String, Value, Value);

/// Takes the `unchanged` top-level fields out of `old` and `new` (those present in both; never
/// `metadata`, `apiVersion` or `kind`).
fn set_aside(old: &mut Value, new: &mut Value, unchanged: &[&str]) -> Vec<SetAside> {
    let (Some(old), Some(new)) = (old.as_object_mut(), new.as_object_mut()) else {
        return Vec::new();
    };
    let mut aside = Vec::new();
    for &field in unchanged {
        if matches!(field, "metadata" | "apiVersion" | "kind")
            || !old.contains_key(field)
            || !new.contains_key(field)
        {
            continue;
        }
        let (Some(was), Some(is)) = (old.remove(field), new.remove(field)) else {
            continue;
        };
        debug_assert!(was == is, "`{field}` was listed as unchanged but differs");
        aside.push((field.to_owned(), was, is));
    }
    aside
}

/// Puts the fields [`set_aside`] took back into `old` and `out` (the tracked `new`).
fn put_back(old: &mut Value, out: &mut Value, aside: Vec<SetAside>) {
    for (field, was, is) in aside {
        if let Some(old) = old.as_object_mut() {
            old.insert(field.clone(), was);
        }
        if let Some(out) = out.as_object_mut() {
            out.insert(field, is);
        }
    }
}

/// The tracking itself, on `old` and `new` without their managedFields (`old_entries`,
/// `new_entries`).
fn track_stripped(
    old: Option<&Value>,
    old_entries: Option<&Value>,
    new: Value,
    new_entries: Option<&Value>,
    shape: &Shape,
    opts: &UpdateOptions,
    filter: &Filter,
) -> Value {
    // The stored entries' sets are decoded only where the write may change them.
    let decode_old = || entries::decode_stored(old_entries).unwrap_or_default();
    let mut managed = if opts.subresource.is_some() {
        decode_old()
    } else if entries::is_reset(new_entries) {
        Managed::default()
    } else {
        match entries::decode(new_entries) {
            Ok(m) if !m.fields.is_empty() => m,
            _ => decode_old(),
        }
    };
    let is_create = old.is_none_or(|o| meta_str(o, "uid").is_empty());
    if managed.fields.is_empty() && !is_create {
        return new;
    }
    let baseline;
    let old = match old {
        Some(o) => o,
        None => {
            baseline = zero_baseline(&new);
            &baseline
        }
    };
    if typed::validate(old, shape, true).is_err() || typed::validate(&new, shape, true).is_err() {
        // kube-apiserver's UpdateNoErrors: keep the live managedFields rather than fail.
        let mut out = new;
        set_managed_fields(&mut out, old_entries.cloned());
        return out;
    }
    let ctx = Ctx::new(shape, filter, opts.api_version, opts.subresource, opts.now);
    update_layers(old, &new, &mut managed, opts.manager, &ctx);
    let mut out = new;
    set_managed_fields(&mut out, entries::encode(&managed));
    out
}

/// Removes `metadata.managedFields` from `obj` and returns them.
fn take_managed_fields(obj: &mut Value) -> Option<Value> {
    obj.get_mut("metadata")?.as_object_mut()?.remove("managedFields")
}

impl Conflict {
    /// The manager as kube-apiserver prints it: `"kubectl"`, `"kube-controller-manager" with
    /// subresource "status" using apps/v1`.
    pub fn manager_description(&self) -> String {
        let mut s = go_quote(&self.manager);
        if !self.subresource.is_empty() {
            s.push_str(&format!(" with subresource {}", go_quote(&self.subresource)));
        }
        if self.operation == "Update" {
            s.push_str(&format!(" using {}", self.api_version));
        }
        s
    }

    /// The status cause kube-apiserver attaches (`type: FieldManagerConflict`): message
    /// `conflict with "kubectl" using apps/v1`, field `.spec.replicas`.
    pub fn cause_message(&self) -> String {
        format!("conflict with {}", self.manager_description())
    }

    fn identifier(&self) -> String {
        let op = if self.operation == "Apply" {
            Operation::Apply
        } else {
            Operation::Update
        };
        ManagerKey::new(&self.manager, op, &self.api_version, &self.subresource).identifier()
    }
}

/// kube-apiserver's apply-conflict message.
pub(crate) fn conflicts_message(conflicts: &[Conflict]) -> String {
    if let [only] = conflicts {
        return format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            only.manager_description(),
            only.field
        );
    }
    let mut groups: Vec<(String, &Conflict, Vec<&str>)> = Vec::new();
    for c in conflicts {
        let id = c.identifier();
        match groups.iter_mut().find(|(g, _, _)| *g == id) {
            Some((_, _, fields)) => fields.push(&c.field),
            None => groups.push((id, c, vec![&c.field])),
        }
    }
    groups.sort_by(|a, b| a.0.cmp(&b.0));
    let mut lines = Vec::new();
    for (_, c, fields) in groups {
        lines.push(format!("conflicts with {}:", c.manager_description()));
        lines.extend(fields.into_iter().map(|f| format!("- {f}")));
    }
    format!(
        "Apply failed with {} conflicts: {}",
        conflicts.len(),
        lines.join("\n")
    )
}

#[cfg(test)]
mod tests;
