package model

// key is a fingerprint of the state for the explorer's table: the state
// with its times made relative to now, so that the same situation at two
// instants is one state. Values that no longer matter are folded: an
// Until or a due time already passed, a round older than a lease, a
// quarantine every owner's clock is past, a fencing counter below the
// clock floor.
func (s *State) key(c *Config) uint64 {
	h := hasher(0x9e3779b97f4a7c15)
	for n := 0; n < c.Nodes; n++ {
		s.hashNode(c, &h, n)
	}
	for o := 0; o < c.Owners; o++ {
		s.hashOwner(c, &h, o)
	}
	for i := 0; i < s.NMsgs; i++ {
		s.hashMsg(&h, &s.Msgs[i])
	}
	s.hashVanish(c, &h)
	g := &s.Ghost
	h.w(int64(s.Used.Breaks), int64(s.Used.Restarts), int64(s.Used.Pauses), b(g.Dropped), int64(g.LastOwner), s.relToken(g.LastToken), g.LastFirst)
	return uint64(h)
}

type hasher uint64

func (h *hasher) w(xs ...int64) {
	for _, x := range xs {
		v := uint64(*h) ^ uint64(x)*0xbf58476d1ce4e5b9
		v ^= v >> 31
		*h = hasher(v * 0x94d049bb133111eb)
	}
}

func b(x bool) int64 {
	if x {
		return 1
	}
	return 0
}

// relToken is a fencing value relative to the clock floor now; every value
// below it behaves the same.
func (s *State) relToken(v int64) int64 { return max(v-s.T*FloorPerMs, -1) }

// relValue is relToken for a value that is a fencing counter (one above
// any count, sequence or TTL), the value itself otherwise.
func (s *State) relValue(v int64) int64 {
	if v > 1<<30 {
		return s.relToken(v)
	}
	return v
}

func (s *State) hashNode(c *Config, h *hasher, n int) {
	nd := &s.Nodes[n]
	st := &nd.Store
	h.w(b(st.Lock.Exists), st.Lock.Exp-s.T, b(st.Marks.Exists), st.Marks.Exp-s.T, b(st.Fence.Exists))
	if st.Fence.Exists {
		h.w(s.relToken(st.Counter))
	}
	for o := 0; o < c.Owners; o++ {
		f, m := st.Owners[o], st.Mark[o]
		h.w(f.Count, f.Seq, b(f.HasCount), b(f.HasSeq), m.Seq, b(m.Set), nd.Closed[o], int64(nd.RolledBack[o]))
	}
	r := int64(-1)
	if nd.Restarted != never && s.T-nd.Restarted <= 2*c.quarantine() {
		r = s.T - nd.Restarted
	}
	h.w(r)
	if c.rw() {
		s.hashRW(c, h, n)
	}
	if c.family() {
		s.hashFamily(c, h, n)
	}
}

func (s *State) hashOwner(c *Config, h *hasher, o int) {
	ow := &s.Owners[o]
	clock, hd := s.clockOf(c, o), &ow.H
	h.w(ow.Seq, b(ow.Paused), int64(hd.State), hd.Count, hd.Seq, s.relToken(hd.Token), max(hd.Until-clock, -1),
		b(hd.Renew), b(hd.Watch), max(hd.Due-clock, -1), hd.Final, int64(hd.Late), b(hd.Closed), b(hd.Unsettled),
		b(s.Ghost.Believing[o]), b(s.Ghost.Periods[o] == hd.ID), b(s.Ghost.LastHold == hd.ID), int64(hd.Slot), b(ow.WaitRenew))
	if ow.Wait != 0 {
		h.w(ow.Wait - clock)
	}
	for _, r := range []*Round{&ow.Op, &ow.WD} {
		h.w(int64(r.Kind))
		if r.Kind == Idle {
			continue
		}
		h.w(min(clock-r.Start, c.Lease+1), int64(r.Acq), r.Seq, r.Count, b(r.Renew), s.relToken(r.Token), b(r.Owed), b(r.Confirm), int64(r.Other), int64(r.Base), int64(r.Slot), b(r.AfterGap))
		for n := 0; n < c.Nodes; n++ {
			h.w(int64(r.Vote[n]), b(r.Heard[n]), s.relValue(r.Value[n]), b(r.Absent[n]))
		}
	}
	for k := range ow.Acq {
		a := &ow.Acq[k]
		if !a.Used {
			h.w(0)
			continue
		}
		h.w(b(a.Used), int64(a.Inflight), b(a.Astray), b(a.OffLane), b(a.Failed), a.Seq, a.Prev, int64(a.Slot))
		for n := 0; n < c.Nodes; n++ {
			h.w(b(a.Rolled[n]))
		}
	}
}

func (s *State) hashMsg(h *hasher, m *Msg) {
	ow := &s.Owners[m.Owner]
	gen := int64(0)
	switch {
	case ow.Op.Kind != Idle && ow.Op.Gen == m.Gen:
		gen = 1
	case ow.WD.Kind != Idle && ow.WD.Gen == m.Gen:
		gen = 2
	}
	h.w(int64(m.Owner), int64(m.Node), int64(m.Kind), int64(m.Lane), b(m.Astray), b(m.Landed), b(m.Failed), int64(m.Acq), gen,
		m.Seq, s.relValue(m.Count), b(m.Mark), m.Deadline-s.T, b(m.Reply.Yes), s.relValue(m.Reply.N), int64(m.Slot))
	if m.Stamp != 0 {
		h.w(m.Stamp - s.T)
	}
}
