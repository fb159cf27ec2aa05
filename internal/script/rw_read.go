package script

// RWKeys are a read-write lock's keys on every node.
type RWKeys struct {
	Writer  string // the writer's lock hash
	Readers string // the readers' hash
	Marks   string // the owners' rollback marks
	Fence   string // the writers' fencing counter
	Intent  string // a waiting writer's intent
	Behind  string // the readers' intent
	Channel string // the lock's unlock channel: a writer's attempt that tells its take publishes there
}

// RWReadCall is rw_read.lua's call for an attempt of the reader whose
// own hash is own; peer is the owner field of the same RWMutex's writer
// side. Its reply has acquire.lua's shape (ParseAcquire).
func RWReadCall(k RWKeys, own, field string, count int, leaseMs, seq int64, peer string, graceMs int64) Call {
	return RWRead.Call(k.Readers, own, k.Marks, k.Writer, k.Intent, k.Behind, field, count, leaseMs, seq, peer, graceMs)
}
