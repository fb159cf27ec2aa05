package redlock

import (
	"strconv"
	"unicode/utf8"
)

// A lock's name, as every kind of lock takes it (a Mutex, each name of a
// MultiMutex, an RWMutex, a Semaphore): its checks, and how errors and
// logs show it.

// MaxNameLength is the longest lock name, in bytes: 64 KiB. A longer name
// makes every call of its Mutex return an error wrapping ErrInvalid at once,
// without a round trip. Each node keeps four keys per lock, each carrying
// the name, and every call sends them all.
const MaxNameLength = 64 << 10

// checkName returns an error wrapping ErrInvalid for the name of a lock
// (what says which kind: "lock", "semaphore") that is empty, too long, or
// begins with '}'.
func checkName(what, name string) error {
	switch {
	case name == "":
		return invalid("empty %s name", what)
	case len(name) > MaxNameLength:
		return invalid("%s name %s is %d bytes; the limit is %d (MaxNameLength)", what, quoteName(name), len(name), MaxNameLength)
	case name[0] == '}':
		return invalid("%s name %s begins with '}': the name is its keys' hash tag ({NAME}), and Redis Cluster ignores a tag that is empty", what, quoteName(name))
	}
	return nil
}

// quoteName quotes a lock name for an error, cut to a short prefix when it
// is long: an error never carries a whole 64 KiB name.
func quoteName(name string) string {
	prefix, rest := cutName(name)
	return strconv.Quote(prefix) + rest
}

// logName is a lock name for a log record, cut as quoteName cuts it.
func logName(name string) string {
	prefix, rest := cutName(name)
	return prefix + rest
}

// cutName splits a long name into a short prefix, cut at a rune boundary,
// and what stands for the rest: "… (N bytes)". A short name is whole.
func cutName(name string) (prefix, rest string) {
	const most = 64
	if len(name) <= most {
		return name, ""
	}
	cut := most
	for cut > 0 && !utf8.RuneStart(name[cut]) {
		cut--
	}
	return name[:cut], "… (" + strconv.Itoa(len(name)) + " bytes)"
}
