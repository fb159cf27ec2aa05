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
	lines  int // lines of the last table drawn (terminal)
	events int // events already printed (plain)
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

func (s *screen) close() {
	if !s.plain {
		fmt.Fprint(s.w, "\x1b[?25h")
	}
}

// frame shows one moment; prev is the moment shown before, for rates.
func (s *screen) frame(now, prev snapshot, d *demoRun) {
	rate := 0.0
	if dt := (now.at - prev.at).Seconds(); dt > 0 {
		rate = float64(now.acquired-prev.acquired) / dt
	}
	up := 0
	for _, st := range now.state {
		if st != "DOWN" {
			up++
		}
	}
	if s.plain {
		for _, e := range now.events[s.events:] {
			fmt.Fprintf(s.w, "%s\n", e)
		}
		s.events = len(now.events)
		fmt.Fprintf(s.w, "%6.1fs  acq/s %5.0f  handoff p50 %-7s p99 %-7s  nodes up %d/%d  holds lost %d  violations %d\n",
			now.at.Seconds(), rate, round(now.p50), round(now.p99), up, len(now.state), now.lost, now.violations())
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
	line("  violations     %d   (owners inside at once %d, counter %d of %d increments)", now.violations(), now.overlaps, now.counter, now.writes)
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
