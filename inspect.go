package redlock

import (
	"context"
	"time"

	"github.com/redlock-go/redlock/internal/script"
)

// NodeLock is one node's view of a lock, as Client.Inspect reads it.
type NodeLock struct {
	Node    string           // the node's name, as in NodeError
	Key     string           // the lock's key on the node
	Err     error            // a *NodeError when the node could not be read; the fields below are then zero
	Exists  bool             // the node has the lock's key
	TTL     time.Duration    // the key's remaining time to live: -1 when it has no expiry, 0 when it does not exist
	Holders map[string]int64 // owner ("<client id>:<owner id>") -> its hold count on the node (-1: not a number)
}

// Inspect reads the lock called name on every node at once, each read
// bounded by the node timeout, and returns what each node holds, in the
// order of the nodes. It decides nothing by majority and takes no lock: it
// is for tools and health checks (`redlock inspect` shows it). It returns
// ErrClosed after Close and an error wrapping ErrInvalid for an empty name;
// a node that could not be read has its error in its NodeLock.
func (c *Client) Inspect(ctx context.Context, name string) ([]NodeLock, error) {
	m := c.NewMutex(name)
	if err := m.ensureUsable(ctx); err != nil {
		return nil, err
	}
	read := []call{script.ViewCall(m.key)}
	results := c.broadcast(ctx, c.opts.nodeTimeout, func(int) []call { return read })
	out := make([]NodeLock, len(c.peers))
	for i, res := range results {
		out[i] = viewOf(c.peers[i], m.key, res)
	}
	return out, nil
}

// viewOf reads view.lua's reply from one node.
func viewOf(n *peer, key string, res batchResult) NodeLock {
	v := NodeLock{Node: n.name, Key: key, Err: res.err}
	if res.err != nil {
		return v
	}
	err := refused(res.replies[0])
	var lv script.LockView
	if err == nil {
		lv, err = script.ParseView(res.replies[0])
	}
	if err != nil {
		v.Err = n.fail(err)
		return v
	}
	v.Exists = lv.PTTL != -2
	if v.Exists {
		v.TTL = time.Duration(lv.PTTL) * time.Millisecond
		if lv.PTTL < 0 {
			v.TTL = -1
		}
	}
	v.Holders = lv.Holders
	return v
}
