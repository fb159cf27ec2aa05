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

func TestScriptReleasePublishesWhenTheKeyGoes(t *testing.T) {
	cl := redlocktest.Start(t, 1)
	conn, err := redis.Dial("tcp", cl.Addrs()[0])
	require.NoError(t, err)
	defer conn.Close()
	sub, err := redis.Dial("tcp", cl.Addrs()[0])
	require.NoError(t, err)
	psc := &redis.PubSubConn{Conn: sub}
	defer psc.Close()
	const lease = int64(60000)
	mutex := Locks{N: 1, Keys: func(int) Keys {
		return Keys{Key: "{m}:lock", Marks: "{m}:rollback", Fence: "{m}:fence", Intent: "{m}:intent", Channel: "{m}:unlock"}
	}}
	readers := Locks{N: 1, Keys: func(int) Keys {
		return Keys{Key: rwTest.Readers, Marks: rwTest.Marks, Channel: "{rw}:unlock"}
	}}
	require.NoError(t, psc.Subscribe("{m}:unlock", "{rw}:unlock"))
	for range 2 {
		_, ok := psc.ReceiveWithTimeout(5 * time.Second).(redis.Subscription)
		require.True(t, ok)
	}
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
