package redlock

import (
	"context"
	"errors"
	"fmt"
	"github.com/redlock-go/redlock/internal/script"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The connection layer of a node made with NewTransportNode: the internal
// transport over a caller's Transport. Calls of one lane (one lock) are
// sent in the order they were queued, one Eval at a time per lane, the
// calls queued meanwhile together in the next Eval, so that a call still
// in flight runs on the node before the next call of its lock. Before the
// replies of an Eval are handed back, the identity of the server that
// served them is confirmed (see confirm): a reply counts toward a quorum
// only once the client knows which server process gave it.

// foreignLanes is how many lanes a foreign node has: calls of different
// locks mostly go in parallel, calls of one lock in order.
const foreignLanes = 64

// foreign is the connection layer of one node over a Transport.
type foreign struct {
	p     *peer
	t     Transport
	c     *Client
	lanes [foreignLanes]foreignLane

	failure   atomic.Pointer[error] // the last Eval's transport error; nil once one succeeds
	surveying atomic.Bool           // a survey is under way
	surveyAt  atomic.Int64          // when the latest survey began, by now(), in Unix nanoseconds

	mu       sync.Mutex                // protects the fields below
	procs    map[string]*serverProcess // by Route.Addr: what INFO server said
	known    map[string]uint64         // by Route.Addr: Route.Dials before the latest INFO read
	slots    map[int]slotSeen          // by Route.Slot: which server last answered for it
	surveyed bool                      // the member's servers were identified at first contact (survey)
	moving   map[int]bool              // by Route.Slot: a move was logged, and no call of the slot went through since
}

// slotSeen is the server that last answered for a hash slot, and a key of
// the slot.
type slotSeen struct{ addr, key string }

// foreignLane is the queue of one lane.
type foreignLane struct {
	mu    sync.Mutex // protects the fields below
	queue []request
	busy  bool // a goroutine is sending the lane's calls
}

// newForeign makes the connection layer of p over t, owned by c; warm
// starts it.
func newForeign(c *Client, p *peer, t Transport) *foreign {
	return &foreign{p: p, t: t, c: c, procs: make(map[string]*serverProcess), known: make(map[string]uint64), slots: make(map[int]slotSeen)}
}

// warm reads the member's identity in the background (survey), so that
// the first calls need not. The peer must be complete: the reading uses
// it.
func (f *foreign) warm() {
	if !f.surveying.CompareAndSwap(false, true) {
		return
	}
	f.surveyAt.Store(now().UnixNano())
	c := f.c
	if !c.goAdd(1) {
		f.surveying.Store(false)
		return
	}
	go func() {
		defer c.bg.Done()
		defer f.surveying.Store(false)
		ctx, cancel := context.WithTimeout(c.ctx, c.setupTimeout())
		defer cancel()
		_ = f.survey(ctx)
	}()
}

// surveyRetry is how often a member that answers calls, but whose
// servers no survey could identify yet, is surveyed again.
const surveyRetry = time.Second

// survey identifies the member's servers at this client's first contact
// with it (warm): the one server the empty key names or, through a
// ShardedTransport, every primary, whose slots (one key per range) it
// notes as served by it. Once a survey identified one server, a server
// identified for the first time is a successor (see identify): it serves
// keys that another served when the client first reached the member, and
// may lack writes that one acknowledged, whether or not this client used
// them. A primary the survey listed but could not identify (it did not
// answer INFO in time) counts as first seen later.
func (f *foreign) survey(ctx context.Context) error {
	if f.isSurveyed() {
		return nil
	}
	keys := []string{""}
	if st, ok := f.t.(ShardedTransport); ok {
		var err error
		if keys, err = st.ShardKeys(ctx); err != nil {
			return err
		}
	}
	var errs []error
	var seen []string
	identified := false
	for _, key := range keys {
		route := f.t.Route(key)
		if route.Addr == "" {
			continue
		}
		f.mu.Lock()
		if _, ok := f.slots[route.Slot]; !ok && key != "" {
			f.slots[route.Slot] = slotSeen{addr: route.Addr, key: key}
		}
		f.mu.Unlock()
		if slices.Contains(seen, route.Addr) {
			continue
		}
		seen = append(seen, route.Addr)
		if err := f.identify(ctx, key); err != nil {
			errs = append(errs, err)
		} else {
			identified = true
		}
	}
	if !identified {
		return errors.Join(append(errs, errors.New("no server of the member identified"))...)
	}
	f.mu.Lock()
	f.surveyed = true
	f.mu.Unlock()
	return errors.Join(errs...)
}

// isSurveyed reports whether a survey succeeded.
func (f *foreign) isSurveyed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.surveyed
}

// send queues one script call on its lane.
func (f *foreign) send(cl *call, deadline time.Time, to receiver, i int) {
	l := &f.lanes[cl.Lane%foreignLanes]
	l.mu.Lock()
	l.queue = append(l.queue, request{c: cl, deadline: deadline, to: to, i: i})
	start := !l.busy
	l.busy = true
	l.mu.Unlock()
	if !start {
		return
	}
	if !f.c.goAdd(1) {
		f.drain(l, notSent(ErrClosed))
		return
	}
	go func() {
		defer f.c.bg.Done()
		f.serve(l)
	}()
}

// serve sends the lane's calls, those queued together in one Eval, until
// the queue is empty.
func (f *foreign) serve(l *foreignLane) {
	for {
		l.mu.Lock()
		batch := l.queue
		l.queue = nil
		if len(batch) == 0 {
			l.busy = false
			l.mu.Unlock()
			return
		}
		l.mu.Unlock()
		f.run(batch)
	}
}

// drain fails every call queued on l with err and ends its goroutine's
// turn.
func (f *foreign) drain(l *foreignLane, err error) {
	l.mu.Lock()
	batch := l.queue
	l.queue, l.busy = nil, false
	l.mu.Unlock()
	for _, r := range batch {
		r.to.receive(r.i, nil, err)
	}
}

// sendBatch sends calls in one Eval, off any lane.
func (f *foreign) sendBatch(calls []call, deadline time.Time, to receiver) {
	batch := make([]request, len(calls))
	for j := range calls {
		batch[j] = request{c: &calls[j], deadline: deadline, to: to, i: j}
	}
	if !f.c.goAdd(1) {
		for _, r := range batch {
			r.to.receive(r.i, nil, notSent(ErrClosed))
		}
		return
	}
	go func() {
		defer f.c.bg.Done()
		f.run(batch)
	}()
}

// run sends the requests that are not past their deadline in one Eval,
// bounded by the latest deadline, confirms the identity of the servers
// that answered, and hands every outcome back.
func (f *foreign) run(batch []request) {
	at := now()
	live := batch[:0:0]
	var deadline time.Time
	for _, r := range batch {
		if at.After(r.deadline) {
			r.to.receive(r.i, nil, notSent(fmt.Errorf("%w: queued past its deadline", context.DeadlineExceeded)))
			continue
		}
		live = append(live, r)
		if r.deadline.After(deadline) {
			deadline = r.deadline
		}
	}
	if len(live) == 0 {
		return
	}
	ctx, cancel := context.WithDeadline(f.c.ctx, deadline)
	defer cancel()
	var calls []Call
	parts := make([]int, len(live)+1) // request j's calls are calls[parts[j]:parts[j+1]]
	var splits [][][]int
	for j, r := range live {
		cl := exportCall(r.c)
		if l, ok := r.c.S.Layout(); ok {
			sub, groups := f.split(cl, l)
			calls = append(calls, sub...)
			splits = append(splits, groups)
		} else {
			calls = append(calls, cl)
			splits = append(splits, nil)
		}
		parts[j+1] = len(calls)
	}
	replies := make([]Reply, len(calls))
	f.eval(ctx, calls, replies)
	f.noteFailure(replies)
	f.confirm(ctx, calls, replies)
	f.deliver(live, parts, splits, replies)
}

// eval runs calls in one Eval per server that serves their keys, all at
// once, so that a server that does not answer (dead, paused) delays and
// fails only its own calls: a client library that runs one pipeline over
// a cluster's shards waits for the slowest shard, and may fail the other
// shards' replies with it. When the calls span several servers, each Eval
// ends an eighth of the node timeout before ctx does, so that the replies
// of the servers that answered, a split call's parts merged (see merge),
// reach the caller before it stops waiting for the node.
func (f *foreign) eval(ctx context.Context, calls []Call, replies []Reply) {
	var addrs []string
	var groups [][]int // by server: the indexes of its calls
	for j, cl := range calls {
		addr := f.t.Route(firstKey(cl)).Addr
		g := slices.Index(addrs, addr)
		if g < 0 {
			g = len(addrs)
			addrs = append(addrs, addr)
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], j)
	}
	if len(groups) <= 1 {
		f.t.Eval(ctx, calls, replies)
		return
	}
	if deadline, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline.Add(-f.c.opts.nodeTimeout/8))
		defer cancel()
	}
	var wg sync.WaitGroup
	for _, js := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sub, out := make([]Call, len(js)), make([]Reply, len(js))
			for k, j := range js {
				sub[k] = calls[j]
			}
			f.t.Eval(ctx, sub, out)
			for k, j := range js {
				replies[j] = out[k]
			}
		}()
	}
	wg.Wait()
}

// deliver hands every request of run its outcome: the reply to its call,
// or its parts' replies merged, once the slots it answered for are noted
// (succession).
func (f *foreign) deliver(live []request, parts []int, splits [][][]int, replies []Reply) {
	for j, r := range live {
		if slices.ContainsFunc(replies[parts[j]:parts[j+1]], answered) {
			f.succession(r.c)
		}
	}
	for j, r := range live {
		var reply any
		var err error
		if splits[j] == nil {
			reply, err = f.outcome(replies[parts[j]])
		} else {
			reply, err = f.merged(replies[parts[j]:parts[j+1]], splits[j])
		}
		r.to.receive(r.i, reply, err)
	}
}

// answered reports whether a server answered rep's call: a value, or its
// refusal.
func answered(rep Reply) bool { return rep.Err == nil || isReplyError(rep.Err) }

// outcome is rep as the connection layer hands it back: a value of the
// native layer's types, or the error in its terms.
func (f *foreign) outcome(rep Reply) (any, error) {
	if rep.Err == nil {
		return normalize(rep.Value), nil
	}
	var re ReplyError
	switch {
	case errors.As(rep.Err, &re):
		return nil, serverError(re)
	case f.c.ctx.Err() != nil && !errors.Is(rep.Err, errNotSent):
		return nil, fmt.Errorf("%w: %w", ErrClosed, rep.Err)
	}
	return nil, rep.Err
}

// merged is the outcome of a split call from its parts' replies (see
// merge), each part's error in the connection layer's terms.
func (f *foreign) merged(parts []Reply, groups [][]int) (any, error) {
	out := make([]Reply, len(parts))
	for g, rep := range parts {
		out[g].Value, out[g].Err = f.outcome(rep)
	}
	rep := merge(out, groups)
	return rep.Value, rep.Err
}

// split divides a call that acts on many holds (laid out as l says) into
// one call per server that serves some of their keys, in the script's
// cross-slot form, and returns them with the holds (by index in cl) of
// each.
func (f *foreign) split(cl Call, l script.PerHold) ([]Call, [][]int) {
	holds := len(cl.Keys) / l.Keys
	var addrs []string
	var groups [][]int
	for k := 0; k < holds; k++ {
		addr := f.t.Route(cl.Keys[k*l.Keys]).Addr
		g := 0
		for g < len(addrs) && addrs[g] != addr {
			g++
		}
		if g == len(addrs) {
			addrs = append(addrs, addr)
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], k)
	}
	calls := make([]Call, len(groups))
	for g, ks := range groups {
		// One declared key routes the call; the holds' keys lead ARGV.
		args := make([]any, 0, 1+len(ks)*l.Keys+l.Lead+len(ks)*l.Args)
		args = append(args, len(ks)*l.Keys)
		for _, k := range ks {
			for _, key := range cl.Keys[k*l.Keys : (k+1)*l.Keys] {
				args = append(args, key)
			}
		}
		args = append(args, cl.Args[:l.Lead]...)
		for _, k := range ks {
			args = append(args, cl.Args[l.Lead+k*l.Args:l.Lead+(k+1)*l.Args]...)
		}
		calls[g] = Call{SHA1: l.CrossSlot.Hash, Source: l.CrossSlot.Src, Keys: []string{cl.Keys[ks[0]*l.Keys]}, Args: args}
	}
	return calls, groups
}

// merge puts the replies of a split call's parts back together: one value
// per hold, in the order of the holds. A part that failed (its shard did
// not answer, refused the call, or answered something else than one value
// per hold) fails only its own holds: each has a partFailed in its place,
// and the other holds keep their values. When every part failed, the
// first part's error is the call's: the node failed as a whole.
func merge(parts []Reply, groups [][]int) Reply {
	n := 0
	for _, ks := range groups {
		n += len(ks)
	}
	out := make([]any, n)
	var first error
	failed := 0
	for g, ks := range groups {
		err := parts[g].Err
		vs, ok := parts[g].Value.([]any)
		if err == nil && (!ok || len(vs) != len(ks)) {
			err = fmt.Errorf("unexpected reply %v to a call of %d holds", parts[g].Value, len(ks))
		}
		if err != nil {
			if first == nil {
				first = err
			}
			failed++
			for _, k := range ks {
				out[k] = partFailed{err}
			}
			continue
		}
		for i, k := range ks {
			out[k] = vs[i]
		}
	}
	if failed > 0 && failed == len(groups) {
		return Reply{Err: first}
	}
	return Reply{Value: out}
}

// partFailed stands for the part of a node's answer that failed while the
// rest came: in the merged reply of a split call, the value of each hold
// whose part failed (the server that serves its slot did not answer, or
// refused the call); in a broadcast's replies, a call of the batch that
// failed (see batchTo). It is no value a script answers: a consumer counts
// it as that node's failure for the hold or the call, never as held,
// absent or another owner's.
type partFailed struct{ err error }

// partFailure returns the error of a hold's value v in a split call's
// merged reply, nil when v is an answer of the script.
func partFailure(v any) error {
	if s, ok := v.(partFailed); ok {
		return s.err
	}
	return nil
}

// noteFailure records whether the node was reachable in the Eval that
// gave replies: the first transport error, or none.
func (f *foreign) noteFailure(replies []Reply) {
	for _, r := range replies {
		var re ReplyError
		if r.Err != nil && !errors.As(r.Err, &re) {
			err := r.Err
			f.failure.Store(&err)
			f.c.nodeReached(f.p, err)
			return
		}
	}
	f.failure.Store(nil)
	f.c.nodeReached(f.p, nil)
}

// unreachable says why the last Eval failed, nil when it went through.
func (f *foreign) unreachable() error {
	if err := f.failure.Load(); err != nil {
		return *err
	}
	return nil
}

// confirm makes sure, before replies are handed back, that the identity of
// every server that answered is known as of a moment after its connection
// was opened: where the Transport opened a connection to a server since
// its identity was last read, it reads INFO server again (the reply may
// come from a process that restarted and forgot its locks). A server whose
// identity cannot be read in time stays unconfirmed, and does not count
// while restart quarantine is on (see Client.quarantined).
func (f *foreign) confirm(ctx context.Context, calls []Call, replies []Reply) {
	f.noteMoves(calls, replies)
	if f.c.opts.quarantine == 0 {
		return
	}
	if !f.isSurveyed() && now().UnixNano()-f.surveyAt.Load() > int64(surveyRetry) &&
		slices.ContainsFunc(replies, func(r Reply) bool { return r.Err == nil || isReplyError(r.Err) }) {
		f.warm() // the member answers, and no survey could identify it yet
	}
	var seen []string
	for j, cl := range calls {
		if replies[j].Err != nil && !isReplyError(replies[j].Err) {
			continue
		}
		key := firstKey(cl)
		route := f.t.Route(key)
		if slices.Contains(seen, route.Addr) {
			continue
		}
		seen = append(seen, route.Addr)
		f.mu.Lock()
		dials, ok := f.known[route.Addr]
		f.mu.Unlock()
		if ok && dials == route.Dials {
			continue
		}
		if err := f.identify(ctx, key); err != nil {
			f.process(route.Addr).doubt(fmt.Errorf("the server's identity could not be read after a new connection: %w", err))
		}
	}
}

// noteMoves logs, once per hash slot until a call of the slot goes
// through again, that calls failed because the slot is moving between
// the member's servers: the Transport followed a redirect (ErrRedirected),
// or the server answered MOVED, ASK or TRYAGAIN. Such a call is the
// member's failure, never its answer; once the Transport's slot map names
// the slot's new server the calls go there, a successor (succession).
func (f *foreign) noteMoves(calls []Call, replies []Reply) {
	for j, cl := range calls {
		err := replies[j].Err
		moved := isMove(err)
		if !moved && err != nil {
			continue
		}
		slot := f.t.Route(firstKey(cl)).Slot
		f.mu.Lock()
		logged := f.moving[slot]
		switch {
		case moved && !logged:
			if f.moving == nil {
				f.moving = make(map[int]bool)
			}
			f.moving[slot] = true
		case !moved:
			delete(f.moving, slot)
		}
		f.mu.Unlock()
		if moved && !logged {
			f.c.opts.logger.Warn("redlock: a lock's hash slot is moving between the servers of a node (a Redis Cluster): its calls count as the node's failures until the node's slot map names the new server",
				"node", f.p.name, "slot", slot, "err", err)
		}
	}
}

// isMove reports whether a call failed with err because its key's hash
// slot is moving.
func isMove(err error) bool {
	var re ReplyError
	switch {
	case errors.Is(err, ErrRedirected):
		return true
	case errors.As(err, &re):
		return strings.HasPrefix(string(re), "MOVED ") || strings.HasPrefix(string(re), "ASK ") || strings.HasPrefix(string(re), "TRYAGAIN")
	}
	return false
}

// succession records, for every key of cl, which server answered for its
// hash slot; a slot now answered by another server than before makes that
// server a successor (serverProcess.succeed), kept out of quorums for the
// quarantine period, before the answer is counted.
func (f *foreign) succession(cl *call) {
	if f.c.opts.quarantine == 0 {
		return
	}
	// The keys of one lock share a slot: one key per lock is enough.
	keys, stride := cl.Keys(), 1
	if l, ok := cl.S.Layout(); ok {
		stride = l.Keys
	} else if len(keys) > 1 {
		keys = keys[:1]
	}
	at := now()
	var successors []slotSeen // a successor's address, and a key it serves
	f.mu.Lock()
	for k := 0; k < len(keys); k += stride {
		route := f.t.Route(keys[k])
		before, seen := f.slots[route.Slot]
		now := slotSeen{addr: route.Addr, key: keys[k]}
		f.slots[route.Slot] = now
		if seen && before.addr != route.Addr && !slices.ContainsFunc(successors, func(s slotSeen) bool { return s.addr == route.Addr }) {
			successors = append(successors, now)
		}
	}
	f.mu.Unlock()
	for _, s := range successors {
		f.process(s.addr).succeed(at, tookOverSlots)
		f.c.rereadLeases()
		f.c.recheckQuarantine(f.p, s.key)
	}
}

// tookOverSlots is why a server that took slots over does not count.
const tookOverSlots = "took over slots another server process served (failover or migration)"

// joinedLater is why a server first seen after the member's servers were
// identified (survey) does not count.
const joinedLater = "not among the member's servers when this client first reached it: took over slots (failover or migration)"

// rerouted makes addr, a server identified for the first time, a
// successor when a slot seen served by another server now routes to it:
// its first answers may concern other slots, which this client has not
// seen before.
func (f *foreign) rerouted(addr string, at time.Time) {
	f.mu.Lock()
	moved := false
	for _, seen := range f.slots {
		if seen.addr != addr && f.t.Route(seen.key).Addr == addr {
			moved = true
			break
		}
	}
	f.mu.Unlock()
	if moved {
		f.process(addr).succeed(at, tookOverSlots)
		f.c.rereadLeases()
	}
}

// identify reads INFO server from the server that serves key and records
// what it says.
func (f *foreign) identify(ctx context.Context, key string) error {
	route := f.t.Route(key)
	at := now()
	info, err := f.t.Info(ctx, key)
	p := f.process(route.Addr)
	var re ReplyError
	switch {
	case err == nil:
		if err := supported(info); err != nil {
			p.doubt(err)
			return err
		}
		first := p.id() == ""
		replaced, err := p.observe(info, at)
		if err != nil {
			p.doubt(err)
			return err
		}
		switch {
		case replaced:
			p.succeed(at, runIDChanged)
			f.c.rereadLeases()
		case first && f.isSurveyed():
			p.succeed(at, joinedLater)
			f.c.rereadLeases()
		case first:
			f.rerouted(route.Addr, at)
		}
		f.c.recheckVotes()
	case errors.As(err, &re):
		if aerr := authFailure(err); aerr != err {
			return aerr
		}
		f.p.infoRefused(f.c, p, err)
	default:
		return err
	}
	f.mu.Lock()
	if d, ok := f.known[route.Addr]; !ok || route.Dials > d {
		f.known[route.Addr] = route.Dials
	}
	f.mu.Unlock()
	f.c.recheckQuarantine(f.p, key)
	return nil
}

// process returns the record of the server at addr, made on first use.
func (f *foreign) process(addr string) *serverProcess {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.procs[addr]
	if p == nil {
		p = &serverProcess{}
		f.procs[addr] = p
	}
	return p
}

// processes returns the records of every server reached, by address.
func (f *foreign) processes() map[string]*serverProcess {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.procs)
}

// processOf returns the record of the server that serves key.
func (f *foreign) processOf(key string) *serverProcess {
	return f.process(f.t.Route(key).Addr)
}

// export is c as a Call of the seam.
func exportCall(c *call) Call {
	args := c.Args[1:] // key count, keys, arguments
	n, _ := args[0].(int)
	keys := make([]string, n)
	for k := range keys {
		keys[k], _ = args[1+k].(string)
	}
	return Call{SHA1: c.S.Hash, Source: c.S.Src, Keys: keys, Args: args[1+n:]}
}

// firstKey is the first key of cl, "" when it has none.
func firstKey(cl Call) string {
	if len(cl.Keys) == 0 {
		return ""
	}
	return cl.Keys[0]
}

// normalize turns a Transport's reply into the types the replies of the
// native connection layer have: string into []byte, int into int64,
// recursively.
func normalize(v any) any {
	switch v := v.(type) {
	case string:
		return []byte(v)
	case int:
		return int64(v)
	case []any:
		for i := range v {
			v[i] = normalize(v[i])
		}
		return v
	}
	return v
}

func isReplyError(err error) bool {
	var re ReplyError
	return errors.As(err, &re)
}

// foreignListener is the pub/sub connection of a node over a Transport:
// one PubSub, opened with the first waiter, whose subscriptions follow the
// waiters' reference counts. One goroutine makes the changes, so that
// Subscribe and Unsubscribe calls of one channel never race.
type foreignListener struct {
	c    *Client
	p    *peer
	i    int // the node's index in c.peers
	loop worker
	wake chan struct{} // capacity 1: the waiters changed

	mu      sync.Mutex               // protects the fields below
	refs    map[string]int           // waiters per channel
	active  map[string]bool          // subscribed on the node
	pending map[string][]chan<- bool // told when the channel is active
}

func newForeignListener(c *Client, p *peer, i int) *foreignListener {
	return &foreignListener{
		c: c, p: p, i: i,
		wake:    make(chan struct{}, 1),
		refs:    make(map[string]int),
		active:  make(map[string]bool),
		pending: make(map[string][]chan<- bool),
	}
}

func (l *foreignListener) add(channel string, ok chan<- bool) {
	l.mu.Lock()
	l.refs[channel]++
	if l.active[channel] {
		ok <- true
	} else {
		l.pending[channel] = append(l.pending[channel], ok)
	}
	l.mu.Unlock()
	l.signal()
	l.loop.start(l.c, l.run)
}

func (l *foreignListener) remove(channel string) {
	l.mu.Lock()
	if l.refs[channel] == 0 {
		l.mu.Unlock()
		return
	}
	l.refs[channel]--
	if l.refs[channel] == 0 {
		delete(l.refs, channel)
		delete(l.pending, channel)
	}
	l.mu.Unlock()
	l.signal()
}

// ping does nothing: the client library behind the Transport checks its
// own pub/sub connection.
func (l *foreignListener) ping() {}

// stop waits for the loop, which ends at Close and closes the PubSub.
func (l *foreignListener) stop() { l.loop.wait() }

func (l *foreignListener) signal() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// run opens the PubSub and keeps its subscriptions in step with the
// waiters until Close; a change that fails is tried again after a backoff.
func (l *foreignListener) run() {
	ps := l.p.tr.Listen(func(channel string, payload []byte) {
		l.c.heard(l.i, channel, payload)
	}, l.reset)
	defer ps.Close()
	backoff := minBackoff
	var retry <-chan time.Time
	for {
		select {
		case <-l.c.ctx.Done():
			return
		case <-l.wake:
		case <-retry:
		}
		retry = nil
		if err := l.sync(ps); err != nil {
			if l.c.ctx.Err() != nil {
				return
			}
			l.c.opts.logger.Debug("redlock: pub/sub change failed", "node", l.p.name, "err", err)
			retry = time.After(backoff + jitter(backoff/2))
			backoff = min(2*backoff, maxBackoff)
			continue
		}
		backoff = minBackoff
	}
}

// sync subscribes to the channels that have waiters and are not active,
// and unsubscribes from the active ones that have none.
func (l *foreignListener) sync(ps PubSub) error {
	l.mu.Lock()
	var sub, unsub []string
	for ch := range l.refs {
		if !l.active[ch] {
			sub = append(sub, ch)
		}
	}
	for ch := range l.active {
		if l.refs[ch] == 0 {
			unsub = append(unsub, ch)
		}
	}
	l.mu.Unlock()
	ctx, cancel := context.WithTimeout(l.c.ctx, l.c.setupTimeout())
	defer cancel()
	if len(unsub) > 0 {
		if err := ps.Unsubscribe(ctx, unsub...); err != nil {
			return err
		}
		l.mu.Lock()
		for _, ch := range unsub {
			delete(l.active, ch)
		}
		l.mu.Unlock()
	}
	if len(sub) > 0 {
		if err := ps.Subscribe(ctx, sub...); err != nil {
			return err
		}
		l.mu.Lock()
		for _, ch := range sub {
			l.active[ch] = true
			for _, ok := range l.pending[ch] {
				ok <- true
			}
			delete(l.pending, ch)
		}
		l.mu.Unlock()
		l.signal() // a waiter may have left meanwhile
	}
	return nil
}

// reset tells the waiters of every subscribed channel that messages may
// have been missed while the connection was replaced.
func (l *foreignListener) reset() {
	l.mu.Lock()
	chans := make([]string, 0, len(l.refs))
	for ch := range l.refs {
		chans = append(chans, ch)
	}
	l.mu.Unlock()
	l.c.reconnected(l.i, chans)
}
