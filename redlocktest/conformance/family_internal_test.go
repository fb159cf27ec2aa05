package conformance

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestExceedingFindsTooManyHolds: the family scenarios' checker finds a
// write hold beside a read hold, a third permit of two, and a name in two
// holds, and tells a hold that began after another's validity (late) from
// one that began within it (a violation); holds of other locks, of the
// same owner, or that do not conflict are no finding.
func TestExceedingFindsTooManyHolds(t *testing.T) {
	h := func(owner int, lock string, start, end, valid int64) hold {
		return hold{span: span{owner: owner, start: start, end: end, valid: valid}, lock: lock}
	}
	w := func(x hold) hold { x.write = true; return x }
	n := func(x hold, names ...string) hold { x.names = names; return x }
	rw := func(a, b hold) bool { return a.write || b.write }
	always := func(a, b hold) bool { return true }
	shared := func(a, b hold) bool {
		for _, x := range a.names {
			for _, y := range b.names {
				if x == y {
					return true
				}
			}
		}
		return false
	}
	for _, tc := range []struct {
		name             string
		holds            []hold
		permits          int
		conflict         func(a, b hold) bool
		violations, late int
	}{
		{"readers together", []hold{h(0, "x", 0, 10, 20), h(1, "x", 5, 15, 25)}, 1, rw, 0, 0},
		{"writer inside a reader", []hold{h(0, "x", 0, 10, 20), w(h(1, "x", 5, 15, 25))}, 1, rw, 1, 0},
		{"reader inside a writer", []hold{w(h(0, "x", 0, 10, 20)), h(1, "x", 5, 15, 25)}, 1, rw, 1, 0},
		{"writer after the reader's validity", []hold{h(0, "x", 0, 10, 4), w(h(1, "x", 5, 15, 25))}, 1, rw, 0, 1},
		{"writers one after the other", []hold{w(h(0, "x", 0, 10, 20)), w(h(1, "x", 10, 15, 25))}, 1, rw, 0, 0},
		{"writers of two locks", []hold{w(h(0, "x", 0, 10, 20)), w(h(1, "y", 5, 15, 25))}, 1, rw, 0, 0},
		{"one owner's downgrade", []hold{w(h(0, "x", 0, 10, 20)), h(0, "x", 5, 15, 25)}, 1, rw, 0, 0},
		{"two permits of two", []hold{h(0, "s", 0, 10, 20), h(1, "s", 5, 15, 25)}, 2, always, 0, 0},
		{"three permits of two", []hold{h(0, "s", 0, 10, 20), h(1, "s", 5, 15, 25), h(2, "s", 8, 9, 30)}, 2, always, 1, 0},
		{"a third after one's validity", []hold{h(0, "s", 0, 10, 6), h(1, "s", 5, 15, 25), h(2, "s", 8, 9, 30)}, 2, always, 0, 1},
		{"disjoint names", []hold{n(h(0, "", 0, 10, 20), "a", "b"), n(h(1, "", 5, 15, 25), "c", "d")}, 1, shared, 0, 0},
		{"a shared name", []hold{n(h(0, "", 0, 10, 20), "a", "b"), n(h(1, "", 5, 15, 25), "b", "c")}, 1, shared, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, l := exceeding(tc.holds, tc.permits, tc.conflict)
			assert.Len(t, v, tc.violations, "violations %v", v)
			assert.Len(t, l, tc.late, "late %v", l)
		})
	}
}
