//! Handlers that run as tasks on the Tokio runtime (`HandlerExecution::Task`): the same
//! notifications in the same order as a handler thread, panics survived, yielding to the
//! runtime, removal, and a clear refusal outside a runtime.

mod common;

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::Duration,
};

use common::{Obj, access, eventually, obj};
use snapinformer_core::{
    HandlerExecution, HandlerOptions, Informer, Notification, QueueKind, informer::Error,
};
use tokio::time::timeout;

/// Notifications as text, so that two handlers' logs compare.
fn describe(n: &Notification<Obj>) -> String {
    match n {
        Notification::Add { obj, is_in_initial_list } => {
            format!("add {} {} {is_in_initial_list}", obj.name, obj.rv)
        }
        Notification::Update { old, new } => format!("update {} {}->{}", new.name, old.rv, new.rv),
        Notification::Delete { obj } => format!(
            "delete {} tombstone={}",
            obj.object().map(|o| o.name.as_str()).unwrap_or("?"),
            obj.is_tombstone()
        ),
    }
}

type Log = Arc<Mutex<Vec<String>>>;

fn logging(log: &Log) -> impl FnMut(&Notification<Obj>) + Send + 'static {
    let log = log.clone();
    move |n| log.lock().unwrap().push(describe(n))
}

fn informer() -> Informer<Obj> {
    Informer::<Obj>::builder(access()).name("test").queue(QueueKind::Real).build().unwrap()
}

fn task(name: &str) -> HandlerOptions {
    HandlerOptions::new().name(name).execution(HandlerExecution::Task)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn task_handler_sees_what_a_thread_handler_sees_in_the_same_order() {
    let inf = informer();
    let (on_thread, on_task): (Log, Log) = Default::default();
    inf.add_event_handler_with(logging(&on_thread), HandlerOptions::new().name("thread")).unwrap();
    let reg = inf.add_event_handler_with(logging(&on_task), task("task")).unwrap();
    inf.start().unwrap();
    let q = inf.queue();
    q.replace(vec![obj("a", 1), obj("b", 2)], "2").unwrap();
    let mut rv = 2;
    for round in 0..300u64 {
        rv += 1;
        q.add(obj(&format!("n{round}"), rv)).unwrap();
        rv += 1;
        q.update(obj("a", rv)).unwrap();
        if round % 3 == 0 {
            rv += 1;
            q.delete(obj(&format!("n{round}"), rv)).unwrap();
        }
        if round % 25 == 0 {
            tokio::task::yield_now().await;
        }
    }
    q.replace(vec![obj("a", rv + 1)], &(rv + 1).to_string()).unwrap();
    inf.wait_for(&(rv + 1).to_string(), Duration::from_secs(5)).await.unwrap();
    eventually("both handlers caught up", || {
        let (t, k) = (on_thread.lock().unwrap().len(), on_task.lock().unwrap().len());
        t == k && t > 600
    })
    .await;
    assert_eq!(*on_task.lock().unwrap(), *on_thread.lock().unwrap());
    assert!(reg.has_synced());
    assert_eq!(reg.handled() as usize, on_task.lock().unwrap().len());
    inf.shutdown().await;
    timeout(Duration::from_secs(5), reg.wait_stopped())
        .await
        .expect("the informer's shutdown ends the handler's task");
}

#[test]
fn task_handler_registered_outside_a_runtime_is_refused_and_nothing_is_registered() {
    let inf = informer();
    let err = inf.add_event_handler_with(|_: &Notification<Obj>| {}, task("outside")).unwrap_err();
    assert!(matches!(&err, Error::NoRuntimeForHandler(name) if name == "outside"), "{err:?}");
    assert!(err.to_string().contains("Tokio runtime"), "{err}");
    assert_eq!(inf.handler_count(), 0);
    // The name is free: the refused registration left nothing behind.
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async { inf.add_event_handler_with(|_: &Notification<Obj>| {}, task("outside")) })
        .unwrap();
    assert_eq!(inf.handler_count(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn task_handler_that_panics_goes_on_with_the_next_notification() {
    let inf = informer();
    let log: Log = Arc::default();
    let l = log.clone();
    let reg = inf
        .add_event_handler_with(
            move |n: &Notification<Obj>| {
                if let Notification::Add { obj, .. } = n
                    && obj.name == "bad"
                {
                    panic!("this handler cannot take {}", obj.name);
                }
                l.lock().unwrap().push(describe(n));
            },
            task("panicky").panic_delay(Duration::ZERO),
        )
        .unwrap();
    inf.start().unwrap();
    inf.queue().add(obj("bad", 1)).unwrap();
    inf.queue().add(obj("good", 2)).unwrap();
    inf.wait_for("2", Duration::from_secs(5)).await.unwrap();
    eventually("the notification after the panic", || log.lock().unwrap().len() == 1).await;
    assert_eq!(*log.lock().unwrap(), vec!["add good 2 false".to_owned()]);
    assert_eq!(reg.panics(), 1);
    assert_eq!(reg.handled(), 2);
    inf.shutdown().await;
}

#[test]
fn task_handler_replaying_a_large_snapshot_lets_other_tasks_on_its_runtime_run() {
    // One runtime thread: unless the handler's task yields, nothing else runs until the
    // replay of all 10,000 objects is over.
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let inf = informer();
        inf.start().unwrap();
        let objects: Vec<_> = (1..=10_000).map(|i| obj(&format!("p{i}"), i)).collect();
        inf.queue().replace(objects, "10000").unwrap();
        inf.wait_for("10000", Duration::from_secs(5)).await.unwrap();
        let ticks = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let ticker = tokio::spawn({
            let (ticks, stop) = (ticks.clone(), stop.clone());
            async move {
                while !stop.load(Ordering::Relaxed) {
                    ticks.fetch_add(1, Ordering::Relaxed);
                    tokio::task::yield_now().await;
                }
            }
        });
        // The ticks each replayed add saw: they must move during the replay.
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        let t = ticks.clone();
        let reg = inf
            .add_event_handler_with(
                move |_: &Notification<Obj>| s.lock().unwrap().push(t.load(Ordering::Relaxed)),
                task("late"),
            )
            .unwrap();
        assert!(reg.wait_synced(Duration::from_secs(10)).await, "the replay ended");
        stop.store(true, Ordering::Relaxed);
        ticker.await.unwrap();
        let seen = std::mem::take(&mut *seen.lock().unwrap());
        assert_eq!(seen.len(), 10_000);
        let (first, last) = (seen[0], seen[seen.len() - 1]);
        assert!(last >= first + 5, "the ticker ran {} times during the replay", last - first);
        inf.shutdown().await;
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removed_task_handler_stops_and_receives_nothing_more() {
    let inf = informer();
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let reg = inf
        .add_event_handler_with(
            move |_: &Notification<Obj>| {
                c.fetch_add(1, Ordering::SeqCst);
            },
            task("removable"),
        )
        .unwrap();
    inf.start().unwrap();
    inf.queue().add(obj("a", 1)).unwrap();
    inf.wait_for("1", Duration::from_secs(5)).await.unwrap();
    eventually("the first notification", || calls.load(Ordering::SeqCst) == 1).await;
    timeout(Duration::from_secs(5), inf.shutdown_event_handler(&reg))
        .await
        .expect("the task ended")
        .unwrap();
    assert!(reg.is_stopped());
    inf.queue().add(obj("b", 2)).unwrap();
    inf.wait_for("2", Duration::from_secs(5)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(inf.handler_count(), 0);
    inf.shutdown().await;
}
