//! `--logging-format=json`: every line kube-gc writes is one JSON object in klog's structured
//! shape (`ts` in seconds, `caller` as file:line, `msg`, `v` for an info line), at every
//! verbosity, including while it retries an unreachable server.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::Duration;

/// A kubeconfig in a fresh directory naming a server nobody listens on: kube-gc starts, serves
/// its health endpoints, and logs its failing discovery until stopped.
fn unreachable_kubeconfig(test: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("kube-gc-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
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
    (dir, kubeconfig)
}

/// kube-gc against `kubeconfig` at `-v 5`, alone on loopback ports, with `extra` flags; its
/// stderr piped to the test.
fn start_verbose(kubeconfig: &std::path::Path, extra: &[&str]) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_kube-gc"))
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .args(["--leader-elect=false", "--debug-addr=127.0.0.1:0", "--secure-port=0", "-v", "5"])
        .args(extra)
        .env_remove("KUBE_GC_LOG")
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start kube-gc")
}

#[test]
fn json_logs_parse_line_by_line() {
    let (dir, kubeconfig) = unreachable_kubeconfig("logging");
    let mut child = start_verbose(&kubeconfig, &["--logging-format=json"]);
    std::thread::sleep(Duration::from_secs(3));
    let _ = child.kill();
    let _ = child.wait();
    let mut text = String::new();
    child.stderr.take().unwrap().read_to_string(&mut text).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.len() >= 2, "kube-gc logged too little to judge: {text}");
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    let mut objects = Vec::new();
    for line in &lines {
        let object: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        let ts = object["ts"].as_f64().unwrap_or_else(|| panic!("no numeric ts: {line}"));
        assert!((now.as_secs_f64() - ts).abs() < 60.0, "ts is not now in seconds: {line}");
        let caller = object["caller"].as_str().unwrap_or_else(|| panic!("no caller: {line}"));
        assert!(caller.contains(".rs:"), "caller is not file:line: {line}");
        assert!(!caller.starts_with('/'), "caller is not short: {line}");
        assert!(object["msg"].is_string(), "no msg: {line}");
        // An info line has its verbosity; an error line has none, and `err` if it carries one.
        assert!(object.get("v").is_none_or(|v| v.is_u64()), "a v that is not a level: {line}");
        assert!(object.get("level").is_none(), "tracing's shape, not klog's: {line}");
        objects.push(object);
    }
    assert!(
        objects.iter().any(|o| o["v"] == 0 && o["msg"].as_str().unwrap().contains("discover")),
        "the failing discovery is logged at V(0): {text}"
    );
    assert!(
        objects
            .iter()
            .any(|o| o["msg"].as_str().unwrap().contains("discover") && o["err"].is_string()),
        "the discovery's error is klog's err: {text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `kube-gc 2>&1 | head -1`: once the reader is gone, the log lines are lost and kube-gc goes
/// on (it panicked on the first line after, reporting the failed write on that same stderr).
#[test]
fn a_closed_stderr_loses_lines_not_the_process() {
    let (dir, kubeconfig) = unreachable_kubeconfig("closed-stderr");
    let mut child = start_verbose(&kubeconfig, &[]);
    let mut first = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stderr.take().unwrap()),
        &mut first,
    )
    .unwrap();
    assert!(!first.is_empty(), "kube-gc logged nothing");
    // The reader is dropped: stderr is closed. kube-gc logs at -v 5 and retries discovery
    // every two seconds, so it writes to the closed pipe many times in this wait.
    std::thread::sleep(Duration::from_secs(3));
    let exited = child.try_wait().unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(exited.is_none(), "kube-gc exited with {exited:?} once stderr closed");
    let _ = std::fs::remove_dir_all(&dir);
}
