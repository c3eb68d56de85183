//! Staleness from each event's scheduled slot, not from its entry into the queue.
//!
//! The in-process cluster model delivers events on a fixed schedule: slot *k* is due at
//! `start + k / rate`. When its stream thread is descheduled it falls behind and then delivers
//! the overdue slots in a burst. Measuring staleness from the moment an event entered the queue
//! would leave out the time it spent overdue (coordinated omission: the lateness is hidden
//! exactly when the system is under most pressure). So the stream records each delivered
//! event's scheduled slot in a [`SlotLog`], and staleness is measured from there; the stream's
//! own lateness (delivery minus slot) is reported too, so that the cache's part and the
//! stream's part can be told apart.
//!
//! Events are applied in the order they were delivered (the queues are FIFOs), and the log is
//! kept in that order, keyed by resource version: finding an event's slot pops the log's front.

use std::{
    collections::VecDeque,
    sync::Mutex,
    time::{Duration, Instant},
};

use crate::harness::stats::Latency;

/// Scheduled slots of delivered events, in delivery order, by resource version.
#[derive(Debug, Default)]
pub struct SlotLog {
    slots: Mutex<VecDeque<(u64, Instant)>>,
}

impl SlotLog {
    /// An empty log.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records that the event with resource version `rv` was scheduled at `slot` (called by
    /// the stream before it hands the event to the queue).
    pub fn push(&self, rv: u64, slot: Instant) {
        self.slots.lock().unwrap_or_else(|e| e.into_inner()).push_back((rv, slot));
    }

    /// The slot of the event with resource version `rv`, forgetting it and every earlier event
    /// (which have been applied before it). `None` if the log has no such event.
    pub fn take(&self, rv: u64) -> Option<Instant> {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        while let Some(&(front, slot)) = slots.front() {
            if front > rv {
                return None;
            }
            slots.pop_front();
            if front == rv {
                return Some(slot);
            }
        }
        None
    }

    /// Events recorded and not yet taken.
    pub fn len(&self) -> usize {
        self.slots.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Whether nothing is recorded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Staleness of applied events: from the scheduled slot where there is one (in process), and
/// from the queue entry.
#[derive(Debug, Default, Clone)]
pub struct Staleness {
    /// From the event's scheduled slot (or its queue entry when it has no slot: over HTTP, where
    /// the server's watch has no schedule).
    pub from_slot: Latency,
    /// From the event's entry into the queue.
    pub from_queue: Latency,
    /// Events that had a scheduled slot.
    pub with_slot: u64,
}

impl Staleness {
    /// Records an event that entered the queue at `enqueued_at`, became visible at `visible_at`,
    /// and was scheduled at `slot` if it had one.
    pub fn record(&mut self, slot: Option<Instant>, enqueued_at: Instant, visible_at: Instant) {
        let queued = visible_at.saturating_duration_since(enqueued_at);
        self.from_queue.record(queued);
        match slot {
            Some(slot) => {
                self.with_slot += 1;
                self.from_slot.record(visible_at.saturating_duration_since(slot));
            }
            None => self.from_slot.record(queued),
        }
    }

    /// Adds `other`'s events.
    pub fn merge(&mut self, other: &Staleness) {
        self.from_slot.merge(&other.from_slot);
        self.from_queue.merge(&other.from_queue);
        self.with_slot += other.with_slot;
    }
}

/// The stream's lateness: delivery time minus scheduled slot, per delivered event.
#[derive(Debug, Default)]
pub struct Lateness(Mutex<Latency>);

impl Lateness {
    /// Records one delivery `late` after its slot.
    pub fn record(&self, late: Duration) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).record(late);
    }

    /// The distribution so far.
    pub fn latency(&self) -> Latency {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_late_burst_counts_from_its_scheduled_slots_not_from_its_delivery() {
        // 100 events scheduled 1 ms apart; the stream was descheduled and delivered them all at
        // once 100 ms after the first slot; the cache made them visible 1 ms later.
        let start = Instant::now();
        let log = SlotLog::new();
        let delivered = start + Duration::from_millis(100);
        for i in 0..100u64 {
            log.push(i + 1, start + Duration::from_millis(i));
        }
        let visible = delivered + Duration::from_millis(1);
        let mut s = Staleness::default();
        for rv in 1..=100u64 {
            s.record(log.take(rv), delivered, visible);
        }
        let from_slot = s.from_slot.summary();
        let from_queue = s.from_queue.summary();
        assert_eq!(s.with_slot, 100);
        assert!(from_slot.max >= 100_000 && from_slot.max < 102_000, "{from_slot:?}");
        assert!(from_slot.p50 >= 50_000, "{from_slot:?}");
        assert!(from_queue.max <= 1_100, "the queue alone shows 1 ms: {from_queue:?}");
        assert!(log.is_empty());
    }

    #[test]
    fn taking_a_slot_forgets_the_earlier_ones_and_a_missing_version_has_none() {
        let t = Instant::now();
        let log = SlotLog::new();
        log.push(3, t);
        log.push(5, t + Duration::from_millis(1));
        log.push(9, t + Duration::from_millis(2));
        assert_eq!(log.take(5), Some(t + Duration::from_millis(1)));
        assert_eq!(log.len(), 1, "3 was applied before 5");
        assert_eq!(log.take(7), None, "7 was never delivered with a slot");
        assert_eq!(log.take(9), Some(t + Duration::from_millis(2)));
        assert_eq!(log.take(10), None);
    }

    #[test]
    fn events_without_a_slot_count_from_their_queue_entry() {
        let t = Instant::now();
        let mut s = Staleness::default();
        s.record(None, t, t + Duration::from_millis(3));
        assert_eq!(s.with_slot, 0);
        assert_eq!(s.from_slot.summary(), s.from_queue.summary());
    }
}
