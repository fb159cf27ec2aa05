package slots

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/internal/script"
	"github.com/redlock-go/redlock/internal/vote"
)

// A scan as its answers come, on a round that sends nothing (the root's
// semaphore_internal_test.go decides a table of scans through a Client's
// Semaphore); here, what a Scan makes of quarantine and why it failed.

var (
	errNoQuorum = errors.New("no quorum")
	errClosed   = errors.New("closed")
)

// everyone counts every node: the Scan, not the round, keeps quarantined
// nodes out.
type everyone struct{}

func (everyone) Name(int) string                 { return "node" }
func (everyone) Fail(_ int, err error) error     { return err }
func (everyone) Duplicated(int) error            { return nil }
func (everyone) Quarantined(int, string) error   { return nil }
func (everyone) Counted(int, []script.Call) bool { return true }

// unitScan is a scan of permits slots on n nodes, 2 of which make a
// majority, whose nodes in quarantined do not count, and whose Client is
// closed when closed is.
func unitScan(n, permits int, quarantined map[int]bool, closed *bool) *Scan {
	q := quorum.New(quorum.Config{Timeout: time.Second, Errors: &node.Errors{NotSent: errors.New("not sent")}, NoQuorum: errNoQuorum, Now: time.Now}, everyone{}, nil)
	cfg := &ScanConfig{
		Quorum: 2, Permits: permits, NoQuorum: errNoQuorum, Op: `scan of semaphore "s"`,
		Quarantined: func(i int) error {
			if quarantined[i] {
				return errors.New("node quarantined")
			}
			return nil
		},
		Open: func() error {
			if *closed {
				return errClosed
			}
			return nil
		},
	}
	return NewScan(q.Unsent(n, vote.Slots(permits)), cfg)
}

// answer answers the scan t for node i: every slot's PTTL, or err.
func answer(t *Scan, i int, err error, pttls ...int64) {
	reply := make([]interface{}, len(pttls))
	for j, p := range pttls {
		reply[j] = p
	}
	t.Round.Answer(i, reply, err)
}

// TestUnitScanQuarantineIsNoQuorum: a quarantined node's answer does not
// count, and its error is in the scan's ErrNoQuorum error with the
// nodes that failed.
func TestUnitScanQuarantineIsNoQuorum(t *testing.T) {
	closed := false
	s := unitScan(3, 2, map[int]bool{1: true}, &closed)
	answer(s, 0, nil, -2, 100)
	answer(s, 1, nil, -2, -2)
	answer(s, 2, errors.New("connection refused"))
	s.Collect(context.Background())
	require.ErrorIs(t, s.Err, errNoQuorum)
	assert.False(t, s.Ended)
	assert.Equal(t, []int{0}, s.Nodes)
	assert.Empty(t, s.Free)
	var qe *quorum.Error
	require.ErrorAs(t, s.Err, &qe)
	assert.Equal(t, quorum.Error{NoQuorum: errNoQuorum, Op: `scan of semaphore "s"`, Yes: 1, Need: 2, N: 3, Nodes: qe.Nodes}, *qe)
	assert.Equal(t, "connection refused; node quarantined", qe.Nodes.Error(), "the failures, then the nodes quarantine kept out")
}

// TestUnitScanWhyItFailed: a scan short of a majority says ctx's error
// when ctx ended, the Client's after Close; a scan that found a slot free
// on a majority has no error.
func TestUnitScanWhyItFailed(t *testing.T) {
	closed := true
	s := unitScan(3, 1, nil, &closed)
	answer(s, 0, nil, -2)
	answer(s, 1, errors.New("refused"))
	answer(s, 2, errors.New("refused"))
	s.Collect(context.Background())
	assert.Equal(t, errClosed, s.Err)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s = unitScan(3, 1, nil, &closed)
	answer(s, 0, nil, -2)
	answer(s, 1, errors.New("refused"))
	answer(s, 2, errors.New("refused"))
	s.Collect(ctx)
	assert.Equal(t, context.Canceled, s.Err)
	assert.True(t, s.Ended)

	s = unitScan(3, 1, map[int]bool{2: true}, &closed)
	answer(s, 0, nil, -2)
	assert.False(t, s.Decided(&s.Round.Ballot))
	answer(s, 1, nil, -2)
	assert.True(t, s.Decided(&s.Round.Ballot), "free on a majority")
	s.Collect(ctx)
	assert.NoError(t, s.Err)
	assert.Equal(t, []int{0}, s.Free)
}
