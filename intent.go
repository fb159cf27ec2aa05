package redlock

import "github.com/redlock-go/redlock/internal/intent"

// Waiters' intents keep an owner that waits for several locks at once (a
// MultiMutex), or for any slot of a semaphore, from being passed over for
// ever: internal/intent's doc says how, and its Keeper refreshes the
// intents of the waits under way and withdraws them. A Mutex of one name
// leaves no intent: its waiters take turns through the Client's queue and
// pub/sub (internal/wait). It obeys the intents that MultiMutex waiters
// leave on its name.

// leavesIntent reports whether m's waiters leave intents: a MultiMutex's
// do, a Mutex's of one name do not (see above).
func (m *Mutex) leavesIntent() bool { return len(m.more) > 0 && m.via == nil }

// intentKeys are where m's waits leave their intents.
func (m *Mutex) intentKeys() intent.Keys {
	n := m.locks()
	k := intent.Keys{Keys: make([]string, n), Channels: make([]string, n)}
	for i := 0; i < n; i++ {
		k.Keys[i], k.Channels[i] = m.lock(i).intent, m.lock(i).channel
	}
	return k
}
