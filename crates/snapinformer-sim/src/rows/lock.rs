//! The reader/writer lock of the locked baselines, in two flavours: Go's hand-off and std's.
//!
//! Go's `sync.RWMutex`: a writer that asks for the lock blocks new readers and waits for the
//! active ones; its `Unlock` then admits every reader that was waiting, before any later writer
//! (the next `Lock` waits for those readers to leave). So while a reader waits, the writer gets
//! at most one more turn. [`LockFlavor::HandOff`] does the same with parking_lot's `RwLock`,
//! whose writes are released with `unlock_fair`: the lock passes directly to the threads
//! parked on it (every waiting reader, up to the first waiting writer), which hold it before
//! the releasing writer can take it again. New readers also wait behind a waiting writer, as in
//! Go.
//!
//! [`LockFlavor::Std`] is std's `RwLock` (futex-based on Linux): a released write lock wakes the
//! waiting readers, but the writer may take the lock again before they have run, so a writer
//! applying event after event can hold readers off for many events in a row.

use std::sync::Arc;

use parking_lot::RwLockWriteGuard;

/// How the write lock is released.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockFlavor {
    /// Hand the lock to the readers waiting for it (Go's `RWMutex.Unlock`).
    HandOff,
    /// std's `RwLock`: waiting readers are woken; the writer may take the lock again first.
    Std,
}

enum Inner<T> {
    HandOff(parking_lot::RwLock<T>),
    Std(std::sync::RwLock<T>),
}

/// A value behind a reader/writer lock of the chosen [`LockFlavor`].
pub struct RwCell<T> {
    inner: Inner<T>,
}

impl<T> RwCell<T> {
    /// `value` behind a lock of `flavor`.
    pub fn new(flavor: LockFlavor, value: T) -> Self {
        let inner = match flavor {
            LockFlavor::HandOff => Inner::HandOff(parking_lot::RwLock::new(value)),
            LockFlavor::Std => Inner::Std(std::sync::RwLock::new(value)),
        };
        RwCell { inner }
    }

    /// The lock's flavour.
    pub fn flavor(&self) -> LockFlavor {
        match self.inner {
            Inner::HandOff(_) => LockFlavor::HandOff,
            Inner::Std(_) => LockFlavor::Std,
        }
    }

    /// Runs `f` under the read lock.
    pub fn read<R>(&self, f: impl FnOnce(&T) -> R) -> R {
        match &self.inner {
            Inner::HandOff(lock) => f(&lock.read()),
            Inner::Std(lock) => f(&lock.read().unwrap_or_else(|e| e.into_inner())),
        }
    }

    /// Runs `f` under the write lock, then releases it (with a hand-off for
    /// [`LockFlavor::HandOff`]).
    pub fn write<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        match &self.inner {
            Inner::HandOff(lock) => {
                let mut guard = lock.write();
                let out = f(&mut guard);
                RwLockWriteGuard::unlock_fair(guard);
                out
            }
            Inner::Std(lock) => f(&mut lock.write().unwrap_or_else(|e| e.into_inner())),
        }
    }
}

impl<T> std::fmt::Debug for RwCell<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RwCell").field("flavor", &self.flavor()).finish_non_exhaustive()
    }
}

/// How many writer turns a reader waited for, measured by [`reader_wait_turns`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WaitTurns {
    /// Reads that completed.
    pub reads: u64,
    /// The most writer turns that ended while one read was waiting for the lock.
    pub max_turns: u64,
}

/// Measures how a lock of `flavor` treats a waiting reader: a writer takes the lock `turns`
/// times back to back, holding it `hold` each time, while a reader reads again and again. Each
/// read counts the writer turns that ended between its request and its acquisition. With a
/// hand-off that is at most one (the turn during which it asked); without, the writer can take
/// the lock again and again while the woken reader is still being scheduled.
pub fn reader_wait_turns(flavor: LockFlavor, turns: u64, hold: std::time::Duration) -> WaitTurns {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let cell = Arc::new(RwCell::new(flavor, ()));
    let ended = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let (cell, ended, stop) = (cell.clone(), ended.clone(), stop.clone());
        std::thread::spawn(move || {
            let (mut reads, mut max_turns) = (0u64, 0u64);
            while !stop.load(Ordering::Acquire) {
                let asked = ended.load(Ordering::Acquire);
                let got = cell.read(|()| ended.load(Ordering::Acquire));
                reads += 1;
                max_turns = max_turns.max(got - asked);
            }
            WaitTurns { reads, max_turns }
        })
    };
    for _ in 0..turns {
        cell.write(|()| {
            std::thread::sleep(hold);
            ended.fetch_add(1, Ordering::AcqRel);
        });
    }
    stop.store(true, Ordering::Release);
    reader.join().expect("reader thread panicked")
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// Up to three measurements of `flavor` (40 turns of 20 ms), stopping at the first that
    /// `done` accepts; returns them all.
    ///
    /// One measurement can overcount: the reader notes the turns ended, then asks for the lock,
    /// and if it is preempted between the two for longer than a turn (it happened once in CI, on
    /// a loaded machine), the writer's next turn starts before the reader waits, and counts as
    /// one it waited through. That takes a preemption at one precise point; a lock without the
    /// hand-off makes a reader wait through many turns in every measurement.
    fn measure_until(flavor: LockFlavor, done: impl Fn(&WaitTurns) -> bool) -> Vec<WaitTurns> {
        let mut seen = Vec::new();
        for _ in 0..3 {
            let turns = reader_wait_turns(flavor, 40, Duration::from_millis(20));
            eprintln!("{flavor:?}: {turns:?}");
            seen.push(turns);
            if done(&turns) {
                break;
            }
        }
        seen
    }

    #[test]
    fn a_released_write_lock_goes_to_the_reader_waiting_for_it() {
        // The writer holds the lock 20 ms per turn, long enough for the reader to park; with a
        // hand-off the reader gets the lock at the end of the turn during which it asked, so it
        // never sees more than that one turn end while it waits.
        let seen = measure_until(LockFlavor::HandOff, |t| t.max_turns <= 1);
        let last = seen.last().expect("at least one measurement");
        assert!(last.max_turns <= 1, "a reader waited several writer turns in every try: {seen:?}");
        assert!(last.reads >= 20, "the reader got the lock only {} times", last.reads);
    }

    #[test]
    fn std_lock_lets_the_writer_take_it_again_before_the_woken_reader() {
        // The contrast that shows the measurement can tell the two apart.
        let seen = measure_until(LockFlavor::Std, |t| t.max_turns >= 2);
        assert!(
            seen.iter().any(|t| t.max_turns >= 2),
            "std's lock handed off to the reader in every try: {seen:?}"
        );
    }

    #[test]
    fn both_flavours_give_readers_and_writers_the_value() {
        for flavor in [LockFlavor::HandOff, LockFlavor::Std] {
            let cell = RwCell::new(flavor, 1u32);
            cell.write(|v| *v += 1);
            assert_eq!(cell.read(|v| *v), 2, "{flavor:?}");
            assert_eq!(cell.flavor(), flavor);
        }
    }
}
