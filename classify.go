package redlock

import "github.com/redlock-go/redlock/internal/script"

// How a node's reply to each script votes in a round: the reply is read
// by the script's parser (internal/script), and a reply it cannot read is
// a failed vote.

// classifyAcquire reads acquire.lua's reply (or rw_read.lua's, or
// rw_write.lua's) as a vote.
func classifyAcquire(reply interface{}) vote {
	a, err := script.ParseAcquire(reply)
	return voteOf(a.Yes, err)
}

// classifyRelease reads release.lua's reply as a vote: yes where the
// owner held the lock.
func classifyRelease(reply interface{}) vote {
	held, err := script.ParseRelease(reply)
	return voteOf(held == script.ReleasedHeld, err)
}

// classifyReleased reads release.lua's reply as a vote for a release that
// may have been made before: every answer is yes, nothing of the hold is
// left there.
func classifyReleased(reply interface{}) vote {
	_, err := script.ParseRelease(reply)
	return voteOf(true, err)
}

// classifyForce reads force.lua's reply as a vote: yes where a hold was
// deleted.
func classifyForce(reply interface{}) vote {
	deleted, err := script.ParseForce(reply)
	return voteOf(deleted, err)
}

// classifyLeases reads leases.lua's reply as a vote: every answer is yes
// (the node stored the lease).
func classifyLeases(reply interface{}) vote {
	_, err := script.ParseLeases(reply)
	return voteOf(true, err)
}

// voteOf is the vote of a reply that a parser read: failed on err, else
// yes or no.
func voteOf(yes bool, err error) vote {
	switch {
	case err != nil:
		return voteFailed
	case yes:
		return voteYes
	}
	return voteNo
}
