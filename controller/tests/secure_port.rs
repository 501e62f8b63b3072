//! The secure port without an API server: TLS with a self-signed or a given certificate, the
//! health checks open, and nothing else served to a caller the API server has not vouched for
//! (here it cannot answer at all, so every token is refused). The answers of a real API
//! server (401, 403, 200) are checked by the e2e scenario `secure_port_authenticates_and_authorizes`.

#[path = "e2e/https.rs"]
mod https;

use axum::Router;
use axum::routing::get;
use clap::Parser;
use https::{Trust, https_get};

/// A client whose API server is not there: every review fails.
fn unreachable_client() -> kube::Client {
    let config = kube::Config::new("http://127.0.0.1:9".parse().expect("a URL"));
    kube::Client::try_from(config).expect("a client")
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn router() -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/metrics", get(|| async { "workqueue_depth 0\n" }))
}

async fn serve(extra: &[&str]) -> (u16, tokio::task::JoinHandle<()>) {
    let port = free_port();
    let mut args = vec![
        "kube-gc".to_owned(),
        format!("--secure-port={port}"),
        "--bind-address=127.0.0.1".to_owned(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let flags = kube_gc::Flags::parse_from(args);
    let task = kube_gc::serving::start(&flags, unreachable_client(), router())
        .await
        .expect("serving")
        .expect("a secure port");
    (port, task)
}

#[tokio::test]
async fn self_signed_port_serves_health_and_refuses_the_rest() {
    let (port, task) = serve(&[]).await;
    assert_eq!(https_get(port, "/healthz", None, &Trust::Any).await.unwrap(), (200, "ok".into()));
    let (code, body) = https_get(port, "/metrics", None, &Trust::Any).await.unwrap();
    assert_eq!(code, 401, "{body}");
    assert!(!body.contains("workqueue"), "{body}");
    // The API server cannot review the token: refused, never let through.
    let (code, body) = https_get(port, "/metrics", Some("any-token"), &Trust::Any).await.unwrap();
    assert_eq!(code, 401, "{body}");
    // A path the router does not have is still guarded (no probing for what exists).
    let (code, _) = https_get(port, "/debug/x", None, &Trust::Any).await.unwrap();
    assert_eq!(code, 401);
    // Plain HTTP on the TLS port gets no answer, and while that connection hangs in its
    // handshake the port keeps serving others.
    let mut plain = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    std::io::Write::write_all(&mut plain, b"GET /healthz HTTP/1.0\r\n\r\n").unwrap();
    plain.set_read_timeout(Some(std::time::Duration::from_secs(1))).unwrap();
    let mut buf = Vec::new();
    let _ = std::io::Read::read_to_end(&mut plain, &mut buf);
    assert!(!String::from_utf8_lossy(&buf).contains("ok"), "served over plain HTTP");
    assert_eq!(https_get(port, "/healthz", None, &Trust::Any).await.unwrap().0, 200);
    drop(plain);
    task.abort();
}

#[tokio::test]
async fn a_given_certificate_is_served_and_verifies() {
    let issued = https::issue().unwrap();
    let (dir, cert_flag, key_flag) =
        https::tls_files("secure-port", &issued.cert_pem, &issued.key_pem).unwrap();
    let (port, task) =
        serve(&[&cert_flag, &key_flag, "--authorization-always-allow-paths=/healthz,/metrics"])
            .await;
    let trust = Trust::Ca(issued.ca.clone());
    assert_eq!(https_get(port, "/healthz", None, &trust).await.unwrap().0, 200);
    // --authorization-always-allow-paths opens exactly what it names.
    assert_eq!(https_get(port, "/metrics", None, &trust).await.unwrap().0, 200);
    task.abort();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn bad_certificate_files_are_refused_at_start_with_the_file_named() {
    let (dir, cert_flag, key_flag) =
        https::tls_files("bad-cert", "not a certificate", "not a key").unwrap();
    let flags = kube_gc::Flags::parse_from(["kube-gc", "--secure-port=1", &cert_flag, &key_flag]);
    let err = kube_gc::serving::start(&flags, unreachable_client(), router()).await.unwrap_err();
    assert!(err.to_string().contains("tls.crt"), "{err}");
    std::fs::write(dir.join("tls.crt"), https::issue().unwrap().cert_pem).unwrap();
    let err = kube_gc::serving::start(&flags, unreachable_client(), router()).await.unwrap_err();
    assert!(err.to_string().contains("tls.key"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn a_secure_port_that_cannot_start_stops_the_rest_of_the_controller() {
    let (dir, cert_flag, key_flag) =
        https::tls_files("bad-start", "not a certificate", "not a key").unwrap();
    let debug = free_port();
    let flags = kube_gc::Flags::parse_from([
        "kube-gc".to_owned(),
        format!("--debug-addr=127.0.0.1:{debug}"),
        format!("--secure-port={}", free_port()),
        cert_flag,
        key_flag,
        "--leader-elect=false".to_owned(),
    ]);
    let err = kube_gc::Controller::start(flags, unreachable_client()).await.unwrap_err();
    assert!(err.to_string().contains("tls.crt"), "{err}");
    // The plain debug listener it had opened is closed again.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while std::net::TcpStream::connect(("127.0.0.1", debug)).is_ok() {
        assert!(std::time::Instant::now() < deadline, "the debug server still serves");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A flood of connections from one address that never handshake holds at most its share of
/// the port: past it, that address's new connections are closed at once (not left queued in
/// the kernel's backlog, where the kubelet's probes would wait behind them); once they go,
/// the port serves again.
#[tokio::test]
async fn a_flood_of_idle_connections_from_one_address_is_capped() {
    use tokio::io::AsyncReadExt;
    let (port, task) = serve(&[]).await;
    let mut flood = Vec::new();
    for _ in 0..64 {
        flood.push(tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap());
    }
    // Let the server take them all before the one past the share.
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let mut over = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let mut buf = [0u8; 16];
    let read = tokio::time::timeout(std::time::Duration::from_secs(2), over.read(&mut buf)).await;
    assert!(
        matches!(read, Ok(Ok(0)) | Ok(Err(_))),
        "the connection past the share was not closed at once: {read:?}"
    );
    drop(flood);
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match https_get(port, "/healthz", None, &Trust::Any).await {
            Ok((200, _)) => break,
            other => {
                assert!(tokio::time::Instant::now() < deadline, "not serving again: {other:?}");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    }
    task.abort();
}

/// A token or a path too long to be a real one is refused before any review (and never cached).
#[tokio::test]
async fn tokens_and_paths_too_long_are_refused_unreviewed() {
    let (port, task) = serve(&[]).await;
    let long_token = "t".repeat(17 * 1024);
    let (code, body) = https_get(port, "/metrics", Some(&long_token), &Trust::Any).await.unwrap();
    assert_eq!((code, body.as_str()), (401, "Unauthorized: token too long\n"));
    let long_path = format!("/{}", "p".repeat(5 * 1024));
    let (code, _) = https_get(port, &long_path, Some("any-token"), &Trust::Any).await.unwrap();
    assert_eq!(code, 414);
    task.abort();
}
