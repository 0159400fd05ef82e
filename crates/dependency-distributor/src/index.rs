//! The in-memory index the watches maintain: which bindings reference which dependencies (from
//! the `resourcebinding.karmada.io/dependencies` annotation), which bindings are attached
//! bindings, and what to reconcile when a binding or a dependency object changes.
//!
//! The index is rebuilt from the watches' initial lists on every start, so it is a cache of the
//! API's state, never a memory of past events (invariant 2). The one thing it adds is, per
//! binding, the mark of the template inputs and rules at which this process last read the
//! template with success ([`Index::settled`], ADR 0026): it only ever spares a read whose
//! result is already recorded on the binding, and a start has none.
//!
//! Each dependency and each binding key is held once: the bindings, the reverse map and the
//! attached set share it (`Arc`), and the index hands out owned copies only in what its methods
//! return. A workload's dependency is usually also the resource of its attached binding, so the
//! four strings of a [`DependencyRef`] would otherwise be kept three or four times.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use flotilla_interpreter::DependencyRef;
use flotilla_runtime::intern::Interner;
use serde_json::json;

use crate::binding::{BindingKey, BindingView};

/// A unit of work.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Key {
    /// Read the independent binding's template, record its dependencies, and reconcile the
    /// attached bindings of its old and new dependencies.
    Binding(BindingKey),
    /// Reconcile one dependency's attached binding because the bindings around it changed (or
    /// at a resync): left alone when the caches already show it as they ask
    /// ([`crate::plan::settled`]).
    Dependency(DependencyRef),
    /// Reconcile one dependency's attached binding because its object changed: the object is
    /// always read.
    Object(DependencyRef),
}

/// A dependency as the index holds it: the one copy [`Index::dependencies`] hands out.
type Dep = Arc<DependencyRef>;

/// A binding's key as the index holds it: the key of [`Index::bindings`], shared by the lists of
/// [`Index::by_dependency`].
type Binding = Arc<BindingKey>;

#[derive(Debug)]
struct Seen {
    /// Sorted, without duplicates. A slice, not a `BTreeSet`: a set's first node has room for
    /// eleven entries and most bindings have one dependency or none.
    dependencies: Box<[Dep]>,
    resource: Option<Dep>,
    template_digest: u64,
    placement_digest: u64,
    attached_digest: u64,
    /// [`read_mark`] of the template inputs and rules generation at which a reconcile last
    /// read the template and recorded its dependencies with success; 0 when none did.
    dependencies_read: u64,
    propagate_deps: bool,
    has_required_by: bool,
}

impl Seen {
    /// Has `propagateDeps` or recorded dependencies.
    fn distributes(&self) -> bool {
        self.propagate_deps || !self.dependencies.is_empty()
    }

    /// See [`Index::settled`].
    fn settled(&self, rules_generation: u64) -> bool {
        self.dependencies_read == read_mark(self.template_digest, rules_generation)
    }
}

/// See the module docs.
#[derive(Debug, Default)]
pub struct Index {
    bindings: HashMap<Binding, Seen>,
    /// The bindings referencing each dependency, sorted, without duplicates (a vector for the
    /// reason given at [`Seen::dependencies`]; most dependencies have one referencing binding).
    by_dependency: HashMap<Dep, Vec<Binding>>,
    attached: HashSet<Dep>,
    /// Every dependency the maps above hold, once: where a new reference finds the shared copy.
    /// An entry goes as soon as nothing else holds it ([`Index::release`]).
    dependencies: Interner<DependencyRef>,
}

fn digest(value: serde_json::Value) -> u64 {
    let mut hasher = DefaultHasher::new();
    value.to_string().hash(&mut hasher);
    hasher.finish()
}

/// What a binding's dependencies are computed from besides the template and the rules:
/// whether it distributes, whether it is being deleted, `spec.resource` (whose resourceVersion
/// the detector moves with every content change of the template) and the dependencies recorded
/// in its annotation.
pub fn template_digest(view: &BindingView) -> u64 {
    digest(json!([
        view.uid,
        view.propagate_deps,
        view.deleting,
        view.resource,
        view.dependencies_annotation,
    ]))
}

/// One number for "the template inputs `template_digest` under the rules of
/// `rules_generation`"; never 0, which marks "not read".
fn read_mark(template_digest: u64, rules_generation: u64) -> u64 {
    let mut hasher = DefaultHasher::new();
    (template_digest, rules_generation).hash(&mut hasher);
    hasher.finish().max(1)
}

/// Where `key` is, or would go, in a sorted list of binding keys.
fn position(list: &[Binding], key: &BindingKey) -> Result<usize, usize> {
    list.binary_search_by(|listed| (**listed).cmp(key))
}

impl Index {
    /// An empty index.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records an added or changed binding and returns what to reconcile because of the change:
    /// the binding itself when its template inputs changed (propagateDeps, spec.resource,
    /// deletion, the recorded dependencies), its old and new dependencies when its placement
    /// inputs changed (clusters, suspension, conflictResolution, preserveResourcesOnDeletion),
    /// and the dependency it is the attached binding of when it changed as one.
    pub fn applied(&mut self, view: &BindingView) -> Vec<Key> {
        let dependencies: BTreeSet<DependencyRef> = view.dependencies.iter().cloned().collect();
        let resource = (!view.resource.name.is_empty()).then(|| view.resource_as_dependency());
        let template_digest = template_digest(view);
        let placement_digest = digest(json!([
            view.uid,
            view.propagate_deps,
            view.deleting,
            view.clusters,
            view.suspension,
            view.conflict_resolution,
            view.preserve_resources_on_deletion,
            dependencies,
        ]));
        let attached_digest = digest(json!([
            view.uid,
            view.deleting,
            view.claimed,
            view.resource,
            view.required_by,
            view.suspension,
            view.conflict_resolution,
            view.preserve_resources_on_deletion,
            view.fingerprint,
        ]));
        let (key, previous) = match self.bindings.remove_entry(&view.key) {
            Some((key, previous)) => (key, Some(previous)),
            None => (Arc::new(view.key.clone()), None),
        };
        let mut keys = Vec::new();

        let template_changed = previous
            .as_ref()
            .is_none_or(|p| p.template_digest != template_digest);
        if template_changed && (view.propagate_deps || view.dependencies_annotation.is_some()) {
            keys.push(Key::Binding(view.key.clone()));
        }
        let placement_changed = previous
            .as_ref()
            .is_none_or(|p| p.placement_digest != placement_digest);
        if placement_changed {
            let old = previous.as_ref().map(|p| &p.dependencies[..]).unwrap_or_default();
            let both: BTreeSet<&DependencyRef> = old.iter().map(|dep| &**dep).chain(&dependencies).collect();
            keys.extend(both.into_iter().cloned().map(Key::Dependency));
        }
        let attached_changed = previous
            .as_ref()
            .is_none_or(|p| p.attached_digest != attached_digest);

        if let Some(previous) = &previous {
            self.unlink(&view.key, previous);
        }
        let dependencies: Box<[Dep]> = dependencies.into_iter().map(|dep| self.shared(dep)).collect();
        for dep in &dependencies {
            let referencing = self.by_dependency.entry(dep.clone()).or_default();
            if let Err(at) = position(referencing, &view.key) {
                referencing.insert(at, key.clone());
            }
        }
        let has_required_by = !view.required_by.is_empty();
        let resource = resource.map(|resource| self.shared(resource));
        if let Some(resource) = &resource {
            if has_required_by {
                self.attached.insert(resource.clone());
            }
            if attached_changed
                && (has_required_by
                    || previous.as_ref().is_some_and(|p| p.has_required_by)
                    || self.is_referenced(resource))
            {
                keys.push(Key::Dependency((**resource).clone()));
            }
        }
        self.bindings.insert(
            key,
            Seen {
                dependencies,
                resource,
                template_digest,
                placement_digest,
                attached_digest,
                dependencies_read: previous.as_ref().map_or(0, |p| p.dependencies_read),
                propagate_deps: view.propagate_deps,
                has_required_by,
            },
        );
        if let Some(previous) = previous {
            self.release(previous);
        }
        keys.sort();
        keys.dedup();
        keys
    }

    /// Forgets a deleted binding and returns the dependencies to reconcile: those it referenced
    /// and, if it was an attached binding or is referenced, the one it was for.
    pub fn deleted(&mut self, key: &BindingKey) -> Vec<Key> {
        let Some((_, previous)) = self.bindings.remove_entry(key) else {
            return vec![];
        };
        self.unlink(key, &previous);
        let mut keys: Vec<Key> = previous
            .dependencies
            .iter()
            .map(|dep| Key::Dependency((**dep).clone()))
            .collect();
        if let Some(resource) = &previous.resource
            && (previous.has_required_by || self.is_referenced(resource))
        {
            keys.push(Key::Dependency((**resource).clone()));
        }
        self.release(previous);
        keys.sort();
        keys.dedup();
        keys
    }

    /// The shared copy of `dep`, made if the index holds none yet.
    fn shared(&mut self, dep: DependencyRef) -> Dep {
        self.dependencies.intern_value(dep)
    }

    /// Drops a binding's record (already unlinked) and forgets each dependency it held that
    /// nothing else in the index holds any more.
    fn release(&mut self, seen: Seen) {
        let Seen {
            dependencies,
            resource,
            ..
        } = seen;
        for dep in dependencies.into_vec().into_iter().chain(resource) {
            self.dependencies.release(dep);
        }
    }

    fn unlink(&mut self, key: &BindingKey, previous: &Seen) {
        for dep in &previous.dependencies {
            if let Some(referencing) = self.by_dependency.get_mut(dep) {
                if let Ok(at) = position(referencing, key) {
                    referencing.remove(at);
                }
                if referencing.is_empty() {
                    self.by_dependency.remove(dep);
                }
            }
        }
        if let Some(resource) = &previous.resource
            && previous.has_required_by
        {
            self.attached.remove(resource);
        }
    }

    /// The bindings whose recorded dependencies include `dep`.
    pub fn referencing(&self, dep: &DependencyRef) -> Vec<BindingKey> {
        self.by_dependency
            .get(dep)
            .map(|keys| keys.iter().map(|key| (**key).clone()).collect())
            .unwrap_or_default()
    }

    /// Whether some binding's recorded dependencies include `dep`.
    pub fn is_referenced(&self, dep: &DependencyRef) -> bool {
        self.by_dependency.contains_key(dep)
    }

    /// Whether a change of the object `dep` matters: some binding references it or it has an
    /// attached binding.
    pub fn is_relevant(&self, dep: &DependencyRef) -> bool {
        self.is_referenced(dep) || self.attached.contains(dep)
    }

    /// Every `(apiVersion, kind)` some binding references or some attached binding is for: the
    /// kinds whose objects must be watched.
    pub fn dependency_kinds(&self) -> BTreeSet<(String, String)> {
        self.by_dependency
            .keys()
            .chain(self.attached.iter())
            .map(|d| (d.api_version.clone(), d.kind.clone()))
            .collect()
    }

    /// Every binding with `propagateDeps` or recorded dependencies (for a rules change).
    pub fn distributing_bindings(&self) -> Vec<BindingKey> {
        let mut keys: Vec<BindingKey> = self
            .bindings
            .iter()
            .filter(|(_, seen)| seen.distributes())
            .map(|(key, _)| (**key).clone())
            .collect();
        keys.sort();
        keys
    }

    /// Records that a reconcile of `key` read its template and recorded its dependencies, with
    /// success, for the template inputs `template_digest` (of the binding as it wrote it) under
    /// the rules of `rules_generation`. A binding the index does not hold yet records nothing.
    pub fn record_dependencies_read(
        &mut self,
        key: &BindingKey,
        template_digest: u64,
        rules_generation: u64,
    ) {
        if let Some(seen) = self.bindings.get_mut(key) {
            seen.dependencies_read = read_mark(template_digest, rules_generation);
        }
    }

    /// Whether the dependencies of `key` were read with success for the template inputs
    /// `template_digest` under the rules of `rules_generation`: reading the template again would
    /// find the dependencies its annotation records.
    pub fn dependencies_read(&self, key: &BindingKey, template_digest: u64, rules_generation: u64) -> bool {
        self.bindings
            .get(key)
            .is_some_and(|seen| seen.dependencies_read == read_mark(template_digest, rules_generation))
    }

    /// Whether the binding `key`, as the watch last delivered it, is settled: its dependencies
    /// were read with success at its current template inputs under the rules of
    /// `rules_generation`. A pickup of a settled binding has nothing to do: its dependencies'
    /// attached bindings are queued by their own changes ([`Index::applied`]).
    pub fn settled(&self, key: &BindingKey, rules_generation: u64) -> bool {
        self.bindings
            .get(key)
            .is_some_and(|seen| seen.settled(rules_generation))
    }

    /// For a resync: the distributing bindings that are not [settled](Index::settled), sorted,
    /// and how many are.
    pub fn unsettled_bindings(&self, rules_generation: u64) -> (Vec<BindingKey>, usize) {
        let mut settled = 0;
        let mut keys = Vec::new();
        for (key, seen) in &self.bindings {
            if !seen.distributes() {
                continue;
            }
            if seen.settled(rules_generation) {
                settled += 1;
            } else {
                keys.push((**key).clone());
            }
        }
        keys.sort();
        (keys, settled)
    }

    /// Every dependency that is referenced or has an attached binding (for a resync).
    pub fn all_dependencies(&self) -> Vec<DependencyRef> {
        let set: BTreeSet<&DependencyRef> = self
            .by_dependency
            .keys()
            .chain(self.attached.iter())
            .map(|dep| &**dep)
            .collect();
        set.into_iter().cloned().collect()
    }

    /// How many attached bindings (bindings with a non-empty `requiredBy`) exist.
    pub fn attached_count(&self) -> usize {
        self.attached.len()
    }
}

#[cfg(test)]
mod tests {
    use flotilla_api::{ObjectReference, TargetCluster};

    use super::*;

    fn cm(name: &str) -> DependencyRef {
        DependencyRef {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: Some("default".into()),
            name: name.into(),
        }
    }

    fn workload(name: &str, clusters: &[&str], deps: &[DependencyRef]) -> BindingView {
        BindingView {
            key: BindingKey::namespaced("default", name),
            uid: Some(format!("uid-{name}")),
            claimed: true,
            propagate_deps: true,
            resource: ObjectReference {
                api_version: "apps/v1".into(),
                kind: "Deployment".into(),
                namespace: Some("default".into()),
                name: name.into(),
                ..Default::default()
            },
            clusters: clusters
                .iter()
                .map(|c| TargetCluster {
                    name: (*c).into(),
                    replicas: 1,
                })
                .collect(),
            dependencies: deps.to_vec(),
            dependencies_annotation: Some(crate::binding::dependencies_annotation(deps)),
            ..Default::default()
        }
    }

    fn attached(dep: &DependencyRef, by: &str) -> BindingView {
        BindingView {
            key: BindingKey::attached_to(dep),
            resource: ObjectReference {
                api_version: dep.api_version.clone(),
                kind: dep.kind.clone(),
                namespace: dep.namespace.clone(),
                name: dep.name.clone(),
                ..Default::default()
            },
            required_by: vec![BindingKey::namespaced("default", by).snapshot(&[])],
            ..Default::default()
        }
    }

    #[test]
    fn a_new_workload_triggers_itself_and_its_dependencies() {
        let mut index = Index::new();
        let web = workload("web", &["m1"], &[cm("a"), cm("b")]);
        assert_eq!(
            index.applied(&web),
            vec![
                Key::Binding(web.key.clone()),
                Key::Dependency(cm("a")),
                Key::Dependency(cm("b"))
            ]
        );
        assert_eq!(index.referencing(&cm("a")), vec![web.key.clone()]);
        assert!(index.is_relevant(&cm("b")));
        assert!(!index.is_relevant(&cm("c")));
        // The same object again (e.g. a status write): nothing to do.
        assert_eq!(index.applied(&web), vec![]);
    }

    #[test]
    fn rescheduling_triggers_dependencies_only() {
        let mut index = Index::new();
        let web = workload("web", &["m1"], &[cm("a")]);
        index.applied(&web);
        let moved = workload("web", &["m2"], &[cm("a")]);
        assert_eq!(index.applied(&moved), vec![Key::Dependency(cm("a"))]);
    }

    #[test]
    fn a_template_change_triggers_the_binding() {
        let mut index = Index::new();
        let web = workload("web", &["m1"], &[cm("a")]);
        index.applied(&web);
        let mut refreshed = web.clone();
        refreshed.resource.resource_version = Some("42".into());
        assert_eq!(index.applied(&refreshed), vec![Key::Binding(web.key.clone())]);
    }

    #[test]
    fn a_removed_reference_triggers_old_and_new_dependencies() {
        let mut index = Index::new();
        index.applied(&workload("web", &["m1"], &[cm("a"), cm("b")]));
        let fewer = workload("web", &["m1"], &[cm("b")]);
        assert_eq!(
            index.applied(&fewer),
            vec![
                Key::Binding(fewer.key.clone()),
                Key::Dependency(cm("a")),
                Key::Dependency(cm("b"))
            ]
        );
        assert!(!index.is_referenced(&cm("a")));
        assert_eq!(index.dependency_kinds().len(), 1);
    }

    #[test]
    fn bindings_without_dependencies_are_not_reconciled() {
        let mut index = Index::new();
        let mut plain = workload("plain", &["m1"], &[]);
        plain.propagate_deps = false;
        plain.dependencies_annotation = None;
        assert_eq!(index.applied(&plain), vec![]);
        // Turning propagateDeps on makes it interesting.
        plain.propagate_deps = true;
        assert_eq!(index.applied(&plain), vec![Key::Binding(plain.key.clone())]);
    }

    #[test]
    fn deleting_a_workload_triggers_its_dependencies() {
        let mut index = Index::new();
        let web = workload("web", &["m1"], &[cm("a")]);
        index.applied(&web);
        assert_eq!(index.deleted(&web.key), vec![Key::Dependency(cm("a"))]);
        assert!(!index.is_relevant(&cm("a")));
        assert_eq!(index.deleted(&web.key), vec![]);
    }

    #[test]
    fn attached_bindings_trigger_their_dependency() {
        let mut index = Index::new();
        let a = attached(&cm("a"), "web");
        assert_eq!(index.applied(&a), vec![Key::Dependency(cm("a"))]);
        assert!(index.is_relevant(&cm("a")));
        assert_eq!(index.attached_count(), 1);
        assert_eq!(index.applied(&a), vec![]);
        let mut claimed = a.clone();
        claimed.claimed = true;
        assert_eq!(index.applied(&claimed), vec![Key::Dependency(cm("a"))]);
        assert_eq!(index.deleted(&a.key), vec![Key::Dependency(cm("a"))]);
        assert_eq!(index.attached_count(), 0);
        assert!(!index.is_relevant(&cm("a")));
    }

    #[test]
    fn an_unrelated_binding_of_a_referenced_object_triggers_it() {
        let mut index = Index::new();
        index.applied(&workload("web", &["m1"], &[cm("a")]));
        // The dependency's own policy created a binding (no requiredBy yet).
        let mut own = attached(&cm("a"), "web");
        own.required_by.clear();
        own.claimed = true;
        assert_eq!(index.applied(&own), vec![Key::Dependency(cm("a"))]);
        // A binding of an unreferenced object does not.
        let mut other = attached(&cm("z"), "web");
        other.required_by.clear();
        assert_eq!(index.applied(&other), vec![]);
    }

    #[test]
    fn a_dependency_shared_by_several_bindings_lists_them_sorted_until_the_last_goes() {
        let mut index = Index::new();
        // Applied out of order; "web" names its dependency twice (a hand-written annotation).
        index.applied(&workload("web", &["m1"], &[cm("a"), cm("a")]));
        index.applied(&workload("api", &["m1"], &[cm("a"), cm("b")]));
        index.applied(&workload("db", &["m1"], &[cm("a")]));
        let key = |name: &str| BindingKey::namespaced("default", name);
        assert_eq!(
            index.referencing(&cm("a")),
            vec![key("api"), key("db"), key("web")]
        );
        assert_eq!(index.referencing(&cm("b")), vec![key("api")]);
        // The same binding applied again is listed once.
        let mut web_again = workload("web", &["m2"], &[cm("a")]);
        assert_eq!(
            index.applied(&web_again),
            vec![Key::Binding(key("web")), Key::Dependency(cm("a"))]
        );
        assert_eq!(
            index.referencing(&cm("a")),
            vec![key("api"), key("db"), key("web")]
        );
        // A binding that drops the dependency leaves the others.
        web_again.dependencies = vec![cm("b")];
        web_again.dependencies_annotation = Some(crate::binding::dependencies_annotation(&[cm("b")]));
        assert_eq!(
            index.applied(&web_again),
            vec![
                Key::Binding(key("web")),
                Key::Dependency(cm("a")),
                Key::Dependency(cm("b"))
            ]
        );
        assert_eq!(index.referencing(&cm("a")), vec![key("api"), key("db")]);
        assert_eq!(index.referencing(&cm("b")), vec![key("api"), key("web")]);
        index.deleted(&key("api"));
        index.deleted(&key("db"));
        assert!(!index.is_referenced(&cm("a")));
        assert_eq!(index.referencing(&cm("a")), vec![]);
        assert_eq!(index.referencing(&cm("b")), vec![key("web")]);
        assert_eq!(index.all_dependencies(), vec![cm("b")]);
    }

    /// Checks that every dependency and binding key the index holds is the one shared copy, and
    /// that the pool holds exactly the dependencies something else holds.
    fn assert_shared_once(index: &Index) {
        // Interning a held value finds its copy (and adds nothing).
        let is_pooled = |dep: &Dep| {
            let pooled = index.dependencies.intern_value((**dep).clone());
            assert!(Arc::ptr_eq(&pooled, dep), "{dep:?} is a second copy");
        };
        let mut held = HashSet::new();
        for seen in index.bindings.values() {
            for dep in seen.dependencies.iter().chain(&seen.resource) {
                is_pooled(dep);
                held.insert(dep.clone());
            }
        }
        for dep in index.by_dependency.keys().chain(&index.attached) {
            is_pooled(dep);
            held.insert(dep.clone());
        }
        // Every held value is pooled, and the pool holds no more values than that.
        assert_eq!(
            held.len(),
            index.dependencies.len(),
            "the pool holds exactly what is held"
        );
        for list in index.by_dependency.values() {
            for key in list {
                let (stored, _) = index.bindings.get_key_value(&**key).unwrap();
                assert!(Arc::ptr_eq(stored, key), "{key:?} is a second copy");
            }
        }
    }

    #[test]
    fn each_dependency_is_held_once_and_forgotten_with_its_last_holder() {
        let mut index = Index::new();
        index.applied(&workload("web", &["m1"], &[cm("a"), cm("b")]));
        index.applied(&workload("api", &["m1"], &[cm("a")]));
        index.applied(&attached(&cm("a"), "web"));
        assert_shared_once(&index);
        // ConfigMaps a and b, and the two Deployments.
        assert_eq!(index.dependencies.len(), 4);
        // The pool, web's and api's dependencies, the reverse map, the attached binding's
        // resource and the attached set.
        let a = index.dependencies.intern_value(cm("a"));
        assert_eq!(Arc::strong_count(&a) - 1, 6, "not counting `a` itself");
        drop(a);

        // web drops b: nothing else holds it.
        index.applied(&workload("web", &["m2"], &[cm("a")]));
        assert_shared_once(&index);
        assert_eq!(index.dependencies.len(), 3, "b is gone from the pool");
        // A binding whose own resource is among its dependencies (a hand-written annotation).
        let mut odd = workload("odd", &["m1"], &[]);
        odd.dependencies = vec![odd.resource_as_dependency()];
        index.applied(&odd);
        assert_shared_once(&index);
        assert_eq!(index.dependencies.len(), 4);

        for name in ["web", "api", "odd"] {
            index.deleted(&BindingKey::namespaced("default", name));
            assert_shared_once(&index);
        }
        assert_eq!(index.dependencies.len(), 1, "the attached binding's ConfigMap");
        index.deleted(&BindingKey::attached_to(&cm("a")));
        assert!(index.dependencies.is_empty());
        assert!(index.bindings.is_empty() && index.by_dependency.is_empty());
        assert!(index.attached.is_empty());
    }

    #[test]
    fn resync_lists() {
        let mut index = Index::new();
        index.applied(&workload("web", &["m1"], &[cm("a")]));
        index.applied(&workload("api", &["m1"], &[cm("b")]));
        index.applied(&attached(&cm("c"), "gone"));
        let mut off = workload("off", &["m1"], &[]);
        off.propagate_deps = false;
        index.applied(&off);
        let mut crb = workload("pv", &["m1"], &[]);
        crb.key = BindingKey::cluster("pv-persistentvolume");
        index.applied(&crb);
        assert_eq!(
            index.distributing_bindings(),
            vec![
                BindingKey::cluster("pv-persistentvolume"),
                BindingKey::namespaced("default", "api"),
                BindingKey::namespaced("default", "web")
            ]
        );
        assert_eq!(index.all_dependencies(), vec![cm("a"), cm("b"), cm("c")]);
    }

    #[test]
    fn a_binding_is_settled_at_the_template_inputs_and_rules_its_dependencies_were_read_at() {
        let mut index = Index::new();
        // As created: no dependencies recorded yet, never read.
        let created = workload("web", &[], &[]);
        let created = BindingView {
            dependencies_annotation: None,
            ..created
        };
        index.applied(&created);
        assert!(!index.settled(&created.key, 0));
        assert_eq!(index.unsettled_bindings(0), (vec![created.key.clone()], 0));

        // A reconcile read the template and recorded one dependency: the record is of the
        // binding as it wrote it, so the echo of its own annotation is settled.
        let written = workload("web", &[], &[cm("a")]);
        assert!(!index.dependencies_read(&written.key, template_digest(&written), 0));
        index.record_dependencies_read(&written.key, template_digest(&written), 0);
        assert!(index.dependencies_read(&written.key, template_digest(&written), 0));
        assert!(
            !index.settled(&created.key, 0),
            "the cache still holds the binding as created"
        );
        index.applied(&written);
        assert!(index.settled(&written.key, 0));
        assert_eq!(index.unsettled_bindings(0), (vec![], 1));

        // Changes the dependencies do not come from leave it settled: the scheduler's clusters.
        let scheduled = workload("web", &["m1", "m2"], &[cm("a")]);
        index.applied(&scheduled);
        assert!(index.settled(&scheduled.key, 0));

        // New rules unsettle every binding.
        assert!(!index.settled(&scheduled.key, 1));
        assert_eq!(index.unsettled_bindings(1), (vec![scheduled.key.clone()], 0));

        // So does a content change of the template (the detector moves spec.resource's
        // resourceVersion), an annotation someone else edits, propagateDeps turned off, deletion.
        let mut edited = scheduled.clone();
        edited.resource.resource_version = Some("42".into());
        let mut annotated = scheduled.clone();
        annotated.dependencies_annotation = Some("[]".into());
        let mut off = scheduled.clone();
        off.propagate_deps = false;
        let mut deleting = scheduled.clone();
        deleting.deleting = true;
        for changed in [edited, annotated, off, deleting] {
            index.applied(&changed);
            assert!(!index.settled(&changed.key, 0), "{changed:?}");
            index.applied(&scheduled);
            assert!(
                index.settled(&scheduled.key, 0),
                "back as it was read: settled again"
            );
        }

        // A binding deleted and created again under the same name is another binding (uid).
        index.deleted(&scheduled.key);
        let again = BindingView {
            uid: Some("uid-web-2".into()),
            ..scheduled.clone()
        };
        index.applied(&again);
        assert!(!index.settled(&again.key, 0));

        // Nothing is recorded for a binding the index does not hold, and a binding that does not
        // distribute is not a resync's business.
        let unknown = BindingKey::namespaced("default", "unknown");
        index.record_dependencies_read(&unknown, 7, 0);
        assert!(!index.dependencies_read(&unknown, 7, 0));
        assert!(!index.settled(&unknown, 0));
        let mut quiet = workload("quiet", &["m1"], &[]);
        quiet.propagate_deps = false;
        index.applied(&quiet);
        assert_eq!(index.unsettled_bindings(0), (vec![again.key.clone()], 0));
    }
}
