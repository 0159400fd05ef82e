//! One `flotilla-apiserver` process on its own data directory, at a fixed port (so a restart
//! keeps the address members are registered under).

use std::path::{Path, PathBuf};
use std::time::Duration;

use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::process::Process;
use crate::wait::wait_until;

/// A running flotilla-apiserver.
pub struct ApiServer {
    name: String,
    data_dir: PathBuf,
    kubeconfig: PathBuf,
    port: u16,
    process: Process,
}

/// How to start an apiserver.
#[derive(Clone, Debug, Default)]
pub struct ApiServerOptions {
    /// Simulate workload controllers (member clusters): Deployments etc. report ready.
    pub simulate_workloads: bool,
    /// Extra flags.
    pub extra_args: Vec<String>,
    /// Extra environment (kept across restarts).
    pub env: Vec<(String, String)>,
}

impl ApiServer {
    /// Starts an apiserver named `name` with its data under `root/<name>` and waits until it
    /// answers.
    pub async fn start(name: &str, root: &Path, options: &ApiServerOptions) -> Self {
        let data_dir = root.join(name);
        std::fs::create_dir_all(&data_dir)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", data_dir.display()));
        let kubeconfig = data_dir.join("kubeconfig");
        let port = crate::free_port();
        let mut args = vec![
            "--data-dir".to_owned(),
            data_dir.display().to_string(),
            "--listen".to_owned(),
            format!("127.0.0.1:{port}"),
            "--kubeconfig-out".to_owned(),
            kubeconfig.display().to_string(),
            "--context-name".to_owned(),
            name.to_owned(),
        ];
        if options.simulate_workloads {
            args.push("--simulate-workloads".to_owned());
        }
        args.extend(options.extra_args.iter().cloned());
        let binary = crate::binaries::binary("flotilla-apiserver");
        let process = Process::start(name, &binary, args, options.env.clone(), root);
        let server = Self {
            name: name.to_owned(),
            data_dir,
            kubeconfig,
            port,
            process,
        };
        server.wait_ready().await;
        server
    }

    /// Waits until the server answers `/version` with the kubeconfig it wrote.
    pub async fn wait_ready(&self) {
        let what = format!(
            "apiserver {} to answer (log: {})",
            self.name,
            self.process.log_tail(20)
        );
        wait_until(&what, Duration::from_secs(60), || async {
            if !self.kubeconfig.exists() {
                return None;
            }
            let client = self.try_client().await?;
            client.apiserver_version().await.ok().map(|_| ())
        })
        .await;
    }

    async fn try_client(&self) -> Option<Client> {
        let kubeconfig = Kubeconfig::read_from(&self.kubeconfig).ok()?;
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .ok()?;
        Client::try_from(config).ok()
    }

    /// A client for this server.
    pub async fn client(&self) -> Client {
        match self.try_client().await {
            Some(client) => client,
            None => panic!("cannot build a client from {}", self.kubeconfig.display()),
        }
    }

    /// The server's name (also its kubeconfig context name).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The kubeconfig the server wrote.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// The data directory.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The process.
    pub fn process(&mut self) -> &mut Process {
        &mut self.process
    }

    /// Kills the server with SIGKILL.
    pub fn kill(&mut self) {
        self.process.kill();
    }

    /// Stops the server gracefully (SIGTERM).
    pub fn stop(&mut self) {
        self.process.terminate(Duration::from_secs(10));
    }

    /// Starts the server again on the same data directory and port, and waits until it answers.
    pub async fn restart(&mut self) {
        self.process.restart();
        self.wait_ready().await;
    }

    /// Starts a stopped server again and waits until it answers.
    pub async fn start_again(&mut self) {
        self.process.start_again();
        self.wait_ready().await;
    }

    /// The last lines of the server's log.
    pub fn log_tail(&self, lines: usize) -> String {
        self.process.log_tail(lines)
    }
}
