//! The propagation policies' phase: sample Deployments deleted with each policy, as a user
//! would, and each judged against its expected final state.

use super::*;

/// A propagation policy the demo exercises.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Policy {
    Background,
    Foreground,
    Orphan,
}

impl Policy {
    pub(super) const ALL: [Policy; 3] = [Policy::Background, Policy::Foreground, Policy::Orphan];

    pub(super) fn name(self) -> &'static str {
        match self {
            Policy::Background => "background",
            Policy::Foreground => "foreground",
            Policy::Orphan => "orphan",
        }
    }

    pub(super) fn params(self) -> DeleteParams {
        match self {
            Policy::Background => DeleteParams::background(),
            Policy::Foreground => DeleteParams::foreground(),
            Policy::Orphan => DeleteParams::orphan(),
        }
    }
}

/// One sample family: a Deployment, its ReplicaSet and its Pods.
#[derive(Debug)]
pub(super) struct Sample {
    pub(super) namespace: String,
    pub(super) deployment: String,
    pub(super) replicaset: String,
    pub(super) pods: Vec<String>,
}

impl Sample {
    /// Family `f` of WORKLOAD.md's shape, found in the store.
    pub(super) fn find(
        store: &Store,
        res: &Res,
        f: usize,
        namespaces: usize,
    ) -> anyhow::Result<Sample> {
        let namespace = kube_gc_workload::namespace_name(f % namespaces.max(1));
        let deployment = format!("app-{f:08}");
        let d = meta(&store.get(&res.deployments, Some(&namespace), &deployment)?)?;
        let in_ns = |r: &Resolved| {
            store.list(r, &ListOptions { namespace: Some(namespace.clone()), ..Default::default() })
        };
        let owned_by =
            |uid: &str, items: Vec<Arc<StoredObject>>| -> anyhow::Result<Vec<StoredMeta>> {
                let mut out = Vec::new();
                for b in items {
                    let m = meta(&b)?;
                    if m.owner_references.iter().any(|o| o.uid == uid) {
                        out.push(m);
                    }
                }
                Ok(out)
            };
        let rs = owned_by(&d.uid, in_ns(&res.replicasets)?.items)?;
        let [rs] = <[StoredMeta; 1]>::try_from(rs).map_err(|v| {
            anyhow::anyhow!("{namespace}/{deployment} owns {} ReplicaSets, not 1", v.len())
        })?;
        let pods = owned_by(&rs.uid, in_ns(&res.pods)?.items)?;
        Ok(Sample {
            namespace,
            deployment,
            replicaset: rs.name,
            pods: pods.into_iter().map(|m| m.name).collect(),
        })
    }

    pub(super) fn objects(&self) -> u64 {
        2 + self.pods.len() as u64
    }

    pub(super) fn observe(&self, store: &Store, res: &Res) -> Observed {
        let ns = Some(self.namespace.as_str());
        Observed {
            deployment: store.get(&res.deployments, ns, &self.deployment).is_ok(),
            replicaset: store
                .get(&res.replicasets, ns, &self.replicaset)
                .ok()
                .and_then(|b| meta(&b).ok())
                .map(|m| m.owner_references.len()),
            pods: self.pods.iter().filter(|p| store.get(&res.pods, ns, p.as_str()).is_ok()).count(),
        }
    }
}

/// What a sample family looks like in the store.
#[derive(Clone, Copy, Debug)]
pub(super) struct Observed {
    pub(super) deployment: bool,
    /// The ReplicaSet's owner reference count, if it is there.
    pub(super) replicaset: Option<usize>,
    pub(super) pods: usize,
}

impl std::fmt::Display for Observed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Deployment {}, ReplicaSet {}, {} Pods",
            if self.deployment { "present" } else { "gone" },
            match self.replicaset {
                None => "gone".to_owned(),
                Some(n) => format!("present with {n} ownerReferences"),
            },
            self.pods
        )
    }
}

/// Whether a family reached `policy`'s final state (`Ok(true)`), is on its way (`Ok(false)`),
/// or broke the policy's rules (`Err`).
pub(super) fn judge(policy: Policy, o: Observed, pods: usize) -> Result<bool, String> {
    match policy {
        Policy::Background => Ok(!o.deployment && o.replicaset.is_none() && o.pods == 0),
        Policy::Foreground => {
            if !o.deployment && (o.replicaset.is_some() || o.pods > 0) {
                return Err(format!("the Deployment went before its dependents: {o}"));
            }
            Ok(!o.deployment && o.replicaset.is_none() && o.pods == 0)
        }
        Policy::Orphan => {
            if o.replicaset.is_none() || o.pods < pods {
                return Err(format!("orphaned dependents were deleted: {o}"));
            }
            match (o.deployment, o.replicaset) {
                (false, Some(0)) => Ok(true),
                (false, Some(_)) => {
                    Err(format!("the Deployment is gone but the ReplicaSet still names it: {o}"))
                }
                _ => Ok(false),
            }
        }
    }
}

/// Phase 5: Deletes sample Deployments with each propagation policy in turn, as a user would, and
/// waits for each to reach its policy's final state.
pub(super) async fn delete_samples(
    demo: &Demo<'_>,
    families: usize,
    preloaded: &Preloaded,
    gc: &Running,
    report: &mut Report,
) -> anyhow::Result<()> {
    let (args, ui, timeout) = (demo.args, &demo.ui, demo.timeout);
    let Preloaded { store, res, .. } = preloaded;
    let Running { user, calls, .. } = gc;
    let total = args.samples * Policy::ALL.len();
    for (pi, policy) in Policy::ALL.into_iter().enumerate() {
        let samples: Vec<Sample> = (0..args.samples)
            .map(|i| {
                let f = (i * Policy::ALL.len() + pi) * families / total.max(1);
                Sample::find(store, res, f, args.namespaces)
            })
            .collect::<anyhow::Result<_>>()?;
        let objects: u64 = samples.iter().map(Sample::objects).sum();
        let calls_before = Calls::read(calls);
        let bar = ui.bar(samples.len() as u64, &format!("{} deletions", policy.name()), BAR);
        let started = Instant::now();
        let mut verdict: Result<(), String> = Ok(());
        for s in &samples {
            let api: Api<Deployment> = Api::namespaced(user.clone(), &s.namespace);
            match api.delete(&s.deployment, &policy.params()).await {
                Ok(either) => {
                    let want = match policy {
                        Policy::Background => None,
                        Policy::Foreground => Some("foregroundDeletion"),
                        Policy::Orphan => Some("orphan"),
                    };
                    if let (Some(f), Some(d)) = (want, either.left()) {
                        let has = d.metadata.finalizers.unwrap_or_default().iter().any(|x| x == f);
                        if !has || d.metadata.deletion_timestamp.is_none() {
                            verdict = Err(format!(
                                "{}/{}: the {} delete did not set deletionTimestamp and the {f} finalizer",
                                s.namespace,
                                s.deployment,
                                policy.name()
                            ));
                        }
                    }
                }
                Err(e) => {
                    verdict = Err(format!("deleting {}/{}: {e}", s.namespace, s.deployment));
                }
            }
        }
        let deadline = started + timeout;
        let mut done: Vec<Option<f64>> = vec![None; samples.len()];
        while verdict.is_ok() && done.iter().any(Option::is_none) {
            for (s, d) in samples.iter().zip(done.iter_mut()).filter(|(_, d)| d.is_none()) {
                match judge(policy, s.observe(store, res), s.pods.len()) {
                    Ok(true) => *d = Some(started.elapsed().as_secs_f64()),
                    Ok(false) => {}
                    Err(e) => verdict = Err(format!("{}/{}: {e}", s.namespace, s.deployment)),
                }
            }
            bar.set_position(done.iter().flatten().count() as u64);
            if Instant::now() >= deadline {
                let late: Vec<String> = samples
                    .iter()
                    .zip(&done)
                    .filter(|(_, d)| d.is_none())
                    .map(|(s, _)| {
                        format!("{}/{} ({})", s.namespace, s.deployment, s.observe(store, res))
                    })
                    .collect();
                verdict =
                    Err(format!("timed out after {} s: {}", timeout.as_secs(), late.join("; ")));
            }
            if verdict.is_ok() && done.iter().any(Option::is_none) {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
        let seconds = started.elapsed().as_secs_f64();
        bar.finish_and_clear();
        let each: Vec<String> = done.iter().flatten().map(|s| format!("{s:.3}")).collect();
        ui.say(format!(
            "{}: {} Deployments ({} objects) in {seconds:.3} s (each: {} s){}",
            policy.name(),
            samples.len(),
            objects,
            each.join(", "),
            match &verdict {
                Ok(()) => String::new(),
                Err(e) => format!(" — FAILED: {e}"),
            }
        ));
        report.phases.push(Phase {
            name: policy.name(),
            objects,
            seconds,
            calls: Some(Calls::read(calls).since(calls_before)),
            verdict,
        });
    }

    Ok(())
}
