//! Asking components whether they are ready: an API server's `/readyz` through its
//! kubeconfig, a service's `/readyz` on its plain-HTTP ops endpoint.

use std::path::Path;
use std::time::Duration;

use http::Request;
use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// How long one probe may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// A client for the current context of the kubeconfig at `path`, if it can be read.
pub async fn client_from(path: &Path, context: Option<&str>) -> Option<Client> {
    let kubeconfig = Kubeconfig::read_from(path).ok()?;
    let options = KubeConfigOptions {
        context: context.map(str::to_owned),
        ..Default::default()
    };
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .ok()?;
    Client::try_from(config).ok()
}

/// Whether the API server behind `client` answers `/readyz` with `ok`.
pub async fn apiserver_ready(client: &Client) -> bool {
    let Ok(request) = Request::get("/readyz").body(Vec::new()) else {
        return false;
    };
    matches!(
        tokio::time::timeout(PROBE_TIMEOUT, client.request_text(request)).await,
        Ok(Ok(body)) if body.trim() == "ok"
    )
}

/// Whether the service whose ops endpoint is `address` (`host:port`) answers `/readyz` with 200.
pub async fn service_ready(address: &str) -> bool {
    matches!(http_get(address, "/readyz").await, Some((200, _)))
}

/// A minimal HTTP/1.0 GET over plain TCP: `(status code, body)`, or `None` when the endpoint
/// does not answer within the probe timeout.
pub async fn http_get(address: &str, path: &str) -> Option<(u16, String)> {
    tokio::time::timeout(PROBE_TIMEOUT, async {
        let mut stream = tokio::net::TcpStream::connect(address).await.ok()?;
        let request = format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n");
        stream.write_all(request.as_bytes()).await.ok()?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await.ok()?;
        let text = String::from_utf8_lossy(&response).into_owned();
        let (head, body) = text.split_once("\r\n\r\n")?;
        let code = head.split_whitespace().nth(1)?.parse().ok()?;
        Some((code, body.to_owned()))
    })
    .await
    .ok()
    .flatten()
}
