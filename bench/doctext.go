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

func cpuPer(r *seqResult) string { return fmtDur(r.cpu) }

func uncParagraph(res *results) string {
	u := res.unc
	if u == nil {
		return ""
	}
	rl, rs, rsf, rk, fl := u.get(kRedlock), u.get(kRedsync), u.get(kRedsyncFF), u.get(kRedislock), u.get(kFloor)
	if rl == nil || rs == nil || rsf == nil || rk == nil || fl == nil {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Every quorum contender makes the same two fan-outs per op, acquire then release, each to all five nodes; redlock, redsync with fail-fast and the floor return at the third answer, plain redsync waits for all five. So the differences among them are work, not round trips. In this run redlock's p50 was %s the floor's, redsync's %s and redsync failfast's %s; redislock, one node and one round trip each way, %s. Per Lock+Unlock, redlock allocated %.0f objects (%.0f B) against redsync's %.0f and the floor's %.0f, spent %s of client CPU (redsync %s, floor %s) and %s of redis-server CPU summed over the five nodes (redsync %s, floor %s). The client and the five servers share %d CPUs here, so CPU spent anywhere shows up as latency.\n\n",
		fmtRatio(rl.ratio), fmtRatio(rs.ratio), fmtRatio(rsf.ratio), fmtRatio(rk.ratio),
		rl.mallocs, rl.bytes, rs.mallocs, fl.mallocs, cpuPer(rl), cpuPer(rs), cpuPer(fl), fmtDur(rl.srv), fmtDur(rs.srv), fmtDur(fl.srv), res.machine.nproc)
	if sites := res.allocSites[kRedlock]; len(sites) > 0 {
		total := 0.0
		for _, s := range sites {
			total += s.perOp
		}
		ftotal := 0.0
		for _, s := range res.allocSites[kFloor] {
			ftotal += s.perOp
		}
		fmt.Fprintf(&b, "Where redlock's allocations come from: a separate pass of 300 Lock+Unlock with every allocation sampled (`runtime.MemProfileRate = 1`), each charged to the first frame outside the runtime and the small standard helpers (bytes, fmt, strconv, sync, time). %.0f objects per op in all (the floor: %.0f by the same count):\n\n", total, ftotal)
		var rows [][]string
		for i, s := range sites {
			if i == 12 {
				break
			}
			rows = append(rows, []string{"`" + s.fn + "`", fmt.Sprintf("%.1f", s.perOp), fmt.Sprintf("%.0f", s.bytesOp)})
		}
		b.WriteString(table([]string{"allocating function", "objects/op", "bytes/op"}, rows))
		b.WriteString("\nA Lock+Unlock is ten node calls (two fan-outs to five nodes), so 10 objects per op is one per node call.")
		for i, s := range sites {
			if i == 12 || s.perOp < 4 {
				break
			}
			if n, ok := noteFor(s.fn); ok {
				fmt.Fprintf(&b, " `%s` (%.0f/op): %s.", s.fn, s.perOp, n.what)
			}
		}
		b.WriteString(" The floor bounds each command with `DoWithTimeout` (a read deadline on the connection) and passes only strings and ints; its own allocations are its per-attempt channels and one goroutine per node.\n")
	}
	return b.String()
}

func tputParagraph(res *results) string {
	if res.tput == nil {
		return ""
	}
	parts := []string{}
	for _, t := range res.tput {
		if t.ops == 0 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %s + %s", t.kind, fmtDur(t.cpu/time.Duration(t.ops)), fmtDur(t.srv/time.Duration(t.ops))))
	}
	rl := findTput(res.tput, kRedlock)
	return fmt.Sprintf("With %d goroutines the limit is the %d CPUs that the client and the five servers share, not the network: the table's client and server CPU per op are what each op costs (client + server: %s). redlock did %.0f ops/s, %s the floor's.",
		res.cfg.tputGoroutines, res.machine.nproc, strings.Join(parts, "; "), rl.median(), fmtRatio(rl.ratio))
}

func contParagraph(res *results) string {
	if res.barge == nil || res.handoff == nil {
		return ""
	}
	bl, bs, bf := findCont(res.barge, kRedlock), findCont(res.barge, kRedsync), findCont(res.barge, kFloor)
	hl, hs, hf := findCont(res.handoff, kRedlock), findCont(res.handoff, kRedsync), findCont(res.handoff, kFloor)
	var b strings.Builder
	fmt.Fprintf(&b, "**Barge.** redlock's waiters block in `Lock`, subscribed to the lock's unlock channel on every node; inside a client they queue FIFO and only the head contends. The releaser competes again at once, yet it took %s of the acquisitions (per goroutine %d–%d). redsync's waiters sleep 50–250 ms between tries, so the releaser, trying again at once, wins nearly always: %s self-handoff, %d–%d per goroutine; its %.0f acquisitions/s are mostly one goroutine re-taking its own lock. The floor's eight pollers (every millisecond, five nodes each) load the two CPUs: %.0f/s, gap p99 %s.\n\n",
		pctStr(bl.self, bl.acq), bl.minPer, bl.maxPer, pctStr(bs.self, bs.acq), bs.minPer, bs.maxPer, bs.median(), bf.median(), fmtDur(pct(bf.gaps, 99)))
	fmt.Fprintf(&b, "**Handoff.** Every acquisition is a handoff to a waiter, so retry delays show. A redlock release deletes the key and publishes on every node; the head waiter of each client wakes on the first message and tries at once: gap p50 %s, p99 %s, %.0f acquisitions/s. redsync's waiters learn of the release only at their next try: gap p50 %s, p99 %s, %.0f acquisitions/s (redlock %s that). The floor, polling every millisecond: gap p50 %s, %.0f/s. With a %v critical section one cycle is at least the critical section plus the gap, so %.0f/s is the most a gap of %s allows.",
		fmtDur(pct(hl.gaps, 50)), fmtDur(pct(hl.gaps, 99)), hl.median(), fmtDur(pct(hs.gaps, 50)), fmtDur(pct(hs.gaps, 99)), hs.median(),
		fmtRatio(hl.median()/hs.median()), fmtDur(pct(hf.gaps, 50)), hf.median(), res.cfg.crit,
		1/(res.cfg.crit.Seconds()+pct(hl.gaps, 50).Seconds()), fmtDur(pct(hl.gaps, 50)))
	return b.String()
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
	case r.timedOut && len(r.lat) == 0:
		return "timed out (an op hung past the per-op bound)"
	case r.timedOut:
		return fmt.Sprintf("p50 %s, then timed out", fmtDur(pct(r.lat, 50)))
	}
	return fmt.Sprintf("p50 %s (%s the floor)", fmtDur(pct(r.lat, 50)), fmtRatio(r.ratio))
}

func faultParagraph(res *results) string {
	var b strings.Builder
	if res.slow != nil {
		fmt.Fprintf(&b, "**Slow minority.** Plain redsync waits for every node, so each op pays two round trips to a slow node: %s. redsync failfast (%s), redlock (%s) and the floor (%s) decide at the third answer; the slow nodes' answers arrive after the op returned. Every byte here also passes through redlocktest's proxy, which runs in the benchmark's own process, so a contender that sends more bytes or runs more goroutines per op pays for it twice.\n\n",
			seqStatus(res.slow, kRedsync), seqStatus(res.slow, kRedsyncFF), seqStatus(res.slow, kRedlock), fmtDur(res.slow.p50(kFloor)))
	}
	if res.paused != nil {
		fmt.Fprintf(&b, "**Paused minority.** A stopped redis-server keeps its connections open and never answers. Plain redsync: %s: at redigo's defaults its commands have no read timeout and it waits for every node, so `Lock` returns only when the nodes resume (its context bounds only the connection checkout). redsync failfast: %s: it returns at the majority, but each call leaves a goroutine and a connection blocked on each paused node until it resumes. redlock: %s: every node call is bounded by the node timeout (250 ms) and the round is decided at the third answer; the blocked calls end at the timeout, in the background. The floor: %s.\n\n",
			seqStatus(res.paused, kRedsync), seqStatus(res.paused, kRedsyncFF), seqStatus(res.paused, kRedlock), fmtDur(res.paused.p50(kFloor)))
	}
	if res.dead != nil {
		fmt.Fprintf(&b, "**Dead minority.** Connections to a killed node are refused at once, so nobody waits: redlock %s, redsync %s, redsync failfast %s.",
			seqStatus(res.dead, kRedlock), seqStatus(res.dead, kRedsync), seqStatus(res.dead, kRedsyncFF))
	}
	return b.String()
}

func dmStatus(d *deadMajResult) string {
	if d == nil {
		return "not run"
	}
	if d.timedOut && d.trials == 0 {
		return "timed out"
	}
	return fmt.Sprintf("p50 %s, max %s, every dead node named in %d of %d trials", fmtDur(pct(d.times, 50)), fmtDur(pct(d.times, 100)), d.named, d.trials)
}

func deadMajParagraph(res *results) string {
	if res.deadMaj == nil {
		return ""
	}
	rl, rs, rk := findDM(res.deadMaj, kRedlock), findDM(res.deadMaj, kRedsync), findDM(res.deadMaj, kRedislock)
	s := fmt.Sprintf("redlock decides as soon as a majority can no longer answer (three failures of five) and returns `ErrNoQuorum` wrapping one `*NodeError` per failed node, each with the node's URL and address: %s. redsync names nodes by their index (`node #0`); only its dial errors carry an address, so the first trial after the kill, which fails on pooled connections with EOF, names no address: %s. ",
		dmStatus(rl), dmStatus(rs))
	if rk != nil && rk.trials > 0 {
		s += fmt.Sprintf("redislock's single node is dead; go-redis retries a failed command (three retries with backoff by default, each on a new connection), until it gives up or the context ends: p50 %s, max %s, first trial's error `%s`.", fmtDur(pct(rk.times, 50)), fmtDur(pct(rk.times, 100)), rk.errText)
	}
	return s
}

func wdParagraph(res *results) string {
	const noWatchdog = "redsync has no watchdog: a holder renews with `Extend`, one fan-out per lock, so 10,000 locks cost 10,000 round trips per node per period; there is nothing to run here."
	w := res.wd
	if w == nil || len(w.rounds) == 0 {
		return noWatchdog
	}
	var b strings.Builder
	r := w.rounds[len(w.rounds)-1]
	for _, x := range w.rounds {
		if x.alive > 0 {
			r = x // the last round that had holds to renew
		}
	}
	if r.alive == 0 {
		fmt.Fprintf(&b, "No measured round had a hold left to renew: every one of the %d holds was lost first. ", w.locks)
	}
	fmt.Fprintf(&b, "A renewal round is one pipelined round trip per node carrying every live hold, 1,000 holds per renew.lua call: the %d live holds of the round described here made %s on node 0. ", r.alive, r.cmds)
	if strings.Contains(r.cmds, "INFO") {
		b.WriteString("The `INFO` is the restart quarantine's check of which server process answers: redlock makes it every lease/3 on pools it did not open (this scenario hands its own counting pools to `redlock.New`); on `Dial`'s pools it runs once per new connection instead. ")
	}
	fmt.Fprintf(&b, "Each node spent %s of server time in those scripts (`INFO commandstats` usec), the round took %s from the first request to the last reply, and %s of client CPU.",
		fmtDur(time.Duration(avg(r.evalshaUsec))*time.Microsecond), fmtDur(r.wall), fmtDur(r.cpu))
	var slowest time.Duration
	for _, x := range w.rounds {
		slowest = max(slowest, x.wall)
	}
	fmt.Fprintf(&b, " The slowest measured round took %s from its first request to its last reply, %.0f%% of the 250 ms node timeout that bounds each node's whole round.", fmtDur(slowest), 100*slowest.Seconds()/0.25)
	_, renewed, alive := wdSummary(w)
	failed := len(w.rounds) - fullRounds(w)
	if w.lostAcquire > 0 || w.lostEnd > 0 {
		fmt.Fprintf(&b, "\n\n**With the default node timeout the watchdog did not keep 10,000 holds on this machine.** %d of %d holds were already lost when the last `Lock` returned, %d of %d measured rounds failed to renew every live hold (%d of %d renewals), and %d holds were lost one lease after the measured rounds.",
			w.lostAcquire, w.locks, failed, len(w.rounds), renewed, alive, w.lostEnd)
	} else if failed > 0 {
		fmt.Fprintf(&b, "\n\n**With the default node timeout, renewal at this scale is marginal on this machine:** %d of %d measured rounds renewed no hold, or not all of them (%d of %d renewals in all). No hold was lost this time, because the next round succeeded within the validity (lease 3 s minus drift, a round every second); two failed rounds in a row would lose every hold.",
			failed, len(w.rounds), renewed, alive)
	}
	if failed > 0 || w.lostAcquire > 0 || w.lostEnd > 0 {
		b.WriteString(" A node's whole round, every hold at once, is bounded by one node timeout (250 ms); the node needs the server time above (it grows when the five nodes and the client compete for two CPUs), and a node whose reply comes late counts as failed for every hold at once; when that happens on three nodes, no hold is renewed in that round.")
		if len(w.warnings) > 0 {
			fmt.Fprintf(&b, " redlock's own warnings during this pass: %s.", strings.Join(w.warnings, "; "))
		}
	}
	if l := res.wdLong; l != nil && len(l.rounds) > 0 {
		lm, lr, la := wdSummary(l)
		lr0 := l.rounds[len(l.rounds)-1]
		fmt.Fprintf(&b, "\n\nWith `WithNodeTimeout(%s)`: %d of %d holds lost while acquiring; the measured round(s) renewed %d of %d live holds with at most %d round trips per node (%s on node 0), %s of server time per node, %s wall, %s of client CPU; %d holds lost one lease later.",
			l.nodeTimeout, l.lostAcquire, l.locks, lr, la, lm, lr0.cmds, fmtDur(time.Duration(avg(lr0.evalshaUsec))*time.Microsecond), fmtDur(lr0.wall), fmtDur(lr0.cpu), l.lostEnd)
		if len(l.warnings) > 0 {
			fmt.Fprintf(&b, " Warnings: %s.", strings.Join(l.warnings, "; "))
		}
	}
	b.WriteString("\n\n" + noWatchdog)
	return b.String()
}

func herdParagraph(res *results) string {
	if res.herd == nil {
		return ""
	}
	rl, rs, fl, rk := findHerd(res.herd, kRedlock), findHerd(res.herd, kRedsync), findHerd(res.herd, kFloor), findHerd(res.herd, kRedislock)
	if rl == nil || rs == nil || fl == nil || rk == nil {
		return ""
	}
	return fmt.Sprintf("redlock queues each client's waiters FIFO, so only four heads contend across processes; yet it made %s attempts per acquisition (%.0f acquisitions/s). Each release publishes the same message on all five nodes and a head wakes once per release, but on every release the four heads all try: one wins and three fail; when heads split the nodes (none reaches three), all roll back, and each rollback that deletes the key is a new message that wakes the others again (a split vote makes a head pause for a random time first). redsync's 64 sleepers make %s attempts per acquisition (%.0f/s) because each sleeps 50–250 ms between tries, at the price of unfairness (%d–%d acquisitions per goroutine) and the handoff gaps above. The floor and redislock poll every millisecond: %s and %s attempts per acquisition, %.0f and %.0f acquisitions/s, the CPUs busy with attempts that cannot win.",
		fmtNum(rl.attempts), rl.acqPerSec, fmtNum(rs.attempts), rs.acqPerSec, rs.minPer, rs.maxPer, fmtNum(fl.attempts), fmtNum(rk.attempts), fl.acqPerSec, rk.acqPerSec)
}

func findRestart(rs []*restartResult, k kind) *restartResult {
	for _, r := range rs {
		if r.kind == k {
			return r
		}
	}
	return nil
}

func restartParagraph(res *results) string {
	if res.restartNow == nil {
		return ""
	}
	var b strings.Builder
	rl, rs, rn := findRestart(res.restartNow, kRedlock), findRestart(res.restartNow, kRedsync), findRestart(res.restartNow, kRedsyncNX)
	fmt.Fprintf(&b, "When B tries at once, the restarted node 0 is empty and nodes 3 and 4 never had A's key, so three nodes say yes to B while A still counts on its two. redsync counts the empty node: %d double holds in %d trials, %d in %d with `WithSetNXOnExtend` (the option acts only when the holder extends). redlock: %d double holds in %d trials. ",
		rs.violation, rs.trials, rn.violation, rn.trials, rl.violation, rl.trials)
	if rl.violation == 0 && rl.acquired == 0 {
		b.WriteString("Its restart quarantine keeps node 0 out of every quorum: B's client saw node 0's run_id on its first try and a different one after the restart, so node 0's yes does not count until the quarantine (the longest lease, 30 s by default) has passed, and B cannot reach three nodes. ")
	} else if rl.violation > 0 {
		b.WriteString("redlock counted the empty node like redsync does: without restart quarantine a node that lost its data votes again at once. ")
	}
	if res.restartR != nil {
		rl2, rs2, rn2 := findRestart(res.restartR, kRedlock), findRestart(res.restartR, kRedsync), findRestart(res.restartR, kRedsyncNX)
		fmt.Fprintf(&b, "After one renewal by A: with `WithSetNXOnExtend`, A's `Extend` re-creates the key on the empty nodes, B got the lock in %d of %d trials; plain redsync's `Extend` fails (A's key is on two nodes only), so A is told in %d of the %d trials where B got the lock: no double hold, but the lock moved to B. redlock: B got the lock in %d of %d trials, %d double holds.",
			rn2.acquired, rn2.trials, rs2.told, rs2.acquired, rl2.acquired, rl2.trials, rl2.violation)
	}
	return b.String()
}

// missedNotes says, for each missed target, by how much, why, and what
// would close it.
func missedNotes(res *results) string {
	var notes []string
	u := res.unc
	if u != nil && u.get(kRedlock) != nil && u.get(kRedsync) != nil {
		rl, rs := u.get(kRedlock), u.get(kRedsync)
		r := rl.ratio
		if r > 1.15 || rl.mallocs > rs.mallocs {
			var fixes []string
			seen := map[string]bool{}
			covered := 0.0
			for i, s := range res.allocSites[kRedlock] {
				if i == 12 || s.perOp < 4 {
					break
				}
				if n, ok := noteFor(s.fn); ok && n.fix != "" {
					covered += s.perOp
					if !seen[n.fix] {
						seen[n.fix] = true
						fixes = append(fixes, n.fix)
					}
				}
			}
			note := fmt.Sprintf("**Uncontended latency and allocations** (p50 %s the floor, target 1.15×; %.0f allocations per op against redsync's %.0f): the round trips are the floor's; the difference is work per node call, in the client (see the allocation table under Uncontended) and in the scripts (server CPU per op: redlock %s, floor %s).",
				fmtRatio(r), rl.mallocs, rs.mallocs, fmtDur(rl.srv), fmtDur(u.get(kFloor).srv))
			if len(fixes) > 0 {
				what := "What would close the allocation gap"
				if rl.mallocs <= rs.mallocs {
					what = "Allocations are within the target; what would still cut the client's work per call"
				}
				note += fmt.Sprintf(" %s: %s; the sites these address are %.0f objects per op in this run.", what, strings.Join(fixes, "; "), covered)
			}
			notes = append(notes, note)
		}
	}
	if res.handoff != nil {
		hl, hs := findCont(res.handoff, kRedlock), findCont(res.handoff, kRedsync)
		if x := hl.median() / hs.median(); x < 10 {
			notes = append(notes, fmt.Sprintf("**Handoff rate** (%s redsync's, the target is 10×): with a %v critical section the cycle is at least %v plus the gap; 10× redsync's %.0f/s is %.0f/s, a mean cycle of %s, while redlock's mean cycle was %s (gap p50 %s, p99 %s). The tail of the gap is where it goes: every release publishes on five nodes and each message re-wakes the head waiter, so heads retry while the new holder holds the lock, and a split vote between the two clients' heads costs both a rollback. What would close it: wake a head once per release (the releasing owner and sequence in the message, duplicates dropped), and after a split vote back off by a random fraction of a round trip before the next try.",
				fmtRatio(x), res.cfg.crit, res.cfg.crit, hs.median(), 10*hs.median(), fmtDur(time.Duration(float64(time.Second)/(10*hs.median()))), fmtDur(time.Duration(float64(time.Second)/hl.median())), fmtDur(pct(hl.gaps, 50)), fmtDur(pct(hl.gaps, 99))))
		}
		if g := pct(hl.gaps, 50); g >= time.Millisecond {
			notes = append(notes, fmt.Sprintf("**Handoff gap** (p50 %s): the gap is one release round trip, one pub/sub message and one acquire round trip; on this machine each is a few hundred microseconds because the five servers share two CPUs with the client. The wake-up duplication above adds attempts that compete with the real one.", fmtDur(g)))
		}
	}
	for _, f := range []struct {
		name string
		s    *seqScenario
	}{{"Slow minority", res.slow}, {"Paused minority", res.paused}} {
		if f.s == nil {
			continue
		}
		if r := f.s.ratioOf(kRedlock); r > 1.3 {
			base := math.NaN()
			if u != nil {
				base = u.ratioOf(kRedlock)
			}
			notes = append(notes, fmt.Sprintf("**%s** (p50 %s the floor, target 1.3×; healthy nodes in the same run: %s): both decide at the third answer, so the gap is the healthy case's per-call work plus the calls left in flight to the faulty nodes, each holding a goroutine and a pool connection until the node answers or the node timeout (250 ms) fires; on paused nodes each timed-out connection is closed and the next call dials again. What would close it: the same per-call changes as for the uncontended case.",
				f.name, fmtRatio(r), fmtRatio(base)))
		}
	}
	if d := findDM(res.deadMaj, kRedlock); d != nil && d.trials > 0 {
		if w := pct(d.times, 100); w > 10*time.Millisecond {
			notes = append(notes, fmt.Sprintf("**Dead majority** (worst %s): redlock returns at the third failure; a slow trial is the dial of a refused connection or the machine's noise.", fmtDur(w)))
		}
		if d.named < d.trials {
			notes = append(notes, fmt.Sprintf("**Dead majority, naming** (%d of %d trials): the early decision returns at the third failure; the error lists the failed nodes known then.", d.named, d.trials))
		}
	}
	if w := res.wd; w != nil && len(w.rounds) > 0 {
		renewed, alive := 0, 0
		for _, r := range w.rounds {
			renewed, alive = renewed+r.renewed, alive+r.alive
		}
		if renewed < alive || w.lostAcquire > 0 || w.lostEnd > 0 {
			notes = append(notes, fmt.Sprintf("**Watchdog at scale**: one node timeout bounds a node's whole round, all holds at once; at 10,000 holds nodes' replies came after it: %d of %d measured rounds did not renew every hold, %d holds lost while acquiring, %d one lease after the rounds (see the watchdog section).", len(w.rounds)-fullRounds(w), len(w.rounds), w.lostAcquire, w.lostEnd)+" What would close it: a deadline per 1,000-hold batch rather than per round (or a round deadline that grows with the batches, bounded by the lease/3 period), counting each batch's holds as soon as its reply is read; and a cheaper renew.lua (`PEXPIRE key ms GT` would replace the PTTL-then-PEXPIRE pair).")
		}
	}
	if len(notes) == 0 {
		return "Every target was met in this run.\n"
	}
	return "Notes on the missed targets:\n\n- " + strings.Join(notes, "\n- ") + "\n"
}

// sumSites adds the objects per op of the allocation sites whose function
// contains any of subs.
func sumSites(sites []allocSite, subs ...string) float64 {
	t := 0.0
	for _, s := range sites {
		for _, sub := range subs {
			if strings.Contains(s.fn, sub) {
				t += s.perOp
				break
			}
		}
	}
	return t
}
