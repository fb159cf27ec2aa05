// Package script holds redlock's Lua scripts and their wire format: each
// script's source (one .lua file here, whose header says what it takes and
// returns), its SHA1 for EVALSHA, and a Call, the EVALSHA arguments of one
// call, built once and sent to every node of a round. Next to each .lua
// file, a Go file of the same name builds its call from plain keys and
// values (AcquireCall, ReleaseCall, ...) and parses its reply into a typed
// value (ParseAcquire, ParseRelease, ...), from the reply types every
// transport delivers (reply.go): a new script is one file of Lua and one
// small Go file, plus its line in All.
//
// mark.lua is not a script of its own: it defines the function that
// release.lua, rollback.lua and force.lua share, and is put in front of
// them; likewise drop.lua (or drop_shared.lua) in front of release.lua and
// rollback.lua.
package script

import (
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
)

var (
	//go:embed acquire.lua
	acquireLua string
	//go:embed mark.lua
	markLua string
	//go:embed drop.lua
	dropLua string
	//go:embed drop_shared.lua
	dropSharedLua string
	//go:embed rollback.lua
	rollbackLua string
	//go:embed release.lua
	releaseLua string
	//go:embed force.lua
	forceLua string
	//go:embed holders.lua
	holdersLua string
	//go:embed inspect.lua
	inspectLua string
	//go:embed view.lua
	viewLua string
	//go:embed survey.lua
	surveyLua string
	//go:embed renew.lua
	renewLua string
	//go:embed repair.lua
	repairLua string
	//go:embed fence.lua
	fenceLua string
	//go:embed ping.lua
	pingLua string
	//go:embed rw_read.lua
	rwReadLua string
	//go:embed rw_write.lua
	rwWriteLua string
	//go:embed rw_withdraw.lua
	rwWithdrawLua string
	//go:embed withdraw.lua
	withdrawLua string
	//go:embed slots.lua
	slotsLua string
	//go:embed leases.lua
	leasesLua string
	//go:embed refresh.lua
	refreshLua string
	//go:embed label.lua
	labelLua string
)

// The scripts. Those of one hold take the keys of each of its locks (one
// for a Mutex, several for a MultiMutex): the key count is the first
// argument of every call, as it is for the watchdog's scripts, which take
// many holds.
var (
	Acquire        = New(-1, acquireLua)
	Rollback       = New(-1, markLua+dropLua+rollbackLua)
	Release        = New(-1, markLua+dropLua+releaseLua)
	Force          = New(-1, markLua+forceLua)
	Holders        = New(-1, holdersLua)
	Inspect        = New(-1, inspectLua)
	View           = New(1, viewLua)
	Survey         = New(-1, surveyLua) // every kind of lock of one name
	Renew          = New(-1, renewLua)
	Repair         = New(-1, repairLua)
	Fence          = New(-1, fenceLua)
	Ping           = New(0, pingLua)
	RWRead         = New(6, rwReadLua)
	RWWrite        = New(6, rwWriteLua)
	RWWithdraw     = New(1, rwWithdrawLua)
	Withdraw       = New(-1, withdrawLua) // a waiter's intents
	Slots          = New(-1, slotsLua)    // a semaphore's permits
	Leases         = New(1, leasesLua)    // the longest lease in use
	Refresh        = New(-1, refreshLua)  // a living waiter's intents
	Label          = New(1, labelLua)     // a Client's label for operators
	RollbackShared = New(-1, markLua+dropSharedLua+rollbackLua)
	ReleaseShared  = New(-1, markLua+dropSharedLua+releaseLua)

	// The watchdog's scripts in their cross-slot form (see CrossSlot).
	RenewCrossSlot  = New(1, CrossSlot+renewLua)
	RepairCrossSlot = New(1, CrossSlot+repairLua)

	// All lists every script a connection loads at once (not the
	// cross-slot forms, which only a Transport sends).
	All = []*Script{&Acquire, &Rollback, &Release, &Force, &Holders, &Inspect, &View, &Survey, &Renew, &Repair, &Fence, &Ping, &RWRead, &RWWrite, &RWWithdraw, &Withdraw, &Slots, &Leases, &RollbackShared, &ReleaseShared, &Refresh, &Label, &Batch}
)

func init() {
	Renew.many = &PerHold{Keys: 1, Args: 1, Lead: 1, CrossSlot: &RenewCrossSlot}
	Repair.many = &PerHold{Keys: 3, Args: 6, Lead: 1, CrossSlot: &RepairCrossSlot}
}

// Script is a Lua script: its source, for SCRIPT LOAD and EVAL, its SHA1,
// for EVALSHA, and how many of a call's arguments are keys (-1: the first
// argument of every call says).
type Script struct {
	Src      string
	Hash     string
	KeyCount int
	many     *PerHold    // a script that acts on many holds; nil for one lock's
	hash     interface{} // Hash, boxed once: every call's first argument

	batchIndex int // its number in Batch, 0 for a script Batch does not run
}

// New returns the script of source src whose calls pass keyCount keys (-1:
// each call says how many, first).
func New(keyCount int, src string) Script {
	h := sha1.Sum([]byte(src))
	hash := hex.EncodeToString(h[:])
	return Script{Src: src, Hash: hash, KeyCount: keyCount, hash: hash}
}

// Call is one script call, prepared once and shared read-only by every
// node of a round: the EVALSHA arguments are built once.
type Call struct {
	S    *Script       // one of the package's scripts
	Args []interface{} // EVALSHA's: hash, key count, keys and arguments
	Lane uint32        // from the first key: the calls of one lock share a lane
}

// Call prepares a call of s with keysAndArgs: the keys then the arguments,
// preceded by the number of keys when s.KeyCount is -1. A call of one
// hold's locks goes on the lane of its first key, so that the calls of one
// lock keep their order on a node; the watchdog's calls, of many holds,
// keep no lane.
func (s *Script) Call(keysAndArgs ...interface{}) Call {
	sha := make([]interface{}, 0, 2+len(keysAndArgs))
	sha = append(sha, s.hashArg())
	if s.KeyCount >= 0 {
		sha = append(sha, s.KeyCount)
	}
	return s.Made(append(sha, keysAndArgs...))
}

// Begin starts the EVALSHA arguments of a call of s with keys keys and
// room for more arguments: the hash and the key count.
func (s *Script) Begin(keys, more int) []interface{} {
	sha := make([]interface{}, 0, 2+keys+more)
	return append(sha, s.hashArg(), keys)
}

// hashArg is s.Hash as an argument, boxed once (a Script built as a
// literal, in a test, is boxed at each call).
func (s *Script) hashArg() interface{} {
	if s.hash == nil {
		return s.Hash
	}
	return s.hash
}

// Made is the call of s with the EVALSHA arguments sha (see Call, and
// Begin). A call of one hold's locks goes on the lane of its first key;
// the watchdog's calls, of many holds, keep no lane.
func (s *Script) Made(sha []interface{}) Call {
	c := Call{S: s, Args: sha}
	if s.many == nil {
		if key := c.Key(); key != "" {
			c.Lane = LaneOf(key)
		}
	}
	return c
}

// LaneOf hashes a key (FNV-1a) to choose its lane.
func LaneOf(key string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(key); i++ {
		h = (h ^ uint32(key[i])) * 16777619
	}
	return h
}

// EvalArgs are the arguments of EVAL for c, for a server that answered
// NOSCRIPT: the source in place of the hash.
func (c Call) EvalArgs() []interface{} {
	args := make([]interface{}, len(c.Args))
	copy(args, c.Args)
	args[0] = c.S.Src
	return args
}

// Keys returns the keys of c.
func (c *Call) Keys() []string {
	if len(c.Args) < 2 {
		return nil
	}
	n, _ := c.Args[1].(int)
	keys := make([]string, 0, n)
	for _, k := range c.Args[2 : 2+n] {
		if s, ok := k.(string); ok {
			keys = append(keys, s)
		}
	}
	return keys
}

// Key returns the first key of c, "" when it has none.
func (c *Call) Key() string {
	if len(c.Args) < 3 {
		return ""
	}
	if n, _ := c.Args[1].(int); n == 0 {
		return ""
	}
	s, _ := c.Args[2].(string)
	return s
}

// Keys are one lock's keys on every node and its unlock channel: what
// the scripts of one hold take of each of its locks.
type Keys struct {
	Key     string // the lock hash
	Marks   string // the owners' rollback marks (mark.lua)
	Fence   string // the fencing counter
	Intent  string // the waiters' intent (acquire.lua)
	Channel string // the unlock channel; "" for none
	Boxed   *Boxed // nil, or the keys above and the owner field boxed once (see Box)
}

// Locks are the locks of one hold, all of which its scripts act on at
// once on each node: N of them (one for a Mutex, several for a
// MultiMutex), Keys(i) the keys of lock i, 0 <= i < N.
type Locks struct {
	N    int
	Keys func(i int) Keys
}

// appendPairs appends every lock's hash and marks to sha.
func (l Locks) appendPairs(sha []interface{}) []interface{} {
	for i := 0; i < l.N; i++ {
		k := l.Keys(i)
		sha = append(sha, k.keyArg(), k.marksArg())
	}
	return sha
}

// appendChannels appends every lock's unlock channel to sha.
func (l Locks) appendChannels(sha []interface{}) []interface{} {
	for i := 0; i < l.N; i++ {
		k := l.Keys(i)
		sha = append(sha, k.channelArg())
	}
	return sha
}

// CrossSlot is put in front of a script that acts on many holds, for a
// Transport: on a Redis Cluster member one call then renews or repairs the
// holds of many locks whose slots one shard serves (the Transport layer
// splits a call by shard). A cluster refuses a command whose declared keys
// hash to different slots, so the call declares one key, which routes it
// to the shard, and passes the holds' keys first in ARGV (ARGV[1] says how
// many); the prologue gives the script its usual KEYS and ARGV back, as
// locals, and allow-cross-slot-keys lets it touch the other slots of the
// shard.
const CrossSlot = `#!lua flags=allow-cross-slot-keys
local KEYS, ARGV = (function(argv)
  local keys, rest, n = {}, {}, tonumber(argv[1])
  for i = 1, n do keys[i] = argv[1 + i] end
  for i = n + 2, #argv do rest[#rest + 1] = argv[i] end
  return keys, rest
end)(ARGV)
`

// PerHold is how a script that acts on many holds lays out its keys and
// arguments: keys and arguments per hold, after shared leading arguments,
// and its cross-slot form.
type PerHold struct {
	Keys, Args, Lead int
	CrossSlot        *Script
}

// Layout returns how s lays out its holds, and false for a script of one
// lock.
func (s *Script) Layout() (PerHold, bool) {
	if s.many == nil {
		return PerHold{}, false
	}
	return *s.many, true
}
