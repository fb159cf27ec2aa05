package redlock

import (
	"fmt"

	"github.com/redlock-go/redlock/internal/lockname"
)

// A lock's name, as every kind of lock takes it: internal/lockname checks
// it and shows it in errors (lockname.Quote) and logs (lockname.Log).

// MaxNameLength is the longest lock name, in bytes: 64 KiB. A longer name
// makes every call of its Mutex return an error wrapping ErrInvalid at once,
// without a round trip. Each node keeps four keys per lock, each carrying
// the name, and every call sends them all.
const MaxNameLength = 64 << 10

// checkName returns an error wrapping ErrInvalid for the name of a lock
// (what says which kind: "lock", "semaphore") that is empty, too long, or
// begins with '}'.
func checkName(what, name string) error {
	if err := lockname.Check(what, name, MaxNameLength); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}
