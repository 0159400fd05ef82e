//! `flotilla-apiserver-bench`: throughput, watch latency, large lists and memory of a real
//! `flotilla-apiserver` process over HTTPS. Prints a table; CI runs it only at tiny sizes
//! (`tests/tests/bench_smoke.rs`).
//!
//! `just bench-apiserver` (or `cargo run --release -p flotilla-apiserver --bin
//! flotilla-apiserver-bench -- --help`).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use bytes::Bytes;
use clap::Parser;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use serde_json::{Value, json};

#[derive(Parser, Debug)]
#[command(
    name = "flotilla-apiserver-bench",
    about = "Benchmarks a flotilla-apiserver process over HTTPS"
)]
struct Args {
    /// Concurrent clients for the create, update and get phases (comma-separated list).
    #[arg(long, default_value = "1,16,64,256", value_delimiter = ',')]
    clients: Vec<usize>,
    /// Seconds each create, update and get phase runs.
    #[arg(long, default_value_t = 5)]
    seconds: u64,
    /// Watchers for the latency phase.
    #[arg(long, default_value_t = 100)]
    watchers: usize,
    /// Writes observed by the watchers.
    #[arg(long, default_value_t = 300)]
    watch_events: usize,
    /// Watchers of the fan-out phase (comma-separated list): 16 clients create as fast as they
    /// can while this many watchers receive every event.
    #[arg(long, default_value = "0,4,16", value_delimiter = ',')]
    fanout_watchers: Vec<usize>,
    /// Objects in the store for the list and memory phase.
    #[arg(long, default_value_t = 100_000)]
    list_objects: usize,
    /// The server binary (default: next to this one).
    #[arg(long)]
    server: Option<PathBuf>,
    /// Multiplex over one HTTP/2 connection instead of a pool of HTTP/1.1 connections.
    #[arg(long, default_value_t = false)]
    http2: bool,
}

type HttpsClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

struct Target {
    client: HttpsClient,
    base: String,
    token: String,
}

impl Target {
    async fn send(
        &self,
        method: &str,
        path: &str,
        content_type: &str,
        body: Vec<u8>,
    ) -> anyhow::Result<(u16, Bytes)> {
        let req = http::Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base))
            .header("Authorization", format!("Bearer {}", self.token))
            .header("Content-Type", content_type)
            .header("User-Agent", "flotilla-apiserver-bench")
            .body(Full::new(Bytes::from(body)))?;
        let resp = self.client.request(req).await?;
        let code = resp.status().as_u16();
        let bytes = resp.into_body().collect().await?.to_bytes();
        Ok((code, bytes))
    }
}

fn payload() -> String {
    "x".repeat(1024)
}

fn now_micros() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros())
        .unwrap_or(0)
}

fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
}

/// The server's user + system CPU seconds so far (`/proc/<pid>/stat`, USER_HZ = 100).
fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) as f64 / 100.0)
}

/// Server CPU milliseconds per operation between two readings, as a table cell.
fn cpu_per_op(before: Option<f64>, after: Option<f64>, ops: usize) -> String {
    match (before, after) {
        (Some(b), Some(a)) if ops > 0 => format!("{:.3}", (a - b) * 1000.0 / ops as f64),
        _ => "-".to_owned(),
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 * p) as usize).min(sorted.len() - 1)]
}

struct Server {
    child: Child,
    _dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn start_server(args: &Args) -> anyhow::Result<(Server, Target)> {
    let binary = match &args.server {
        Some(b) => b.clone(),
        None => std::env::current_exe()?
            .parent()
            .context("locating the bench binary")?
            .join("flotilla-apiserver"),
    };
    if !binary.exists() {
        bail!(
            "{} not found: build it (cargo build --release -p flotilla-apiserver --bins) or pass --server",
            binary.display()
        );
    }
    let dir = tempfile::tempdir()?;
    let child = Command::new(&binary)
        .arg("--data-dir")
        .arg(dir.path())
        .args([
            "--listen",
            "127.0.0.1:0",
            "--exit-on-stdin-eof",
            "--log-level",
            "warn",
        ])
        .stdin(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {}", binary.display()))?;
    let kubeconfig = dir.path().join("kubeconfig");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !kubeconfig.exists() {
        if Instant::now() > deadline {
            bail!("the server did not start");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let cfg: serde_yaml::Value = serde_yaml::from_str(&std::fs::read_to_string(&kubeconfig)?)?;
    let base = cfg["clusters"][0]["cluster"]["server"]
        .as_str()
        .context("server in kubeconfig")?
        .to_owned();
    let token = cfg["users"][0]["user"]["token"]
        .as_str()
        .context("token in kubeconfig")?
        .to_owned();
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(dir.path().join("pki/ca.crt"))? {
        roots.add(cert?)?;
    }
    let tls = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let builder = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_only();
    // TCP_NODELAY: over HTTP/2 a request's HEADERS and DATA frames are separate writes, and
    // Nagle's algorithm would hold the second until the server's delayed ACK (~40 ms).
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    let (connector, http2_only) = if !args.http2 {
        (builder.enable_http1().wrap_connector(http), false)
    } else {
        (builder.enable_http2().wrap_connector(http), true)
    };
    let client = Client::builder(TokioExecutor::new())
        .http2_only(http2_only)
        .pool_max_idle_per_host(1024)
        .build(connector);
    Ok((Server { child, _dir: dir }, Target { client, base, token }))
}

async fn create_namespace(target: &Target, name: &str) -> anyhow::Result<()> {
    let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
    let (code, _) = target
        .send(
            "POST",
            "/api/v1/namespaces",
            "application/json",
            body.to_string().into_bytes(),
        )
        .await?;
    if code != 201 && code != 409 {
        bail!("creating namespace {name}: HTTP {code}");
    }
    Ok(())
}

/// Creates objects with `clients` clients for `seconds` while `watchers` watchers of the
/// namespace count the events they receive; returns the creates, the events delivered, the
/// seconds from the first create to the last delivery, and the server's CPU seconds meanwhile.
async fn fanout(
    target: Arc<Target>,
    pid: u32,
    watchers: usize,
    clients: usize,
    seconds: u64,
    payload: Arc<String>,
) -> anyhow::Result<(usize, usize, f64, Option<f64>)> {
    let ns = format!("bench-fanout-{watchers}");
    create_namespace(&target, &ns).await?;
    let rv = list_resource_version(&target, &ns).await?;
    let expected = Arc::new(AtomicUsize::new(usize::MAX));
    let mut tasks = Vec::new();
    for _ in 0..watchers {
        let (target, rv, ns, expected) = (target.clone(), rv.clone(), ns.clone(), expected.clone());
        tasks.push(tokio::spawn(async move {
            let req = http::Request::get(format!(
                "{}/api/v1/namespaces/{ns}/configmaps?watch=true&resourceVersion={rv}&timeoutSeconds=300",
                target.base
            ))
            .header("Authorization", format!("Bearer {}", target.token))
            .body(Full::new(Bytes::new()))?;
            let mut body = target.client.request(req).await?.into_body();
            // Events are newline-delimited; counting lines keeps this client's CPU small.
            let mut events = 0usize;
            let mut last = Instant::now();
            while events < expected.load(Ordering::Acquire) {
                // The expected count is known only once the writers stop: look again now and then.
                let frame = match tokio::time::timeout(Duration::from_millis(100), body.frame()).await {
                    Err(_) => continue,
                    Ok(None) => break,
                    Ok(Some(frame)) => frame?,
                };
                if let Ok(data) = frame.into_data() {
                    events += data.iter().filter(|b| **b == b'\n').count();
                    last = Instant::now();
                }
            }
            anyhow::Ok((events, last))
        }));
    }
    // Let every watch connect before writing.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let cpu_before = cpu_seconds(pid);
    let start = Instant::now();
    let (_, creates) = create_phase(target.clone(), clients, seconds, &ns, "f", payload.clone()).await?;
    expected.store(creates, Ordering::Release);
    let mut delivered = 0;
    let mut last = start.elapsed();
    for task in tasks {
        let (events, at) = tokio::time::timeout(Duration::from_secs(120), task).await???;
        delivered += events;
        last = last.max(at.duration_since(start));
    }
    let cpu = cpu_before.zip(cpu_seconds(pid)).map(|(b, a)| a - b);
    Ok((creates, delivered, last.as_secs_f64(), cpu))
}

/// The resourceVersion of a list of `ns`'s ConfigMaps: where a watch of them starts.
async fn list_resource_version(target: &Target, ns: &str) -> anyhow::Result<String> {
    let (code, body) = target
        .send(
            "GET",
            &format!("/api/v1/namespaces/{ns}/configmaps"),
            "application/json",
            Vec::new(),
        )
        .await?;
    if code != 200 {
        bail!("list: HTTP {code}");
    }
    Ok(
        serde_json::from_slice::<Value>(&body)?["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or("0")
            .to_owned(),
    )
}

/// Runs `clients` tasks creating 1 KiB ConfigMaps `<prefix><client>-<i>` in `ns` until `seconds`
/// pass; returns creates/s and the number created.
async fn create_phase(
    target: Arc<Target>,
    clients: usize,
    seconds: u64,
    ns: &str,
    prefix: &'static str,
    payload: Arc<String>,
) -> anyhow::Result<(f64, usize)> {
    let path = Arc::new(format!("/api/v1/namespaces/{ns}/configmaps"));
    phase(target, clients, seconds, move |t, c, i| {
        let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("{prefix}{c}-{i}")}, "data": {"payload": payload.as_str()}});
        let path = path.clone();
        async move {
            let (code, body) = t
                .send("POST", &path, "application/json", body.to_string().into_bytes())
                .await?;
            if code != 201 {
                bail!("create: HTTP {code}: {}", String::from_utf8_lossy(&body));
            }
            Ok(())
        }
    })
    .await
}

/// Runs `clients` tasks calling `op(client, i)` until `seconds` pass; returns operations/s.
async fn phase<F, Fut>(
    target: Arc<Target>,
    clients: usize,
    seconds: u64,
    op: F,
) -> anyhow::Result<(f64, usize)>
where
    F: Fn(Arc<Target>, usize, usize) -> Fut + Send + Sync + Clone + 'static,
    Fut: std::future::Future<Output = anyhow::Result<()>> + Send,
{
    let done = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let deadline = start + Duration::from_secs(seconds);
    let mut tasks = Vec::new();
    for c in 0..clients {
        let (target, done, op) = (target.clone(), done.clone(), op.clone());
        tasks.push(tokio::spawn(async move {
            let mut i = 0;
            while Instant::now() < deadline {
                op(target.clone(), c, i).await?;
                done.fetch_add(1, Ordering::Relaxed);
                i += 1;
            }
            anyhow::Ok(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    let n = done.load(Ordering::Relaxed);
    Ok((n as f64 / start.elapsed().as_secs_f64(), n))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let (server, target) = start_server(&args).await?;
    let target = Arc::new(target);
    let pid = server.child.id();
    let mut rows: Vec<(String, String)> = Vec::new();
    let mut total_objects = 0usize;
    let payload = Arc::new(payload());

    for &clients in &args.clients {
        let ns = format!("bench-{clients}");
        create_namespace(&target, &ns).await?;
        let cpu_before = cpu_seconds(pid);
        let (rate, n) =
            create_phase(target.clone(), clients, args.seconds, &ns, "c", payload.clone()).await?;
        total_objects += n;
        rows.push((
            format!("durable creates/s, 1 KiB, {clients} clients"),
            format!("{rate:.0}"),
        ));
        rows.push((
            format!("  server CPU ms per create, {clients} clients"),
            cpu_per_op(cpu_before, cpu_seconds(pid), n),
        ));
        let cpu_before = cpu_seconds(pid);
        // Updates rewrite the objects just created (merge patch, no precondition).
        let per_client = (n / clients).max(1);
        let ns2 = ns.clone();
        let (rate, updates) = phase(target.clone(), clients, args.seconds, move |t, c, i| {
            let name = format!("c{c}-{}", i % per_client);
            let path = format!("/api/v1/namespaces/{ns2}/configmaps/{name}");
            let body = json!({"data": {"payload": format!("{:01024}", i)}});
            async move {
                let (code, body) = t
                    .send(
                        "PATCH",
                        &path,
                        "application/merge-patch+json",
                        body.to_string().into_bytes(),
                    )
                    .await?;
                if code != 200 && code != 404 {
                    bail!("update: HTTP {code}: {}", String::from_utf8_lossy(&body));
                }
                Ok(())
            }
        })
        .await?;
        rows.push((
            format!("durable updates/s, 1 KiB, {clients} clients"),
            format!("{rate:.0}"),
        ));
        rows.push((
            format!("  server CPU ms per update, {clients} clients"),
            cpu_per_op(cpu_before, cpu_seconds(pid), updates),
        ));
        let cpu_before = cpu_seconds(pid);
        // Reads of the same objects, as a controller's GET before it acts. As in the update
        // phase, a client that created fewer than the average also asks for a few names that
        // do not exist (404, counted with the rest).
        let ns3 = ns.clone();
        let (rate, gets) = phase(target.clone(), clients, args.seconds, move |t, c, i| {
            let path = format!("/api/v1/namespaces/{ns3}/configmaps/c{c}-{}", i % per_client);
            async move {
                let (code, body) = t.send("GET", &path, "application/json", Vec::new()).await?;
                if code != 200 && code != 404 {
                    bail!("get: HTTP {code}: {}", String::from_utf8_lossy(&body));
                }
                Ok(())
            }
        })
        .await?;
        rows.push((format!("gets/s, 1 KiB, {clients} clients"), format!("{rate:.0}")));
        rows.push((
            format!("  server CPU ms per get, {clients} clients"),
            cpu_per_op(cpu_before, cpu_seconds(pid), gets),
        ));
    }

    // Fan-out: 16 clients create while `watchers` watchers receive every event.
    for &watchers in &args.fanout_watchers {
        let (creates, delivered, seconds, cpu) =
            fanout(target.clone(), pid, watchers, 16, args.seconds, payload.clone()).await?;
        total_objects += creates;
        rows.push((
            format!("fan-out: creates/s, 16 clients, {watchers} watchers"),
            format!("{:.0}", creates as f64 / seconds),
        ));
        rows.push((
            format!("  events delivered/s to {watchers} watchers"),
            format!("{:.0}", delivered as f64 / seconds),
        ));
        rows.push((
            format!("  server CPU ms per create, {watchers} watchers"),
            cpu.map_or("-".to_owned(), |c| {
                format!("{:.3}", c * 1000.0 / creates.max(1) as f64)
            }),
        ));
    }

    // Watch latency: 100 watchers on one namespace, a paced writer.
    create_namespace(&target, "bench-watch").await?;
    let rv = list_resource_version(&target, "bench-watch").await?;
    let mut watchers = Vec::new();
    for _ in 0..args.watchers {
        let target = target.clone();
        let rv = rv.clone();
        let expected = args.watch_events;
        watchers.push(tokio::spawn(async move {
            let req = http::Request::get(format!(
                "{}/api/v1/namespaces/bench-watch/configmaps?watch=true&resourceVersion={rv}&timeoutSeconds=120",
                target.base
            ))
            .header("Authorization", format!("Bearer {}", target.token))
            .body(Full::new(Bytes::new()))?;
            let resp = target.client.request(req).await?;
            let mut body = resp.into_body();
            let mut buf = Vec::new();
            let mut latencies = Vec::new();
            while latencies.len() < expected {
                let Some(frame) = body.frame().await else { break };
                let Ok(data) = frame?.into_data() else { continue };
                let received = now_micros();
                buf.extend_from_slice(&data);
                while let Some(pos) = buf.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = buf.drain(..=pos).collect();
                    let event: Value = serde_json::from_slice(&line)?;
                    if let Some(sent) = event["object"]["metadata"]["annotations"]["sent"].as_str() {
                        let sent: u128 = sent.parse()?;
                        latencies.push((received.saturating_sub(sent)) as f64 / 1000.0);
                    }
                }
            }
            anyhow::Ok(latencies)
        }));
    }
    // Let every watch connect before writing.
    tokio::time::sleep(Duration::from_millis(500)).await;
    for i in 0..args.watch_events {
        let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("w{i}"), "annotations": {"sent": now_micros().to_string()}},
            "data": {"payload": payload.as_str()}});
        let (code, _) = target
            .send(
                "POST",
                "/api/v1/namespaces/bench-watch/configmaps",
                "application/json",
                body.to_string().into_bytes(),
            )
            .await?;
        if code != 201 {
            bail!("watch writer: HTTP {code}");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    total_objects += args.watch_events;
    let mut all = Vec::new();
    for w in watchers {
        all.extend(w.await??);
    }
    all.sort_by(|a, b| a.total_cmp(b));
    rows.push((
        format!("watch delivery p50, {} watchers (ms)", args.watchers),
        format!("{:.2}", percentile(&all, 0.50)),
    ));
    rows.push((
        format!("watch delivery p99, {} watchers (ms)", args.watchers),
        format!("{:.2}", percentile(&all, 0.99)),
    ));
    rows.push(("watch events received".into(), format!("{}", all.len())));

    // Fill up to the list size with 64 clients, then list and measure memory.
    create_namespace(&target, "bench-list").await?;
    let missing = args.list_objects.saturating_sub(total_objects);
    let counter = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..64 {
        let (target, counter, payload) = (target.clone(), counter.clone(), payload.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let i = counter.fetch_add(1, Ordering::Relaxed);
                if i >= missing {
                    return anyhow::Ok(());
                }
                let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": format!("l{i}")}, "data": {"payload": payload.as_str()}});
                let (code, _) = target
                    .send(
                        "POST",
                        "/api/v1/namespaces/bench-list/configmaps",
                        "application/json",
                        body.to_string().into_bytes(),
                    )
                    .await?;
                if code != 201 {
                    bail!("fill: HTTP {code}");
                }
            }
        }));
    }
    for t in tasks {
        t.await??;
    }
    if missing > 0 {
        rows.push((
            format!("fill to {} objects, 64 clients (creates/s)", args.list_objects),
            format!("{:.0}", missing as f64 / start.elapsed().as_secs_f64()),
        ));
    }
    let start = Instant::now();
    let (code, body) = target
        .send("GET", "/api/v1/configmaps", "application/json", Vec::new())
        .await?;
    if code != 200 {
        bail!("list: HTTP {code}");
    }
    let elapsed = start.elapsed();
    let items = serde_json::from_slice::<Value>(&body)?["items"]
        .as_array()
        .map_or(0, Vec::len);
    rows.push((
        format!("list all {items} objects, one request (s)"),
        format!(
            "{:.2} ({:.0} MiB)",
            elapsed.as_secs_f64(),
            body.len() as f64 / 1048576.0
        ),
    ));
    let start = Instant::now();
    let mut token = String::new();
    let mut paged = 0;
    loop {
        let path = if token.is_empty() {
            "/api/v1/configmaps?limit=500".to_string()
        } else {
            format!("/api/v1/configmaps?limit=500&continue={token}")
        };
        let (code, body) = target.send("GET", &path, "application/json", Vec::new()).await?;
        if code != 200 {
            bail!("paged list: HTTP {code}");
        }
        let page: Value = serde_json::from_slice(&body)?;
        paged += page["items"].as_array().map_or(0, Vec::len);
        token = page["metadata"]["continue"].as_str().unwrap_or("").to_owned();
        if token.is_empty() {
            break;
        }
    }
    rows.push((
        format!("list all {paged} objects, pages of 500 (s)"),
        format!("{:.2}", start.elapsed().as_secs_f64()),
    ));
    if let Some(kib) = rss_kib(pid) {
        rows.push((
            format!("server RSS with {items} objects (MiB)"),
            format!("{:.0}", kib as f64 / 1024.0),
        ));
    }
    let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(10);
    println!("{:<width$}  result", "measurement");
    println!("{:<width$}  ------", "-".repeat(width));
    for (k, v) in rows {
        println!("{k:<width$}  {v}");
    }
    drop(server);
    Ok(())
}
