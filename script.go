package redlock

import "github.com/redlock-go/redlock/internal/script"

// call is one script call (internal/script): the scripts and their wire
// format live there.
type call = script.Call
