package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/redlock-go/redlock"
)

// Exit codes of inspect.
const (
	exitUndecided = 1 // fewer than a quorum of nodes answered, or inspect failed: no verdict
)

const inspectDescription = `
Show the state of lock NAME on every node: whether the node answered, which
owner holds it there (field "<client id>:<owner id>"), the hold count and the
key's PTTL; then the quorum verdict: HELD when one owner holds it on a majority
of the nodes (N/2+1), FREE when no owner does, UNDECIDED when too few nodes
answered to tell.

Then each node's health: the round trip of a script call, the server's
version and uptime, and whether its answers count toward quorums (not when it
is in restart quarantine, or refuses INFO while quarantine is on).

The lock of NAME is the hash PREFIX+"{"+NAME+"}:lock"; every owner has a field
"<client id>:<owner id>" whose value is its hold count (the bookkeeping
fields ending in "#" are not shown).

Exit codes:
  0  the verdict is HELD or FREE
  1  UNDECIDED: fewer than N/2+1 nodes answered (or no verdict for another
     reason, printed to stderr)
  2  bad flags or arguments
`

// runInspect is "redlock inspect": it prints what every node holds of one
// lock and the quorum's verdict, and returns the exit code.
func runInspect(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("inspect", "--nodes URL,URL,... [flags] NAME", inspectDescription)
	nodes := fs.String("nodes", "", "comma-separated node URLs, one per independent master (default $"+nodesEnv+")")
	prefix := fs.String("prefix", "redlock:", "key prefix, as given to redlock.WithKeyPrefix")
	timeout := fs.Duration("node-timeout", time.Second, "bound on reading one node, as given to redlock.WithNodeTimeout (below a third of its default 30s lease)")
	if code, done := fs.parse(args, stdout, stderr); done {
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
	name := fs.Arg(0)
	states, health, err := readNodes(urls, *prefix, name, *timeout, stderr)
	switch {
	case errors.Is(err, redlock.ErrInvalid):
		return usageError(stderr, "inspect", "%v", err)
	case err != nil:
		fmt.Fprintf(stderr, "redlock inspect: %v\n", err)
		return exitUndecided
	}
	v := decide(states)
	printInspect(stdout, name, states, v)
	printHealth(stdout, health)
	if v.kind == verdictUndecided {
		return exitUndecided
	}
	return exitOK
}

// readNodes returns what every node in urls holds of lock name, read by
// Client.Inspect, and each node's health, read by Client.Status, in the
// order of urls, through a client dialled for it and closed before it
// returns (a failure to close is only reported to stderr). A bad URL, or a
// timeout that redlock rejects, returns an error wrapping
// redlock.ErrInvalid; a node that could not be read has its error in its
// NodeLock and its NodeStatus.
func readNodes(urls []string, prefix, name string, timeout time.Duration, stderr io.Writer) ([]redlock.NodeLock, []redlock.NodeStatus, error) {
	// inspect reports every node's state itself: the client's own log
	// lines (a node list under 3, a node down) would say it twice.
	quiet := redlock.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	client, err := redlock.Dial(urls, redlock.WithKeyPrefix(prefix), redlock.WithNodeTimeout(timeout), quiet)
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		if err := client.Close(); err != nil {
			fmt.Fprintf(stderr, "redlock inspect: closing: %v\n", err)
		}
	}()
	ctx := context.Background()
	states, err := client.Inspect(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	health, err := client.Status(ctx)
	return states, health, err
}

// printHealth writes each node's health: the round trip of a script call,
// the server's version and uptime, and whether it counts toward quorums.
func printHealth(w io.Writer, health []redlock.NodeStatus) {
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tLATENCY\tVERSION\tUPTIME\tCOUNTS")
	for _, s := range health {
		if s.Err != nil {
			fmt.Fprintf(tw, "%s\t-\t-\t-\tno: %v\n", s.Node, nodeCause(s.Err))
			continue
		}
		version, uptime := "unknown", "unknown"
		if s.Version != "" {
			version = s.Version
		}
		if !s.Started.IsZero() {
			uptime = round(time.Since(s.Started))
		}
		counts := "yes"
		switch {
		case s.Counted:
		case !s.QuarantinedUntil.IsZero():
			counts = "no: restart quarantine for " + round(time.Until(s.QuarantinedUntil)) + " more"
		default:
			counts = "no: " + nodeCause(s.Quarantine).Error()
		}
		fmt.Fprintf(tw, "%s\t%v\t%s\t%s\t%s\n", s.Node, s.Latency.Round(time.Microsecond), version, uptime, counts)
	}
	tw.Flush()
}

// nodeCause is what went wrong on a node: the error inside a
// *redlock.NodeError, whose own message repeats the node's name that the
// output already shows.
func nodeCause(err error) error {
	var ne *redlock.NodeError
	if errors.As(err, &ne) {
		return ne.Err
	}
	return err
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
func decide(states []redlock.NodeLock) verdict {
	v := verdict{n: len(states), quorum: len(states)/2 + 1}
	on := map[string][]redlock.NodeLock{}
	for _, s := range states {
		if s.Err != nil {
			continue
		}
		v.reachable++
		if !s.Exists {
			continue
		}
		for h := range s.Holders {
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
			ttls[i] = s.TTL
			counts[s.Holders[h]]++
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

// printInspect writes the table of what each node said and the verdict;
// states is not empty (Dial wants a node).
func printInspect(w io.Writer, name string, states []redlock.NodeLock, v verdict) {
	fmt.Fprintf(w, "lock %q (key %s) on %d nodes, quorum %d\n\n", name, states[0].Key, v.n, v.quorum)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tREACHABLE\tHOLDER\tCOUNT\tPTTL")
	for _, s := range states {
		switch {
		case s.Err != nil:
			fmt.Fprintf(tw, "%s\tno\t-\t-\t-\n", s.Node)
		case len(s.Holders) == 0:
			fmt.Fprintf(tw, "%s\tyes\t(free)\t-\t%s\n", s.Node, ttlString(s))
		default:
			hs := make([]string, 0, len(s.Holders))
			for h := range s.Holders {
				hs = append(hs, h)
			}
			sort.Strings(hs)
			for i, h := range hs {
				node, reach, ttl := s.Node, "yes", ttlString(s)
				if i > 0 {
					node, reach, ttl = "", "", ""
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", node, reach, h, s.Holders[h], ttl)
			}
		}
	}
	tw.Flush()
	for _, s := range states {
		if s.Err != nil {
			fmt.Fprintf(w, "%s: %v\n", s.Node, nodeCause(s.Err))
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "verdict: "+verdictLine(v))
}

// verdictLine says the verdict v in one line: HELD by whom, on how many
// nodes, with which count and quorum PTTL; FREE; or UNDECIDED.
func verdictLine(v verdict) string {
	switch v.kind {
	case verdictHeld:
		return fmt.Sprintf("HELD by %s on %d of %d nodes (quorum %d), hold count %d, quorum PTTL %s",
			v.holder, v.nodes, v.n, v.quorum, v.count, round(v.expires))
	case verdictFree:
		line := fmt.Sprintf("FREE: no owner holds it on a quorum (%d of %d nodes); %d nodes answered", v.quorum, v.n, v.reachable)
		if v.partial > 0 {
			line += fmt.Sprintf("; %d partial hold(s) will expire", v.partial)
		}
		return line
	}
	return fmt.Sprintf("UNDECIDED: %d of %d nodes answered, %d needed to tell", v.reachable, v.n, v.quorum)
}

// ttlString renders a node's time to live of the lock's key.
func ttlString(s redlock.NodeLock) string {
	switch {
	case !s.Exists:
		return "no key"
	case s.TTL < 0:
		return "no expiry"
	}
	return round(s.TTL)
}
