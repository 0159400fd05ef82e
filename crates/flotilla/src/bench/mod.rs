//! `flotilla bench`: propagation benchmarks against any control plane that speaks the Karmada
//! API: flotilla's embedded installation (started here, in a temporary data dir) or an existing
//! one named by a kubeconfig and its contexts, so another implementation can be measured side
//! by side with the same runs.
//!
//! | module | owns |
//! |---|---|
//! | [`install`] | the embedded installation (`flotilla up`'s code) and its child processes |
//! | [`target`] | clients of the control plane and members, and the service processes |
//! | [`workload`] | the objects the bench applies and how it writes them |
//! | [`arrivals`] | member watches: arrival times, presence, write counts |
//! | [`scenarios`] | latency, throughput (+ footprint), policy-change |
//! | [`footprint`] | RSS and CPU from `/proc` |
//! | [`writes`] | control-plane writes per member object (revision and services' counters) |
//! | [`plot`] | the SVG of member objects arriving over time (`--plot`) |
//! | [`stats`] | percentiles and tables |

pub mod arrivals;
pub mod disk;
pub mod footprint;
pub mod install;
pub mod plot;
pub mod scenarios;
pub mod stats;
pub mod target;
pub mod workload;
pub mod writes;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio_util::sync::CancellationToken;

pub use scenarios::{FootprintReport, LatencyReport, PolicyChangeReport, ThroughputReport};
pub use target::{External, Target};

/// Errors of a bench or soak run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A call to a cluster failed.
    #[error("{what}: {source}")]
    Kube {
        /// What was being done.
        what: String,
        /// Why it failed.
        source: kube::Error,
    },
    /// Something did not happen in time.
    #[error("timed out after {waited:?} waiting for {what}")]
    Timeout {
        /// What was awaited.
        what: String,
        /// How long.
        waited: Duration,
    },
    /// The embedded installation could not start.
    #[error(transparent)]
    Up(#[from] crate::up::UpError),
    /// Options or inputs that cannot work, with the fix.
    #[error("{0}")]
    Invalid(String),
    /// SIGINT or SIGTERM arrived; the installation was stopped (and its data dir removed
    /// unless `--keep`).
    #[error("interrupted; the embedded installation was stopped")]
    Interrupted,
}

/// Which scenarios to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Scenario {
    /// Single-Deployment propagation latency.
    Latency,
    /// Many Deployments (with ConfigMap dependencies) at once.
    Throughput,
    /// Moving a policy's placement (eager and lazy).
    PolicyChange,
    /// RSS and CPU of the services during and after a throughput run.
    Footprint,
    /// Every scenario.
    All,
}

/// Ready-made option sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Preset {
    /// The figures issue 4 asks for: apply -> present in 3 members (p50/p99 over 200 runs) and
    /// the time to propagate 1,000 Deployments to 3 members.
    Issue4,
}

/// What `flotilla bench` runs.
#[derive(Clone, Debug)]
pub struct BenchOptions {
    /// The scenario(s).
    pub scenario: Scenario,
    /// The preset applied, if any (`all` under a preset means the preset's figures).
    pub preset: Option<Preset>,
    /// Latency runs.
    pub runs: usize,
    /// Members the latency scenario targets.
    pub latency_members: usize,
    /// Throughput templates (before `scale`).
    pub templates: usize,
    /// Members of the throughput scenario (and of the embedded installation).
    pub members: usize,
    /// Multiplies `templates`.
    pub scale: usize,
    /// Whether each throughput Deployment has a ConfigMap dependency (propagateDeps).
    pub deps: bool,
    /// Templates of the policy-change scenario.
    pub policy_templates: usize,
    /// `flotilla activate --max` run after the policy-change scenario's Lazy edit (0: skip).
    pub activate_max: usize,
    /// Concurrent writes while creating templates.
    pub parallel: usize,
    /// How long one wait may take before the scenario fails.
    pub timeout: Duration,
    /// How long the lazy policy change is observed for writes.
    pub lazy_window: Duration,
    /// An existing control plane instead of the embedded one.
    pub external: Option<External>,
    /// Binaries of the embedded installation.
    pub bin_dir: Option<PathBuf>,
    /// `--log-level` of the embedded installation's children.
    pub log_level: String,
    /// Keep the embedded installation's data dir.
    pub keep: bool,
}

impl Default for BenchOptions {
    fn default() -> Self {
        Self {
            scenario: Scenario::All,
            preset: None,
            runs: 200,
            latency_members: 3,
            templates: 2000,
            members: 5,
            scale: 1,
            deps: true,
            policy_templates: 500,
            activate_max: 100,
            parallel: 16,
            timeout: Duration::from_secs(600),
            lazy_window: Duration::from_secs(5),
            external: None,
            bin_dir: None,
            log_level: "info".to_owned(),
            keep: false,
        }
    }
}

impl BenchOptions {
    /// Applies `preset` on top of these options.
    pub fn with_preset(mut self, preset: Preset) -> Self {
        self.preset = Some(preset);
        match preset {
            Preset::Issue4 => {
                self.runs = 200;
                self.latency_members = 3;
                self.templates = 1000;
                self.members = 3;
                self.scale = 1;
                self.deps = false;
            }
        }
        self
    }

    fn runs_latency(&self) -> bool {
        matches!(self.scenario, Scenario::Latency | Scenario::All)
    }
    /// Whether the throughput scenario runs (the one `--plot` draws).
    pub fn runs_throughput(&self) -> bool {
        matches!(
            self.scenario,
            Scenario::Throughput | Scenario::Footprint | Scenario::All
        )
    }
    fn runs_policy_change(&self) -> bool {
        match self.scenario {
            Scenario::PolicyChange => true,
            Scenario::All => self.preset != Some(Preset::Issue4),
            _ => false,
        }
    }
}

/// The machine the run happened on.
#[derive(Clone, Debug, Serialize)]
pub struct Machine {
    /// Online CPUs.
    pub cpus: usize,
    /// Total memory, MiB.
    pub memory_mib: u64,
    /// 1-minute load average when the run started (other work on the machine).
    pub load_average_at_start: f64,
}

impl Machine {
    /// Reads `/proc/meminfo` and `/proc/loadavg`.
    pub fn describe() -> Machine {
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let memory_kib: u64 = meminfo
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_default();
        let load = std::fs::read_to_string("/proc/loadavg")
            .ok()
            .and_then(|text| text.split_whitespace().next().and_then(|v| v.parse().ok()))
            .unwrap_or_default();
        Machine {
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            memory_mib: memory_kib / 1024,
            load_average_at_start: load,
        }
    }
}

/// Everything a bench run measured.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// The machine.
    pub machine: Machine,
    /// `embedded` or the external control plane's context.
    pub target: String,
    /// The members used.
    pub members: Vec<String>,
    /// Latency, if run.
    pub latency: Option<LatencyReport>,
    /// Throughput, if run.
    pub throughput: Option<ThroughputReport>,
    /// Policy change, if run.
    pub policy_change: Option<PolicyChangeReport>,
    /// Footprint, if run (with the throughput run).
    pub footprint: Option<FootprintReport>,
    /// Wall time of the whole run, seconds (installation start-up included).
    pub wall_seconds: f64,
}

/// Progress lines go to stderr, so `--json` output on stdout stays parseable.
pub(crate) fn progress(line: &str) {
    eprintln!("{line}");
}

/// Runs the selected scenarios and returns what they measured.
pub async fn run(options: &BenchOptions, interrupt: &CancellationToken) -> Result<Report, BenchError> {
    let started = Instant::now();
    let machine = Machine::describe();
    let target = Target::connect(options.external.as_ref(), &install_options(options)).await?;
    // On SIGINT/SIGTERM the scenario is abandoned and the installation still stopped below, so
    // no child process or data dir outlives the run.
    let result = tokio::select! {
        result = run_on(&target, options) => result,
        () = interrupt.cancelled() => Err(BenchError::Interrupted),
    };
    let description = target.description();
    let members = target.member_names();
    target.close().await;
    let (latency, throughput, policy_change, footprint) = result?;
    Ok(Report {
        machine,
        target: description,
        members,
        latency,
        throughput,
        policy_change,
        footprint,
        wall_seconds: stats::round(started.elapsed().as_secs_f64(), 1),
    })
}

fn install_options(options: &BenchOptions) -> install::InstallOptions {
    let mut members = options.members;
    if options.runs_latency() {
        members = members.max(options.latency_members);
    }
    if options.runs_policy_change() {
        members = members.max(2);
    }
    install::InstallOptions {
        members,
        bin_dir: options.bin_dir.clone(),
        log_level: options.log_level.clone(),
        policy: crate::supervisor::Policy::default(),
        keep: options.keep,
    }
}

type Results = (
    Option<LatencyReport>,
    Option<ThroughputReport>,
    Option<PolicyChangeReport>,
    Option<FootprintReport>,
);

async fn run_on(target: &Target, options: &BenchOptions) -> Result<Results, BenchError> {
    let mut results: Results = (None, None, None, None);
    if options.runs_latency() {
        let report = scenarios::latency(target, options).await?;
        progress(&report.table());
        results.0 = Some(report);
    }
    if options.runs_throughput() {
        let (report, footprint) = scenarios::throughput(target, options).await?;
        progress(&report.table());
        if let Some(footprint) = &footprint {
            progress(&footprint.table());
        }
        results.1 = Some(report);
        results.3 = footprint;
    }
    if options.runs_policy_change() {
        let report = scenarios::policy_change(target, options).await?;
        progress(&report.table());
        results.2 = Some(report);
    }
    Ok(results)
}

impl Report {
    /// Every table of the report, for the terminal and `docs/benchmarks.md`.
    pub fn tables(&self) -> String {
        let mut out = vec![format!(
            "target {} with {} member(s) on {} CPU(s), {} MiB; load average {:.2} at start; {:.1}s wall",
            self.target,
            self.members.len(),
            self.machine.cpus,
            self.machine.memory_mib,
            self.machine.load_average_at_start,
            self.wall_seconds
        )];
        if let Some(r) = &self.latency {
            out.push(r.table());
        }
        if let Some(r) = &self.throughput {
            out.push(r.table());
        }
        if let Some(r) = &self.footprint {
            out.push(r.table());
        }
        if let Some(r) = &self.policy_change {
            out.push(r.table());
        }
        out.join("\n\n")
    }
}

/// The figures of two runs side by side (`flotilla bench --baseline-bin-dir`): one row per
/// figure both runs measured, with the current run's change against the baseline.
pub fn comparison(baseline: &Report, current: &Report) -> String {
    fn figures(report: &Report) -> Vec<(String, Option<f64>)> {
        let mut out = Vec::new();
        if let Some(l) = &report.latency {
            out.push((
                format!("latency p50 ms ({} members)", l.members),
                Some(l.percentiles.p50_ms),
            ));
            out.push((
                format!("latency p99 ms ({} members)", l.members),
                Some(l.percentiles.p99_ms),
            ));
        }
        if let Some(t) = &report.throughput {
            out.push(("member objects".to_owned(), Some(t.member_objects as f64)));
            out.push(("all present s".to_owned(), Some(t.seconds)));
            out.push(("member objects/s".to_owned(), Some(t.objects_per_second)));
            out.push((
                "writes per member object (services)".to_owned(),
                t.writes.per_member_object,
            ));
            out.push((
                "writes per member object (resourceVersion)".to_owned(),
                t.writes.control_plane_writes_per_member_object,
            ));
            out.push((
                "409 conflicts per member object".to_owned(),
                t.writes.conflicts_per_member_object,
            ));
        }
        if let Some(f) = &report.footprint {
            let cpu = f.services_total.cpu_seconds;
            out.push(("services CPU s".to_owned(), Some(cpu)));
            if let Some(t) = &report.throughput
                && t.member_objects > 0
            {
                out.push((
                    "services CPU ms per member object".to_owned(),
                    Some(stats::round(cpu * 1000.0 / t.member_objects as f64, 2)),
                ));
            }
            out.push((
                "services peak RSS MiB".to_owned(),
                Some(f.services_total.rss_peak_mib),
            ));
            out.push((
                "services RSS after MiB".to_owned(),
                Some(f.services_total.rss_after_mib),
            ));
            if let Some(m) = &f.machine_cpu {
                out.push(("machine busy CPU s".to_owned(), Some(m.busy_seconds)));
                out.push((
                    "machine busy CPU ms per member object".to_owned(),
                    Some(m.busy_ms_per_member_object),
                ));
                out.push(("machine steal s".to_owned(), Some(m.steal_seconds)));
            }
            if let Some(d) = &f.device_writes {
                out.push(("device writes MiB".to_owned(), Some(d.mib)));
                out.push((
                    "device writes KiB per member object".to_owned(),
                    Some(d.kib_per_member_object),
                ));
            }
            for p in &f.processes {
                out.push((format!("{} peak RSS MiB", p.name), Some(p.rss_peak_mib)));
            }
            for p in &f.processes {
                out.push((format!("{} CPU s", p.name), Some(p.cpu_seconds)));
            }
        }
        out
    }
    let before = figures(baseline);
    let after = figures(current);
    let rows: Vec<Vec<String>> = after
        .iter()
        .filter_map(|(name, now)| {
            let was = before.iter().find(|(n, _)| n == name).and_then(|(_, v)| *v);
            let now = (*now)?;
            let change = match was {
                Some(was) if was != 0.0 => format!("x{:.2}", now / was),
                _ => "-".to_owned(),
            };
            Some(vec![
                name.clone(),
                was.map_or("-".to_owned(), |v| format!("{v:.2}")),
                format!("{now:.2}"),
                change,
            ])
        })
        .collect();
    format!(
        "baseline ({}) and current ({}) side by side\n{}",
        baseline.target,
        current.target,
        stats::table(&["figure", "baseline", "current", "current/baseline"], &rows)
    )
}

/// The SVG of member objects arriving over time in each labelled run's throughput scenario
/// (`None` when none ran it).
pub fn plot(runs: &[(&str, &Report)]) -> Option<String> {
    let series: Vec<plot::Series> = runs
        .iter()
        .filter_map(|(label, report)| {
            report.throughput.as_ref().map(|t| plot::Series {
                label: format!("{label}: {:.0} objects/s", t.objects_per_second),
                points: t.arrivals.clone(),
            })
        })
        .collect();
    let first = runs.iter().find_map(|(_, r)| r.throughput.as_ref())?;
    let title = format!(
        "{} Deployments{} to {} member(s): member objects present over time",
        first.templates,
        if first.deps { " + ConfigMaps" } else { "" },
        first.members
    );
    Some(plot::svg(&title, &series))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_issue4_preset_sets_its_figures() {
        let options = BenchOptions::default().with_preset(Preset::Issue4);
        assert_eq!(
            (
                options.runs,
                options.latency_members,
                options.templates,
                options.members
            ),
            (200, 3, 1000, 3)
        );
        assert!(!options.deps, "issue 4 counts Deployments only");
        assert!(options.runs_latency() && options.runs_throughput());
        assert!(!options.runs_policy_change());
    }

    #[test]
    fn the_installation_has_enough_members_for_every_scenario() {
        let options = BenchOptions {
            members: 1,
            latency_members: 3,
            ..Default::default()
        };
        assert_eq!(install_options(&options).members, 3);
        let options = BenchOptions {
            members: 1,
            latency_members: 1,
            scenario: Scenario::PolicyChange,
            ..Default::default()
        };
        assert_eq!(install_options(&options).members, 2);
    }

    fn throughput_report(seconds: f64) -> Report {
        let member_objects = 600;
        let empty = writes::Reading::default();
        Report {
            machine: Machine::describe(),
            target: "embedded".to_owned(),
            members: vec!["member1".to_owned()],
            latency: None,
            throughput: Some(ThroughputReport {
                templates: 100,
                members: 3,
                deps: true,
                member_objects,
                create_seconds: 1.0,
                first_arrival_seconds: 0.1,
                seconds,
                objects_per_second: member_objects as f64 / seconds,
                meets_target: false,
                arrivals: vec![(0.1, 1), (seconds, member_objects)],
                writes: writes::WritesReport::between(&empty, &empty, 0, member_objects, Duration::ZERO),
            }),
            policy_change: None,
            footprint: None,
            wall_seconds: 10.0,
        }
    }

    #[test]
    fn the_comparison_shows_both_runs_and_the_ratio() {
        let table = comparison(&throughput_report(6.0), &throughput_report(3.0));
        let row = table
            .lines()
            .find(|l| l.contains("member objects/s"))
            .unwrap_or_else(|| panic!("no objects/s row in\n{table}"));
        assert!(
            row.contains("100.00") && row.contains("200.00") && row.contains("x2.00"),
            "{row}"
        );
        // Figures neither run measured have no row.
        assert!(!table.contains("latency"), "{table}");
    }

    /// [`throughput_report`] with a footprint that `fill` completes.
    fn with_footprint(fill: impl FnOnce(&mut scenarios::FootprintReport)) -> Report {
        let mut report = throughput_report(6.0);
        let mut footprint = scenarios::FootprintReport::new(100, Vec::new(), None);
        fill(&mut footprint);
        report.footprint = Some(footprint);
        report
    }

    /// The comparison's row whose figure is `figure`.
    fn row<'t>(table: &'t str, figure: &str) -> &'t str {
        table
            .lines()
            .find(|l| l.starts_with(figure))
            .unwrap_or_else(|| panic!("no {figure} row in\n{table}"))
    }

    #[test]
    fn the_comparison_has_device_writes_when_both_runs_counted_them() {
        let with_device = |mib: f64| {
            with_footprint(|footprint| {
                footprint.device_writes = Some(scenarios::DeviceWrites {
                    device: "254:0".to_owned(),
                    mib,
                    kib_per_member_object: mib * 1024.0 / 600.0,
                })
            })
        };
        let table = comparison(&with_device(600.0), &with_device(150.0));
        let row = row(&table, "device writes MiB");
        assert!(
            row.contains("600.00") && row.contains("150.00") && row.contains("x0.25"),
            "{row}"
        );
        assert!(table.contains("device writes KiB per member object"), "{table}");
        // Without a device on either side there is no row.
        let table = comparison(&throughput_report(6.0), &throughput_report(3.0));
        assert!(!table.contains("device writes"), "{table}");
    }

    #[test]
    fn the_comparison_has_the_machine_cpu_when_both_runs_read_it() {
        let with_machine = |busy: f64| {
            with_footprint(|footprint| {
                footprint.machine_cpu = Some(scenarios::MachineCpu {
                    busy_seconds: busy,
                    idle_seconds: 1.0,
                    steal_seconds: 0.5,
                    busy_ms_per_member_object: busy * 1000.0 / 600.0,
                })
            })
        };
        let table = comparison(&with_machine(60.0), &with_machine(45.0));
        let busy = row(&table, "machine busy CPU s");
        assert!(
            busy.contains("60.00") && busy.contains("45.00") && busy.contains("x0.75"),
            "{busy}"
        );
        let per_object = row(&table, "machine busy CPU ms per member object");
        assert!(
            per_object.contains("100.00") && per_object.contains("75.00"),
            "{per_object}"
        );
        // Without it on either side there is no row.
        let table = comparison(&throughput_report(6.0), &throughput_report(3.0));
        assert!(!table.contains("machine busy"), "{table}");
    }

    #[test]
    fn the_plot_has_a_line_per_run_with_throughput() {
        let baseline = throughput_report(6.0);
        let current = throughput_report(3.0);
        let svg = plot(&[("baseline", &baseline), ("current", &current)]).unwrap_or_default();
        assert_eq!(svg.matches("<polyline").count(), 2, "{svg}");
        assert!(svg.contains("baseline: 100 objects/s") && svg.contains("current: 200 objects/s"));
        let mut nothing = throughput_report(1.0);
        nothing.throughput = None;
        assert!(plot(&[("current", &nothing)]).is_none());
    }

    #[test]
    fn describes_this_machine() {
        let machine = Machine::describe();
        assert!(machine.cpus >= 1);
        assert!(machine.memory_mib > 0);
    }
}
