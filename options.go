package redlock

import (
	"crypto/tls"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/redlock-go/redlock/observe"
)

// Option configures a Client. Options are checked once, by Dial or New.
type Option func(*options)

type options struct {
	lease         time.Duration
	driftFactor   float64
	nodeTimeout   time.Duration
	timeoutSet    bool // WithNodeTimeout was given (else the default)
	prefix        string
	logger        *slog.Logger
	tls           *tls.Config
	fencing       bool
	quarantine    time.Duration    // < 0: the longest lease used (the default); 0: off
	quarantineSet bool             // WithQuarantine was given: quarantine is its value, as given
	youngNodes    bool             // also quarantine nodes first seen with a short uptime
	conns         int              // long-lived connections per node
	setup         time.Duration    // bound of a connection's dial and set-up
	setupSet      bool             // WithSetupTimeout was given (else the default)
	observer      observe.Observer // nil: none (the default)
	observerSet   bool             // WithObserver was given
	stall         time.Duration    // WithStallWarning's: a wait that node failures stall this long is said at Warn
	label         string           // WithOwnerLabel's: who this Client's owners are, for operators ("" publishes none)
}

func defaultOptions() options {
	return options{
		lease:       30 * time.Second,
		driftFactor: 0.01,
		nodeTimeout: 250 * time.Millisecond,
		prefix:      "redlock:",
		logger:      slog.Default(),
		quarantine:  -1,
		conns:       1,
		stall:       5 * time.Second,
		label:       defaultLabel(),
	}
}

// maxLabel is the longest owner label, in bytes.
const maxLabel = 200

// defaultLabel is WithOwnerLabel's default: "HOST pid PID".
func defaultLabel() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	label := host + " pid " + strconv.Itoa(os.Getpid())
	if len(label) > maxLabel {
		label = label[len(label)-maxLabel:]
	}
	return label
}

func (o *options) validate() error {
	if o.lease <= 0 {
		return invalid("WithLease(%v): the lease must be positive", o.lease)
	}
	if !(o.driftFactor >= 0 && o.driftFactor < 0.5) { // also rejects NaN
		return invalid("WithDriftFactor(%v): the factor must be in [0, 0.5)", o.driftFactor)
	}
	if o.nodeTimeout <= 0 {
		return invalid("WithNodeTimeout(%v): the timeout must be positive", o.nodeTimeout)
	}
	if d := drift(o.lease, o.driftFactor); o.lease <= d {
		return invalid("WithLease(%v): the lease must exceed the clock drift allowance %v", o.lease, d)
	}
	if o.nodeTimeout >= o.lease/3 {
		if !o.timeoutSet {
			return invalid("WithLease(%v): the lease must exceed three times the default node timeout %v (the renewal period, a third of the lease, must be longer than a node timeout); lengthen the lease or shorten WithNodeTimeout", o.lease, o.nodeTimeout)
		}
		return invalid("WithNodeTimeout(%v): must be below a third of the lease %v, the renewal period", o.nodeTimeout, o.lease)
	}
	if strings.ContainsAny(o.prefix, "{}") {
		return invalid("WithKeyPrefix(%q): the prefix may not contain '{' or '}' (the lock's name is its keys' hash tag)", o.prefix)
	}
	if o.logger == nil {
		return invalid("WithLogger(nil): pass a logger, or leave the option out to log to slog.Default()")
	}
	if o.quarantineSet && o.quarantine < 0 {
		return invalid("WithQuarantine(%v): the period must not be negative", o.quarantine)
	}
	if o.conns < 1 || o.conns > maxConns {
		return invalid("WithConnections(%d): want 1 to %d connections per node", o.conns, maxConns)
	}
	if o.setupSet && o.setup <= 0 {
		return invalid("WithSetupTimeout(%v): the timeout must be positive", o.setup)
	}
	if o.observerSet && o.observer == nil {
		return invalid("WithObserver(nil): pass an Observer, or leave the option out")
	}
	if o.stall <= 0 {
		return invalid("WithStallWarning(%v): the duration must be positive", o.stall)
	}
	if o.youngNodes && o.quarantine == 0 {
		return invalid("WithQuarantineYoungNodes with WithQuarantine(0): quarantine is off")
	}
	if len(o.label) > maxLabel || strings.IndexFunc(o.label, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		return invalid("WithOwnerLabel(%q): want at most %d bytes of printable text", o.label, maxLabel)
	}
	return nil
}

// WithLease sets the lease of watchdog-renewed holds (Lock, and TryLock with
// lease 0): how long a hold lasts on the nodes without renewal. The watchdog
// renews it every lease/3, so an owner that dies keeps the lock for at most
// one lease. Default 30s. It must exceed the drift allowance and three node
// timeouts.
func WithLease(d time.Duration) Option { return func(o *options) { o.lease = d } }

// WithDriftFactor sets the allowance for clock-rate differences between the
// client and the nodes, as a fraction of the lease: the validity of a hold is
// lease - elapsed - (lease*f + 2ms). Default 0.01; it must be in [0, 0.5).
func WithDriftFactor(f float64) Option { return func(o *options) { o.driftFactor = f } }

// WithNodeTimeout bounds every command's round trip to one node: a node that
// does not answer in time counts as failed for that call. Connecting to a
// node is not part of it: connections are long-lived, dialled and set up in
// the background within their own, longer bound (8 node timeouts, at least
// 2s), so a node whose round trip is close to the node timeout still
// counts. Default 250ms; it must be below a third of the lease (far below is
// better).
func WithNodeTimeout(d time.Duration) Option {
	return func(o *options) { o.nodeTimeout, o.timeoutSet = d, true }
}

// maxConns bounds WithConnections.
const maxConns = 64

// WithConnections sets how many long-lived connections the client keeps to
// each node for commands (pub/sub has one more). Concurrent calls share
// them: the requests queued on a connection while it writes go out in its
// next write, so fewer connections mean fuller writes. Default 1 (with 32
// goroutines on 2 cores it did 25% more Lock+Unlock per second than 2); more
// helps only when one connection's writer or reader saturates a core. The
// calls of one lock always share a connection.
func WithConnections(n int) Option { return func(o *options) { o.conns = n } }

// WithSetupTimeout bounds how long connecting to a node may take: the
// dial, TLS, AUTH and SELECT, and one round trip of INFO server and SCRIPT
// LOAD. Set-up runs in the background, apart from any command's node
// timeout (a call that needs a connection being set up waits for it within
// its own deadline); a node whose set-up does not finish in time is tried
// again with backoff. Default 8 node timeouts, at least 2s: a node whose
// round trip is close to the node timeout still connects. Raise it for
// links where a TLS handshake takes longer than that.
func WithSetupTimeout(d time.Duration) Option {
	return func(o *options) { o.setup, o.setupSet = d, true }
}

// WithKeyPrefix sets the namespace of every key and pub/sub channel the
// client uses. Default "redlock:". The keys of the lock NAME are
// PREFIX{NAME}:lock, PREFIX{NAME}:rollback and PREFIX{NAME}:fence, and its
// channel is PREFIX{NAME}:unlock: NAME is their Redis Cluster hash tag. The
// prefix may not contain '{' or '}', which would take the tag's place and
// put every lock in one slot.
func WithKeyPrefix(p string) Option { return func(o *options) { o.prefix = p } }

// WithLogger sets where the client logs what it cannot return: renewals that
// failed on some nodes, a wait that no quorum can end, a node listed twice,
// background rollbacks, pub/sub reconnects. Default: slog.Default() as it
// is at Dial or New (Info and above, to the standard logger's output); to
// discard every line, pass slog.New(slog.NewTextHandler(io.Discard, nil)).
// Losing a lock is never only a log line: see Mutex.Lost.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithStallWarning sets how long an acquisition may wait while its
// attempts reach no quorum because nodes fail before the client says so:
// one warning in the log naming the lock and each failing node with why
// (refused, timed out, in restart quarantine...), and the Observer's
// WaitStalled, then again at most once a minute while it lasts. It applies
// to every call that waits: Lock, LockLease and TryLock with a wait of a
// Mutex, a MultiMutex or an RWMutex (RLock, TryRLock too), and a
// Semaphore's Acquire and TryAcquire with a wait. The time counts from the
// start of the first of those attempts (for an acquisition that finds
// every node down, from its call). Waiting behind another owner's hold is
// not a stall and is never warned of. Default 5s; it must be positive.
func WithStallWarning(d time.Duration) Option { return func(o *options) { o.stall = d } }

// WithOwnerLabel names this Client's owners for operators: `redlock
// inspect` and Client.InspectAll show the label beside the owner fields
// ("<client id>:<owner id>") of its holds and waits. The Client publishes
// it on every node (one small key per Client, PREFIX owner:<client id>)
// with its first acquisition and again at least every five minutes while
// it takes or renews locks, never on a lock's own calls: it costs an
// acquisition nothing. Default: the host name and the process id, "HOST
// pid PID"; "" publishes none. At most 200 bytes of printable text.
func WithOwnerLabel(label string) Option { return func(o *options) { o.label = label } }

// WithTLSConfig sets the TLS configuration for rediss:// URLs given to Dial
// (a private CA, client certificates, or InsecureSkipVerify in tests).
// Default: the system roots, with the server name taken from the URL.
func WithTLSConfig(c *tls.Config) Option { return func(o *options) { o.tls = c } }

// WithFencing gives every new hold a fencing token (Mutex.Token): a number
// that grows with every acquisition of the lock, whoever holds it, so that a
// storage system can reject the writes of an owner whose lock expired. It
// keeps one counter key per lock name on every node, which lives a day after
// the lock's last fenced acquisition (longer when twice the quarantine and
// the lease are longer), and costs a round trip per new hold, which is why
// it is off by default: before Lock returns, the token is written back on
// every node and must find the counter below it on a majority; a node that
// held as much or more (another hold's token) sends it above that, for one
// more round trip, up to 4 in all, after which Lock fails with an error
// wrapping ErrNoQuorum.
func WithFencing() Option { return func(o *options) { o.fencing = true } }

// WithQuarantine sets how long a node that restarted does not count toward
// an acquisition or a renewal, counted from its start: the "delayed restart"
// of the Redlock paper, done by the client. A node restarted without
// persistence forgets the locks it held; kept out for at least the longest
// lease in use, it cannot hand one out again while its old holder still
// trusts it. It is still written to, so it is warm when it rejoins. A
// restart is a change of the node's run_id this client observed: every
// connection reads it (INFO server) when it is set up, before it serves a
// command, and a restart always breaks the connections. Default: the
// longest lease in use, this client's or any other client's of these nodes
// (each client publishes its longest lease on the nodes and learns the
// others'), plus its drift allowance (this client's clock may run fast
// while a holder's runs slow); 0 turns quarantine off. A period shorter
// than another client's lease is obeyed, with one warning. Negative is
// invalid.
func WithQuarantine(d time.Duration) Option {
	return func(o *options) { o.quarantine, o.quarantineSet = d, true }
}

// WithQuarantineYoungNodes also treats a node whose uptime is below the
// quarantine period as restarted, even if this client never saw its earlier
// run_id: for fleets where a client may start after a node restarted. A
// freshly started cluster is then unusable until the period has passed.
func WithQuarantineYoungNodes() Option { return func(o *options) { o.youngNodes = true } }

// buildOptions applies opts over the defaults and validates the result.
func buildOptions(opts []Option) (options, error) {
	o := defaultOptions()
	for _, opt := range opts {
		if opt == nil {
			return o, invalid("nil Option")
		}
		opt(&o)
	}
	return o, o.validate()
}

// closeTimeout bounds the releases Close sends for holds still held.
func (o *options) closeTimeout() time.Duration { return 4 * o.nodeTimeout }

// setupTimeout bounds dialling a connection and setting it up: long enough
// for a node whose round trip is close to the node timeout (a dial, AUTH,
// and one pipelined round trip of INFO and SCRIPT LOAD), and apart from any
// command's budget.
func (o *options) setupTimeout() time.Duration {
	if o.setupSet {
		return o.setup
	}
	return max(2*time.Second, 8*o.nodeTimeout)
}

// intentLease is the lease of a waiter's intent (acquire.lua's ARGV[7],
// slots.lua's ARGV[2], rw_write.lua's ARGV[6]): four node timeouts, one
// second by default. The keeper refreshes it every third of that while
// its waiter waits; it outlives a waiter that died by that much at most.
func (o *options) intentLease() time.Duration {
	return max(4*o.nodeTimeout, time.Millisecond)
}
