//! `flotilla activate`: rolls a pending Lazy policy change out to chosen resource templates
//! without faking an edit of them.
//!
//! A template whose active policy is `activationPreference: Lazy` keeps propagating per the
//! policy generation its binding was last refreshed from until the template itself changes. This
//! command picks templates (by name, by kind and label selector, in one namespace or all), finds
//! those with a pending change (the same test as the policy's `status.pendingActivationTemplates`)
//! and, for at most `--max` of them, calls [`flotilla_detector::activate`], which records the
//! permission `flotilla.io/activate: <policy uid>/<generation>` on the template. The detector
//! then refreshes exactly that generation; a later policy edit is pending again.
//!
//! Lazy override policies (OverridePolicy / ClusterOverridePolicy with `activationPreference:
//! Lazy`) are rolled out the same way: a template whose binding records an older generation of
//! one (or none, for a policy that selects it now) has a pending override change, and activating
//! it records `flotilla.io/activate-overrides: <uid>/<generation>,...` on the template. A
//! template counts once toward `--max` whatever is pending for it.
//!
//! Selection and classification are pure ([`parse_target`], [`resolve_kind`], [`plan`]); the
//! I/O ([`run`]) lists templates, bindings and policies once, then activates.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::time::Duration;

use flotilla_api::overrides::{ClusterOverridePolicy, OverridePolicy, OverrideSnapshot};
use flotilla_api::policy::{ClusterPropagationPolicy, PropagationPolicy};
use flotilla_api::well_known::conditions::OVERRIDES_ACTIVATED;
use flotilla_api::well_known::{
    ACTIVATE_ANNOTATION, ACTIVATE_OVERRIDES_ANNOTATION, OVERRIDES_ANNOTATION, POLICY_GENERATION_ANNOTATION,
};
use flotilla_api::work::{ClusterResourceBinding, ResourceBinding};
use flotilla_detector::claim::Claim;
use flotilla_detector::keys::{PolicyKey, binding_name};
use flotilla_detector::overrides::{OverrideView, OverridesInput, is_activated};
use flotilla_detector::{ActivationState, TemplateRef, activation_state};
use flotilla_overrides::select::ObjectFacts;
use kube::api::{ApiResource, DynamicObject, ListParams};
use kube::{Api, Client, ResourceExt};

/// What the user asked for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ActivateOptions {
    /// `TYPE/NAME` or `TYPE` (every template of that type in scope), e.g. `deployment/nginx`,
    /// `deployments`, `deployments.apps/web`.
    pub targets: Vec<String>,
    /// Namespace (`None`: the kubeconfig context's namespace, else `default`).
    pub namespace: Option<String>,
    /// Every namespace.
    pub all_namespaces: bool,
    /// Label selector over the templates (`app=web,tier!=db`).
    pub selector: Option<String>,
    /// Activate at most this many pending templates.
    pub max: Option<usize>,
    /// Show what would be activated without writing.
    pub dry_run: bool,
    /// After activating, wait up to this long until the activated templates' bindings reflect
    /// the activated generation.
    pub wait: Option<Duration>,
}

/// Errors of `flotilla activate`.
#[derive(Debug, thiserror::Error)]
pub enum ActivateCliError {
    /// A target argument is malformed.
    #[error("{0}")]
    Target(String),
    /// The resource type is unknown or ambiguous.
    #[error("{0}")]
    Kind(String),
    /// An API call failed.
    #[error("{action}: {source}")]
    Kube {
        /// What was being done.
        action: String,
        /// The error.
        source: Box<kube::Error>,
    },
    /// The detector's activation failed for one template.
    #[error(transparent)]
    Activate(Box<flotilla_detector::ActivateError>),
    /// `--wait` ran out.
    #[error("timed out after {0:?} waiting for the detector to refresh: {1}; is flotilla-detector running?")]
    WaitTimeout(Duration, String),
}

fn kube_error(action: impl Into<String>) -> impl FnOnce(kube::Error) -> ActivateCliError {
    let action = action.into();
    move |source| ActivateCliError::Kube {
        action,
        source: Box::new(source),
    }
}

/// One `TYPE[/NAME]` argument.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// The resource type as typed: kind, plural, singular or short name, optionally `.group`.
    pub resource: String,
    /// The template's name; `None` selects every template of the type in scope.
    pub name: Option<String>,
}

/// Parses `TYPE/NAME` or `TYPE`.
pub fn parse_target(text: &str) -> Result<Target, ActivateCliError> {
    let bad = || {
        ActivateCliError::Target(format!(
            "{text:?} is not TYPE/NAME or TYPE (e.g. deployment/nginx, deployments)"
        ))
    };
    match text.split_once('/') {
        None if !text.is_empty() => Ok(Target {
            resource: text.to_owned(),
            name: None,
        }),
        Some((resource, name)) if !resource.is_empty() && !name.is_empty() && !name.contains('/') => {
            Ok(Target {
                resource: resource.to_owned(),
                name: Some(name.to_owned()),
            })
        }
        _ => Err(bad()),
    }
}

/// A served resource type, as discovery reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceType {
    /// API group (`""` for the core group).
    pub group: String,
    /// Preferred version.
    pub version: String,
    /// Kind.
    pub kind: String,
    /// Plural resource name.
    pub plural: String,
    /// Singular resource name (may be empty).
    pub singular: String,
    /// Short names.
    pub short_names: Vec<String>,
    /// Whether it is namespaced.
    pub namespaced: bool,
}

impl ResourceType {
    /// `apps/v1` or `v1`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `deployment.apps` or `configmap`, as kubectl prints it.
    pub fn display(&self) -> String {
        let kind = self.kind.to_lowercase();
        if self.group.is_empty() {
            kind
        } else {
            format!("{kind}.{}", self.group)
        }
    }

    fn api_resource(&self) -> ApiResource {
        ApiResource {
            group: self.group.clone(),
            version: self.version.clone(),
            api_version: self.api_version(),
            kind: self.kind.clone(),
            plural: self.plural.clone(),
        }
    }

    fn is_named(&self, name: &str) -> bool {
        let name = name.to_lowercase();
        self.plural == name
            || self.singular == name
            || self.kind.to_lowercase() == name
            || self.short_names.contains(&name)
    }
}

/// Resolves what the user typed (`deploy`, `deployments`, `Deployment`, `deployments.apps`) to
/// one served type, kubectl-style. A bare name that several groups serve is ambiguous unless
/// exactly one of them is a core or `apps` type (kubectl's priority for built-ins).
pub fn resolve_kind<'a>(
    typed: &str,
    types: &'a [ResourceType],
) -> Result<&'a ResourceType, ActivateCliError> {
    let (name, group) = match typed.split_once('.') {
        Some((name, group)) => (name, Some(group)),
        None => (typed, None),
    };
    let matches: Vec<&ResourceType> = types
        .iter()
        .filter(|t| t.is_named(name) && group.is_none_or(|g| t.group == g))
        .collect();
    match matches.as_slice() {
        [] => Err(ActivateCliError::Kind(format!(
            "the server has no resource type {typed:?}; see `kubectl api-resources`"
        ))),
        [one] => Ok(one),
        several => {
            let builtin: Vec<&&ResourceType> = several
                .iter()
                .filter(|t| t.group.is_empty() || t.group == "apps")
                .collect();
            match builtin.as_slice() {
                [one] => Ok(one),
                _ => Err(ActivateCliError::Kind(format!(
                    "resource type {typed:?} is ambiguous: {}; qualify it with its group",
                    several.iter().map(|t| t.display()).collect::<Vec<_>>().join(", ")
                ))),
            }
        }
    }
}

/// One selected template, classified.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidate {
    /// The template.
    pub template: TemplateRef,
    /// `deployment.apps/nginx -n team-a`, for printing.
    pub display: String,
    /// The claiming policy and its current `<uid>/<generation>`; `None` when unclaimed or the
    /// policy is gone.
    pub policy: Option<(PolicyKey, String)>,
    /// The binding's `flotilla.io/policy-generation`.
    pub binding_generation: Option<String>,
    /// The template's `flotilla.io/activate`.
    pub requested: Option<String>,
    /// Lazy override policy generations pending for the template: `(policy, <uid>/<generation>)`.
    pub overrides_pending: Vec<(String, String)>,
    /// The template's `flotilla.io/activate-overrides`.
    pub overrides_requested: Option<String>,
}

impl Candidate {
    /// Where the template stands with its override policies: `None` when nothing is pending.
    pub fn overrides_state(&self) -> Option<ActivationState> {
        if self.overrides_pending.is_empty() {
            return None;
        }
        let requested = self
            .overrides_pending
            .iter()
            .all(|(_, generation)| is_activated(self.overrides_requested.as_deref(), generation));
        Some(if requested {
            ActivationState::Requested
        } else {
            ActivationState::Pending
        })
    }

    /// Where the template stands with its propagation policy: `None` when unclaimed.
    pub fn policy_state(&self) -> Option<ActivationState> {
        let (_, generation) = self.policy.as_ref()?;
        Some(activation_state(
            generation,
            self.binding_generation.as_deref(),
            self.requested.as_deref(),
        ))
    }
}

/// What `flotilla activate` did (or, with `--dry-run`, would do).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Activated now: (template, policy, generation).
    pub activated: Vec<(String, String, i64)>,
    /// Already on the current generation.
    pub current: Vec<String>,
    /// Activation already requested, the detector has not refreshed yet.
    pub requested: Vec<String>,
    /// Pending but not activated (`--max` reached).
    pub left_pending: Vec<String>,
    /// Not claimed by any (existing) policy.
    pub unclaimed: Vec<String>,
    /// Whether nothing was written.
    pub dry_run: bool,
}

/// The decision for every candidate: which to activate (in order, at most `max` of the pending
/// ones; already requested or current ones do not count), which are current, requested, left
/// pending or unclaimed. Candidates are taken in namespace/name order so repeated `--max` runs
/// walk through the templates predictably.
pub fn plan(mut candidates: Vec<Candidate>, max: Option<usize>) -> (Vec<Candidate>, Report) {
    candidates.sort_by(|a, b| {
        (&a.template.namespace, &a.template.name, &a.display).cmp(&(
            &b.template.namespace,
            &b.template.name,
            &b.display,
        ))
    });
    candidates.dedup_by(|a, b| a.display == b.display);
    let mut report = Report::default();
    let mut chosen = Vec::new();
    for candidate in candidates {
        let states = [candidate.policy_state(), candidate.overrides_state()];
        if states.iter().all(Option::is_none) {
            report.unclaimed.push(candidate.display);
            continue;
        }
        let state = if states.contains(&Some(ActivationState::Pending)) {
            ActivationState::Pending
        } else if states.contains(&Some(ActivationState::Requested)) {
            ActivationState::Requested
        } else {
            ActivationState::Current
        };
        match state {
            ActivationState::Current => report.current.push(candidate.display),
            ActivationState::Requested => report.requested.push(candidate.display),
            ActivationState::Pending if max.is_none_or(|m| chosen.len() < m) => chosen.push(candidate),
            ActivationState::Pending => report.left_pending.push(candidate.display),
        }
    }
    (chosen, report)
}

/// Renders the report: one line per activated, requested and current template, then a summary.
pub fn render(report: &Report) -> String {
    let mut out = String::new();
    let verb = if report.dry_run {
        "would activate"
    } else {
        "activated"
    };
    for (template, policy, generation) in &report.activated {
        let _ = writeln!(out, "{verb} {template} ({policy} generation {generation})");
    }
    for template in &report.requested {
        let _ = writeln!(out, "already requested {template} (waiting for the detector)");
    }
    for template in &report.current {
        let _ = writeln!(out, "already current {template}");
    }
    let _ = writeln!(
        out,
        "{} {verb}, {} already current, {} already requested, {} still pending, {} not claimed by a policy",
        report.activated.len(),
        report.current.len(),
        report.requested.len(),
        report.left_pending.len(),
        report.unclaimed.len()
    );
    out
}

/// Every served resource type (preferred versions), with short names.
pub async fn discover(client: &Client) -> Result<Vec<ResourceType>, ActivateCliError> {
    let mut types = Vec::new();
    let mut add = |group: &str,
                   version: &str,
                   list: k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResourceList| {
        for r in list.resources {
            // Subresources (`deployments/status`) are not templates.
            if r.name.contains('/') || !r.verbs.iter().any(|v| v == "list") {
                continue;
            }
            types.push(ResourceType {
                group: group.to_owned(),
                version: version.to_owned(),
                kind: r.kind,
                plural: r.name,
                singular: r.singular_name,
                short_names: r.short_names.unwrap_or_default(),
                namespaced: r.namespaced,
            });
        }
    };
    let core = client
        .list_core_api_versions()
        .await
        .map_err(kube_error("discovering the core API"))?;
    if let Some(version) = core.versions.first() {
        let list = client
            .list_core_api_resources(version)
            .await
            .map_err(kube_error("discovering the core API"))?;
        add("", version, list);
    }
    let groups = client
        .list_api_groups()
        .await
        .map_err(kube_error("discovering API groups"))?;
    for group in groups.groups {
        let Some(preferred) = group
            .preferred_version
            .or_else(|| group.versions.first().cloned())
        else {
            continue;
        };
        let list = client
            .list_api_group_resources(&preferred.group_version)
            .await
            .map_err(kube_error(format!("discovering {}", preferred.group_version)))?;
        add(&group.name, &preferred.version, list);
    }
    Ok(types)
}

/// The policy's current `<uid>/<generation>`, or `None` when it is gone (or replaced).
async fn policy_generation(client: &Client, claim: &Claim) -> Result<Option<String>, ActivateCliError> {
    let metadata = match claim {
        Claim::PropagationPolicy { namespace, name, .. } => {
            Api::<PropagationPolicy>::namespaced(client.clone(), namespace)
                .get_opt(name)
                .await
                .map_err(kube_error(format!(
                    "reading PropagationPolicy {namespace}/{name}"
                )))?
                .map(|p| p.metadata)
        }
        Claim::ClusterPropagationPolicy { name, .. } => Api::<ClusterPropagationPolicy>::all(client.clone())
            .get_opt(name)
            .await
            .map_err(kube_error(format!("reading ClusterPropagationPolicy {name}")))?
            .map(|p| p.metadata),
    };
    Ok(metadata
        .filter(|m| m.uid.as_deref() == Some(claim.id()))
        .map(|m| format!("{}/{}", claim.id(), m.generation.unwrap_or(0))))
}

/// What `flotilla activate` reads of a binding: `flotilla.io/policy-generation` and what
/// `flotilla.io/overrides` records.
#[derive(Clone, Debug, Default)]
struct BindingRecord {
    generation: Option<String>,
    overrides: Vec<OverrideSnapshot>,
}

/// What every binding in scope records, by (namespace, binding name).
async fn binding_generations(
    client: &Client,
    namespaced: bool,
    namespace: Option<&str>,
) -> Result<HashMap<(String, String), BindingRecord>, ActivateCliError> {
    let mut out = HashMap::new();
    let lp = ListParams::default();
    let mut put = |ns: Option<String>, name: String, annotations: &BTreeMap<String, String>| {
        out.insert(
            (ns.unwrap_or_default(), name),
            BindingRecord {
                generation: annotations.get(POLICY_GENERATION_ANNOTATION).cloned(),
                overrides: OverrideSnapshot::parse_annotation(
                    annotations.get(OVERRIDES_ANNOTATION).map(String::as_str),
                ),
            },
        );
    };
    if namespaced {
        let api: Api<ResourceBinding> = match namespace {
            Some(ns) => Api::namespaced(client.clone(), ns),
            None => Api::all(client.clone()),
        };
        for b in api
            .list(&lp)
            .await
            .map_err(kube_error("listing ResourceBindings"))?
        {
            put(b.namespace(), b.name_any(), b.annotations());
        }
    } else {
        let api: Api<ClusterResourceBinding> = Api::all(client.clone());
        for b in api
            .list(&lp)
            .await
            .map_err(kube_error("listing ClusterResourceBindings"))?
        {
            put(None, b.name_any(), b.annotations());
        }
    }
    Ok(out)
}

/// Runs `flotilla activate`: selects, classifies, activates; returns the report.
pub async fn run(client: &Client, options: &ActivateOptions) -> Result<Report, ActivateCliError> {
    if options.targets.is_empty() {
        return Err(ActivateCliError::Target(
            "name what to activate: TYPE/NAME (deployment/nginx) or TYPE (deployments, with -l to select by label)"
                .into(),
        ));
    }
    let targets = options
        .targets
        .iter()
        .map(|t| parse_target(t))
        .collect::<Result<Vec<_>, _>>()?;
    let types = discover(client).await?;
    let namespace = match (&options.namespace, options.all_namespaces) {
        (_, true) => None,
        (Some(ns), false) => Some(ns.clone()),
        (None, false) => Some(client.default_namespace().to_owned()),
    };
    let mut candidates = Vec::new();
    let mut policies: HashMap<(PolicyKey, String), Option<String>> = HashMap::new();
    let mut bindings: HashMap<bool, HashMap<(String, String), BindingRecord>> = HashMap::new();
    let override_policies = override_views(client, namespace.as_deref()).await?;
    for target in &targets {
        let rt = resolve_kind(&target.resource, &types)?;
        let resource = rt.api_resource();
        let scope = if rt.namespaced { namespace.as_deref() } else { None };
        let api: Api<DynamicObject> = match scope {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
            None => Api::all_with(client.clone(), &resource),
        };
        let objects: Vec<DynamicObject> = match &target.name {
            Some(name) => {
                let object = api
                    .get_opt(name)
                    .await
                    .map_err(kube_error(format!("reading {}/{name}", rt.display())))?;
                match object {
                    Some(o) => vec![o],
                    None => {
                        return Err(ActivateCliError::Target(format!(
                            "{}/{name} not found{}",
                            rt.display(),
                            scope.map(|ns| format!(" in namespace {ns}")).unwrap_or_default()
                        )));
                    }
                }
            }
            None => {
                let mut lp = ListParams::default();
                if let Some(selector) = &options.selector {
                    lp = lp.labels(selector);
                }
                api.list(&lp)
                    .await
                    .map_err(kube_error(format!("listing {}", rt.plural)))?
                    .items
            }
        };
        if let std::collections::hash_map::Entry::Vacant(entry) = bindings.entry(rt.namespaced) {
            entry.insert(binding_generations(client, rt.namespaced, scope).await?);
        }
        for object in objects {
            let name = object.name_any();
            let ns = object.namespace().filter(|_| rt.namespaced);
            let display = match &ns {
                Some(ns) => format!("{}/{name} -n {ns}", rt.display()),
                None => format!("{}/{name}", rt.display()),
            };
            let value = serde_json::json!({"metadata": object.metadata});
            let mut policy = None;
            if let Some(claim) = Claim::read_object(&value) {
                let key = (claim.policy_key(), claim.id().to_owned());
                if !policies.contains_key(&key) {
                    let generation = policy_generation(client, &claim).await?;
                    policies.insert(key.clone(), generation);
                }
                policy = policies[&key].clone().map(|g| (key.0, g));
            }
            let record = bindings
                .get(&rt.namespaced)
                .and_then(|b| b.get(&(ns.clone().unwrap_or_default(), binding_name(&rt.kind, &name))))
                .cloned();
            let binding_generation = record.as_ref().and_then(|r| r.generation.clone());
            // Override policies only take effect on a binding.
            let overrides_pending = match &record {
                Some(record) => {
                    let facts = ObjectFacts::of(&flotilla_overrides::doc::Doc::from(&serde_json::json!({
                        "apiVersion": rt.api_version(),
                        "kind": rt.kind,
                        "metadata": object.metadata,
                    })));
                    let in_scope: Vec<OverrideView> = override_policies
                        .iter()
                        .filter(|v| v.key.namespace.is_none() || v.key.namespace == ns)
                        .cloned()
                        .collect();
                    pending_overrides(&facts, &record.overrides, &in_scope)
                }
                None => Vec::new(),
            };
            candidates.push(Candidate {
                template: TemplateRef {
                    api_version: rt.api_version(),
                    kind: rt.kind.clone(),
                    namespace: ns,
                    name,
                },
                display,
                policy,
                binding_generation,
                requested: object.annotations().get(ACTIVATE_ANNOTATION).cloned(),
                overrides_pending,
                overrides_requested: object.annotations().get(ACTIVATE_OVERRIDES_ANNOTATION).cloned(),
            });
        }
    }
    let (chosen, mut report) = plan(candidates, options.max);
    report.dry_run = options.dry_run;
    for candidate in &chosen {
        if candidate.overrides_state() == Some(ActivationState::Pending) {
            let generations: Vec<String> = candidate
                .overrides_pending
                .iter()
                .map(|(_, generation)| generation.clone())
                .collect();
            if !options.dry_run {
                flotilla_detector::activate_overrides(client, &candidate.template, &generations)
                    .await
                    .map_err(|e| ActivateCliError::Activate(Box::new(e)))?;
            }
            for (policy, generation) in &candidate.overrides_pending {
                report.activated.push((
                    candidate.display.clone(),
                    policy.clone(),
                    generation_number(generation),
                ));
            }
        }
        if candidate.policy_state() != Some(ActivationState::Pending) {
            continue;
        }
        let Some((policy, generation)) = candidate.policy.clone() else {
            continue;
        };
        let number = generation_number(&generation);
        if options.dry_run {
            report
                .activated
                .push((candidate.display.clone(), policy.to_string(), number));
            continue;
        }
        let activation = flotilla_detector::activate(client, &candidate.template)
            .await
            .map_err(|e| ActivateCliError::Activate(Box::new(e)))?;
        let number = Some(generation_number(&activation.generation))
            .filter(|n| *n != 0)
            .unwrap_or(number);
        if activation.already_active {
            report.current.push(candidate.display.clone());
        } else {
            report
                .activated
                .push((candidate.display.clone(), activation.policy.to_string(), number));
        }
    }
    if let (Some(timeout), false) = (options.wait, options.dry_run) {
        wait_refreshed(client, &chosen, timeout).await?;
    }
    Ok(report)
}

/// The generation of a `<uid>/<generation>` reference (0 when malformed).
fn generation_number(generation: &str) -> i64 {
    generation
        .rsplit_once('/')
        .and_then(|(_, g)| g.parse().ok())
        .unwrap_or_default()
}

/// Every ClusterOverridePolicy and the OverridePolicies in `namespace` (`None`: all).
async fn override_views(
    client: &Client,
    namespace: Option<&str>,
) -> Result<Vec<OverrideView>, ActivateCliError> {
    let lp = ListParams::default();
    let ops: Api<OverridePolicy> = match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let mut views: Vec<OverrideView> = ops
        .list(&lp)
        .await
        .map_err(kube_error("listing OverridePolicies"))?
        .iter()
        .map(OverrideView::of_override_policy)
        .collect();
    views.extend(
        Api::<ClusterOverridePolicy>::all(client.clone())
            .list(&lp)
            .await
            .map_err(kube_error("listing ClusterOverridePolicies"))?
            .iter()
            .map(OverrideView::of_cluster_override_policy),
    );
    Ok(views)
}

/// The Lazy override generations pending for a template whose binding records `recorded`:
/// `(policy, <uid>/<generation>)`. The same test as the detector's `OverridesActivated`
/// condition, without the template's own changes (a template changed since its binding was
/// written is refreshed by the detector anyway).
pub fn pending_overrides(
    template: &ObjectFacts,
    recorded: &[OverrideSnapshot],
    policies: &[OverrideView],
) -> Vec<(String, String)> {
    flotilla_detector::overrides::decide(&OverridesInput {
        template,
        content_revision: None,
        activation: None,
        recorded,
        policies,
    })
    .pending
    .into_iter()
    .map(|p| (p.policy.to_string(), p.generation_ref()))
    .collect()
}

/// Waits until every chosen template's binding records its policy's current generation.
async fn wait_refreshed(
    client: &Client,
    chosen: &[Candidate],
    timeout: Duration,
) -> Result<(), ActivateCliError> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let mut waiting = Vec::new();
        for candidate in chosen {
            let generation = candidate
                .policy
                .as_ref()
                .map(|(_, g)| g.as_str())
                .unwrap_or_default();
            let key = candidate.template.key();
            let view = flotilla_detector::api::BindingApi::for_template(client, &key)
                .get(&key.binding_name())
                .await
                .map_err(|e| ActivateCliError::Target(e.to_string()))?;
            let policy_current = candidate.policy_state() != Some(ActivationState::Pending)
                || view
                    .as_ref()
                    .and_then(|b| b.annotation(POLICY_GENERATION_ANNOTATION))
                    .is_some_and(|g| g == generation);
            let overrides_current = candidate.overrides_state().is_none()
                || view.as_ref().is_some_and(|b| {
                    flotilla_api::conditions::find(&b.conditions, OVERRIDES_ACTIVATED)
                        .is_none_or(|c| c.status != "False")
                });
            if !policy_current || !overrides_current {
                waiting.push(candidate.display.clone());
            }
        }
        if waiting.is_empty() {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(ActivateCliError::WaitTimeout(timeout, waiting.join(", ")));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rt(group: &str, kind: &str, plural: &str, short: &[&str]) -> ResourceType {
        ResourceType {
            group: group.into(),
            version: "v1".into(),
            kind: kind.into(),
            plural: plural.into(),
            singular: kind.to_lowercase(),
            short_names: short.iter().map(|s| (*s).to_owned()).collect(),
            namespaced: true,
        }
    }

    #[test]
    fn targets() {
        assert_eq!(
            parse_target("deployment/nginx").unwrap(),
            Target {
                resource: "deployment".into(),
                name: Some("nginx".into())
            }
        );
        assert_eq!(
            parse_target("deployments").unwrap(),
            Target {
                resource: "deployments".into(),
                name: None
            }
        );
        for bad in ["", "/x", "deployment/", "a/b/c"] {
            let err = parse_target(bad).unwrap_err().to_string();
            assert!(err.contains("TYPE/NAME"), "{bad}: {err}");
        }
    }

    #[test]
    fn kinds() {
        let types = vec![
            rt("apps", "Deployment", "deployments", &["deploy"]),
            rt("", "ConfigMap", "configmaps", &["cm"]),
            rt("example.com", "Deployment", "deployments", &[]),
            rt("a.io", "Widget", "widgets", &[]),
            rt("b.io", "Widget", "widgets", &[]),
        ];
        for typed in [
            "deploy",
            "deployment",
            "deployments",
            "Deployment",
            "deployments.apps",
        ] {
            assert_eq!(resolve_kind(typed, &types).unwrap().group, "apps", "{typed}");
        }
        assert_eq!(
            resolve_kind("deployments.example.com", &types).unwrap().group,
            "example.com"
        );
        assert_eq!(resolve_kind("cm", &types).unwrap().kind, "ConfigMap");
        let err = resolve_kind("widgets", &types).unwrap_err().to_string();
        assert!(err.contains("ambiguous") && err.contains("widget.a.io"), "{err}");
        assert_eq!(resolve_kind("widgets.b.io", &types).unwrap().group, "b.io");
        let err = resolve_kind("gadgets", &types).unwrap_err().to_string();
        assert!(err.contains("no resource type \"gadgets\""), "{err}");
    }

    fn candidate(name: &str, binding: Option<&str>, requested: Option<&str>, claimed: bool) -> Candidate {
        Candidate {
            template: TemplateRef {
                api_version: "apps/v1".into(),
                kind: "Deployment".into(),
                namespace: Some("ns".into()),
                name: name.into(),
            },
            display: format!("deployment.apps/{name} -n ns"),
            policy: claimed.then(|| (PolicyKey::propagation("ns", "p"), "u/2".to_owned())),
            binding_generation: binding.map(str::to_owned),
            requested: requested.map(str::to_owned),
            overrides_pending: vec![],
            overrides_requested: None,
        }
    }

    #[test]
    fn plan_counts_only_pending_toward_max() {
        let candidates = vec![
            candidate("e", Some("u/1"), None, true),
            candidate("a", Some("u/2"), None, true),
            candidate("d", None, None, true),
            candidate("b", Some("u/1"), Some("u/2"), true),
            candidate("c", Some("u/1"), Some("u/1"), true),
            candidate("f", None, None, false),
            candidate("g", Some("u/1"), None, true),
        ];
        let (chosen, report) = plan(candidates.clone(), Some(2));
        let names: Vec<&str> = chosen.iter().map(|c| c.template.name.as_str()).collect();
        assert_eq!(names, ["c", "d"], "pending ones in name order, at most 2");
        assert_eq!(report.current, ["deployment.apps/a -n ns"]);
        assert_eq!(report.requested, ["deployment.apps/b -n ns"]);
        assert_eq!(
            report.left_pending,
            ["deployment.apps/e -n ns", "deployment.apps/g -n ns"]
        );
        assert_eq!(report.unclaimed, ["deployment.apps/f -n ns"]);
        let (chosen, report) = plan(candidates.clone(), None);
        assert_eq!(chosen.len(), 4);
        assert!(report.left_pending.is_empty());
        let (chosen, report) = plan(candidates, Some(0));
        assert!(chosen.is_empty());
        assert_eq!(report.left_pending.len(), 4);
        // The same template named twice counts once.
        let (chosen, _) = plan(
            vec![candidate("x", None, None, true), candidate("x", None, None, true)],
            None,
        );
        assert_eq!(chosen.len(), 1);
    }

    #[test]
    fn rendering() {
        let report = Report {
            activated: vec![(
                "deployment.apps/c -n ns".into(),
                PolicyKey::propagation("ns", "p").to_string(),
                2,
            )],
            current: vec!["deployment.apps/a -n ns".into()],
            requested: vec![],
            left_pending: vec!["deployment.apps/e -n ns".into()],
            unclaimed: vec![],
            dry_run: false,
        };
        assert_eq!(
            render(&report),
            "activated deployment.apps/c -n ns (PropagationPolicy ns/p generation 2)\n\
             already current deployment.apps/a -n ns\n\
             1 activated, 1 already current, 0 already requested, 1 still pending, 0 not claimed by a policy\n"
        );
        let dry = Report {
            dry_run: true,
            ..report
        };
        assert!(render(&dry).starts_with("would activate deployment.apps/c"));
    }

    #[test]
    fn override_changes_count_like_policy_changes() {
        let with_overrides =
            |name: &str, claimed: bool, binding: Option<&str>, requested: Option<&str>| Candidate {
                overrides_pending: vec![
                    ("OverridePolicy ns/op".into(), "op-uid/3".into()),
                    ("ClusterOverridePolicy cop".into(), "cop-uid/1".into()),
                ],
                overrides_requested: requested.map(str::to_owned),
                ..candidate(name, binding, None, claimed)
            };
        let candidates = vec![
            // Policy current, overrides pending.
            with_overrides("a", true, Some("u/2"), None),
            // Both pending: still one template toward --max.
            with_overrides("b", true, Some("u/1"), None),
            // Overrides requested (every pending generation named).
            with_overrides("c", true, Some("u/2"), Some("cop-uid/1,op-uid/3")),
            // Only one of them requested: still pending.
            with_overrides("d", true, Some("u/2"), Some("op-uid/3")),
            // A released binding (no claim) with a pending override: not "unclaimed".
            with_overrides("e", false, None, None),
        ];
        let (chosen, report) = plan(candidates, Some(3));
        let names: Vec<&str> = chosen.iter().map(|c| c.template.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "d"]);
        assert_eq!(report.requested, ["deployment.apps/c -n ns"]);
        assert_eq!(report.left_pending, ["deployment.apps/e -n ns"]);
        assert!(report.unclaimed.is_empty());
        assert_eq!(chosen[0].policy_state(), Some(ActivationState::Current));
        assert_eq!(chosen[0].overrides_state(), Some(ActivationState::Pending));
    }

    #[test]
    fn pending_overrides_against_the_binding() {
        use flotilla_api::overrides::OverridePolicyKind;
        use flotilla_detector::overrides::OverrideKey;
        let view = |lazy: bool, generation: i64| OverrideView {
            key: OverrideKey {
                kind: OverridePolicyKind::OverridePolicy,
                namespace: Some("ns".into()),
                name: "op".into(),
            },
            uid: "op-uid".into(),
            generation,
            revision: Some(flotilla_api::revision::Revision::from(10)),
            valid: true,
            spec: serde_json::from_value(serde_json::json!({
                "activationPreference": if lazy { Some("Lazy") } else { None },
            }))
            .unwrap(),
        };
        let facts = ObjectFacts {
            api_version: "apps/v1".into(),
            kind: "Deployment".into(),
            namespace: "ns".into(),
            name: "web".into(),
            labels: Default::default(),
        };
        // A Lazy policy the binding does not record yet.
        assert_eq!(
            pending_overrides(&facts, &[], &[view(true, 3)]),
            vec![("OverridePolicy ns/op".to_owned(), "op-uid/3".to_owned())]
        );
        // Recorded at the current generation: nothing pending.
        assert!(pending_overrides(&facts, &[view(true, 3).snapshot()], &[view(true, 3)]).is_empty());
        // An older generation recorded: pending.
        assert_eq!(
            pending_overrides(&facts, &[view(true, 2).snapshot()], &[view(true, 3)]).len(),
            1
        );
        // Eager policies are never pending.
        assert!(pending_overrides(&facts, &[], &[view(false, 3)]).is_empty());
    }
}
