//! Fault injection, configurable at start ([`crate::Config::faults`]) and at run time
//! ([`crate::ServerHandle::faults`], or `PUT /debug/snapinformer/faults` with a JSON body).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::ApiError;

/// What to break. The default breaks nothing.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct FaultConfig {
    /// End every watch stream (cleanly, as a dropped connection would) after it has sent this
    /// many events (initial ADDED events included, bookmarks not).
    pub watch_cut_after_events: Option<u64>,
    /// Probability in `[0, 1]` of ending a watch stream after each event it sends.
    pub watch_cut_probability: f64,
    /// The next this-many watch requests get HTTP 200 and an in-stream ERROR 410 Expired.
    pub force_watch_410: u32,
    /// The next this-many list requests get HTTP 410 Expired.
    pub force_list_410: u32,
    /// Fraction in `[0, 1]` of resource requests answered 429 TooManyRequests.
    pub throttle_fraction: f64,
    /// `Retry-After` seconds sent with injected 429s.
    pub retry_after_seconds: u64,
    /// Fraction in `[0, 1]` of resource requests answered 500 InternalError.
    pub error_fraction: f64,
    /// Latency added before every resource request is handled, in milliseconds.
    pub latency_ms: u64,
}

/// Counts of faults injected so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FaultStats {
    /// Watch streams ended by `watch_cut_*`.
    pub watches_cut: u64,
    /// In-stream 410s sent because of `force_watch_410`.
    pub watch_410s: u64,
    /// HTTP 410s sent because of `force_list_410`.
    pub list_410s: u64,
    /// Injected 429s.
    pub throttled: u64,
    /// Injected 500s.
    pub errors: u64,
}

#[derive(Debug, Default)]
struct Counters {
    watches_cut: AtomicU64,
    watch_410s: AtomicU64,
    list_410s: AtomicU64,
    throttled: AtomicU64,
    errors: AtomicU64,
}

/// A shared, run-time-changeable fault configuration. Cloning shares it.
#[derive(Debug, Clone, Default)]
pub struct Faults {
    config: Arc<Mutex<FaultConfig>>,
    counters: Arc<Counters>,
}

impl Faults {
    /// Faults starting from `config`.
    pub fn new(config: FaultConfig) -> Self {
        Self { config: Arc::new(Mutex::new(config)), counters: Arc::default() }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, FaultConfig> {
        self.config.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The current configuration.
    pub fn get(&self) -> FaultConfig {
        self.lock().clone()
    }

    /// Replaces the configuration.
    pub fn set(&self, config: FaultConfig) {
        *self.lock() = config;
    }

    /// Changes the configuration in place.
    pub fn update(&self, change: impl FnOnce(&mut FaultConfig)) {
        change(&mut self.lock());
    }

    /// Turns every fault off.
    pub fn clear(&self) {
        self.set(FaultConfig::default());
    }

    /// Counts of faults injected so far.
    pub fn stats(&self) -> FaultStats {
        let c = &self.counters;
        FaultStats {
            watches_cut: c.watches_cut.load(Ordering::Relaxed),
            watch_410s: c.watch_410s.load(Ordering::Relaxed),
            list_410s: c.list_410s.load(Ordering::Relaxed),
            throttled: c.throttled.load(Ordering::Relaxed),
            errors: c.errors.load(Ordering::Relaxed),
        }
    }

    /// Consumes one forced watch 410, if any is pending.
    pub(crate) fn take_watch_410(&self) -> bool {
        let mut config = self.lock();
        if config.force_watch_410 == 0 {
            return false;
        }
        config.force_watch_410 -= 1;
        self.counters.watch_410s.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// Consumes one forced list 410, if any is pending.
    pub(crate) fn take_list_410(&self) -> bool {
        let mut config = self.lock();
        if config.force_list_410 == 0 {
            return false;
        }
        config.force_list_410 -= 1;
        self.counters.list_410s.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// Latency to add, then maybe an injected 429/500 for a resource request.
    pub(crate) fn request_fault(&self) -> (Duration, Option<ApiError>) {
        let config = self.get();
        let latency = Duration::from_millis(config.latency_ms);
        if config.throttle_fraction > 0.0 && rand::random::<f64>() < config.throttle_fraction {
            self.counters.throttled.fetch_add(1, Ordering::Relaxed);
            return (latency, Some(ApiError::too_many_requests(config.retry_after_seconds)));
        }
        if config.error_fraction > 0.0 && rand::random::<f64>() < config.error_fraction {
            self.counters.errors.fetch_add(1, Ordering::Relaxed);
            return (latency, Some(ApiError::internal("injected fault")));
        }
        (latency, None)
    }

    /// The watch-cut settings, read once when a watch starts.
    pub(crate) fn watch_cut(&self) -> (Option<u64>, f64) {
        let config = self.lock();
        (config.watch_cut_after_events, config.watch_cut_probability)
    }

    pub(crate) fn count_cut(&self) {
        self.counters.watches_cut.fetch_add(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forced_410s_are_consumed_one_per_request() {
        let faults = Faults::new(FaultConfig { force_list_410: 2, ..Default::default() });
        assert!(faults.take_list_410());
        assert!(faults.take_list_410());
        assert!(!faults.take_list_410());
        assert_eq!(faults.stats().list_410s, 2);
    }

    #[test]
    fn full_throttle_fraction_throttles_every_request_with_retry_after() {
        let faults = Faults::default();
        faults.update(|c| {
            c.throttle_fraction = 1.0;
            c.retry_after_seconds = 3;
        });
        let (_, err) = faults.request_fault();
        let err = err.expect("throttled");
        assert_eq!(err.code, 429);
        assert_eq!(err.details.unwrap()["retryAfterSeconds"], 3);
        faults.clear();
        assert!(faults.request_fault().1.is_none());
    }
}
