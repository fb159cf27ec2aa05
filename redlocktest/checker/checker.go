// Package checker is an independent checker of mutual exclusion: it trusts
// nothing a lock says about who holds it. Every owner writes down when its
// acquisition returned and when it stopped relying on the hold, on one
// clock that all owners share, with the validity the lock promised it; Check
// then finds the holds that began while more owners held the lock than it
// allows. redlock's own tests and its conformance suite
// (package github.com/redlock-go/redlock/redlocktest/conformance) use it.
//
// A second owner that came in only after the validity promised to the
// first, while the first was still at work, is no violation of the lock:
// the first overran its hold (it saw Lost closed, or its process was paused
// or starved), and Check reports that apart, as late.
package checker

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Span is one continuous hold of one owner, as the owner saw it, in
// nanoseconds on the clock the owners share. Its JSON form is short, for
// the holds that worker processes send back.
type Span struct {
	Owner string `json:"o"`
	Start int64  `json:"s"` // the acquisition returned
	// End is when the owner stopped relying on the hold: right before it
	// released it, or when it saw Lost closed.
	End int64 `json:"e"`
	// Valid is the end of validity the lock last promised the owner (Until,
	// on the same clock), read at End or as late before it as the owner
	// could; 0 when unknown, which excuses nothing.
	Valid int64 `json:"v,omitempty"`
	// Lost: the owner saw Lost closed while it still relied on the hold.
	Lost bool `json:"l,omitempty"`
}

// HoldSpan returns s, so that a Span, or a type that embeds one, is a Hold.
func (s Span) HoldSpan() Span { return s }

// Hold is what Check reads of a hold: its Span. A caller's own hold type
// embeds a Span and adds what its conflict function needs (which lock,
// read or write).
type Hold interface {
	HoldSpan() Span
}

// Overlap is a hold that began while too many others, conflicting with it,
// were open.
type Overlap[H Hold] struct {
	Hold H   // the hold that began
	Open []H // the holds of other owners open when it began, that conflict with it
}

// String says who took the lock when, and who held it.
func (o Overlap[H]) String() string {
	b := o.Hold.HoldSpan()
	open := make([]string, len(o.Open))
	for i, h := range o.Open {
		a := h.HoldSpan()
		open[i] = fmt.Sprintf("%s [%d, %d] lost=%v valid=%d (%v before it stopped)",
			a.Owner, a.Start, a.End, a.Lost, a.Valid, time.Duration(a.End-b.Start))
	}
	return fmt.Sprintf("%s took it at %d while %s held it", b.Owner, b.Start, strings.Join(open, ", "))
}

// Check returns the holds that began while permits or more holds of other
// owners that conflict with them were open (a hold is open from Start to
// End, End excluded), each with those holds, sorted by start. conflict
// says whether two holds of different owners exclude each other (holds of
// other locks, or two read holds, do not); nil means every two do.
//
// Violations: permits or more of the open holds were within the validity
// promised to them (or it was unknown); Open lists those. Late: that many
// were open only with the holds that had overrun their validity counted;
// Open lists them all.
//
// With permits 1 it is a mutex's check: any conflicting open hold is one
// too many.
func Check[H Hold](holds []H, permits int, conflict func(a, b H) bool) (violations, late []Overlap[H]) {
	s := slices.Clone(holds)
	slices.SortStableFunc(s, func(a, b H) int { return cmp.Compare(a.HoldSpan().Start, b.HoldSpan().Start) })
	var open []H
	for _, b := range s {
		start := b.HoldSpan().Start
		open = slices.DeleteFunc(open, func(a H) bool { return a.HoldSpan().End <= start })
		var valid, overrun []H
		for _, a := range open {
			as := a.HoldSpan()
			switch {
			case as.Owner == b.HoldSpan().Owner || (conflict != nil && !conflict(a, b)):
			case as.Valid == 0 || start < as.Valid:
				valid = append(valid, a)
			default:
				overrun = append(overrun, a)
			}
		}
		switch {
		case len(valid) >= permits:
			violations = append(violations, Overlap[H]{Hold: b, Open: valid})
		case len(valid)+len(overrun) >= permits:
			late = append(late, Overlap[H]{Hold: b, Open: slices.Concat(valid, overrun)})
		}
		open = append(open, b)
	}
	return violations, late
}
