package script

import "fmt"

// ViewCall is view.lua's call: every owner's hold of the lock hash key on
// a node.
func ViewCall(key string) Call { return View.Call(key) }

// LockView is view.lua's reply.
type LockView struct {
	PTTL    int64            // the key's PTTL (-2: no key; -1: no expiry)
	Holders map[string]int64 // owner field -> its hold count (-1: not a number)
}

// ParseView reads view.lua's reply.
func ParseView(reply interface{}) (LockView, error) {
	v, err := parseView(reply)
	return v, parsed("view", err)
}

func parseView(reply interface{}) (LockView, error) {
	vs, err := array(reply)
	if err != nil {
		return LockView{}, err
	}
	if len(vs)%2 != 1 {
		return LockView{}, fmt.Errorf("reply of %d values, want a PTTL and pairs", len(vs))
	}
	v := LockView{Holders: make(map[string]int64, len(vs)/2)}
	if v.PTTL, err = integer(vs[0]); err != nil {
		return LockView{}, err
	}
	for i := 1; i < len(vs); i += 2 {
		owner, err := text(vs[i])
		if err != nil {
			return LockView{}, err
		}
		if v.Holders[owner], err = integer(vs[i+1]); err != nil {
			return LockView{}, err
		}
	}
	return v, nil
}
