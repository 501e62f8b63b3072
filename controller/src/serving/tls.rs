//! The secure port's certificate and its TLS listener.
//!
//! The certificate is the pair `--tls-cert-file` and `--tls-private-key-file` name, or, without
//! them, a self-signed one generated at start for `localhost`, `127.0.0.1` and the host's name,
//! as kube-controller-manager serves without them. Scrapers of a self-signed port skip
//! verification (`insecure_skip_verify`), as they do for kube-controller-manager's.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use crate::Error;

/// How long a client has to finish its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Handshakes in progress at once; a flood of idle connections waits for these, rather than
/// holding memory and tasks without bound.
const MAX_HANDSHAKES: usize = 256;

/// The TLS configuration of the secure port: the certificate of `cert_file` and `key_file`
/// (PEM, the chain leaf first), or a self-signed one when both are `None`.
pub fn server_config(
    cert_file: Option<&Path>,
    key_file: Option<&Path>,
) -> crate::Result<Arc<rustls::ServerConfig>> {
    let tls_error = |what: String, reason: String| Error::Tls { what, reason };
    let (chain, key) = match (cert_file, key_file) {
        (Some(cert_file), Some(key_file)) => {
            let chain = CertificateDer::pem_file_iter(cert_file)
                .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
                .map_err(|e| {
                    tls_error(format!("--tls-cert-file {}", cert_file.display()), e.to_string())
                })?;
            if chain.is_empty() {
                return Err(tls_error(
                    format!("--tls-cert-file {}", cert_file.display()),
                    "no CERTIFICATE block".into(),
                ));
            }
            let key = PrivateKeyDer::from_pem_file(key_file).map_err(|e| {
                tls_error(format!("--tls-private-key-file {}", key_file.display()), e.to_string())
            })?;
            (chain, key)
        }
        (None, None) => self_signed()?,
        _ => {
            return Err(tls_error(
                "--tls-cert-file and --tls-private-key-file".into(),
                "give both or neither".into(),
            ));
        }
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .and_then(|b| b.with_no_client_auth().with_single_cert(chain, key))
        .map_err(|e| tls_error("the serving certificate".into(), e.to_string()))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// A certificate and key for `localhost`, `127.0.0.1` and this host's name, signed by itself.
fn self_signed() -> crate::Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)> {
    let mut names = vec!["localhost".to_owned(), "127.0.0.1".to_owned()];
    if let Ok(host) = std::env::var("HOSTNAME") {
        if !host.is_empty() && !names.contains(&host) {
            names.push(host);
        }
    }
    let generated = rcgen::generate_simple_self_signed(names).map_err(|e| Error::Tls {
        what: "a self-signed serving certificate".into(),
        reason: e.to_string(),
    })?;
    let key = PrivateKeyDer::try_from(generated.signing_key.serialize_der()).map_err(|e| {
        Error::Tls { what: "a self-signed serving certificate".into(), reason: e.to_string() }
    })?;
    Ok((vec![generated.cert.der().clone()], key))
}

/// A listener whose connections have completed their TLS handshake. Handshakes run in their
/// own tasks, each with a deadline, so one slow client never holds up the others.
#[derive(Debug)]
pub struct TlsListener {
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
    accepting: tokio::task::JoinHandle<()>,
}

impl TlsListener {
    /// Binds `addr` and starts accepting.
    pub async fn bind(addr: SocketAddr, config: Arc<rustls::ServerConfig>) -> crate::Result<Self> {
        let tcp = TcpListener::bind(addr).await.map_err(|source| Error::Bind { addr, source })?;
        let local = tcp.local_addr().map_err(|source| Error::Bind { addr, source })?;
        let (tx, ready) = mpsc::channel(64);
        let accepting = tokio::spawn(accept_loop(tcp, TlsAcceptor::from(config), tx));
        Ok(TlsListener { ready, local, accepting })
    }
}

impl Drop for TlsListener {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

async fn accept_loop(
    tcp: TcpListener,
    acceptor: TlsAcceptor,
    ready: mpsc::Sender<(TlsStream<TcpStream>, SocketAddr)>,
) {
    let handshakes = Arc::new(Semaphore::new(MAX_HANDSHAKES));
    loop {
        let Ok(permit) = handshakes.clone().acquire_owned().await else { return };
        let (stream, peer) = match tcp.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of file descriptors, most likely: wait for some to be released.
                tracing::warn!(error = %e, "secure port: cannot accept a connection");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let acceptor = acceptor.clone();
        let ready = ready.clone();
        tokio::spawn(async move {
            let _permit = permit;
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                Ok(Ok(tls)) => {
                    let _ = ready.send((tls, peer)).await;
                }
                Ok(Err(e)) => {
                    tracing::debug!(%peer, error = %e, "secure port: TLS handshake failed")
                }
                Err(_) => tracing::debug!(%peer, "secure port: TLS handshake timed out"),
            }
        });
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(connection) => connection,
            // The accept loop only ends when this listener is dropped.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        Ok(self.local)
    }
}
