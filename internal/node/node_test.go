package node

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"time"
)

// The layer's own tests: the pieces that need no Client (the calls' export,
// the split and merge of a cluster member's calls, identity and
// succession over a Transport, the server processes). The root package's
// tests drive the layer through a Client.

// The errors a Client hands the layer, as the tests give them.
var (
	errClosed     = errors.New("closed")
	errInvalid    = errors.New("invalid")
	errNotSent    = errors.New("not sent")
	errRedirected = errors.New("redirected")
)

// replyError stands for a Transport's ReplyError.
type replyError string

func (e replyError) Error() string { return string(e) }

// testConfig is the Config of a node over t, with restart quarantine on.
func testConfig(t Transport) *Config {
	return &Config{
		Name:        "m",
		Transport:   t,
		NodeTimeout: 250 * time.Millisecond,
		Setup:       2 * time.Second,
		Quarantine:  true,
		Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
		Errors: Errors{
			Closed: errClosed, Invalid: errInvalid, NotSent: errNotSent, Redirected: errRedirected,
			Refusal: func(err error) (string, bool) {
				var re replyError
				if errors.As(err, &re) {
					return string(re), true
				}
				return "", false
			},
			Auth: func(err error) error { return err },
		},
		Hooks: Hooks{
			Ctx:         context.Background(),
			Go:          func(f func()) bool { go f(); return true },
			Now:         time.Now,
			Heard:       func(string, []byte) {},
			Reconnected: func([]string) {},
			Reached:     func(error) {},
			Identified:  func() {},
			Replaced:    func() {},
			Learned:     func(string) {},
		},
	}
}

// shardedRoutes is a Transport whose keys are served by the server named
// after the key's first letter; only Route is used.
type shardedRoutes struct{ Transport }

func (shardedRoutes) Route(key string) Route { return Route{Addr: key[:1]} }

// routeTable is a Transport whose routes a test sets; Info answers with
// the INFO server of the process it names for each address.
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

// shardedTable is a routeTable that names its primaries by one key each
// (Sharded).
type shardedTable struct {
	*routeTable
	keys []string
}

func (s shardedTable) ShardKeys(context.Context) ([]string, error) { return s.keys, nil }
