//! One arena per cached object: build an object, and everything it owns, in one contiguous
//! slot, so that freeing it later touches a few pages instead of hundreds of scattered blocks.
//!
//! # Why
//!
//! An informer cache replaces whole objects all day. A `k8s_openapi` `Pod` as a cluster serves
//! it is about 160 separate allocations (every string, map entry and list). Once the heap has
//! churned, a new pod's blocks land in the holes old pods left, spread over many pages, and
//! freeing the pod it replaces takes a cache miss per block: on the project machine, at 200,000
//! realistic pods replaced at random, building a pod cost 11-16 µs and freeing one 13-17 µs,
//! the two growing as the heap fragmented; with every pod rebuilt in a slot of its own,
//! building cost 3.3 µs, rebuilding 8 µs and freeing 5.7 µs, steady: 17 µs in all against
//! 24-34 µs (BENCHMARKS.md, "One arena per pod"). Go's collector never visits a dead object,
//! which is much of why client-go's informer spends less CPU per update than a Rust one with
//! ordinary allocation.
//!
//! # How it works
//!
//! - [`ArenaAlloc`] wraps the program's global allocator. Outside a build it passes every call
//!   through (one thread-local read per allocation, one range check per free).
//! - [`build`] runs a constructor twice on the calling thread: once into a scratch slot, to
//!   learn how many bytes the object needs, and once into a slot of exactly that many pages,
//!   which it returns. Every allocation the constructor makes goes into the slot (bump
//!   allocation); the slot counts the allocations in it that are still live.
//! - The slots live in one range of address space reserved at the first build (1 TiB, with
//!   nothing committed until written), divided by slot size, so any address tells whether it is
//!   arena memory and which slot holds it.
//! - Freeing is unchanged for the code that owns the object: dropping it frees each block as
//!   usual. A block in a slot only lowers the slot's count, and when the count reaches zero the
//!   slot goes back to a free list for the next object of its size.
//!
//! # Guarantees
//!
//! Every constructor is safe to build: nothing depends on it being well-behaved.
//!
//! - An object built in an arena is an ordinary value: it may be moved, mutated, dropped or
//!   taken apart on any thread. A block taken out of it (a `String` moved elsewhere) keeps the
//!   whole slot alive until it is freed; a block that grows after the build moves to the
//!   ordinary heap.
//! - A constructor that allocates more on its second run than on its first, or needs more than
//!   256 KiB, or builds while the reserved range for its size is full, gets the ordinary heap for
//!   what does not fit (counted in [`ArenaStats`]).
//! - A build inside a build runs inline, in the outer object's slot. A panicking constructor
//!   leaves the thread as it was.
//! - Without [`ArenaAlloc`] as the global allocator, or on a platform without `mmap`, [`build`]
//!   calls the constructor once and returns what it returns.
//!
//! # Costs
//!
//! - The constructor runs twice, and what the first run allocates is dropped; rebuilding a
//!   decoded realistic pod this way (two clones, the decoded copy freed) took 8 µs on the
//!   project machine.
//! - Each object occupies whole pages: up to 4 KiB more than it asked for (a 25 KiB pod about
//!   8% more, where the general allocator's size classes add about 13%). This overhead is in
//!   [`ArenaStats::slot_bytes`], not in the bytes a counting allocator sees.
//! - Freed slots stay resident and are reused by the next objects of the same page count; they
//!   are not returned to the operating system. Memory follows the peak of each size.
//! - Slots are a pool of their own, beside the wrapped allocator's: memory that allocator has
//!   freed but keeps is not used for slots, nor free slots for its allocations. A process that
//!   grew its ordinary heap first and then moves its objects into arenas holds both (in the
//!   project's `seed` benchmark, a worker that had touched 18 GiB of mimalloc's heap in advance
//!   was killed for memory once its pods went into slots on top).
//! - Blocks that grow after the build (a vector pushed to) leave dead space in their slot.
//!   Arenas suit objects built once and then only read, which is what a cache holds.
//!
//! # Counting the heap
//!
//! [`Metered`] is a second, independent wrapper for programs that measure their heap (the
//! project's simulator wraps `ArenaAlloc<MiMalloc>` in it). It counts the bytes allocated and
//! not yet freed on per-thread stripes instead of one shared counter, so that counting does not
//! turn every allocation and free into a contended read-modify-write of one cache line: with one
//! thread allocating and another freeing, the `cap` crate's shared counters added 80 ns of CPU
//! per block, `Metered` 10 ns (BENCHMARKS.md, "The heap meter's own cost"). Its current count is
//! exact in a quiet process; its peak is within 64 KiB per thread of the true one.
//!
//! # Example
//!
//! ```
//! // In a program whose global allocator is an `ArenaAlloc` (see its docs):
//! use std::sync::Arc;
//! let decoded = vec!["a".to_string(), "b".to_string()];
//! let cached: Arc<Vec<String>> = snapinformer_arena::build(|| Arc::new(decoded.clone()));
//! assert_eq!(*cached, decoded);
//! ```

mod alloc;
mod meter;
mod region;

use std::sync::atomic::{AtomicU64, Ordering};

pub use alloc::ArenaAlloc;
pub use meter::Metered;
use region::{HEADER, MAX_PAGES, PAGE};

static BUILT: AtomicU64 = AtomicU64::new(0);
static PLAIN: AtomicU64 = AtomicU64::new(0);
static OVERFLOWED: AtomicU64 = AtomicU64::new(0);

/// Builds `make()`'s result in an arena of its own and returns it: every allocation `make`
/// makes lands in one slot of whole pages, sized by a first, discarded run of `make` (so `make`
/// runs twice).
///
/// Runs `make` once, plainly, when no arena can be used: [`ArenaAlloc`] is not the global
/// allocator, the platform has no arena, or the object is larger than 256 KiB. Inside another
/// build, runs it once in that build's slot.
pub fn build<R>(make: impl Fn() -> R) -> R {
    if alloc::building() {
        return make(); // Nested: the outer build's slot takes it.
    }
    if !alloc::installed() || !region::reserve() {
        return plain(make);
    }
    // First run: into the largest slot, to learn the size.
    let Some(scratch) = Build::start(MAX_PAGES) else { return plain(make) };
    let probe = make();
    let (used, overflowed) = scratch.finish();
    drop(probe);
    if overflowed || used <= HEADER {
        return plain(make); // Too large for a slot, or nothing to put in one.
    }
    let Some(exact) = Build::start(used.div_ceil(PAGE)) else { return plain(make) };
    let object = make();
    let (_, overflowed) = exact.finish();
    BUILT.fetch_add(1, Ordering::Relaxed);
    if overflowed {
        OVERFLOWED.fetch_add(1, Ordering::Relaxed);
    }
    object
}

fn plain<R>(make: impl Fn() -> R) -> R {
    PLAIN.fetch_add(1, Ordering::Relaxed);
    make()
}

/// A build in progress on this thread: ends it (and drops the builder's hold on the slot) when
/// finished or unwound.
struct Build {
    slot: usize,
    size: usize,
}

impl Build {
    fn start(pages: usize) -> Option<Build> {
        let slot = region::take(pages)?;
        let size = pages * PAGE;
        alloc::start(slot, size);
        Some(Build { slot, size })
    }

    /// Bytes used (header included) and whether an allocation went elsewhere.
    fn finish(self) -> (usize, bool) {
        alloc::stop()
        // `drop` releases the builder's count.
    }
}

impl Drop for Build {
    fn drop(&mut self) {
        if alloc::building() {
            alloc::stop(); // Unwinding out of the constructor.
        }
        region::release_slot(self.slot, self.size);
    }
}

/// Whether `ptr` points into an arena slot (for tests and diagnostics).
pub fn in_arena<T: ?Sized>(ptr: *const T) -> bool {
    region::contains(ptr.cast::<u8>().addr())
}

/// Counters of this process's arenas (see [`stats`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ArenaStats {
    /// Objects built in an arena.
    pub built: u64,
    /// Builds that ran plainly, on the ordinary heap (no arena installed or available, or the
    /// object too large).
    pub plain: u64,
    /// Objects built in an arena of which some allocations did not fit and went to the ordinary
    /// heap (a constructor that allocated more on its second run).
    pub overflowed: u64,
    /// Slots holding at least one live allocation.
    pub slots: u64,
    /// The bytes those slots span (whole pages; what they hold is at most this).
    pub slot_bytes: u64,
}

/// The process's arena counters now.
pub fn stats() -> ArenaStats {
    ArenaStats {
        built: BUILT.load(Ordering::Relaxed),
        plain: PLAIN.load(Ordering::Relaxed),
        overflowed: OVERFLOWED.load(Ordering::Relaxed),
        slots: region::SLOTS.load(Ordering::Relaxed),
        slot_bytes: region::SLOT_BYTES.load(Ordering::Relaxed),
    }
}

/// Whether [`build`] uses arenas in this process: [`ArenaAlloc`] is the global allocator and the
/// address range could be reserved (reserving it now if not yet done).
pub fn available() -> bool {
    alloc::installed() && region::reserve()
}
