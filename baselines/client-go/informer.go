package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// podWatch is the watch stream the reflector reads: a buffered channel of events that the scenario
// fills. It never ends by itself.
type podWatch struct {
	ch chan watch.Event
}

// Stop implements watch.Interface. The channel stays open: events not read yet wait for the next
// Watch, which hands out the same channel (a restarted watch resumes where the last one stopped).
func (w *podWatch) Stop() {}

// ResultChan implements watch.Interface.
func (w *podWatch) ResultChan() <-chan watch.Event { return w.ch }

// podListerWatcher is the ListerWatcher the informer is built on, standing in for an API server:
// List serves the generated initial pods (all of them in one response, as the watch cache answers
// the reflector's first list at resourceVersion 0), and Watch hands out the one event stream that
// the scenario feeds.
//
// It says it does not support watch-list semantics (IsWatchListSemanticsUnSupported), so that the
// reflector lists and then watches, even though the WatchListClient feature gate is on by default
// in 1.37: the initial build is not what this scenario measures, and a list is what this stand-in
// serves.
type podListerWatcher struct {
	mu      sync.Mutex
	initial *corev1.PodList
	events  chan watch.Event
	lists   atomic.Int32
	watches atomic.Int32
}

// List implements cache.Lister. It hands the initial list over once and keeps no reference to it
// (the reflector copies the items and the list itself becomes garbage, as a decoded response
// does); a relist is an error, since this scenario has no reason to relist.
func (lw *podListerWatcher) List(_ metav1.ListOptions) (runtime.Object, error) {
	lw.lists.Add(1)
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if lw.initial == nil {
		return nil, errors.New("the store scenario serves its initial list once; the reflector asked again (a relist)")
	}
	l := lw.initial
	lw.initial = nil
	return l, nil
}

// Watch implements cache.Watcher.
func (lw *podListerWatcher) Watch(_ metav1.ListOptions) (watch.Interface, error) {
	lw.watches.Add(1)
	return &podWatch{ch: lw.events}, nil
}

// IsWatchListSemanticsUnSupported tells client-go's reflector to list then watch (see the type's
// comment).
func (lw *podListerWatcher) IsWatchListSemanticsUnSupported() bool { return true }

// feedPhase is one batch of updates the scenario sends through the watch and waits for.
type feedPhase struct {
	firstRV uint64
	count   int
	// sched is the open-loop schedule; nil in a saturation phase.
	sched *schedule
	rate  uint64

	// Written by the handler goroutine only; read by others after done is closed.
	staleness *latency
	depthMax  uint64
	last      time.Time
	// visible is written by the handler goroutine and read by the depth sampler.
	visible atomic.Int64
	done    chan struct{}
}

// informerBackend is the `client-go` row: an unmodified client-go 1.37 SharedIndexInformer
// (cache.NewSharedIndexInformer) with the namespace, owner-UID and node-name indexes, over
// podListerWatcher, with one registered ResourceEventHandler. Whatever batching 1.37 does by
// default happens: the reflector appends each watch event to a RealFIFO (InOrderInformers, GA and
// locked on), the controller pops up to 1000 deltas with distinct keys at once (PopBatch,
// InOrderInformersBatchProcess on by default) and applies them to the indexer in one
// Transaction (one write lock), with the queue unlocked while it does (UnlockWhileProcessingFIFO
// and AtomicFIFO on by default), then distributes the notifications to the handlers.
//
// Visibility: an update is visible when the registered handler's OnUpdate receives it. That is
// after the indexer has it (readers could see it slightly earlier) and includes client-go's
// distribution hop from the informer to the handler's goroutine (a few microseconds when idle):
// the time at which a controller's event handler, and so its work queue, learns of the change.
type informerBackend struct {
	lw       *podListerWatcher
	informer cache.SharedIndexInformer
	reg      cache.ResourceEventHandlerRegistration
	cancel   context.CancelFunc
	stopped  chan struct{}

	cur        atomic.Pointer[feedPhase]
	initialAdd atomic.Int64
	unexpected atomic.Int64
}

// newInformerBackend creates the informer (not started) and its event stream with room for
// capacity events, so that sending never waits for the informer (the open loop's arrivals are not
// throttled by the consumer: an unread event waits in the buffer, as it would in a socket).
func newInformerBackend(capacity int) (*informerBackend, error) {
	b := &informerBackend{
		lw:      &podListerWatcher{events: make(chan watch.Event, capacity)},
		stopped: make(chan struct{}),
	}
	b.informer = cache.NewSharedIndexInformer(b.lw, &corev1.Pod{}, 0, podIndexers())
	reg, err := b.informer.AddEventHandler(handler{b})
	if err != nil {
		return nil, fmt.Errorf("registering the event handler: %w", err)
	}
	b.reg = reg
	return b, nil
}

// handler is the registered ResourceEventHandler: it records when each update becomes visible.
type handler struct{ b *informerBackend }

// OnAdd implements cache.ResourceEventHandler; adds come only from the initial list.
func (h handler) OnAdd(_ any, isInInitialList bool) {
	if isInInitialList {
		h.b.initialAdd.Add(1)
	} else {
		h.b.unexpected.Add(1)
	}
}

// OnUpdate implements cache.ResourceEventHandler.
func (h handler) OnUpdate(_, newObj any) {
	now := time.Now()
	pod, ok := newObj.(*corev1.Pod)
	p := h.b.cur.Load()
	if !ok || p == nil {
		h.b.unexpected.Add(1)
		return
	}
	rv, err := strconv.ParseUint(pod.ResourceVersion, 10, 64)
	if err != nil || rv < p.firstRV || rv >= p.firstRV+uint64(p.count) {
		h.b.unexpected.Add(1)
		return
	}
	v := int(p.visible.Load())
	if p.sched != nil {
		idx := int(rv - p.firstRV)
		p.staleness.record(max(now.Sub(p.sched.slot(idx)), 0))
		p.depthMax = max(p.depthMax, uint64(max(p.sched.arrived(now)-v, 0)))
	}
	p.last = now
	if p.visible.Add(1) == int64(p.count) {
		close(p.done)
	}
}

// OnDelete implements cache.ResourceEventHandler; the scenario deletes nothing.
func (h handler) OnDelete(any) { h.b.unexpected.Add(1) }

func (b *informerBackend) indexer() cache.Indexer { return b.informer.GetIndexer() }

// build serves initial through List, starts the informer and waits until it and the handler have
// synced (the handler has received every initial add). The list response holds its items in one
// array, as a decoded list does; the reflector copies each item out of it
// (meta.ExtractListWithAlloc), and the array and the generated pods become garbage.
func (b *informerBackend) build(initial []*corev1.Pod) error {
	items := make([]corev1.Pod, len(initial))
	for i, p := range initial {
		items[i] = *p
	}
	b.lw.mu.Lock()
	b.lw.initial = &corev1.PodList{
		ListMeta: metav1.ListMeta{ResourceVersion: strconv.Itoa(len(initial))},
		Items:    items,
	}
	b.lw.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	b.cancel = cancel
	go func() {
		defer close(b.stopped)
		b.informer.RunWithContext(ctx)
	}()
	syncCtx, syncCancel := context.WithTimeout(ctx, 10*time.Minute)
	defer syncCancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), b.informer.HasSynced, b.reg.HasSynced) {
		return fmt.Errorf("the informer did not sync within 10 minutes (%d lists, %d watches)",
			b.lw.lists.Load(), b.lw.watches.Load())
	}
	if got := b.initialAdd.Load(); got != int64(len(initial)) {
		return fmt.Errorf("the handler received %d initial adds for %d pods", got, len(initial))
	}
	return nil
}

// run sends pool through the watch (on sched's schedule, or at once when sched is nil) and waits
// until the handler has seen every update.
func (b *informerBackend) run(src *updateSource, sched *schedule, rate uint64) (*feedPhase, error) {
	count := src.len()
	if count == 0 {
		return &feedPhase{staleness: newLatency()}, nil
	}
	if count > cap(b.lw.events) {
		return nil, fmt.Errorf("phase of %d updates exceeds the event buffer of %d", count, cap(b.lw.events))
	}
	p := &feedPhase{
		firstRV:   src.firstRV,
		count:     count,
		sched:     sched,
		rate:      rate,
		staleness: newLatency(),
		done:      make(chan struct{}),
	}
	b.cur.Store(p)
	defer b.cur.Store(nil)
	send := func(i int) { b.lw.events <- watch.Event{Type: watch.Modified, Object: src.get(i)} }
	if sched == nil {
		for i := range count {
			send(i)
		}
	} else {
		// The feeder: sends each update at its slot (every update that has arrived by now, then
		// sleeps until the next slot), whatever the informer does. An update built at its slot
		// is built here, as the reflector's goroutine decodes each event before queueing it.
		go func() {
			sl := newSleeper()
			defer sl.close()
			sent := 0
			for sent < sched.total {
				for arrived := sched.arrived(time.Now()); sent < arrived; sent++ {
					send(sent)
				}
				if sent < sched.total {
					sl.until(sched.slot(sent))
				}
			}
		}()
	}
	limit := 10 * time.Minute
	if sched != nil {
		limit += sched.end().Sub(sched.start)
	}
	select {
	case <-p.done:
		return p, nil
	case <-time.After(limit):
		return nil, fmt.Errorf("only %d of %d updates reached the handler within %s (%d lists, %d watches, %d unexpected notifications)",
			p.visible.Load(), p.count, limit, b.lw.lists.Load(), b.lw.watches.Load(), b.unexpected.Load())
	}
}

func (b *informerBackend) applyAll(pool []*corev1.Pod) error {
	src, err := prebuiltUpdates(pool)
	if err != nil {
		return err
	}
	_, err = b.run(src, nil, 0)
	return err
}

// openLoop sends src's updates at rate per second and samples the queue depth (arrived minus
// visible) about every 50 ms; staleness and the largest depth are recorded by the handler as
// updates become visible.
func (b *informerBackend) openLoop(src *updateSource, rate uint64) (openLoopResult, error) {
	start := time.Now()
	s := newSchedule(start, rate, src.len())
	var series [][2]any
	var samplerDepthMax uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	var phase atomic.Pointer[feedPhase]
	go func() {
		defer close(sampled)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case now := <-t.C:
				p := phase.Load()
				if p == nil {
					p = b.cur.Load()
					phase.Store(p)
				}
				if p == nil {
					continue
				}
				depth := uint64(max(s.arrived(now)-int(p.visible.Load()), 0))
				samplerDepthMax = max(samplerDepthMax, depth)
				series = append(series, [2]any{now.Sub(start).Seconds(), depth})
			}
		}
	}()
	p, err := b.run(src, &s, rate)
	close(stop)
	<-sampled
	if err != nil {
		return openLoopResult{}, err
	}
	elapsed := p.last.Sub(start).Seconds()
	series = append(series, [2]any{elapsed, uint64(0)})
	return openLoopResult{
		staleness: p.staleness,
		depthMax:  max(p.depthMax, samplerDepthMax),
		depthEnd:  s.depthEnd(p.last, rate),
		series:    series,
		elapsedS:  elapsed,
	}, nil
}

func (b *informerBackend) close() {
	if b.cancel == nil {
		return
	}
	b.cancel()
	select {
	case <-b.stopped:
	case <-time.After(10 * time.Second):
	}
}

func (b *informerBackend) notes() []string {
	return []string{
		"client-go: cache.NewSharedIndexInformer over a ListerWatcher that lists the initial pods once and feeds updates as MODIFIED events through one watch channel " +
			"buffered for a whole phase (arrivals are never throttled by the informer); list-then-watch (the ListerWatcher declares no watch-list support)",
		"client-go: a feeder goroutine sends each open-loop update at its slot (start + i/rate), sleeping on a timerfd between slots; staleness counts from the slot",
		"client-go: an update is visible when the one registered ResourceEventHandler's OnUpdate receives it (after the indexer has it; includes the distribution hop to the handler goroutine)",
		fmt.Sprintf("client-go: %d list calls, %d watch calls, %d unexpected notifications",
			b.lw.lists.Load(), b.lw.watches.Load(), b.unexpected.Load()),
	}
}
