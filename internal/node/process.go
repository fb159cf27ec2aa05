package node

import (
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"
)

// What a client knows of the server process behind a node (or, through a
// Transport, behind each server of a member): its run_id, its start, and
// whether it replaced or succeeded another. The root package's restart
// quarantine reads it (a restarted process does not count for a while);
// only this package's connection layers change it.

// Process is what this client knows of the server process behind one
// node, or one server of a node over a Transport, at one address: it
// changes only through observe and the layer's other records. Its methods
// are safe for concurrent use.
type Process struct {
	addr      string     // the server's address, fixed at creation
	mu        sync.Mutex // protects the fields below
	runID     string     // run_id of the process last observed; "" before the first
	started   time.Time  // the latest start time the observation allows
	restarted bool       // runID differs from one observed before, or the process succeeded another
	succeeded string     // why the process is taken for another's successor (see succeed), "" when it is not
	seen      time.Time  // when it was seen succeeding another: its quarantine counts from then
	refused   error      // the node refused INFO server at the latest set-up: nil once it answers
	unsure    error      // why the process is unknown since a new connection (a Transport's): nil once INFO answers
	version   string     // redis_version of the process last observed
	learned   time.Time  // when runID was first read: nodes that share a process rank by it, and only the first votes (the root package's votes.go)
}

// observe records what INFO server says of the process, read at time at.
// first says that no run_id was seen before (of two observations at once,
// only one is first); a run_id that differs from the one seen before is a
// restart: replaced says so.
func (p *Process) observe(info string, at time.Time) (first, replaced bool, err error) {
	runID, uptime, version := "", int64(-1), ""
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "redis_version:"); ok {
			version = v
		} else if v, ok := strings.CutPrefix(line, "run_id:"); ok {
			runID = v
		} else if v, ok := strings.CutPrefix(line, "uptime_in_seconds:"); ok {
			if u, err := strconv.ParseInt(v, 10, 64); err == nil {
				uptime = u
			}
		}
	}
	if runID == "" || uptime < 0 {
		return false, false, errors.New("INFO server has no run_id or uptime_in_seconds")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refused, p.unsure, p.version = nil, nil, version
	if runID == p.runID {
		return false, false, nil
	}
	first, replaced = p.runID == "", p.runID != ""
	p.runID, p.learned = runID, at
	// Redis computes uptime as the difference of two whole-second clock
	// readings, so the process may have started up to a second later than
	// at - uptime: take the latest start it allows (never after at), so the
	// quarantine is never cut short.
	p.started = at.Add(time.Second - time.Duration(uptime)*time.Second)
	if p.started.After(at) {
		p.started = at
	}
	p.restarted = p.restarted || replaced
	return first, replaced, nil
}

// runIDChanged is why a process whose run_id replaced another's behind one
// address does not count. It counts from when it was seen, not from its
// start: behind one address may be a replica that a failover promoted (a
// Sentinel-managed master, a name or virtual IP moved to the replica),
// whose uptime says nothing of when it took over.
const runIDChanged = "restarted (run_id changed) or failed over behind one address"

// succeed records that the process serves, since at, data that another
// process served before (a replica promoted by a failover, slots migrated
// to it, or a run_id that changed behind one address of a client that
// follows failovers): it may lack writes the other acknowledged, so it
// counts as restarted at at, whatever its uptime says; why says how it was
// seen.
func (p *Process) succeed(at time.Time, why string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.restarted, p.succeeded = true, why
	if at.After(p.seen) {
		p.seen = at
	}
}

// Since returns when the quarantine of a restarted process counts from:
// its start, or when it was seen succeeding another, whichever is later.
func (p *Process) Since() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.seen.After(p.started) {
		return p.seen
	}
	return p.started
}

// refuse records that the node refused INFO server with err (an ACL user
// without +info, a renamed INFO): its restarts cannot be seen until it
// answers again. It reports whether the node answered before (or was never
// asked), so that the refusal is logged once.
func (p *Process) refuse(err error) (first bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	first = p.refused == nil
	p.refused = err
	return first
}

// doubt records that the process behind the node may have changed and
// could not be identified (err says why): it is unknown until INFO server
// answers again.
func (p *Process) doubt(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.unsure = err
}

// State returns what is known of the process: when it started, whether it
// replaced an earlier one, whether anything is known at all, and the
// node's refusal of INFO server when it refused it.
func (p *Process) State() (started time.Time, restarted, known bool, refused error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.started, p.restarted, p.runID != "" || p.succeeded != "", p.refused
}

// Successor says why the process is taken for another's successor (see
// succeed), "" when it is not.
func (p *Process) Successor() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.succeeded
}

// Doubted returns why the process is unknown since a new connection (see
// doubt), nil when it is not.
func (p *Process) Doubted() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.unsure
}

// Version returns the redis_version last observed, "" before the
// first observation.
func (p *Process) Version() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.version
}

// Identity returns the run_id last observed and when it was first read.
func (p *Process) Identity() (runID string, learned time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.runID, p.learned
}

// Addr is the address of the server the process runs on: the node's for a
// native node, the Transport's Route.Addr for a server of a member.
func (p *Process) Addr() string { return p.addr }
