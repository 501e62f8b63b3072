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
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// Handshakes in progress at once; past it a new connection is closed at once (never left
/// waiting in the kernel's backlog, where it would queue the kubelet's probes behind a flood).
const MAX_HANDSHAKES: usize = 1024;
/// Connections open at once from one address, handshaking or served: a flood from one pod
/// cannot take the port from the others (the kubelet's probes come from the node's address).
const MAX_CONNECTIONS_PER_PEER: usize = 64;
/// How long a served connection may send nothing before it is closed: a client that opened it
/// and went quiet (or trickles a header) holds its buffers no longer. Scrapers reconnect.
const IDLE_TIMEOUT: Duration = Duration::from_secs(60);

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
    ready: mpsc::Receiver<(Served, SocketAddr)>,
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

/// Open connections by peer address (see [`MAX_CONNECTIONS_PER_PEER`]).
type Peers = Arc<std::sync::Mutex<std::collections::HashMap<std::net::IpAddr, usize>>>;

/// One open connection of a peer, counted until dropped.
#[derive(Debug)]
struct PeerSlot {
    peers: Peers,
    ip: std::net::IpAddr,
}

impl PeerSlot {
    /// A slot for `ip`, if it has fewer than [`MAX_CONNECTIONS_PER_PEER`] open.
    fn take(peers: &Peers, ip: std::net::IpAddr) -> Option<PeerSlot> {
        let mut open = peers.lock().expect("peer counts");
        let count = open.entry(ip).or_default();
        if *count >= MAX_CONNECTIONS_PER_PEER {
            return None;
        }
        *count += 1;
        Some(PeerSlot { peers: peers.clone(), ip })
    }
}

impl Drop for PeerSlot {
    fn drop(&mut self) {
        let mut open = self.peers.lock().expect("peer counts");
        if let Some(count) = open.get_mut(&self.ip) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.ip);
            }
        }
    }
}

/// A served connection: its TLS stream, its peer's slot, and a deadline that each read pushes
/// back by the idle timeout, 60 s (reading fails once it passes with nothing read).
#[derive(Debug)]
pub struct Served {
    tls: TlsStream<TcpStream>,
    _slot: PeerSlot,
    idle: std::pin::Pin<Box<tokio::time::Sleep>>,
}

impl tokio::io::AsyncRead for Served {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        use std::task::Poll;
        let before = buf.filled().len();
        match std::pin::Pin::new(&mut self.tls).poll_read(cx, buf) {
            Poll::Ready(result) => {
                if buf.filled().len() > before {
                    let next = tokio::time::Instant::now() + IDLE_TIMEOUT;
                    self.idle.as_mut().reset(next);
                }
                Poll::Ready(result)
            }
            Poll::Pending => match self.idle.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "idle connection",
                ))),
                Poll::Pending => Poll::Pending,
            },
        }
    }
}

impl tokio::io::AsyncWrite for Served {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.tls).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.tls).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.tls).poll_shutdown(cx)
    }
}

async fn accept_loop(
    tcp: TcpListener,
    acceptor: TlsAcceptor,
    ready: mpsc::Sender<(Served, SocketAddr)>,
) {
    let handshakes = Arc::new(Semaphore::new(MAX_HANDSHAKES));
    let peers = Peers::default();
    loop {
        let (stream, peer) = match tcp.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of file descriptors, most likely: wait for some to be released.
                tracing::warn!(error = %e, "secure port: cannot accept a connection");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        // Over a limit, the connection is closed at once (dropped), never left to wait.
        let Ok(permit) = handshakes.clone().try_acquire_owned() else {
            tracing::debug!(%peer, "secure port: too many handshakes, connection closed");
            continue;
        };
        let Some(slot) = PeerSlot::take(&peers, peer.ip()) else {
            tracing::debug!(%peer, "secure port: too many connections from this address, closed");
            continue;
        };
        let acceptor = acceptor.clone();
        let ready = ready.clone();
        tokio::spawn(async move {
            let handshake = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await;
            drop(permit);
            match handshake {
                Ok(Ok(tls)) => {
                    let idle = Box::pin(tokio::time::sleep(IDLE_TIMEOUT));
                    let _ = ready.send((Served { tls, _slot: slot, idle }, peer)).await;
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
    type Io = Served;
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
