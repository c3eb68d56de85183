package main

// The worker's JSON: field for field the Rust `BackendReport` of store_scenario.rs (same names,
// same units: summaries in microseconds, bytes, seconds), plus the optional `go_runtime` object that
// only the Go rows fill in.

// memoryReport is store_scenario.rs `MemoryReport`.
type memoryReport struct {
	ObjectsBytes              uint64  `json:"objects_bytes"`
	BytesPerObject            uint64  `json:"bytes_per_object"`
	JSONBytesPerObject        uint64  `json:"json_bytes_per_object"`
	TotalBytes                uint64  `json:"total_bytes"`
	StructurePerEntryIdle     float64 `json:"structure_per_entry_idle"`
	StructurePerEntryHolding  float64 `json:"structure_per_entry_holding"`
	StructurePerEntryReleased float64 `json:"structure_per_entry_released"`
}

// backendReport is store_scenario.rs `BackendReport`.
type backendReport struct {
	Name                 string       `json:"name"`
	ApplyPerS            float64      `json:"apply_per_s"`
	ApplyPerSWithReaders float64      `json:"apply_per_s_with_readers"`
	StalenessUS          summary      `json:"staleness_us"`
	QueueDepthMax        uint64       `json:"queue_depth_max"`
	QueueDepthEnd        uint64       `json:"queue_depth_end"`
	ListUS               summary      `json:"list_us"`
	IndexUS              summary      `json:"index_us"`
	NsListUS             summary      `json:"ns_list_us"`
	ReaderOpsPerS        float64      `json:"reader_ops_per_s"`
	PeakHeapBytes        uint64       `json:"peak_heap_bytes"`
	RSSBytes             uint64       `json:"rss_bytes"`
	PeakRSSBytes         uint64       `json:"peak_rss_bytes"`
	Memory               memoryReport `json:"memory"`
	DepthSeries          [][2]any     `json:"depth_series"`
	StalenessCDF         [][2]any     `json:"staleness_cdf"`
	WorkloadDigest       string       `json:"workload_digest"`
	GoRuntime            *goRuntime   `json:"go_runtime,omitempty"`
}

// goRuntime is what only a Go row reports: the runtime's own view of memory and collection, and
// the client-go configuration the row ran with.
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
	// PeakSampledRSSBytes is the largest sampled RSS (peak_rss_bytes is the kernel's exact one).
	PeakSampledRSSBytes uint64 `json:"peak_sampled_rss_bytes"`
	// GCCycles is MemStats.NumGC at the end.
	GCCycles uint32 `json:"gc_cycles"`
	// GCForcedCycles is MemStats.NumForcedGC (the memory phase's measurements force some).
	GCForcedCycles uint32 `json:"gc_forced_cycles"`
	// GCPauseTotalUS is MemStats.PauseTotalNs in microseconds.
	GCPauseTotalUS uint64 `json:"gc_pause_total_us"`
	// GCCPUFraction is MemStats.GCCPUFraction at the end.
	GCCPUFraction float64 `json:"gc_cpu_fraction"`
	// Samples is RSS and heap about every 100 ms through the whole run.
	Samples []memSample `json:"samples"`
	// Notes say how this row maps the scenario onto client-go.
	Notes []string `json:"notes"`
}
