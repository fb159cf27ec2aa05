package quorum

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/script"
)

// Result is what one node answered to a broadcast.
type Result struct {
	Replies []interface{} // one per call; a call the node refused has its node.ServerError, one that failed a node.PartFailed
	Err     error         // the node failed as a whole: no reply came
	Counted bool          // Members.Counted: its answers count toward a quorum
	Took    time.Duration // from the broadcast's start until every reply was in
}

// Refused returns the node's refusal when a batch's reply is one (its
// node.ServerError), or the call's failure (a node.PartFailed), nil
// otherwise: the error argument of redigo's reply converters.
func Refused(reply interface{}) error {
	if err := node.PartFailure(reply); err != nil {
		return err
	}
	err, _ := reply.(node.ServerError)
	if err == "" {
		return nil
	}
	return err
}

// MayLand reports whether a call of res, or a part of one split by shard,
// failed after it may have been written: it may still run on the node.
// notSent is matched (errors.Is) by the error of a call that never left
// this process.
func (res Result) MayLand(notSent error) bool {
	if res.Err != nil {
		return !errors.Is(res.Err, notSent)
	}
	mayRun := func(v interface{}) bool {
		err := node.PartFailure(v)
		return err != nil && !errors.Is(err, notSent) && !errors.As(err, new(node.ServerError))
	}
	for _, reply := range res.Replies {
		vs, _ := reply.([]interface{})
		if mayRun(reply) || slices.ContainsFunc(vs, mayRun) {
			return true
		}
	}
	return false
}

// batchTo gathers one node's replies to a broadcast's batch.
type batchTo struct {
	i    int
	done chan<- *batchTo // told once every reply is in

	mu     sync.Mutex // protects the fields below
	left   int
	failed int // calls that failed
	result Result
}

func newBatchTo(i, calls int, done chan<- *batchTo) *batchTo {
	return &batchTo{i: i, done: done, left: calls, result: Result{Replies: make([]interface{}, calls)}}
}

func (b *batchTo) Receive(j int, reply interface{}, err error) {
	b.mu.Lock()
	switch err.(type) {
	case nil:
		b.result.Replies[j] = reply
	case node.ServerError:
		b.result.Replies[j] = err
	default:
		// Only this call's: on a cluster member, the others may come
		// from live shards.
		b.result.Replies[j] = node.PartFailed{Err: err}
		b.failed++
		if b.result.Err == nil {
			b.result.Err = err
		}
	}
	b.left--
	last := b.left == 0
	if last && b.failed < len(b.result.Replies) {
		b.result.Err = nil // the node answered some: it failed for the others only
	}
	b.mu.Unlock()
	if last {
		b.done <- b
	}
}

// Broadcast sends node i the calls that calls(i) gives (none: the node is
// skipped), to go in one round trip, to every node at once, and returns
// every node's result once all have answered, timeout has passed or ctx
// has ended; a node that has not answered by then has failed.
func (q *Quorum) Broadcast(ctx context.Context, timeout time.Duration, calls func(i int) []script.Call) []Result {
	n := len(q.nodes)
	out := make([]Result, n)
	done := make(chan *batchTo, n)
	pending := make([]bool, n)
	sent := make([][]script.Call, n)
	waiting := 0
	start := q.now()
	deadline := start.Add(timeout)
	for i := range q.nodes {
		cs := calls(i)
		sent[i] = cs
		if len(cs) == 0 {
			continue
		}
		pending[i] = true
		waiting++
		q.sendBatch(i, cs, deadline, newBatchTo(i, len(cs), done))
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	var gone error
	for waiting > 0 && gone == nil {
		select {
		case b := <-done:
			out[b.i], pending[b.i] = b.result, false
			out[b.i].Took = q.since(start)
			waiting--
		case <-t.C:
			gone = fmt.Errorf("%w: no reply within %v", context.DeadlineExceeded, timeout)
		case <-ctx.Done():
			gone = ctx.Err()
		}
	}
	for i := range q.nodes {
		if pending[i] {
			out[i] = Result{Err: q.unanswered(i, gone)}
		}
		if out[i].Err != nil {
			out[i].Err = q.members.Fail(i, out[i].Err)
		}
		out[i].Counted = q.members.Counted(i, sent[i])
	}
	return out
}

// Post sends calls to every node, to go in one round trip each, due a
// node timeout from now, and waits for nobody: their replies are dropped.
func (q *Quorum) Post(calls []script.Call) {
	done := make(chan *batchTo, len(q.nodes)) // nobody reads the replies
	deadline := q.now().Add(q.cfg.Timeout)
	for i := range q.nodes {
		q.sendBatch(i, calls, deadline, newBatchTo(i, len(calls), done))
	}
}
