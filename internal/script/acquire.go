package script

import "fmt"

// Acquisition is what an attempt of acquire.lua writes, besides the keys
// of its locks.
type Acquisition struct {
	Field    string // the owner field, "<client id>:<owner id>"
	Count    int    // the hold count to record
	LeaseMs  int64  // the lease
	Seq      int64  // the attempt's sequence number
	FenceTTL int64  // 0, or, for a new fenced hold, how long its counters live, ms
	Intent   string // "", or a waiter's intent, left where the attempt is refused
	IntentMs int64  // the lease of the intent it leaves (its waiter refreshes it)
	// With Tell (one lock only), the attempt tells the waiters of the
	// lock's channel when it creates the key; Subscribed says whether the
	// owner's client is one of them (it waits).
	Tell, Subscribed bool
}

// AcquireCall is acquire.lua's call for the attempt a on the locks l.
func AcquireCall(l Locks, a Acquisition) Call {
	sha := Acquire.Begin(4*l.N, 9)
	for i := 0; i < l.N; i++ {
		k := l.Keys(i)
		sha = append(sha, k.keyArg(), k.marksArg(), k.fenceArg(), k.intentArg())
	}
	sha = append(sha, l.fieldArg(a.Field), a.Count, ms(a.LeaseMs), a.Seq, a.FenceTTL)
	if a.Intent == "" {
		sha = append(sha, "0", 0) // constants: boxed without an allocation; no intent, no margin read
	} else {
		sha = append(sha, a.Intent, a.IntentMs)
	}
	if a.Tell && l.N == 1 {
		sub := 0
		if a.Subscribed {
			sub = 1
		}
		k := l.Keys(0)
		sha = append(sha, k.channelArg(), sub)
	}
	return Acquire.Made(sha)
}

// AcquireReply is acquire.lua's reply, and rw_read.lua's and
// rw_write.lua's, which have its shape: {1, counter}, 1 (acquire.lua's
// {1, 0}) or {1, counter, subscribers} yes; {0, pttl}, {0, pttl, 1}
// (refused by waiters' intents only) or {0, 0} no.
type AcquireReply struct {
	Yes  bool  // the owner holds every lock on the node now
	N    int64 // yes: the largest fencing counter (0 without fencing); no: the longest PTTL that refused it (-1: no expiry; -2: a re-entry whose hold is absent; 0: rolled back)
	Subs int64 // yes, when the attempt told its take: the clients subscribed on the node; -1 otherwise
	// Ahead: no, and only older waiters' intents refused it: no other
	// owner holds a lock on the node.
	Ahead bool
}

// ParseAcquire reads acquire.lua's reply (or rw_read.lua's, or
// rw_write.lua's). It allocates nothing but its error.
func ParseAcquire(reply interface{}) (AcquireReply, error) {
	a, err := parseAcquire(reply)
	return a, parsed("acquire", err)
}

func parseAcquire(reply interface{}) (AcquireReply, error) {
	switch reply.(type) {
	case int64, []byte, string: // 1: {1, 0}, held without fencing
		if _, err := oneOf(reply, 1); err != nil {
			return AcquireReply{}, err
		}
		return AcquireReply{Yes: true, Subs: -1}, nil
	}
	vs, err := array(reply)
	if err != nil {
		return AcquireReply{}, err
	}
	if len(vs) < 2 || len(vs) > 3 {
		return AcquireReply{}, fmt.Errorf("reply of %d values, want 2 or 3", len(vs))
	}
	code, err := oneOf(vs[0], 0, 1)
	if err != nil {
		return AcquireReply{}, err
	}
	a := AcquireReply{Yes: code == 1, Subs: -1}
	if a.N, err = integer(vs[1]); err != nil {
		return AcquireReply{}, err
	}
	if len(vs) == 3 {
		var third int64
		if third, err = integer(vs[2]); err != nil {
			return AcquireReply{}, err
		}
		if a.Yes {
			a.Subs = third
		} else {
			a.Ahead = third == 1
		}
	}
	return a, nil
}
