package quorum

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/script"
	"github.com/redlock-go/redlock/internal/vote"
)

// TestUnitRacedError: the error of a fencing token's write-back that met
// a larger counter in every round says so in the library's words, once
// prefixed, and wraps the Client's ErrNoQuorum.
func TestUnitRacedError(t *testing.T) {
	noQuorum := errors.New("redlock: no quorum")
	err := error(&RacedError{NoQuorum: noQuorum, Lock: `lock "a"`})
	assert.Equal(t, `redlock: lock "a": the fencing token's write-back met a larger counter 4 times in a row: no quorum`, err.Error())
	assert.ErrorIs(t, err, noQuorum)
}

// members counts every node, by name "n<i>".
type members struct{}

func (members) Name(i int) string               { return fmt.Sprintf("n%d", i) }
func (members) Fail(i int, err error) error     { return err }
func (members) Duplicated(int) error            { return nil }
func (members) Quarantined(int, string) error   { return nil }
func (members) Counted(int, []script.Call) bool { return true }

// undoNothing undoes nothing: the rounds here are never settled as failed.
type undoNothing struct{}

func (undoNothing) Undo(int64, int, time.Duration) script.Call { return script.Call{} }

// restorer records the rounds it was handed.
type restorer struct{ rounds []*Round }

func (r *restorer) WriteBack(round *Round) { r.rounds = append(r.rounds, round) }

// acquisition is a round of an acquisition on n nodes whose answers come
// through Answer, as Collect counts them.
func acquisition(n int) *Round {
	q := &Quorum{members: members{}, cfg: Config{Errors: &node.Errors{NotSent: errors.New("not sent")}, Timeout: time.Second, Now: time.Now}}
	r := q.Unsent(n, vote.Acquire)
	r.undo = Rollback{By: undoNothing{}}
	r.subs = -1
	return r
}

// TestUnitAcquisitionAnswersAreReadOnce: what an acquisition round tells
// of its answers beyond the votes (the fencing counters of the yes
// answers, the subscribers they report, the PTTLs and the waiters ahead of
// the no answers, another owner met) is read when each answer is counted.
func TestUnitAcquisitionAnswersAreReadOnce(t *testing.T) {
	r := acquisition(5)
	r.Answer(0, []interface{}{int64(1), int64(7), int64(2)}, nil)   // yes: counter 7, 2 subscribers
	r.Answer(1, []interface{}{int64(1), int64(9)}, nil)             // yes: counter 9
	r.Answer(2, []interface{}{int64(0), int64(300), int64(1)}, nil) // no: an older waiter ahead, for 300 ms
	r.Answer(3, []interface{}{int64(0), int64(-2)}, nil)            // no: its own hold absent
	r.Answer(4, nil, context.DeadlineExceeded)
	assert.Equal(t, []int32{0, 0, 300, -2, 0}, []int32{r.Nodes[0].PTTL, r.Nodes[1].PTTL, r.Nodes[2].PTTL, r.Nodes[3].PTTL, r.Nodes[4].PTTL})
	assert.Equal(t, int64(9), r.counter, "the largest fencing counter of the yes answers")
	assert.Equal(t, 2, r.Subscribers())
	assert.Equal(t, 1, r.Ahead())
	assert.Equal(t, int32(1), r.owned, "another owner's no: the waiter's intent; not the absent hold")
	assert.Equal(t, 300*time.Millisecond, r.FreeIn(time.Minute), "the two yes and the waiter's node: 3 of 5 free in 300 ms")

	none := acquisition(3)
	none.Answer(0, int64(1), nil) // the uncontended reply: yes, no fencing, no subscribers told
	assert.Equal(t, -1, none.Subscribers())
	assert.Zero(t, none.counter)
}

// TestUnitSettleRestoresAWonReentry: settling a won acquisition hands its
// round to the Restorer given (a re-entry's write-back).
func TestUnitSettleRestoresAWonReentry(t *testing.T) {
	rs := &restorer{}
	won := acquisition(3)
	assert.NoError(t, won.Settle(false, rs))
	assert.Equal(t, []*Round{won}, rs.rounds)
	assert.NoError(t, acquisition(3).Settle(false, nil))
}

// TestUnitRoundIsOneSmallAllocation: a round of up to five nodes stays in
// Go's 640-byte size class (a Lock+Unlock allocates two): 632 bytes and
// the 8-byte header the runtime puts before an object of more than 512
// bytes with pointers. What an acquisition reads of its answers
// (Slot.PTTL, the subscribers) lives in padding.
func TestUnitRoundIsOneSmallAllocation(t *testing.T) {
	assert.LessOrEqual(t, unsafe.Sizeof(Round{}), uintptr(632))
}
