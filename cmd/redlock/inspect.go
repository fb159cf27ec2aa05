package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/gomodule/redigo/redis"
)

// Exit codes of inspect.
const (
	exitUndecided = 1 // fewer than a quorum of nodes answered: no verdict
)

const inspectDescription = `
Show the state of lock NAME on every node: whether the node answered, which
owner holds it there (field "<client id>:<owner id>"), the hold count and the
key's PTTL; then the quorum verdict: HELD when one owner holds it on a majority
of the nodes (N/2+1), FREE when no owner does, UNDECIDED when too few nodes
answered to tell.

The lock of NAME is the hash PREFIX+"lock:"+NAME; every owner has a field
"<client id>:<owner id>" whose value is its hold count (the bookkeeping
fields ending in "#" are not shown).

Exit codes:
  0  the verdict is HELD or FREE
  1  UNDECIDED: fewer than N/2+1 nodes answered
  2  bad flags or arguments
`

func runInspect(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("inspect", "--nodes URL,URL,... [flags] NAME", inspectDescription, stderr)
	nodes := fs.String("nodes", "", "comma-separated node URLs, one per independent master (default $"+nodesEnv+")")
	prefix := fs.String("prefix", "redlock:", "key prefix, as given to redlock.WithKeyPrefix")
	timeout := fs.Duration("node-timeout", time.Second, "bound on connecting to and querying one node")
	if code, done := parse(fs, args); done {
		return code
	}
	if fs.NArg() != 1 || fs.Arg(0) == "" {
		return usageError(stderr, "inspect", "want exactly one lock NAME after the flags, got %d arguments", fs.NArg())
	}
	if *timeout <= 0 {
		return usageError(stderr, "inspect", "-node-timeout must be positive, got %v", *timeout)
	}
	urls := nodeList(*nodes)
	if len(urls) == 0 {
		return usageError(stderr, "inspect", "no nodes: give --nodes URL,URL,... or set $%s", nodesEnv)
	}
	targets := make([]target, len(urls))
	for i, raw := range urls {
		t, err := parseNodeURL(raw)
		if err != nil {
			return usageError(stderr, "inspect", "node %d: %v", i+1, err)
		}
		targets[i] = t
	}
	name := fs.Arg(0)
	key := *prefix + "lock:" + name
	states := probeAll(context.Background(), targets, key, *timeout)
	v := decide(states)
	printInspect(stdout, name, key, states, v)
	if v.kind == verdictUndecided {
		return exitUndecided
	}
	return exitOK
}

// target is one node to inspect.
type target struct {
	display string // the URL without its password
	network string // "tcp" or "unix"
	addr    string
	url     string // for redis:// and rediss://, given to redis.DialURL
	opts    []redis.DialOption
}

// parseNodeURL accepts the URL forms redlock.Dial accepts.
func parseNodeURL(raw string) (target, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return target{}, fmt.Errorf("bad URL %q: %v", raw, err)
	}
	t := target{display: u.Redacted()}
	switch u.Scheme {
	case "redis", "rediss":
		if u.Host == "" {
			return target{}, fmt.Errorf("bad URL %q: no host", t.display)
		}
		t.network, t.addr, t.url = "tcp", u.Host, raw
	case "unix":
		if u.Path == "" {
			return target{}, fmt.Errorf("bad URL %q: no socket path", t.display)
		}
		t.network, t.addr = "unix", u.Path
		if db := u.Query().Get("db"); db != "" {
			n, err := strconv.Atoi(db)
			if err != nil {
				return target{}, fmt.Errorf("bad URL %q: db %q is not a number", t.display, db)
			}
			t.opts = append(t.opts, redis.DialDatabase(n))
		}
		if u.User != nil {
			if p, ok := u.User.Password(); ok {
				t.opts = append(t.opts, redis.DialUsername(u.User.Username()), redis.DialPassword(p))
			}
		}
	default:
		return target{}, fmt.Errorf("bad URL %q: scheme must be redis, rediss or unix", t.display)
	}
	return t, nil
}

// nodeState is what one node said about the lock.
type nodeState struct {
	target
	err     error            // the node could not be queried
	holders map[string]int64 // owner field -> hold count
	pttl    time.Duration    // -2ms: no key, -1ms: no TTL (as PTTL answers, in ms)
}

func probeAll(ctx context.Context, ts []target, key string, timeout time.Duration) []nodeState {
	out := make([]nodeState, len(ts))
	var wg sync.WaitGroup
	for i, t := range ts {
		wg.Add(1)
		go func(i int, t target) {
			defer wg.Done()
			out[i] = probe(ctx, t, key, timeout)
		}(i, t)
	}
	wg.Wait()
	return out
}

func probe(ctx context.Context, t target, key string, timeout time.Duration) nodeState {
	s := nodeState{target: t}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	opts := append([]redis.DialOption{
		redis.DialConnectTimeout(timeout),
		redis.DialReadTimeout(timeout),
		redis.DialWriteTimeout(timeout),
	}, t.opts...)
	var conn redis.Conn
	var err error
	if t.url != "" {
		conn, err = redis.DialURLContext(ctx, t.url, opts...)
	} else {
		conn, err = redis.DialContext(ctx, t.network, t.addr, opts...)
	}
	if err != nil {
		s.err = err
		return s
	}
	defer conn.Close()
	// One round trip: the hash and its PTTL.
	if err := conn.Send("HGETALL", key); err != nil {
		s.err = err
		return s
	}
	if err := conn.Send("PTTL", key); err != nil {
		s.err = err
		return s
	}
	if err := conn.Flush(); err != nil {
		s.err = err
		return s
	}
	fields, err := redis.StringMap(redis.ReceiveContext(conn, ctx))
	if err != nil {
		s.err = err
		return s
	}
	pttl, err := redis.Int64(redis.ReceiveContext(conn, ctx))
	if err != nil {
		s.err = err
		return s
	}
	s.pttl = time.Duration(pttl) * time.Millisecond
	s.holders = make(map[string]int64)
	for f, v := range fields {
		if strings.HasSuffix(f, "#") {
			continue // the owner's bookkeeping (sequence of its latest write)
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			n = -1 // not written by redlock; shown as such
		}
		s.holders[f] = n
	}
	return s
}

type verdictKind int

const (
	verdictFree verdictKind = iota
	verdictHeld
	verdictUndecided
)

// verdict is the quorum's answer.
type verdict struct {
	kind      verdictKind
	n, quorum int
	reachable int
	holder    string        // verdictHeld: the owner on a quorum
	nodes     int           // verdictHeld: on how many nodes it holds the lock
	count     int64         // verdictHeld: its hold count on most of them
	expires   time.Duration // verdictHeld: the quorum's PTTL: the (quorum)-th largest
	partial   int           // nodes where some owner holds it without a quorum
}

// decide applies the lock's quorum rule to what the nodes said: held when one
// owner is on N/2+1 nodes; free when no owner can be (too many nodes answered
// without it); undecided otherwise.
func decide(states []nodeState) verdict {
	v := verdict{n: len(states), quorum: len(states)/2 + 1}
	on := map[string][]nodeState{}
	for _, s := range states {
		if s.err != nil {
			continue
		}
		v.reachable++
		if s.pttl == -2*time.Millisecond {
			continue // no key here
		}
		for h := range s.holders {
			on[h] = append(on[h], s)
		}
	}
	for h, ss := range on {
		if len(ss) < v.quorum {
			v.partial += len(ss)
			continue
		}
		v.kind, v.holder, v.nodes = verdictHeld, h, len(ss)
		ttls := make([]time.Duration, len(ss))
		counts := map[int64]int{}
		for i, s := range ss {
			ttls[i] = s.pttl
			counts[s.holders[h]]++
		}
		sort.Slice(ttls, func(i, j int) bool { return ttls[i] > ttls[j] })
		v.expires = ttls[v.quorum-1]
		for c, k := range counts {
			if k > counts[v.count] || (k == counts[v.count] && c > v.count) {
				v.count = c
			}
		}
	}
	if v.kind == verdictHeld {
		return v
	}
	// Free needs enough answers to exclude every owner from a majority:
	// the unreachable nodes plus the largest partial holder stay below quorum.
	best := 0
	for _, ss := range on {
		best = max(best, len(ss))
	}
	if best+(v.n-v.reachable) >= v.quorum {
		v.kind = verdictUndecided
	}
	return v
}

func printInspect(w io.Writer, name, key string, states []nodeState, v verdict) {
	fmt.Fprintf(w, "lock %q (key %s) on %d nodes, quorum %d\n\n", name, key, v.n, v.quorum)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tREACHABLE\tHOLDER\tCOUNT\tPTTL")
	for _, s := range states {
		switch {
		case s.err != nil:
			fmt.Fprintf(tw, "%s\tno\t-\t-\t-\n", s.display)
		case len(s.holders) == 0:
			fmt.Fprintf(tw, "%s\tyes\t(free)\t-\t%s\n", s.display, pttlString(s.pttl))
		default:
			hs := make([]string, 0, len(s.holders))
			for h := range s.holders {
				hs = append(hs, h)
			}
			sort.Strings(hs)
			for i, h := range hs {
				node, reach, ttl := s.display, "yes", pttlString(s.pttl)
				if i > 0 {
					node, reach, ttl = "", "", ""
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", node, reach, h, s.holders[h], ttl)
			}
		}
	}
	tw.Flush()
	for _, s := range states {
		if s.err != nil {
			fmt.Fprintf(w, "%s: %v\n", s.display, s.err)
		}
	}
	fmt.Fprintln(w)
	switch v.kind {
	case verdictHeld:
		fmt.Fprintf(w, "verdict: HELD by %s on %d of %d nodes (quorum %d), hold count %d, quorum PTTL %s\n",
			v.holder, v.nodes, v.n, v.quorum, v.count, round(v.expires))
	case verdictFree:
		fmt.Fprintf(w, "verdict: FREE: no owner holds it on a quorum (%d of %d nodes); %d nodes answered", v.quorum, v.n, v.reachable)
		if v.partial > 0 {
			fmt.Fprintf(w, "; %d partial hold(s) will expire", v.partial)
		}
		fmt.Fprintln(w)
	default:
		fmt.Fprintf(w, "verdict: UNDECIDED: %d of %d nodes answered, %d needed to tell\n", v.reachable, v.n, v.quorum)
	}
}

// pttlString renders a PTTL reply.
func pttlString(d time.Duration) string {
	switch d {
	case -2 * time.Millisecond:
		return "no key"
	case -1 * time.Millisecond:
		return "no expiry"
	}
	return round(d)
}
