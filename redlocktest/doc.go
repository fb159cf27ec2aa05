// Package redlocktest starts real, independent redis-server nodes for tests,
// benchmarks and demos, and breaks them on demand: kill, pause (SIGSTOP),
// restart empty on the same port, restart after a delay, and, behind an
// optional per-node TCP proxy, add latency, blackhole or drop the network
// path.
//
// Start is the entry point for tests: it fails the test with a message
// saying what to install when no server can be started, and registers
// Close with t.Cleanup. Launch is the same for programs, which call Close
// themselves.
//
// A chaos test of code that must survive a minority of dead, frozen or
// cut-off masters (here the lock of the parent package) looks like this:
//
//	func TestLockSurvivesMinorityFailure(t *testing.T) {
//		ctx := context.Background()
//		c := redlocktest.Start(t, 5, redlocktest.WithProxy())
//		client, err := redlock.Dial(c.URLs(), redlock.WithNodeTimeout(100*time.Millisecond))
//		require.NoError(t, err)
//		t.Cleanup(func() { client.Close() })
//
//		require.NoError(t, c.Kill(0))                            // dead
//		require.NoError(t, c.Pause(1))                           // frozen: commands hang
//		require.NoError(t, c.SetLatency(2, 20*time.Millisecond)) // slow but alive
//		c.RestartAfter(0, time.Second)                           // back, empty, in 1s
//
//		m := client.NewMutex("orders")
//		require.NoError(t, m.Lock(ctx)) // nodes 2, 3 and 4 form a quorum
//		keys, err := redis.Strings(c.Do(3, "KEYS", "*"))
//		require.NoError(t, err) // Do inspects a node directly
//		require.NotEmpty(t, keys)
//
//		require.NoError(t, c.Resume(1))
//		require.NoError(t, m.Unlock(ctx))
//	}
//
// # Where the servers come from
//
// Launch runs the executable named by WithBinary, else $REDIS_SERVER_BIN,
// else redis-server on $PATH, /usr/bin/redis-server or
// /usr/local/bin/redis-server. Each node listens on a free 127.0.0.1 port
// with persistence off (--save "" --appendonly no) in its own temporary
// directory; WithRedisArgs adds flags. When no executable is found but a
// Docker engine answers, nodes are redis:7 containers (through
// github.com/ory/dockertest/v3) publishing their port on 127.0.0.1; Kill is
// then docker kill, Pause and Resume docker pause and unpause, and PID
// returns 0.
//
// # Cleaning up
//
// Close kills every process by PID (SIGKILL, even when paused) and waits
// for it, closes the proxies, cancels pending delayed restarts, waits for
// every goroutine the cluster started and removes the temporary
// directories, so goleak finds nothing after it. On Linux the nodes also
// die with the process that started them (Pdeathsig), so a test binary
// killed by a timeout leaves no server behind; elsewhere Close is the only
// cleanup.
//
// # Faults
//
// Process faults (Kill, Pause, Resume, Restart, RestartAfter) act on the
// server itself and are seen by every client. Network faults need
// WithProxy: URLs and Addrs then name the proxies, while DirectAddr and Do
// still reach the servers directly, so a test can inspect a node it has cut
// off. SetLatency delays every chunk each way; Blackhole keeps connections
// open and discards what passes, so clients hang until their timeouts;
// Drop closes connections and refuses new ones, so clients fail at once;
// Heal undoes all three.
//
// # Members that are Redis Clusters
//
// With WithShards(k) every node is a quorum member made of k redis-server
// processes in cluster mode, its shards: the 16384 slots split evenly, no
// replicas, cluster-require-full-coverage off. URLs and Addrs name shard 0
// of each member, from which a cluster client learns the rest; ShardAddrs
// names every shard, ShardOf and KeySlot say which shard serves a key,
// DoKey and DoShard run a command there. Kill, Pause, Resume, Restart and
// RestartAfter act on every shard of a member; KillShard, PauseShard,
// ResumeShard and RestartShard on one, which comes back empty but with its
// node id and slots (its nodes.conf survives).
package redlocktest
