//! Test fixtures: real `flotilla-apiserver` processes, clients, kubectl and raw HTTP helpers.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::Value;

/// A running server process; it exits when this handle (its stdin) is dropped.
pub struct Server {
    pub dir: PathBuf,
    _tmp: Option<tempfile::TempDir>,
    pub kubeconfig: PathBuf,
    pub url: String,
    pub token: String,
    pub ca: PathBuf,
    child: Option<Child>,
    args: Vec<String>,
}

pub fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_flotilla-apiserver")
}

impl Server {
    /// Starts a server on a fresh data dir; `{dir}` in an argument stands for it.
    pub fn start(extra: &[&str]) -> Server {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        let mut s = Server {
            dir,
            _tmp: Some(tmp),
            kubeconfig: PathBuf::new(),
            url: String::new(),
            token: String::new(),
            ca: PathBuf::new(),
            child: None,
            args: extra.iter().map(|s| s.to_string()).collect(),
        };
        s.spawn();
        s
    }

    /// Starts (again) on the same data dir and waits until it serves.
    pub fn spawn(&mut self) {
        let kubeconfig = self.dir.join("kubeconfig");
        let _ = std::fs::remove_file(&kubeconfig);
        let mut child = Command::new(binary())
            .arg("--data-dir")
            .arg(&self.dir)
            .args([
                "--listen",
                "127.0.0.1:0",
                "--exit-on-stdin-eof",
                "--log-level",
                "warn",
            ])
            .args(
                self.args
                    .iter()
                    .map(|a| a.replace("{dir}", &self.dir.display().to_string())),
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Drain stderr so the server never blocks on a full pipe; keep it for failures, and in
        // `<dir>/server.log` for tests that read the server's log.
        let stderr = child.stderr.take().unwrap();
        let mut log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("server.log"))
            .unwrap();
        std::thread::spawn(move || {
            use std::io::Write;
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = writeln!(log, "{line}");
                eprintln!("[apiserver] {line}");
            }
        });
        let deadline = Instant::now() + Duration::from_secs(30);
        while !kubeconfig.exists() {
            if let Ok(Some(status)) = child.try_wait() {
                panic!("flotilla-apiserver exited early: {status}");
            }
            assert!(
                Instant::now() < deadline,
                "flotilla-apiserver did not write its kubeconfig in time"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let text = std::fs::read_to_string(&kubeconfig).unwrap();
        let cfg: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
        self.url = cfg["clusters"][0]["cluster"]["server"]
            .as_str()
            .unwrap()
            .to_owned();
        self.token = cfg["users"][0]["user"]["token"].as_str().unwrap().to_owned();
        self.ca = self.dir.join("pki/ca.crt");
        self.kubeconfig = kubeconfig;
        self.child = Some(child);
    }

    /// SIGKILL.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            c.kill().unwrap();
            c.wait().unwrap();
        }
    }

    /// SIGTERM and wait.
    pub fn terminate(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = Command::new("kill").arg("-TERM").arg(c.id().to_string()).status();
            let deadline = Instant::now() + Duration::from_secs(20);
            loop {
                if c.try_wait().unwrap().is_some() {
                    break;
                }
                assert!(Instant::now() < deadline, "server did not stop on SIGTERM");
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// A kube client for this server.
    pub async fn client(&self) -> kube::Client {
        let kc = kube::config::Kubeconfig::read_from(&self.kubeconfig).unwrap();
        let config = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .unwrap();
        kube::Client::try_from(config).unwrap()
    }

    /// Runs kubectl (the default one or a versioned one) against this server.
    pub fn kubectl_with(&self, kubectl: &str, args: &[&str], stdin: Option<&str>) -> Output {
        let mut cmd = Command::new(kubectl);
        cmd.env("KUBECONFIG", &self.kubeconfig)
            .env("KUBECACHEDIR", self.dir.join("kubecache"))
            .arg(format!("--cache-dir={}", self.dir.join("kubecache").display()))
            .args(args)
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap_or_else(|e| panic!("running {kubectl}: {e}"));
        if let Some(input) = stdin {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
        }
        let out = child.wait_with_output().unwrap();
        Output {
            ok: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    pub fn kubectl(&self, args: &[&str]) -> Output {
        self.kubectl_with("kubectl", args, None)
    }

    pub fn kubectl_stdin(&self, args: &[&str], stdin: &str) -> Output {
        self.kubectl_with("kubectl", args, Some(stdin))
    }

    /// Raw HTTPS request with curl (lets tests send bytes no client library would).
    pub fn curl(
        &self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        body: Option<&[u8]>,
        token: Option<&str>,
    ) -> (u16, String) {
        let body_file = self.dir.join(format!("body-{}", rand_suffix()));
        let mut cmd = Command::new("curl");
        cmd.args(["-s", "-o", "-", "-w", "\n%{http_code}", "-X", method, "--cacert"])
            .arg(&self.ca)
            .arg(format!("{}{}", self.url, path));
        if let Some(t) = token.or(Some(self.token.as_str())).filter(|t| !t.is_empty()) {
            cmd.args(["-H", &format!("Authorization: Bearer {t}")]);
        }
        if let Some(ct) = content_type {
            cmd.args(["-H", &format!("Content-Type: {ct}")]);
        }
        if let Some(b) = body {
            std::fs::write(&body_file, b).unwrap();
            cmd.arg("--data-binary").arg(format!("@{}", body_file.display()));
        }
        let out = cmd.output().unwrap();
        let _ = std::fs::remove_file(&body_file);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
        (code.trim().parse().unwrap_or(0), body.to_owned())
    }

    pub fn curl_json(
        &self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        body: Option<&[u8]>,
    ) -> (u16, Value) {
        let (code, text) = self.curl(method, path, content_type, body, None);
        (code, serde_json::from_str(&text).unwrap_or(Value::String(text)))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// kubectl's result.
#[derive(Debug)]
pub struct Output {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    #[track_caller]
    pub fn success(&self) -> &str {
        assert!(
            self.ok,
            "kubectl failed:\nstdout: {}\nstderr: {}",
            self.stdout, self.stderr
        );
        &self.stdout
    }

    #[track_caller]
    pub fn failure(&self) -> &str {
        assert!(
            !self.ok,
            "kubectl unexpectedly succeeded:\nstdout: {}",
            self.stdout
        );
        &self.stderr
    }
}

/// One server shared by every test of a test binary (each test uses its own namespaces).
pub fn shared() -> &'static Server {
    static SERVER: OnceLock<Server> = OnceLock::new();
    SERVER.get_or_init(|| Server::start(&[]))
}

pub fn rand_suffix() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let n = N.fetch_add(1, Ordering::SeqCst);
    format!("{}{n}", std::process::id() % 10000)
}

/// Creates a namespace with a unique name.
pub async fn namespace(client: &kube::Client, prefix: &str) -> String {
    use k8s_openapi::api::core::v1::Namespace;
    let name = format!("{prefix}-{}", rand_suffix());
    let api: kube::Api<Namespace> = kube::Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(serde_json::json!({"metadata": {"name": name}})).unwrap();
    api.create(&Default::default(), &ns).await.unwrap();
    name
}

/// The collection's resourceVersion now: where a watch of what follows starts.
pub async fn list_revision<K>(api: &kube::Api<K>) -> String
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.list(&kube::api::ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap()
}

/// Polls `f` until it returns Some or the deadline passes.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Path of a file in tests/.
pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join(name)
}

/// Where a missing client is installed: `<target>/test-tools/python`.
fn tools_dir() -> PathBuf {
    // The test executable is <target>/<profile>/deps/<name>-<hash>.
    let exe = std::env::current_exe().unwrap();
    exe.ancestors()
        .nth(3)
        .expect("the test executable lives under <target>/<profile>/deps")
        .join("test-tools")
        .join("python")
}

/// Whether `import kubernetes` works with `PYTHONPATH` = `path` (or unset).
fn importable(path: Option<&PathBuf>) -> Result<(), String> {
    let mut probe = Command::new("python3");
    probe.args(["-c", "import kubernetes"]);
    if let Some(path) = path {
        probe.env("PYTHONPATH", path);
    }
    let out = probe.output().expect("python3 is required");
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// The `PYTHONPATH` under which the client imports: none when installed, else the tools
/// directory (installing it there first).
pub fn python_client_path() -> Option<PathBuf> {
    if importable(None).is_ok() {
        return None;
    }
    let dir = tools_dir();
    if importable(Some(&dir)).is_err() {
        let out = Command::new("python3")
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--upgrade",
                "--target",
            ])
            .arg(&dir)
            .arg("kubernetes")
            .output()
            .expect("python3 is required");
        assert!(
            out.status.success(),
            "the Python kubernetes client is missing and `pip install --target {} kubernetes` failed; run `pip install kubernetes`:\n{}",
            dir.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        if let Err(error) = importable(Some(&dir)) {
            panic!(
                "the kubernetes client installed under {} does not import: {error}",
                dir.display()
            );
        }
    }
    Some(dir)
}
