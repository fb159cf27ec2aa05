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

func cpuPer(r *seqResult) string { return fmtDur(r.Cpu) }

func uncParagraph(res *results) string {
	u := res.Unc
	if u == nil {
		return ""
	}
	rl, rs, rsf, rk, fl, fp := u.get(kRedlock), u.get(kRedsync), u.get(kRedsyncFF), u.get(kRedislock), u.get(kFloor), u.get(kFloorPipe)
	if rl == nil || rs == nil || rsf == nil || rk == nil || fl == nil || fp == nil {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Every quorum contender makes the same two fan-outs per op, acquire then release, each to all five nodes; redlock, redsync with fail-fast and both floors return at the third answer, plain redsync waits for all five. So the differences among them are work, not round trips. In this run redlock's p50 was %s the floor's (%s the pipelined floor's), redsync's %s, redsync failfast's %s and the pipelined floor's %s; redislock, one node and one round trip each way, %s. Per Lock+Unlock, redlock allocated %.0f objects (%.0f B) against redsync's %.0f (%.0f B), the floor's %.0f and the pipelined floor's %.0f, spent %s of client CPU (redsync %s, floor %s, pipelined floor %s) and %s of redis-server CPU summed over the five nodes (redsync %s, floor %s, pipelined floor %s). The client and the five servers share %d CPUs here, so CPU spent anywhere shows up as latency.\n\n",
		fmtRatio(rl.Ratio), fmtRatio(rl.Pipe), fmtRatio(rs.Ratio), fmtRatio(rsf.Ratio), fmtRatio(fp.Ratio), fmtRatio(rk.Ratio),
		rl.Mallocs, rl.Bytes, rs.Mallocs, rs.Bytes, fl.Mallocs, fp.Mallocs, cpuPer(rl), cpuPer(rs), cpuPer(fl), cpuPer(fp), fmtDur(rl.Srv), fmtDur(rs.Srv), fmtDur(fl.Srv), fmtDur(fp.Srv), res.Machine.Nproc)
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
	rl, rs, fp := findTput(res.Tput, kRedlock), findTput(res.Tput, kRedsync), findTput(res.Tput, kFloorPipe)
	if rl == nil || rs == nil || fp == nil {
		return ""
	}
	return fmt.Sprintf("With %d goroutines the limit is the %d CPUs that the client and the five servers share, not the network: the table's client and server CPU per op are what each op costs (client + server: %s). %d CPU-seconds per second divided by that cost bounds each rate (ops/s at most: %s). The floor, redsync and redislock send each command on a pooled connection of its own, a write and a read per command; redlock and the pipelined floor send every request queued on a node's connection since its last write in one write, and read the replies as one stream. redlock did %.0f ops/s: %s the floor's, %s redsync's, %s the pipelined floor's.",
		res.Cfg.TputGoroutines, res.Machine.Nproc, strings.Join(parts, "; "), res.Machine.Nproc, strings.Join(bounds, "; "),
		rl.median(), fmtRatio(rl.Ratio), fmtRatio(rl.median()/rs.median()), fmtRatio(rl.Pipe))
}

// scriptParagraph sets the script costs beside the server CPU per op.
func scriptParagraph(res *results) string {
	s := res.Scripts
	if s == nil {
		return ""
	}
	pairs := scriptPairs(s)
	rl, fl := pairs[0].usec, pairs[2].usec
	var b strings.Builder
	fmt.Fprintf(&b, "redlock's Lock+Unlock costs the server %.1f µs per node in scripts (%.1f µs when the release writes a rollback mark, which it does only when a call of the acquisition may reach a node after the release, such as one that failed after it may have been written), against the floor's %.1f µs (%s). Over five nodes that is %.0f µs per op against the floor's %.0f µs.",
		rl, pairs[1].usec, fl, fmtRatio(rl/fl), 5*rl, 5*fl)
	if u := res.Unc; u != nil && u.get(kRedlock) != nil && u.get(kFloor) != nil {
		fmt.Fprintf(&b, " The server CPU per op measured under Uncontended (redlock %s, floor %s, five nodes) also holds reading, parsing and answering each command, and the servers' own background work.", fmtDur(u.get(kRedlock).Srv), fmtDur(u.get(kFloor).Srv))
	}
	if r := s.get(scRenew1000); r > 0 {
		fmt.Fprintf(&b, " renew.lua costs %.2f µs per hold at 1,000 holds per call (%.2f µs for a call of one hold), so renewing 10,000 holds once takes about %s of script time on an idle node (the watchdog sends at most 250 holds per call); the section on watchdog holds at scale measures renewal with five nodes and the client sharing the CPUs (commandstats counts the time a script runs, including the time its server waits for a CPU).", r/1000, s.get(scRenew1), fmtDur(time.Duration(10*r)*time.Microsecond))
	}
	return b.String()
}

func contParagraph(res *results) string {
	if res.Barge == nil || res.Handoff == nil {
		return ""
	}
	bl, bs, bf := findCont(res.Barge, kRedlock), findCont(res.Barge, kRedsync), findCont(res.Barge, kFloor)
	hl, hs, hf := findCont(res.Handoff, kRedlock), findCont(res.Handoff, kRedsync), findCont(res.Handoff, kFloor)
	var b strings.Builder
	fmt.Fprintf(&b, "**Barge.** redlock's waiters block in `Lock`, subscribed to the lock's unlock channel on every node; inside a client they queue FIFO and only the head contends. The releaser competes again at once, yet it took %s of the acquisitions (per goroutine %d–%d). redsync's waiters sleep 50–250 ms between tries, so the releaser, trying again at once, wins nearly always: %s self-handoff, %d–%d per goroutine; its %.0f acquisitions/s are mostly one goroutine re-taking its own lock. The floor's eight pollers (every millisecond, five nodes each) load the two CPUs: %.0f/s, gap p99 %s.\n\n",
		pctStr(bl.Self, bl.Acq), bl.MinPer, bl.MaxPer, pctStr(bs.Self, bs.Acq), bs.MinPer, bs.MaxPer, bs.median(), bf.median(), fmtDur(pct(bf.Gaps, 99)))
	fmt.Fprintf(&b, "**Handoff.** Every acquisition is a handoff to a waiter, so retry delays show. A redlock release deletes the key and publishes on every node; the head waiter of each client wakes on the first message, and the one whose turn it is tries at once: gap p50 %s, p99 %s, %.0f acquisitions/s. redsync's waiters learn of the release only at their next try: gap p50 %s, p99 %s, %.0f acquisitions/s (redlock %s that). The floor, polling every millisecond: gap p50 %s, %.0f/s. With a %v critical section one cycle is at least the critical section plus the gap, so %.0f/s is the most a gap of %s allows.",
		fmtDur(pct(hl.Gaps, 50)), fmtDur(pct(hl.Gaps, 99)), hl.median(), fmtDur(pct(hs.Gaps, 50)), fmtDur(pct(hs.Gaps, 99)), hs.median(),
		fmtRatio(hl.median()/hs.median()), fmtDur(pct(hf.Gaps, 50)), hf.median(), res.Cfg.Crit,
		1/(res.Cfg.Crit.Seconds()+pct(hl.Gaps, 50).Seconds()), fmtDur(pct(hl.Gaps, 50)))
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

func faultParagraph(res *results) string {
	var b strings.Builder
	if s := res.Slow; s != nil {
		fmt.Fprintf(&b, "**Slow minority.** Plain redsync waits for every node, so each op pays two round trips to a slow node: %s. redsync failfast (%s), redlock (%s) and the floors (floor %s, pipelined floor %s) decide at the third answer; the slow nodes' answers arrive after the op returned. Every byte here also passes through redlocktest's proxy, which runs in the benchmark's own process, so a contender that sends more bytes or runs more goroutines per op pays for it twice. A pooled connection stays busy with a slow node until its answer comes, after the op returned, so the pool-based contenders that return at the majority dial new connections as their pools grow (node 3: floor %d, redsync failfast %d dials); plain redsync, which waits for every answer, has its connections back before its next op (%d dials); redlock and the pipelined floor keep one connection per node (%d and %d dials).\n\n",
			seqStatus(s, kRedsync), seqStatus(s, kRedsyncFF), seqStatus(s, kRedlock), seqStatus(s, kFloor), seqStatus(s, kFloorPipe),
			dialsTo(s, kFloor, 3), dialsTo(s, kRedsyncFF, 3), dialsTo(s, kRedsync, 3), dialsTo(s, kRedlock, 3), dialsTo(s, kFloorPipe, 3))
	}
	if p := res.Paused; p != nil {
		fmt.Fprintf(&b, "**Paused minority.** A stopped redis-server keeps its connections open and never answers. Plain redsync: %s: at redigo's defaults its commands have no read timeout and it waits for every node, so `Lock` returns only when the nodes resume (its context bounds only the connection checkout). redsync failfast: %s: it returns at the majority, but each call leaves a goroutine and a connection blocked on each paused node until it resumes, so the next call to that node dials again: %d dials to node 3, %s per Lock+Unlock. The floor: %s: each command to a paused node times out after 250 ms and its connection is discarded, so it too dials for every command (%d dials to node 3, %s per Lock+Unlock). ",
			seqStatus(p, kRedsync), seqStatus(p, kRedsyncFF), dialsTo(p, kRedsyncFF, 3), dialsPerOp(p, kRedsyncFF, 3), seqStatus(p, kFloor), dialsTo(p, kFloor, 3), dialsPerOp(p, kFloor, 3))
		d3, d4 := dialsTo(p, kRedlock, 3), dialsTo(p, kRedlock, 4)
		fmt.Fprintf(&b, "redlock: %s: the round is decided at the third answer and never waits for a paused node; the connection to it is closed once its oldest request is a node timeout past its deadline, and one reconnect at a time follows, with a backoff of %v doubling to %v after each failed attempt; each attempt (the dial, then INFO server and SCRIPT LOAD) waits for the paused node up to its set-up bound, max(2 s, 8 node timeouts) = 2 s, and fails. So it dialled node 3 %d times and node 4 %d times in %s (%s). Meanwhile requests to a paused node queue, unsent, while an attempt is in progress and fail at once between attempts; no round waits for them. The pipelined floor: %s: it stops writing to a node whose oldest request is past its deadline and fails new requests to it at once, keeping its connection: %d dials.\n\n",
			seqStatus(p, kRedlock), minBackoff, maxBackoff, d3, d4, fmtDur(p.Window), dialEvery(p.Window, max(d3, d4)), seqStatus(p, kFloorPipe), dialsTo(p, kFloorPipe, 3))
	}
	if d := res.Dead; d != nil {
		fmt.Fprintf(&b, "**Dead minority.** Connections to a killed node are refused at once, so nobody waits: redlock %s, redsync %s, redsync failfast %s, the pipelined floor %s. The pool-based contenders dial for every command to a dead node (node 3: floor %d, redsync %d, redsync failfast %d dials, %s, %s and %s per Lock+Unlock); redlock's one reconnect loop per node dialled node 3 %d times in %s (%s); a request to a dead node fails at once while its last attempt has failed. The pipelined floor, with the same backoff and failing every request at once while it is down, dialled it %d times.",
			seqStatus(d, kRedlock), seqStatus(d, kRedsync), seqStatus(d, kRedsyncFF), seqStatus(d, kFloorPipe),
			dialsTo(d, kFloor, 3), dialsTo(d, kRedsync, 3), dialsTo(d, kRedsyncFF, 3), dialsPerOp(d, kFloor, 3), dialsPerOp(d, kRedsync, 3), dialsPerOp(d, kRedsyncFF, 3),
			dialsTo(d, kRedlock, 3), fmtDur(d.Window), dialEvery(d.Window, dialsTo(d, kRedlock, 3)), dialsTo(d, kFloorPipe, 3))
	}
	return b.String()
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

func deadMajParagraph(res *results) string {
	if res.DeadMaj == nil {
		return ""
	}
	rl, rs, rk := findDM(res.DeadMaj, kRedlock), findDM(res.DeadMaj, kRedsync), findDM(res.DeadMaj, kRedislock)
	s := fmt.Sprintf("redlock decides as soon as a majority can no longer answer (three failures of five) and returns `ErrNoQuorum` wrapping one `*NodeError` per failed node, each with the node's URL and address: %s. A request to a node whose last connection attempt failed fails at once with that attempt's error (attempts back off from %v to %v), so the third failure comes at once. ", dmStatus(rl), minBackoff, maxBackoff)
	if rs != nil && rs.Named < rs.Trials {
		s += fmt.Sprintf("redsync names nodes by their index (`node #0`); only its dial errors carry an address, so a trial that fails on pooled connections (the first after the kill, with EOF) names no address: %s. ", dmStatus(rs))
	} else {
		s += fmt.Sprintf("redsync: %s. ", dmStatus(rs))
	}
	if rk != nil && rk.Trials > 0 {
		s += fmt.Sprintf("redislock's single node is dead; go-redis retries a failed command (three retries with backoff by default, each on a new connection), until it gives up or the context ends: p50 %s, max %s, first trial's error `%s`.", fmtDur(pct(rk.Times, 50)), fmtDur(pct(rk.Times, 100)), rk.ErrText)
	}
	return s
}

// noWatchdog says why redsync has no row in the section on watchdog holds
// at scale.
const noWatchdog = "redsync has no watchdog: a holder renews with `Extend`, one fan-out per lock, so 10,000 locks cost 10,000 round trips per node per period; there is nothing to run here."

func herdParagraph(res *results) string {
	if res.Herd == nil {
		return ""
	}
	rl, rs, fl, rk := findHerd(res.Herd, kRedlock), findHerd(res.Herd, kRedsync), findHerd(res.Herd, kFloor), findHerd(res.Herd, kRedislock)
	if rl == nil || rs == nil || fl == nil || rk == nil {
		return ""
	}
	return fmt.Sprintf("redlock queues each client's waiters FIFO, so only four heads contend across processes, and the heads take turns: an attempt made while waiting that creates the key says so on the unlock channel (a take), from which every client knows which one waited longest; on a release that client's head tries first, the others two attempt times later per client ahead of them, and not at all once they hear the take. It made %s attempts per acquisition (%.0f acquisitions/s). When heads still split the nodes (none reaches three), all roll back, and each rollback that deletes the key is a new message (a split vote makes a head pause first). redsync's 64 sleepers make %s attempts per acquisition (%.0f/s) because each sleeps 50–250 ms between tries, at the price of unfairness (%d–%d acquisitions per goroutine) and the handoff gaps above. The floor and redislock poll every millisecond: %s and %s attempts per acquisition, %.0f and %.0f acquisitions/s, the CPUs busy with attempts that cannot win.",
		fmtNum(rl.Attempts), rl.AcqPerSec, fmtNum(rs.Attempts), rs.AcqPerSec, rs.MinPer, rs.MaxPer, fmtNum(fl.Attempts), fmtNum(rk.Attempts), fl.AcqPerSec, rk.AcqPerSec)
}

func findRestart(rs []*restartResult, k kind) *restartResult {
	for _, r := range rs {
		if r.Kind == k {
			return r
		}
	}
	return nil
}

func restartParagraph(res *results) string {
	if res.RestartNow == nil {
		return ""
	}
	var b strings.Builder
	rl, rs, rn := findRestart(res.RestartNow, kRedlock), findRestart(res.RestartNow, kRedsync), findRestart(res.RestartNow, kRedsyncNX)
	fmt.Fprintf(&b, "When B tries at once, the restarted node 0 is empty and nodes 3 and 4 never had A's key, so three nodes say yes to B while A still counts on its two. redsync counts the empty node: %d double holds in %d trials, %d in %d with `WithSetNXOnExtend` (the option acts only when the holder extends). redlock: %d double holds in %d trials. ",
		rs.Violation, rs.Trials, rn.Violation, rn.Trials, rl.Violation, rl.Trials)
	if rl.Violation == 0 && rl.Acquired == 0 {
		b.WriteString("Its restart quarantine keeps node 0 out of every quorum: B's client read node 0's run_id when it connected and a different one when it reconnected after the restart, so node 0's yes does not count until the quarantine (the longest lease, 30 s by default) has passed, and B cannot reach three nodes. ")
	} else if rl.Violation > 0 {
		b.WriteString("redlock counted the empty node like redsync does: without restart quarantine a node that lost its data votes again at once. ")
	}
	if res.RestartR != nil {
		rl2, rs2, rn2 := findRestart(res.RestartR, kRedlock), findRestart(res.RestartR, kRedsync), findRestart(res.RestartR, kRedsyncNX)
		fmt.Fprintf(&b, "After one renewal by A: with `WithSetNXOnExtend`, A's `Extend` re-creates the key on the empty nodes, B got the lock in %d of %d trials; plain redsync's `Extend` fails (A's key is on two nodes only), so A is told in %d of the %d trials where B got the lock: no double hold, but the lock moved to B. redlock: B got the lock in %d of %d trials, %d double holds.",
			rn2.Acquired, rn2.Trials, rs2.Told, rs2.Acquired, rl2.Acquired, rl2.Trials, rl2.Violation)
	}
	return b.String()
}

// missedNotes says, for each missed target, by how much and what the
// run's own numbers show about why.
func missedNotes(res *results) string {
	var notes []string
	scripts := ""
	if sc := res.Scripts; sc != nil {
		p := scriptPairs(sc)
		scripts = fmt.Sprintf(" In scripts alone a Lock+Unlock costs redlock %.1f µs of server time per node and the floor %.1f µs (see Server time per script call): %.0f against %.0f µs over five nodes.", p[0].usec, p[2].usec, 5*p[0].usec, 5*p[2].usec)
	}
	if rl, rs, fl, fp := findTput(res.Tput, kRedlock), findTput(res.Tput, kRedsync), findTput(res.Tput, kFloor), findTput(res.Tput, kFloorPipe); rl != nil && rs != nil && fl != nil && fp != nil && rl.Ops > 0 {
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
		name  string
		s     *seqScenario
		limit float64
	}{{"2 of 5 slow", res.Slow, 1.1}, {"2 of 5 paused", res.Paused, 1.15}, {"2 of 5 dead", res.Dead, 1.05}} {
		if f.s == nil || f.s.get(kRedlock) == nil || f.s.get(kFloor) == nil {
			continue
		}
		rl, fl := f.s.get(kRedlock), f.s.get(kFloor)
		if rl.Ratio <= f.limit {
			continue
		}
		base := math.NaN()
		if u != nil {
			base = u.ratioOf(kRedlock)
		}
		note := fmt.Sprintf("**%s** (p50 %s the floor, target %s; %s the pipelined floor; healthy nodes in the same run: %s): both decide at the third answer and never wait for the faulty nodes; per op, redlock spent %s of client CPU and %s of server CPU, the floor %s and %s.",
			f.name, fmtRatio(rl.Ratio), fmtRatio(f.limit), fmtRatio(rl.Pipe), fmtRatio(base), fmtDur(rl.Cpu), fmtDur(rl.Srv), fmtDur(fl.Cpu), fmtDur(fl.Srv))
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
	if h := res.Handoff; h != nil && findCont(h, kRedlock) != nil && findCont(h, kRedsync) != nil {
		hl, hs := findCont(h, kRedlock), findCont(h, kRedsync)
		g := pct(hl.Gaps, 50)
		if x := hl.median() / hs.median(); g > before.gap || x < before.handoffRedsync || hl.Ratio < before.handoffF {
			notes = append(notes, fmt.Sprintf("**Handoff** (gap p50 %s, p99 %s; %.0f acquisitions/s, %s redsync's and %s the floor's; before: %s, %s and %s): a cycle is at least the %v critical section plus the gap, so the rate follows the mean gap, which the tail weighs on: the mean cycle was %s. The gap is the release reaching the nodes, the unlock message reaching the head waiter and the waiter's acquire round trip, each of which needs the CPUs the five servers and the client share. redsync's rate is set by its random sleeps between tries (50–250 ms), so the ratio to it also varies with those.",
				fmtDur(g), fmtDur(pct(hl.Gaps, 99)), hl.median(), fmtRatio(x), fmtRatio(hl.Ratio), fmtDur(before.gap), fmtRatio(before.handoffRedsync), fmtRatio(before.handoffF), res.Cfg.Crit, fmtDur(time.Duration(float64(time.Second)/hl.median()))))
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
			if strings.Contains(s.Fn, sub) {
				t += s.PerOp
				break
			}
		}
	}
	return t
}

// scaleMethod says how the watchdog-at-scale cases were measured.
func scaleMethod(res *results) string {
	sc := res.Cfg.Scale
	to := "the default"
	if sc.NodeTimeout > 0 {
		to = sc.NodeTimeout.String()
	}
	var cases []string
	for _, c := range sc.Cases {
		cases = append(cases, fmt.Sprintf("%s holds with a %v lease (window %d periods)", holdsLabel(c.Holds), c.Lease, c.Periods))
	}
	return fmt.Sprintf("Each case (%s) on five fresh nodes: one client made with `redlock.Dial` (`WithLease`, node timeout %s) sits idle for %v (the idle row), then takes N distinct keys with `Lock` (watchdog lease) from %d goroutines, every `Lock` and `Unlock` bounded by a %v context. "+
		"Client heap per hold is `runtime.MemStats.HeapAlloc` after `runtime.GC` with the holds taken, less the same before, over N. "+
		"The holds are then kept for a window of whole renewal periods (lease/3) with no `Lock` or `Unlock` traffic. Client CPU is `getrusage(RUSAGE_SELF)` user+system over the window less the poller thread's own (`RUSAGE_THREAD`); server CPU is the sum over the five redis-server processes of `/proc/PID/stat` utime+stime (10 ms ticks); per hold per round is either divided by the holds alive and the periods in the window. "+
		"A poller on a thread of its own reads `Until()` of up to %d holds spread evenly over the keys every %v: the renewal interval is the time between two successive advances of one hold's `Until` (1.00 = on time; a hold is lost once it reaches about 3, its lease); *seen after its start* is the time from a renewal's start (its new `Until` less the lease, plus the drift, lease × 0.01 + 2 ms) to the poller seeing it; for a watchdog that renews every hold in one round and moves every `Until` at its end, that is the round's wall time. "+
		"Lost holds are closed `Lost()` channels; *renewed in the window* counts the holds whose `Until` moved on between the window's start and end. Last, %d goroutines release every hold. The nodes and the client share %d CPUs.",
		strings.Join(cases, "; "), to, scaleIdle, sc.Goroutines, sc.OpTimeout, sc.Sample, sc.Poll, sc.Goroutines, res.Machine.Nproc)
}

// curveMethod says how the curve was measured.
func curveMethod(res *results) string {
	sc := res.Cfg.Scale
	var levels []string
	for _, n := range sc.Curve {
		levels = append(levels, holdsLabel(n))
	}
	p := sc.CurveLease / 3
	return fmt.Sprintf("One client with a %v lease takes holds level by level (%s) and at each level keeps them for %d periods with no other traffic, measured as above. It stops at the first level that loses a hold or leaves one unrenewed (\"fits: no\", hollow in the plot), or when the next level would not end within %v. The renewal CPU per period is the client's and the five servers' CPU over one period: renewals fit while it stays well under the CPU time the machine has in a period (%d CPUs × %v), and while the wait for a renewal stays well under the lease (3 periods).",
		sc.CurveLease, strings.Join(levels, ", "), sc.CurvePeriods, sc.CurveBudget, res.Machine.Nproc, p)
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
