package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlocktest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Attacks on how the heads of many Clients take turns for one lock
// (docs/algorithm.md, "Waiting", "Heads of many clients take turns" and
// what follows): each sets one thing the turns rely on askew (a client's
// attempts slower than the others', a client that stops and starts
// waiting, a client that misses takes, clients that all begin at once,
// MultiMutex waiters beside Mutex waiters) and asks what
// TestWaitersInManyClientsAllGetTheLock asks: every goroutine gets the
// lock in the window, none more than 4×+4 as often as another, nobody goes
// without it for more than stallBound while all wait, and never two holders
// at once, which a counter of holders of its own checks.

// turnLocker is what a contender locks: a Mutex, a MultiMutex (a *Mutex
// too) or an RWMutex's writer side.
type turnLocker interface {
	Lock(ctx context.Context) error
	Unlock(ctx context.Context) error
}

// contender is one goroutine of an attack.
type contender struct {
	client int        // its Client's index, for the log
	l      turnLocker // what it locks, its own owner
	churn  bool       // as newsContender's
}

// runTurns runs the contenders on the lock for warm and then window, each
// holding it for hold: runNews, every contender excluding all the others.
func runTurns(t *testing.T, cl *redlocktest.Cluster, cs []contender, hold, warm, window time.Duration) *newsAttack {
	t.Helper()
	ncs := make([]newsContender, len(cs))
	for g, c := range cs {
		ncs[g] = newsContender{client: c.client, what: "lock", names: []string{"the lock"}, churn: c.churn,
			lock: func(ctx context.Context) (newsHold, error) {
				if err := c.l.Lock(ctx); err != nil {
					return newsHold{}, err
				}
				return newsHold{release: c.l.Unlock}, nil
			}}
	}
	return runNews(t, cl, ncs, 1, hold, warm, window)
}

// checkTurns asserts what every attack asks of the turns, logging each
// client's attempts (attemptTally) when a goroutine starved or got the
// lock more than 4×+4 as often as another.
func checkTurns(t *testing.T, what string, cs []contender, na *newsAttack, seen []*attemptTally) {
	t.Helper()
	per, longest := na.per, na.longest
	least, most, total := spread(per)
	byClient := make([]string, 0, len(seen))
	for i := range seen {
		var counts []string
		var worst time.Duration
		for g, c := range cs {
			if c.client == i {
				counts = append(counts, fmt.Sprint(per[g]))
				worst = max(worst, longest[g])
			}
		}
		byClient = append(byClient, fmt.Sprintf("c%d[%s ≤%v]", i, strings.Join(counts, " "), worst.Round(time.Millisecond)))
	}
	t.Logf("%s: %d acquisitions, at most %v apart (or from the last to the window's end); per goroutine %d–%d; per client [acquisitions, longest Lock]: %s", what, total, na.gap.Round(time.Millisecond), least, most, strings.Join(byClient, " "))
	if least == 0 || most > 4*least+4 || na.twice > 0 || na.gap > stallBound {
		for i, s := range seen {
			t.Logf("client %d: %s", i, s)
		}
		if na.stall != "" {
			t.Log(na.stall)
		}
	}
	assert.Zero(t, na.twice, "acquisitions while another goroutine held the lock")
	for g, n := range per {
		assert.Positive(t, n, "goroutine %d (client %d) starved", g, cs[g].client)
	}
	assert.LessOrEqual(t, most, 4*least+4, "per goroutine %d–%d", least, most)
	assert.LessOrEqual(t, na.gap, stallBound, "nobody acquired the lock for %v while every goroutine waited for it", na.gap)
}

// stallBound is the longest time without an acquisition that an attack
// allows while goroutines wait: four node timeouts (an intent's lease),
// where a handoff takes a few milliseconds (at most 415 ms apart in
// the runs that did not stall, on a busy machine under -race).
const stallBound = 4 * nodeTimeout

// nodeKeys is every lock's key on every node with its PTTL and value.
func nodeKeys(cl *redlocktest.Cluster) string {
	var b strings.Builder
	for i := 0; i < cl.N(); i++ {
		fmt.Fprintf(&b, "\n  node %d:", i)
		keys, _ := redis.Strings(cl.Do(i, "KEYS", "*"))
		sort.Strings(keys)
		for _, k := range keys {
			if strings.HasPrefix(k, "redlock:owner:") || k == "redlock:leases" {
				continue // the owners' registry: no lock's state
			}
			typ, _ := redis.String(cl.Do(i, "TYPE", k))
			pttl, _ := redis.Int64(cl.Do(i, "PTTL", k))
			var v any
			switch typ {
			case "hash":
				v, _ = redis.StringMap(cl.Do(i, "HGETALL", k))
			case "string":
				v, _ = redis.String(cl.Do(i, "GET", k))
			default:
				v = typ
			}
			fmt.Fprintf(&b, " %s (pttl %d ms) %v;", k, pttl, v)
		}
	}
	return b.String()
}

// dialTallied dials nc Clients, those in through (by index) with the URLs
// it gives, each with an attemptTally.
func dialTallied(t *testing.T, cl *redlocktest.Cluster, nc int, through map[int][]string) ([]*redlock.Client, []*attemptTally) {
	t.Helper()
	clients := make([]*redlock.Client, nc)
	seen := make([]*attemptTally, nc)
	for i := range clients {
		seen[i] = &attemptTally{}
		urls := cl.URLs()
		if u, ok := through[i]; ok {
			urls = u
		}
		c, err := redlock.Dial(urls, redlock.WithNodeTimeout(nodeTimeout), redlock.WithObserver(seen[i]))
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		clients[i] = c
	}
	return clients, seen
}

// mutexes makes perClient contenders of Mutex name in each client.
func mutexes(clients []*redlock.Client, perClient int, name string) []contender {
	return contenders(clients, perClient, func(_ int, c *redlock.Client) turnLocker { return c.NewMutex(name) })
}

// contenders makes perClient contenders in each client, of what newLocker
// makes for client i.
func contenders(clients []*redlock.Client, perClient int, newLocker func(i int, c *redlock.Client) turnLocker) []contender {
	var cs []contender
	for k := 0; k < perClient; k++ {
		for i, c := range clients {
			cs = append(cs, contender{client: i, l: newLocker(i, c)})
		}
	}
	return cs
}

// forwarder is a TCP forwarder on 127.0.0.1 to one node that holds each
// chunk the node sends back for delay() (in order), and remembers the
// local addresses of its connections to the node (the addresses the node
// sees its clients at).
type forwarder struct {
	ln     net.Listener
	target string
	delay  func() time.Duration
	mu     sync.Mutex // protects the fields below
	conns  []net.Conn
	locals map[string]bool
	wg     sync.WaitGroup
}

// forwardAll starts an undelayed forwarder to each node of cl, and
// returns them with their URLs.
func forwardAll(t *testing.T, cl *redlocktest.Cluster) ([]*forwarder, []string) {
	fs, urls := make([]*forwarder, cl.N()), make([]string, cl.N())
	for n := range fs {
		fs[n] = forward(t, cl.DirectAddr(n), func() time.Duration { return 0 })
		urls[n] = fs[n].url()
	}
	return fs, urls
}

// forward starts a forwarder to target, closed when the test ends (after
// the Clients dialed later).
func forward(t *testing.T, target string, delay func() time.Duration) *forwarder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	f := &forwarder{ln: ln, target: target, delay: delay, locals: map[string]bool{}}
	f.wg.Add(1)
	go f.accept()
	t.Cleanup(f.close)
	return f
}

func (f *forwarder) url() string { return "redis://" + f.ln.Addr().String() }

// isOurs reports whether the node sees one of the forwarder's connections
// at addr.
func (f *forwarder) isOurs(addr string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.locals[addr]
}

func (f *forwarder) accept() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", f.target)
		if err != nil {
			c.Close()
			continue
		}
		f.mu.Lock()
		f.conns = append(f.conns, c, s)
		f.locals[s.LocalAddr().String()] = true
		f.mu.Unlock()
		f.wg.Add(3)
		go func() { // requests go through at once
			defer f.wg.Done()
			io.Copy(s, c)
			s.Close()
			c.Close()
		}()
		type chunk struct {
			b   []byte
			due time.Time
		}
		replies := make(chan chunk, 1024)
		go func() { // replies are read at once and held
			defer f.wg.Done()
			defer close(replies)
			for {
				b := make([]byte, 32<<10)
				n, err := s.Read(b)
				if n > 0 {
					replies <- chunk{b[:n], time.Now().Add(f.delay())}
				}
				if err != nil {
					return
				}
			}
		}()
		go func() {
			defer f.wg.Done()
			for r := range replies {
				time.Sleep(time.Until(r.due))
				if _, err := c.Write(r.b); err != nil {
					s.Close()
					c.Close()
				}
			}
			c.Close()
		}()
	}
}

func (f *forwarder) close() {
	f.ln.Close()
	f.mu.Lock()
	for _, c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}

// Two of 8 clients reach the nodes through forwarders that hold each reply
// 2–5 ms (and, harsher, 10–20 ms: a client in another data centre): their
// attempts take longer, and they hear releases and takes later than the
// others. Their waiters still get the lock, and not more than 4×+4 times
// less often than the others'.
func TestTurnsAttackSlowClients(t *testing.T) {
	for _, d := range []struct{ least, most time.Duration }{{2 * time.Millisecond, 5 * time.Millisecond}, {10 * time.Millisecond, 20 * time.Millisecond}} {
		t.Run(fmt.Sprint(d.least, "-", d.most), func(t *testing.T) {
			cl := redlocktest.Start(t, 5)
			slow := map[int][]string{}
			for _, i := range []int{2, 5} {
				for n := 0; n < cl.N(); n++ {
					f := forward(t, cl.DirectAddr(n), func() time.Duration {
						return d.least + time.Duration(rand.Int64N(int64(d.most-d.least)))
					})
					slow[i] = append(slow[i], f.url())
				}
			}
			clients, seen := dialTallied(t, cl, 8, slow)
			cs := mutexes(clients, 3, "slow")
			na := runTurns(t, cl, cs, time.Millisecond, 300*time.Millisecond, 3*time.Second)
			checkTurns(t, fmt.Sprintf("clients 2 and 5 slow by %v–%v", d.least, d.most), cs, na, seen)
		})
	}
}

// Waiters that come and go: 4 of 8 clients have one goroutine each that
// sleeps a random 0–20 ms after its release before it locks again, so its
// Client often has no waiter, unsubscribes, and misses the takes of the
// others, which hand the lock round meanwhile (3 waiters each in the other
// 4 clients, every acquisition a handoff).
func TestTurnsAttackChurningWaiters(t *testing.T) {
	cl := redlocktest.Start(t, 5)
	clients, seen := dialTallied(t, cl, 8, nil)
	var cs []contender
	for k := 0; k < 3; k++ {
		for i, c := range clients {
			if churn := i%2 == 1; !churn || k == 0 {
				cs = append(cs, contender{client: i, l: c.NewMutex("churn"), churn: churn})
			}
		}
	}
	na := runTurns(t, cl, cs, time.Millisecond, 300*time.Millisecond, 3*time.Second)
	checkTurns(t, "clients 1, 3, 5, 7 churn", cs, na, seen)
}

// One client's pub/sub connections are killed every 100 ms (CLIENT KILL on
// the node, by the connection's address, from a separate connection) while
// 8 clients with 3 waiters each hand the lock round: it misses takes and
// releases, reconnects and subscribes again. Either on one node at a time
// (the next node each time) or on every node at once.
func TestTurnsAttackPubSubKilled(t *testing.T) {
	for _, every := range []bool{false, true} {
		t.Run(map[bool]string{false: "one node at a time", true: "every node"}[every], func(t *testing.T) {
			cl := redlocktest.Start(t, 5)
			fs, urls := forwardAll(t, cl)
			const victim = 3
			clients, seen := dialTallied(t, cl, 8, map[int][]string{victim: urls})
			cs := mutexes(clients, 3, "killed")
			stop := make(chan struct{})
			killed := make(chan int)
			go func() {
				n, kills := 0, 0
				defer func() { killed <- kills }()
				tick := time.NewTicker(100 * time.Millisecond)
				defer tick.Stop()
				for {
					select {
					case <-stop:
						return
					case <-tick.C:
					}
					for i := range fs {
						if !every && i != n%len(fs) {
							continue
						}
						kills += killPubSub(cl, i, fs[i])
					}
					n++
				}
			}()
			na := runTurns(t, cl, cs, time.Millisecond, 300*time.Millisecond, 3*time.Second)
			close(stop)
			kills := <-killed
			checkTurns(t, fmt.Sprintf("client %d's pub/sub killed %d times", victim, kills), cs, na, seen)
			assert.Positive(t, kills, "no pub/sub connection of client %d was killed", victim)
		})
	}
}

// killPubSub kills the pub/sub connections of node i that come through f,
// and returns how many it killed.
func killPubSub(cl *redlocktest.Cluster, i int, f *forwarder) int {
	list, err := cl.Do(i, "CLIENT", "LIST", "TYPE", "pubsub")
	if err != nil {
		return 0
	}
	text, _ := list.(string)
	if b, ok := list.([]byte); ok {
		text = string(b)
	}
	kills := 0
	for _, line := range strings.Split(text, "\n") {
		var id, addr string
		for _, kv := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(kv, "id="); ok {
				id = v
			} else if v, ok := strings.CutPrefix(kv, "addr="); ok {
				addr = v
			}
		}
		if id != "" && f.isOurs(addr) {
			if _, err := cl.Do(i, "CLIENT", "KILL", "ID", id); err == nil {
				kills++
			}
		}
	}
	return kills
}

// Many clients begin at the same moment: 10 clients with 2 goroutines
// each wait at a barrier and call Lock together, so their first attempts
// overlap and split the nodes; each round ends when every goroutine got
// the lock once. Every round ends within 5 s, 8 rounds.
func TestTurnsAttackBarrierStart(t *testing.T) {
	cl := redlocktest.Start(t, 5)
	clients, seen := dialTallied(t, cl, 10, nil)
	cs := mutexes(clients, 2, "barrier")
	var inside, twice atomic.Int32
	for round := 0; round < 8; round++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		start := make(chan struct{})
		waited := make([]time.Duration, len(cs))
		errs := make([]error, len(cs))
		var ready, wg sync.WaitGroup
		for g, c := range cs {
			ready.Add(1)
			wg.Add(1)
			go func() {
				defer wg.Done()
				ready.Done()
				<-start
				began := time.Now()
				if errs[g] = c.l.Lock(ctx); errs[g] != nil {
					return
				}
				waited[g] = time.Since(began)
				if inside.Add(1) != 1 {
					twice.Add(1)
				}
				time.Sleep(time.Millisecond)
				inside.Add(-1)
				// A release that timed out on a busy machine is retried in
				// the background (ErrNoQuorum): not what this test is about.
				if err := c.l.Unlock(context.Background()); err != nil && !errors.Is(err, redlock.ErrNoQuorum) {
					t.Errorf("goroutine %d (client %d): unlock: %v", g, c.client, err)
				} else if err != nil {
					t.Logf("goroutine %d (client %d): unlock: %v", g, c.client, err)
				}
			}()
		}
		ready.Wait()
		began := time.Now()
		close(start)
		wg.Wait()
		cancel()
		took := time.Since(began)
		failed := 0
		for _, err := range errs {
			if err != nil {
				failed++
			}
		}
		var worst time.Duration
		for _, w := range waited {
			worst = max(worst, w)
		}
		t.Logf("round %d: %d goroutines locked at once, all done in %v, the longest Lock %v, %d gave up at 5 s", round, len(cs), took.Round(time.Millisecond), worst.Round(time.Millisecond), failed)
		if failed > 0 || twice.Load() > 0 {
			for i, s := range seen {
				t.Logf("client %d: %s", i, s)
			}
			for g, err := range errs {
				assert.NoError(t, err, "goroutine %d (client %d) never got the lock in 5 s", g, cs[g].client)
			}
			require.Zero(t, twice.Load(), "acquisitions while another goroutine held the lock")
			return
		}
	}
}

// MultiMutex waiters beside Mutex waiters of the same name: a MultiMutex
// of ("mixed", "mixed-other") excludes a Mutex of "mixed", and leaves
// intents that refuse the Mutex waiters, whose heads take turns through
// their Clients. 6 clients with 3 Mutex waiters and 2 clients with 3
// MultiMutex waiters hand the lock round; everyone gets it. (It stalled in
// 3 of 5 runs before takes on a node a head's split attempt found free
// were no news: the oldest waiter's intent on a majority, the lock free,
// and every head waiting out a take's 30 s lease; TestUnitTakeOnAFreeNodeIsNoNews.)
func TestTurnsAttackMultiMutexBesideMutexes(t *testing.T) {
	cl := redlocktest.Start(t, 5)
	clients, seen := dialTallied(t, cl, 8, nil)
	cs := contenders(clients, 3, func(i int, c *redlock.Client) turnLocker {
		if i >= 6 {
			return c.NewMultiMutex("mixed", "mixed-other")
		}
		return c.NewMutex("mixed")
	})
	na := runTurns(t, cl, cs, time.Millisecond, 300*time.Millisecond, 3*time.Second)
	checkTurns(t, "clients 6 and 7 MultiMutex", cs, na, seen)
}

// RWMutex writers in 8 clients, 3 each, hand the write lock round.
// Writers exclude each other as Mutex owners do (docs/algorithm.md, "Many
// readers or one writer"); the docs do not say in so many words that their
// heads take turns, so this asks of them what the Mutex's turns promise.
func TestTurnsAttackRWMutexWriters(t *testing.T) {
	cl := redlocktest.Start(t, 5)
	clients, seen := dialTallied(t, cl, 8, nil)
	cs := contenders(clients, 3, func(_ int, c *redlock.Client) turnLocker { return c.NewRWMutex("writers") })
	na := runTurns(t, cl, cs, time.Millisecond, 300*time.Millisecond, 3*time.Second)
	checkTurns(t, "RWMutex writers", cs, na, seen)
}
