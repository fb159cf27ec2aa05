// Package model is a checked model of redlock's protocol: the state of N
// nodes as the Lua scripts in internal/script/ define it (store.go, scripts.go),
// M owners that follow the client's algorithm (owner.go: acquisition with
// rollback and fencing, re-entry, release, the watchdog's renewal and
// repair, the loss timer, restart quarantine), and an adversary that
// delays, reorders, breaks and drops calls, restarts nodes empty, pauses
// owners' processes and lets time pass with the owners' clocks drifting
// (adversary.go). The explorer (explore.go) searches every interleaving of
// a small configuration within a bound, or walks larger ones at random
// from a seed, and checks the properties of props.go after every step; a
// violation comes back as a readable trace. The owners may also be the
// sides of read-write locks (rwowner.go), whose keys and scripts are
// RWStore's (rwstore.go, rwscripts.go).
//
// The transcription of the scripts is held to the scripts themselves by
// the differential tests in the root package (model_test.go,
// model_rw_test.go), which feed both the same random calls on a real
// redis-server. docs/model.md says what is checked, with which bounds, and
// what is left out.
package model
