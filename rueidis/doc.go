// Package rueidis lets redlock reach its quorum members through rueidis
// (github.com/redis/rueidis): each member is one Redis server, reached by
// a rueidis client that NewNode builds from the caller's ClientOption and
// that the redlock Client closes when it closes.
//
//	na, err := rueidis.NewNode("a", rueidislib.ClientOption{InitAddress: []string{"10.0.0.1:6379"}})
//	// ... nb and nc likewise, three independent masters
//	client, err := redlock.New([]*redlock.Node{na, nb, nc})
//
// (rueidislib is github.com/redis/rueidis imported under that name.)
//
// # The client's options that matter
//
// InitAddress names exactly one server: a quorum member here is one
// standalone master, never a Redis Cluster, a Sentinel set or a replica;
// NewNode refuses options that say otherwise, and it forces
// ForceSingleClient (the server is never probed as a cluster) and
// DisableCache (redlock reads nothing through client-side caching, and the
// connection set-up then needs no CLIENT TRACKING, which the minimal ACL of
// redlock's README does not grant).
//
// Deadlines come from redlock: every call carries the node timeout
// (redlock.WithNodeTimeout) in its context, and returns by it even when
// the server stopped answering or a connection is still being set up.
// Dialer.Timeout bounds each connection's dial and handshake (HELLO); NewNode
// itself connects once and may wait that long for a server that accepts
// but does not answer (one that is down does not make it fail).
// Dialer.KeepAlive and ConnWriteTimeout say how soon rueidis gives up on a
// silent connection (it PINGs idle ones) and opens a new one.
//
// Calls use rueidis's auto-pipelining: concurrent calls share the
// pipelined connection, each Eval's calls written together in order, in one
// round trip. PipelineMultiplex and MaxFlushDelay tune that as for any
// rueidis client. With DisableAutoPipelining each Eval borrows a pooled
// connection instead (BlockingPoolSize bounds them), as does an Eval of at
// least BlockingPipeline calls. The pub/sub connection of waiters is a
// dedicated connection taken from the same pool.
//
// # Reconnects and restarts
//
// rueidis opens a new connection inside the next call after one broke.
// NewNode wraps the dial function (DialCtxFn, or DialFn, or rueidis's own
// dialer, whichever the options give) so that every connection opened is
// counted before it serves a command; redlock reads INFO server again after
// a new connection before a reply counts, so that a server that restarted
// and forgot its locks is kept out of quorums for the quarantine period
// (redlock.WithQuarantine). rueidis never sends EVALSHA or EVAL a second
// time by itself (it retries only read-only commands). When the pub/sub
// connection breaks, it is opened again with a backoff, every channel is
// subscribed again, and then the waiters are told that messages may have
// been missed. Closing waits for a connection's set-up in progress, at most
// Dialer.Timeout.
package rueidis
