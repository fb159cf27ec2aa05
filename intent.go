package redlock

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/redlock-go/redlock/internal/script"
)

// Waiters' intents keep an owner that waits for several locks at once (a
// MultiMutex), or for any slot of a semaphore, from being passed over for
// ever. Such an owner needs all of its names free on a majority at one
// moment, while the owners of its names one by one hand them to each
// other: with no order among them, it may never get in.
//
// A waiter that was refused leaves an intent on each of its locks (each
// lock's key PREFIX{NAME}:intent; a semaphore's one PREFIX{NAME}:sem:intent)
// on every node that refused it: "<stamp>/<owner>", the stamp being when
// its wait began (Unix milliseconds by its clock). acquire.lua refuses
// every owner a lock it does not hold yet where another waiter's intent
// goes first: an older stamp (ties: the smaller owner field); a new
// acquisition, which waits for nothing yet, comes after every intent. So
// the oldest waiter's names stay free for it once their holders leave,
// and it gets in after the holds that began before its intent was there,
// and the holds of older waiters: a bound that depends on no owner's luck.
// Intents only refuse, so they cannot make two holders; and since the
// waiters are in one order, the oldest is never refused by another's
// intent, and none waits for another in a cycle: no deadlock.
//
// An intent lives for the longest PTTL of what refused its waiter and
// intentMargin more, renewed by each of its attempts; the owner that
// takes a lock takes its own intent on it away, and a waiter that stops
// waiting withdraws its intents (internal/script/withdraw.lua), telling the other
// waiters, so that they need not wait for them to expire. A waiter whose
// process died leaves its intents to expire. Stamps come from clients'
// clocks: a client whose clock is behind by d puts its waiters up to d
// ahead of others, which delays, but never stops, the others' turns.
//
// A Mutex of one name leaves no intent: its waiters take turns through
// the Client's queue and pub/sub (internal/wait). It obeys the intents that
// MultiMutex waiters leave on its name.

// intentMargin is how long a waiter's intent outlives what refused it,
// in milliseconds (acquire.lua's ARGV[7]): four node timeouts, as for a
// waiting writer's (rw.go), time for its next attempt to renew it.
func (c *Client) intentMargin() int64 {
	return max((4 * c.opts.nodeTimeout).Milliseconds(), 1)
}

// intentOf is the intent of a waiter called waiter (an owner field) whose
// wait began at start: "<stamp>/<waiter>", the stamp in Unix milliseconds.
func intentOf(start time.Time, waiter string) string {
	return strconv.FormatInt(max(start.UnixMilli(), 1), 10) + "/" + waiter
}

// waitIntents are the intents of a Client's waits under way: Close
// withdraws them, since a wait that Close ends cannot.
type waitIntents struct {
	mu   sync.Mutex
	live map[string]intentKeys // by intent
}

// intentKeys are where one wait leaves its intent, and the channels of
// its locks.
type intentKeys struct{ keys, channels []string }

// add records a wait's intent, left on keys.
func (w *waitIntents) add(intent string, k intentKeys) {
	w.mu.Lock()
	if w.live == nil {
		w.live = make(map[string]intentKeys)
	}
	w.live[intent] = k
	w.mu.Unlock()
}

// remove forgets a wait's intent.
func (w *waitIntents) remove(intent string) {
	w.mu.Lock()
	delete(w.live, intent)
	w.mu.Unlock()
}

// withdrawAll withdraws the intents of every wait under way, for Close,
// within ctx.
func (c *Client) withdrawAll(ctx context.Context) {
	c.intents.mu.Lock()
	var cl []call
	for intent, k := range c.intents.live {
		cl = append(cl, withdrawCall(intent, false, k))
	}
	c.intents.mu.Unlock()
	if len(cl) > 0 {
		c.broadcast(ctx, c.opts.nodeTimeout, func(int) []call { return cl })
	}
}

// withdrawCall is withdraw.lua's call taking intent back from k's keys;
// won says whether its wait got in (then it tells no channel).
func withdrawCall(intent string, won bool, k intentKeys) call {
	channels := k.channels
	if won {
		channels = nil
	}
	return script.WithdrawCall(k.keys, intent, channels)
}

// withdraw takes the intent, left on the keys intents, back from every
// node. A waiter that stopped waiting (won false) tells their channels'
// waiters and waits, bounded by the node timeout; one that got in leaves
// what it held to its own release's news and does not wait: its winning
// round may have left the intent on a node that refused it, which would
// keep younger waiters out there until it expired. Where it fails, the
// intents expire by themselves.
func (c *Client) withdraw(ctx context.Context, intent string, won bool, k intentKeys) {
	if c.ensureOpen() != nil {
		return // Close withdraws it (withdrawAll)
	}
	defer c.intents.remove(intent)
	cl := []call{withdrawCall(intent, won, k)}
	if !won {
		c.broadcast(context.WithoutCancel(ctx), c.opts.nodeTimeout, func(int) []call { return cl })
		return
	}
	done := make(chan *batchTo, len(c.peers)) // nobody reads the replies
	deadline := now().Add(c.opts.nodeTimeout)
	for i, p := range c.peers {
		p.sendBatch(c, cl, deadline, &batchTo{i: i, done: done, left: len(cl), result: batchResult{replies: make([]interface{}, len(cl))}})
	}
}

// leavesIntent reports whether m's waiters leave intents: a MultiMutex's
// do, a Mutex's of one name do not (see above).
func (m *Mutex) leavesIntent() bool { return len(m.more) > 0 && m.via == nil }

// intentKeys are where m's waits leave their intents.
func (m *Mutex) intentKeys() intentKeys {
	n := m.locks()
	k := intentKeys{keys: make([]string, n), channels: make([]string, n)}
	for i := 0; i < n; i++ {
		k.keys[i], k.channels[i] = m.lock(i).intent, m.lock(i).channel
	}
	return k
}
