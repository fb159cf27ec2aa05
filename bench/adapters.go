package main

import (
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"
	rueidislib "github.com/redis/rueidis"
	valkeylib "github.com/valkey-io/valkey-go"

	"github.com/redlock-go/redlock"
	rlgoredis "github.com/redlock-go/redlock/goredis"
	"github.com/redlock-go/redlock/redlocktest"
	rlrueidis "github.com/redlock-go/redlock/rueidis"
	rlvalkey "github.com/redlock-go/redlock/valkey"
)

// The adapters scenario: redlock's Client over each connection layer in
// turn (its native one over redigo, then the goredis, rueidis and valkey
// modules) on the same five nodes, in the same run, rounds interleaved.

// adaptersConfig bounds the adapters scenario.
type adaptersConfig struct {
	UncRounds, UncOps int
	UncBudget         time.Duration // per layer and round
	TputRounds        int
	TputWindow        time.Duration
}

// adaptersResult is what the adapters scenario measured.
type adaptersResult struct {
	Nodes    int
	PoolSize int // go-redis's PoolSize per node, at its default
	Unc      *seqScenario
	Tput     []*tputResult
}

// runAdapters runs the scenario on five fresh nodes: the uncontended loop,
// then the throughput windows, every layer's client built once for both.
func runAdapters(cfg config, logf func(string, ...any)) (*adaptersResult, error) {
	out := &adaptersResult{PoolSize: goredisPoolSize()}
	err := withCluster(func(cl *redlocktest.Cluster) error {
		out.Nodes = cl.N()
		cs, closeAll, err := buildAll(adapterKinds, cl, buildOpts{prefix: "a:"}, 20)
		if err != nil {
			return err
		}
		defer closeAll()
		ac := cfg.Adapters
		srv := func() time.Duration { return serverCPU(cl) }
		logf("adapters: uncontended")
		out.Unc = runSeqScenario("adapters", cs, ac.UncRounds, ac.UncOps, ac.UncBudget, cfg.OpTimeout, srv, logf)
		logf("adapters: throughput")
		pids, err := clusterPIDs(cl)
		if err != nil {
			return err
		}
		out.Tput = runThroughput(cs, cfg.TputGoroutines, ac.TputRounds, ac.TputWindow, cfg.OpTimeout, func(kind) serverSnap { return readServers(cl, pids) })
		return nil
	})
	return out, err
}

// oneServerEach makes each address a quorum member of one server.
func oneServerEach(addrs []string) [][]string {
	members := make([][]string, len(addrs))
	for i, a := range addrs {
		members[i] = []string{a}
	}
	return members
}

// goredisPoolSize is go-redis's default PoolSize on this machine (10 per
// GOMAXPROCS), read off a client that never connects.
func goredisPoolSize() int {
	c := goredis.NewClient(&goredis.Options{})
	defer c.Close()
	return c.Options().PoolSize
}

// buildAdapter makes a redlock Client of kind k whose quorum members are
// reached through another Redis client: one node per member, members[i]
// naming its servers (one, or the shards of a Redis Cluster member).
func buildAdapter(k kind, members [][]string, o buildOpts) (*contender, error) {
	nodes := make([]*redlock.Node, len(members))
	var closers []func() error
	closeAll := func() {
		for _, f := range closers {
			f()
		}
	}
	for i, addrs := range members {
		n, closeFn, err := adapterNode(k, fmt.Sprintf("node%d", i), addrs)
		if err != nil {
			closeAll()
			return nil, err
		}
		nodes[i] = n
		if closeFn != nil {
			closers = append(closers, closeFn)
		}
	}
	opts := append([]redlock.Option{redlock.WithKeyPrefix(o.prefix + k.short() + ":")}, o.redlock...)
	c, err := redlock.New(nodes, opts...)
	if err != nil {
		closeAll()
		return nil, err
	}
	return redlockContender(k, c, closeAll), nil
}

// adapterNode is one quorum member of kind k over addrs, with its client's
// defaults except what the adapter requires, and the function that closes
// the client when the caller owns it (go-redis); the rueidis and valkey-go
// clients are built by NewNode and closed by the redlock Client.
func adapterNode(k kind, name string, addrs []string) (*redlock.Node, func() error, error) {
	var client goredis.UniversalClient
	switch k {
	case kRueidis:
		n, err := rlrueidis.NewNode(name, rueidislib.ClientOption{InitAddress: addrs})
		return n, nil, err
	case kValkey:
		n, err := rlvalkey.NewNode(name, valkeylib.ClientOption{InitAddress: addrs})
		return n, nil, err
	case kGoredis:
		client = goredis.NewClient(&goredis.Options{Addr: addrs[0], ContextTimeoutEnabled: true})
	case kCluster1, kCluster3:
		client = goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: true})
	default:
		return nil, nil, fmt.Errorf("no adapter for %s", k)
	}
	n, err := rlgoredis.NewNode(name, client)
	if err != nil {
		client.Close()
		return nil, nil, err
	}
	return n, client.Close, nil
}
