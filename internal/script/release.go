package script

// ReleaseCall is release.lua's call setting the owner field's hold count
// on the locks l to target, with sequence seq; with mark a final release
// marks its sequence, for markMs. shared is as for RollbackCall.
func ReleaseCall(l Locks, shared bool, field string, target int, seq int64, mark bool, markMs int64) Call {
	s := &Release
	if shared {
		s = &ReleaseShared
	}
	m := 0
	if mark {
		m = 1
	}
	sha := s.Begin(2*l.N, 5+l.N)
	sha = l.appendPairs(sha)
	sha = append(sha, l.fieldArg(field), target, seq, m, ms(markMs))
	return s.Made(l.appendChannels(sha))
}

// Released is release.lua's reply: whether the owner held its hold on
// the node.
type Released int64

// Release's replies. A node where the owner holds some of its locks but
// not all (a MultiMutex's name forced away) does not hold the hold: it
// answers ReleasedOther or ReleasedNone, and the locks the owner holds
// there are updated or deleted all the same.
const (
	ReleasedOther Released = -1 // the hold is gone here, and another owner holds a lock that the owner does not
	ReleasedNone  Released = 0  // the hold is gone here, and no other owner holds a lock that the owner does not
	ReleasedHeld  Released = 1  // the owner held every lock (now updated or deleted)
)

// ParseRelease reads release.lua's reply.
func ParseRelease(reply interface{}) (Released, error) {
	n, err := oneOf(reply, -1, 0, 1)
	return Released(n), parsed("release", err)
}
