package script

// RWWriteCall is rw_write.lua's call for an attempt of the writer; a
// reader's own hash is ownPrefix followed by its owner field, and peer is
// the owner field of the same RWMutex's reader side. With tell, the
// attempt tells the waiters of the lock's channel when it creates the
// writer's lock hash, as acquire.lua's (Acquisition.Tell). Its reply has
// acquire.lua's shape (ParseAcquire).
func RWWriteCall(k RWKeys, field string, count int, leaseMs, seq, fenceTTL, intentMs int64, ownPrefix, peer string, graceMs int64, tell, subscribed bool) Call {
	if !tell {
		return RWWrite.Call(k.Writer, k.Marks, k.Fence, k.Readers, k.Intent, k.Behind, field, count, leaseMs, seq, fenceTTL, intentMs, ownPrefix, peer, graceMs)
	}
	sub := 0
	if subscribed {
		sub = 1
	}
	return RWWrite.Call(k.Writer, k.Marks, k.Fence, k.Readers, k.Intent, k.Behind, field, count, leaseMs, seq, fenceTTL, intentMs, ownPrefix, peer, graceMs, k.Channel, sub)
}
