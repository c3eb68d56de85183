//! Rate limiters: how long an item waits before it is retried.

use std::{
    any::Any,
    collections::HashMap,
    fmt,
    hash::{BuildHasher, Hash, RandomState},
    sync::{Arc, Mutex, MutexGuard},
    time::{Duration, Instant},
};

/// Decides how long an item waits before it is retried: per item (failure counts) or overall (a
/// shared budget), client-go's `RateLimiter` idea.
///
/// [`WorkQueue::add_rate_limited`](super::WorkQueue::add_rate_limited) asks [`when`] and queues
/// the item after that delay; [`WorkQueue::forget`](super::WorkQueue::forget) calls [`forget`]
/// once an item succeeded. Every call takes `&self`: implementations keep their state behind
/// their own lock and must be cheap, since `when` runs on every failed reconcile.
///
/// Implemented for `Box<R>` and `Arc<R>` of any limiter (so a limiter can be shared by several
/// queues, or combined with [`MaxOf`]).
///
/// [`when`]: RateLimiter::when
/// [`forget`]: RateLimiter::forget
#[doc(alias = "TypedRateLimiter")]
pub trait RateLimiter<K>: Send + Sync + 'static {
    /// The delay before `item` may be retried, asked at `now`. Counts as one failure (or
    /// consumes one token): calling it twice gives two delays.
    fn when(&self, item: &K, now: Instant) -> Duration;
    /// Resets `item`'s failure count (call once it succeeded). Overall limiters ignore it.
    fn forget(&self, item: &K);
    /// How many times `item` failed since it was last forgotten (0 for overall limiters).
    #[doc(alias = "NumRequeues")]
    fn retries(&self, item: &K) -> u32;
}

impl<K, R: RateLimiter<K> + ?Sized> RateLimiter<K> for Box<R> {
    fn when(&self, item: &K, now: Instant) -> Duration {
        (**self).when(item, now)
    }
    fn forget(&self, item: &K) {
        (**self).forget(item)
    }
    fn retries(&self, item: &K) -> u32 {
        (**self).retries(item)
    }
}

impl<K, R: RateLimiter<K> + ?Sized> RateLimiter<K> for Arc<R> {
    fn when(&self, item: &K, now: Instant) -> Duration {
        (**self).when(item, now)
    }
    fn forget(&self, item: &K) {
        (**self).forget(item)
    }
    fn retries(&self, item: &K) -> u32 {
        (**self).retries(item)
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// One item of any type, boxed, with its failure count.
type Slot = (Box<dyn Any + Send + Sync>, u32);

/// Failure counts per item, for items of any `Hash + Eq` type: entries are bucketed by the
/// item's hash and compared exactly (after a downcast), so distinct items never share a count,
/// and items of different types never match.
#[derive(Default)]
struct FailureCounts {
    hasher: RandomState,
    buckets: Mutex<HashMap<u64, Vec<Slot>>>,
}

impl FailureCounts {
    fn find<'a, K: Eq + 'static>(bucket: &'a mut [Slot], item: &K) -> Option<&'a mut u32> {
        bucket.iter_mut().find(|(k, _)| k.downcast_ref::<K>() == Some(item)).map(|(_, count)| count)
    }

    /// Increments `item`'s count and returns the count before the increment.
    fn bump<K: Hash + Eq + Clone + Send + Sync + 'static>(&self, item: &K) -> u32 {
        let hash = self.hasher.hash_one(item);
        let mut buckets = lock(&self.buckets);
        let bucket = buckets.entry(hash).or_default();
        if let Some(count) = Self::find(bucket, item) {
            let before = *count;
            *count = count.saturating_add(1);
            return before;
        }
        bucket.push((Box::new(item.clone()), 1));
        0
    }

    fn get<K: Hash + Eq + 'static>(&self, item: &K) -> u32 {
        let hash = self.hasher.hash_one(item);
        let mut buckets = lock(&self.buckets);
        buckets.get_mut(&hash).and_then(|b| Self::find(b, item).copied()).unwrap_or(0)
    }

    fn remove<K: Hash + Eq + 'static>(&self, item: &K) {
        let hash = self.hasher.hash_one(item);
        let mut buckets = lock(&self.buckets);
        if let Some(bucket) = buckets.get_mut(&hash) {
            bucket.retain(|(k, _)| k.downcast_ref::<K>() != Some(item));
            if bucket.is_empty() {
                buckets.remove(&hash);
            }
        }
    }

    fn len(&self) -> usize {
        lock(&self.buckets).values().map(Vec::len).sum()
    }
}

/// Per-item exponential backoff: an item's `n`-th consecutive failure waits `base * 2^(n-1)`,
/// capped at `max`, until it is forgotten.
///
/// # Guarantees
///
/// - The first [`when`](RateLimiter::when) for an item returns `base`, each further one doubles
///   it, never past `max`; arithmetic saturates (no overflow, however many failures).
/// - [`forget`](RateLimiter::forget) resets the item to "never failed"; other items are not
///   affected. `now` is ignored: the delay depends only on the failure count.
/// - One limiter serves items of any `Hash + Eq + Clone` type; distinct items never share a
///   count (they are compared exactly, not only by hash).
///
/// # Costs
///
/// One mutex acquisition and one hash per call; one boxed copy of each item that failed and was
/// not forgotten yet. Forget items once they succeed, or the table grows with every item that
/// ever failed.
#[doc(alias = "ItemExponentialFailureRateLimiter")]
#[doc(alias = "NewItemExponentialFailureRateLimiter")]
pub struct ExponentialBackoff {
    base: Duration,
    max: Duration,
    failures: FailureCounts,
}

impl ExponentialBackoff {
    /// A backoff starting at `base` and capped at `max` (a `max` below `base` caps at `base`).
    pub fn new(base: Duration, max: Duration) -> Self {
        ExponentialBackoff { base, max: max.max(base), failures: FailureCounts::default() }
    }

    /// The delay after `failures` earlier failures: `base * 2^failures`, capped at `max`.
    pub fn delay_for(&self, failures: u32) -> Duration {
        if failures >= 64 {
            return self.max;
        }
        let nanos = self.base.as_nanos().saturating_mul(1u128 << failures);
        if nanos >= self.max.as_nanos() {
            return self.max;
        }
        // Below `max`, so it fits in a Duration.
        let secs = u64::try_from(nanos / 1_000_000_000).unwrap_or(u64::MAX);
        Duration::new(secs, (nanos % 1_000_000_000) as u32)
    }

    /// Number of items with a failure count (not forgotten yet).
    pub fn tracked_items(&self) -> usize {
        self.failures.len()
    }
}

impl fmt::Debug for ExponentialBackoff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExponentialBackoff")
            .field("base", &self.base)
            .field("max", &self.max)
            .field("tracked_items", &self.tracked_items())
            .finish()
    }
}

impl<K: Hash + Eq + Clone + Send + Sync + 'static> RateLimiter<K> for ExponentialBackoff {
    fn when(&self, item: &K, _now: Instant) -> Duration {
        self.delay_for(self.failures.bump(item))
    }
    fn forget(&self, item: &K) {
        self.failures.remove(item);
    }
    fn retries(&self, item: &K) -> u32 {
        self.failures.get(item)
    }
}

#[derive(Debug)]
struct Bucket {
    /// Tokens available at `at` (negative: tokens already promised to waiting callers).
    tokens: f64,
    /// When `tokens` was computed (`None` before the first call: the bucket starts full).
    at: Option<Instant>,
}

/// An overall token bucket shared by all items: up to `burst` retries at once, then one every
/// `1/qps` seconds on average, whichever items they are for.
///
/// # Guarantees
///
/// - The bucket starts full. Each [`when`](RateLimiter::when) takes one token: with one
///   available the delay is zero, otherwise the caller reserves the next token and the delay
///   is the time until it exists. Delays given out in a row are therefore spaced `1/qps` apart
///   after the burst is used up.
/// - Tokens refill at `qps` per second of the `now`s passed in, never above `burst`. A `now`
///   earlier than one already seen refills nothing (time never runs backwards).
/// - `qps` of `f64::INFINITY` never delays. A `qps` that is zero, negative or NaN never
///   refills: after the burst every delay is [`Duration::MAX`] (the queue then keeps the item
///   until it shuts down). A `burst` of 0 is treated as 1.
/// - Per-item methods do nothing: `forget` is a no-op and `retries` is 0.
///
/// # Costs
///
/// One mutex acquisition per `when`; no per-item memory.
#[doc(alias = "BucketRateLimiter")]
pub struct TokenBucket {
    qps: f64,
    burst: f64,
    state: Mutex<Bucket>,
}

impl TokenBucket {
    /// A bucket refilling at `qps` tokens per second and holding at most `burst` (see the type's
    /// documentation for the edge values).
    pub fn new(qps: f64, burst: u32) -> Self {
        let qps = if qps.is_nan() || qps < 0.0 { 0.0 } else { qps };
        TokenBucket {
            qps,
            burst: f64::from(burst.max(1)),
            state: Mutex::new(Bucket { tokens: 0.0, at: None }),
        }
    }

    /// Takes one token at `now` and returns how long the caller waits for it.
    fn take(&self, now: Instant) -> Duration {
        if self.qps.is_infinite() {
            return Duration::ZERO;
        }
        let mut b = lock(&self.state);
        match b.at {
            None => {
                b.tokens = self.burst;
                b.at = Some(now);
            }
            Some(at) if now > at => {
                let refill = now.duration_since(at).as_secs_f64() * self.qps;
                b.tokens = (b.tokens + refill).min(self.burst);
                b.at = Some(now);
            }
            Some(_) => {}
        }
        b.tokens -= 1.0;
        if b.tokens >= 0.0 {
            return Duration::ZERO;
        }
        Duration::try_from_secs_f64(-b.tokens / self.qps).unwrap_or(Duration::MAX)
    }
}

impl fmt::Debug for TokenBucket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenBucket")
            .field("qps", &self.qps)
            .field("burst", &self.burst)
            .field("tokens", &lock(&self.state).tokens)
            .finish()
    }
}

impl<K> RateLimiter<K> for TokenBucket {
    fn when(&self, _item: &K, now: Instant) -> Duration {
        self.take(now)
    }
    fn forget(&self, _item: &K) {}
    fn retries(&self, _item: &K) -> u32 {
        0
    }
}

/// Several limiters at once: the delay is the largest of theirs.
///
/// Every limiter is asked on each [`when`](RateLimiter::when) (so each records the failure or
/// takes its token), [`forget`](RateLimiter::forget) reaches all of them, and
/// [`retries`](RateLimiter::retries) is the largest count. With no limiters the delay is zero.
#[doc(alias = "MaxOfRateLimiter")]
#[doc(alias = "NewMaxOfRateLimiter")]
pub struct MaxOf<K> {
    limiters: Vec<Box<dyn RateLimiter<K>>>,
}

impl<K> MaxOf<K> {
    /// Combines `limiters`.
    pub fn new(limiters: Vec<Box<dyn RateLimiter<K>>>) -> Self {
        MaxOf { limiters }
    }

    /// Adds one more limiter (builder style).
    #[must_use]
    pub fn with(mut self, limiter: impl RateLimiter<K>) -> Self {
        self.limiters.push(Box::new(limiter));
        self
    }

    /// Number of combined limiters.
    pub fn len(&self) -> usize {
        self.limiters.len()
    }

    /// Whether no limiter is combined (every delay is zero).
    pub fn is_empty(&self) -> bool {
        self.limiters.is_empty()
    }
}

impl<K> fmt::Debug for MaxOf<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MaxOf").field("limiters", &self.limiters.len()).finish()
    }
}

impl<K: 'static> RateLimiter<K> for MaxOf<K> {
    fn when(&self, item: &K, now: Instant) -> Duration {
        self.limiters.iter().map(|l| l.when(item, now)).max().unwrap_or(Duration::ZERO)
    }
    fn forget(&self, item: &K) {
        for l in &self.limiters {
            l.forget(item);
        }
    }
    fn retries(&self, item: &K) -> u32 {
        self.limiters.iter().map(|l| l.retries(item)).max().unwrap_or(0)
    }
}

/// The controller default: the largest of a per-item [`ExponentialBackoff`] from 5 ms to
/// 1000 s and an overall [`TokenBucket`] of 10 qps with a burst of 100 (the values of
/// client-go's `DefaultControllerRateLimiter`).
#[doc(alias = "DefaultControllerRateLimiter")]
#[doc(alias = "DefaultTypedControllerRateLimiter")]
pub fn default_controller_rate_limiter<K: Hash + Eq + Clone + Send + Sync + 'static>() -> MaxOf<K> {
    MaxOf::new(vec![
        Box::new(ExponentialBackoff::new(Duration::from_millis(5), Duration::from_secs(1000))),
        Box::new(TokenBucket::new(10.0, 100)),
    ])
}
