package redlock

import (
	"context"
	"strconv"
	"time"

	"github.com/redlock-go/redlock/internal/inspect"
	"github.com/redlock-go/redlock/internal/script"
)

// NodeLock is one node's view of a lock, as Client.Inspect reads it.
type NodeLock struct {
	Node    string           // the node's name, as in NodeError
	Key     string           // the lock's key on the node
	Err     error            // a *NodeError when the node could not be read; the fields below are then zero
	Exists  bool             // the node has the lock's key
	TTL     time.Duration    // the key's remaining time to live: -1 when it has no expiry, 0 when it does not exist
	Holders map[string]int64 // owner ("<client id>:<owner id>") -> its hold count on the node (-1: not a number)
}

// Inspect reads the lock called name on every node at once, each read
// bounded by the node timeout, and returns what each node holds, in the
// order of the nodes. It decides nothing by majority and takes no lock: it
// is for tools and health checks (`redlock inspect` shows it). It returns
// ErrClosed after Close and an error wrapping ErrInvalid for an empty name;
// a node that could not be read has its error in its NodeLock.
func (c *Client) Inspect(ctx context.Context, name string) ([]NodeLock, error) {
	m := newMutex(c, name)
	if err := m.ensureUsable(ctx); err != nil {
		return nil, err
	}
	read := []call{script.ViewCall(m.key)}
	results := c.q.Broadcast(ctx, c.opts.nodeTimeout, func(int) []call { return read })
	out := make([]NodeLock, len(c.nodes.peers))
	for i, res := range results {
		out[i] = NodeLock(inspect.View(c.nodes, i, m.key, res))
	}
	return out, nil
}

// NodeLocks is one node's view of every kind of lock of one name, as
// Client.InspectAll reads it: the Mutex, the RWMutex and the Semaphore of
// the name, which use different keys, and the intents their waiters left.
// Each NodeLock has the node's name, its key and, when the node could not
// be read, the node's error.
type NodeLocks struct {
	Node string // the node's name, as in NodeError
	Err  error  // a *NodeError when the node could not be read, also in every NodeLock below; the rest is then zero

	Mutex  NodeLock // the Mutex of the name (and the name as a MultiMutex takes it): Client.Inspect's NodeLock
	Intent *Intent  // a MultiMutex waiter's intent on the name (see NewMultiMutex); nil: none

	Writer NodeLock // the RWMutex's write hold: its owner and hold count
	// Readers are the RWMutex's read holds: every reader whose hold lives
	// on the node, with its hold count; TTL is that of the readers' shared
	// hash, as long as the longest read hold there.
	Readers       NodeLock
	WriterIntent  *Intent // a waiting writer's intent, which keeps new readers out (see RWMutex); nil: none
	ReadersIntent *Intent // the readers' intent: readers that waited behind a write hold go before the next writer; nil: none

	// Slots are the Semaphore's slots that InspectAll read, in slot
	// order: a permit is a hold of one slot, by one owner.
	Slots           []NodeLock
	SemaphoreIntent *Intent // a Semaphore waiter's intent (see Semaphore); nil: none

	// Labels are the labels (WithOwnerLabel: by default "HOST pid PID")
	// that the Clients of the owners and waiters above published on the
	// node, by owner field; an owner whose Client published none is not
	// in it.
	Labels map[string]string
}

// Intent is a waiter's intent found on a node: a waiting owner's claim to
// go first, which keeps newcomers out while it lives (see NewMultiMutex,
// RWMutex and Semaphore).
type Intent struct {
	Key string // the intent's key on the node
	// Waiter is the waiting owner ("<client id>:<owner id>"); "" for the
	// readers' intent of an RWMutex, which every waiting reader shares.
	Waiter string
	// Since is when the wait began, by the waiter's clock; the zero Time
	// for an RWMutex's intents, which do not record it.
	Since time.Time
	TTL   time.Duration // the intent's remaining time to live, unless its waiter renews it (-1: no expiry)
}

// InspectAll reads every kind of lock called name on every node at once,
// each read bounded by the node timeout: the Mutex (as Inspect does), the
// RWMutex, the first permits slots of the Semaphore (a semaphore of N
// permits uses slots 0 to N-1; 0 reads none), and the waiters' intents. It
// returns what each node holds, in the order of the nodes; like Inspect it
// decides nothing by majority and takes no lock. A permits above the most
// a semaphore of name may have (MaxPermits, fewer for a long name: see
// NewSemaphore) reads that most. It returns ErrClosed after Close and an
// error wrapping ErrInvalid for an empty or too long name or a permits
// outside 0 to MaxPermits; a node that could not be read has its error in
// its NodeLocks.
func (c *Client) InspectAll(ctx context.Context, name string, permits int) ([]NodeLocks, error) {
	bad := checkName("lock", name)
	if bad == nil && (permits < 0 || permits > MaxPermits) {
		bad = invalid("InspectAll: %d permits; from 0 to %d (MaxPermits)", permits, MaxPermits)
	}
	if c == nil {
		return nil, invalid("a nil Client")
	}
	if err := c.life.usable(ctx, bad); err != nil {
		return nil, err
	}
	sem := c.opts.prefix + "{" + name + "}:sem:"
	permits = min(permits, maxScanBytes/(len(c.opts.prefix)+len(name)+len("{}:sem:1024:lock")))
	base, rw := c.base(name), c.base(name)+"rw:"
	keys := script.SurveyKeys{
		Lock: base + "lock", Intent: base + "intent",
		Writer: rw + "lock", Readers: rw + "readers", WriterIntent: rw + "wait", ReadersIntent: rw + "rwait", Own: rw + "r:",
		SemaphoreIntent: sem + "intent", Slots: make([]string, permits),
	}
	for i := range keys.Slots {
		keys.Slots[i] = sem + strconv.Itoa(i) + ":lock"
	}
	read := []call{script.SurveyCall(keys)}
	results := c.q.Broadcast(ctx, c.opts.nodeTimeout, func(int) []call { return read })
	out := make([]NodeLocks, len(c.nodes.peers))
	var owners []string
	for i, res := range results {
		v := inspect.Survey(c.nodes, i, keys, res)
		out[i] = nodeLocksOf(v)
		owners = append(owners, v.Owners()...)
	}
	for i, labels := range c.labels.Owners(ctx, owners) {
		out[i].Labels = labels
	}
	return out, nil
}

// nodeLocksOf is what internal/inspect read of a node as its NodeLocks,
// without the labels.
func nodeLocksOf(v inspect.Name) NodeLocks {
	out := NodeLocks{
		Node: v.Node, Err: v.Err, Mutex: NodeLock(v.Mutex), Intent: (*Intent)(v.Intent),
		Writer: NodeLock(v.Writer), Readers: NodeLock(v.Readers), WriterIntent: (*Intent)(v.WriterIntent), ReadersIntent: (*Intent)(v.ReadersIntent),
		Slots: make([]NodeLock, len(v.Slots)), SemaphoreIntent: (*Intent)(v.SemaphoreIntent),
	}
	for i, l := range v.Slots {
		out.Slots[i] = NodeLock(l)
	}
	return out
}
