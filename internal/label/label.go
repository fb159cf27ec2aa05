// Package label publishes a Client's owner label (the root's
// WithOwnerLabel) and reads the labels of the owners an inspection found.
//
// Each Client publishes on every node who its owners are, for operators,
// in one key per Client (label.lua), so that `redlock inspect` and
// InspectAll can show "web-3 pid 4711" beside an owner field
// "<client id>:<owner id>". A lock's own calls never carry it: an
// acquisition pays one atomic load to see whether the label is due. It
// imports nothing of the root package.
package label

import (
	"context"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/internal/script"
)

// Keep is how long a published label lives; it is published again when
// half of that has passed, by the next acquisition or renewal round.
const Keep = 10 * time.Minute

// Config is what a Share needs of its Client.
type Config struct {
	Quorum  *quorum.Quorum      // sends the publications and the reads
	Prefix  string              // the Client's key prefix
	ID      string              // the Client's id
	Label   string              // the label to publish; "": none
	Timeout time.Duration       // the node timeout, which bounds each broadcast
	Ctx     context.Context     // the context of background work, cancelled by Close
	GoRun   func(f func()) bool // runs f in a goroutine of the Client; false after Close
	Now     func() time.Time    // the Client's clock
}

// Share is what a Client published of its label. Its methods are safe
// for concurrent use.
type Share struct {
	cfg  Config
	base time.Time // when the Share was made: due counts from it

	due  atomic.Int64 // when it must be published again, ns since base; 0 before the first
	busy atomic.Bool  // a publication is under way
}

// New returns the Share of a Client configured as cfg.
func New(cfg Config) *Share { return &Share{cfg: cfg, base: cfg.Now()} }

// key is where the label of the Client whose id is id lives.
func (s *Share) key(id string) string { return s.cfg.Prefix + "owner:" + id }

// since is the time since base by the Client's clock.
func (s *Share) since() time.Duration { return s.cfg.Now().Sub(s.base) }

// Keep publishes the Client's label on every node in the background
// when it is due: at the first acquisition, then every Keep/2 while the
// Client acquires or renews. A publication that reaches no node is tried
// again after a node timeout's worth of rounds.
func (s *Share) Keep() {
	if s.cfg.Label == "" {
		return
	}
	if due := s.due.Load(); due != 0 && int64(s.since()) < due {
		return
	}
	if !s.busy.CompareAndSwap(false, true) {
		return
	}
	started := s.cfg.GoRun(func() {
		defer s.busy.Store(false)
		start := s.since()
		cl := []script.Call{script.LabelCall(s.key(s.cfg.ID), s.cfg.Label, Keep.Milliseconds())}
		next := start + Keep/2
		res := s.cfg.Quorum.Broadcast(s.cfg.Ctx, s.cfg.Timeout, func(int) []script.Call { return cl })
		stored := false
		for _, r := range res {
			stored = stored || r.Err == nil
		}
		if !stored {
			next = start + 10*s.cfg.Timeout
		}
		s.due.Store(int64(next))
	})
	if !started {
		s.busy.Store(false)
	}
}

// Owners reads, from every node, the labels of the Clients of owners
// (owner fields "<client id>:<owner id>"): per node, owner field -> label,
// for the owners whose Client's label that node has.
func (s *Share) Owners(ctx context.Context, owners []string) []map[string]string {
	ids := make([]string, 0, len(owners))
	byID := make(map[string][]string)
	for _, o := range owners {
		id, _, ok := strings.Cut(o, ":")
		if !ok {
			continue
		}
		if _, seen := byID[id]; !seen {
			ids = append(ids, id)
		}
		byID[id] = append(byID[id], o)
	}
	out := make([]map[string]string, s.cfg.Quorum.Len())
	if len(ids) == 0 {
		return out
	}
	cl := make([]script.Call, len(ids))
	for k, id := range ids {
		cl[k] = script.LabelReadCall(s.key(id))
	}
	for i, res := range s.cfg.Quorum.Broadcast(ctx, s.cfg.Timeout, func(int) []script.Call { return cl }) {
		if res.Err != nil {
			continue
		}
		for k, reply := range res.Replies {
			label, err := script.ParseLabel(reply)
			if err != nil || label == "" {
				continue
			}
			if out[i] == nil {
				out[i] = make(map[string]string)
			}
			for _, o := range byID[ids[k]] {
				out[i][o] = label
			}
		}
	}
	return out
}
