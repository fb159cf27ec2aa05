package main

import (
	"context"
	"fmt"
	"runtime"
	"sort"
	"strings"
)

// allocSite is where a contender's hot path allocates: the first frame of
// an allocation's stack outside the runtime and the small standard helpers
// (bytes, fmt, strconv, sync, time, errors), so that a timer is charged to
// context.WithDeadline and a fmt.Fprint to redigo's writeArg.
type allocSite struct {
	Fn      string
	PerOp   float64 // objects per op
	BytesOp float64
}

var helperPrefixes = []string{"runtime.", "internal/", "bytes.", "fmt.", "strconv.", "sync.", "time.", "errors.", "reflect.", "unicode/", "slices.", "sort."}

// profileAllocs runs ops Lock+Unlock of one contender with every allocation
// sampled and returns the allocation sites, most objects first.
func profileAllocs(c *contender, prefix string, ops int) ([]allocSite, error) {
	ctx := context.Background()
	names := make([]string, ops)
	for i := range names {
		names[i] = fmt.Sprintf("%s:%d", prefix, i)
	}
	old := runtime.MemProfileRate
	runtime.MemProfileRate = 1
	defer func() { runtime.MemProfileRate = old }()
	before := memProfile()
	for _, n := range names {
		l := c.newLocker(n)
		if err := l.Lock(ctx); err != nil {
			return nil, err
		}
		if err := l.Unlock(ctx); err != nil {
			return nil, err
		}
	}
	runtime.GC() // the profile is published at GC
	runtime.GC()
	after := memProfile()
	objs, bytes := map[string]int64{}, map[string]int64{}
	for key, r := range after {
		b := before[key]
		d := r.AllocObjects - b.AllocObjects
		if d <= 0 {
			continue
		}
		fn := siteOf(r.Stack())
		if fn == "main.memProfile" || fn == "main.profileAllocs" {
			continue // this profile's own snapshots
		}
		objs[fn] += d
		bytes[fn] += r.AllocBytes - b.AllocBytes
	}
	var out []allocSite
	for fn, n := range objs {
		out = append(out, allocSite{fn, float64(n) / float64(ops), float64(bytes[fn]) / float64(ops)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PerOp > out[j].PerOp })
	return out, nil
}

func memProfile() map[string]runtime.MemProfileRecord {
	var recs []runtime.MemProfileRecord
	n, _ := runtime.MemProfile(nil, true)
	for {
		recs = make([]runtime.MemProfileRecord, n+64)
		var ok bool
		n, ok = runtime.MemProfile(recs, true)
		if ok {
			recs = recs[:n]
			break
		}
	}
	out := make(map[string]runtime.MemProfileRecord, len(recs))
	for _, r := range recs {
		out[fmt.Sprint(r.Stack())] = r
	}
	return out
}

func siteOf(stack []uintptr) string {
	frames := runtime.CallersFrames(stack)
	first := ""
	for {
		f, more := frames.Next()
		name := f.Function
		if first == "" {
			first = name
		}
		helper := false
		for _, p := range helperPrefixes {
			if strings.HasPrefix(name, p) {
				helper = true
				break
			}
		}
		if !helper && name != "" {
			return shortFn(name)
		}
		if !more {
			return shortFn(first)
		}
	}
}

// shortFn drops the module paths: github.com/gomodule/redigo/redis.(*conn).DoContext -> redis.(*conn).DoContext.
func shortFn(fn string) string {
	if i := strings.LastIndex(fn, "/"); i >= 0 {
		fn = fn[i+1:]
	}
	return fn
}

// siteNote explains an allocation site that a library's hot path may have,
// and what would avoid it. Notes are matched against the measured sites,
// so the text follows the library as it is at the run.
type siteNote struct{ match, what, fix string }

var siteNotes = []siteNote{
	{"context.WithDeadlineCause", "a context with its timer for each node call or round", "one deadline per round, applied as the connection's read deadline"},
	{"(*cancelCtx).Done", "the done channels of those contexts", ""},
	{"writeArg", "redigo's `writeArg` has no case for one of the arguments' types, so it formats it with `fmt.Fprint` into a fresh `bytes.Buffer` on every node call", "pass that argument as an `int64` or a string"},
	{"(*Client).launch", "the fan-out's round: the round itself, its per-node slots and outcomes and its answer channel (and an acquisition's per-node rollback state); it outlives the call while answers may still arrive", ""},
	{"(*Client).fanout", "the fan-out's round: the round itself, its per-node slots and outcomes and its answer channel", ""},
	{"readReply", "redigo parsing the replies", ""},
}

// noteFor returns the note matching a site, if any.
func noteFor(fn string) (siteNote, bool) {
	for _, n := range siteNotes {
		if strings.Contains(fn, n.match) {
			return n, true
		}
	}
	return siteNote{}, false
}
