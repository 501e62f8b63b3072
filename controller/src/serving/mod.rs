//! The secure port, served as kube-controller-manager serves its own (10257): HTTPS
//! ([`tls`]), every path but the health checks behind delegated authentication and
//! authorization ([`auth`]).
//!
//! To scrape `/metrics`, a caller needs a token the API server authenticates and RBAC allowing
//! `get` on the path (a ClusterRole with `nonResourceURLs: ["/metrics"]`; `deploy/rbac.yaml`
//! has one). kube-gc itself needs `create` on `tokenreviews` and `subjectaccessreviews`
//! (the `system:auth-delegator` ClusterRole).

pub mod auth;
pub mod tls;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;

use crate::Flags;
use auth::{AlwaysAllow, DelegatedAuth};

/// Binds the secure port `flags` ask for and serves `router` there, guarded; `None` when
/// `--secure-port=0`.
pub async fn start(
    flags: &Flags,
    client: kube::Client,
    router: Router,
) -> crate::Result<Option<tokio::task::JoinHandle<()>>> {
    if flags.secure_port == 0 {
        return Ok(None);
    }
    let config =
        tls::server_config(flags.tls_cert_file.as_deref(), flags.tls_private_key_file.as_deref())?;
    let addr = SocketAddr::new(flags.bind_address, flags.secure_port);
    let listener = tls::TlsListener::bind(addr, config).await?;
    let always_allow = AlwaysAllow::new(&flags.authorization_always_allow_paths);
    let bound = axum::serve::Listener::local_addr(&listener).unwrap_or(addr);
    let open = always_allow.rules();
    tracing::info!(addr = %bound, ?open, "serving securely: the paths in `open` need no token, every other path authorization");
    for path in ["/healthz", "/readyz", "/livez"] {
        if !always_allow.matches(path) {
            tracing::warn!(
                path,
                "a probe's path needs authorization (--authorization-always-allow-paths): a kubelet probe without a token will fail"
            );
        }
    }
    for path in ["/metrics", "/debug/controllers/garbagecollector/graph"] {
        if always_allow.matches(path) {
            tracing::warn!(
                path,
                "served to anyone who reaches the port, without a token (--authorization-always-allow-paths)"
            );
        }
    }
    let auth = Arc::new(DelegatedAuth::new(client, always_allow));
    let app = router.layer(axum::middleware::from_fn_with_state(auth, auth::guard));
    Ok(Some(tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!(error = %e, "secure server failed");
        }
    })))
}
