package redlock

import (
	_ "embed"

	"github.com/gomodule/redigo/redis"
)

// The Lua scripts, one per file in scripts/; each file's header says what it
// takes and returns. mark.lua is not a script of its own: it defines the
// function that release.lua, rollback.lua and force.lua share, and is put in front of
// them; likewise drop.lua (or drop_shared.lua) in front of release.lua and
// rollback.lua.
var (
	//go:embed scripts/acquire.lua
	acquireLua string
	//go:embed scripts/mark.lua
	markLua string
	//go:embed scripts/drop.lua
	dropLua string
	//go:embed scripts/drop_shared.lua
	dropSharedLua string
	//go:embed scripts/rollback.lua
	rollbackLua string
	//go:embed scripts/release.lua
	releaseLua string
	//go:embed scripts/force.lua
	forceLua string
	//go:embed scripts/holders.lua
	holdersLua string
	//go:embed scripts/inspect.lua
	inspectLua string
	//go:embed scripts/view.lua
	viewLua string
	//go:embed scripts/renew.lua
	renewLua string
	//go:embed scripts/repair.lua
	repairLua string
	//go:embed scripts/fence.lua
	fenceLua string
	//go:embed scripts/ping.lua
	pingLua string
	//go:embed scripts/rw_read.lua
	rwReadLua string
	//go:embed scripts/rw_write.lua
	rwWriteLua string
	//go:embed scripts/rw_withdraw.lua
	rwWithdrawLua string
	//go:embed scripts/withdraw.lua
	withdrawLua string
	//go:embed scripts/slots.lua
	slotsLua string
	//go:embed scripts/leases.lua
	leasesLua string

	// The scripts of one hold take the keys of each of its locks (one for
	// a Mutex, several for a MultiMutex): the key count is the first
	// argument of every call, as it is for the watchdog's scripts, which
	// take many holds.
	acquireScript  = newScript(-1, acquireLua)
	rollbackScript = newScript(-1, markLua+dropLua+rollbackLua)
	releaseScript  = newScript(-1, markLua+dropLua+releaseLua)
	forceScript    = newScript(-1, markLua+forceLua)
	holdersScript  = newScript(-1, holdersLua)
	inspectScript  = newScript(-1, inspectLua)
	viewScript     = newScript(1, viewLua)
	renewScript    = newScript(-1, renewLua)
	repairScript   = newScript(-1, repairLua)
	fenceScript    = newScript(-1, fenceLua)
	pingScript     = newScript(0, pingLua)
	rwReadScript   = newScript(6, rwReadLua)
	rwWriteScript  = newScript(6, rwWriteLua)
	rwWithdraw     = newScript(1, rwWithdrawLua)
	withdrawScript = newScript(-1, withdrawLua) // a waiter's intents (intent.go)
	slotsScript    = newScript(-1, slotsLua)    // a semaphore's permits
	leasesScript   = newScript(1, leasesLua)    // the longest lease in use (leases.go)

	// The reader side of a read-write lock releases and rolls back with
	// drop_shared.lua: its readers share one hash.
	rollbackShared = newScript(-1, markLua+dropSharedLua+rollbackLua)
	releaseShared  = newScript(-1, markLua+dropSharedLua+releaseLua)

	// scripts lists every script, for loading them all at once.
	scripts = []*script{&acquireScript, &rollbackScript, &releaseScript, &forceScript, &holdersScript, &inspectScript, &viewScript, &renewScript, &repairScript, &fenceScript, &pingScript, &rwReadScript, &rwWriteScript, &rwWithdraw, &withdrawScript, &slotsScript, &leasesScript, &rollbackShared, &releaseShared}
)

// script is a Lua script: its source, for SCRIPT LOAD and EVAL, its SHA1,
// for EVALSHA, and how many of a call's arguments are keys (-1: the first
// argument of every call says).
type script struct {
	src      string
	hash     string
	keyCount int
}

func newScript(keyCount int, src string) script {
	return script{src: src, hash: redis.NewScript(keyCount, src).Hash(), keyCount: keyCount}
}

// call is one script call, prepared once and shared read-only by every node
// of a round: the EVALSHA arguments are built once.
type call struct {
	s    *script       // one of the package's scripts
	sha  []interface{} // hash, key count, keys and arguments
	lane uint32        // from the first key: the calls of one lock share a lane
}

// call prepares a call of s with keysAndArgs: the keys then the arguments,
// preceded by the number of keys when s.keyCount is -1. A call of one
// hold's locks goes on the lane of its first key, so that the calls of one
// lock keep their order on a node; the watchdog's calls, of many holds,
// keep no lane.
func (s *script) call(keysAndArgs ...interface{}) call {
	sha := make([]interface{}, 0, 2+len(keysAndArgs))
	sha = append(sha, s.hash)
	if s.keyCount >= 0 {
		sha = append(sha, s.keyCount)
	}
	return s.made(append(sha, keysAndArgs...))
}

// begin starts the EVALSHA arguments of a call of s with keys keys and
// room for more arguments: the hash and the key count.
func (s *script) begin(keys, more int) []interface{} {
	sha := make([]interface{}, 0, 2+keys+more)
	return append(sha, s.hash, keys)
}

// made is the call of s with the EVALSHA arguments sha (see call, and
// begin). A call of one hold's locks goes on the lane of its first key;
// the watchdog's calls, of many holds, keep no lane.
func (s *script) made(sha []interface{}) call {
	c := call{s: s, sha: sha}
	if _, many := s.layout(); !many {
		if key := c.key(); key != "" {
			c.lane = laneOf(key)
		}
	}
	return c
}

// laneOf hashes a key (FNV-1a) to choose its lane.
func laneOf(key string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(key); i++ {
		h = (h ^ uint32(key[i])) * 16777619
	}
	return h
}

// evalArgs are the arguments of EVAL for c, for a server that answered
// NOSCRIPT: the source in place of the hash.
func (c call) evalArgs() []interface{} {
	args := make([]interface{}, len(c.sha))
	copy(args, c.sha)
	args[0] = c.s.src
	return args
}

// keys returns the keys of c.
func (c *call) keys() []string {
	if len(c.sha) < 2 {
		return nil
	}
	n, _ := c.sha[1].(int)
	keys := make([]string, 0, n)
	for _, k := range c.sha[2 : 2+n] {
		if s, ok := k.(string); ok {
			keys = append(keys, s)
		}
	}
	return keys
}

// key returns the first key of c, "" when it has none.
func (c *call) key() string {
	if len(c.sha) < 3 {
		return ""
	}
	if n, _ := c.sha[1].(int); n == 0 {
		return ""
	}
	s, _ := c.sha[2].(string)
	return s
}

// crossSlot is put in front of a script that acts on many holds, for a
// Transport: on a Redis Cluster member one call then renews or repairs the
// holds of many locks whose slots one shard serves (foreign.go splits a
// call by shard). A cluster refuses a command whose declared keys hash to
// different slots, so the call declares one key, which routes it to the
// shard, and passes the holds' keys first in ARGV (ARGV[1] says how many);
// the prologue gives the script its usual KEYS and ARGV back, as locals,
// and allow-cross-slot-keys lets it touch the other slots of the shard.
const crossSlot = `#!lua flags=allow-cross-slot-keys
local KEYS, ARGV = (function(argv)
  local keys, rest, n = {}, {}, tonumber(argv[1])
  for i = 1, n do keys[i] = argv[1 + i] end
  for i = n + 2, #argv do rest[#rest + 1] = argv[i] end
  return keys, rest
end)(ARGV)
`

// The watchdog's scripts in their cross-slot form (see crossSlot).
var (
	renewCrossSlot  = newScript(1, crossSlot+renewLua)
	repairCrossSlot = newScript(1, crossSlot+repairLua)
)

// perHold is how a script that acts on many holds lays out its keys and
// arguments: keys and arguments per hold, after shared leading arguments.
// Zero for a script of one lock.
type perHold struct {
	keys, args, lead int
	crossSlot        *script
}

// layout returns how s lays out its holds, and false for a script of one
// lock.
func (s *script) layout() (perHold, bool) {
	switch s {
	case &renewScript:
		return perHold{keys: 1, args: 1, lead: 1, crossSlot: &renewCrossSlot}, true
	case &repairScript:
		return perHold{keys: 3, args: 6, lead: 1, crossSlot: &repairCrossSlot}, true
	}
	return perHold{}, false
}
