package redlock_test

import (
	"cmp"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/redlock-go/redlock/redlocktest/checker"
)

// The chaos suite's checker of mutual exclusion is package
// redlocktest/checker, shared with the conformance suite: every owner, in
// this process or in a worker process, writes down a checker.Span (when
// Lock returned and when it stopped relying on the hold, on monoNow, one
// clock shared by every process of the machine), and checker.Check looks
// for two owners whose spans overlap. A second, cruder witness is a shared
// counter in a separate Redis that owners increment by an unprotected GET,
// pause, SET (criticalSection in worker_test.go): any overlap that hits it
// loses an increment. This file adds how long the lock was unavailable.
//
// Why not porcupine (github.com/anishathalye/porcupine)? A linearizability
// check of a lock's acquire/release history, with each operation's
// linearization point somewhere between its call and its return, is weaker
// than the span check, which pins a hold to [Lock returned, Unlock
// called]: two such intervals of different owners that overlap already make
// the history non-linearizable, and disjoint intervals make it linearizable.
// And the counter lives in a single Redis, which is linearizable by itself,
// so a linearizability check of its GET/SET history could never fail; the
// final value against the number of increments is the check that can. It
// would add a dependency and no power, so the suite does not use it.

// lockGap is a stretch of time in which nobody held the lock.
type lockGap struct {
	From, To int64 // monoNow
}

func (g lockGap) Len() time.Duration { return time.Duration(g.To - g.From) }

// longestGap is the longest time within [from, to] when no span was
// open: how long the lock was unavailable to owners that kept asking for it.
func longestGap(ivs []checker.Span, from, to int64) lockGap {
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

func TestCheckerLongestGap(t *testing.T) {
	iv := func(start, end int64) checker.Span { return checker.Span{Owner: "a", Start: start, End: end} }
	tests := []struct {
		name     string
		ivs      []checker.Span
		from, to int64
		want     lockGap
	}{
		{"nothing held", nil, 0, 100, lockGap{0, 100}},
		{"held throughout", []checker.Span{iv(0, 50), iv(50, 100)}, 0, 100, lockGap{0, 0}},
		{"middle", []checker.Span{iv(0, 10), iv(12, 20), iv(60, 100)}, 0, 100, lockGap{20, 60}},
		{"overlapping intervals", []checker.Span{iv(0, 40), iv(10, 20), iv(45, 100)}, 0, 100, lockGap{40, 45}},
		{"start", []checker.Span{iv(30, 100)}, 0, 100, lockGap{0, 30}},
		{"tail", []checker.Span{iv(0, 10)}, 0, 100, lockGap{10, 100}},
		{"outside the window", []checker.Span{iv(-50, -10), iv(0, 100), iv(200, 300)}, 0, 100, lockGap{0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, longestGap(tt.ivs, tt.from, tt.to))
		})
	}
}

// sortedByStart returns a copy of ivs sorted by start time.
func sortedByStart(ivs []checker.Span) []checker.Span {
	s := slices.Clone(ivs)
	slices.SortFunc(s, func(a, b checker.Span) int { return cmp.Compare(a.Start, b.Start) })
	return s
}
