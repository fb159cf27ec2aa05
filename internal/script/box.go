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
