//! Exponential backoff with jitter, a reset after a quiet period, and the server's
//! `Retry-After` as a lower bound.

use std::time::Duration;

use tokio::time::Instant;

/// How the reflector waits after a failure.
///
/// The `n`-th consecutive wait is `min(initial * factor^n, max)` stretched by a random factor
/// in `[1, 1 + jitter]` (client-go's `wait.Backoff` with `Jitter`), and never shorter than the
/// `Retry-After` the server asked for. After `reset_after` without a failure, the next wait
/// starts again from `initial`. The defaults are client-go's and kube-rs' reflector defaults:
/// 800 ms doubling up to 30 s, jitter 1.0, reset after 2 minutes.
#[derive(Debug, Clone, PartialEq)]
#[must_use]
pub struct BackoffConfig {
    /// The first wait.
    pub initial: Duration,
    /// The longest wait before jitter.
    pub max: Duration,
    /// Growth per consecutive failure.
    pub factor: f64,
    /// Random stretch: each wait is multiplied by a factor drawn from `[1, 1 + jitter]`.
    pub jitter: f64,
    /// A failure this long after the previous one starts again from `initial`.
    pub reset_after: Duration,
}

impl Default for BackoffConfig {
    fn default() -> Self {
        BackoffConfig {
            initial: Duration::from_millis(800),
            max: Duration::from_secs(30),
            factor: 2.0,
            jitter: 1.0,
            reset_after: Duration::from_secs(120),
        }
    }
}

impl BackoffConfig {
    /// The defaults (see the type docs).
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the first wait.
    pub fn initial(mut self, initial: Duration) -> Self {
        self.initial = initial;
        self
    }

    /// Sets the longest wait before jitter.
    pub fn max(mut self, max: Duration) -> Self {
        self.max = max;
        self
    }

    /// Sets the growth factor (at least 1).
    pub fn factor(mut self, factor: f64) -> Self {
        self.factor = factor.max(1.0);
        self
    }

    /// Sets the jitter (0 disables it).
    pub fn jitter(mut self, jitter: f64) -> Self {
        self.jitter = jitter.max(0.0);
        self
    }

    /// Sets the quiet period after which the backoff starts again from `initial`.
    pub fn reset_after(mut self, reset_after: Duration) -> Self {
        self.reset_after = reset_after;
        self
    }
}

/// The running state of a backoff: how many consecutive failures, and when the last wait ended.
#[derive(Debug, Clone)]
pub struct Backoff {
    config: BackoffConfig,
    attempt: u32,
    last_end: Option<Instant>,
}

impl Backoff {
    /// A fresh backoff.
    pub fn new(config: BackoffConfig) -> Self {
        Backoff { config, attempt: 0, last_end: None }
    }

    /// The configuration.
    pub fn config(&self) -> &BackoffConfig {
        &self.config
    }

    /// Consecutive failures counted so far.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// Forgets past failures.
    pub fn reset(&mut self) {
        self.attempt = 0;
        self.last_end = None;
    }

    /// The wait before the next retry, given the server's `Retry-After` if any.
    pub fn next_delay(&mut self, retry_after: Option<Duration>) -> Duration {
        let now = Instant::now();
        if self
            .last_end
            .is_some_and(|end| now.saturating_duration_since(end) >= self.config.reset_after)
        {
            self.attempt = 0;
        }
        let c = &self.config;
        let exp = c.factor.powi(self.attempt.min(64) as i32);
        let base = c.initial.as_secs_f64() * exp;
        let base = base.min(c.max.as_secs_f64()).max(0.0);
        let stretch = if c.jitter > 0.0 { 1.0 + c.jitter * rand::random::<f64>() } else { 1.0 };
        let mut delay = Duration::from_secs_f64(base * stretch);
        if let Some(ra) = retry_after {
            delay = delay.max(ra);
        }
        self.attempt = self.attempt.saturating_add(1);
        self.last_end = Some(now + delay);
        delay
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_jitter() -> BackoffConfig {
        BackoffConfig::new()
            .initial(Duration::from_millis(100))
            .max(Duration::from_secs(1))
            .jitter(0.0)
    }

    #[tokio::test(start_paused = true)]
    async fn waits_double_up_to_the_cap() {
        let mut b = Backoff::new(no_jitter());
        let waits: Vec<u128> = (0..6).map(|_| b.next_delay(None).as_millis()).collect();
        assert_eq!(waits, [100, 200, 400, 800, 1000, 1000]);
    }

    #[tokio::test(start_paused = true)]
    async fn jitter_stretches_waits_within_bounds() {
        let mut b = Backoff::new(no_jitter().jitter(1.0));
        for _ in 0..50 {
            b.reset();
            let d = b.next_delay(None);
            assert!(d >= Duration::from_millis(100) && d <= Duration::from_millis(200), "{d:?}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn retry_after_is_a_lower_bound() {
        let mut b = Backoff::new(no_jitter());
        assert_eq!(b.next_delay(Some(Duration::from_secs(3))), Duration::from_secs(3));
        assert_eq!(b.next_delay(Some(Duration::from_millis(1))), Duration::from_millis(200));
    }

    #[tokio::test(start_paused = true)]
    async fn a_quiet_period_resets_the_backoff() {
        let mut b = Backoff::new(no_jitter().reset_after(Duration::from_secs(10)));
        for _ in 0..4 {
            b.next_delay(None);
        }
        tokio::time::sleep(Duration::from_secs(11)).await;
        assert_eq!(b.next_delay(None), Duration::from_millis(100));
    }
}
