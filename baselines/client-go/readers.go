package main

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

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

// readers are the paced reader goroutines of store_scenario.rs `Readers`, reading through the
// APIs a client-go controller reads through: a generated PodLister for the namespace list with a
// label selector, Indexer.List for the full list and Indexer.ByIndex for the owner-UID lookup.
//
// Unlike the Rust readers, which are pinned to the last core (the writer to the first), these are
// plain goroutines that the Go scheduler places on any of GOMAXPROCS threads: Go has no per-goroutine
// affinity, and a client-go controller manager does not pin.
type readers struct {
	stop    atomic.Bool
	wg      sync.WaitGroup
	results []*readerLatency
}

// startReaders starts n readers and returns once all of them are about to start reading. Reader r
// draws owners from `Rng::new(1000 + r)` and starts at operation r mod 3, as in Rust; after an
// operation that took d it sleeps max(d*(n-1), 1ms), waking every 20 ms at most to check for stop
// (through a sleeper, like the open loop's waits).
func startReaders(idx cache.Indexer, n, owners int) *readers {
	rs := &readers{results: make([]*readerLatency, n)}
	lister := corelisters.NewPodLister(idx)
	var ready sync.WaitGroup
	ready.Add(n)
	begin := make(chan struct{})
	for r := range n {
		rs.wg.Add(1)
		go func() {
			defer rs.wg.Done()
			sl := newSleeper()
			defer sl.close()
			rng := newRng(1000 + uint64(r))
			lat := newReaderLatency()
			rs.results[r] = lat
			ready.Done()
			<-begin
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
				switch op % 3 {
				case 0:
					lat.nsList.record(d)
				case 1:
					lat.list.record(d)
				default:
					lat.index.record(d)
				}
				lat.ops++
				pause := max(d*time.Duration(max(n-1, 0)), time.Millisecond)
				until := time.Now().Add(pause)
				for !rs.stop.Load() {
					left := time.Until(until)
					if left <= 0 {
						break
					}
					sl.sleep(min(left, 20*time.Millisecond))
				}
			}
			readSink.Add(int64(sink))
		}()
	}
	ready.Wait()
	close(begin)
	return rs
}

// readSink keeps the readers' result sizes observable so that no read can be optimised away.
var readSink atomic.Int64

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
