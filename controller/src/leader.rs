//! Leader election on a coordination.k8s.io Lease, as client-go's `leaderelection` with a
//! `LeaseLock`: acquire when the lease is free or expired, renew every retry period, and give
//! up (the process exits, as kube-controller-manager does) when renewal has failed for the
//! renew deadline.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, PostParams};

/// Lease timing, from the `--leader-elect-*` flags.
#[derive(Clone, Debug)]
pub struct LeaseConfig {
    /// Lease namespace.
    pub namespace: String,
    /// Lease name.
    pub name: String,
    /// This candidate's identity (hostname + random suffix, as client-go).
    pub identity: String,
    /// `--leader-elect-lease-duration`.
    pub lease_duration: Duration,
    /// `--leader-elect-renew-deadline`.
    pub renew_deadline: Duration,
    /// `--leader-elect-retry-period`.
    pub retry_period: Duration,
}

/// A held lease.
#[derive(Debug)]
pub struct Leadership {
    api: Api<Lease>,
    config: LeaseConfig,
}

fn now() -> MicroTime {
    MicroTime(Timestamp::now())
}

/// Whether `lease` may be taken by `identity` now.
fn is_free(lease: &Lease, identity: &str) -> bool {
    let Some(spec) = &lease.spec else { return true };
    let holder = spec.holder_identity.as_deref().unwrap_or("");
    if holder.is_empty() || holder == identity {
        return true;
    }
    let duration = i64::from(spec.lease_duration_seconds.unwrap_or(0));
    match &spec.renew_time {
        Some(renewed) => Timestamp::now().as_second() > renewed.0.as_second() + duration,
        None => true,
    }
}

impl Leadership {
    /// Tries once to take or renew the lease; `Ok(true)` when this candidate holds it after.
    async fn try_acquire_or_renew(
        api: &Api<Lease>,
        config: &LeaseConfig,
    ) -> Result<bool, kube::Error> {
        let seconds = i32::try_from(config.lease_duration.as_secs()).unwrap_or(i32::MAX);
        match api.get_opt(&config.name).await? {
            None => {
                let lease = Lease {
                    metadata: ObjectMeta { name: Some(config.name.clone()), ..Default::default() },
                    spec: Some(LeaseSpec {
                        holder_identity: Some(config.identity.clone()),
                        lease_duration_seconds: Some(seconds),
                        acquire_time: Some(now()),
                        renew_time: Some(now()),
                        lease_transitions: Some(0),
                        ..Default::default()
                    }),
                };
                match api.create(&PostParams::default(), &lease).await {
                    Ok(_) => Ok(true),
                    Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                    Err(e) => Err(e),
                }
            }
            Some(mut lease) => {
                if !is_free(&lease, &config.identity) {
                    return Ok(false);
                }
                let spec = lease.spec.get_or_insert_with(Default::default);
                let ours = spec.holder_identity.as_deref() == Some(config.identity.as_str());
                if !ours {
                    spec.acquire_time = Some(now());
                    spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
                }
                spec.holder_identity = Some(config.identity.clone());
                spec.lease_duration_seconds = Some(seconds);
                spec.renew_time = Some(now());
                // The resourceVersion in `lease` makes this a compare-and-swap.
                match api.replace(&config.name, &PostParams::default(), &lease).await {
                    Ok(_) => Ok(true),
                    Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                    Err(e) => Err(e),
                }
            }
        }
    }

    /// Blocks until this candidate holds the lease.
    pub async fn acquire(client: Client, config: LeaseConfig) -> Leadership {
        let api: Api<Lease> = Api::namespaced(client, &config.namespace);
        tracing::info!(lease = %format!("{}/{}", config.namespace, config.name), identity = %config.identity, "attempting to acquire leader lease");
        loop {
            match Self::try_acquire_or_renew(&api, &config).await {
                Ok(true) => {
                    tracing::info!(identity = %config.identity, "successfully acquired lease");
                    return Leadership { api, config };
                }
                Ok(false) => {}
                Err(e) => tracing::warn!(error = %e, "error retrieving resource lock"),
            }
            tokio::time::sleep(config.retry_period).await;
        }
    }

    /// Renews the lease every retry period; returns when it could not be renewed within the
    /// renew deadline (leadership lost).
    pub async fn hold(self) {
        let mut last_renewed = tokio::time::Instant::now();
        loop {
            tokio::time::sleep(self.config.retry_period).await;
            match tokio::time::timeout(
                self.config.renew_deadline,
                Self::try_acquire_or_renew(&self.api, &self.config),
            )
            .await
            {
                Ok(Ok(true)) => last_renewed = tokio::time::Instant::now(),
                Ok(Ok(false)) => {
                    tracing::error!("lease taken by another candidate");
                    return;
                }
                Ok(Err(e)) => tracing::warn!(error = %e, "failed to renew lease"),
                Err(_) => tracing::warn!("renewing the lease timed out"),
            }
            if last_renewed.elapsed() > self.config.renew_deadline {
                tracing::error!("failed to renew lease within the renew deadline");
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(holder: &str, renewed_secs_ago: i64, duration: i32) -> Lease {
        let renewed =
            Timestamp::from_second(Timestamp::now().as_second() - renewed_secs_ago).unwrap();
        Lease {
            metadata: ObjectMeta::default(),
            spec: Some(LeaseSpec {
                holder_identity: Some(holder.into()),
                lease_duration_seconds: Some(duration),
                renew_time: Some(MicroTime(renewed)),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn a_lease_is_free_when_unheld_ours_or_expired() {
        assert!(is_free(&Lease::default(), "me"));
        assert!(is_free(&lease("", 0, 15), "me"));
        assert!(is_free(&lease("me", 0, 15), "me"));
        assert!(!is_free(&lease("other", 1, 15), "me"));
        assert!(is_free(&lease("other", 60, 15), "me"));
    }
}
