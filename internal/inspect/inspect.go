// Package inspect reads what an inspection found on each node: view.lua's
// reply (one lock, the root's Client.Inspect) and survey.lua's (every kind
// of lock of one name and its waiters' intents, Client.InspectAll), each
// parsed by internal/script, as plain values: a lock's TTL (-1: no
// expiry, 0: no key), an intent's waiter and the time its wait began, the
// owners named. Its Lock and Intent have the fields of the root's
// NodeLock and Intent, which the root converts them to; it imports
// nothing of the root package.
package inspect

import (
	"strconv"
	"strings"
	"time"

	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/internal/script"
)

// Lock is one node's view of a lock: the root's NodeLock, field for field.
type Lock struct {
	Node    string           // the node's name
	Key     string           // the lock's key on the node
	Err     error            // the node's error when it could not be read; the fields below are then zero
	Exists  bool             // the node has the lock's key
	TTL     time.Duration    // the key's remaining time to live: -1 when it has no expiry, 0 when it does not exist
	Holders map[string]int64 // owner ("<client id>:<owner id>") -> its hold count on the node (-1: not a number)
}

// Intent is a waiter's intent found on a node: the root's Intent, field
// for field.
type Intent struct {
	Key    string        // the intent's key on the node
	Waiter string        // the waiting owner; "" for the readers' intent of an RWMutex
	Since  time.Time     // when the wait began, by the waiter's clock; zero when the intent does not say
	TTL    time.Duration // the intent's remaining time to live (-1: no expiry)
}

// Name is one node's view of every kind of lock of one name (survey.lua):
// the root's NodeLocks, but for the labels of its owners.
type Name struct {
	Node string // the node's name
	Err  error  // the node's error when it could not be read, also in every Lock below; the rest is then zero

	Mutex                       Lock    // the Mutex of the name
	Intent                      *Intent // a MultiMutex waiter's intent on the name; nil: none
	Writer, Readers             Lock    // the RWMutex's write hold and its read holds
	WriterIntent, ReadersIntent *Intent // the RWMutex's intents; nil: none
	Slots                       []Lock  // the Semaphore's slots read, in slot order
	SemaphoreIntent             *Intent // a Semaphore waiter's intent; nil: none
}

// Nodes is what a read needs of the Client's nodes (the quorum's
// Members have it): their names, and a node's error as the Client makes
// it (the root's NodeError).
type Nodes interface {
	Name(i int) string
	Fail(i int, err error) error
}

// View reads view.lua's reply to the read of key from node i of nodes,
// res of its broadcast. A refusal or a reply that does not parse is the
// node's error.
func View(nodes Nodes, i int, key string, res quorum.Result) Lock {
	node := nodes.Name(i)
	if res.Err != nil {
		return Lock{Node: node, Key: key, Err: res.Err}
	}
	err := quorum.Refused(res.Replies[0])
	var lv script.LockView
	if err == nil {
		lv, err = script.ParseView(res.Replies[0])
	}
	if err != nil {
		return Lock{Node: node, Key: key, Err: nodes.Fail(i, err)}
	}
	return lockOf(node, key, lv)
}

// lockOf is the Lock of node's lock hash key, in the state lv.
func lockOf(node, key string, lv script.LockView) Lock {
	v := Lock{Node: node, Key: key, Exists: lv.PTTL != -2, Holders: lv.Holders}
	if v.Exists {
		v.TTL = time.Duration(lv.PTTL) * time.Millisecond
		if lv.PTTL < 0 {
			v.TTL = -1
		}
	}
	return v
}

// Survey reads survey.lua's reply to the read of k from node i of nodes,
// res of its broadcast. A refusal or a reply that does not parse is the
// node's error.
func Survey(nodes Nodes, i int, k script.SurveyKeys, res quorum.Result) Name {
	node := nodes.Name(i)
	err := res.Err
	var sv script.NameView
	if err == nil {
		if err = quorum.Refused(res.Replies[0]); err == nil {
			sv, err = script.ParseSurvey(res.Replies[0], len(k.Slots))
		}
		if err != nil {
			err = nodes.Fail(i, err)
		}
	}
	lock := func(key string, lv script.LockView) Lock {
		if err != nil {
			return Lock{Node: node, Key: key, Err: err}
		}
		return lockOf(node, key, lv)
	}
	v := Name{Node: node, Err: err, Mutex: lock(k.Lock, sv.Lock), Writer: lock(k.Writer, sv.Writer), Readers: lock(k.Readers, sv.Readers)}
	v.Slots = make([]Lock, len(k.Slots))
	for j, key := range k.Slots {
		var lv script.LockView
		if err == nil {
			lv = sv.Slots[j]
		}
		v.Slots[j] = lock(key, lv)
	}
	if err != nil {
		return v
	}
	v.Intent = intentOf(k.Intent, sv.Intent, true)
	v.WriterIntent = intentOf(k.WriterIntent, sv.WriterIntent, false)
	v.ReadersIntent = intentOf(k.ReadersIntent, sv.ReadersIntent, false)
	if v.ReadersIntent != nil {
		v.ReadersIntent.Waiter = "" // its value is '1': every waiting reader's
	}
	v.SemaphoreIntent = intentOf(k.SemaphoreIntent, sv.SemaphoreIntent, true)
	return v
}

// intentOf is the intent of key whose state is t, nil when there is none;
// stamped says whether its value is "<stamp>/<waiter>" (internal/intent's
// Of) rather than the waiter alone.
func intentOf(key string, t script.Text, stamped bool) *Intent {
	if t.PTTL == -2 {
		return nil
	}
	in := &Intent{Key: key, Waiter: t.Value, TTL: time.Duration(t.PTTL) * time.Millisecond}
	if t.PTTL < 0 {
		in.TTL = -1
	}
	if stamp, waiter, ok := strings.Cut(t.Value, "/"); stamped && ok {
		if ms, err := strconv.ParseInt(stamp, 10, 64); err == nil {
			in.Since, in.Waiter = time.UnixMilli(ms), waiter
		}
	}
	return in
}

// Owners are the owner fields of every hold and waiter of v.
func (v *Name) Owners() []string {
	var out []string
	for _, l := range append([]Lock{v.Mutex, v.Writer, v.Readers}, v.Slots...) {
		for h := range l.Holders {
			out = append(out, h)
		}
	}
	for _, in := range []*Intent{v.Intent, v.WriterIntent, v.SemaphoreIntent} {
		if in != nil && in.Waiter != "" {
			out = append(out, in.Waiter)
		}
	}
	return out
}
