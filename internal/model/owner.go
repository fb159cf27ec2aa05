package model

// Owner is one Mutex, in a Client of its own: its sequence counter, its
// hold (hold.go), the operation its op lock serialises (an acquisition,
// its fencing write-back, or a release), the watchdog's renewal of its
// hold, and the acquisitions whose calls may still land (internal/quorum,
// Stragglers).
type Owner struct {
	Seq    int64
	Gen    int32 // the last round's generation
	H      Hold
	Op     Round
	WD     Round
	Acq    [maxAcq]Acquisition
	Paused bool
	// Wait is the stamp of a MultiMutex's or Semaphore's wait under way
	// (its first attempt's start by the owner's clock, 1 at least), 0
	// when it waits for nothing; WaitRenew is whether it waits for a
	// watchdog hold (family.go).
	Wait      int64
	WaitRenew bool
	// Keep is when, by the owner's clock, its Client's keeper refreshes
	// the intents of its wait next (intent.go, waitIntents.keep); 0 when
	// it keeps none (vanish.go).
	Keep int64
	// Crashed is set once the owner's process died (a waiter's, vanish.go):
	// it takes no step again, and nobody reads the replies of its calls.
	Crashed bool
}

// HoldState is where a hold is in its life (hold.go, holdState).
type HoldState uint8

// The states of a hold; None before the first.
const (
	None HoldState = iota
	Holding
	Owed   // ended by a loss: an Unlock still owes the nodes a delete
	Unsure // ended by a final release that reached no quorum
	Over
)

func (h HoldState) ended() bool { return h >= Owed }

// Hold is an owner's current hold (hold.go, hold).
type Hold struct {
	State  HoldState
	Count  int64
	Seq    int64
	Token  int64
	Until  int64 // the owner's clock
	Renew  bool  // a watchdog hold
	Watch  bool  // in the watchdog's queue
	Due    int64 // the owner's clock: the next renewal
	Final  int64 // Unsure: the final release's sequence
	Late   uint8 // the acquisitions (bits of Owner.Acq) whose calls may still land
	ID     int32 // ghost: which hold this is
	Closed bool  // ghost: Lost has been closed
	// Unsettled is set by an inner Unlock that reached no quorum (its
	// count may be on the nodes or not), until a later round of the hold
	// reaches one (ghost).
	Unsettled bool
	Slot      int8 // a semaphore's permit: its slot
	// Unacked is set when the hold ended by a loss (taken, a denied
	// re-entry, or a watchdog hold expired) that no Unlock has
	// acknowledged: the owner's acquisitions fail at once (ErrLost).
	Unacked bool
	// First is the sequence of the acquisition that began the hold
	// (ghost: a force or an eviction of a field at or above it took this
	// hold's key away).
	First int64
}

// RoundKind is what a round does.
type RoundKind uint8

// The rounds.
const (
	Idle RoundKind = iota
	Acquiring
	Fencing
	Releasing
	Renewing
	Repairing
	Scanning // a semaphore's scan (family.go)
)

// Round is one fan-out to every node and the votes counted so far
// (internal/quorum, Round and Ballot).
type Round struct {
	Kind    RoundKind
	Gen     int32
	Start   int64 // the owner's clock
	Vote    [MaxNodes]Vote
	Heard   [MaxNodes]bool  // the vote is the node's own answer (not a timeout)
	Value   [MaxNodes]int64 // acquire: the fencing counter; renew and repair: the reply
	Acq     int8            // acquiring, fencing, repairing: the acquisition record
	Seq     int64           // the call's sequence
	Count   int64           // acquiring: the count it writes; releasing: the target
	Renew   bool            // acquiring: a watchdog hold
	Token   int64           // fencing: the token written back
	Tries   int8            // fencing: which write-back round this is
	Owed    bool            // releasing: the hold had ended before (an Unlock that cleans up)
	Confirm bool            // releasing: the retry of a final release that reached no quorum
	Absent  [MaxNodes]bool  // renewing: the key was absent there
	Other   int8            // renewing: nodes where another owner holds it
	Base    int8            // repairing: the renewal's counted yes votes
	Slot    int8            // a semaphore's claim: the slot
	// AfterGap is set when the call began after a gap of the owner's
	// hold (Ghost.Gap; vanish.go): it may not return success for it.
	AfterGap bool
}

// Acquisition is what may still come of one acquisition's (or repair's)
// calls once its round is decided (internal/quorum, Stragglers and nodeUndo).
type Acquisition struct {
	Used     bool
	Inflight int8 // calls not answered yet
	Astray   bool // a call failed after it may have been written
	OffLane  bool // a repair: not on the lock's lane
	Failed   bool // settled as failed: calls that may have applied are rolled back
	Seq      int64
	Prev     int64
	Rolled   [MaxNodes]bool // the node's rollback was sent, or is not needed
	Slot     int8           // a semaphore's claim: the slot
}

// tally counts a round's votes.
func (r *Round) tally(n int) (yes, no, failed, pending int) {
	for i := 0; i < n; i++ {
		switch r.Vote[i] {
		case Yes:
			yes++
		case No:
			no++
		case Failed:
			failed++
		default:
			pending++
		}
	}
	return
}

// certain is ballot.certain: won, denied, unreachable or done.
func (r *Round) certain(c *Config) bool {
	yes, no, failed, pending := r.tally(c.Nodes)
	q := c.quorum()
	return yes >= q || no > c.Nodes-q || failed > c.Nodes-q || pending == 0
}

// won is ballot.won.
func (r *Round) won(c *Config) bool {
	yes, _, _, _ := r.tally(c.Nodes)
	return yes >= c.quorum()
}

// denied is ballot.denied.
func (r *Round) denied(c *Config) bool {
	_, no, _, _ := r.tally(c.Nodes)
	return no > c.Nodes-c.quorum()
}

// newAcq takes a free acquisition record, -1 when none is free.
func (o *Owner) newAcq() int8 {
	for k := range o.Acq {
		if !o.Acq[k].Used {
			o.Acq[k] = Acquisition{Used: true}
			return int8(k)
		}
	}
	return -1
}

// gcAcq frees the records nothing needs: every call answered, none astray,
// no round counting on it.
func (o *Owner) gcAcq() {
	for k := range o.Acq {
		a := &o.Acq[k]
		if !a.Used || a.Inflight > 0 || a.Astray && o.H.Late&(1<<k) != 0 {
			continue
		}
		if (o.Op.Kind == Acquiring || o.Op.Kind == Fencing) && o.Op.Acq == int8(k) || o.WD.Kind == Repairing && o.WD.Acq == int8(k) {
			continue
		}
		o.H.Late &^= 1 << k
		if a.Failed {
			if !a.allRolled() {
				continue
			}
		}
		*a = Acquisition{}
	}
}

func (a *Acquisition) allRolled() bool {
	for _, r := range a.Rolled {
		if !r {
			return false
		}
	}
	return true
}

// mayLand is hold.mayLandLocked: a call of an acquisition or repair of the
// hold may reach a node after a release sent now (ordered: on the lock's
// lane).
func (o *Owner) mayLand(ordered bool) bool {
	for k := range o.Acq {
		a := &o.Acq[k]
		if o.H.Late&(1<<k) == 0 || !a.Used {
			continue
		}
		if a.Astray || (!ordered || a.OffLane) && a.Inflight > 0 {
			return true
		}
	}
	return false
}

// addLate is hold.addLateLocked: the hold records the stragglers of one
// more acquisition, and forgets those that can no longer land.
func (o *Owner) addLate(k int8) {
	for j := range o.Acq {
		a := &o.Acq[j]
		if o.H.Late&(1<<j) != 0 && !(a.Used && (a.Inflight > 0 || a.Astray)) {
			o.H.Late &^= 1 << j
		}
	}
	if k >= 0 && (o.Acq[k].Inflight > 0 || o.Acq[k].Astray) {
		o.H.Late |= 1 << k
	}
}
