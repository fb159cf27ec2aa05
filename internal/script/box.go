package script

import "sync/atomic"

// Boxing a string, or an int64 of 256 or more, into a call's
// []interface{} allocates. The arguments that stay the same from call to
// call are boxed once and the box reused.

// boxedMs is a number of milliseconds and its box.
type boxedMs struct {
	n   int64
	box interface{}
}

// lastMs is the duration boxed last by ms: a Client's lease, nearly
// always.
var lastMs atomic.Pointer[boxedMs]

// ms returns n, a duration in milliseconds, as a call's argument: the box
// of the last duration boxed when n is the same (a Client's leases and
// marks are the same at nearly every call), a new one otherwise.
func ms(n int64) interface{} {
	if n < 256 {
		return n // boxed without an allocation
	}
	if b := lastMs.Load(); b != nil && b.n == n {
		return b.box
	}
	b := &boxedMs{n: n, box: n}
	lastMs.Store(b)
	return b.box
}

// Boxed are the keys of one lock and its owner's field, boxed once for
// the many calls of one owner (see Box).
type Boxed struct {
	key, marks, fence, intent, channel interface{}
	field                              interface{}
}

// Box boxes the keys k of a lock and its owner's field, for the calls of
// the locks whose Keys carry the result.
func Box(k Keys, field string) Boxed {
	return Boxed{key: k.Key, marks: k.Marks, fence: k.Fence, intent: k.Intent, channel: k.Channel, field: field}
}

// The arguments of one lock's keys: boxed once when k.Boxed says so.

func (k *Keys) keyArg() interface{} {
	if k.Boxed != nil {
		return k.Boxed.key
	}
	return k.Key
}

func (k *Keys) marksArg() interface{} {
	if k.Boxed != nil {
		return k.Boxed.marks
	}
	return k.Marks
}

func (k *Keys) fenceArg() interface{} {
	if k.Boxed != nil {
		return k.Boxed.fence
	}
	return k.Fence
}

func (k *Keys) intentArg() interface{} {
	if k.Boxed != nil {
		return k.Boxed.intent
	}
	return k.Intent
}

func (k *Keys) channelArg() interface{} {
	if k.Boxed != nil {
		return k.Boxed.channel
	}
	return k.Channel
}

// fieldArg is the owner field field as an argument of a call of l: the
// box of the first lock's Boxed when it holds that field.
func (l Locks) fieldArg(field string) interface{} {
	if l.N > 0 {
		if b := l.Keys(0).Boxed; b != nil {
			if f, _ := b.field.(string); f == field {
				return b.field
			}
		}
	}
	return field
}
