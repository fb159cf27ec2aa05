package redlock

import "errors"

// One vote per server process: a server listed under two URLs counts
// once (internal/members' votes.go says how, and why).

// ErrDuplicateNode is wrapped by the error of a node that reaches the same
// server process (the same run_id) as another node of the Client: its
// answers do not count while that lasts. Client.Ping returns an error
// wrapping both it and ErrInvalid, and Client.Status names the other node
// (NodeStatus.DuplicateOf).
var ErrDuplicateNode = errors.New("redlock: one server process behind two nodes")
