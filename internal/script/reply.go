package script

import (
	"fmt"
	"strconv"
)

// The replies of the scripts, as every transport delivers them: int64 for
// an integer, []byte or string for a bulk string, nil for a nil bulk
// string, an error value for an error reply, and []interface{} of those
// for an array. Each script's parser reads its reply's shape from these,
// and returns an error, never panics, on any other: a wrong type, a wrong
// length, a value out of the script's range.

// integer reads an integer reply; a bulk string of decimal digits is one
// too (a Transport may hand integers as text).
func integer(v interface{}) (int64, error) {
	switch v := v.(type) {
	case int64:
		return v, nil
	case []byte:
		return strconv.ParseInt(string(v), 10, 64)
	case string:
		return strconv.ParseInt(v, 10, 64)
	case error:
		return 0, v
	}
	return 0, unexpected(v)
}

// text reads a bulk string reply.
func text(v interface{}) (string, error) {
	switch v := v.(type) {
	case []byte:
		return string(v), nil
	case string:
		return v, nil
	case error:
		return "", v
	}
	return "", unexpected(v)
}

// array reads an array reply.
func array(v interface{}) ([]interface{}, error) {
	switch v := v.(type) {
	case []interface{}:
		return v, nil
	case error:
		return nil, v
	}
	return nil, unexpected(v)
}

// unexpected is the error of a reply of the wrong type.
func unexpected(v interface{}) error {
	if v == nil {
		return fmt.Errorf("unexpected nil reply")
	}
	return fmt.Errorf("unexpected reply of type %T", v)
}

// oneOf reads an integer reply that is one of want.
func oneOf(v interface{}, want ...int64) (int64, error) {
	n, err := integer(v)
	if err != nil {
		return 0, err
	}
	for _, w := range want {
		if n == w {
			return n, nil
		}
	}
	return 0, fmt.Errorf("unexpected reply %d", n)
}

// parsed names the script whose reply err is about.
func parsed(script string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s.lua: %w", script, err)
}
