//! The global allocator wrapper and the per-thread state of a build in progress.

#![allow(unsafe_code)] // Implementing `GlobalAlloc` is unsafe by definition; see each block.

use std::{
    alloc::{GlobalAlloc, Layout},
    cell::Cell,
    sync::atomic::{AtomicBool, Ordering},
};

use crate::region::{self, HEADER, PAGE};

/// A global allocator that builds objects in arenas when asked to ([`build`](crate::build)) and
/// otherwise passes every call to the allocator it wraps.
///
/// Install it once per program, around the allocator you would use anyway:
///
/// ```
/// #[global_allocator]
/// static ALLOC: snapinformer_arena::ArenaAlloc<mimalloc::MiMalloc> =
///     snapinformer_arena::ArenaAlloc::new(mimalloc::MiMalloc);
/// # fn main() {
/// # let s = snapinformer_arena::build(|| String::from("in a slot"));
/// # assert!(snapinformer_arena::in_arena(s.as_ptr()));
/// # }
/// ```
///
/// Outside a build each call costs one thread-local read (allocation) or one range check
/// (freeing) on top of the inner allocator's.
#[derive(Debug, Default)]
pub struct ArenaAlloc<A> {
    inner: A,
}

impl<A> ArenaAlloc<A> {
    /// Wraps `inner`, which serves every allocation made outside a build.
    pub const fn new(inner: A) -> Self {
        ArenaAlloc { inner }
    }

    /// The wrapped allocator.
    pub fn inner(&self) -> &A {
        &self.inner
    }
}

/// Set by the first allocation through an [`ArenaAlloc`]: whether builds can use arenas.
static INSTALLED: AtomicBool = AtomicBool::new(false);

/// Whether an [`ArenaAlloc`] is this program's global allocator (it has served an allocation).
pub(crate) fn installed() -> bool {
    INSTALLED.load(Ordering::Relaxed)
}

/// The slot this thread is building into, if any.
#[derive(Clone, Copy)]
struct Bump {
    /// The slot's start; 0 when the thread is not building.
    slot: usize,
    /// The next free byte.
    next: usize,
    /// One past the slot's last byte.
    end: usize,
    /// Whether an allocation did not fit and went to the inner allocator.
    overflowed: bool,
}

impl Bump {
    const IDLE: Bump = Bump { slot: 0, next: 0, end: 0, overflowed: false };
}

thread_local! {
    // Const-initialized and without `Drop`: reading it never allocates or registers a
    // destructor, so the allocator may use it at any point of a thread's life.
    static BUMP: Cell<Bump> = const { Cell::new(Bump::IDLE) };
}

/// Whether this thread is building into a slot.
pub(crate) fn building() -> bool {
    BUMP.with(|b| b.get().slot != 0)
}

/// Makes this thread allocate into `slot` (of `size` bytes, its count already held by the
/// caller) until [`stop`].
pub(crate) fn start(slot: usize, size: usize) {
    BUMP.with(|b| b.set(Bump { slot, next: slot + HEADER, end: slot + size, overflowed: false }));
}

/// Ends this thread's build: the bytes used in the slot (header included) and whether some
/// allocation went elsewhere.
pub(crate) fn stop() -> (usize, bool) {
    BUMP.with(|b| {
        let s = b.replace(Bump::IDLE);
        (s.next - s.slot, s.overflowed)
    })
}

/// Carves `layout` out of the slot being built, if there is one and it fits.
#[inline]
fn bump(layout: Layout) -> Option<usize> {
    BUMP.with(|b| {
        let mut s = b.get();
        if s.slot == 0 {
            return None;
        }
        let start = s.next.checked_add(layout.align() - 1)? & !(layout.align() - 1);
        match start.checked_add(layout.size()) {
            Some(end) if end <= s.end && layout.align() <= PAGE => {
                s.next = end;
                b.set(s);
                region::retain(s.slot);
                Some(start)
            }
            _ => {
                s.overflowed = true;
                b.set(s);
                None
            }
        }
    })
}

/// Resizes in place the slot's most recent allocation (`addr`, `old` bytes) to `new` bytes, if
/// this thread is building that slot and the slot has room.
#[inline]
fn resize_last(addr: usize, old: usize, new: usize) -> bool {
    BUMP.with(|b| {
        let mut s = b.get();
        if s.slot == 0 || addr < s.slot || addr + old != s.next {
            return false;
        }
        match addr.checked_add(new) {
            Some(end) if end <= s.end => {
                s.next = end;
                b.set(s);
                true
            }
            _ => false,
        }
    })
}

// SAFETY: every block handed out is either the inner allocator's (and returned to it, with the
// layout it was allocated with) or a range of a slot that no other live block overlaps: `bump`
// advances past each block it hands out, and a slot is reused only after every block in it was
// freed (its count reached zero). Blocks are aligned as asked (`bump` rounds up and refuses
// alignments above a page, slots being page-aligned) and at least as large as asked.
unsafe impl<A: GlobalAlloc> GlobalAlloc for ArenaAlloc<A> {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if !INSTALLED.load(Ordering::Relaxed) {
            INSTALLED.store(true, Ordering::Relaxed);
        }
        match bump(layout) {
            Some(addr) => region::pointer(addr),
            // SAFETY: the caller's contract (a layout of non-zero size) is passed on unchanged.
            None => unsafe { self.inner.alloc(layout) },
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        match bump(layout) {
            Some(addr) => {
                let p = region::pointer(addr);
                // SAFETY: `bump` handed out `layout.size()` bytes at `addr`, which no one else
                // uses; a reused slot is dirty, so they are zeroed here.
                unsafe { std::ptr::write_bytes(p, 0, layout.size()) };
                p
            }
            // SAFETY: as for `alloc`.
            None => unsafe { self.inner.alloc_zeroed(layout) },
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if region::contains(ptr.addr()) {
            region::release(ptr.addr());
        } else {
            // SAFETY: a block outside the range came from the inner allocator with this layout
            // (the caller's contract).
            unsafe { self.inner.dealloc(ptr, layout) }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let addr = ptr.addr();
        let in_arena = region::contains(addr);
        if in_arena && resize_last(addr, layout.size(), new_size) {
            return ptr;
        }
        if !in_arena && !building() {
            // SAFETY: the block is the inner allocator's, and the caller's contract holds.
            return unsafe { self.inner.realloc(ptr, layout, new_size) };
        }
        // SAFETY: the caller guarantees that `new_size`, rounded up to the alignment, does not
        // overflow `isize`, which is what a layout needs.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        if !in_arena {
            // Building: move the block into the slot if it fits there, else let the inner
            // allocator resize it.
            return match bump(new_layout) {
                Some(new) => {
                    let new = region::pointer(new);
                    // SAFETY: the old block holds `layout.size()` bytes, the new one
                    // `new_size`, and they do not overlap (one is in the range, one is not).
                    unsafe {
                        std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                        self.inner.dealloc(ptr, layout);
                    }
                    new
                }
                // SAFETY: as for the inner allocator's path above.
                None => unsafe { self.inner.realloc(ptr, layout, new_size) },
            };
        }
        // An arena block that cannot grow in place: a new block (in the slot being built, or on
        // the inner allocator), the bytes copied, the old block released.
        // SAFETY: `new_layout` has a non-zero size (`new_size` is non-zero by the caller's
        // contract).
        let new = unsafe { self.alloc(new_layout) };
        if !new.is_null() {
            // SAFETY: both blocks are live, hold at least the bytes copied, and do not overlap
            // (the new one was just handed out while the old one is still allocated).
            unsafe { std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size)) };
            region::release(addr);
        }
        new
    }
}
