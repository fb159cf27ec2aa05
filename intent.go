package redlock

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/script"
	"github.com/redlock-go/redlock/internal/timer"
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
// An intent lives only while its waiter does: it is left with a short
// lease (intentLease, four node timeouts: one second by default), and the
// Client's keeper refreshes the intents of every wait under way, a third
// of that lease apart (refresh.lua), whatever the leases of the holds they
// wait for. A waiter whose process died refreshes nothing: its intents
// keep free names refused for at most their lease. Each attempt of a
// waiter leaves its intent again where it is refused; the owner that
// takes a lock takes its own intent on it away, and a waiter that stops
// waiting withdraws its intents (internal/script/withdraw.lua), telling
// the other waiters, so that they need not wait for them to expire.
// Stamps come from clients' clocks: a client whose clock is behind by d
// puts its waiters up to d ahead of others, which delays, but never
// stops, the others' turns. A waiting RWMutex writer's intent (rw.go) is
// kept the same way.
//
// A Mutex of one name leaves no intent: its waiters take turns through
// the Client's queue and pub/sub (internal/wait). It obeys the intents that
// MultiMutex waiters leave on its name.

// intentOf is the intent of a waiter called waiter (an owner field) whose
// wait began at start: "<stamp>/<waiter>", the stamp in Unix milliseconds.
func intentOf(start time.Time, waiter string) string {
	return strconv.FormatInt(max(start.UnixMilli(), 1), 10) + "/" + waiter
}

// waitIntents are the intents of a Client's waits under way: its keeper
// refreshes them while the waits last, and Close withdraws them, since a
// wait that Close ends cannot. One keeper loop per Client, started with
// the first wait that leaves an intent.
type waitIntents struct {
	c    *Client
	loop node.Worker
	wake chan struct{} // capacity 1: an intent was added

	mu   sync.Mutex
	live map[*liveIntent]struct{} // protected by mu
}

// liveIntent is one wait's intent: its value as the nodes hold it, and
// where it is left.
type liveIntent struct {
	value string
	at    intentKeys
}

// intentKeys are where one wait leaves its intent, and the channels of
// its locks.
type intentKeys struct{ keys, channels []string }

// add records a wait's intent, left on k, and has the keeper refresh it
// until remove.
func (w *waitIntents) add(value string, k intentKeys) *liveIntent {
	li := &liveIntent{value: value, at: k}
	w.mu.Lock()
	if w.live == nil {
		w.live = make(map[*liveIntent]struct{})
		w.wake = make(chan struct{}, 1)
	}
	w.live[li] = struct{}{}
	wake := w.wake
	w.mu.Unlock()
	select {
	case wake <- struct{}{}:
	default:
	}
	w.loop.Start(w.c.life.goRun, w.keep)
	return li
}

// remove forgets a wait's intent.
func (w *waitIntents) remove(li *liveIntent) {
	w.mu.Lock()
	delete(w.live, li)
	w.mu.Unlock()
}

// list returns the intents of the waits under way.
func (w *waitIntents) list() []*liveIntent {
	w.mu.Lock()
	defer w.mu.Unlock()
	ls := make([]*liveIntent, 0, len(w.live))
	for li := range w.live {
		ls = append(ls, li)
	}
	return ls
}

// keep is the keeper's loop: while waits are under way, it refreshes
// their intents on every node a third of the intent lease apart, in one
// round trip per node, each bounded by the node timeout; until Close.
func (w *waitIntents) keep() {
	c := w.c
	lease := c.opts.intentLease()
	every := lease / 3
	for {
		ls := w.list()
		if len(ls) == 0 {
			select {
			case <-w.wake:
				continue
			case <-c.life.ctx.Done():
				return
			}
		}
		t := timer.Start(every)
		select {
		case <-t.C:
		case <-c.life.ctx.Done():
			timer.Stop(t)
			return
		}
		timer.Stop(t)
		ls = w.list()
		if len(ls) == 0 {
			continue
		}
		cl := make([]call, len(ls))
		for i, li := range ls {
			cl[i] = script.RefreshCall(li.at.keys, li.value, lease.Milliseconds())
		}
		c.q.Broadcast(c.life.ctx, c.opts.nodeTimeout, func(int) []call { return cl })
	}
}

// withdrawAll withdraws the intents of every wait under way, for Close,
// within ctx.
func (w *waitIntents) withdrawAll(ctx context.Context) {
	var cl []call
	for _, li := range w.list() {
		cl = append(cl, withdrawCall(li.value, false, li.at))
	}
	if len(cl) > 0 {
		w.c.q.Broadcast(ctx, w.c.opts.nodeTimeout, func(int) []call { return cl })
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

// withdraw takes the intent li back from every node. A waiter that
// stopped waiting (won false) tells their channels' waiters and waits, bounded by the node timeout; one that got in leaves
// what it held to its own release's news and does not wait: its winning
// round may have left the intent on a node that refused it, which would
// keep younger waiters out there until it expired. Where it fails, the
// intents expire by themselves.
func (w *waitIntents) withdraw(ctx context.Context, li *liveIntent, won bool) {
	if w.c.life.open() != nil {
		return // Close withdraws it (withdrawAll)
	}
	defer w.remove(li)
	cl := []call{withdrawCall(li.value, won, li.at)}
	if !won {
		w.c.q.Broadcast(context.WithoutCancel(ctx), w.c.opts.nodeTimeout, func(int) []call { return cl })
		return
	}
	w.c.q.Post(cl)
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
