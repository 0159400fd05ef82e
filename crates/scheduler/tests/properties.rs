//! Property tests over many generated inputs: the invariants every schedule must keep,
//! whatever the placement and the fleet. The generator is a seeded SplitMix64, so a failure
//! prints its seed and replays exactly.

#![allow(clippy::unwrap_used)]

mod support;

use std::collections::BTreeSet;

use flotilla_api::TargetCluster;
use flotilla_api::policy::{ClusterAffinity, ReplicaSchedulingStrategy};
use flotilla_scheduler::{ClusterView, ScheduleInput, ScheduleResult, cluster_matches, schedule};
use k8s_openapi::api::core::v1::Toleration;
use support::*;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
    fn subset(&mut self, items: &[&str]) -> Vec<String> {
        items
            .iter()
            .filter(|_| self.chance(50))
            .map(|s| s.to_string())
            .collect()
    }
}

const NAMES: &[&str] = &["m0", "m1", "m2", "m3", "m4", "m5", "m6", "m7"];

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Duplicated,
    Static,
    Aggregated,
    Dynamic,
}

struct Generated {
    clusters: Vec<ClusterView>,
    placement: P,
    kind: Kind,
    replicas: i32,
    previous: Vec<TargetCluster>,
    observed: Option<String>,
    uid: Option<String>,
    reschedule: bool,
}

fn gen_cluster(rng: &mut Rng, name: &str) -> ClusterView {
    let mut cluster = c(name);
    match rng.below(4) {
        0 => {}
        i => cluster = cluster.region(["eu", "us", "ap"][i - 1]),
    }
    let zones = rng.subset(&["z1", "z2", "z3"]);
    cluster.zones = zones;
    match rng.below(3) {
        0 => {}
        i => cluster = cluster.provider(["aws", "gcp"][i - 1]),
    }
    match rng.below(3) {
        0 => {}
        i => cluster = cluster.label("env", ["prod", "dev"][i - 1]),
    }
    match rng.below(6) {
        0 => cluster = cluster.taint("gpu", Some("true"), "NoSchedule"),
        1 => cluster = cluster.taint("spot", None, "NoExecute"),
        2 => cluster = cluster.taint("soft", None, "PreferNoSchedule"),
        _ => {}
    }
    if rng.chance(15) {
        cluster = cluster.not_ready();
    }
    if rng.chance(10) {
        cluster = cluster.deleting();
    }
    cluster
}

fn gen_affinity(rng: &mut Rng) -> ClusterAffinity {
    match rng.below(6) {
        0 => ClusterAffinity::default(),
        1 => ClusterAffinity {
            cluster_names: rng.subset(NAMES),
            ..ClusterAffinity::default()
        },
        2 => ClusterAffinity {
            exclude_clusters: rng.subset(NAMES),
            ..ClusterAffinity::default()
        },
        3 => labels(&[("env", rng.pick(&["prod", "dev"]))]),
        4 => field("region", rng.pick(&["In", "NotIn"]), &[rng.pick(&["eu", "us"])]),
        _ => field("zone", "In", &[rng.pick(&["z1", "z2"])]),
    }
}

fn generate(seed: u64) -> Generated {
    let rng = &mut Rng(seed);
    let count = rng.below(8);
    let mut clusters: Vec<ClusterView> = (0..count).map(|i| gen_cluster(rng, NAMES[i])).collect();
    if rng.chance(5) && !clusters.is_empty() {
        let copy = gen_cluster(rng, &clusters[0].name.clone());
        clusters.push(copy);
    }

    let mut placement = p();
    let mut terms = Vec::new();
    match rng.below(3) {
        0 => {}
        1 => placement = placement.affinity(gen_affinity(rng)),
        _ => {
            for i in 0..1 + rng.below(3) {
                let name = format!("g{i}");
                placement = placement.term(&name, gen_affinity(rng));
                terms.push(name);
            }
        }
    }
    if rng.chance(40) {
        placement = placement.tolerate(toleration(Some("gpu"), Some("Exists"), None, None));
    }
    if rng.chance(20) {
        placement = placement.tolerate(toleration(
            Some("cluster.karmada.io/not-ready"),
            Some("Exists"),
            None,
            None,
        ));
    }
    let bound = |rng: &mut Rng| rng.below(4) as i64;
    match rng.below(6) {
        0 | 1 => {}
        2 => placement = placement.spread("cluster", bound(rng), bound(rng)),
        3 => {
            placement = placement.spread("region", bound(rng), bound(rng)).spread(
                "cluster",
                bound(rng),
                bound(rng) + 2,
            )
        }
        4 => placement = placement.spread(rng.pick(&["zone", "provider"]), bound(rng), bound(rng)),
        _ => placement = placement.spread_label("env", bound(rng), bound(rng)),
    }
    let kind = match rng.below(6) {
        0 => Kind::Duplicated,
        1 => {
            placement = placement.duplicated();
            Kind::Duplicated
        }
        2 => {
            placement = placement.divided();
            Kind::Static
        }
        3 => {
            let list = (0..rng.below(4))
                .map(|_| (gen_affinity(rng), rng.below(5) as i64))
                .collect();
            placement = placement.weights(list);
            Kind::Static
        }
        4 => {
            placement = placement.aggregated();
            Kind::Aggregated
        }
        _ => {
            placement = placement.dynamic();
            Kind::Dynamic
        }
    };
    let replicas = match rng.below(20) {
        0 => -1,
        1 => 1_000_000,
        2 => 0,
        _ => rng.below(25) as i32,
    };
    let mut previous = Vec::new();
    for name in NAMES {
        if rng.chance(25) {
            previous.push(TargetCluster {
                name: name.to_string(),
                replicas: rng.below(8) as i32,
            });
        }
    }
    let observed = (!terms.is_empty() && rng.chance(50)).then(|| terms[rng.below(terms.len())].clone());
    let uid = rng.chance(50).then(|| format!("uid-{}", rng.next()));
    Generated {
        clusters,
        placement,
        kind,
        replicas,
        previous,
        observed,
        uid,
        reschedule: rng.chance(15),
    }
}

impl Generated {
    fn input(&self) -> ScheduleInput<'_> {
        ScheduleInput {
            evicting: &[],
            placement: &self.placement.0,
            replicas: self.replicas,
            previous: &self.previous,
            observed_affinity: self.observed.as_deref(),
            clusters: &self.clusters,
            resource: None,
            resource_uid: self.uid.as_deref(),
            reschedule: self.reschedule,
        }
    }

    fn with_replicas(&self, replicas: i32, previous: Vec<TargetCluster>) -> Generated {
        Generated {
            clusters: self.clusters.clone(),
            placement: self.placement.clone(),
            kind: self.kind,
            replicas,
            previous,
            observed: self.observed.clone(),
            uid: self.uid.clone(),
            reschedule: false,
        }
    }
}

const CASES: u64 = 4000;

fn sum(result: &ScheduleResult) -> i64 {
    result.clusters.iter().map(|t| i64::from(t.replicas)).sum()
}

#[test]
fn divided_replicas_always_add_up() {
    for seed in 0..CASES {
        let g = generate(seed);
        if let Ok(result) = schedule(&g.input())
            && g.replicas > 0
            && g.kind != Kind::Duplicated
        {
            assert_eq!(sum(&result), i64::from(g.replicas), "seed {seed}: {result:?}");
            assert!(
                result.clusters.iter().all(|t| t.replicas > 0),
                "seed {seed}: {result:?}"
            );
        }
    }
}

#[test]
fn duplicated_and_replica_less_results() {
    for seed in 0..CASES {
        let g = generate(seed);
        match schedule(&g.input()) {
            Ok(result) if g.replicas == 0 => {
                assert!(result.clusters.iter().all(|t| t.replicas == 0), "seed {seed}")
            }
            Ok(result) if g.kind == Kind::Duplicated => {
                assert!(
                    result.clusters.iter().all(|t| t.replicas == g.replicas),
                    "seed {seed}"
                )
            }
            Ok(_) => {}
            Err(error) => assert!(!error.message.is_empty(), "seed {seed}"),
        }
        if g.replicas < 0 {
            assert!(schedule(&g.input()).is_err(), "seed {seed}");
        }
    }
}

#[test]
fn schedules_are_deterministic_and_independent_of_cluster_order() {
    for seed in 0..CASES {
        let g = generate(seed);
        let first = schedule(&g.input());
        assert_eq!(first, schedule(&g.input()), "seed {seed}");
        let names: BTreeSet<&str> = g.clusters.iter().map(|c| c.name.as_str()).collect();
        if names.len() == g.clusters.len() {
            let mut reversed = g.with_replicas(g.replicas, g.previous.clone());
            reversed.reschedule = g.reschedule;
            reversed.clusters.reverse();
            assert_eq!(first, schedule(&reversed.input()), "seed {seed}");
        }
    }
}

fn tolerated(cluster: &ClusterView, tolerations: &[Toleration]) -> bool {
    cluster
        .effective_taints()
        .iter()
        .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
        .all(|t| {
            tolerations.iter().any(|tol| {
                tol.key.as_deref().is_none_or(|k| k.is_empty() || k == t.key)
                    && (tol.operator.as_deref() == Some("Exists") || tol.value == t.value)
            })
        })
}

#[test]
fn results_stay_inside_the_filtered_set() {
    for seed in 0..CASES {
        let g = generate(seed);
        let Ok(result) = schedule(&g.input()) else {
            continue;
        };
        let names: Vec<&str> = result.clusters.iter().map(|t| t.name.as_str()).collect();
        let mut sorted = names.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(names, sorted, "seed {seed}: sorted and unique");

        let placement = &g.placement.0;
        let affinity: Option<&ClusterAffinity> = match &result.affinity_name {
            Some(name) => {
                let term = placement
                    .cluster_affinities
                    .iter()
                    .find(|t| &t.affinity_name == name);
                Some(&term.expect("the reported group exists").affinity)
            }
            None => {
                assert!(
                    placement.cluster_affinities.is_empty() || placement.cluster_affinity.is_some(),
                    "seed {seed}: a group must be reported"
                );
                placement.cluster_affinity.as_ref()
            }
        };
        for name in names {
            let cluster = g
                .clusters
                .iter()
                .find(|c| c.name == name)
                .expect("a registered cluster");
            assert!(!cluster.deleting, "seed {seed}: {name} is being deleted");
            if let Some(affinity) = affinity {
                assert!(
                    cluster_matches(cluster, affinity),
                    "seed {seed}: {name} outside the affinity"
                );
            }
            let was_target = g.previous.iter().any(|t| t.name == name);
            assert!(
                was_target || tolerated(cluster, &placement.cluster_tolerations),
                "seed {seed}: {name} has an untolerated taint"
            );
        }
    }
}

#[test]
fn static_weights_only_grow_with_replicas() {
    for seed in 0..CASES {
        let g = generate(seed);
        if g.kind != Kind::Static || g.replicas <= 0 || g.replicas > 100 {
            continue;
        }
        let (Ok(smaller), Ok(larger)) = (
            schedule(&g.with_replicas(g.replicas, Vec::new()).input()),
            schedule(&g.with_replicas(g.replicas + 1, Vec::new()).input()),
        ) else {
            continue;
        };
        for t in &smaller.clusters {
            let grown = larger
                .clusters
                .iter()
                .find(|l| l.name == t.name)
                .map_or(0, |l| l.replicas);
            assert!(grown >= t.replicas, "seed {seed}: {smaller:?} -> {larger:?}");
        }
    }
}

#[test]
fn dynamic_divisions_move_as_little_as_possible() {
    for seed in 0..CASES {
        let g = generate(seed);
        if !matches!(g.kind, Kind::Aggregated | Kind::Dynamic) || g.replicas <= 0 || g.replicas > 100 {
            continue;
        }
        let Ok(first) = schedule(&g.with_replicas(g.replicas, Vec::new()).input()) else {
            continue;
        };
        let previous = first.clusters.clone();
        let mut observed = g.with_replicas(g.replicas, previous.clone());
        observed.observed = first.affinity_name.clone();
        // Same replicas: nothing moves.
        assert_eq!(schedule(&observed.input()), Ok(first.clone()), "seed {seed}");
        // More replicas: every cluster keeps what it had.
        let mut grown = g.with_replicas(g.replicas + 3, previous.clone());
        grown.observed = first.affinity_name.clone();
        let larger = schedule(&grown.input()).unwrap();
        for t in &previous {
            let now = larger
                .clusters
                .iter()
                .find(|l| l.name == t.name)
                .map_or(0, |l| l.replicas);
            assert!(now >= t.replicas, "seed {seed}: {previous:?} -> {larger:?}");
        }
        // Fewer replicas: no cluster grows and no new cluster appears.
        let mut shrunk = g.with_replicas(g.replicas - 1, previous.clone());
        shrunk.observed = first.affinity_name.clone();
        if let Ok(smaller) = schedule(&shrunk.input()) {
            for t in &smaller.clusters {
                let before = previous
                    .iter()
                    .find(|p| p.name == t.name)
                    .map_or(0, |p| p.replicas);
                assert!(t.replicas <= before, "seed {seed}: {previous:?} -> {smaller:?}");
            }
        }
    }
}

#[test]
fn invalid_strategies_never_panic() {
    for seed in 0..200 {
        let g = generate(seed);
        let mut bad = g.with_replicas(g.replicas, g.previous.clone());
        bad.placement = bad.placement.clone().raw_strategy(ReplicaSchedulingStrategy {
            replica_scheduling_type: Some("Other".into()),
            ..ReplicaSchedulingStrategy::default()
        });
        if let Err(error) = schedule(&bad.input()) {
            assert!(!error.message.is_empty());
        }
    }
}

/// 3000 clusters, 300 zones, up to `i32::MAX` replicas: every strategy still schedules (the
/// Webster division and the group search are bounded; see `webster.rs` and `placement.rs`).
#[test]
fn large_fleets_and_replica_counts() {
    let fleet: Vec<ClusterView> = (0..3000)
        .map(|i| {
            c(&format!("member{i:04}"))
                .region(&format!("r{}", i % 40))
                .zones(&[&format!("z{}", i % 300)])
        })
        .collect();
    let previous: Vec<TargetCluster> = (0..3000)
        .step_by(7)
        .map(|i| TargetCluster {
            name: format!("member{i:04}"),
            replicas: 1000,
        })
        .collect();
    let placements = [
        (Kind::Static, p().divided()),
        (Kind::Dynamic, p().dynamic()),
        (Kind::Aggregated, p().aggregated()),
        (
            Kind::Dynamic,
            p().dynamic().spread("zone", 5, 0).spread("cluster", 50, 0),
        ),
        (
            Kind::Duplicated,
            p().spread("region", 3, 10).spread("cluster", 10, 20),
        ),
    ];
    for (kind, placement) in placements {
        for replicas in [1, 999_999_999, i32::MAX] {
            let input = ScheduleInput {
                evicting: &[],
                previous: &previous,
                ..ScheduleInput::new(&placement.0, replicas, &fleet)
            };
            let result = schedule(&input).unwrap();
            if kind == Kind::Duplicated {
                assert_eq!(result.clusters.len(), 20, "{placement:?}");
            } else {
                assert_eq!(sum(&result), i64::from(replicas), "{placement:?}");
            }
        }
    }
}
