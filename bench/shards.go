package main

import (
	"fmt"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlocktest"
)

// The shards scenario: locks/s with each of three quorum members a Redis
// Cluster of 1 shard and of 3 shards, reached through go-redis
// ClusterClients (goredis.NewNode), beside three plain nodes reached by
// redlock's native layer and by go-redis *redis.Clients. Every
// configuration's processes run for the whole scenario, and the
// configurations take turns window by window.

// shardsConfig bounds the shards scenario.
type shardsConfig struct {
	Rounds int
	Window time.Duration
	Idle   time.Duration // the processes' CPU with no traffic is measured over this
}

// shardsMembers is the number of quorum members of every configuration.
const shardsMembers = 3

// shardsOptions are the redlock options of every row: the defaults,
// restart quarantine on.
var shardsOptions []redlock.Option

// shardsKinds are the scenario's rows: its configurations.
var shardsKinds = []kind{kRedlock, kGoredis, kCluster1, kCluster3}

// shardsResult is what the shards scenario measured.
type shardsResult struct {
	Members   int
	Processes map[kind]int           // redis-server processes of each configuration
	Idle      map[kind]time.Duration // their CPU time per second with no traffic
	Tput      []*tputResult
	// perShard is the script calls (EVALSHA and EVAL) that each shard of
	// the 3-shard members served over the scenario, every member summed.
	PerShard []int64
}

// shardsSetup is the scenario's three sets of nodes, its clients and the
// redis-server processes of each configuration.
type shardsSetup struct {
	plain, one, three *redlocktest.Cluster
	cs                []*contender
	pids              map[kind][]int
}

func (s *shardsSetup) close() {
	for _, c := range s.cs {
		c.close()
	}
	for _, cl := range []*redlocktest.Cluster{s.plain, s.one, s.three} {
		if cl != nil {
			cl.Close()
		}
	}
}

// runShards starts the nodes, builds a client per configuration, and
// measures their throughput windows in turn.
func runShards(cfg config, logf func(string, ...any)) (*shardsResult, error) {
	s, err := setUpShards()
	if s != nil {
		defer s.close()
	}
	if err != nil {
		return nil, err
	}
	if err := warmUp(s.cs, "s", 20); err != nil {
		return nil, err
	}
	out := &shardsResult{Members: shardsMembers, Processes: map[kind]int{}}
	for k, pids := range s.pids {
		out.Processes[k] = len(pids)
	}
	logf("shards: idle")
	out.Idle = s.idleCPU(cfg.Shards.Idle)
	before, err := shardCalls(s.three)
	if err != nil {
		return nil, err
	}
	logf("shards: throughput")
	out.Tput = runThroughput(s.cs, cfg.TputGoroutines, cfg.Shards.Rounds, cfg.Shards.Window, cfg.OpTimeout, func(k kind) serverSnap { return readServers(s.clusterOf(k), s.pids[k]) })
	after, err := shardCalls(s.three)
	if err != nil {
		return nil, err
	}
	for i := range after {
		out.PerShard = append(out.PerShard, after[i]-before[i])
	}
	return out, nil
}

// setUpShards launches three plain nodes and three members of 1 and of 3
// shards, and builds one client per configuration. The setup it returns
// holds what was made so far, also on error.
func setUpShards() (*shardsSetup, error) {
	s := &shardsSetup{pids: map[kind][]int{}}
	var err error
	if s.plain, err = redlocktest.Launch(shardsMembers); err != nil {
		return s, err
	}
	if s.one, err = redlocktest.Launch(shardsMembers, redlocktest.WithShards(1)); err != nil {
		return s, err
	}
	if s.three, err = redlocktest.Launch(shardsMembers, redlocktest.WithShards(3)); err != nil {
		return s, err
	}
	o := buildOpts{prefix: "s:", redlock: shardsOptions}
	for _, k := range shardsKinds {
		cl := s.clusterOf(k)
		var c *contender
		if k == kRedlock || k == kGoredis {
			c, err = build(k, cl.Addrs(), o)
		} else {
			c, err = buildAdapter(k, shardMembers(cl), o)
		}
		if err != nil {
			return s, fmt.Errorf("%s: %w", k, err)
		}
		s.cs = append(s.cs, c)
		if s.pids[k], err = clusterPIDs(cl); err != nil {
			return s, err
		}
	}
	return s, nil
}

// idleCPU is the CPU time per second each configuration's processes use
// over d with no traffic.
func (s *shardsSetup) idleCPU(d time.Duration) map[kind]time.Duration {
	before := map[kind]time.Duration{}
	for k, pids := range s.pids {
		before[k] = readServers(nil, pids).cpu
	}
	start := time.Now()
	time.Sleep(d)
	el := time.Since(start)
	out := map[kind]time.Duration{}
	for k, pids := range s.pids {
		out[k] = time.Duration(float64(readServers(nil, pids).cpu-before[k]) / el.Seconds())
	}
	return out
}

// clusterOf is the set of nodes configuration k runs on.
func (s *shardsSetup) clusterOf(k kind) *redlocktest.Cluster {
	switch k {
	case kCluster1:
		return s.one
	case kCluster3:
		return s.three
	}
	return s.plain
}

// shardMembers is the addresses of every shard of each member of cl.
func shardMembers(cl *redlocktest.Cluster) [][]string {
	m := make([][]string, cl.N())
	for i := range m {
		m[i] = cl.ShardAddrs(i)
	}
	return m
}

// shardCalls is the script calls (EVALSHA and EVAL) each shard of cl's
// members has served so far, every member summed.
func shardCalls(cl *redlocktest.Cluster) ([]int64, error) {
	calls := make([]int64, cl.Shards())
	for sh := range calls {
		for i := 0; i < cl.N(); i++ {
			st, err := processStats(cl, i, sh)
			if err != nil {
				return nil, err
			}
			calls[sh] += st.calls
		}
	}
	return calls, nil
}
