package main

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// readerLatency is the reader latencies by operation (store_scenario.rs `ReaderLatency`).
type readerLatency struct {
	list, index, nsList *latency
	ops                 uint64
}

func newReaderLatency() *readerLatency {
	return &readerLatency{list: newLatency(), index: newLatency(), nsList: newLatency()}
}

func (r *readerLatency) merge(o *readerLatency) {
	r.list.merge(o.list)
	r.index.merge(o.index)
	r.nsList.merge(o.nsList)
	r.ops += o.ops
}

// readers are the paced reader goroutines of the Rust `Readers` (scenarios/store/readers.rs),
// reading through the APIs a client-go controller reads through: a generated PodLister for the
// namespace list with a label selector, Indexer.List for the full list and Indexer.ByIndex for
// the owner-UID lookup.
//
// Unpinned, they are plain goroutines that the Go scheduler places on any of GOMAXPROCS threads,
// as a controller manager runs. Pinned, each is locked to its own thread on the reader CPU (see
// placement).
type readers struct {
	stop    atomic.Bool
	wg      sync.WaitGroup
	results []*readerLatency
}

// startReaders starts n readers together and returns after warmup, as the Rust `Readers::start`
// does: only operations begun after the warm-up are recorded. Reader r draws owners from
// `Rng::new(1000 + r)` and starts at operation r mod 3, as in Rust. With rate 0, after an
// operation that took d it sleeps max(d*(n-1), 1ms); with a rate, reader r begins its operations
// at slots r, r+n, r+2n, ... of a schedule with one slot every 1/rate seconds, at once when it is
// behind (the Rust `Pacing`). Its sleeps wake every 20 ms at most to check for stop (through a
// sleeper, like the open loop's waits).
func startReaders(idx cache.Indexer, n, owners int, pl *placement, warmup time.Duration, rate float64) *readers {
	rs := &readers{results: make([]*readerLatency, n)}
	if pl.pinned {
		pl.mu.Lock()
		clear(pl.readerTids)
		pl.mu.Unlock()
	}
	lister := corelisters.NewPodLister(idx)
	var ready sync.WaitGroup
	ready.Add(n)
	begin := make(chan struct{})
	for r := range n {
		rs.wg.Add(1)
		go func() {
			defer rs.wg.Done()
			pl.enterReader()
			sl := newSleeper()
			defer sl.close()
			rng := newRng(1000 + uint64(r))
			lat := newReaderLatency()
			rs.results[r] = lat
			ready.Done()
			<-begin
			began := time.Now()
			measureFrom := began.Add(warmup)
			// Rate pacing: this reader's next slot, and the time between its slots.
			var slot time.Time
			var every time.Duration
			if rate > 0 {
				slot = began.Add(time.Duration(float64(r) / rate * float64(time.Second)))
				every = time.Duration(float64(n) / rate * float64(time.Second))
			}
			sleepUntil := func(until time.Time) {
				for !rs.stop.Load() {
					left := time.Until(until)
					if left <= 0 {
						break
					}
					sl.sleep(min(left, 20*time.Millisecond))
				}
			}
			if rate > 0 {
				sleepUntil(slot)
			}
			var sink int
			for op := r; !rs.stop.Load(); op++ {
				owner := rng.below(owners)
				t := time.Now()
				var got int
				switch op % 3 {
				case 0:
					sel := labels.SelectorFromSet(labels.Set{"app": fmt.Sprintf("web-%d", owner)})
					pods, err := lister.Pods(namespace).List(sel)
					if err != nil {
						panic(fmt.Sprintf("namespace list: %v", err))
					}
					got = len(pods)
				case 1:
					got = len(idx.List())
				default:
					items, err := idx.ByIndex(ownerIndex, ownerUID(owner))
					if err != nil {
						panic(fmt.Sprintf("owner index lookup: %v", err))
					}
					got = len(items)
				}
				d := time.Since(t)
				sink += got
				if !t.Before(measureFrom) {
					switch op % 3 {
					case 0:
						lat.nsList.record(d)
					case 1:
						lat.list.record(d)
					default:
						lat.index.record(d)
					}
					lat.ops++
				}
				if rate > 0 {
					slot = slot.Add(every)
					sleepUntil(slot)
				} else {
					sleepUntil(time.Now().Add(max(d*time.Duration(max(n-1, 0)), time.Millisecond)))
				}
			}
			readSink.Add(int64(sink))
		}()
	}
	ready.Wait()
	if err := pl.pinOthers(); err != nil {
		panic(err.Error())
	}
	close(begin)
	time.Sleep(warmup)
	return rs
}

// readSink keeps the readers' result sizes observable so that no read can be optimised away.
var readSink atomic.Int64

// lastCopy keeps the pointer copy of the read costs observable.
var lastCopy []*corev1.Pod

// finish stops the readers and returns their merged latencies.
func (rs *readers) finish() *readerLatency {
	rs.stop.Store(true)
	rs.wg.Wait()
	all := newReaderLatency()
	for _, r := range rs.results {
		all.merge(r)
	}
	return all
}

// medianUS is the median of runs timings of f, in microseconds (the Rust `median_us`).
func medianUS(runs int, f func()) float64 {
	t := make([]float64, max(runs, 1))
	for i := range t {
		start := time.Now()
		f()
		t[i] = float64(time.Since(start).Nanoseconds()) / 1e3
	}
	slices.Sort(t)
	return t[len(t)/2]
}

// measureReadCosts is the Rust `read_costs`: each read alone on this goroutine, no writer, through
// the same APIs as the readers, and Go's own copy of a full list's pointers. The runs per read are
// the Rust ones.
func measureReadCosts(idx cache.Indexer, total, owners int) *readCosts {
	lister := corelisters.NewPodLister(idx)
	owner := ownerUID(owners / 2)
	sel := labels.SelectorFromSet(labels.Set{"app": fmt.Sprintf("web-%d", owners/2)})
	listRuns := min(max(2_000_000/max(total, 1), 5), 200)
	var sink int
	c := &readCosts{
		ListUS: medianUS(listRuns, func() { sink += len(idx.List()) }),
		NsListUS: medianUS(listRuns, func() {
			pods, err := lister.Pods(namespace).List(sel)
			if err != nil {
				panic(fmt.Sprintf("namespace list: %v", err))
			}
			sink += len(pods)
		}),
		OwnerUS: medianUS(200, func() {
			items, err := idx.ByIndex(ownerIndex, owner)
			if err != nil {
				panic(fmt.Sprintf("owner index lookup: %v", err))
			}
			sink += len(items)
		}),
	}
	items := idx.List()
	all := make([]*corev1.Pod, len(items))
	for i, it := range items {
		all[i] = it.(*corev1.Pod)
	}
	n := float64(max(len(all), 1))
	c.PointerCopyNsPerObject = medianUS(listRuns, func() {
		cp := make([]*corev1.Pod, len(all))
		copy(cp, all)
		lastCopy = cp
	}) * 1000 / n
	lastCopy = nil
	readSink.Add(int64(sink))
	return c
}
