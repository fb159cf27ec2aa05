package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gomodule/redigo/redis"
)

// The pipelined floor: the floor's lock (floor.go: one EVALSHA of SET NX PX
// to every node, decided at the third answer, compare-and-DEL to release,
// each node's DEL sent only after that node answered its SET) with the
// requests of every goroutine coalesced per node. Each node has one
// long-lived connection, one writer that sends every request queued since
// its last write in one write (a Send for each, then one Flush), and one
// reader that hands the replies back in order; redigo allows one
// concurrent Send/Flush caller and one concurrent Receive caller on a
// connection. Every request is bounded by the node timeout: the caller
// stops waiting for it then, and one still queued at its deadline is not
// sent. While the oldest written request is past its deadline (a paused
// node), the node gets no more requests: new ones fail at once. A broken
// connection is redialled with a backoff of 10 ms doubling to 500 ms;
// requests fail at once meanwhile. Nothing else: no reentrancy, renewal,
// pub/sub or drift check; a waiter polls every millisecond.

// errPipeNotSent marks a request that never left this process: it cannot
// have changed anything on its node, so it needs no DEL.
var errPipeNotSent = errors.New("not sent")

type pipeFloor struct {
	nodes  []*floorConn
	quorum int
	id     string
	seq    atomic.Uint64
}

func newPipeFloor(addrs []string, cnt *counters, dials *dialCounter) *pipeFloor {
	var id [8]byte
	rand.Read(id[:])
	f := &pipeFloor{quorum: len(addrs)/2 + 1, id: hex.EncodeToString(id[:]) + ":"}
	for i, a := range addrs {
		dial := func() (redis.Conn, error) {
			dials.add(i)
			c, err := redis.Dial("tcp", a, redis.DialConnectTimeout(nodeTimeout), redis.DialWriteTimeout(nodeTimeout))
			if err != nil || cnt == nil {
				return c, err
			}
			return cnt.wrap(c, i), nil
		}
		f.nodes = append(f.nodes, startFloorConn(a, dial))
	}
	// The first requests wait for no connection: failing them at once
	// would make a slow start look like a dead node.
	for _, c := range f.nodes {
		c.waitUp(time.Second)
	}
	return f
}

func (f *pipeFloor) close() {
	for _, c := range f.nodes {
		c.close()
	}
}

func (f *pipeFloor) newLock(key string) *pipeLock { return &pipeLock{f: f, key: key} }

// pipeReceiver gets the outcome of a request exactly once.
type pipeReceiver interface {
	receive(i int, reply interface{}, err error)
}

// preq is one request: EVALSHA with args, due by deadline.
type preq struct {
	args     []interface{} // shared read-only by the nodes of one fan-out
	deadline time.Time
	to       pipeReceiver
	i        int
}

// floorConn is the one connection to one node, through its reconnections.
type floorConn struct {
	addr string
	dial func() (redis.Conn, error)
	wake chan struct{} // capacity 1: the writer has work
	done chan struct{} // closed by close
	up   chan struct{} // closed at the first connection
	wg   sync.WaitGroup

	mu    sync.Mutex // protects the fields below
	conn  redis.Conn // nil while down
	err   error      // why it is down
	queue []preq     // waiting for the writer
	sent  []preq     // written, waiting for their replies, oldest at head
	head  int
}

func startFloorConn(addr string, dial func() (redis.Conn, error)) *floorConn {
	c := &floorConn{addr: addr, dial: dial, wake: make(chan struct{}, 1), done: make(chan struct{}), up: make(chan struct{}),
		err: errors.New("connecting")}
	c.wg.Add(2)
	go c.keep()
	go c.write()
	return c
}

func (c *floorConn) waitUp(d time.Duration) {
	select {
	case <-c.up:
	case <-time.After(d):
	}
}

func (c *floorConn) close() {
	close(c.done)
	c.mu.Lock()
	if c.conn != nil {
		c.conn.Close() // ends the reader
	}
	c.mu.Unlock()
	c.wg.Wait()
}

// submit queues r for the writer, or fails it at once while the connection
// is down.
func (c *floorConn) submit(r preq) {
	c.mu.Lock()
	if c.conn == nil {
		err := c.err
		c.mu.Unlock()
		r.to.receive(r.i, nil, fmt.Errorf("%w: %w", errPipeNotSent, err))
		return
	}
	c.queue = append(c.queue, r)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// write is the writer: at every wake-up it sends what is queued in one
// write.
func (c *floorConn) write() {
	defer c.wg.Done()
	var batch, failed []preq
	for {
		select {
		case <-c.wake:
		case <-c.done:
			return
		}
		now := time.Now()
		c.mu.Lock()
		conn, why := c.conn, c.err
		if conn != nil && c.head < len(c.sent) && now.After(c.sent[c.head].deadline) {
			why = errors.New("the node has not answered a request past its deadline")
			conn = nil
		}
		for _, r := range c.queue {
			if conn == nil || now.After(r.deadline) {
				failed = append(failed, r)
				continue
			}
			batch = append(batch, r)
			c.sent = append(c.sent, r)
		}
		clear(c.queue)
		c.queue = c.queue[:0]
		c.mu.Unlock()
		for _, r := range failed {
			if why == nil {
				why = errors.New("queued past its deadline")
			}
			r.to.receive(r.i, nil, fmt.Errorf("%w: %w", errPipeNotSent, why))
		}
		var err error
		for _, r := range batch {
			if err = conn.Send("EVALSHA", r.args...); err != nil {
				break
			}
		}
		if err == nil && len(batch) > 0 {
			err = conn.Flush()
		}
		if err != nil {
			conn.Close() // the reader fails what was written
		}
		clear(batch)
		clear(failed)
		batch, failed = batch[:0], failed[:0]
	}
}

// keep dials, loads the scripts, then reads until the connection breaks,
// and again after a backoff, until close.
func (c *floorConn) keep() {
	defer c.wg.Done()
	var backoff time.Duration
	for {
		conn, err := c.connect()
		if err == nil {
			backoff = 0
			c.mu.Lock()
			select {
			case <-c.done:
				c.mu.Unlock()
				conn.Close()
				return
			default:
			}
			c.conn, c.err = conn, nil
			c.mu.Unlock()
			select {
			case <-c.up:
			default:
				close(c.up)
			}
			err = c.read(conn)
			conn.Close()
			c.detach(err)
		} else {
			c.mu.Lock()
			c.err = err
			c.mu.Unlock()
			backoff = min(max(2*backoff, 10*time.Millisecond), 500*time.Millisecond)
		}
		select {
		case <-c.done:
			return
		case <-time.After(backoff):
		}
	}
}

// connect dials and loads the floor's scripts, bounded by a second.
func (c *floorConn) connect() (redis.Conn, error) {
	conn, err := c.dial()
	if err != nil {
		return nil, err
	}
	for _, src := range []string{floorSetLua, floorDelLua} {
		if _, err := redis.DoWithTimeout(conn, time.Second, "SCRIPT", "LOAD", src); err != nil {
			conn.Close()
			return nil, err
		}
	}
	return conn, nil
}

// read is the reader: it hands every reply to the oldest written request.
func (c *floorConn) read(conn redis.Conn) error {
	for {
		reply, err := conn.Receive()
		if _, refused := err.(redis.Error); err != nil && !refused {
			return err
		}
		c.mu.Lock()
		if c.head == len(c.sent) {
			c.mu.Unlock()
			return errors.New("a reply nobody asked for")
		}
		r := c.sent[c.head]
		c.sent[c.head] = preq{}
		c.head++
		if c.head == len(c.sent) {
			c.sent, c.head = c.sent[:0], 0
		}
		c.mu.Unlock()
		r.to.receive(r.i, reply, err)
	}
}

// detach fails the written requests of a broken connection (they may have
// reached the node).
func (c *floorConn) detach(err error) {
	c.mu.Lock()
	written := c.sent[c.head:]
	c.sent, c.head, c.conn, c.err = nil, 0, nil, err
	c.mu.Unlock()
	for _, r := range written {
		r.to.receive(r.i, nil, err)
	}
}

// pipeLock is one owner; one hold at a time.
type pipeLock struct {
	f   *pipeFloor
	key string
	h   *pipeHold
}

// pipeHold is one attempt: its SETs' answers, then its DELs'.
type pipeHold struct {
	f        *pipeFloor
	set, del []interface{}
	sets     chan floorAns // node i's SET outcome, from the readers
	dels     chan floorAns // node i's DEL outcome, or nothing to clean

	mu       sync.Mutex // protects the fields below
	released bool       // Unlock or a failed attempt: send the DELs
	answered []int8     // by node: 0 no answer yet, 1 clean (DEL), -1 nothing to clean
}

// receive takes node i's SET answer (i < n) or its DEL answer (i >= n).
func (h *pipeHold) receive(i int, reply interface{}, err error) {
	n := len(h.f.nodes)
	if i >= n {
		v, _ := reply.(int64)
		h.dels <- floorAns{err == nil && v == 1, err}
		return
	}
	if err != nil {
		err = fmt.Errorf("node %d (%s): %w", i, h.f.nodes[i].addr, err)
	}
	yes := err == nil && reply != nil
	var re redis.Error
	clean := yes || err != nil && !errors.As(err, &re) && !errors.Is(err, errPipeNotSent)
	h.mu.Lock()
	h.answered[i] = -1
	if clean {
		h.answered[i] = 1
	}
	released := h.released
	h.mu.Unlock()
	h.sets <- floorAns{yes, err}
	if released {
		h.cleanup(i, clean)
	}
}

// cleanup sends node i's DEL, or reports that there is nothing to clean.
func (h *pipeHold) cleanup(i int, clean bool) {
	if !clean {
		h.dels <- floorAns{}
		return
	}
	h.f.nodes[i].submit(preq{args: h.del, deadline: time.Now().Add(nodeTimeout), to: h, i: len(h.f.nodes) + i})
}

// release sends the DEL of every node that answered its SET; the others
// send theirs when they answer.
func (h *pipeHold) release() {
	h.mu.Lock()
	h.released = true
	answered := append([]int8(nil), h.answered...)
	h.mu.Unlock()
	for i, a := range answered {
		if a != 0 {
			h.cleanup(i, a == 1)
		}
	}
}

// TryLock is one quorum round of SET NX PX, bounded by the node timeout.
func (l *pipeLock) TryLock(ctx context.Context) (bool, error) {
	f := l.f
	n := len(f.nodes)
	val := f.id + strconv.FormatUint(f.seq.Add(1), 10)
	h := &pipeHold{f: f, sets: make(chan floorAns, n), dels: make(chan floorAns, n), answered: make([]int8, n),
		set: []interface{}{floorSet.Hash(), 1, l.key, val, floorLeaseMs},
		del: []interface{}{floorDel.Hash(), 1, l.key, val}}
	deadline := time.Now().Add(nodeTimeout)
	for i, c := range f.nodes {
		c.submit(preq{args: h.set, deadline: deadline, to: h, i: i})
	}
	t := time.NewTimer(nodeTimeout)
	defer t.Stop()
	yes, failed, errs, timedOut := tally(h.sets, n, f.quorum, t.C)
	if timedOut {
		errs = append(errs, fmt.Errorf("%d node(s) did not answer within %v", failed, nodeTimeout))
	}
	if yes >= f.quorum {
		l.h = h
		return true, nil
	}
	h.release() // each node cleans up after its own SET answered
	if failed > n-f.quorum {
		return false, fmt.Errorf("floor: no quorum: %w", errors.Join(errs...))
	}
	return false, nil
}

// Lock polls every millisecond.
func (l *pipeLock) Lock(ctx context.Context) error { return pollLock(ctx, l) }

// Unlock sends the compare-and-DELs (each node after its SET answered) and
// returns when a majority deleted, or after the node timeout.
func (l *pipeLock) Unlock(ctx context.Context) error {
	h := l.h
	if h == nil {
		return errors.New("floor: not held")
	}
	l.h = nil
	h.release()
	t := time.NewTimer(nodeTimeout)
	defer t.Stop()
	yes, _, errs, timedOut := tally(h.dels, len(l.f.nodes), l.f.quorum, t.C)
	switch {
	case yes >= l.f.quorum:
		return nil
	case timedOut:
		return fmt.Errorf("floor: unlock reached %d nodes within %v: %w", yes, nodeTimeout, errors.Join(errs...))
	}
	return fmt.Errorf("floor: unlock reached %d nodes: %w", yes, errors.Join(errs...))
}
