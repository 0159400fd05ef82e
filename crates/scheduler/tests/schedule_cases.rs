//! Table-driven cases for `schedule`: every rule, alone and combined. Each case names the rule
//! it pins; expected results are worked out by hand from Karmada's algorithm (see the crate
//! docs for the source of each rule).

#![allow(clippy::unwrap_used)]

mod support;

use flotilla_api::TargetCluster;
use flotilla_api::policy::{ReplicaSchedulingStrategy, ReplicaSchedulingType};
use flotilla_scheduler::{ApiKind, ClusterView, ScheduleErrorReason, ScheduleInput, schedule};
use support::*;

enum Want {
    Clusters(Vec<(&'static str, i32)>, Option<&'static str>),
    /// The whole message.
    Error(ScheduleErrorReason, &'static str),
    /// A part of the message.
    ErrorContaining(ScheduleErrorReason, &'static str),
}

struct Case {
    name: &'static str,
    clusters: Vec<ClusterView>,
    placement: P,
    replicas: i32,
    previous: Vec<(&'static str, i32)>,
    observed: Option<&'static str>,
    resource: Option<ApiKind>,
    uid: Option<&'static str>,
    reschedule: bool,
    want: Want,
}

fn case(name: &'static str, clusters: Vec<ClusterView>, placement: P, replicas: i32) -> Case {
    Case {
        name,
        clusters,
        placement,
        replicas,
        previous: Vec::new(),
        observed: None,
        resource: None,
        uid: None,
        reschedule: false,
        want: Want::Clusters(Vec::new(), None),
    }
}

impl Case {
    fn prev(mut self, previous: &[(&'static str, i32)]) -> Self {
        self.previous = previous.to_vec();
        self
    }
    fn observed(mut self, name: &'static str) -> Self {
        self.observed = Some(name);
        self
    }
    fn resource(mut self, api_version: &str, kind: &str) -> Self {
        self.resource = Some(ApiKind::new(api_version, kind));
        self
    }
    fn uid(mut self, uid: &'static str) -> Self {
        self.uid = Some(uid);
        self
    }
    fn reschedule(mut self) -> Self {
        self.reschedule = true;
        self
    }
    fn want(mut self, clusters: &[(&'static str, i32)]) -> Self {
        self.want = Want::Clusters(clusters.to_vec(), None);
        self
    }
    fn want_in(mut self, affinity: &'static str, clusters: &[(&'static str, i32)]) -> Self {
        self.want = Want::Clusters(clusters.to_vec(), Some(affinity));
        self
    }
    fn fails(mut self, reason: ScheduleErrorReason, message: &'static str) -> Self {
        self.want = Want::Error(reason, message);
        self
    }
    fn fails_with(mut self, reason: ScheduleErrorReason, part: &'static str) -> Self {
        self.want = Want::ErrorContaining(reason, part);
        self
    }

    fn run(&self) {
        let previous: Vec<TargetCluster> = self
            .previous
            .iter()
            .map(|(name, replicas)| TargetCluster {
                name: (*name).into(),
                replicas: *replicas,
            })
            .collect();
        let input = ScheduleInput {
            evicting: &[],
            placement: &self.placement.0,
            replicas: self.replicas,
            previous: &previous,
            observed_affinity: self.observed,
            clusters: &self.clusters,
            resource: self.resource.as_ref(),
            resource_uid: self.uid,
            reschedule: self.reschedule,
        };
        let got = schedule(&input);
        match (&self.want, got) {
            (Want::Clusters(want, affinity), Ok(result)) => {
                let got: Vec<(&str, i32)> = result
                    .clusters
                    .iter()
                    .map(|t| (t.name.as_str(), t.replicas))
                    .collect();
                assert_eq!(&got, want, "case {:?}: clusters", self.name);
                assert_eq!(
                    result.affinity_name.as_deref(),
                    *affinity,
                    "case {:?}: affinity",
                    self.name
                );
            }
            (Want::Error(reason, message), Err(error)) => {
                assert_eq!(error.reason, *reason, "case {:?}: reason of {error}", self.name);
                assert_eq!(error.message, *message, "case {:?}: message", self.name);
            }
            (Want::ErrorContaining(reason, part), Err(error)) => {
                assert_eq!(error.reason, *reason, "case {:?}: reason of {error}", self.name);
                assert!(
                    error.message.contains(part),
                    "case {:?}: message {error:?}",
                    self.name
                );
            }
            (_, got) => panic!("case {:?}: unexpected outcome {got:?}", self.name),
        }
    }
}

fn three() -> Vec<ClusterView> {
    clusters(&["m1", "m2", "m3"])
}

use ScheduleErrorReason::{NoClusterFit, Unschedulable};

fn filtering_cases() -> Vec<Case> {
    let labelled = || vec![c("m1").label("env", "prod"), c("m2").label("env", "dev"), c("m3")];
    let located = || {
        vec![
            c("m1").provider("aws").region("eu").zones(&["eu-1"]),
            c("m2").provider("gcp").region("us").zones(&["us-1", "us-2"]),
            c("m3"),
        ]
    };
    vec![
        case("no placement duplicates to every cluster", three(), p(), 2)
            .want(&[("m1", 2), ("m2", 2), ("m3", 2)]),
        case("clusterNames selects the listed clusters", three(), p().affinity(names(&["m1", "m3"])), 2)
            .want(&[("m1", 2), ("m3", 2)]),
        case("clusterNames naming no registered cluster", three(), p().affinity(names(&["mX"])), 2).fails(
            NoClusterFit,
            "0/3 clusters are available: 3 cluster(s) did not match the placement cluster affinity constraint.",
        ),
        case("exclude removes clusters", three(), p().affinity(exclude(&["m2"])), 1).want(&[("m1", 1), ("m3", 1)]),
        case(
            "exclude wins over clusterNames",
            three(),
            p().affinity(flotilla_api::policy::ClusterAffinity {
                exclude_clusters: vec!["m2".into()],
                ..names(&["m1", "m2"])
            }),
            1,
        )
        .want(&[("m1", 1)]),
        case("empty clusterAffinity matches every cluster", three(), p().affinity(Default::default()), 1)
            .want(&[("m1", 1), ("m2", 1), ("m3", 1)]),
        case("labelSelector matchLabels", labelled(), p().affinity(labels(&[("env", "prod")])), 1)
            .want(&[("m1", 1)]),
        case(
            "labelSelector NotIn matches clusters without the label",
            labelled(),
            p().affinity(label_expr("env", "NotIn", &["dev"])),
            1,
        )
        .want(&[("m1", 1), ("m3", 1)]),
        case("labelSelector Exists", labelled(), p().affinity(label_expr("env", "Exists", &[])), 1)
            .want(&[("m1", 1), ("m2", 1)]),
        case("labelSelector DoesNotExist", labelled(), p().affinity(label_expr("env", "DoesNotExist", &[])), 1)
            .want(&[("m3", 1)]),
        case("labelSelector In", labelled(), p().affinity(label_expr("env", "In", &["dev", "qa"])), 1)
            .want(&[("m2", 1)]),
        case("fieldSelector provider In", located(), p().affinity(field("provider", "In", &["aws"])), 1)
            .want(&[("m1", 1)]),
        case(
            "fieldSelector region NotIn keeps clusters without a region",
            located(),
            p().affinity(field("region", "NotIn", &["eu"])),
            1,
        )
        .want(&[("m2", 1), ("m3", 1)]),
        case("fieldSelector zone In matches any zone", located(), p().affinity(field("zone", "In", &["us-2"])), 1)
            .want(&[("m2", 1)]),
        case(
            "names, labels and fields are ANDed",
            vec![
                c("m1").label("env", "prod").region("eu"),
                c("m2").label("env", "prod").region("us"),
                c("m3").label("env", "dev").region("eu"),
            ],
            p().affinity(flotilla_api::policy::ClusterAffinity {
                cluster_names: vec!["m1".into(), "m2".into(), "m3".into()],
                ..flotilla_api::policy::ClusterAffinity {
                    field_selector: field("region", "In", &["eu"]).field_selector,
                    ..labels(&[("env", "prod")])
                }
            }),
            1,
        )
        .want(&[("m1", 1)]),
    ]
}

fn taint_cases() -> Vec<Case> {
    let gpu = || vec![c("m1"), c("m2").taint("gpu", Some("true"), "NoSchedule"), c("m3")];
    vec![
        case("untolerated NoSchedule taint excludes", gpu(), p(), 1).want(&[("m1", 1), ("m3", 1)]),
        case(
            "untolerated NoExecute taint excludes",
            vec![c("m1").taint("maintenance", None, "NoExecute"), c("m2")],
            p(),
            1,
        )
        .want(&[("m2", 1)]),
        case(
            "PreferNoSchedule taint is ignored",
            vec![c("m1").taint("soft", None, "PreferNoSchedule")],
            p(),
            1,
        )
        .want(&[("m1", 1)]),
        case(
            "Equal toleration with matching value",
            gpu(),
            p().tolerate(toleration(
                Some("gpu"),
                Some("Equal"),
                Some("true"),
                Some("NoSchedule"),
            )),
            1,
        )
        .want(&[("m1", 1), ("m2", 1), ("m3", 1)]),
        case(
            "Equal toleration with another value",
            gpu(),
            p().tolerate(toleration(Some("gpu"), None, Some("false"), None)),
            1,
        )
        .want(&[("m1", 1), ("m3", 1)]),
        case(
            "Exists toleration on the key",
            gpu(),
            p().tolerate(toleration(Some("gpu"), Some("Exists"), None, None)),
            1,
        )
        .want(&[("m1", 1), ("m2", 1), ("m3", 1)]),
        case(
            "empty key with Exists tolerates every taint",
            vec![
                c("m1").taint("a", None, "NoSchedule"),
                c("m2").taint("b", Some("x"), "NoExecute"),
            ],
            p().tolerate(toleration(None, Some("Exists"), None, None)),
            1,
        )
        .want(&[("m1", 1), ("m2", 1)]),
        case(
            "toleration for another effect does not tolerate",
            gpu(),
            p().tolerate(toleration(Some("gpu"), Some("Exists"), None, Some("NoExecute"))),
            1,
        )
        .want(&[("m1", 1), ("m3", 1)]),
        case(
            "a cluster that is not ready is excluded",
            vec![c("m1"), c("m2"), c("m3").not_ready()],
            p(),
            1,
        )
        .want(&[("m1", 1), ("m2", 1)]),
        case(
            "the not-ready taint can be tolerated",
            vec![c("m1"), c("m2").not_ready()],
            p().tolerate(toleration(
                Some("cluster.karmada.io/not-ready"),
                Some("Exists"),
                None,
                None,
            )),
            1,
        )
        .want(&[("m1", 1), ("m2", 1)]),
        case(
            "no cluster ready",
            vec![c("m1").not_ready(), c("m2").not_ready(), c("m3").not_ready()],
            p(),
            1,
        )
        .fails(
            NoClusterFit,
            "0/3 clusters are available: 3 cluster(s) had untolerated taint \
             {cluster.karmada.io/not-ready:NoSchedule}.",
        ),
        case(
            "a previous target keeps its place despite a new taint",
            vec![
                c("m1"),
                c("m2").taint("gpu", None, "NoSchedule"),
                c("m3").not_ready(),
            ],
            p(),
            2,
        )
        .prev(&[("m2", 2), ("m3", 2)])
        .want(&[("m1", 2), ("m2", 2), ("m3", 2)]),
        case(
            "affinity is reported before taints",
            vec![c("m1").not_ready(), c("m2")],
            p().affinity(names(&["m2"])),
            1,
        )
        .want(&[("m2", 1)]),
        case(
            "Karmada-style histogram of reasons",
            vec![c("m1"), c("m2").not_ready(), c("m3").not_ready()],
            p().affinity(names(&["m2", "m3"])),
            1,
        )
        .fails(
            NoClusterFit,
            "0/3 clusters are available: 1 cluster(s) did not match the placement cluster affinity \
             constraint, 2 cluster(s) had untolerated taint {cluster.karmada.io/not-ready:NoSchedule}.",
        ),
        case(
            "taint with a value is printed key=value:effect",
            vec![c("m1").taint("dedicated", Some("team-a"), "NoSchedule")],
            p(),
            1,
        )
        .fails(
            NoClusterFit,
            "0/1 clusters are available: 1 cluster(s) had untolerated taint {dedicated=team-a:NoSchedule}.",
        ),
    ]
}

fn lifecycle_cases() -> Vec<Case> {
    vec![
        case(
            "a cluster being deleted is never chosen, even if it held the binding",
            vec![c("m1"), c("m2"), c("m3").deleting()],
            p(),
            1,
        )
        .prev(&[("m3", 1)])
        .want(&[("m1", 1), ("m2", 1)]),
        case(
            "every cluster being deleted",
            vec![c("m1").deleting(), c("m2").deleting()],
            p(),
            1,
        )
        .fails(
            NoClusterFit,
            "0/2 clusters are available: 2 cluster(s) were being deleted.",
        ),
        case("no clusters registered", vec![], p(), 3)
            .fails(NoClusterFit, "0/0 clusters are available: no cluster exists."),
        case(
            "API enablement skips clusters that do not serve the kind",
            vec![
                c("m1").apis(&[("apps/v1", "Deployment")]),
                c("m2").apis(&[("v1", "ConfigMap")]),
                c("m3"),
            ],
            p(),
            1,
        )
        .resource("apps/v1", "Deployment")
        .want(&[("m1", 1), ("m3", 1)]),
        case(
            "API enablement does not evict a previous target",
            vec![
                c("m1").apis(&[("apps/v1", "Deployment")]),
                c("m2").apis(&[("v1", "ConfigMap")]),
            ],
            p(),
            1,
        )
        .resource("apps/v1", "Deployment")
        .prev(&[("m2", 1)])
        .want(&[("m1", 1), ("m2", 1)]),
        case(
            "no cluster serves the kind",
            vec![c("m1").apis(&[("v1", "ConfigMap")])],
            p(),
            1,
        )
        .resource("example.io/v1", "Widget")
        .fails(
            NoClusterFit,
            "0/1 clusters are available: 1 cluster(s) did not have the API resource.",
        ),
        case(
            "duplicate cluster names count once (first wins)",
            vec![c("m1"), c("m1").not_ready(), c("m2").deleting()],
            p(),
            1,
        )
        .want(&[("m1", 1)]),
        case("negative replicas are rejected", three(), p(), -1)
            .fails_with(Unschedulable, "spec.replicas is -1"),
    ]
}

fn affinities_cases() -> Vec<Case> {
    let groups = || {
        p().term("primary", names(&["m1"]))
            .term("backup", names(&["m2"]))
            .term("last", names(&["m3"]))
    };
    vec![
        case("first clusterAffinities group is used", three(), groups(), 1).want_in("primary", &[("m1", 1)]),
        case(
            "an infeasible group falls through to the next",
            vec![c("m1").not_ready(), c("m2"), c("m3")],
            groups(),
            1,
        )
        .want_in("backup", &[("m2", 1)]),
        case("scheduling starts from the observed group", three(), groups(), 1)
            .observed("backup")
            .want_in("backup", &[("m2", 1)]),
        case(
            "an unknown observed group starts from the first",
            three(),
            groups(),
            1,
        )
        .observed("gone")
        .want_in("primary", &[("m1", 1)]),
        case("a reschedule starts from the first group", three(), groups(), 1)
            .observed("last")
            .reschedule()
            .want_in("primary", &[("m1", 1)]),
        case(
            "earlier groups are not retried after falling back",
            vec![c("m1"), c("m2").not_ready(), c("m3")],
            groups(),
            1,
        )
        .observed("backup")
        .want_in("last", &[("m3", 1)]),
        case(
            "every group failing reports the first group tried",
            vec![c("m1"), c("m2").not_ready(), c("m3").deleting()],
            groups(),
            1,
        )
        .observed("backup")
        .fails(
            NoClusterFit,
            "0/3 clusters are available: 1 cluster(s) did not match the placement cluster affinity \
             constraint, 1 cluster(s) had untolerated taint {cluster.karmada.io/not-ready:NoSchedule}, \
             1 cluster(s) were being deleted.",
        ),
        case(
            "a group whose spread constraint fails falls through",
            three(),
            p().term("wide", names(&["m1"]))
                .term("any", Default::default())
                .spread("cluster", 2, 2),
            1,
        )
        .want_in("any", &[("m1", 1), ("m2", 1)]),
        case(
            "clusterAffinity wins over clusterAffinities",
            three(),
            p().affinity(names(&["m3"])).term("primary", names(&["m1"])),
            1,
        )
        .want(&[("m3", 1)]),
    ]
}

fn regions() -> Vec<ClusterView> {
    vec![
        c("a1").region("a"),
        c("a2").region("a"),
        c("b1").region("b"),
        c("c1").region("c"),
    ]
}

fn spread_cases() -> Vec<Case> {
    vec![
        case(
            "cluster spread takes maxGroups clusters by name",
            three(),
            p().spread("cluster", 1, 2),
            1,
        )
        .want(&[("m1", 1), ("m2", 1)]),
        case(
            "cluster spread keeps clusters that hold the binding",
            three(),
            p().spread("cluster", 1, 2),
            1,
        )
        .prev(&[("m3", 1)])
        .want(&[("m1", 1), ("m3", 1)]),
        case(
            "cluster spread minGroups above the feasible clusters",
            three(),
            p().spread("cluster", 4, 5),
            1,
        )
        .fails_with(
            Unschedulable,
            "feasible clusters (3) is less than spreadConstraint.MinGroups (4)",
        ),
        case(
            "cluster spread without maxGroups takes every cluster",
            three(),
            p().spread("cluster", 2, 0),
            1,
        )
        .want(&[("m1", 1), ("m2", 1), ("m3", 1)]),
        case(
            "region spread picks the biggest regions, then fills up to the cluster maximum",
            regions(),
            p().spread("region", 2, 2).spread("cluster", 2, 3),
            1,
        )
        .want(&[("a1", 1), ("a2", 1), ("b1", 1)]),
        case(
            "region spread with one cluster per region",
            regions(),
            p().spread("region", 2, 2).spread("cluster", 2, 2),
            1,
        )
        .want(&[("a1", 1), ("b1", 1)]),
        case(
            "region spread needs enough regions",
            regions(),
            p().spread("region", 4, 4).spread("cluster", 1, 4),
            1,
        )
        .fails_with(
            Unschedulable,
            "feasible region groups (3) is less than spreadConstraint.MinGroups (4)",
        ),
        case(
            "region spread with no region holding enough clusters",
            regions(),
            p().spread("region", 1, 1).spread("cluster", 3, 3),
            1,
        )
        .fails_with(
            Unschedulable,
            "no combination of 1 to 1 region groups has at least 3 clusters",
        ),
        case(
            "region spread filters clusters without a region",
            vec![c("a1").region("a"), c("x1")],
            p().spread("region", 1, 1).spread("cluster", 1, 1),
            1,
        )
        .want(&[("a1", 1)]),
        case(
            "region spread with no cluster having a region",
            vec![c("x1"), c("x2")],
            p().spread("region", 1, 1).spread("cluster", 1, 1),
            1,
        )
        .fails(
            NoClusterFit,
            "0/2 clusters are available: 2 cluster(s) did not have region property.",
        ),
        case(
            "duplicated region spread prefers the region with more clusters",
            regions(),
            p().spread("region", 1, 1).spread("cluster", 1, 1),
            1,
        )
        .prev(&[("c1", 1)])
        .want(&[("a1", 1)]),
        case(
            "divided region spread prefers the region that holds the binding",
            regions(),
            p().aggregated().spread("region", 1, 1).spread("cluster", 1, 1),
            2,
        )
        .prev(&[("c1", 2)])
        .want(&[("c1", 2)]),
        case(
            "zone spread, one cluster per zone",
            vec![
                c("z1").zones(&["za"]),
                c("z2").zones(&["zb"]),
                c("z3").zones(&["za"]),
            ],
            p().spread("zone", 2, 2).spread("cluster", 2, 2),
            1,
        )
        .want(&[("z1", 1), ("z2", 1)]),
        case(
            "zone spread filters clusters without zones",
            vec![c("z1").zones(&["za"]), c("x1")],
            p().spread("zone", 1, 1),
            1,
        )
        .want(&[("z1", 1)]),
        case(
            "a cluster in two zones is chosen once",
            vec![c("y1").zones(&["za", "zb"]), c("y2").zones(&["zb"])],
            p().spread("zone", 2, 2),
            1,
        )
        .want(&[("y1", 1), ("y2", 1)]),
        case(
            "provider spread",
            vec![
                c("p1").provider("aws"),
                c("p2").provider("aws"),
                c("p3").provider("gcp"),
            ],
            p().spread("provider", 2, 2).spread("cluster", 2, 2),
            1,
        )
        .want(&[("p1", 1), ("p3", 1)]),
        case(
            "label spread",
            vec![
                c("l1").label("team", "a"),
                c("l2").label("team", "a"),
                c("l3").label("team", "b"),
            ],
            p().spread_label("team", 2, 2).spread("cluster", 2, 2),
            1,
        )
        .want(&[("l1", 1), ("l3", 1)]),
        case(
            "static weights ignore spread constraints",
            three(),
            p().divided().spread("cluster", 1, 1),
            3,
        )
        .want(&[("m1", 1), ("m2", 1), ("m3", 1)]),
        case(
            "aggregated honours spread constraints",
            three(),
            p().aggregated().spread("cluster", 1, 2),
            4,
        )
        .want(&[("m1", 4)]),
        case(
            "dynamic weights over a cluster spread",
            three(),
            p().dynamic().spread("cluster", 2, 2),
            4,
        )
        .want(&[("m1", 2), ("m2", 2)]),
        case("unknown spreadByField", three(), p().spread("rack", 1, 1), 1).fails_with(
            Unschedulable,
            "spreadConstraints[0].spreadByField \"rack\" is not supported",
        ),
    ]
}

fn division_cases() -> Vec<Case> {
    let one_two = || p().weights(vec![(names(&["m1"]), 1), (names(&["m2"]), 2)]);
    vec![
        case(
            "duplicated gives every cluster all replicas",
            three(),
            p().duplicated(),
            3,
        )
        .want(&[("m1", 3), ("m2", 3), ("m3", 3)]),
        case(
            "zero replicas: every cluster with 0 (duplicated)",
            three(),
            p(),
            0,
        )
        .want(&[("m1", 0), ("m2", 0), ("m3", 0)]),
        case(
            "zero replicas: every cluster with 0 (divided)",
            three(),
            p().aggregated(),
            0,
        )
        .want(&[("m1", 0), ("m2", 0), ("m3", 0)]),
        case(
            "divided without preference: equal weights",
            three(),
            p().divided(),
            5,
        )
        .want(&[("m1", 2), ("m2", 2), ("m3", 1)]),
        case(
            "equal weights, tie broken by the UID hash (descending)",
            three(),
            p().divided(),
            5,
        )
        .uid("b")
        .want(&[("m1", 1), ("m2", 2), ("m3", 2)]),
        case(
            "equal weights, tie broken by the UID hash (ascending)",
            three(),
            p().divided(),
            5,
        )
        .uid("a")
        .want(&[("m1", 2), ("m2", 2), ("m3", 1)]),
        case(
            "fewer replicas than clusters drops the rest",
            three(),
            p().divided(),
            2,
        )
        .want(&[("m1", 1), ("m2", 1)]),
        case("static weights 1:2 with 5 replicas", three(), one_two(), 5).want(&[("m1", 2), ("m2", 3)]),
        case("static weights 1:2 with 9 replicas", three(), one_two(), 9).want(&[("m1", 3), ("m2", 6)]),
        case(
            "static weights keep proportions when replicas change",
            three(),
            one_two(),
            9,
        )
        .prev(&[("m1", 2), ("m2", 3)])
        .want(&[("m1", 3), ("m2", 6)]),
        case(
            "a cluster matching several entries takes the highest weight",
            three(),
            p().weights(vec![(names(&["m1", "m2"]), 1), (names(&["m2"]), 3)]),
            8,
        )
        .want(&[("m1", 2), ("m2", 6)]),
        case(
            "static weight by label selector",
            vec![
                c("m1").label("tier", "big"),
                c("m2").label("tier", "big"),
                c("m3"),
            ],
            p().weights(vec![(labels(&[("tier", "big")]), 3), (names(&["m3"]), 1)]),
            7,
        )
        .want(&[("m1", 3), ("m2", 3), ("m3", 1)]),
        case(
            "no weight matches: equal weights",
            three(),
            p().weights(vec![(names(&["mX"]), 5)]),
            3,
        )
        .want(&[("m1", 1), ("m2", 1), ("m3", 1)]),
        case(
            "zero and negative weights count as no weight",
            three(),
            p().weights(vec![
                (names(&["m1"]), 0),
                (names(&["m2"]), -2),
                (names(&["m3"]), 1),
            ]),
            4,
        )
        .want(&[("m3", 4)]),
        case(
            "static weights only over filtered clusters",
            vec![c("m1"), c("m2").not_ready(), c("m3")],
            p().weights(vec![
                (names(&["m1"]), 1),
                (names(&["m2"]), 5),
                (names(&["m3"]), 1),
            ]),
            4,
        )
        .want(&[("m1", 2), ("m3", 2)]),
        case(
            "aggregated first schedule packs one cluster",
            three(),
            p().aggregated(),
            5,
        )
        .want(&[("m1", 5)]),
        case(
            "aggregated scale-up stays where replicas are",
            three(),
            p().aggregated(),
            5,
        )
        .prev(&[("m2", 3)])
        .want(&[("m2", 5)]),
        case(
            "aggregated scale-up grows the fullest cluster",
            three(),
            p().aggregated(),
            8,
        )
        .prev(&[("m1", 1), ("m3", 4)])
        .want(&[("m1", 1), ("m3", 7)]),
        case(
            "aggregated scale-down empties the smaller cluster",
            three(),
            p().aggregated(),
            4,
        )
        .prev(&[("m1", 5), ("m2", 3)])
        .want(&[("m1", 4)]),
        case(
            "aggregated unchanged replicas keep the division",
            three(),
            p().aggregated(),
            5,
        )
        .prev(&[("m1", 2), ("m2", 3)])
        .want(&[("m1", 2), ("m2", 3)]),
        case(
            "aggregated replicas of a lost cluster move to a holder",
            vec![c("m1").deleting(), c("m2"), c("m3")],
            p().aggregated(),
            5,
        )
        .prev(&[("m1", 3), ("m2", 2)])
        .want(&[("m2", 5)]),
        case("aggregated reschedule consolidates", three(), p().aggregated(), 6)
            .prev(&[("m1", 2), ("m2", 4)])
            .reschedule()
            .want(&[("m2", 6)]),
        case(
            "dynamic weights without capacity: equal",
            three(),
            p().dynamic(),
            5,
        )
        .want(&[("m1", 2), ("m2", 2), ("m3", 1)]),
        case(
            "dynamic scale-up divides only the new replicas",
            three(),
            p().dynamic(),
            8,
        )
        .prev(&[("m1", 2), ("m2", 2), ("m3", 1)])
        .want(&[("m1", 3), ("m2", 3), ("m3", 2)]),
        case(
            "dynamic scale-down in proportion to the previous division",
            three(),
            p().dynamic(),
            3,
        )
        .prev(&[("m1", 4), ("m2", 2)])
        .want(&[("m1", 2), ("m2", 1)]),
        case(
            "dynamic unchanged replicas keep the previous division",
            three(),
            p().dynamic(),
            6,
        )
        .prev(&[("m1", 6)])
        .want(&[("m1", 6)]),
        case("dynamic reschedule divides anew", three(), p().dynamic(), 6)
            .prev(&[("m1", 6)])
            .reschedule()
            .want(&[("m1", 3), ("m2", 2), ("m3", 1)]),
        case(
            "duplicate and negative previous entries are normalised",
            three(),
            p().aggregated(),
            4,
        )
        .prev(&[("m2", 3), ("m2", 9), ("m3", -5)])
        .want(&[("m2", 4)]),
        case(
            "unknown replicaSchedulingType is an error for workloads",
            three(),
            p().raw_strategy(ReplicaSchedulingStrategy {
                replica_scheduling_type: Some(ReplicaSchedulingType::Other("Split".into())),
                ..ReplicaSchedulingStrategy::default()
            }),
            2,
        )
        .fails_with(Unschedulable, "replicaSchedulingType \"Split\" is not supported"),
        case(
            "unknown replicaSchedulingType does not matter without replicas",
            three(),
            p().raw_strategy(ReplicaSchedulingStrategy {
                replica_scheduling_type: Some(ReplicaSchedulingType::Other("Split".into())),
                ..ReplicaSchedulingStrategy::default()
            }),
            0,
        )
        .want(&[("m1", 0), ("m2", 0), ("m3", 0)]),
        case(
            "replicaScheduling with no type defaults to Divided",
            three(),
            p().raw_strategy(ReplicaSchedulingStrategy::default()),
            3,
        )
        .want(&[("m1", 1), ("m2", 1), ("m3", 1)]),
    ]
}

fn combination_cases() -> Vec<Case> {
    vec![
        case(
            "affinity, taints and static weights together",
            vec![
                c("m1").label("env", "prod"),
                c("m2").label("env", "prod").taint("gpu", None, "NoSchedule"),
                c("m3").label("env", "prod"),
                c("m4").label("env", "dev"),
            ],
            p().affinity(labels(&[("env", "prod")]))
                .weights(vec![(names(&["m1"]), 2), (names(&["m2", "m3"]), 1)]),
            6,
        )
        .want(&[("m1", 4), ("m3", 2)]),
        case(
            "affinity groups with aggregated division keep the previous group",
            three(),
            p().term("primary", names(&["m1", "m2"]))
                .term("backup", names(&["m3"]))
                .aggregated(),
            6,
        )
        .observed("primary")
        .prev(&[("m2", 4)])
        .want_in("primary", &[("m2", 6)]),
        case(
            "tolerated taint, region spread and dynamic weights",
            vec![
                c("e1").region("eu"),
                c("e2").region("eu").taint("spot", None, "NoSchedule"),
                c("u1").region("us"),
                c("u2").region("us").not_ready(),
            ],
            p().tolerate(toleration(Some("spot"), Some("Exists"), None, None))
                .spread("region", 2, 2)
                .spread("cluster", 2, 4)
                .dynamic(),
            7,
        )
        .want(&[("e1", 3), ("e2", 2), ("u1", 2)]),
    ]
}

#[test]
fn filtering() {
    filtering_cases().iter().for_each(Case::run);
}

#[test]
fn taints_and_tolerations() {
    taint_cases().iter().for_each(Case::run);
}

#[test]
fn cluster_lifecycle_and_robustness() {
    lifecycle_cases().iter().for_each(Case::run);
}

#[test]
fn cluster_affinities() {
    affinities_cases().iter().for_each(Case::run);
}

#[test]
fn spread_constraints() {
    spread_cases().iter().for_each(Case::run);
}

#[test]
fn replica_division() {
    division_cases().iter().for_each(Case::run);
}

#[test]
fn combinations() {
    combination_cases().iter().for_each(Case::run);
}
