package main

import (
	"runtime"
	"sync"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// latency records values in microseconds, 1 us to 1 hour, 3 significant digits: the bounds of
// stats.rs `Latency` (an HDR histogram on both sides).
type latency struct{ h *hdrhistogram.Histogram }

func newLatency() *latency { return &latency{h: hdrhistogram.New(1, 3_600_000_000, 3)} }

// recordUS records one value in microseconds, clamped into range as the Rust recorder does.
func (l *latency) recordUS(us int64) {
	us = min(max(us, 1), l.h.HighestTrackableValue())
	// In range after the clamp, so RecordValue cannot fail.
	_ = l.h.RecordValue(us)
}

// record records a duration (whole microseconds, truncated as Rust's as_micros does).
func (l *latency) record(d time.Duration) { l.recordUS(d.Microseconds()) }

// merge adds another recorder's values.
func (l *latency) merge(o *latency) { l.h.Merge(o.h) }

// summary is stats.rs `Summary`: p50, p99, max and count in microseconds.
type summary struct {
	P50   uint64 `json:"p50"`
	P99   uint64 `json:"p99"`
	Max   uint64 `json:"max"`
	Count uint64 `json:"count"`
}

func (l *latency) summary() summary {
	if l.h.TotalCount() == 0 {
		return summary{}
	}
	return summary{
		P50:   uint64(l.h.ValueAtQuantile(50)),
		P99:   uint64(l.h.ValueAtQuantile(99)),
		Max:   uint64(l.h.Max()),
		Count: uint64(l.h.TotalCount()),
	}
}

// cdf gives `(value_us, cumulative fraction)` points, one per recorded bucket at the bucket's
// highest equivalent value, as stats.rs `Latency::cdf` does.
func (l *latency) cdf() [][2]any {
	total := float64(max(l.h.TotalCount(), 1))
	var acc int64
	out := [][2]any{}
	for _, b := range l.h.Distribution() {
		if b.Count == 0 {
			continue
		}
		acc += b.Count
		out = append(out, [2]any{uint64(b.To), float64(acc) / total})
	}
	return out
}

// parallel calls f(i) for every i below n on up to eight goroutines, one per core.
func parallel(n int, f func(i int)) {
	workers := min(max(runtime.GOMAXPROCS(0), 1), 8)
	per := max((n+workers-1)/workers, 1)
	var wg sync.WaitGroup
	for start := 0; start < n; start += per {
		end := min(start+per, n)
		wg.Go(func() {
			for i := start; i < end; i++ {
				f(i)
			}
		})
	}
	wg.Wait()
}
