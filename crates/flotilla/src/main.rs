//! `flotilla`: the command line. Subcommands only parse flags and call the library.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "flotilla",
    version,
    about = "Karmada-compatible multi-cluster propagation"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Register a Kubernetes cluster as a member.
    Join(JoinArgs),
    /// Remove a member registration (its Works and member objects are cleaned up by execution).
    Unjoin(UnjoinArgs),
    /// Run a control plane, simulated member clusters and every service on this machine.
    Up(UpArgs),
    /// Roll a pending Lazy policy change out to chosen templates now (without editing them).
    Activate(ActivateArgs),
    /// Suspend dispatching of a (Cluster)PropagationPolicy's templates to all or some clusters.
    Suspend(SuspendArgs),
    /// Resume dispatching of a (Cluster)PropagationPolicy's templates to all or some clusters.
    Resume(SuspendArgs),
    /// Measure propagation latency, throughput, policy changes and footprint.
    Bench(BenchArgs),
    /// Fault injection: kill services and API servers, feed bad input, abuse gRPC; then verify.
    Soak(SoakArgs),
}

#[derive(clap::Args)]
struct ActivateArgs {
    /// TYPE/NAME (deployment/nginx) or TYPE (deployments: every template of the type in scope,
    /// narrowed by -l).
    #[arg(required = true)]
    targets: Vec<String>,
    /// Namespace of the templates (default: the context's namespace, else `default`).
    #[arg(short = 'n', long)]
    namespace: Option<String>,
    /// Templates in every namespace.
    #[arg(short = 'A', long, conflicts_with = "namespace")]
    all_namespaces: bool,
    /// Label selector over the templates, e.g. app=web,tier!=db.
    #[arg(short = 'l', long)]
    selector: Option<String>,
    /// Activate at most N templates with a pending change (in namespace/name order); already
    /// current templates do not count.
    #[arg(long, value_name = "N")]
    max: Option<usize>,
    /// Print what would be activated, write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Wait until the detector has refreshed the activated templates' bindings.
    #[arg(long)]
    wait: bool,
    /// How long --wait waits, in seconds.
    #[arg(long, default_value_t = 60, value_name = "SECONDS")]
    timeout: u64,
    /// Kubeconfig of the control plane (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: Option<PathBuf>,
    /// Context in that kubeconfig (default: its current context).
    #[arg(long)]
    context: Option<String>,
}

#[derive(clap::Args)]
struct SuspendArgs {
    /// Name of the PropagationPolicy (or ClusterPropagationPolicy with --cluster-scoped).
    policy: String,
    /// Namespace of the PropagationPolicy.
    #[arg(
        short = 'n',
        long,
        default_value = "default",
        conflicts_with = "cluster_scoped"
    )]
    namespace: String,
    /// The policy is a ClusterPropagationPolicy.
    #[arg(long)]
    cluster_scoped: bool,
    /// Only these clusters (comma-separated); default: every cluster.
    #[arg(long, value_delimiter = ',', num_args = 1..)]
    clusters: Option<Vec<String>>,
    /// Kubeconfig of the control plane (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: Option<PathBuf>,
    /// Context of the control plane in that kubeconfig (default: its current context).
    #[arg(long)]
    context: Option<String>,
}

async fn suspend_command(args: SuspendArgs, action: flotilla::suspend::Action) -> anyhow::Result<()> {
    let clusters = flotilla::suspend::Clusters::parse(args.clusters.as_deref())?;
    let policy = flotilla::suspend::PolicyRef {
        name: args.policy,
        namespace: (!args.cluster_scoped).then_some(args.namespace),
    };
    let client = control_plane_client(&ControlPlane {
        kubeconfig: args.kubeconfig,
        context: args.context,
    })
    .await?;
    let report = flotilla::suspend::run(&client, &policy, action, &clusters).await?;
    println!("{report}");
    Ok(())
}

#[derive(clap::Args)]
struct TargetArgs {
    /// Kubeconfig of an existing control plane and its members (default: start the embedded
    /// installation in a temporary directory).
    #[arg(long, requires = "member_contexts")]
    kubeconfig: Option<PathBuf>,
    /// Context of the control plane in --kubeconfig.
    #[arg(long, default_value = "control-plane")]
    control_plane_context: String,
    /// Contexts of the members in --kubeconfig; each member's Cluster name is its context name.
    #[arg(long, value_delimiter = ',')]
    member_contexts: Vec<String>,
    /// Directory holding the flotilla-* binaries of the embedded installation.
    #[arg(long)]
    bin_dir: Option<PathBuf>,
    /// Log filter of the embedded installation's children.
    #[arg(long, default_value = "info")]
    log_level: String,
    /// Keep the embedded installation's data dir (logs) after the run.
    #[arg(long)]
    keep: bool,
}

impl TargetArgs {
    fn external(&self) -> Option<flotilla::bench::External> {
        self.kubeconfig
            .as_ref()
            .map(|kubeconfig| flotilla::bench::External {
                kubeconfig: kubeconfig.clone(),
                control_plane_context: self.control_plane_context.clone(),
                member_contexts: self.member_contexts.clone(),
            })
    }
}

#[derive(clap::Args)]
struct BenchArgs {
    /// Which scenario(s) to run.
    #[arg(long, value_enum, default_value_t = flotilla::bench::Scenario::All)]
    scenario: flotilla::bench::Scenario,
    /// A ready-made set of sizes (`issue4`: 200 latency runs to 3 members, 1,000 Deployments
    /// to 3 members).
    #[arg(long, value_enum)]
    preset: Option<flotilla::bench::Preset>,
    /// Latency runs.
    #[arg(long)]
    runs: Option<usize>,
    /// Members the latency scenario targets.
    #[arg(long)]
    latency_members: Option<usize>,
    /// Deployments of the throughput scenario.
    #[arg(long)]
    templates: Option<usize>,
    /// Members of the throughput scenario (and of the embedded installation).
    #[arg(long)]
    members: Option<usize>,
    /// Multiplies --templates.
    #[arg(long)]
    scale: Option<usize>,
    /// Give every throughput Deployment a ConfigMap dependency (propagateDeps).
    #[arg(long)]
    deps: Option<bool>,
    /// Templates of the policy-change scenario.
    #[arg(long)]
    policy_templates: Option<usize>,
    /// `flotilla activate --max N` after the policy-change scenario's Lazy edit (0 skips it).
    #[arg(long)]
    activate_max: Option<usize>,
    /// Concurrent writes while creating templates.
    #[arg(long, default_value_t = 16)]
    parallel: usize,
    /// Seconds one wait may take before the scenario fails.
    #[arg(long, default_value_t = 600)]
    timeout: u64,
    /// Print the report as JSON on stdout (tables and progress go to stderr); with
    /// --baseline-bin-dir, `{"baseline": ..., "current": ...}`.
    #[arg(long)]
    json: bool,
    /// Write an SVG of member objects arriving over time in the throughput scenario to FILE
    /// (both runs' lines with --baseline-bin-dir).
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
    /// Run the same scenarios first with the flotilla-* binaries in DIR (an older build), then
    /// with the current ones, and print the figures side by side. Embedded installation only.
    #[arg(long, value_name = "DIR", conflicts_with = "kubeconfig")]
    baseline_bin_dir: Option<PathBuf>,
    #[command(flatten)]
    target: TargetArgs,
}

#[derive(clap::Args)]
struct SoakArgs {
    /// Small sizes for CI: few templates, one kill per service, a short member outage.
    #[arg(long)]
    smoke: bool,
    /// Templates (Deployment + ConfigMap each) created during the run.
    #[arg(long)]
    templates: Option<usize>,
    /// Members of the embedded installation.
    #[arg(long)]
    members: Option<usize>,
    /// SIGKILLs per service.
    #[arg(long)]
    kills_per_service: Option<u32>,
    /// Seconds between kills.
    #[arg(long)]
    kill_interval: Option<f64>,
    /// Seconds a member API server stays stopped.
    #[arg(long)]
    member_outage: Option<u64>,
    /// Invalid inputs in the bad-input storm.
    #[arg(long)]
    bad_inputs: Option<usize>,
    /// Seed of the random choices (kills, fuzzing).
    #[arg(long)]
    seed: Option<u64>,
    /// Print the outcome as JSON on stdout.
    #[arg(long)]
    json: bool,
    /// Directory holding the flotilla-* binaries.
    #[arg(long)]
    bin_dir: Option<PathBuf>,
    /// Log filter of the children.
    #[arg(long, default_value = "info")]
    log_level: String,
    /// Keep the data dir (logs) after the run.
    #[arg(long)]
    keep: bool,
}

#[derive(clap::Args)]
struct UpArgs {
    /// Number of simulated member clusters (member1..memberN).
    #[arg(long, default_value_t = 3)]
    members: usize,
    /// Where state, logs and the kubeconfig live; running again on it resumes the same state.
    #[arg(long, default_value = "./.flotilla")]
    data_dir: PathBuf,
    /// Directory holding the flotilla-* binaries (default: next to this executable, built first
    /// when running from a cargo checkout).
    #[arg(long)]
    bin_dir: Option<PathBuf>,
    /// flotilla-execution's apply-once-only mode.
    #[arg(long, value_enum, default_value_t = flotilla::up::ApplyOnceOnly::Off)]
    apply_once_only: flotilla::up::ApplyOnceOnly,
    /// Also apply an example (Deployment + ConfigMap + PropagationPolicy) and show it arriving.
    #[arg(long)]
    demo: bool,
    /// Log filter of every component (`RUST_LOG` syntax).
    #[arg(long, default_value = "info")]
    log_level: String,
    /// Accept ClusterTaintPolicies with `NoExecute` taints (the control plane's
    /// `--allow-no-execute-taint-policy`, karmada-webhook's flag).
    #[arg(long)]
    allow_no_execute_taint_policy: bool,
}

/// A token cancelled on SIGINT or SIGTERM.
fn shutdown_on_signals() -> anyhow::Result<tokio_util::sync::CancellationToken> {
    use tokio::signal::unix::{SignalKind, signal};
    let token = tokio_util::sync::CancellationToken::new();
    let mut interrupt = signal(SignalKind::interrupt()).context("cannot handle SIGINT")?;
    let mut terminate = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
    let trigger = token.clone();
    tokio::spawn(async move {
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = terminate.recv() => {}
        }
        trigger.cancel();
    });
    Ok(token)
}

#[derive(clap::Args)]
struct ControlPlane {
    /// Kubeconfig of the control plane (default: $KUBECONFIG, then ~/.kube/config).
    // Own ids: `join` flattens this next to the member's `--kubeconfig`/`--context`, and clap
    // rejects two arguments with one id.
    #[arg(
        id = "control_plane_kubeconfig",
        long = "control-plane-kubeconfig",
        env = "KUBECONFIG"
    )]
    kubeconfig: Option<PathBuf>,
    /// Context of the control plane in that kubeconfig (default: its current context).
    #[arg(id = "control_plane_context", long = "control-plane-context")]
    context: Option<String>,
}

#[derive(clap::Args)]
struct JoinArgs {
    /// Name of the member cluster (a DNS-1123 label).
    name: String,
    /// Kubeconfig of the member cluster.
    #[arg(long)]
    kubeconfig: PathBuf,
    /// Context of the member in its kubeconfig (default: its current context).
    #[arg(long)]
    context: Option<String>,
    /// Label for the Cluster object, KEY=VALUE (repeatable).
    #[arg(long = "label", value_parser = parse_label)]
    labels: Vec<(String, String)>,
    /// Region of the member (`spec.region`).
    #[arg(long)]
    region: Option<String>,
    /// Provider of the member (`spec.provider`).
    #[arg(long)]
    provider: Option<String>,
    #[command(flatten)]
    control_plane: ControlPlane,
}

#[derive(clap::Args)]
struct UnjoinArgs {
    /// Name of the member cluster.
    name: String,
    #[command(flatten)]
    control_plane: ControlPlane,
}

fn parse_label(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.to_owned(), value.to_owned())),
        _ => Err(format!("{text:?} is not KEY=VALUE")),
    }
}

async fn control_plane_client(args: &ControlPlane) -> anyhow::Result<kube::Client> {
    let options = kube::config::KubeConfigOptions {
        context: args.context.clone(),
        ..Default::default()
    };
    let config = match &args.kubeconfig {
        Some(path) => {
            let kubeconfig = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("cannot read control-plane kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &options).await?
        }
        None => kube::Config::from_kubeconfig(&options)
            .await
            .context("no control-plane kubeconfig: set KUBECONFIG or pass --control-plane-kubeconfig (join, unjoin) / --kubeconfig (activate)")?,
    };
    Ok(kube::Client::try_from(config)?)
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    // `flotilla bench` runs on the machine whose CPU it measures: on one thread, its watches
    // and creates do not keep a second runtime worker waking the first (a profile of the bench
    // on the default runtime spent a quarter of its CPU switching between its own threads; the
    // members' API servers had the same finding, ADR 0032). Everything else keeps a worker per
    // core.
    let mut runtime = match cli.command {
        Command::Bench(_) => tokio::runtime::Builder::new_current_thread(),
        _ => tokio::runtime::Builder::new_multi_thread(),
    };
    runtime.enable_all().build()?.block_on(run(cli))
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Join(args) => {
            if !flotilla_api::validation::is_dns1123_label(&args.name) {
                bail!(
                    "cluster name {:?} must be a DNS-1123 label (lower-case letters, digits, '-')",
                    args.name
                );
            }
            let access = flotilla::join::member_access(&args.kubeconfig, args.context.as_deref())?;
            let client = control_plane_client(&args.control_plane).await?;
            let options = flotilla::join::JoinOptions {
                labels: args.labels.into_iter().collect::<BTreeMap<_, _>>(),
                region: args.region,
                provider: args.provider,
                zones: vec![],
            };
            flotilla::join::join(&client, &args.name, &access, &options).await?;
            println!("cluster {} joined ({})", args.name, access.endpoint);
        }
        Command::Unjoin(args) => {
            let client = control_plane_client(&args.control_plane).await?;
            flotilla::join::unjoin(&client, &args.name).await?;
            println!("cluster {} unjoined", args.name);
        }
        Command::Up(args) => {
            let shutdown = shutdown_on_signals()?;
            let options = flotilla::up::UpOptions {
                members: args.members,
                data_dir: args.data_dir,
                bin_dir: args.bin_dir,
                apply_once_only: args.apply_once_only,
                demo: args.demo,
                log_level: args.log_level,
                allow_no_execute_taint_policy: args.allow_no_execute_taint_policy,
            };
            flotilla::up::up(options, shutdown).await?;
        }
        Command::Activate(args) => {
            let client = control_plane_client(&ControlPlane {
                kubeconfig: args.kubeconfig,
                context: args.context,
            })
            .await?;
            let options = flotilla::activate::ActivateOptions {
                targets: args.targets,
                namespace: args.namespace,
                all_namespaces: args.all_namespaces,
                selector: args.selector,
                max: args.max,
                dry_run: args.dry_run,
                wait: args.wait.then(|| std::time::Duration::from_secs(args.timeout)),
            };
            let report = flotilla::activate::run(&client, &options).await?;
            print!("{}", flotilla::activate::render(&report));
        }
        Command::Suspend(args) => suspend_command(args, flotilla::suspend::Action::Suspend).await?,
        Command::Resume(args) => suspend_command(args, flotilla::suspend::Action::Resume).await?,
        Command::Bench(args) => bench(args).await?,
        Command::Soak(args) => soak(args).await?,
    }
    Ok(())
}

async fn bench(args: BenchArgs) -> anyhow::Result<()> {
    let mut options = flotilla::bench::BenchOptions {
        scenario: args.scenario,
        parallel: args.parallel,
        timeout: std::time::Duration::from_secs(args.timeout),
        external: args.target.external(),
        bin_dir: args.target.bin_dir.clone(),
        log_level: args.target.log_level.clone(),
        keep: args.target.keep,
        ..Default::default()
    };
    if let Some(preset) = args.preset {
        options = options.with_preset(preset);
    }
    let set = |slot: &mut usize, value: Option<usize>| {
        if let Some(value) = value {
            *slot = value;
        }
    };
    set(&mut options.runs, args.runs);
    set(&mut options.latency_members, args.latency_members);
    set(&mut options.templates, args.templates);
    set(&mut options.members, args.members);
    set(&mut options.scale, args.scale);
    set(&mut options.policy_templates, args.policy_templates);
    set(&mut options.activate_max, args.activate_max);
    if let Some(deps) = args.deps {
        options.deps = deps;
    }
    if let Some(external) = &options.external {
        options.members = options.members.min(external.member_contexts.len());
    }
    if let Some(path) = &args.plot
        && !options.runs_throughput()
    {
        bail!(
            "--plot {} draws the throughput scenario, which --scenario {:?} does not run; use --scenario throughput or all",
            path.display(),
            options.scenario
        );
    }
    let interrupt = shutdown_on_signals()?;
    let baseline = match &args.baseline_bin_dir {
        Some(dir) => {
            eprintln!("baseline run with the binaries in {} ...", dir.display());
            let baseline_options = flotilla::bench::BenchOptions {
                bin_dir: Some(dir.clone()),
                ..options.clone()
            };
            let report = flotilla::bench::run(&baseline_options, &interrupt).await?;
            eprintln!("\nbaseline:\n{}\n\ncurrent run ...", report.tables());
            Some(report)
        }
        None => None,
    };
    let report = flotilla::bench::run(&options, &interrupt).await?;
    eprintln!("\n{}", report.tables());
    if let Some(baseline) = &baseline {
        eprintln!("\n{}", flotilla::bench::comparison(baseline, &report));
    }
    if let Some(path) = &args.plot {
        let mut runs = Vec::new();
        if let Some(baseline) = &baseline {
            runs.push(("baseline", baseline));
        }
        runs.push(("current", &report));
        match flotilla::bench::plot(&runs) {
            Some(svg) => {
                std::fs::write(path, svg)
                    .with_context(|| format!("cannot write the plot to {}", path.display()))?;
                eprintln!("plot written to {}", path.display());
            }
            None => bail!("no throughput figures to plot in {}", path.display()),
        }
    }
    if args.json {
        let json = match &baseline {
            Some(baseline) => serde_json::json!({ "baseline": baseline, "current": report }),
            None => serde_json::to_value(&report)?,
        };
        println!("{}", serde_json::to_string_pretty(&json)?);
    }
    Ok(())
}

async fn soak(args: SoakArgs) -> anyhow::Result<()> {
    let mut options = if args.smoke {
        flotilla::soak::SoakOptions::smoke()
    } else {
        flotilla::soak::SoakOptions::default()
    };
    if let Some(v) = args.templates {
        options.templates = v;
    }
    if let Some(v) = args.members {
        options.members = v;
    }
    if let Some(v) = args.kills_per_service {
        options.kills_per_service = v;
    }
    if let Some(v) = args.kill_interval {
        options.kill_interval = std::time::Duration::from_secs_f64(v);
    }
    if let Some(v) = args.member_outage {
        options.member_outage = std::time::Duration::from_secs(v);
    }
    if let Some(v) = args.bad_inputs {
        options.bad_inputs = v;
    }
    if let Some(v) = args.seed {
        options.seed = v;
    }
    options.bin_dir = args.bin_dir;
    options.log_level = args.log_level;
    options.keep = args.keep;
    let outcome = flotilla::soak::run(&options, &shutdown_on_signals()?).await?;
    eprintln!("\n{}", outcome.table());
    if args.json {
        println!("{}", serde_json::to_string_pretty(&outcome)?);
    }
    if !outcome.passed() {
        bail!(
            "the soak run failed: {} of {} checks failed",
            outcome.failures(),
            outcome.checks.len()
        );
    }
    Ok(())
}
