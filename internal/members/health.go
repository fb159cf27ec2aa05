package members

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/internal/script"
)

// Health checks, and configuration mistakes said in words: a wrong or
// missing password is not an outage.

// authError is a node's refusal of the client's credentials, in words.
type authError struct {
	why      string // what is wrong, and what to check
	err      error  // the node's reply, or the connection's error
	sentinel error  // the Client's ErrAuth
}

func (e *authError) Error() string {
	return "authentication failed: " + e.why + " (" + e.err.Error() + ")"
}
func (e *authError) Unwrap() []error { return []error{e.sentinel, e.err} }

// AuthFailure returns the function that says an error in words, wrapping
// auth (the Client's ErrAuth), when it is an authentication failure: what
// Redis says to a wrong password (WRONGPASS, "invalid password"), to a
// client that gave none (NOAUTH, or a closed connection with "Protocol
// error: unauthenticated …" when its first command was large), and to a
// password given to a node that has none. It returns other errors as they
// are, and one it already said.
func AuthFailure(auth error) func(err error) error {
	return func(err error) error {
		if err == nil || errors.Is(err, auth) {
			return err
		}
		msg := err.Error()
		var why string
		switch {
		case strings.Contains(msg, "WRONGPASS"), strings.Contains(msg, "invalid password"), strings.Contains(msg, "invalid username-password pair"):
			why = "wrong user or password: check the credentials (a Dial URL's user:password, or the AUTH in a pool's dial function)"
		case strings.Contains(msg, "NOAUTH"), strings.Contains(msg, "Protocol error: unauthenticated"):
			why = "the node requires a password and none was given: put it in the URL (redis://:password@host:port, or redis://user:password@host:port)"
		case strings.Contains(msg, "without any password configured"):
			why = "a password was given but the node has none: leave it out of the URL, or configure it on the node"
		default:
			return err
		}
		return &authError{why: why, err: err, sentinel: auth}
	}
}

// AuthRefused reports whether err is a quorum error in which so many
// nodes refused the client's credentials (Errors.Auth) that no quorum can
// answer.
func (s *Set) AuthRefused(err error) bool {
	var qe *quorum.Error
	if !errors.As(err, &qe) || qe.Nodes == nil {
		return false
	}
	refused := 0
	for _, e := range qe.Nodes.Errors {
		if errors.Is(e, s.cfg.Errors.Auth) {
			refused++
		}
	}
	return refused > len(s.nodes)-s.quorum
}

// Status is one node's health: the root's NodeStatus field for field, in
// the same order and of the same types, so that the root converts one to
// the other (NodeStatus documents the fields).
type Status struct {
	Node             string
	Addr             string
	Err              error
	Latency          time.Duration
	Counted          bool
	Quarantine       error
	DuplicateOf      string
	QuarantinedUntil time.Time
	Version          string
	Started          time.Time
	Restarted        bool
}

// Status is node i's health, given res, its result of a broadcast of
// script.PingCall: whether it answered, how long it took, whether it
// counts toward quorums and what this client knows of its server process.
// A node that duplicates another is not asked: it does not count, and
// says so in Quarantine, not Err.
func (s *Set) Status(i int, res quorum.Result) Status {
	m := s.nodes[i]
	st := Status{Node: m.Name, Addr: m.Addr, Err: res.Err}
	if res.Err == nil {
		err := quorum.Refused(res.Replies[0])
		if err == nil {
			err = script.ParsePing(res.Replies[0])
		}
		if err != nil {
			st.Err = s.cfg.Errors.Node(i, err)
		}
	}
	if st.Err == nil {
		st.Latency = res.Took
		st.Quarantine = s.Excluded(i, "")
		st.Counted = st.Quarantine == nil
	}
	if err := s.Duplicated(i); err != nil {
		// Its calls go through the node it duplicates: it is not asked,
		// and does not count.
		st.Err, st.Quarantine, st.Counted = nil, err, false
	}
	st.DuplicateOf = s.DuplicateOf(i)
	s.process(m, &st)
	return st
}

// process fills in st what this client knows of node m's server process:
// its start, restart, version, and until when it is in quarantine.
func (s *Set) process(m *member, st *Status) {
	var known bool
	proc := m.Layer.Process("")
	st.Started, st.Restarted, known, _ = proc.State()
	if !known {
		st.Started = time.Time{}
	}
	st.Version = proc.Version()
	if st.Quarantine != nil && known {
		if q := s.QuarantinePeriod(); q > 0 && (st.Restarted || s.cfg.YoungNodes) {
			st.QuarantinedUntil = proc.Since().Add(q)
		}
	}
}

// Settle waits, within ctx, until no node's connection is being set up
// (see node.Peer.Settle): a health check then says why a node that could
// not be connected failed (a refused password, a TLS handshake with a
// plain-text port), as a lock call would, not that it is still connecting.
func (s *Set) Settle(ctx context.Context) {
	var wg sync.WaitGroup
	for _, m := range s.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.Layer.Settle(ctx)
		}()
	}
	wg.Wait()
}
