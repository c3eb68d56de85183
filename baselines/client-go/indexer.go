package main

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
)

// podIndexers are the indexes every Go row gets: client-go's namespace index, as a
// SharedInformerFactory sets it up, plus the owner-UID and node-name key indexes that the Rust
// rows get (pods.rs `pod_indexers`; client-go has no other kind of index).
func podIndexers() cache.Indexers {
	return cache.Indexers{
		cache.NamespaceIndex: cache.MetaNamespaceIndexFunc,
		ownerIndex: func(obj any) ([]string, error) {
			pod, ok := obj.(*corev1.Pod)
			if !ok {
				return nil, fmt.Errorf("owner index: expected *v1.Pod, got %T", obj)
			}
			uids := make([]string, 0, len(pod.OwnerReferences))
			for _, o := range pod.OwnerReferences {
				uids = append(uids, string(o.UID))
			}
			return uids, nil
		},
		nodeIndex: func(obj any) ([]string, error) {
			pod, ok := obj.(*corev1.Pod)
			if !ok {
				return nil, fmt.Errorf("node index: expected *v1.Pod, got %T", obj)
			}
			if pod.Spec.NodeName == "" {
				return nil, nil
			}
			return []string{pod.Spec.NodeName}, nil
		},
	}
}

// indexerBackend is the `client-go-indexer` row: the bare thread-safe store of `cache.NewIndexer`,
// written in batches of up to 1000 through `cache.TransactionStore.Transaction` (1.35+: one write
// lock per batch), as the Rust `locked-batch` row writes its analogue. A batch is visible when
// Transaction returns. No queue, no reflector, no handlers: the control that shows what the
// informer pipeline around the same store costs.
type indexerBackend struct {
	idx cache.Indexer
	txn cache.TransactionStore
}

func newIndexerBackend() (*indexerBackend, error) {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, podIndexers())
	txn, ok := idx.(cache.TransactionStore)
	if !ok {
		return nil, fmt.Errorf("client-go's cache.NewIndexer returned %T, which has no Transaction method", idx)
	}
	return &indexerBackend{idx: idx, txn: txn}, nil
}

func (b *indexerBackend) indexer() cache.Indexer { return b.idx }

// apply writes pods in one transaction.
func (b *indexerBackend) apply(pods []*corev1.Pod) error {
	txns := make([]cache.Transaction, len(pods))
	for i, p := range pods {
		txns[i] = cache.Transaction{Type: cache.TransactionTypeUpdate, Object: p}
	}
	if err := b.txn.Transaction(txns...); err != nil {
		return fmt.Errorf("transaction of %d pods: %w", len(pods), err)
	}
	return nil
}

func (b *indexerBackend) build(initial []*corev1.Pod) error {
	return b.applyAll(initial)
}

func (b *indexerBackend) applyAll(pool []*corev1.Pod) error {
	ptrs := pool
	for len(ptrs) > 0 {
		n := min(len(ptrs), maxBatch)
		if err := b.apply(ptrs[:n]); err != nil {
			return err
		}
		ptrs = ptrs[n:]
	}
	return nil
}

// openLoop is open_loop.rs `run` in Go: the writer takes what has arrived (up to 1000 at a time,
// building them first when they are built at their slots), applies it in one transaction, and
// every update of the batch becomes visible when the transaction returns.
func (b *indexerBackend) openLoop(src *updateSource, rate uint64) (openLoopResult, error) {
	total := src.len()
	batch := make([]*corev1.Pod, 0, maxBatch)
	res := openLoopResult{staleness: newLatency()}
	visible := 0
	lastSample := 0.0
	sl := newSleeper()
	defer sl.close()
	start := time.Now()
	s := newSchedule(start, rate, total)
	for visible < total {
		now := time.Now()
		arrived := s.arrived(now)
		depth := uint64(arrived - visible)
		res.depthMax = max(res.depthMax, depth)
		t := now.Sub(start).Seconds()
		if t-lastSample >= 0.05 {
			res.series = append(res.series, [2]any{t, depth})
			lastSample = t
		}
		if arrived == visible {
			sl.until(s.slot(visible))
			continue
		}
		n := min(arrived-visible, maxBatch)
		batch = batch[:0]
		for i := visible; i < visible+n; i++ {
			batch = append(batch, src.get(i))
		}
		if err := b.apply(batch); err != nil {
			return res, err
		}
		at := time.Now()
		for i := visible; i < visible+n; i++ {
			res.staleness.record(max(at.Sub(s.slot(i)), 0))
		}
		visible += n
	}
	finished := time.Now()
	res.elapsedS = finished.Sub(start).Seconds()
	res.depthEnd = s.depthEnd(finished, rate)
	res.series = append(res.series, [2]any{res.elapsedS, uint64(0)})
	return res, nil
}

func (b *indexerBackend) close() {}

func (b *indexerBackend) notes() []string {
	return []string{
		"client-go-indexer: cache.NewIndexer (the thread-safe store alone) with the namespace, owner-UID and node-name indexes; " +
			"updates in batches of up to 1000 through cache.TransactionStore.Transaction (one write lock per batch); " +
			"an update is visible when its Transaction returns",
	}
}
