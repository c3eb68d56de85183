package main

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"time"

	corev1 "k8s.io/api/core/v1"
	clientfeatures "k8s.io/client-go/features"
	"k8s.io/client-go/tools/cache"
)

// storeParams are the Rust `StoreParams`: what every row of a run shares.
type storeParams struct {
	objects   int
	nodes     int
	readers   int
	durationS float64
	rate      uint64
	updates   int
	openLoop  bool
	profile   podProfile
	placement *placement
	// sweep are the offered rates of the sweep (none: no sweep); sweepS is each point's length.
	sweep  []uint64
	sweepS float64
	// warmup is how long the readers run, unrecorded, before each phase with readers.
	warmup time.Duration
	// readerRate is the readers' operations a second together, each begun at its slot (0:
	// duty pacing, each reader sleeping d*(n-1) after an operation that took d).
	readerRate float64
	// olUpdates is how the open loop and the sweep get their updates.
	olUpdates openLoopUpdates
}

// sweepCount is the number of updates of the sweep point at rate (at least one), as in Rust.
func (p storeParams) sweepCount(rate uint64) int {
	return max(int(float64(rate)*p.sweepS), 1)
}

// backend is one Go row: a client-go store with a way to write to it.
type backend interface {
	// build fills the store with the initial pods and returns when they are visible.
	build(initial []*corev1.Pod) error
	// applyAll applies pool as fast as the store takes it and returns when all of it is visible.
	applyAll(pool []*corev1.Pod) error
	// openLoop applies src's updates as they arrive at rate per second.
	openLoop(src *updateSource, rate uint64) (openLoopResult, error)
	// indexer is what readers read.
	indexer() cache.Indexer
	// close stops whatever the backend runs.
	close()
	// notes say how the row maps the scenario onto client-go.
	notes() []string
}

// backendNames are the rows this binary runs, by report name.
var backendNames = []string{"client-go", "client-go-indexer"}

func newBackend(name string, capacity int) (backend, error) {
	switch name {
	case "client-go":
		return newInformerBackend(capacity)
	case "client-go-indexer":
		return newIndexerBackend()
	}
	return nil, fmt.Errorf("unknown Go backend %q (this binary runs %v)", name, backendNames)
}

// progress prints a phase message for the parent's progress bar.
func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "phase: "+format+"\n", args...)
}

// runStore runs every phase of the Rust `run_row` (scenarios/store/mod.rs) for one Go row and
// returns its report.
func runStore(name string, p storeParams) (*storeRowReport, error) {
	if err := p.placement.apply(); err != nil {
		return nil, err
	}
	sampler := startMemSampler(time.Now())
	sh := shapeForObjects(p.objects, p.nodes, p.profile)
	n := sh.total()
	olCount := 0
	if p.openLoop {
		olCount = int(float64(p.rate) * p.durationS)
	}
	capacity := max(n, p.updates, olCount)
	for _, r := range p.sweep {
		capacity = max(capacity, p.sweepCount(r))
	}
	rep := &storeRowReport{Name: name, DepthSeries: [][2]any{}, StalenessCDF: [][2]any{}, Sweep: []sweepPoint{}}
	digest := newWorkloadDigest()
	nextRV := uint64(n) + 1

	// The backend (and the informer's event buffer, sized for the largest phase) exist before the
	// first measurement, so they count in neither the objects nor the structure.
	b, err := newBackend(name, capacity)
	if err != nil {
		return nil, err
	}
	defer b.close()

	// 1. Memory.
	progress("memory: generating pods")
	memFrom := sampler.elapsed()
	h0 := liveHeap()
	initial := initialPods(sh)
	h1 := liveHeap()
	digest.add("initial", initial)
	sample := min(len(initial), 100)
	var jsonBytes uint64
	for i := range sample {
		buf, err := json.Marshal(initial[i])
		if err != nil {
			return nil, fmt.Errorf("encoding pod %d: %w", i, err)
		}
		jsonBytes += uint64(len(buf))
	}
	rep.Memory.JSONBytesPerObject = jsonBytes / uint64(max(sample, 1))
	progress("memory: building the store")
	if err := b.build(initial); err != nil {
		return nil, err
	}
	// The informer row's store holds the reflector's copies; the generated pods go (their
	// fields stay, shared with the copies).
	initial = nil
	h2 := liveHeap()
	rep.RSSBytes = rssBytes()
	objects := h1 - h0
	rep.Memory.ObjectsBytes = objects
	rep.Memory.BytesPerObject = objects / uint64(n)
	rep.Memory.TotalBytes = h2 - h0
	rep.Memory.StructurePerEntryIdle = (float64(h2) - float64(h1)) / float64(n)

	progress("memory: updating every pod while a reader holds an old read")
	pool := generate(n, func(i int) corev1.Pod { return makePod(sh, i, nextRV+uint64(i), (i+1)%sh.nodes) })
	digest.add("memory", pool)
	nextRV += uint64(n)
	h3 := liveHeap()
	poolBytes := float64(h3) - float64(h2)
	held := b.indexer().List()
	if err := b.applyAll(pool); err != nil {
		return nil, err
	}
	pool = nil
	h4 := liveHeap()
	rep.Memory.StructurePerEntryHolding = (float64(h4) - float64(h0) - float64(objects) - poolBytes) / float64(n)
	runtime.KeepAlive(held)
	held = nil
	h5 := liveHeap()
	rep.Memory.StructurePerEntryReleased = (float64(h5) - float64(h0) - poolBytes) / float64(n)
	_, _, livePeak := sampler.peaks(memFrom, sampler.elapsed())
	rep.PeakHeapBytes = max(livePeak, h1, h2, h3, h4, h5) - h0

	// 2. Read costs.
	progress("read costs: each read alone, owned")
	rep.ReadCosts = measureReadCosts(b.indexer(), n, sh.owners)

	// 3. Saturation without and with readers.
	var gcNotes []string
	progress("saturation: generating updates")
	pool = updates(sh, p.updates, nextRV, 7)
	digest.add("saturation", pool)
	nextRV += uint64(p.updates)
	progress("saturation: applying without readers")
	settle()
	cpu := markCPU()
	t := time.Now()
	if err := b.applyAll(pool); err != nil {
		return nil, err
	}
	rep.ApplyPerS = float64(p.updates) / time.Since(t).Seconds()
	applied := markCPU()
	runtime.GC() // frees what the phase replaced (see cpuPerUpdate)
	rep.ApplyFreedPerS = freedRate(p.updates, time.Since(t))
	reclaimed := markCPU()
	var cpuNote string
	rep.ApplyProcessCPUUSPerUpdate, rep.ApplyReclaimCPUUSPerUpdate, rep.ApplyThreadCPUUSPerUpdate, cpuNote =
		cpuPerUpdate(cpu, applied, reclaimed, p.updates, "saturation without readers")
	rep.ApplyKernelCPUUSPerUpdate = kernelPerUpdate(cpu, reclaimed, p.updates)
	pool = nil

	progress("saturation: generating updates")
	pool = updates(sh, p.updates, nextRV, 11)
	digest.add("saturation-readers", pool)
	nextRV += uint64(p.updates)
	progress("saturation: applying with readers")
	settle()
	rs := startReaders(b.indexer(), p.readers, sh.owners, p.placement, p.warmup, p.readerRate)
	before := markCPU()
	t = time.Now()
	if err := b.applyAll(pool); err != nil {
		rs.finish()
		return nil, err
	}
	rep.ApplyPerSWithReaders = float64(p.updates) / time.Since(t).Seconds()
	inPhase := markCPU()
	// The collection that frees what the phase replaced starts as the phase ends, while the
	// readers finish their last reads, as the Rust rows' reclaimers go on freeing then.
	collected := make(chan time.Time, 1)
	go func() {
		runtime.GC()
		collected <- time.Now()
	}()
	lat := rs.finish()
	end := time.Now()
	if c := <-collected; c.After(end) {
		end = c
	}
	rep.ApplyFreedPerSWithReaders = freedRate(p.updates, end.Sub(t))
	if before.ok && inPhase.ok {
		gcNotes = append(gcNotes, fmt.Sprintf("client-go: saturation with readers: %d garbage collection cycles ran in the phase", inPhase.cycles-before.cycles))
	}
	pool = nil

	// 4. Open loop with readers.
	if p.openLoop {
		if p.olUpdates == prebuilt {
			progress("open loop: generating %d updates", olCount)
		} else {
			progress("open loop: planning %d updates", olCount)
		}
		src := phaseUpdates(p.olUpdates, sh, olCount, nextRV, 13)
		src.addToDigest(digest, "open-loop")
		nextRV += uint64(olCount)
		progress("open loop: %d updates/s for %.0fs with %d readers", p.rate, p.durationS, p.readers)
		settle()
		rs := startReaders(b.indexer(), p.readers, sh.owners, p.placement, p.warmup, p.readerRate)
		before := markCPU()
		ol, err := b.openLoop(src, p.rate)
		after := markCPU()
		rl := rs.finish()
		if err != nil {
			return nil, err
		}
		if before.ok && after.ok {
			why := "each update was built at its slot, as decoding it would be"
			if p.olUpdates == prebuilt {
				why = "its updates were generated before it, so it allocates too little to start the collections that decoding each update would"
			}
			gcNotes = append(gcNotes, fmt.Sprintf("client-go: open loop: %d garbage collection cycles ran in it (%s)", after.cycles-before.cycles, why))
		}
		rep.OpenLoopBuildUSPerUpdate = src.buildUSPerUpdate()
		src = nil
		rep.ReaderOpsPerS = float64(rl.ops) / max(ol.elapsedS, 1e-9)
		lat.merge(rl)
		rep.StalenessUS = ol.staleness.summary()
		rep.StalenessCDF = ol.staleness.cdf()
		rep.QueueDepthMax = ol.depthMax
		rep.QueueDepthEnd = ol.depthEnd
		rep.DepthSeries = ol.series
	}
	rep.ListUS = lat.list.summary()
	rep.IndexUS = lat.index.summary()
	rep.NsListUS = lat.nsList.summary()

	// 5. The sweep: the open loop again at each offered rate (the Rust `sweep::point`).
	for i, rate := range p.sweep {
		count := p.sweepCount(rate)
		progress("sweep %d/s: preparing %d updates", rate, count)
		src := phaseUpdates(p.olUpdates, sh, count, nextRV, 100+uint64(i))
		src.addToDigest(digest, fmt.Sprintf("sweep-%d", rate))
		progress("sweep %d/s for %.0fs with %d readers", rate, p.sweepS, p.readers)
		settle()
		rs := startReaders(b.indexer(), p.readers, sh.owners, p.placement, p.warmup, p.readerRate)
		ol, err := b.openLoop(src, rate)
		rl := rs.finish()
		if err != nil {
			return nil, err
		}
		src = nil
		nextRV += uint64(count)
		rep.Sweep = append(rep.Sweep, sweepPoint{
			Rate:          rate,
			Updates:       uint64(count),
			ElapsedS:      ol.elapsedS,
			StalenessUS:   ol.staleness.summary(),
			QueueDepthMax: ol.depthMax,
			QueueDepthEnd: ol.depthEnd,
			ReaderOpsPerS: float64(rl.ops) / max(ol.elapsedS, 1e-9),
		})
	}
	rep.WorkloadDigest = digest.hex()
	rep.Notes = b.notes()
	if cpuNote != "" {
		rep.Notes = append(rep.Notes, cpuNote)
	}
	rep.Notes = append(rep.Notes, gcNotes...)
	progress("done")
	samples := sampler.finish()
	rep.MemoryTrace = trace(samples)
	rep.GoRuntime = goRuntimeReport(samples, p.placement)
	return rep, nil
}

// freedRate is a saturation phase's rate with the freeing of what it replaced counted: its
// `updates` over the time `elapsed` from the phase's start until the full collection after it
// returned (runtime.GC sweeps before it returns). The Rust rows' figure runs until their heap
// stops shrinking, so both sides' rates include freeing the pods the phase replaced, which this
// phase, replaying pods generated before it, would otherwise leave to a collection after it.
func freedRate(updates int, elapsed time.Duration) *float64 {
	if updates <= 0 || elapsed <= 0 {
		return nil
	}
	r := float64(updates) / elapsed.Seconds()
	return &r
}

// settle runs a full garbage collection before a timed phase (untimed), so that the collection
// cycles that generating the phase's updates started (harness work) do not run into the phase;
// the collections the phase's own allocations cause still count. The Rust rows wait until their
// heap stops shrinking at the same points, so that a background reclaimer's leftovers do not run
// into the phase either.
func settle() { runtime.GC() }

// goRuntimeReport fills in the Go-only part of the report at the end of the run.
func goRuntimeReport(samples []memSample, pl *placement) *goRuntime {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	g := &goRuntime{
		GoVersion:       runtime.Version(),
		ClientGoVersion: moduleVersion("k8s.io/client-go"),
		Gomaxprocs:      runtime.GOMAXPROCS(0),
		GOGC:            os.Getenv("GOGC"),
		FeatureGates:    featureGates(),
		HeapAllocBytes:  ms.HeapAlloc,
		HeapInuseBytes:  ms.HeapInuse,
		GCCycles:        ms.NumGC,
		GCForcedCycles:  ms.NumForcedGC,
		GCPauseTotalUS:  ms.PauseTotalNs / 1000,
		GCCPUFraction:   ms.GCCPUFraction,
		Placement:       pl.describe(),
	}
	for _, s := range samples {
		g.PeakHeapAllocBytes = max(g.PeakHeapAllocBytes, s.HeapAlloc)
		g.PeakHeapInuseBytes = max(g.PeakHeapInuseBytes, s.HeapInuse)
		g.PeakHeapLiveBytes = max(g.PeakHeapLiveBytes, s.HeapLive)
	}
	return g
}

// moduleVersion is the version of module path built into this binary ("" if unknown).
func moduleVersion(path string) string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, m := range info.Deps {
		if m.Path == path {
			if m.Replace != nil {
				return m.Replace.Version
			}
			return m.Version
		}
	}
	return ""
}

// informerGates are the client-go feature gates that decide how an informer queues and applies
// deltas.
var informerGates = []clientfeatures.Feature{
	clientfeatures.AtomicFIFO,
	clientfeatures.InOrderInformers,
	clientfeatures.InOrderInformersBatchProcess,
	clientfeatures.UnlockWhileProcessingFIFO,
	clientfeatures.WatchListClient,
	clientfeatures.InformerResourceVersion,
}

// featureGates reports the informer gates as client-go sees them (defaults, unless KUBE_FEATURE_*
// variables override them).
func featureGates() map[string]bool {
	out := make(map[string]bool, len(informerGates))
	for _, f := range informerGates {
		out[string(f)] = clientfeatures.FeatureGates().Enabled(f)
	}
	return out
}
