//! Expectations: creates and deletes a controller made that its caches have not shown yet
//! (client-go's `ControllerExpectations` for creates, its UID-tracking variant for deletes).

use std::{
    collections::HashMap,
    sync::{Mutex, MutexGuard},
    time::Duration,
};

use prometheus_client::metrics::{counter::Counter, gauge::Gauge};
use tokio::time::Instant;

use crate::ObjectKey;

/// What one reconciled key still expects to see.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pending {
    /// Creates not observed yet (an add event of an object this key controls).
    pub adds: u32,
    /// Deletes not observed yet (the object gone, or shown terminating).
    pub deletes: u32,
}

impl Pending {
    /// Whether nothing is pending.
    pub fn is_empty(&self) -> bool {
        self.adds == 0 && self.deletes == 0
    }
}

#[derive(Debug)]
struct Entry {
    adds: u32,
    deletes: u32,
    /// When the entry last changed upwards; it expires `timeout` later.
    since: Instant,
}

#[derive(Debug, Default)]
struct Table {
    by_owner: HashMap<ObjectKey, Entry>,
    /// Expected deletes: the deleted object's key to its owner's key. Keyed by the object, so
    /// that seeing a delete twice (terminating, then gone) lowers it once.
    deleting: HashMap<ObjectKey, ObjectKey>,
    adds: i64,
    deletes: i64,
}

/// The metrics the table keeps up to date.
#[derive(Debug, Clone, Default)]
pub(crate) struct ExpectationMetrics {
    pub(crate) adds: Gauge,
    pub(crate) deletes: Gauge,
    pub(crate) expired: Counter,
}

/// Per reconciled key: how many creates and which deletes are still unobserved.
///
/// Raised by the runtime's [`Tracked`](crate::Tracked) writes *before* the request is sent (so
/// an event can never arrive before its expectation), lowered again when the write fails, and
/// lowered by the owned objects' events. An entry that has not been raised for `timeout`
/// counts as satisfied (and is dropped and counted as expired), so a lost event delays a
/// controller, never stops it.
#[derive(Debug)]
pub(crate) struct Expectations {
    table: Mutex<Table>,
    metrics: ExpectationMetrics,
}

impl Expectations {
    pub(crate) fn new(metrics: ExpectationMetrics) -> Self {
        Expectations { table: Mutex::new(Table::default()), metrics }
    }

    fn lock(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn publish(&self, t: &Table) {
        self.metrics.adds.set(t.adds);
        self.metrics.deletes.set(t.deletes);
    }

    fn entry<'t>(t: &'t mut Table, owner: &ObjectKey) -> &'t mut Entry {
        let e = t.by_owner.entry(owner.clone()).or_insert_with(|| Entry {
            adds: 0,
            deletes: 0,
            since: Instant::now(),
        });
        e.since = Instant::now();
        e
    }

    fn prune(t: &mut Table, owner: &ObjectKey) {
        if t.by_owner.get(owner).is_some_and(|e| e.adds == 0 && e.deletes == 0) {
            t.by_owner.remove(owner);
        }
    }

    /// `owner` is about to create an object it controls.
    pub(crate) fn expect_add(&self, owner: &ObjectKey) {
        let mut t = self.lock();
        Self::entry(&mut t, owner).adds += 1;
        t.adds += 1;
        self.publish(&t);
    }

    /// An add expected by `owner` was seen (or its create failed).
    pub(crate) fn observe_add(&self, owner: &ObjectKey) {
        let mut t = self.lock();
        let Some(e) = t.by_owner.get_mut(owner) else { return };
        if e.adds == 0 {
            return;
        }
        e.adds -= 1;
        t.adds -= 1;
        Self::prune(&mut t, owner);
        self.publish(&t);
    }

    /// `owner` is about to delete the object `obj`.
    pub(crate) fn expect_delete(&self, owner: &ObjectKey, obj: ObjectKey) {
        let mut t = self.lock();
        if let Some(previous) = t.deleting.insert(obj, owner.clone()) {
            // Already expected (a second delete of the same object): count it once.
            t.by_owner.entry(previous.clone()).and_modify(|e| e.deletes -= 1);
            t.deletes -= 1;
            Self::prune(&mut t, &previous);
        }
        Self::entry(&mut t, owner).deletes += 1;
        t.deletes += 1;
        self.publish(&t);
    }

    /// The object `obj` was seen deleted or terminating (or its delete failed).
    pub(crate) fn observe_delete(&self, obj: &ObjectKey) {
        let mut t = self.lock();
        let Some(owner) = t.deleting.remove(obj) else { return };
        if let Some(e) = t.by_owner.get_mut(&owner) {
            e.deletes -= 1;
            t.deletes -= 1;
        }
        Self::prune(&mut t, &owner);
        self.publish(&t);
    }

    /// What `owner` still expects; an entry not raised for `timeout` is dropped (and counted)
    /// and reads as nothing pending.
    pub(crate) fn pending(&self, owner: &ObjectKey, timeout: Duration) -> Pending {
        let mut t = self.lock();
        let Some(e) = t.by_owner.get(owner) else { return Pending::default() };
        if e.since.elapsed() < timeout {
            return Pending { adds: e.adds, deletes: e.deletes };
        }
        let Some(e) = t.by_owner.remove(owner) else { return Pending::default() };
        t.adds -= i64::from(e.adds);
        t.deletes -= i64::from(e.deletes);
        t.deleting.retain(|_, o| o != owner);
        self.metrics.expired.inc();
        tracing::debug!(%owner, adds = e.adds, deletes = e.deletes, "expectations expired");
        self.publish(&t);
        Pending::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Duration = Duration::from_secs(300);

    fn k(s: &str) -> ObjectKey {
        ObjectKey::parse(s)
    }

    #[test]
    fn adds_are_counted_and_deletes_are_tracked_per_object() {
        let e = Expectations::new(ExpectationMetrics::default());
        let owner = k("ns/web");
        e.expect_add(&owner);
        e.expect_add(&owner);
        e.expect_delete(&owner, k("ns/web-9"));
        assert_eq!(e.pending(&owner, T), Pending { adds: 2, deletes: 1 });
        e.observe_add(&owner);
        e.observe_delete(&k("ns/web-9"));
        e.observe_delete(&k("ns/web-9"));
        assert_eq!(
            e.pending(&owner, T),
            Pending { adds: 1, deletes: 0 },
            "a delete seen twice counts once"
        );
        e.observe_add(&owner);
        e.observe_add(&owner);
        assert!(e.pending(&owner, T).is_empty(), "never below zero");
        assert_eq!((e.metrics.adds.get(), e.metrics.deletes.get()), (0, 0));
    }

    #[tokio::test(start_paused = true)]
    async fn an_entry_not_raised_for_the_timeout_expires_and_is_counted() {
        let e = Expectations::new(ExpectationMetrics::default());
        let owner = k("ns/web");
        e.expect_add(&owner);
        tokio::time::advance(Duration::from_secs(299)).await;
        assert_eq!(e.pending(&owner, T).adds, 1);
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(e.pending(&owner, T).is_empty());
        assert_eq!(e.metrics.expired.get(), 1);
        assert_eq!(e.metrics.adds.get(), 0);
    }
}
