//! The two collectors under test, each run as its own process against the same server:
//! kube-gc (this workspace's release binary) and upstream's kube-controller-manager running only
//! its garbage collector (`scripts/testenv`'s build of v1.20.2).

use std::fmt;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::str::FromStr;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

/// Which collector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Which {
    /// kube-gc, with its default `--kube-api-content-type`.
    KubeGc,
    /// kube-gc reading JSON (`--kube-api-content-type=application/json`).
    KubeGcJson,
    /// kube-gc reading protobuf (`--kube-api-content-type=application/vnd.kubernetes.protobuf`).
    KubeGcProtobuf,
    /// kube-controller-manager `--controllers=garbagecollector`.
    Upstream,
}

impl FromStr for Which {
    type Err = String;
    fn from_str(s: &str) -> Result<Which, String> {
        match s {
            "kube-gc" => Ok(Which::KubeGc),
            "kube-gc-json" => Ok(Which::KubeGcJson),
            "kube-gc-protobuf" => Ok(Which::KubeGcProtobuf),
            "upstream" => Ok(Which::Upstream),
            other => Err(format!(
                "unknown collector {other:?} (kube-gc, kube-gc-json, kube-gc-protobuf, upstream)"
            )),
        }
    }
}

impl fmt::Display for Which {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Which::KubeGc => "kube-gc",
            Which::KubeGcJson => "kube-gc-json",
            Which::KubeGcProtobuf => "kube-gc-protobuf",
            Which::Upstream => "upstream",
        })
    }
}

/// `--kube-api-qps` and `--kube-api-burst`, written `QPS:BURST`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rate {
    pub qps: u32,
    pub burst: u32,
}

impl FromStr for Rate {
    type Err = String;
    fn from_str(s: &str) -> Result<Rate, String> {
        let (q, b) = s.split_once(':').ok_or_else(|| format!("{s:?}: expected QPS:BURST"))?;
        let parse = |x: &str| x.parse::<u32>().map_err(|e| format!("{s:?}: {e}"));
        Ok(Rate { qps: parse(q)?, burst: parse(b)? })
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.qps, self.burst)
    }
}

/// A started collector process.
#[derive(Debug)]
pub struct Running {
    pub which: Which,
    child: Child,
    /// When the process was spawned: the origin of every time this benchmark reports.
    pub started: Instant,
    log: PathBuf,
    /// kube-gc's debug address (its `/readyz`).
    debug_addr: Option<SocketAddr>,
}

impl Running {
    /// Spawns `which` against `kubeconfig` at `rate`, logging to `<dir>/<which>.log`.
    pub fn spawn(
        which: Which,
        kubeconfig: &Path,
        rate: Rate,
        dir: &Path,
        extra_kube_gc_args: &[String],
    ) -> anyhow::Result<Running> {
        let log = dir.join(format!("{which}.log"));
        let out = std::fs::File::create(&log)?;
        let qps = format!("--kube-api-qps={}", rate.qps);
        let burst = format!("--kube-api-burst={}", rate.burst);
        let kubeconfig_flag = format!("--kubeconfig={}", kubeconfig.display());
        let (mut command, debug_addr) = match which {
            Which::KubeGc | Which::KubeGcJson | Which::KubeGcProtobuf => {
                let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse()?;
                let mut c = Command::new(kube_gc_binary()?);
                c.args([&kubeconfig_flag, &qps, &burst, "--leader-elect=false"])
                    .arg(format!("--debug-addr={addr}"))
                    .arg("--secure-port=0")
                    .arg("--initial-sync-timeout=600s");
                match which {
                    Which::KubeGcJson => c.arg("--kube-api-content-type=application/json"),
                    Which::KubeGcProtobuf => {
                        c.arg("--kube-api-content-type=application/vnd.kubernetes.protobuf")
                    }
                    _ => &mut c,
                };
                c.args(extra_kube_gc_args);
                (c, Some(addr))
            }
            Which::Upstream => {
                let mut c = Command::new(upstream_binary()?);
                c.args([&kubeconfig_flag, &qps, &burst, "--leader-elect=false"]).args([
                    "--controllers=garbagecollector",
                    "--port=0",
                    "--secure-port=0",
                    "--bind-address=127.0.0.1",
                    "--v=1",
                ]);
                (c, None)
            }
        };
        let err = out.try_clone()?;
        let child = command
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .with_context(|| format!("spawn {which}"))?;
        Ok(Running { which, child, started: Instant::now(), log, debug_addr })
    }

    /// Whether the collector says it has synced: kube-gc's `/readyz` answers 200; upstream's
    /// log has "all resource monitors have synced".
    pub fn synced(&mut self) -> anyhow::Result<bool> {
        if let Some(status) = self.child.try_wait()? {
            bail!("{} exited ({status}); see {}", self.which, self.log.display());
        }
        match self.debug_addr {
            Some(addr) => Ok(http_status(addr, "/readyz") == Some(200)),
            None => {
                Ok(std::fs::read_to_string(&self.log)?
                    .contains("all resource monitors have synced"))
            }
        }
    }

    /// kube-gc's proof LISTs so far (`kube_gc_api_calls_total{verb="list",purpose="proof"}`):
    /// the server counts them with the watchers' LISTs. `None` for upstream.
    pub fn proof_lists(&self) -> Option<u64> {
        let text = http_get(self.debug_addr?, "/metrics")?;
        text.lines()
            .find_map(|l| {
                l.strip_prefix("kube_gc_api_calls_total{verb=\"list\",purpose=\"proof\"} ")
            })
            .and_then(|v| v.trim().parse::<f64>().ok())
            .map(|v| v as u64)
    }

    /// The process's user and system CPU time so far, in seconds.
    pub fn cpu_seconds(&self) -> Option<f64> {
        kube_gc::metrics::process::cpu_seconds_of(self.child.id())
    }

    /// Peak resident set size so far (`VmHWM`), in bytes.
    pub fn peak_rss(&self) -> Option<u64> {
        Some(kube_gc::metrics::process::Memory::of(self.child.id())?.peak_bytes)
    }

    /// SIGTERM, then SIGKILL after 10 s.
    pub fn stop(mut self) {
        let _ = Command::new("kill").arg("-TERM").arg(self.child.id().to_string()).status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The cached kube-controller-manager (`scripts/testenv bin-dir`).
/// kube-gc's release binary: `$KUBE_GC_BIN`, else built now with cargo (a bench of another
/// package gets no `CARGO_BIN_EXE_` for it).
fn kube_gc_binary() -> anyhow::Result<PathBuf> {
    if let Some(bin) = std::env::var_os("KUBE_GC_BIN") {
        return Ok(PathBuf::from(bin));
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let status = Command::new(cargo)
        .args(["build", "--release", "-q", "-p", "kube-gc", "--bin", "kube-gc"])
        .current_dir(&root)
        .status()
        .context("run cargo build -p kube-gc")?;
    if !status.success() {
        bail!("cargo build -p kube-gc failed");
    }
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from);
    Ok(target.join("release").join("kube-gc"))
}

fn upstream_binary() -> anyhow::Result<PathBuf> {
    let out = crate::env::testenv(&["bin-dir"])?;
    let bin = PathBuf::from(out.trim()).join("kube-controller-manager");
    if !bin.exists() {
        bail!("{} not found; run scripts/testenv build", bin.display());
    }
    Ok(bin)
}

fn free_port() -> u16 {
    crate::env::free_port()
}

/// The status code of a plain HTTP GET (kube-gc's debug server), or `None` if it does not
/// answer yet.
/// The body of a plain HTTP/1.0 GET.
fn http_get(addr: SocketAddr, path: &str) -> Option<String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(200)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    text.split_once("\r\n\r\n").map(|(_, body)| body.to_owned())
}

fn http_status(addr: SocketAddr, path: &str) -> Option<u16> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(200)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut head = [0u8; 32];
    let n = s.read(&mut head).ok()?;
    std::str::from_utf8(&head[..n]).ok()?.split_whitespace().nth(1)?.parse().ok()
}
