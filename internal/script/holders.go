package script

import "fmt"

// HoldersCall is holders.lua's call: the owners of the locks l on a node.
func HoldersCall(l Locks) Call {
	return Holders.Made(l.appendPairs(Holders.Begin(2*l.N, 0)))
}

// Holder is one owner that holders.lua found.
type Holder struct {
	Field string // its owner field
	Seq   int64  // the sequence of its latest write on the node (0: none)
}

// ParseHolders reads holders.lua's reply: every owner found, once per
// lock that it holds.
func ParseHolders(reply interface{}) ([]Holder, error) {
	hs, err := parseHolders(reply)
	return hs, parsed("holders", err)
}

func parseHolders(reply interface{}) ([]Holder, error) {
	vs, err := array(reply)
	if err != nil {
		return nil, err
	}
	if len(vs)%2 != 0 {
		return nil, fmt.Errorf("reply of %d values, want pairs", len(vs))
	}
	hs := make([]Holder, len(vs)/2)
	for i := range hs {
		if hs[i].Field, err = text(vs[2*i]); err != nil {
			return nil, err
		}
		if hs[i].Seq, err = integer(vs[2*i+1]); err != nil {
			return nil, err
		}
	}
	return hs, nil
}
