package redlock

import "github.com/redlock-go/redlock/internal/intent"

// Waiters' intents keep an owner from being passed over for ever:
// internal/intent's doc says how, and its Keeper refreshes and withdraws
// them. A MultiMutex's or a semaphore's waiter leaves its intent where it
// is refused; a Mutex's of one name once intents refused it (Pending).

// leavesIntent reports whether m's waiters leave intents from the start:
// a MultiMutex's do, a Mutex's of one name once refused (see above).
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
