// Command snapinformer-client-go runs the `client-go` and `client-go-indexer` rows of the
// snapinformer simulator's `store` scenario: real, unmodified k8s.io/client-go tools/cache driven
// with exactly the workload the Rust rows get (see crates/snapinformer-sim/src/scenarios/store).
//
// The simulator builds this binary and runs it as a worker process, like its Rust workers:
//
//	snapinformer-client-go store --objects N --nodes N --readers N --duration D --rate R \
//	    --updates N --pod-profile realistic|small --placement unpinned|pinned \
//	    [--reader-warmup D] [--reader-rate OPS|duty] [--open-loop-updates at-slot|prebuilt] \
//	    [--sweep R1,R2,... --sweep-duration D] [--quick] \
//	    --worker client-go|client-go-indexer --worker-out FILE
//
// It prints `phase: <message>` lines on stderr and writes its report, which deserializes into the
// Rust StoreRowReport, as JSON to FILE. It accepts exactly the flags the simulator passes (Go's
// flag syntax: `--name value`, `--name=value`); any other flag is an error. The simulator passes
// resolved values and never --quick, which is kept for running the worker by hand.
//
// A second subcommand prints generated pods as JSON lines, for the Rust test that checks that the
// Go and Rust generators agree:
//
//	snapinformer-client-go dump-pods --profile realistic|small --objects N --nodes N \
//	    --indices 0,7,99 [--updates COUNT --first-rv RV --seed S]
//
// Without --updates it prints the initial pods with those indices; with it, the updates with those
// positions in the plan of COUNT updates from resource version RV drawn with seed S.
//
// A third prints, as JSON, the struct bodies of one generated pod (each kind of struct it holds,
// how many, and unsafe.Sizeof of one), for the Rust example `pod_layout`, which compares them with
// the k8s_openapi pod's:
//
//	snapinformer-client-go layout [--profile realistic|small]
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
		os.Exit(1)
	}
}

const usage = "usage: snapinformer-client-go store [flags] | dump-pods [flags] | layout [flags] (-h for a subcommand's flags)"

func run(args []string) error {
	if len(args) == 0 {
		return errors.New(usage)
	}
	switch args[0] {
	case "store":
		return runStoreCommand(args[1:])
	case "dump-pods":
		return runDumpPods(args[1:])
	case "layout":
		return runLayout(args[1:])
	}
	return fmt.Errorf("unknown subcommand %q; %s", args[0], usage)
}

func runStoreCommand(args []string) error {
	fs := flag.NewFlagSet("store", flag.ContinueOnError)
	objects := fs.Int("objects", 200_000, "pods in the store")
	nodes := fs.Int("nodes", 1000, "nodes the pods are spread over")
	readers := fs.Int("readers", 10, "reader goroutines (paced to use at most one core together)")
	duration := fs.Duration("duration", 20*time.Second, "length of the open-loop phase")
	rate := fs.Uint64("rate", 20_000, "open-loop arrival rate in updates per second (0: saturation only)")
	profileName := fs.String("pod-profile", "realistic", "how much of each pod to fill in: realistic or small")
	updatesFlag := fs.Int("updates", -1, "updates applied in each saturation phase (default: as many as objects, at least 20,000)")
	placementName := fs.String("placement", "unpinned", "where threads run: unpinned (any CPU) or pinned (readers on the last CPU, every other thread on the first)")
	sweepFlag := fs.String("sweep", "", "offered rates of a sweep run after the open loop, comma-separated (e.g. 5000,20000)")
	sweepDuration := fs.Duration("sweep-duration", 5*time.Second, "length of each point of the sweep")
	readerWarmup := fs.Duration("reader-warmup", 0, "how long the readers run, unrecorded, before each phase with readers (the Rust parent passes its own)")
	readerRate := -1.0 // not given: one a second per reader, as the Rust worker's default
	fs.Func("reader-rate", "operations a second the readers make together, each begun at its slot (default: one a second per reader, as the Rust side's; 0 or duty: each sleeps d*(readers-1) after an operation that took d, the Rust parent's --reader-rate duty)", func(s string) error {
		if strings.EqualFold(strings.TrimSpace(s), "duty") {
			readerRate = 0
			return nil
		}
		r, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil || !(r >= 0) || math.IsInf(r, 1) {
			return fmt.Errorf("%q is not a rate in operations a second (a number, 0 or more) nor duty", s)
		}
		readerRate = r
		return nil
	})
	olUpdatesName := fs.String("open-loop-updates", "at-slot", "how the open loop and the sweep get their updates: at-slot (each built when it arrives, as decoding it would be) or prebuilt (all built before the phase, held in a pool)")
	quick := fs.Bool("quick", false, "the small version: 5,000 pods, 50 nodes, 4 readers, 2 s at 5,000/s, 20,000 updates, sweep points of at most 1 s")
	worker := fs.String("worker", "", "the row to run: "+strings.Join(backendNames, " or "))
	workerOut := fs.String("worker-out", "", "where to write the report as JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if !slices.Contains(backendNames, *worker) {
		return fmt.Errorf("--worker must be one of %v, got %q", backendNames, *worker)
	}
	if *workerOut == "" {
		return errors.New("--worker-out is required")
	}
	profile, err := parseProfile(*profileName)
	if err != nil {
		return err
	}
	pl, err := parsePlacement(*placementName)
	if err != nil {
		return err
	}
	sweep, err := parseRates(*sweepFlag)
	if err != nil {
		return err
	}
	olUpdates, err := parseOpenLoopUpdates(*olUpdatesName)
	if err != nil {
		return err
	}
	p := storeParams{
		objects:    *objects,
		nodes:      *nodes,
		readers:    *readers,
		durationS:  duration.Seconds(),
		rate:       *rate,
		updates:    *updatesFlag,
		openLoop:   *rate > 0,
		profile:    profile,
		placement:  pl,
		sweep:      sweep,
		sweepS:     sweepDuration.Seconds(),
		warmup:     *readerWarmup,
		readerRate: readerRate,
		olUpdates:  olUpdates,
	}
	if p.updates < 0 {
		p.updates = max(p.objects, 20_000)
	}
	if *quick {
		p.objects, p.nodes, p.readers, p.durationS, p.rate, p.updates, p.openLoop = 5000, 50, 4, 2, 5000, 20_000, true
		p.sweepS = min(p.sweepS, 1)
	}
	if p.readerRate < 0 {
		p.readerRate = float64(p.readers) // after --quick, which sets the readers
	}
	if p.objects < 1 || p.readers < 0 || p.warmup < 0 {
		return fmt.Errorf("--objects must be at least 1, --readers and --reader-warmup not negative")
	}
	rep, err := runStore(*worker, p)
	if err != nil {
		return err
	}
	buf, err := json.Marshal(rep)
	if err != nil {
		return fmt.Errorf("encoding the report: %w", err)
	}
	if err := os.WriteFile(*workerOut, buf, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", *workerOut, err)
	}
	return nil
}

// parseRates parses a comma-separated list of rates (empty: none); a rate must be at least 1.
func parseRates(s string) ([]uint64, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []uint64
	for _, f := range strings.Split(s, ",") {
		r, err := strconv.ParseUint(strings.TrimSpace(f), 10, 64)
		if err != nil || r == 0 {
			return nil, fmt.Errorf("--sweep: %q is not a rate of at least 1 update per second", f)
		}
		out = append(out, r)
	}
	return out, nil
}

func runDumpPods(args []string) error {
	fs := flag.NewFlagSet("dump-pods", flag.ContinueOnError)
	profileName := fs.String("profile", "realistic", "realistic or small")
	objects := fs.Int("objects", 5000, "pods in the population")
	nodes := fs.Int("nodes", 50, "nodes")
	indices := fs.String("indices", "0", "comma-separated pod indices (initial) or plan positions (updates)")
	count := fs.Int("updates", 0, "if set: the number of updates in the plan")
	firstRV := fs.Uint64("first-rv", 1, "resource version of the plan's first update")
	seed := fs.Uint64("seed", 7, "the plan's seed")
	if err := fs.Parse(args); err != nil {
		return err
	}
	profile, err := parseProfile(*profileName)
	if err != nil {
		return err
	}
	sh := shapeForObjects(*objects, *nodes, profile)
	var plan []planEntry
	if *count > 0 {
		plan = updatePlan(sh, *count, *seed)
	}
	enc := json.NewEncoder(os.Stdout)
	for _, f := range strings.Split(*indices, ",") {
		i, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return fmt.Errorf("--indices: %q is not a number", f)
		}
		if plan != nil {
			if i < 0 || i >= len(plan) {
				return fmt.Errorf("--indices: %d is outside the plan of %d updates", i, len(plan))
			}
			pod := makePod(sh, plan[i].pod, *firstRV+uint64(i), plan[i].node)
			err = enc.Encode(&pod)
		} else {
			if i < 0 || i >= sh.total() {
				return fmt.Errorf("--indices: %d is outside the population of %d pods", i, sh.total())
			}
			pod := makePod(sh, i, uint64(i)+1, i%sh.nodes)
			err = enc.Encode(&pod)
		}
		if err != nil {
			return fmt.Errorf("writing pod %d: %w", i, err)
		}
	}
	return nil
}
