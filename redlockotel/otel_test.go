package redlockotel_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/observe/errkind"
	"github.com/redlock-go/redlock/redlockotel"
	"github.com/redlock-go/redlock/redlocktest"
)

// The Observer on real redis-server nodes: each scenario reads the metrics
// through a ManualReader and the spans through a SpanRecorder, and checks
// exactly what they must say.

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// probe is a Client observed by a redlockotel.Observer, with what reads
// its metrics and spans.
type probe struct {
	client *redlock.Client
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
	urls   []string
}

// newProbe dials the cluster with an Observer (with opts) and waits until
// every node is reachable.
func newProbe(t *testing.T, cl *redlocktest.Cluster, clientOpts []redlock.Option, opts ...redlockotel.Option) *probe {
	t.Helper()
	p := &probe{reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder(), urls: cl.URLs()}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(p.reader))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(p.spans))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()); _ = tp.Shutdown(context.Background()) })
	obs, err := redlockotel.New(append(opts, redlockotel.WithMeterProvider(mp), redlockotel.WithTracerProvider(tp))...)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, obs.Close()) })
	clientOpts = append([]redlock.Option{redlock.WithObserver(obs)}, clientOpts...)
	p.client, err = redlock.Dial(cl.URLs(), clientOpts...)
	require.NoError(t, err)
	t.Cleanup(func() { p.client.Close() })
	p.eventually(t, redlockotel.MetricReachable, int64(cl.N()))
	return p
}

// collect reads every metric.
func (p *probe) collect(t *testing.T) metricdata.ScopeMetrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, p.reader.Collect(context.Background(), &rm))
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name == redlockotel.ScopeName {
			return sm
		}
	}
	return metricdata.ScopeMetrics{}
}

// find returns the metric called name; false when nothing was recorded.
func find(sm metricdata.ScopeMetrics, name string) (metricdata.Metrics, bool) {
	for _, m := range sm.Metrics {
		if m.Name == name {
			return m, true
		}
	}
	return metricdata.Metrics{}, false
}

// matches reports whether set has every attribute of want.
func matches(set attribute.Set, want []attribute.KeyValue) bool {
	for _, kv := range want {
		if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
			return false
		}
	}
	return true
}

// count is the sum of the counter, or the number of observations of the
// histogram, or the value of the gauge called name, over the data points
// that have the attributes want.
func (p *probe) count(t *testing.T, name string, want ...attribute.KeyValue) int64 {
	t.Helper()
	m, ok := find(p.collect(t), name)
	if !ok {
		return 0
	}
	var n int64
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		for _, dp := range d.DataPoints {
			if matches(dp.Attributes, want) {
				n += dp.Value
			}
		}
	case metricdata.Gauge[int64]:
		for _, dp := range d.DataPoints {
			if matches(dp.Attributes, want) {
				n += dp.Value
			}
		}
	case metricdata.Histogram[float64]:
		for _, dp := range d.DataPoints {
			if matches(dp.Attributes, want) {
				n += int64(dp.Count)
			}
		}
	default:
		t.Fatalf("metric %s has data of type %T", name, m.Data)
	}
	return n
}

// histogramSum is the sum of the observations of the histogram called name.
func (p *probe) histogramSum(t *testing.T, name string, want ...attribute.KeyValue) float64 {
	t.Helper()
	m, ok := find(p.collect(t), name)
	require.True(t, ok, "no metric %s", name)
	var sum float64
	for _, dp := range m.Data.(metricdata.Histogram[float64]).DataPoints {
		if matches(dp.Attributes, want) {
			sum += dp.Sum
		}
	}
	return sum
}

// eventually waits until count(name, want...) is n.
func (p *probe) eventually(t *testing.T, name string, n int64, want ...attribute.KeyValue) {
	t.Helper()
	require.Eventually(t, func() bool { return p.count(t, name, want...) == n }, 5*time.Second, 5*time.Millisecond,
		"%s%v never became %d (it is %d)", name, want, n, p.count(t, name, want...))
}

// spanNames returns the names of the spans ended, in order.
func (p *probe) spanNames() []string {
	var out []string
	for _, s := range p.spans.Ended() {
		out = append(out, s.Name())
	}
	return out
}

// events returns the names of the span's events, and for node events the
// node's index among urls: "redlock.node.failed 2".
func events(s sdktrace.ReadOnlySpan, urls []string) []string {
	var out []string
	for _, e := range s.Events() {
		name := e.Name
		for _, kv := range e.Attributes {
			if kv.Key == redlockotel.AttrNode {
				for i, u := range urls {
					if u == kv.Value.AsString() {
						name += " " + string(rune('0'+i))
					}
				}
			}
		}
		out = append(out, name)
	}
	return out
}

// attr returns the span's attribute key.
func attr(s sdktrace.ReadOnlySpan, key attribute.Key) attribute.Value {
	for _, kv := range s.Attributes() {
		if kv.Key == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

var (
	opLock     = redlockotel.AttrOperation.String("Lock")
	opTryLock  = redlockotel.AttrOperation.String("TryLock")
	acquired   = redlockotel.AttrOutcome.String("acquired")
	busy       = redlockotel.AttrOutcome.String("busy")
	noQuorum   = redlockotel.AttrOutcome.String("no_quorum")
	released   = redlockotel.AttrOutcome.String("released")
	notLost    = redlockotel.AttrLost.Bool(false)
	lost       = redlockotel.AttrLost.Bool(true)
	byRelease  = redlockotel.AttrEndReason.String("released")
	byTaken    = redlockotel.AttrEndReason.String("taken")
	unreachble = redlockotel.AttrErrorType.String("unreachable")
)

func TestContendedRun(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	p := newProbe(t, cl, nil, redlockotel.WithLockNames())
	ctx := context.Background()
	a, b, d := p.client.NewMutex("job"), p.client.NewMutex("job"), p.client.NewMutex("job")

	require.NoError(t, a.Lock(ctx))
	ok, err := d.TryLock(ctx, 0, 0)
	require.NoError(t, err)
	require.False(t, ok)
	got := make(chan bool, 1)
	go func() {
		ok, _ := b.TryLock(ctx, 10*time.Second, 0)
		got <- ok
	}()
	p.eventually(t, redlockotel.MetricWaiters, 1)
	assert.Equal(t, int64(1), p.count(t, redlockotel.MetricHolds))
	time.Sleep(200 * time.Millisecond)
	require.NoError(t, a.Unlock(ctx))
	require.True(t, <-got)
	require.NoError(t, b.Unlock(ctx))

	assert.Equal(t, int64(1), p.count(t, redlockotel.MetricAcquisitions, opLock, acquired))
	assert.Equal(t, int64(1), p.count(t, redlockotel.MetricAcquisitions, opTryLock, busy))
	assert.Equal(t, int64(1), p.count(t, redlockotel.MetricAcquisitions, opTryLock, acquired))
	assert.Equal(t, int64(3), p.count(t, redlockotel.MetricAcquireDuration))
	assert.Equal(t, int64(1), p.count(t, redlockotel.MetricWaitDuration, opTryLock), "only the call that waited")
	assert.GreaterOrEqual(t, p.histogramSum(t, redlockotel.MetricWaitDuration), 0.2)
	assert.Equal(t, int64(2), p.count(t, redlockotel.MetricReleases, released))
	assert.Equal(t, int64(2), p.count(t, redlockotel.MetricHoldsEnded, byRelease, notLost))
	assert.Equal(t, int64(2), p.count(t, redlockotel.MetricHoldDuration, byRelease))
	assert.Equal(t, int64(0), p.count(t, redlockotel.MetricHolds))
	assert.Equal(t, int64(0), p.count(t, redlockotel.MetricWaiters))
	assert.Equal(t, int64(0), p.count(t, redlockotel.MetricNodeErrors))

	// The Observer orders the events of one call, not the calls of two
	// owners. This goroutine's calls end in the order it made them: a's
	// Lock, d's TryLock, a's Unlock, b's Unlock. b's TryLock began after
	// d's ended and returned before b's Unlock began, but it runs beside
	// a's Unlock: b may get in, and end its span, before a's Unlock has
	// reported its own end.
	names := p.spanNames()
	require.Len(t, names, 5, "%q", names)
	assert.Equal(t, []string{"redlock.Lock", "redlock.TryLock"}, names[:2], "a's Lock, then d's TryLock")
	require.ElementsMatch(t, []string{"redlock.Unlock", "redlock.TryLock"}, names[2:4], "a's Unlock and b's TryLock, in either order")
	assert.Equal(t, "redlock.Unlock", names[4], "b's Unlock, last")
	spans := p.spans.Ended()
	bTry := spans[2+slices.Index(names[2:4], "redlock.TryLock")]
	assert.Equal(t, "job", attr(spans[0], redlockotel.AttrLockName).AsString())
	assert.Equal(t, "busy", attr(spans[1], redlockotel.AttrOutcome).AsString())
	assert.Equal(t, codes.Unset, spans[1].Status().Code, "busy is not an error")
	waited := events(bTry, p.urls)
	assert.Equal(t, []string{"redlock.attempt"}, waited[:1], "an attempt, then the wait: %q", waited)
	assert.Contains(t, waited, "redlock.wait")
	assert.Equal(t, "acquired", attr(bTry, redlockotel.AttrOutcome).AsString())
	assert.Positive(t, attr(bTry, "redlock.waited").AsFloat64())
}

// TestSemaphoreRun: a Semaphore's calls are counted and traced as a
// Mutex's, under their own operations. One permit: an Acquire gets it, a
// TryAcquire with no wait is busy, a TryAcquire that waits gets it when
// it is released; two Releases.
func TestSemaphoreRun(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	p := newProbe(t, cl, nil, redlockotel.WithLockNames())
	ctx := context.Background()
	s := p.client.NewSemaphore("pool", 1)

	held, err := s.Acquire(ctx, 0)
	require.NoError(t, err)
	none, err := s.TryAcquire(ctx, 0, 0)
	require.NoError(t, err)
	require.Nil(t, none)
	got := make(chan *redlock.Permit, 1)
	go func() {
		q, _ := s.TryAcquire(ctx, 10*time.Second, 0)
		got <- q
	}()
	p.eventually(t, redlockotel.MetricWaiters, 1)
	time.Sleep(200 * time.Millisecond)
	require.NoError(t, held.Release(ctx))
	q := <-got
	require.NotNil(t, q)
	require.NoError(t, q.Release(ctx))

	opAcquire, opTryAcquire := redlockotel.AttrOperation.String("Acquire"), redlockotel.AttrOperation.String("TryAcquire")
	assert.Equal(t, int64(1), p.count(t, redlockotel.MetricAcquisitions, opAcquire, acquired))
	assert.Equal(t, int64(1), p.count(t, redlockotel.MetricAcquisitions, opTryAcquire, busy))
	assert.Equal(t, int64(1), p.count(t, redlockotel.MetricAcquisitions, opTryAcquire, acquired))
	assert.Equal(t, int64(3), p.count(t, redlockotel.MetricAcquireDuration))
	assert.Equal(t, int64(1), p.count(t, redlockotel.MetricWaitDuration, opTryAcquire), "only the call that waited")
	assert.GreaterOrEqual(t, p.histogramSum(t, redlockotel.MetricWaitDuration), 0.2)
	assert.Equal(t, int64(2), p.count(t, redlockotel.MetricReleases, released))
	assert.Equal(t, int64(2), p.count(t, redlockotel.MetricHoldsEnded, byRelease, notLost))
	assert.Equal(t, int64(0), p.count(t, redlockotel.MetricHolds))
	assert.Equal(t, int64(0), p.count(t, redlockotel.MetricWaiters))

	// As in TestContendedRun, the waiting TryAcquire may end its span
	// before the Release that woke it.
	names := p.spanNames()
	require.Len(t, names, 5, "%q", names)
	assert.Equal(t, []string{"redlock.Acquire", "redlock.TryAcquire"}, names[:2])
	require.ElementsMatch(t, []string{"redlock.Release", "redlock.TryAcquire"}, names[2:4])
	assert.Equal(t, "redlock.Release", names[4])
	spans := p.spans.Ended()
	assert.Equal(t, "pool", attr(spans[0], redlockotel.AttrLockName).AsString())
	assert.Contains(t, events(spans[0], p.urls), "redlock.attempt", "the slot's acquisition round")
	assert.Equal(t, "busy", attr(spans[1], redlockotel.AttrOutcome).AsString())
	assert.Equal(t, codes.Unset, spans[1].Status().Code, "busy is not an error")
	assert.Equal(t, 0.0, attr(spans[1], "redlock.wait").AsFloat64())
	waited := spans[2+slices.Index(names[2:4], "redlock.TryAcquire")]
	assert.Equal(t, 10.0, attr(waited, "redlock.wait").AsFloat64())
	assert.Contains(t, events(waited, p.urls), "redlock.wait")
	assert.Equal(t, "acquired", attr(waited, redlockotel.AttrOutcome).AsString())
	assert.Equal(t, "released", attr(spans[4], redlockotel.AttrOutcome).AsString())
}

func TestKilledNode(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	p := newProbe(t, cl, nil)
	ctx := context.Background()
	require.NoError(t, cl.Kill(2))
	p.eventually(t, redlockotel.MetricReachable, 2)

	deleted, err := p.client.NewMutex("job").ForceUnlock(ctx) // waits for every node
	require.NoError(t, err)
	assert.False(t, deleted)

	node2 := redlockotel.AttrNode.String(p.urls[2])
	assert.Equal(t, int64(1), p.count(t, redlockotel.MetricNodeErrors), "one error, of the killed node")
	assert.Equal(t, int64(1), p.count(t, redlockotel.MetricNodeErrors, node2, unreachble))
	require.Equal(t, []string{"redlock.ForceUnlock"}, p.spanNames())
	s := p.spans.Ended()[0]
	assert.ElementsMatch(t, []string{"redlock.node.answered 0", "redlock.node.answered 1", "redlock.node.failed 2"}, events(s, p.urls))
	assert.Equal(t, codes.Unset, s.Status().Code)
	assert.Empty(t, attr(s, redlockotel.AttrLockName).AsString(), "no lock name without WithLockNames")
}

func TestLostHold(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	p := newProbe(t, cl, []redlock.Option{redlock.WithLease(1500 * time.Millisecond)})
	ctx := context.Background()
	m := p.client.NewMutex("job")
	require.NoError(t, m.Lock(ctx))
	deleted, err := p.client.NewMutex("job").ForceUnlock(ctx)
	require.NoError(t, err)
	require.True(t, deleted)
	select {
	case <-m.Lost():
	case <-time.After(3 * time.Second):
		t.Fatal("the hold forced away was never lost")
	}
	p.eventually(t, redlockotel.MetricHoldsEnded, 1, byTaken, lost)

	assert.Equal(t, int64(1), p.count(t, redlockotel.MetricHoldsEnded), "one hold ended in all")
	assert.Equal(t, int64(1), p.count(t, redlockotel.MetricHoldDuration, byTaken, lost))
	assert.Equal(t, int64(0), p.count(t, redlockotel.MetricHolds))
	assert.Positive(t, p.count(t, redlockotel.MetricRenewalDuration))
	assert.Equal(t, []string{"redlock.Lock", "redlock.ForceUnlock"}, p.spanNames())
	assert.True(t, attr(p.spans.Ended()[1], "redlock.deleted").AsBool())
}

func TestQuarantinedNode(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	p := newProbe(t, cl, []redlock.Option{redlock.WithQuarantine(time.Minute)})
	ctx := context.Background()
	require.NoError(t, cl.Restart(0))
	p.eventually(t, redlockotel.MetricQuarantined, 1)
	require.NoError(t, cl.Kill(2))
	p.eventually(t, redlockotel.MetricReachable, 2)

	// Node 0 answers but does not count, node 2 is dead: no quorum. The
	// round is certain once node 0 answered (node 1 may still be on its
	// way, and then it has no event), so node 0's answer is always heard.
	ok, err := p.client.NewMutex("job").TryLock(ctx, 0, 0)
	require.ErrorIs(t, err, redlock.ErrNoQuorum)
	require.False(t, ok)

	node0, node2 := redlockotel.AttrNode.String(p.urls[0]), redlockotel.AttrNode.String(p.urls[2])
	assert.Equal(t, int64(1), p.count(t, redlockotel.MetricAcquisitions, opTryLock, noQuorum))
	assert.Equal(t, int64(1), p.count(t, redlockotel.MetricNodeErrors, node0, redlockotel.AttrErrorType.String("quarantined")))
	assert.Equal(t, int64(1), p.count(t, redlockotel.MetricNodeErrors, node2, unreachble))
	assert.Equal(t, int64(2), p.count(t, redlockotel.MetricNodeErrors))
	assert.Equal(t, int64(1), p.count(t, redlockotel.MetricQuarantined))
	require.Equal(t, []string{"redlock.TryLock"}, p.spanNames())
	s := p.spans.Ended()[0]
	evs := events(s, p.urls)
	if len(evs) == 4 {
		assert.Contains(t, evs, "redlock.node.answered 1")
		evs = slices.DeleteFunc(evs, func(e string) bool { return e == "redlock.node.answered 1" })
	}
	assert.ElementsMatch(t, []string{"redlock.attempt", "redlock.node.quarantined 0", "redlock.node.failed 2"}, evs)
	assert.Equal(t, codes.Error, s.Status().Code)
	assert.Equal(t, "no_quorum", attr(s, redlockotel.AttrOutcome).AsString())
}

// TestErrorType: ErrorType is errkind.Of (tested there), the kinds the
// redlock command's metrics name too.
func TestErrorType(t *testing.T) {
	for _, err := range []error{
		redlock.ErrQuarantined, redlock.ErrAuth, context.DeadlineExceeded, redlock.ErrNotSent, redlock.ErrClosed, redlock.ReplyError("ERR no"),
	} {
		assert.Equal(t, errkind.Of(err), redlockotel.ErrorType(err), "%v", err)
	}
	assert.Equal(t, "quarantined", redlockotel.ErrorType(&redlock.NodeError{Node: "a", Err: redlock.ErrQuarantined}))
}
