//go:build unix

package redlock_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlocktest"
)

// The red team of issue 33 (point 4): attacks on a forced owner's re-entry
// and on a dead waiter's intents, written from the docs alone (safety.md's
// "Every gap in a hold is signalled" and "The dead cost a moment",
// failure-modes.md's rows "a forced owner re-enters" and "a waiter dies",
// the doc comments of ErrLost and the lock types). Waiters that crash or
// pause are child processes of the test binary; holders are checked for
// mutual exclusion by what their calls returned, independently of the
// library's own view.

// redteamEnv carries a child waiter's plan; without it TestRedteamWaiter
// does nothing.
const redteamEnv = "REDLOCK_REDTEAM_WAITER"

// redteamPlan is what a child waiter waits for.
type redteamPlan struct {
	URLs []string `json:"urls"`
	// Kind: "multi" (names[0], names[1]), "semaphore" (2 permits),
	// "writer", "reader" (an RWMutex) or "mutex".
	Kind  string   `json:"kind"`
	Names []string `json:"names"`
}

// TestRedteamWaiter is the child waiter: it dials, says "dialed" on its
// standard output, waits as its plan says, says "in <unix nanoseconds>"
// when it got in and then holds until it is killed.
func TestRedteamWaiter(t *testing.T) {
	env := os.Getenv(redteamEnv)
	if env == "" {
		return // only as a child of the tests below
	}
	var p redteamPlan
	require.NoError(t, json.Unmarshal([]byte(env), &p))
	c, err := redlock.Dial(p.URLs)
	require.NoError(t, err)
	ctx := context.Background()
	fmt.Println("dialed")
	switch p.Kind {
	case "multi":
		err = c.NewMultiMutex(p.Names...).Lock(ctx)
	case "semaphore":
		_, err = c.NewSemaphore(p.Names[0], 2).Acquire(ctx, 0)
	case "writer":
		err = c.NewRWMutex(p.Names[0]).Lock(ctx)
	case "reader":
		err = c.NewRWMutex(p.Names[0]).RLock(ctx)
	case "mutex":
		err = c.NewMutex(p.Names[0]).Lock(ctx)
	}
	fmt.Printf("in %d %v\n", time.Now().UnixNano(), err)
	select {} // hold until killed
}

// redteamChild is a running child waiter.
type redteamChild struct {
	cmd    *exec.Cmd
	dialed chan struct{}
	in     chan time.Time // when the child's acquisition returned
}

// startRedteamWaiter starts a child waiter with plan and returns once it
// has dialed. It fails no test, so that a goroutine may call it: the
// caller checks the error.
func startRedteamWaiter(t *testing.T, cl *redlocktest.Cluster, plan redteamPlan) (*redteamChild, error) {
	t.Helper()
	plan.URLs = cl.URLs()
	env, err := json.Marshal(plan)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestRedteamWaiter$", "-test.count=1")
	cmd.Env = append(os.Environ(), redteamEnv+"="+string(env))
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	ch := &redteamChild{cmd: cmd, dialed: make(chan struct{}), in: make(chan time.Time, 1)}
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			var ns int64
			switch {
			case line == "dialed":
				close(ch.dialed)
			case strings.HasPrefix(line, "in "):
				_, _ = fmt.Sscanf(line, "in %d", &ns)
				ch.in <- time.Unix(0, ns)
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		<-read
	})
	select {
	case <-ch.dialed:
	case <-time.After(10 * time.Second):
		return nil, errors.New("the child waiter never dialed within 10 s")
	}
	return ch, nil
}

// intentOnQuorum waits until key exists on a majority of the nodes (an
// attempt that timed out on a node under load leaves no intent there
// until the waiter's next attempt). It reports whether it did; it fails
// the test but does not stop it, so that a goroutine may call it.
func intentOnQuorum(t *testing.T, cl *redlocktest.Cluster, key string) bool {
	t.Helper()
	return assert.Eventually(t, func() bool {
		on := 0
		for i := 0; i < cl.N(); i++ {
			if n, err := redis.Int(cl.Do(i, "EXISTS", key)); err == nil && n == 1 {
				on++
			}
		}
		return on > cl.N()/2
	}, 10*time.Second, 2*time.Millisecond, "%s never reached a majority of the nodes", key)
}

// redteamKind is one kind of waiter: its holder (what it waits behind), the
// intent key it leaves (if any) and the takes of free names after the
// holder is gone.
type redteamKind struct {
	kind   string
	intent func(name string) string // "" for none
	// hold takes what the waiter waits behind, with a fixed lease, and
	// returns its release and its end of validity.
	hold func(t *testing.T, c *redlock.Client, name string, lease time.Duration) (release func(), until time.Time)
	// takes are the acquisitions of a newcomer that must succeed within the
	// bound once the holder is gone, each with its release.
	takes func(c *redlock.Client, name string) map[string]func() (bool, func() error, error)
}

func redteamKinds() []redteamKind {
	ctx := context.Background()
	mutexTake := func(m *redlock.Mutex) func() (bool, func() error, error) {
		return func() (bool, func() error, error) {
			ok, err := m.TryLock(ctx, 0, 0)
			return ok, func() error { return m.Unlock(ctx) }, err
		}
	}
	mutexHold := func(t *testing.T, c *redlock.Client, name string, lease time.Duration) (func(), time.Time) {
		m := c.NewMutex(name)
		require.NoError(t, m.LockLease(ctx, lease))
		return func() { assert.NoError(t, m.Unlock(ctx)) }, m.Until()
	}
	readerTake := func(rw *redlock.RWMutex) func() (bool, func() error, error) {
		return func() (bool, func() error, error) {
			ok, err := rw.TryRLock(ctx, 0, 0)
			return ok, func() error { return rw.RUnlock(ctx) }, err
		}
	}
	writerTake := func(rw *redlock.RWMutex) func() (bool, func() error, error) {
		return func() (bool, func() error, error) {
			ok, err := rw.TryLock(ctx, 0, 0)
			return ok, func() error { return rw.Unlock(ctx) }, err
		}
	}
	rwTakes := func(c *redlock.Client, name string) map[string]func() (bool, func() error, error) {
		return map[string]func() (bool, func() error, error){
			"new reader": readerTake(c.NewRWMutex(name)),
			"new writer": writerTake(c.NewRWMutex(name)),
		}
	}
	return []redteamKind{
		{"multi", func(n string) string { return "redlock:{" + n + "-b}:intent" }, mutexHold,
			func(c *redlock.Client, name string) map[string]func() (bool, func() error, error) {
				return map[string]func() (bool, func() error, error){
					"held name":   mutexTake(c.NewMutex(name)),
					"free name":   mutexTake(c.NewMutex(name + "-b")),
					"both, multi": mutexTake(c.NewMultiMutex(name, name+"-b")),
				}
			}},
		{"semaphore", func(n string) string { return "redlock:{" + n + "}:sem:intent" },
			func(t *testing.T, c *redlock.Client, name string, lease time.Duration) (func(), time.Time) {
				s := c.NewSemaphore(name, 2)
				var ps []*redlock.Permit
				for i := 0; i < 2; i++ {
					p, err := s.TryAcquire(ctx, 0, lease)
					require.NoError(t, err)
					require.NotNil(t, p)
					ps = append(ps, p)
				}
				return func() {
					for _, p := range ps {
						assert.NoError(t, p.Release(ctx))
					}
				}, ps[1].Until()
			},
			func(c *redlock.Client, name string) map[string]func() (bool, func() error, error) {
				s := c.NewSemaphore(name, 2)
				return map[string]func() (bool, func() error, error){"permit": func() (bool, func() error, error) {
					p, err := s.TryAcquire(ctx, 0, 0)
					if p == nil {
						return false, nil, err
					}
					return true, func() error { return p.Release(ctx) }, err
				}}
			}},
		{"writer", func(n string) string { return "redlock:{" + n + "}:rw:wait" },
			func(t *testing.T, c *redlock.Client, name string, lease time.Duration) (func(), time.Time) {
				rw := c.NewRWMutex(name)
				ok, err := rw.TryRLock(ctx, 0, lease)
				require.NoError(t, err)
				require.True(t, ok)
				return func() { assert.NoError(t, rw.RUnlock(ctx)) }, rw.Until()
			}, rwTakes},
		{"reader", nil,
			func(t *testing.T, c *redlock.Client, name string, lease time.Duration) (func(), time.Time) {
				rw := c.NewRWMutex(name)
				ok, err := rw.TryLock(ctx, 0, lease)
				require.NoError(t, err)
				require.True(t, ok)
				return func() { assert.NoError(t, rw.Unlock(ctx)) }, rw.Until()
			}, rwTakes},
		{"mutex", nil, mutexHold,
			func(c *redlock.Client, name string) map[string]func() (bool, func() error, error) {
				return map[string]func() (bool, func() error, error){"mutex": mutexTake(c.NewMutex(name))}
			}},
	}
}

// redteamMoment is when a child waiter is killed.
type redteamMoment struct {
	name string
	// wait returns when the child should die.
	wait func(t *testing.T, cl *redlocktest.Cluster, intent string)
}

func redteamMoments() []redteamMoment {
	landed := func(t *testing.T, cl *redlocktest.Cluster, intent string) {
		if intent == "" {
			time.Sleep(300 * time.Millisecond) // its first attempt has been refused
			return
		}
		intentOnQuorum(t, cl, intent)
	}
	return []redteamMoment{
		// Right after it dialed: its first attempt may or may not have
		// landed on some nodes.
		{"early", func(*testing.T, *redlocktest.Cluster, string) {
			time.Sleep(time.Duration(rand.IntN(30)) * time.Millisecond)
		}},
		{"landed", landed},
		// After three refreshes, at a random point of the refresh cycle.
		{"refreshing", func(t *testing.T, cl *redlocktest.Cluster, intent string) {
			landed(t, cl, intent)
			time.Sleep(time.Second + time.Duration(rand.IntN(340))*time.Millisecond)
		}},
	}
}

// redteamLeases are the holders' fixed leases: a short one left to run
// out, and a ten-minute one released early.
var redteamLeases = []struct {
	name    string
	lease   time.Duration
	release bool
}{
	{"4s lease runs out", 4 * time.Second, false},
	{"10min lease released", 10 * time.Minute, true},
}

// testDeadWaiter crashes waiters of kind at every moment, behind holders
// of every lease, side by side on names of their own; then the holders
// end, and every newcomer's take must succeed within vanishBound of that.
func testDeadWaiter(t *testing.T, kind redteamKind) {
	cl := redlocktest.Start(t, 3)
	holder := dial(t, cl)
	taker := dial(t, cl)
	type run struct {
		name    string
		what    string
		release func()
		until   time.Time
		ends    bool
		child   *redteamChild
		moment  redteamMoment
		intent  string
		refused map[string]time.Duration
	}
	var runs []*run
	for li, l := range redteamLeases {
		for mi, m := range redteamMoments() {
			name := fmt.Sprintf("rt-%s-%d-%d", kind.kind, li, mi)
			r := &run{name: name, what: l.name + ", killed " + m.name, moment: m, ends: l.release}
			if kind.intent != nil {
				r.intent = kind.intent(name)
			}
			r.release, r.until = kind.hold(t, holder, name, l.lease)
			runs = append(runs, r)
		}
	}
	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			names := []string{r.name}
			if kind.kind == "multi" {
				names = append(names, r.name+"-b")
			}
			child, err := startRedteamWaiter(t, cl, redteamPlan{Kind: kind.kind, Names: names})
			if !assert.NoError(t, err, r.what) {
				return
			}
			r.child = child
			r.moment.wait(t, cl, r.intent) // a failure is said; the child dies all the same
			assert.NoError(t, r.child.cmd.Process.Signal(syscall.SIGKILL))
			_, _ = r.child.cmd.Process.Wait()
		}()
	}
	wg.Wait()
	for _, r := range runs {
		if r.child == nil {
			t.FailNow() // its start failed, said above
		}
		select {
		case at := <-r.child.in:
			t.Fatalf("%s: the child waiter got in at %v while the holder held", r.what, at)
		default:
		}
	}
	released := time.Now()
	for _, r := range runs {
		if r.ends {
			r.release()
		}
	}
	var mu sync.Mutex
	for _, r := range runs {
		r.refused = map[string]time.Duration{}
		for what, take := range kind.takes(taker, r.name) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				from := released
				if !r.ends {
					from = r.until
				}
				for {
					ok, unlock, err := take()
					if errors.Is(err, redlock.ErrNoQuorum) {
						ok = false // the load: nodes slower than their timeout; try again
					} else if !assert.NoError(t, err, "%s: %s", r.what, what) {
						return
					}
					if ok {
						d := time.Since(from)
						assert.NoError(t, unlock())
						mu.Lock()
						r.refused[what] = d
						mu.Unlock()
						return
					}
					if time.Since(from) > 3*vanishBound {
						mu.Lock()
						r.refused[what] = time.Since(from)
						mu.Unlock()
						return
					}
					time.Sleep(10 * time.Millisecond)
				}
			}()
		}
	}
	wg.Wait()
	for _, r := range runs {
		t.Logf("%s: free names refused after the holder ended: %v", r.what, r.refused)
		for what, d := range r.refused {
			assert.LessOrEqual(t, d, vanishBound, "%s: %s refused too long", r.what, what)
		}
	}
}

// TestRedteamDeadWaiterCostsAMoment: a waiter of every kind (MultiMutex,
// Semaphore, RWMutex writer and reader, Mutex), in a child process,
// SIGKILLed right after it dialed, once its intent is on every node, or
// while its Client refreshes the intent, behind a hold with a 4 s fixed
// lease that runs out or a 10-minute one released early. Claim
// (safety.md, failure-modes.md "a waiter dies"): free names are refused
// for at most the intent lease (1 s by default) after the holder ends;
// the suite's bound is 2 s.
func TestRedteamDeadWaiterCostsAMoment(t *testing.T) {
	for _, kind := range redteamKinds() {
		t.Run(kind.kind, func(t *testing.T) { testDeadWaiter(t, kind) })
	}
}

// TestRedteamPausedWaiterRejoins: an older MultiMutex waiter (a child
// process) is paused (SIGSTOP) for longer than its intent lease while a
// younger one (in this process) waits too; the holder releases during the
// pause: the living younger waiter gets in within the bound (the paused
// one's intent expired). The paused one is resumed while the younger
// holds: it must not get in before the younger's Unlock, and must get in
// soon after it.
func TestRedteamPausedWaiterRejoins(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	ctx := context.Background()
	holder := dial(t, cl).NewMutex("pa")
	require.NoError(t, holder.LockLease(ctx, 10*time.Minute))
	old, err := startRedteamWaiter(t, cl, redteamPlan{Kind: "multi", Names: []string{"pa", "pb"}})
	require.NoError(t, err)
	if !intentOnQuorum(t, cl, "redlock:{pb}:intent") {
		t.FailNow()
	}

	young := dial(t, cl).NewMultiMutex("pa", "pb")
	got := make(chan error, 1)
	go func() { got <- young.Lock(ctx) }()
	time.Sleep(300 * time.Millisecond) // the younger waiter is refused and waits
	select {
	case err := <-got:
		t.Fatalf("the younger waiter got in (%v) ahead of the older one and the holder", err)
	default:
	}

	require.NoError(t, old.cmd.Process.Signal(syscall.SIGSTOP))
	time.Sleep(1500 * time.Millisecond) // more than the intent lease
	released := time.Now()
	require.NoError(t, holder.Unlock(ctx))
	select {
	case err := <-got:
		require.NoError(t, err)
	case <-time.After(3 * vanishBound):
		t.Fatal("the living younger waiter never got in while the older one was paused")
	}
	inAfter := time.Since(released)
	t.Logf("the living waiter got in %v after the release, the older one paused", inAfter)
	assert.LessOrEqual(t, inAfter, vanishBound)

	require.NoError(t, old.cmd.Process.Signal(syscall.SIGCONT))
	time.Sleep(time.Second) // the resumed waiter refreshes, retries, waits
	lost := young.Lost()
	unlockAt := time.Now()
	require.False(t, closed(lost), "the younger waiter's hold was lost")
	require.NoError(t, young.Unlock(ctx))
	select {
	case at := <-old.in:
		assert.False(t, at.Before(unlockAt), "the resumed waiter got in at %v, before the younger one's Unlock at %v", at, unlockAt)
		t.Logf("the resumed waiter got in %v after the younger one's Unlock", at.Sub(unlockAt))
	case <-time.After(3 * vanishBound):
		t.Fatal("the resumed waiter never got in after the younger one released")
	}
}

// redteamSide is one re-entrant owner of the family under force.
type redteamSide struct {
	name                      string
	lock, unlock              func(context.Context) error
	lost                      func() <-chan struct{}
	force                     func(t *testing.T)
	rivalLock, rivalUnlock    func(context.Context) error
	rivalTry                  func(context.Context) (bool, error)
	keys                      []string
	rivalIsReader, isRWMutexS bool
}

func redteamSides(t *testing.T, cl *redlocktest.Cluster, ca, cb *redlock.Client, name string) []redteamSide {
	ctx := context.Background()
	del := func(pattern string) func(t *testing.T) {
		return func(t *testing.T) {
			for i := 0; i < cl.N(); i++ {
				v, err := redis.Strings(cl.Do(i, "KEYS", pattern))
				require.NoError(t, err)
				for _, k := range v {
					_, err := cl.Do(i, "DEL", k)
					require.NoError(t, err)
				}
			}
		}
	}
	forceWith := func(m *redlock.Mutex) func(t *testing.T) {
		return func(t *testing.T) {
			forced, err := m.ForceUnlock(ctx)
			require.NoError(t, err)
			require.True(t, forced)
		}
	}
	m := ca.NewMutex(name + "-m")
	mb := cb.NewMutex(name + "-m")
	mm := ca.NewMultiMutex(name+"-x", name+"-y")
	mmb := cb.NewMultiMutex(name+"-x", name+"-y")
	w := ca.NewRWMutex(name + "-w")
	wb := cb.NewRWMutex(name + "-w")
	r := ca.NewRWMutex(name + "-r")
	rb := cb.NewRWMutex(name + "-r")
	try := func(f func(context.Context, time.Duration, time.Duration) (bool, error)) func(context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) { return f(ctx, 0, 0) }
	}
	return []redteamSide{
		{name: "Mutex", lock: m.Lock, unlock: m.Unlock, lost: m.Lost, force: forceWith(cb.NewMutex(name + "-m")),
			rivalLock: mb.Lock, rivalUnlock: mb.Unlock, rivalTry: try(mb.TryLock), keys: []string{keyOf(name + "-m")}},
		{name: "MultiMutex", lock: mm.Lock, unlock: mm.Unlock, lost: mm.Lost, force: forceWith(cb.NewMultiMutex(name+"-x", name+"-y")),
			rivalLock: mmb.Lock, rivalUnlock: mmb.Unlock, rivalTry: try(mmb.TryLock), keys: []string{keyOf(name + "-x"), keyOf(name + "-y")}},
		{name: "RWMutexWriter", lock: w.Lock, unlock: w.Unlock, lost: w.Lost, force: del("redlock:{" + name + "-w}:rw:*"),
			rivalLock: wb.Lock, rivalUnlock: wb.Unlock, rivalTry: try(wb.TryLock), keys: []string{"redlock:{" + name + "-w}:rw:*"}},
		{name: "RWMutexReader", lock: r.RLock, unlock: r.RUnlock, lost: r.Lost, force: del("redlock:{" + name + "-r}:rw:*"),
			rivalLock: rb.Lock, rivalUnlock: rb.Unlock, rivalTry: try(rb.TryLock), keys: []string{"redlock:{" + name + "-r}:rw:*"}},
	}
}

// keysOnEvery waits until a key of every pattern exists on every node.
func keysOnEvery(t *testing.T, cl *redlocktest.Cluster, patterns ...string) {
	t.Helper()
	for i := 0; i < cl.N(); i++ {
		for _, p := range patterns {
			require.Eventually(t, func() bool {
				v, err := redis.Strings(cl.Do(i, "KEYS", p))
				return err == nil && len(v) > 0
			}, 5*time.Second, 2*time.Millisecond, "%s never reached node %d", p, i)
		}
	}
}

// TestRedteamForcedInnerUnlock: an owner holds twice (re-entrant); the
// hold is forced away and another owner takes the lock and releases it;
// then the first owner's inner Unlock. The docs: the first call of the
// owner that finds the hold gone on a majority ends it and closes Lost,
// "an Unlock" included; a later Unlock says ErrNotHeld. So the inner
// Unlock must not return nil with Lost open (the owner's code would take
// the two holds for one unbroken hold with the other owner's inside), and
// the outer one must say ErrNotHeld; after that the owner locks again.
func TestRedteamForcedInnerUnlock(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	ctx := context.Background()
	ca := dial(t, cl, redlock.WithLease(5*time.Second))
	cb := dial(t, cl)
	for _, rivalHolds := range []bool{false, true} {
		for _, s := range redteamSides(t, cl, ca, cb, fmt.Sprintf("inner-%v", rivalHolds)) {
			t.Run(fmt.Sprintf("%s/rival holds %v", s.name, rivalHolds), func(t *testing.T) {
				require.NoError(t, s.lock(ctx))
				require.NoError(t, s.lock(ctx))
				lost := s.lost()
				keysOnEvery(t, cl, s.keys...)
				s.force(t)
				ok, err := s.rivalTry(ctx)
				require.NoError(t, err)
				require.True(t, ok, "the other owner could not take the forced lock")
				if !rivalHolds {
					require.NoError(t, s.rivalUnlock(ctx))
				}
				inner := s.unlock(ctx)
				if inner == nil {
					assert.True(t, closed(lost), "the inner Unlock after a forced gap returned nil and Lost stayed open")
				} else {
					assert.ErrorIs(t, inner, redlock.ErrNotHeld)
				}
				assert.True(t, closed(lost), "Lost did not close")
				assert.ErrorIs(t, s.unlock(ctx), redlock.ErrNotHeld, "the outer Unlock")
				if rivalHolds {
					require.NoError(t, s.rivalUnlock(ctx), "the other owner's hold was damaged by the forced owner's Unlocks")
				}
				require.NoError(t, s.lock(ctx), "the owner cannot lock again")
				require.NoError(t, s.unlock(ctx))
			})
		}
	}
}

// TestRedteamForceAroundReentry: again and again, an owner holds a Mutex
// (behind proxies with 0, 3 and 6 ms of latency, so a force lands on the
// nodes at different moments), starts a re-entrant Lock or an inner
// Unlock, and another Client forces the lock at about the same moment
// (the force after a random 0 to 12 ms, the attacked call 0 to 30 ms),
// while a third owner tries to take it every few milliseconds. Checks:
// a hold of the first owner whose every call returned nil with Lost open
// never overlaps a hold of the third (an independent check on what the
// calls returned); after an ErrLost every Unlock says ErrNotHeld; and the
// owner, once it acknowledged the loss, locks again.
func TestRedteamForceAroundReentry(t *testing.T) {
	const run = 9 * time.Second
	cl := redlocktest.Start(t, 3, redlocktest.WithProxy())
	for i := 0; i < 3; i++ {
		require.NoError(t, cl.SetLatency(i, time.Duration(3*i)*time.Millisecond))
	}
	opts := []redlock.Option{redlock.WithLease(1500 * time.Millisecond), redlock.WithNodeTimeout(100 * time.Millisecond)}
	a := dial(t, cl, opts...).NewMutex("fre")
	forcer := dial(t, cl, opts...).NewMutex("fre")
	b := dial(t, cl, opts...).NewMutex("fre")
	bg := context.Background()
	deadline := time.Now().Add(run)
	var rounds, lostRounds, cleanRounds, bIn int
	errs := map[string]int{}
	for time.Now().Before(deadline) && !t.Failed() {
		rounds++
		require.NoError(t, a.Lock(bg))
		aStart := time.Now()
		lost := a.Lost()
		clean := true
		depth := 1
		inner := rand.IntN(2) == 0 // the attacked call: re-entrant Lock or inner Unlock
		if inner {
			if err := a.Lock(bg); err != nil {
				// A re-entrant Lock returns ErrNoQuorum at once when nodes are
				// slow (TestRedteamReentrantLockKeepsTryingThroughNodeFailures).
				require.ErrorIs(t, err, redlock.ErrNoQuorum)
				waitUnlocked(t, a)
				continue
			}
			depth = 2
		}
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(rand.IntN(13)) * time.Millisecond)
			_, _ = forcer.ForceUnlock(bg)
		}()
		var other otherHold
		go func() {
			defer wg.Done()
			other = takeOnce(bg, b, 40*time.Millisecond, 2*time.Millisecond, 10*time.Millisecond)
		}()
		time.Sleep(time.Duration(rand.IntN(31)) * time.Millisecond)
		var err error
		if inner {
			err = a.Unlock(bg)
			if err == nil {
				depth--
			}
		} else {
			err = a.Lock(bg)
			if err == nil {
				depth++
			}
		}
		if err != nil {
			clean = false
			errs[redteamErrClass(inner, err)]++
			if errors.Is(err, redlock.ErrLost) {
				lostRounds++
				assert.True(t, closed(lost), "ErrLost with Lost open")
			}
		}
		wg.Wait()
		time.Sleep(5 * time.Millisecond)
		if closed(lost) {
			clean = false
		}
		lostBefore := closed(lost)
		aEnd := time.Now()
		for ; depth > 0; depth-- {
			uerr := a.Unlock(bg)
			if uerr != nil {
				clean = false
			}
			if lostBefore || errors.Is(err, redlock.ErrLost) {
				assert.ErrorIs(t, uerr, redlock.ErrNotHeld, "an Unlock after the loss was signalled")
			}
		}
		if !clean {
			_ = a.Unlock(bg) // acknowledge whatever was lost
		}
		if !other.start.IsZero() {
			bIn++
		}
		if clean {
			cleanRounds++
			if other.clean && other.start.Before(aEnd) && aStart.Before(other.end) {
				t.Errorf("round %d (attacked: inner Unlock %v): a clean hold [%v, %v] and another owner's clean hold [%v, %v] overlapped",
					rounds, inner, aStart.Format("05.000000"), aEnd.Format("05.000000"), other.start.Format("05.000000"), other.end.Format("05.000000"))
			}
		}
	}
	// Liveness: after all that the owner locks again at once.
	ctx, cancel := context.WithTimeout(bg, 3*time.Second)
	defer cancel()
	require.NoError(t, a.Lock(ctx), "the owner is stuck after the losses")
	require.NoError(t, a.Unlock(bg))
	t.Logf("errors of the attacked calls: %v", errs)
	t.Logf("%d rounds: %d with ErrLost, %d clean, the other owner got in during %d", rounds, lostRounds, cleanRounds, bIn)
	require.Greater(t, bIn, 5, "the other owner never got in: the forces did not land")
}

// TestRedteamRestartAndPartialForce: with a minority node restarted empty
// (quarantined), a hold that lives on a quorum of nodes survives its
// renewals (extended on nodes 1 and 2), and one whose hold is then also
// deleted on node 1 (a force that landed on one node) lives on no
// majority: it must be lost (Lost closes), its re-entrant Lock must not
// return nil, and another owner must not get the lock before Lost closed.
func TestRedteamRestartAndPartialForce(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	bg := context.Background()
	const lease = 3 * time.Second // two failed renewals on a loaded machine must not lose it
	opts := []redlock.Option{redlock.WithLease(lease)}
	ca := dial(t, cl, opts...)
	cb := dial(t, cl, opts...)
	a := ca.NewMutex("rpf")
	require.NoError(t, a.Lock(bg))
	eventuallyOnEvery(t, cl, keyOf("rpf"))
	require.NoError(t, cl.Restart(0))
	// Survives: renewed on nodes 1 and 2 for a lease and a half.
	time.Sleep(3 * lease / 2)
	require.False(t, closed(a.Lost()), "a hold extended on a quorum was lost")
	held, err := a.IsHeld(bg)
	require.NoError(t, err)
	require.True(t, held)
	require.NoError(t, a.Lock(bg), "re-entry into a hold on a quorum")
	require.NoError(t, a.Unlock(bg))

	// Partial force: node 1 loses the hold too (node 0 may count again by
	// now; restart it once more so that it is quarantined and empty).
	require.NoError(t, cl.Restart(0))
	waitReachable(t, ca)
	lost := a.Lost()
	_, err = cl.Do(1, "DEL", keyOf("rpf"))
	require.NoError(t, err)
	forcedAt := time.Now()
	b := cb.NewMutex("rpf")
	bIn := make(chan time.Time, 1)
	go func() {
		ctx, cancel := context.WithTimeout(bg, 4*lease)
		defer cancel()
		if b.Lock(ctx) == nil {
			bIn <- time.Now()
		}
		close(bIn)
	}()
	var lostAt time.Time
	select {
	case <-lost:
		lostAt = time.Now()
	case <-time.After(2 * lease):
		t.Fatal("a hold left on one node of three was never lost")
	}
	rerr := a.Lock(bg)
	assert.Error(t, rerr, "re-entry into a hold on no majority returned nil")
	assert.ErrorIs(t, a.Unlock(bg), redlock.ErrNotHeld)
	at, ok := <-bIn
	if ok {
		assert.True(t, at.After(lostAt), "the other owner got in at %v before Lost closed at %v", at, lostAt)
		t.Logf("Lost closed %v after the partial force; the other owner got in %v after Lost closed", lostAt.Sub(forcedAt), at.Sub(lostAt))
		require.NoError(t, b.Unlock(bg))
	} else {
		t.Logf("Lost closed %v after the partial force; the other owner did not get in within %v", lostAt.Sub(forcedAt), 4*lease)
	}
	require.NoError(t, a.Lock(bg), "the owner locks again after acknowledging")
	require.NoError(t, a.Unlock(bg))
}

// redteamErrClass names an attacked call's error by its sentinel.
func redteamErrClass(inner bool, err error) string {
	call := "re-entrant Lock"
	if inner {
		call = "inner Unlock"
	}
	for _, s := range []error{redlock.ErrLost, redlock.ErrNotHeld, redlock.ErrNoQuorum} {
		if errors.Is(err, s) {
			return call + ": " + s.Error()
		}
	}
	return call + ": " + err.Error()
}

// TestRedteamAskingDuringUnlockIsNoLoss: an owner's IsHeld or HoldCount
// (a monitoring goroutine, say) runs while its last Unlock is in flight,
// behind proxies with 0, 4 and 8 ms of latency, so the question can find
// the hold deleted on a majority by the Unlock itself. That is a release,
// not a loss: the Unlock returns nil, and the owner's next Lock must not
// fail with ErrLost (the docs: ErrLost is for a hold gone "while the owner
// still counted on it"). The same for the watchdog: with a 600 ms lease
// its renewals (every 200 ms) race the owner's Unlocks.
func TestRedteamAskingDuringUnlockIsNoLoss(t *testing.T) {
	cl := redlocktest.Start(t, 3, redlocktest.WithProxy())
	for i := 0; i < 3; i++ {
		require.NoError(t, cl.SetLatency(i, time.Duration(4*i)*time.Millisecond))
	}
	bg := context.Background()
	a := dial(t, cl, redlock.WithLease(3*time.Second)).NewMutex("ask")
	asks := map[string]func() error{
		"IsHeld":    func() error { _, err := a.IsHeld(bg); return err },
		"HoldCount": func() error { _, err := a.HoldCount(bg); return err },
	}
	deadline := time.Now().Add(6 * time.Second)
	rounds, slow, spurious := 0, 0, map[string]int{}
	for time.Now().Before(deadline) {
		for what, ask := range asks {
			rounds++
			require.NoError(t, a.Lock(bg))
			done := make(chan error, 1)
			go func() {
				time.Sleep(time.Duration(rand.IntN(10)) * time.Millisecond)
				done <- ask()
			}()
			if err := a.Unlock(bg); err != nil {
				<-done
				slow++ // the load made the release miss the node timeout
				waitUnlocked(t, a)
				continue
			}
			<-done
			if err := a.Lock(bg); err != nil {
				spurious[what]++
				t.Logf("%s: %v", what, err)
				require.ErrorIs(t, err, redlock.ErrLost)
				require.ErrorIs(t, a.Unlock(bg), redlock.ErrNotHeld)
				continue
			}
			if a.Unlock(bg) != nil {
				slow++
				waitUnlocked(t, a)
			}
		}
	}
	b := dial(t, cl, redlock.WithLease(600*time.Millisecond), redlock.WithNodeTimeout(100*time.Millisecond)).NewMutex("ask-renewed")
	deadline = time.Now().Add(4 * time.Second)
	for time.Now().Before(deadline) {
		rounds++
		require.NoError(t, b.Lock(bg))
		time.Sleep(time.Duration(rand.IntN(120)) * time.Millisecond)
		if err := b.Unlock(bg); err != nil {
			slow++ // the load made renewals or the release miss the node timeout
			waitUnlocked(t, b)
			continue
		}
		if err := b.Lock(bg); err != nil {
			spurious["renewal"]++
			require.ErrorIs(t, err, redlock.ErrLost)
			require.ErrorIs(t, b.Unlock(bg), redlock.ErrNotHeld)
			continue
		}
		if b.Unlock(bg) != nil {
			slow++
			waitUnlocked(t, b)
		}
	}
	t.Logf("%d rounds (%d of them failed by the load); a released hold taken for a loss: %v", rounds, slow, spurious)
	assert.Empty(t, spurious, "a question asked while the last Unlock was in flight made the owner's next Lock fail with ErrLost")
}

// TestRedteamKeeperStopsWithTheWait: the keeper refreshes intents only
// while their waits are under way. Four MultiMutex waiters of one Client
// wait behind a hold, get in one after another and release; the Client
// then holds nothing and waits for nothing: over two seconds node 0 sees
// no script call from it (a keeper that kept refreshing finished waits
// would show about six per waiter per second).
func TestRedteamKeeperStopsWithTheWait(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	bg := context.Background()
	holder := dial(t, cl).NewMutex("kw-a")
	require.NoError(t, holder.LockLease(bg, time.Minute))
	c := dial(t, cl)
	done := make(chan error, 4)
	for w := 0; w < 4; w++ {
		m := c.NewMultiMutex("kw-a", fmt.Sprintf("kw-b%d", w))
		go func() {
			err := m.Lock(bg)
			if err == nil {
				time.Sleep(20 * time.Millisecond)
				err = m.Unlock(bg)
			}
			done <- err
		}()
	}
	time.Sleep(time.Second) // the waits refresh their intents
	require.NoError(t, holder.Unlock(bg))
	for w := 0; w < 4; w++ {
		require.NoError(t, returns(t, done, 10*time.Second, "a waiter's Lock and Unlock after the release"))
	}
	time.Sleep(100 * time.Millisecond) // releases' minority writes land
	evals := func() int64 {
		v, err := redis.String(cl.Do(0, "INFO", "commandstats"))
		require.NoError(t, err)
		var n int64
		for _, line := range strings.Split(v, "\n") {
			if strings.HasPrefix(line, "cmdstat_evalsha:calls=") {
				_, err := fmt.Sscanf(line, "cmdstat_evalsha:calls=%d", &n)
				require.NoError(t, err)
			}
		}
		return n
	}
	before := evals()
	time.Sleep(2 * time.Second)
	calls := evals() - before
	t.Logf("script calls on node 0 in 2 s after every wait ended: %d", calls)
	assert.Zero(t, calls, "the keeper goes on after the waits ended")
	for w := 0; w < 4; w++ {
		n, err := redis.Int(cl.Do(0, "EXISTS", fmt.Sprintf("redlock:{kw-b%d}:intent", w)))
		require.NoError(t, err)
		assert.Zero(t, n, "an intent outlived its wait")
	}
}

// waitUnlocked acknowledges whatever m lost and waits until its release,
// retried in the background, is done (Unlock says ErrNotHeld).
func waitUnlocked(t *testing.T, m *redlock.Mutex) {
	t.Helper()
	require.Eventually(t, func() bool {
		return errors.Is(m.Unlock(context.Background()), redlock.ErrNotHeld)
	}, 5*time.Second, 10*time.Millisecond)
}

// TestRedteamReentrantLockKeepsTryingThroughNodeFailures: Lock's doc says
// it "keeps trying through node failures; when ctx ends first it returns
// an error wrapping ctx.Err()". A re-entrant Lock of a hold that is alive
// on every node, made while two of three nodes are paused for 300 ms,
// should therefore succeed once they resume (the hold's lease is 5 s, so
// nothing was lost). It returns ErrNoQuorum at once instead: since issue
// 33's fix, a re-entrant attempt "never waits", and an attempt that could
// not decide (no quorum) is treated as one that found the hold gone.
func TestRedteamReentrantLockKeepsTryingThroughNodeFailures(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	bg := context.Background()
	a := dial(t, cl, redlock.WithLease(5*time.Second)).NewMutex("rkt")
	require.NoError(t, a.Lock(bg))
	eventuallyOnEvery(t, cl, keyOf("rkt"))
	require.NoError(t, cl.Pause(1))
	require.NoError(t, cl.Pause(2))
	resumed := make(chan struct{})
	go func() {
		defer close(resumed)
		time.Sleep(300 * time.Millisecond)
		assert.NoError(t, cl.Resume(1))
		assert.NoError(t, cl.Resume(2))
	}()
	ctx, cancel := context.WithTimeout(bg, 3*time.Second)
	defer cancel()
	start := time.Now()
	err := a.Lock(ctx)
	took := time.Since(start)
	<-resumed
	t.Logf("the re-entrant Lock returned after %v: %v", took, err)
	assert.NoError(t, err, "a re-entrant Lock gave up on a transient node failure; its ctx had not ended")
	assert.False(t, closed(a.Lost()), "the hold, alive on every node, was lost")
	n, herr := a.HoldCount(bg)
	require.NoError(t, herr)
	if err == nil {
		assert.Equal(t, 2, n)
		require.NoError(t, a.Unlock(bg))
	} else {
		assert.Equal(t, 1, n)
	}
	require.NoError(t, a.Unlock(bg))
}

// otherHold is one hold of another owner, taken while an attack ran:
// when it began and ended, and whether it ended cleanly (Lost open, its
// Unlock nil).
type otherHold struct {
	start, end time.Time
	clean      bool
}

// exclusive is what takeOnce needs of a lock: a Mutex, or an RWMutex's
// writer side.
type exclusive interface {
	TryLock(ctx context.Context, wait, lease time.Duration) (bool, error)
	Lost() <-chan struct{}
	Unlock(ctx context.Context) error
}

// takeOnce tries b's TryLock every every for window and, once it gets the
// lock, holds it for hold and releases it: the other owner of an attack.
// A zero start says it never got in.
func takeOnce(bg context.Context, b exclusive, window, every, hold time.Duration) otherHold {
	for end := time.Now().Add(window); time.Now().Before(end); time.Sleep(every) {
		ok, err := b.TryLock(bg, 0, 0)
		if err != nil || !ok {
			continue
		}
		h := otherHold{start: time.Now()}
		lost := b.Lost()
		time.Sleep(hold)
		h.end = time.Now()
		h.clean = !closed(lost)
		if b.Unlock(bg) != nil {
			h.clean = false
		}
		return h
	}
	return otherHold{}
}
