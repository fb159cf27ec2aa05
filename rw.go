package redlock

import (
	"context"
	"errors"
	"time"

	"github.com/redlock-go/redlock/internal/lockname"
	"github.com/redlock-go/redlock/internal/script"
)

// RWMutex is one owner of a read-write lock: many owners may hold it for
// reading at once, or one for writing, on a quorum of nodes. It is
// re-entrant per owner as a Mutex is (each RLock needs an RUnlock, each
// Lock an Unlock), renewed by the watchdog (lease 0), and its waiters are
// woken by pub/sub. An owner that holds the write lock may also take read
// holds, and keeps them after its Unlock: a downgrade. The reverse, Lock
// while holding only read holds, would wait for itself and is refused.
// Methods of one RWMutex are safe for concurrent use and act as one owner.
//
// Neither side starves. Writers are not starved by a stream of readers:
// a writer that finds readers inside leaves its intent on the nodes, which
// keeps new readers out (readers that already hold may re-enter) until the
// readers inside have left and the writer got in, or the intent expired:
// it lives four node timeouts (one second by default), refreshed by the
// waiting writer's Client while it waits, so a writer whose process died
// keeps new readers out for that long at most; the writer takes it back
// when it stops waiting. Readers are not starved by a stream of
// writers (phase-fair): a reader that finds a write hold leaves the
// readers' intent on the nodes, and after that hold ends the next writer
// is kept out until the readers woken by its release got in: for a grace
// of a sixteenth of the node timeout after the first of them got in, or
// after that writer first met the intent. So, with writers looping, a
// waiting reader gets in before a third write hold begins: a reader that
// finds a write hold gets in when it ends; one that came while a writer
// waited for the readers inside may see that writer's hold begin, and the
// next one, which its retry after the release finds, and gets in when that
// one ends. A waiting writer gets in after the grace, the read holds then
// in progress, and the writers ahead of it. Both bounds assume that
// waiters hear of releases (pub/sub) and try within the grace; a reader
// that stops waiting leaves the readers' intent to expire (the grace after
// the next writer meets it, or the write hold's lease and the grace). The
// readers a Client has waiting try together when a write hold ends, not
// one after another.
//
// With WithObserver, the reader side's calls report as observe.OpRLock,
// OpTryRLock and OpRUnlock, the writer side's as a Mutex's.
//
// An RWMutex's keys (PREFIX{NAME}:rw:...) are not a Mutex's: an RWMutex and
// a Mutex of one name do not exclude each other. Fencing tokens (with
// WithFencing) are given to write holds only.
type RWMutex struct {
	name   string
	w, r   *Mutex // the writer side and the reader side: two owners
	intent string // a waiting writer's intent
	behind string // the readers' intent: readers that waited behind a write hold go before the next writer
	own    string // what a reader's own hash is named after its owner field
}

// newRWMutex makes what Client.NewRWMutex returns.
func newRWMutex(c *Client, name string) *RWMutex {
	if c == nil || checkName("lock", name) != nil {
		bad := &Mutex{c: c, name: name} // every call says why (ensureUsable)
		return &RWMutex{name: name, w: bad, r: bad}
	}
	base := c.base(name) + "rw:"
	channel := base + "unlock"
	rw := &RWMutex{name: name, intent: base + "wait", behind: base + "rwait", own: base + "r:"}
	rw.w = newMutexAt(c, name, base, channel)
	rw.r = newOwnerOf(c, name, func(field string) []lockKeys {
		return []lockKeys{
			{key: base + "readers", marks: rw.w.marks, fence: rw.w.fence, channel: channel,
				side: &rwSide{kind: repairReaders, other: rw.w.key, peer: rw.w.field}},
			{key: rw.own + field, marks: rw.w.marks, fence: rw.w.fence, // no channel: the readers' hash has it
				side: &rwSide{kind: repairReader, other: rw.w.key, peer: rw.w.field}},
		}
	})
	rw.w.side = &rwSide{kind: repairWriter, other: rw.r.key, peer: rw.r.field, own: rw.own, intent: rw.intent}
	rw.r.shared = true
	rw.w.via, rw.r.via = rw.writeCall, rw.readCall
	return rw
}

// The kinds of repair.lua's entries: what the key of each lock of a hold
// is, which says how the watchdog writes it back on a node where it is
// absent for its owner.
const (
	repairLock    = "x" // a lock of one owner alone
	repairReaders = "s" // the readers' hash, shared by every reader
	repairReader  = "r" // a reader's own hash
	repairWriter  = "w" // the writer's lock hash
)

// rwSide is what repair.lua checks of the other side of a read-write lock
// before it writes one of its keys back on a node: the other side must not
// hold the name there (see internal/script/repair.lua).
type rwSide struct {
	kind   string // repairReaders, repairReader or repairWriter
	other  string // the other side's key: the writer's lock hash for a reader, the readers' hash for the writer
	peer   string // the owner field of the same RWMutex's other side, which does not exclude this one (a downgrade)
	own    string // for the writer: what a reader's own hash is named after its owner field
	intent string // for the writer: its intent's key, while it waits for readers (kept alive by the Client's keeper, see intent.go)
}

// Name returns the lock's name; "" for a nil RWMutex.
func (rw *RWMutex) Name() string {
	if rw == nil {
		return ""
	}
	return rw.name
}

// ensureMade returns an error wrapping ErrInvalid for a nil RWMutex, or one
// that Client.NewRWMutex did not make (its zero value).
func (rw *RWMutex) ensureMade() error {
	if rw == nil || rw.w == nil || rw.r == nil {
		return invalid("a nil RWMutex, or one not made by Client.NewRWMutex")
	}
	return nil
}

// grace is how long the readers' intent lives once a reader got in or a
// writer met it, in milliseconds: the time the readers woken by the
// release of a write hold, in every Client, have to get in before the
// next writer; a sixteenth of the node timeout (15 ms by default). On
// loopback such a reader gets in within a few milliseconds of the
// release; a writer that meets the intent waits it out, so the grace is
// also what each write hold costs writers under a steady read load.
func (rw *RWMutex) grace() int64 {
	return max((rw.w.c.opts.nodeTimeout / 16).Milliseconds(), 1)
}

// readCall is rw_read.lua's call for an attempt of the reader side.
func (rw *RWMutex) readCall(count int, leaseMs, seq, _ int64, _ request) call {
	r := rw.r
	return script.RWReadCall(rw.keys(), r.more[0].key, r.field, count, leaseMs, seq, rw.w.field, rw.grace())
}

// writeCall is rw_write.lua's call for the writer side's attempt; req.tell tells its take.
func (rw *RWMutex) writeCall(count int, leaseMs, seq, fencing int64, req request) call {
	w := rw.w
	return script.RWWriteCall(rw.keys(), w.field, count, leaseMs, seq, fencing, w.c.opts.intentLease().Milliseconds(), rw.own, rw.r.field, rw.grace(), req.tell, req.subscribed)
}

// keys returns the lock's keys, as its scripts take them.
func (rw *RWMutex) keys() script.RWKeys {
	return script.RWKeys{Writer: rw.w.key, Readers: rw.r.key, Marks: rw.w.marks, Fence: rw.w.fence, Intent: rw.intent, Behind: rw.behind, Channel: rw.w.channel}
}

// RLock waits until this owner holds the lock for reading, or ctx ends;
// the hold is renewed by the watchdog until RUnlock. Errors as Mutex.Lock.
func (rw *RWMutex) RLock(ctx context.Context) error {
	if err := rw.ensureMade(); err != nil {
		return err
	}
	return rw.r.Lock(ctx)
}

// TryRLock tries to take a read hold within wait, as Mutex.TryLock: wait 0
// makes one attempt, lease 0 is the watchdog's lease with renewal.
func (rw *RWMutex) TryRLock(ctx context.Context, wait, lease time.Duration) (bool, error) {
	if err := rw.ensureMade(); err != nil {
		return false, err
	}
	return rw.r.TryLock(ctx, wait, lease)
}

// RUnlock releases one read hold, as Mutex.Unlock does: ErrNotHeld when
// this owner holds none.
func (rw *RWMutex) RUnlock(ctx context.Context) error {
	if err := rw.ensureMade(); err != nil {
		return err
	}
	return rw.r.Unlock(ctx)
}

// Lock waits until this owner holds the lock for writing, or ctx ends: no
// other owner holds it, for reading or writing. Errors as Mutex.Lock; an
// owner that holds read holds and no write hold gets an error wrapping
// ErrInvalid at once (it would wait for itself).
func (rw *RWMutex) Lock(ctx context.Context) error {
	if err := rw.ensureMade(); err != nil {
		return err
	}
	_, err := rw.lockWrite(ctx, func() (bool, error) {
		err := rw.w.Lock(ctx)
		return err == nil, err
	})
	return err
}

// TryLock tries to take the write hold within wait, as Mutex.TryLock, with
// Lock's rule for an owner that holds read holds.
func (rw *RWMutex) TryLock(ctx context.Context, wait, lease time.Duration) (bool, error) {
	if err := rw.ensureMade(); err != nil {
		return false, err
	}
	return rw.lockWrite(ctx, func() (bool, error) { return rw.w.TryLock(ctx, wait, lease) })
}

// lockWrite takes the write hold with take, and takes back the writer's
// intent when it did not get it.
func (rw *RWMutex) lockWrite(ctx context.Context, take func() (bool, error)) (bool, error) {
	if rw.r.holds() && !rw.w.holds() {
		return false, invalid("RWMutex %s: Lock while this owner holds read holds and no write hold would wait for itself: RUnlock first", lockname.Quote(rw.name))
	}
	ok, err := take()
	if !ok && rw.w.ensureUsable(ctx) == nil && !errors.Is(err, ErrInvalid) {
		rw.withdraw(ctx)
	}
	return ok, err
}

// withdraw takes the writer's intent back from every node, bounded by the
// node timeout; where it fails, the intent expires by itself.
func (rw *RWMutex) withdraw(ctx context.Context) {
	c := rw.w.c
	cl := []call{script.RWWithdrawCall(rw.intent, rw.w.field)}
	c.q.Broadcast(context.WithoutCancel(ctx), c.opts.nodeTimeout, func(int) []call { return cl })
}

// Unlock releases one write hold, as Mutex.Unlock does: ErrNotHeld when
// this owner holds none. Read holds taken while writing stay.
func (rw *RWMutex) Unlock(ctx context.Context) error {
	if err := rw.ensureMade(); err != nil {
		return err
	}
	return rw.w.Unlock(ctx)
}

// Lost returns a channel closed when this owner's current hold ends: its
// write hold while it has one, else its read hold (see Mutex.Lost); closed
// already when it holds neither, and for a nil or zero RWMutex.
func (rw *RWMutex) Lost() <-chan struct{} {
	if rw.ensureMade() != nil {
		return closedChan
	}
	if rw.w.holds() {
		return rw.w.Lost()
	}
	return rw.r.Lost()
}

// AtRisk returns a channel closed as soon as the hold Lost watches can no
// longer be counted on to last: its write hold's while it has one, else
// its read hold's (see Mutex.AtRisk); closed already when it holds
// neither, and for a nil or zero RWMutex.
func (rw *RWMutex) AtRisk() <-chan struct{} {
	if rw.ensureMade() != nil {
		return closedChan
	}
	if rw.w.holds() {
		return rw.w.AtRisk()
	}
	return rw.r.AtRisk()
}

// Until returns the end of validity of the hold Lost watches; the zero
// Time when it holds nothing.
func (rw *RWMutex) Until() time.Time {
	if rw.ensureMade() != nil {
		return time.Time{}
	}
	if rw.w.holds() {
		return rw.w.Until()
	}
	return rw.r.Until()
}

// Token returns the fencing token of the current write hold (WithFencing),
// 0 without one.
func (rw *RWMutex) Token() int64 {
	if rw.ensureMade() != nil {
		return 0
	}
	return rw.w.Token()
}
