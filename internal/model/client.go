package model

// The client's algorithm, step by step, as reentrant.go, hold.go,
// internal/quorum and internal/watchdog run it for one owner. Each function is one
// thing the owner's goroutines do at one instant; the adversary decides
// when (adversary.go).

// clockOf is owner o's clock now.
func (s *State) clockOf(c *Config, o int) int64 { return c.clock(o, s.T) }

// newRound starts round r of kind k on owner o.
func (s *State) newRound(c *Config, o int, k RoundKind) Round {
	ow := &s.Owners[o]
	ow.Gen++
	return Round{Kind: k, Gen: ow.Gen, Start: s.clockOf(c, o), Acq: -1, AfterGap: s.Ghost.Gap[o]}
}

// fanout sends m to every node; false when too many calls are in flight
// (the state is then not used).
func (s *State) fanout(c *Config, m Msg) bool {
	for n := 0; n < c.Nodes; n++ {
		m.Node = int8(n)
		if !s.send(c, m) {
			return false
		}
	}
	return true
}

// lock is Mutex.try: one acquisition round with count+1 (reentrant.go).
func (s *State) lock(c *Config, o int, renew bool) bool {
	if c.sem() {
		return s.scan(c, o, renew)
	}
	ow := &s.Owners[o]
	prev := int64(0)
	if ow.H.State == Holding {
		prev = ow.H.Count
	}
	k := ow.newAcq()
	if k < 0 {
		return false
	}
	ow.Seq++
	r := s.newRound(c, o, Acquiring)
	r.Acq, r.Seq, r.Count, r.Renew = k, ow.Seq, prev+1, renew
	ow.Acq[k].Seq, ow.Acq[k].Prev, ow.Acq[k].Inflight = ow.Seq, prev, int8(c.Nodes)
	ow.Op = r
	stamp := int64(0)
	if prev == 0 {
		stamp = ow.Wait // a MultiMutex's waiter leaves its intent (0: none)
	}
	return s.fanout(c, Msg{Owner: int8(o), Kind: KAcquire, Lane: LockLane, Acq: k, Gen: r.Gen, Seq: r.Seq, Count: r.Count, Stamp: stamp})
}

// fenced reports whether the acquisition writes the fencing counter: with
// fencing on, for a new hold.
func (r *Round) fenced(c *Config) bool { return c.Fencing && r.Count == 1 }

// land runs call i on its node now and returns its reply; the ghost
// records releases and flags a write that re-creates a released hold.
func (s *State) land(c *Config, i int) AcquireReply {
	if c.rw() {
		return s.landRW(c, i)
	}
	if c.family() {
		return s.landFamily(c, i)
	}
	m := &s.Msgs[i]
	nd := &s.Nodes[m.Node]
	st, now, o := &nd.Store, s.T, int(m.Owner)
	switch m.Kind {
	case KAcquire:
		before := st.Owners[o]
		a := AcquireArgs{Owner: o, Count: m.Count, Lease: c.Lease, Seq: m.Seq, Recreate: !c.Mech.ReentryLost}
		if m.Count == 1 && c.Fencing {
			a.FenceTTL = c.fenceTTL()
		}
		rep := st.Acquire(now, a)
		s.checkZombie(nd, o, m.Seq, before, st.Owners[o])
		return rep
	case KRollback:
		if m.Seq < 64 {
			nd.RolledBack[o] |= 1 << m.Seq
		}
		return AcquireReply{N: st.Rollback(now, o, m.Seq, m.Count, c.Lease)}
	case KRelease:
		if m.Count == 0 {
			nd.Closed[o] = max(nd.Closed[o], m.Seq)
		}
		return AcquireReply{N: st.Release(now, o, m.Count, m.Seq, m.Mark, c.Lease)}
	case KFence:
		return AcquireReply{N: st.FenceTo(now, m.Count, c.fenceTTL())}
	case KRenew:
		return AcquireReply{N: st.Renew(now, c.Lease, o)}
	}
	before := st.Owners[o]
	rep := st.Repair(now, c.Lease, o, m.Count, m.Seq)
	s.checkZombie(nd, o, m.Seq, before, st.Owners[o])
	return AcquireReply{N: rep}
}

// checkZombie flags a write of the owner's field, by a call with sequence
// seq, on a node where a final release at or above seq, or the rollback of
// seq, has already run: the released lock is back for a lease. Once a call has
// been lost (a rollback that never landed leaves its attempt's write, by
// design, until its lease ends), the check is off for the run.
func (s *State) checkZombie(nd *NodeState, o int, seq int64, before, after Field) {
	closed := seq <= nd.Closed[o] || seq < 64 && nd.RolledBack[o]&(1<<seq) != 0
	if before != after && closed && !s.Ghost.Dropped && s.Ghost.Violation == "" {
		s.Ghost.Violation = "cleanup: a call landed after its release (or rollback) and wrote the owner's field back"
	}
}

// receive is the owner reading the answer to call m (err: the call failed
// after it may have been written).
func (s *State) receive(c *Config, m Msg, err bool) {
	ow := &s.Owners[m.Owner]
	if m.Acq >= 0 {
		s.straggler(c, m, err)
	}
	r := ow.roundOf(m)
	if r == nil || r.Vote[m.Node] != Pending {
		return
	}
	v, value := s.vote(c, m, err)
	r.Vote[m.Node], r.Heard[m.Node], r.Value[m.Node] = v, true, value
	if m.Kind == KRenew && !err {
		s.noteRenew(r, m)
	}
	s.progress(c, int(m.Owner))
}

// roundOf returns the round that counts m's answer, nil when it is over.
func (o *Owner) roundOf(m Msg) *Round {
	switch {
	case o.Op.Kind != Idle && o.Op.Gen == m.Gen:
		return &o.Op
	case o.WD.Kind != Idle && o.WD.Gen == m.Gen:
		return &o.WD
	}
	return nil
}

// vote classifies an answer as the round does (classifyAcquire,
// classifyOne, classifyAnyInt, the renewal's tally). An acquisition does
// not count a node in restart quarantine, nor does a renewal (whose
// answer is still read: see noteRenew).
func (s *State) vote(c *Config, m Msg, err bool) (Vote, int64) {
	if err {
		return Failed, 0
	}
	ow := &s.Owners[m.Owner]
	rep, v := m.Reply, No
	switch {
	case m.Kind == KAcquire && rep.Yes, m.Kind == KFence && rep.N < m.Count, m.Kind == KRenew, m.Kind == KRepair, m.Kind == KScan:
		v = Yes
	case m.Kind == KRelease && (rep.N == 1 || ow.Op.Confirm):
		v = Yes
	}
	if (m.Kind == KAcquire || m.Kind == KRenew || m.Kind == KRepair || m.Kind == KScan) && s.quarantined(c, int(m.Owner), int(m.Node)) {
		v = Failed
	}
	return v, rep.N
}

// quarantined is Client.quarantined: node n restarted less than the
// quarantine period ago by owner o's clock.
func (s *State) quarantined(c *Config, o, n int) bool {
	r := s.Nodes[n].Restarted
	if !c.Mech.Quarantine || r == never {
		return false
	}
	return c.clock(o, s.T)-c.clock(o, r) < c.quarantine()
}

// straggler is what round.receive does for an acquisition's (or repair's)
// call whatever the round's state: it counts the call answered, records a
// failure as astray, and rolls the node back when the acquisition failed
// and the call may have applied.
func (s *State) straggler(c *Config, m Msg, err bool) {
	ow := &s.Owners[m.Owner]
	a := &ow.Acq[m.Acq]
	a.Inflight--
	if err {
		a.Astray = true
	}
	if m.Kind == KAcquire && a.Failed && !a.Rolled[m.Node] && (err || m.Reply.Yes) {
		a.Rolled[m.Node] = true
		s.send(c, Msg{Owner: m.Owner, Node: m.Node, Kind: KRollback, Lane: LockLane, Acq: -1, Seq: a.Seq, Count: a.Prev, Slot: a.Slot})
	}
}
