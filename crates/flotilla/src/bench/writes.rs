//! Control-plane writes per member object: how many times the pipeline writes to the control
//! plane's API to put one object into one member cluster.
//!
//! Two readings, taken before the templates are created and again once the pipeline has
//! settled (no service wrote anything but Lease renewals for [`QUIET`]):
//!
//! - the control plane's resourceVersion, which every write (from anyone) advances by one: the
//!   difference, less the bench's own template creates, is every write the pipeline caused;
//! - each service's `flotilla_control_plane_requests_total` (embedded installation only), which
//!   says who wrote what: `execution patch works/status 3000`, and with its `code` label how many
//!   of those writes lost a conflict (409) or failed otherwise.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use kube::Api;
use kube::api::ListParams;
use serde::Serialize;

use super::BenchError;
use super::stats::{round, table};
use super::target::Target;

/// How long services must stay quiet (Lease renewals aside) for the pipeline to count as settled.
pub const QUIET: Duration = Duration::from_secs(2);
/// The longest the bench waits for the pipeline to settle.
pub const SETTLE_LIMIT: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(250);
const FAMILY: &str = "flotilla_control_plane_requests_total";
const WRITE_VERBS: &[&str] = &["create", "update", "patch", "delete", "deletecollection"];

/// Requests counted by one service: `(verb, resource)` -> count, `resource` as
/// `group/resource[/subresource]` (`resource[/subresource]` for the core group).
pub type Counts = BTreeMap<(String, String), u64>;

/// Parses the `flotilla_control_plane_requests_total` samples of a `/metrics` text, whatever
/// their answer.
pub fn parse_counts(text: &str) -> Counts {
    parse_counts_answered(text, |_| true)
}

/// Whether a `code` label is a failure other than a conflict (a build without the label
/// reports none).
fn is_other_failure(code: &str) -> bool {
    !code.is_empty() && code != "409" && !code.starts_with('2')
}

/// [`parse_counts`] of the requests whose `code` label (empty when the build has none)
/// satisfies `answered`.
pub fn parse_counts_answered(text: &str, answered: impl Fn(&str) -> bool) -> Counts {
    let mut counts = Counts::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(FAMILY) else {
            continue;
        };
        let Some((labels, value)) = rest.strip_prefix('{').and_then(|r| r.split_once("} ")) else {
            continue;
        };
        let Ok(value) = value.trim().parse::<f64>() else {
            continue;
        };
        let mut verb = String::new();
        let mut group = String::new();
        let mut resource = String::new();
        let mut code = String::new();
        for pair in labels.split(',') {
            let Some((key, value)) = pair.split_once('=') else {
                continue;
            };
            let value = value.trim_matches('"').to_owned();
            match key.trim() {
                "verb" => verb = value,
                "group" => group = value,
                "resource" => resource = value,
                "code" => code = value,
                _ => {}
            }
        }
        if !answered(&code) {
            continue;
        }
        let resource = if group.is_empty() {
            resource
        } else {
            format!("{group}/{resource}")
        };
        *counts.entry((verb, resource)).or_default() += value as u64;
    }
    counts
}

fn is_write(verb: &str) -> bool {
    WRITE_VERBS.contains(&verb)
}

fn is_lease(resource: &str) -> bool {
    resource == "coordination.k8s.io/leases"
}

/// Non-Lease writes in `counts`.
pub fn pipeline_writes(counts: &Counts) -> u64 {
    counts
        .iter()
        .filter(|((verb, resource), _)| is_write(verb) && !is_lease(resource))
        .map(|(_, n)| n)
        .sum()
}

/// What one reading saw.
#[derive(Clone, Debug, Default)]
pub struct Reading {
    /// The control plane's resourceVersion.
    pub revision: Option<u64>,
    /// Each service's counts (embedded installation only).
    pub services: BTreeMap<String, Counts>,
    /// Each service's counts of requests answered 409 Conflict.
    pub conflicts: BTreeMap<String, Counts>,
    /// Each service's counts of requests that failed otherwise (another error status, or no
    /// answer).
    pub failures: BTreeMap<String, Counts>,
}

impl Reading {
    /// Reads the control plane's revision and every service's counters.
    pub async fn take(target: &Target) -> Reading {
        let revision = Api::<Namespace>::all(target.control_plane.clone())
            .list_metadata(&ListParams::default().limit(1))
            .await
            .ok()
            .and_then(|list| list.metadata.resource_version)
            .and_then(|rv| rv.parse().ok());
        let mut services = BTreeMap::new();
        let mut conflicts = BTreeMap::new();
        let mut failures = BTreeMap::new();
        if let Some(installation) = &target.installation {
            for service in super::install::SERVICES {
                // A build older than the request counters reports no family: the revision is
                // then the only reading.
                if let Some(address) = installation.metrics_address(service)
                    && let Some((200, body)) = crate::probe::http_get(&address, "/metrics").await
                    && body.contains("# TYPE flotilla_control_plane_requests ")
                {
                    services.insert((*service).to_owned(), parse_counts(&body));
                    conflicts.insert(
                        (*service).to_owned(),
                        parse_counts_answered(&body, |code| code == "409"),
                    );
                    failures.insert(
                        (*service).to_owned(),
                        parse_counts_answered(&body, is_other_failure),
                    );
                }
            }
        }
        Reading {
            revision,
            services,
            conflicts,
            failures,
        }
    }

    fn pipeline_writes(&self) -> u64 {
        self.services.values().map(pipeline_writes).sum()
    }
}

/// Waits until no service has written anything but Leases for [`QUIET`] (at most
/// [`SETTLE_LIMIT`]) and returns the last reading and how long settling took. Without service
/// counters (an external control plane), waits for the revision to stop moving instead.
pub async fn settle(target: &Target) -> (Reading, Duration) {
    let started = Instant::now();
    let mut last = Reading::take(target).await;
    let mut quiet_since = Instant::now();
    loop {
        tokio::time::sleep(POLL).await;
        let now = Reading::take(target).await;
        let moved = if now.services.is_empty() {
            now.revision != last.revision
        } else {
            now.pipeline_writes() != last.pipeline_writes()
        };
        if moved {
            quiet_since = Instant::now();
        }
        last = now;
        if quiet_since.elapsed() >= QUIET || started.elapsed() >= SETTLE_LIMIT {
            return (last, started.elapsed());
        }
    }
}

/// Writes of one `(service, verb, resource)` during the run.
#[derive(Clone, Debug, Serialize)]
pub struct ResourceWrites {
    /// The service.
    pub service: String,
    /// The verb.
    pub verb: String,
    /// `group/resource[/subresource]`.
    pub resource: String,
    /// How many.
    pub count: u64,
    /// count / member objects.
    pub per_member_object: f64,
    /// How many of them were answered 409 Conflict (lost to another writer, retried).
    pub conflicts: u64,
}

/// The control plane's writes during a throughput run.
#[derive(Clone, Debug, Serialize)]
pub struct WritesReport {
    /// Member objects the run put in place.
    pub member_objects: usize,
    /// Writes to the control plane during the run (revision difference), less the bench's own
    /// template creates; Lease renewals and Events included. `None` when the revision is not
    /// an integer.
    pub control_plane_writes: Option<u64>,
    /// control_plane_writes / member objects.
    pub control_plane_writes_per_member_object: Option<f64>,
    /// The services' own count of their writes, Lease renewals excluded (embedded only).
    pub service_writes: Option<u64>,
    /// service_writes / member objects: the figure issue 17 asks for.
    pub per_member_object: Option<f64>,
    /// Of service_writes, those answered 409 Conflict (embedded only; builds that count
    /// answers).
    pub conflict_writes: Option<u64>,
    /// conflict_writes / member objects.
    pub conflicts_per_member_object: Option<f64>,
    /// Of service_writes, those that failed otherwise.
    pub failed_writes: Option<u64>,
    /// The services' Lease writes during the run (leader election, membership).
    pub lease_writes: Option<u64>,
    /// Where the writes went, most first (embedded only).
    pub by_resource: Vec<ResourceWrites>,
    /// The services' reads (`get`, `list`; watches excluded) by service, verb and resource,
    /// most first (embedded only): they cost the control plane a JSON encoding each too.
    pub reads: Vec<ResourceWrites>,
    /// Time from the last member object to the services falling quiet, seconds.
    pub settle_seconds: f64,
}

impl WritesReport {
    /// The difference between two readings; `bench_writes` are the writes the bench itself made
    /// in between.
    pub fn between(
        before: &Reading,
        after: &Reading,
        bench_writes: u64,
        member_objects: usize,
        settle: Duration,
    ) -> WritesReport {
        let per = |n: u64| round(n as f64 / member_objects.max(1) as f64, 2);
        let control_plane_writes = match (before.revision, after.revision) {
            (Some(b), Some(a)) => Some(a.saturating_sub(b).saturating_sub(bench_writes)),
            _ => None,
        };
        let mut by_resource = Vec::new();
        let mut reads = Vec::new();
        let mut service_writes = 0;
        let mut lease_writes = 0;
        let mut conflict_writes = 0;
        let mut failed_writes = 0;
        // The increase of one service's counter between the readings.
        let delta = |after: &BTreeMap<String, Counts>,
                     before: &BTreeMap<String, Counts>,
                     service: &str,
                     key: &(String, String)| {
            let read = |r: &BTreeMap<String, Counts>| r.get(service).and_then(|c| c.get(key)).copied();
            read(after)
                .unwrap_or_default()
                .saturating_sub(read(before).unwrap_or_default())
        };
        for (service, counts) in &after.services {
            for key in counts.keys() {
                let (verb, resource) = key;
                let n = delta(&after.services, &before.services, service, key);
                if n > 0 && matches!(verb.as_str(), "get" | "list") {
                    reads.push(ResourceWrites {
                        service: service.clone(),
                        verb: verb.clone(),
                        resource: resource.clone(),
                        count: n,
                        per_member_object: per(n),
                        conflicts: 0,
                    });
                }
                if n == 0 || !is_write(verb) {
                    continue;
                }
                if is_lease(resource) {
                    lease_writes += n;
                    continue;
                }
                let conflicts = delta(&after.conflicts, &before.conflicts, service, key);
                service_writes += n;
                conflict_writes += conflicts;
                failed_writes += delta(&after.failures, &before.failures, service, key);
                by_resource.push(ResourceWrites {
                    service: service.clone(),
                    verb: verb.clone(),
                    resource: resource.clone(),
                    count: n,
                    per_member_object: per(n),
                    conflicts,
                });
            }
        }
        by_resource.sort_by(|a, b| b.count.cmp(&a.count).then(a.resource.cmp(&b.resource)));
        reads.sort_by(|a, b| b.count.cmp(&a.count).then(a.resource.cmp(&b.resource)));
        let counted = !after.services.is_empty();
        WritesReport {
            member_objects,
            control_plane_writes,
            control_plane_writes_per_member_object: control_plane_writes.map(per),
            service_writes: counted.then_some(service_writes),
            per_member_object: counted.then(|| per(service_writes)),
            conflict_writes: counted.then_some(conflict_writes),
            conflicts_per_member_object: counted.then(|| per(conflict_writes)),
            failed_writes: counted.then_some(failed_writes),
            lease_writes: counted.then_some(lease_writes),
            by_resource,
            reads,
            settle_seconds: round(settle.as_secs_f64(), 1),
        }
    }

    /// The report's table.
    pub fn table(&self) -> String {
        let show = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.2}"));
        let mut out = format!(
            "control-plane writes per member object: {} (services' own count, Leases excluded; {} \
             of them lost a conflict (409), {} writes failed otherwise); {} by resourceVersion ({} \
             writes, Leases and Events included); settled {:.1}s after the last arrival",
            show(self.per_member_object),
            show(self.conflicts_per_member_object),
            self.failed_writes.map_or("-".to_owned(), |n| n.to_string()),
            show(self.control_plane_writes_per_member_object),
            self.control_plane_writes
                .map_or("-".to_owned(), |n| n.to_string()),
            self.settle_seconds,
        );
        if !self.by_resource.is_empty() {
            let rows: Vec<Vec<String>> = self
                .by_resource
                .iter()
                .map(|w| {
                    vec![
                        w.service.clone(),
                        w.verb.clone(),
                        w.resource.clone(),
                        w.count.to_string(),
                        format!("{:.2}", w.per_member_object),
                        w.conflicts.to_string(),
                    ]
                })
                .collect();
            out.push('\n');
            out.push_str(&table(
                &[
                    "service",
                    "verb",
                    "resource",
                    "writes",
                    "per member object",
                    "409s",
                ],
                &rows,
            ));
        }
        if !self.reads.is_empty() {
            let rows: Vec<Vec<String>> = self
                .reads
                .iter()
                .map(|r| {
                    vec![
                        r.service.clone(),
                        r.verb.clone(),
                        r.resource.clone(),
                        r.count.to_string(),
                        format!("{:.2}", r.per_member_object),
                    ]
                })
                .collect();
            out.push_str("\nreads (watches excluded):\n");
            out.push_str(&table(
                &["service", "verb", "resource", "reads", "per member object"],
                &rows,
            ));
        }
        out
    }
}

/// Fails when the pipeline writes nothing countable: a bench that reports 0 writes per member
/// object has measured nothing.
pub fn check(report: &WritesReport) -> Result<(), BenchError> {
    match report.service_writes {
        Some(0) => Err(BenchError::Invalid(
            "the services reported no control-plane writes during the throughput run; is \
             flotilla_control_plane_requests_total exported by /metrics?"
                .to_owned(),
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const METRICS: &str = r#"# HELP flotilla_control_plane_requests Requests sent.
# TYPE flotilla_control_plane_requests counter
flotilla_control_plane_requests_total{verb="patch",group="work.karmada.io",resource="works/status",code="200"} 9
flotilla_control_plane_requests_total{verb="patch",group="work.karmada.io",resource="works/status",code="409"} 2
flotilla_control_plane_requests_total{verb="patch",group="work.karmada.io",resource="works/status",code="error"} 1
flotilla_control_plane_requests_total{verb="create",group="work.karmada.io",resource="works"} 6
flotilla_control_plane_requests_total{verb="update",group="coordination.k8s.io",resource="leases"} 40
flotilla_control_plane_requests_total{verb="get",group="",resource="configmaps"} 9
flotilla_control_plane_requests_total{verb="create",group="",resource="events"} 2
flotilla_workqueue_depth{service="execution",queue="bindings"} 0
# EOF
"#;

    fn key(verb: &str, resource: &str) -> (String, String) {
        (verb.to_owned(), resource.to_owned())
    }

    #[test]
    fn parses_the_request_counters_only() {
        let counts = parse_counts(METRICS);
        assert_eq!(counts.len(), 5);
        // Every answer of a request counts; the code tells the conflicts and failures apart.
        assert_eq!(counts[&key("patch", "work.karmada.io/works/status")], 12);
        let conflicts = parse_counts_answered(METRICS, |code| code == "409");
        assert_eq!(
            conflicts,
            Counts::from([(key("patch", "work.karmada.io/works/status"), 2)])
        );
        let failures = parse_counts_answered(METRICS, is_other_failure);
        assert_eq!(
            failures,
            Counts::from([(key("patch", "work.karmada.io/works/status"), 1)])
        );
        assert_eq!(counts[&key("get", "configmaps")], 9);
        assert_eq!(counts[&key("update", "coordination.k8s.io/leases")], 40);
    }

    #[test]
    fn pipeline_writes_leave_out_reads_and_leases() {
        assert_eq!(pipeline_writes(&parse_counts(METRICS)), 12 + 6 + 2);
    }

    #[test]
    fn the_report_is_the_difference_per_member_object() {
        let reading = |revision: u64, text: &str| Reading {
            revision: Some(revision),
            services: BTreeMap::from([("execution".to_owned(), parse_counts(text))]),
            conflicts: BTreeMap::from([(
                "execution".to_owned(),
                parse_counts_answered(text, |code| code == "409"),
            )]),
            failures: BTreeMap::from([(
                "execution".to_owned(),
                parse_counts_answered(text, is_other_failure),
            )]),
        };
        let before = reading(100, METRICS);
        let after_text = METRICS
            .replace("code=\"200\"} 9", "code=\"200\"} 24")
            .replace("code=\"409\"} 2", "code=\"409\"} 6")
            .replace("code=\"error\"} 1", "code=\"error\"} 2")
            .replace("resource=\"works\"} 6", "resource=\"works\"} 16")
            .replace("leases\"} 40", "leases\"} 44")
            .replace("configmaps\"} 9", "configmaps\"} 14");
        let after = reading(100 + 10 + 30 + 4, &after_text);
        let report = WritesReport::between(&before, &after, 10, 10, Duration::from_secs(2));
        assert_eq!(report.control_plane_writes, Some(34));
        assert_eq!(report.service_writes, Some(30));
        assert_eq!(report.per_member_object, Some(3.0));
        assert_eq!(report.lease_writes, Some(4));
        assert_eq!(report.conflict_writes, Some(4));
        assert_eq!(report.conflicts_per_member_object, Some(0.4));
        assert_eq!(report.failed_writes, Some(1));
        let rows: Vec<(&str, u64)> = report
            .by_resource
            .iter()
            .map(|w| (w.resource.as_str(), w.count))
            .collect();
        assert_eq!(
            rows,
            vec![
                ("work.karmada.io/works/status", 20),
                ("work.karmada.io/works", 10)
            ]
        );
        assert!(report.table().contains("3.00"), "{}", report.table());
        // Reads are listed apart and do not count as writes.
        let reads: Vec<(&str, &str, u64)> = report
            .reads
            .iter()
            .map(|r| (r.verb.as_str(), r.resource.as_str(), r.count))
            .collect();
        assert_eq!(reads, vec![("get", "configmaps", 5)]);
        assert!(report.table().contains("reads (watches excluded)"));
        assert!(check(&report).is_ok());
    }

    #[test]
    fn no_counted_writes_is_an_error_and_no_counters_is_not() {
        let before = Reading {
            revision: Some(1),
            services: BTreeMap::from([("execution".to_owned(), parse_counts(METRICS))]),
            ..Reading::default()
        };
        let report = WritesReport::between(&before, &before, 0, 10, Duration::ZERO);
        assert!(check(&report).is_err());
        let external = Reading {
            revision: Some(1),
            ..Reading::default()
        };
        let report = WritesReport::between(&external, &external, 0, 10, Duration::ZERO);
        assert_eq!(report.per_member_object, None);
        assert!(check(&report).is_ok());
    }
}
