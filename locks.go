package redlock

import (
	"strconv"

	"github.com/redlock-go/redlock/internal/script"
)

// The locks of one owner: one for a Mutex, every name of a MultiMutex. A
// hold's scripts act on all of them at once on each node (all or none),
// and each call carries, for every lock, the keys the script needs: the
// key count first, then the keys, then the arguments, then, for the
// scripts that publish, every lock's unlock channel.

// lockKeys are one lock's keys and channel on every node.
type lockKeys struct {
	key     string        // the lock hash
	marks   string        // rollback marks of the lock's owners (internal/script/mark.lua)
	fence   string        // the lock's fencing counter (WithFencing)
	intent  string        // the waiters' intent on the lock (internal/script/acquire.lua); a semaphore's slots share one
	channel string        // the unlock channel
	boxed   *script.Boxed // nil, or the keys above and the owner's field boxed once (a Mutex's: see newMutex)
	side    *rwSide       // a read-write lock's key: what repair.lua checks of its other side; nil for a lock of one owner alone (a Mutex, a MultiMutex's name, a semaphore's slot)
}

// shared reports whether several owners hold the lock's hash at once (the
// readers' hash of a read-write lock): there, a key without the owner's
// field is absent for the owner, not another owner's.
func (k *lockKeys) shared() bool { return k.side != nil && k.side.kind == repairReaders }

// repairEntry is the lock's entry of repair.lua, for an owner field with
// a hold count and sequence.
func (k *lockKeys) repairEntry(field string, count int, seq int64) script.RepairEntry {
	e := script.RepairEntry{Key: k.key, Marks: k.marks, Other: k.key, Field: field, Count: count, Seq: seq, Kind: repairLock}
	if s := k.side; s != nil {
		e.Kind, e.Other, e.Peer, e.Own = s.kind, s.other, s.peer, s.own
	}
	return e
}

// base is what the keys of the lock called name begin with:
// PREFIX{NAME}:, for PREFIX{NAME}:lock, PREFIX{NAME}:rollback,
// PREFIX{NAME}:fence and the channel PREFIX{NAME}:unlock. The braces make
// NAME the keys' hash tag, so that on a Redis Cluster member they all live
// in one slot.
func (c *Client) base(name string) string { return c.opts.prefix + "{" + name + "}:" }

// keysAt returns the keys base+"lock", base+"rollback", base+"fence",
// base+"intent" and the channel, cut from one string: one allocation, not
// five.
func keysAt(base, channel string) lockKeys {
	k, _ := keysAndTail(base, channel, nil)
	return k
}

// keysAndTail is keysAt, with tail written after the channel in the
// string the keys are cut from, and returned cut from it too.
func keysAndTail(base, channel string, tail []byte) (lockKeys, string) {
	all := base + "lock" + base + "rollback" + base + "fence" + base + "intent" + channel + string(tail) // string(tail) is not copied apart
	a := len(base) + len("lock")
	b := a + len(base) + len("rollback")
	d := b + len(base) + len("fence")
	e := d + len(base) + len("intent")
	f := e + len(channel)
	return lockKeys{key: all[:a], marks: all[a:b], fence: all[b:d], intent: all[d:e], channel: all[e:f]}, all[f:]
}

// locks is how many locks m holds at once.
func (m *Mutex) locks() int { return 1 + len(m.more) }

// lock returns m's lock i, 0 <= i < m.locks().
func (m *Mutex) lock(i int) *lockKeys {
	if i == 0 {
		return &m.lockKeys
	}
	return &m.more[i-1]
}

// keys returns m's locks as the scripts of a hold take them.
func (m *Mutex) keys() script.Locks { return script.Locks{N: m.locks(), Keys: m.keysOf} }

// keysOf returns the keys of m's lock i.
func (m *Mutex) keysOf(i int) script.Keys {
	k := m.lock(i)
	return script.Keys{Key: k.key, Marks: k.marks, Fence: k.fence, Intent: k.intent, Channel: k.channel, Boxed: k.boxed}
}

// acquireCall is acquire.lua's call for an attempt of req writing count
// holds with sequence seq; fencing is the counters' TTL (0: no fencing).
// A waiter's intent is left where the attempt is refused (intent.go);
// req.tell (one lock only) tells the waiters of its take.
func (m *Mutex) acquireCall(count int, seq, fencing int64, req request) call {
	leaseMs := req.lease.Milliseconds()
	if m.via != nil {
		return m.via(count, leaseMs, seq, fencing, req)
	}
	return script.AcquireCall(m.keys(), script.Acquisition{
		Field: m.field, Count: count, LeaseMs: leaseMs, Seq: seq, FenceTTL: fencing,
		Intent: req.intent, IntentMs: m.c.opts.intentLease().Milliseconds(), Tell: req.tell, Subscribed: req.subscribed,
	})
}

// rollbackCall is rollback.lua's call undoing the attempt seq that
// followed prev holds; marks live markMs.
func (m *Mutex) rollbackCall(seq int64, prev int, markMs int64) call {
	return script.RollbackCall(m.keys(), m.shared, m.field, seq, prev, markMs)
}

// releaseCall is release.lua's call setting the count to target with
// sequence seq; mark says whether a final release marks the sequence,
// for markMs.
func (m *Mutex) releaseCall(target int, seq int64, mark bool, markMs int64) call {
	return script.ReleaseCall(m.keys(), m.shared, m.field, target, seq, mark, markMs)
}

// forceCall is force.lua's call deleting the holds of owners (field: the
// latest sequence seen), publishing msg; marks live at least markMs.
func (m *Mutex) forceCall(msg string, markMs int64, owners map[string]int64) call {
	return script.ForceCall(m.keys(), msg, markMs, owners)
}

// holdersCall is holders.lua's call: the owners of the locks on a node.
func (m *Mutex) holdersCall() call { return script.HoldersCall(m.keys()) }

// inspectCall is inspect.lua's call for this owner.
func (m *Mutex) inspectCall() call { return script.InspectCall(m.keys(), m.field) }

// fenceCall is fence.lua's call raising every lock's counter to token, to
// live ttlMs.
func (m *Mutex) fenceCall(token, ttlMs int64) call {
	return script.FenceCall(m.keys(), token, ttlMs)
}

// channels returns the unlock channels of m's locks, the first lock's
// first; a lock with no channel (a reader's own key) has none.
func (m *Mutex) channels() []string {
	chs := make([]string, 0, m.locks())
	for i := 0; i < m.locks(); i++ {
		if ch := m.lock(i).channel; ch != "" {
			chs = append(chs, ch)
		}
	}
	return chs
}

// wakeLocal tells this Client's waiters of every lock of m that it was
// released: msg names the release, as the nodes' message will (empty for a
// ForceUnlock, or a release confirmed later).
func (m *Mutex) wakeLocal(msg string) {
	for i := 0; i < m.locks(); i++ {
		if ch := m.lock(i).channel; ch != "" {
			m.c.waiters.WakeLocal(ch, msg)
		}
	}
}

// wakeReleased is wakeLocal for this owner's release with sequence seq:
// the nodes' message names it "<field>/<seq>".
func (m *Mutex) wakeReleased(seq int64) {
	for i := 0; i < m.locks(); i++ {
		if ch := m.lock(i).channel; ch != "" {
			m.c.waiters.WakeReleased(ch, m.field, seq)
		}
	}
}

// newField returns a new owner's hash field: "<client id>:<owner id>",
// made in one allocation.
func (c *Client) newField() string {
	var buf [64]byte
	return string(c.appendField(buf[:0]))
}

// keysAndField returns keysAt(base, channel) and a new owner's hash field
// (newField), cut from one string: one allocation, not two.
func (c *Client) keysAndField(base, channel string) (lockKeys, string) {
	var buf [64]byte
	return keysAndTail(base, channel, c.appendField(buf[:0]))
}

// appendField appends a new owner's hash field to b.
func (c *Client) appendField(b []byte) []byte {
	b = append(b, c.id...)
	b = append(b, ':')
	return strconv.AppendUint(b, c.owners.Add(1), 10)
}

// newOwnerOf makes an owner, called name in errors and logs, whose holds
// cover the locks that locksOf gives for its owner field (the first
// lock's channel is where its waiters queue).
func newOwnerOf(c *Client, name string, locksOf func(field string) []lockKeys) *Mutex {
	field := c.newField()
	locks := locksOf(field)
	return &Mutex{c: c, name: name, lockKeys: locks[0], more: locks[1:], field: field}
}
