//! `flotilla soak`: fault injection on the embedded installation. While templates with
//! dependencies are being created and propagated, it SIGKILLs a random service every few
//! seconds (each service a set number of times), stops a member API server for a while,
//! SIGKILLs the control-plane API server (restarted on the same data dir), moves a Lazy
//! policy, fires a storm of invalid inputs and abuses the services' gRPC endpoints. Then it
//! verifies: every expected member object exists exactly once, no acknowledged write was lost,
//! no orphan Work or binding remains, lazy and suspended templates were left alone, nothing
//! crashed on its own and every service is healthy. The outcome is a table of checks.
//!
//! | module | owns |
//! |---|---|
//! | [`badinput`] | the invalid inputs and what counts as a clear rejection |
//! | [`grpc`] | the abusive gRPC calls and hanging peers |
//! | [`verify`] | the end-state checks |

pub mod badinput;
pub mod grpc;
pub mod verify;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use kube::Client;
use serde::Serialize;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::bench::arrivals::{Arrivals, Kind};
use crate::bench::install::{InstallOptions, Installation, SERVICES};
use crate::bench::stats::table;
use crate::bench::target::client_for;
use crate::bench::workload::{self, names};
use crate::bench::{BenchError, progress};
use crate::supervisor::Policy;
use crate::up::CONTROL_PLANE;

/// The namespace of the main workload.
pub const MAIN: &str = "soak-main";
/// The namespace of the Lazy policy's templates.
pub const LAZY: &str = "soak-lazy";
/// The namespace of the suspended policy's templates.
pub const SUSPENDED: &str = "soak-suspended";
/// The namespace of the bad-input storm.
pub const BAD: &str = "soak-bad";
/// Templates of the lazy and the suspended policy.
const SIDE_TEMPLATES: usize = 5;
/// Templates created on the control plane while a member is stopped.
const OUTAGE_TEMPLATES: usize = 3;
/// How long a write may keep failing while the control plane restarts.
const WRITE_PATIENCE: Duration = Duration::from_secs(120);

/// What `flotilla soak` does.
#[derive(Clone, Debug)]
pub struct SoakOptions {
    /// Templates (Deployment + ConfigMap each).
    pub templates: usize,
    /// Members.
    pub members: usize,
    /// SIGKILLs per service.
    pub kills_per_service: u32,
    /// Time between kills.
    pub kill_interval: Duration,
    /// How long the member API server stays stopped.
    pub member_outage: Duration,
    /// Invalid inputs in the storm.
    pub bad_inputs: usize,
    /// Seed of every random choice.
    pub seed: u64,
    /// How long convergence may take after the faults.
    pub converge_timeout: Duration,
    /// Binaries.
    pub bin_dir: Option<PathBuf>,
    /// Children's log filter.
    pub log_level: String,
    /// Keep the data dir.
    pub keep: bool,
}

impl Default for SoakOptions {
    fn default() -> Self {
        Self {
            templates: 1000,
            members: 3,
            kills_per_service: 5,
            kill_interval: Duration::from_secs(3),
            member_outage: Duration::from_secs(30),
            bad_inputs: 300,
            seed: 1,
            converge_timeout: Duration::from_secs(300),
            bin_dir: None,
            log_level: "info".to_owned(),
            keep: false,
        }
    }
}

impl SoakOptions {
    /// The CI size: a few templates, one kill per service, a short outage.
    pub fn smoke() -> Self {
        Self {
            templates: 30,
            members: 2,
            kills_per_service: 1,
            kill_interval: Duration::from_secs(1),
            member_outage: Duration::from_secs(10),
            bad_inputs: 40,
            converge_timeout: Duration::from_secs(120),
            ..Self::default()
        }
    }
}

/// One verified property.
#[derive(Clone, Debug, Serialize)]
pub struct Check {
    /// The scenario it belongs to.
    pub scenario: String,
    /// Whether it held.
    pub passed: bool,
    /// What was seen.
    pub details: String,
}

fn check(scenario: &str, passed: bool, details: impl Into<String>) -> Check {
    Check {
        scenario: scenario.to_owned(),
        passed,
        details: details.into(),
    }
}

/// The outcome of a soak run.
#[derive(Clone, Debug, Serialize)]
pub struct Outcome {
    /// The seed (replays the same kills and storm).
    pub seed: u64,
    /// Templates of the main workload.
    pub templates: usize,
    /// Members.
    pub members: usize,
    /// Every check.
    pub checks: Vec<Check>,
    /// Every gRPC probe.
    pub grpc: Vec<grpc::Probe>,
    /// Wall time, seconds.
    pub wall_seconds: f64,
}

impl Outcome {
    /// Whether every check passed.
    pub fn passed(&self) -> bool {
        self.checks.iter().all(|c| c.passed)
    }

    /// How many checks failed.
    pub fn failures(&self) -> usize {
        self.checks.iter().filter(|c| !c.passed).count()
    }

    /// The outcome table.
    pub fn table(&self) -> String {
        let rows: Vec<Vec<String>> = self
            .checks
            .iter()
            .map(|c| {
                vec![
                    c.scenario.clone(),
                    if c.passed { "pass" } else { "FAIL" }.to_owned(),
                    c.details.clone(),
                ]
            })
            .collect();
        format!(
            "soak: {} templates, {} members, seed {}, {:.0}s: {}\n{}",
            self.templates,
            self.members,
            self.seed,
            self.wall_seconds,
            if self.passed() { "PASSED" } else { "FAILED" },
            table(&["scenario", "result", "details"], &rows)
        )
    }
}

/// Runs the soak on a new embedded installation.
pub async fn run(options: &SoakOptions, interrupt: &CancellationToken) -> Result<Outcome, BenchError> {
    let started = Instant::now();
    progress(&format!(
        "soak: starting the embedded installation ({} members) ...",
        options.members
    ));
    let install = InstallOptions {
        members: options.members.max(2),
        bin_dir: options.bin_dir.clone(),
        log_level: options.log_level.clone(),
        // Quick restarts: the soak kills far more often than a real failure would happen.
        policy: Policy {
            initial_backoff: Duration::from_millis(200),
            max_backoff: Duration::from_secs(2),
            healthy_after: Duration::from_secs(5),
            grace: Duration::from_secs(10),
        },
        keep: options.keep,
    };
    let mut installation = Installation::start(&install).await?;
    // On SIGINT/SIGTERM the run is abandoned and the installation still stopped below.
    let result = tokio::select! {
        result = soak(&mut installation, options) => result,
        () = interrupt.cancelled() => Err(BenchError::Interrupted),
    };
    let failed = result
        .as_ref()
        .map_or(true, |(checks, _)| checks.iter().any(|c| !c.passed));
    if failed {
        for name in SERVICES.iter().copied().chain([CONTROL_PLANE]) {
            eprintln!(
                "----- last lines of {name} -----\n{}",
                installation.log_tail(name, 25)
            );
        }
    }
    installation.shutdown().await;
    let (checks, probes) = result?;
    Ok(Outcome {
        seed: options.seed,
        templates: options.templates,
        members: install.members,
        checks,
        grpc: probes,
        wall_seconds: crate::bench::stats::round(started.elapsed().as_secs_f64(), 1),
    })
}

/// Everything the run's phases share.
pub(crate) struct Run<'a> {
    options: &'a SoakOptions,
    cp: Client,
    members: Vec<Client>,
    member_names: Vec<String>,
    arrivals: Arrivals,
}

async fn soak(
    installation: &mut Installation,
    options: &SoakOptions,
) -> Result<(Vec<Check>, Vec<grpc::Probe>), BenchError> {
    let kubeconfig = installation.kubeconfig();
    let cp = client_for(&kubeconfig, CONTROL_PLANE).await?;
    let mut members = Vec::new();
    for name in &installation.members {
        members.push(client_for(&kubeconfig, name).await?);
    }
    let run = Run {
        options,
        cp,
        members,
        member_names: installation.members.clone(),
        arrivals: Arrivals::new(),
    };
    let result = phases(&run, installation).await;
    run.arrivals.stop();
    result
}

async fn phases(
    run: &Run<'_>,
    installation: &mut Installation,
) -> Result<(Vec<Check>, Vec<grpc::Probe>), BenchError> {
    let options = run.options;
    let mut checks = Vec::new();
    let all = run.member_names.clone();
    let first = vec![all[0].clone()];
    let second = vec![all[1].clone()];
    let members = run.members.len();

    // Set-up: the main workload's policy, a Lazy policy and a suspended one, and watches.
    for namespace in [MAIN, LAZY, SUSPENDED, BAD] {
        workload::ensure_namespace(&run.cp, namespace).await?;
    }
    workload::apply_policy(&run.cp, &workload::policy(MAIN, "main", &all, true, false)).await?;
    workload::apply_policy(&run.cp, &workload::policy(LAZY, "lazy", &first, false, true)).await?;
    let mut suspended = workload::policy(SUSPENDED, "suspended", &all, false, false);
    suspended["spec"]["suspension"] = json!({"dispatching": true});
    workload::apply_policy(&run.cp, &suspended).await?;
    run.arrivals
        .watch(&run.members, MAIN, &[Kind::Deployment, Kind::ConfigMap], "s-");
    run.arrivals.watch(&run.members, LAZY, &[Kind::Deployment], "l-");
    run.arrivals
        .watch(&run.members, SUSPENDED, &[Kind::Deployment], "z-");
    let synced = run
        .arrivals
        .wait(Duration::from_secs(60), |v| {
            v.synced(MAIN, 2 * members) && v.synced(LAZY, members) && v.synced(SUSPENDED, members)
        })
        .await;
    if !synced {
        return Err(BenchError::Timeout {
            what: "member watches to start".to_owned(),
            waited: Duration::from_secs(60),
        });
    }
    let lazy_names = names("l", SIDE_TEMPLATES);
    workload::create_templates(&run.cp, LAZY, &lazy_names, false, 4, WRITE_PATIENCE).await?;
    workload::create_templates(
        &run.cp,
        SUSPENDED,
        &names("z", SIDE_TEMPLATES),
        false,
        4,
        WRITE_PATIENCE,
    )
    .await?;
    if !run
        .arrivals
        .wait(Duration::from_secs(60), |v| {
            v.count(0, Kind::Deployment, LAZY) >= SIDE_TEMPLATES
        })
        .await
    {
        return Err(BenchError::Timeout {
            what: "the Lazy policy's templates in member1 before the faults".to_owned(),
            waited: Duration::from_secs(60),
        });
    }

    // The workload, spread over the fault phase.
    let mut schedule: Vec<&'static str> = SERVICES
        .iter()
        .flat_map(|s| std::iter::repeat_n(*s, options.kills_per_service as usize))
        .collect();
    let mut rng = badinput::Rng::new(options.seed);
    for i in (1..schedule.len()).rev() {
        schedule.swap(i, rng.below(i + 1));
    }
    let fault_phase = options.kill_interval * schedule.len() as u32;
    let template_names = names("s", options.templates);
    let workload = tokio::spawn(create_paced(run.cp.clone(), template_names.clone(), fault_phase));

    // A Lazy policy change during the faults: nothing may be written for it.
    let lazy_writes_before = lazy_writes(&run.arrivals, members);
    workload::move_policy(&run.cp, LAZY, "lazy", &second).await?;

    // The bad-input storm, concurrently.
    let storm = tokio::spawn(verify::storm(
        run.cp.clone(),
        badinput::cases(BAD, options.bad_inputs, options.seed),
    ));

    // Faults.
    progress(&format!(
        "soak: {} kills every {:?}, a {:?} outage of {}, a control-plane kill, {} bad inputs ...",
        schedule.len(),
        options.kill_interval,
        options.member_outage,
        all[members - 1],
        options.bad_inputs
    ));
    let faults = inject(run, installation, &schedule).await?;
    checks.extend(faults.checks);

    // The workload and the storm end.
    match workload.await {
        Ok(Ok(())) => checks.push(check(
            "workload",
            true,
            format!(
                "{} templates (+ConfigMaps) created through the faults",
                options.templates
            ),
        )),
        Ok(Err(error)) => checks.push(check("workload", false, error.to_string())),
        Err(error) => checks.push(check(
            "workload",
            false,
            format!("the workload task failed: {error}"),
        )),
    }
    let verdicts = storm.await.unwrap_or_default();
    checks.push(verify::storm_outcome(&run.cp, BAD, &verdicts, Duration::from_secs(60)).await);

    // Delete every tenth template: its objects must leave every member.
    let deleted: Vec<String> = template_names.iter().step_by(10).cloned().collect();
    for name in &deleted {
        verify::delete_template(&run.cp, MAIN, name).await?;
    }
    let mut expected: Vec<String> = template_names
        .iter()
        .filter(|n| !deleted.contains(n))
        .cloned()
        .collect();
    expected.extend(names("s-outage", OUTAGE_TEMPLATES));
    expected.sort();

    // gRPC abuse, while everything runs.
    let address_of = |binary: &str| installation.grpc_address(binary);
    let mut probes = grpc::abuse(&address_of).await;
    for service in SERVICES {
        if let Some(address) = installation.grpc_address(service) {
            probes.push(grpc::hanging_peers(service, &address).await);
        }
    }
    let bad: Vec<String> = probes
        .iter()
        .filter(|p| !p.passed)
        .map(|p| format!("{} {}: {}", p.service, p.call, p.answer))
        .collect();
    let slowest = probes.iter().map(|p| p.millis).max().unwrap_or_default();
    checks.push(check(
        "grpc abuse",
        bad.is_empty(),
        if bad.is_empty() {
            format!(
                "{} abusive calls answered (slowest {slowest} ms, deadline {:?}); hanging peers did not block health checks",
                probes.len(),
                grpc::DEADLINE
            )
        } else {
            bad.join("; ")
        },
    ));

    // Convergence and the end state.
    progress("soak: waiting for convergence ...");
    checks.push(verify::converged(run, &expected).await);
    // The members converge before the control plane has settled: a deleted template's binding
    // goes last, when execution removes its finalizer after the Works and member objects are
    // gone. Wait for the end state as for convergence; report what was seen at the deadline.
    let settle_by = Instant::now() + run.options.converge_timeout;
    loop {
        let state = verify::control_plane_state(&run.cp, &expected, &deleted, members).await?;
        if state.iter().all(|c| c.passed) || Instant::now() >= settle_by {
            checks.extend(state);
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    checks.push(verify::lazy_held(
        &run.arrivals,
        &lazy_names,
        members,
        lazy_writes_before,
    ));
    checks.push(verify::suspended_held(&run.arrivals, members));
    checks.push(verify::exits(installation, &faults.kills));
    checks.push(verify::healthy(installation).await);
    Ok((checks, probes))
}

fn lazy_writes(arrivals: &Arrivals, members: usize) -> u64 {
    arrivals.with(|v| (0..members).map(|m| v.writes(m, LAZY).total()).sum())
}

/// Creates `names` in [`MAIN`] in twenty batches spread over `spread`, retrying through
/// control-plane restarts.
async fn create_paced(cp: Client, names: Vec<String>, spread: Duration) -> Result<(), BenchError> {
    let batch = names.len().div_ceil(20).max(1);
    let pause = spread / 20;
    for chunk in names.chunks(batch) {
        workload::create_templates(&cp, MAIN, chunk, true, 8, WRITE_PATIENCE).await?;
        tokio::time::sleep(pause).await;
    }
    Ok(())
}

struct Faults {
    checks: Vec<Check>,
    kills: BTreeMap<String, u32>,
}

/// Kills services on `schedule`, stops the last member for the outage a third of the way in,
/// and kills the control-plane API server two thirds of the way in.
async fn inject(
    run: &Run<'_>,
    installation: &mut Installation,
    schedule: &[&'static str],
) -> Result<Faults, BenchError> {
    let options = run.options;
    let mut checks = Vec::new();
    let mut kills: BTreeMap<String, u32> = BTreeMap::new();
    let outage_member = run.member_names[run.member_names.len() - 1].clone();
    let outage_index = run.member_names.len() - 1;
    let outage_at = schedule.len() / 3;
    let cp_kill_at = 2 * schedule.len() / 3;
    let mut outage: Option<(Instant, tokio::task::JoinHandle<Option<Instant>>)> = None;
    let mut outage_result: Option<Check> = None;
    let mut not_killed = Vec::new();

    for (i, service) in schedule.iter().enumerate() {
        if i == outage_at {
            installation.stop_apiserver(&outage_member).await;
            let since = Instant::now();
            let others: Vec<usize> = (0..run.member_names.len())
                .filter(|m| *m != outage_index)
                .collect();
            outage = Some((
                since,
                tokio::spawn(verify::outage_probe(
                    run.cp.clone(),
                    run.arrivals.clone(),
                    others,
                    OUTAGE_TEMPLATES,
                )),
            ));
        }
        if i == cp_kill_at {
            checks.push(kill_control_plane(run, installation).await);
        }
        if let Some((since, _)) = &outage
            && since.elapsed() >= options.member_outage
            && let Some((since, probe)) = outage.take()
        {
            outage_result = Some(end_outage(installation, &outage_member, since, probe).await?);
        }
        match kill_when_ready(installation, service).await {
            Some(_) => *kills.entry((*service).to_owned()).or_default() += 1,
            None => not_killed.push(*service),
        }
        tokio::time::sleep(options.kill_interval).await;
    }
    if let Some((since, probe)) = outage.take() {
        let rest = options.member_outage.saturating_sub(since.elapsed());
        tokio::time::sleep(rest).await;
        outage_result = Some(end_outage(installation, &outage_member, since, probe).await?);
    }
    checks.extend(outage_result);
    let summary: Vec<String> = kills
        .iter()
        .map(|(s, n)| format!("{}x{n}", s.trim_start_matches("flotilla-")))
        .collect();
    checks.push(check(
        "kill -9 services",
        not_killed.is_empty()
            && SERVICES
                .iter()
                .all(|s| kills.get(*s).copied().unwrap_or(0) >= options.kills_per_service),
        if not_killed.is_empty() {
            format!("killed {}", summary.join(", "))
        } else {
            format!(
                "killed {}; not ready to be killed: {}",
                summary.join(", "),
                not_killed.join(", ")
            )
        },
    ));
    Ok(Faults { checks, kills })
}

/// Waits until `service` is ready (it may be restarting after the previous kill), then
/// SIGKILLs it.
async fn kill_when_ready(installation: &Installation, service: &str) -> Option<u32> {
    let address = installation.metrics_address(service)?;
    let deadline = Instant::now() + Duration::from_secs(60);
    while !crate::probe::service_ready(&address).await {
        if Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    installation.kill9(service)
}

async fn kill_control_plane(run: &Run<'_>, installation: &Installation) -> Check {
    let Some(pid) = installation.kill9(CONTROL_PLANE) else {
        return check(
            "kill -9 control plane",
            false,
            "the control-plane API server was not running",
        );
    };
    let killed = Instant::now();
    let deadline = killed + Duration::from_secs(60);
    // The supervisor restarts it on the same data dir; wait until it serves again.
    loop {
        if installation.pid(CONTROL_PLANE).is_some_and(|p| p != pid)
            && crate::probe::apiserver_ready(&run.cp).await
        {
            return check(
                "kill -9 control plane",
                true,
                format!(
                    "restarted on the same data dir, serving again after {:.1}s",
                    killed.elapsed().as_secs_f64()
                ),
            );
        }
        if Instant::now() >= deadline {
            return check("kill -9 control plane", false, "not serving again within 60s");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn end_outage(
    installation: &mut Installation,
    member: &str,
    since: Instant,
    probe: tokio::task::JoinHandle<Option<Instant>>,
) -> Result<Check, BenchError> {
    let restarted = Instant::now();
    installation.start_apiserver(member)?;
    let arrived = probe.await.ok().flatten();
    let details = match arrived {
        Some(at) if at <= restarted => format!(
            "{member} stopped for {:.0}s; templates created meanwhile reached the other members after {:.1}s",
            restarted.duration_since(since).as_secs_f64(),
            at.saturating_duration_since(since).as_secs_f64()
        ),
        Some(at) => format!(
            "templates created during the outage reached the other members only {:.1}s after {member} was back",
            at.saturating_duration_since(restarted).as_secs_f64()
        ),
        None => "templates created during the outage never reached the other members".to_owned(),
    };
    Ok(check(
        "member outage",
        arrived.is_some_and(|at| at <= restarted),
        details,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_smoke_size_is_small() {
        let smoke = SoakOptions::smoke();
        let full = SoakOptions::default();
        assert!(smoke.templates < full.templates);
        assert_eq!(smoke.kills_per_service, 1);
        assert!(smoke.member_outage < full.member_outage);
        assert_eq!(full.kills_per_service, 5);
        assert_eq!(full.member_outage, Duration::from_secs(30));
    }

    #[test]
    fn the_outcome_fails_on_any_failed_check() {
        let mut outcome = Outcome {
            seed: 1,
            templates: 1,
            members: 2,
            checks: vec![check("a", true, "fine")],
            grpc: vec![],
            wall_seconds: 1.0,
        };
        assert!(outcome.passed());
        outcome.checks.push(check("b", false, "broken"));
        assert!(!outcome.passed());
        assert_eq!(outcome.failures(), 1);
        let table = outcome.table();
        assert!(table.contains("FAILED") && table.contains("broken"), "{table}");
    }
}
