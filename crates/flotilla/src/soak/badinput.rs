//! The bad-input storm: invalid PropagationPolicies and malformed templates (fuzzed fields,
//! wrong types, huge objects, invalid names, selectors that do not parse, bodies that are not
//! JSON). Every one must be rejected by the API with a message, or (a policy the API accepts)
//! carry `Valid=False` with a message; nothing may crash.

use serde_json::{Value, json};

/// Where a case goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// `policy.karmada.io/v1alpha1` propagationpolicies.
    Policy,
    /// `apps/v1` deployments.
    Deployment,
    /// `v1` configmaps.
    ConfigMap,
}

impl Target {
    /// The collection path in `namespace`.
    pub fn collection(self, namespace: &str) -> String {
        match self {
            Target::Policy => {
                format!("/apis/policy.karmada.io/v1alpha1/namespaces/{namespace}/propagationpolicies")
            }
            Target::Deployment => format!("/apis/apps/v1/namespaces/{namespace}/deployments"),
            Target::ConfigMap => format!("/api/v1/namespaces/{namespace}/configmaps"),
        }
    }
}

/// One invalid input.
#[derive(Clone, Debug)]
pub struct Case {
    /// What is wrong with it (for the report).
    pub label: String,
    /// Where it is posted.
    pub target: Target,
    /// The request body.
    pub body: Vec<u8>,
    /// The object's name when the body names one (to find the policy's condition).
    pub name: Option<String>,
}

/// A small deterministic generator (xorshift64*), so a failing storm can be replayed by seed.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed` (0 is replaced: xorshift needs a non-zero state).
    pub fn new(seed: u64) -> Rng {
        Rng(if seed == 0 { 0x9e37_79b9_7f4a_7c15 } else { seed })
    }

    /// The next number.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number below `n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    /// One of `items`.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

fn valid_policy(namespace: &str, name: &str) -> Value {
    json!({
        "apiVersion": "policy.karmada.io/v1alpha1",
        "kind": "PropagationPolicy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "nothing-here"}],
            "placement": {"clusterAffinity": {"clusterNames": ["member1"]}}
        }
    })
}

fn valid_deployment(namespace: &str, name: &str) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": "nginx:1.25"}]}
            }
        }
    })
}

/// Names that are not DNS-1123 subdomains; `#` is replaced by the case number (where the
/// number cannot make the name valid: a trailing dash must stay last).
const BAD_NAMES: [&str; 6] = [
    "Bad_Name#",
    "-leading-dash#",
    "UPPER#",
    "a..b#",
    "spaces in name#",
    "trailing#-",
];

/// Bad name pattern `pattern` for case `i`.
fn bad_name(pattern: &str, i: usize) -> String {
    pattern.replace('#', &i.to_string())
}

/// Label selectors that do not parse or violate the label syntax.
fn bad_selector(rng: &mut Rng) -> Value {
    match rng.below(5) {
        0 => json!({"matchExpressions": [{"key": "app", "operator": "Between", "values": ["a"]}]}),
        1 => json!({"matchExpressions": [{"key": "app", "operator": "In", "values": []}]}),
        2 => json!({"matchLabels": {"bad key!": "x"}}),
        3 => json!({"matchExpressions": [{"key": "app", "operator": "Exists", "values": ["x"]}]}),
        _ => {
            json!({"matchLabels": {"app": "value with spaces and more than sixty-three characters in it, too long"}})
        }
    }
}

/// A semantically invalid policy spec mutation (the API's schema may accept it; the detector
/// must flag it), or a type error (the API's schema must reject it).
fn mutate_policy(policy: &mut Value, rng: &mut Rng) -> String {
    let spec = &mut policy["spec"];
    match rng.below(12) {
        0 => {
            spec["resourceSelectors"] = json!([]);
            "no resource selectors".to_owned()
        }
        1 => {
            spec["resourceSelectors"][0]["apiVersion"] = json!("");
            "selector without apiVersion".to_owned()
        }
        2 => {
            spec["resourceSelectors"][0]["apiVersion"] = json!("a/b/c");
            "selector apiVersion a/b/c".to_owned()
        }
        3 => {
            spec["resourceSelectors"][0]["kind"] = json!("");
            "selector without kind".to_owned()
        }
        4 => {
            spec["resourceSelectors"][0]["namespace"] = json!("somewhere-else");
            "selector namespace differs from the policy's".to_owned()
        }
        5 => {
            spec["resourceSelectors"][0]
                .as_object_mut()
                .map(|s| s.remove("name"));
            spec["resourceSelectors"][0]["labelSelector"] = bad_selector(rng);
            "unparsable label selector".to_owned()
        }
        6 => {
            spec["activationPreference"] = json!(*rng.pick(&["Sometimes", "lazy", "Eager", ""]));
            "unknown activationPreference".to_owned()
        }
        7 => {
            spec["conflictResolution"] = json!(*rng.pick(&["Maybe", "overwrite", "Ignore"]));
            "unknown conflictResolution".to_owned()
        }
        8 => {
            spec["preemption"] = json!(*rng.pick(&["Sometimes", "always"]));
            "unknown preemption".to_owned()
        }
        9 => {
            spec["priority"] = json!("high");
            "priority is a string".to_owned()
        }
        10 => {
            spec["resourceSelectors"] = json!("everything");
            "resourceSelectors is a string".to_owned()
        }
        _ => {
            spec["placement"]["clusterAffinity"]["labelSelector"] = bad_selector(rng);
            "unparsable cluster label selector".to_owned()
        }
    }
}

fn mutate_deployment(deployment: &mut Value, rng: &mut Rng) -> String {
    let spec = &mut deployment["spec"];
    match rng.below(6) {
        0 => {
            spec["replicas"] = json!("three");
            "replicas is a string".to_owned()
        }
        1 => {
            spec["replicas"] = json!(-1 - rng.below(5) as i64);
            "negative replicas".to_owned()
        }
        2 => {
            spec["selector"] = json!({"matchLabels": {"app": "something-else"}});
            "selector does not match the pod template".to_owned()
        }
        3 => {
            spec["template"]["spec"]["containers"] = json!([]);
            "no containers".to_owned()
        }
        4 => {
            spec["template"]["spec"]["containers"][0]["name"] = json!("Not A Name");
            "invalid container name".to_owned()
        }
        _ => {
            spec["selector"] =
                json!({"matchExpressions": [{"key": "app", "operator": "Between", "values": ["x"]}]});
            "unparsable selector".to_owned()
        }
    }
}

/// `count` invalid inputs for `namespace`, chosen by `seed`, mixing every family.
pub fn cases(namespace: &str, count: usize, seed: u64) -> Vec<Case> {
    let mut rng = Rng::new(seed);
    let mut out = Vec::with_capacity(count);
    for i in 0..count {
        let name = format!("bad-{i:04}");
        let case = match i % 8 {
            // Invalid names, on any kind.
            0 => {
                let pattern = rng.pick(&BAD_NAMES);
                let bad = bad_name(pattern, i);
                let (target, body) = if rng.below(2) == 0 {
                    (Target::Policy, valid_policy(namespace, &bad))
                } else {
                    (Target::Deployment, valid_deployment(namespace, &bad))
                };
                Case {
                    label: format!("invalid name {bad:?}"),
                    target,
                    body: body.to_string().into_bytes(),
                    name: Some(bad),
                }
            }
            1 => {
                let long = format!("n{}", "x".repeat(253 + rng.below(100)));
                Case {
                    label: format!("name of {} characters", long.len()),
                    target: Target::Policy,
                    body: valid_policy(namespace, &long).to_string().into_bytes(),
                    name: Some(long),
                }
            }
            // Fuzzed policy fields.
            2..=4 => {
                let mut policy = valid_policy(namespace, &name);
                let label = mutate_policy(&mut policy, &mut rng);
                Case {
                    label: format!("policy: {label}"),
                    target: Target::Policy,
                    body: policy.to_string().into_bytes(),
                    name: Some(name),
                }
            }
            // Malformed templates.
            5 | 6 => {
                let mut deployment = valid_deployment(namespace, &name);
                let label = mutate_deployment(&mut deployment, &mut rng);
                Case {
                    label: format!("deployment: {label}"),
                    target: Target::Deployment,
                    body: deployment.to_string().into_bytes(),
                    name: Some(name),
                }
            }
            // Bodies that are not objects at all, huge objects, bad ConfigMap keys.
            _ => match rng.below(4) {
                0 => Case {
                    label: "body is not JSON".to_owned(),
                    target: *rng.pick(&[Target::Policy, Target::Deployment, Target::ConfigMap]),
                    body: b"{\"apiVersion\": \"v1\", \"kind\": [unterminated".to_vec(),
                    name: None,
                },
                1 => {
                    // Above the API's 3 MiB request limit.
                    let size = 3 * 1024 * 1024 + 1024 * rng.below(1024);
                    let body = json!({
                        "apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": name, "namespace": namespace},
                        "data": {"blob": "x".repeat(size)}
                    });
                    Case {
                        label: format!("ConfigMap of {} KiB", size / 1024),
                        target: Target::ConfigMap,
                        body: body.to_string().into_bytes(),
                        name: Some(name),
                    }
                }
                2 => Case {
                    label: "ConfigMap with an invalid key".to_owned(),
                    target: Target::ConfigMap,
                    body: json!({
                        "apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": name, "namespace": namespace},
                        "data": {"bad key/!": "x"}
                    })
                    .to_string()
                    .into_bytes(),
                    name: Some(name),
                },
                _ => Case {
                    label: "kind does not match the collection".to_owned(),
                    target: Target::Policy,
                    body: valid_deployment(namespace, &name).to_string().into_bytes(),
                    name: Some(name),
                },
            },
        };
        out.push(case);
    }
    out
}

/// What happened to a case.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The API refused it with this status code and message.
    Rejected {
        /// HTTP status.
        code: u16,
        /// The message.
        message: String,
    },
    /// The API accepted it (a policy must then be flagged `Valid=False`).
    Accepted,
}

/// Whether a rejection is a clear one: a client error (4xx) with a message.
pub fn clear_rejection(code: u16, message: &str) -> bool {
    (400..500).contains(&code) && !message.trim().is_empty()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn bad_names_stay_invalid_with_any_case_number() {
        for pattern in BAD_NAMES {
            for i in [0, 7, 40, 248, 10_000] {
                let name = bad_name(pattern, i);
                assert!(
                    !flotilla_api::validation::is_dns1123_subdomain(&name),
                    "{name:?} is a valid name"
                );
            }
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_storm() {
        let a = cases("ns", 50, 7);
        let b = cases("ns", 50, 7);
        assert_eq!(a.len(), 50);
        for (x, y) in a.iter().zip(&b) {
            assert_eq!((x.label.as_str(), &x.body), (y.label.as_str(), &y.body));
        }
        let c = cases("ns", 50, 8);
        assert!(a.iter().zip(&c).any(|(x, y)| x.body != y.body));
    }

    #[test]
    fn every_family_appears() {
        let storm = cases("ns", 300, 1);
        let has = |text: &str| storm.iter().any(|c| c.label.contains(text));
        assert!(has("invalid name"));
        assert!(has("characters"));
        assert!(has("policy:"));
        assert!(has("deployment:"));
        assert!(has("not JSON"));
        assert!(has("KiB"));
        assert!(storm.iter().any(|c| c.target == Target::ConfigMap));
    }

    #[test]
    fn fuzzed_policies_are_really_invalid() {
        // Every policy case that is still well-typed must fail flotilla's own validation, so
        // a Valid=True on it would be a real defect, not a generator mistake.
        for case in cases("ns", 400, 3) {
            if case.target != Target::Policy || !case.label.starts_with("policy:") {
                continue;
            }
            let value: Value = serde_json::from_slice(&case.body).unwrap();
            if let Ok(policy) = serde_json::from_value::<flotilla_api::PropagationPolicy>(value) {
                assert!(policy.validate().is_err(), "{} passed validation", case.label);
            }
        }
    }

    #[test]
    fn huge_objects_exceed_the_request_limit() {
        let storm = cases("ns", 400, 5);
        let huge: Vec<&Case> = storm.iter().filter(|c| c.label.ends_with("KiB")).collect();
        assert!(!huge.is_empty());
        assert!(huge.iter().all(|c| c.body.len() > 3 * 1024 * 1024));
    }

    #[test]
    fn rejections_need_a_client_error_and_a_message() {
        assert!(clear_rejection(422, "spec.replicas: must be >= 0"));
        assert!(clear_rejection(413, "request body too large"));
        assert!(!clear_rejection(500, "internal error"));
        assert!(!clear_rejection(400, "  "));
    }

    #[test]
    fn rng_stays_in_range() {
        let mut rng = Rng::new(0);
        for _ in 0..1000 {
            assert!(rng.below(7) < 7);
        }
        assert_eq!(rng.below(1), 0);
    }
}
