//! The binary as a process: with `--enable-garbage-collector=false` it serves its probes
//! (ready at once) and collects nothing, as kube-controller-manager with the controller off;
//! asked to stop (SIGTERM, as the kubelet asks), it stops, whatever it is waiting for.

use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The status code of a plain HTTP GET of `path`, once the port answers with one (`None`: no
/// answer within 20 s).
fn status(port: u16, path: &str) -> Option<u16> {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            write!(s, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").unwrap();
            let mut answer = String::new();
            let _ = s.read_to_string(&mut answer);
            // A connection closed without an answer (the server starting) is tried again.
            if let Some(code) = answer.split(' ').nth(1).and_then(|code| code.parse().ok()) {
                return Some(code);
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts the binary with `args` against an API server that is not there (nothing it does
/// before it leads may need one), serving its probes on the port returned.
fn start(name: &str, args: &[&str]) -> (Killed, u16, std::path::PathBuf) {
    start_with_env(name, args, &[])
}

/// [`start`], with `env` set in the process's environment.
fn start_with_env(
    name: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> (Killed, u16, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("kube-gc-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: http://127.0.0.1:9\n\
         users:\n- name: u\n  user: {}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\n\
         current-context: x\n",
    )
    .unwrap();
    let port = free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_kube-gc"))
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .arg("--secure-port=0")
        .arg(format!("--debug-addr=127.0.0.1:{port}"))
        .args(args)
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    (Killed(child), port, dir)
}

/// Sends SIGTERM to `child` and waits up to 20 s for it to end: its exit code, `None` if a
/// signal ended it (no handler) or it did not end.
fn terminate(child: &mut Killed) -> Option<i32> {
    let pid = child.0.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Some(status) = child.0.try_wait().unwrap() {
            return status.code();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

#[test]
fn a_disabled_collector_serves_its_probes_and_is_ready() {
    let (mut child, port, dir) = start("disabled", &["--enable-garbage-collector=false"]);
    for path in ["/healthz", "/readyz", "/livez"] {
        assert_eq!(status(port, path), Some(200), "{path}");
    }
    assert_eq!(terminate(&mut child), Some(0), "not stopped by its own handler");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A standby waiting for the lease (here, for an API server that never answers) and a leader
/// whose first discovery keeps failing both stop on SIGTERM, by their own handler (exit code
/// 0). Without one, a container's PID 1 never sees the signal: the kubelet waits out the
/// grace period and kills it.
#[test]
fn a_process_waiting_for_the_lease_or_the_api_server_stops_on_sigterm() {
    for (name, args) in
        [("standby", &["--leader-elect=true"][..]), ("discovering", &["--leader-elect=false"][..])]
    {
        let (mut child, port, dir) = start(name, args);
        assert_eq!(status(port, "/healthz"), Some(200), "{name}");
        assert_eq!(terminate(&mut child), Some(0), "{name}: not stopped by its own handler");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// A proxy in the environment (`HTTPS_PROXY`, with or without a `NO_PROXY` that excludes the
/// API server), as corporate machines and some pods have, is used or skipped as client-go
/// does: the process starts. Built without kube-rs's proxy support, it refused to build its
/// client and exited at once.
#[test]
fn a_proxy_in_the_environment_is_no_reason_to_exit() {
    let proxy = [("HTTPS_PROXY", "http://127.0.0.1:9")];
    let excluded = [("HTTPS_PROXY", "http://127.0.0.1:9"), ("NO_PROXY", "127.0.0.1")];
    for (name, env) in [("proxied", &proxy[..]), ("not-proxied", &excluded[..])] {
        let (mut child, port, dir) = start_with_env(name, &["--leader-elect=false"], env);
        assert_eq!(status(port, "/healthz"), Some(200), "{name}: did not start");
        assert_eq!(terminate(&mut child), Some(0), "{name}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
