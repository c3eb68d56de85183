package main

import (
	"bufio"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"time"
)

// rssBytes reads the resident set size from /proc/self/statm (0 where it cannot be read), as
// store_scenario.rs does.
func rssBytes() uint64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return 0
	}
	return pages * uint64(os.Getpagesize())
}

// peakRSSBytes reads the kernel's high-water mark of the resident set (VmHWM in
// /proc/self/status): the exact peak, where sampling could miss a short one. 0 where unreadable.
func peakRSSBytes() uint64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return 0
		}
		kb, err := strconv.ParseUint(fields[0], 10, 64)
		if err != nil {
			return 0
		}
		return kb * 1024
	}
	return 0
}

// liveHeap runs a full garbage collection and returns the bytes of live heap objects
// (MemStats.HeapAlloc right after runtime.GC, which also finishes sweeping): the Go counterpart
// of the Rust allocator's "bytes allocated now" once freed memory is returned.
func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// memSample is one sample of the process's memory.
type memSample struct {
	// T is seconds since the sampler started.
	T float64
	// RSS is the resident set size.
	RSS uint64
	// HeapAlloc is the bytes of allocated heap objects, garbage not yet collected included.
	HeapAlloc uint64
	// HeapInuse is the bytes of in-use heap spans (HeapAlloc plus fragmentation).
	HeapInuse uint64
	// HeapLive is the live heap as marked by the last completed GC cycle.
	HeapLive uint64
}

// samplePeriod is the time between memory samples, as the Rust rows sample.
const samplePeriod = 100 * time.Millisecond

// memSampler samples RSS and the Go heap every samplePeriod on its own goroutine, through
// runtime/metrics (which, unlike runtime.ReadMemStats, does not stop the world).
type memSampler struct {
	start time.Time
	stop  chan struct{}
	done  chan struct{}

	mu      sync.Mutex
	samples []memSample
}

var sampleMetrics = []string{
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/unused:bytes",
	"/gc/heap/live:bytes",
}

func startMemSampler(start time.Time) *memSampler {
	s := &memSampler{start: start, stop: make(chan struct{}), done: make(chan struct{})}
	go s.run()
	return s
}

// sample takes one sample now and keeps it.
func (s *memSampler) sample() memSample {
	m := make([]metrics.Sample, len(sampleMetrics))
	for i, name := range sampleMetrics {
		m[i].Name = name
	}
	metrics.Read(m)
	val := func(i int) uint64 {
		if m[i].Value.Kind() == metrics.KindUint64 {
			return m[i].Value.Uint64()
		}
		return 0
	}
	x := memSample{
		T:         time.Since(s.start).Seconds(),
		RSS:       rssBytes(),
		HeapAlloc: val(0),
		HeapInuse: val(0) + val(1),
		HeapLive:  val(2),
	}
	s.mu.Lock()
	s.samples = append(s.samples, x)
	s.mu.Unlock()
	return x
}

func (s *memSampler) run() {
	defer close(s.done)
	t := time.NewTicker(samplePeriod)
	defer t.Stop()
	for {
		s.sample()
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
	}
}

// elapsed is the seconds since the sampler started (the time base of its samples).
func (s *memSampler) elapsed() float64 { return time.Since(s.start).Seconds() }

// finish stops sampling and returns every sample.
func (s *memSampler) finish() []memSample {
	close(s.stop)
	<-s.done
	s.sample()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.samples
}

// trace is the Rust `MemoryTrace` of the samples: the series of (seconds, HeapAlloc, RSS), the
// largest sampled HeapAlloc and the larger of the kernel's RSS high-water mark and the largest
// sampled RSS.
func trace(samples []memSample) memoryTrace {
	t := memoryTrace{PeriodMS: uint64(samplePeriod.Milliseconds()), Series: make([][3]any, 0, len(samples))}
	for _, x := range samples {
		t.Series = append(t.Series, [3]any{x.T, x.HeapAlloc, x.RSS})
		t.HeapPeakBytes = max(t.HeapPeakBytes, x.HeapAlloc)
		t.RSSPeakBytes = max(t.RSSPeakBytes, x.RSS)
	}
	t.RSSPeakBytes = max(t.RSSPeakBytes, peakRSSBytes())
	return t
}

// peaks returns the largest HeapAlloc, HeapInuse and HeapLive among the samples taken at or after
// from (seconds since start), up to to.
func (s *memSampler) peaks(from, to float64) (alloc, inuse, live uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, x := range s.samples {
		if x.T < from || x.T > to {
			continue
		}
		alloc = max(alloc, x.HeapAlloc)
		inuse = max(inuse, x.HeapInuse)
		live = max(live, x.HeapLive)
	}
	return alloc, inuse, live
}
