//! Exponential backoff with jitter, a reset after a quiet period, and the server's
//! `Retry-After` as a lower bound.

use std::time::Duration;

use tokio::time::Instant;

/// How the reflector waits after a failure.
///
/// The `n`-th consecutive wait is `min(initial * factor^n, max)` stretched by a random factor
/// in `[1, 1 + jitter]` (client-go's `wait.Backoff` with `Jitter`), and never shorter than the
/// `Retry-After` the server asked for. After `reset_after` without a failure, the next wait
/// starts again from `initial`. The defaults are client-go's reflector defaults: 800 ms
/// doubling up to 30 s, jitter 1.0, reset after 2 minutes.
///
/// **Beyond client-go: a watch that delivers resets the backoff.** When a watch that delivered
/// at least one event (an object or a bookmark) ends, the next wait starts again from
/// `initial`: the server has just served data, so an outage that follows (an API server
/// restart) is met with short waits again, instead of with the waits the previous outage grew
/// to. A server that accepts requests and then fails them (lists that succeed before the watch
/// fails, watches that end or fail before their first event) never resets it, so it meets a
/// growing backoff; one that delivers an event and then fails each time is retried at the
/// first wait, never sooner. client-go resets only every 2 minutes (counted from its last
/// reset), so a second restart within that time meets waits of several seconds, a third one
/// of tens of seconds. [`healthy_watch`](BackoffConfig::healthy_watch) can also ask that the
/// watch stayed open for a while; `None` turns the reset off.
///
/// **Beyond client-go: refused connections are retried often.** A connection the server
/// refuses (nothing listens: the API server is down or restarting) costs the server nothing,
/// so its waits are capped at [`refused_max`](BackoffConfig::refused_max) (default 1.6 s, so
/// at most 3.2 s with jitter): a restarted server is noticed within seconds however long it
/// was down, and a server that is up only briefly between restarts is not missed (a missed
/// window would let the waits keep growing, since no watch could deliver in between). The
/// failures still count: once the server accepts connections and fails otherwise, the waits
/// go on from where they grew to. `None` applies no cap, as in client-go.
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
    /// A watch that delivered an event and stayed open at least this long resets the backoff
    /// when it ends (see the type docs). Default `Some(ZERO)`: any watch that delivered an
    /// event. `None`: only `reset_after` resets it, as in client-go.
    pub healthy_watch: Option<Duration>,
    /// The longest wait before jitter after a refused connection (see the type docs);
    /// `None`: the same waits as any other failure, as in client-go.
    pub refused_max: Option<Duration>,
}

impl Default for BackoffConfig {
    fn default() -> Self {
        BackoffConfig {
            initial: Duration::from_millis(800),
            max: Duration::from_secs(30),
            factor: 2.0,
            jitter: 1.0,
            reset_after: Duration::from_secs(120),
            healthy_watch: Some(Duration::ZERO),
            refused_max: Some(Duration::from_millis(1600)),
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

    /// Sets the cap on waits after a refused connection (`None`: no cap, as in client-go).
    pub fn refused_max(mut self, refused_max: Option<Duration>) -> Self {
        self.refused_max = refused_max;
        self
    }

    /// Sets how long a watch that delivered an event must have been open to reset the
    /// backoff when it ends (`None`: never, as in client-go).
    pub fn healthy_watch(mut self, healthy_watch: Option<Duration>) -> Self {
        self.healthy_watch = healthy_watch;
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

    /// The wait before the next retry after a refused connection: like
    /// [`next_delay`](Backoff::next_delay), but capped at
    /// [`BackoffConfig::refused_max`] before jitter.
    pub fn next_refused_delay(&mut self) -> Duration {
        let cap = self.config.refused_max;
        self.delay(None, cap)
    }

    /// The wait before the next retry, given the server's `Retry-After` if any.
    pub fn next_delay(&mut self, retry_after: Option<Duration>) -> Duration {
        self.delay(retry_after, None)
    }

    fn delay(&mut self, retry_after: Option<Duration>, cap: Option<Duration>) -> Duration {
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
        let max = cap.map_or(c.max, |cap| cap.min(c.max));
        let base = base.min(max.as_secs_f64()).max(0.0);
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
    async fn refused_connections_are_retried_at_most_at_the_refused_cap_and_still_count() {
        let mut b = Backoff::new(
            no_jitter().max(Duration::from_secs(10)).refused_max(Some(Duration::from_millis(300))),
        );
        let waits: Vec<u128> = (0..5).map(|_| b.next_refused_delay().as_millis()).collect();
        assert_eq!(waits, [100, 200, 300, 300, 300]);
        assert_eq!(b.next_delay(None).as_millis(), 3200, "the refusals counted");
        let mut uncapped = Backoff::new(no_jitter().refused_max(None));
        let waits: Vec<u128> = (0..4).map(|_| uncapped.next_refused_delay().as_millis()).collect();
        assert_eq!(waits, [100, 200, 400, 800]);
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
