package model

// The waiters' intents (intent.go in the root package): acquire.lua's
// KEYS[4] and withdraw.lua. The explorer's owners are Mutexes of one
// name, which leave no intent (their Stamp is 0) and meet none; the
// differential test holds these to the scripts.

// intentFirst reports whether the intent here goes before a's: a new
// acquisition (no stamp) comes after every intent; a waiter's own does
// not keep it out; else the older stamp, and on a tie the smaller waiter.
func (s *Store) intentFirst(a AcquireArgs) bool {
	switch {
	case a.Stamp == 0:
		return true
	case s.IntentWaiter == a.Waiter:
		return false
	}
	return s.IntentStamp < a.Stamp || s.IntentStamp == a.Stamp && s.IntentWaiter < a.Waiter
}

// setIntent is SET intent "<stamp>/<waiter>" PX ms.
func (s *Store) setIntent(now, stamp int64, waiter int, ms int64) {
	s.Intent = Key{Exists: true, Exp: now + ms}
	s.IntentStamp, s.IntentWaiter = stamp, waiter
}

// delIntent is DEL intent.
func (s *Store) delIntent() { s.Intent, s.IntentStamp, s.IntentWaiter = Key{}, 0, 0 }

// Withdraw is withdraw.lua for this lock's intent: the waiter's intent
// with stamp goes; it returns how many went (0 or 1). Whether it publishes
// is not modelled.
func (s *Store) Withdraw(now, stamp int64, waiter int) int64 {
	s.expire(now)
	if !s.Intent.Exists || s.IntentStamp != stamp || s.IntentWaiter != waiter {
		return 0
	}
	s.delIntent()
	return 1
}
