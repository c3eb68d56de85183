package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// maxBatch is the largest batch a writer takes at once (store_scenario.rs MAX_BATCH; also
// client-go's RealFIFO batch size).
const maxBatch = 1000

// schedule is the open loop's arrival schedule: update i arrives at start + i/rate, whether or
// not the store kept up (store_scenario.rs `open_loop`).
type schedule struct {
	start time.Time
	nsPer float64
	total int
}

func newSchedule(start time.Time, rate uint64, total int) schedule {
	return schedule{start: start, nsPer: 1e9 / float64(rate), total: total}
}

// slot is update i's scheduled arrival.
func (s schedule) slot(i int) time.Time {
	return s.start.Add(time.Duration(uint64(float64(i) * s.nsPer)))
}

// arrived is the number of updates that have arrived by now (update 0 arrives at start).
func (s schedule) arrived(now time.Time) int {
	a := int(float64(now.Sub(s.start).Nanoseconds())/s.nsPer) + 1
	return min(max(a, 0), s.total)
}

// end is the scheduled arrival of the update after the last.
func (s schedule) end() time.Time { return s.slot(s.total) }

// depthEnd is store_scenario.rs's "queue depth at the end": whatever had arrived by the scheduled
// end but was not yet visible then, from how late the last update became visible.
func (s schedule) depthEnd(finished time.Time, rate uint64) uint64 {
	late := max(finished.Sub(s.end()), 0)
	return uint64(min(late.Seconds()*float64(rate), float64(s.total)))
}

// openLoopResult is what an open-loop phase measured.
type openLoopResult struct {
	staleness *latency
	depthMax  uint64
	depthEnd  uint64
	// series is (seconds since the phase's start, queue depth) about every 50 ms.
	series   [][2]any
	elapsedS float64
}

// sleeper sleeps with the precision of the kernel's timers. time.Sleep does not: a sleep shorter
// than a millisecond lasts about a millisecond when the process has nothing else to wake it (the
// Go runtime's poller waits in whole milliseconds; measured on the development machine: 1.03 ms
// for a 50 us sleep), which would delay the open loop's arrivals against the Rust rows, whose
// threads sleep in nanosleep (50-80 us late). A Linux timerfd read through the runtime's poller
// parks only the goroutine (no OS thread or P is held) and wakes when the timer fires (about 20 us
// late) while the process is idle; but while every P is busy the poller is consulted less often
// than timers are, so the read also carries a deadline at the same instant, which the runtime's
// timers enforce as they would time.Sleep's. Whichever comes first ends the sleep.
type sleeper struct {
	fd  int
	f   *os.File
	buf [8]byte
}

func newSleeper() *sleeper {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		panic(fmt.Sprintf("timerfd_create: %v", err))
	}
	return &sleeper{fd: fd, f: os.NewFile(uintptr(fd), "timerfd")}
}

// sleep returns after d (at once if d is not positive).
func (s *sleeper) sleep(d time.Duration) {
	if d <= 0 {
		return
	}
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(int64(d))}
	if err := unix.TimerfdSettime(s.fd, 0, &spec, nil); err != nil {
		panic(fmt.Sprintf("timerfd_settime: %v", err))
	}
	// Arming the timer above also cleared any expiration left from a sleep the deadline ended.
	if err := s.f.SetReadDeadline(time.Now().Add(d)); err != nil {
		panic(fmt.Sprintf("timerfd read deadline: %v", err))
	}
	if _, err := s.f.Read(s.buf[:]); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		panic(fmt.Sprintf("reading a timerfd: %v", err))
	}
}

// until sleeps until t.
func (s *sleeper) until(t time.Time) { s.sleep(time.Until(t)) }

// close releases the timer.
func (s *sleeper) close() { s.f.Close() }
