//go:build unix

package redlock_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlocktest/checker"
)

// Owners of the chaos suite: goroutines that contend for one lock, each with
// its own Mutex, spread over several Clients, in this process and in worker
// processes (this test binary run again with -test.run=^TestWorkerProcess$
// and its plan in $REDLOCK_CHAOS_WORKER). Each owner records the spans it
// held the lock (for the checker, chaos_test.go) and increments the
// shared counter inside them.

// workerEnv names the environment variable that carries a worker process's
// plan, as JSON. Without it TestWorkerProcess does nothing.
const workerEnv = "REDLOCK_CHAOS_WORKER"

// ownerPlan is what one process's owners do.
type ownerPlan struct {
	URLs        []string      `json:"urls"`    // the lock's nodes
	CounterURL  string        `json:"counter"` // the separate Redis of the shared counter
	CounterKey  string        `json:"key"`
	Lock        string        `json:"lock"`    // the name every owner locks
	Lease       time.Duration `json:"lease"`   // WithLease, and LockLease's fixed lease
	NodeTimeout time.Duration `json:"timeout"` // WithNodeTimeout
	Stop        int64         `json:"stop"`    // monoNow() at which owners stop asking
	MaxIter     int           `json:"max"`     // acquisition attempts per owner, at most
	Clients     int           `json:"clients"` // Clients in the process
	Owners      int           `json:"owners"`  // Mutexes per Client
	LongEvery   int           `json:"long"`    // one watchdog hold in LongEvery lasts a lease or more
	Tag         string        `json:"tag"`     // prefix of the owners' names
	Out         string        `json:"out"`     // worker processes: where to write the report
}

// ownerReport is what owners did; reports of many owners add up.
type ownerReport struct {
	Spans        []checker.Span `json:"spans"`
	Acquired     int            `json:"acquired"`   // holds taken (reentries not counted)
	Reentered    int            `json:"reentered"`  // reentrant acquisitions on top of a hold
	Increments   int            `json:"increments"` // counter SETs made while holding
	LateSets     int            `json:"lateSets"`   // of which answered after the validity ended
	Aborted      int            `json:"aborted"`    // increments given up: too little validity left
	Lost         int            `json:"lost"`       // holds whose Lost closed while relied on
	NotHeld      int            `json:"notHeld"`    // Unlock said ErrNotHeld though Lost was not seen
	LockErrors   int            `json:"lockErrors"` // attempts that failed (no quorum, deadline)
	UnlockErrors int            `json:"unlockErrors"`
	Errors       []string       `json:"errors"`  // unexpected: fail the test
	Samples      []string       `json:"samples"` // a few errors of failed attempts, for the log
}

func (r *ownerReport) add(o ownerReport) {
	r.Spans = append(r.Spans, o.Spans...)
	r.Acquired += o.Acquired
	r.Reentered += o.Reentered
	r.Increments += o.Increments
	r.LateSets += o.LateSets
	r.Aborted += o.Aborted
	r.Lost += o.Lost
	r.NotHeld += o.NotHeld
	r.LockErrors += o.LockErrors
	r.UnlockErrors += o.UnlockErrors
	r.Errors = append(r.Errors, o.Errors...)
	for _, e := range o.Samples {
		r.sample(e)
	}
}

// sample keeps a few errors of failed attempts.
func (r *ownerReport) sample(e string) {
	if len(r.Samples) < 5 {
		r.Samples = append(r.Samples, e)
	}
}

func (r *ownerReport) fail(format string, args ...any) {
	if len(r.Errors) < 20 {
		r.Errors = append(r.Errors, fmt.Sprintf(format, args...))
	}
}

// Ways an owner takes the lock, by owner number.
const (
	modeLock      = iota // Lock: watchdog renewal
	modeTryLock          // TryLock with a wait and the watchdog lease
	modeLockLease        // LockLease: a fixed lease, no renewal
	modes
)

// runOwners runs p.Clients Clients with p.Owners owners each until p.Stop
// and returns what they did. It closes everything it opened.
func runOwners(p ownerPlan) ownerReport {
	var total ownerReport
	counter := &redis.Pool{
		MaxIdle: p.Clients * p.Owners,
		DialContext: func(ctx context.Context) (redis.Conn, error) {
			return redis.DialURLContext(ctx, p.CounterURL,
				redis.DialConnectTimeout(time.Second),
				redis.DialReadTimeout(time.Second),
				redis.DialWriteTimeout(time.Second))
		},
	}
	defer counter.Close()
	var (
		mu      sync.Mutex
		wg      sync.WaitGroup
		clients []*redlock.Client
	)
	for c := 0; c < p.Clients; c++ {
		client, err := redlock.Dial(p.URLs, redlock.WithLease(p.Lease), redlock.WithNodeTimeout(p.NodeTimeout))
		if err != nil {
			total.fail("%s: Dial: %v", p.Tag, err)
			continue
		}
		clients = append(clients, client)
		for o := 0; o < p.Owners; o++ {
			ow := &owner{
				m:       client.NewMutex(p.Lock),
				id:      fmt.Sprintf("%s.c%d.m%d", p.Tag, c, o),
				mode:    (c*p.Owners + o) % modes,
				p:       p,
				counter: counter,
				rng:     rand.New(rand.NewPCG(uint64(monoNow()), uint64(c*p.Owners+o))),
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				ow.run()
				mu.Lock()
				total.add(ow.r)
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	for _, c := range clients {
		c.Close() // errors: releases that failed on nodes still down; they expire
	}
	return total
}

// owner is one Mutex taking the lock again and again.
type owner struct {
	m       *redlock.Mutex
	id      string
	mode    int
	p       ownerPlan
	counter *redis.Pool
	rng     *rand.Rand
	r       ownerReport
}

// unexpected reports whether a failed call's error is one that no fault of
// the nodes can explain.
func unexpected(err error) bool {
	return errors.Is(err, redlock.ErrInvalid) || errors.Is(err, redlock.ErrClosed)
}

func (o *owner) run() {
	stopAt := time.Now().Add(time.Duration(o.p.Stop - monoNow()))
	for i := 0; i < o.p.MaxIter && monoNow() < o.p.Stop; i++ {
		ctx, cancel := context.WithDeadline(context.Background(), stopAt)
		held := true
		var err error
		switch o.mode {
		case modeLock:
			err = o.m.Lock(ctx)
		case modeTryLock:
			held, err = o.m.TryLock(ctx, o.p.Lease/2, 0)
		case modeLockLease:
			err = o.m.LockLease(ctx, o.p.Lease)
		}
		cancel()
		switch {
		case err != nil && unexpected(err):
			o.r.fail("%s: acquire: %v", o.id, err)
			return
		case err != nil:
			o.r.LockErrors++
			o.r.sample(fmt.Sprintf("%s mode %d: %v", o.id, o.mode, err))
			continue
		case !held:
			continue
		}
		o.r.Acquired++
		if !o.hold() {
			return // the Mutex may still hold the lock: it must not lock again
		}
		sleep(time.Duration(o.rng.IntN(2000)) * time.Microsecond)
	}
}

// hold is one hold, from Lock's return to the last Unlock. It reports false
// when the Mutex could not be brought back to holding nothing.
func (o *owner) hold() bool {
	span := checker.Span{Owner: o.id, Start: monoNow()}
	lost := o.m.Lost()
	valid := o.validity(0)
	depth := 1
	renewed := o.mode != modeLockLease
	if renewed && o.rng.IntN(8) == 0 { // take it again, reentrant
		ctx, cancel := context.WithTimeout(context.Background(), o.p.Lease/3)
		ok, err := o.m.TryLock(ctx, 0, 0)
		cancel()
		switch {
		case err != nil && unexpected(err):
			o.r.fail("%s: reentrant TryLock: %v", o.id, err)
		case ok && closed(lost):
			// The first hold was lost just before: this is a new one.
			span.End, span.Lost, span.Valid = monoNow(), true, valid
			o.r.Spans = append(o.r.Spans, span)
			o.r.Lost++
			o.r.Acquired++
			span = checker.Span{Owner: o.id, Start: monoNow()}
			lost, valid = o.m.Lost(), o.validity(0)
		case ok:
			depth = 2
			o.r.Reentered++
		}
	}
	var wait time.Duration
	if renewed && o.p.LongEvery > 0 && o.rng.IntN(o.p.LongEvery) == 0 { // a long hold, through renewals
		wait = o.p.Lease + time.Duration(o.rng.Int64N(int64(o.p.Lease/2)))
	}
	seen := o.criticalSection(lost, wait, &valid)
	span.End = monoNow()
	span.Valid = o.validity(valid)
	if seen {
		span.Lost = true
		o.r.Lost++
	}
	o.r.Spans = append(o.r.Spans, span)
	return o.release(depth, lost, seen)
}

// criticalSection waits (watching Lost), then increments the shared counter
// without any protection but the lock: GET, a short pause, SET. It stops as
// soon as it sees Lost closed, and gives the increment up when less validity
// is left than a SET surely needs. It reports whether it saw Lost closed;
// valid follows Until (on the monoNow clock) meanwhile.
func (o *owner) criticalSection(lost <-chan struct{}, wait time.Duration, valid *int64) bool {
	if o.watch(lost, wait, valid) {
		return true
	}
	conn := o.counter.Get()
	defer conn.Close()
	v, err := redis.Int(conn.Do("GET", o.p.CounterKey))
	if err != nil && !errors.Is(err, redis.ErrNil) {
		o.r.fail("%s: counter GET: %v", o.id, err)
		return false
	}
	if o.watch(lost, time.Duration(500+o.rng.IntN(2500))*time.Microsecond, valid) {
		return true
	}
	// Stop before Lost can close: a SET must land within the validity.
	if left := time.Until(o.m.Until()); left < o.p.Lease/6 {
		if closed(lost) {
			*valid = o.validity(*valid)
			return true
		}
		o.r.Aborted++
		return false
	}
	if _, err := conn.Do("SET", o.p.CounterKey, v+1); err != nil {
		o.r.fail("%s: counter SET: %v", o.id, err)
		return false
	}
	o.r.Increments++
	if *valid = o.validity(*valid); monoNow() > *valid {
		// The SET answered after the validity ended (this process was
		// paused or starved): it may have landed in another owner's hold.
		o.r.LateSets++
	}
	return false
}

// watch waits d unless Lost closes first (then it reports true), and keeps
// valid up to date.
func (o *owner) watch(lost <-chan struct{}, d time.Duration, valid *int64) bool {
	*valid = o.validity(*valid)
	if d <= 0 {
		return closed(lost)
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-lost:
			return true
		case <-timer.C:
			return closed(lost)
		case <-tick.C:
			*valid = o.validity(*valid)
		}
	}
}

// validity is Until on the monoNow clock, or last when the Mutex holds nothing.
func (o *owner) validity(last int64) int64 {
	u := o.m.Until()
	if u.IsZero() {
		return last
	}
	return monoNow() + int64(time.Until(u))
}

// release unlocks depth holds, retrying while too few nodes answer (the hold
// stays this owner's until a release reaches a quorum, or it is lost). It
// reports false when it had to give up with the hold maybe still there.
func (o *owner) release(depth int, lost <-chan struct{}, seen bool) bool {
	giveUp := time.Now().Add(4 * o.p.Lease)
	for depth > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), o.p.Lease)
		err := o.m.Unlock(ctx)
		cancel()
		switch {
		case err == nil:
			depth--
			continue
		case errors.Is(err, redlock.ErrNotHeld):
			if !seen && !closed(lost) {
				o.r.NotHeld++
			}
			return true // the hold is gone, every level of it
		case unexpected(err):
			o.r.fail("%s: Unlock: %v", o.id, err)
			return false
		}
		o.r.UnlockErrors++
		if time.Now().After(giveUp) {
			return false
		}
		timer := time.NewTimer(20 * time.Millisecond)
		select {
		case <-lost:
		case <-timer.C:
		}
		timer.Stop()
	}
	return true
}

// TestWorkerProcess is the body of a worker process of the chaos suite: it
// runs the owners of the plan in $REDLOCK_CHAOS_WORKER and writes their
// report to the plan's file. Without the variable it returns at once.
func TestWorkerProcess(t *testing.T) {
	raw := os.Getenv(workerEnv)
	if raw == "" {
		return
	}
	var p ownerPlan
	if err := json.Unmarshal([]byte(raw), &p); err != nil {
		t.Fatalf("%s: %v", workerEnv, err)
	}
	data, err := json.Marshal(runOwners(p))
	if err != nil {
		t.Fatal(err)
	}
	tmp := p.Out + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, p.Out); err != nil {
		t.Fatal(err)
	}
}

// workerProc is a running worker process.
type workerProc struct {
	cmd    *exec.Cmd
	out    string        // its report file
	output bytes.Buffer  // its stdout and stderr; read after done
	done   chan struct{} // closed when it has exited and been reaped
	err    error         // cmd.Wait's; read after done
}

// startWorker runs this test binary again as a worker process with plan p.
// The process is killed (by PID) when the test ends if it is still running.
func startWorker(t *testing.T, p ownerPlan) *workerProc {
	t.Helper()
	p.Out = filepath.Join(t.TempDir(), p.Tag+".json")
	spec, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	w := &workerProc{out: p.Out, done: make(chan struct{})}
	w.cmd = exec.Command(os.Args[0], "-test.run=^TestWorkerProcess$", "-test.count=1", "-test.timeout=2m")
	w.cmd.Env = append(os.Environ(), workerEnv+"="+string(spec))
	w.cmd.Stdout = &w.output
	w.cmd.Stderr = &w.output
	if err := w.cmd.Start(); err != nil {
		t.Fatalf("start worker process: %v", err)
	}
	go func() {
		w.err = w.cmd.Wait()
		close(w.done)
	}()
	t.Cleanup(w.kill)
	return w
}

// kill ends the process if it still runs and waits until it is reaped.
func (w *workerProc) kill() {
	select {
	case <-w.done:
		return
	default:
	}
	w.cmd.Process.Kill()
	<-w.done
}

// report waits at most d for the process to finish and returns its report.
// A process that does not finish in time is killed.
func (w *workerProc) report(t *testing.T, d time.Duration) (ownerReport, bool) {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-w.done:
	case <-timer.C:
		w.kill()
		t.Errorf("worker process %d did not finish within %v; killed. Output:\n%s", w.cmd.Process.Pid, d, w.output.String())
		return ownerReport{}, false
	}
	if w.err != nil {
		t.Errorf("worker process %d: %v. Output:\n%s", w.cmd.Process.Pid, w.err, w.output.String())
	}
	data, err := os.ReadFile(w.out)
	if err != nil {
		t.Errorf("worker process %d wrote no report: %v. Output:\n%s", w.cmd.Process.Pid, err, w.output.String())
		return ownerReport{}, false
	}
	var r ownerReport
	if err := json.Unmarshal(data, &r); err != nil {
		t.Errorf("worker process %d: bad report: %v", w.cmd.Process.Pid, err)
		return ownerReport{}, false
	}
	return r, true
}
