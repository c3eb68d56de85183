//! `snapinformer-sim`: runs the scenarios and writes their reports.

use clap::{Parser, Subcommand};
use snapinformer_sim::{
    harness::heap::HeapMeter,
    scenarios::{informer, kcm, seed, soak, store},
};

/// Every row runs on mimalloc, counted by [`snapinformer_arena::Metered`] (per-thread stripes;
/// the `cap` crate's shared counters, used before, cost 80 ns of CPU per block allocated on one
/// thread and freed on another, `Metered` 10 ns: BENCHMARKS.md, "The heap meter's own cost").
/// On glibc's malloc (`--features system-alloc`) building each realistic pod took 2-5x longer in
/// the Rust rows' processes, and their open loops fell seconds behind (BENCHMARKS.md,
/// "Allocator"), so the comparison runs on the allocator services that care use.
///
/// mimalloc is wrapped in [`snapinformer_arena::ArenaAlloc`], so that the `snapinformer-arena`
/// row can build its pods in arenas; every other row's allocations pass through it (one
/// thread-local read per allocation, one range check per free).
#[cfg(not(feature = "system-alloc"))]
#[global_allocator]
static HEAP: snapinformer_arena::Metered<snapinformer_arena::ArenaAlloc<mimalloc::MiMalloc>> =
    snapinformer_arena::Metered::new(snapinformer_arena::ArenaAlloc::new(mimalloc::MiMalloc));
#[cfg(not(feature = "system-alloc"))]
const ALLOCATOR: &str = "mimalloc";

/// With `--features system-alloc`: the platform allocator (glibc malloc on Linux).
#[cfg(feature = "system-alloc")]
#[global_allocator]
static HEAP: snapinformer_arena::Metered<std::alloc::System> =
    snapinformer_arena::Metered::new(std::alloc::System);
#[cfg(feature = "system-alloc")]
const ALLOCATOR: &str = "system";

struct GlobalHeap;

impl HeapMeter for GlobalHeap {
    fn current(&self) -> u64 {
        HEAP.allocated() as u64
    }
    fn peak(&self) -> u64 {
        HEAP.peak() as u64
    }
}

/// Reproduces the informer-cache contention of the field report and measures the caches side by
/// side.
#[derive(Parser, Debug)]
#[command(name = "snapinformer-sim", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// The cache alone: one writer (saturated, open loop, a sweep of rates) and paced readers,
    /// per row.
    Store(store::command::StoreArgs),
    /// The whole informer fed open loop in process, with paced readers and `/metrics` served.
    Informer(informer::InformerArgs),
    /// The field report reproduced: StatefulSet and DaemonSet controllers on 200,000 pods, per
    /// row, over HTTP and in process.
    Seed(seed::command::SeedArgs),
    /// Pod churn with watch faults for a long time, then checks cache, handlers and heap.
    Soak(soak::SoakArgs),
    /// The real kube-controller-manager (StatefulSet and DaemonSet controllers) against the
    /// test API server at the field report's scale, counted from the server side.
    Kcm(kcm::KcmArgs),
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Cmd::Store(args) => store::command::main(&args, &GlobalHeap, ALLOCATOR),
        Cmd::Informer(args) => informer::main(&args),
        Cmd::Seed(args) => seed::command::main(&args, &GlobalHeap, ALLOCATOR),
        Cmd::Soak(args) => soak::main(&args, &GlobalHeap),
        Cmd::Kcm(args) => kcm::main(&args),
    };
    if let Err(e) = result {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
