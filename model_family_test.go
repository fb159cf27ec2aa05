package redlock

import (
	"github.com/redlock-go/redlock/internal/script"
	"strconv"

	"github.com/redlock-go/redlock/internal/model"
)

// The differential calls of the scripts that a MultiMutex and a Semaphore
// add to a Mutex's (see model_calls_test.go): acquire.lua over several
// locks, a semaphore slot's acquire.lua with the semaphore's shared
// intent, slots.lua and withdraw.lua.

// diffIntent is a waiter's intent as the client writes it.
func diffIntent(stamp int64, waiter int) string {
	return strconv.FormatInt(stamp, 10) + "/" + diffOwners[waiter]
}

// stamp is a waiter's stamp: a few values, so that they collide.
func (r *diffRun) stamp() int64 { return 1 + r.rng.Int64N(3) }

// acquireMulti is acquire.lua over two or three of the main locks, in a
// random order, as a MultiMutex's attempt.
func (r *diffRun) acquireMulti(now int64) diffCall {
	a, intent := r.acquireArgs()
	perm := r.rng.Perm(len(r.main))[:2+r.rng.IntN(len(r.main)-1)]
	stores := make([]*model.Store, len(perm))
	keys := make([]interface{}, 0, 4*len(perm))
	for i, k := range perm {
		l := r.main[k]
		stores[i] = &l.m
		keys = append(keys, l.key, l.marks, l.fence, l.intent)
	}
	args := sha(&script.Acquire, len(keys), keys...)
	args = append(args, diffOwners[a.Owner], a.Count, a.Lease, a.Seq, a.FenceTTL, intent, a.Margin)
	return acquireCall(args, model.AcquireAll(now, stores, a))
}

// acquireSlot is acquire.lua on a main lock as a semaphore's slot: its
// intent is the semaphore's.
func (r *diffRun) acquireSlot(now int64) diffCall {
	l := r.lock()
	a, intent := r.acquireArgs()
	args := sha(&script.Acquire, 4, l.key, l.marks, l.fence, r.sem.intent, diffOwners[a.Owner], a.Count, a.Lease, a.Seq, a.FenceTTL, intent, a.Margin)
	own := l.m.Intent
	l.m.Intent = r.sem.m.Intent
	got := l.m.Acquire(now, a)
	r.sem.m.Intent, l.m.Intent = l.m.Intent, own
	return acquireCall(args, got)
}

// slots is slots.lua over the main locks as a semaphore's slots, a
// waiter's scan or not.
func (r *diffRun) slots(now int64) diffCall {
	keys := make([]interface{}, 0, len(r.main)+1)
	stores := make([]*model.Store, len(r.main))
	for i, l := range r.main {
		keys, stores[i] = append(keys, l.key), &l.m
	}
	keys = append(keys, r.sem.intent)
	args := sha(&script.Slots, len(keys), keys...)
	var stamp, margin int64
	waiter := r.owner()
	if r.rng.IntN(2) == 0 {
		stamp, margin = r.stamp(), r.ttl()
		args = append(args, diffIntent(stamp, waiter), margin)
	}
	got := model.Slots(now, stores, &r.sem.m.Intent, stamp, waiter, margin)
	tol := make([]bool, len(got))
	for i := range tol {
		tol[i] = true
	}
	return diffCall{args: args, want: got, tol: tol}
}

// withdraw is withdraw.lua on one lock's intent, or on the semaphore's.
func (r *diffRun) withdraw(now int64) diffCall {
	l := r.lock()
	if r.rng.IntN(3) == 0 {
		l = r.sem
	}
	stamp, waiter := r.stamp(), r.owner()
	got := model.Withdraw(now, []*model.Intent{&l.m.Intent}, stamp, waiter)
	return diffCall{args: sha(&script.Withdraw, 1, l.intent, diffIntent(stamp, waiter), "redlock:{diff}:unlock"), want: []int64{got}, tol: []bool{false}}
}
