package script

import "fmt"

// InspectCall is inspect.lua's call: the state of the locks l on a node,
// as the owner field sees it.
func InspectCall(l Locks, field string) Call {
	sha := Inspect.Begin(l.N, 1)
	for i := 0; i < l.N; i++ {
		sha = append(sha, l.Keys(i).Key)
	}
	return Inspect.Made(append(sha, field))
}

// State is inspect.lua's reply.
type State struct {
	Exists bool  // anyone holds one of the locks on the node
	Count  int64 // the owner's hold count when it holds every lock there (0: it does not)
	PTTL   int64 // the longest PTTL of the keys (-1: one has no expiry; -2: none exists)
}

// ParseInspect reads inspect.lua's reply.
func ParseInspect(reply interface{}) (State, error) {
	s, err := parseInspect(reply)
	return s, parsed("inspect", err)
}

func parseInspect(reply interface{}) (State, error) {
	vs, err := array(reply)
	if err != nil {
		return State{}, err
	}
	if len(vs) != 3 {
		return State{}, fmt.Errorf("reply of %d values, want 3", len(vs))
	}
	var s State
	exists, err := oneOf(vs[0], 0, 1)
	if err != nil {
		return State{}, err
	}
	s.Exists = exists == 1
	if s.Count, err = integer(vs[1]); err != nil {
		return State{}, err
	}
	if s.PTTL, err = integer(vs[2]); err != nil {
		return State{}, err
	}
	return s, nil
}
