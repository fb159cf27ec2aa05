package redlock

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/internal/script"
	"github.com/redlock-go/redlock/internal/vote"
)

// The longest lease in use, shared through the nodes. A restarted node
// must stay out of quorums for as long as any hold it forgot may still be
// valid: the longest lease of any client of these nodes, not only of this
// one. So every client publishes its longest lease on every node (a hash
// per key prefix, internal/script/leases.lua) before its first acquisition with
// it, and again while it uses it; and learns the longest lease in use from
// every reply, and again from every node as soon as it sees a node
// restart. The default quarantine period is the longest of both
// (Client.quarantinePeriod).

// leaseKeep is how long a published lease stays in use on the nodes
// without being published again: far longer than the lease, so that a
// client republishes (once half of it has passed) long before any hold it
// acquired or renewed with the lease can end.
func leaseKeep(l time.Duration) time.Duration { return max(10*time.Minute, 4*l) }

// leaseShare is what this client published of its leases, and what it
// learned of the others'.
type leaseShare struct {
	q    *quorum.Quorum
	life *lifetime
	opts *options
	made *atomic.Bool // every node of the Client was made: a read may start

	used      atomic.Int64 // the longest lease this client used, ns
	mu        sync.Mutex   // serializes publishing
	published atomic.Int64 // the longest lease published on a quorum, ns
	due       atomic.Int64 // when it must be published again, ns since base
	base      time.Time
	learned   atomic.Int64 // the longest lease in use on the nodes as last read, ns
	rereading atomic.Bool  // a read after a restart is under way
	warned    atomic.Bool  // a WithQuarantine below learned was said
}

// key is the hash of the longest leases in use with this client's
// key prefix. It has no hash tag: on a Redis Cluster member it lives on
// the shard of its own slot.
func (s *leaseShare) key() string { return s.opts.prefix + "leases" }

// share makes sure, before an acquisition, that the longest lease
// this client uses is published on a quorum of nodes and not due to be
// published again. It costs one atomic comparison but the first time a
// lease is used and every leaseKeep/2; then one round to every node,
// decided at the majority as an acquisition is. It returns that round
// when fewer than a quorum of nodes stored the lease, nil otherwise.
func (s *leaseShare) share(ctx context.Context) *round {
	l := s.used.Load()
	if l <= s.published.Load() && int64(since(s.base)) < s.due.Load() {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	l = s.used.Load()
	if l <= s.published.Load() && int64(since(s.base)) < s.due.Load() {
		return nil // another acquisition published it meanwhile
	}
	start := since(s.base)
	r := s.exchange(ctx, time.Duration(l), (*vote.Ballot).Certain)
	if !r.Ballot.Won() {
		return r
	}
	s.published.Store(l)
	s.due.Store(int64(start + leaseKeep(time.Duration(l))/2))
	return nil
}

// exchange publishes lease on every node, learns the longest lease
// in use from the replies that came before stop said the round is
// decided, and returns the round: a node votes yes once it stored it.
func (s *leaseShare) exchange(ctx context.Context, lease time.Duration, stop func(*vote.Ballot) bool) *round {
	cl := script.LeasesCall(s.key(), lease.Milliseconds(), leaseKeep(lease).Milliseconds())
	r := s.q.Fanout(ctx, cl, vote.Leases, stop, nil)
	for i, sl := range r.Nodes {
		if sl.Vote == vote.Yes {
			ms, _ := script.ParseLeases(r.Reply(i))
			s.learn(time.Duration(ms) * time.Millisecond)
		}
	}
	return r
}

// learn records that a node says d is the longest lease in use.
func (s *leaseShare) learn(d time.Duration) {
	for {
		cur := s.learned.Load()
		if int64(d) <= cur {
			return
		}
		if s.learned.CompareAndSwap(cur, int64(d)) {
			break
		}
	}
	if q := s.opts.quarantine; q > 0 && q < d+drift(d, s.opts.driftFactor) && s.warned.CompareAndSwap(false, true) {
		s.opts.logger.Warn(fmt.Sprintf("redlock: WithQuarantine(%v) is shorter than the longest lease another client of these nodes uses (%v, and its drift allowance): a restarted node may count while a hold it forgot is still valid", q, d),
			"quarantine", q, "longest_lease", d)
	}
}

// reread reads the longest lease in use from every node again, in
// the background, after this client saw a node restart: a client that
// began to use a longer lease since this client's last read is then
// known before the restarted node's quarantine ends. One read at a time.
func (s *leaseShare) reread() {
	if !s.made.Load() || !s.rereading.CompareAndSwap(false, true) {
		return
	}
	if !s.life.goAdd(1) {
		s.rereading.Store(false)
		return
	}
	go func() {
		defer s.life.bg.Done()
		defer s.rereading.Store(false)
		s.exchange(s.life.ctx, time.Duration(s.used.Load()), (*vote.Ballot).Done)
	}()
}

// use records a lease in use by this Client, for the default quarantine
// period.
func (s *leaseShare) use(d time.Duration) {
	for {
		cur := s.used.Load()
		if int64(d) <= cur || s.used.CompareAndSwap(cur, int64(d)) {
			return
		}
	}
}
