package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redlock-go/redlock"
)

// What inspect decides, by the lock's quorum rule, from what every node
// holds of one name: a verdict per kind of lock (the Mutex, the RWMutex,
// the Semaphore), from the verdicts on each lock of one owner at a time
// (a Mutex, an RWMutex's writer, a semaphore's slot) and on each reader.

type verdictKind int

const (
	verdictFree verdictKind = iota
	verdictHeld
	verdictUndecided
)

// verdict is the quorum's answer on a lock that one owner holds at a time.
type verdict struct {
	kind      verdictKind
	n, quorum int
	reachable int
	holder    string        // verdictHeld: the owner on a quorum
	who       string        // verdictHeld: the holder's label, "" for none (see ownerLabels)
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

// decideShared applies the quorum rule to a lock that many owners hold at
// once (the readers of an RWMutex): each owner's hold as decide sees it
// alone. It returns the verdicts of the owners on a quorum, sorted by
// owner, and the lock's verdict: held when one is, else undecided when one
// could be on the nodes that did not answer, else free (partial: the
// partial holds).
func decideShared(states []redlock.NodeLock) (held []verdict, all verdict) {
	all = decide(states)
	if all.kind == verdictHeld { // one owner on a quorum is not the whole story
		all.kind = verdictFree
	}
	owners := map[string]bool{}
	for _, s := range states {
		for h := range s.Holders {
			owners[h] = true
		}
	}
	all.partial = 0
	for h := range owners {
		alone := make([]redlock.NodeLock, len(states))
		for i, s := range states {
			alone[i] = redlock.NodeLock{Node: s.Node, Key: s.Key, Err: s.Err, TTL: s.TTL, Holders: map[string]int64{}}
			if c, ok := s.Holders[h]; ok {
				alone[i].Exists, alone[i].Holders[h] = true, c
			}
		}
		v := decide(alone)
		all.partial += v.partial
		switch v.kind {
		case verdictHeld:
			held = append(held, v)
		case verdictUndecided:
			all.kind = verdictUndecided
		}
	}
	sort.Slice(held, func(i, j int) bool { return held[i].holder < held[j].holder })
	if len(held) > 0 {
		all.kind = verdictHeld
	}
	return held, all
}

// verdictLine says the verdict v in one line: HELD by whom, on how many
// nodes, with which count and quorum PTTL; FREE; or UNDECIDED.
func verdictLine(v verdict) string {
	switch v.kind {
	case verdictHeld:
		return "HELD by " + heldBy(v)
	case verdictFree:
		line := fmt.Sprintf("FREE: no owner holds it on a quorum (%d of %d nodes); %d nodes answered", v.quorum, v.n, v.reachable)
		if v.partial > 0 {
			line += fmt.Sprintf("; %d partial hold(s) will expire", v.partial)
		}
		return line
	}
	return fmt.Sprintf("UNDECIDED: %d of %d nodes answered, %d needed to tell", v.reachable, v.n, v.quorum)
}

// heldBy says who holds a lock whose verdict v is held, and how.
func heldBy(v verdict) string {
	return fmt.Sprintf("%s on %d of %d nodes (quorum %d), hold count %d, quorum PTTL %s",
		labelled(v.holder, v.who), v.nodes, v.n, v.quorum, v.count, round(v.expires))
}

// labelled says an owner with its label, "OWNER (LABEL)", or the owner
// alone when it has none.
func labelled(owner, label string) string {
	if label == "" {
		return owner
	}
	return owner + " (" + label + ")"
}

// kindVerdict is the verdict on one kind of lock of a name.
type kindVerdict struct {
	name string // the kind: "Mutex", "RWMutex", "Semaphore"
	kind verdictKind
	line string // the verdict in words, HELD, FREE or UNDECIDED first
	// ends is, when held, how long until the holds that keep a newcomer
	// out end (their quorum PTTL): the write hold and the read holds of an
	// RWMutex; the first permit to end when every permit is held.
	ends time.Duration
}

// judge returns the verdicts on each kind of lock of states, in the order
// Mutex, RWMutex, Semaphore; permits is the semaphore's number (0:
// unknown).
// Holders and waiters are named with their labels (WithOwnerLabel).
func judge(states []redlock.NodeLocks, permits int) []kindVerdict {
	labels := ownerLabels(states)
	return []kindVerdict{mutexVerdict(states, labels), rwVerdict(states, labels), semVerdict(states, permits, labels)}
}

// column returns one NodeLock of every node's NodeLocks.
func column(states []redlock.NodeLocks, of func(redlock.NodeLocks) redlock.NodeLock) []redlock.NodeLock {
	out := make([]redlock.NodeLock, len(states))
	for i, s := range states {
		out[i] = of(s)
	}
	return out
}

// mutexVerdict is the verdict on the Mutex of the name, with a MultiMutex
// waiter's intent.
func mutexVerdict(states []redlock.NodeLocks, labels map[string]string) kindVerdict {
	v := decide(column(states, func(s redlock.NodeLocks) redlock.NodeLock { return s.Mutex }))
	v.who = labels[v.holder]
	kv := kindVerdict{name: "Mutex", kind: v.kind, line: verdictLine(v), ends: v.expires}
	kv.line += intentsSaid("a MultiMutex waiter waits", states, labels, func(s redlock.NodeLocks) *redlock.Intent { return s.Intent })
	return kv
}

// rwVerdict is the verdict on the RWMutex of the name: its write hold, its
// read holds (both, after a downgrade), and its waiters' intents.
func rwVerdict(states []redlock.NodeLocks, labels map[string]string) kindVerdict {
	w := decide(column(states, func(s redlock.NodeLocks) redlock.NodeLock { return s.Writer }))
	w.who = labels[w.holder]
	readers, r := decideShared(column(states, func(s redlock.NodeLocks) redlock.NodeLock { return s.Readers }))
	kv := kindVerdict{name: "RWMutex", kind: w.kind}
	var held []string
	if w.kind == verdictHeld {
		held = append(held, "for writing by "+heldBy(w))
		kv.ends = w.expires
	}
	if len(readers) > 0 {
		said := make([]string, len(readers))
		for i, rv := range readers {
			rv.who = labels[rv.holder]
			said[i] = heldBy(rv)
			kv.ends = max(kv.ends, rv.expires)
		}
		held = append(held, fmt.Sprintf("for reading by %d owner(s): %s", len(readers), strings.Join(said, "; ")))
	}
	switch {
	case len(held) > 0:
		kv.kind, kv.line = verdictHeld, "HELD "+strings.Join(held, "; and ")
	case w.kind == verdictUndecided || r.kind == verdictUndecided:
		kv.kind, kv.line = verdictUndecided, verdictLine(verdict{kind: verdictUndecided, n: w.n, quorum: w.quorum, reachable: w.reachable})
	default:
		w.partial += r.partial
		kv.kind, kv.line = verdictFree, verdictLine(w)
	}
	kv.line += intentsSaid("a writer waits, keeping new readers out", states, labels, func(s redlock.NodeLocks) *redlock.Intent { return s.WriterIntent })
	kv.line += intentsSaid("readers wait behind a write hold, before the next writer", states, labels, func(s redlock.NodeLocks) *redlock.Intent { return s.ReadersIntent })
	return kv
}

// semVerdict is the verdict on the Semaphore of the name: which of its
// permits (of permits, 0: unknown) are held on a quorum, and its waiters'
// intent.
func semVerdict(states []redlock.NodeLocks, permits int, labels map[string]string) kindVerdict {
	kv := kindVerdict{name: "Semaphore"}
	slots := len(states[0].Slots)
	var held []string
	undecided := 0
	var first verdict
	for i := 0; i < slots; i++ {
		v := decide(column(states, func(s redlock.NodeLocks) redlock.NodeLock { return s.Slots[i] }))
		v.who = labels[v.holder]
		first = v
		switch v.kind {
		case verdictHeld:
			held = append(held, fmt.Sprintf("slot %d by %s", i, heldBy(v)))
			if kv.ends == 0 || v.expires < kv.ends {
				kv.ends = v.expires
			}
		case verdictUndecided:
			undecided++
		}
	}
	of := ""
	if permits > 0 {
		of = fmt.Sprintf(" of %d", permits)
	}
	read := fmt.Sprintf("slots 0 to %d read", slots-1)
	switch {
	case slots == 0:
		kv.line = "not read"
	case first.reachable < first.quorum:
		kv.kind, kv.line = verdictUndecided, verdictLine(verdict{kind: verdictUndecided, n: first.n, quorum: first.quorum, reachable: first.reachable})
	case undecided > 0:
		kv.kind = verdictUndecided
		kv.line = fmt.Sprintf("UNDECIDED: %d permit(s)%s held on a quorum, %d more could be held on the nodes that did not answer (%s)", len(held), of, undecided, read)
	case len(held) > 0:
		kv.kind = verdictHeld
		kv.line = fmt.Sprintf("HELD: %d permit(s)%s held on a quorum (%s): %s", len(held), of, read, strings.Join(held, "; "))
	default:
		kv.line = fmt.Sprintf("FREE: no permit%s held on a quorum (%s); %d nodes answered", of, read, first.reachable)
	}
	if permits == 0 || len(held) < permits {
		kv.ends = 0 // a permit is free: a newcomer waits for none
	}
	kv.line += intentsSaid("a waiter waits, before newcomers", states, labels, func(s redlock.NodeLocks) *redlock.Intent { return s.SemaphoreIntent })
	return kv
}

// intentsSaid says which intents of one kind (of, nil: none) the nodes
// have, after what: "; a writer waits: X's intent on 3 of 3 nodes", or ""
// when no node has one.
func intentsSaid(what string, states []redlock.NodeLocks, labels map[string]string, of func(redlock.NodeLocks) *redlock.Intent) string {
	on := map[string]int{}
	since := map[string]time.Time{}
	for _, s := range states {
		if in := of(s); in != nil {
			on[in.Waiter]++
			since[in.Waiter] = in.Since
		}
	}
	if len(on) == 0 {
		return ""
	}
	waiters := make([]string, 0, len(on))
	for w := range on {
		waiters = append(waiters, w)
	}
	sort.Slice(waiters, func(i, j int) bool {
		return on[waiters[i]] > on[waiters[j]] || on[waiters[i]] == on[waiters[j]] && waiters[i] < waiters[j]
	})
	said := make([]string, len(waiters))
	for i, w := range waiters {
		who := "the intent"
		if w != "" {
			who = labelled(w, labels[w]) + "'s intent"
		}
		if t := since[w]; !t.IsZero() {
			who += " (waiting since " + t.Format(clockTime) + ")"
		}
		said[i] = fmt.Sprintf("%s on %d of %d nodes", who, on[w], len(states))
	}
	return "; " + what + ": " + strings.Join(said, ", ")
}

// printInspect writes the tables of what each node holds of every kind
// of lock of name, then the verdicts vs; states is not empty (Dial wants a
// node).
func printInspect(w io.Writer, name string, states []redlock.NodeLocks, vs []kindVerdict) {
	n := len(states)
	fmt.Fprintf(w, "lock %q (key %s) on %d nodes, quorum %d\n\n", name, states[0].Mutex.Key, n, n/2+1)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tREACHABLE\tHOLDER\tCOUNT\tPTTL")
	for _, s := range states {
		holderRows(tw, s.Node, "", s.Mutex, true)
	}
	tw.Flush()
	for _, s := range states {
		if s.Err != nil {
			fmt.Fprintf(w, "%s: %v\n", s.Node, nodeCause(s.Err))
		}
	}

	if anyNode(states, func(s redlock.NodeLocks) bool { return s.Writer.Exists || s.Readers.Exists }) {
		fmt.Fprintf(w, "\nread-write lock %q (keys %s, %s)\n\n", name, states[0].Writer.Key, states[0].Readers.Key)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "NODE\tREACHABLE\tSIDE\tHOLDER\tCOUNT\tPTTL")
		for _, s := range states {
			switch {
			case s.Err != nil || len(s.Writer.Holders) > 0:
				holderRows(tw, s.Node, "write\t", s.Writer, false)
				holderRows(tw, "", "read\t", s.Readers, false)
			case len(s.Readers.Holders) > 0:
				holderRows(tw, s.Node, "read\t", s.Readers, false)
			default:
				holderRows(tw, s.Node, "-\t", s.Writer, true)
			}
		}
		tw.Flush()
	}

	if anyNode(states, func(s redlock.NodeLocks) bool {
		for _, l := range s.Slots {
			if l.Exists {
				return true
			}
		}
		return false
	}) {
		fmt.Fprintf(w, "\nsemaphore %q (keys %s to %s)\n\n", name, states[0].Slots[0].Key, states[0].Slots[len(states[0].Slots)-1].Key)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "NODE\tREACHABLE\tSLOT\tHOLDER\tCOUNT\tPTTL")
		for _, s := range states {
			node, shown := s.Node, false
			for i, l := range s.Slots {
				if l.Exists || l.Err != nil && !shown {
					holderRows(tw, node, fmt.Sprintf("%d\t", i), l, node != "")
					node, shown = "", true
				}
			}
			if !shown {
				fmt.Fprintf(tw, "%s\tyes\t-\t(free)\t-\t-\n", s.Node)
			}
		}
		tw.Flush()
	}

	if anyNode(states, func(s redlock.NodeLocks) bool {
		return s.Intent != nil || s.WriterIntent != nil || s.ReadersIntent != nil || s.SemaphoreIntent != nil
	}) {
		fmt.Fprintf(w, "\nwaiters' intents\n\n")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "NODE\tOF\tWAITER\tSINCE\tPTTL")
		for _, s := range states {
			for _, in := range []struct {
				of string
				in *redlock.Intent
			}{{"Mutex (a MultiMutex waiter)", s.Intent}, {"RWMutex writer", s.WriterIntent}, {"RWMutex readers", s.ReadersIntent}, {"Semaphore", s.SemaphoreIntent}} {
				if in.in == nil {
					continue
				}
				waiter, since := in.in.Waiter, "-"
				if waiter == "" {
					waiter = "(every waiting reader)"
				}
				if !in.in.Since.IsZero() {
					since = in.in.Since.Format(clockTime)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.Node, in.of, waiter, since, durationString(in.in.TTL))
			}
		}
		tw.Flush()
	}

	fmt.Fprintln(w)
	for _, v := range vs {
		fmt.Fprintf(w, "%s verdict: %s\n", v.name, v.line)
	}
}

// anyNode reports whether one of states satisfies f.
func anyNode(states []redlock.NodeLocks, f func(redlock.NodeLocks) bool) bool {
	for _, s := range states {
		if f(s) {
			return true
		}
	}
	return false
}

// holderRows writes the rows of one node's lock l: one per holder, or one
// saying it is free (when free is true) or unreachable. node is the
// node's name on the first row ("": a continuation of the node's rows);
// side is the cells between REACHABLE and HOLDER, each ending in a tab.
func holderRows(tw io.Writer, node, side string, l redlock.NodeLock, free bool) {
	reach := "yes"
	if node == "" {
		reach = ""
	}
	switch {
	case l.Err != nil:
		if node != "" {
			fmt.Fprintf(tw, "%s\tno\t%s-\t-\t-\n", node, strings.Repeat("-\t", strings.Count(side, "\t")))
		}
	case len(l.Holders) == 0:
		if free {
			fmt.Fprintf(tw, "%s\t%s\t%s(free)\t-\t%s\n", node, reach, side, ttlString(l))
		}
	default:
		hs := make([]string, 0, len(l.Holders))
		for h := range l.Holders {
			hs = append(hs, h)
		}
		sort.Strings(hs)
		for i, h := range hs {
			ttl := ttlString(l)
			if i > 0 {
				node, reach, ttl = "", "", ""
			}
			fmt.Fprintf(tw, "%s\t%s\t%s%s\t%d\t%s\n", node, reach, side, h, l.Holders[h], ttl)
		}
	}
}

// ttlString renders a node's time to live of the lock's key.
func ttlString(s redlock.NodeLock) string {
	if !s.Exists {
		return "no key"
	}
	return durationString(s.TTL)
}

// durationString renders a key's time to live: -1 is no expiry.
func durationString(d time.Duration) string {
	if d < 0 {
		return "no expiry"
	}
	return round(d)
}
