// Package redlockotel reports what a redlock Client does as OpenTelemetry
// metrics and traces: an implementation of observe.Observer
// (github.com/redlock-go/redlock/observe).
//
//	obs, err := redlockotel.New() // the global MeterProvider and TracerProvider
//	client, err := redlock.Dial(urls, redlock.WithObserver(obs))
//
// Metrics (every name begins with "redlock."; durations in seconds):
// histograms of acquisition latency, wait time, hold duration and renewal
// round duration; counters of acquisitions and releases by outcome, holds
// ended by reason, node errors by node and kind, and pub/sub reconnects;
// observable gauges of holds held, waiters, nodes in restart quarantine
// and nodes reachable. Spans: one per Lock (and LockLease), TryLock,
// Unlock and ForceUnlock, Semaphore.Acquire and TryAcquire and
// Permit.Release, a child of the span in the call's context, with
// an event per attempt and per node (answered, failed, quarantined). The
// lock's name is an attribute of spans only with WithLockNames (names can
// be sensitive), and never of metrics (it would make one series per
// lock). docs/observability.md in the repository lists every metric,
// attribute and span, and the alerts worth setting.
//
// One Observer serves one Client: its gauges count that Client's holds,
// waiters and nodes. For several Clients in one process, make one Observer
// each, told apart by WithAttributes.
package redlockotel

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/redlock-go/redlock/observe"
	"github.com/redlock-go/redlock/observe/errkind"
)

// ScopeName is the instrumentation scope of the Meter and the Tracer.
const ScopeName = "github.com/redlock-go/redlock/redlockotel"

// The attributes of the metrics and spans.
const (
	AttrOperation = attribute.Key("redlock.operation")       // the call: Lock, TryLock, Unlock, ForceUnlock; a Semaphore's Acquire, TryAcquire; a Permit's Release
	AttrOutcome   = attribute.Key("redlock.outcome")         // how an acquisition, an attempt or an Unlock ended
	AttrLockName  = attribute.Key("redlock.lock.name")       // the lock's name, on spans, with WithLockNames only
	AttrNode      = attribute.Key("redlock.node")            // a node's name
	AttrEndReason = attribute.Key("redlock.hold.end_reason") // why a hold ended
	AttrLost      = attribute.Key("redlock.hold.lost")       // whether the hold was lost
	AttrErrorType = attribute.Key("error.type")              // the kind of a node's error
)

// Option configures an Observer.
type Option func(*config)

type config struct {
	meters  metric.MeterProvider
	tracers trace.TracerProvider
	names   bool
	attrs   []attribute.KeyValue
}

// WithMeterProvider sets where the metrics go. Default: the global
// MeterProvider (otel.GetMeterProvider) at the time of New.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) { c.meters = mp }
}

// WithTracerProvider sets where the spans go. Default: the global
// TracerProvider (otel.GetTracerProvider) at the time of New.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.tracers = tp }
}

// WithLockNames puts the lock's name on spans (redlock.lock.name). Off by
// default: names can carry what should not leave the process (a customer,
// an account). Metrics never carry it.
func WithLockNames() Option { return func(c *config) { c.names = true } }

// WithAttributes adds attrs to every metric the Observer records (a
// client's name, say, to tell several Clients apart).
func WithAttributes(attrs ...attribute.KeyValue) Option {
	return func(c *config) { c.attrs = append(c.attrs, attrs...) }
}

// Observer is an observe.Observer that records OpenTelemetry metrics and
// spans. Its methods are safe for concurrent use and do not block.
type Observer struct {
	observe.NopObserver
	tracer trace.Tracer
	names  bool
	attrs  []attribute.KeyValue
	base   metric.MeasurementOption // attrs, as an option
	ins    instruments
	reg    metric.Registration

	holds   atomic.Int64 // held now: HoldStarted less HoldEnded
	waiters atomic.Int64 // waiting now: WaitStarted less the AcquireDone of calls that waited

	mu          sync.Mutex           // protects the fields below
	reachable   map[string]bool      // by node: reachable at its latest change
	quarantines map[server]time.Time // by server: in quarantine until (zero: until NodeBack)
}

var _ observe.Observer = (*Observer)(nil)

// New returns an Observer. It returns an error when an instrument cannot
// be made.
func New(opts ...Option) (*Observer, error) {
	cfg := config{}
	for _, opt := range opts {
		opt(&cfg)
	}
	if cfg.meters == nil {
		cfg.meters = otel.GetMeterProvider()
	}
	if cfg.tracers == nil {
		cfg.tracers = otel.GetTracerProvider()
	}
	o := &Observer{
		tracer:      cfg.tracers.Tracer(ScopeName),
		names:       cfg.names,
		attrs:       cfg.attrs,
		base:        metric.WithAttributes(cfg.attrs...),
		reachable:   make(map[string]bool),
		quarantines: make(map[server]time.Time),
	}
	meter := cfg.meters.Meter(ScopeName)
	var err error
	if o.ins, err = newInstruments(meter); err != nil {
		return nil, err
	}
	if o.reg, err = o.ins.register(meter, o.observe); err != nil {
		return nil, err
	}
	return o, nil
}

// Close stops reporting the observable gauges. The other metrics and the
// spans are recorded as events come.
func (o *Observer) Close() error { return o.reg.Unregister() }

// with returns the Observer's attributes and kvs as one option.
func (o *Observer) with(kvs ...attribute.KeyValue) metric.MeasurementOption {
	if len(o.attrs) == 0 {
		return metric.WithAttributes(kvs...)
	}
	all := make([]attribute.KeyValue, 0, len(o.attrs)+len(kvs))
	return metric.WithAttributes(append(append(all, o.attrs...), kvs...)...)
}

// observe reports the gauges.
func (o *Observer) observe(_ context.Context, ob metric.Observer) error {
	quarantined, reachable := o.nodeCounts(time.Now())
	ob.ObserveInt64(o.ins.holds, o.holds.Load(), o.base)
	ob.ObserveInt64(o.ins.waiters, o.waiters.Load(), o.base)
	ob.ObserveInt64(o.ins.quarantined, int64(quarantined), o.base)
	ob.ObserveInt64(o.ins.reachable, int64(reachable), o.base)
	return nil
}

// nodeCounts returns how many nodes are in quarantine at now (one of
// their servers is, until a time after now or until NodeBack), and how
// many are reachable.
func (o *Observer) nodeCounts(now time.Time) (quarantined, reachable int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	nodes := make(map[string]bool)
	for k, until := range o.quarantines {
		if until.IsZero() || until.After(now) {
			nodes[k.node] = true
		}
	}
	for _, up := range o.reachable {
		if up {
			reachable++
		}
	}
	return len(nodes), reachable
}

// OpStarted starts the call's span.
func (o *Observer) OpStarted(ctx context.Context, e observe.OpStart) context.Context {
	attrs := []attribute.KeyValue{AttrOperation.String(e.Op.String())}
	if o.names {
		attrs = append(attrs, AttrLockName.String(e.Lock))
	}
	if e.Lease > 0 {
		attrs = append(attrs, attribute.Float64("redlock.lease", e.Lease.Seconds()))
	}
	if e.Op == observe.OpTryLock || e.Op == observe.OpTryRLock || e.Op == observe.OpTryAcquire {
		attrs = append(attrs, attribute.Float64("redlock.wait", e.Wait.Seconds()))
	}
	ctx, _ = o.tracer.Start(ctx, "redlock."+e.Op.String(), trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	return ctx
}

// AttemptDone adds an event for the attempt and one per node to the
// call's span, and counts the nodes' errors.
func (o *Observer) AttemptDone(ctx context.Context, e observe.Attempt) {
	span := trace.SpanFromContext(ctx)
	span.AddEvent("redlock.attempt", trace.WithAttributes(
		AttrOutcome.String(e.Outcome.String()),
		attribute.Int("redlock.nodes.yes", e.Yes),
		attribute.Int("redlock.nodes.no", e.No),
		attribute.Int("redlock.nodes.failed", e.Failed),
		attribute.Float64("redlock.duration", e.Took.Seconds()),
	))
	o.nodes(ctx, span, e.Nodes)
}

// WaitStarted counts a waiter and marks the span.
func (o *Observer) WaitStarted(ctx context.Context, _ observe.Wait) {
	o.waiters.Add(1)
	trace.SpanFromContext(ctx).AddEvent("redlock.wait")
}

// AcquireDone records the acquisition and ends its span.
func (o *Observer) AcquireDone(ctx context.Context, e observe.Acquire) {
	op, out := AttrOperation.String(e.Op.String()), AttrOutcome.String(e.Outcome.String())
	o.ins.acquisitions.Add(ctx, 1, o.with(op, out))
	o.ins.acquire.Record(ctx, e.Took.Seconds(), o.with(op, out))
	if e.Queued {
		o.waiters.Add(-1)
		o.ins.wait.Record(ctx, e.Waited.Seconds(), o.with(op))
	}
	span := trace.SpanFromContext(ctx)
	span.SetAttributes(out, attribute.Bool("redlock.reentrant", e.Reentrant), attribute.Float64("redlock.waited", e.Waited.Seconds()))
	o.end(span, e.Outcome != observe.OutcomeAcquired && e.Outcome != observe.OutcomeBusy, e.Err)
}

// ReleaseDone records the release and ends its span.
func (o *Observer) ReleaseDone(ctx context.Context, e observe.Release) {
	out := AttrOutcome.String(e.Outcome.String())
	o.ins.releases.Add(ctx, 1, o.with(out))
	span := trace.SpanFromContext(ctx)
	o.nodes(ctx, span, e.Nodes)
	span.SetAttributes(out)
	o.end(span, e.Err != nil, e.Err)
}

// ForceDone ends the ForceUnlock's span.
func (o *Observer) ForceDone(ctx context.Context, e observe.Force) {
	span := trace.SpanFromContext(ctx)
	o.nodes(ctx, span, e.Nodes)
	span.SetAttributes(attribute.Bool("redlock.deleted", e.Deleted))
	o.end(span, e.Err != nil, e.Err)
}

// HoldStarted counts a hold held.
func (o *Observer) HoldStarted(observe.HoldStart) { o.holds.Add(1) }

// HoldEnded records the hold's end and duration.
func (o *Observer) HoldEnded(e observe.HoldEnd) {
	o.holds.Add(-1)
	attrs := o.with(AttrEndReason.String(e.Reason.String()), AttrLost.Bool(e.Reason.Lost()))
	ctx := context.Background()
	o.ins.holdsEnded.Add(ctx, 1, attrs)
	o.ins.hold.Record(ctx, e.Held.Seconds(), attrs)
}

// RenewalDone records the round's duration and the nodes' errors.
func (o *Observer) RenewalDone(e observe.Renewal) {
	ctx := context.Background()
	o.ins.renewal.Record(ctx, e.Took.Seconds(), o.base)
	o.nodes(ctx, nil, e.Nodes)
}

// NodeChanged keeps the node's state for the gauges.
func (o *Observer) NodeChanged(e observe.NodeChange) {
	k := server{e.Node, e.Addr}
	o.mu.Lock()
	defer o.mu.Unlock()
	switch e.State {
	case observe.NodeUp, observe.NodeDown:
		o.reachable[e.Node] = e.State == observe.NodeUp
	case observe.NodeQuarantined:
		o.quarantines[k] = e.Until
	case observe.NodeBack:
		delete(o.quarantines, k)
	}
}

// PubSubReconnected counts the reconnect.
func (o *Observer) PubSubReconnected(e observe.PubSubReconnect) {
	o.ins.reconnects.Add(context.Background(), 1, o.with(AttrNode.String(e.Node)))
}

// nodes adds an event per node that answered, failed or is in quarantine
// to span (when not nil), and counts the failures and quarantines as
// node errors.
func (o *Observer) nodes(ctx context.Context, span trace.Span, nodes []observe.NodeResult) {
	for _, n := range nodes {
		node := AttrNode.String(n.Node)
		var name string
		attrs := []attribute.KeyValue{node}
		switch n.Answer {
		case observe.AnswerYes, observe.AnswerNo:
			name = "redlock.node.answered"
			attrs = append(attrs, attribute.String("redlock.node.answer", n.Answer.String()))
		case observe.AnswerFailed, observe.AnswerQuarantined:
			name = "redlock.node.failed"
			if n.Answer == observe.AnswerQuarantined {
				name = "redlock.node.quarantined"
			}
			kind := AttrErrorType.String(ErrorType(n.Err))
			o.ins.nodeErrors.Add(ctx, 1, o.with(node, kind))
			attrs = append(attrs, kind, attribute.String("exception.message", errString(n.Err)))
		default:
			continue // not waited for
		}
		if span != nil {
			span.AddEvent(name, trace.WithAttributes(attrs...))
		}
	}
}

// end sets the span's status and ends it.
func (o *Observer) end(span trace.Span, failed bool, err error) {
	if failed {
		span.SetStatus(codes.Error, errString(err))
	}
	span.End()
}

// ErrorType is the kind of a node's error, as the error.type attribute of
// redlock.node.errors says it: errkind.Of(err) (package
// github.com/redlock-go/redlock/observe/errkind, which lists the kinds),
// the same words as the redlock command's error_type label.
func ErrorType(err error) string { return errkind.Of(err) }

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// server is one server of a node: a cluster member has several.
type server struct{ node, addr string }
