package script

import "fmt"

// RenewCall is renew.lua's call extending holds by leaseMs: each of holds
// is one hold's part, boxed as a hold keeps it from one renewal to the
// next, the keys of its locks then its owner field. Every lock of a hold
// is one entry of the call, and of its reply.
func RenewCall(leaseMs int64, holds [][]interface{}) Call {
	entries := 0
	for _, h := range holds {
		entries += len(h) - 1
	}
	args := make([]interface{}, 0, 3+2*entries)
	args = append(args, Renew.Hash, entries)
	for _, h := range holds {
		args = append(args, h[:len(h)-1]...)
	}
	args = append(args, leaseMs)
	for _, h := range holds {
		for range len(h) - 1 {
			args = append(args, h[len(h)-1])
		}
	}
	return Renew.Made(args)
}

// Answers is renew.lua's reply, or repair.lua's, which has its shape: one
// answer per entry, 1, 0 or -1 (see the scripts). A Transport that split
// the call by shard puts in place of the answers of a shard that failed a
// value that is none (its failure): Answer tells them apart.
type Answers []interface{}

// ParseAnswers reads renew.lua's or repair.lua's reply, of entries
// answers.
func ParseAnswers(reply interface{}, entries int) (Answers, error) {
	vs, err := array(reply)
	if err == nil && len(vs) != entries {
		err = fmt.Errorf("unexpected reply of %d values for %d locks", len(vs), entries)
	}
	if err != nil {
		return nil, err
	}
	return Answers(vs), nil
}

// Answer returns entry e's answer, and false when it has none.
func (a Answers) Answer(e int) (int64, bool) {
	n, ok := a[e].(int64)
	return n, ok && n >= -1 && n <= 1
}
