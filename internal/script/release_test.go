package script

import (
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/redlock-go/redlock/redlocktest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// release.lua on a real redis-server: the release that makes a lock's key
// go publishes "<owner>/<sequence>" on the lock's channel, which is what
// wakes its waiters; a release that leaves the key (an inner Unlock,
// another reader still in) or finds nothing publishes nothing.

// published returns the messages published on the channels psc subscribed
// to since the last call: PING on the subscriber's connection is answered
// after every message published before it was sent.
func published(t *testing.T, psc *redis.PubSubConn) []string {
	t.Helper()
	require.NoError(t, psc.Ping("barrier"))
	var msgs []string
	for {
		switch v := psc.ReceiveWithTimeout(5 * time.Second).(type) {
		case redis.Message:
			msgs = append(msgs, string(v.Data))
		case redis.Pong:
			return msgs
		case error:
			require.NoError(t, v)
		}
	}
}

// subscribed starts one redis-server and returns a connection to it and a
// pub/sub connection subscribed to channels (confirmed), both closed when
// the test ends.
func subscribed(t *testing.T, channels ...string) (redis.Conn, *redis.PubSubConn) {
	t.Helper()
	cl := redlocktest.Start(t, 1)
	conn, err := redis.Dial("tcp", cl.Addrs()[0])
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	sub, err := redis.Dial("tcp", cl.Addrs()[0])
	require.NoError(t, err)
	psc := &redis.PubSubConn{Conn: sub}
	t.Cleanup(func() { psc.Close() })
	args := make([]interface{}, len(channels))
	for i, ch := range channels {
		args[i] = ch
	}
	require.NoError(t, psc.Subscribe(args...))
	for range channels {
		_, ok := psc.ReceiveWithTimeout(5 * time.Second).(redis.Subscription)
		require.True(t, ok)
	}
	return conn, psc
}

func TestScriptReleasePublishesWhenTheKeyGoes(t *testing.T) {
	conn, psc := subscribed(t, "{m}:unlock", "{rw}:unlock")
	const lease = int64(60000)
	mutex := Locks{N: 1, Keys: func(int) Keys {
		return Keys{Key: "{m}:lock", Marks: "{m}:rollback", Fence: "{m}:fence", Intent: "{m}:intent", Channel: "{m}:unlock"}
	}}
	readers := Locks{N: 1, Keys: func(int) Keys {
		return Keys{Key: rwTest.Readers, Marks: rwTest.Marks, Channel: "{rw}:unlock"}
	}}
	release := func(l Locks, shared bool, field string, target int, seq int64) Released {
		r, err := ParseRelease(eval(t, conn, ReleaseCall(l, shared, field, target, seq, false, lease)))
		require.NoError(t, err)
		return r
	}

	// A Mutex held twice by o: the inner release keeps the key, the last
	// one deletes it and publishes once.
	for seq, count := range []int{1, 2} {
		a, err := ParseAcquire(eval(t, conn, AcquireCall(mutex, Acquisition{Field: "o", Count: count, LeaseMs: lease, Seq: int64(seq + 1)})))
		require.NoError(t, err)
		require.True(t, a.Yes)
	}
	assert.Equal(t, ReleasedHeld, release(mutex, false, "o", 1, 3))
	assert.Empty(t, published(t, psc), "an inner release")
	assert.Equal(t, ReleasedHeld, release(mutex, false, "o", 0, 4))
	assert.Equal(t, []string{"o/4"}, published(t, psc), "the last release")
	assert.Equal(t, ReleasedNone, release(mutex, false, "o", 0, 5))
	assert.Empty(t, published(t, psc), "a release of an absent key")

	// Readers a and b: the readers' hash goes, and its channel hears of
	// it, when the last of them leaves.
	for seq, field := range []string{"a", "b"} {
		r, err := ParseAcquire(eval(t, conn, RWReadCall(rwTest, rwOwn+field, field, 1, lease, int64(seq+1), "w:"+field, 20)))
		require.NoError(t, err)
		require.True(t, r.Yes)
	}
	assert.Equal(t, ReleasedHeld, release(readers, true, "b", 0, 3))
	assert.Empty(t, published(t, psc), "a reader left, another is in")
	assert.Equal(t, ReleasedHeld, release(readers, true, "a", 0, 4))
	assert.Equal(t, []string{"a/4"}, published(t, psc), "the last reader left")
}

// TestScriptReleaseCountsAHoldOfEveryLock: release.lua over a
// MultiMutex's locks {a, b} answers held only on a node where the owner
// holds both: with a gone (forced away, evicted) it answers none, or
// other where another owner took a; either way it updates or deletes b,
// and publishes on b's channel when b goes. A later write of the owner on
// a lock counts as held there (a late release), and is left alone.
func TestScriptReleaseCountsAHoldOfEveryLock(t *testing.T) {
	conn, psc := subscribed(t, "{m}:a:unlock", "{m}:b:unlock")
	const lease = int64(60000)
	names := []string{"a", "b"}
	multi := Locks{N: 2, Keys: func(i int) Keys {
		n := "{m}:" + names[i]
		return Keys{Key: n + ":lock", Marks: "{m}:rollback", Fence: n + ":fence", Intent: n + ":intent", Channel: n + ":unlock"}
	}}
	lock := func(field string, count int, seq int64) {
		t.Helper()
		a, err := ParseAcquire(eval(t, conn, AcquireCall(multi, Acquisition{Field: field, Count: count, LeaseMs: lease, Seq: seq})))
		require.NoError(t, err)
		require.True(t, a.Yes)
	}
	release := func(target int, seq int64) Released {
		t.Helper()
		r, err := ParseRelease(eval(t, conn, ReleaseCall(multi, false, "o", target, seq, true, lease)))
		require.NoError(t, err)
		return r
	}
	count := func(name string) string {
		t.Helper()
		v, err := redis.String(conn.Do("HGET", "{m}:"+name+":lock", "o"))
		if err == redis.ErrNil {
			return ""
		}
		require.NoError(t, err)
		return v
	}
	del := func(name string) {
		t.Helper()
		_, err := conn.Do("DEL", "{m}:"+name+":lock")
		require.NoError(t, err)
	}

	// Both held: an inner release, then the last.
	lock("o", 1, 1)
	lock("o", 2, 2)
	assert.Equal(t, ReleasedHeld, release(1, 3))
	assert.Equal(t, "1", count("a"))
	assert.Equal(t, ReleasedHeld, release(0, 4))
	assert.ElementsMatch(t, []string{"o/4", "o/4"}, published(t, psc))
	assert.Equal(t, ReleasedNone, release(0, 4), "a retried release")

	// a gone: the inner release writes b's count and answers none; so
	// does the last, which deletes b and publishes on b's channel.
	lock("o", 1, 5)
	lock("o", 2, 6)
	del("a")
	assert.Equal(t, ReleasedNone, release(1, 7))
	assert.Equal(t, "", count("a"), "a release never re-creates a lock")
	assert.Equal(t, "1", count("b"))
	assert.Equal(t, ReleasedNone, release(0, 8))
	assert.Equal(t, "", count("b"))
	assert.Equal(t, []string{"o/8"}, published(t, psc))

	// a taken by another owner: other; b deleted all the same.
	lock("o", 1, 9)
	del("a")
	a, err := ParseAcquire(eval(t, conn, AcquireCall(Locks{N: 1, Keys: func(int) Keys { return multi.Keys(0) }}, Acquisition{Field: "x", Count: 1, LeaseMs: lease, Seq: 1})))
	require.NoError(t, err)
	require.True(t, a.Yes)
	assert.Equal(t, ReleasedOther, release(0, 10))
	assert.Equal(t, "", count("b"))
	assert.Equal(t, "1", func() string {
		v, err := redis.String(conn.Do("HGET", "{m}:a:lock", "x"))
		require.NoError(t, err)
		return v
	}(), "another owner's lock is left alone")
	del("a")
	published(t, psc)

	// A late release: the owner locked again since (sequence 12 on both):
	// held, and nothing changes. With a gone, not held.
	lock("o", 1, 12)
	assert.Equal(t, ReleasedHeld, release(0, 11))
	assert.Equal(t, "1", count("a"))
	assert.Equal(t, "1", count("b"))
	del("a")
	assert.Equal(t, ReleasedNone, release(0, 11))
	assert.Equal(t, "1", count("b"), "a late release leaves the newer hold alone")
	assert.Empty(t, published(t, psc))
}

// rw_write.lua tells its take as acquire.lua does: an attempt that tells
// and creates the writer's lock hash publishes "+<lease>/<subscribers>/
// <owner>/<sequence>" when another client is subscribed, and its reply
// carries the subscribers; a re-entry, an attempt that does not tell, and
// a refused one publish nothing.
func TestScriptRWWriteTellsItsTake(t *testing.T) {
	keys := rwTest
	keys.Channel = "{rw}:unlock"
	conn, psc := subscribed(t, keys.Channel)
	const lease = int64(60000)
	write := func(field string, count int, seq, fence int64, tell bool) AcquireReply {
		t.Helper()
		r, err := ParseAcquire(eval(t, conn, RWWriteCall(keys, field, count, lease, seq, fence, 20, rwOwn, "r:"+field, 20, tell, false)))
		require.NoError(t, err)
		return r
	}

	r := write("w1", 1, 1, 0, true)
	assert.Equal(t, AcquireReply{Yes: true, Subs: 1}, r, "one client subscribed")
	assert.Equal(t, []string{"+60000/1/w1/1"}, published(t, psc))
	r = write("w1", 2, 2, 0, true)
	assert.Equal(t, AcquireReply{Yes: true, Subs: -1}, r, "a re-entry creates nothing")
	r = write("w2", 1, 1, 0, true)
	assert.False(t, r.Yes, "another writer holds it")
	assert.Empty(t, published(t, psc), "neither a re-entry nor a refused attempt tells a take")

	_, err := conn.Do("DEL", keys.Writer)
	require.NoError(t, err)
	r = write("w2", 1, 2, 9000, false)
	assert.True(t, r.Yes)
	assert.Equal(t, int64(-1), r.Subs)
	assert.Empty(t, published(t, psc), "an attempt that does not tell publishes nothing")
	_, err = conn.Do("DEL", keys.Writer)
	require.NoError(t, err)
	r = write("w3", 1, 1, 9000, true)
	assert.True(t, r.Yes)
	assert.Positive(t, r.N, "fenced: the counter")
	assert.Equal(t, int64(1), r.Subs)
	assert.Equal(t, []string{"+60000/1/w3/1"}, published(t, psc))
}
