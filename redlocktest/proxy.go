package redlocktest

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// SetLatency delays every chunk of bytes through node i's proxy by d, in
// each direction, on existing and new connections, so a round trip takes
// at least 2*d longer. Order is preserved. d 0 removes the delay. It needs
// WithProxy.
func (c *Cluster) SetLatency(i int, d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("redlocktest: SetLatency(%d, %v): negative latency", i, d)
	}
	p, err := c.proxyOf(i, "SetLatency")
	if err != nil {
		return err
	}
	p.update(func() { p.latency = d })
	return nil
}

// Blackhole partitions node i while keeping its connections open: the
// proxy accepts and keeps connections but forwards nothing, discarding what
// either side sends (as Toxiproxy's timeout toxic does), so clients hang
// until their own timeouts. Heal ends it. It needs WithProxy.
func (c *Cluster) Blackhole(i int) error {
	p, err := c.proxyOf(i, "Blackhole")
	if err != nil {
		return err
	}
	p.update(func() { p.blackhole = true })
	return nil
}

// Drop partitions node i so that clients notice at once: the proxy closes
// every existing connection and closes new ones as soon as it accepts
// them. Heal ends it. It needs WithProxy.
func (c *Cluster) Drop(i int) error {
	p, err := c.proxyOf(i, "Drop")
	if err != nil {
		return err
	}
	p.update(func() { p.drop = true })
	p.closeConns()
	return nil
}

// Action is what node i's proxy does, under Intercept, with a chunk of
// bytes a client sends that contains the match.
type Action struct {
	// Close closes the client's connection instead of forwarding the
	// chunk: the node never sees it.
	Close bool
	// HoldReplies forwards the chunk and then holds everything the node
	// sends back on that connection for this long (order is kept), as a
	// node that answers late.
	HoldReplies time.Duration
}

// Intercept makes node i's proxy apply act to every chunk a client sends
// that contains match (bytes of a command on the wire: a key, a channel, a
// script's SHA1), on existing and new connections, until Heal. A chunk may
// carry several pipelined commands; the action applies to the chunk. It
// needs WithProxy.
func (c *Cluster) Intercept(i int, match string, act Action) error {
	if match == "" {
		return fmt.Errorf("redlocktest: Intercept(%d): empty match", i)
	}
	p, err := c.proxyOf(i, "Intercept")
	if err != nil {
		return err
	}
	p.update(func() { p.rules = append(p.rules, rule{[]byte(match), act}) })
	return nil
}

// Heal removes the latency, blackhole, drop and intercepts set on node i's
// proxy. Connections closed by Drop stay closed; clients must reconnect.
// It needs WithProxy.
func (c *Cluster) Heal(i int) error {
	p, err := c.proxyOf(i, "Heal")
	if err != nil {
		return err
	}
	p.update(func() { p.latency, p.blackhole, p.drop, p.rules = 0, false, false, nil })
	return nil
}

func (c *Cluster) proxyOf(i int, what string) (*proxy, error) {
	nd, err := c.node(i)
	if err != nil {
		return nil, err
	}
	if nd.proxy == nil {
		return nil, fmt.Errorf("redlocktest: %s needs the WithProxy option", what)
	}
	return nd.proxy, nil
}

// proxy forwards TCP connections from its own loopback port to one node,
// with the faults set by the Cluster.
type proxy struct {
	ln     net.Listener
	target func() string // the node's address, dialled per client connection
	wg     sync.WaitGroup

	mu        sync.Mutex
	latency   time.Duration       // added to each chunk, each way
	blackhole bool                // forward nothing, keep connections
	drop      bool                // refuse connections
	rules     []rule              // Intercept's, in order
	changed   chan struct{}       // closed and replaced whenever a fault changes
	conns     map[*pconn]struct{} // open client connections
	closed    bool
}

// newProxy starts a proxy to target on a free loopback port.
func newProxy(target func() string) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("redlocktest: proxy: %w", err)
	}
	p := &proxy{
		ln:      ln,
		target:  target,
		changed: make(chan struct{}),
		conns:   make(map[*pconn]struct{}),
	}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

// update changes the faults under the lock and wakes the waiting writers.
func (p *proxy) update(f func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f()
	close(p.changed)
	p.changed = make(chan struct{})
}

// close stops accepting, closes every connection and waits for every
// goroutine of the proxy.
func (p *proxy) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.ln.Close()
	p.closeConns()
	p.wg.Wait()
}

func (p *proxy) closeConns() {
	p.mu.Lock()
	conns := make([]*pconn, 0, len(p.conns))
	for pc := range p.conns {
		conns = append(conns, pc)
	}
	p.mu.Unlock()
	for _, pc := range conns {
		pc.close()
	}
}

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		conn, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			time.Sleep(10 * time.Millisecond) // e.g. out of file descriptors
			continue
		}
		p.mu.Lock()
		if p.closed || p.drop {
			p.mu.Unlock()
			conn.Close()
			continue
		}
		pc := &pconn{client: conn, done: make(chan struct{})}
		p.conns[pc] = struct{}{}
		p.wg.Add(1)
		p.mu.Unlock()
		go p.serve(pc)
	}
}

// serve dials the node for one client connection and copies both ways
// until either side closes or the proxy closes the connection.
func (p *proxy) serve(pc *pconn) {
	defer p.wg.Done()
	defer func() {
		p.mu.Lock()
		delete(p.conns, pc)
		p.mu.Unlock()
	}()
	defer pc.close()
	server, err := net.DialTimeout("tcp", p.target(), time.Second)
	if err != nil {
		return // the node is down: the client sees its connection closed
	}
	if !pc.setServer(server) {
		server.Close()
		return
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.pipe(pc, pc.client, server) }()
	go func() { defer wg.Done(); p.pipe(pc, server, pc.client) }()
	wg.Wait()
}

// rule is one Intercept.
type rule struct {
	match []byte
	act   Action
}

// intercept applies the first rule matching data, a chunk a client sent on
// pc; it reports whether the chunk may pass.
func (p *proxy) intercept(pc *pconn, data []byte) bool {
	p.mu.Lock()
	var act *Action
	for i := range p.rules {
		if bytes.Contains(data, p.rules[i].match) {
			act = &p.rules[i].act
			break
		}
	}
	var a Action
	if act != nil {
		a = *act
	}
	p.mu.Unlock()
	if act == nil {
		return true
	}
	if a.Close {
		pc.close()
		return false
	}
	pc.mu.Lock()
	if until := time.Now().Add(a.HoldReplies); until.After(pc.holdUntil) {
		pc.holdUntil = until
	}
	pc.mu.Unlock()
	return true
}

// chunk is what one Read returned, due for writing at due.
type chunk struct {
	data []byte
	due  time.Time
}

// pipe copies src to dst: a reader stamps each chunk with its due time
// (read time + latency) and a writer holds it until then, so order is kept.
// When either ends, the whole connection is closed.
func (p *proxy) pipe(pc *pconn, src, dst net.Conn) {
	defer pc.close()
	chunks := make(chan chunk, 64)
	go func() { // the reader; pipe waits for it by draining chunks
		defer close(chunks)
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			if n > 0 && src == pc.client && !p.intercept(pc, buf[:n]) {
				return
			}
			if n > 0 {
				p.mu.Lock()
				due := time.Now().Add(p.latency)
				p.mu.Unlock()
				if src != pc.client {
					pc.mu.Lock()
					if pc.holdUntil.After(due) {
						due = pc.holdUntil
					}
					pc.mu.Unlock()
				}
				select {
				case chunks <- chunk{buf[:n], due}:
				case <-pc.done:
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	defer func() {
		for range chunks { // wait for the reader to exit
		}
	}()
	for {
		var ch chunk
		var ok bool
		select {
		case ch, ok = <-chunks:
		case <-pc.done:
			return
		}
		if !ok {
			return
		}
		pass, open := p.wait(pc, ch.due)
		if !open {
			return
		}
		if !pass {
			continue // blackholed: discarded
		}
		if _, err := dst.Write(ch.data); err != nil {
			return
		}
	}
}

// wait holds a chunk until due, following fault changes meanwhile. It
// reports whether the chunk may pass (false when blackholed at its due
// time) and whether the connection is still open.
func (p *proxy) wait(pc *pconn, due time.Time) (pass, open bool) {
	for {
		p.mu.Lock()
		blackhole, changed := p.blackhole, p.changed
		p.mu.Unlock()
		d := time.Until(due)
		if d <= 0 {
			return !blackhole, true
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-changed:
			t.Stop()
		case <-pc.done:
			t.Stop()
			return false, false
		}
	}
}

// pconn is one client connection and its connection to the node.
type pconn struct {
	client net.Conn
	done   chan struct{} // closed by close

	mu        sync.Mutex
	server    net.Conn // nil until dialled
	closed    bool
	holdUntil time.Time // the node's replies wait until then (Intercept)
}

// setServer records the node connection; false when pc is already closed.
func (pc *pconn) setServer(s net.Conn) bool {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.closed {
		return false
	}
	pc.server = s
	return true
}

// close closes both sides once.
func (pc *pconn) close() {
	pc.mu.Lock()
	if pc.closed {
		pc.mu.Unlock()
		return
	}
	pc.closed = true
	close(pc.done)
	server := pc.server
	pc.mu.Unlock()
	pc.client.Close()
	if server != nil {
		server.Close()
	}
}
