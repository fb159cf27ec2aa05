// Package intent keeps the intents of one Client's waits under way.
//
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
// lease (the root's intentLease, four node timeouts: one second by
// default), and the Client's Keeper refreshes the intents of every wait
// under way, a third of that lease apart (refresh.lua), whatever the
// leases of the holds they wait for. A waiter whose process died refreshes
// nothing: its intents keep free names refused for at most their lease.
// Each attempt of a waiter leaves its intent again where it is refused;
// the owner that takes a lock takes its own intent on it away, and a
// waiter that stops waiting withdraws its intents
// (internal/script/withdraw.lua), telling the other waiters, so that they
// need not wait for them to expire. Stamps come from clients' clocks: a
// client whose clock is behind by d puts its waiters up to d ahead of
// others, which delays, but never stops, the others' turns. A waiting
// RWMutex writer's intent is kept the same way.
//
// A Mutex of one name leaves no intent at first: its waiters take turns
// through the Client's queue and pub/sub (internal/wait). It obeys the
// intents that MultiMutex waiters leave on its name, and once they refused
// one of its attempts it leaves its own from then on (Pending), joining
// their order: without it, MultiMutex waiters that keep coming would keep
// an intent on its name and refuse it without a bound.
package intent

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/internal/script"
	"github.com/redlock-go/redlock/internal/timer"
)

// Of is the intent of a waiter called waiter (an owner field) whose wait
// began at start: "<stamp>/<waiter>", the stamp in Unix milliseconds.
func Of(start time.Time, waiter string) string {
	return strconv.FormatInt(max(start.UnixMilli(), 1), 10) + "/" + waiter
}

// Keys are where one wait leaves its intent, and the channels of its
// locks.
type Keys struct{ Keys, Channels []string }

// Live is one wait's intent: its value as the nodes hold it, and where it
// is left.
type Live struct {
	value string
	at    Keys
}

// Config is what a Keeper needs of its Client.
type Config struct {
	Quorum  *quorum.Quorum      // sends the refreshes and the withdrawals
	Timeout time.Duration       // the node timeout, which bounds each broadcast
	Lease   time.Duration       // an intent's lease
	Ctx     context.Context     // the context of background work, cancelled by Close
	GoRun   func(f func()) bool // runs f in a goroutine of the Client; false after Close
	Open    func() error        // nil while the Client is open
}

// Keeper holds the intents of a Client's waits under way: it refreshes
// them while the waits last, and Close withdraws them (WithdrawAll),
// since a wait that Close ends cannot. One keeper loop per Client,
// started with the first wait that leaves an intent. Its methods are safe
// for concurrent use.
type Keeper struct {
	cfg  Config
	loop node.Worker
	wake chan struct{} // capacity 1: an intent was added

	mu   sync.Mutex
	live map[*Live]struct{} // protected by mu
}

// New returns the Keeper of a Client configured as cfg.
func New(cfg Config) *Keeper {
	return &Keeper{cfg: cfg, wake: make(chan struct{}, 1), live: make(map[*Live]struct{})}
}

// Add records a wait's intent value, left on at, and has the keeper
// refresh it until Remove.
func (k *Keeper) Add(value string, at Keys) *Live {
	li := &Live{value: value, at: at}
	k.mu.Lock()
	k.live[li] = struct{}{}
	k.mu.Unlock()
	select {
	case k.wake <- struct{}{}:
	default:
	}
	k.loop.Start(k.cfg.GoRun, k.keep)
	return li
}

// Pending is one wait's intent, left with the Keeper from the wait's
// start, or (lazy: a Mutex of one name) once intents refused one of its
// attempts. A nil Pending leaves none. One waiter uses it at a time.
type Pending struct {
	k     *Keeper
	value string
	at    Keys
	lazy  bool
	li    *Live // once left
}

// Pending returns the intent value of a wait, to be left on at as Leave
// says.
func (k *Keeper) Pending(value string, at Keys, lazy bool) *Pending {
	return &Pending{k: k, value: value, at: at, lazy: lazy}
}

// Leave returns the intent the wait's next attempt leaves where it is
// refused ("" for none), adding it to the Keeper the first time: at
// once, or when lazy once refused, whether intents refused the wait's
// latest attempt.
func (p *Pending) Leave(refused bool) string {
	switch {
	case p == nil:
		return ""
	case p.li == nil && (refused || !p.lazy):
		p.li = p.k.Add(p.value, p.at)
	case p.li == nil:
		return ""
	}
	return p.value
}

// Withdraw takes p's intent back where it was left (Keeper.Withdraw),
// when it was.
func (p *Pending) Withdraw(ctx context.Context, won bool) {
	if p != nil && p.li != nil {
		p.k.Withdraw(ctx, p.li, won)
	}
}

// Remove forgets a wait's intent.
func (k *Keeper) Remove(li *Live) {
	k.mu.Lock()
	delete(k.live, li)
	k.mu.Unlock()
}

// list returns the intents of the waits under way.
func (k *Keeper) list() []*Live {
	k.mu.Lock()
	defer k.mu.Unlock()
	ls := make([]*Live, 0, len(k.live))
	for li := range k.live {
		ls = append(ls, li)
	}
	return ls
}

// keep is the keeper's loop: while waits are under way, it refreshes
// their intents on every node a third of the intent lease apart, in one
// round trip per node, each bounded by the node timeout; until Close.
func (k *Keeper) keep() {
	ctx, lease := k.cfg.Ctx, k.cfg.Lease
	every := lease / 3
	for {
		ls := k.list()
		if len(ls) == 0 {
			select {
			case <-k.wake:
				continue
			case <-ctx.Done():
				return
			}
		}
		t := timer.Start(every)
		select {
		case <-t.C:
		case <-ctx.Done():
			timer.Stop(t)
			return
		}
		timer.Stop(t)
		ls = k.list()
		if len(ls) == 0 {
			continue
		}
		cl := make([]script.Call, len(ls))
		for i, li := range ls {
			cl[i] = script.RefreshCall(li.at.Keys, li.value, lease.Milliseconds())
		}
		k.cfg.Quorum.Broadcast(ctx, k.cfg.Timeout, func(int) []script.Call { return cl })
	}
}

// WithdrawAll withdraws the intents of every wait under way, for Close,
// within ctx.
func (k *Keeper) WithdrawAll(ctx context.Context) {
	var cl []script.Call
	for _, li := range k.list() {
		cl = append(cl, withdrawCall(li.value, false, li.at))
	}
	if len(cl) > 0 {
		k.cfg.Quorum.Broadcast(ctx, k.cfg.Timeout, func(int) []script.Call { return cl })
	}
}

// withdrawCall is withdraw.lua's call taking intent back from at's keys;
// won says whether its wait got in (then it tells no channel).
func withdrawCall(intent string, won bool, at Keys) script.Call {
	channels := at.Channels
	if won {
		channels = nil
	}
	return script.WithdrawCall(at.Keys, intent, channels)
}

// Withdraw takes the intent li back from every node. A waiter that
// stopped waiting (won false) tells their channels' waiters and waits,
// bounded by the node timeout; one that got in leaves what it held to its
// own release's news and does not wait: its winning round may have left
// the intent on a node that refused it, which would keep younger waiters
// out there until it expired. Where it fails, the intents expire by
// themselves. After Close it does nothing: WithdrawAll withdraws it.
func (k *Keeper) Withdraw(ctx context.Context, li *Live, won bool) {
	if k.cfg.Open() != nil {
		return // Close withdraws it (WithdrawAll)
	}
	defer k.Remove(li)
	cl := []script.Call{withdrawCall(li.value, won, li.at)}
	if !won {
		k.cfg.Quorum.Broadcast(context.WithoutCancel(ctx), k.cfg.Timeout, func(int) []script.Call { return cl })
		return
	}
	k.cfg.Quorum.Post(cl)
}
