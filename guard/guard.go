// Package guard checks a lock's fencing token where the work lands: in
// the database or the store that the lock protects.
//
// A lock with an expiry cannot stop a holder that pauses (a GC pause, a
// stopped VM, a slow disk) past its lease: another owner takes the lock and
// writes, and the first wakes up and writes too, over the second's work.
// With redlock.WithFencing every new hold of a lock gets a token
// ((*redlock.Mutex).Token) larger than every earlier hold's. A guard keeps,
// per protected resource, the mark: the highest token that has written it.
// A write whose token is not older than the mark raises the mark to it and
// lands; a write with an older token is refused with an error wrapping
// ErrStaleToken (a *StaleError), atomically with the write, so that no
// write of a stale holder lands after a newer holder's.
//
// Tokens equal to the mark pass: one hold writes as often as it likes (a
// re-entered hold keeps its token).
//
// Three guards:
//
//   - SQL runs a function inside a database/sql transaction that first
//     raises the resource's mark (a row of a small table it creates, or a
//     column of the caller's table), refusing a stale token and rolling
//     back. The row stays locked until the transaction ends, so guarded
//     transactions of one resource run one at a time, in token order as
//     they come: a later token waits for the row, an older one that
//     arrives late is refused. PostgreSQL and SQLite; MySQL is future work
//     (it has no INSERT ... ON CONFLICT ... WHERE; an INSERT IGNORE and a
//     SELECT ... FOR UPDATE would do).
//   - Redis writes keys and hash fields of a Redis used as a data store (a
//     separate Redis from the lock's, the usual case) with one script that
//     compares the token with the mark it keeps in a key beside the data.
//   - Check compares a token with a mark, for stores this package does not
//     cover; its documentation says how to keep the mark.
//
// # Raise the mark before reading
//
// A holder that reads, computes and writes (an increment, a merge) must
// raise the mark before it reads what it will write back, not only when it
// writes: else a stale holder's write that lands between the newer
// holder's read and its write is accepted (the mark is still the stale
// one's) and then overwritten, lost. SQL's transaction raises the mark
// first, so reads inside it are covered; with Redis, call Claim before
// reading.
//
// What it does not do: it protects only writes that go through it, with the
// token of the hold they are made under. A mark that is lost (a table
// dropped, a Redis key deleted, a Redis restarted without persistence)
// lets any token in again. Bad input (an empty resource, a token below 1, a
// nil database) is an error wrapping redlock.ErrInvalid: the guard imports
// the root package for that one sentinel (the root imports nothing of the
// guard), so that errors.Is(err, redlock.ErrInvalid) means bad input
// across the module.
//
// docs/safety.md (Fencing tokens) has the argument; the README's "Fencing,
// end to end" section an example.
package guard

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/redlock-go/redlock"
)

// ErrStaleToken is wrapped by the error of a write refused because its
// token is older than the resource's mark: a newer holder has written (or
// claimed) it since. Nothing of the refused write lands.
var ErrStaleToken = errors.New("redlock: guard: stale fencing token")

// StaleError is the refusal of a stale token: Token is older than Mark, the
// highest token that had written Resource when the write was tried.
// errors.Is(err, ErrStaleToken) is true for it.
type StaleError struct {
	Resource string // the resource (SQL), or the mark's key (Redis); "" for Check
	Token    int64  // the refused token
	Mark     int64  // the resource's mark, above Token
}

// Error says which token was refused, for which resource, and the mark.
func (e *StaleError) Error() string {
	where := ""
	if e.Resource != "" {
		where = " resource " + strconv.Quote(e.Resource) + ":"
	}
	return fmt.Sprintf("redlock: guard:%s token %d is older than the mark %d (a newer holder has written): stale fencing token", where, e.Token, e.Mark)
}

// Is reports whether target is ErrStaleToken.
func (e *StaleError) Is(target error) bool { return target == ErrStaleToken }

// Check returns nil when a write with token may land on a resource whose
// mark (the highest token that has written it) is mark, 0 when none has:
// token >= mark. Otherwise it returns a *StaleError, which wraps
// ErrStaleToken. A token below 1 or a negative mark is an error wrapping
// redlock.ErrInvalid.
//
// Check is for stores this package does not cover, and only compares: the
// caller keeps the mark, and must compare, raise the mark to the token and
// write in one atomic step of the store, or a newer holder's write can land
// between the check and the write. Keep the mark beside the data, in the
// same record or in a record the same atomic operation covers, and make
// the write conditional on it: a conditional put whose condition is
// "mark <= token" (DynamoDB's ConditionExpression, an etcd transaction
// comparing the mark key, a compare-and-swap on a version), or a write
// under a lock of the store itself (a row lock, flock(2) on a file) with
// Check between reading the mark and writing data and mark. Raise the mark
// before reading what the write builds on (see the package documentation).
func Check(mark, token int64) error {
	if err := checkToken(token); err != nil {
		return err
	}
	if mark < 0 {
		return fmt.Errorf("redlock: guard: the mark %d is negative: %w", mark, redlock.ErrInvalid)
	}
	if token < mark {
		return &StaleError{Token: token, Mark: mark}
	}
	return nil
}

// checkToken refuses a token that no fenced hold has: tokens start at 1.
func checkToken(token int64) error {
	if token < 1 {
		return fmt.Errorf("redlock: guard: token %d: a fencing token is at least 1 ((*redlock.Mutex).Token with redlock.WithFencing): %w", token, redlock.ErrInvalid)
	}
	return nil
}

// checkResource refuses an empty resource name (what = "resource" or
// "mark key").
func checkResource(what, name string) error {
	if name == "" {
		return fmt.Errorf("redlock: guard: empty %s: %w", what, redlock.ErrInvalid)
	}
	return nil
}
