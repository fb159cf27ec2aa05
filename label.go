package redlock

import (
	"context"
	"strings"
	"sync/atomic"
	"time"

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
	due  atomic.Int64 // when it must be published again, ns since the Client's leases.base; 0 before the first
	busy atomic.Bool  // a publication is under way
}

// labelKey is where the label of the Client whose id is id lives.
func (c *Client) labelKey(id string) string { return c.opts.prefix + "owner:" + id }

// keepLabel publishes the Client's label on every node in the background
// when it is due: at the first acquisition, then every labelKeep/2 while
// the Client acquires or renews. A publication that reaches no node is
// tried again after a node timeout's worth of rounds.
func (c *Client) keepLabel() {
	if c.opts.label == "" {
		return
	}
	if due := c.labels.due.Load(); due != 0 && int64(since(c.leases.base)) < due {
		return
	}
	if !c.labels.busy.CompareAndSwap(false, true) {
		return
	}
	started := c.life.goRun(func() {
		defer c.labels.busy.Store(false)
		start := since(c.leases.base)
		cl := []call{script.LabelCall(c.labelKey(c.id), c.opts.label, labelKeep.Milliseconds())}
		next := start + labelKeep/2
		res := c.q.Broadcast(c.life.ctx, c.opts.nodeTimeout, func(int) []call { return cl })
		stored := false
		for _, r := range res {
			stored = stored || r.Err == nil
		}
		if !stored {
			next = start + 10*c.opts.nodeTimeout
		}
		c.labels.due.Store(int64(next))
	})
	if !started {
		c.labels.busy.Store(false)
	}
}

// ownerLabels reads, from every node, the labels of the Clients of owners
// (owner fields "<client id>:<owner id>"): per node, owner field -> label,
// for the owners whose Client's label that node has.
func (c *Client) ownerLabels(ctx context.Context, owners []string) []map[string]string {
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
	out := make([]map[string]string, len(c.nodes.peers))
	if len(ids) == 0 {
		return out
	}
	cl := make([]call, len(ids))
	for k, id := range ids {
		cl[k] = script.LabelReadCall(c.labelKey(id))
	}
	for i, res := range c.q.Broadcast(ctx, c.opts.nodeTimeout, func(int) []call { return cl }) {
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
