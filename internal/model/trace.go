package model

import (
	"fmt"
	"strings"
	"time"
)

// Replay runs path from the initial state of c and returns one line per
// step: when, what happened, and the state after it (each node's holder,
// count and TTL, each owner's belief). The last line says which property
// the last step broke, if one did.
func Replay(c Config, path []Action) []string {
	s := Initial(&c)
	lines := make([]string, 0, len(path)+1)
	for i, a := range path {
		what := s.describe(&c, a)
		next, ok := s.Apply(&c, a)
		if !ok {
			lines = append(lines, fmt.Sprintf("%2d. %s: not possible", i+1, what))
			break
		}
		s = next
		lines = append(lines, fmt.Sprintf("%2d. t=%-5d %-52s | %s", i+1, s.T, what, s.summary(&c)))
		if v := s.Check(&c); v != "" {
			lines = append(lines, "    violated: "+v)
			break
		}
	}
	return lines
}

// describe says what step a does in s, before it is taken.
func (s *State) describe(c *Config, a Action) string {
	switch a.Kind {
	case ADeliver, ABreak, ADrop:
		m := &s.Msgs[a.Msg]
		call := fmt.Sprintf("o%d %s seq %d to n%d", m.Owner, m.Kind, m.Seq, m.Node)
		if m.Kind == KRelease || m.Kind == KAcquire {
			call = fmt.Sprintf("o%d %s(count %d, seq %d) to n%d", m.Owner, m.Kind, m.Count, m.Seq, m.Node)
		}
		return call + " " + a.verb()
	case ARestart:
		return fmt.Sprintf("n%d restarts empty", a.Node)
	case AAdvance, ATick:
		return "time passes"
	case AForce:
		name := ""
		if c.multi() {
			name = " of name " + nameList(1<<a.Msg)
		}
		return "a ForceUnlock" + name + " reads the holders"
	case AForceNode:
		return fmt.Sprintf("force.lua runs on n%d", a.Node)
	case AEvict:
		name := ""
		if c.multi() {
			name = " of name " + nameList(1<<a.Msg)
		}
		return fmt.Sprintf("n%d loses the key%s (evicted)", a.Node, name)
	case AAbandon:
		if a.Msg == 1 {
			return fmt.Sprintf("o%d watchdog round stops waiting", a.Owner)
		}
		return fmt.Sprintf("o%d round stops waiting (timeout)", a.Owner)
	}
	return fmt.Sprintf("o%d %s", a.Owner, a.verb())
}

func (a Action) verb() string {
	return map[ActionKind]string{
		ALock: "Lock", ALockLease: "LockLease", AUnlock: "Unlock", AExpire: "loss timer fires",
		ARenew: "watchdog sends a renewal", ADeliver: "lands", ABreak: "breaks (may land later)",
		ADrop: "is lost", APause: "process paused", AResume: "process resumed", AWithdraw: "withdraws its intent",
		ARefresh: "keeper refreshes its intents", ACrash: "process dies (a waiter)",
	}[a.Kind]
}

// summary is the state in one line: per node the holder and its count and
// TTL, per owner what it believes.
func (s *State) summary(c *Config) string {
	var b strings.Builder
	for n := 0; n < c.Nodes; n++ {
		st := &s.Nodes[n].Store
		o := st.holder()
		switch {
		case c.rw():
			b.WriteString(s.rwSummary(c, n))
		case c.family():
			b.WriteString(s.familySummary(c, n))
		case o < 0:
			fmt.Fprintf(&b, "n%d[-] ", n)
		default:
			fmt.Fprintf(&b, "n%d[o%d:%d %dms] ", n, o, st.Owners[o].Count, st.Lock.Exp-s.T)
		}
	}
	for o := 0; o < c.Owners; o++ {
		h := &s.Owners[o].H
		if s.believes(c, o) {
			fmt.Fprintf(&b, " o%d holds %d, %dms left", o, h.Count, h.Until-s.clockOf(c, o))
		}
	}
	return b.String()
}

// String describes a result.
func (r Result) String() string {
	v := "no violation"
	if r.Violation != "" {
		v = fmt.Sprintf("violation after %d steps: %s", len(r.Path), r.Violation)
	}
	if r.Walks > 0 {
		return fmt.Sprintf("%d walks, %d steps, longest %d, %v: %s", r.Walks, r.States, r.Depth, r.Elapsed.Round(time.Millisecond), v)
	}
	return fmt.Sprintf("%d states, depth %d, %v: %s", r.States, r.Depth, r.Elapsed.Round(time.Millisecond), v)
}
