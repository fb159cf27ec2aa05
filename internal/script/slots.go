package script

import "fmt"

// SlotsCall is slots.lua's call over keys, every slot's lock hash in order
// then the semaphore's intent; with intent not "", a waiter's scan, which
// leaves it with a lease of intentMs (its waiter refreshes it).
func SlotsCall(keys []string, intent string, intentMs int64) Call {
	args := 0
	if intent != "" {
		args = 2
	}
	sha := Slots.Begin(len(keys), args)
	for _, k := range keys {
		sha = append(sha, k)
	}
	if intent != "" {
		sha = append(sha, intent, intentMs)
	}
	return Slots.Made(sha)
}

// PTTLs is slots.lua's reply: one PTTL per slot.
type PTTLs []interface{}

// ParseSlots reads slots.lua's reply for permits slots. It allocates
// nothing but its error.
func ParseSlots(reply interface{}, permits int) (PTTLs, error) {
	vs, err := array(reply)
	if err == nil && len(vs) != permits {
		err = fmt.Errorf("reply of %d values for %d slots", len(vs), permits)
	}
	for _, v := range vs {
		if err != nil {
			break
		}
		_, err = integer(v)
	}
	if err != nil {
		return nil, parsed("slots", err)
	}
	return PTTLs(vs), nil
}

// PTTL returns slot j's PTTL, milliseconds: -2 when it is free on the
// node, -1 when its key has no expiry.
func (p PTTLs) PTTL(j int) int64 {
	n, _ := integer(p[j]) // ParseSlots checked it
	return n
}
