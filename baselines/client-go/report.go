package main

// The worker's JSON: field for field the Rust `StoreRowReport` of
// crates/snapinformer-sim/src/scenarios/store/mod.rs (same names, same units: summaries in
// microseconds, bytes, seconds), plus the optional `go_runtime` object that only the Go rows fill
// in.

// memoryReport is the Rust `MemoryReport`.
type memoryReport struct {
	ObjectsBytes              uint64  `json:"objects_bytes"`
	BytesPerObject            uint64  `json:"bytes_per_object"`
	JSONBytesPerObject        uint64  `json:"json_bytes_per_object"`
	TotalBytes                uint64  `json:"total_bytes"`
	StructurePerEntryIdle     float64 `json:"structure_per_entry_idle"`
	StructurePerEntryHolding  float64 `json:"structure_per_entry_holding"`
	StructurePerEntryReleased float64 `json:"structure_per_entry_released"`
}

// memoryTrace is the Rust `MemoryTrace`: memory through the whole run.
type memoryTrace struct {
	// PeriodMS is the milliseconds between samples.
	PeriodMS uint64 `json:"period_ms"`
	// HeapPeakBytes is the largest sampled HeapAlloc (Go has no exact peak counter; garbage not
	// yet collected included).
	HeapPeakBytes uint64 `json:"heap_peak_bytes"`
	// RSSPeakBytes is the kernel's high-water mark of the resident set, or the largest sample.
	RSSPeakBytes uint64 `json:"rss_peak_bytes"`
	// Series is (seconds since the sampler started, HeapAlloc bytes, RSS bytes).
	Series [][3]any `json:"series"`
}

// readCosts is the Rust `ReadCosts`: each read alone on one goroutine, no writer, medians. The
// borrowed reads and the Arc clone do not exist in Go (null).
type readCosts struct {
	ListUS                 float64  `json:"list_us"`
	ListBorrowedUS         *float64 `json:"list_borrowed_us"`
	NsListUS               float64  `json:"ns_list_us"`
	NsListBorrowedUS       *float64 `json:"ns_list_borrowed_us"`
	OwnerUS                float64  `json:"owner_us"`
	OwnerBorrowedUS        *float64 `json:"owner_borrowed_us"`
	ArcCloneNsPerObject    *float64 `json:"arc_clone_ns_per_object"`
	PointerCopyNsPerObject float64  `json:"pointer_copy_ns_per_object"`
}

// sweepPoint is the Rust `SweepPoint`: one offered rate of the sweep.
type sweepPoint struct {
	Rate          uint64  `json:"rate"`
	Updates       uint64  `json:"updates"`
	ElapsedS      float64 `json:"elapsed_s"`
	StalenessUS   summary `json:"staleness_us"`
	QueueDepthMax uint64  `json:"queue_depth_max"`
	QueueDepthEnd uint64  `json:"queue_depth_end"`
	ReaderOpsPerS float64 `json:"reader_ops_per_s"`
}

// storeRowReport is the Rust `StoreRowReport`. ApplyProcessCPUUSPerUpdate is the process's CPU
// time per update in saturation without readers, microseconds, ApplyReclaimCPUUSPerUpdate the
// CPU per update of the full collection after it, ApplyKernelCPUUSPerUpdate the kernel's part
// of the two; ApplyThreadCPUUSPerUpdate splits their sum into the garbage collector's share and
// the rest. ApplyFreedPerS and ApplyFreedPerSWithReaders are the two saturation phases' rates
// with the full collection that frees what they replaced counted in their time (see
// freedRate). OpenLoopBuildUSPerUpdate is the time building one open-loop update at its slot
// took (absent for a pool).
type storeRowReport struct {
	Name                       string             `json:"name"`
	ApplyPerS                  float64            `json:"apply_per_s"`
	ApplyPerSWithReaders       float64            `json:"apply_per_s_with_readers"`
	ApplyFreedPerS             *float64           `json:"apply_freed_per_s"`
	ApplyFreedPerSWithReaders  *float64           `json:"apply_freed_per_s_with_readers"`
	ApplyProcessCPUUSPerUpdate *float64           `json:"apply_process_cpu_us_per_update"`
	ApplyReclaimCPUUSPerUpdate *float64           `json:"apply_reclaim_cpu_us_per_update"`
	ApplyKernelCPUUSPerUpdate  *float64           `json:"apply_kernel_cpu_us_per_update"`
	ApplyThreadCPUUSPerUpdate  map[string]float64 `json:"apply_thread_cpu_us_per_update,omitempty"`
	StalenessUS                summary            `json:"staleness_us"`
	OpenLoopBuildUSPerUpdate   *float64           `json:"open_loop_build_us_per_update,omitempty"`
	QueueDepthMax              uint64             `json:"queue_depth_max"`
	QueueDepthEnd              uint64             `json:"queue_depth_end"`
	ListUS                     summary            `json:"list_us"`
	IndexUS                    summary            `json:"index_us"`
	NsListUS                   summary            `json:"ns_list_us"`
	ReaderOpsPerS              float64            `json:"reader_ops_per_s"`
	PeakHeapBytes              uint64             `json:"peak_heap_bytes"`
	RSSBytes                   uint64             `json:"rss_bytes"`
	Memory                     memoryReport       `json:"memory"`
	DepthSeries                [][2]any           `json:"depth_series"`
	StalenessCDF               [][2]any           `json:"staleness_cdf"`
	MemoryTrace                memoryTrace        `json:"memory_trace"`
	ReadCosts                  *readCosts         `json:"read_costs"`
	Sweep                      []sweepPoint       `json:"sweep"`
	WorkloadDigest             string             `json:"workload_digest"`
	GoRuntime                  *goRuntime         `json:"go_runtime,omitempty"`
	Notes                      []string           `json:"notes,omitempty"`
}

// goRuntime is the Rust `GoRuntimeReport`: what only a Go row reports, the runtime's own view of
// memory and collection, and the configuration the row ran with.
type goRuntime struct {
	// GoVersion is runtime.Version().
	GoVersion string `json:"go_version"`
	// ClientGoVersion is the k8s.io/client-go module version built in.
	ClientGoVersion string `json:"client_go_version"`
	// Gomaxprocs is runtime.GOMAXPROCS(0).
	Gomaxprocs int `json:"gomaxprocs"`
	// GOGC is the GOGC setting ("" means the default, 100).
	GOGC string `json:"gogc"`
	// FeatureGates are client-go's feature gates as the process saw them.
	FeatureGates map[string]bool `json:"feature_gates"`
	// HeapAllocBytes is MemStats.HeapAlloc at the end of the run.
	HeapAllocBytes uint64 `json:"heap_alloc_bytes"`
	// HeapInuseBytes is MemStats.HeapInuse at the end of the run.
	HeapInuseBytes uint64 `json:"heap_inuse_bytes"`
	// PeakHeapAllocBytes is the largest sampled HeapAlloc (garbage not yet collected included).
	PeakHeapAllocBytes uint64 `json:"peak_heap_alloc_bytes"`
	// PeakHeapInuseBytes is the largest sampled HeapInuse.
	PeakHeapInuseBytes uint64 `json:"peak_heap_inuse_bytes"`
	// PeakHeapLiveBytes is the largest sampled live heap (as of the last GC mark).
	PeakHeapLiveBytes uint64 `json:"peak_heap_live_bytes"`
	// GCCycles is MemStats.NumGC at the end.
	GCCycles uint32 `json:"gc_cycles"`
	// GCForcedCycles is MemStats.NumForcedGC (the memory phase's measurements force some).
	GCForcedCycles uint32 `json:"gc_forced_cycles"`
	// GCPauseTotalUS is MemStats.PauseTotalNs in microseconds.
	GCPauseTotalUS uint64 `json:"gc_pause_total_us"`
	// GCCPUFraction is MemStats.GCCPUFraction at the end.
	GCCPUFraction float64 `json:"gc_cpu_fraction"`
	// Placement says how the placement was applied to the process's threads.
	Placement string `json:"placement"`
}
