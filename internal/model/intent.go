package model

// The waiters' intents (intent.go in the root package), the acquisition
// of several locks at once (a MultiMutex) and a semaphore's scan:
// acquire.lua, withdraw.lua and slots.lua. The explorer's owners are
// Mutexes of one name, which leave no intent (their Stamp is 0) and meet
// none; the differential test holds these to the scripts.

// Intent is a waiters' intent key: "<stamp>/<waiter>", waiter an owner
// number, with its expiry.
type Intent struct {
	Key
	Stamp  int64
	Waiter int
}

func (k *Intent) expire(now int64) {
	if gone(k.Key, now) {
		*k = Intent{}
	}
}

// first reports whether the intent goes before the one of a waiter with
// stamp (0: a new acquisition, which comes after every intent): a
// waiter's own does not keep it out; else the older stamp, and on a tie
// the smaller waiter.
func (k *Intent) first(stamp int64, waiter int) bool {
	switch {
	case !k.Exists:
		return false
	case stamp == 0:
		return true
	case k.Waiter == waiter:
		return false
	}
	return k.Stamp < stamp || k.Stamp == stamp && k.Waiter < waiter
}

// set is SET intent "<stamp>/<waiter>" PX ms.
func (k *Intent) set(now, stamp int64, waiter int, ms int64) {
	*k = Intent{Key: Key{Exists: true, Exp: now + ms}, Stamp: stamp, Waiter: waiter}
}

// AcquireAll is acquire.lua over several locks on one node, a
// MultiMutex's: every lock or none (Subscribers only with one lock).
func AcquireAll(now int64, locks []*Store, a AcquireArgs) AcquireReply {
	var wait int64
	refused, taken := false, false
	longest := func(p int64) {
		if !refused || wait >= 0 && (p < 0 || p > wait) {
			wait, refused = p, true
		}
	}
	held := make([]bool, len(locks))
	first := make([]bool, len(locks))
	for i, s := range locks {
		s.expire(now)
		if s.marked(a.Owner, a.Seq) {
			return AcquireReply{N: 0, Subs: -1}
		}
		if held[i] = s.Owners[a.Owner].HasSeq; held[i] {
			continue
		}
		if a.Count > 1 && !a.Recreate { // a re-entry whose hold is gone here: never re-created
			return AcquireReply{N: pttl(s.Lock, now), Subs: -1}
		}
		if s.Lock.Exists {
			taken = true
			longest(pttl(s.Lock, now))
		}
		if first[i] = s.Intent.first(a.Stamp, a.Waiter); first[i] {
			longest(pttl(s.Intent.Key, now))
		}
	}
	if refused {
		px := a.IntentLease
		if a.ByRefuser {
			px += max(wait, 0)
		}
		for i, s := range locks {
			if a.Stamp != 0 && !held[i] && !first[i] {
				s.Intent.set(now, a.Stamp, a.Waiter, px)
			}
		}
		return AcquireReply{N: wait, Subs: -1, Ahead: !taken}
	}
	subs := int64(-1)
	for i, s := range locks {
		if held[i] {
			if s.Owners[a.Owner].Seq < a.Seq {
				s.hset(a.Owner, a.Count, a.Seq)
			}
			if pttl(s.Lock, now) < a.Lease {
				pexpire(&s.Lock, now, a.Lease, false, s.delLock)
			}
			continue
		}
		if s.Intent.Exists && a.Stamp != 0 && s.Intent.Waiter == a.Waiter {
			s.Intent = Intent{}
		}
		s.hset(a.Owner, a.Count, a.Seq)
		pexpire(&s.Lock, now, a.Lease, false, s.delLock)
		if a.Tell && len(locks) == 1 {
			subs = a.Subscribers
		}
	}
	if a.FenceTTL == 0 {
		return AcquireReply{Yes: true, Subs: subs}
	}
	var top int64
	for _, s := range locks {
		top = max(top, s.bumpFence(now, a.FenceTTL))
	}
	return AcquireReply{Yes: true, N: top, Subs: subs}
}

// Withdraw is withdraw.lua over intents: each that is the waiter's with
// stamp goes; it returns how many went. Whether it publishes is not
// modelled.
func Withdraw(now int64, intents []*Intent, stamp int64, waiter int) int64 {
	n := int64(0)
	for _, k := range intents {
		k.expire(now)
		if k.Exists && k.Stamp == stamp && k.Waiter == waiter {
			*k = Intent{}
			n++
		}
	}
	return n
}

// Slots is slots.lua: every slot's PTTL (-2 free, -1 no expiry); with a
// waiter's stamp (not 0), its intent is left on the semaphore's intent
// unless another goes first, with the lease lease.
func Slots(now int64, slots []*Store, intent *Intent, stamp int64, waiter int, lease int64) []int64 {
	return slotsOf(now, slots, intent, stamp, waiter, lease, false)
}

// slotsOf is Slots; with byRefuser, slots.lua before c1fd662: the intent
// lives the shortest PTTL of the slots held here and lease more.
func slotsOf(now int64, slots []*Store, intent *Intent, stamp int64, waiter int, lease int64, byRefuser bool) []int64 {
	out := make([]int64, len(slots))
	soonest := int64(-1)
	for i, s := range slots {
		s.expire(now)
		out[i] = pttl(s.Lock, now)
		if out[i] >= 0 && (soonest < 0 || out[i] < soonest) {
			soonest = out[i]
		}
	}
	intent.expire(now)
	if byRefuser {
		lease += max(soonest, 0)
	}
	if stamp != 0 && !intent.first(stamp, waiter) {
		intent.set(now, stamp, waiter, lease)
	}
	return out
}

// Refresh is refresh.lua over intents: each that is the waiter's with
// stamp lives lease more; it returns how many were.
func Refresh(now int64, intents []*Intent, stamp int64, waiter int, lease int64) int64 {
	n := int64(0)
	for _, k := range intents {
		k.expire(now)
		if k.Exists && k.Stamp == stamp && k.Waiter == waiter {
			k.Exp = now + lease
			n++
		}
	}
	return n
}
