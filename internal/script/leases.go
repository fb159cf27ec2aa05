package script

// LeasesCall is leases.lua's call on the leases hash key: the caller uses
// leaseMs (0: only reads) for keepMs at most without calling again.
func LeasesCall(key string, leaseMs, keepMs int64) Call {
	return Leases.Call(key, leaseMs, keepMs)
}

// ParseLeases reads leases.lua's reply: the longest lease in use, ms (0:
// none).
func ParseLeases(reply interface{}) (int64, error) {
	n, err := integer(reply)
	return n, parsed("leases", err)
}
