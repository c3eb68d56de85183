package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// placement is where the process's threads run (the simulator's harness/placement.rs).
//
// Unpinned (the default) is how a controller manager runs: GOMAXPROCS is the number of CPUs and
// the scheduler runs every goroutine, the garbage collector's included, on any of them.
//
// Pinned is the Rust rows' other layout: the writer on the first CPU, the readers on the last.
// Go cannot pin a goroutine, and client-go's informer runs goroutines of its own (reflector,
// controller, handler distribution) that no caller can place. So the Go rows pin threads: every
// thread of the process is restricted to the first CPU, except the readers', each reader
// goroutine locked to its own thread (runtime.LockOSThread) restricted to the last CPU. The
// writer side (the feeder, client-go's goroutines, the indexer row's writer) and the garbage
// collector's background workers share the first CPU, as the Rust informer row's runtime and
// handler threads do; a reader that allocates still pays its GC assists on its own CPU.
// GOMAXPROCS stays at the number of CPUs the process started with (set explicitly, see apply).
type placement struct {
	pinned bool
	// writer and reader are the CPUs of the pinned layout.
	writer, reader int

	mu sync.Mutex
	// readerTids are the threads locked by reader goroutines (left on the reader CPU).
	readerTids map[int]bool
}

// parsePlacement parses the --placement flag.
func parsePlacement(name string) (*placement, error) {
	switch name {
	case "unpinned":
		return &placement{}, nil
	case "pinned":
		return &placement{pinned: true}, nil
	}
	return nil, fmt.Errorf("--placement must be unpinned or pinned, got %q", name)
}

// apply puts every thread of the process on the writer CPU with the pinned layout (nothing with
// the unpinned one). Like the Rust rows, the pinned layout needs at least two CPUs; with fewer,
// nothing is pinned.
func (p *placement) apply() error {
	if !p.pinned {
		return nil
	}
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return fmt.Errorf("sched_getaffinity: %w", err)
	}
	var cpus []int
	for c := range 1024 {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	if len(cpus) < 2 {
		p.pinned = false
		return nil
	}
	p.writer, p.reader = cpus[0], cpus[len(cpus)-1]
	p.readerTids = map[int]bool{}
	// Since Go 1.25 the runtime lowers GOMAXPROCS when the affinity mask it sees shrinks, which
	// would leave one P for the writer side and the readers together. Setting it explicitly (to
	// the CPUs the process started with) turns that update off.
	runtime.GOMAXPROCS(len(cpus))
	return p.pinOthers()
}

// pinOthers restricts every thread of the process but the readers' to the writer CPU. Threads
// created later inherit the mask of the thread that creates them: a non-reader thread, or (for a
// thread asked for by a locked reader thread) the runtime's template thread, which is not a
// reader's; it is called again whenever readers start, in case.
func (p *placement) pinOthers() error {
	if !p.pinned {
		return nil
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return fmt.Errorf("listing the process's threads: %w", err)
	}
	var set unix.CPUSet
	set.Set(p.writer)
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil || p.readerTids[tid] {
			continue
		}
		// A thread that ended since the listing is no error.
		if err := unix.SchedSetaffinity(tid, &set); err != nil && err != unix.ESRCH {
			return fmt.Errorf("sched_setaffinity(%d): %w", tid, err)
		}
	}
	return nil
}

// enterReader is called by a reader goroutine before it reads: with the pinned layout it locks
// the goroutine to its thread and restricts the thread to the reader CPU. The goroutine never
// unlocks, so its thread ends with it instead of returning to the runtime's pool.
func (p *placement) enterReader() {
	if !p.pinned {
		return
	}
	runtime.LockOSThread()
	tid := unix.Gettid()
	var set unix.CPUSet
	set.Set(p.reader)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		panic(fmt.Sprintf("pinning a reader thread: %v", err))
	}
	p.mu.Lock()
	p.readerTids[tid] = true
	p.mu.Unlock()
}

// describe says how the placement was applied, for the report.
func (p *placement) describe() string {
	if !p.pinned {
		return fmt.Sprintf("unpinned: GOMAXPROCS %d, every goroutine on any CPU", runtime.GOMAXPROCS(0))
	}
	return fmt.Sprintf("pinned: reader goroutines locked to their own threads on CPU %d; every other thread (feeder, client-go's goroutines, garbage collector) on CPU %d; GOMAXPROCS %d",
		p.reader, p.writer, runtime.GOMAXPROCS(0))
}
