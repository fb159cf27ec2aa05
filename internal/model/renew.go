package model

// The watchdog's renewal of one hold (internal/watchdog: Renew, repair) and the
// loss timer (hold.go: expire).

// renew sends the hold's renewal to every node in a batch, and pushes its
// next one a period on (watchdog.take).
func (s *State) renew(c *Config, o int) bool {
	ow := &s.Owners[o]
	ow.WD = s.newRound(c, o, Renewing)
	ow.H.Due = s.clockOf(c, o) + c.period()
	return s.fanout(c, Msg{Owner: int8(o), Kind: KRenew, Lane: Batch, Acq: -1, Gen: ow.WD.Gen, Slot: ow.H.Slot})
}

// noteRenew records what a renewal's answer says of the key, counted or
// not (renewal.tally's callback).
func (s *State) noteRenew(r *Round, m Msg) {
	switch m.Reply.N {
	case 0:
		r.Absent[m.Node] = true
	case -1:
		r.Other++
	}
}

// counted is the renewal's yes: nodes not in quarantine where the hold
// was extended (or, repairing, written back).
func (r *Round) counted(c *Config) int {
	yes := 0
	for n := 0; n < c.Nodes; n++ {
		if r.Vote[n] == Yes && r.Value[n] == 1 {
			yes++
		}
	}
	return yes
}

// repairable is vote.Renewal.Repairable: extended on a quorum.
func (r *Round) repairable(c *Config) bool {
	yes := r.counted(c)
	if yes >= c.quorum() || c.Mech.RepairQuorum {
		return yes >= c.quorum()
	}
	// Before cc383a5: one yes, no other owner, and yes and absent (not in
	// quarantine) a majority was a fresh acquisition there.
	if yes == 0 || r.Other > 0 {
		return false
	}
	for n := 0; n < c.Nodes; n++ {
		if r.Vote[n] != Failed && r.Absent[n] {
			yes++
		}
	}
	return yes >= c.quorum()
}

// repair is watchdog.repair: write the hold back where its key was absent,
// when that is allowed and the hold is still renewed; then conclude.
func (s *State) repair(c *Config, o int) {
	ow := &s.Owners[o]
	r := &ow.WD
	absent := false
	for n := 0; n < c.Nodes; n++ {
		absent = absent || r.Absent[n]
	}
	if !absent || !r.repairable(c) || !ow.H.Watch || ow.H.State.ended() {
		s.concludeRenewal(c, o)
		return
	}
	k := ow.newAcq()
	if k < 0 {
		s.concludeRenewal(c, o)
		return
	}
	ow.Acq[k].OffLane, ow.Acq[k].Failed = true, false
	rp := s.newRound(c, o, Repairing)
	rp.Start, rp.Acq, rp.Absent, rp.Other, rp.Base, rp.AfterGap = r.Start, k, r.Absent, r.Other, int8(r.counted(c)), r.AfterGap
	for n := 0; n < c.Nodes; n++ {
		rp.Vote[n] = No // not asked
		if r.Absent[n] {
			rp.Vote[n] = Pending
			ow.Acq[k].Inflight++
			s.send(c, Msg{Owner: int8(o), Node: int8(n), Kind: KRepair, Lane: Batch, Acq: k, Gen: rp.Gen, Seq: ow.H.Seq, Count: ow.H.Count, Slot: ow.H.Slot})
		}
	}
	ow.H.Late |= 1 << k // repairing: recorded before it is sent
	ow.WD = rp
}

// concludeRenewal is the end of watchdog.renew: a hold renewed on a
// majority is valid a lease from the round's start, less the drift
// allowance; one gone from a majority is lost now.
func (s *State) concludeRenewal(c *Config, o int) {
	ow := &s.Owners[o]
	r := ow.WD
	ow.WD = Round{}
	yes := r.counted(c)
	if r.Kind == Repairing {
		yes += int(r.Base)
	}
	missing := int(r.Other)
	for n := 0; n < c.Nodes; n++ {
		if r.Absent[n] {
			missing++
		}
	}
	h := &ow.H
	switch {
	case yes >= c.quorum():
		if until := r.Start + c.Lease - c.drift(); h.Watch && !h.State.ended() && until > h.Until {
			s.succeeded(o, &r, "renewal")
			h.Until = until // renewed
		}
	case missing > c.Nodes-c.quorum() && h.Watch:
		s.end(h, Owed) // takenAway
		h.Unacked = c.Mech.ReentryLost
	}
}

// expire is the loss timer firing at Until (hold.expire): a watchdog
// hold's is a loss, a fixed lease's is not.
func (s *State) expire(c *Config, o int) {
	h := &s.Owners[o].H
	s.end(h, Owed)
	h.Unacked = c.Mech.ReentryLost && h.Renew
}
