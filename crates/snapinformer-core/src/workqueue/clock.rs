//! The time source of a work queue: the real clock, Tokio's clock (which a test can pause and
//! advance), or a fake clock that moves only when told (client-go's `clock/testing`).
//!
//! A [`WorkQueue`](super::WorkQueue) reads the time from its clock for everything it times:
//! when a parked item comes due, how long an item waited and was processed, the `now` it passes
//! to its [rate limiter](super::RateLimiter), and the deadline of
//! [`get_timeout`](super::WorkQueue::get_timeout). Choose it with
//! [`WorkQueueConfig::clock`](super::WorkQueueConfig::clock).

use std::{
    fmt,
    future::Future,
    pin::Pin,
    sync::{Arc, Mutex, MutexGuard, Weak},
    time::{Duration, Instant},
};

use tokio::sync::watch;

/// A boxed future that completes once a clock reaches a deadline.
pub type Sleep = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// A function a clock calls after it jumped forward (see [`Clock::on_advance`]).
pub type AdvanceHook = Weak<dyn Fn() + Send + Sync>;

/// Where a work queue reads the time, and how its getters wait for a time to come.
///
/// Three implementations come with the crate: [`RealClock`] (the default), [`TokioClock`] and
/// [`FakeClock`]. An implementation must be monotonic: `now` never goes backwards.
pub trait Clock: Send + Sync + fmt::Debug + 'static {
    /// The time now, on this clock.
    fn now(&self) -> Instant;

    /// A future that completes once this clock reads `deadline` or later. Used by
    /// [`WorkQueue::get_async`](super::WorkQueue::get_async), inside a Tokio runtime.
    fn sleep_until(&self, deadline: Instant) -> Sleep;

    /// How long a blocked thread may sleep in real time before this clock could read
    /// `deadline`. `None` for a clock that does not follow real time: it moves only when told,
    /// and then calls the hooks registered with [`on_advance`](Clock::on_advance), which wake
    /// the blocked threads.
    fn real_time_until(&self, deadline: Instant) -> Option<Duration> {
        Some(deadline.saturating_duration_since(self.now()))
    }

    /// Registers `hook`, called after every jump of a clock that does not follow real time.
    /// Clocks that follow real time ignore it (the default). Hooks that were dropped are
    /// forgotten.
    fn on_advance(&self, hook: AdvanceHook) {
        drop(hook);
    }
}

/// The real, monotonic clock (`std::time::Instant`). The default of every work queue.
///
/// Async getters sleep with Tokio's timer; under a paused Tokio clock they would spin against
/// real time, so a queue used with a paused clock takes a [`TokioClock`] instead.
#[derive(Debug, Clone, Copy, Default)]
pub struct RealClock;

impl Clock for RealClock {
    fn now(&self) -> Instant {
        Instant::now()
    }

    fn sleep_until(&self, deadline: Instant) -> Sleep {
        Box::pin(tokio::time::sleep_until(tokio::time::Instant::from_std(deadline)))
    }
}

/// Tokio's clock (`tokio::time::Instant`): real time, unless the current runtime's clock is
/// paused (`tokio::time::pause`, `#[tokio::test(start_paused = true)]`), in which case it moves
/// only when the runtime advances it, and auto-advances to the next timer when every task is
/// idle.
///
/// Meant for queues whose getters are async ([`WorkQueue::get_async`](super::WorkQueue::get_async)),
/// as a controller runtime's are: a test can then pause time and let Tokio jump over delays
/// and backoffs. Blocking getters wait in real time for a time on this clock; do not mix them
/// with a paused clock. Outside a Tokio runtime it reads the real clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct TokioClock;

impl Clock for TokioClock {
    fn now(&self) -> Instant {
        tokio::time::Instant::now().into_std()
    }

    fn sleep_until(&self, deadline: Instant) -> Sleep {
        Box::pin(tokio::time::sleep_until(tokio::time::Instant::from_std(deadline)))
    }
}

struct FakeState {
    hooks: Vec<AdvanceHook>,
}

/// A clock that moves only when told: [`step`](FakeClock::step) or
/// [`set_time`](FakeClock::set_time) (client-go's `FakeClock` from `clock/testing`).
///
/// Queues built with it never wait in real time for a delay: a parked item comes due when the
/// test steps the clock past its time, and the step wakes every getter waiting on the queue.
/// Tests then assert "not yet" exactly (before the step) and "now" exactly (after it).
///
/// Cheap to clone: clones are handles to the same clock.
#[derive(Clone)]
pub struct FakeClock {
    time: Arc<watch::Sender<Instant>>,
    state: Arc<Mutex<FakeState>>,
}

impl fmt::Debug for FakeClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FakeClock").field("now", &*self.time.borrow()).finish_non_exhaustive()
    }
}

impl Default for FakeClock {
    fn default() -> Self {
        Self::new()
    }
}

impl FakeClock {
    /// A fake clock reading the real time now, standing still.
    pub fn new() -> Self {
        Self::starting_at(Instant::now())
    }

    /// A fake clock reading `start`, standing still.
    pub fn starting_at(start: Instant) -> Self {
        FakeClock {
            time: Arc::new(watch::Sender::new(start)),
            state: Arc::new(Mutex::new(FakeState { hooks: Vec::new() })),
        }
    }

    fn lock(&self) -> MutexGuard<'_, FakeState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Moves the clock forward by `by`, then wakes whoever waits on it.
    pub fn step(&self, by: Duration) {
        let now = *self.time.borrow();
        self.set_time(now.checked_add(by).unwrap_or(now));
    }

    /// Moves the clock to `to`, then wakes whoever waits on it. A time earlier than the clock's
    /// is ignored: the clock is monotonic.
    pub fn set_time(&self, to: Instant) {
        self.time.send_if_modified(|now| {
            if to > *now {
                *now = to;
                true
            } else {
                false
            }
        });
        // Call the hooks without the clock's lock held: a hook takes its queue's lock, and the
        // queue reads the clock under that lock.
        let hooks: Vec<Arc<dyn Fn() + Send + Sync>> = {
            let mut st = self.lock();
            st.hooks.retain(|h| h.strong_count() > 0);
            st.hooks.iter().filter_map(Weak::upgrade).collect()
        };
        for hook in hooks {
            hook();
        }
    }

    /// Number of async sleeps waiting on this clock (for example getters of a queue waiting for
    /// a parked item): client-go's `HasWaiters`, as a count.
    pub fn sleepers(&self) -> usize {
        self.time.receiver_count()
    }
}

impl Clock for FakeClock {
    fn now(&self) -> Instant {
        *self.time.borrow()
    }

    fn sleep_until(&self, deadline: Instant) -> Sleep {
        let mut rx = self.time.subscribe();
        Box::pin(async move {
            // The sender lives as long as any handle of the clock; once all are gone the time
            // can never come, so the sleep never completes.
            if rx.wait_for(|now| *now >= deadline).await.is_err() {
                std::future::pending::<()>().await;
            }
        })
    }

    fn real_time_until(&self, _deadline: Instant) -> Option<Duration> {
        None
    }

    fn on_advance(&self, hook: AdvanceHook) {
        let mut st = self.lock();
        st.hooks.retain(|h| h.strong_count() > 0);
        st.hooks.push(hook);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[test]
    fn a_fake_clock_moves_only_forward_and_only_when_told() {
        let t0 = Instant::now();
        let clock = FakeClock::starting_at(t0);
        assert_eq!(clock.now(), t0);
        clock.step(Duration::from_secs(3));
        assert_eq!(clock.now(), t0 + Duration::from_secs(3));
        clock.set_time(t0);
        assert_eq!(clock.now(), t0 + Duration::from_secs(3), "never backwards");
        assert_eq!(clock.real_time_until(t0 + Duration::from_secs(60)), None);
    }

    #[test]
    fn a_fake_clock_calls_its_live_hooks_after_each_step() {
        let clock = FakeClock::new();
        let calls = Arc::new(AtomicUsize::new(0));
        let hook: Arc<dyn Fn() + Send + Sync> = {
            let calls = calls.clone();
            Arc::new(move || {
                calls.fetch_add(1, Ordering::SeqCst);
            })
        };
        clock.on_advance(Arc::downgrade(&hook));
        clock.step(Duration::from_millis(1));
        clock.step(Duration::from_millis(1));
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        drop(hook);
        clock.step(Duration::from_millis(1));
        assert_eq!(calls.load(Ordering::SeqCst), 2, "a dropped hook is not called");
    }

    #[tokio::test]
    async fn a_fake_sleep_completes_when_the_clock_passes_its_deadline() {
        let clock = FakeClock::new();
        let deadline = clock.now() + Duration::from_secs(10);
        let mut sleep = clock.sleep_until(deadline);
        assert!(futures_poll(&mut sleep).is_pending());
        assert_eq!(clock.sleepers(), 1);
        clock.step(Duration::from_secs(9));
        assert!(futures_poll(&mut sleep).is_pending(), "not yet");
        clock.step(Duration::from_secs(1));
        assert!(futures_poll(&mut sleep).is_ready());
    }

    fn futures_poll(f: &mut Sleep) -> std::task::Poll<()> {
        let waker = std::task::Waker::noop();
        f.as_mut().poll(&mut std::task::Context::from_waker(waker))
    }
}
