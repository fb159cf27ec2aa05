package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"github.com/redlock-go/redlock/internal/script"
	"github.com/redlock-go/redlock/internal/timer"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gomodule/redigo/redis"
)

// The native connection layer over redigo: a few long-lived connections per
// node (pipes). Callers queue requests on a pipe; its writer sends every
// request queued since its last write in one write, and its reader hands
// the replies back in the order the requests were written, so the requests
// of many goroutines share writes and reads (auto-pipelining). Dialling,
// reading INFO server and loading the scripts happen in the background,
// bounded by their own timeout, never inside a command's budget. A pipe
// whose oldest written request is overdue by a node timeout has stalled (a
// paused or partitioned node): it is closed, its written requests fail, and
// one reconnect with backoff follows. A node none of whose pipes can
// connect fails new requests at once with the reason.

// native is the connection layer of one node: its pipes, how to set one
// up, and what is known of the server process behind it.
type native struct {
	cfg     *Config
	process Process // the one server behind the node
	pipes   []*pipe
	next    atomic.Uint32 // round-robin over the pipes

	loop    Worker         // run: keeps the pipes connected
	amu     sync.Mutex     // protects attempt
	attempt chan struct{}  // closed when the connecting attempt under way ends; nil between attempts
	broken  chan struct{}  // capacity 1: a pipe's connection broke
	serving sync.WaitGroup // the goroutines of the pipes serving a connection
}

// newNative makes cfg.Conns pipes; start connects them.
func newNative(cfg *Config) *native {
	t := &native{cfg: cfg, process: Process{addr: cfg.Addr}, broken: make(chan struct{}, 1), attempt: make(chan struct{})}
	t.pipes = make([]*pipe, cfg.Conns)
	for i := range t.pipes {
		t.pipes[i] = &pipe{t: t, wake: make(chan struct{}, 1)}
	}
	return t
}

// start starts connecting the pipes in the background.
func (t *native) start() { t.loop.Start(t.cfg.Hooks.Go, t.run) }

// identified records what INFO server said of the process, read at at,
// before the pipe serves: a run_id that changed is a restart seen.
func (t *native) identified(info string, at time.Time) {
	h := &t.cfg.Hooks
	if _, replaced, _ := t.process.observe(info, at); replaced {
		t.process.succeed(at, runIDChanged)
		h.Replaced()
	}
	h.Identified()
	h.Learned("")
}

// refused records that the node refused INFO server, before the pipe
// serves.
func (t *native) refused(err error) {
	t.cfg.infoRefused(&t.process, err)
	t.cfg.Hooks.Learned("")
}

// run keeps the node's pipes connected until Close. It connects every idle
// pipe, one at a time; when an attempt fails, every idle pipe is down for a
// backoff that doubles up to maxBackoff before the next attempt, so a dead
// or paused node costs one dial per backoff period, whatever the load.
func (t *native) run() {
	defer t.shutdown()
	var backoff time.Duration
	for t.cfg.Hooks.Ctx.Err() == nil {
		t.attempting(true)
		err := t.connectIdle()
		t.attempting(false)
		if err == nil {
			backoff = 0
			t.cfg.Hooks.Reached(nil)
			select {
			case <-t.broken:
			case <-t.cfg.Hooks.Ctx.Done():
			}
			continue
		}
		if t.cfg.Hooks.Ctx.Err() != nil {
			return
		}
		t.cfg.Hooks.Reached(err)
		t.cfg.Logger.Debug("redlock: connecting failed", "node", t.cfg.Name, "err", err)
		backoff = min(max(2*backoff, minBackoff), maxBackoff)
		wait := backoff + timer.Jitter(backoff/2)
		for _, p := range t.pipes {
			p.goDown(err)
		}
		timer := time.NewTimer(wait)
		select {
		case <-timer.C:
		case <-t.cfg.Hooks.Ctx.Done():
			timer.Stop()
			return
		}
		for _, p := range t.pipes {
			p.setConnecting()
		}
	}
}

// attempting records that a connecting attempt begins (on) or has ended.
func (t *native) attempting(on bool) {
	t.amu.Lock()
	defer t.amu.Unlock()
	switch {
	case on && t.attempt == nil:
		t.attempt = make(chan struct{})
	case !on && t.attempt != nil:
		close(t.attempt)
		t.attempt = nil
	}
}

// settle returns once no connecting attempt is under way, or ctx ends.
func (t *native) settle(ctx context.Context) {
	t.amu.Lock()
	ch := t.attempt
	t.amu.Unlock()
	if ch == nil {
		return
	}
	select {
	case <-ch:
	case <-ctx.Done():
	case <-t.cfg.Hooks.Ctx.Done():
	}
}

// connectIdle connects, one at a time, every pipe that is not serving, and
// stops at the first failure.
func (t *native) connectIdle() error {
	for _, p := range t.pipes {
		if p.serving() {
			continue
		}
		conn, err := t.connect()
		if err != nil {
			return err
		}
		if t.cfg.Hooks.Ctx.Err() != nil {
			conn.Close()
			return t.cfg.Hooks.Ctx.Err()
		}
		p.setReady(conn)
		t.serving.Add(1)
		go func() {
			defer t.serving.Done()
			err := p.serve(conn)
			if t.cfg.Hooks.Ctx.Err() == nil {
				t.cfg.Logger.Debug("redlock: connection lost", "node", t.cfg.Name, "err", err)
			}
			select {
			case t.broken <- struct{}{}:
			default:
			}
		}()
	}
	return nil
}

// shutdown ends every pipe at Close, once their connections are closed.
func (t *native) shutdown() {
	t.serving.Wait()
	for _, p := range t.pipes {
		p.close()
	}
}

// send queues one script call due by deadline on the pipe of its lane: the
// calls of one lane keep their order.
func (t *native) send(c *script.Call, deadline time.Time, to Receiver, i int) {
	p := t.pipes[c.Lane%uint32(len(t.pipes))]
	if err := p.submit(request{c: c, deadline: deadline, to: to, i: i}); err != nil {
		to.Receive(i, nil, t.cfg.Errors.Unsent(err))
	}
}

// sendBatch queues calls due by deadline on one pipe, the one that will
// send them soonest, to go in one write; to receives call j's outcome as
// j. A batch keeps no lane.
func (t *native) sendBatch(calls []script.Call, deadline time.Time, to Receiver) {
	p, err := t.soonest()
	if err == nil {
		err = p.submitBatch(calls, deadline, to)
	}
	if err != nil {
		for j := range calls {
			to.Receive(j, nil, t.cfg.Errors.Unsent(err))
		}
	}
}

// soonest returns the pipe that will send a request soonest: a ready one,
// else one that is connecting or waiting on an overdue reply; or why none
// can.
func (t *native) soonest() (*pipe, error) {
	n := len(t.pipes)
	start := int(t.next.Add(1))
	var best *pipe
	bestRank := rankNever
	var err error
	for k := 0; k < n && bestRank != rankNow; k++ {
		p := t.pipes[(start+k)%n]
		rank, perr := p.rank()
		if rank < bestRank {
			best, bestRank = p, rank
		}
		if perr != nil {
			err = perr
		}
	}
	if best == nil {
		return nil, err
	}
	return best, nil
}

// unreachable returns why no pipe serves a connection, nil when one does.
func (t *native) unreachable() error {
	var err error
	for _, p := range t.pipes {
		p.mu.Lock()
		state, perr := p.state, p.err
		p.mu.Unlock()
		if state == ready {
			return nil
		}
		if perr != nil {
			err = perr
		}
	}
	if err == nil {
		err = errors.New("connecting")
	}
	return err
}

// connect dials the node and sets the connection up: INFO server (restart
// detection) and SCRIPT LOAD of every script, pipelined in one round trip,
// bounded by the set-up timeout.
func (t *native) connect() (redis.Conn, error) {
	ctx, cancel := context.WithTimeout(t.cfg.Hooks.Ctx, t.cfg.Setup)
	defer cancel()
	conn, err := t.cfg.Dial(ctx)
	if err != nil {
		return nil, t.cfg.Errors.Auth(err)
	}
	// Close ends a set-up that waits on a node that does not answer.
	stop := context.AfterFunc(t.cfg.Hooks.Ctx, func() { conn.Close() })
	defer stop()
	deadline, _ := ctx.Deadline()
	if err := t.prepare(conn, deadline); err != nil {
		conn.Close()
		return nil, t.cfg.Errors.Auth(err)
	}
	return conn, nil
}

// DialTLS returns, for redis.DialContextFunc, a dial function that opens a
// TLS connection with cfg: the TCP dial and the handshake are both bounded
// by the dial's ctx, so that connect's set-up timeout and Close end them
// (redigo's own TLS handshake ignores ctx and waits 10s). An empty
// cfg.ServerName is the address's host, for SNI.
func DialTLS(cfg *tls.Config) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		raw, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		c := cfg
		if c.ServerName == "" {
			c = cfg.Clone()
			c.ServerName, _, _ = net.SplitHostPort(addr)
		}
		conn := tls.Client(raw, c)
		if err := conn.HandshakeContext(ctx); err != nil {
			raw.Close()
			return nil, handshakeError(addr, err)
		}
		return conn, nil
	}
}

// handshakeError is a failed TLS handshake with addr. A certificate that
// either side refused is said as it is; anything else (no answer in time,
// an answer that is no TLS record, a closed connection) is what a
// plain-text server on the port does, and the error asks about it.
func handshakeError(addr string, err error) error {
	var cert *tls.CertificateVerificationError
	var alert tls.AlertError
	if errors.As(err, &cert) || errors.As(err, &alert) {
		return fmt.Errorf("TLS handshake with %s failed: %w", addr, err)
	}
	return fmt.Errorf("TLS handshake with %s failed: is the server serving TLS on this port? (%w)", addr, err)
}

// prepare is connect's set-up of a new connection.
func (t *native) prepare(conn redis.Conn, deadline time.Time) error {
	at := t.cfg.Hooks.Now()
	if err := conn.Send("INFO", "server"); err != nil {
		return err
	}
	for _, s := range script.All {
		if err := conn.Send("SCRIPT", "LOAD", s.Src); err != nil {
			return err
		}
	}
	if err := conn.Flush(); err != nil {
		return err
	}
	info, err := redis.String(receiveBefore(conn, deadline))
	switch err.(type) {
	case nil:
		if err := supported(info, t.cfg.Errors.Invalid); err != nil {
			return err
		}
		t.identified(info, at)
	case redis.Error:
		if aerr := t.cfg.Errors.Auth(err); aerr != err {
			return aerr
		}
		// INFO denied to the user or renamed: neither the server's
		// version nor its restarts can be seen (the root package's Client.quarantined).
		t.refused(err)
	default:
		return fmt.Errorf("reading INFO server: %w", err)
	}
	for range script.All {
		if _, err := receiveBefore(conn, deadline); err != nil {
			return fmt.Errorf("loading the scripts: %w", err)
		}
	}
	return nil
}

// supported returns why a server whose INFO server is info cannot serve
// redlock, wrapping invalid: its scripts need Redis 7.0 or later (PEXPIRE's GT option).
// Valkey reports a redis_version of 7.2.4 or later.
func supported(info string, invalid error) error {
	for _, line := range strings.Split(info, "\n") {
		v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:")
		if !ok {
			continue
		}
		major, _, _ := strings.Cut(v, ".")
		if n, err := strconv.Atoi(major); err == nil && n < 7 {
			return fmt.Errorf("%w: the node runs Redis %s; redlock needs Redis 7.0 or later (or Valkey)", invalid, v)
		}
	}
	return nil
}

// receiveBefore reads one reply that must arrive before deadline.
func receiveBefore(conn redis.Conn, deadline time.Time) (interface{}, error) {
	left := time.Until(deadline)
	if left <= 0 {
		return nil, context.DeadlineExceeded
	}
	return redis.ReceiveWithTimeout(conn, left)
}

// pipeState is where a pipe is in its life.
type pipeState uint8

const (
	connecting pipeState = iota // dialling or setting up: requests queue
	ready                       // serving
	down                        // the last attempt failed: requests fail at once until the next
	shut                        // the Client closed
)

// pipe is one long-lived connection to a node, through all its
// reconnections (native.run makes them): a writer and a reader while it
// serves a connection, and a queue of requests that wait for one.
type pipe struct {
	t    *native
	wake chan struct{} // capacity 1: the writer has work

	mu      sync.Mutex // protects the fields below
	state   pipeState
	err     error      // why the pipe is down, or why it broke
	conn    redis.Conn // while ready
	queue   []request  // waiting for the writer
	sent    []request  // written, waiting for their replies in order, from head
	head    int
	held    bool        // the writer waits: the oldest written request is overdue
	stall   *time.Timer // fires when the oldest written request is overdue by grace
	stalled bool        // stall is armed
	spare   [][]request // the parts of batches whose replies were handed out, for the next batches
}

// How soon a pipe would send a request, best first.
const (
	rankNow   = iota // ready
	rankSoon         // connecting, or waiting on an overdue reply
	rankNever        // down or shut
)

// rank says how soon the pipe would send a request, and why it cannot
// when it cannot.
func (p *pipe) rank() (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.state == ready && !p.held:
		return rankNow, nil
	case p.state == ready || p.state == connecting:
		return rankSoon, nil
	case p.state == shut:
		return rankNever, p.t.cfg.Errors.Closed
	}
	return rankNever, p.err
}

// submit queues r for the writer, or returns why the pipe cannot send it:
// it is shut, or down.
func (p *pipe) submit(r request) error {
	p.mu.Lock()
	if err := p.refuseLocked(); err != nil {
		p.mu.Unlock()
		return err
	}
	p.queue = append(p.queue, r)
	p.mu.Unlock()
	p.signal()
	return nil
}

// submitBatch queues calls, due by deadline, to go in one write.
func (p *pipe) submitBatch(calls []script.Call, deadline time.Time, to Receiver) error {
	p.mu.Lock()
	if err := p.refuseLocked(); err != nil {
		p.mu.Unlock()
		return err
	}
	for j := range calls {
		p.queue = append(p.queue, request{c: &calls[j], deadline: deadline, to: to, i: j})
	}
	p.mu.Unlock()
	p.signal()
	return nil
}

// refuseLocked returns why the pipe cannot take a request: it is shut, or
// down. Under p.mu.
func (p *pipe) refuseLocked() error {
	switch p.state {
	case shut:
		return p.t.cfg.Errors.Closed
	case down:
		return p.err
	}
	return nil
}

// signal wakes the writer.
func (p *pipe) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// goDown records a failed attempt to connect, for reason err: the queued
// requests fail with err, and so does every request until the next attempt.
// (Waiting for that attempt would make a call that needs the node's answer,
// a dead majority's or a split vote's, wait up to a node timeout for a
// refusal it can have at once.)
func (p *pipe) goDown(err error) {
	p.mu.Lock()
	if p.state == ready || p.state == shut {
		p.mu.Unlock()
		return
	}
	p.state, p.err = down, err
	failed := p.queue
	p.queue = nil
	p.mu.Unlock()
	for _, r := range failed {
		r.fail(p.t.cfg.Errors.Unsent(err))
	}
}

// setConnecting records that a pipe that was down is to connect again.
func (p *pipe) setConnecting() {
	p.mu.Lock()
	if p.state == down {
		p.state = connecting
	}
	p.mu.Unlock()
}

// serving reports whether the pipe serves a connection.
func (p *pipe) serving() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state == ready
}

// setReady makes conn the pipe's connection.
func (p *pipe) setReady(conn redis.Conn) {
	p.mu.Lock()
	p.state, p.err, p.conn = ready, nil, conn
	p.mu.Unlock()
}

// close ends the pipe at Close: every request still queued or written
// fails with p.t.cfg.Errors.Closed.
func (p *pipe) close() {
	p.mu.Lock()
	p.state, p.err = shut, p.t.cfg.Errors.Closed
	queued, written := p.queue, p.sent[p.head:]
	p.queue, p.sent, p.head = nil, nil, 0
	if p.stall != nil {
		p.stall.Stop()
	}
	p.mu.Unlock()
	for _, r := range queued {
		r.fail(p.t.cfg.Errors.Unsent(p.t.cfg.Errors.Closed))
	}
	for _, r := range written {
		r.fail(p.t.cfg.Errors.Closed)
	}
}

// serve runs conn until it breaks or the Client closes: the writer in this
// goroutine, the reader in another that serve waits for.
func (p *pipe) serve(conn redis.Conn) error {
	p.signal() // requests queued while connecting
	readErr := make(chan error, 1)
	go func() { readErr <- p.read(conn) }()
	err, readerDone := p.write(conn, readErr)
	conn.Close() // stops the reader
	if !readerDone {
		<-readErr
	}
	p.detach(err)
	return err
}

// detach forgets a broken connection: its written requests fail (they may
// have reached the node), and the queued ones wait for the next.
func (p *pipe) detach(err error) {
	p.mu.Lock()
	written := p.sent[p.head:]
	p.sent, p.head, p.held, p.conn = nil, 0, false, nil
	p.state, p.err = connecting, err
	p.mu.Unlock()
	for _, r := range written {
		r.fail(err)
	}
}

// write is the writer: at every wake-up it sends what is queued in one
// write, the calls that take coalesced as one call each. It returns when a
// write fails, the reader stops (readerDone), or the Client closes.
func (p *pipe) write(conn redis.Conn, readErr <-chan error) (err error, readerDone bool) {
	var batch, expired []request
	var args []interface{} // a batch's, reused: Send has written them when it returns
	for {
		select {
		case <-p.wake:
		case err := <-readErr:
			return err, true
		case <-p.t.cfg.Hooks.Ctx.Done():
			return p.t.cfg.Errors.Closed, false
		}
		batch, expired = p.take(batch[:0], expired[:0])
		for _, r := range expired {
			r.fail(p.t.cfg.Errors.Unsent(fmt.Errorf("%w: queued past its deadline", context.DeadlineExceeded)))
		}
		for i := range batch {
			r := &batch[i]
			cmd := "EVALSHA"
			if r.eval {
				cmd = "EVAL"
			}
			var err error
			switch {
			case r.parts != nil:
				args = script.AppendBatch(args[:0], len(r.parts), r.part, r.eval)
				err = conn.Send(cmd, args...)
				clear(args)
			case r.eval:
				err = conn.Send(cmd, r.c.EvalArgs()...)
			default:
				err = conn.Send(cmd, r.c.Args...)
			}
			if err != nil {
				return err, false
			}
		}
		if len(batch) > 0 {
			if err := conn.Flush(); err != nil {
				return err, false
			}
		}
		clear(batch)
		clear(expired)
	}
}

// take moves the queued requests to the written ones and returns them in
// batch, except those already past their deadline, returned in expired.
// Consecutive calls that script.Batch can run go as one call of it, a
// batch, in their order (coalesce): what is queued goes, nothing waits
// for more. While the oldest written request is overdue it takes nothing:
// a node that stopped answering gets no more requests before it answers or
// its pipe is closed as stalled.
func (p *pipe) take(batch, expired []request) ([]request, []request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	at := time.Now()
	if p.head < len(p.sent) && at.After(p.sent[p.head].deadline) {
		p.held = true
		return batch, expired
	}
	p.held = false
	for _, r := range p.queue {
		if r.parts != nil {
			// A batch again, as EVAL: its parts past their deadline stay unsent.
			r, expired = r.prune(at, expired)
			if r.parts != nil {
				batch = append(batch, r)
			}
			continue
		}
		if at.After(r.deadline) {
			expired = append(expired, r)
			continue
		}
		batch = coalesce(batch, r, p.spareLocked)
	}
	p.sent = append(p.sent, batch...)
	clear(p.queue)
	p.queue = p.queue[:0]
	if len(batch) > 0 && !p.stalled {
		p.armStallLocked(at)
	}
	return batch, expired
}

// maxParts bounds the calls of one batch, and so how long its script
// keeps the server from other clients' commands.
const maxParts = 128

// coalesce appends r to batch: into the batch or the call it ends with,
// when both can go in one call of script.Batch (whose parts come from
// spare).
func coalesce(batch []request, r request, spare func() []request) []request {
	n := len(batch)
	if n == 0 || r.eval || !r.c.Batchable() {
		return append(batch, r)
	}
	last := &batch[n-1]
	switch {
	case last.eval || len(last.parts) == maxParts:
		return append(batch, r)
	case last.parts != nil:
	case last.c.Batchable():
		*last = request{parts: append(spare(), *last), deadline: last.deadline}
	default:
		return append(batch, r)
	}
	last.parts = append(last.parts, r)
	if r.deadline.Before(last.deadline) {
		last.deadline = r.deadline
	}
	return batch
}

// spareLocked returns an empty slice for a batch's parts. Under p.mu.
func (p *pipe) spareLocked() []request {
	if n := len(p.spare); n > 0 {
		parts := p.spare[n-1]
		p.spare[n-1] = nil
		p.spare = p.spare[:n-1]
		clear(parts)
		return parts[:0]
	}
	return make([]request, 0, 8)
}

// maxSpare bounds the slices a pipe keeps for batches' parts.
const maxSpare = 16

// recycle keeps the parts of a batch whose replies were all handed out
// for a next batch. spareLocked clears them, in the writer, which read
// them last but for this reader.
func (p *pipe) recycle(parts []request) {
	p.mu.Lock()
	if len(p.spare) < maxSpare {
		p.spare = append(p.spare, parts)
	}
	p.mu.Unlock()
}

// part is the call of the batch's part j.
func (r *request) part(j int) *script.Call { return r.parts[j].c }

// prune moves the batch's parts past their deadline at at to expired; a
// batch none of whose parts is left has no parts. The parts it keeps are a
// new slice: the writer may still read the old one (a NOSCRIPT reply).
func (r request) prune(at time.Time, expired []request) (request, []request) {
	left := make([]request, 0, len(r.parts))
	r.deadline = time.Time{}
	for _, part := range r.parts {
		if at.After(part.deadline) {
			expired = append(expired, part)
			continue
		}
		left = append(left, part)
		if r.deadline.IsZero() || part.deadline.Before(r.deadline) {
			r.deadline = part.deadline
		}
	}
	r.parts = left
	if len(left) == 0 {
		r.parts = nil
	}
	return r, expired
}

// armStallLocked sets the stall timer for the oldest written request.
// Under p.mu.
func (p *pipe) armStallLocked(at time.Time) {
	d := p.sent[p.head].deadline.Add(p.t.cfg.NodeTimeout).Sub(at)
	p.stalled = true
	if p.stall == nil {
		p.stall = time.AfterFunc(d, p.checkStall)
		return
	}
	p.stall.Reset(d)
}

// checkStall runs when the oldest written request may be overdue by grace:
// then the connection has stalled and is closed; its reader fails and the
// pipe reconnects.
func (p *pipe) checkStall() {
	p.mu.Lock()
	if p.head == len(p.sent) || p.conn == nil {
		p.stalled = false
		p.mu.Unlock()
		return
	}
	at := time.Now()
	oldest := p.sent[p.head]
	if due := oldest.deadline.Add(p.t.cfg.NodeTimeout); at.Before(due) {
		p.stall.Reset(due.Sub(at))
		p.mu.Unlock()
		return
	}
	p.stalled = false
	conn := p.conn
	p.mu.Unlock()
	p.t.cfg.Logger.Debug("redlock: connection stalled: no reply past the deadline", "node", p.t.cfg.Name, "overdue", at.Sub(oldest.deadline).Round(time.Millisecond))
	conn.Close()
}

// read is the reader: it hands every reply to the oldest written request.
// A NOSCRIPT reply (the node lost its script.All) sends the call again as
// EVAL while its deadline lasts.
func (p *pipe) read(conn redis.Conn) error {
	for {
		reply, err := redis.ReceiveWithTimeout(conn, 0)
		re, refused := err.(redis.Error)
		if err != nil && !refused {
			return closedByNode(err)
		}
		r, ok := p.pop()
		if !ok {
			return errors.New("a reply nobody asked for: the connection is out of step")
		}
		if r.parts != nil {
			p.split(r, reply, re, refused)
			continue
		}
		switch {
		case refused && strings.HasPrefix(string(re), "NOSCRIPT ") && !r.eval && time.Now().Before(r.deadline):
			r.eval = true
			if err := p.submit(r); err != nil {
				r.to.Receive(r.i, nil, p.t.cfg.Errors.Unsent(err))
			}
		case refused:
			r.to.Receive(r.i, nil, ServerError(re))
		default:
			r.to.Receive(r.i, reply, nil)
		}
	}
}

// split hands each part of the batch r its reply in the batch's reply, or
// the node's refusal re of the whole call (refused). A NOSCRIPT refusal
// sends the parts whose deadline lasts again, as EVAL.
func (p *pipe) split(r request, reply interface{}, re redis.Error, refused bool) {
	if refused && strings.HasPrefix(string(re), "NOSCRIPT ") && !r.eval {
		r, late := r.prune(time.Now(), nil)
		for _, part := range late {
			part.to.Receive(part.i, nil, ServerError(re))
		}
		if r.parts == nil {
			return
		}
		r.eval = true
		if err := p.submit(r); err != nil {
			r.fail(p.t.cfg.Errors.Unsent(err))
		}
		return
	}
	if refused {
		r.fail(ServerError(re))
		return
	}
	replies, err := script.BatchReplies(reply, len(r.parts))
	if err != nil {
		r.fail(err)
		return
	}
	for j, part := range r.parts {
		if e, ok := replies[j].(redis.Error); ok {
			part.to.Receive(part.i, nil, ServerError(e))
			continue
		}
		part.to.Receive(part.i, replies[j], nil)
	}
	p.recycle(r.parts)
}

// closedByNode says in words what a bare io.EOF or a reset means when it
// ends a connection: the node closed it, most often because its server died
// or restarted. Other errors are returned as they are.
func closedByNode(err error) error {
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("the node closed the connection (%w): its server died, restarted or dropped this client", err)
	case errors.Is(err, syscall.ECONNRESET):
		return fmt.Errorf("the node reset the connection (%w): its server died, restarted or dropped this client", err)
	}
	return err
}

// pop takes the oldest written request; false when none is waiting.
func (p *pipe) pop() (request, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.head == len(p.sent) {
		return request{}, false
	}
	r := p.sent[p.head]
	p.sent[p.head] = request{}
	p.head++
	switch {
	case p.head == len(p.sent):
		p.sent, p.head = p.sent[:0], 0
	case p.head >= 64 && 2*p.head >= len(p.sent):
		// Under steady load the queue never empties: reuse its front.
		n := copy(p.sent, p.sent[p.head:])
		clear(p.sent[n:])
		p.sent, p.head = p.sent[:n], 0
	}
	if p.held && len(p.queue) > 0 {
		p.signal() // the overdue reply came: the writer may go on
	}
	return r, true
}

// connections reports how many of the pipes serve now, and which one a
// batch sent now tries first (see soonest).
func (t *native) connections() (serving, batchFirst int) {
	for _, p := range t.pipes {
		if p.serving() {
			serving++
		}
	}
	return serving, int(t.next.Load()+1) % len(t.pipes)
}
