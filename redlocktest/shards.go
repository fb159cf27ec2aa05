package redlocktest

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gomodule/redigo/redis"
)

// Members that are Redis Clusters (WithShards): each node of the Cluster is
// then a quorum member made of k redis-server processes in cluster mode,
// its shards, with the 16384 hash slots split evenly among them, and
// with WithReplicas their replicas. Node i's methods (Kill, Pause, Resume,
// Restart, RestartAfter) act on every process of member i; the *Shard
// methods act on one shard's primary.

// slotCount is the number of hash slots of a Redis Cluster.
const slotCount = 16384

// clusterNodeTimeout is each shard's cluster-node-timeout: how long the
// others wait before they flag a silent shard as failing.
const clusterNodeTimeout = 2 * time.Second

// WithShards makes every node a Redis Cluster of k shards (k ≥ 1): k
// redis-server processes in cluster mode, the slots split evenly, no
// replicas (unless WithReplicas), and cluster-require-full-coverage off,
// so that while one shard is down the others keep serving their slots. URLs and Addrs then name
// each member's shard 0, from which a cluster client learns the others;
// ShardAddrs names them all. It cannot be combined with WithProxy or with
// Docker-run nodes.
func WithShards(k int) Option { return func(c *config) { c.shards = k } }

// WithReplicas gives every shard of every member (WithShards) r replicas:
// redis-server processes in cluster mode replicating the shard, on their
// own ports, which the cluster promotes when the primary fails (after
// about two seconds of silence, its cluster-node-timeout) or which
// FailoverShard promotes at once. Node i's methods act on the replicas of
// member i too.
func WithReplicas(r int) Option { return func(c *config) { c.replicas = r } }

// Shards returns the number of shards of every member: 0 without
// WithShards.
func (c *Cluster) Shards() int { return c.cfg.shards }

// ShardAddrs returns "127.0.0.1:PORT" of every shard of member i, shard 0
// first. Without WithShards it returns node i's address alone.
func (c *Cluster) ShardAddrs(i int) []string {
	if c.shards == nil {
		return []string{c.nodes[i].addr()}
	}
	c.roles.Lock()
	defer c.roles.Unlock()
	addrs := make([]string, len(c.shards[i]))
	for s, nd := range c.shards[i] {
		addrs[s] = nd.addr()
	}
	return addrs
}

// MemberAddrs returns "127.0.0.1:PORT" of every process of member i: its
// shards' primaries (as ShardAddrs), then their replicas. A cluster
// client seeded with them all still finds the member's slot map while a
// killed primary's replica is promoted. Without WithShards it returns
// node i's address alone.
func (c *Cluster) MemberAddrs(i int) []string {
	if c.shards == nil {
		return []string{c.nodes[i].addr()}
	}
	all := c.member(i)
	addrs := make([]string, len(all))
	for k, nd := range all {
		addrs[k] = nd.addr()
	}
	return addrs
}

// ShardOf returns the shard of every member that serves key: the slots are
// split alike in every member. Without WithShards it returns 0.
func (c *Cluster) ShardOf(key string) int {
	if c.cfg.shards < 1 {
		return 0
	}
	return KeySlot(key) * c.cfg.shards / slotCount
}

// KeySlot returns Redis Cluster's hash slot of key: CRC16 (XMODEM) of its
// hash tag (the text between the first '{' and the first '}' after it, when
// not empty) or of the whole key, modulo 16384.
func KeySlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for k := 0; k < len(key); k++ {
		crc ^= uint16(key[k]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % slotCount
}

// DoShard runs one command on shard s of member i, like Do.
func (c *Cluster) DoShard(i, s int, cmd string, args ...any) (any, error) {
	nd, err := c.shard(i, s)
	if err != nil {
		return nil, err
	}
	return nd.do(cmd, args...)
}

// DoReplica runs one command on the first replica of shard s of member i
// (WithReplicas), like Do. CLIENT PAUSE <ms> WRITE there holds back the
// writes its primary streams to it: a failover to it meanwhile
// (KillShard, then FailoverShard) loses them, as asynchronous replication
// may.
func (c *Cluster) DoReplica(i, s int, cmd string, args ...any) (any, error) {
	primary, err := c.shard(i, s)
	if err != nil {
		return nil, err
	}
	c.roles.Lock()
	var rep *node
	if reps := c.replicas[i][s]; len(reps) > 0 {
		rep = reps[0]
	}
	c.roles.Unlock()
	if rep == nil {
		return nil, fmt.Errorf("redlocktest: %s has no replica (WithReplicas)", primary)
	}
	return rep.do(cmd, args...)
}

// DoKey runs one command on the shard of member i that serves key (the
// shard 0 of a member without shards), like Do. key is only for routing:
// put it in args where the command wants it.
func (c *Cluster) DoKey(i int, key, cmd string, args ...any) (any, error) {
	return c.DoShard(i, c.ShardOf(key), cmd, args...)
}

// KillShard kills shard s of member i (SIGKILL), as Kill does a node.
func (c *Cluster) KillShard(i, s int) error {
	nd, err := c.shard(i, s)
	if err != nil {
		return err
	}
	return nd.killCmd()
}

// PauseShard stops shard s of member i with SIGSTOP, as Pause does a node.
func (c *Cluster) PauseShard(i, s int) error {
	nd, err := c.shard(i, s)
	if err != nil {
		return err
	}
	return nd.pause()
}

// ResumeShard continues shard s of member i after PauseShard.
func (c *Cluster) ResumeShard(i, s int) error {
	nd, err := c.shard(i, s)
	if err != nil {
		return err
	}
	return nd.resume()
}

// RestartShard kills shard s of member i if it runs and starts it again,
// empty but with its cluster configuration (its node id and slots), on the
// same ports, returning once the member's cluster state is ok again.
func (c *Cluster) RestartShard(i, s int) error {
	nd, err := c.shard(i, s)
	if err != nil {
		return err
	}
	return nd.restart()
}

// shard returns shard s of member i.
func (c *Cluster) shard(i, s int) (*node, error) {
	if c.shards == nil {
		return nil, errors.New("redlocktest: the members have no shards (WithShards)")
	}
	if _, err := c.node(i); err != nil {
		return nil, err
	}
	if s < 0 || s >= len(c.shards[i]) {
		return nil, fmt.Errorf("redlocktest: shard %d out of range [0, %d)", s, len(c.shards[i]))
	}
	c.roles.Lock()
	defer c.roles.Unlock()
	return c.shards[i][s], nil
}

// member returns every process of member i: its primaries, then their
// replicas.
func (c *Cluster) member(i int) []*node {
	c.roles.Lock()
	defer c.roles.Unlock()
	all := append([]*node(nil), c.shards[i]...)
	for _, reps := range c.replicas[i] {
		all = append(all, reps...)
	}
	return all
}

// each runs f on every process of node i: its shards, or the node itself.
func (c *Cluster) each(i int, f func(*node) error) error {
	nd, err := c.node(i)
	if err != nil {
		return err
	}
	if c.shards == nil {
		return f(nd)
	}
	all := c.member(i)
	errs := make([]error, len(all))
	var wg sync.WaitGroup
	for s, nd := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[s] = f(nd)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// clusterArgs are a shard's redis-server flags.
func (nd *node) clusterArgs() []string {
	if nd.busPort == 0 {
		return nil
	}
	return []string{
		"--cluster-enabled", "yes",
		"--cluster-config-file", "nodes.conf",
		"--cluster-port", strconv.Itoa(nd.busPort),
		"--cluster-node-timeout", strconv.Itoa(int(clusterNodeTimeout.Milliseconds())),
		"--cluster-require-full-coverage", "no",
		// A replica's first sync starts at once, not after 5 s.
		"--repl-diskless-sync-delay", "0",
	}
}

// formMembers joins the shards of every member into one Redis Cluster each
// and waits until each is ready.
func (c *Cluster) formMembers() error {
	errs := make([]error, len(c.shards))
	var wg sync.WaitGroup
	for i, shards := range c.shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.formMember(i, shards, c.replicas[i])
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// formMember assigns every shard its slots, introduces every process to
// shard 0, makes the replicas replicate their shards, and waits until
// every process sees all of them and its state is ok.
func (c *Cluster) formMember(i int, shards []*node, replicas [][]*node) error {
	k := len(shards)
	all := c.member(i)
	for s, nd := range shards {
		first, last := s*slotCount/k, (s+1)*slotCount/k-1
		if _, err := nd.do("CLUSTER", "ADDSLOTSRANGE", first, last); err != nil {
			return fmt.Errorf("redlocktest: %s: CLUSTER ADDSLOTSRANGE: %w", nd, err)
		}
	}
	for _, nd := range all[1:] {
		if _, err := nd.do("CLUSTER", "MEET", "127.0.0.1", shards[0].port, shards[0].busPort); err != nil {
			return fmt.Errorf("redlocktest: %s: CLUSTER MEET: %w", nd, err)
		}
	}
	for _, nd := range all {
		if err := nd.waitClusterOK(len(all)); err != nil {
			return err
		}
	}
	for s, reps := range replicas {
		if err := replicate(shards[s], reps, all); err != nil {
			return err
		}
	}
	return nil
}

// replicate makes every process of reps a replica of primary and waits
// until each has loaded its data and every process of member knows it as
// a replica (a failover needs the votes of the primaries).
func replicate(primary *node, reps, member []*node) error {
	if len(reps) == 0 {
		return nil
	}
	id, err := redis.String(primary.do("CLUSTER", "MYID"))
	if err != nil {
		return fmt.Errorf("redlocktest: %s: CLUSTER MYID: %w", primary, err)
	}
	for _, nd := range reps {
		if _, err := nd.do("CLUSTER", "REPLICATE", id); err != nil {
			return fmt.Errorf("redlocktest: %s: CLUSTER REPLICATE: %w", nd, err)
		}
	}
	for _, nd := range reps {
		if err := nd.waitFor("its replication link up", func() (bool, string) {
			info, err := redis.String(nd.do("INFO", "replication"))
			return err == nil && strings.Contains(info, "master_link_status:up"), fmt.Sprint(err)
		}); err != nil {
			return err
		}
		if err := nd.waitRole(member, "slave"); err != nil {
			return err
		}
	}
	return nil
}

// FailoverShard promotes the first replica of shard s of member i
// (WithReplicas) to primary with CLUSTER FAILOVER, or CLUSTER FAILOVER
// TAKEOVER when the primary does not answer (killed or paused), and
// returns once the replica serves the shard's slots and every answering
// process of the member knows it. The old primary then counts as the
// shard's replica: ShardAddrs, KillShard and the other *Shard methods name
// the new primary.
func (c *Cluster) FailoverShard(i, s int) error {
	old, err := c.shard(i, s)
	if err != nil {
		return err
	}
	c.roles.Lock()
	reps := c.replicas[i][s]
	c.roles.Unlock()
	if len(reps) == 0 {
		return fmt.Errorf("redlocktest: %s has no replica (WithReplicas)", old)
	}
	nd := reps[0]
	args := []any{"FAILOVER"}
	if _, err := old.do("PING"); err != nil {
		args = append(args, "TAKEOVER")
	}
	if _, err := nd.do("CLUSTER", args...); err != nil {
		return fmt.Errorf("redlocktest: %s: CLUSTER %v: %w", nd, args, err)
	}
	if err := nd.waitRole(c.member(i), "master"); err != nil {
		return err
	}
	c.roles.Lock()
	c.shards[i][s], reps[0] = nd, old
	c.roles.Unlock()
	return nil
}

// waitRole waits until every process of member that answers names nd a
// "master" or a "slave" (role) in CLUSTER NODES.
func (nd *node) waitRole(member []*node, role string) error {
	id, err := redis.String(nd.do("CLUSTER", "MYID"))
	if err != nil {
		return fmt.Errorf("redlocktest: %s: CLUSTER MYID: %w", nd, err)
	}
	return nd.waitFor("known as "+role+" by every process", func() (bool, string) {
		for _, m := range member {
			nodes, err := redis.String(m.do("CLUSTER", "NODES"))
			if err != nil {
				continue // a killed or paused process
			}
			for _, line := range strings.Split(nodes, "\n") {
				if strings.HasPrefix(line, id+" ") && !strings.Contains(strings.Fields(line)[2], role) {
					return false, m.String() + " sees " + line
				}
			}
		}
		return true, ""
	})
}

// waitFor polls ok until it holds, the cluster closes or readyTimeout
// passes; what names the condition in the error, with ok's last word.
func (nd *node) waitFor(what string, ok func() (bool, string)) error {
	deadline := time.Now().Add(readyTimeout)
	for {
		done, last := ok()
		if done {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redlocktest: %s: not %s within %v: %s", nd, what, readyTimeout, last)
		}
		select {
		case <-nd.c.closing:
			return errClosed
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// waitClusterOK polls the shard until its cluster state is ok, it knows
// where every slot is served and it knows k nodes (0: any number), the
// cluster closes or readyTimeout passes.
func (nd *node) waitClusterOK(k int) error {
	deadline := time.Now().Add(readyTimeout)
	var last string
	for {
		info, err := redis.String(nd.do("CLUSTER", "INFO"))
		if err == nil && strings.Contains(info, "cluster_state:ok") &&
			strings.Contains(info, "cluster_slots_assigned:"+strconv.Itoa(slotCount)+"\r") &&
			(k == 0 || strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(k)+"\r")) {
			return nil
		}
		last = fmt.Sprint(err)
		if err == nil {
			last = strings.Join(strings.Fields(info)[:3], " ")
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redlocktest: node %d shard %d (port %d): cluster not ready within %v: %s", nd.index, nd.shard, nd.port, readyTimeout, last)
		}
		select {
		case <-nd.c.closing:
			return errClosed
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// do runs one command on the node directly, on a short-lived connection
// with a one-second timeout.
func (nd *node) do(cmd string, args ...any) (any, error) {
	conn, err := redis.Dial("tcp", nd.addr(),
		redis.DialConnectTimeout(time.Second),
		redis.DialReadTimeout(time.Second),
		redis.DialWriteTimeout(time.Second))
	if err != nil {
		return nil, fmt.Errorf("redlocktest: %s: %w", nd, err)
	}
	defer conn.Close()
	reply, err := conn.Do(cmd, args...)
	if err != nil {
		if _, ok := err.(redis.Error); !ok {
			err = fmt.Errorf("redlocktest: %s: %w", nd, err)
		}
	}
	return reply, err
}

// String names the node in errors: "node 2", or "node 2 shard 1".
func (nd *node) String() string {
	if nd.busPort == 0 {
		return "node " + strconv.Itoa(nd.index)
	}
	name := "node " + strconv.Itoa(nd.index) + " shard " + strconv.Itoa(nd.shard)
	if nd.replica > 0 {
		name += " replica " + strconv.Itoa(nd.replica)
	}
	return name
}
