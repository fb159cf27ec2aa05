package script

// RWWriteCall is rw_write.lua's call for an attempt of the writer; a
// reader's own hash is ownPrefix followed by its owner field, and peer is
// the owner field of the same RWMutex's reader side. Its reply has
// acquire.lua's shape (ParseAcquire).
func RWWriteCall(k RWKeys, field string, count int, leaseMs, seq, fenceTTL, intentMs int64, ownPrefix, peer string, graceMs int64) Call {
	return RWWrite.Call(k.Writer, k.Marks, k.Fence, k.Readers, k.Intent, k.Behind, field, count, leaseMs, seq, fenceTTL, intentMs, ownPrefix, peer, graceMs)
}
