package script

import "slices"

// ForceCall is force.lua's call deleting, on the locks l, the holds of
// owners (owner field: the latest sequence of its writes seen), publishing
// msg; its marks live at least markMs. The owners go in order, so that
// every node gets the same call.
func ForceCall(l Locks, msg string, markMs int64, owners map[string]int64) Call {
	sha := Force.Begin(2*l.N, 3+2*len(owners)+l.N)
	sha = l.appendPairs(sha)
	sha = append(sha, msg, markMs, len(owners))
	fields := make([]string, 0, len(owners))
	for f := range owners {
		fields = append(fields, f)
	}
	slices.Sort(fields)
	for _, f := range fields {
		sha = append(sha, f, owners[f])
	}
	return Force.Made(l.appendChannels(sha))
}

// ParseForce reads force.lua's reply: whether a hold was deleted.
func ParseForce(reply interface{}) (deleted bool, err error) {
	n, err := oneOf(reply, 0, 1)
	return n == 1, parsed("force", err)
}
