//! client-go's REST client families, for every request kube-gc's client makes (watches,
//! lists, discovery, the collector's calls, leader election, reviews):
//! `rest_client_requests_total{code,host,method}`,
//! `rest_client_request_duration_seconds{host,verb}` (until the response's headers, as
//! client-go measures it), and `rest_client_rate_limiter_duration_seconds{host,verb}` (the
//! collector's waits for its `--kube-api-qps` budget: when it binds, this moves).
//!
//! As client-go's, they are process-wide ([`global`]); [`MetricsLayer`] wraps the client's
//! HTTP stack.

use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

type Labels = [(&'static str, String); 2];
type CodeLabels = [(&'static str, String); 3];

/// client-go's request-latency buckets, 5 ms to 60 s.
fn latency_histogram() -> Histogram {
    Histogram::new([0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0])
}

/// The process's REST client instruments.
#[derive(Debug)]
pub struct RestClientMetrics {
    requests: Family<CodeLabels, Counter>,
    request_duration: Family<Labels, Histogram, fn() -> Histogram>,
    rate_limiter_duration: Family<Labels, Histogram, fn() -> Histogram>,
    /// The API server's `host:port`, for the rate limiter's label.
    host: OnceLock<String>,
}

/// The process-wide instruments.
pub fn global() -> &'static RestClientMetrics {
    static GLOBAL: OnceLock<RestClientMetrics> = OnceLock::new();
    GLOBAL.get_or_init(|| RestClientMetrics {
        requests: Family::default(),
        request_duration: Family::new_with_constructor(latency_histogram),
        rate_limiter_duration: Family::new_with_constructor(latency_histogram),
        host: OnceLock::new(),
    })
}

impl RestClientMetrics {
    /// Adds the families to `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "rest_client_requests",
            "Number of HTTP requests, partitioned by status code, method, and host",
            self.requests.clone(),
        );
        registry.register(
            "rest_client_request_duration_seconds",
            "Request latency in seconds. Broken down by verb, and host",
            self.request_duration.clone(),
        );
        registry.register(
            "rest_client_rate_limiter_duration_seconds",
            "Client side rate limiter latency in seconds. Broken down by verb, and host",
            self.rate_limiter_duration.clone(),
        );
    }

    /// Records a wait of the client-side rate limiter before a `verb` request.
    pub fn rate_limited(&self, verb: &str, waited: Duration) {
        let host = self.host.get().cloned().unwrap_or_default();
        self.rate_limiter_duration
            .get_or_create(&[("host", host), ("verb", verb.to_owned())])
            .observe(waited.as_secs_f64());
    }

    fn observe(&self, host: &str, method: &str, code: &str, took: Duration) {
        self.requests
            .get_or_create(&[
                ("code", code.to_owned()),
                ("host", host.to_owned()),
                ("method", method.to_owned()),
            ])
            .inc();
        self.request_duration
            .get_or_create(&[("host", host.to_owned()), ("verb", method.to_owned())])
            .observe(took.as_secs_f64());
    }
}

/// A tower layer that records every request through [`global`]'s instruments, labelled with
/// `host` (the API server's `host:port`).
#[derive(Clone, Debug)]
pub struct MetricsLayer {
    host: String,
}

impl MetricsLayer {
    /// A layer for requests to `host`; the first layer made names the rate limiter's host.
    pub fn new(host: String) -> MetricsLayer {
        let _ = global().host.set(host.clone());
        MetricsLayer { host }
    }
}

impl<S> tower::Layer<S> for MetricsLayer {
    type Service = MetricsService<S>;
    fn layer(&self, inner: S) -> MetricsService<S> {
        MetricsService { inner, host: self.host.clone() }
    }
}

/// The service [`MetricsLayer`] makes.
#[derive(Clone, Debug)]
pub struct MetricsService<S> {
    inner: S,
    host: String,
}

impl<S, B, R> tower::Service<http::Request<B>> for MetricsService<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<R>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let method = request.method().as_str().to_owned();
        let host = self.host.clone();
        let started = Instant::now();
        let response = self.inner.call(request);
        Box::pin(async move {
            let result = response.await;
            let code = match &result {
                Ok(response) => response.status().as_u16().to_string(),
                Err(_) => "<error>".to_owned(),
            };
            global().observe(&host, &method, &code, started.elapsed());
            result
        })
    }
}
