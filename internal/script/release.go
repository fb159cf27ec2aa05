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

// Released is release.lua's reply: what the owner held on the node.
type Released int64

// Release's replies.
const (
	ReleasedOther Released = -1 // another owner holds a lock, and the owner none
	ReleasedNone  Released = 0  // every key was absent
	ReleasedHeld  Released = 1  // the owner held some lock (now updated or deleted)
)

// ParseRelease reads release.lua's reply.
func ParseRelease(reply interface{}) (Released, error) {
	n, err := oneOf(reply, -1, 0, 1)
	return Released(n), parsed("release", err)
}
