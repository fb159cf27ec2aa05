package redlock

import (
	"slices"
	"strings"

	"github.com/redlock-go/redlock/internal/lockname"
)

// maxMultiNames is the most names a MultiMutex takes: every call sends the
// keys of every name, and each node's script runs over all of them.
const maxMultiNames = 1024

// newMultiMutex makes what Client.NewMultiMutex returns.
func newMultiMutex(c *Client, names ...string) *Mutex {
	if len(names) == 1 {
		return newMutex(c, names[0])
	}
	sorted := slices.Clone(names)
	slices.Sort(sorted)
	m := &Mutex{c: c, name: strings.Join(sorted, ","), names: sorted}
	if err := checkNames(sorted); err != nil || c == nil {
		m.bad = err
		return m
	}
	if err := c.nodes.oneSlot(sorted, func(name string) string { return c.base(name) + "lock" }); err != nil {
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
func checkNames(sorted []string) error {
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
	return nil
}

// oneSlot refuses names whose keys (key(name)) a quorum member that is a Redis
// Cluster serves in different hash slots.
func (s *nodeSet) oneSlot(names []string, key func(name string) string) error {
	for _, p := range s.peers {
		if _, routed := p.n.Slot(""); !routed {
			continue
		}
		slot := func(name string) int {
			s, _ := p.n.Slot(key(name))
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
