//! `--logging-format=json`: every line kube-gc writes is one JSON object with a timestamp, a
//! level and a message, at every verbosity, including while it retries an unreachable server.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::Duration;

#[test]
fn json_logs_parse_line_by_line() {
    let dir = std::env::temp_dir().join(format!("kube-gc-logging-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // A server nobody listens on: kube-gc starts, serves its health endpoints, and logs its
    // failing discovery until stopped.
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1
kind: Config
current-context: nowhere
clusters:
- name: nowhere
  cluster: {server: 'http://127.0.0.1:9'}
contexts:
- name: nowhere
  context: {cluster: nowhere, user: nobody}
users:
- name: nobody
  user: {token: none}
",
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_kube-gc"))
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .args([
            "--leader-elect=false",
            "--debug-addr=127.0.0.1:0",
            "--secure-port=0",
            "--logging-format=json",
            "-v",
            "5",
        ])
        .env_remove("KUBE_GC_LOG")
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start kube-gc");
    std::thread::sleep(Duration::from_secs(3));
    let _ = child.kill();
    let _ = child.wait();
    let mut text = String::new();
    child.stderr.take().unwrap().read_to_string(&mut text).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.len() >= 2, "kube-gc logged too little to judge: {text}");
    for line in &lines {
        let object: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        for field in ["timestamp", "level", "message", "target"] {
            assert!(object.get(field).is_some(), "no {field}: {line}");
        }
    }
    assert!(
        lines.iter().any(|l| l.contains("\"level\":\"WARN\"") && l.contains("discover")),
        "the failing discovery is logged: {text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
