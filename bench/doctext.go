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
	rl, rs, rsf, rk, fl, fp := u.get(kRedlock), u.get(kRedsync), u.get(kRedsyncFF), u.get(kRedislock), u.get(kFloor), u.get(kFloorPipe)
	if rl == nil || rs == nil || rsf == nil || rk == nil || fl == nil || fp == nil {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Every quorum contender makes the same two fan-outs per op, acquire then release, each to all five nodes; redlock, redsync with fail-fast and both floors return at the third answer, plain redsync waits for all five. So the differences among them are work, not round trips. In this run redlock's p50 was %s the floor's (%s the pipelined floor's), redsync's %s, redsync failfast's %s and the pipelined floor's %s; redislock, one node and one round trip each way, %s. Per Lock+Unlock, redlock allocated %.0f objects (%.0f B) against redsync's %.0f (%.0f B), the floor's %.0f and the pipelined floor's %.0f, spent %s of client CPU (redsync %s, floor %s, pipelined floor %s) and %s of redis-server CPU summed over the five nodes (redsync %s, floor %s, pipelined floor %s). The client and the five servers share %d CPUs here, so CPU spent anywhere shows up as latency.\n\n",
		fmtRatio(rl.ratio), fmtRatio(rl.pipe), fmtRatio(rs.ratio), fmtRatio(rsf.ratio), fmtRatio(fp.ratio), fmtRatio(rk.ratio),
		rl.mallocs, rl.bytes, rs.mallocs, rs.bytes, fl.mallocs, fp.mallocs, cpuPer(rl), cpuPer(rs), cpuPer(fl), cpuPer(fp), fmtDur(rl.srv), fmtDur(rs.srv), fmtDur(fl.srv), fmtDur(fp.srv), res.machine.nproc)
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
	var parts, bounds []string
	for _, t := range res.tput {
		if t.ops == 0 {
			continue
		}
		c, sv := perOp(t.cpu, t.ops), perOp(t.srv, t.ops)
		parts = append(parts, fmt.Sprintf("%s %s + %s", t.kind, fmtDur(c), fmtDur(sv)))
		if c+sv > 0 {
			bounds = append(bounds, fmt.Sprintf("%s %.0f (measured %.0f)", t.kind, float64(res.machine.nproc)*float64(time.Second)/float64(c+sv), t.median()))
		}
	}
	rl, rs, fp := findTput(res.tput, kRedlock), findTput(res.tput, kRedsync), findTput(res.tput, kFloorPipe)
	if rl == nil || rs == nil || fp == nil {
		return ""
	}
	return fmt.Sprintf("With %d goroutines the limit is the %d CPUs that the client and the five servers share, not the network: the table's client and server CPU per op are what each op costs (client + server: %s). %d CPU-seconds per second divided by that cost bounds each rate (ops/s at most: %s). The floor, redsync and redislock send each command on a pooled connection of its own, a write and a read per command; redlock and the pipelined floor send every request queued on a node's connection since its last write in one write, and read the replies as one stream. redlock did %.0f ops/s: %s the floor's, %s redsync's, %s the pipelined floor's.",
		res.cfg.tputGoroutines, res.machine.nproc, strings.Join(parts, "; "), res.machine.nproc, strings.Join(bounds, "; "),
		rl.median(), fmtRatio(rl.ratio), fmtRatio(rl.median()/rs.median()), fmtRatio(rl.pipe))
}

// scriptParagraph sets the script costs beside the server CPU per op.
func scriptParagraph(res *results) string {
	s := res.scripts
	if s == nil {
		return ""
	}
	pairs := scriptPairs(s)
	rl, fl := pairs[0].usec, pairs[2].usec
	var b strings.Builder
	fmt.Fprintf(&b, "redlock's Lock+Unlock costs the server %.1f µs per node in scripts (%.1f µs when the release writes a rollback mark, which it does only when a call of the acquisition may reach a node after the release, such as one that failed after it may have been written), against the floor's %.1f µs (%s). Over five nodes that is %.0f µs per op against the floor's %.0f µs.",
		rl, pairs[1].usec, fl, fmtRatio(rl/fl), 5*rl, 5*fl)
	if u := res.unc; u != nil && u.get(kRedlock) != nil && u.get(kFloor) != nil {
		fmt.Fprintf(&b, " The server CPU per op measured under Uncontended (redlock %s, floor %s, five nodes) also holds reading, parsing and answering each command, and the servers' own background work.", fmtDur(u.get(kRedlock).srv), fmtDur(u.get(kFloor).srv))
	}
	if r := s.get(scRenew1000); r > 0 {
		fmt.Fprintf(&b, " renew.lua costs %.2f µs per hold at 1,000 holds per call (%.2f µs for a call of one hold), so renewing 10,000 holds once takes about %s of script time on an idle node (the watchdog sends at most 250 holds per call); the section on watchdog holds at scale measures renewal with five nodes and the client sharing the CPUs (commandstats counts the time a script runs, including the time its server waits for a CPU).", r/1000, s.get(scRenew1), fmtDur(time.Duration(10*r)*time.Microsecond))
	}
	return b.String()
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
	fmt.Fprintf(&b, "**Handoff.** Every acquisition is a handoff to a waiter, so retry delays show. A redlock release deletes the key and publishes on every node; the head waiter of each client wakes on the first message, and the one whose turn it is tries at once: gap p50 %s, p99 %s, %.0f acquisitions/s. redsync's waiters learn of the release only at their next try: gap p50 %s, p99 %s, %.0f acquisitions/s (redlock %s that). The floor, polling every millisecond: gap p50 %s, %.0f/s. With a %v critical section one cycle is at least the critical section plus the gap, so %.0f/s is the most a gap of %s allows.",
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

// dialsTo is k's dials to node i in a fault scenario; -1 when not counted.
func dialsTo(s *seqScenario, k kind, i int) int64 {
	if s == nil {
		return -1
	}
	if d, ok := s.dials[k]; ok && i < len(d) {
		return d[i]
	}
	return -1
}

// dialsPerOp is k's dials to node i per Lock+Unlock of its own.
func dialsPerOp(s *seqScenario, k kind, i int) string {
	r := s.get(k)
	d := dialsTo(s, k, i)
	if r == nil || r.ops == 0 || d < 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f", float64(d)/float64(r.ops))
}

func faultParagraph(res *results) string {
	var b strings.Builder
	if s := res.slow; s != nil {
		fmt.Fprintf(&b, "**Slow minority.** Plain redsync waits for every node, so each op pays two round trips to a slow node: %s. redsync failfast (%s), redlock (%s) and the floors (floor %s, pipelined floor %s) decide at the third answer; the slow nodes' answers arrive after the op returned. Every byte here also passes through redlocktest's proxy, which runs in the benchmark's own process, so a contender that sends more bytes or runs more goroutines per op pays for it twice. A pooled connection stays busy with a slow node until its answer comes, after the op returned, so the pool-based contenders that return at the majority dial new connections as their pools grow (node 3: floor %d, redsync failfast %d dials); plain redsync, which waits for every answer, has its connections back before its next op (%d dials); redlock and the pipelined floor keep one connection per node (%d and %d dials).\n\n",
			seqStatus(s, kRedsync), seqStatus(s, kRedsyncFF), seqStatus(s, kRedlock), seqStatus(s, kFloor), seqStatus(s, kFloorPipe),
			dialsTo(s, kFloor, 3), dialsTo(s, kRedsyncFF, 3), dialsTo(s, kRedsync, 3), dialsTo(s, kRedlock, 3), dialsTo(s, kFloorPipe, 3))
	}
	if p := res.paused; p != nil {
		fmt.Fprintf(&b, "**Paused minority.** A stopped redis-server keeps its connections open and never answers. Plain redsync: %s: at redigo's defaults its commands have no read timeout and it waits for every node, so `Lock` returns only when the nodes resume (its context bounds only the connection checkout). redsync failfast: %s: it returns at the majority, but each call leaves a goroutine and a connection blocked on each paused node until it resumes, so the next call to that node dials again: %d dials to node 3, %s per Lock+Unlock. The floor: %s: each command to a paused node times out after 250 ms and its connection is discarded, so it too dials for every command (%d dials to node 3, %s per Lock+Unlock). ",
			seqStatus(p, kRedsync), seqStatus(p, kRedsyncFF), dialsTo(p, kRedsyncFF, 3), dialsPerOp(p, kRedsyncFF, 3), seqStatus(p, kFloor), dialsTo(p, kFloor, 3), dialsPerOp(p, kFloor, 3))
		d3, d4 := dialsTo(p, kRedlock, 3), dialsTo(p, kRedlock, 4)
		fmt.Fprintf(&b, "redlock: %s: the round is decided at the third answer and never waits for a paused node; the connection to it is closed once its oldest request is a node timeout past its deadline, and one reconnect at a time follows, with a backoff of %v doubling to %v after each failed attempt; each attempt (the dial, then INFO server and SCRIPT LOAD) waits for the paused node up to its set-up bound, max(2 s, 8 node timeouts) = 2 s, and fails. So it dialled node 3 %d times and node 4 %d times in %s (%s). Meanwhile requests to a paused node queue, unsent, while an attempt is in progress and fail at once between attempts; no round waits for them. The pipelined floor: %s: it stops writing to a node whose oldest request is past its deadline and fails new requests to it at once, keeping its connection: %d dials.\n\n",
			seqStatus(p, kRedlock), minBackoff, maxBackoff, d3, d4, fmtDur(p.window), dialEvery(p.window, max(d3, d4)), seqStatus(p, kFloorPipe), dialsTo(p, kFloorPipe, 3))
	}
	if d := res.dead; d != nil {
		fmt.Fprintf(&b, "**Dead minority.** Connections to a killed node are refused at once, so nobody waits: redlock %s, redsync %s, redsync failfast %s, the pipelined floor %s. The pool-based contenders dial for every command to a dead node (node 3: floor %d, redsync %d, redsync failfast %d dials, %s, %s and %s per Lock+Unlock); redlock's one reconnect loop per node dialled node 3 %d times in %s (%s); a request to a dead node fails at once while its last attempt has failed. The pipelined floor, with the same backoff and failing every request at once while it is down, dialled it %d times.",
			seqStatus(d, kRedlock), seqStatus(d, kRedsync), seqStatus(d, kRedsyncFF), seqStatus(d, kFloorPipe),
			dialsTo(d, kFloor, 3), dialsTo(d, kRedsync, 3), dialsTo(d, kRedsyncFF, 3), dialsPerOp(d, kFloor, 3), dialsPerOp(d, kRedsync, 3), dialsPerOp(d, kRedsyncFF, 3),
			dialsTo(d, kRedlock, 3), fmtDur(d.window), dialEvery(d.window, dialsTo(d, kRedlock, 3)), dialsTo(d, kFloorPipe, 3))
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
	s := fmt.Sprintf("redlock decides as soon as a majority can no longer answer (three failures of five) and returns `ErrNoQuorum` wrapping one `*NodeError` per failed node, each with the node's URL and address: %s. A request to a node whose last connection attempt failed fails at once with that attempt's error (attempts back off from %v to %v), so the third failure comes at once. ", dmStatus(rl), minBackoff, maxBackoff)
	if rs != nil && rs.named < rs.trials {
		s += fmt.Sprintf("redsync names nodes by their index (`node #0`); only its dial errors carry an address, so a trial that fails on pooled connections (the first after the kill, with EOF) names no address: %s. ", dmStatus(rs))
	} else {
		s += fmt.Sprintf("redsync: %s. ", dmStatus(rs))
	}
	if rk != nil && rk.trials > 0 {
		s += fmt.Sprintf("redislock's single node is dead; go-redis retries a failed command (three retries with backoff by default, each on a new connection), until it gives up or the context ends: p50 %s, max %s, first trial's error `%s`.", fmtDur(pct(rk.times, 50)), fmtDur(pct(rk.times, 100)), rk.errText)
	}
	return s
}

// noWatchdog says why redsync has no row in the section on watchdog holds
// at scale.
const noWatchdog = "redsync has no watchdog: a holder renews with `Extend`, one fan-out per lock, so 10,000 locks cost 10,000 round trips per node per period; there is nothing to run here."

func herdParagraph(res *results) string {
	if res.herd == nil {
		return ""
	}
	rl, rs, fl, rk := findHerd(res.herd, kRedlock), findHerd(res.herd, kRedsync), findHerd(res.herd, kFloor), findHerd(res.herd, kRedislock)
	if rl == nil || rs == nil || fl == nil || rk == nil {
		return ""
	}
	return fmt.Sprintf("redlock queues each client's waiters FIFO, so only four heads contend across processes, and the heads take turns: an attempt made while waiting that creates the key says so on the unlock channel (a take), from which every client knows which one waited longest; on a release that client's head tries first, the others two attempt times later per client ahead of them, and not at all once they hear the take. It made %s attempts per acquisition (%.0f acquisitions/s). When heads still split the nodes (none reaches three), all roll back, and each rollback that deletes the key is a new message (a split vote makes a head pause first). redsync's 64 sleepers make %s attempts per acquisition (%.0f/s) because each sleeps 50–250 ms between tries, at the price of unfairness (%d–%d acquisitions per goroutine) and the handoff gaps above. The floor and redislock poll every millisecond: %s and %s attempts per acquisition, %.0f and %.0f acquisitions/s, the CPUs busy with attempts that cannot win.",
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
		b.WriteString("Its restart quarantine keeps node 0 out of every quorum: B's client read node 0's run_id when it connected and a different one when it reconnected after the restart, so node 0's yes does not count until the quarantine (the longest lease, 30 s by default) has passed, and B cannot reach three nodes. ")
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

// missedNotes says, for each missed target, by how much and what the
// run's own numbers show about why.
func missedNotes(res *results) string {
	var notes []string
	scripts := ""
	if sc := res.scripts; sc != nil {
		p := scriptPairs(sc)
		scripts = fmt.Sprintf(" In scripts alone a Lock+Unlock costs redlock %.1f µs of server time per node and the floor %.1f µs (see Server time per script call): %.0f against %.0f µs over five nodes.", p[0].usec, p[2].usec, 5*p[0].usec, 5*p[2].usec)
	}
	if rl, rs, fl, fp := findTput(res.tput, kRedlock), findTput(res.tput, kRedsync), findTput(res.tput, kFloor), findTput(res.tput, kFloorPipe); rl != nil && rs != nil && fl != nil && fp != nil && rl.ops > 0 {
		xf, xs := rl.median()/fl.median(), rl.median()/rs.median()
		cpu, srv := perOp(rl.cpu, rl.ops), perOp(rl.srv, rl.ops)
		if xf < 2 || xs < 2 || cpu >= perOp(rs.cpu, rs.ops) || srv >= perOp(rs.srv, rs.ops) {
			notes = append(notes, fmt.Sprintf("**Throughput** (%s the floor's and %s redsync's ops/s, target 2×; %s the pipelined floor's): the %d CPUs bound the rate, so it follows the CPU per op (client + server): redlock %s + %s, redsync %s + %s, floor %s + %s, pipelined floor %s + %s.%s",
				fmtRatio(xf), fmtRatio(xs), fmtRatio(rl.pipe), res.machine.nproc, fmtDur(cpu), fmtDur(srv), fmtDur(perOp(rs.cpu, rs.ops)), fmtDur(perOp(rs.srv, rs.ops)),
				fmtDur(perOp(fl.cpu, fl.ops)), fmtDur(perOp(fl.srv, fl.ops)), fmtDur(perOp(fp.cpu, fp.ops)), fmtDur(perOp(fp.srv, fp.ops)), scripts))
		}
	}
	u := res.unc
	if u != nil && u.get(kRedlock) != nil && u.get(kRedsync) != nil && u.get(kFloor) != nil {
		rl, rs, fl := u.get(kRedlock), u.get(kRedsync), u.get(kFloor)
		if rl.ratio > 1.15 || rl.mallocs > rs.mallocs || rl.bytes > rs.bytes {
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
			note := fmt.Sprintf("**Uncontended** (p50 %s the floor, target 1.15×; %.0f allocations and %.0f B per op against redsync's %.0f and %.0f B): the round trips are the floor's; the difference is work per node call, in the client (client CPU per op: redlock %s, floor %s; see the allocation table under Uncontended) and in the servers (server CPU per op: redlock %s, floor %s).%s",
				fmtRatio(rl.ratio), rl.mallocs, rl.bytes, rs.mallocs, rs.bytes, fmtDur(rl.cpu), fmtDur(fl.cpu), fmtDur(rl.srv), fmtDur(fl.srv), scripts)
			if len(fixes) > 0 {
				note += fmt.Sprintf(" What would cut the client's work per call: %s; the sites these address are %.0f objects per op in this run.", strings.Join(fixes, "; "), covered)
			}
			notes = append(notes, note)
		}
	}
	for _, f := range []struct {
		name  string
		s     *seqScenario
		limit float64
	}{{"2 of 5 slow", res.slow, 1.1}, {"2 of 5 paused", res.paused, 1.15}, {"2 of 5 dead", res.dead, 1.05}} {
		if f.s == nil || f.s.get(kRedlock) == nil || f.s.get(kFloor) == nil {
			continue
		}
		rl, fl := f.s.get(kRedlock), f.s.get(kFloor)
		if rl.ratio <= f.limit {
			continue
		}
		base := math.NaN()
		if u != nil {
			base = u.ratioOf(kRedlock)
		}
		note := fmt.Sprintf("**%s** (p50 %s the floor, target %s; %s the pipelined floor; healthy nodes in the same run: %s): both decide at the third answer and never wait for the faulty nodes; per op, redlock spent %s of client CPU and %s of server CPU, the floor %s and %s.",
			f.name, fmtRatio(rl.ratio), fmtRatio(f.limit), fmtRatio(rl.pipe), fmtRatio(base), fmtDur(rl.cpu), fmtDur(rl.srv), fmtDur(fl.cpu), fmtDur(fl.srv))
		if f.s == res.slow {
			note += " Every byte also passes through the in-process proxy, so the client's CPU counts twice here."
		}
		notes = append(notes, note)
	}
	if p := res.paused; p != nil {
		if ff := p.get(kRedsyncFF); ff != nil && len(ff.lat) > 0 && p.p50(kRedlock) >= p.p50(kRedsyncFF) {
			note := fmt.Sprintf("**2 of 5 paused, against redsync failfast** (redlock %s, redsync failfast %s): ", fmtDur(p.p50(kRedlock)), fmtDur(p.p50(kRedsyncFF)))
			if u != nil {
				note += fmt.Sprintf("with healthy nodes in this run redsync failfast's p50 was %s the floor's and redlock's %s, and that order holds here; ", fmtRatio(u.ratioOf(kRedsyncFF)), fmtRatio(u.ratioOf(kRedlock)))
			}
			note += fmt.Sprintf("redsync failfast's call to a paused node blocks a goroutine and a connection and dials anew (%s dials per Lock+Unlock to node 3), off the path of its op, which returns at the majority.", dialsPerOp(p, kRedsyncFF, 3))
			notes = append(notes, note)
		}
		if d, ok := p.dials[kRedlock]; ok {
			if worst := max(d[3], d[4]); worst > int64(backoffAllows(p.window)) {
				notes = append(notes, fmt.Sprintf("**Dials to the paused nodes** (%d in %s, the backoff allows %d): more than one reconnect attempt per backoff period.", worst, fmtDur(p.window), backoffAllows(p.window)))
			}
		}
	}
	if h := res.handoff; h != nil && findCont(h, kRedlock) != nil && findCont(h, kRedsync) != nil {
		hl, hs := findCont(h, kRedlock), findCont(h, kRedsync)
		g := pct(hl.gaps, 50)
		if x := hl.median() / hs.median(); g > before.gap || x < before.handoffRedsync || hl.ratio < before.handoffF {
			notes = append(notes, fmt.Sprintf("**Handoff** (gap p50 %s, p99 %s; %.0f acquisitions/s, %s redsync's and %s the floor's; before: %s, %s and %s): a cycle is at least the %v critical section plus the gap, so the rate follows the mean gap, which the tail weighs on: the mean cycle was %s. The gap is the release reaching the nodes, the unlock message reaching the head waiter and the waiter's acquire round trip, each of which needs the CPUs the five servers and the client share. redsync's rate is set by its random sleeps between tries (50–250 ms), so the ratio to it also varies with those.",
				fmtDur(g), fmtDur(pct(hl.gaps, 99)), hl.median(), fmtRatio(x), fmtRatio(hl.ratio), fmtDur(before.gap), fmtRatio(before.handoffRedsync), fmtRatio(before.handoffF), res.cfg.crit, fmtDur(time.Duration(float64(time.Second)/hl.median()))))
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

// scaleMethod says how the watchdog-at-scale cases were measured.
func scaleMethod(res *results) string {
	sc := res.cfg.scale
	to := "the default"
	if sc.nodeTimeout > 0 {
		to = sc.nodeTimeout.String()
	}
	var cases []string
	for _, c := range sc.cases {
		cases = append(cases, fmt.Sprintf("%s holds with a %v lease (window %d periods)", holdsLabel(c.holds), c.lease, c.periods))
	}
	return fmt.Sprintf("Each case (%s) on five fresh nodes: one client made with `redlock.Dial` (`WithLease`, node timeout %s) sits idle for %v (the idle row), then takes N distinct keys with `Lock` (watchdog lease) from %d goroutines, every `Lock` and `Unlock` bounded by a %v context. "+
		"Client heap per hold is `runtime.MemStats.HeapAlloc` after `runtime.GC` with the holds taken, less the same before, over N. "+
		"The holds are then kept for a window of whole renewal periods (lease/3) with no `Lock` or `Unlock` traffic. Client CPU is `getrusage(RUSAGE_SELF)` user+system over the window less the poller thread's own (`RUSAGE_THREAD`); server CPU is the sum over the five redis-server processes of `/proc/PID/stat` utime+stime (10 ms ticks); per hold per round is either divided by the holds alive and the periods in the window. "+
		"A poller on a thread of its own reads `Until()` of up to %d holds spread evenly over the keys every %v: the renewal interval is the time between two successive advances of one hold's `Until` (1.00 = on time; a hold is lost once it reaches about 3, its lease); *seen after its start* is the time from a renewal's start (its new `Until` less the lease, plus the drift, lease × 0.01 + 2 ms) to the poller seeing it; for a watchdog that renews every hold in one round and moves every `Until` at its end, that is the round's wall time. "+
		"Lost holds are closed `Lost()` channels; *renewed in the window* counts the holds whose `Until` moved on between the window's start and end. Last, %d goroutines release every hold. The nodes and the client share %d CPUs.",
		strings.Join(cases, "; "), to, scaleIdle, sc.goroutines, sc.opTimeout, sc.sample, sc.poll, sc.goroutines, res.machine.nproc)
}

// curveMethod says how the curve was measured.
func curveMethod(res *results) string {
	sc := res.cfg.scale
	var levels []string
	for _, n := range sc.curve {
		levels = append(levels, holdsLabel(n))
	}
	p := sc.curveLease / 3
	return fmt.Sprintf("One client with a %v lease takes holds level by level (%s) and at each level keeps them for %d periods with no other traffic, measured as above. It stops at the first level that loses a hold or leaves one unrenewed (\"fits: no\", hollow in the plot), or when the next level would not end within %v. The renewal CPU per period is the client's and the five servers' CPU over one period: renewals fit while it stays well under the CPU time the machine has in a period (%d CPUs × %v), and while the wait for a renewal stays well under the lease (3 periods).",
		sc.curveLease, strings.Join(levels, ", "), sc.curvePeriods, sc.curveBudget, res.machine.nproc, p)
}

// scaleParagraph states the holds that fit per lease.
func scaleParagraph(res *results) string {
	s := res.scale
	if s == nil || len(s.curve) == 0 {
		return ""
	}
	var fit, over *scaleRun
	for _, r := range s.curve {
		if r.fits() {
			fit = r
		} else if over == nil {
			over = r
		}
	}
	var b strings.Builder
	if fit == nil {
		fmt.Fprintf(&b, "No level of the curve fitted: at %s holds, %d of %d were renewed in the window and %d lost.", holdsLabel(over.holds), over.renewed, over.alive, over.lostWindow)
		return b.String()
	}
	cost := fit.perHoldRound(fit.clientCPU + fit.serverCPU)
	share := float64(fit.perPeriod(fit.clientCPU+fit.serverCPU)) / float64(time.Duration(res.machine.nproc)*fit.period)
	fmt.Fprintf(&b, "**On this machine, %s watchdog holds fit in one client with a %v lease**: the largest level measured at which every hold was renewed in every period and none was lost; their renewals took %s of CPU per %v period (client %s, servers %s), %.0f%% of the machine, and the longest wait for a renewal was %s.",
		holdsLabel(fit.holds), fit.lease, fmtDur(fit.perPeriod(fit.clientCPU+fit.serverCPU)), fit.period, fmtDur(fit.perPeriod(fit.clientCPU)), fmtDur(fit.perPeriod(fit.serverCPU)),
		100*share, fmtDur(pct(fit.delays, 100)))
	if over != nil {
		fmt.Fprintf(&b, " At %s holds the renewals no longer fitted: %d of %d renewed in the window, %d lost.", holdsLabel(over.holds), over.renewed, over.alive, over.lostWindow)
	} else {
		fmt.Fprintf(&b, " The curve stopped there (its last level or its time budget), not at a failure.")
	}
	if cost > 0 {
		fmt.Fprintf(&b, " At the %s of CPU per hold per round measured there, renewals alone would take all %d CPUs at about %s holds per %v lease: an extrapolation, not a measurement, and an upper bound, since the holds' owners need the CPUs too.",
			fmtDur(cost), res.machine.nproc, holdsLabel(int(float64(time.Duration(res.machine.nproc)*fit.period)/float64(cost)/1000)*1000), fit.lease)
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
	w := res.waiters
	if w == nil || len(w.mem) == 0 || len(w.runs) < 5 {
		return ""
	}
	lo, hi := w.mem[0], w.mem[len(w.mem)-1]
	many, single, one := w.runs[0], w.runs[2], w.runs[4]
	a, b := lo.heap+lo.stack, hi.heap+hi.stack
	shape := "so the cost per waiter stays flat"
	if b > 1.2*a || a > 1.2*b {
		shape = "so the cost per waiter is not flat"
	}
	return fmt.Sprintf("A waiter is the caller's goroutine blocked in `Lock` plus its place in its client's queue: %.1f KB with %d waiters and %.1f KB with %d, %s. With %d waiters in each of %d clients (%v critical section), %.0f handoffs/s at %s script calls per handoff per node, where one acquisition and one release make 2: the clients' heads take turns (docs/algorithm.md, Waiting), so about one head tries per release. With one waiter per client, %.0f handoffs/s at %s: a client whose only waiter won leaves the queue, and its next `Lock` makes a first attempt and, once queued, one more. In one client, %.0f handoffs/s at %s.",
		a/1024, lo.n, b/1024, hi.n, shape, many.perClient, many.clients, many.crit, median(many.acqPerSec), fmtNum(median(many.calls)), median(single.acqPerSec), fmtNum(median(single.calls)), median(one.acqPerSec), fmtNum(median(one.calls)))
}
