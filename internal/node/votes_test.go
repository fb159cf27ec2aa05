package node

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// One vote per server process (votes.go): nodes that reach one process,
// under different addresses, are grouped by its run_id, and only one of
// them votes.

// identifiedPeers returns native peers at addresses 127.0.0.1:7000,
// 127.0.0.1:7001... whose process has the run_id of ids[i], read at
// learned[i] ("" for a node not identified yet); they are never started.
func identifiedPeers(t *testing.T, ids []string, learned []time.Time) []*Peer {
	t.Helper()
	peers := make([]*Peer, len(ids))
	for i, id := range ids {
		peers[i] = New(Config{Name: fmt.Sprint(i), Addr: fmt.Sprintf("127.0.0.1:%d", 7000+i), Conns: 1})
		if id != "" {
			_, _, err := peers[i].native.process.observe("run_id:"+id+"\r\nuptime_in_seconds:60\r\n", learned[i])
			require.NoError(t, err)
		}
	}
	return peers
}

func TestUnitDuplicates(t *testing.T) {
	t0 := time.Now()
	at := func(ms ...int) []time.Time {
		ts := make([]time.Time, len(ms))
		for i, m := range ms {
			ts[i] = t0.Add(time.Duration(m) * time.Millisecond)
		}
		return ts
	}
	dup := func(of int, id string) *Duplicate {
		return &Duplicate{Of: of, Addr: fmt.Sprintf("127.0.0.1:%d", 7000+of), RunID: id}
	}
	tests := []struct {
		name    string
		ids     []string
		learned []time.Time
		want    []*Duplicate
	}{
		{"three processes", []string{"a", "b", "c"}, at(0, 0, 0), []*Duplicate{nil, nil, nil}},
		{"an alias read later", []string{"a", "a", "c"}, at(0, 5, 0), []*Duplicate{nil, dup(0, "a"), nil}},
		{"an alias read earlier", []string{"a", "a", "c"}, at(5, 0, 0), []*Duplicate{dup(1, "a"), nil, nil}},
		{"read at once: the first node votes", []string{"c", "a", "a"}, at(0, 3, 3), []*Duplicate{nil, nil, dup(1, "a")}},
		{"three names of one process", []string{"a", "a", "a"}, at(2, 1, 3), []*Duplicate{dup(1, "a"), nil, dup(1, "a")}},
		{"not identified yet", []string{"a", "", "a"}, at(0, 0, 1), []*Duplicate{nil, nil, dup(0, "a")}},
		{"two pairs", []string{"a", "b", "a", "b", "e"}, at(0, 0, 1, 1, 0), []*Duplicate{nil, nil, dup(0, "a"), dup(1, "b"), nil}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Duplicates(identifiedPeers(t, tt.ids, tt.learned))
			assert.Equal(t, tt.want, got)
			votes := 0
			for _, d := range got {
				if d == nil {
					votes++
				}
			}
			distinct := map[string]bool{}
			for _, id := range tt.ids {
				distinct[id] = true
			}
			if distinct[""] { // a node not identified yet votes
				delete(distinct, "")
				votes--
			}
			assert.Equal(t, len(distinct), votes, "one vote per process")
		})
	}
}
