package script

// RollbackCall is rollback.lua's call undoing, on the locks l, the attempt
// seq of the owner field that followed prev holds; its marks live markMs.
// shared says whether the first lock is a hash that many owners share (the
// readers' of a read-write lock).
func RollbackCall(l Locks, shared bool, field string, seq int64, prev int, markMs int64) Call {
	s := &Rollback
	if shared {
		s = &RollbackShared
	}
	sha := s.Begin(2*l.N, 4+l.N)
	sha = l.appendPairs(sha)
	sha = append(sha, l.fieldArg(field), seq, prev, ms(markMs))
	return s.Made(l.appendChannels(sha))
}

// ParseRollback reads rollback.lua's reply: whether the attempt's write
// was undone on some lock (false: the node had none, and marks refuse it).
func ParseRollback(reply interface{}) (undone bool, err error) {
	n, err := oneOf(reply, 0, 1)
	return n == 1, parsed("rollback", err)
}
