//! The HTTP transport of the services' control-plane client: HTTP/2 when the API server offers
//! it (ALPN), as client-go does, so a service's requests share one connection (ADR 0020).
//!
//! kube's default client speaks HTTP/1.1 only, and its connection pool opens a new connection
//! whenever no idle one is at hand (and keeps it for 90 s): under load a service held about one
//! connection per request it ever had in flight (at N = 10,000 templates execution held 119 to
//! the control plane, the distributor 37 with two workers), each with its own TLS session,
//! buffers and request channel. Over HTTP/2 they are streams of one connection.
//!
//! The stack is kube's own, taken from its public pieces (`ConfigExt`: base URI, authentication,
//! extra headers, the kubeconfig's TLS configuration; its retry policy for 429/503/504; a debug
//! span per request) around a `hyper-util` client whose connector offers `h2` and `http/1.1`
//! and sets `TCP_NODELAY` (without it, Nagle's algorithm holds a request's DATA frame until the
//! server's delayed ACK of its HEADERS frame: ~40 ms per write). A server that does not offer
//! HTTP/2 is talked to over HTTP/1.1.
//!
//! Execution's clients of member clusters are built the same way (ADR 0031), with a
//! [`DeadlineLayer`] around their requests in place of per-socket timeouts.
//!
//! Every request names its program in `User-Agent` as client-go's does ([`user_agent`]):
//! an API server records the name before the `/` as the field manager of writes that name
//! none (updates, merge patches, status writes), and audit logs show it.

use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::HeaderValue;
use http::header::USER_AGENT;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use kube::client::retry::RetryPolicy;
use kube::client::{ClientBuilder, ConfigExt, DynBody};
use tower::retry::RetryLayer;
use tower::util::BoxService;
use tower::{BoxError, Layer, Service, ServiceBuilder, ServiceExt};
use tower_http::trace::{DefaultMakeSpan, TraceLayer};
use tracing::Level;

use crate::RuntimeError;

/// A connection that has read nothing for this long is pinged (client-go's HTTP/2 read-idle
/// timeout: 30 s).
pub const PING_AFTER: Duration = Duration::from_secs(30);

/// A ping not answered within this closes the connection and fails its streams, so requests
/// and watches on a dead connection fail over to a new one (client-go's ping timeout: 15 s).
pub const PING_TIMEOUT: Duration = Duration::from_secs(15);

/// Flow-control window of one stream. A watch whose consumer falls behind stops only its own
/// stream once this much is unread (client-go: 4 MiB).
const STREAM_WINDOW: u32 = 4 << 20;

/// Flow-control window of the connection: large, so that streams whose consumers fall behind
/// never take the window the others need (client-go: 1 GiB). It is credit, not memory: what
/// is buffered is bounded by the stream windows of the streams open.
const CONNECTION_WINDOW: u32 = 1 << 30;

/// The service under a [`ClientBuilder`] of [`client_builder`] (kube's `GenericService`).
pub type ClientService =
    BoxService<http::Request<kube::client::Body>, http::Response<Box<DynBody>>, BoxError>;

/// A kube client for `config` that speaks HTTP/2 when the server offers it. A `proxy-url` is
/// refused, as kube's own stack refuses it without its proxy features. The connect timeout
/// of `config` applies; its per-socket read and write timeouts do not (one connection carries
/// every request and watch, so a socket-level timeout would fail them all): a dead connection
/// is found by HTTP/2 pings ([`PING_AFTER`], [`PING_TIMEOUT`]) instead.
pub fn client_builder(config: &kube::Config) -> Result<ClientBuilder<ClientService>, RuntimeError> {
    if let Some(proxy) = &config.proxy_url {
        return Err(RuntimeError::Proxy {
            url: proxy.to_string(),
        });
    }
    let server_name = match &config.tls_server_name {
        Some(name) => Some(
            rustls_pki_types::ServerName::try_from(name.clone()).map_err(|error| {
                RuntimeError::TlsServerName {
                    name: name.clone(),
                    message: error.to_string(),
                }
            })?,
        ),
        None => None,
    };
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    http.set_connect_timeout(config.connect_timeout);
    let tls = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(config.rustls_client_config()?)
        .https_or_http();
    let tls = match server_name {
        Some(name) => tls.with_server_name_resolver(hyper_rustls::FixedServerNameResolver::new(name)),
        None => tls,
    };
    let connector = tls.enable_http1().enable_http2().wrap_connector(http);
    let client: HyperClient<_, kube::client::Body> = HyperClient::builder(TokioExecutor::new())
        .timer(TokioTimer::new())
        .pool_timer(TokioTimer::new())
        .http2_keep_alive_interval(PING_AFTER)
        .http2_keep_alive_timeout(PING_TIMEOUT)
        .http2_keep_alive_while_idle(true)
        .http2_initial_stream_window_size(STREAM_WINDOW)
        .http2_initial_connection_window_size(CONNECTION_WINDOW)
        .build(connector);
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        // kube's retry of 429, 503 and 504 answers (on unless the config turns it off).
        .option_layer(
            config
                .default_retry
                .then(|| RetryLayer::new(RetryPolicy::server_retry())),
        )
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        // A `User-Agent` from the kubeconfig's extra headers is kept.
        .map_request(|mut request: http::Request<kube::client::Body>| {
            request.headers_mut().entry(USER_AGENT).or_insert_with(user_agent);
            request
        })
        // As kube's own stack: a debug span per request, an error logged for a 5xx or a failure.
        .layer(TraceLayer::new_for_http().make_span_with(DefaultMakeSpan::new().level(Level::DEBUG)))
        .map_err(BoxError::from)
        .service(client)
        .map_response(|response| {
            response.map(|body| Box::new(BodyExt::map_err(body, BoxError::from)) as Box<DynBody>)
        });
    Ok(ClientBuilder::new(
        BoxService::new(service),
        config.default_namespace.clone(),
    ))
}

/// This process's `User-Agent`, in client-go's form: `<program>/v<version> (<os>/<arch>)`,
/// the program being the file name this process was started as (`flotilla-execution`). An API
/// server takes the part before the first `/` as the field manager of a write that names none,
/// as kube-apiserver does (so a Work's status write is recorded as `flotilla-execution`'s).
pub fn user_agent() -> HeaderValue {
    static VALUE: OnceLock<HeaderValue> = OnceLock::new();
    VALUE
        .get_or_init(|| {
            let argv0 = std::env::args_os().next().unwrap_or_default();
            user_agent_of(
                &argv0.to_string_lossy(),
                env!("CARGO_PKG_VERSION"),
                std::env::consts::OS,
                std::env::consts::ARCH,
            )
        })
        .clone()
}

/// [`user_agent`] for a program started as `argv0`. The program is the last path element of
/// `argv0` with everything but ASCII letters, digits, `-`, `_` and `.` dropped (a `/` would end
/// the field manager's name early); the architecture is named as Go names it (`amd64`,
/// `arm64`), as in client-go's agents.
fn user_agent_of(argv0: &str, version: &str, os: &str, arch: &str) -> HeaderValue {
    let program: String = argv0
        .rsplit(['/', '\\'])
        .next()
        .unwrap_or_default()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        .collect();
    let program = if program.is_empty() { "flotilla" } else { &program };
    let arch = match arch {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        other => other,
    };
    HeaderValue::try_from(format!("{program}/v{version} ({os}/{arch})"))
        .unwrap_or_else(|_| HeaderValue::from_static("flotilla"))
}

/// A [`tower::Layer`] that gives each request a deadline: its answer, status, headers and
/// body, must be in within `deadline` of the call, or the request fails with
/// [`DeadlineExceeded`].
///
/// This is the per-request timeout of a client whose connection carries many requests at once
/// (HTTP/2): a per-socket read timeout there would fail every request in flight when it fired,
/// and would not fire for one stalled request while frames of others keep arriving. The body is
/// read into memory inside the deadline, so the layer is for requests whose answers end (gets,
/// lists, writes), not for watches.
#[derive(Clone, Copy, Debug)]
pub struct DeadlineLayer {
    deadline: Duration,
}

impl DeadlineLayer {
    /// Requests under this layer fail after `deadline`.
    pub fn new(deadline: Duration) -> Self {
        Self { deadline }
    }
}

impl<S> Layer<S> for DeadlineLayer {
    type Service = Deadline<S>;

    fn layer(&self, inner: S) -> Deadline<S> {
        Deadline {
            inner,
            deadline: self.deadline,
        }
    }
}

/// The service of a [`DeadlineLayer`].
#[derive(Clone, Debug)]
pub struct Deadline<S> {
    inner: S,
    deadline: Duration,
}

/// A request's answer was not in within its deadline ([`DeadlineLayer`]).
#[derive(Debug, thiserror::Error)]
#[error("no complete answer within the request's deadline of {deadline:?}")]
pub struct DeadlineExceeded {
    /// The deadline that passed.
    pub deadline: Duration,
}

impl<S, RequestBody, ResponseBody> Service<http::Request<RequestBody>> for Deadline<S>
where
    S: Service<http::Request<RequestBody>, Response = http::Response<ResponseBody>>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    ResponseBody: http_body::Body + Send + 'static,
    ResponseBody::Data: Send,
    ResponseBody::Error: Into<BoxError>,
{
    type Response = http::Response<Full<Bytes>>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: http::Request<RequestBody>) -> Self::Future {
        let deadline = self.deadline;
        let answer = self.inner.call(request);
        Box::pin(async move {
            let whole = async {
                let (parts, body) = answer.await.map_err(Into::into)?.into_parts();
                let body = body.collect().await.map_err(Into::into)?.to_bytes();
                Ok(http::Response::from_parts(parts, Full::new(body)))
            };
            match tokio::time::timeout(deadline, whole).await {
                Ok(answer) => answer,
                Err(_) => Err(DeadlineExceeded { deadline }.into()),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The message `client_builder` refuses a config with, after `edit`.
    fn refusal(edit: impl FnOnce(&mut kube::Config)) -> String {
        let mut config = kube::Config::new("https://127.0.0.1:6443".parse().unwrap());
        edit(&mut config);
        match client_builder(&config) {
            Ok(_) => panic!("the config is accepted"),
            Err(error) => error.to_string(),
        }
    }

    #[test]
    fn the_user_agent_names_the_program_as_client_go_does() {
        let agent = |argv0: &str, arch: &str| {
            user_agent_of(argv0, "0.1.0", "linux", arch)
                .to_str()
                .unwrap()
                .to_owned()
        };
        assert_eq!(
            agent("/usr/local/bin/flotilla-execution", "x86_64"),
            "flotilla-execution/v0.1.0 (linux/amd64)"
        );
        assert_eq!(
            agent("flotilla-scheduler", "aarch64"),
            "flotilla-scheduler/v0.1.0 (linux/arm64)"
        );
        assert_eq!(
            agent("./flotilla-detector", "riscv64"),
            "flotilla-detector/v0.1.0 (linux/riscv64)"
        );
        // Nothing that would end the manager's name early, or make no header value.
        assert_eq!(
            agent("/bin/odd name:\u{e9}\n", "x86_64"),
            "oddname/v0.1.0 (linux/amd64)"
        );
        assert_eq!(agent("", "x86_64"), "flotilla/v0.1.0 (linux/amd64)");
        assert_eq!(agent("/opt/bin/", "x86_64"), "flotilla/v0.1.0 (linux/amd64)");
    }

    #[test]
    fn a_tls_server_name_that_is_no_name_is_refused_with_the_field() {
        let error = refusal(|config| config.tls_server_name = Some("not a host name".to_owned()));
        assert!(error.contains("tls-server-name \"not a host name\""), "{error}");
        assert!(error.contains("DNS name or IP address"), "{error}");
    }

    #[test]
    fn a_proxy_url_is_refused_with_the_field_not_ignored() {
        let error = refusal(|config| config.proxy_url = Some("http://proxy.example:3128".parse().unwrap()));
        assert!(error.contains("proxy-url http://proxy.example:3128/"), "{error}");
        assert!(error.contains("remove proxy-url"), "{error}");
    }

    type Chunk = Result<http_body::Frame<Bytes>, std::io::Error>;
    /// A test answer: its body a stream of [`Chunk`]s.
    type Answer = http::Response<http_body_util::StreamBody<futures::stream::BoxStream<'static, Chunk>>>;

    /// A response whose body is `chunks`, then (if `stall`) nothing forever.
    fn answer(chunks: &[&'static str], stall: bool) -> Answer {
        use futures::StreamExt as _;
        let frames = futures::stream::iter(
            chunks
                .iter()
                .map(|c| Ok(http_body::Frame::data(Bytes::from_static(c.as_bytes()))))
                .collect::<Vec<Chunk>>(),
        );
        let body = if stall {
            frames.chain(futures::stream::pending()).boxed()
        } else {
            frames.boxed()
        };
        http::Response::builder()
            .status(201)
            .header("content-type", "application/json")
            .body(http_body_util::StreamBody::new(body))
            .unwrap()
    }

    fn request() -> http::Request<()> {
        http::Request::get("/api/v1/namespaces/default/configmaps/c")
            .body(())
            .unwrap()
    }

    /// Calls a service that answers with `make` after `delay`, under a 10 s deadline.
    async fn call_with_deadline<F>(delay: Duration, make: F) -> Result<http::Response<Full<Bytes>>, BoxError>
    where
        F: Fn() -> Result<Answer, std::io::Error> + Clone + Send + 'static,
    {
        let inner = tower::service_fn(move |_: http::Request<()>| {
            let make = make.clone();
            async move {
                tokio::time::sleep(delay).await;
                make()
            }
        });
        DeadlineLayer::new(Duration::from_secs(10))
            .layer(inner)
            .oneshot(request())
            .await
    }

    fn deadline_error(result: Result<http::Response<Full<Bytes>>, BoxError>) -> DeadlineExceeded {
        let error = result.expect_err("the deadline passed");
        *error.downcast::<DeadlineExceeded>().expect("a DeadlineExceeded")
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_within_the_deadline_arrives_whole_with_its_status_and_headers() {
        let started = tokio::time::Instant::now();
        let response = call_with_deadline(Duration::from_secs(9), || {
            Ok(answer(&["{\"kind\":", "\"ConfigMap\"}"], false))
        })
        .await
        .unwrap();
        assert_eq!(response.status(), 201);
        assert_eq!(response.headers()["content-type"], "application/json");
        let body = response.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(body, Bytes::from_static(b"{\"kind\":\"ConfigMap\"}"));
        assert_eq!(started.elapsed(), Duration::from_secs(9));
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_not_answered_in_time_fails_at_its_deadline() {
        let started = tokio::time::Instant::now();
        let error =
            deadline_error(call_with_deadline(Duration::from_secs(11), || Ok(answer(&["{}"], false))).await);
        assert_eq!(error.deadline, Duration::from_secs(10));
        assert_eq!(started.elapsed(), Duration::from_secs(10));
        assert_eq!(
            error.to_string(),
            "no complete answer within the request's deadline of 10s"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_stalls_after_the_headers_fails_at_the_deadline() {
        let started = tokio::time::Instant::now();
        let error = deadline_error(
            call_with_deadline(Duration::from_secs(1), || Ok(answer(&["{\"kind\""], true))).await,
        );
        assert_eq!(error.deadline, Duration::from_secs(10));
        assert_eq!(
            started.elapsed(),
            Duration::from_secs(10),
            "the deadline counts from the call, not from the headers"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_error_of_the_inner_service_is_passed_on_at_once() {
        let started = tokio::time::Instant::now();
        let error = call_with_deadline(Duration::ZERO, || {
            Err(std::io::Error::new(
                std::io::ErrorKind::ConnectionRefused,
                "connection refused",
            ))
        })
        .await
        .expect_err("the inner service failed");
        assert!(error.downcast_ref::<DeadlineExceeded>().is_none(), "{error}");
        assert_eq!(error.to_string(), "connection refused");
        assert_eq!(started.elapsed(), Duration::ZERO);
    }
}
