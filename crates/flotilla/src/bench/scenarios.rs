//! The scenarios: latency (one Deployment at a time), throughput (many templates with
//! dependencies at once, with the services' footprint sampled meanwhile) and policy-change
//! (moving a policy's placement, eager and lazy). Each works on its own namespace named after
//! the run, so runs against an existing control plane never collide.

use std::time::{Duration, Instant};

use serde::Serialize;

use super::arrivals::{Arrivals, Kind, Writes};
use super::disk;
use super::footprint::{self, MachineTimes, ProcessFootprint, Window};
use super::stats::{Percentiles, percentiles, round, table};
use super::workload::{self, names};
use super::writes::{self, WritesReport};
use super::{BenchError, BenchOptions, Target, progress};

/// Issue 10's latency target: p99 to 3 members.
pub const LATENCY_P99_TARGET_MS: f64 = 100.0;
/// Issue 10's throughput target.
pub const THROUGHPUT_TARGET_PER_SECOND: f64 = 1000.0;
/// Issue 10's footprint target for the four services at N = 10,000.
pub const FOOTPRINT_TARGET_MIB: f64 = 150.0;
/// Period of footprint samples.
const SAMPLE_PERIOD: Duration = Duration::from_millis(250);
/// How long the footprint is observed after the services settled, for the "after" figures.
const SETTLE: Duration = Duration::from_secs(5);
/// The footprint's row for the bench process itself.
const BENCH_PROCESS: &str = "flotilla bench";

/// A prefix unique to this process's run, for namespaces.
fn run_id() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    format!("fb{}", secs % 1_000_000)
}

fn clusters(target: &Target, count: usize) -> Vec<String> {
    target.member_names().into_iter().take(count).collect()
}

async fn wait(
    arrivals: &Arrivals,
    what: &str,
    timeout: Duration,
    check: impl Fn(&super::arrivals::View<'_>) -> bool,
) -> Result<(), BenchError> {
    if arrivals.wait(timeout, check).await {
        Ok(())
    } else {
        Err(BenchError::Timeout {
            what: what.to_owned(),
            waited: timeout,
        })
    }
}

/// Latency: one Deployment at a time until it is present in every target member.
#[derive(Clone, Debug, Serialize)]
pub struct LatencyReport {
    /// Runs measured (a warm-up run is not counted).
    pub runs: usize,
    /// Target members.
    pub members: usize,
    /// Create call to presence in the last member.
    #[serde(flatten)]
    pub percentiles: Percentiles,
    /// Whether p99 meets [`LATENCY_P99_TARGET_MS`] (meaningful for 3 members).
    pub meets_target: bool,
}

impl LatencyReport {
    /// The scenario's table.
    pub fn table(&self) -> String {
        let p = &self.percentiles;
        let ms = |v: f64| format!("{v:.1}");
        format!(
            "latency: create -> present in {} member(s), {} runs\n{}",
            self.members,
            self.runs,
            table(
                &[
                    "p50 ms",
                    "p95 ms",
                    "p99 ms",
                    "min ms",
                    "max ms",
                    "mean ms",
                    "p99 target"
                ],
                &[vec![
                    ms(p.p50_ms),
                    ms(p.p95_ms),
                    ms(p.p99_ms),
                    ms(p.min_ms),
                    ms(p.max_ms),
                    ms(p.mean_ms),
                    format!(
                        "< {LATENCY_P99_TARGET_MS} ms: {}",
                        if self.meets_target { "met" } else { "missed" }
                    ),
                ]]
            )
        )
    }
}

/// Runs the latency scenario.
pub async fn latency(target: &Target, options: &BenchOptions) -> Result<LatencyReport, BenchError> {
    let count = options.latency_members.min(target.members.len());
    if count == 0 {
        return Err(BenchError::Invalid(
            "the latency scenario needs at least one member".to_owned(),
        ));
    }
    let namespace = format!("{}-latency", run_id());
    let cp = &target.control_plane;
    workload::ensure_namespace(cp, &namespace).await?;
    workload::apply_policy(
        cp,
        &workload::policy(&namespace, "bench", &clusters(target, count), false, false),
    )
    .await?;
    let arrivals = Arrivals::new();
    arrivals.watch(
        &target.member_clients(count),
        &namespace,
        &[Kind::Deployment],
        "lat-",
    );
    let result = async {
        wait(&arrivals, "member watches to start", options.timeout, |v| {
            v.synced(&namespace, count)
        })
        .await?;
        progress(&format!(
            "latency: {} runs to {count} member(s) ...",
            options.runs
        ));
        let mut samples = Vec::with_capacity(options.runs);
        // The first run pays for namespace propagation and connection set-up: not counted.
        for i in 0..=options.runs {
            let name = format!("lat-{i:05}");
            let started = Instant::now();
            workload::create_template(cp, &namespace, &name, false, Duration::ZERO).await?;
            let keys: Vec<_> = (0..count)
                .map(|m| (m, Kind::Deployment, namespace.clone(), name.clone()))
                .collect();
            wait(
                &arrivals,
                &format!("Deployment {name} in {count} member(s)"),
                options.timeout,
                |v| v.last_arrival(&keys).is_some(),
            )
            .await?;
            let arrived = arrivals.with(|v| v.last_arrival(&keys)).unwrap_or(started);
            if i > 0 {
                samples.push(arrived.saturating_duration_since(started));
            }
        }
        let percentiles = percentiles(&samples);
        Ok(LatencyReport {
            runs: samples.len(),
            members: count,
            meets_target: percentiles.p99_ms < LATENCY_P99_TARGET_MS,
            percentiles,
        })
    }
    .await;
    arrivals.stop();
    result
}

/// Throughput: N templates (each with a ConfigMap dependency) to M members.
#[derive(Clone, Debug, Serialize)]
pub struct ThroughputReport {
    /// Deployments created.
    pub templates: usize,
    /// Target members.
    pub members: usize,
    /// Whether each Deployment had a ConfigMap dependency (propagateDeps).
    pub deps: bool,
    /// Member objects expected and reached: templates x members (x 2 with deps).
    pub member_objects: usize,
    /// Time to create every template on the control plane, seconds.
    pub create_seconds: f64,
    /// First create to the first member object, seconds.
    pub first_arrival_seconds: f64,
    /// First create to the last member object, seconds.
    pub seconds: f64,
    /// member_objects / seconds.
    pub objects_per_second: f64,
    /// Whether objects_per_second meets [`THROUGHPUT_TARGET_PER_SECOND`].
    pub meets_target: bool,
    /// Member objects present over time: `(seconds since the first create, objects)`, at most
    /// [`CURVE_POINTS`] points (`flotilla bench --plot`).
    pub arrivals: Vec<(f64, usize)>,
    /// The control plane's writes during the run.
    pub writes: WritesReport,
}

/// The most points kept of the arrival curve.
pub const CURVE_POINTS: usize = 400;

/// The arrival curve of `offsets` (seconds since the start, any order): cumulative counts,
/// thinned to at most `points` points, always keeping the first and the last arrival.
pub fn arrival_curve(mut offsets: Vec<f64>, points: usize) -> Vec<(f64, usize)> {
    offsets.sort_by(f64::total_cmp);
    let n = offsets.len();
    if n == 0 || points == 0 {
        return Vec::new();
    }
    let step = n.div_ceil(points.max(2) - 1).max(1);
    let mut curve: Vec<(f64, usize)> = (0..n)
        .step_by(step)
        .map(|i| (round(offsets[i], 3), i + 1))
        .collect();
    if curve.last().map(|(_, c)| *c) != Some(n) {
        curve.push((round(offsets[n - 1], 3), n));
    }
    curve
}

impl ThroughputReport {
    /// The scenario's table.
    pub fn table(&self) -> String {
        format!(
            "throughput: {} Deployments{} to {} member(s)\n{}",
            self.templates,
            if self.deps {
                " (+1 ConfigMap each, propagateDeps)"
            } else {
                ""
            },
            self.members,
            table(
                &[
                    "member objects",
                    "create s",
                    "first arrival s",
                    "all present s",
                    "objects/s",
                    "target"
                ],
                &[vec![
                    self.member_objects.to_string(),
                    format!("{:.2}", self.create_seconds),
                    format!("{:.2}", self.first_arrival_seconds),
                    format!("{:.2}", self.seconds),
                    format!("{:.0}", self.objects_per_second),
                    format!(
                        ">= {THROUGHPUT_TARGET_PER_SECOND}/s: {}",
                        if self.meets_target { "met" } else { "missed" }
                    ),
                ]]
            )
        ) + "\n"
            + &self.writes.table()
    }
}

/// The footprint of the service processes (and API servers) during and after a throughput run.
#[derive(Clone, Debug, Serialize)]
pub struct FootprintReport {
    /// Templates of the throughput run it was measured on.
    pub templates: usize,
    /// Every process.
    pub processes: Vec<ProcessFootprint>,
    /// The four services together.
    pub services_total: ProcessFootprint,
    /// What the data directory's block device wrote from the first create until the run
    /// settled; none when the directory is on no block device (tmpfs, overlayfs).
    pub device_writes: Option<DeviceWrites>,
    /// The whole machine's CPU time from the first create until the run settled; none where
    /// `/proc/stat` cannot be read.
    pub machine_cpu: Option<MachineCpu>,
}

/// The whole machine's CPU time over a throughput run (`/proc/stat`, every core): every process
/// on it, the kernel's threads (writeback, soft interrupts) included, whichever installation
/// ran. The figure to compare hosts and builds by, in CPU per member object, beside the
/// per-process rows that leave the kernel's threads out.
#[derive(Clone, Debug, Serialize)]
pub struct MachineCpu {
    /// Busy seconds (user, nice, system, irq, softirq).
    pub busy_seconds: f64,
    /// Idle seconds (idle and iowait).
    pub idle_seconds: f64,
    /// Seconds the hypervisor ran another guest while this one had work.
    pub steal_seconds: f64,
    /// Busy milliseconds per member object.
    pub busy_ms_per_member_object: f64,
}

impl MachineCpu {
    fn between(before: Option<MachineTimes>, member_objects: usize) -> Option<MachineCpu> {
        let passed = footprint::machine_times()?.since(&before?);
        Some(MachineCpu::of(passed, member_objects))
    }

    fn of(passed: MachineTimes, member_objects: usize) -> MachineCpu {
        MachineCpu {
            busy_seconds: round(passed.busy, 2),
            idle_seconds: round(passed.idle, 2),
            steal_seconds: round(passed.steal, 2),
            busy_ms_per_member_object: round(passed.busy * 1000.0 / member_objects.max(1) as f64, 3),
        }
    }
}

/// Bytes a block device wrote over a throughput run (every writer on it: the API servers'
/// stores and logs, and anything else running on the machine).
#[derive(Clone, Debug, Serialize)]
pub struct DeviceWrites {
    /// `<major>:<minor>`.
    pub device: String,
    /// MiB written.
    pub mib: f64,
    /// KiB written per member object.
    pub kib_per_member_object: f64,
}

impl DeviceWrites {
    fn between(device: &disk::Device, before: Option<u64>, member_objects: usize) -> Option<DeviceWrites> {
        let bytes = device.written_bytes()?.checked_sub(before?)?;
        Some(DeviceWrites {
            device: device.name.clone(),
            mib: round(bytes as f64 / (1024.0 * 1024.0), 1),
            kib_per_member_object: round(bytes as f64 / 1024.0 / member_objects.max(1) as f64, 2),
        })
    }
}

impl FootprintReport {
    pub(crate) fn new(
        templates: usize,
        processes: Vec<ProcessFootprint>,
        device_writes: Option<DeviceWrites>,
    ) -> FootprintReport {
        let services: Vec<&ProcessFootprint> = processes
            .iter()
            .filter(|p| super::install::SERVICES.contains(&p.name.as_str()))
            .collect();
        let sum = |f: fn(&ProcessFootprint) -> f64| round(services.iter().map(|p| f(p)).sum(), 2);
        FootprintReport {
            templates,
            services_total: ProcessFootprint {
                name: "services total".to_owned(),
                rss_peak_mib: sum(|p| p.rss_peak_mib),
                rss_after_mib: sum(|p| p.rss_after_mib),
                cpu_seconds: sum(|p| p.cpu_seconds),
            },
            processes,
            device_writes,
            machine_cpu: None,
        }
    }

    /// The scenario's table.
    pub fn table(&self) -> String {
        let mut rows: Vec<Vec<String>> = self
            .processes
            .iter()
            .chain(std::iter::once(&self.services_total))
            .map(|p| {
                vec![
                    p.name.clone(),
                    format!("{:.1}", p.rss_peak_mib),
                    format!("{:.1}", p.rss_after_mib),
                    format!("{:.2}", p.cpu_seconds),
                ]
            })
            .collect();
        rows.push(vec![
            format!("(target: services < {FOOTPRINT_TARGET_MIB} MiB at N = 10,000)"),
            String::new(),
            String::new(),
            String::new(),
        ]);
        let device = match &self.device_writes {
            Some(d) => format!(
                "\ndevice {} (the data directory's) wrote {:.1} MiB until the run settled, {:.2} KiB per member object",
                d.device, d.mib, d.kib_per_member_object
            ),
            None => String::new(),
        };
        let machine = match &self.machine_cpu {
            Some(m) => format!(
                "\nthe machine (every process and the kernel, all cores) until the run settled: {:.2} CPU s busy, {:.3} ms per member object; {:.2} s idle, {:.2} s stolen",
                m.busy_seconds, m.busy_ms_per_member_object, m.idle_seconds, m.steal_seconds
            ),
            None => String::new(),
        };
        format!(
            "footprint of the throughput run until it settled, and after ({} templates)\n{}{device}{machine}",
            self.templates,
            table(
                &["process", "peak RSS MiB", "RSS after MiB", "CPU s during"],
                &rows
            )
        )
    }
}

/// Runs the throughput scenario, sampling the footprint meanwhile (when processes are known).
pub async fn throughput(
    target: &Target,
    options: &BenchOptions,
) -> Result<(ThroughputReport, Option<FootprintReport>), BenchError> {
    let templates = options.templates * options.scale.max(1);
    let count = options.members.min(target.members.len());
    if count == 0 || templates == 0 {
        return Err(BenchError::Invalid(
            "the throughput scenario needs --templates and --members of at least 1".to_owned(),
        ));
    }
    let namespace = format!("{}-throughput", run_id());
    let cp = &target.control_plane;
    workload::ensure_namespace(cp, &namespace).await?;
    workload::apply_policy(
        cp,
        &workload::policy(&namespace, "bench", &clusters(target, count), options.deps, false),
    )
    .await?;
    let kinds: Vec<Kind> = if options.deps {
        vec![Kind::Deployment, Kind::ConfigMap]
    } else {
        vec![Kind::Deployment]
    };
    let arrivals = Arrivals::new();
    arrivals.watch(&target.member_clients(count), &namespace, &kinds, "t-");
    let pids = || {
        let mut pids = target.service_pids();
        pids.extend(target.apiserver_pids());
        // The bench's own share of the machine it measures (its watches of the members, its
        // creates), beside the processes it runs; none without them (an external target).
        if !pids.is_empty() {
            pids.push((BENCH_PROCESS.to_owned(), std::process::id()));
        }
        pids
    };
    let result = async {
        wait(&arrivals, "member watches to start", options.timeout, |v| {
            v.synced(&namespace, count * kinds.len())
        })
        .await?;
        let names = names("t", templates);
        progress(&format!(
            "throughput: {templates} Deployments{} to {count} member(s) ...",
            if options.deps { " with ConfigMaps" } else { "" }
        ));
        let device = target.data_dir().and_then(disk::Device::of);
        let device_before = device.as_ref().and_then(disk::Device::written_bytes);
        let machine_before = footprint::machine_times();
        let before = writes::Reading::take(target).await;
        let mut during = Window::default();
        let started = Instant::now();
        let created = during
            .during(SAMPLE_PERIOD, &pids, async {
                workload::create_templates(
                    cp,
                    &namespace,
                    &names,
                    options.deps,
                    options.parallel,
                    Duration::ZERO,
                )
                .await?;
                let created = started.elapsed();
                progress(&format!(
                    "  created in {:.1}s; waiting for the members ...",
                    created.as_secs_f64()
                ));
                wait(
                    &arrivals,
                    &format!("{templates} templates in {count} member(s)"),
                    options.timeout,
                    |v| (0..count).all(|m| kinds.iter().all(|k| v.count(m, *k, &namespace) >= templates)),
                )
                .await?;
                Ok::<Duration, BenchError>(created)
            })
            .await?;
        // Each member object's first arrival, in seconds since the first create.
        let offsets = arrivals.with(|v| {
            let mut offsets = Vec::new();
            for m in 0..count {
                for kind in &kinds {
                    for name in &names {
                        let object = match kind {
                            Kind::Deployment => name.clone(),
                            Kind::ConfigMap => workload::config_map_name(name),
                        };
                        if let Some(seen) = v.first_seen(m, *kind, &namespace, &object) {
                            offsets.push(seen.saturating_duration_since(started).as_secs_f64());
                        }
                    }
                }
            }
            offsets
        });
        let member_objects = templates * count * kinds.len();
        // The services keep working after the last arrival (binding and template statuses):
        // their footprint is sampled until they settled, so the peak is the whole run's.
        let (after, settled) = during.during(SAMPLE_PERIOD, &pids, writes::settle(target)).await;
        let device_writes = device
            .as_ref()
            .and_then(|d| DeviceWrites::between(d, device_before, member_objects));
        let machine_cpu = MachineCpu::between(machine_before, member_objects);
        // The bench's own writes in between: one create per template and kind.
        let bench_writes = (templates * kinds.len()) as u64;
        let writes = WritesReport::between(&before, &after, bench_writes, member_objects, settled);
        writes::check(&writes)?;
        let first = offsets.iter().copied().reduce(f64::min).unwrap_or(0.0);
        let seconds = offsets.iter().copied().reduce(f64::max).unwrap_or(0.0);
        let objects_per_second = if seconds > 0.0 {
            member_objects as f64 / seconds
        } else {
            0.0
        };
        let report = ThroughputReport {
            templates,
            members: count,
            deps: options.deps,
            member_objects,
            create_seconds: round(created.as_secs_f64(), 2),
            first_arrival_seconds: round(first, 3),
            seconds: round(seconds, 2),
            objects_per_second: round(objects_per_second, 0),
            meets_target: objects_per_second >= THROUGHPUT_TARGET_PER_SECOND,
            arrivals: arrival_curve(offsets, CURVE_POINTS),
            writes,
        };
        let footprint = if pids().is_empty() {
            None
        } else {
            let mut after = Window::default();
            after
                .during(SAMPLE_PERIOD, &pids, tokio::time::sleep(SETTLE))
                .await;
            let mut report = FootprintReport::new(templates, during.report(&after), device_writes);
            report.machine_cpu = machine_cpu;
            Some(report)
        };
        Ok((report, footprint))
    }
    .await;
    arrivals.stop();
    result
}

/// One placement change.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ChangeReport {
    /// Policy update to every member reflecting it, seconds (eager only).
    pub seconds: Option<f64>,
    /// Bindings whose spec changed (generation moved).
    pub binding_spec_writes: usize,
    /// Member creates + spec changes + deletes of the templates' objects.
    pub member_writes: u64,
    /// Lazy only: whether the control plane reported observing the new policy generation
    /// before the observation window (else the window alone was waited).
    pub observed_by_detector: Option<bool>,
    /// Lazy only: policy update to the policy's `status.observedGeneration` reaching it, i.e.
    /// the time the detector took to process the edit (re-evaluate every claimed template and
    /// mark them pending), seconds.
    pub detector_seconds: Option<f64>,
}

/// `flotilla activate --max N` on the Lazy policy's templates after the edit.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ActivationReport {
    /// `--max`.
    pub max: usize,
    /// Templates `flotilla activate` reported activated.
    pub activated: usize,
    /// Bindings whose spec changed after the activation.
    pub binding_spec_writes: usize,
    /// Templates in the new cluster after the activation (and the observation window).
    pub in_new_cluster: usize,
    /// Templates left in the old cluster.
    pub in_old_cluster: usize,
    /// Activation request to the last activated template in the new cluster, seconds.
    pub seconds: f64,
}

impl ActivationReport {
    /// Whether exactly `max` templates moved, and only they.
    pub fn ok(&self, templates: usize) -> bool {
        let moved = self.max.min(templates);
        self.activated == moved
            && self.binding_spec_writes == moved
            && self.in_new_cluster == moved
            && self.in_old_cluster == templates - moved
    }
}

/// Policy change: eager (time until the members reflect it) and lazy (writes: must be 0).
#[derive(Clone, Debug, Serialize)]
pub struct PolicyChangeReport {
    /// Templates the policy matches.
    pub templates: usize,
    /// The eager change.
    pub eager: ChangeReport,
    /// The lazy change.
    pub lazy: ChangeReport,
    /// Whether the lazy change wrote nothing.
    pub lazy_ok: bool,
    /// `flotilla activate --max` after the lazy change (`--activate-max 0`: skipped).
    pub activation: Option<ActivationReport>,
    /// Whether the activation moved exactly its templates.
    pub activation_ok: Option<bool>,
}

impl PolicyChangeReport {
    /// The scenario's table.
    pub fn table(&self) -> String {
        let row = |name: &str, c: &ChangeReport, expect: &str| {
            vec![
                name.to_owned(),
                c.seconds.map_or("-".to_owned(), |s| format!("{s:.2}")),
                c.binding_spec_writes.to_string(),
                c.member_writes.to_string(),
                expect.to_owned(),
            ]
        };
        let changes = format!(
            "policy-change: placement member1 -> member2 of a policy matching {} templates\n{}",
            self.templates,
            table(
                &[
                    "activation",
                    "reflected s",
                    "binding spec writes",
                    "member writes",
                    "expected"
                ],
                &[
                    row("eager", &self.eager, "every template moves"),
                    row(
                        "Lazy",
                        &self.lazy,
                        if self.lazy_ok {
                            "0 writes: ok"
                        } else {
                            "0 writes: VIOLATED"
                        }
                    ),
                ]
            )
        );
        let detector = self.lazy.detector_seconds.map_or_else(
            || "the detector did not report observing the Lazy edit (observedGeneration)".to_owned(),
            |s| format!("detector processed the Lazy edit (observedGeneration) in {s:.2}s"),
        );
        let activation = match (&self.activation, self.activation_ok) {
            (Some(a), Some(ok)) => format!(
                "\nflotilla activate --max {}: activated {}, binding spec writes {}, in member2 {}, left in member1 {}, {:.2}s ({})",
                a.max,
                a.activated,
                a.binding_spec_writes,
                a.in_new_cluster,
                a.in_old_cluster,
                a.seconds,
                if ok { "exactly those moved: ok" } else { "VIOLATED" }
            ),
            _ => String::new(),
        };
        format!("{changes}\n{detector}{activation}")
    }
}

async fn converge_on_first(
    target: &Target,
    options: &BenchOptions,
    namespace: &str,
    lazy: bool,
    arrivals: &Arrivals,
    templates: usize,
) -> Result<(), BenchError> {
    let cp = &target.control_plane;
    let first = clusters(target, 1);
    workload::ensure_namespace(cp, namespace).await?;
    workload::apply_policy(cp, &workload::policy(namespace, "bench", &first, false, lazy)).await?;
    arrivals.watch(&target.member_clients(2), namespace, &[Kind::Deployment], "p-");
    wait(arrivals, "member watches to start", options.timeout, |v| {
        v.synced(namespace, 2)
    })
    .await?;
    workload::create_templates(
        cp,
        namespace,
        &names("p", templates),
        false,
        options.parallel,
        Duration::ZERO,
    )
    .await?;
    wait(
        arrivals,
        &format!("{templates} templates in member1"),
        options.timeout,
        |v| v.count(0, Kind::Deployment, namespace) >= templates,
    )
    .await
}

fn member_writes(arrivals: &Arrivals, namespace: &str) -> Writes {
    arrivals.with(|v| {
        let (a, b) = (v.writes(0, namespace), v.writes(1, namespace));
        Writes {
            creates: a.creates + b.creates,
            spec_changes: a.spec_changes + b.spec_changes,
            deletes: a.deletes + b.deletes,
        }
    })
}

fn changed(
    before: &std::collections::BTreeMap<String, i64>,
    after: &std::collections::BTreeMap<String, i64>,
) -> usize {
    after
        .iter()
        .filter(|(name, generation)| before.get(*name) != Some(*generation))
        .count()
}

/// Runs the policy-change scenario.
pub async fn policy_change(
    target: &Target,
    options: &BenchOptions,
) -> Result<PolicyChangeReport, BenchError> {
    if target.members.len() < 2 {
        return Err(BenchError::Invalid(
            "the policy-change scenario needs at least 2 members".to_owned(),
        ));
    }
    let templates = options.policy_templates.max(1);
    let cp = &target.control_plane;
    let second = vec![target.member_names()[1].clone()];
    let id = run_id();
    let arrivals = Arrivals::new();
    let result = async {
        // Eager.
        let namespace = format!("{id}-policy-eager");
        progress(&format!("policy-change: {templates} templates, eager ..."));
        converge_on_first(target, options, &namespace, false, &arrivals, templates).await?;
        let bindings_before = workload::binding_generations(cp, &namespace).await?;
        let writes_before = member_writes(&arrivals, &namespace);
        let started = Instant::now();
        workload::move_policy(cp, &namespace, "bench", &second).await?;
        wait(
            &arrivals,
            "the eager placement change in the members",
            options.timeout,
            |v| {
                v.count(1, Kind::Deployment, &namespace) >= templates
                    && v.count(0, Kind::Deployment, &namespace) == 0
            },
        )
        .await?;
        let seconds = started.elapsed().as_secs_f64();
        let eager = ChangeReport {
            seconds: Some(round(seconds, 2)),
            binding_spec_writes: changed(
                &bindings_before,
                &workload::binding_generations(cp, &namespace).await?,
            ),
            member_writes: member_writes(&arrivals, &namespace).total() - writes_before.total(),
            observed_by_detector: None,
            detector_seconds: None,
        };

        // Lazy.
        let namespace = format!("{id}-policy-lazy");
        progress(&format!("policy-change: {templates} templates, Lazy ..."));
        converge_on_first(target, options, &namespace, true, &arrivals, templates).await?;
        let bindings_before = workload::binding_generations(cp, &namespace).await?;
        let writes_before = member_writes(&arrivals, &namespace);
        let generation = workload::move_policy(cp, &namespace, "bench", &second).await?;
        let edited = Instant::now();
        let observed =
            wait_policy_observed(cp, &namespace, "bench", generation, Duration::from_secs(120)).await;
        let detector_seconds = observed.then(|| round(edited.elapsed().as_secs_f64(), 2));
        // Writes caused by the change would follow the detector's observation within moments;
        // watch for them over the window.
        tokio::time::sleep(options.lazy_window).await;
        let bindings_before_activation = workload::binding_generations(cp, &namespace).await?;
        let lazy = ChangeReport {
            seconds: None,
            binding_spec_writes: changed(&bindings_before, &bindings_before_activation),
            member_writes: member_writes(&arrivals, &namespace).total() - writes_before.total(),
            observed_by_detector: Some(observed),
            detector_seconds,
        };
        let activation = if options.activate_max > 0 {
            Some(
                activate_some(
                    cp,
                    options,
                    &namespace,
                    &arrivals,
                    templates,
                    &bindings_before_activation,
                )
                .await?,
            )
        } else {
            None
        };
        Ok(PolicyChangeReport {
            templates,
            lazy_ok: lazy.binding_spec_writes == 0 && lazy.member_writes == 0,
            eager,
            lazy,
            activation_ok: activation.as_ref().map(|a| a.ok(templates)),
            activation,
        })
    }
    .await;
    arrivals.stop();
    result
}

/// Runs `flotilla activate deployments --max N` in `namespace` (Lazy, edited to member2), waits
/// until member2 holds the activated templates, watches the observation window for more, and
/// counts what moved.
async fn activate_some(
    cp: &kube::Client,
    options: &BenchOptions,
    namespace: &str,
    arrivals: &Arrivals,
    templates: usize,
    bindings_before: &std::collections::BTreeMap<String, i64>,
) -> Result<ActivationReport, BenchError> {
    let max = options.activate_max;
    let moved = max.min(templates);
    progress(&format!("policy-change: flotilla activate --max {max} ..."));
    let started = Instant::now();
    let report = crate::activate::run(
        cp,
        &crate::activate::ActivateOptions {
            targets: vec!["deployments".to_owned()],
            namespace: Some(namespace.to_owned()),
            max: Some(max),
            ..Default::default()
        },
    )
    .await
    .map_err(|e| BenchError::Invalid(format!("flotilla activate --max {max} in {namespace}: {e}")))?;
    wait(
        arrivals,
        &format!("{moved} activated templates in member2"),
        options.timeout,
        |v| v.count(1, Kind::Deployment, namespace) >= moved,
    )
    .await?;
    let seconds = round(started.elapsed().as_secs_f64(), 2);
    // Anything activated beyond --max would show up within the window.
    tokio::time::sleep(options.lazy_window).await;
    let (in_new_cluster, in_old_cluster) = arrivals.with(|v| {
        (
            v.count(1, Kind::Deployment, namespace),
            v.count(0, Kind::Deployment, namespace),
        )
    });
    Ok(ActivationReport {
        max,
        activated: report.activated.len(),
        binding_spec_writes: changed(
            bindings_before,
            &workload::binding_generations(cp, namespace).await?,
        ),
        in_new_cluster,
        in_old_cluster,
        seconds,
    })
}

/// Waits until the policy's `status.observedGeneration` reaches `generation`; false when the
/// control plane does not report it within `timeout`.
async fn wait_policy_observed(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    generation: i64,
    timeout: Duration,
) -> bool {
    let deadline = Instant::now() + timeout;
    let api = workload::policies(client, namespace);
    while Instant::now() < deadline {
        if let Ok(policy) = api.get(name).await
            && policy.data["status"]["observedGeneration"].as_i64() >= Some(generation)
        {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_arrival_curve_is_cumulative_sorted_and_thinned() {
        assert!(arrival_curve(Vec::new(), 10).is_empty());
        assert_eq!(arrival_curve(vec![0.5], 10), vec![(0.5, 1)]);
        assert_eq!(
            arrival_curve(vec![3.0, 1.0, 2.0], 10),
            vec![(1.0, 1), (2.0, 2), (3.0, 3)]
        );
        let offsets: Vec<f64> = (0..1000).rev().map(|i| f64::from(i) / 100.0).collect();
        let curve = arrival_curve(offsets, 50);
        assert!(curve.len() <= 50, "{} points", curve.len());
        assert_eq!(curve.first(), Some(&(0.0, 1)));
        assert_eq!(curve.last(), Some(&(9.99, 1000)));
        assert!(curve.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 < w[1].1));
    }

    #[test]
    fn activation_must_move_exactly_max_templates() {
        let report = |activated, writes, new, old| ActivationReport {
            max: 100,
            activated,
            binding_spec_writes: writes,
            in_new_cluster: new,
            in_old_cluster: old,
            seconds: 1.0,
        };
        assert!(report(100, 100, 100, 400).ok(500));
        // One more moved than asked, a binding written without moving, one left behind.
        assert!(!report(101, 101, 101, 399).ok(500));
        assert!(!report(100, 101, 100, 400).ok(500));
        assert!(!report(100, 100, 99, 401).ok(500));
        // Fewer templates than --max: all of them move.
        assert!(report(50, 50, 50, 0).ok(50));
        assert!(!report(50, 50, 50, 0).ok(60));
    }

    #[test]
    fn changed_counts_moved_and_new_generations() {
        let before = [("a".to_owned(), 1), ("b".to_owned(), 1)].into();
        let after = [("a".to_owned(), 1), ("b".to_owned(), 2), ("c".to_owned(), 1)].into();
        assert_eq!(changed(&before, &after), 2);
        assert_eq!(changed(&before, &before), 0);
    }

    #[test]
    fn footprint_totals_only_the_services() {
        let process = |name: &str, rss| ProcessFootprint {
            name: name.to_owned(),
            rss_peak_mib: rss,
            rss_after_mib: rss / 2.0,
            cpu_seconds: 1.0,
        };
        let report = FootprintReport::new(
            10,
            vec![
                process("flotilla-detector", 20.0),
                process("flotilla-execution", 30.0),
                process("control-plane", 500.0),
                process(BENCH_PROCESS, 60.0),
            ],
            None,
        );
        assert_eq!(report.services_total.rss_peak_mib, 50.0);
        assert_eq!(report.services_total.rss_after_mib, 25.0);
        assert_eq!(report.services_total.cpu_seconds, 2.0);
        assert!(report.table().contains("services total"));
        assert!(report.table().contains(BENCH_PROCESS), "{}", report.table());
        assert!(!report.table().contains("device"), "{}", report.table());
    }

    #[test]
    fn footprint_prints_the_machine_cpu_it_has() {
        let mut report = FootprintReport::new(10, Vec::new(), None);
        assert!(!report.table().contains("the machine"), "{}", report.table());
        report.machine_cpu = Some(MachineCpu::of(
            MachineTimes {
                busy: 42.0,
                idle: 3.5,
                steal: 0.25,
            },
            20_000,
        ));
        let machine = report.machine_cpu.as_ref().unwrap();
        assert_eq!(machine.busy_ms_per_member_object, 2.1);
        assert!(
            report.table().contains(
                "the machine (every process and the kernel, all cores) until the run settled: 42.00 CPU s busy, 2.100 ms per member object; 3.50 s idle, 0.25 s stolen"
            ),
            "{}",
            report.table()
        );
    }

    #[test]
    fn footprint_prints_the_device_writes_it_has() {
        let device = DeviceWrites {
            device: "254:0".to_owned(),
            mib: 5340.2,
            kib_per_member_object: 54.68,
        };
        let report = FootprintReport::new(10, Vec::new(), Some(device));
        assert!(
            report
                .table()
                .contains("device 254:0 (the data directory's) wrote 5340.2 MiB until the run settled, 54.68 KiB per member object"),
            "{}",
            report.table()
        );
    }
}
