package node

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

// TransportLanes is how many lanes a node over a Transport has: calls of
// different locks mostly go in parallel, calls of one lock in order.
const TransportLanes = 64

// foreign is the connection layer of one node over a Transport.
type foreign struct {
	cfg   *Config
	t     Transport // cfg.Transport
	lanes [TransportLanes]foreignLane

	failure   atomic.Pointer[error] // the last Eval's transport error; nil once one succeeds
	surveying atomic.Bool           // a survey is under way
	surveyAt  atomic.Int64          // when the latest survey began, by the Client's clock, in Unix nanoseconds

	mu          sync.Mutex          // protects the fields below
	procs       map[string]*Process // by Route.Addr: what INFO server said
	known       map[string]uint64   // by Route.Addr: Route.Dials before the latest INFO read
	identifying map[string]bool     // by Route.Addr: an INFO read of identifyLater is under way
	slots       map[int]slotSeen    // by Route.Slot: which server last answered for it
	surveyed    bool                // the member's servers were identified at first contact (survey)
	moving      map[int]bool        // by Route.Slot: a move was logged, and no call of the slot went through since
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

// newForeign makes the connection layer over cfg.Transport; start warms
// it.
func newForeign(cfg *Config) *foreign {
	return &foreign{cfg: cfg, t: cfg.Transport, procs: make(map[string]*Process), known: make(map[string]uint64), identifying: make(map[string]bool), slots: make(map[int]slotSeen)}
}

// start reads the member's identity in the background (warm).
func (f *foreign) start() { f.warm() }

// warm reads the member's identity in the background (survey), so that
// the first calls need not. The Client must be ready for the hooks: the
// reading reports through them.
func (f *foreign) warm() {
	if !f.surveying.CompareAndSwap(false, true) {
		return
	}
	h := &f.cfg.Hooks
	f.surveyAt.Store(h.Now().UnixNano())
	if !h.Go(func() {
		defer f.surveying.Store(false)
		ctx, cancel := context.WithTimeout(h.Ctx, f.cfg.Setup)
		defer cancel()
		_ = f.survey(ctx)
	}) {
		f.surveying.Store(false)
	}
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
// answer INFO in time) counts as first seen later; the primaries are read
// at once, so that one that does not answer costs the others nothing.
func (f *foreign) survey(ctx context.Context) error {
	if f.isSurveyed() {
		return nil
	}
	keys := []string{""}
	if st, ok := f.t.(Sharded); ok {
		var err error
		if keys, err = st.ShardKeys(ctx); err != nil {
			return err
		}
	}
	var seen, reads []string // the servers, and a key of each
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
		if !slices.Contains(seen, route.Addr) {
			seen, reads = append(seen, route.Addr), append(reads, key)
		}
	}
	// Every server is read at once: one that does not answer must not
	// use up the others' budget (read one after another, those after it
	// went unread and became successors).
	errs := make([]error, len(reads))
	var wg sync.WaitGroup
	for j, key := range reads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[j] = f.identify(ctx, key)
		}()
	}
	wg.Wait()
	if !slices.Contains(errs, nil) {
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
func (f *foreign) send(cl *script.Call, deadline time.Time, to Receiver, i int) {
	l := &f.lanes[cl.Lane%TransportLanes]
	l.mu.Lock()
	l.queue = append(l.queue, request{c: cl, deadline: deadline, to: to, i: i})
	start := !l.busy
	l.busy = true
	l.mu.Unlock()
	if !start {
		return
	}
	if !f.cfg.Hooks.Go(func() { f.serve(l) }) {
		f.drain(l, f.cfg.Errors.Unsent(f.cfg.Errors.Closed))
	}
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
		r.to.Receive(r.i, nil, err)
	}
}

// sendBatch sends calls in one Eval, off any lane.
func (f *foreign) sendBatch(calls []script.Call, deadline time.Time, to Receiver) {
	batch := make([]request, len(calls))
	for j := range calls {
		batch[j] = request{c: &calls[j], deadline: deadline, to: to, i: j}
	}
	if !f.cfg.Hooks.Go(func() { f.run(batch) }) {
		for _, r := range batch {
			r.to.Receive(r.i, nil, f.cfg.Errors.Unsent(f.cfg.Errors.Closed))
		}
	}
}

// run sends the requests that are not past their deadline in one Eval
// per server (see eval), bounded by the latest deadline, and hands each
// request its outcome once its calls are answered, the identity of the
// servers that answered them confirmed.
func (f *foreign) run(batch []request) {
	at := f.cfg.Hooks.Now()
	live := batch[:0:0]
	var deadline time.Time
	for _, r := range batch {
		if at.After(r.deadline) {
			r.to.Receive(r.i, nil, f.cfg.Errors.Unsent(fmt.Errorf("%w: queued past its deadline", context.DeadlineExceeded)))
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
	ctx, cancel := context.WithDeadline(f.cfg.Hooks.Ctx, deadline)
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
	left := newPending(parts)
	f.eval(ctx, calls, replies, func(answered []int) {
		ready, last := left.answered(answered)
		if last {
			f.noteFailure(replies)
		}
		var cs []Call
		var rs []Reply
		for _, j := range ready {
			cs, rs = append(cs, calls[parts[j]:parts[j+1]]...), append(rs, replies[parts[j]:parts[j+1]]...)
		}
		f.confirm(ctx, cs, rs) // the servers that answered the ready requests
		f.deliver(ready, live, parts, splits, replies)
	})
}

// pending is which requests of a run still wait for replies, as the
// servers' Evals end one by one.
type pending struct {
	mu    sync.Mutex // protects the fields below
	owner []int      // the request of each call
	left  []int      // per request, its calls not answered yet
	calls int        // calls not answered yet
	empty []int      // the requests of no call (a renewal of no hold), not yet handed back
}

// newPending tracks the requests whose calls are calls[parts[j]:parts[j+1]].
func newPending(parts []int) *pending {
	p := &pending{owner: make([]int, parts[len(parts)-1]), left: make([]int, len(parts)-1), calls: parts[len(parts)-1]}
	for j := range p.left {
		p.left[j] = parts[j+1] - parts[j]
		if p.left[j] == 0 {
			p.empty = append(p.empty, j)
		}
		for k := parts[j]; k < parts[j+1]; k++ {
			p.owner[k] = j
		}
	}
	return p
}

// answered records the replies to calls, by index, and returns the
// requests they complete (the first time, with those of no call); last:
// every call is answered.
func (p *pending) answered(calls []int) (ready []int, last bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ready, p.empty = p.empty, nil
	p.calls -= len(calls)
	for _, k := range calls {
		j := p.owner[k]
		if p.left[j]--; p.left[j] == 0 {
			ready = append(ready, j)
		}
	}
	return ready, p.calls == 0
}

// eval runs calls in one Eval per server that serves their keys, all at
// once, so that a server that does not answer (dead, paused) delays and
// fails only its own calls: a client library that runs one pipeline over
// a cluster's shards waits for the slowest shard, and may fail the other
// shards' replies with it. As each Eval ends, done gets the indexes of the
// calls whose replies it wrote, so that the requests those complete are
// handed back then, not once the slowest server's Eval returned, which a
// loaded machine may run late. When the calls span several servers, each
// Eval ends an eighth of the node timeout before ctx does (see
// evalWithin), so that a split call's parts merged (see merge) reach the
// caller before it stops waiting for the node. eval returns once every
// done has.
func (f *foreign) eval(ctx context.Context, calls []Call, replies []Reply, done func(answered []int)) {
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
	switch len(groups) {
	case 0:
		done(nil) // requests of no call
		return
	case 1:
		f.t.Eval(ctx, calls, replies)
		done(groups[0])
		return
	}
	if deadline, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline.Add(-f.cfg.NodeTimeout/8))
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
			out = f.evalWithin(ctx, sub, out, &wg)
			for k, j := range js {
				replies[j] = out[k]
			}
			done(js)
		}()
	}
	wg.Wait()
}

// evalWithin runs calls on one server of several (eval) and returns
// their replies by the time ctx ends, whether or not the Transport's Eval
// has returned: one that holds a dead or paused shard's calls back past
// its context (a client library that returns late, a loaded machine that
// runs that return late) would otherwise hold back a call split over that
// shard and others, a renewal, and every call of a batch the caller
// gathers per node (Close's releases), past the caller's deadline, and
// the live shards' answers with them. The calls of an Eval given up so
// fail with ctx's error: they may still run on the server. The Eval goes
// on in the background, in wg, which the lane waits for before its next
// calls are sent.
func (f *foreign) evalWithin(ctx context.Context, calls []Call, out []Reply, wg *sync.WaitGroup) []Reply {
	returned := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		f.t.Eval(ctx, calls, out)
		close(returned)
	}()
	select {
	case <-returned:
		return out
	case <-ctx.Done():
	}
	select {
	case <-returned:
		return out
	default:
	}
	late := make([]Reply, len(calls)) // the running Eval writes out
	for k := range late {
		late[k] = Reply{Err: fmt.Errorf("%w: the server's Eval had not returned by its deadline", ctx.Err())}
	}
	return late
}

// deliver hands the requests of run that ready names (by index in live)
// their outcomes: the reply to its call, or its parts' replies merged,
// once the slots it answered for are noted (succession).
func (f *foreign) deliver(ready []int, live []request, parts []int, splits [][][]int, replies []Reply) {
	for _, j := range ready {
		if slices.ContainsFunc(replies[parts[j]:parts[j+1]], f.answered) {
			f.succession(live[j].c)
		}
	}
	for _, j := range ready {
		r := live[j]
		var reply any
		var err error
		if splits[j] == nil && parts[j+1] > parts[j] {
			reply, err = f.outcome(replies[parts[j]])
		} else {
			reply, err = f.merged(replies[parts[j]:parts[j+1]], splits[j])
		}
		r.to.Receive(r.i, reply, err)
	}
}

// answered reports whether a server answered rep's call: a value, or its
// refusal.
func (f *foreign) answered(rep Reply) bool { return rep.Err == nil || f.refusal(rep.Err) }

// refusal reports whether err is the server's error reply (the
// Transport's ReplyError).
func (f *foreign) refusal(err error) bool {
	_, ok := f.cfg.Errors.Refusal(err)
	return ok
}

// outcome is rep as the connection layer hands it back: a value of the
// native layer's types, or the error in its terms.
func (f *foreign) outcome(rep Reply) (any, error) {
	if rep.Err == nil {
		return normalize(rep.Value), nil
	}
	e := &f.cfg.Errors
	if msg, ok := e.Refusal(rep.Err); ok {
		return nil, ServerError(msg)
	}
	if f.cfg.Hooks.Ctx.Err() != nil && !errors.Is(rep.Err, e.NotSent) {
		return nil, fmt.Errorf("%w: %w", e.Closed, rep.Err)
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
// per hold) fails only its own holds: each has a PartFailed in its place,
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
				out[k] = PartFailed{err}
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

// PartFailed stands for the part of a node's answer that failed while the
// rest came: in the merged reply of a split call, the value of each hold
// whose part failed (the server that serves its slot did not answer, or
// refused the call); in a broadcast's replies, a call of the batch that
// failed (the root package's batchTo). It is no value a script answers: a
// consumer counts it as that node's failure for the hold or the call,
// never as held, absent or another owner's.
type PartFailed struct{ Err error }

// PartFailure returns the error of a hold's value v in a split call's
// merged reply, nil when v is an answer of the script.
func PartFailure(v any) error {
	if s, ok := v.(PartFailed); ok {
		return s.Err
	}
	return nil
}

// noteFailure records whether the node was reachable in the Eval that
// gave replies: the first transport error, or none.
func (f *foreign) noteFailure(replies []Reply) {
	for _, r := range replies {
		if r.Err != nil && !f.refusal(r.Err) {
			err := r.Err
			f.failure.Store(&err)
			f.cfg.Hooks.Reached(err)
			return
		}
	}
	f.failure.Store(nil)
	f.cfg.Hooks.Reached(nil)
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
// while restart quarantine is on (the root package's Client.quarantined),
// until a read in the background (identifyLater) or a later call's reads
// it.
func (f *foreign) confirm(ctx context.Context, calls []Call, replies []Reply) {
	f.noteMoves(calls, replies)
	if !f.cfg.Quarantine {
		return
	}
	if !f.isSurveyed() && f.cfg.Hooks.Now().UnixNano()-f.surveyAt.Load() > int64(surveyRetry) &&
		slices.ContainsFunc(replies, f.answered) {
		f.warm() // the member answers, and no survey could identify it yet
	}
	var seen []string
	for j, cl := range calls {
		if !f.answered(replies[j]) {
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
			f.identifyLater(route.Addr, key)
		}
	}
}

// identifyLater reads the identity of addr, the server that serves key,
// in the background with the set-up budget, after confirm could not read
// it within a call's: a call leaves INFO server only what its round trip
// left of the node timeout, which a loaded machine or a link slower than
// half the node timeout uses up on every call, and the server, answering
// every call, would never count again. One read per server at a time; the
// server stays doubted until one succeeds.
func (f *foreign) identifyLater(addr, key string) {
	f.mu.Lock()
	if f.identifying[addr] {
		f.mu.Unlock()
		return
	}
	f.identifying[addr] = true
	f.mu.Unlock()
	done := func() {
		f.mu.Lock()
		delete(f.identifying, addr)
		f.mu.Unlock()
	}
	h := &f.cfg.Hooks
	if !h.Go(func() {
		defer done()
		ctx, cancel := context.WithTimeout(h.Ctx, f.cfg.Setup)
		defer cancel()
		if err := f.identify(ctx, key); err != nil {
			f.process(addr).doubt(fmt.Errorf("the server's identity could not be read after a new connection: %w", err))
		}
	}) {
		done()
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
		moved := f.isMove(err)
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
			f.cfg.Logger.Warn("redlock: a lock's hash slot is moving between the servers of a node (a Redis Cluster): its calls count as the node's failures until the node's slot map names the new server",
				"node", f.cfg.Name, "slot", slot, "err", err)
		}
	}
}

// isMove reports whether a call failed with err because its key's hash
// slot is moving.
func (f *foreign) isMove(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, f.cfg.Errors.Redirected) {
		return true
	}
	re, ok := f.cfg.Errors.Refusal(err)
	return ok && (strings.HasPrefix(re, "MOVED ") || strings.HasPrefix(re, "ASK ") || strings.HasPrefix(re, "TRYAGAIN"))
}

// succession records, for every key of cl, which server answered for its
// hash slot; a slot now answered by another server than before makes that
// server a successor (Process.succeed), kept out of quorums for the
// quarantine period, before the answer is counted.
func (f *foreign) succession(cl *script.Call) {
	if !f.cfg.Quarantine {
		return
	}
	// The keys of one lock share a slot: one key per lock is enough.
	keys, stride := cl.Keys(), 1
	if l, ok := cl.S.Layout(); ok {
		stride = l.Keys
	} else if len(keys) > 1 {
		keys = keys[:1]
	}
	at := f.cfg.Hooks.Now()
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
		f.cfg.Hooks.Replaced()
		f.cfg.Hooks.Learned(s.key)
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
		f.cfg.Hooks.Replaced()
	}
}

// identify reads INFO server from the server that serves key and records
// what it says.
func (f *foreign) identify(ctx context.Context, key string) error {
	route := f.t.Route(key)
	h, e := &f.cfg.Hooks, &f.cfg.Errors
	at := h.Now()
	info, err := f.t.Info(ctx, key)
	p := f.process(route.Addr)
	_, refused := e.Refusal(err)
	switch {
	case err == nil:
		if err := supported(info, e.Invalid); err != nil {
			p.doubt(err)
			return err
		}
		// Whether the survey was done is read before the observation,
		// whether the process was seen before in it: a survey reading the
		// same server at once observes it first, or ends after.
		surveyed := f.isSurveyed()
		first, replaced, err := p.observe(info, at)
		if err != nil {
			p.doubt(err)
			return err
		}
		switch {
		case replaced:
			p.succeed(at, runIDChanged)
			h.Replaced()
		case first && surveyed:
			p.succeed(at, joinedLater)
			h.Replaced()
		case first:
			f.rerouted(route.Addr, at)
		}
		h.Identified()
	case refused:
		if aerr := e.Auth(err); aerr != err {
			return aerr
		}
		f.cfg.infoRefused(p, err)
	default:
		return err
	}
	f.mu.Lock()
	if d, ok := f.known[route.Addr]; !ok || route.Dials > d {
		f.known[route.Addr] = route.Dials
	}
	f.mu.Unlock()
	h.Learned(key)
	return nil
}

// process returns the record of the server at addr, made on first use.
func (f *foreign) process(addr string) *Process {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.procs[addr]
	if p == nil {
		p = &Process{addr: addr}
		f.procs[addr] = p
	}
	return p
}

// processes returns the records of every server reached, by address.
func (f *foreign) processes() map[string]*Process {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.procs)
}

// processOf returns the record of the server that serves key.
func (f *foreign) processOf(key string) *Process {
	return f.process(f.t.Route(key).Addr)
}

// exportCall is c as a Call of the seam.
func exportCall(c *script.Call) Call {
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
