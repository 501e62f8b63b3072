//! Python's official `kubernetes` client against simcluster: runs tests/python/test_client.py
//! (list, get, create, patch, delete with propagation policies and preconditions, watch with a
//! timeout) against a simcluster started here.
//!
//! Python is `$KUBE_GC_PYTHON` (set by scripts/install-test-clients: a venv with the client)
//! or `python3` on `PATH` if it can import `kubernetes`; without either, the test prints
//! `SKIPPED …` and passes.

#[path = "common/clients.rs"]
mod clients;
mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use clients::TempDir;

/// `$KUBE_GC_PYTHON`, else a `python3` on `PATH` that has the client.
fn python() -> Option<PathBuf> {
    let python = clients::find("KUBE_GC_PYTHON", &["python3"])?;
    if std::env::var_os("KUBE_GC_PYTHON").is_some() {
        return Some(python);
    }
    let has_client = clients::run(Command::new(&python).args(["-c", "import kubernetes"]));
    has_client.status.success().then_some(python)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_kubernetes_client_should_pass_its_suite() {
    let Some(python) = python() else {
        clients::skip(
            "python_kubernetes_client_should_pass_its_suite",
            "a python3 with the `kubernetes` client",
            "KUBE_GC_PYTHON",
        );
        return;
    };
    let sim = common::start().await;
    let dir = TempDir::new("python");
    let kubeconfig = dir.write("kubeconfig", &sim.kubeconfig());
    let tests = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python");
    let out = clients::run(
        Command::new(&python)
            .args(["-m", "unittest", "-v", "test_client"])
            .current_dir(&tests)
            .env("SIMCLUSTER_KUBECONFIG", &kubeconfig)
            .env("PYTHONDONTWRITEBYTECODE", "1"),
    );
    // unittest reports on stderr; show it either way (captured unless the test fails).
    eprintln!("{}", out.stderr);
    assert!(
        out.status.success(),
        "the Python client's suite failed:\n{}\n{}",
        out.stdout,
        out.stderr
    );
    assert!(out.stderr.contains("Ran 5 tests"), "not every Python test ran:\n{}", out.stderr);
}
