//! `kubectl gc`: the collector's answers about one object, standalone against any cluster
//! (whichever collector it runs): `kubectl gc explain deploy/web`, `kubectl gc blast-radius
//! deploy/web --policy foreground -o dot`, `kubectl gc tree rs/web-1`.
//!
//! It lists every deletable resource once into the engine's graph ([`Snapshot`]), with a
//! progress bar on stderr, then answers from the graph as a running kube-gc's debug endpoints
//! do (same JSON with `-o json`). A binary named `kubectl-gc` on the `PATH` is a kubectl plugin.

use std::fmt::Write;
use std::time::Instant;

use clap::{Parser, Subcommand, ValueEnum};
use kube_gc_engine::Uid;
use kube_gc_engine::cluster::PropagationPolicy;
use serde_json::Value;

use crate::inspect::{explanation_json, radius_json, tree_json};
use crate::standalone::{Progress, Snapshot};

/// kubectl gc: why an object is where it is, what deleting it would take, its ownership tree.
#[derive(Parser, Debug)]
#[command(name = "kubectl-gc", version = crate::flags::VERSION)]
pub struct Args {
    /// Path to a kubeconfig (default: as kubectl finds it).
    #[arg(long, global = true)]
    pub kubeconfig: Option<std::path::PathBuf>,

    /// The object's namespace (default: the kubeconfig context's).
    #[arg(short = 'n', long, global = true)]
    pub namespace: Option<String>,

    /// Output format.
    #[arg(short = 'o', long, global = true, value_enum, default_value_t = Output::Text)]
    pub output: Output,

    /// What to ask.
    #[command(subcommand)]
    pub command: Command,
}

/// Output formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// For people.
    Text,
    /// As kube-gc's debug endpoints answer.
    Json,
    /// Graphviz (`blast-radius` only; `dot -Tsvg`).
    Dot,
}

/// The questions.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Each owner as the collector classifies it, what it will do next and why, and for an
    /// object being deleted what each finalizer waits for.
    Explain(Target),
    /// Every object a delete with this policy would remove, those another owner keeps, and
    /// those it would orphan.
    BlastRadius {
        /// The object.
        #[command(flatten)]
        target: Target,
        /// The delete's propagation policy.
        #[arg(long, value_enum, default_value_t = Policy::Background)]
        policy: Policy,
    },
    /// The ownership tree: owners up to the roots, dependents down to the leaves.
    Tree {
        /// The object.
        #[command(flatten)]
        target: Target,
        /// Levels shown each way (at most 64, as the debug endpoint's).
        #[arg(long, default_value_t = 16)]
        depth: usize,
    },
}

/// Which object.
#[derive(clap::Args, Debug)]
pub struct Target {
    /// `TYPE/NAME` (`deploy/web`, `replicasets.apps/web-1`, `Pod/p`), or `TYPE NAME`.
    pub object: Vec<String>,
    /// The object's UID instead.
    #[arg(long, conflicts_with = "object")]
    pub uid: Option<String>,
}

/// Propagation policies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Policy {
    /// Delete now; dependents afterwards.
    Background,
    /// Dependents first.
    Foreground,
    /// Keep the dependents.
    Orphan,
}

impl Target {
    /// The type and name the object arguments give; an error for arguments that name no one
    /// object.
    fn type_and_name(&self) -> Result<(&str, &str), String> {
        match self.object.as_slice() {
            [one] => match one.split_once('/') {
                Some((t, n)) if !t.is_empty() && !n.is_empty() => Ok((t, n)),
                _ => Err(format!("{one:?}: give TYPE/NAME (e.g. deploy/web), TYPE NAME, or --uid")),
            },
            [t, n] => Ok((t.as_str(), n.as_str())),
            _ => Err("give one object: TYPE/NAME, TYPE NAME, or --uid".into()),
        }
    }

    /// Whether the arguments name one object (by UID, or by type and name).
    fn check(&self) -> Result<(), String> {
        match self.uid {
            Some(_) => Ok(()),
            None => self.type_and_name().map(drop),
        }
    }

    fn resolve(&self, snapshot: &Snapshot, namespace: &str) -> Result<Uid, String> {
        if let Some(uid) = &self.uid {
            return Uid::lookup(uid).ok_or_else(|| format!("no object with UID {uid:?}"));
        }
        let (type_name, name) = self.type_and_name()?;
        snapshot.resolve(type_name, name, namespace)
    }
}

impl Args {
    /// The object the command asks about.
    fn target(&self) -> &Target {
        match &self.command {
            Command::Explain(target) => target,
            Command::BlastRadius { target, .. } => target,
            Command::Tree { target, .. } => target,
        }
    }

    /// What is wrong with the arguments, found before the cluster is listed (which can take a
    /// while on a large one).
    pub fn check(&self) -> Result<(), String> {
        self.target().check()?;
        let dot_allowed = matches!(self.command, Command::BlastRadius { .. });
        if self.output == Output::Dot && !dot_allowed {
            return Err("-o dot is for blast-radius".into());
        }
        Ok(())
    }
}

struct Bar(indicatif::ProgressBar);

impl Progress for Bar {
    fn start(&self, resources: usize) {
        self.0.set_length(resources as u64);
    }
    fn page(&self, resource: &str, objects: u64) {
        self.0.set_message(format!("{objects} objects · {resource}"));
    }
    fn resource_done(&self) {
        self.0.inc(1);
    }
}

/// Runs `kubectl gc` with `args`; the text to print on stdout.
pub async fn run(args: Args) -> anyhow::Result<String> {
    args.check().map_err(anyhow::Error::msg)?;
    let flags = crate::Flags::parse_from(
        std::iter::once("kube-gc".to_owned())
            .chain(args.kubeconfig.iter().map(|k| format!("--kubeconfig={}", k.display()))),
    );
    let client = crate::client(&flags).await?;
    let namespace = args.namespace.clone().unwrap_or_else(|| client.default_namespace().to_owned());
    let bar = indicatif::ProgressBar::new(0).with_style(
        indicatif::ProgressStyle::with_template("listing {bar:30} {pos}/{len} resources · {msg}")
            .expect("a valid template"),
    );
    let started = Instant::now();
    // An unknown type is said before the whole cluster is listed.
    let type_name = args.target().type_and_name().ok().map(|(t, _)| t);
    let snapshot =
        Snapshot::list_checked(client, &Bar(bar.clone()), |discovered| match type_name {
            Some(t) => discovered.resource_key_of(t).map(drop),
            None => Ok(()),
        })
        .await;
    bar.finish_and_clear();
    let snapshot = snapshot?;
    eprintln!(
        "listed {} objects of {} resources in {:.1} s",
        snapshot.listed,
        snapshot.discovered.deletable.len(),
        started.elapsed().as_secs_f64()
    );
    for (resource, error) in &snapshot.failed {
        eprintln!("warning: cannot list {resource} (its objects are missing): {error}");
    }
    let asked = Instant::now();
    let out = answer(&args, &snapshot, &namespace).await.map_err(anyhow::Error::msg)?;
    eprintln!("answered in {:.1} ms", asked.elapsed().as_secs_f64() * 1e3);
    Ok(out)
}

/// Answers `args.command` from `snapshot`.
pub async fn answer(args: &Args, snapshot: &Snapshot, namespace: &str) -> Result<String, String> {
    let graph = snapshot.graph();
    let json = match &args.command {
        Command::Explain(target) => {
            let uid = target.resolve(snapshot, namespace)?;
            let e = kube_gc_engine::inspect::explain(&snapshot.collector, &snapshot.cluster, uid)
                .await
                .ok_or("the object is not in the graph")?;
            explanation_json(&e)
        }
        Command::BlastRadius { target, policy } => {
            let uid = target.resolve(snapshot, namespace)?;
            let (p, name) = match policy {
                Policy::Background => (PropagationPolicy::Background, "background"),
                Policy::Foreground => (PropagationPolicy::Foreground, "foreground"),
                Policy::Orphan => (PropagationPolicy::Orphan, "orphan"),
            };
            let r = kube_gc_engine::inspect::blast_radius(graph, uid, p)
                .ok_or("the object is not in the graph")?;
            if args.output == Output::Dot {
                return Ok(radius_dot(graph, &r));
            }
            radius_json(&r, name)
        }
        Command::Tree { target, depth } => {
            let uid = target.resolve(snapshot, namespace)?;
            let (up, down) =
                kube_gc_engine::inspect::tree(graph, uid, (*depth).min(crate::inspect::MAX_DEPTH))
                    .ok_or("the object is not in the graph")?;
            serde_json::json!({"up": tree_json(&up), "down": tree_json(&down)})
        }
    };
    match args.output {
        Output::Json => Ok(format!("{json:#}\n")),
        Output::Dot => Err("-o dot is for blast-radius".into()),
        Output::Text => Ok(match &args.command {
            Command::Explain(_) => explain_text(&json),
            Command::BlastRadius { .. } => radius_text(&json),
            Command::Tree { .. } => tree_text(&json),
        }),
    }
}

/// `Kind namespace/name`.
fn name(o: &Value) -> String {
    let ns = o["namespace"].as_str().unwrap_or_default();
    let kind = o["kind"].as_str().unwrap_or_default();
    let name = o["name"].as_str().unwrap_or_default();
    if ns.is_empty() { format!("{kind} {name}") } else { format!("{kind} {ns}/{name}") }
}

fn list(v: &Value) -> Vec<String> {
    v.as_array().into_iter().flatten().map(name).collect()
}

fn explain_text(e: &Value) -> String {
    let mut out = String::new();
    let mut state =
        vec![if e["observed"] == true { "observed" } else { "not observed (named as an owner)" }];
    if e["beingDeleted"] == true {
        state.push("being deleted");
    }
    let _ = writeln!(
        out,
        "{} (uid {}): {}",
        name(&e["object"]),
        e["object"]["uid"].as_str().unwrap_or(""),
        state.join(", ")
    );
    let owners = e["owners"].as_array().cloned().unwrap_or_default();
    if owners.is_empty() {
        let _ = writeln!(out, "Owners: none");
    } else {
        let _ = writeln!(out, "Owners:");
        for o in &owners {
            let block = if o["blockOwnerDeletion"] == true { ", blocks its deletion" } else { "" };
            let _ = writeln!(
                out,
                "  {}: {} ({}{block})",
                name(o),
                o["state"].as_str().unwrap_or(""),
                o["evidence"].as_str().unwrap_or("")
            );
        }
    }
    let next = &e["next"];
    let detail = &next["detail"];
    let why = match next["action"].as_str().unwrap_or("") {
        "none" => format!("nothing: {}", detail.as_str().unwrap_or("")),
        "keep" => {
            format!("keep it: its owners exist ({})", list(&detail["solidOwners"]).join(", "))
        }
        "verify" => format!(
            "read {} first: {}",
            list(&detail["owners"]).join(", "),
            detail["why"].as_str().unwrap_or("")
        ),
        "removeReferences" => {
            format!("keep it, and remove its references to {}", list(&detail["owners"]).join(", "))
        }
        "delete" => format!(
            "delete it ({}): {}",
            detail["propagationPolicy"].as_str().unwrap_or(""),
            detail["why"].as_str().unwrap_or("")
        ),
        "waitForBlockingDependents" => {
            format!("wait for {} blocking dependent(s) to go (below)", detail["blockingDependents"])
        }
        "removeForegroundFinalizer" => {
            "remove its foregroundDeletion finalizer: no blocking dependent is left".to_owned()
        }
        "orphanDependents" => format!(
            "orphan its {} dependent(s), then remove its orphan finalizer",
            detail["dependents"]
        ),
        "deferredUntilSynced" => format!("wait: {}", detail["why"].as_str().unwrap_or("")),
        "waitForWatchers" => {
            let watchers: Vec<String> = (detail["watchers"].as_array().into_iter().flatten())
                .map(|w| {
                    let seconds = w["behindSeconds"].as_f64().unwrap_or(0.0);
                    format!("{} (behind {seconds:.0}s)", w["resource"].as_str().unwrap_or("?"))
                })
                .collect();
            let then = match detail["then"].as_str() {
                Some("removeForegroundFinalizer") => "remove its foregroundDeletion finalizer",
                Some("delete") => "delete it, as its owner's foreground deletion asks,",
                _ => "orphan its dependents",
            };
            format!("{then} once these watchers catch up: {}", watchers.join(", "))
        }
        other => other.to_owned(),
    };
    let _ = writeln!(out, "Next: {why}");
    if e["retries"].as_u64().unwrap_or(0) > 0 {
        let _ = writeln!(
            out,
            "Retrying: {} failed attempt(s); last error: {}",
            e["retries"],
            e["lastError"].as_str().unwrap_or("unknown")
        );
    }
    for f in e["finalizers"].as_array().into_iter().flatten() {
        let _ = writeln!(
            out,
            "Finalizer {} (removed by {}):",
            f["name"].as_str().unwrap_or(""),
            f["removedBy"].as_str().unwrap_or("")
        );
        let total = f["waitingForTotal"].as_u64().unwrap_or(0);
        if total > 0 {
            let _ = writeln!(out, "  waits for {total}:");
        }
        for w in f["waitingFor"].as_array().into_iter().flatten() {
            waiting_text(&mut out, w, 2);
        }
    }
    if let Some(err) = e["liveReadError"].as_str() {
        let _ = writeln!(out, "(finalizers unknown: {err})");
    }
    out
}

/// A dependent a finalizer waits for, and its own blocking dependents below it.
fn waiting_text(out: &mut String, w: &Value, depth: usize) {
    let mut notes = Vec::new();
    if w["beingDeleted"] == true {
        notes.push("being deleted".to_owned());
    }
    let fins: Vec<&str> =
        w["finalizers"].as_array().into_iter().flatten().filter_map(|f| f.as_str()).collect();
    if !fins.is_empty() {
        notes.push(format!("held by finalizers {}", fins.join(", ")));
    }
    let below = w["blockingDependents"].as_array().map_or(0, Vec::len) as u64;
    let total = w["blockingDependentsTotal"].as_u64().unwrap_or(0);
    if total > 0 {
        notes.push(format!("{total} blocking dependent(s) of its own"));
    }
    let notes = if notes.is_empty() { String::new() } else { format!(": {}", notes.join("; ")) };
    let _ = writeln!(out, "{}{}{notes}", "  ".repeat(depth), name(w));
    for b in w["blockingDependents"].as_array().into_iter().flatten() {
        waiting_text(out, b, depth + 1);
    }
    if total > below {
        let _ = writeln!(out, "{}… and {} more", "  ".repeat(depth + 1), total - below);
    }
}

fn radius_text(r: &Value) -> String {
    let mut out = String::new();
    let deleted = list(&r["deleted"]);
    let _ = writeln!(
        out,
        "A {} delete removes {} object(s):",
        r["policy"].as_str().unwrap_or(""),
        deleted.len()
    );
    for d in &deleted {
        let _ = writeln!(out, "  {d}");
    }
    if let Some(by_kind) = r["deletedByKind"].as_object() {
        let counts: Vec<String> = by_kind.iter().map(|(k, n)| format!("{k}: {n}")).collect();
        let _ = writeln!(out, "By kind: {}", counts.join(", "));
    }
    for k in r["kept"].as_array().into_iter().flatten() {
        let _ = writeln!(
            out,
            "Kept: {} (another owner stays: {})",
            name(k),
            list(&k["keptBy"]).join(", ")
        );
    }
    for o in list(&r["orphaned"]) {
        let _ = writeln!(out, "Orphaned: {o}");
    }
    out
}

fn tree_text(t: &Value) -> String {
    fn walk(out: &mut String, node: &Value, depth: usize, arrow: &str) {
        let mut notes = Vec::new();
        if node["virtual"] == true {
            notes.push("not observed");
        }
        if node["beingDeleted"] == true {
            notes.push("being deleted");
        }
        if node["repeated"] == true {
            notes.push("shown above");
        }
        let notes =
            if notes.is_empty() { String::new() } else { format!(" ({})", notes.join(", ")) };
        let _ = writeln!(out, "{}{arrow}{}{notes}", "  ".repeat(depth), name(node));
        for child in node["children"].as_array().into_iter().flatten() {
            walk(out, child, depth + 1, arrow);
        }
    }
    let mut out = String::from("Owners (up):\n");
    walk(&mut out, &t["up"], 0, "↑ ");
    out.push_str("Dependents (down):\n");
    walk(&mut out, &t["down"], 0, "↓ ");
    out
}

/// The blast radius as Graphviz: deleted red, kept green, orphaned orange, ownership edges
/// from owner to dependent.
fn radius_dot(graph: &kube_gc_engine::Graph, r: &kube_gc_engine::inspect::BlastRadius) -> String {
    let mut out = String::from("digraph blast_radius {\n  node [shape=box, style=filled];\n");
    let mut shown = std::collections::HashSet::new();
    let groups = [
        (r.deleted.clone(), "#f4a6a6"),
        (r.kept.iter().map(|(o, _)| o.clone()).collect(), "#b6e3b6"),
        (r.orphaned.clone(), "#f9d29d"),
    ];
    for (objects, colour) in &groups {
        for o in objects {
            if shown.insert(o.uid) {
                let label = format!("{}\\n{}/{}", o.ty.kind(), o.namespace.as_str(), o.name);
                let _ = writeln!(
                    out,
                    "  \"{}\" [label=\"{}\", fillcolor=\"{colour}\"];",
                    o.uid,
                    label.replace('"', "'")
                );
            }
        }
    }
    for uid in &shown {
        if let Some(node) = graph.node(*uid) {
            for owner in node.owners.iter().filter(|o| shown.contains(&o.uid)) {
                let _ = writeln!(out, "  \"{}\" -> \"{uid}\";", owner.uid);
            }
        }
    }
    out.push_str("}\n");
    out
}

#[cfg(test)]
mod tests;
