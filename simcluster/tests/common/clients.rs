//! Running standard clients (kubectl, Python's `kubernetes`) as child processes against a
//! simcluster: finding them, bounding every run by a deadline, and killing them on every path.
#![allow(dead_code)] // each test file uses a different part

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Every child process is killed after this.
pub const DEADLINE: Duration = Duration::from_secs(60);

/// The client named by `$env` (it must then exist: CI sets it, and a broken path is a failure,
/// not a skip), else the first of `names` found on `PATH`; `None` if neither.
pub fn find(env: &str, names: &[&str]) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(env).filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        assert!(p.is_file(), "${env} = {} is not a file", p.display());
        return Some(p);
    }
    let path = std::env::var_os("PATH")?;
    names
        .iter()
        .flat_map(|n| std::env::split_paths(&path).map(move |d| d.join(n)))
        .find(|p| p.is_file())
}

/// Prints why a test does nothing (the client is not installed) so that the skip is visible.
pub fn skip(test: &str, what: &str, env: &str) {
    eprintln!(
        "SKIPPED {test}: {what} not found (set ${env} or run scripts/install-test-clients; scripts/test does)"
    );
}

/// A scratch directory removed on drop.
#[derive(Debug)]
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir()
            .join(format!("kube-gc-simcluster-{tag}-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create a scratch directory");
        TempDir(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    /// Writes `contents` to `name` in the directory; returns its path.
    pub fn write(&self, name: &str, contents: &str) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, contents).expect("write a scratch file");
        p
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A child process killed (and reaped) when dropped, panics included.
#[derive(Debug)]
pub struct Guard(pub Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// What a finished command printed.
#[derive(Debug)]
pub struct Output {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    /// Panics with both streams unless the command succeeded.
    #[track_caller]
    pub fn ok(self) -> Output {
        assert!(
            self.status.success(),
            "command failed ({}):\n{}\n{}",
            self.status,
            self.stdout,
            self.stderr
        );
        self
    }
}

/// Runs `cmd` to completion, killing it (and panicking) after [`DEADLINE`].
pub fn run(cmd: &mut Command) -> Output {
    let desc = format!("{cmd:?}");
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {desc}: {e}"));
    let mut guard = Guard(child);
    let drain = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            if let Some(mut r) = r {
                let _ = r.read_to_string(&mut s);
            }
            s
        })
    };
    let out = drain(guard.0.stdout.take().map(|s| Box::new(s) as Box<dyn Read + Send>));
    let err = drain(guard.0.stderr.take().map(|s| Box::new(s) as Box<dyn Read + Send>));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = guard.0.try_wait().expect("wait for a child") {
            break status;
        }
        assert!(started.elapsed() < DEADLINE, "{desc} still running after {DEADLINE:?}; killed");
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: out.join().expect("stdout reader"),
        stderr: err.join().expect("stderr reader"),
    }
}
