package redlock_test

import (
	"cmp"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// The independent checker of mutual exclusion used by the chaos suite. It
// trusts nothing the library says about who holds a lock: every owner, in
// this process or in a worker process, writes down when Lock returned and
// when it stopped relying on the hold, on one clock shared by every process
// of the machine, and the checker looks for two owners whose spans
// overlap. A second, cruder witness is a shared counter in a separate Redis
// that owners increment by an unprotected GET, pause, SET (criticalSection
// in worker_test.go): any overlap that hits it loses an increment.
//
// Why not porcupine (github.com/anishathalye/porcupine)? A linearizability
// check of a lock's acquire/release history, with each operation's
// linearization point somewhere between its call and its return, is weaker
// than the span check here, which pins a hold to [Lock returned, Unlock
// called]: two such intervals of different owners that overlap already make
// the history non-linearizable, and disjoint intervals make it linearizable.
// And the counter lives in a single Redis, which is linearizable by itself,
// so a linearizability check of its GET/SET history could never fail; the
// final value against the number of increments is the check that can. It
// would add a dependency and no power, so the suite does not use it.

// holdSpan is one continuous hold of one owner, as the owner saw it.
type holdSpan struct {
	Owner string `json:"o"`
	Start int64  `json:"s"` // monoNow: Lock returned
	End   int64  `json:"e"` // monoNow: right before Unlock, or when the owner saw Lost closed
	// Valid is the end of validity the library last promised the owner
	// (Until, on the monoNow clock), read at End or as late before it as the
	// owner could; 0 when unknown. An owner still at work after it (a paused
	// or starved process) overran its hold: its own fault, not the lock's.
	Valid int64 `json:"v,omitempty"`
	// Lost: the owner saw Lost() closed while it still relied on the hold.
	Lost bool `json:"l,omitempty"`
}

// spanOverlap is two spans of different owners that share time; First
// started first (or at the same instant).
type spanOverlap struct {
	First, Second holdSpan
}

func (o spanOverlap) String() string {
	return fmt.Sprintf("%s held [%d, %d] lost=%v valid=%d; %s took it at %d (%v before the first stopped)",
		o.First.Owner, o.First.Start, o.First.End, o.First.Lost, o.First.Valid,
		o.Second.Owner, o.Second.Start, time.Duration(o.First.End-o.Second.Start))
}

// exclusionVerdict is what the checker found.
type exclusionVerdict struct {
	// Violations: a second owner took the lock while the first still held it
	// within the validity it had been promised. Must be empty.
	Violations []spanOverlap
	// Late: the second owner took the lock only after the validity the first
	// had been promised, and the first was still at work: it overran its
	// hold (Lost closed, or its process was paused or starved). Not a
	// violation of the lock; the owners' work may have collided, which is
	// what fencing tokens are for.
	Late []spanOverlap
}

// checkExclusion finds every pair of overlapping spans of different owners.
// It sweeps the spans by start time, keeping those still open.
func checkExclusion(ivs []holdSpan) exclusionVerdict {
	s := sortedByStart(ivs)
	var v exclusionVerdict
	var open []holdSpan
	for _, b := range s {
		kept := open[:0]
		for _, a := range open {
			if a.End > b.Start {
				kept = append(kept, a)
			}
		}
		open = kept
		for _, a := range open {
			if a.Owner == b.Owner {
				continue
			}
			o := spanOverlap{First: a, Second: b}
			if a.Valid != 0 && b.Start >= a.Valid {
				v.Late = append(v.Late, o)
			} else {
				v.Violations = append(v.Violations, o)
			}
		}
		open = append(open, b)
	}
	return v
}

// lockGap is a stretch of time in which nobody held the lock.
type lockGap struct {
	From, To int64 // monoNow
}

func (g lockGap) Len() time.Duration { return time.Duration(g.To - g.From) }

// longestGap is the longest time within [from, to] when no span was
// open: how long the lock was unavailable to owners that kept asking for it.
func longestGap(ivs []holdSpan, from, to int64) lockGap {
	s := sortedByStart(ivs)
	best := lockGap{from, from}
	cursor := from
	for _, iv := range s {
		if iv.End < from || iv.Start > to {
			continue
		}
		if iv.Start > cursor && iv.Start-cursor > best.Len().Nanoseconds() {
			best = lockGap{cursor, iv.Start}
		}
		cursor = max(cursor, iv.End)
	}
	if to > cursor && to-cursor > best.Len().Nanoseconds() {
		best = lockGap{cursor, to}
	}
	return best
}

func TestCheckerFindsOverlaps(t *testing.T) {
	iv := func(owner string, start, end int64) holdSpan { return holdSpan{Owner: owner, Start: start, End: end} }
	lost := func(owner string, start, end, valid int64) holdSpan {
		return holdSpan{Owner: owner, Start: start, End: end, Lost: true, Valid: valid}
	}
	valid := func(owner string, start, end, valid int64) holdSpan {
		return holdSpan{Owner: owner, Start: start, End: end, Valid: valid}
	}
	tests := []struct {
		name             string
		ivs              []holdSpan
		violations, late int
	}{
		{"none", nil, 0, 0},
		{"one", []holdSpan{iv("a", 1, 5)}, 0, 0},
		{"back to back", []holdSpan{iv("a", 1, 5), iv("b", 5, 9), iv("a", 9, 12)}, 0, 0},
		{"apart, out of order", []holdSpan{iv("b", 20, 30), iv("a", 1, 5), iv("c", 6, 19)}, 0, 0},
		{"spanOverlap", []holdSpan{iv("a", 1, 5), iv("b", 4, 9)}, 1, 0},
		{"same start", []holdSpan{iv("a", 3, 5), iv("b", 3, 4)}, 1, 0},
		{"contained", []holdSpan{iv("a", 1, 100), iv("b", 10, 20), iv("c", 30, 40)}, 2, 0},
		{"one owner twice", []holdSpan{iv("a", 1, 5), iv("a", 3, 9)}, 0, 0},
		{"lost, other came after its validity", []holdSpan{lost("a", 1, 12, 10), iv("b", 10, 15)}, 0, 1},
		{"lost, other came before its validity", []holdSpan{lost("a", 1, 12, 10), iv("b", 9, 15)}, 1, 0},
		{"lost without validity", []holdSpan{lost("a", 1, 12, 0), iv("b", 10, 15)}, 1, 0},
		{"overran, other came after its validity", []holdSpan{valid("a", 1, 12, 10), iv("b", 11, 15)}, 0, 1},
		{"overran, other came before its validity", []holdSpan{valid("a", 1, 12, 10), iv("b", 8, 15)}, 1, 0},
		{"validity far ahead", []holdSpan{valid("a", 1, 12, 100), iv("b", 11, 15)}, 1, 0},
		{"three at once", []holdSpan{iv("a", 1, 10), iv("b", 2, 10), iv("c", 3, 10)}, 3, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := checkExclusion(tt.ivs)
			assert.Len(t, v.Violations, tt.violations, "violations: %v", v.Violations)
			assert.Len(t, v.Late, tt.late, "late: %v", v.Late)
		})
	}
}

func TestCheckerLongestGap(t *testing.T) {
	iv := func(start, end int64) holdSpan { return holdSpan{Owner: "a", Start: start, End: end} }
	tests := []struct {
		name     string
		ivs      []holdSpan
		from, to int64
		want     lockGap
	}{
		{"nothing held", nil, 0, 100, lockGap{0, 100}},
		{"held throughout", []holdSpan{iv(0, 50), iv(50, 100)}, 0, 100, lockGap{0, 0}},
		{"middle", []holdSpan{iv(0, 10), iv(12, 20), iv(60, 100)}, 0, 100, lockGap{20, 60}},
		{"overlapping intervals", []holdSpan{iv(0, 40), iv(10, 20), iv(45, 100)}, 0, 100, lockGap{40, 45}},
		{"start", []holdSpan{iv(30, 100)}, 0, 100, lockGap{0, 30}},
		{"tail", []holdSpan{iv(0, 10)}, 0, 100, lockGap{10, 100}},
		{"outside the window", []holdSpan{iv(-50, -10), iv(0, 100), iv(200, 300)}, 0, 100, lockGap{0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, longestGap(tt.ivs, tt.from, tt.to))
		})
	}
}

// sortedByStart returns a copy of ivs sorted by start time.
func sortedByStart(ivs []holdSpan) []holdSpan {
	s := slices.Clone(ivs)
	slices.SortFunc(s, func(a, b holdSpan) int { return cmp.Compare(a.Start, b.Start) })
	return s
}
