//! Tests of [`super::plan_template`]: claims, binding content, lazy activation and the seed's
//! cases, each run through the whole pure reconcile and then re-run on its own result to prove
//! it settles.

#![allow(clippy::unwrap_used)]

use flotilla_api::policy::{
    ClusterAffinity, Placement, PreemptionBehavior, PropagationSpec, ResourceSelector,
};
use flotilla_api::revision::Revision;
use flotilla_api::well_known::{
    ACTIVATE_ANNOTATION, ACTIVATION_PREFERENCE_ANNOTATION, CLAIM_REVISION_ANNOTATION,
    CONTENT_REVISION_ANNOTATION, LAZY_BASELINE_ANNOTATION, POLICY_GENERATION_ANNOTATION,
    TEMPLATE_FINGERPRINT_ANNOTATION, TRACE_PARENT_ANNOTATION,
};
use flotilla_api::work::ResourceBinding;
use flotilla_api::{ActivationPreference, ResourceBindingStatus};
use k8s_openapi::jiff::Timestamp;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::*;
use crate::binding::BindingView;
use crate::content::{CachedTemplate, TemplateContent};
use crate::keys::{Gvk, PolicyKey, TemplateKey};
use crate::lazy::{LazyAction, RefreshReason};
use crate::matching::{ClaimChange, PolicyView};

fn ts(seconds: i64) -> Timestamp {
    Timestamp::from_second(seconds).unwrap()
}

fn key() -> TemplateKey {
    TemplateKey {
        gvk: Gvk::new("apps/v1", "Deployment"),
        namespace: Some("default".into()),
        name: "nginx".into(),
    }
}

/// The nginx Deployment of the seed, created at revision `created` (its resourceVersion).
fn nginx(created: u64) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {
            "name": "nginx", "namespace": "default", "uid": "nginx-uid",
            "resourceVersion": created.to_string(),
            "creationTimestamp": ts(1_000_000).to_string(), "labels": {"app": "nginx"},
        },
        "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "nginx", "image": "nginx"}]}}},
    })
}

fn selector() -> ResourceSelector {
    ResourceSelector {
        api_version: "apps/v1".into(),
        kind: "Deployment".into(),
        name: Some("nginx".into()),
        ..Default::default()
    }
}

fn placement(cluster: &str) -> Placement {
    Placement {
        cluster_affinity: Some(ClusterAffinity {
            cluster_names: vec![cluster.into()],
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A policy whose spec (generation 1) was written at revision `at`.
fn policy(key: PolicyKey, cluster: &str, lazy: bool, at: u64) -> PolicyView {
    PolicyView {
        uid: format!("uid-{}", key.name),
        key,
        generation: 1,
        spec: PropagationSpec {
            resource_selectors: vec![selector()],
            placement: placement(cluster),
            activation_preference: lazy.then_some(ActivationPreference::Lazy),
            ..Default::default()
        },
        valid: true,
        deleting: false,
        revision: Some(Revision::from(at)),
        selectors_revision: Some(Revision::from(at)),
        deleted_at: None,
    }
}

fn pp(name: &str, cluster: &str, lazy: bool, at: u64) -> PolicyView {
    policy(PolicyKey::propagation("default", name), cluster, lazy, at)
}

fn cpp(name: &str, cluster: &str, lazy: bool, at: u64) -> PolicyView {
    policy(PolicyKey::cluster(name), cluster, lazy, at)
}

/// A policy edit written at revision `at`: a new generation with a new placement.
fn edited(mut p: PolicyView, cluster: &str, at: u64) -> PolicyView {
    p.generation += 1;
    p.spec.placement = placement(cluster);
    p.revision = Some(Revision::from(at));
    p
}

/// Applies a JSON merge patch (RFC 7386).
fn merge(target: &mut Value, patch: &Value) {
    match patch {
        Value::Object(patch) => {
            if !target.is_object() {
                *target = json!({});
            }
            let map = target.as_object_mut().unwrap();
            for (k, v) in patch {
                if v.is_null() {
                    map.remove(k);
                } else {
                    merge(map.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        other => *target = other.clone(),
    }
}

/// A control plane in memory: one template and its binding, updated by applying plans the way
/// the controller does, with one revision counter for every write (as an API server has).
struct World {
    template: Value,
    binding: Option<Value>,
    /// The override policies that exist.
    overrides: Vec<crate::overrides::OverrideView>,
    writes: Vec<&'static str>,
    schedules: usize,
    clock: u64,
}

impl World {
    fn new(template: Value) -> Self {
        let clock = template["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        Self {
            template,
            binding: None,
            overrides: vec![],
            writes: vec![],
            schedules: 0,
            clock,
        }
    }

    /// The revision of the next write (a policy written by the test, say).
    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    fn view(&self) -> Option<BindingView> {
        self.binding.as_ref().map(|b| {
            let rb: ResourceBinding = serde_json::from_value(b.clone()).unwrap();
            BindingView::from_resource_binding(&rb)
        })
    }

    fn plan(&self, policies: &[PolicyView]) -> TemplatePlan {
        let view = self.view();
        // The detector's cache holds metadata and the content's digest: plan from exactly that,
        // so a plan that read the content any other way would fail here.
        let cached = CachedTemplate::of(&key().gvk, serde_json::from_value(self.template.clone()).unwrap());
        plan_template(&TemplateInput {
            key: &key(),
            object: &cached.json(&key().gvk),
            content: &cached.content,
            policies,
            binding: view.as_ref(),
            traceparent: Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
            overrides: &self.overrides,
        })
    }

    /// Plans and applies; returns the plan.
    fn reconcile(&mut self, policies: &[PolicyView]) -> TemplatePlan {
        let plan = self.plan(policies);
        if let Some(patch) = &plan.template_patch {
            // The write carries the planned-on resourceVersion as its precondition.
            assert_eq!(
                patch["metadata"]["resourceVersion"], self.template["metadata"]["resourceVersion"],
                "template writes carry their precondition"
            );
            merge(&mut self.template, patch);
            let rv = self.tick();
            self.template["metadata"]["resourceVersion"] = json!(rv.to_string());
            self.writes.push("template");
        }
        match &plan.binding {
            BindingWrite::None => {}
            BindingWrite::Create {
                object,
                conditions: changes,
            } => {
                let mut object = object.clone();
                let mut conditions = vec![];
                ConditionChange::apply_all(changes, &mut conditions, ts(10_000));
                object["status"] = json!({ "conditions": conditions });
                self.binding = Some(object);
                self.writes.push("binding-create");
                self.schedules += 1;
            }
            BindingWrite::Update {
                patch,
                spec_changed,
                conditions: changes,
            } => {
                let binding = self.binding.as_mut().unwrap();
                if let Some(patch) = patch {
                    merge(binding, patch);
                    self.writes.push(if *spec_changed {
                        "binding-spec"
                    } else {
                        "binding-metadata"
                    });
                }
                if *spec_changed {
                    self.schedules += 1;
                }
                if !changes.is_empty() {
                    let view = self.view().unwrap();
                    let mut conditions = view.conditions.clone();
                    for change in changes {
                        assert!(
                            change.apply(&mut conditions, ts(10_000)),
                            "a planned condition change changes"
                        );
                    }
                    self.binding.as_mut().unwrap()["status"] = json!({ "conditions": conditions });
                    self.writes.push("binding-status");
                }
            }
        }
        // A second pass on the result writes nothing: the reconcile is idempotent.
        let again = self.plan(policies);
        assert!(
            again.is_noop(),
            "not settled after {plan:#?}\nsecond plan {again:#?}"
        );
        plan
    }

    /// A user edit of the template (the seed's `refresh-time` label).
    fn touch(&mut self, value: &str) {
        self.template["metadata"]["labels"]["refresh-time"] = json!(value);
        let rv = self.tick();
        self.template["metadata"]["resourceVersion"] = json!(rv.to_string());
    }

    /// A write to the template that changes no content (a status update, say).
    fn write_status(&mut self, status: Value) {
        self.template["status"] = status;
        let rv = self.tick();
        self.template["metadata"]["resourceVersion"] = json!(rv.to_string());
    }

    fn clusters(&self) -> Option<Vec<String>> {
        let view = self.view()?;
        Some(
            view.spec
                .placement
                .and_then(|p| p.cluster_affinity)
                .map(|a| a.cluster_names)
                .unwrap_or_default(),
        )
    }

    fn claim(&self) -> Option<PolicyKey> {
        crate::claim::Claim::read_object(&self.template).map(|c| c.policy_key())
    }

    fn binding_annotation(&self, key: &str) -> Option<String> {
        self.view().and_then(|v| v.annotation(key).map(str::to_owned))
    }

    fn activated(&self) -> Option<(String, String)> {
        let view = self.view()?;
        let c = view.conditions.iter().find(|c| c.type_ == "PolicyActivated")?;
        Some((c.status.clone(), c.reason.clone()))
    }

    fn take_writes(&mut self) -> Vec<&'static str> {
        std::mem::take(&mut self.writes)
    }
}

#[test]
fn claim_and_binding_content() {
    let p = pp("pp", "member1", false, 0);
    let mut world = World::new(nginx(100));
    let plan = world.reconcile(std::slice::from_ref(&p));
    assert_eq!(plan.outcome, Outcome::Claimed);
    assert_eq!(plan.claim_change, Some(ClaimChange::Hit));
    assert_eq!(world.take_writes(), vec!["template", "binding-create"]);
    assert_eq!(world.claim(), Some(p.key.clone()));
    let labels = &world.template["metadata"]["labels"];
    assert_eq!(labels["propagationpolicy.karmada.io/permanent-id"], "uid-pp");
    assert_eq!(labels["app"], "nginx", "user labels untouched");
    let binding = world.binding.clone().unwrap();
    assert_eq!(binding["metadata"]["name"], "nginx-deployment");
    assert_eq!(binding["metadata"]["namespace"], "default");
    assert_eq!(
        binding["metadata"]["labels"]["propagationpolicy.karmada.io/permanent-id"],
        "uid-pp"
    );
    assert_eq!(
        binding["metadata"]["annotations"]["propagationpolicy.karmada.io/name"],
        "pp"
    );
    assert_eq!(
        binding["metadata"]["annotations"]["propagationpolicy.karmada.io/namespace"],
        "default"
    );
    assert_eq!(
        binding["metadata"]["annotations"][POLICY_GENERATION_ANNOTATION],
        "uid-pp/1"
    );
    assert_eq!(
        binding["metadata"]["annotations"][TEMPLATE_FINGERPRINT_ANNOTATION],
        crate::fingerprint::fingerprint(&nginx(100))
    );
    assert!(binding["metadata"]["annotations"][TRACE_PARENT_ANNOTATION].is_string());
    assert_eq!(binding["metadata"]["ownerReferences"][0]["uid"], "nginx-uid");
    // Created with execution's finalizer: execution does not have to add it.
    assert_eq!(
        binding["metadata"]["finalizers"],
        json!([flotilla_api::well_known::BINDING_CONTROLLER_FINALIZER])
    );
    assert_eq!(binding["spec"]["replicas"], 2);
    assert_eq!(binding["spec"]["resource"]["resourceVersion"], "100");
    assert_eq!(world.clusters(), Some(vec!["member1".to_string()]));
    assert_eq!(world.activated(), Some(("True".into(), "PolicyActivated".into())));
    // The claim write recorded the content's revision (before the write) and moved the
    // template's resourceVersion on.
    assert_eq!(
        world.template["metadata"]["annotations"][CONTENT_REVISION_ANNOTATION],
        format!("{}@100", crate::fingerprint::fingerprint(&nginx(100)))
    );
    assert_eq!(world.template["metadata"]["resourceVersion"], "101");

    // Re-running changes nothing (the World asserts it); the claim write itself does not
    // change the fingerprint, so the binding keeps the template's old resourceVersion.
    let plan = world.reconcile(std::slice::from_ref(&p));
    assert_eq!(plan.outcome, Outcome::Unchanged);
    assert!(world.take_writes().is_empty());

    // A template change refreshes the spec (new resourceVersion, replicas).
    world.template["spec"]["replicas"] = json!(5);
    let rv = world.tick();
    world.template["metadata"]["resourceVersion"] = json!(rv.to_string());
    let plan = world.reconcile(std::slice::from_ref(&p));
    assert_eq!(plan.outcome, Outcome::Refreshed);
    assert_eq!(world.take_writes(), vec!["binding-spec"]);
    let binding = world.binding.clone().unwrap();
    assert_eq!(binding["spec"]["replicas"], 5);
    assert_eq!(binding["spec"]["resource"]["resourceVersion"], rv.to_string());

    // Status changes do not count.
    world.write_status(json!({"readyReplicas": 5}));
    assert!(world.reconcile(std::slice::from_ref(&p)).is_noop());
}

#[test]
fn scheduler_and_distributor_fields_are_never_written() {
    let p = pp("pp", "member1", false, 0);
    let mut world = World::new(nginx(100));
    world.reconcile(std::slice::from_ref(&p));
    let binding = world.binding.as_mut().unwrap();
    binding["spec"]["clusters"] = json!([{"name": "member1", "replicas": 2}]);
    binding["spec"]["requiredBy"] = json!([{"namespace": "default", "name": "x"}]);
    let p2 = edited(p, "member2", world.tick());
    let plan = world.plan(std::slice::from_ref(&p2));
    let BindingWrite::Update {
        patch: Some(patch), ..
    } = &plan.binding
    else {
        panic!("{plan:?}")
    };
    assert!(patch["spec"].get("clusters").is_none());
    assert!(patch["spec"].get("requiredBy").is_none());
    assert!(patch["spec"].get("placement").is_some());
}

#[test]
fn attached_binding_gets_the_detector_fields_added() {
    let p = pp("pp", "member1", false, 0);
    let mut world = World::new(nginx(100));
    world.binding = Some(json!({
        "apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
        "metadata": {"name": "nginx-deployment", "namespace": "default", "uid": "b"},
        "spec": {
            "resource": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "default", "name": "nginx"},
            "requiredBy": [{"namespace": "default", "name": "app-deployment", "clusters": [{"name": "member3"}]}],
            "clusters": [{"name": "member3"}],
        },
    }));
    let plan = world.reconcile(std::slice::from_ref(&p));
    assert_eq!(plan.outcome, Outcome::Claimed);
    let binding = world.binding.clone().unwrap();
    assert_eq!(binding["spec"]["requiredBy"][0]["name"], "app-deployment");
    assert_eq!(binding["spec"]["clusters"], json!([{"name": "member3"}]));
    assert_eq!(world.clusters(), Some(vec!["member1".to_string()]));
    assert_eq!(binding["metadata"]["ownerReferences"][0]["uid"], "nginx-uid");
    assert_eq!(
        binding["metadata"]["annotations"]["propagationpolicy.karmada.io/name"],
        "pp"
    );
}

#[test]
fn ignored_templates() {
    let p = cpp("cpp", "member1", false, 0);
    for (namespace, labels) in [
        ("kube-system", json!({})),
        ("karmada-system", json!({})),
        ("flotilla-system", json!({})),
        ("default", json!({"karmada.io/managed": "true"})),
    ] {
        let mut t = nginx(100);
        t["metadata"]["namespace"] = json!(namespace);
        t["metadata"]["labels"] = labels;
        let k = TemplateKey {
            namespace: Some(namespace.into()),
            ..key()
        };
        let plan = plan_template(&TemplateInput {
            key: &k,
            object: &t,
            content: &TemplateContent::of(&t),
            policies: std::slice::from_ref(&p),
            binding: None,
            traceparent: None,
            overrides: &[],
        });
        assert_eq!(plan.outcome, Outcome::Ignored, "{namespace}");
        assert!(plan.is_noop());
    }
    let mut deleting = nginx(100);
    deleting["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    let plan = plan_template(&TemplateInput {
        key: &key(),
        object: &deleting,
        content: &TemplateContent::of(&deleting),
        policies: std::slice::from_ref(&p),
        binding: None,
        traceparent: None,
        overrides: &[],
    });
    assert_eq!(plan.outcome, Outcome::Ignored);
    let own = TemplateKey {
        gvk: Gvk::new("work.karmada.io/v1alpha2", "ResourceBinding"),
        ..key()
    };
    assert!(is_ignored(&own, &json!({})));
}

#[test]
fn invalid_template_keeps_the_claim_and_warns() {
    let p = pp("pp", "member1", false, 0);
    let mut world = World::new(nginx(100));
    world.template["spec"]["replicas"] = json!("many");
    let plan = world.reconcile(std::slice::from_ref(&p));
    assert_eq!(plan.outcome, Outcome::InvalidTemplate);
    let warning = plan.warning.unwrap();
    assert_eq!(warning.reason, "InvalidTemplate");
    assert!(warning.message.contains("spec.replicas"), "{}", warning.message);
    assert_eq!(world.claim(), Some(p.key.clone()));
    assert!(world.binding.is_none());
}

#[test]
fn policy_deleted_keeps_the_binding_and_releases_the_claim() {
    let p = pp("pp", "member1", false, 0);
    let mut world = World::new(nginx(100));
    world.reconcile(std::slice::from_ref(&p));
    world.take_writes();
    let plan = world.reconcile(&[]);
    assert_eq!(plan.outcome, Outcome::Unclaimed);
    assert_eq!(world.claim(), None);
    assert_eq!(
        world.clusters(),
        Some(vec!["member1".to_string()]),
        "binding spec kept"
    );
    let binding = world.binding.clone().unwrap();
    assert!(
        binding["metadata"]["labels"]
            .get("propagationpolicy.karmada.io/permanent-id")
            .is_none()
    );
    assert!(
        binding["metadata"]["annotations"]
            .get("propagationpolicy.karmada.io/name")
            .is_none()
    );
    assert_eq!(world.activated(), None);
    assert_eq!(
        world.take_writes(),
        vec!["template", "binding-metadata", "binding-status"]
    );
    // Nothing more to do.
    assert_eq!(world.reconcile(&[]).outcome, Outcome::Unchanged);
}

#[test]
fn invalid_policy_freezes_claim_and_binding() {
    let p = pp("pp", "member1", false, 0);
    let mut world = World::new(nginx(100));
    world.reconcile(std::slice::from_ref(&p));
    world.take_writes();
    let mut broken = edited(p.clone(), "member2", world.tick());
    broken.valid = false;
    world.touch("1");
    let plan = world.reconcile(std::slice::from_ref(&broken));
    assert_eq!(plan.outcome, Outcome::InvalidPolicy);
    assert_eq!(plan.policy, Some(p.key.clone()));
    assert!(
        world.take_writes().is_empty(),
        "frozen even though the template changed"
    );
    assert_eq!(world.clusters(), Some(vec!["member1".to_string()]));
    // Valid again: the template change and the new generation apply.
    let fixed = edited(p, "member2", world.tick());
    let plan = world.reconcile(std::slice::from_ref(&fixed));
    assert_eq!(plan.outcome, Outcome::Refreshed);
    assert_eq!(world.clusters(), Some(vec!["member2".to_string()]));
}

#[test]
fn suspension_is_canonical_on_the_binding() {
    let mut p = pp("pp", "member1", false, 0);
    p.spec.suspension = Some(flotilla_api::Suspension {
        suspend_dispatching: Some(true),
        ..Default::default()
    });
    let mut world = World::new(nginx(100));
    world.reconcile(std::slice::from_ref(&p));
    let binding = world.binding.clone().unwrap();
    assert_eq!(binding["spec"]["suspension"], json!({"dispatching": true}));
}

#[test]
fn cluster_policy_claims_with_its_own_keys_and_pp_preempts() {
    let c = cpp("cpp", "member1", false, 0);
    let mut world = World::new(nginx(100));
    world.reconcile(std::slice::from_ref(&c));
    assert_eq!(world.claim(), Some(c.key.clone()));
    assert_eq!(
        world.template["metadata"]["annotations"]["clusterpropagationpolicy.karmada.io/name"],
        "cpp"
    );
    let mut p = pp("pp", "member2", false, 0);
    p.spec.preemption = Some(PreemptionBehavior::Always);
    let policies = vec![c.clone(), p.clone()];
    let plan = world.reconcile(&policies);
    assert_eq!(
        plan.claim_change,
        Some(ClaimChange::Preempted { from: c.key.clone() })
    );
    assert_eq!(world.claim(), Some(p.key.clone()));
    let annotations = world.template["metadata"]["annotations"].clone();
    assert!(
        annotations
            .get("clusterpropagationpolicy.karmada.io/name")
            .is_none()
    );
    assert_eq!(world.clusters(), Some(vec!["member2".to_string()]));
    let binding = world.binding.clone().unwrap();
    assert!(
        binding["metadata"]["labels"]
            .get("clusterpropagationpolicy.karmada.io/permanent-id")
            .is_none()
    );
    assert_eq!(
        binding["metadata"]["labels"]["propagationpolicy.karmada.io/permanent-id"],
        "uid-pp"
    );
}

// ----------------------------------------------------------------------------------------------
// Lazy activation: the seed's test plan. Revisions: policies "created before the resource" are
// written at 100, the resource at 200, everything later at the World's clock.
// ----------------------------------------------------------------------------------------------

fn lazy_action(plan: &TemplatePlan) -> LazyAction {
    plan.lazy.unwrap()
}

/// Simple Case 1 (policy created before resource): propagated at once; deleting the policy
/// leaves propagation unchanged.
#[test]
fn simple_case_1_policy_created_before_resource() {
    let p = pp("pp", "member1", true, 100);
    let mut world = World::new(nginx(200));
    let plan = world.reconcile(std::slice::from_ref(&p));
    assert_eq!(
        lazy_action(&plan),
        LazyAction::Refresh(RefreshReason::TemplateNewer)
    );
    assert_eq!(world.clusters(), Some(vec!["member1".to_string()]));
    world.reconcile(&[]);
    assert_eq!(world.clusters(), Some(vec!["member1".to_string()]));
}

/// Simple Case 2 (policy created after resource): no propagation until the resource changes —
/// however many times the detector looks, and although its own claim write moved the
/// template's resourceVersion past the policy's.
#[test]
fn simple_case_2_policy_created_after_resource() {
    let mut world = World::new(nginx(200));
    let p = pp("pp", "member1", true, world.tick());
    let plan = world.reconcile(std::slice::from_ref(&p));
    assert_eq!(plan.outcome, Outcome::Claimed);
    assert_eq!(lazy_action(&plan), LazyAction::Pending);
    assert!(world.binding.is_none(), "no propagation");
    assert_eq!(
        world.template["metadata"]["annotations"][CONTENT_REVISION_ANNOTATION],
        format!("{}@200", crate::fingerprint::fingerprint(&nginx(200)))
    );
    // Again (e.g. after a restart), and after writes that change no content: still nothing.
    world.write_status(json!({"replicas": 2}));
    world.template["metadata"]["annotations"][ACTIVATE_ANNOTATION] = json!("uid-other/9");
    assert_eq!(
        world.reconcile(std::slice::from_ref(&p)).outcome,
        Outcome::LazySkipped
    );
    assert!(world.binding.is_none());
    world.touch("1");
    let plan = world.reconcile(std::slice::from_ref(&p));
    assert_eq!(plan.outcome, Outcome::Refreshed);
    assert_eq!(world.clusters(), Some(vec!["member1".to_string()]));
}

/// Simple Case 2 with both steps before the detector looks (it was busy, paused or down):
/// the template created first still waits, and one changed after the policy propagates.
#[test]
fn simple_case_2_decided_by_the_api_order_alone() {
    // Template at 200, policy at 201: pending.
    let mut world = World::new(nginx(200));
    let p = pp("pp", "member1", true, 201);
    assert_eq!(
        lazy_action(&world.plan(std::slice::from_ref(&p))),
        LazyAction::Pending
    );
    // Template at 200, policy at 201, template changed at 202: propagated.
    world.clock = 201;
    world.touch("1");
    assert_eq!(
        lazy_action(&world.plan(std::slice::from_ref(&p))),
        LazyAction::Refresh(RefreshReason::TemplateNewer)
    );
    // Policy at 199, template at 200 (created just after it, in the same second): propagated.
    let world = World::new(nginx(200));
    let p = pp("pp", "member1", true, 199);
    assert_eq!(
        lazy_action(&world.plan(std::slice::from_ref(&p))),
        LazyAction::Refresh(RefreshReason::TemplateNewer)
    );
}

/// The binding says whether its claimant is Lazy (failover reads it), following the policy at
/// once, and loses the mark with the claim.
#[test]
fn the_binding_carries_its_claimants_activation_preference() {
    let lazy = pp("pp", "member1", true, 100);
    let mut world = World::new(nginx(200));
    world.reconcile(std::slice::from_ref(&lazy));
    assert_eq!(
        world
            .binding_annotation(ACTIVATION_PREFERENCE_ANNOTATION)
            .as_deref(),
        Some("Lazy")
    );
    let mut eager = lazy.clone();
    eager.generation += 1;
    eager.spec.activation_preference = None;
    eager.revision = Some(Revision::from(world.tick()));
    world.reconcile(std::slice::from_ref(&eager));
    assert_eq!(world.binding_annotation(ACTIVATION_PREFERENCE_ANNOTATION), None);
    world.reconcile(std::slice::from_ref(&lazy));
    assert_eq!(
        world
            .binding_annotation(ACTIVATION_PREFERENCE_ANNOTATION)
            .as_deref(),
        Some("Lazy")
    );
    // Released (no policy left): the binding stays, without claim or mark.
    world.reconcile(&[]);
    assert!(world.binding.is_some());
    assert_eq!(world.binding_annotation(ACTIVATION_PREFERENCE_ANNOTATION), None);
}

/// Simple Case 3 (lazy to immediate): the edit that removes Lazy applies at once.
#[test]
fn simple_case_3_lazy_to_immediate() {
    let p = pp("pp", "member1", true, 100);
    let mut world = World::new(nginx(200));
    world.reconcile(std::slice::from_ref(&p));
    let mut p2 = edited(p, "member2", world.tick());
    p2.spec.activation_preference = None;
    world.reconcile(std::slice::from_ref(&p2));
    assert_eq!(world.clusters(), Some(vec!["member2".to_string()]));
}

/// Simple Case 4 (immediate to lazy): the edit that sets Lazy waits for the template.
#[test]
fn simple_case_4_immediate_to_lazy() {
    let p = pp("pp", "member1", false, 100);
    let mut world = World::new(nginx(200));
    world.reconcile(std::slice::from_ref(&p));
    world.take_writes();
    let mut p2 = edited(p, "member2", world.tick());
    p2.spec.activation_preference = Some(ActivationPreference::Lazy);
    let plan = world.reconcile(std::slice::from_ref(&p2));
    assert_eq!(plan.outcome, Outcome::LazySkipped);
    assert_eq!(world.clusters(), Some(vec!["member1".to_string()]));
    assert_eq!(
        world.take_writes(),
        vec!["binding-metadata", "binding-status"],
        "only the activation preference (which follows the claimant at once) and the condition \
         are written"
    );
    assert_eq!(
        world
            .binding_annotation(ACTIVATION_PREFERENCE_ANNOTATION)
            .as_deref(),
        Some("Lazy")
    );
    assert_eq!(
        world.activated(),
        Some(("False".into(), "LazyActivationPending".into()))
    );
    let message = world.view().unwrap().conditions[0].message.clone();
    assert_eq!(
        message,
        "policy PropagationPolicy default/pp generation 2 is pending: it takes effect when the template next changes"
    );
    world.touch("1");
    world.reconcile(std::slice::from_ref(&p2));
    assert_eq!(world.clusters(), Some(vec!["member2".to_string()]));
    assert_eq!(world.activated(), Some(("True".into(), "PolicyActivated".into())));
    assert_eq!(
        world.binding_annotation(POLICY_GENERATION_ANNOTATION).as_deref(),
        Some("uid-pp/2")
    );
}

/// The template changed, then the Lazy policy was edited, and the detector saw both at once:
/// the template's new content reaches the binding under the propagation it has; the edit,
/// written after the change, stays pending. Exactly what a detector that saw each step in turn
/// ends with.
#[test]
fn template_change_before_a_lazy_edit_keeps_the_edit_pending() {
    let p = pp("pp", "member1", true, 100);
    let mut world = World::new(nginx(200));
    world.reconcile(std::slice::from_ref(&p));
    world.take_writes();
    // Step by step.
    let mut stepwise = World {
        template: world.template.clone(),
        binding: world.binding.clone(),
        overrides: vec![],
        writes: vec![],
        schedules: 0,
        clock: world.clock,
    };
    world.template["spec"]["replicas"] = json!(4);
    let rv = world.tick();
    world.template["metadata"]["resourceVersion"] = json!(rv.to_string());
    let p2 = edited(p.clone(), "member2", world.tick());
    let plan = world.reconcile(std::slice::from_ref(&p2));
    assert_eq!(lazy_action(&plan), LazyAction::RefreshContent);
    assert_eq!(world.take_writes(), vec!["binding-spec", "binding-status"]);
    assert_eq!(world.clusters(), Some(vec!["member1".to_string()]));
    assert_eq!(world.binding.as_ref().unwrap()["spec"]["replicas"], 4);
    assert_eq!(
        world.binding_annotation(POLICY_GENERATION_ANNOTATION).as_deref(),
        Some("uid-pp/1")
    );
    assert_eq!(
        world.activated(),
        Some(("False".into(), "LazyActivationPending".into()))
    );

    stepwise.template["spec"]["replicas"] = json!(4);
    let rv = stepwise.tick();
    stepwise.template["metadata"]["resourceVersion"] = json!(rv.to_string());
    stepwise.reconcile(std::slice::from_ref(&p));
    let p2 = edited(p, "member2", stepwise.tick());
    stepwise.reconcile(std::slice::from_ref(&p2));
    assert_eq!(
        stepwise.binding.as_ref().unwrap()["spec"],
        world.binding.as_ref().unwrap()["spec"]
    );
    assert_eq!(
        stepwise.binding_annotation(POLICY_GENERATION_ANNOTATION),
        world.binding_annotation(POLICY_GENERATION_ANNOTATION)
    );

    // The template's next change activates the edit.
    world.touch("1");
    world.reconcile(std::slice::from_ref(&p2));
    assert_eq!(world.clusters(), Some(vec!["member2".to_string()]));
}

/// Combined Case 1 (policy deleted): the claim moves to PP2 at once, propagation waits.
#[test]
fn combined_case_1_policy_deleted() {
    let pp1 = pp("pp1", "member1", true, 100);
    let mut world = World::new(nginx(200));
    world.reconcile(std::slice::from_ref(&pp1));
    assert_eq!(
        world.clusters(),
        Some(vec!["member1".to_string()]),
        "pp1 existed first"
    );
    // PP2 appears: claims are sticky.
    let pp2 = pp("pp2", "member2", true, world.tick());
    world.reconcile(&[pp1.clone(), pp2.clone()]);
    assert_eq!(world.claim(), Some(pp1.key.clone()));
    // PP1 deleted.
    let plan = world.reconcile(std::slice::from_ref(&pp2));
    assert_eq!(
        plan.claim_change,
        Some(ClaimChange::Replaced {
            from: pp1.key.clone()
        })
    );
    assert_eq!(
        world.claim(),
        Some(pp2.key.clone()),
        "annotation of policy name changed"
    );
    assert_eq!(
        world.clusters(),
        Some(vec!["member1".to_string()]),
        "propagation unchanged"
    );
    assert_eq!(
        world
            .view()
            .unwrap()
            .annotation("propagationpolicy.karmada.io/name"),
        Some("pp2")
    );
    world.touch("1");
    world.reconcile(std::slice::from_ref(&pp2));
    assert_eq!(world.clusters(), Some(vec!["member2".to_string()]));
}

/// Combined Case 1 with every step made before the detector looks: PP2 created, PP1 deleted
/// (kept visible by its finalizer), the template changed. The change came after the claim
/// moved, so it counts: exactly what a detector that saw each step in turn ends with.
#[test]
fn combined_case_1_decided_by_the_api_order_alone() {
    let pp1 = pp("pp1", "member1", true, 100);
    let mut world = World::new(nginx(200));
    world.reconcile(std::slice::from_ref(&pp1));
    let pp2 = pp("pp2", "member2", true, world.tick());
    let mut deleting = pp1.clone();
    deleting.deleting = true;
    deleting.deleted_at = Some(Revision::from(world.tick()));
    // Before the change: the claim moves, propagation waits.
    let plan = world.plan(&[deleting.clone(), pp2.clone()]);
    assert_eq!(lazy_action(&plan), LazyAction::Pending);
    // After the change: it counts.
    world.touch("1");
    let plan = world.reconcile(&[deleting.clone(), pp2.clone()]);
    assert_eq!(
        plan.claim_change,
        Some(ClaimChange::Replaced {
            from: pp1.key.clone()
        })
    );
    assert_eq!(
        lazy_action(&plan),
        LazyAction::Refresh(RefreshReason::TemplateNewer)
    );
    assert_eq!(world.clusters(), Some(vec!["member2".to_string()]));
    // The claim revision is recorded with the claim: once PP1 is gone, nothing changes.
    assert_eq!(
        world.template["metadata"]["annotations"][CLAIM_REVISION_ANNOTATION],
        deleting.deleted_at.unwrap().to_string()
    );
    assert!(world.reconcile(std::slice::from_ref(&pp2)).is_noop());

    // The same steps with the change made *before* PP1's deletion: the claim moved after the
    // change, so propagation waits for the next one.
    let mut world = World::new(nginx(200));
    world.reconcile(std::slice::from_ref(&pp1));
    let pp2 = pp("pp2", "member2", true, world.tick());
    world.touch("1");
    world.reconcile(&[pp1.clone(), pp2.clone()]);
    let mut deleting = pp1.clone();
    deleting.deleting = true;
    deleting.deleted_at = Some(Revision::from(world.tick()));
    let plan = world.reconcile(&[deleting, pp2.clone()]);
    assert_eq!(lazy_action(&plan), LazyAction::Pending);
    assert_eq!(world.clusters(), Some(vec!["member1".to_string()]));
}

/// Combined Case 1 with the default behaviour: the new policy applies at once.
#[test]
fn combined_case_1_default() {
    let pp1 = pp("pp1", "member1", false, 100);
    let mut world = World::new(nginx(200));
    let pp2 = pp("pp2", "member2", false, world.tick());
    world.reconcile(&[pp1.clone(), pp2.clone()]);
    world.reconcile(std::slice::from_ref(&pp2));
    assert_eq!(world.clusters(), Some(vec!["member2".to_string()]));
}

/// Combined Case 2 (policy no longer matches), with ClusterPropagationPolicies.
#[test]
fn combined_case_2_policy_no_longer_matches() {
    let cpp1 = cpp("cpp1", "member1", true, 100);
    let cpp2 = cpp("cpp2", "member2", true, 150);
    let mut world = World::new(nginx(200));
    world.reconcile(&[cpp1.clone(), cpp2.clone()]);
    assert_eq!(world.claim(), Some(cpp1.key.clone()));
    assert_eq!(world.clusters(), Some(vec!["member1".to_string()]));
    let mut narrowed = cpp1.clone();
    narrowed.generation += 1;
    narrowed.spec.resource_selectors[0].name = Some("other".into());
    narrowed.revision = Some(Revision::from(world.tick()));
    narrowed.selectors_revision = narrowed.revision;
    world.reconcile(&[narrowed.clone(), cpp2.clone()]);
    assert_eq!(world.claim(), Some(cpp2.key.clone()));
    assert_eq!(
        world.clusters(),
        Some(vec!["member1".to_string()]),
        "propagation unchanged"
    );
    world.touch("1");
    world.reconcile(&[narrowed, cpp2]);
    assert_eq!(world.clusters(), Some(vec!["member2".to_string()]));
}

/// Combined Case 3 (preemption by a non-lazy PP): applies at once.
#[test]
fn combined_case_3_preemption_by_immediate_policy() {
    let cpp1 = cpp("cpp1", "member1", true, 100);
    let mut world = World::new(nginx(200));
    world.reconcile(std::slice::from_ref(&cpp1));
    assert_eq!(world.clusters(), Some(vec!["member1".to_string()]));
    let mut pp2 = pp("pp2", "member2", false, world.tick());
    pp2.spec.priority = Some(2);
    pp2.spec.preemption = Some(PreemptionBehavior::Always);
    world.reconcile(&[cpp1, pp2.clone()]);
    assert_eq!(world.claim(), Some(pp2.key.clone()));
    assert_eq!(world.clusters(), Some(vec!["member2".to_string()]));
}

/// Combined Case 4 (preemption by a lazy PP): the claim moves, propagation waits.
#[test]
fn combined_case_4_preemption_by_lazy_policy() {
    let pp1 = pp("pp1", "member1", true, 100);
    let mut world = World::new(nginx(200));
    world.reconcile(std::slice::from_ref(&pp1));
    let mut pp2 = pp("pp2", "member2", true, world.tick());
    pp2.spec.priority = Some(2);
    pp2.spec.preemption = Some(PreemptionBehavior::Always);
    let plan = world.reconcile(&[pp1.clone(), pp2.clone()]);
    assert_eq!(
        plan.claim_change,
        Some(ClaimChange::Preempted {
            from: pp1.key.clone()
        })
    );
    assert_eq!(world.claim(), Some(pp2.key.clone()));
    assert_eq!(world.clusters(), Some(vec!["member1".to_string()]));
    assert_eq!(
        world.activated(),
        Some(("False".into(), "LazyActivationPending".into()))
    );
    world.touch("1");
    world.reconcile(&[pp1, pp2]);
    assert_eq!(world.clusters(), Some(vec!["member2".to_string()]));
}

/// Case 4 (hit) by a lazy policy of a template that kept a binding after its policy was
/// deleted: the binding is not refreshed.
#[test]
fn case_4_hit_with_leftover_binding() {
    let p = pp("pp", "member1", false, 100);
    let mut world = World::new(nginx(200));
    world.reconcile(std::slice::from_ref(&p));
    world.reconcile(&[]);
    let lazy = pp("lazy", "member2", true, world.tick());
    let plan = world.reconcile(std::slice::from_ref(&lazy));
    assert_eq!(plan.claim_change, Some(ClaimChange::Hit));
    assert_eq!(plan.outcome, Outcome::Claimed);
    assert_eq!(world.clusters(), Some(vec!["member1".to_string()]));
    assert_eq!(
        world.activated(),
        Some(("False".into(), "LazyActivationPending".into()))
    );
    // The default behaviour would refresh.
    let immediate = pp("immediate", "member3", false, world.tick());
    world.reconcile(&[]);
    world.reconcile(std::slice::from_ref(&immediate));
    assert_eq!(world.clusters(), Some(vec!["member3".to_string()]));
}

/// Karmada #5348: a Lazy policy that never activated, once deleted, blocks nothing. The
/// detector's own writes (claim, release) never count as template changes: a later Lazy policy
/// still waits for a real change; a later immediate one propagates at once.
#[test]
fn deleted_never_activated_lazy_policy_blocks_nothing() {
    let mut world = World::new(nginx(200));
    let p1 = pp("p1", "member1", true, world.tick());
    world.reconcile(std::slice::from_ref(&p1));
    assert!(world.binding.is_none());
    // Deleted before any change: the release is the detector's write, not a change.
    let plan = world.reconcile(&[]);
    assert_eq!(plan.outcome, Outcome::Unclaimed);
    assert_eq!(world.claim(), None);
    // ... even when the next Lazy policy was created before the detector released the claim.
    let later = pp("p2", "member2", true, 201);
    let plan = world.reconcile(std::slice::from_ref(&later));
    assert_eq!(plan.claim_change, Some(ClaimChange::Hit));
    assert_eq!(lazy_action(&plan), LazyAction::Pending);
    assert!(world.binding.is_none());
    // An immediate policy propagates at once.
    world.reconcile(&[]);
    let immediate = pp("q", "member2", false, world.tick());
    world.reconcile(std::slice::from_ref(&immediate));
    assert_eq!(world.clusters(), Some(vec!["member2".to_string()]));
}

/// A template changed while unclaimed is newer than a Lazy policy created before the change,
/// and older than one created after it.
#[test]
fn change_while_unclaimed_counts_against_each_policy_on_its_own() {
    let mut world = World::new(nginx(200));
    let p1 = pp("p1", "member1", true, world.tick());
    world.reconcile(std::slice::from_ref(&p1));
    world.reconcile(&[]);
    let before_change = world.tick();
    world.touch("changed while unclaimed");
    let older = pp("older", "member2", true, before_change);
    assert_eq!(
        lazy_action(&world.plan(std::slice::from_ref(&older))),
        LazyAction::Refresh(RefreshReason::TemplateNewer)
    );
    let newer = pp("newer", "member2", true, world.tick());
    assert_eq!(
        lazy_action(&world.plan(std::slice::from_ref(&newer))),
        LazyAction::Pending
    );
}

/// Templates claimed by detectors before content revisions carry a lazy baseline: a template
/// whose content equals it is older than any policy; the detector's next write replaces it.
#[test]
fn legacy_baseline_is_honoured_and_replaced() {
    let mut template = nginx(500);
    let fp = crate::fingerprint::fingerprint(&template);
    template["metadata"]["annotations"] = json!({
        LAZY_BASELINE_ANNOTATION: fp,
        "propagationpolicy.karmada.io/name": "old",
        "propagationpolicy.karmada.io/namespace": "default",
    });
    template["metadata"]["labels"]["propagationpolicy.karmada.io/permanent-id"] = json!("uid-old");
    let mut world = World::new(template);
    let p = pp("p", "member1", true, 300);
    let plan = world.reconcile(std::slice::from_ref(&p));
    assert_eq!(lazy_action(&plan), LazyAction::Pending);
    let annotations = &world.template["metadata"]["annotations"];
    assert!(annotations.get(LAZY_BASELINE_ANNOTATION).is_none());
    assert_eq!(annotations[CONTENT_REVISION_ANNOTATION], format!("{fp}@0"));
    assert_eq!(
        lazy_action(&world.plan(std::slice::from_ref(&p))),
        LazyAction::Pending
    );
}

/// A generation that only changes binding-relationship fields (priority) activates without a
/// spec write.
#[test]
fn relationship_only_edit_is_recorded() {
    let p = pp("pp", "member1", true, 100);
    let mut world = World::new(nginx(200));
    world.reconcile(std::slice::from_ref(&p));
    world.take_writes();
    let mut p2 = p.clone();
    p2.generation = 2;
    p2.spec.priority = Some(5);
    p2.revision = Some(Revision::from(world.tick()));
    let plan = world.reconcile(std::slice::from_ref(&p2));
    assert_eq!(lazy_action(&plan), LazyAction::Record);
    // No spec write: the generation annotation, and the condition naming the new generation.
    assert_eq!(world.take_writes(), vec!["binding-metadata", "binding-status"]);
    assert_eq!(
        world.binding_annotation(POLICY_GENERATION_ANNOTATION).as_deref(),
        Some("uid-pp/2")
    );
    assert_eq!(world.activated(), Some(("True".into(), "PolicyActivated".into())));
}

/// `flotilla.io/activate` rolls one generation out to this template without an edit.
#[test]
fn activation_annotation_refreshes_to_that_generation() {
    let p = pp("pp", "member1", true, 100);
    let mut world = World::new(nginx(200));
    world.reconcile(std::slice::from_ref(&p));
    let p2 = edited(p, "member2", world.tick());
    world.reconcile(std::slice::from_ref(&p2));
    assert_eq!(world.clusters(), Some(vec!["member1".to_string()]));
    // A stale permission does nothing (the annotation's write is no content change).
    world.template["metadata"]["annotations"][ACTIVATE_ANNOTATION] = json!("uid-pp/1");
    let rv = world.tick();
    world.template["metadata"]["resourceVersion"] = json!(rv.to_string());
    assert!(world.reconcile(std::slice::from_ref(&p2)).is_noop());
    assert_eq!(world.clusters(), Some(vec!["member1".to_string()]));
    world.template["metadata"]["annotations"][ACTIVATE_ANNOTATION] = json!("uid-pp/2");
    let plan = world.reconcile(std::slice::from_ref(&p2));
    assert_eq!(lazy_action(&plan), LazyAction::Refresh(RefreshReason::Activated));
    assert_eq!(world.clusters(), Some(vec!["member2".to_string()]));
    // Left in place it is harmless: the next generation waits again.
    let p3 = edited(p2, "member3", world.tick());
    world.reconcile(std::slice::from_ref(&p3));
    assert_eq!(world.clusters(), Some(vec!["member2".to_string()]));
}

/// The pending state is stored, not remembered: planning from scratch (a restarted detector)
/// on the stored objects still says pending, and no write happens.
#[test]
fn restart_keeps_pending() {
    let p = pp("pp", "member1", true, 100);
    let mut world = World::new(nginx(200));
    world.reconcile(std::slice::from_ref(&p));
    let p2 = edited(p, "member2", world.tick());
    world.reconcile(std::slice::from_ref(&p2));
    world.take_writes();
    for _ in 0..3 {
        let plan = world.plan(std::slice::from_ref(&p2));
        assert_eq!(plan.outcome, Outcome::LazySkipped);
        assert!(plan.is_noop());
    }
    assert_eq!(world.schedules, 1, "only the initial creation was scheduled");
}

/// Status written to the binding by other services is preserved when the detector sets its
/// condition.
#[test]
fn other_conditions_are_kept() {
    let p = pp("pp", "member1", true, 100);
    let mut world = World::new(nginx(200));
    world.reconcile(std::slice::from_ref(&p));
    let binding = world.binding.as_mut().unwrap();
    let status: ResourceBindingStatus = serde_json::from_value(json!({"conditions": [
        {"type": "Scheduled", "status": "True", "reason": "Success", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"},
        binding["status"]["conditions"][0].clone(),
    ]}))
    .unwrap();
    binding["status"] = serde_json::to_value(status).unwrap();
    let p2 = edited(p, "member2", world.tick());
    world.reconcile(std::slice::from_ref(&p2));
    let conditions = world.view().unwrap().conditions;
    assert_eq!(conditions.len(), 2);
    assert_eq!(conditions[0].type_, "Scheduled");
    assert_eq!(conditions[1].reason, "LazyActivationPending");
}

// ------------------------------------------------------------------------------------------
// Override policies in effect (`flotilla.io/overrides`).
// ------------------------------------------------------------------------------------------

/// An OverridePolicy of `default` selecting the nginx Deployment, generation `generation`
/// written at revision `at`, that adds the label `gen: <generation>`.
fn override_policy(name: &str, generation: i64, at: u64, lazy: bool) -> crate::overrides::OverrideView {
    let spec: flotilla_api::OverrideSpec = serde_json::from_value(json!({
        "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "nginx"}],
        "activationPreference": if lazy { Some("Lazy") } else { None },
        "overrideRules": [{"overriders": {"labelsOverrider": [{"operator": "add", "value": {"gen": generation.to_string()}}]}}],
    }))
    .unwrap();
    crate::overrides::OverrideView {
        key: crate::overrides::OverrideKey {
            kind: flotilla_api::overrides::OverridePolicyKind::OverridePolicy,
            namespace: Some("default".into()),
            name: name.into(),
        },
        uid: format!("uid-{name}"),
        generation,
        revision: Some(Revision::from(at)),
        valid: true,
        spec,
    }
}

impl World {
    /// `(name, generation)` of each override policy the binding records.
    fn overrides_in_effect(&self) -> Vec<(String, i64)> {
        flotilla_api::overrides::OverrideSnapshot::parse_annotation(
            self.binding_annotation("flotilla.io/overrides").as_deref(),
        )
        .into_iter()
        .map(|e| (e.name, e.generation))
        .collect()
    }

    fn overrides_activated(&self) -> Option<(String, String)> {
        let view = self.view()?;
        let c = view.conditions.iter().find(|c| c.type_ == "OverridesActivated")?;
        Some((c.status.clone(), c.reason.clone()))
    }
}

#[test]
fn eager_override_policies_are_recorded_with_the_binding_and_follow_edits_at_once() {
    let p = pp("pp", "member1", false, 0);
    let mut world = World::new(nginx(100));
    world.overrides = vec![override_policy("op", 1, 50, false)];
    world.reconcile(std::slice::from_ref(&p));
    assert_eq!(world.overrides_in_effect(), vec![("op".to_owned(), 1)]);
    // No pending override, no condition.
    assert_eq!(world.overrides_activated(), None);
    world.take_writes();
    // An edit: only the binding's metadata is written (no spec write, no rescheduling).
    let at = world.tick();
    world.overrides = vec![override_policy("op", 2, at, false)];
    let schedules = world.schedules;
    let plan = world.reconcile(std::slice::from_ref(&p));
    assert!(plan.overrides_changed);
    assert_eq!(world.overrides_in_effect(), vec![("op".to_owned(), 2)]);
    assert_eq!(world.take_writes(), vec!["binding-metadata"]);
    assert_eq!(world.schedules, schedules);
    // Deleted: gone at once.
    world.overrides.clear();
    world.reconcile(std::slice::from_ref(&p));
    assert_eq!(world.overrides_in_effect(), Vec::<(String, i64)>::new());
    assert_eq!(world.binding_annotation("flotilla.io/overrides"), None);
}

#[test]
fn lazy_override_policy_waits_for_the_template_and_activation() {
    let p = pp("pp", "member1", false, 0);
    let mut world = World::new(nginx(100));
    world.reconcile(std::slice::from_ref(&p));
    // A Lazy policy created after the template: pending (Simple Case 2).
    let at = world.tick();
    world.overrides = vec![override_policy("op", 1, at, true)];
    world.reconcile(std::slice::from_ref(&p));
    assert_eq!(world.overrides_in_effect(), Vec::<(String, i64)>::new());
    assert_eq!(
        world.overrides_activated(),
        Some(("False".into(), "LazyActivationPending".into()))
    );
    // The template changes: in effect.
    world.touch("1");
    world.reconcile(std::slice::from_ref(&p));
    assert_eq!(world.overrides_in_effect(), vec![("op".to_owned(), 1)]);
    assert_eq!(
        world.overrides_activated(),
        Some(("True".into(), "OverridesActivated".into()))
    );
    // An edit waits ...
    let at = world.tick();
    world.overrides = vec![override_policy("op", 2, at, true)];
    world.reconcile(std::slice::from_ref(&p));
    assert_eq!(world.overrides_in_effect(), vec![("op".to_owned(), 1)]);
    let message = world
        .view()
        .unwrap()
        .conditions
        .iter()
        .find(|c| c.type_ == "OverridesActivated")
        .unwrap()
        .message
        .clone();
    assert_eq!(
        message,
        "OverridePolicy default/op generation 2 is pending: it takes effect when the template next changes (or with flotilla activate)"
    );
    // ... until activated (flotilla activate writes the annotation; not a content change).
    world.template["metadata"]["annotations"] = json!({"flotilla.io/activate-overrides": "uid-op/2"});
    let rv = world.tick();
    world.template["metadata"]["resourceVersion"] = json!(rv.to_string());
    world.reconcile(std::slice::from_ref(&p));
    assert_eq!(world.overrides_in_effect(), vec![("op".to_owned(), 2)]);
    assert_eq!(
        world.overrides_activated(),
        Some(("True".into(), "OverridesActivated".into()))
    );
}

#[test]
fn a_released_binding_keeps_following_override_policies() {
    let p = pp("pp", "member1", false, 0);
    let mut world = World::new(nginx(100));
    world.overrides = vec![override_policy("op", 1, 50, false)];
    world.reconcile(std::slice::from_ref(&p));
    world.reconcile(&[]);
    assert_eq!(world.claim(), None);
    let at = world.tick();
    world.overrides = vec![override_policy("op", 2, at, false)];
    world.reconcile(&[]);
    assert_eq!(world.overrides_in_effect(), vec![("op".to_owned(), 2)]);
}
