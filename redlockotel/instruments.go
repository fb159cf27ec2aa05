package redlockotel

import (
	"errors"

	"go.opentelemetry.io/otel/metric"
)

// The metrics' names.
const (
	MetricAcquireDuration = "redlock.acquire.duration"  // histogram, s: a Lock, TryLock, Acquire or TryAcquire call, from call to return, by operation and outcome
	MetricWaitDuration    = "redlock.wait.duration"     // histogram, s: the time a call that waited spent waiting, by operation
	MetricHoldDuration    = "redlock.hold.duration"     // histogram, s: a hold, from its first acquisition to its end, by reason
	MetricRenewalDuration = "redlock.renewal.duration"  // histogram, s: one renewal round of the watchdog
	MetricAcquisitions    = "redlock.acquisitions"      // counter: Lock, TryLock, Acquire and TryAcquire calls, by operation and outcome
	MetricReleases        = "redlock.releases"          // counter: Unlock and Release calls, by outcome
	MetricHoldsEnded      = "redlock.holds.ended"       // counter: holds ended, by reason and lost
	MetricNodeErrors      = "redlock.node.errors"       // counter: a node's failed or quarantined answers, by node and error.type
	MetricReconnects      = "redlock.pubsub.reconnects" // counter: pub/sub connections lost and replaced, by node
	MetricHolds           = "redlock.holds.active"      // gauge: holds held now
	MetricWaiters         = "redlock.waiters"           // gauge: calls waiting for a lock now
	MetricQuarantined     = "redlock.nodes.quarantined" // gauge: nodes in restart quarantine now
	MetricReachable       = "redlock.nodes.reachable"   // gauge: nodes reachable now
)

// Bucket boundaries, in seconds: of calls and rounds (a round trip on a
// LAN to a long wait), and of holds (a job of milliseconds to hours).
var (
	callBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
	holdBuckets = []float64{0.001, 0.01, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 600, 1800, 3600, 4 * 3600}
)

// instruments are the Observer's metrics.
type instruments struct {
	acquire, wait, hold, renewal                               metric.Float64Histogram
	acquisitions, releases, holdsEnded, nodeErrors, reconnects metric.Int64Counter
	holds, waiters, quarantined, reachable                     metric.Int64ObservableGauge
}

// newInstruments makes the instruments with meter.
func newInstruments(meter metric.Meter) (instruments, error) {
	var ins instruments
	var errs [13]error
	ins.acquire, errs[0] = meter.Float64Histogram(MetricAcquireDuration, metric.WithUnit("s"), metric.WithDescription("Duration of Lock, TryLock, Acquire and TryAcquire calls, from call to return, waiting included."), metric.WithExplicitBucketBoundaries(callBuckets...))
	ins.wait, errs[1] = meter.Float64Histogram(MetricWaitDuration, metric.WithUnit("s"), metric.WithDescription("Time that Lock, TryLock, Acquire and TryAcquire calls which found the lock (or every permit) held spent waiting for it."), metric.WithExplicitBucketBoundaries(callBuckets...))
	ins.hold, errs[2] = meter.Float64Histogram(MetricHoldDuration, metric.WithUnit("s"), metric.WithDescription("Duration of holds, from the first acquisition to the end."), metric.WithExplicitBucketBoundaries(holdBuckets...))
	ins.renewal, errs[3] = meter.Float64Histogram(MetricRenewalDuration, metric.WithUnit("s"), metric.WithDescription("Duration of the watchdog's renewal rounds."), metric.WithExplicitBucketBoundaries(callBuckets...))
	ins.acquisitions, errs[4] = meter.Int64Counter(MetricAcquisitions, metric.WithUnit("{acquisition}"), metric.WithDescription("Lock, TryLock, Acquire and TryAcquire calls, by outcome."))
	ins.releases, errs[5] = meter.Int64Counter(MetricReleases, metric.WithUnit("{release}"), metric.WithDescription("Unlock and Release calls, by outcome."))
	ins.holdsEnded, errs[6] = meter.Int64Counter(MetricHoldsEnded, metric.WithUnit("{hold}"), metric.WithDescription("Holds ended, by reason; redlock.hold.lost is true for the holds lost."))
	ins.nodeErrors, errs[7] = meter.Int64Counter(MetricNodeErrors, metric.WithUnit("{error}"), metric.WithDescription("Answers of a node that failed or did not count (restart quarantine), by node and kind."))
	ins.reconnects, errs[8] = meter.Int64Counter(MetricReconnects, metric.WithUnit("{reconnect}"), metric.WithDescription("Pub/sub connections lost and replaced, by node."))
	ins.holds, errs[9] = meter.Int64ObservableGauge(MetricHolds, metric.WithUnit("{hold}"), metric.WithDescription("Holds held now."))
	ins.waiters, errs[10] = meter.Int64ObservableGauge(MetricWaiters, metric.WithUnit("{waiter}"), metric.WithDescription("Lock, TryLock, Acquire and TryAcquire calls waiting for a lock or a permit now."))
	ins.quarantined, errs[11] = meter.Int64ObservableGauge(MetricQuarantined, metric.WithUnit("{node}"), metric.WithDescription("Nodes in restart quarantine now: they answer but do not count."))
	ins.reachable, errs[12] = meter.Int64ObservableGauge(MetricReachable, metric.WithUnit("{node}"), metric.WithDescription("Nodes reachable now."))
	return ins, errors.Join(errs[:]...)
}

// register registers f as the callback of the gauges.
func (ins instruments) register(meter metric.Meter, f metric.Callback) (metric.Registration, error) {
	return meter.RegisterCallback(f, ins.holds, ins.waiters, ins.quarantined, ins.reachable)
}
