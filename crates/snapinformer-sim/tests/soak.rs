//! A short soak (a few hundred pods for a few seconds, watch streams cut at random) so that CI
//! covers the `soak` command's checks: cache equals server, no missed deletion, heap back to
//! where it was.

use std::time::Duration;

use snapinformer_sim::{
    harness::heap::HeapMeter,
    scenarios::soak::{self, SoakParams, Ui},
};

/// The heap is measured as the `soak` command does: live bytes counted by `snapinformer_arena::Metered`.
#[global_allocator]
static HEAP: snapinformer_arena::Metered<std::alloc::System> =
    snapinformer_arena::Metered::new(std::alloc::System);

struct Heap;

impl HeapMeter for Heap {
    fn current(&self) -> u64 {
        HEAP.allocated() as u64
    }
    fn peak(&self) -> u64 {
        HEAP.peak() as u64
    }
}

#[test]
fn a_short_soak_with_cut_watches_passes_every_check() {
    let params = SoakParams {
        duration_s: 5.0,
        pods: 300,
        rate: 200,
        fault_interval_s: 0.5,
        // A few hundred pods make a heap of a few MiB, in which the client's and server's
        // buffers weigh more than at the default size; the 10 % bound is for real runs.
        heap_tolerance: 0.25,
    };
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(soak::run(&params, &Heap, Ui::Quiet));
    });
    let report = rx
        .recv_timeout(Duration::from_secs(240))
        .expect("the soak finished within 240 s")
        .expect("the soak ran");
    for c in &report.checks {
        eprintln!("[{}] {}: {}", if c.passed { "ok" } else { "FAILED" }, c.name, c.detail);
    }
    let failed: Vec<_> = report.checks.iter().filter(|c| !c.passed).collect();
    assert!(failed.is_empty(), "failed checks: {failed:#?}\n{report:#?}");
    assert!(report.passed);
    assert!(report.deletes > 0 && report.creates > 0, "{report:#?}");
    assert!(report.status_updates + report.label_updates > 100, "{report:#?}");
    assert!(report.watch_cuts > 0, "{report:#?}");
    assert_eq!(report.handler.violations, 0);
}
