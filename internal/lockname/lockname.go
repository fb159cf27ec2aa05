// Package lockname holds what every kind of lock does with its name (a
// Mutex, each name of a MultiMutex, an RWMutex, a Semaphore): its checks,
// and how errors and logs show it. It imports only the standard library;
// the root package wraps Check's plain errors in ErrInvalid.
package lockname

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Check returns an error for the name of a lock (what says which kind:
// "lock", "semaphore") that is empty, longer than most bytes, or begins
// with '}'; nil when it is usable.
func Check(what, name string, most int) error {
	switch {
	case name == "":
		return fmt.Errorf("empty %s name", what)
	case len(name) > most:
		return fmt.Errorf("%s name %s is %d bytes; the limit is %d (MaxNameLength)", what, Quote(name), len(name), most)
	case name[0] == '}':
		return fmt.Errorf("%s name %s begins with '}': the name is its keys' hash tag ({NAME}), and Redis Cluster ignores a tag that is empty", what, Quote(name))
	}
	return nil
}

// Quote quotes a lock name for an error, cut to a short prefix when it is
// long: an error never carries a whole 64 KiB name.
func Quote(name string) string {
	prefix, rest := cut(name)
	return strconv.Quote(prefix) + rest
}

// Log is a lock name for a log record, cut as Quote cuts it.
func Log(name string) string {
	prefix, rest := cut(name)
	return prefix + rest
}

// cut splits a long name into a short prefix, cut at a rune boundary, and
// what stands for the rest: "… (N bytes)". A short name is whole.
func cut(name string) (prefix, rest string) {
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
