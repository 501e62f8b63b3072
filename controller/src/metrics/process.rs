//! The Prometheus client libraries' `process_*` families (as Go's process collector exports
//! them from kube-controller-manager), read from `/proc/self` by the `procfs` crate at each
//! scrape. Where `/proc` cannot be read (not Linux), the families are left out.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// See the module docs.
#[derive(Debug)]
pub struct ProcessCollector;

/// The figures of one scrape.
#[derive(Debug, PartialEq)]
pub struct ProcessFigures {
    /// User and system CPU time, seconds.
    pub cpu_seconds: f64,
    /// Open file descriptors.
    pub open_fds: u64,
    /// The soft limit of open file descriptors (`None`: unlimited).
    pub max_fds: Option<u64>,
    /// Virtual memory size, bytes.
    pub virtual_memory_bytes: u64,
    /// Resident set size, bytes.
    pub resident_memory_bytes: u64,
    /// Start time, seconds since the Unix epoch.
    pub start_time_seconds: f64,
}

impl ProcessFigures {
    /// This process's figures now.
    pub fn read() -> procfs::ProcResult<ProcessFigures> {
        let me = procfs::process::Process::myself()?;
        let stat = me.stat()?;
        let ticks = procfs::ticks_per_second() as f64;
        let max_fds = match me.limits()?.max_open_files.soft_limit {
            procfs::process::LimitValue::Value(n) => Some(n),
            procfs::process::LimitValue::Unlimited => None,
        };
        Ok(ProcessFigures {
            cpu_seconds: (stat.utime + stat.stime) as f64 / ticks,
            open_fds: me.fd_count()? as u64,
            max_fds,
            virtual_memory_bytes: stat.vsize,
            resident_memory_bytes: stat.rss * procfs::page_size(),
            start_time_seconds: procfs::boot_time_secs()? as f64 + stat.starttime as f64 / ticks,
        })
    }
}

/// Process `pid`'s user and system CPU time so far, in seconds (`None` if it is gone or `/proc`
/// cannot be read): for reports that watch kube-gc, or the API server, from outside.
pub fn cpu_seconds_of(pid: u32) -> Option<f64> {
    let stat = procfs::process::Process::new(i32::try_from(pid).ok()?).ok()?.stat().ok()?;
    Some((stat.utime + stat.stime) as f64 / procfs::ticks_per_second() as f64)
}

/// A process's resident memory now and at its peak (`VmRSS`, `VmHWM`), for reports and
/// tests that watch kube-gc's memory from outside.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Memory {
    /// Resident set size, bytes.
    pub resident_bytes: u64,
    /// The peak resident set size so far, bytes.
    pub peak_bytes: u64,
}

impl Memory {
    /// Process `pid`'s memory (`None` if it is gone or `/proc` cannot be read).
    pub fn of(pid: u32) -> Option<Memory> {
        Self::from(procfs::process::Process::new(i32::try_from(pid).ok()?).ok()?)
    }

    /// This process's memory.
    pub fn myself() -> Option<Memory> {
        Self::from(procfs::process::Process::myself().ok()?)
    }

    fn from(process: procfs::process::Process) -> Option<Memory> {
        let status = process.status().ok()?;
        Some(Memory { resident_bytes: status.vmrss? * 1024, peak_bytes: status.vmhwm? * 1024 })
    }
}

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let Ok(p) = ProcessFigures::read() else { return Ok(()) };
        let counter = encoder.encode_descriptor(
            "process_cpu_seconds",
            "Total user and system CPU time spent in seconds",
            None,
            MetricType::Counter,
        )?;
        ConstCounter::new(p.cpu_seconds).encode(counter)?;
        let mut gauges = vec![
            ("process_open_fds", "Number of open file descriptors", p.open_fds as f64),
            (
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes",
                p.virtual_memory_bytes as f64,
            ),
            (
                "process_resident_memory_bytes",
                "Resident memory size in bytes",
                p.resident_memory_bytes as f64,
            ),
            (
                "process_start_time_seconds",
                "Start time of the process since unix epoch in seconds",
                p.start_time_seconds,
            ),
        ];
        if let Some(max) = p.max_fds {
            gauges.push(("process_max_fds", "Maximum number of open file descriptors", max as f64));
        }
        for (name, help, value) in gauges {
            let gauge = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            ConstGauge::new(value).encode(gauge)?;
        }
        Ok(())
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn figures_are_this_processs() {
        let p = ProcessFigures::read().expect("/proc/self");
        assert!(p.resident_memory_bytes > 1 << 20, "{p:?}");
        assert!(p.virtual_memory_bytes >= p.resident_memory_bytes, "{p:?}");
        assert!(p.open_fds >= 3, "{p:?}");
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
        let age = now.as_secs_f64() - p.start_time_seconds;
        assert!((-2.0..3600.0).contains(&age), "started {age} s ago: {p:?}");
        let memory = Memory::myself().expect("/proc/self/status");
        assert!(memory.peak_bytes >= memory.resident_bytes && memory.resident_bytes > 1 << 20);
        assert_eq!(Memory::of(std::process::id()).map(|m| m.peak_bytes > 0), Some(true));
    }
}
