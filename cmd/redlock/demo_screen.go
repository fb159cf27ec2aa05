package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// screen shows the demo: a table redrawn in place on a terminal, plain lines
// (one per second, and one per event) otherwise.
type screen struct {
	w      io.Writer
	plain  bool
	lines  int        // lines of the last table drawn (terminal)
	events int        // events already printed (plain)
	recent []snapshot // the moments shown in the last second, for the rate
}

func newScreen(w io.Writer, forcePlain bool) *screen {
	return &screen{w: w, plain: forcePlain || !isTerminal(w)}
}

// isTerminal reports whether w is a character device that can take ANSI
// escapes: a terminal, not a pipe or a file, and not TERM=dumb.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || os.Getenv("TERM") == "dumb" {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func (s *screen) header(line string) {
	fmt.Fprintln(s.w, line)
	if !s.plain {
		fmt.Fprint(s.w, "\x1b[?25l") // hide the cursor while redrawing
	}
}

// last shows the final moment: the table on a terminal, the events not yet
// printed otherwise (the summary follows).
func (s *screen) last(now, prev snapshot, d *demoRun) {
	if s.plain {
		s.printEvents(now)
		return
	}
	s.frame(now, prev, d)
	fmt.Fprint(s.w, "\x1b[?25h") // show the cursor again
}

func (s *screen) printEvents(now snapshot) {
	for _, e := range now.events[s.events:] {
		fmt.Fprintf(s.w, "%s\n", e)
	}
	s.events = len(now.events)
}

// frame shows one moment; prev is the moment shown before, for rates.
func (s *screen) frame(now, prev snapshot, d *demoRun) {
	// The rate over the last second or so, whatever the refresh period.
	s.recent = append(s.recent, prev)
	for len(s.recent) > 1 && now.at-s.recent[1].at >= time.Second {
		s.recent = s.recent[1:]
	}
	rate := 0.0
	if from := s.recent[0]; now.at > from.at {
		rate = float64(now.acquired-from.acquired) / (now.at - from.at).Seconds()
	}
	up := 0
	for _, st := range now.state {
		if st != "DOWN" {
			up++
		}
	}
	if s.plain {
		s.printEvents(now)
		note := ""
		if now.holderLong {
			note = fmt.Sprintf("  (%s holding for %s)", now.holder, round(now.holderFor.Truncate(100*time.Millisecond)))
		}
		fmt.Fprintf(s.w, "%6.1fs  acq/s %5.0f  handoff p50 %-7s p99 %-7s  nodes up %d/%d  holds lost %d  stale writes refused %d  violations %d%s\n",
			now.at.Seconds(), rate, round(now.p50), round(now.p99), up, len(now.state), now.lost, now.refused, now.violations(), note)
		return
	}
	var b strings.Builder
	line := func(format string, args ...any) {
		fmt.Fprintf(&b, format, args...)
		b.WriteString("\x1b[K\n") // clear what is left of the old line
	}
	line("")
	line("  elapsed        %5.1fs of %v", now.at.Seconds(), d.cfg.duration)
	line("  acquisitions   %5.0f/s   (%d in all)", rate, now.acquired)
	line("  handoff gap    p50 %-8s p99 %-8s max %s", round(now.p50), round(now.p99), round(now.maxGap))
	var nodes []string
	for i, st := range now.state {
		nodes = append(nodes, fmt.Sprintf("n%d %s", i, st))
	}
	line("  nodes          %d/%d up, quorum %d: %s", up, len(now.state), len(now.state)/2+1, strings.Join(nodes, ", "))
	switch {
	case now.holder == "":
		line("  holder         -")
	case now.holderLong:
		line("  holder         %s for %s (longer than the %v lease: the watchdog renews it)", now.holder, round(now.holderFor.Truncate(100*time.Millisecond)), d.cfg.lease)
	default:
		line("  holder         %s", now.holder)
	}
	line("  long holds     %d kept past the lease by the watchdog", now.long)
	line("  holds lost     %d", now.lost)
	line("  guard          stale writes refused: %d, lost updates: %d", now.refused, now.lostUpdates())
	line("  violations     %d   (owners inside at once %d, counter %d of %d increments, stale fencing tokens %d)", now.violations(), now.overlaps, now.counter, now.writes, now.stale)
	line("")
	ev := now.events
	if len(ev) > 4 {
		ev = ev[len(ev)-4:]
	}
	for _, e := range ev {
		line("  %s", e)
	}
	if s.lines > 0 {
		fmt.Fprintf(s.w, "\x1b[%dF", s.lines) // back to the table's first line
	}
	fmt.Fprint(s.w, b.String()+"\x1b[J")
	s.lines = strings.Count(b.String(), "\n")
}
