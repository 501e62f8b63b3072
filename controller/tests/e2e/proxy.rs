//! A loopback TCP proxy in front of the API server that a test can cut: while blocked, every
//! connection it carries is closed and new ones are accepted but never answered, as a network
//! partition between one client and the server would look (TLS passes through untouched).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// A running proxy; dropped, it stops.
pub struct Proxy {
    /// Where clients connect.
    pub addr: SocketAddr,
    blocked: Arc<AtomicBool>,
    cut: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// Forwards `127.0.0.1:<free port>` to `upstream`.
    pub async fn start(upstream: SocketAddr) -> anyhow::Result<Proxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let blocked = Arc::new(AtomicBool::new(false));
        let (cut, _) = watch::channel(false);
        let (b, c) = (blocked.clone(), cut.clone());
        let task = tokio::spawn(async move {
            let mut held = Vec::new(); // accepted while blocked: never answered
            while let Ok((client, _)) = listener.accept().await {
                if b.load(Ordering::SeqCst) {
                    held.push(client);
                    continue;
                }
                let mut cut = c.subscribe();
                tokio::spawn(async move {
                    let Ok(server) = TcpStream::connect(upstream).await else { return };
                    let (mut client, mut server) = (client, server);
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                        _ = cut.changed() => {}
                    }
                });
            }
        });
        Ok(Proxy { addr, blocked, cut, task })
    }

    /// Cuts every connection and answers no new one.
    pub fn block(&self) {
        self.blocked.store(true, Ordering::SeqCst);
        let _ = self.cut.send(true);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}
