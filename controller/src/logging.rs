//! Logs, as kube-controller-manager writes them: to stderr, `text` (tracing's compact lines) or
//! `json` in klog's structured shape (k8s.io/component-base/logs/json), one object per line:
//!
//! ```text
//! {"ts":1732512345.123,"caller":"controller/src/run.rs:412","msg":"all resource monitors have synced","v":0}
//! {"ts":1732512346.456,"caller":"controller/src/watchers.rs:98","msg":"watch failed","err":"…","resource":"pods"}
//! ```
//!
//! `ts` is seconds since the Unix epoch; `v` is the klog verbosity of an info line (0 for info
//! and warnings, 2 for tracing's debug, 5 for trace; `-v` maps back the same way); an error
//! line has no `v`. An `error` field is klog's `err`; every other field follows by name.

use std::fmt;

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

use crate::Flags;

/// Installs the process's logger: the filter (`KUBE_GC_LOG`, else `RUST_LOG`, in tracing's
/// syntax, else `-v` and `--vmodule`), stderr, and `--logging-format`; colours only for a
/// terminal.
pub fn init(flags: &Flags) {
    let (filter, refused) = filter(|name| std::env::var(name).ok(), &flags.log_filter());
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        // A closed stderr (`kube-gc 2>&1 | head`) loses the lines, as klog's do; by default
        // tracing reports the failed write with `eprintln!`, which panics on that same stderr.
        .log_internal_errors(false);
    if flags.logging_format == "json" {
        logs.event_format(KlogJson).init();
    } else {
        logs.init();
    }
    for (variable, error) in refused {
        tracing::warn!(%variable, %error, "ignoring a log filter that does not parse");
    }
}

/// The log filter: the first of `KUBE_GC_LOG` and `RUST_LOG` that is set, not blank, and
/// parses, else `flags_filter` (`-v`, `--vmodule`); with the variables that were refused and
/// why. A blank variable is unset: tracing would read it as a filter with no directive, which
/// turns every line off, errors and the lost-lease exit's included.
fn filter(
    var: impl Fn(&str) -> Option<String>,
    flags_filter: &str,
) -> (tracing_subscriber::EnvFilter, Vec<(&'static str, String)>) {
    let mut refused = Vec::new();
    for name in ["KUBE_GC_LOG", "RUST_LOG"] {
        let Some(value) = var(name).filter(|v| !v.trim().is_empty()) else { continue };
        match tracing_subscriber::EnvFilter::try_new(&value) {
            Ok(filter) => return (filter, refused),
            Err(e) => refused.push((name, format!("{value:?}: {e}"))),
        }
    }
    (tracing_subscriber::EnvFilter::new(flags_filter), refused)
}

/// The klog verbosity of a tracing level (the inverse of [`crate::flags::level_directive`]).
fn verbosity(level: &Level) -> Option<u8> {
    match *level {
        Level::ERROR => None,
        Level::WARN | Level::INFO => Some(0),
        Level::DEBUG => Some(2),
        Level::TRACE => Some(5),
    }
}

/// The JSON line format (see the module docs).
#[derive(Clone, Copy, Debug, Default)]
pub struct KlogJson;

impl<S, N> FormatEvent<S, N> for KlogJson
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        writeln!(writer, "{}", klog_line(event, std::time::SystemTime::now()))
    }
}

/// The JSON object of `event`, logged at `now`.
fn klog_line(event: &Event<'_>, now: std::time::SystemTime) -> Value {
    let meta = event.metadata();
    let mut fields = Fields::default();
    event.record(&mut fields);
    let mut line = Map::new();
    let ts = now.duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
    line.insert("ts".into(), ts.into());
    let caller = match (meta.file(), meta.line()) {
        (Some(file), Some(n)) => format!("{}:{n}", short_path(file)),
        _ => meta.target().to_owned(),
    };
    line.insert("caller".into(), caller.into());
    line.insert("msg".into(), fields.message.unwrap_or_default().into());
    if let Some(v) = verbosity(meta.level()) {
        line.insert("v".into(), v.into());
    }
    if let Some(err) = fields.values.remove("error") {
        line.insert("err".into(), err);
    }
    for (key, value) in fields.values {
        line.entry(key).or_insert(value);
    }
    Value::Object(line)
}

/// A source path as klog shows callers, short: a dependency's from its crate directory
/// (`kube-client-5.0.0/src/client/builder.rs`, not the whole path into cargo's registry);
/// kube-gc's own paths are already relative to the workspace.
fn short_path(file: &str) -> &str {
    match file.find("/registry/src/") {
        Some(at) => {
            let inside = &file[at + "/registry/src/".len()..];
            // Past the registry's index directory (`index.crates.io-…/`).
            inside.split_once('/').map_or(inside, |(_, rest)| rest)
        }
        None => file,
    }
}

/// An event's message and fields, as JSON values.
#[derive(Default)]
struct Fields {
    message: Option<String>,
    values: Map<String, Value>,
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let text = format!("{value:?}");
        if field.name() == "message" {
            self.message = Some(text);
        } else {
            self.values.insert(field.name().to_owned(), text.into());
        }
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message = Some(value.to_owned());
        } else {
            self.values.insert(field.name().to_owned(), value.into());
        }
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.values.insert(field.name().to_owned(), value.into());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.values.insert(field.name().to_owned(), value.into());
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.values.insert(field.name().to_owned(), value.into());
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.values.insert(field.name().to_owned(), value.into());
    }
}

#[cfg(test)]
mod tests {
    use super::short_path;

    /// A blank or malformed variable does not decide the filter: the next one does, and the
    /// malformed one is reported.
    #[test]
    fn a_blank_or_malformed_log_variable_falls_through() {
        let filter = |kube_gc_log: Option<&str>, rust_log: Option<&str>| {
            let (filter, refused) = super::filter(
                |name| match name {
                    "KUBE_GC_LOG" => kube_gc_log.map(str::to_owned),
                    _ => rust_log.map(str::to_owned),
                },
                "info",
            );
            (filter.to_string(), refused.into_iter().map(|(name, _)| name).collect::<Vec<_>>())
        };
        assert_eq!(filter(None, None), ("info".into(), vec![]));
        assert_eq!(filter(Some(""), None), ("info".into(), vec![]));
        assert_eq!(filter(Some("  "), Some("")), ("info".into(), vec![]));
        assert_eq!(filter(Some(""), Some("debug")), ("debug".into(), vec![]));
        assert_eq!(filter(Some("kube_gc=trace"), Some("debug")), ("kube_gc=trace".into(), vec![]));
        assert_eq!(filter(Some("kube_gc=[{"), None), ("info".into(), vec!["KUBE_GC_LOG"]));
    }

    #[test]
    fn callers_are_short() {
        assert_eq!(
            short_path(
                "/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/kube-client-5.0.0/src/client/builder.rs"
            ),
            "kube-client-5.0.0/src/client/builder.rs"
        );
        assert_eq!(short_path("controller/src/run.rs"), "controller/src/run.rs");
    }
}
