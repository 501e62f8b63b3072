//! The collector under test, as a process: kube-gc (`CARGO_BIN_EXE_kube-gc`) or upstream's
//! kube-controller-manager running only its garbage collector. Never both at once.
//!
//! Both serve upstream's debug graph at `/debug/controllers/garbagecollector/graph` on a
//! loopback port (kube-gc: `--debug-addr`; kube-controller-manager 1.20: its insecure
//! `--port`), which is how a scenario asks "has the collector observed this object?" — the
//! integration tests' `gc.GraphHasUID`.

use std::fs::OpenOptions;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use super::env::{self, free_port};

/// Which collector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Which {
    /// This project's `kube-gc`.
    KubeGc,
    /// kube-controller-manager v1.20.2 `--controllers=garbagecollector`.
    Upstream,
}

impl Which {
    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Which::KubeGc => "kube-gc",
            Which::Upstream => "upstream",
        }
    }
}

/// Client-side rate limits given to both collectors, so that neither is the bottleneck of a
/// scenario (upstream doubles its GC client's QPS; kube-gc takes the value as is).
pub const QPS: &str = "100";
/// Burst, see [`QPS`].
pub const BURST: &str = "200";

/// The line written to kube-gc's log before each start.
const START_MARKER: &str = "===== e2e: starting kube-gc";

/// A collector process (or none, between stop and start).
#[derive(Debug)]
pub struct Collector {
    /// Which one.
    pub which: Which,
    dir: PathBuf,
    kubeconfig: PathBuf,
    child: Option<Child>,
    kcm_running: bool,
    /// The debug server's port (changes on every start).
    pub debug_port: u16,
    /// Where its output goes (appended on every start).
    pub log: PathBuf,
    /// Extra flags of the current run.
    extra: Vec<String>,
    /// Extra environment variables (kube-gc only).
    envs: Vec<(String, String)>,
}

impl Collector {
    /// A stopped collector of `which` over the testenv in `dir`.
    pub fn new(which: Which, te: &env::TestEnv) -> Collector {
        let log = match which {
            Which::KubeGc => te.dir.join("kube-gc.log"),
            Which::Upstream => te.kcm_log(),
        };
        Collector {
            which,
            dir: te.dir.clone(),
            kubeconfig: te.kubeconfig.clone(),
            child: None,
            kcm_running: false,
            debug_port: 0,
            log,
            extra: Vec::new(),
            envs: Vec::new(),
        }
    }

    /// Points kube-gc's next starts at another kubeconfig (e.g. one whose server is a proxy).
    pub fn set_kubeconfig(&mut self, path: PathBuf) {
        self.kubeconfig = path;
    }

    /// Sets an environment variable for kube-gc's next starts (e.g. `HOSTNAME`, which names
    /// its leader-election identity).
    pub fn set_env(&mut self, key: &str, value: &str) {
        self.envs.retain(|(k, _)| k != key);
        self.envs.push((key.to_owned(), value.to_owned()));
    }

    /// Starts it with the default flags plus `extra`, and waits until it has synced.
    pub fn start(&mut self, extra: &[&str]) -> anyhow::Result<()> {
        self.spawn(extra)?;
        self.wait_ready(Duration::from_secs(90))
    }

    /// Starts it without waiting for anything (kube-gc only; upstream's start always waits).
    pub fn spawn(&mut self, extra: &[&str]) -> anyhow::Result<()> {
        if self.is_running() {
            bail!("{} is already running", self.which.name());
        }
        self.extra = extra.iter().map(|s| s.to_string()).collect();
        self.debug_port = free_port();
        match self.which {
            Which::KubeGc => {
                let mut log = OpenOptions::new().create(true).append(true).open(&self.log)?;
                writeln!(log, "{START_MARKER} {:?} =====", self.extra)?;
                // Flags may not repeat (clap): the defaults only when `extra` does not set them.
                let has = |flag: &str| self.extra.iter().any(|a| a.starts_with(flag));
                let mut args = vec![
                    format!("--kubeconfig={}", self.kubeconfig.display()),
                    format!("--debug-addr=127.0.0.1:{}", self.debug_port),
                    "-v=2".to_owned(),
                ];
                for (flag, value) in [
                    ("--resync-period", "2s"),
                    ("--kube-api-qps", QPS),
                    ("--kube-api-burst", BURST),
                    // One collector at a time here; a restart must not wait out a lease.
                    ("--leader-elect", "false"),
                    // The leader-election scenarios run two at once: no fixed port.
                    ("--secure-port", "0"),
                ] {
                    if !has(flag) {
                        args.push(format!("{flag}={value}"));
                    }
                }
                args.extend(self.extra.iter().cloned());
                let child = Command::new(env!("CARGO_BIN_EXE_kube-gc"))
                    .args(&args)
                    .env("NO_COLOR", "1")
                    .env_remove("KUBE_GC_LOG")
                    .envs(self.envs.iter().map(|(k, v)| (k, v)))
                    .stdin(Stdio::null())
                    .stdout(log.try_clone()?)
                    .stderr(log)
                    .spawn()
                    .context("cannot start kube-gc")?;
                self.child = Some(child);
            }
            Which::Upstream => {
                // Keep the previous runs' logs: the testenv truncates the file on start.
                let old = std::fs::read(&self.log).unwrap_or_default();
                if !old.is_empty() {
                    let mut all = OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(self.dir.join("kube-controller-manager.all.log"))?;
                    all.write_all(&old)?;
                }
                let port = format!("--port={}", self.debug_port);
                let qps = format!("--kube-api-qps={QPS}");
                let burst = format!("--kube-api-burst={BURST}");
                let mut args = vec!["--v=2", "--address=127.0.0.1", &port, &qps, &burst];
                args.extend(self.extra.iter().map(String::as_str));
                let te = env::TestEnv::adopt(&self.dir);
                te.kcm_start(&args)?;
                self.kcm_running = true;
            }
        }
        Ok(())
    }

    /// Waits until the collector serves `/readyz` (kube-gc) or its debug graph (upstream).
    pub fn wait_ready(&mut self, timeout: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        let path = match self.which {
            Which::KubeGc => "/readyz",
            Which::Upstream => "/debug/controllers/garbagecollector/graph?uid=none",
        };
        loop {
            if !self.is_running() {
                bail!("{} exited while starting (see {})", self.which.name(), self.log.display());
            }
            if let Ok((200, _)) = http_get(self.debug_port, path) {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("{} not ready after {timeout:?}", self.which.name());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Whether the process is alive.
    pub fn is_running(&mut self) -> bool {
        match self.which {
            Which::KubeGc => match self.child.as_mut() {
                Some(c) => matches!(c.try_wait(), Ok(None)),
                None => false,
            },
            Which::Upstream => self.kcm_running,
        }
    }

    /// How kube-gc exited, once it has (`None` while it runs, or when it was never started or
    /// was stopped by [`Collector::stop`] / [`Collector::kill9`]).
    pub fn exit_status(&mut self) -> Option<ExitStatus> {
        self.child.as_mut()?.try_wait().ok().flatten()
    }

    /// Whether kube-gc answers 200 on `/readyz` (synced; a standby waiting for the lease
    /// under `--leader-elect` answers 503).
    pub fn is_ready(&self) -> bool {
        matches!(http_get(self.debug_port, "/readyz"), Ok((200, _)))
    }

    /// kube-gc's whole `/metrics` exposition.
    pub fn metrics_text(&self) -> anyhow::Result<String> {
        let (code, body) = http_get(self.debug_port, "/metrics")?;
        if code != 200 {
            bail!("/metrics answered {code}");
        }
        Ok(body)
    }

    /// A sample of kube-gc's `/metrics` without labels, e.g. `kube_gc_deleted_total`.
    pub fn metric(&self, name: &str) -> anyhow::Result<f64> {
        let (code, body) = http_get(self.debug_port, "/metrics")?;
        if code != 200 {
            bail!("/metrics answered {code}");
        }
        body.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
            .with_context(|| format!("no sample {name} in /metrics"))
    }

    /// A handle on the testenv this collector runs against (not stopped when dropped).
    pub fn testenv(&self) -> env::TestEnv {
        env::TestEnv::adopt(&self.dir)
    }

    /// kube-gc's PID.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Stops it gracefully (SIGTERM), SIGKILL after 10 s.
    pub fn stop(&mut self) -> anyhow::Result<()> {
        match self.which {
            Which::KubeGc => {
                let Some(mut child) = self.child.take() else { return Ok(()) };
                if matches!(child.try_wait(), Ok(None)) {
                    let _ = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status();
                    let deadline = Instant::now() + Duration::from_secs(10);
                    while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    let _ = child.kill();
                }
                let _ = child.wait();
            }
            Which::Upstream => {
                if self.kcm_running {
                    env::TestEnv::adopt(&self.dir).kcm_stop()?;
                    self.kcm_running = false;
                }
            }
        }
        Ok(())
    }

    /// `kill -9` (kube-gc only).
    pub fn kill9(&mut self) -> anyhow::Result<()> {
        let Some(mut child) = self.child.take() else { bail!("kube-gc is not running") };
        child.kill()?; // SIGKILL
        child.wait()?;
        Ok(())
    }

    /// Stops and starts it again with the same flags, waiting until it has synced.
    pub fn restart(&mut self) -> anyhow::Result<()> {
        let extra = self.extra.clone();
        self.stop()?;
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        self.start(&extra)
    }

    /// GET of the debug graph for `uids`.
    pub fn graph(&self, uids: &[&str]) -> anyhow::Result<String> {
        let mut path = "/debug/controllers/garbagecollector/graph".to_owned();
        for (i, u) in uids.iter().enumerate() {
            path.push(if i == 0 { '?' } else { '&' });
            path.push_str("uid=");
            path.push_str(&percent_encode(u));
        }
        match http_get(self.debug_port, &path)? {
            (200, body) => Ok(body),
            (code, body) => bail!("debug graph answered {code}: {body}"),
        }
    }

    /// Whether the collector's graph holds an *observed* node for every one of `uids` (each
    /// must have an owner or a dependent: the DOT dump leaves out isolated nodes).
    pub fn observed_all(&self, uids: &[&str]) -> anyhow::Result<bool> {
        let body = self.graph(uids)?;
        Ok(uids.iter().all(|u| dot_has_observed(&body, u)))
    }

    /// The log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The log of the current (or last) start only.
    pub fn log_since_start(&self) -> String {
        let text = self.log_text();
        match text.rfind(START_MARKER) {
            Some(at) => text[at..].to_owned(),
            None => text,
        }
    }

    /// The last `n` lines of the log.
    pub fn log_tail(&self, n: usize) -> String {
        let text = self.log_text();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }

    /// kube-gc's resident set size in KiB.
    pub fn rss_kib(&self) -> Option<u64> {
        Some(kube_gc::metrics::process::Memory::of(self.pid()?)?.resident_bytes / 1024)
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// Whether a DOT dump (either upstream's 1.20 gonum format or the newer one kube-gc writes,
/// same attributes in the same order) has a node with `uid` that is neither virtual nor
/// missing.
pub fn dot_has_observed(dot: &str, uid: &str) -> bool {
    let needle = format!("uid=\"{uid}\"");
    dot.match_indices(&needle).any(|(at, _)| {
        let rest = &dot[at..];
        let block = &rest[..rest.find(']').unwrap_or(rest.len())];
        block.contains("virtual=\"false\"") && block.contains("missing=\"false\"")
    })
}

fn percent_encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.' {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A bare HTTP/1.0 GET of `path_and_query` (sent verbatim) on 127.0.0.1:`port`: status code
/// and body. HTTP/1.0 so that neither server answers chunked.
pub fn http_get(port: u16, path_and_query: &str) -> anyhow::Result<(u16, String)> {
    http_get_raw(port, path_and_query.as_bytes())
}

/// As [`http_get`], with a target that need not be valid UTF-8 or a valid URI.
pub fn http_get_raw(port: u16, target: &[u8]) -> anyhow::Result<(u16, String)> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(20)))?;
    s.set_write_timeout(Some(Duration::from_secs(20)))?;
    let mut req = b"GET ".to_vec();
    req.extend_from_slice(target);
    req.extend_from_slice(b" HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
    s.write_all(&req)?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf)?;
    super::https::parse_response(&buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_observed_node_is_found_in_both_formats() {
        let gonum = "\"1\" [\n label=\"uid=a\\nnamespace=n\\nPod.v1/p\\n\"\n group=\"\"\n uid=\"a\"\n missing=\"false\"\n beingDeleted=\"false\"\n deletingDependents=\"false\"\n virtual=\"false\"\n ];";
        assert!(dot_has_observed(gonum, "a"));
        assert!(!dot_has_observed(&gonum.replace("virtual=\"false\"", "virtual=\"true\""), "a"));
        assert!(!dot_has_observed(gonum, "b"));
    }
}
