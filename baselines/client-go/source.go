package main

import (
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// openLoopUpdates says how the open loop and the sweep get their updates: the Rust
// `OpenLoopUpdates`.
type openLoopUpdates int

const (
	// atSlot builds each update when it arrives, on the row's source, the stand-in for decoding:
	// the phase allocates what a cluster's watch events would, so the collector runs in it.
	atSlot openLoopUpdates = iota
	// prebuilt builds every update before the phase and holds them all in a pool until it ends.
	// The pool is live heap, which puts the next collection beyond what the phase allocates.
	prebuilt
)

func parseOpenLoopUpdates(s string) (openLoopUpdates, error) {
	switch s {
	case "at-slot":
		return atSlot, nil
	case "prebuilt":
		return prebuilt, nil
	}
	return 0, fmt.Errorf("--open-loop-updates must be at-slot or prebuilt, got %q", s)
}

// updateSource is one phase's updates, taken in order by one goroutine (the feeder, or the
// writer of a store row): a pool built before the phase, or a plan whose update u is pod
// plan[u].pod on node plan[u].node at resource version firstRV+u, built by get. The Rust
// `source::Updates`.
type updateSource struct {
	pool    []*corev1.Pod
	sh      shape
	plan    []planEntry
	firstRV uint64
	built   int
	buildNS int64
}

// prebuiltUpdates wraps a pool. Its first pod must carry a numeric resource version.
func prebuiltUpdates(pool []*corev1.Pod) (*updateSource, error) {
	u := &updateSource{pool: pool}
	if len(pool) > 0 {
		rv, err := strconv.ParseUint(pool[0].ResourceVersion, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("update without a numeric resource version: %w", err)
		}
		u.firstRV = rv
	}
	return u, nil
}

// plannedUpdates is count updates of random pods (updatePlan with seed, what updates builds),
// each built when get takes it.
func plannedUpdates(s shape, count int, firstRV, seed uint64) *updateSource {
	return &updateSource{sh: s, plan: updatePlan(s, count, seed), firstRV: firstRV}
}

// phaseUpdates is an open-loop phase's updates as mode hands them over.
func phaseUpdates(mode openLoopUpdates, s shape, count int, firstRV, seed uint64) *updateSource {
	if mode == prebuilt {
		// updates gives numeric resource versions, so wrapping cannot fail.
		u, _ := prebuiltUpdates(updates(s, count, firstRV, seed))
		return u
	}
	return plannedUpdates(s, count, firstRV, seed)
}

// len is the number of updates in the phase.
func (u *updateSource) len() int {
	if u.plan != nil {
		return len(u.plan)
	}
	return len(u.pool)
}

// get is update i: the pool's, or built now (timed) from the plan. Each pod is an allocation of
// its own, as a decoded watch event is.
func (u *updateSource) get(i int) *corev1.Pod {
	if u.plan == nil {
		return u.pool[i]
	}
	began := time.Now()
	e := u.plan[i]
	p := makePod(u.sh, e.pod, u.firstRV+uint64(i), e.node)
	u.buildNS += int64(time.Since(began))
	u.built++
	return &p
}

// buildUSPerUpdate is the average time get took to build one update, microseconds; nil for a
// pool or before any was built.
func (u *updateSource) buildUSPerUpdate() *float64 {
	if u.built == 0 {
		return nil
	}
	v := float64(u.buildNS) / 1e3 / float64(u.built)
	return &v
}

// addToDigest adds every update of the phase to d (before the phase: a plan's updates are built
// once more on every core, untimed, and dropped), exactly as the Rust `Updates::add_to_digest`.
func (u *updateSource) addToDigest(d *workloadDigest, phase string) {
	if u.plan == nil {
		d.add(phase, u.pool)
		return
	}
	const chunk = 20_000
	for start := 0; start < len(u.plan); start += chunk {
		part := u.plan[start:min(start+chunk, len(u.plan))]
		rv := u.firstRV + uint64(start)
		d.add(phase, generate(len(part), func(i int) corev1.Pod {
			return makePod(u.sh, part[i].pod, rv+uint64(i), part[i].node)
		}))
	}
}
