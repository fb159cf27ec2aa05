package script

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every parser reads the shapes its script returns, as any transport
// delivers them, and returns an error, never panics, on anything else.

// errReply is an error reply as a transport hands it: a value of a type
// that implements error.
type errReply string

func (e errReply) Error() string { return string(e) }

// i64s is an array reply of integers.
func i64s(ns ...int64) []interface{} {
	vs := make([]interface{}, len(ns))
	for i, n := range ns {
		vs[i] = n
	}
	return vs
}

// malformed are replies no script returns; each test adds its own.
var malformed = []interface{}{nil, "OK", 3.5, true, errReply("ERR boom"), []string{"x"}}

// parse calls f on reply and reports its error, failing the test if it
// panics.
func parse(t *testing.T, reply interface{}, f func(interface{}) error) error {
	t.Helper()
	var err error
	require.NotPanics(t, func() { err = f(reply) }, "reply %#v", reply)
	return err
}

func TestParseAcquire(t *testing.T) {
	good := []struct {
		name  string
		reply interface{}
		want  AcquireReply
	}{
		{"held", i64s(1, 0), AcquireReply{Yes: true, N: 0, Subs: -1}},
		{"held, in one integer", int64(1), AcquireReply{Yes: true, N: 0, Subs: -1}},
		{"held, in one bulk string", []byte("1"), AcquireReply{Yes: true, N: 0, Subs: -1}},
		{"held, fenced", i64s(1, 42), AcquireReply{Yes: true, N: 42, Subs: -1}},
		{"held, told", i64s(1, 0, 3), AcquireReply{Yes: true, N: 0, Subs: 3}},
		{"taken", i64s(0, 1500), AcquireReply{N: 1500, Subs: -1}},
		{"taken, no expiry", i64s(0, -1), AcquireReply{N: -1, Subs: -1}},
		{"rolled back", i64s(0, 0), AcquireReply{Subs: -1}},
		{"bulk strings", []interface{}{[]byte("1"), "7"}, AcquireReply{Yes: true, N: 7, Subs: -1}},
	}
	for _, tt := range good {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseAcquire(tt.reply)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
	bad := append([]interface{}{
		int64(0), int64(2), "-1", i64s(), i64s(1), i64s(1, 0, 0, 0), i64s(2, 0),
		[]interface{}{int64(1), nil}, []interface{}{int64(1), int64(0), []byte("x")},
		[]interface{}{[]byte("x"), int64(0)}, []interface{}{errReply("ERR"), int64(0)},
	}, malformed...)
	for _, reply := range bad {
		err := parse(t, reply, func(r interface{}) error { _, err := ParseAcquire(r); return err })
		assert.Error(t, err, "reply %#v", reply)
	}
}

func TestParseIntegerReplies(t *testing.T) {
	// Each script that answers one integer, with the values it answers
	// and, where its range is closed, one it does not.
	tests := []struct {
		name  string
		parse func(interface{}) (int64, error)
		good  []int64
		bad   []int64
	}{
		{"rollback", func(r interface{}) (int64, error) { ok, err := ParseRollback(r); return b2i(ok), err }, []int64{0, 1}, []int64{2, -1}},
		{"release", func(r interface{}) (int64, error) { n, err := ParseRelease(r); return int64(n), err }, []int64{-1, 0, 1}, []int64{2, -2}},
		{"force", func(r interface{}) (int64, error) { ok, err := ParseForce(r); return b2i(ok), err }, []int64{0, 1}, []int64{2}},
		{"rw_withdraw", func(r interface{}) (int64, error) { ok, err := ParseRWWithdraw(r); return b2i(ok), err }, []int64{0, 1}, []int64{2}},
		{"ping", func(r interface{}) (int64, error) { return 1, ParsePing(r) }, []int64{1}, []int64{0}},
		{"fence", ParseFence, []int64{0, 1 << 50}, nil},
		{"leases", ParseLeases, []int64{0, 30000}, nil},
		{"withdraw", ParseWithdraw, []int64{0, 3}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, n := range tt.good {
				got, err := tt.parse(n)
				require.NoError(t, err)
				assert.Equal(t, n, got)
			}
			got, err := tt.parse([]byte("1"))
			require.NoError(t, err, "a bulk string of digits is an integer")
			assert.Equal(t, int64(1), got)
			for _, n := range tt.bad {
				_, err := tt.parse(n)
				assert.Error(t, err, "%d is outside the script's answers", n)
			}
			for _, reply := range append([]interface{}{[]byte("x"), i64s(1)}, malformed...) {
				assert.Error(t, parse(t, reply, func(r interface{}) error { _, err := tt.parse(r); return err }), "reply %#v", reply)
			}
		})
	}
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func TestParseErrorReplyKeepsIt(t *testing.T) {
	_, err := ParseRelease(errReply("NOSCRIPT No matching script"))
	var er errReply
	require.True(t, errors.As(err, &er), "the server's error stays visible: %v", err)
	assert.Contains(t, err.Error(), "release.lua")
}

func TestParseHolders(t *testing.T) {
	got, err := ParseHolders([]interface{}{[]byte("c:1"), []byte("7"), "c:2", "0", []byte("c:1"), int64(9)})
	require.NoError(t, err)
	assert.Equal(t, []Holder{{"c:1", 7}, {"c:2", 0}, {"c:1", 9}}, got)
	got, err = ParseHolders([]interface{}{})
	require.NoError(t, err)
	assert.Empty(t, got)
	bad := append([]interface{}{
		int64(1), []interface{}{"c:1"}, []interface{}{"c:1", "x"}, []interface{}{int64(1), "2"}, []interface{}{"c:1", nil},
	}, malformed...)
	for _, reply := range bad {
		assert.Error(t, parse(t, reply, func(r interface{}) error { _, err := ParseHolders(r); return err }), "reply %#v", reply)
	}
}

func TestParseInspect(t *testing.T) {
	got, err := ParseInspect(i64s(1, 2, 900))
	require.NoError(t, err)
	assert.Equal(t, State{Exists: true, Count: 2, PTTL: 900}, got)
	got, err = ParseInspect(i64s(0, 0, -2))
	require.NoError(t, err)
	assert.Equal(t, State{PTTL: -2}, got)
	bad := append([]interface{}{
		int64(1), i64s(1, 2), i64s(1, 2, 3, 4), i64s(2, 0, 0), []interface{}{int64(1), "x", int64(0)}, []interface{}{int64(1), int64(1), nil},
	}, malformed...)
	for _, reply := range bad {
		assert.Error(t, parse(t, reply, func(r interface{}) error { _, err := ParseInspect(r); return err }), "reply %#v", reply)
	}
}

func TestParseView(t *testing.T) {
	got, err := ParseView([]interface{}{int64(1200), []byte("c:1"), int64(2), "c:2", int64(-1)})
	require.NoError(t, err)
	assert.Equal(t, LockView{PTTL: 1200, Holders: map[string]int64{"c:1": 2, "c:2": -1}}, got)
	got, err = ParseView(i64s(-2))
	require.NoError(t, err)
	assert.Equal(t, LockView{PTTL: -2, Holders: map[string]int64{}}, got)
	bad := append([]interface{}{
		int64(1), i64s(), i64s(1, 2), []interface{}{"x"}, []interface{}{int64(1), int64(5), int64(1)}, []interface{}{int64(1), "c:1", "x"},
	}, malformed...)
	for _, reply := range bad {
		assert.Error(t, parse(t, reply, func(r interface{}) error { _, err := ParseView(r); return err }), "reply %#v", reply)
	}
}

func TestParseSurvey(t *testing.T) {
	free := i64s(-2)
	reply := []interface{}{
		[]interface{}{int64(1200), "c:1", int64(2)}, []interface{}{int64(900), []byte("5/c:9")},
		free, []interface{}{int64(800), "c:3", int64(1), "c:4", int64(1)}, []interface{}{int64(700), "c:5"}, []interface{}{int64(-1), "1"},
		free, free, []interface{}{int64(600), "c:6", int64(1)},
	}
	got, err := ParseSurvey(reply, 2)
	require.NoError(t, err)
	none := map[string]int64{}
	assert.Equal(t, NameView{
		Lock: LockView{PTTL: 1200, Holders: map[string]int64{"c:1": 2}}, Intent: Text{PTTL: 900, Value: "5/c:9"},
		Writer: LockView{PTTL: -2, Holders: none}, Readers: LockView{PTTL: 800, Holders: map[string]int64{"c:3": 1, "c:4": 1}},
		WriterIntent: Text{PTTL: 700, Value: "c:5"}, ReadersIntent: Text{PTTL: -1, Value: "1"}, SemaphoreIntent: Text{PTTL: -2},
		Slots: []LockView{{PTTL: -2, Holders: none}, {PTTL: 600, Holders: map[string]int64{"c:6": 1}}},
	}, got)
	_, err = ParseSurvey(reply, 1)
	assert.Error(t, err, "one slot asked, two answered")
	_, err = ParseSurvey([]interface{}{free, free, free, free, free, free, free}, 0)
	assert.NoError(t, err, "every key absent")
	bad := append([]interface{}{
		[]interface{}{free, i64s(5), free, free, free, free, free},
		[]interface{}{free, i64s(-1), free, free, free, free, free},
		[]interface{}{free, []interface{}{int64(5), "a", "b"}, free, free, free, free, free},
		[]interface{}{"x", free, free, free, free, free, free},
	}, malformed...)
	for _, r := range bad {
		assert.Error(t, parse(t, r, func(r interface{}) error { _, err := ParseSurvey(r, 0); return err }), "reply %#v", r)
	}
}

func TestParseAnswers(t *testing.T) {
	failed := struct{ err error }{errors.New("shard down")} // a part of a split call that failed
	got, err := ParseAnswers([]interface{}{int64(1), int64(0), int64(-1), failed, int64(7), []byte("1")}, 6)
	require.NoError(t, err)
	want := []struct {
		v  int64
		ok bool
	}{{1, true}, {0, true}, {-1, true}, {0, false}, {7, false}, {0, false}}
	for e, w := range want {
		v, ok := got.Answer(e)
		assert.Equal(t, w.ok, ok, "entry %d", e)
		if w.ok {
			assert.Equal(t, w.v, v, "entry %d", e)
		}
	}
	assert.Equal(t, failed, got[3], "an entry that is no answer is left as it came")
	bad := append([]interface{}{int64(1), i64s(1), i64s(1, 1, 1)}, malformed...)
	for _, reply := range bad {
		assert.Error(t, parse(t, reply, func(r interface{}) error { _, err := ParseAnswers(r, 2); return err }), "reply %#v", reply)
	}
}

func TestParseSlots(t *testing.T) {
	got, err := ParseSlots([]interface{}{int64(-2), int64(500), int64(-1), []byte("-2")}, 4)
	require.NoError(t, err)
	for j, want := range []int64{-2, 500, -1, -2} {
		assert.Equal(t, want, got.PTTL(j), "slot %d", j)
	}
	bad := append([]interface{}{int64(1), i64s(1, 2), i64s(1, 2, 3, 4, 5), []interface{}{int64(1), nil, int64(1), int64(1)}, []interface{}{int64(1), "x", int64(1), int64(1)}}, malformed...)
	for _, reply := range bad {
		assert.Error(t, parse(t, reply, func(r interface{}) error { _, err := ParseSlots(r, 4); return err }), "reply %#v", reply)
	}
}

// The parsers on the hot path allocate nothing for a well-formed reply.
func TestParseAllocatesNothing(t *testing.T) {
	var acquire, slots, answers, one interface{} = i64s(1, 5, 2), i64s(-2, 100), i64s(1, 0), int64(1) // replies come boxed
	n := testing.AllocsPerRun(100, func() {
		_, _ = ParseAcquire(acquire)
		_, _ = ParseAcquire(one)
		_, _ = ParseRelease(one)
		_, _ = ParseSlots(slots, 2)
		_, _ = ParseAnswers(answers, 2)
	})
	assert.Zero(t, n)
}
