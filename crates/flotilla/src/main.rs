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
            .context("no control-plane kubeconfig; pass --control-plane-kubeconfig")?,
    };
    Ok(kube::Client::try_from(config)?)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
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
            };
            flotilla::up::up(options, shutdown).await?;
        }
    }
    Ok(())
}
