package redlock

import (
	"slices"
	"strings"

	"github.com/redlock-go/redlock/internal/lockname"
)

// maxMultiNames is the most names a MultiMutex takes: every call sends the
// keys of every name, and each node's script runs over all of them.
const maxMultiNames = 1024

// NewMultiMutex returns one owner of several locks at once: Lock takes
// every name or none, and the hold is one hold of them all, with the API of
// a Mutex (Lock, TryLock, LockLease, Unlock, Lost, Until, Token, Do,
// ForceUnlock, IsLocked, IsHeld, HoldCount), re-entrant like a Mutex and
// renewed by the watchdog. Each name is the same lock a Mutex of that name
// takes: a MultiMutex and a Mutex (or another MultiMutex) that share a name
// exclude each other.
//
// On each node one script takes every name or none; a majority of nodes
// that took them all holds the lock, and an attempt without a majority is
// rolled back on every node. Two MultiMutexes over overlapping names
// therefore never deadlock: no owner ever holds some names while it waits
// for others (a hold-and-wait that needs an order of acquisition, as a
// chain of single locks would). Contenders that split the nodes roll back
// and pause at random before they try again, as a Mutex's do.
//
// No owner starves. A waiter that was refused leaves an intent on its
// names on the nodes that refused it, stamped with when its wait began;
// while it is there, no owner that is not an older waiter takes those
// names (a new acquisition, TryLock included, comes after every waiter).
// So the oldest waiter gets its names once the holds that were on them
// when its intent got there end, whatever the others' luck, and each
// waiter becomes the oldest in turn: a bound on each owner's wait, not
// only on the average. An intent only refuses, so it never makes two
// holders, and lives only while its waiter does: a lease of four node
// timeouts (one second by default) that the waiting Client refreshes, so
// a waiter whose process died keeps free names refused for that long at
// most, whatever the leases of the holds it waited for; a waiter that
// stops waiting takes its intents back. Stamps come from the clients' clocks: a
// client whose clock is behind by d goes up to d ahead of the others. A
// Mutex of one name leaves no intent (its waiters take turns through the
// Client's queue), but obeys those on its name.
//
// Name returns the names, sorted and joined by commas; IsLocked reports
// whether any of the names is held by anyone on a quorum; IsHeld whether
// this owner holds them all. With WithFencing each new hold's Token is
// above every earlier token of each of its names, and each name's counter
// is raised to it. One name gives a Mutex, as NewMutex does. Every call of
// a MultiMutex made with no name, a duplicate name, an invalid name (see
// NewMutex) or more than 1,024 names returns an error wrapping ErrInvalid,
// as does a call when the names do not all share one hash slot on a quorum
// member that is a Redis Cluster (a script's keys must live in one slot
// there).
func (c *Client) NewMultiMutex(names ...string) *Mutex {
	if len(names) == 1 {
		return newMutex(c, names[0])
	}
	sorted := slices.Clone(names)
	slices.Sort(sorted)
	m := &Mutex{c: c, name: strings.Join(sorted, ","), names: sorted}
	if err := c.checkNames(sorted); err != nil || c == nil {
		m.bad = err
		return m
	}
	first := newMutex(c, sorted[0])
	m.lockKeys, m.field = first.lockKeys, first.field
	for _, name := range sorted[1:] {
		base := c.base(name)
		m.more = append(m.more, keysAt(base, base+"unlock")) // every name's waiters hear its releases
	}
	return m
}

// checkNames says what is wrong with the sorted names of a MultiMutex, nil
// when nothing is.
func (c *Client) checkNames(sorted []string) error {
	switch {
	case len(sorted) == 0:
		return invalid("NewMultiMutex: no names")
	case len(sorted) > maxMultiNames:
		return invalid("NewMultiMutex: %d names; the limit is %d", len(sorted), maxMultiNames)
	}
	for i, name := range sorted {
		if err := checkName("lock", name); err != nil {
			return err
		}
		if i > 0 && sorted[i-1] == name {
			return invalid("NewMultiMutex: lock name %s given twice", lockname.Quote(name))
		}
	}
	if c == nil {
		return nil
	}
	return c.checkOneSlot(sorted)
}

// checkOneSlot refuses names whose keys a quorum member that is a Redis
// Cluster serves in different hash slots.
func (c *Client) checkOneSlot(names []string) error {
	for _, p := range c.peers {
		if _, routed := p.n.Slot(""); !routed {
			continue
		}
		slot := func(name string) int {
			s, _ := p.n.Slot(c.base(name) + "lock")
			return s
		}
		first := slot(names[0])
		for _, name := range names[1:] {
			if slot(name) != first {
				return invalid("NewMultiMutex: on node %s, a Redis Cluster, lock names %s and %s hash to different slots (%d, %d); a MultiMutex needs its names in one slot there",
					p.name, lockname.Quote(names[0]), lockname.Quote(name), first, slot(name))
			}
		}
	}
	return nil
}
