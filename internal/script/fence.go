package script

// FenceCall is fence.lua's call raising the fencing counters of the locks
// l to token, to live ttlMs.
func FenceCall(l Locks, token, ttlMs int64) Call {
	sha := Fence.Begin(l.N, 2)
	for i := 0; i < l.N; i++ {
		sha = append(sha, l.Keys(i).Fence)
	}
	return Fence.Made(append(sha, token, ttlMs))
}

// ParseFence reads fence.lua's reply: the largest counter before the
// write (0: none existed).
func ParseFence(reply interface{}) (int64, error) {
	n, err := integer(reply)
	return n, parsed("fence", err)
}
