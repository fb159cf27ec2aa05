package checker_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/redlock-go/redlock/redlocktest/checker"
)

// TestCheckMutex: with one permit, a hold that began inside another
// owner's is a violation, or late when it began after the validity
// promised to the other; holds back to back, apart, or of one owner are
// no finding, and an unknown validity excuses nothing.
func TestCheckMutex(t *testing.T) {
	span := func(owner string, start, end int64) checker.Span {
		return checker.Span{Owner: owner, Start: start, End: end}
	}
	lost := func(owner string, start, end, valid int64) checker.Span {
		return checker.Span{Owner: owner, Start: start, End: end, Lost: true, Valid: valid}
	}
	valid := func(owner string, start, end, valid int64) checker.Span {
		return checker.Span{Owner: owner, Start: start, End: end, Valid: valid}
	}
	for _, tc := range []struct {
		name             string
		spans            []checker.Span
		violations, late int
	}{
		{"none", nil, 0, 0},
		{"one", []checker.Span{span("a", 1, 5)}, 0, 0},
		{"back to back", []checker.Span{span("a", 1, 5), span("b", 5, 9), span("a", 9, 12)}, 0, 0},
		{"apart, out of order", []checker.Span{span("b", 20, 30), span("a", 1, 5), span("c", 6, 19)}, 0, 0},
		{"overlap", []checker.Span{span("a", 1, 5), span("b", 4, 9)}, 1, 0},
		{"same start", []checker.Span{span("a", 3, 5), span("b", 3, 4)}, 1, 0},
		{"contained", []checker.Span{span("a", 1, 100), span("b", 10, 20), span("c", 30, 40)}, 2, 0},
		{"one owner twice", []checker.Span{span("a", 1, 5), span("a", 3, 9)}, 0, 0},
		{"lost, other came after its validity", []checker.Span{lost("a", 1, 12, 10), span("b", 10, 15)}, 0, 1},
		{"lost, other came before its validity", []checker.Span{lost("a", 1, 12, 10), span("b", 9, 15)}, 1, 0},
		{"lost without validity", []checker.Span{lost("a", 1, 12, 0), span("b", 10, 15)}, 1, 0},
		{"overran, other came after its validity", []checker.Span{valid("a", 1, 12, 10), span("b", 11, 15)}, 0, 1},
		{"overran, other came before its validity", []checker.Span{valid("a", 1, 12, 10), span("b", 8, 15)}, 1, 0},
		{"validity far ahead", []checker.Span{valid("a", 1, 12, 100), span("b", 11, 15)}, 1, 0},
		{"three at once", []checker.Span{span("a", 1, 10), span("b", 2, 10), span("c", 3, 10)}, 2, 0}, // b in a; c in a and b
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, l := checker.Check(tc.spans, 1, nil)
			assert.Len(t, v, tc.violations, "violations %v", v)
			assert.Len(t, l, tc.late, "late %v", l)
		})
	}
}

// hold is a hold of a read-write lock, a semaphore or a set of names.
type hold struct {
	checker.Span
	lock  string
	write bool
	names []string
}

// TestCheckFamily: with a conflict function and permits, Check finds a
// write hold beside a read hold, a third permit of two, and a name in two
// holds, and tells a hold that began after another's validity (late) from
// one that began within it (a violation); holds of other locks, of the
// same owner, or that do not conflict are no finding.
func TestCheckFamily(t *testing.T) {
	h := func(owner, lock string, start, end, valid int64) hold {
		return hold{Span: checker.Span{Owner: owner, Start: start, End: end, Valid: valid}, lock: lock}
	}
	w := func(x hold) hold { x.write = true; return x }
	n := func(x hold, names ...string) hold { x.names = names; return x }
	rw := func(a, b hold) bool { return a.lock == b.lock && (a.write || b.write) }
	sem := func(a, b hold) bool { return a.lock == b.lock }
	shared := func(a, b hold) bool {
		return slices.ContainsFunc(a.names, func(x string) bool { return slices.Contains(b.names, x) })
	}
	for _, tc := range []struct {
		name             string
		holds            []hold
		permits          int
		conflict         func(a, b hold) bool
		violations, late int
	}{
		{"readers together", []hold{h("0", "x", 0, 10, 20), h("1", "x", 5, 15, 25)}, 1, rw, 0, 0},
		{"writer inside a reader", []hold{h("0", "x", 0, 10, 20), w(h("1", "x", 5, 15, 25))}, 1, rw, 1, 0},
		{"reader inside a writer", []hold{w(h("0", "x", 0, 10, 20)), h("1", "x", 5, 15, 25)}, 1, rw, 1, 0},
		{"writer after the reader's validity", []hold{h("0", "x", 0, 10, 4), w(h("1", "x", 5, 15, 25))}, 1, rw, 0, 1},
		{"writers one after the other", []hold{w(h("0", "x", 0, 10, 20)), w(h("1", "x", 10, 15, 25))}, 1, rw, 0, 0},
		{"writers of two locks", []hold{w(h("0", "x", 0, 10, 20)), w(h("1", "y", 5, 15, 25))}, 1, rw, 0, 0},
		{"one owner's downgrade", []hold{w(h("0", "x", 0, 10, 20)), h("0", "x", 5, 15, 25)}, 1, rw, 0, 0},
		{"two permits of two", []hold{h("0", "s", 0, 10, 20), h("1", "s", 5, 15, 25)}, 2, sem, 0, 0},
		{"three permits of two", []hold{h("0", "s", 0, 10, 20), h("1", "s", 5, 15, 25), h("2", "s", 8, 9, 30)}, 2, sem, 1, 0},
		{"a third after one's validity", []hold{h("0", "s", 0, 10, 6), h("1", "s", 5, 15, 25), h("2", "s", 8, 9, 30)}, 2, sem, 0, 1},
		{"three of two semaphores", []hold{h("0", "s", 0, 10, 20), h("1", "s", 5, 15, 25), h("2", "t", 8, 9, 30)}, 2, sem, 0, 0},
		{"disjoint names", []hold{n(h("0", "", 0, 10, 20), "a", "b"), n(h("1", "", 5, 15, 25), "c", "d")}, 1, shared, 0, 0},
		{"a shared name", []hold{n(h("0", "", 0, 10, 20), "a", "b"), n(h("1", "", 5, 15, 25), "b", "c")}, 1, shared, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, l := checker.Check(tc.holds, tc.permits, tc.conflict)
			assert.Len(t, v, tc.violations, "violations %v", v)
			assert.Len(t, l, tc.late, "late %v", l)
		})
	}
}

// TestCheckSaysWho: an overlap names the hold that began and the open ones
// it met, those within their validity for a violation, all for a late one.
func TestCheckSaysWho(t *testing.T) {
	a := checker.Span{Owner: "a", Start: 1, End: 20, Valid: 10}
	b := checker.Span{Owner: "b", Start: 2, End: 20, Valid: 30}
	c := checker.Span{Owner: "c", Start: 12, End: 15}
	v, l := checker.Check([]checker.Span{c, b, a}, 2, nil)
	assert.Empty(t, v)
	assert.Equal(t, []checker.Overlap[checker.Span]{{Hold: c, Open: []checker.Span{b, a}}}, l)
	assert.Equal(t, "c took it at 12 while b [2, 20] lost=false valid=30 (8ns before it stopped), "+
		"a [1, 20] lost=false valid=10 (8ns before it stopped) held it", l[0].String())

	v, l = checker.Check([]checker.Span{c, b, a}, 1, nil)
	assert.Equal(t, []checker.Overlap[checker.Span]{{Hold: b, Open: []checker.Span{a}}, {Hold: c, Open: []checker.Span{b}}}, v)
	assert.Empty(t, l)
}
