package main

import (
	"fmt"
	"runtime/metrics"
	"syscall"
	"time"
)

// cpuMark is the process's CPU time at one moment, split the way the Rust rows split theirs by
// thread: the garbage collector's share (the runtime's own estimate) and the rest.
type cpuMark struct {
	process time.Duration // user plus system time of every thread, from getrusage(RUSAGE_SELF)
	system  time.Duration // the system (kernel) part of it
	gc      time.Duration // /cpu/classes/gc/total:cpu-seconds (background workers, assists, pauses)
	cycles  uint64        // completed garbage collection cycles
	ok      bool
}

const gcCPUMetric = "/cpu/classes/gc/total:cpu-seconds"
const gcCyclesMetric = "/gc/cycles/total:gc-cycles"

func markCPU() cpuMark {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return cpuMark{}
	}
	s := []metrics.Sample{{Name: gcCPUMetric}, {Name: gcCyclesMetric}}
	metrics.Read(s)
	m := cpuMark{
		process: time.Duration(ru.Utime.Nano() + ru.Stime.Nano()),
		system:  time.Duration(ru.Stime.Nano()),
		ok:      true,
	}
	if s[0].Value.Kind() == metrics.KindFloat64 {
		m.gc = time.Duration(s[0].Value.Float64() * float64(time.Second))
	}
	if s[1].Value.Kind() == metrics.KindUint64 {
		m.cycles = s[1].Value.Uint64()
	}
	return m
}

// cpuPerUpdate is what a phase of `updates` updates cost: the process's CPU time per update in
// microseconds from `before` to `applied` (the phase), from `applied` to `reclaimed` (the full
// garbage collection after it that frees what it replaced), and the split of both into the
// garbage collector's share and the rest (the Rust rows' per-thread split), with a note saying
// how many collection cycles the phase itself ran.
//
// A phase replays pods generated before it, so it allocates too little to start a collection
// of its own: without the forced one, the cost of freeing what it replaced would fall outside
// every measurement, where the Rust rows pay theirs inside. In a cluster each update decodes a
// new pod, and at GOGC=100 a cycle runs per live heap's worth of allocation, about one phase.
func cpuPerUpdate(before, applied, reclaimed cpuMark, updates int, phase string) (*float64, *float64, map[string]float64, string) {
	if !before.ok || !applied.ok || !reclaimed.ok || updates <= 0 {
		return nil, nil, nil, ""
	}
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(updates) }
	inPhase := per(applied.process - before.process)
	reclaim := per(reclaimed.process - applied.process)
	gc := per(reclaimed.gc - before.gc)
	split := map[string]float64{"garbage collector": gc, "goroutines": max(inPhase+reclaim-gc, 0)}
	note := fmt.Sprintf("client-go: %s: %d garbage collection cycles ran in the phase; the full collection after it (reclaiming what it replaced) cost %.1f µs of CPU per update",
		phase, applied.cycles-before.cycles, reclaim)
	return &inPhase, &reclaim, split, note
}

// kernelPerUpdate is the kernel's part of a phase and its reclamation (from `before` to
// `reclaimed`), microseconds per update: mostly page faults on memory touched for the first
// time, the figure the Rust rows read from /proc/self/stat.
func kernelPerUpdate(before, reclaimed cpuMark, updates int) *float64 {
	if !before.ok || !reclaimed.ok || updates <= 0 {
		return nil
	}
	us := float64((reclaimed.system - before.system).Microseconds()) / float64(updates)
	return &us
}
