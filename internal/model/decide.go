package model

// What an owner does when a round's outcome is known.

// progress decides owner o's rounds whose outcome is certain.
func (s *State) progress(c *Config, o int) {
	ow := &s.Owners[o]
	switch {
	case ow.Op.Kind == Scanning && ow.Op.scanCertain(c):
		s.decideScan(c, o)
	case ow.Op.Kind == Acquiring && ow.Op.certain(c):
		s.decideAcquire(c, o)
	case ow.Op.Kind == Fencing && ow.Op.certain(c):
		s.decideFence(c, o)
	case ow.Op.Kind == Releasing && ow.Op.certain(c):
		s.decideRelease(c, o)
	}
	if _, _, _, pending := ow.WD.tally(c.Nodes); pending == 0 {
		switch ow.WD.Kind {
		case Renewing:
			s.repair(c, o)
		case Repairing:
			s.concludeRenewal(c, o)
		}
	}
	ow.gcAcq()
}

// valid is validity(lease, elapsed, drift) > 0 for a round that started
// at start, now.
func (s *State) valid(c *Config, o int, start int64) bool {
	return c.Lease-(s.clockOf(c, o)-start)-c.drift() > 0
}

// decideAcquire is the end of Mutex.try: grant, write the fencing token
// back first, or roll back.
func (s *State) decideAcquire(c *Config, o int) {
	ow := &s.Owners[o]
	r := &ow.Op
	if !r.won(c) || !s.valid(c, o, r.Start) || s.lostMeanwhile(c, o) {
		if c.Mech.ReentryLost && r.Count > 1 && r.denied(c) && ow.H.State == Holding {
			s.end(&ow.H, Owed) // hold.gone: a majority says it is gone (ErrLost)
			ow.H.Unacked = true
		}
		s.settle(c, o)
		return
	}
	if !r.fenced(c) || c.reader(o) { // a read hold has no token
		s.grant(c, o, 0)
		return
	}
	token := int64(0)
	for n := 0; n < c.Nodes; n++ {
		if r.Vote[n] == Yes {
			token = max(token, r.Value[n])
		}
	}
	s.writeBack(c, o, token+1, 1)
}

// writeBack is Mutex.fenceToken's write-back round number try: the token
// raised to at least itself on every node, granted once a majority held
// less before it.
func (s *State) writeBack(c *Config, o int, token int64, try int8) {
	ow := &s.Owners[o]
	acq := ow.Op
	r := s.newRound(c, o, Fencing)
	r.Start, r.Acq, r.Seq, r.Count, r.Renew, r.Token, r.Tries, r.Slot, r.AfterGap = acq.Start, acq.Acq, acq.Seq, acq.Count, acq.Renew, token, try, acq.Slot, acq.AfterGap
	ow.Op = r
	s.fanout(c, Msg{Owner: int8(o), Kind: KFence, Lane: FenceLane, Acq: -1, Gen: r.Gen, Count: token, Slot: r.Slot})
}

// FenceRounds is internal/quorum's Fence's bound on write-back rounds
// (quorum.FenceRounds).
const FenceRounds = 4

// decideFence ends a write-back round: granted if a majority held less
// than the token and the acquisition is still valid; when a node held as
// much or more, another round above the largest counter seen (up to
// FenceRounds); rolled back otherwise.
func (s *State) decideFence(c *Config, o int) {
	r := &s.Owners[o].Op
	valid := s.valid(c, o, r.Start) && !s.lostMeanwhile(c, o)
	if r.won(c) && valid {
		s.grant(c, o, r.Token)
		return
	}
	if _, no, _, _ := r.tally(c.Nodes); no > 0 && valid && r.Tries < FenceRounds {
		top := r.Token
		for n := 0; n < c.Nodes; n++ {
			if r.Vote[n] == No {
				top = max(top, r.Value[n])
			}
		}
		s.writeBack(c, o, top+1, r.Tries+1)
		return
	}
	s.settle(c, o)
}

// lostMeanwhile reports whether owner o's operation is a re-entrant
// acquisition whose hold ended while it was made.
func (s *State) lostMeanwhile(c *Config, o int) bool {
	ow := &s.Owners[o]
	return c.Mech.ReentryNeedsHold && ow.Op.Count > 1 && ow.H.State != Holding
}

// grant is Mutex.grant: a new hold, or a re-entrant acquisition of the
// current one.
func (s *State) grant(c *Config, o int, token int64) {
	ow := &s.Owners[o]
	r := ow.Op
	ow.Op = Round{}
	h := &ow.H
	fresh := h.State != Holding
	if fresh {
		s.Ghost.NextHold++
		*h = Hold{Token: token, ID: s.Ghost.NextHold, First: r.Seq}
		s.Ghost.Gap[o] = false
	} else {
		s.succeeded(o, &r, "re-entrant acquisition")
	}
	h.Count, h.Seq, h.Unsettled, h.Slot = r.Count, r.Seq, false, r.Slot
	ow.addLate(r.Acq)
	s.endWait(c, o) // a waiter that won withdraws its intent
	if c.writer(o) {
		ow.Keep = 0 // the writer's wait is over
	}
	if !fresh {
		s.writeBackReentry(c, o, &r)
	}
	if until := r.Start + c.Lease - c.drift(); fresh || until > h.Until {
		h.Until = until
	}
	start := r.Renew && !h.Renew
	h.Renew = h.Renew || r.Renew
	h.State = Holding
	if start && !h.Watch {
		h.Watch, h.Due = true, s.clockOf(c, o)+c.period()
	}
}

// settle is round.settle of a failed acquisition: roll back every node
// that said yes or failed after the call may have reached it; a node not
// heard from is rolled back when its answer comes (straggler).
func (s *State) settle(c *Config, o int) {
	ow := &s.Owners[o]
	r := ow.Op
	ow.Op = Round{}
	a := &ow.Acq[r.Acq]
	a.Failed = true
	for n := 0; n < MaxNodes; n++ {
		switch {
		case n >= c.Nodes || r.Heard[n] && r.Vote[n] == No:
			a.Rolled[n] = true
		case r.Heard[n]:
			a.Rolled[n] = true
			s.send(c, Msg{Owner: int8(o), Node: int8(n), Kind: KRollback, Lane: LockLane, Acq: -1, Seq: a.Seq, Count: a.Prev, Slot: a.Slot})
		}
	}
	s.startWait(c, o, r)
	if c.writer(o) && r.Count == 1 {
		s.keep(c, o) // a writer refused waits, and its Client keeps its intent
	}
}

// unlock is Mutex.release: one release round, or the retry of a final
// release that reached no quorum (confirmRelease).
func (s *State) unlock(c *Config, o int) bool {
	ow := &s.Owners[o]
	h := &ow.H
	r := s.newRound(c, o, Releasing)
	switch h.State {
	case Unsure:
		r.Confirm, r.Seq = true, h.Final
	case Owed:
		r.Owed, r.Count = true, 0
	default:
		r.Count = h.Count - 1
	}
	if r.Count == 0 {
		h.Watch = false // the watchdog drops it before the release is sent
	}
	if !r.Confirm {
		ow.Seq++
		r.Seq = ow.Seq
	}
	ow.Op = r
	return s.fanout(c, Msg{Owner: int8(o), Kind: KRelease, Lane: LockLane, Acq: -1, Gen: r.Gen, Seq: r.Seq, Count: r.Count, Mark: ow.mayLand(true), Slot: h.Slot})
}

// decideRelease is the end of Mutex.release (and confirmRelease).
func (s *State) decideRelease(c *Config, o int) {
	ow := &s.Owners[o]
	r := ow.Op
	ow.Op = Round{}
	h := &ow.H
	switch {
	case r.Confirm && r.won(c), r.Owed:
		h.State = Over // finish
	case r.Confirm:
	case r.won(c) && r.Count == 0:
		s.succeeded(o, &r, "last Unlock")
		s.end(h, Over)
	case r.denied(c) && r.Count > 0 && c.Mech.ReleaseAll:
		s.end(h, Owed) // an inner Unlock denied: the next Unlock deletes what is left
	case r.denied(c):
		s.end(h, Over)
	case r.won(c):
		s.succeeded(o, &r, "inner Unlock")
		h.Count, h.Seq, h.Unsettled = r.Count, r.Seq, false // lower
		if !c.Mech.KeepEnded {
			h.State = Holding
		}
	case r.Count == 0 && !h.State.ended():
		s.end(h, Unsure) // giveUp: the hold ends; the release is owed
		h.Final = r.Seq
	case r.Count > 0:
		h.Unsettled = true // the inner Unlock keeps the hold as it was
	}
}

// end is hold.end: the hold ends once, closing Lost; a second close of
// Lost is a panic in the code (close of a closed channel).
func (s *State) end(h *Hold, to HoldState) {
	if h.State.ended() {
		return
	}
	if h.Closed && s.Ghost.Violation == "" {
		s.Ghost.Violation = "Lost closed twice: a hold that had ended was ended again (panic: close of closed channel)"
	}
	h.Closed, h.State, h.Watch = true, to, false
	for o := range s.Owners {
		if &s.Owners[o].H == h {
			s.Ghost.Gap[o] = false // Lost closed: the gap is signalled
		}
	}
}
