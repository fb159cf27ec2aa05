package redlock

import (
	"context"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/leases"
	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/script"
)

// Nodes over a Transport, through a Client. The layer's own tests (the
// export, split and merge of calls, identity and succession) are
// internal/node's.

// routeTable is a Transport whose routes a test sets; Info answers with
// the INFO server of the process it names for each address, and Eval
// answers 1 to every call.
type routeTable struct {
	Transport
	mu     sync.Mutex
	routes map[string]Route  // by key
	runIDs map[string]string // by Addr
}

func (rt *routeTable) set(key string, r Route) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.routes[key] = r
}

func (rt *routeTable) Route(key string) Route {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.routes[key]
}

func (rt *routeTable) Info(_ context.Context, key string) (string, error) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	// Up for a day: only a successor's detection keeps it out.
	return "redis_version:7.0.15\r\nrun_id:" + rt.runIDs[rt.routes[key].Addr] + "\r\nuptime_in_seconds:86400\r\n", nil
}

func (rt *routeTable) Eval(_ context.Context, calls []Call, replies []Reply) {
	for j := range replies {
		replies[j] = Reply{Value: int64(1)}
	}
}

// overTransport returns a peer over rt of a Client whose quarantine period
// is a minute. The peer is not started: it reads an identity when a call
// is sent (identifyOver).
func overTransport(rt *routeTable) (*Client, *peer) {
	c := &Client{opts: defaultOptions(), life: newLifetime()}
	c.rep = newReporter(nil, c.life)
	c.nodes = &nodeSet{quorum: 1}
	c.leases = leases.New(leases.Config{Lease: time.Minute, Made: c.nodes.made.Load, GoRun: c.life.goRun, Now: time.Now})
	p, _ := makePeer(c, NewTransportNode("m", rt), 0)
	c.nodes.peers = []*peer{p}
	c.nodes.join(membersConfig(c))
	return c, p
}

// identifyOver sends a call of key through p: the layer reads the
// identity of the server that serves key first when it opened a
// connection there since its last reading (Route.Dials), or never read it.
func identifyOver(t *testing.T, p *peer, key string) {
	t.Helper()
	_, err := p.do(script.View.Call(key), time.Now().Add(time.Second))
	require.NoError(t, err)
}

// TestUnitTransportNodeNeedsATransport: New takes a node made with
// NewTransportNode, and refuses one with no Transport.
func TestUnitTransportNodeNeedsATransport(t *testing.T) {
	_, err := New([]*Node{NewTransportNode("a", nil)})
	require.ErrorIs(t, err, ErrInvalid)
}

// TestUnitSeamMatchesTheNodeLayer: the exported seam (Transport,
// ShardedTransport, Call, Reply, Route, PubSub) and internal/node's view
// of it are two copies, kept so that the seam's documentation stays the
// root's (an alias would print as one line); node.go adapts one to the
// other. This holds them alike, so that neither drifts: the same fields,
// of the same types, in the same order, and the same methods (but Close of
// a Transport, which only the Client calls).
func TestUnitSeamMatchesTheNodeLayer(t *testing.T) {
	pairs := []struct{ root, layer reflect.Type }{
		{reflect.TypeFor[Call](), reflect.TypeFor[node.Call]()},
		{reflect.TypeFor[Reply](), reflect.TypeFor[node.Reply]()},
		{reflect.TypeFor[Route](), reflect.TypeFor[node.Route]()},
		{reflect.TypeFor[Transport](), reflect.TypeFor[node.Transport]()},
		{reflect.TypeFor[ShardedTransport](), reflect.TypeFor[node.Sharded]()},
		{reflect.TypeFor[PubSub](), reflect.TypeFor[node.PubSub]()},
	}
	for _, p := range pairs {
		require.Equal(t, p.root.Kind(), p.layer.Kind(), "%v and %v", p.root, p.layer)
		switch p.root.Kind() {
		case reflect.Struct:
			require.Equal(t, p.root.NumField(), p.layer.NumField(), "fields of %v and %v", p.root, p.layer)
			for i := range p.root.NumField() {
				a, b := p.root.Field(i), p.layer.Field(i)
				require.Equal(t, a.Name, b.Name, "field %d of %v and %v", i, p.root, p.layer)
				require.Equal(t, seamName(a.Type), seamName(b.Type), "field %s of %v and %v", a.Name, p.root, p.layer)
			}
		case reflect.Interface:
			// The layer never closes a Transport (the Client does): every
			// other method is the same.
			var names []string
			for i := range p.root.NumMethod() {
				a := p.root.Method(i)
				b, ok := p.layer.MethodByName(a.Name)
				if !ok {
					names = append(names, a.Name)
					continue
				}
				require.Equal(t, seamName(a.Type), seamName(b.Type), "method %s of %v and %v", a.Name, p.root, p.layer)
			}
			want := []string(nil)
			if p.root.Kind() == reflect.Interface && p.root.Name() != "PubSub" {
				want = []string{"Close"}
			}
			require.Equal(t, want, names, "methods of %v that %v has not", p.root, p.layer)
			require.Equal(t, p.root.NumMethod()-len(want), p.layer.NumMethod(), "methods of %v and %v", p.root, p.layer)
		}
	}
}

// seamName is a type's text with the packages' names taken out, so that
// redlock.Call and node.Call read alike (and ShardedTransport as Sharded).
func seamName(t reflect.Type) string {
	return strings.NewReplacer("redlock.", "", "node.", "", "ShardedTransport", "Sharded").Replace(t.String())
}
