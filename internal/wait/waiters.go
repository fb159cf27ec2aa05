// Package wait is the waiting of one redlock Client for the locks it
// wants: the queue of its waiters for each lock, what the head of each
// queue heard on the lock's channel (releases and takes), the turns of the
// waiting clients, when a head tries (Pacing), and a wait's watch for
// attempts that reach no quorum because nodes fail (Stall). It imports
// nothing of the algorithm: the Client hands it plain values (its id, how
// many nodes, the node timeout, what an attempt found; for its stalls,
// its nodes' names and errors as functions) and asks it.
package wait

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlock-go/redlock/internal/timer"
)

// The waiters of one lock inside one Client queue in FIFO order: only the
// head contends with other processes; the others wait their turn.
//
// The head learns what happens to the lock from the messages on its unlock
// channel, each node's in the order that node sent them: a release
// ("<owner>/<sequence>", or "force:..."), and a take: an attempt made while
// waiting (or by a client that waited lately) that created the lock's key
// on a node says so there when other clients are subscribed
// ("+<lease ms>/<subscribers>/<owner>/<sequence>", internal/script/acquire.lua).
// The queue keeps the latest news for its head, and for each node whether
// the last thing it said was a take. A head that was about to try (see
// Pacing) and hears of a take waits for the next release instead; every
// take on a node is followed there by the release that deletes the key (or
// the key expires, which the lease of the take bounds), and that release
// wakes the head even when another node already sent the same message: a
// wake-up is never lost to a take. The takes that no release the head
// hears follows (this Client's own, and a late take of a hold whose
// release was heard: see hearTakeLocked) are no news.

// Waiters is the waiting of one Client: the queue of each lock channel,
// the links between channels, the queues kept idle for their turns, and
// the Client's latest rollbacks. It owns this state: every change is one
// of its methods, under its own mutex, which it never holds while it
// calls out of this package. The Client makes one (New), and its
// node hooks, its Mutexes' attempts and releases, and its waits call it.
type Waiters struct {
	id          string        // the Client's id: its own takes are not another client's turns
	nodes       int           // how many nodes the Client has
	nodeTimeout time.Duration // the Client's: no stagger is longer

	mu         sync.Mutex              // protects queues, links, idle and rollbacks
	queues     map[string]*waitQueue   // waiters per lock channel, FIFO, and the turns of locks waited for lately
	links      map[string][]string     // channel -> the queues that also hear it (a MultiMutex's, see Link)
	idle       []string                // channels whose queues had no waiter left, oldest first (see keepIdle)
	nqueue     atomic.Int32            // len(queues), read without mu by the first attempt of a Lock
	rollbacks  [rollbacksKept]rollback // the latest rollbacks' messages (see RollingBack)
	nrollbacks int                     // rollbacks recorded, in all
}

// New returns the waiting of a Client whose id is id, over nodes
// nodes with node timeout nodeTimeout.
func New(id string, nodes int, nodeTimeout time.Duration) *Waiters {
	return &Waiters{
		id:          id,
		nodes:       nodes,
		nodeTimeout: nodeTimeout,
		queues:      make(map[string]*waitQueue),
		links:       make(map[string][]string),
	}
}

// news is what a queue has to tell its head.
type news uint8

const (
	noNews   news = iota
	released      // the lock was released, forced, or messages may have been missed: try
	taken         // an attempt took the lock on a node: a try now would fail
)

// A Waiter is one goroutine blocked in an acquisition (a Lock, a
// TryLock, a Semaphore's Acquire) in its Client's queue for a lock.
type Waiter struct {
	wake  chan struct{} // capacity 1: the queue has news; only the head is woken
	owner any           // the owner waiting, compared by identity only (see Dequeue)
}

// Woken is the channel on which w hears that its queue has news for it,
// the head: Pacing.Woken says whether to try.
func (w *Waiter) Woken() <-chan struct{} { return w.wake }

// waitQueue holds the waiters of one lock in this Client in arrival order,
// and what its head has heard. The waiters' mu protects it.
type waitQueue struct {
	waiters []*Waiter
	news    news          // the latest, since the head last looked
	lease   time.Duration // of the latest take: how long its key lives at most, unless renewed
	last    string        // the last release message: every node sends the same one
	took    time.Duration // how long this Client's attempts on the lock take (moving average)
	subs    int           // clients subscribed to the channel at the latest take (on its node)
	busy    time.Time     // until when a Lock queues without a first attempt (see Contention)
	turns   turns         // the order in which the waiting clients took the lock
	taken   []bool        // per node: the last message it sent was a take
	free    []bool        // per node: free at the head's latest attempt, a split one (see Tried); nil: none
	blocked []bool        // per node: it kept the lock from the head's latest attempt (see Tried); nil: not told
	copies  []bool        // per node: it sent the last release while the head's attempt was under way
	takes   []bool        // per node: it sent a take while the head's attempt was under way (see Tried)
	tries   int           // the head's attempts begun (see Trying)
	lastAt  int           // tries when the last release was first heard
	trying  bool          // the head's attempt is under way
}

func (w *Waiter) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// tell gives the head news.
func (q *waitQueue) tell(n news) {
	if len(q.waiters) > 0 {
		q.news = n
		q.waiters[0].signal()
	}
}

// maxIdleQueues is how many queues without waiters a Client keeps, for
// their turns: a client that waits for a lock again keeps its place in the
// turns of the clients waiting for it.
const maxIdleQueues = 64

// keepIdle keeps the queue of channel, which has no waiter left, and
// forgets the queue that has been idle longest when there are too many.
// ws.mu must be held.
func (ws *Waiters) keepIdle(channel string) {
	ws.idle = append(ws.idle, channel)
	if len(ws.idle) <= maxIdleQueues {
		return
	}
	oldest := ws.idle[0]
	ws.idle = ws.idle[1:]
	if q := ws.queues[oldest]; q != nil && len(q.waiters) == 0 && !slices.Contains(ws.idle, oldest) {
		delete(ws.queues, oldest)
		ws.nqueue.Add(-1)
	}
}

// stagger is how long the head of channel waits, after it heard a
// release, before it tries: nothing when this Client is the only one
// waiting (or no attempt was timed yet). Otherwise the waiting clients
// take turns (see turns): the head of the client that waited longest tries
// within half an attempt time (a random part, for clients whose turns are
// not known yet: they all count themselves first), and each client ahead
// of a head puts its try off by two attempt times more, so that the first
// try's take reaches the others before they try. first reports that this
// Client's turn is first (see passedOver). A stagger never exceeds a node
// timeout: it only waits for a take that, while the clients ahead still
// wait, comes within a few attempt times.
func (ws *Waiters) stagger(channel string) (d time.Duration, first bool) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	q := ws.queues[channel]
	if q == nil || q.subs <= 1 || q.took <= 0 {
		return 0, true
	}
	ahead := q.turns.ahead(q.subs)
	return min(time.Duration(ahead)*2*q.took+timer.Jitter(q.took/2), ws.nodeTimeout), ahead == 0
}

// minTook is the least attempt time a head's stagger counts with.
const minTook = 50 * time.Microsecond

// passedOver records that another client took the lock while the head of
// channel, whose turn was first, staggered its try: its attempt time is
// halved. Attempt times are each Client's own, and only a head's attempts
// update its own; one that was once slow (a loaded machine, a slow node)
// would otherwise make the first turn wait longer than the others' turns
// allow for, and be passed over on every release without ever trying.
// Halved at each pass, it tries within a few releases, and its next
// attempts set it again.
func (ws *Waiters) passedOver(channel string) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if q := ws.queues[channel]; q != nil {
		q.took = max(q.took/2, minTook)
	}
}

// turns is the order in which the clients waiting for a lock took it, as
// one Client heard it (its own takes and the others' take messages). A
// client whose latest take came before another's has waited longer, and
// goes first: each client's turn comes after every client that took the
// lock before it did, and before every one that took it since. Two
// clients cannot each have heard the other take the lock after their own
// latest take, so no two take the same first turn.
type turns struct {
	n      uint64  // takes heard, this Client's own included
	mine   uint64  // n at this Client's latest take; 0: none since the queue began
	others []taker // the other clients heard taking the lock, at most 64
}

// taker is another client's latest take.
type taker struct {
	client uint64 // hash of its client id
	take   uint64 // hash of the take's message: every node sends the same one
	at     uint64 // turns.n when it was first heard
}

// heard records a take of another client, once however many nodes send it.
func (t *turns) heard(client, take uint64) {
	oldest := 0
	for i := range t.others {
		o := &t.others[i]
		if o.client == client {
			if o.take != take {
				t.n++
				o.take, o.at = take, t.n
			}
			return
		}
		if o.at < t.others[oldest].at {
			oldest = i
		}
	}
	t.n++
	if len(t.others) == 64 {
		t.others[oldest] = taker{client, take, t.n}
		return
	}
	t.others = append(t.others, taker{client, take, t.n})
}

// won records a take of this Client by an attempt that began when n was
// mark: the takes heard since came after it (see MarkTurn).
func (t *turns) won(mark uint64) {
	t.n++
	t.mine = min(mark+1, t.n)
}

// ahead is how many of the subs clients waiting for the lock (this one
// included) go before this Client: those whose latest take came before
// its own. A client never heard taking the lock may have just begun to
// wait and does not count; none does before this Client's first take, so
// a Client that just began to wait tries at once, as it did before turns
// were kept. Those that took the lock since are not ahead, which bounds the
// count when clients ahead stopped waiting.
//
// None is ahead once the others took the lock twice as many times since
// this Client's latest take as there are clients waiting: two rounds of
// turns went by without its own. The clients' orders can disagree (a take
// missed while a Client was not subscribed; before an attempt's own turn
// was counted from its start, see TookTurn, two clients whose attempts
// split the nodes), and two clients that each count the other ahead would
// otherwise never have the first turn while the others keep taking the
// lock.
func (t *turns) ahead(subs int) int {
	if t.mine == 0 || t.n-t.mine >= 2*uint64(max(subs, 1)) {
		return 0
	}
	older, newer := 0, 0
	for _, o := range t.others {
		if o.at < t.mine {
			older++
		} else {
			newer++
		}
	}
	return max(0, min(older, subs-1-newer))
}

// Enqueue appends a waiter of owner for channel; took is how long its
// first attempt took (0: none made). The head of a new queue is told to try
// at once.
func (ws *Waiters) Enqueue(channel string, owner any, took time.Duration) *Waiter {
	w := &Waiter{wake: make(chan struct{}, 1), owner: owner}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	q := ws.queues[channel]
	if q == nil {
		q = &waitQueue{taken: make([]bool, ws.nodes)}
		ws.queues[channel] = q
		ws.nqueue.Add(1)
	}
	if q.took == 0 {
		q.took = took
	}
	q.waiters = append(q.waiters, w)
	if len(q.waiters) == 1 {
		clear(q.taken) // messages were not heard while nobody waited
		q.tell(released)
	}
	return w
}

// busyFor is how long after a take heard with other clients waiting a
// Lock joins the queue without a first attempt.
const busyFor = time.Second

// Contention says how a Lock of channel begins. queue: without a first
// attempt, behind the waiters: this Client has waiters for the lock (the
// queue is FIFO), or other clients waited for it at a take heard less than
// busyFor ago (a first attempt would take it out of their turn whenever it
// came just after a release). lately: this Client waited for the lock
// lately (it keeps the queue, see keepIdle), so its first attempt tells
// its take, for the turns.
func (ws *Waiters) Contention(channel string) (queue, lately bool) {
	if ws.nqueue.Load() == 0 {
		return false, false // no lock waited for: the uncontended path takes no lock
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	q := ws.queues[channel]
	if q == nil {
		return false, false
	}
	return len(q.waiters) > 0 || (q.subs > 1 && time.Now().Before(q.busy)), true
}

// A Mark is where an attempt began in the turns of its lock (MarkTurn),
// for TookTurn.
type Mark uint64

// MarkTurn marks the turns of the lock of channel as an attempt that may
// take it begins. With no lock waited for, it takes no lock (as
// Contention).
func (ws *Waiters) MarkTurn(channel string) Mark {
	if ws.nqueue.Load() == 0 {
		return 0
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if q := ws.queues[channel]; q != nil {
		return Mark(q.turns.n)
	}
	return 0
}

// TookTurn records, for the turns, that an attempt of this Client, which
// began at mark, took the lock of channel, or wrote on some nodes and
// rolled back: the others heard its take all the same, and count it as a
// turn taken; so must this Client, or two clients could each see the
// other's turn as the later one. Its turn comes before the takes heard
// since mark: the attempt's writes did, and another client's take heard
// while it ran (after a split attempt's rollback, say) counted ahead of
// this Client would make two clients each count the other ahead. subs is
// how many clients, this one included, were subscribed to the channel at
// the take (0: unknown): a take is published only when others are, so
// this is how this Client learns that the others stopped waiting.
func (ws *Waiters) TookTurn(channel string, subs int, mark Mark) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	q := ws.queues[channel]
	if q == nil {
		return
	}
	q.turns.won(uint64(mark))
	if subs > 0 {
		q.subs = subs
	}
	if subs > 1 {
		q.busy = time.Now().Add(busyFor)
	}
}

// Dequeue removes w. When w was the head, the next waiter becomes the head:
// it waits for the release of the hold w won (lease), or tries at once when
// w left without the lock or the next waiter is w's owner too (its Lock is
// a re-entrant one now).
func (ws *Waiters) Dequeue(channel string, w *Waiter, won bool, lease time.Duration) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	q := ws.queues[channel]
	if q == nil {
		return
	}
	for i, x := range q.waiters {
		if x != w {
			continue
		}
		q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
		if won {
			q.lease = lease // the turn is counted by TookTurn
		}
		if i == 0 {
			// What the head's attempts found is not the next head's: an
			// attempt that won, or ended by Close or ctx, is never tried.
			q.trying, q.free, q.blocked = false, nil, nil
			clear(q.copies)
			clear(q.takes)
		}
		switch {
		case len(q.waiters) == 0:
			ws.keepIdle(channel)
		case i > 0:
		case won && q.waiters[0].owner != w.owner:
			q.tell(taken)
		default:
			q.tell(released)
		}
		return
	}
}

// look hands the head its news and clears it, with the lease of the
// latest take.
func (ws *Waiters) look(channel string) (news, time.Duration) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	q := ws.queues[channel]
	if q == nil {
		return noNews, 0
	}
	n := q.news
	q.news = noNews
	return n, q.lease
}

// Trying clears the news of channel: the head is about to make an
// attempt, which answers it. News that comes during the attempt stays.
func (ws *Waiters) Trying(channel string) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if q := ws.queues[channel]; q != nil {
		q.news = noNews
		q.free, q.blocked = nil, nil
		q.tries++
		q.trying = true
		clear(q.copies)
		clear(q.takes)
	}
}

// Tried records what the head's attempt on the lock of channel found, when
// it failed: per node, whether it was free (a split attempt only) and
// whether it kept the lock from the head (nil, as for a Semaphore: not
// told, so every node may have). Until the next attempt:
//   - A release on a node that was free is no news: only a release on a
//     node that kept the lock from the head can let it take the lock.
//     Without that, the releases of other clients' attempts, each taking
//     that free node and rolling it back, would wake the waiters of every
//     client in turn while the lock is held on a bare majority. (The head's
//     own rollbacks are left out by RollingBack.)
//   - A release's copy from a node that kept the lock from the head is
//     news even when another node's copy woke the head before: a release
//     reaches the nodes one after another, and the head that tried on the
//     first copy can find the others still held. The copies that came
//     during the attempt are counted here, once it is known which nodes
//     kept the lock.
//   - A take on a node that was free is no news either (see
//     hearTakeLocked). The takes that came during the attempt are told
//     here, those of nodes that were not free and whose last message is
//     still the take: their releases, when they come, are news.
func (ws *Waiters) Tried(channel string, free, blocked []bool) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	q := ws.queues[channel]
	if q == nil {
		return
	}
	q.trying = false
	if blocked == nil {
		// Not told (a Semaphore's attempt, over slots that share the
		// channel): any node may have kept the permits from the head.
		blocked = make([]bool, len(q.taken))
		for i := range blocked {
			blocked[i] = true
		}
	}
	q.free, q.blocked = free, blocked
	for i, came := range q.copies {
		if came && blocked != nil && blocked[i] {
			blocked[i] = false // one wake-up per node and attempt
			q.tell(released)
		}
	}
	clear(q.copies)
	for i, took := range q.takes {
		if took && q.taken[i] && (free == nil || !free[i]) {
			q.tell(taken)
		}
	}
	clear(q.takes)
}

// Timed records how long an attempt of the head took.
func (ws *Waiters) Timed(channel string, took time.Duration) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if q := ws.queues[channel]; q != nil && took > 0 {
		q.took = (q.took + took) / 2
	}
}

// WakeLocal tells the head of channel in this Client that the lock was
// released by this Client: an Unlock (msg names the release, as its
// message on the nodes will) or a ForceUnlock (msg empty). The nodes'
// messages of the same release, when they come, wake nobody again.
func (ws *Waiters) WakeLocal(channel, msg string) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.wakeAllLocked(channel, msg)
}

// WakeReleased is WakeLocal for an Unlock: owner's release with sequence
// seq, whose message, "<owner>/<seq>", it makes only when a queue of this
// Client hears channel.
func (ws *Waiters) WakeReleased(channel, owner string, seq int64) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.queues[channel] == nil && len(ws.links[channel]) == 0 {
		return // nobody here waits for it
	}
	ws.wakeAllLocked(channel, owner+"/"+strconv.FormatInt(seq, 10))
}

// wakeAllLocked tells the queue of channel, and every queue linked to it,
// of a release (msg, as for WakeLocal). ws.mu must be held.
func (ws *Waiters) wakeAllLocked(channel, msg string) {
	ws.wakeLocked(ws.queues[channel], msg)
	for _, to := range ws.links[channel] {
		ws.wakeLocked(ws.queues[to], msg)
	}
}

// wakeLocked tells q, when there is one, of a release (msg, as for
// WakeLocal). ws.mu must be held.
func (ws *Waiters) wakeLocked(q *waitQueue, msg string) {
	if q == nil || (msg != "" && msg == q.last) {
		return
	}
	if msg != "" {
		q.last = msg
	}
	clear(q.taken)
	q.tell(released)
}

// Heard takes a message from node i on channel: a take or a release, for
// the queue of channel and every queue linked to it.
func (ws *Waiters) Heard(i int, channel string, msg []byte) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if q := ws.queues[channel]; q != nil {
		ws.hearLocked(q, channel, i, msg)
	}
	for _, to := range ws.links[channel] {
		if q := ws.queues[to]; q != nil {
			ws.hearLocked(q, to, i, msg)
		}
	}
}

// hearLocked gives q, the queue of channel, node i's message. ws.mu must
// be held.
func (ws *Waiters) hearLocked(q *waitQueue, channel string, i int, msg []byte) {
	if lease, subs, client, ok := parseTake(msg); ok {
		ws.hearTakeLocked(q, i, msg, lease, subs, client)
		return
	}
	if older(msg, q.last) {
		return // a release came late, after a later one of the same owner: no news
	}
	if ws.undid(channel, msg) || q.free != nil && q.free[i] {
		q.taken[i] = false // a key on a node that did not keep the lock from the head is gone: no news
		return
	}
	if string(msg) == q.last && !q.taken[i] {
		// A release already heard from another node: news only for a
		// head that tried since and found this node held (see Tried).
		switch {
		case q.tries == q.lastAt:
			return // the head has not tried since: the news it has covers it
		case q.trying:
			if q.copies == nil {
				q.copies = make([]bool, len(q.taken))
			}
			q.copies[i] = true
			return
		case q.blocked == nil || !q.blocked[i]:
			return // it did not keep the lock from the head's latest attempt, or woke the head already
		}
		q.blocked[i] = false
		q.tell(released)
		return
	}
	if string(msg) != q.last {
		q.last, q.lastAt = string(msg), q.tries
	}
	q.taken[i] = false
	q.tell(released)
}

// hearTakeLocked gives q node i's take msg, of lease, with subs clients
// subscribed, by client. Three kinds of take are no news, for no release
// that the head hears follows them, and a head sent back to waiting by one
// would wait out its lease though a release came just before:
//   - This Client's own. Mostly the write of an attempt that failed (a
//     waiter's, or a first attempt before it queued) on a node a release
//     had freed: the attempt rolls it back, and that rollback's release is
//     no news either (see RollingBack). Else another owner of this Client
//     took the lock: the head tries once in vain, and that owner's
//     release wakes it.
//   - A take of a hold whose release was heard already: a node's messages
//     came late (its pub/sub connection lagged, or they were sent before
//     this Client last unsubscribed, and the release that followed them
//     there was never delivered).
//   - A take on a node that was free at the head's latest attempt, a split
//     one (see Tried): the release that follows it there is no news, for
//     only a release on a node that kept the lock from the head can let it
//     in. Another client's attempt that took that node and rolled back
//     sent every head that split so back to waiting for the take's lease
//     (30 s by default) and dropped the rollback; with a MultiMutex
//     waiter's intent refusing the others on a majority, the oldest waiter
//     was among those heads, and nobody took the free lock for seconds.
//     A take that comes while the head's attempt is under way waits for
//     Tried, which knows the free nodes: told at once, it also replaced
//     the news of a release that came during the attempt.
//
// ws.mu must be held.
func (ws *Waiters) hearTakeLocked(q *waitQueue, i int, msg []byte, lease time.Duration, subs int, client []byte) {
	q.taken[i] = true
	q.subs = subs
	if subs > 1 {
		q.busy = time.Now().Add(busyFor)
	}
	if string(client) == ws.id {
		return
	}
	q.turns.heard(hash(client), hash(msg))
	switch {
	case older(takeName(msg), q.last), q.free != nil && q.free[i]:
	case q.trying:
		if q.takes == nil {
			q.takes = make([]bool, len(q.taken))
		}
		q.takes[i], q.lease = true, lease
	default:
		q.lease = lease
		q.tell(taken)
	}
}

// rollback is the release message a rollback of this Client publishes
// on channel, the unlock channel of the Mutex that made the attempt.
type rollback struct{ channel, msg string }

// rollbacksKept is how many of its latest rollbacks a Client remembers:
// a rollback's message comes back within a round trip or two.
const rollbacksKept = 16

// RollingBack records msg, the release message that a rollback of this
// Client's attempt on the lock of channel is about to publish (where its
// write was the lock's key). When it comes back, it is the undoing of the
// waiter's own failed attempt, not news of the lock: heard as a release,
// it would have the waiter try again at once, fail on the same majority,
// roll back again and spin for as long as the lock is held on a bare
// majority with another node free (a write lost, a node restarted
// empty). It is recorded also before the waiter queues: a first attempt's
// rollback can come back once it has subscribed. Other clients, and this
// Client's queues of other locks linked to the channel, hear it as a
// release, which it is for them: the key they heard taken is gone.
func (ws *Waiters) RollingBack(channel, msg string) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.rollbacks[ws.nrollbacks%rollbacksKept] = rollback{channel, msg}
	ws.nrollbacks++
}

// undid reports whether msg, heard by the queue of channel, is the
// message of one of this Client's latest rollbacks on that lock (see
// RollingBack). ws.mu must be held.
func (ws *Waiters) undid(channel string, msg []byte) bool {
	for _, r := range ws.rollbacks {
		if r.msg == string(msg) && r.channel == channel {
			return true
		}
	}
	return false
}

// Reconnected tells the head of every lock with waiters that node i's
// pub/sub connection failed: its messages may have been missed.
func (ws *Waiters) Reconnected(i int, channels []string) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for _, ch := range channels {
		for _, to := range append([]string{ch}, ws.links[ch]...) {
			if q := ws.queues[to]; q != nil {
				q.taken[i] = false
				q.tell(released)
			}
		}
	}
}

// Link makes the queue of channel to hear the messages of the channel
// from too, until Unlink: the waiters of a MultiMutex queue on its first
// lock's channel and wake for a release of any of its locks. Links are
// counted: one per waiter.
func (ws *Waiters) Link(from, to string) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.links[from] = append(ws.links[from], to)
}

// Unlink removes one link made by Link.
func (ws *Waiters) Unlink(from, to string) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ls := ws.links[from]
	if i := slices.Index(ls, to); i >= 0 {
		ls = slices.Delete(ls, i, i+1)
	}
	if len(ls) == 0 {
		delete(ws.links, from)
		return
	}
	ws.links[from] = ls
}

// older reports whether the write named x, "<owner field>/<sequence>",
// was made before the one named last, of the same owner: an owner's
// sequence numbers grow with each of its attempts and releases. A take
// names its write after its lease and subscribers ("+<lease>/<subscribers>/"
// first: see takeName).
func older(x []byte, last string) bool {
	r := strings.LastIndexByte(last, '/')
	if r <= 0 || len(x) < r+2 || string(x[:r]) != last[:r] || x[r] != '/' {
		return false
	}
	a, err1 := strconv.ParseInt(string(x[r+1:]), 10, 64)
	b, err2 := strconv.ParseInt(last[r+1:], 10, 64)
	return err1 == nil && err2 == nil && a < b
}

// takeName is the name of the write a take msg tells of, "<owner
// field>/<sequence>", as its release names it.
func takeName(msg []byte) []byte {
	for k := 0; k < 2; k++ {
		i := bytes.IndexByte(msg, '/')
		if i < 0 {
			return nil
		}
		msg = msg[i+1:]
	}
	return msg
}

// hash is FNV-1a of b.
func hash(b []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, x := range b {
		h = (h ^ uint64(x)) * 1099511628211
	}
	return h
}

// parseTake reads a take, "+<lease ms>/<subscribers>/<client id>:...",
// without allocating.
func parseTake(msg []byte) (lease time.Duration, subs int, client []byte, ok bool) {
	if len(msg) == 0 || msg[0] != '+' {
		return 0, 0, nil, false
	}
	var n [2]int
	i := 1
	for k := range n {
		start := i
		for ; i < len(msg) && msg[i] >= '0' && msg[i] <= '9' && i-start < 15; i++ {
			n[k] = n[k]*10 + int(msg[i]-'0')
		}
		if i == start || i == len(msg) || msg[i] != '/' {
			return 0, 0, nil, false
		}
		i++
	}
	client = msg[i:]
	for j, b := range client {
		if b == ':' {
			client = client[:j]
			break
		}
	}
	return time.Duration(n[0]) * time.Millisecond, n[1], client, true
}
