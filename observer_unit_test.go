package redlock

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

// What an Observer is told, as pure functions: how an acquisition's result
// becomes its Outcome, and the names of the events' enumerations (the redlockotel
// module's attribute values).

func TestUnitAcquireOutcome(t *testing.T) {
	live := context.Background()
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	noQuorum := &quorumError{op: "lock", n: 3, need: 2}
	for _, tc := range []struct {
		name string
		ctx  context.Context
		ok   bool
		err  error
		want Outcome
	}{
		{"held", live, true, nil, OutcomeAcquired},
		{"held by another", live, false, nil, OutcomeBusy},
		{"no quorum", live, false, noQuorum, OutcomeNoQuorum},
		{"ctx ended", ended, false, fmt.Errorf("redlock: lock \"x\": %w; last attempt: %w", context.Canceled, noQuorum), OutcomeCanceled},
		{"no quorum, ctx ended after", ended, false, noQuorum, OutcomeNoQuorum},
		{"closed", live, false, ErrClosed, OutcomeFailed},
		{"too late", live, false, errors.New("redlock: lock \"x\": acquired too late"), OutcomeFailed},
	} {
		assert.Equal(t, tc.want, acquireOutcome(tc.ctx, tc.ok, tc.err), tc.name)
	}
}

func TestUnitEventNames(t *testing.T) {
	assert.Equal(t, []string{"Lock", "TryLock", "Unlock", "ForceUnlock", "Op(?)"},
		[]string{OpLock.String(), OpTryLock.String(), OpUnlock.String(), OpForceUnlock.String(), Op(0).String()})
	assert.Equal(t, []string{"acquired", "busy", "no_quorum", "canceled", "failed", "unknown"},
		[]string{OutcomeAcquired.String(), OutcomeBusy.String(), OutcomeNoQuorum.String(), OutcomeCanceled.String(), OutcomeFailed.String(), Outcome(0).String()})
	assert.Equal(t, []string{"released", "lowered", "not_held", "no_quorum", "unknown"},
		[]string{UnlockReleased.String(), UnlockLowered.String(), UnlockNotHeld.String(), UnlockNoQuorum.String(), UnlockOutcome(0).String()})
	assert.Equal(t, []string{"yes", "no", "failed", "quarantined", "unheard", "unknown"},
		[]string{AnswerYes.String(), AnswerNo.String(), AnswerFailed.String(), AnswerQuarantined.String(), AnswerUnheard.String(), NodeAnswer(0).String()})
	assert.Equal(t, []string{"up", "down", "quarantined", "back", "unknown"},
		[]string{NodeUp.String(), NodeDown.String(), NodeQuarantined.String(), NodeBack.String(), NodeState(0).String()})
	reasons := []HoldEndReason{EndReleased, EndLeaseEnded, EndExpired, EndTaken, EndDenied, EndUnconfirmed, 0}
	var names []string
	var lost []HoldEndReason
	for _, r := range reasons {
		names = append(names, r.String())
		if r.Lost() {
			lost = append(lost, r)
		}
	}
	assert.Equal(t, []string{"released", "lease_ended", "expired", "taken", "denied", "unconfirmed", "unknown"}, names)
	assert.Equal(t, []HoldEndReason{EndExpired, EndTaken, EndDenied}, lost)
}
