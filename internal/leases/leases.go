// Package leases shares the longest lease in use through the nodes.
//
// A restarted node must stay out of quorums for as long as any hold it
// forgot may still be valid: the longest lease of any client of these
// nodes, not only of this one. So every client publishes its longest
// lease on every node (a hash per key prefix, internal/script/leases.lua)
// before its first acquisition with it, and again while it uses it; and
// learns the longest lease in use from every reply, and again from every
// node as soon as it sees a node restart. The root's default quarantine
// period is the longest of both (Share.Longest). It imports nothing of the
// root package.
package leases

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/internal/script"
	"github.com/redlock-go/redlock/internal/vote"
)

// Keep is how long a published lease l stays in use on the nodes without
// being published again: far longer than the lease, so that a client
// republishes (once half of it has passed) long before any hold it
// acquired or renewed with the lease can end.
func Keep(l time.Duration) time.Duration { return max(10*time.Minute, 4*l) }

// Config is what a Share needs of its Client.
type Config struct {
	Quorum     *quorum.Quorum                    // sends the publications and the reads
	Prefix     string                            // the Client's key prefix
	Lease      time.Duration                     // the Client's default lease: in use from the start
	Quarantine time.Duration                     // WithQuarantine's period (negative: the default, 0: off)
	Drift      func(time.Duration) time.Duration // the drift allowance of a lease
	Logger     *slog.Logger                      // says a WithQuarantine shorter than a lease learned
	Ctx        context.Context                   // the context of background work, cancelled by Close
	GoRun      func(f func()) bool               // runs f in a goroutine of the Client; false after Close
	Made       func() bool                       // every node of the Client was made: a read may start
	Now        func() time.Time                  // the Client's clock
}

// Share is what a Client published of its leases, and what it learned of
// the others'. Its methods are safe for concurrent use.
type Share struct {
	cfg  Config
	base time.Time // when the Share was made: due counts from it

	used      atomic.Int64 // the longest lease this client used, ns
	mu        sync.Mutex   // serializes publishing
	published atomic.Int64 // the longest lease published on a quorum, ns
	due       atomic.Int64 // when it must be published again, ns since base
	learned   atomic.Int64 // the longest lease in use on the nodes as last read, ns
	rereading atomic.Bool  // a read after a restart is under way
	warned    atomic.Bool  // a WithQuarantine below learned was said
}

// New returns the Share of a Client configured as cfg, which uses its
// default lease.
func New(cfg Config) *Share {
	s := &Share{cfg: cfg, base: cfg.Now()}
	s.used.Store(int64(cfg.Lease))
	return s
}

// key is the hash of the longest leases in use with this client's
// key prefix. It has no hash tag: on a Redis Cluster member it lives on
// the shard of its own slot.
func (s *Share) key() string { return s.cfg.Prefix + "leases" }

// since is the time since base by the Client's clock.
func (s *Share) since() time.Duration { return s.cfg.Now().Sub(s.base) }

// Publish makes sure, before an acquisition, that the longest lease this
// client uses is published on a quorum of nodes and not due to be
// published again. It costs one atomic comparison but the first time a
// lease is used and every Keep/2; then one round to every node, decided
// at the majority as an acquisition is. It returns that round when fewer
// than a quorum of nodes stored the lease, nil otherwise.
func (s *Share) Publish(ctx context.Context) *quorum.Round {
	l := s.used.Load()
	if l <= s.published.Load() && int64(s.since()) < s.due.Load() {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	l = s.used.Load()
	if l <= s.published.Load() && int64(s.since()) < s.due.Load() {
		return nil // another acquisition published it meanwhile
	}
	start := s.since()
	r := s.exchange(ctx, time.Duration(l), (*vote.Ballot).Certain)
	if !r.Ballot.Won() {
		return r
	}
	s.published.Store(l)
	s.due.Store(int64(start + Keep(time.Duration(l))/2))
	return nil
}

// exchange publishes lease on every node, learns the longest lease
// in use from the replies that came before stop said the round is
// decided, and returns the round: a node votes yes once it stored it.
func (s *Share) exchange(ctx context.Context, lease time.Duration, stop func(*vote.Ballot) bool) *quorum.Round {
	cl := script.LeasesCall(s.key(), lease.Milliseconds(), Keep(lease).Milliseconds())
	r := s.cfg.Quorum.Fanout(ctx, cl, vote.Leases, stop, nil)
	for i, sl := range r.Nodes {
		if sl.Vote == vote.Yes {
			ms, _ := script.ParseLeases(r.Reply(i))
			s.Learn(time.Duration(ms) * time.Millisecond)
		}
	}
	return r
}

// Learn records that a node says d is the longest lease in use. The
// first lease learned that a WithQuarantine period (and the lease's drift
// allowance) does not cover is said at Warn.
func (s *Share) Learn(d time.Duration) {
	for {
		cur := s.learned.Load()
		if int64(d) <= cur {
			return
		}
		if s.learned.CompareAndSwap(cur, int64(d)) {
			break
		}
	}
	if q := s.cfg.Quarantine; q > 0 && q < d+s.cfg.Drift(d) && s.warned.CompareAndSwap(false, true) {
		s.cfg.Logger.Warn(fmt.Sprintf("redlock: WithQuarantine(%v) is shorter than the longest lease another client of these nodes uses (%v, and its drift allowance): a restarted node may count while a hold it forgot is still valid", q, d),
			"quarantine", q, "longest_lease", d)
	}
}

// Reread reads the longest lease in use from every node again, in the
// background, after this client saw a node restart: a client that began
// to use a longer lease since this client's last read is then known
// before the restarted node's quarantine ends. One read at a time; none
// before every node was made (Config.Made) or after Close.
func (s *Share) Reread() {
	if !s.cfg.Made() || !s.rereading.CompareAndSwap(false, true) {
		return
	}
	started := s.cfg.GoRun(func() {
		defer s.rereading.Store(false)
		s.exchange(s.cfg.Ctx, time.Duration(s.used.Load()), (*vote.Ballot).Done)
	})
	if !started {
		s.rereading.Store(false)
	}
}

// Use records a lease in use by this Client, for the default quarantine
// period.
func (s *Share) Use(d time.Duration) {
	for {
		cur := s.used.Load()
		if int64(d) <= cur || s.used.CompareAndSwap(cur, int64(d)) {
			return
		}
	}
}

// Longest is the longest lease in use: the longest this Client used, or
// the longest the nodes said another client uses, whichever is longer.
func (s *Share) Longest() time.Duration {
	return time.Duration(max(s.used.Load(), s.learned.Load()))
}
