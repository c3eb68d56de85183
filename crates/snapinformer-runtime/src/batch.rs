//! Slow-start batches: many writes of one reconcile, issued in growing concurrent batches that
//! stop at the first batch with a failure (client-go's `slowStartBatch`).

use std::future::Future;

/// client-go's `SlowStartInitialBatchSize`: the first batch holds one call.
pub const SLOW_START_INITIAL_BATCH: usize = 1;

/// What [`slow_start_batch`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub struct SlowStart<E> {
    /// Calls that returned `Ok`.
    pub succeeded: usize,
    /// Calls never made: the ones after the batch in which a call failed.
    pub skipped: usize,
    /// The error of the first call (in index order) that failed, if one did.
    pub error: Option<E>,
}

impl<E> SlowStart<E> {
    /// `Ok(succeeded)` if no call failed, else the first error.
    pub fn into_result(self) -> Result<usize, E> {
        match self.error {
            None => Ok(self.succeeded),
            Some(e) => Err(e),
        }
    }
}

/// Calls `call(i)` for `i` in `0..count` in batches: the first of `initial` calls, each next
/// one twice the size of the previous (at most `max_batch`, when given). The calls of one
/// batch run concurrently; after a batch in which a call failed, no further batch starts
/// (every call of that batch still completes).
///
/// This is client-go's `slowStartBatch`, which its StatefulSet (batches up to 500), DaemonSet,
/// ReplicaSet and Job controllers use to create many objects: when the first writes fail (the
/// quota is exhausted, the namespace is terminating, the cache was stale and the objects
/// exist), a sync makes a few failing requests instead of hundreds.
///
/// Costs: one future per call of the running batch, polled together; nothing else is
/// allocated.
pub async fn slow_start_batch<E, F, Fut>(
    count: usize,
    initial: usize,
    max_batch: Option<usize>,
    mut call: F,
) -> SlowStart<E>
where
    F: FnMut(usize) -> Fut,
    Fut: Future<Output = Result<(), E>>,
{
    let cap = max_batch.unwrap_or(usize::MAX).max(1);
    let mut size = initial.max(1).min(cap);
    let (mut next, mut succeeded) = (0, 0);
    while next < count {
        let end = next.saturating_add(size).min(count);
        let results = futures::future::join_all((next..end).map(&mut call)).await;
        let mut error = None;
        for result in results {
            match result {
                Ok(()) => succeeded += 1,
                Err(e) => {
                    error.get_or_insert(e);
                }
            }
        }
        if error.is_some() {
            return SlowStart { succeeded, skipped: count - end, error };
        }
        next = end;
        size = size.saturating_mul(2).min(cap);
    }
    SlowStart { succeeded, skipped: 0, error: None }
}

#[cfg(test)]
mod tests {
    use std::{
        sync::{
            Mutex,
            atomic::{AtomicUsize, Ordering},
        },
        time::Duration,
    };

    use tokio::time::Instant;

    use super::*;

    /// The index of the last call made when the call at `failing` fails.
    async fn last_call_when_failing_at(failing: usize, cap: Option<usize>) -> usize {
        let last = AtomicUsize::new(0);
        let _ = slow_start_batch(5000, 1, cap, |j| {
            last.fetch_max(j, Ordering::Relaxed);
            async move { if j == failing { Err(()) } else { Ok(()) } }
        })
        .await;
        last.into_inner()
    }

    #[tokio::test]
    async fn a_failure_stops_after_its_batch_and_every_call_of_that_batch_is_made() {
        let calls = Mutex::new(Vec::new());
        let out = slow_start_batch(10, 1, None, |i| {
            calls.lock().unwrap().push(i);
            async move { if i == 4 { Err(i) } else { Ok(()) } }
        })
        .await;
        // Batches [0], [1, 2], [3, 4, 5, 6]: the whole failed batch runs, nothing after it.
        assert_eq!(*calls.lock().unwrap(), (0..=6).collect::<Vec<_>>());
        assert_eq!(out, SlowStart { succeeded: 6, skipped: 3, error: Some(4) });
        assert_eq!(out.into_result(), Err(4));
        let all = slow_start_batch(1200, 1, Some(500), |_| async { Ok::<(), ()>(()) }).await;
        assert_eq!(all.into_result(), Ok(1200));
        let none = slow_start_batch(0, 1, None, |_| async { Err::<(), ()>(()) }).await;
        assert_eq!(none, SlowStart { succeeded: 0, skipped: 0, error: None });
    }

    #[tokio::test]
    async fn batches_double_up_to_their_cap() {
        assert_eq!(last_call_when_failing_at(0, Some(500)).await, 0);
        assert_eq!(last_call_when_failing_at(2, Some(500)).await, 2);
        assert_eq!(last_call_when_failing_at(3, Some(500)).await, 6);
        // 1 + 2 + ... + 256 = 511 calls, then batches of 500.
        assert_eq!(last_call_when_failing_at(511, Some(500)).await, 1010);
        assert_eq!(last_call_when_failing_at(511, None).await, 1022);
    }

    #[tokio::test(start_paused = true)]
    async fn the_calls_of_one_batch_run_concurrently() {
        // Batches [0], [1, 2], [3, 4, 5, 6]; each call takes 10 ms: 30 ms in all, not 70.
        let started = Instant::now();
        let out = slow_start_batch(7, 1, None, |_| async {
            tokio::time::sleep(Duration::from_millis(10)).await;
            Ok::<(), ()>(())
        })
        .await;
        assert_eq!(out.into_result(), Ok(7));
        assert_eq!(started.elapsed(), Duration::from_millis(30));
    }
}
