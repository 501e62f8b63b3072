//! `--enable-garbage-collector=false`: the binary serves its probes (ready at once) and
//! collects nothing, as kube-controller-manager with the controller off; a Deployment's
//! probes keep passing.

use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The status code of a plain HTTP GET of `path`, once the port answers (`None`: no answer
/// within 20 s).
fn status(port: u16, path: &str) -> Option<u16> {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            write!(s, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").unwrap();
            let mut answer = String::new();
            let _ = s.read_to_string(&mut answer);
            return answer.split(' ').nth(1).and_then(|code| code.parse().ok());
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

#[test]
fn a_disabled_collector_serves_its_probes_and_is_ready() {
    let dir = std::env::temp_dir().join(format!("kube-gc-disabled-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // An API server that is not there: nothing may need it.
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
        .args(["--enable-garbage-collector=false", "--secure-port=0"])
        .arg(format!("--debug-addr=127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _child = Killed(child);
    for path in ["/healthz", "/readyz", "/livez"] {
        assert_eq!(status(port, path), Some(200), "{path}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
