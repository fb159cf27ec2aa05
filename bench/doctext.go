package main

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// The paragraphs that explain each scenario. The mechanisms they name are
// read off the code of each library; every number is taken from res.

func pctStr(part, whole int) string {
	if whole == 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f%%", 100*float64(part)/float64(whole))
}

// allocParagraph says where redlock's allocations come from, with the
// allocation table.
func allocParagraph(res *results) string {
	var b strings.Builder
	if sites := res.AllocSites[kRedlock]; len(sites) > 0 {
		total := 0.0
		for _, s := range sites {
			total += s.PerOp
		}
		ftotal := 0.0
		for _, s := range res.AllocSites[kFloor] {
			ftotal += s.PerOp
		}
		fmt.Fprintf(&b, "Where redlock's allocations come from: a separate pass of 300 Lock+Unlock with every allocation sampled (`runtime.MemProfileRate = 1`), each charged to the first frame outside the runtime and the small standard helpers (bytes, fmt, strconv, sync, time). %.0f objects per op in all (the floor: %.0f by the same count):\n\n", total, ftotal)
		var rows [][]string
		for i, s := range sites {
			if i == 12 {
				break
			}
			rows = append(rows, []string{"`" + s.Fn + "`", fmt.Sprintf("%.1f", s.PerOp), fmt.Sprintf("%.0f", s.BytesOp)})
		}
		b.WriteString(table([]string{"allocating function", "objects/op", "bytes/op"}, rows))
		b.WriteString("\nA Lock+Unlock is ten node calls (two fan-outs to five nodes), so 10 objects per op is one per node call.")
		for i, s := range sites {
			if i == 12 || s.PerOp < 4 {
				break
			}
			if n, ok := noteFor(s.Fn); ok {
				fmt.Fprintf(&b, " `%s` (%.0f/op): %s.", s.Fn, s.PerOp, n.what)
			}
		}
		b.WriteString(" The floor bounds each command with `DoWithTimeout` (a read deadline on the connection) and passes only strings and ints; its own allocations are its per-attempt channels and one goroutine per node.\n")
	}
	return b.String()
}

func tputParagraph(res *results) string {
	if res.Tput == nil {
		return ""
	}
	var parts, bounds []string
	for _, t := range res.Tput {
		if t.Ops == 0 {
			continue
		}
		c, sv := perOp(t.Cpu, t.Ops), perOp(t.Srv, t.Ops)
		parts = append(parts, fmt.Sprintf("%s %s + %s", t.Kind, fmtDur(c), fmtDur(sv)))
		if c+sv > 0 {
			bounds = append(bounds, fmt.Sprintf("%s %.0f (measured %.0f)", t.Kind, float64(res.Machine.Nproc)*float64(time.Second)/float64(c+sv), t.median()))
		}
	}
	rl, rs, fp := find(res.Tput, kRedlock), find(res.Tput, kRedsync), find(res.Tput, kFloorPipe)
	if rl == nil || rs == nil || fp == nil {
		return ""
	}
	return fmt.Sprintf("With %d goroutines the limit is the %d CPUs that the client and the five servers share, not the network: the table's client and server CPU per op are what each op costs (client + server: %s). %d CPU-seconds per second divided by that cost bounds each rate (ops/s at most: %s). The floor, redsync and redislock send each command on a pooled connection of its own, a write and a read per command; redlock and the pipelined floor send every request queued on a node's connection since its last write in one write, and read the replies as one stream. redlock did %.0f ops/s: %s the floor's, %s redsync's, %s the pipelined floor's.",
		res.Cfg.TputGoroutines, res.Machine.Nproc, strings.Join(parts, "; "), res.Machine.Nproc, strings.Join(bounds, "; "),
		rl.median(), fmtRatio(rl.Ratio), fmtRatio(rl.median()/rs.median()), fmtRatio(rl.Pipe))
}

// seqStatus describes one contender in a fault scenario.
func seqStatus(s *seqScenario, k kind) string {
	if s == nil {
		return "not run"
	}
	r := s.get(k)
	switch {
	case r == nil:
		return "not run"
	case r.TimedOut && len(r.Lat) == 0:
		return "timed out (an op hung past the per-op bound)"
	case r.TimedOut:
		return fmt.Sprintf("p50 %s, then timed out", fmtDur(pct(r.Lat, 50)))
	}
	return fmt.Sprintf("p50 %s (%s the floor)", fmtDur(pct(r.Lat, 50)), fmtRatio(r.Ratio))
}

// dialsTo is k's dials to node i in a fault scenario; -1 when not counted.
func dialsTo(s *seqScenario, k kind, i int) int64 {
	if s == nil {
		return -1
	}
	if d, ok := s.Dials[k]; ok && i < len(d) {
		return d[i]
	}
	return -1
}

// dialsPerOp is k's dials to node i per Lock+Unlock of its own.
func dialsPerOp(s *seqScenario, k kind, i int) string {
	r := s.get(k)
	d := dialsTo(s, k, i)
	if r == nil || r.Ops == 0 || d < 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f", float64(d)/float64(r.Ops))
}

func dmStatus(d *deadMajResult) string {
	if d == nil {
		return "not run"
	}
	if d.TimedOut && d.Trials == 0 {
		return "timed out"
	}
	return fmt.Sprintf("p50 %s, max %s, every dead node named in %d of %d trials", fmtDur(pct(d.Times, 50)), fmtDur(pct(d.Times, 100)), d.Named, d.Trials)
}

// noWatchdog says why redsync has no row in the section on watchdog holds
// at scale.
const noWatchdog = "redsync has no watchdog: a holder renews with `Extend`, one fan-out per lock, so 10,000 locks cost 10,000 round trips per node per period; there is nothing to run here."

// scriptsText is what the scripts scenario says of a Lock+Unlock's server
// time, redlock's against the floor's; "" when it did not run.
func scriptsText(res *results) string {
	sc := res.Scripts
	if sc == nil {
		return ""
	}
	p := scriptPairs(sc)
	return fmt.Sprintf(" In scripts alone a Lock+Unlock costs redlock %.1f µs of server time per node and the floor %.1f µs (see Server time per script call): %.0f against %.0f µs over five nodes.", p[0].usec, p[2].usec, 5*p[0].usec, 5*p[2].usec) + callsText(sc)
}

// callsText breaks a script call's server time down, from the scripts
// scenario's rows that measure it (EVALSHA alone, one redis.call, the
// batch script): "" when the run has none of them.
func callsText(sc *scriptCosts) string {
	empty, one, exists := sc.get(scEmpty), sc.get(scOneCall), sc.get(scExists)
	alone, batched := scriptPairs(sc)[0].usec, scriptPairs(sc)[3].usec
	if empty == 0 || one == 0 || exists == 0 || batched == 0 {
		return ""
	}
	saves := "saves the server at most EVALSHA's own share of each call, not the commands inside"
	if batched >= alone {
		saves = "saves the server nothing here: each part's protected call and its own KEYS and ARGV tables in the batch script cost what one EVALSHA per call would"
	}
	return fmt.Sprintf(" Broken down: EVALSHA of a script that returns 1 costs the server %.2f µs; with one `redis.call('exists', KEYS[1])` in it, %.2f µs, against %.2f µs for `EXISTS` sent alone, so a command called from a script costs %.2f µs more than sent alone, and a Lock+Unlock calls 6 on each node (EXISTS, HSET and PEXPIRE in acquire.lua; HGET, DEL and PUBLISH in release.lua) against the floor's 3 (SET; GET and DEL). Coalescing %s: in calls of the batch script, 8 lock calls each, a Lock+Unlock costs %.1f µs per node against %.1f µs alone.",
		empty, one, exists, one-empty-exists, saves, batched, alone)
}

// missedNotes says, for each missed target, by how much and what the
// run's own numbers show about why.
func missedNotes(res *results) string {
	var notes []string
	scripts := scriptsText(res)
	if rl, rs, fl, fp := find(res.Tput, kRedlock), find(res.Tput, kRedsync), find(res.Tput, kFloor), find(res.Tput, kFloorPipe); rl != nil && rs != nil && fl != nil && fp != nil && rl.Ops > 0 {
		xf, xs := rl.median()/fl.median(), rl.median()/rs.median()
		cpu, srv := perOp(rl.Cpu, rl.Ops), perOp(rl.Srv, rl.Ops)
		if xf < 2 || xs < 2 || cpu >= perOp(rs.Cpu, rs.Ops) || srv >= perOp(rs.Srv, rs.Ops) {
			notes = append(notes, fmt.Sprintf("**Throughput** (%s the floor's and %s redsync's ops/s, target 2×; %s the pipelined floor's): the %d CPUs bound the rate, so it follows the CPU per op (client + server): redlock %s + %s, redsync %s + %s, floor %s + %s, pipelined floor %s + %s.%s",
				fmtRatio(xf), fmtRatio(xs), fmtRatio(rl.Pipe), res.Machine.Nproc, fmtDur(cpu), fmtDur(srv), fmtDur(perOp(rs.Cpu, rs.Ops)), fmtDur(perOp(rs.Srv, rs.Ops)),
				fmtDur(perOp(fl.Cpu, fl.Ops)), fmtDur(perOp(fl.Srv, fl.Ops)), fmtDur(perOp(fp.Cpu, fp.Ops)), fmtDur(perOp(fp.Srv, fp.Ops)), scripts))
		}
	}
	u := res.Unc
	if u != nil && u.get(kRedlock) != nil && u.get(kRedsync) != nil && u.get(kFloor) != nil {
		rl, rs, fl := u.get(kRedlock), u.get(kRedsync), u.get(kFloor)
		if rl.Ratio > 1.15 || rl.Mallocs > rs.Mallocs || rl.Bytes > rs.Bytes {
			var fixes []string
			seen := map[string]bool{}
			covered := 0.0
			for i, s := range res.AllocSites[kRedlock] {
				if i == 12 || s.PerOp < 4 {
					break
				}
				if n, ok := noteFor(s.Fn); ok && n.fix != "" {
					covered += s.PerOp
					if !seen[n.fix] {
						seen[n.fix] = true
						fixes = append(fixes, n.fix)
					}
				}
			}
			note := fmt.Sprintf("**Uncontended** (p50 %s the floor, target 1.15×; %.0f allocations and %.0f B per op against redsync's %.0f and %.0f B): the round trips are the floor's; the difference is work per node call, in the client (client CPU per op: redlock %s, floor %s; see the allocation table under Uncontended) and in the servers (server CPU per op: redlock %s, floor %s).%s",
				fmtRatio(rl.Ratio), rl.Mallocs, rl.Bytes, rs.Mallocs, rs.Bytes, fmtDur(rl.Cpu), fmtDur(fl.Cpu), fmtDur(rl.Srv), fmtDur(fl.Srv), scripts)
			if len(fixes) > 0 {
				note += fmt.Sprintf(" What would cut the client's work per call: %s; the sites these address are %.0f objects per op in this run.", strings.Join(fixes, "; "), covered)
			}
			notes = append(notes, note)
		}
	}
	for _, f := range []struct {
		name              string
		s                 *seqScenario
		limit, was, was37 float64 // was37: NaN where issue 37 sets no "no worse"
	}{{"2 of 5 slow", res.Slow, 1.1, before29.Slow, math.NaN()}, {"2 of 5 paused", res.Paused, 1.15, before29.Paused, before37.Paused}, {"2 of 5 dead", res.Dead, 1.05, before29.Dead, before37.Dead}} {
		if f.s == nil || f.s.get(kRedlock) == nil || f.s.get(kFloor) == nil {
			continue
		}
		rl, fl := f.s.get(kRedlock), f.s.get(kFloor)
		if rl.Ratio <= f.limit && notAbove(rl.Ratio, f.was) && (math.IsNaN(f.was37) || notAbove(rl.Ratio, f.was37)) {
			continue
		}
		base := math.NaN()
		if u != nil {
			base = u.ratioOf(kRedlock)
		}
		was := fmt.Sprintf("%s at %s", fmtRatio(f.was), before29.Commit)
		if !math.IsNaN(f.was37) {
			was += fmt.Sprintf(" and %s at %s", fmtRatio(f.was37), before37.Commit)
		}
		note := fmt.Sprintf("**%s** (p50 %s the floor, target %s and no worse than %s; %s the pipelined floor; healthy nodes in the same run: %s): both decide at the third answer and never wait for the faulty nodes; per op, redlock spent %s of client CPU and %s of server CPU, the floor %s and %s.",
			f.name, fmtRatio(rl.Ratio), fmtRatio(f.limit), was, fmtRatio(rl.Pipe), fmtRatio(base), fmtDur(rl.Cpu), fmtDur(rl.Srv), fmtDur(fl.Cpu), fmtDur(fl.Srv))
		if f.s == res.Slow {
			note += " Every byte also passes through the in-process proxy, so the client's CPU counts twice here."
		}
		notes = append(notes, note)
	}
	if p := res.Paused; p != nil {
		if ff := p.get(kRedsyncFF); ff != nil && len(ff.Lat) > 0 && p.p50(kRedlock) >= p.p50(kRedsyncFF) {
			note := fmt.Sprintf("**2 of 5 paused, against redsync failfast** (redlock %s, redsync failfast %s): ", fmtDur(p.p50(kRedlock)), fmtDur(p.p50(kRedsyncFF)))
			if u != nil {
				note += fmt.Sprintf("with healthy nodes in this run redsync failfast's p50 was %s the floor's and redlock's %s, and that order holds here; ", fmtRatio(u.ratioOf(kRedsyncFF)), fmtRatio(u.ratioOf(kRedlock)))
			}
			note += fmt.Sprintf("redsync failfast's call to a paused node blocks a goroutine and a connection and dials anew (%s dials per Lock+Unlock to node 3), off the path of its op, which returns at the majority.", dialsPerOp(p, kRedsyncFF, 3))
			notes = append(notes, note)
		}
		if d, ok := p.Dials[kRedlock]; ok {
			if worst := max(d[3], d[4]); worst > int64(backoffAllows(p.Window)) {
				notes = append(notes, fmt.Sprintf("**Dials to the paused nodes** (%d in %s, the backoff allows %d): more than one reconnect attempt per backoff period.", worst, fmtDur(p.Window), backoffAllows(p.Window)))
			}
		}
	}
	if h := res.Handoff; h != nil && find(h, kRedlock) != nil && find(h, kRedsync) != nil {
		hl, hs := find(h, kRedlock), find(h, kRedsync)
		g := pct(hl.Gaps, 50)
		b, b37 := before29, before37
		if x := hl.median() / hs.median(); g > before.Gap || x < before.HandoffRedsync || hl.Ratio < before.HandoffF ||
			!notAboveDur(g, b.Gap) || !notBelow(x, b.HandoffRedsync) || !notBelow(hl.Ratio, b.HandoffF) ||
			!notBelow(x, b37.HandoffRedsync) || !notBelow(hl.Ratio, b37.HandoffF) {
			notes = append(notes, fmt.Sprintf("**Handoff** (gap p50 %s, p99 %s; %.0f acquisitions/s, %s redsync's and %s the floor's; at %s: %s, %s and %s; at %s: %s, %s and %s; at %s: %s, %s and %s): a cycle is at least the %v critical section plus the gap, so the rate follows the mean gap, which the tail weighs on: the mean cycle was %s. The gap is the release reaching the nodes, the unlock message reaching the head waiter and the waiter's acquire round trip, each of which needs the CPUs the five servers and the client share. redsync's rate is set by its random sleeps between tries (50–250 ms), so the ratio to it also varies with those.",
				fmtDur(g), fmtDur(pct(hl.Gaps, 99)), hl.median(), fmtRatio(x), fmtRatio(hl.Ratio), before.Commit, fmtDur(before.Gap), fmtRatio(before.HandoffRedsync), fmtRatio(before.HandoffF),
				b.Commit, fmtDur(b.Gap), fmtRatio(b.HandoffRedsync), fmtRatio(b.HandoffF),
				b37.Commit, fmtDur(b37.Gap), fmtRatio(b37.HandoffRedsync), fmtRatio(b37.HandoffF), res.Cfg.Crit, fmtDur(time.Duration(float64(time.Second)/hl.median()))))
		}
	}
	for _, g := range append(closeTargets(res), pastTargets(res)...) {
		if g.ran && !g.met && g.why != "" {
			notes = append(notes, fmt.Sprintf("**%s**: %s, missed%s. %s", g.what, g.now, g.by, g.why))
		}
	}
	if len(notes) == 0 {
		return "Every target was met in this run.\n"
	}
	return "Notes on the missed targets:\n\n- " + strings.Join(notes, "\n- ") + "\n"
}

// scaleParagraph states the holds that fit per lease.
func scaleParagraph(res *results) string {
	s := res.Scale
	if s == nil || len(s.Curve) == 0 {
		return ""
	}
	var fit, over *scaleRun
	for _, r := range s.Curve {
		if r.fits() {
			fit = r
		} else if over == nil {
			over = r
		}
	}
	var b strings.Builder
	if fit == nil {
		fmt.Fprintf(&b, "No level of the curve fitted: at %s holds, %d of %d were renewed in the window and %d lost.", holdsLabel(over.Holds), over.Renewed, over.Alive, over.LostWindow)
		return b.String()
	}
	cost := fit.perHoldRound(fit.ClientCPU + fit.ServerCPU)
	share := float64(fit.perPeriod(fit.ClientCPU+fit.ServerCPU)) / float64(time.Duration(res.Machine.Nproc)*fit.Period)
	fmt.Fprintf(&b, "**On this machine, %s watchdog holds fit in one client with a %v lease**: the largest level measured at which every hold was renewed in every period and none was lost; their renewals took %s of CPU per %v period (client %s, servers %s), %.0f%% of the machine, and the longest wait for a renewal was %s.",
		holdsLabel(fit.Holds), fit.Lease, fmtDur(fit.perPeriod(fit.ClientCPU+fit.ServerCPU)), fit.Period, fmtDur(fit.perPeriod(fit.ClientCPU)), fmtDur(fit.perPeriod(fit.ServerCPU)),
		100*share, fmtDur(pct(fit.Delays, 100)))
	if over != nil {
		fmt.Fprintf(&b, " At %s holds the renewals no longer fitted: %d of %d renewed in the window, %d lost.", holdsLabel(over.Holds), over.Renewed, over.Alive, over.LostWindow)
	} else {
		fmt.Fprintf(&b, " The curve stopped there (its last level or its time budget), not at a failure.")
	}
	if cost > 0 {
		fmt.Fprintf(&b, " At the %s of CPU per hold per round measured there, renewals alone would take all %d CPUs at about %s holds per %v lease: an extrapolation, not a measurement, and an upper bound, since the holds' owners need the CPUs too.",
			fmtDur(cost), res.Machine.Nproc, holdsLabel(int(float64(time.Duration(res.Machine.Nproc)*fit.Period)/float64(cost)/1000)*1000), fit.Lease)
	}
	return b.String()
}

// intList is 100 and 1,000.
func intList(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
		if x >= 1000 {
			s[i] = fmt.Sprintf("%d,%03d", x/1000, x%1000)
		}
	}
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}

func waitersParagraph(res *results) string {
	w := res.Waiters
	if w == nil || len(w.Mem) == 0 || len(w.Runs) < 5 {
		return ""
	}
	lo, hi := w.Mem[0], w.Mem[len(w.Mem)-1]
	many, single, one := w.Runs[0], w.Runs[2], w.Runs[4]
	a, b := lo.Heap+lo.Stack, hi.Heap+hi.Stack
	shape := "so the cost per waiter stays flat"
	if b > 1.2*a || a > 1.2*b {
		shape = "so the cost per waiter is not flat"
	}
	return fmt.Sprintf("A waiter is the caller's goroutine blocked in `Lock` plus its place in its client's queue: %.1f KB with %d waiters and %.1f KB with %d, %s. With %d waiters in each of %d clients (%v critical section), %.0f handoffs/s at %s script calls per handoff per node, where one acquisition and one release make 2: the clients' heads take turns (docs/algorithm.md, Waiting), so about one head tries per release. With one waiter per client, %.0f handoffs/s at %s: a client whose only waiter won leaves the queue, and its next `Lock` makes a first attempt and, once queued, one more. In one client, %.0f handoffs/s at %s.",
		a/1024, lo.N, b/1024, hi.N, shape, many.PerClient, many.Clients, many.Crit, median(many.AcqPerSec), fmtNum(median(many.Calls)), median(single.AcqPerSec), fmtNum(median(single.Calls)), median(one.AcqPerSec), fmtNum(median(one.Calls)))
}
