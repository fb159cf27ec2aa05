package redlock

import (
	"context"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/internal/script"
)

// Owner labels (WithOwnerLabel): each Client publishes on every node who
// its owners are, for operators, in one key per Client (label.lua), so
// that `redlock inspect` and InspectAll can show "web-3 pid 4711" beside
// an owner field "<client id>:<owner id>". A lock's own calls never carry
// it: an acquisition pays one atomic load to see whether the label is due.

// labelKeep is how long a published label lives; it is published again
// when half of that has passed, by the next acquisition or renewal round.
const labelKeep = 10 * time.Minute

// labelShare is what this Client published of its label.
type labelShare struct {
	q    *quorum.Quorum
	life *lifetime
	opts *options
	id   string    // the Client's id
	base time.Time // when the Client was made: due counts from it

	due  atomic.Int64 // when it must be published again, ns since base; 0 before the first
	busy atomic.Bool  // a publication is under way
}

// key is where the label of the Client whose id is id lives.
func (s *labelShare) key(id string) string { return s.opts.prefix + "owner:" + id }

// keep publishes the Client's label on every node in the background
// when it is due: at the first acquisition, then every labelKeep/2 while
// the Client acquires or renews. A publication that reaches no node is
// tried again after a node timeout's worth of rounds.
func (s *labelShare) keep() {
	if s.opts.label == "" {
		return
	}
	if due := s.due.Load(); due != 0 && int64(since(s.base)) < due {
		return
	}
	if !s.busy.CompareAndSwap(false, true) {
		return
	}
	started := s.life.goRun(func() {
		defer s.busy.Store(false)
		start := since(s.base)
		cl := []call{script.LabelCall(s.key(s.id), s.opts.label, labelKeep.Milliseconds())}
		next := start + labelKeep/2
		res := s.q.Broadcast(s.life.ctx, s.opts.nodeTimeout, func(int) []call { return cl })
		stored := false
		for _, r := range res {
			stored = stored || r.Err == nil
		}
		if !stored {
			next = start + 10*s.opts.nodeTimeout
		}
		s.due.Store(int64(next))
	})
	if !started {
		s.busy.Store(false)
	}
}

// owners reads, from every node, the labels of the Clients of owners
// (owner fields "<client id>:<owner id>"): per node, owner field -> label,
// for the owners whose Client's label that node has.
func (s *labelShare) owners(ctx context.Context, owners []string) []map[string]string {
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
	out := make([]map[string]string, s.q.Len())
	if len(ids) == 0 {
		return out
	}
	cl := make([]call, len(ids))
	for k, id := range ids {
		cl[k] = script.LabelReadCall(s.key(id))
	}
	for i, res := range s.q.Broadcast(ctx, s.opts.nodeTimeout, func(int) []call { return cl }) {
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
