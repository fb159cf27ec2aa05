package script

// RefreshCall is refresh.lua's call keeping a living waiter's intent on
// keys for leaseMs more, where it is still there.
func RefreshCall(keys []string, intent string, leaseMs int64) Call {
	sha := Refresh.Begin(len(keys), 2)
	for _, k := range keys {
		sha = append(sha, k)
	}
	return Refresh.Made(append(sha, intent, leaseMs))
}

// ParseRefresh reads refresh.lua's reply: how many keys held the intent.
func ParseRefresh(reply interface{}) (int64, error) {
	n, err := integer(reply)
	return n, parsed("refresh", err)
}
