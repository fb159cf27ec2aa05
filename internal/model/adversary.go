package model

// ActionKind is one kind of step: something an owner's code does, or
// something the adversary does to calls, nodes, processes and time.
type ActionKind uint8

// The steps.
const (
	ALock      ActionKind = iota + 1 // Lock: a watchdog hold (or re-entry)
	ALockLease                       // LockLease: a fixed-lease hold
	AUnlock
	AExpire  // the loss timer fires
	ARenew   // the watchdog sends the hold's renewal
	AAbandon // a round stops waiting: node timeout, ctx, patience
	ADeliver // a call lands; its owner reads the reply
	ABreak   // a call's connection breaks: its owner reads an error, the call may still land
	ADrop    // a call that broke never lands
	ARestart // a node restarts empty
	APause   // an owner's process stops
	AResume
	AAdvance  // time passes, to the next deadline
	ATick     // time passes by Config.Tick
	AWithdraw // a writer that stopped waiting takes its intent back
	ARefresh  // the keeper refreshes a waiter's intents (vanish.go)
	ACrash    // a waiter's process dies
	AForce    // a ForceUnlock by a client outside the owners reads the holders (Msg: the name)
	AForceNode
	AEvict // a lock's key vanishes from a node (Msg: the name)
)

// Action is one step: its kind and what it acts on.
type Action struct {
	Kind  ActionKind
	Owner int8
	Node  int8
	Msg   int8 // ADeliver, ABreak, ADrop: the call's index; AAbandon: 0 the operation, 1 the watchdog; AForce, AEvict: the name
}

// Actions returns every step possible in s.
func (s *State) Actions(c *Config) []Action {
	var as []Action
	for o := 0; o < c.Owners; o++ {
		as = s.ownerActions(c, o, as)
	}
	for i := 0; i < s.NMsgs; i++ {
		m := &s.Msgs[i]
		if s.ready(i) {
			as = append(as, Action{Kind: ADeliver, Msg: int8(i)})
		}
		if ow := &s.Owners[m.Owner]; !m.Astray && !m.Landed && !m.Failed && !ow.Paused && !ow.Crashed && s.Used.Breaks < c.Faults.Breaks {
			as = append(as, Action{Kind: ABreak, Msg: int8(i)})
		}
		if m.Astray {
			as = append(as, Action{Kind: ADrop, Msg: int8(i)})
		}
	}
	as = s.vanishActions(c, as)
	if s.Used.Restarts < c.Faults.Restarts && s.T < s.deadline() && (!c.Served || s.spaced(c)) {
		for n := 0; n < c.Nodes; n++ {
			as = append(as, Action{Kind: ARestart, Node: int8(n)})
		}
	}
	if c.Served && s.timerDue(c) {
		return as // the watchdog is on time: no time passes while a renewal is due
	}
	if _, ok := s.nextTime(c); ok {
		as = append(as, Action{Kind: AAdvance})
	}
	if c.Tick > 0 && s.T+c.Tick <= s.deadline() {
		as = append(as, Action{Kind: ATick})
	}
	return as
}

// ownerActions appends what owner o may do now.
func (s *State) ownerActions(c *Config, o int, as []Action) []Action {
	ow := &s.Owners[o]
	switch {
	case ow.Crashed:
		return as
	case ow.Paused:
		return append(as, Action{Kind: AResume, Owner: int8(o)})
	}
	if s.Used.Pauses < c.Faults.Pauses {
		as = append(as, Action{Kind: APause, Owner: int8(o)})
	}
	clock := s.clockOf(c, o)
	if s.Used.Crashes < c.Faults.Crashes && s.waits(c, o) {
		as = append(as, Action{Kind: ACrash, Owner: int8(o)})
	}
	if ow.Keep != 0 && clock >= ow.Keep {
		as = append(as, Action{Kind: ARefresh, Owner: int8(o)})
	}
	h := &ow.H
	if ow.Op.Kind == Idle {
		as = s.lockActions(c, o, as)
		if c.rw() && s.mayWithdraw(c, o) || ow.Wait != 0 {
			as = append(as, Action{Kind: AWithdraw, Owner: int8(o)})
		}
		if h.State != None && h.State != Over && !c.NoUnlock {
			as = append(as, Action{Kind: AUnlock, Owner: int8(o)})
		}
	} else if _, _, _, pending := ow.Op.tally(c.Nodes); pending > 0 && !c.NoTimeouts {
		as = append(as, Action{Kind: AAbandon, Owner: int8(o)})
	}
	if h.State == Holding && clock >= h.Until {
		as = append(as, Action{Kind: AExpire, Owner: int8(o)})
	}
	if h.Watch && ow.WD.Kind == Idle && clock >= h.Due {
		as = append(as, Action{Kind: ARenew, Owner: int8(o)})
	}
	if _, _, _, pending := ow.WD.tally(c.Nodes); ow.WD.Kind != Idle && pending > 0 && !c.NoTimeouts {
		as = append(as, Action{Kind: AAbandon, Owner: int8(o), Msg: 1})
	}
	return as
}

// lockActions appends owner o's Lock and LockLease: a new hold, or a
// re-entry of the same kind below the depth.
func (s *State) lockActions(c *Config, o int, as []Action) []Action {
	ow := &s.Owners[o]
	h := &ow.H
	if s.lockRefused(c, o) || h.State == Owed && h.Unacked {
		return as // an unacknowledged loss: the acquisition fails at once (ErrLost)
	}
	if ow.Wait != 0 { // a waiter's next attempt, of the same kind
		if ow.WaitRenew {
			return append(as, Action{Kind: ALock, Owner: int8(o)})
		}
		return append(as, Action{Kind: ALockLease, Owner: int8(o)})
	}
	if h.State == Holding {
		if h.Count >= int64(c.Depth) {
			return as
		}
		if h.Renew {
			return append(as, Action{Kind: ALock, Owner: int8(o)})
		}
		return append(as, Action{Kind: ALockLease, Owner: int8(o)})
	}
	if c.Watchdog {
		as = append(as, Action{Kind: ALock, Owner: int8(o)})
	}
	if c.Fixed {
		as = append(as, Action{Kind: ALockLease, Owner: int8(o)})
	}
	return as
}

// Apply returns the state after step a, and false when the step cannot be
// taken (a bound of the model: too many calls in flight).
func (s State) Apply(c *Config, a Action) (State, bool) {
	ok := true
	s.overflow = false
	o := int(a.Owner)
	switch a.Kind {
	case ALock, ALockLease:
		ok = s.lock(c, o, a.Kind == ALock)
	case AUnlock:
		ok = s.unlock(c, o)
	case AExpire:
		s.expire(c, o)
	case ARenew:
		ok = s.renew(c, o)
	case AAbandon:
		s.abandon(c, o, a.Msg == 1)
	case AWithdraw:
		ok = s.withdraw(c, o)
	case ARefresh:
		ok = s.refresh(c, o)
	case ACrash:
		s.crash(o)
	case AForce:
		s.force(c, int(a.Msg))
	case AForceNode:
		s.forceNode(c, int(a.Node))
	case AEvict:
		s.evict(c, int(a.Node), int(a.Msg))
	default:
		ok = s.applyAdversary(c, a)
	}
	for o := 0; o < c.Owners; o++ {
		s.Owners[o].gcAcq()
	}
	return s, ok && !s.overflow
}

// applyAdversary applies a step of the adversary's.
func (s *State) applyAdversary(c *Config, a Action) bool {
	switch a.Kind {
	case ADeliver:
		s.deliver(c, int(a.Msg))
	case ABreak:
		s.Used.Breaks++
		s.breakConn(c, int(a.Msg))
	case ADrop:
		s.drop(int(a.Msg))
	case ARestart:
		s.restart(c, int(a.Node))
	case APause:
		s.Used.Pauses++
		s.Owners[a.Owner].Paused = true
	case AResume:
		s.resume(c, int(a.Owner))
	case AAdvance:
		t, _ := s.nextTime(c)
		s.advance(t)
	case ATick:
		s.advance(s.T + c.Tick)
	}
	return true
}

// deliver lands call i; its owner reads the reply now, or at resume.
func (s *State) deliver(c *Config, i int) {
	rep := s.land(c, i)
	m := &s.Msgs[i]
	switch {
	case m.Astray, s.Owners[m.Owner].Crashed:
		s.remove(i)
	case s.Owners[m.Owner].Paused:
		m.Landed, m.Reply = true, rep
	default:
		m.Reply = rep
		cp := *m
		s.remove(i)
		s.receive(c, cp, false)
	}
}

// drop loses astray call i, and the calls after it on its connection: a
// broken connection delivers a prefix of what was written on it.
func (s *State) drop(i int) {
	s.Ghost.Dropped = true
	m := s.Msgs[i]
	for j := s.NMsgs - 1; j >= i; j-- {
		if p := &s.Msgs[j]; j == i || s.sameConn(p, &m) {
			s.remove(j)
		}
	}
}

// breakConn breaks the connection that carries call i: it and every other
// call in flight on it fail (their owner reads the errors, in order), and
// may still land later, out of order, or never. On a lane that is every
// call of the owner to the node on that lane: they were written on that
// connection (with Config.QueuedSurvives, the calls after i were still
// queued, and go on the next connection instead). A batch has a
// connection of its own.
func (s *State) breakConn(c *Config, i int) {
	b := s.Msgs[i]
	var failed []Msg
	for j := 0; j < s.NMsgs; j++ {
		m := &s.Msgs[j]
		same := m.Owner == b.Owner && m.Node == b.Node && m.Lane == b.Lane && b.Lane != Batch
		if j == i || same && !m.Astray && !m.Landed && !m.Failed && (j < i || !c.QueuedSurvives) {
			m.Astray, m.Conn = true, int8(s.Used.Breaks)
			failed = append(failed, *m)
		}
	}
	for _, m := range failed {
		s.receive(c, m, true)
	}
}

// abandon is a round that stops waiting (collect's timeout, ctx, or its
// patience; broadcast's timeout): the nodes not heard from count as
// failed. A repair's calls then count as astray (renewal.repair).
func (s *State) abandon(c *Config, o int, watchdog bool) {
	ow := &s.Owners[o]
	r := &ow.Op
	if watchdog {
		r = &ow.WD
	}
	for n := 0; n < c.Nodes; n++ {
		if r.Vote[n] == Pending {
			r.Vote[n] = Failed
		}
	}
	if r.Kind == Repairing {
		for i := 0; i < s.NMsgs; i++ {
			if m := &s.Msgs[i]; int(m.Owner) == o && m.Gen == r.Gen && !m.Astray && !m.Landed && !m.Failed {
				m.Astray = true
				ow.Acq[m.Acq].Inflight--
				ow.Acq[m.Acq].Astray = true
			}
		}
	}
	s.progress(c, o)
}

// restart empties node n: its keys are gone, the calls on their way to it
// are lost, and their owners read an error (at resume, when paused). A
// restart takes a millisecond at least: the node's clock floor for the
// fencing counter is past every counter it had.
func (s *State) restart(c *Config, n int) {
	s.Used.Restarts++
	s.advance(s.T + 1)
	nd := &s.Nodes[n]
	*nd = NodeState{Store: Store{NoMarks: !c.Mech.Marks}, Restarted: s.T}
	nd.RW.W.NoMarks = !c.Mech.Marks
	for j := range nd.Locks {
		nd.Locks[j].NoMarks = !c.Mech.Marks
	}
	for i := 0; i < s.NMsgs; {
		m := &s.Msgs[i]
		if int(m.Node) != n || m.Landed || m.Failed {
			i++
			continue
		}
		s.Ghost.Dropped = true
		if m.Astray || !s.Owners[m.Owner].Paused {
			cp, unread := *m, m.Astray || s.Owners[m.Owner].Crashed
			s.remove(i)
			if !unread {
				s.receive(c, cp, true)
			}
			continue
		}
		m.Failed = true
		i++
	}
}

// resume lets owner o's process run again: it reads the replies and
// errors that came while it was stopped, in order.
func (s *State) resume(c *Config, o int) {
	s.Owners[o].Paused = false
	for i := 0; i < s.NMsgs; {
		m := s.Msgs[i]
		if int(m.Owner) != o || !m.Landed && !m.Failed {
			i++
			continue
		}
		s.remove(i)
		s.receive(c, m, m.Failed)
	}
}

// deadline is the latest time calls in flight let time reach: each lands
// or is lost within MaxDelay.
func (s *State) deadline() int64 {
	d := int64(1) << 60
	for i := 0; i < s.NMsgs; i++ {
		if m := &s.Msgs[i]; !m.Landed && !m.Failed {
			d = min(d, m.Deadline)
		}
	}
	return d
}

// nextTime is the next instant at which something changes by itself: a
// key expires, an owner's Until or renewal falls due, a quarantine ends;
// no later than the calls in flight allow. False when nothing is ahead.
func (s *State) nextTime(c *Config) (int64, bool) {
	next := int64(1) << 60
	at := func(t int64) {
		if t > s.T && t < next {
			next = t
		}
	}
	for n := 0; n < c.Nodes; n++ {
		st := &s.Nodes[n].Store
		if st.Lock.Exists {
			at(st.Lock.Exp + 1)
		}
		if st.Marks.Exists {
			at(st.Marks.Exp + 1)
		}
		s.quarantineEnds(c, n, at)
		keys := func(k Key) {
			if k.Exists {
				at(k.Exp + 1)
			}
		}
		if c.rw() {
			s.rwKeys(c, n, keys)
		}
		if c.family() {
			s.familyKeys(c, n, keys)
		}
	}
	for o := 0; o < c.Owners; o++ {
		h := &s.Owners[o].H
		if h.State == Holding {
			at(c.realAt(o, h.Until))
		}
		if h.Watch {
			at(c.realAt(o, h.Due))
		}
		if ow := &s.Owners[o]; ow.Keep != 0 {
			at(c.realAt(o, ow.Keep))
		}
	}
	next = min(next, s.deadline())
	return next, next > s.T && next < 1<<60
}

// quarantineEnds reports when node n's quarantine ends for each owner.
func (s *State) quarantineEnds(c *Config, n int, at func(int64)) {
	r := s.Nodes[n].Restarted
	if r == never || !c.Mech.Quarantine {
		return
	}
	for o := 0; o < c.Owners; o++ {
		at(c.realAt(o, c.clock(o, r)+c.quarantine()))
	}
}

// advance lets time reach t; the nodes expire their keys.
func (s *State) advance(t int64) {
	s.T = t
	for n := range s.Nodes {
		nd := &s.Nodes[n]
		nd.Store.expire(t)
		nd.RW.expire(t)
		for j := range nd.Locks {
			nd.Locks[j].expire(t)
		}
		nd.SemIntent.expire(t)
	}
}
