package redlock

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redlock-go/redlock/internal/script"
	"github.com/stretchr/testify/require"
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
	c := &Client{opts: defaultOptions(), ctx: context.Background()}
	c.useLease(time.Minute)
	return c, makePeer(c, NewTransportNode("m", rt), 0)
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
