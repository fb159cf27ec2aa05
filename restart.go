package redlock

import (
	"fmt"
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
// the client first reached it, is a successor, kept out likewise. What is
// known of each server process, and every change of it, is internal/node's
// (process.go); this file decides what it means for a quorum.

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
	proc := n.n.Process(key)
	_, restarted, known, refused := proc.State()
	if refused != nil {
		return fmt.Errorf("%w: %s", ErrQuarantined, blindness(refused))
	}
	if unsure := proc.Doubted(); unsure != nil {
		return fmt.Errorf("%w: %w", ErrQuarantined, unsure)
	}
	q := c.quarantinePeriod()
	if q == 0 || !known || !(restarted || c.opts.youngNodes) {
		return nil
	}
	started := proc.Since()
	left := started.Add(q).Sub(now())
	if left <= 0 {
		return nil
	}
	why := "restarted (run_id changed)"
	if succeeded := proc.Successor(); succeeded != "" {
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
