package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redlock-go/redlock/observe"
	"github.com/redlock-go/redlock/observe/errkind"
)

// `redlock demo --metrics ADDR` serves the demo's metrics at
// http://ADDR/metrics in the Prometheus text format, with the names and
// labels that the redlockotel module's Observer gets through the OpenTelemetry
// Prometheus exporter (docs/observability.md), plus a client label. This
// command lives in the root module, whose dependencies stay redigo and
// go-multierror (and the test helpers): it cannot import the redlockotel module
// or a Prometheus library without adding them to the root go.mod, so it
// implements observe.Observer and writes the text format itself, with the
// standard library only.

// registry holds metric families and writes them in the Prometheus text
// format (version 0.0.4).
type registry struct {
	mu     sync.Mutex // protects fams and gauges
	fams   map[string]*family
	gauges []func() // set the gauges, before each write
}

// family is one metric and its series, by their labels.
type family struct {
	name, help, typ string
	series          map[string]*series // by the labels, written as {a="x",b="y"}
}

// series is one labelled series: a value, or a histogram.
type series struct {
	value   float64
	buckets []uint64 // per bound of durationBuckets, not cumulative
	sum     float64
	count   uint64
}

// durationBuckets are the histograms' upper bounds, in seconds (the
// redlockotel module's call buckets).
var durationBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

func newRegistry() *registry { return &registry{fams: make(map[string]*family)} }

// at returns the series of family name with labels, made on first use.
// r.mu must be held.
func (r *registry) at(name, help, typ, labels string) *series {
	f := r.fams[name]
	if f == nil {
		f = &family{name: name, help: help, typ: typ, series: make(map[string]*series)}
		r.fams[name] = f
	}
	s := f.series[labels]
	if s == nil {
		s = &series{}
		if typ == "histogram" {
			s.buckets = make([]uint64, len(durationBuckets))
		}
		f.series[labels] = s
	}
	return s
}

// add adds v to a counter.
func (r *registry) add(name, help, labels string, v float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.at(name, help, "counter", labels).value += v
}

// set sets a gauge.
func (r *registry) set(name, help, labels string, v float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.at(name, help, "gauge", labels).value = v
}

// observe records d in a histogram.
func (r *registry) observe(name, help, labels string, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.at(name, help, "histogram", labels)
	v := d.Seconds()
	if i, _ := slices.BinarySearch(durationBuckets, v); i < len(durationBuckets) {
		s.buckets[i]++
	}
	s.sum += v
	s.count++
}

// gauge registers f, which sets gauges, to run before each write.
func (r *registry) gauge(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gauges = append(r.gauges, f)
}

// write writes every family, sorted by name, each series sorted by its
// labels.
func (r *registry) write(w io.Writer) error {
	r.mu.Lock()
	gauges := slices.Clone(r.gauges)
	r.mu.Unlock()
	for _, f := range gauges {
		f()
	}
	var b strings.Builder
	r.mu.Lock()
	names := make([]string, 0, len(r.fams))
	for n := range r.fams {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		r.fams[n].write(&b)
	}
	r.mu.Unlock()
	_, err := io.WriteString(w, b.String())
	return err
}

// write writes f's HELP, TYPE and samples.
func (f *family) write(b *strings.Builder) {
	fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s %s\n", f.name, f.help, f.name, f.typ)
	keys := make([]string, 0, len(f.series))
	for k := range f.series {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		s := f.series[k]
		if f.typ != "histogram" {
			fmt.Fprintf(b, "%s{%s} %s\n", f.name, k, num(s.value))
			continue
		}
		var cum uint64
		for i, le := range durationBuckets {
			cum += s.buckets[i]
			fmt.Fprintf(b, "%s_bucket{%s} %d\n", f.name, withLabel(k, "le", num(le)), cum)
		}
		fmt.Fprintf(b, "%s_bucket{%s} %d\n", f.name, withLabel(k, "le", "+Inf"), s.count)
		fmt.Fprintf(b, "%s_sum{%s} %s\n%s_count{%s} %d\n", f.name, k, num(s.sum), f.name, k, s.count)
	}
}

// num formats a sample value.
func num(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// labels renders name/value pairs as a series' labels: a="x",b="y".
func labels(kv ...string) string {
	var b strings.Builder
	for i := 0; i+1 < len(kv); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(kv[i] + "=" + strconv.Quote(kv[i+1]))
	}
	return b.String()
}

// withLabel adds one label to rendered labels.
func withLabel(rendered, name, value string) string {
	l := labels(name, value)
	if rendered == "" {
		return l
	}
	return rendered + "," + l
}

// demoObserver is one demo Client's Observer: it records into the
// registry with the label client="cN".
type demoObserver struct {
	observe.NopObserver
	r      *registry
	client string

	mu          sync.Mutex // protects the fields below
	holds       int
	waiters     int
	reachable   map[string]bool      // by node
	quarantines map[string]time.Time // by node and server: until (zero: until NodeBack)
}

func newDemoObserver(r *registry, client string) *demoObserver {
	o := &demoObserver{r: r, client: client, reachable: make(map[string]bool), quarantines: make(map[string]time.Time)}
	r.gauge(o.setGauges)
	o.setGauges()
	return o
}

// l renders the client label and kv.
func (o *demoObserver) l(kv ...string) string {
	return labels(append([]string{"client", o.client}, kv...)...)
}

// setGauges sets the gauges of holds, waiters and nodes, as of now.
func (o *demoObserver) setGauges() {
	o.mu.Lock()
	holds, waiters, reachable := o.holds, o.waiters, 0
	for _, up := range o.reachable {
		if up {
			reachable++
		}
	}
	nodes := make(map[string]bool)
	for k, until := range o.quarantines {
		if until.IsZero() || until.After(time.Now()) {
			node, _, _ := strings.Cut(k, "|")
			nodes[node] = true
		}
	}
	o.mu.Unlock()
	o.r.set("redlock_holds_active", "Holds held now.", o.l(), float64(holds))
	o.r.set("redlock_waiters", "Lock, TryLock, Acquire and TryAcquire calls waiting for a lock or a permit now.", o.l(), float64(waiters))
	o.r.set("redlock_nodes_reachable", "Nodes reachable now.", o.l(), float64(reachable))
	o.r.set("redlock_nodes_quarantined", "Nodes in restart quarantine now: they answer but do not count.", o.l(), float64(len(nodes)))
}

// change adds d to the holds or the waiters.
func (o *demoObserver) change(n *int, d int) {
	o.mu.Lock()
	*n += d
	o.mu.Unlock()
}

func (o *demoObserver) AttemptDone(_ context.Context, e observe.Attempt) { o.nodeErrors(e.Nodes) }

func (o *demoObserver) WaitStarted(context.Context, observe.Wait) { o.change(&o.waiters, 1) }

func (o *demoObserver) AcquireDone(_ context.Context, e observe.Acquire) {
	op := []string{"redlock_operation", e.Op.String(), "redlock_outcome", e.Outcome.String()}
	o.r.add("redlock_acquisitions_total", "Lock, TryLock, Acquire and TryAcquire calls, by outcome.", o.l(op...), 1)
	o.r.observe("redlock_acquire_duration_seconds", "Duration of Lock, TryLock, Acquire and TryAcquire calls, from call to return, waiting included.", o.l(op...), e.Took)
	if e.Queued {
		o.change(&o.waiters, -1)
		o.r.observe("redlock_wait_duration_seconds", "Time that Lock, TryLock, Acquire and TryAcquire calls which found the lock (or every permit) held spent waiting for it.", o.l(op[:2]...), e.Waited)
	}
}

func (o *demoObserver) ReleaseDone(_ context.Context, e observe.Release) {
	o.r.add("redlock_releases_total", "Unlock and Release calls, by outcome.", o.l("redlock_outcome", e.Outcome.String()), 1)
	o.nodeErrors(e.Nodes)
}

func (o *demoObserver) HoldStarted(observe.HoldStart) { o.change(&o.holds, 1) }

func (o *demoObserver) HoldEnded(e observe.HoldEnd) {
	o.change(&o.holds, -1)
	l := o.l("redlock_hold_end_reason", e.Reason.String(), "redlock_hold_lost", strconv.FormatBool(e.Reason.Lost()))
	o.r.add("redlock_holds_ended_total", "Holds ended, by reason; redlock_hold_lost is true for the holds lost.", l, 1)
	o.r.observe("redlock_hold_duration_seconds", "Duration of holds, from the first acquisition to the end.", l, e.Held)
}

func (o *demoObserver) RenewalDone(e observe.Renewal) {
	o.r.observe("redlock_renewal_duration_seconds", "Duration of the watchdog's renewal rounds.", o.l(), e.Took)
	o.nodeErrors(e.Nodes)
}

func (o *demoObserver) NodeChanged(e observe.NodeChange) {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch e.State {
	case observe.NodeUp, observe.NodeDown:
		o.reachable[e.Node] = e.State == observe.NodeUp
	case observe.NodeQuarantined:
		o.quarantines[e.Node+"|"+e.Addr] = e.Until
	case observe.NodeBack:
		delete(o.quarantines, e.Node+"|"+e.Addr)
	}
}

func (o *demoObserver) PubSubReconnected(e observe.PubSubReconnect) {
	o.r.add("redlock_pubsub_reconnects_total", "Pub/sub connections lost and replaced, by node.", o.l("redlock_node", e.Node), 1)
}

// nodeErrors counts the nodes that failed or did not count.
func (o *demoObserver) nodeErrors(nodes []observe.NodeResult) {
	for _, n := range nodes {
		if n.Answer == observe.AnswerFailed || n.Answer == observe.AnswerQuarantined {
			o.r.add("redlock_node_errors_total", "Answers of a node that failed or did not count (restart quarantine), by node and kind.",
				o.l("redlock_node", n.Node, "error_type", errkind.Of(n.Err)), 1)
		}
	}
}

// demoMetrics serves the demo's metrics at http://addr/metrics when addr
// is not empty: it returns the registry to record them in (nil when addr
// is empty), what the demo's first line says of them, and how to stop.
func demoMetrics(addr string) (r *registry, where string, stop func(), err error) {
	if addr == "" {
		return nil, "", func() {}, nil
	}
	r = newRegistry()
	url, stop, err := serveMetrics(addr, r)
	if err != nil {
		return nil, "", nil, err
	}
	return r, "; metrics at " + url, stop, nil
}

// serveMetrics serves r at http://addr/metrics until stop is called, and
// returns the page's URL.
func serveMetrics(addr string, r *registry) (url string, stop func(), err error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_ = r.write(w)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(l)
	}()
	stop = func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	}
	return "http://" + reachableAddr(l.Addr().(*net.TCPAddr)) + "/metrics", stop, nil
}

// reachableAddr is a's host and port as a browser on this machine
// reaches it: localhost for an unspecified address (":9090").
func reachableAddr(a *net.TCPAddr) string {
	host := a.IP.String()
	if a.IP.IsUnspecified() {
		host = "localhost"
	}
	return net.JoinHostPort(host, strconv.Itoa(a.Port))
}
