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
Show every kind of lock called NAME on every node, and the quorum's verdict
on each: the lock (redlock.Mutex, and the name as a MultiMutex takes it),
the read-write lock (redlock.RWMutex: its writer, its readers, and the
intents of its waiting writer and readers) and the semaphore
(redlock.Semaphore: which permits are held, by whom), with the intents
their waiters left. NAME is the argument or --name.

For each kind the verdict is HELD when owners hold it on a majority of the
nodes (N/2+1): the one owner of the lock or of the write hold, the readers
each on a majority, the permits each on a majority; FREE when no owner
does; UNDECIDED when too few nodes answered to tell. An intent is a waiter's
claim to go first: while it lives, no newcomer gets in.

The table of the lock shows, for every node, whether it answered, which
owner holds the lock there (field "<client id>:<owner id>"), the hold count
and the key's PTTL. The read-write lock's and the semaphore's tables, and
the intents', are shown when some node has one of their keys. Then each
node's health: the round trip of a script call, the server's version and
uptime, and whether its answers count toward quorums (not when it is in
restart quarantine, or refuses INFO while quarantine is on).

The keys of NAME (PREFIX is --prefix): the lock PREFIX{NAME}:lock, the
read-write lock PREFIX{NAME}:rw:lock (its writer) and PREFIX{NAME}:rw:readers,
the semaphore's slots PREFIX{NAME}:sem:<slot>:lock, one per permit. Every
owner has a field "<client id>:<owner id>" whose value is its hold count
(the bookkeeping fields ending in "#" are not shown).

Exit codes:
  0  every verdict is HELD or FREE
  1  a verdict is UNDECIDED: fewer than N/2+1 nodes answered (or no verdict
     for another reason, printed to stderr)
  2  bad flags or arguments
`

// runInspect is "redlock inspect": it prints what every node holds of
// every kind of lock of one name and the quorum's verdicts, and returns
// the exit code.
func runInspect(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("inspect", "--nodes URL,URL,... [flags] NAME", inspectDescription)
	nodes := fs.String("nodes", "", "comma-separated node URLs, one per independent master (default $"+nodesEnv+")")
	flagName := fs.String("name", "", "the lock's name, if not given as the argument NAME")
	prefix := fs.String("prefix", "redlock:", "key prefix, as given to redlock.WithKeyPrefix")
	permits := fs.Int("permits", 0, "the semaphore's number of permits `N`: the verdict says how many of N are held; 0: every slot a semaphore of NAME may have is read (up to 1024)")
	timeout := fs.Duration("node-timeout", time.Second, "bound on reading one node, as given to redlock.WithNodeTimeout (below a third of its default 30s lease)")
	// Flags may come after NAME as well: inspect NAME --prefix app:.
	var names []string
	for rest := args; ; rest = fs.Args()[1:] {
		if code, done := fs.parse(rest, stdout, stderr); done {
			return code
		}
		if fs.NArg() == 0 {
			break
		}
		names = append(names, fs.Arg(0))
	}
	name, msg := lockName(*flagName, names)
	switch {
	case msg != "":
		return usageError(stderr, "inspect", "%s", msg)
	case *timeout <= 0:
		return usageError(stderr, "inspect", "-node-timeout must be positive, got %v", *timeout)
	case *permits < 0 || *permits > redlock.MaxPermits:
		return usageError(stderr, "inspect", "-permits must be from 0 to %d, got %d", redlock.MaxPermits, *permits)
	}
	urls := nodeList(*nodes)
	if len(urls) == 0 {
		return usageError(stderr, "inspect", "no nodes: give --nodes URL,URL,... or set $%s", nodesEnv)
	}
	slots := *permits
	if slots == 0 {
		slots = redlock.MaxPermits
	}
	states, health, err := readNodes(urls, *prefix, name, slots, *timeout, stderr)
	switch {
	case errors.Is(err, redlock.ErrInvalid):
		return usageError(stderr, "inspect", "%v", err)
	case err != nil:
		fmt.Fprintf(stderr, "redlock inspect: %v\n", err)
		return exitUndecided
	}
	vs := judge(states, *permits)
	printInspect(stdout, name, states, vs)
	printOwners(stdout, states)
	printHealth(stdout, health)
	for _, v := range vs {
		if v.kind == verdictUndecided {
			return exitUndecided
		}
	}
	return exitOK
}

// readNodes returns what every node in urls holds of every kind of lock
// called name (slots: how many of the semaphore's slots), read by
// Client.InspectAll, and each node's health, read by Client.Status, in the
// order of urls, through a client dialled for it and closed before it
// returns (a failure to close is only reported to stderr). A bad URL, or a
// timeout that redlock rejects, returns an error wrapping
// redlock.ErrInvalid; a node that could not be read has its error in its
// NodeLocks and its NodeStatus.
func readNodes(urls []string, prefix, name string, slots int, timeout time.Duration, stderr io.Writer) ([]redlock.NodeLocks, []redlock.NodeStatus, error) {
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
	states, err := client.InspectAll(ctx, name, slots)
	if err != nil {
		return nil, nil, err
	}
	health, err := client.Status(ctx)
	return states, health, err
}

// printOwners writes who each owner and waiter found is: the label its
// Client published (redlock.WithOwnerLabel; by default "HOST pid PID"),
// as any node has it, or "(no label)".
func printOwners(w io.Writer, states []redlock.NodeLocks) {
	labels := ownerLabels(states)
	if len(labels) == 0 {
		return
	}
	owners := make([]string, 0, len(labels))
	for o := range labels {
		owners = append(owners, o)
	}
	sort.Strings(owners)
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "OWNER\tWHO")
	for _, o := range owners {
		who := labels[o]
		if who == "" {
			who = "(no label)"
		}
		fmt.Fprintf(tw, "%s\t%s\n", o, who)
	}
	tw.Flush()
}

// ownerLabels maps every owner and waiter that states name to its label
// (redlock.WithOwnerLabel), as any node has it ("" where none has one).
func ownerLabels(states []redlock.NodeLocks) map[string]string {
	labels := map[string]string{}
	for _, s := range states {
		for _, o := range ownersOf(s) {
			if labels[o] == "" {
				labels[o] = s.Labels[o]
			}
		}
	}
	return labels
}

// ownersOf lists the owners and waiters of s, each once.
func ownersOf(s redlock.NodeLocks) []string {
	var out []string
	for _, l := range append([]redlock.NodeLock{s.Mutex, s.Writer, s.Readers}, s.Slots...) {
		for h := range l.Holders {
			out = append(out, h)
		}
	}
	for _, in := range []*redlock.Intent{s.Intent, s.WriterIntent, s.SemaphoreIntent} {
		if in != nil && in.Waiter != "" {
			out = append(out, in.Waiter)
		}
	}
	return out
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
