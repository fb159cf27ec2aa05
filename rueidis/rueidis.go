package rueidis

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	rueidislib "github.com/redis/rueidis"

	"github.com/redlock-go/redlock"
)

// NewNode returns a quorum member for redlock.New reached through a client
// built from opt, which must name one standalone server in InitAddress. The
// redlock Client that uses the node closes that client when it closes.
// name identifies the node in errors. NewNode connects once (see the
// package comment); a server that cannot be reached yet is no error, the
// client connects again when it is used. It returns an error wrapping
// redlock.ErrInvalid when opt does not name exactly one server, asks for
// Sentinel, replicas or redirects, or when rueidis refuses opt.
func NewNode(name string, opt rueidislib.ClientOption) (*redlock.Node, error) {
	t, err := newTransport(name, opt)
	if err != nil {
		return nil, err
	}
	return redlock.NewTransportNode(name, t), nil
}

// transport is the redlock.Transport over the rueidis client it built.
type transport struct {
	client rueidislib.Client
	addr   string        // the server, opt.InitAddress[0]
	dials  atomic.Uint64 // connections opened to the server
	setup  time.Duration // a connection's set-up bound: opt.Dialer.Timeout or rueidis's default

	mu        sync.RWMutex   // protects closed and listeners; do adds to calls under it, so that Close's Wait sees every call
	closed    bool           // Close was called
	listeners []*listener    // opened by Listen, closed by Close
	calls     sync.WaitGroup // goroutines running a client call (see do)
}

func newTransport(name string, opt rueidislib.ClientOption) (*transport, error) {
	if err := check(opt); err != nil {
		return nil, fmt.Errorf("%w: node %q: %w", redlock.ErrInvalid, name, err)
	}
	t := &transport{addr: opt.InitAddress[0], setup: opt.Dialer.Timeout}
	if t.setup <= 0 {
		t.setup = rueidislib.DefaultDialTimeout
	}
	opt.ForceSingleClient = true
	opt.DisableCache = true
	opt.DialCtxFn = t.counted(opt.DialCtxFn, opt.DialFn)
	client, err := rueidislib.NewClient(opt)
	if client == nil {
		return nil, fmt.Errorf("%w: node %q: %w", redlock.ErrInvalid, name, err)
	}
	// With ForceSingleClient an error next to a client is the first
	// connection's failure: the client connects again when used.
	t.client = client
	return t, nil
}

// check says what is wrong with opt for a member that is one server.
func check(opt rueidislib.ClientOption) error {
	switch {
	case len(opt.InitAddress) != 1:
		return fmt.Errorf("InitAddress must name exactly one server, it names %d", len(opt.InitAddress))
	case opt.Sentinel.MasterSet != "":
		return errors.New("a Sentinel master set is not supported: a quorum member is one standalone server")
	case len(opt.Standalone.ReplicaAddress) > 0 || opt.Standalone.EnableRedirect || opt.ReplicaOnly:
		return errors.New("replicas and redirects are not supported: a quorum member is one standalone server")
	}
	return nil
}

// dialFailed marks the error of a dial that failed: no command was written
// on a connection that was never opened.
type dialFailed struct{ err error }

func (e dialFailed) Error() string { return e.err.Error() }
func (e dialFailed) Unwrap() error { return e.err }

// counted returns the dial function of the client: the caller's own
// (dialCtx, else dial), else the one rueidis would use, counting each
// connection it opens before the connection is handed to rueidis.
func (t *transport) counted(dialCtx func(context.Context, string, *net.Dialer, *tls.Config) (net.Conn, error),
	dial func(string, *net.Dialer, *tls.Config) (net.Conn, error)) func(context.Context, string, *net.Dialer, *tls.Config) (net.Conn, error) {
	return func(ctx context.Context, dst string, d *net.Dialer, cfg *tls.Config) (net.Conn, error) {
		var conn net.Conn
		var err error
		switch {
		case dialCtx != nil:
			conn, err = dialCtx(ctx, dst, d, cfg)
		case dial != nil:
			conn, err = dial(dst, d, cfg)
		case cfg != nil:
			conn, err = (&tls.Dialer{NetDialer: d, Config: cfg}).DialContext(ctx, "tcp", dst)
		default:
			conn, err = d.DialContext(ctx, "tcp", dst)
		}
		if err != nil {
			return nil, dialFailed{err}
		}
		t.dials.Add(1)
		return conn, nil
	}
}

// errClosed is the error of the calls made after Close.
var errClosed = fmt.Errorf("%w: the rueidis transport is closed", redlock.ErrClosed)

// Eval runs calls as EVALSHA in one pipelined round trip, then those that
// the server answered NOSCRIPT as EVAL in a second one while ctx lasts.
func (t *transport) Eval(ctx context.Context, calls []redlock.Call, replies []redlock.Reply) {
	cmds := make([]rueidislib.Completed, len(calls))
	for j, c := range calls {
		cmds[j] = t.client.B().Evalsha().Sha1(c.SHA1).Numkeys(int64(len(c.Keys))).Key(c.Keys...).Arg(args(c.Args)...).Build()
	}
	results, err := t.do(ctx, cmds)
	var again []int
	for j := range calls {
		if err != nil {
			replies[j] = redlock.Reply{Err: err}
			continue
		}
		if noScript(results[j]) && ctx.Err() == nil {
			again = append(again, j)
			continue
		}
		replies[j] = reply(results[j])
	}
	if len(again) == 0 {
		return
	}
	cmds = cmds[:0]
	for _, j := range again {
		c := calls[j]
		cmds = append(cmds, t.client.B().Eval().Script(c.Source).Numkeys(int64(len(c.Keys))).Key(c.Keys...).Arg(args(c.Args)...).Build())
	}
	results, err = t.do(ctx, cmds)
	for k, j := range again {
		if err != nil {
			replies[j] = redlock.Reply{Err: err}
			continue
		}
		replies[j] = reply(results[k])
	}
}

// args are a Call's arguments as rueidis takes them.
func args(in []any) []string {
	out := make([]string, len(in))
	for i, a := range in {
		switch a := a.(type) {
		case string:
			out[i] = a
		case int:
			out[i] = strconv.Itoa(a)
		case int64:
			out[i] = strconv.FormatInt(a, 10)
		case []byte:
			out[i] = string(a)
		default:
			out[i] = fmt.Sprint(a)
		}
	}
	return out
}

// do runs cmds in one DoMulti and returns their results, or one error for
// all of them: one wrapping redlock.ErrNotSent when they were surely not
// sent (ctx was done, or the transport closed, before), ctx's error when
// ctx ended first. The DoMulti runs in a goroutine of its own when ctx can
// end, so that ctx bounds the whole call even where rueidis would wait
// past it (a caller that finds another's connection set-up in progress
// waits for that set-up); the goroutine ends when rueidis returns, and
// Close waits for it.
func (t *transport) do(ctx context.Context, cmds []rueidislib.Completed) ([]rueidislib.RedisResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", redlock.ErrNotSent, err)
	}
	t.mu.RLock()
	if t.closed {
		t.mu.RUnlock()
		return nil, fmt.Errorf("%w: %w", redlock.ErrNotSent, errClosed)
	}
	t.calls.Add(1)
	t.mu.RUnlock()
	if ctx.Done() == nil {
		defer t.calls.Done()
		return t.client.DoMulti(ctx, cmds...), nil
	}
	done := make(chan []rueidislib.RedisResult, 1)
	go func() {
		defer t.calls.Done()
		done <- t.client.DoMulti(ctx, cmds...)
	}()
	select {
	case results := <-done:
		return results, nil
	case <-ctx.Done():
		select {
		case results := <-done:
			return results, nil
		default:
			return nil, ctx.Err()
		}
	}
}

// noScript reports whether r is the server's NOSCRIPT reply.
func noScript(r rueidislib.RedisResult) bool {
	re, ok := rueidislib.IsRedisErr(r.Error())
	return ok && re.IsNoScript()
}

// reply is r's outcome as the seam wants it: a server's error reply is a
// ReplyError, a dial that failed means the call was not sent.
func reply(r rueidislib.RedisResult) redlock.Reply {
	if err := r.NonRedisError(); err != nil {
		return redlock.Reply{Err: transportError(err)}
	}
	msg, _ := r.ToMessage()
	v, err := value(&msg)
	return redlock.Reply{Value: v, Err: err}
}

// transportError classifies an error that is not a reply to the command:
// a dial that failed (the command was never written) wraps
// redlock.ErrNotSent; a server's error reply during the connection's
// set-up (a wrong password, LOADING) is a ReplyError, since the server
// refused to serve the command; anything else may or may not have run.
func transportError(err error) error {
	var df dialFailed
	if errors.As(err, &df) {
		return fmt.Errorf("%w: %w", redlock.ErrNotSent, err)
	}
	if re, ok := rueidislib.IsRedisErr(err); ok {
		return redlock.ReplyError(re.Error())
	}
	return err
}

// value converts a reply: integer to int64, bulk or simple string to
// string, nil to nil, array to []any of those, and an error reply to a
// ReplyError (see text). RESP3 types that scripts do
// not return under their default RESP2 conversion are read as RESP2 would
// give them: true as 1, false as nil, a double as its string.
func value(m *rueidislib.RedisMessage) (any, error) {
	switch {
	case m.IsNil():
		return nil, nil
	case m.IsInt64():
		return m.AsInt64()
	case m.IsArray():
		elems, _ := m.ToArray()
		out := make([]any, len(elems))
		for i := range elems {
			v, err := value(&elems[i])
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	case m.IsBool():
		if b, _ := m.ToBool(); b {
			return int64(1), nil
		}
		return nil, nil
	case m.IsMap():
		return nil, errors.New("redlock/rueidis: a map reply, which no script of redlock returns")
	}
	return text(m)
}

// text is a string reply's text: that of a bulk or simple string, or of a
// RESP3 verbatim string without its format ("txt:"), a double's or a big
// number's digits; an error reply is a ReplyError with the server's whole
// message (rueidis's error drops an "ERR " prefix).
func text(m *rueidislib.RedisMessage) (string, error) {
	s, err := m.ToString()
	if err != nil {
		if _, ok := rueidislib.IsRedisErr(err); ok {
			return "", redlock.ReplyError(s)
		}
		return "", err
	}
	if !m.IsString() && len(s) >= 4 && s[3] == ':' {
		s = s[4:] // verbatim: no double or big number has a ':'
	}
	return s, nil
}

// Route names the one server; it does no I/O.
func (t *transport) Route(string) redlock.Route {
	return redlock.Route{Addr: t.addr, Dials: t.dials.Load()}
}

// Info reads INFO server.
func (t *transport) Info(ctx context.Context, _ string) (string, error) {
	results, err := t.do(ctx, []rueidislib.Completed{t.client.B().Info().Section("server").Build()})
	if err != nil {
		return "", err
	}
	if err := results[0].NonRedisError(); err != nil {
		return "", transportError(err)
	}
	msg, _ := results[0].ToMessage()
	return text(&msg)
}

// Close closes every PubSub still open and the client, and waits for the
// goroutines of calls that their contexts ended early.
func (t *transport) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	ls := t.listeners
	t.listeners = nil
	t.mu.Unlock()
	for _, l := range ls {
		_ = l.Close()
	}
	t.client.Close()
	t.calls.Wait()
	return nil
}
