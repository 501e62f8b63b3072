//! The retry rate limiter (client-go's `default_rate_limiters.go`): per-item exponential
//! backoff, and an overall token bucket, whichever waits longer.

use std::fmt;
use std::hash::Hash;
use std::time::{Duration, Instant};

use hashbrown::HashMap;

use crate::sync::Mutex;

const NANOS_PER_SEC: u128 = 1_000_000_000;

/// Settings of a [`RateLimiter`]: the maximum of a per-item exponential backoff and an overall
/// token bucket.
///
/// [`Default`] is client-go's `DefaultTypedControllerRateLimiter`, which the garbage collector's
/// three queues use (GC-SPEC §1.5): `5ms * 2^failures` capped at 1000 s, and 10 qps with a
/// burst of 100.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimiterConfig {
    /// Delay of an item's first retry; each further retry doubles it. Default 5 ms.
    pub base_delay: Duration,
    /// Cap on the per-item delay. Default 1000 s.
    pub max_delay: Duration,
    /// Refill rate of the token bucket shared by all items, in tokens per second. Must be
    /// positive; [`f64::INFINITY`] disables the bucket. Default 10.
    pub qps: f64,
    /// Capacity of the token bucket, which starts full. Must be at least 1 unless `qps` is
    /// infinite. Default 100.
    pub burst: u32,
}

impl Default for RateLimiterConfig {
    /// client-go's `DefaultTypedControllerRateLimiter`:
    /// `NewTypedItemExponentialFailureRateLimiter(5*time.Millisecond, 1000*time.Second)` and
    /// `TypedBucketRateLimiter{Limiter: rate.NewLimiter(rate.Limit(10), 100)}`.
    fn default() -> Self {
        Self {
            base_delay: Duration::from_millis(5),
            max_delay: Duration::from_secs(1000),
            qps: 10.0,
            burst: 100,
        }
    }
}

impl RateLimiterConfig {
    /// A limiter that never delays (zero base delay, no token bucket) but still counts
    /// requeues: for tests and loom models, where `add_rate_limited` must add at once.
    #[must_use]
    pub const fn immediate() -> Self {
        Self { base_delay: Duration::ZERO, max_delay: Duration::ZERO, qps: f64::INFINITY, burst: 1 }
    }

    /// Sets [`base_delay`](Self::base_delay).
    #[must_use]
    pub const fn with_base_delay(mut self, base_delay: Duration) -> Self {
        self.base_delay = base_delay;
        self
    }

    /// Sets [`max_delay`](Self::max_delay).
    #[must_use]
    pub const fn with_max_delay(mut self, max_delay: Duration) -> Self {
        self.max_delay = max_delay;
        self
    }

    /// Sets [`qps`](Self::qps) and [`burst`](Self::burst).
    #[must_use]
    pub const fn with_bucket(mut self, qps: f64, burst: u32) -> Self {
        self.qps = qps;
        self.burst = burst;
        self
    }
}

/// client-go's default controller rate limiter: how long an item must wait before its next
/// retry.
///
/// [`when`](Self::when) returns the maximum of
///
/// - a per-item exponential backoff, `base_delay * 2^failures` capped at `max_delay`, where
///   `failures` counts the previous `when` calls for that item since its last
///   [`forget`](Self::forget) (`ItemExponentialFailureRateLimiter`); and
/// - the delay of a token reserved from a bucket shared by all items: `burst` tokens at first,
///   refilled at `qps` (`BucketRateLimiter` over `golang.org/x/time/rate`). Both are consulted
///   on every call, so every `when` takes a token, as upstream's `MaxOfRateLimiter` does.
///
/// The clock is an argument of [`when_at`](Self::when_at), so the limiter can be driven with
/// made-up instants.
pub struct RateLimiter<T> {
    config: RateLimiterConfig,
    state: Mutex<LimiterState<T>>,
}

struct LimiterState<T> {
    /// Per-item failure counts; an item is absent once forgotten (or never limited).
    failures: HashMap<T, u32>,
    /// Tokens in the bucket as of `last`; negative when reservations are outstanding.
    tokens: f64,
    /// Instant of the last reservation; `None` before the first, when the bucket is full.
    last: Option<Instant>,
}

impl<T> fmt::Debug for RateLimiter<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.state.lock();
        f.debug_struct("RateLimiter")
            .field("config", &self.config)
            .field("items", &state.failures.len())
            .field("tokens", &state.tokens)
            .finish()
    }
}

impl<T: Clone + Eq + Hash> RateLimiter<T> {
    /// Creates a limiter; the bucket starts full.
    ///
    /// # Panics
    ///
    /// If `config.qps` is not positive (or is NaN), or if `config.burst` is 0 with a finite
    /// `qps` (upstream's limiter would then never grant a token).
    #[must_use]
    pub fn new(config: RateLimiterConfig) -> Self {
        assert!(config.qps > 0.0, "rate limiter qps must be positive, got {}", config.qps);
        assert!(
            config.burst > 0 || config.qps.is_infinite(),
            "rate limiter burst must be at least 1 with a finite qps"
        );
        let state = LimiterState { failures: HashMap::new(), tokens: 0.0, last: None };
        Self { config, state: Mutex::new(state) }
    }

    /// The settings this limiter was created with.
    #[must_use]
    pub fn config(&self) -> &RateLimiterConfig {
        &self.config
    }

    /// How long `item` must wait before its next retry, as of now; counts one failure of
    /// `item` and reserves a token. See [`when_at`](Self::when_at).
    pub fn when(&self, item: &T) -> Duration {
        self.when_at(item, Instant::now())
    }

    /// How long `item` must wait before its next retry, as of `now`; counts one failure of
    /// `item` and reserves a token.
    ///
    /// `now` earlier than a previous call's counts as no time passed (as `x/time/rate` does).
    pub fn when_at(&self, item: &T, now: Instant) -> Duration {
        let mut state = self.state.lock();
        let failures = match state.failures.get_mut(item) {
            Some(count) => {
                let previous = *count;
                *count = count.saturating_add(1);
                previous
            }
            None => {
                state.failures.insert(item.clone(), 1);
                0
            }
        };
        let backoff = exponential_backoff(&self.config, failures);
        let bucket = state.reserve_token(&self.config, now);
        backoff.max(bucket)
    }

    /// Resets `item`'s failure count (the bucket is shared and keeps its state).
    pub fn forget(&self, item: &T) {
        self.state.lock().failures.remove(item);
    }

    /// How many times `item` has been limited since it was last forgotten.
    #[must_use]
    pub fn num_requeues(&self, item: &T) -> u32 {
        self.state.lock().failures.get(item).copied().unwrap_or(0)
    }
}

impl<T> LimiterState<T> {
    /// `rate.Limiter.Reserve().Delay()`: refill for the time elapsed since the last
    /// reservation (up to `burst`), take one token, and return how long until the debt is paid.
    fn reserve_token(&mut self, config: &RateLimiterConfig, now: Instant) -> Duration {
        if config.qps.is_infinite() {
            return Duration::ZERO;
        }
        let burst = f64::from(config.burst);
        let available = match self.last {
            None => burst,
            Some(last) => {
                let refill = now.saturating_duration_since(last).as_secs_f64() * config.qps;
                (self.tokens + refill).min(burst)
            }
        };
        let remaining = available - 1.0;
        self.tokens = remaining;
        self.last = Some(now);
        if remaining >= 0.0 {
            Duration::ZERO
        } else {
            Duration::try_from_secs_f64(-remaining / config.qps).unwrap_or(Duration::MAX)
        }
    }
}

/// `base_delay * 2^failures`, capped at `max_delay` (overflow counts as over the cap).
fn exponential_backoff(config: &RateLimiterConfig, failures: u32) -> Duration {
    let calculated = 2u128
        .checked_pow(failures)
        .and_then(|factor| config.base_delay.as_nanos().checked_mul(factor))
        .unwrap_or(u128::MAX);
    if calculated >= config.max_delay.as_nanos() {
        return config.max_delay;
    }
    // `calculated < max_delay.as_nanos()`, so its whole seconds fit `max_delay`'s u64 seconds.
    Duration::new((calculated / NANOS_PER_SEC) as u64, (calculated % NANOS_PER_SEC) as u32)
}
