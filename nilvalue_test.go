package redlock_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
)

// Nil and zero values across the units (issue 24, point 4): every exported
// method of each lock type, on a nil pointer, on a zero value and on a value
// made by a nil *Client, returns an error wrapping ErrInvalid, or the zero
// result for a getter, and never panics; Lost returns a closed channel, as a
// Mutex that holds nothing does. The methods are enumerated by reflection, so
// a method added later without a guard fails this test.

// TestNilAndZeroValues calls every exported method of every receiver
// below with zero-ish arguments.
func TestNilAndZeroValues(t *testing.T) {
	var nilClient *redlock.Client
	// made: the receiver was made by a constructor, so that a getter
	// (a method without an error result) may answer what it was given.
	receivers := []struct {
		name string
		recv interface{}
		made bool
	}{
		{"nil Mutex", (*redlock.Mutex)(nil), false},
		{"zero Mutex", new(redlock.Mutex), false},
		{"Mutex of a nil Client", nilClient.NewMutex("a"), true},
		{"MultiMutex of a nil Client", nilClient.NewMultiMutex("a", "b"), true},
		{"nil RWMutex", (*redlock.RWMutex)(nil), false},
		{"zero RWMutex", new(redlock.RWMutex), false},
		{"RWMutex of a nil Client", nilClient.NewRWMutex("a"), true},
		{"nil Semaphore", (*redlock.Semaphore)(nil), false},
		{"zero Semaphore", new(redlock.Semaphore), false},
		{"Semaphore of a nil Client", nilClient.NewSemaphore("a", 2), true},
		{"nil Permit", (*redlock.Permit)(nil), false},
		{"zero Permit", new(redlock.Permit), false},
	}
	for _, r := range receivers {
		v := reflect.ValueOf(r.recv)
		require.Equal(t, reflect.Pointer, v.Kind(), r.name)
		for i := 0; i < v.NumMethod(); i++ {
			method := v.Type().Method(i)
			t.Run(r.name+"/"+method.Name, func(t *testing.T) {
				callZeroish(t, v.Method(i), method.Name, r.made)
			})
		}
	}
}

// TestNilAndZeroValuesCoverEveryType: the types the test above walks
// have the methods it expects, so that a rename cannot leave it walking
// nothing.
func TestNilAndZeroValuesCoverEveryType(t *testing.T) {
	for _, tt := range []struct {
		typ  interface{}
		some string
	}{
		{(*redlock.Mutex)(nil), "Lock"},
		{(*redlock.RWMutex)(nil), "RLock"},
		{(*redlock.Semaphore)(nil), "Acquire"},
		{(*redlock.Permit)(nil), "Release"},
	} {
		_, ok := reflect.TypeOf(tt.typ).MethodByName(tt.some)
		assert.True(t, ok, "%T has no method %s", tt.typ, tt.some)
	}
}

// callZeroish calls fn with context.Background() for a context, a func
// that returns zero values for a func, and zero values otherwise, and
// checks its results: no panic, every error wraps ErrInvalid, a channel
// is closed, anything else is its type's zero value (but a getter of a
// made receiver may answer anything).
func callZeroish(t *testing.T, fn reflect.Value, name string, made bool) {
	t.Helper()
	ctxType := reflect.TypeOf((*context.Context)(nil)).Elem()
	errType := reflect.TypeOf((*error)(nil)).Elem()
	ft := fn.Type()
	args := make([]reflect.Value, ft.NumIn())
	for i := range args {
		in := ft.In(i)
		switch {
		case in == ctxType:
			args[i] = reflect.ValueOf(context.Background())
		case in.Kind() == reflect.Func:
			args[i] = reflect.MakeFunc(in, func([]reflect.Value) []reflect.Value {
				out := make([]reflect.Value, in.NumOut())
				for j := range out {
					out[j] = reflect.Zero(in.Out(j))
				}
				return out
			})
		default:
			args[i] = reflect.Zero(in)
		}
	}
	var out []reflect.Value
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("%s panicked: %v", name, p)
			}
		}()
		out = fn.Call(args)
	}()
	getter := true
	for _, o := range out {
		getter = getter && o.Type() != errType
	}
	for i, o := range out {
		what := fmt.Sprintf("%s: result %d (%s)", name, i, o.Type())
		switch {
		case o.Type() == errType:
			err, _ := o.Interface().(error)
			assert.ErrorIs(t, err, redlock.ErrInvalid, what)
		case o.Kind() == reflect.Chan:
			if assert.False(t, o.IsNil(), "%s is a nil channel", what) {
				_, ok := o.TryRecv()
				assert.False(t, ok, "%s is not closed", what)
			}
		case !getter || !made:
			assert.True(t, o.IsZero(), "%s: got %v, want the zero value", what, o)
		}
	}
}

// TestUnitNilValuesOfTheFamily (issue 27, point 5) walks what
// TestNilAndZeroValues does not: values made by a working Client (one
// dialled to loopback ports where nothing listens: no call below reaches
// a node) with arguments its constructor refuses, a MultiMutex of no
// names, and a nil context given to every method of values made well.
// Each returns an error wrapping ErrInvalid at once, or its zero result,
// and nothing panics.
func TestUnitNilValuesOfTheFamily(t *testing.T) {
	c, err := redlock.Dial([]string{"redis://127.0.0.1:1", "redis://127.0.0.1:2", "redis://127.0.0.1:3"})
	require.NoError(t, err)
	defer c.Close()
	var nilClient *redlock.Client
	bad := []struct {
		name string
		recv interface{}
	}{
		{"MultiMutex of no names", c.NewMultiMutex()},
		{"MultiMutex of no names of a nil Client", nilClient.NewMultiMutex()},
		{"MultiMutex of a name twice", c.NewMultiMutex("a", "a")},
		{"MultiMutex of an empty name", c.NewMultiMutex("a", "")},
		{"Mutex of an empty name", c.NewMutex("")},
		{"RWMutex of an empty name", c.NewRWMutex("")},
		{"RWMutex of a name beginning with }", c.NewRWMutex("}a")},
		{"Semaphore of no permits", c.NewSemaphore("a", 0)},
		{"Semaphore of too many permits", c.NewSemaphore("a", redlock.MaxPermits+1)},
		{"Semaphore of an empty name", c.NewSemaphore("", 1)},
	}
	for _, r := range bad {
		v := reflect.ValueOf(r.recv)
		for i := 0; i < v.NumMethod(); i++ {
			method := v.Type().Method(i)
			t.Run(r.name+"/"+method.Name, func(t *testing.T) {
				callZeroish(t, v.Method(i), method.Name, true)
			})
		}
	}
	good := []struct {
		name string
		recv interface{}
	}{
		{"Mutex", c.NewMutex("a")},
		{"MultiMutex", c.NewMultiMutex("a", "b")},
		{"RWMutex", c.NewRWMutex("a")},
		{"Semaphore", c.NewSemaphore("a", 2)},
	}
	for _, r := range good {
		v := reflect.ValueOf(r.recv)
		for i := 0; i < v.NumMethod(); i++ {
			method := v.Type().Method(i)
			if !takesContext(method.Type) {
				continue
			}
			t.Run(r.name+"/"+method.Name+"(nil ctx)", func(t *testing.T) {
				callWithNilContext(t, v.Method(i), method.Name)
			})
		}
	}
}

// takesContext reports whether the method type ft has a context.Context
// argument.
func takesContext(ft reflect.Type) bool {
	ctxType := reflect.TypeOf((*context.Context)(nil)).Elem()
	for i := 0; i < ft.NumIn(); i++ {
		if ft.In(i) == ctxType {
			return true
		}
	}
	return false
}

// callWithNilContext calls fn with a nil context, a func that returns
// zero values for a func (a non-nil one: the context is what is wrong),
// and zero values otherwise, and checks that it does not panic, that
// every error it returns wraps ErrInvalid, and that it answers without a
// round trip.
func callWithNilContext(t *testing.T, fn reflect.Value, name string) {
	t.Helper()
	errType := reflect.TypeOf((*error)(nil)).Elem()
	ft := fn.Type()
	args := make([]reflect.Value, ft.NumIn())
	for i := range args {
		in := ft.In(i)
		args[i] = reflect.Zero(in) // a nil context.Context among them
		if in.Kind() == reflect.Func {
			args[i] = reflect.MakeFunc(in, func([]reflect.Value) []reflect.Value {
				out := make([]reflect.Value, in.NumOut())
				for j := range out {
					out[j] = reflect.Zero(in.Out(j))
				}
				return out
			})
		}
	}
	begin := time.Now()
	var out []reflect.Value
	require.NotPanics(t, func() { out = fn.Call(args) }, name)
	assert.Less(t, time.Since(begin), 50*time.Millisecond, "%s: an argument error is known without a round trip", name)
	errs := 0
	for _, o := range out {
		if o.Type() == errType {
			errs++
			err, _ := o.Interface().(error)
			assert.ErrorIs(t, err, redlock.ErrInvalid, "%s: its error", name)
		}
	}
	assert.Equal(t, 1, errs, "%s returns one error", name)
}
