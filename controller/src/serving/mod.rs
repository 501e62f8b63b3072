//! The secure port, served as kube-controller-manager serves its own (10257): HTTPS
//! ([`tls`]), every path but the health checks behind delegated authentication and
//! authorization ([`auth`]).
//!
//! To scrape `/metrics`, a caller needs a token the API server authenticates and RBAC allowing
//! `get` on the path (a ClusterRole with `nonResourceURLs: ["/metrics"]`; `deploy/base/rbac.yaml`
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
    tracing::info!(addr = %bound, ?open, "serving securely: the paths in `open` need no token, every other path needs authorization");
    let (closed_probes, open_private) = exposure(&always_allow);
    for path in closed_probes {
        tracing::warn!(
            path,
            "a probe's path needs authorization (--authorization-always-allow-paths): a kubelet probe without a token will fail"
        );
    }
    for path in open_private {
        tracing::warn!(
            path,
            "served to anyone who reaches the port, without a token (--authorization-always-allow-paths)"
        );
    }
    let auth = Arc::new(DelegatedAuth::new(client, always_allow));
    let app = router.layer(axum::middleware::from_fn_with_state(auth, auth::guard));
    Ok(Some(tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!(error = %e, "secure server failed");
        }
    })))
}

/// What `--authorization-always-allow-paths` gets wrong, for a warning: the probes' paths it
/// leaves behind authorization, and the private paths (metrics, the debug endpoints) it opens.
fn exposure(always_allow: &AlwaysAllow) -> (Vec<&'static str>, Vec<&'static str>) {
    use crate::http::{PRIVATE_PATHS, PROBE_PATHS};
    let closed_probes = PROBE_PATHS.into_iter().filter(|p| !always_allow.matches(p));
    let open_private = PRIVATE_PATHS.into_iter().filter(|p| always_allow.matches(p));
    (closed_probes.collect(), open_private.collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exposure_of(paths: &[&str]) -> (Vec<&'static str>, Vec<&'static str>) {
        let paths: Vec<String> = paths.iter().map(|p| (*p).to_owned()).collect();
        exposure(&AlwaysAllow::new(&paths))
    }

    #[test]
    fn what_the_always_allowed_paths_expose_or_close_is_named() {
        let none: Vec<&str> = Vec::new();
        assert_eq!(exposure_of(&["/healthz", "/readyz", "/livez"]), (none.clone(), none.clone()));
        let (closed, open) = exposure_of(&["nope", "*"]);
        assert_eq!(closed, none);
        assert_eq!(open[..2], ["/metrics", "/debug/controllers/garbagecollector/graph"]);
        assert!(open.contains(&"/debug/controllers/garbagecollector/explain"), "{open:?}");
        assert_eq!(exposure_of(&[""]), (vec!["/healthz", "/readyz", "/livez"], none.clone()));
        let open = exposure_of(&["/healthz", "/debug/*"]).1;
        assert_eq!(open.len(), 5, "every debug endpoint, not /metrics: {open:?}");
        assert!(
            !open.contains(&"/metrics")
                && open.contains(&"/debug/controllers/garbagecollector/graph")
        );
        assert_eq!(exposure_of(&["/healthz", "/debug/*"]).0, ["/readyz", "/livez"]);
    }
}
