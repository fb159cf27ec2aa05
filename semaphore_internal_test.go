package redlock

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/slots"
	"github.com/redlock-go/redlock/internal/vote"
)

// A Semaphore before any network (semaphore.go): the checks of its
// arguments, and how a scan decides from the nodes' answers as they come.

func TestUnitSemaphoreArguments(t *testing.T) {
	tests := []struct {
		name    string
		sem     string
		permits int
		prefix  int
		ok      bool
	}{
		{"one permit", "a", 1, 8, true},
		{"MaxPermits", "a", MaxPermits, 8, true},
		{"no permits", "a", 0, 8, false},
		{"negative", "a", -3, 8, false},
		{"above MaxPermits", "a", MaxPermits + 1, 8, false},
		{"empty name", "", 1, 8, false},
		{"name of MaxNameLength, one permit", strings.Repeat("x", MaxNameLength), 1, 8, true},
		{"name above MaxNameLength", strings.Repeat("x", MaxNameLength+1), 1, 8, false},
		{"a long name for many permits", strings.Repeat("x", 1000), MaxPermits, 8, true},
		{"too long a name for many permits", strings.Repeat("x", 1024), MaxPermits, 8, false},
		{"a long prefix counts", strings.Repeat("x", 1000), MaxPermits, 100, false},
		{"name beginning with }", "}a", 1, 8, false},
		{"} inside a name", "a}b", 1, 8, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkSemaphore(tt.sem, tt.permits, tt.prefix)
			if tt.ok {
				assert.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrInvalid)
			assert.Less(t, len(err.Error()), 400, "an error quotes a prefix of a long name")
		})
	}
}

// unitScanCase is a scan's answers, and what it must decide.
type unitScanCase struct {
	name     string
	nodes    int
	permits  int // 0: as many as the first answer's PTTLs
	answers  []unitScanAnswer
	decided  int           // answers counted when the scan is decided
	free     []int         // slots free on a majority
	soonest  time.Duration // when nothing is free: until a slot is
	noQuorum bool
}

// unitScanAnswer is one node's answer to a scan: its PTTLs, or an error.
type unitScanAnswer struct {
	node  int
	pttls []int64
	err   error
}

func TestUnitSemaphoreScanDecides(t *testing.T) {
	const lease = time.Second
	failed := errors.New("unit test: no answer")
	tests := []unitScanCase{
		{name: "free on the first majority", nodes: 3,
			answers: []unitScanAnswer{{0, []int64{-2, 500, 500}, nil}, {2, []int64{-2, 500, -2}, nil}, {1, []int64{300, 300, 300}, nil}},
			decided: 2, free: []int{0}},
		{name: "every slot taken on a majority", nodes: 3,
			answers: []unitScanAnswer{{0, []int64{100, 900, -2}, nil}, {1, []int64{200, 800, 700}, nil}, {2, []int64{300, -2, 600}, nil}},
			decided: 3, soonest: 200 * time.Millisecond},
		{name: "taken on a majority before the last answer", nodes: 3,
			answers: []unitScanAnswer{{0, []int64{100, 900, 400}, nil}, {1, []int64{200, 800, 700}, nil}, {2, []int64{-2, -2, -2}, nil}},
			decided: 2, soonest: 200 * time.Millisecond},
		{name: "free on a minority: wait for the others", nodes: 5,
			answers: []unitScanAnswer{
				{0, []int64{-2, 50}, nil}, {1, []int64{-2, 60}, nil}, {2, []int64{900, -2}, nil},
				{3, []int64{800, -2}, nil}, {4, []int64{-2, 70}, nil}},
			decided: 5, free: []int{0}},
		{name: "a key without expiry counts as the lease", nodes: 3,
			answers: []unitScanAnswer{{0, []int64{-1}, nil}, {1, []int64{-1}, nil}, {2, []int64{-2}, nil}},
			decided: 2, soonest: lease},
		{name: "failures leave no majority", nodes: 3,
			answers: []unitScanAnswer{{0, []int64{-2, -2}, nil}, {1, nil, failed}, {2, nil, failed}},
			decided: 3, noQuorum: true},
		{name: "a reply of the wrong length is a failure", nodes: 3, permits: 2,
			answers: []unitScanAnswer{{0, []int64{-2}, nil}, {1, []int64{-2}, nil}, {2, []int64{-2}, nil}},
			decided: 2, noQuorum: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { unitScan(t, tt, lease) })
	}
}

// unitScan feeds tt's answers to a scan's tally, one by one until it is
// decided, and checks what it decided.
func unitScan(t *testing.T, tt unitScanCase, lease time.Duration) {
	ns := make([]*Node, tt.nodes)
	for i := range ns {
		ns[i] = NewNode(fmt.Sprint("n", i), unitPool(nil))
	}
	c, err := New(ns)
	require.NoError(t, err)
	defer c.Close()
	permits := tt.permits
	if permits == 0 {
		permits = len(tt.answers[0].pttls)
	}
	s := c.NewSemaphore("unit", permits)
	r := c.q.Unsent(tt.nodes, vote.Slots(permits))
	tally := slots.NewScan(r, &s.counts)
	counted := 0
	for _, a := range tt.answers {
		if tally.Decided(&r.Ballot) {
			break
		}
		reply := make([]interface{}, len(a.pttls))
		for j, v := range a.pttls {
			reply[j] = v
		}
		if a.err != nil {
			reply = nil
		}
		r.Answer(a.node, reply, a.err)
		counted++
	}
	assert.True(t, tally.Decided(&r.Ballot), "not decided after every answer")
	assert.Equal(t, tt.decided, counted, "answers counted before the scan was decided")
	if tt.noQuorum {
		require.ErrorIs(t, tally.NoQuorum(), ErrNoQuorum)
		assert.Less(t, len(tally.Nodes), c.nodes.quorum)
		return
	}
	assert.GreaterOrEqual(t, len(tally.Nodes), c.nodes.quorum)
	assert.ElementsMatch(t, tt.free, tally.Free)
	if len(tt.free) == 0 {
		assert.Equal(t, tt.soonest, tally.Soonest(lease))
	}
}
