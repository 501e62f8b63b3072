//! What can keep kube-gc from starting. Once started, kube-gc does not stop on errors: API
//! failures are retried by the work queues, the watchers and the resync loop.

use std::net::SocketAddr;
use std::path::PathBuf;

/// An error starting kube-gc, with what an operator needs to fix it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `--kubeconfig` could not be read or parsed.
    #[error("cannot read kubeconfig {path}: {source}")]
    Kubeconfig {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// No kubeconfig (`--kubeconfig`, `$KUBECONFIG`, `~/.kube/config`), and no in-cluster
    /// service account either.
    #[error(
        "cannot configure the client: no kubeconfig (--kubeconfig, $KUBECONFIG, ~/.kube/config) and not running in a cluster: {0}"
    )]
    NoConfig(#[from] kube::config::InClusterError),
    /// The kubeconfig names something the client cannot use (a context, a user, a TLS file).
    #[error("cannot use the kubeconfig: {0}")]
    KubeconfigUse(#[from] kube::config::KubeconfigError),
    /// The client could not be built from the configuration.
    #[error("cannot build the client: {0}")]
    Client(#[from] kube::Error),
    /// The graph could not be built (`--shards`).
    #[error(transparent)]
    Engine(#[from] kube_gc_engine::Error),
    /// `--debug-addr` could not be bound.
    #[error("cannot serve on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The secure port's certificate could not be loaded or generated.
    #[error("cannot serve TLS: {what}: {reason}")]
    Tls {
        /// The file or certificate concerned.
        what: String,
        /// Why.
        reason: String,
    },
}

/// A result whose error is kube-gc's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

/// `error` and its causes on one line, `what: why: root cause`, for an operator to read.
///
/// Each cause is given once. Most errors here (kube-rs's, and kube-gc's own above) already end
/// their message with their source's, so printing the chain as it is (anyhow's `{:#}`) would
/// repeat a cause once for every error above it; a cause whose text the line already holds is
/// left out.
pub fn one_line(error: &(dyn std::error::Error + 'static)) -> String {
    let mut line = error.to_string();
    let mut cause = error.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
        cause = c.source();
    }
    line
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::Flags;

    #[tokio::test]
    async fn a_missing_kubeconfig_is_one_line_with_each_cause_once() {
        let flags = Flags::parse_from(["kube-gc", "--kubeconfig", "/nonexistent/kubeconfig"]);
        let Err(err) = crate::client(&flags).await else { panic!("a client from no file") };
        let line = one_line(&err);
        assert!(line.starts_with("cannot read kubeconfig /nonexistent/kubeconfig: "), "{line}");
        let mut root: &(dyn std::error::Error + 'static) = &err;
        while let Some(cause) = root.source() {
            root = cause;
        }
        let root = root.to_string();
        assert_eq!(line.matches(&root).count(), 1, "{line}");
        // anyhow's chain, as the binaries had printed it, repeated the root cause.
        let chained = format!("{:#}", anyhow::Error::from(err));
        assert!(chained.matches(&root).count() > 1, "{chained}");
    }

    #[test]
    fn one_line_keeps_a_cause_the_message_does_not_give() {
        let root = std::io::Error::other("connection refused");
        let wrapped = anyhow::Error::new(root).context("cannot list pods");
        assert_eq!(one_line(wrapped.as_ref()), "cannot list pods: connection refused");
        let bare = std::io::Error::other("no route to host");
        assert_eq!(one_line(&bare), "no route to host");
    }

    #[tokio::test]
    async fn a_missing_kubeconfig_names_the_file() {
        let flags = Flags::parse_from(["kube-gc", "--kubeconfig", "/nonexistent/kubeconfig"]);
        let Err(err) = crate::client(&flags).await else { panic!("a client from no file") };
        assert!(matches!(err, Error::Kubeconfig { .. }), "{err:?}");
        assert!(err.to_string().contains("/nonexistent/kubeconfig"), "{err}");
    }
}
