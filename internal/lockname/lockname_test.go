package lockname

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestUnitQuote(t *testing.T) {
	assert.Equal(t, `"a"`, Quote("a"))
	assert.Equal(t, "a", Log("a"))
	long := strings.Repeat("x", 63) + "é" + strings.Repeat("y", 100) // é straddles byte 64
	assert.Equal(t, `"`+strings.Repeat("x", 63)+`"… (165 bytes)`, Quote(long), "cut at a rune boundary")
	assert.Equal(t, strings.Repeat("x", 63)+"… (165 bytes)", Log(long))
}

func TestUnitCheck(t *testing.T) {
	assert.NoError(t, Check("lock", "a", 10))
	assert.EqualError(t, Check("lock", "", 10), "empty lock name")
	assert.EqualError(t, Check("semaphore", strings.Repeat("a", 11), 10), `semaphore name "aaaaaaaaaaa" is 11 bytes; the limit is 10 (MaxNameLength)`)
	assert.ErrorContains(t, Check("lock", "}a", 10), `lock name "}a" begins with '}'`)
}
