package redlock

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Restart quarantine: a node whose server process this client saw change
// (its run_id, read by every new connection before it serves) does not
// count toward acquisitions and renewals until the quarantine period has
// passed since the client saw the change; with WithQuarantineYoungNodes,
// neither does a node whose uptime is below the period, until the period
// has passed since its start. A node restarted without persistence has
// forgotten the locks it held, and a replica promoted in its place may
// lack the latest writes; kept out for the longest lease in use, it cannot
// help hand a lock out again while its old holder still trusts it. The
// delayed restart of the Redlock paper, done by the client. Through a
// Transport the same holds per server, and a server that takes over a hash
// slot another served, or that was not among the member's servers when
// the client first reached it, is a successor, kept out likewise
// (foreign.go).

// serverProcess is what this client knows of the server process behind one
// node: it changes only through observe.
type serverProcess struct {
	mu        sync.Mutex // protects the fields below
	runID     string     // run_id of the process last observed; "" before the first
	started   time.Time  // the latest start time the observation allows
	restarted bool       // runID differs from one observed before, or the process succeeded another
	succeeded string     // why the process is taken for another's successor (see succeed), "" when it is not
	seen      time.Time  // when it was seen succeeding another: its quarantine counts from then
	refused   error      // the node refused INFO server at the latest set-up: nil once it answers
	unsure    error      // why the process is unknown since a new connection (a Transport's): nil once INFO answers
	version   string     // redis_version of the process last observed
	learned   time.Time  // when runID was first read: nodes that share a process rank by it, and only the first votes (votes.go)
}

// observe records what INFO server says of the process, read at time at.
// A run_id that differs from the one seen before is a restart: replaced
// says so.
func (p *serverProcess) observe(info string, at time.Time) (replaced bool, err error) {
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
		return false, errors.New("INFO server has no run_id or uptime_in_seconds")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refused, p.unsure, p.version = nil, nil, version
	if runID == p.runID {
		return false, nil
	}
	replaced = p.runID != ""
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
	return replaced, nil
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
func (p *serverProcess) succeed(at time.Time, why string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.restarted, p.succeeded = true, why
	if at.After(p.seen) {
		p.seen = at
	}
}

// since returns when the quarantine of a restarted process counts from:
// its start, or when it was seen succeeding another, whichever is later.
func (p *serverProcess) since() time.Time {
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
func (p *serverProcess) refuse(err error) (first bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	first = p.refused == nil
	p.refused = err
	return first
}

// doubt records that the process behind the node may have changed and
// could not be identified (err says why): it is unknown until INFO server
// answers again.
func (p *serverProcess) doubt(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.unsure = err
}

// state returns what is known of the process: when it started, whether it
// replaced an earlier one, whether anything is known at all, and the
// node's refusal of INFO server when it refused it.
func (p *serverProcess) state() (started time.Time, restarted, known bool, refused error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.started, p.restarted, p.runID != "" || p.succeeded != "", p.refused
}

// successor says why the process is taken for another's successor (see
// succeed), "" when it is not.
func (p *serverProcess) successor() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.succeeded
}

// doubted returns why the process is unknown since a new connection (see
// doubt), nil when it is not.
func (p *serverProcess) doubted() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.unsure
}

// serverVersion returns the redis_version last observed, "" before the
// first observation.
func (p *serverProcess) serverVersion() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.version
}

// id returns the run_id last observed, "" before the first observation.
func (p *serverProcess) id() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.runID
}

// identity returns the run_id last observed and when it was first read.
func (p *serverProcess) identity() (runID string, learned time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.runID, p.learned
}

// quarantinePeriod is how long a restarted node is kept out of quorums:
// by default the longest lease in use, this client's or, as the nodes say,
// any other client's (leases.go), and its drift allowance. The period
// is measured by this client's clock, which may run fast by up to the
// drift factor, while a holder whose clock runs slow trusts its hold for
// up to its lease less the allowance, by its own clock: one lease alone
// could end first in real time (a 1s lease, clocks 0.8% fast and slow:
// 992ms against 996ms; the model found it, internal/model).
func (c *Client) quarantinePeriod() time.Duration {
	if c.opts.quarantine >= 0 {
		return c.opts.quarantine
	}
	l := time.Duration(max(c.maxLease.Load(), c.leases.learned.Load()))
	if l == 0 {
		return 0
	}
	return l + drift(l, c.opts.driftFactor)
}

// useLease records a lease in use, for the default quarantine period.
func (c *Client) useLease(d time.Duration) {
	for {
		cur := c.maxLease.Load()
		if int64(d) <= cur || c.maxLease.CompareAndSwap(cur, int64(d)) {
			return
		}
	}
}

// quarantined reports whether n's answers must not count now, and if so an
// error that says why and for how long. While quarantine is on, a node that
// refused INFO server never counts: its restarts cannot be seen, and a
// safety mechanism that cannot run must not be silently off.
func (c *Client) quarantined(n *peer, key string) error {
	if c.opts.quarantine == 0 {
		return nil
	}
	proc := n.processOf(key)
	_, restarted, known, refused := proc.state()
	if refused != nil {
		return fmt.Errorf("%w: %s", ErrQuarantined, blindness(refused))
	}
	if unsure := proc.doubted(); unsure != nil {
		return fmt.Errorf("%w: %w", ErrQuarantined, unsure)
	}
	q := c.quarantinePeriod()
	if q == 0 || !known || !(restarted || c.opts.youngNodes) {
		return nil
	}
	started := proc.since()
	left := started.Add(q).Sub(now())
	if left <= 0 {
		return nil
	}
	why := "restarted (run_id changed)"
	if succeeded := proc.successor(); succeeded != "" {
		why = succeeded
	} else if !restarted {
		why = "young (uptime below the quarantine period)"
	}
	return fmt.Errorf("%w: %s %v ago: not counted for %v more", ErrQuarantined, why, now().Sub(started).Round(time.Millisecond), left.Round(time.Millisecond))
}

// blindness says why a node that refused INFO server with err does not
// count, and what to change.
func blindness(err error) string {
	return fmt.Sprintf("INFO server refused (%v): restart quarantine cannot see this node's restarts, so it does not count; "+
		"grant the node's user +info (ACL SETUSER <user> +info), or turn restart quarantine off with WithQuarantine(0)", err)
}
