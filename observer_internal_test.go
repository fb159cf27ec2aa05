package redlock

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/redlock-go/redlock/observe"
)

// What an Observer is told, as pure functions: how an acquisition's result
// becomes its Outcome, and the names of the events' enumerations (the redlockotel
// module's attribute values).

func TestUnitAcquireOutcome(t *testing.T) {
	live := context.Background()
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	noQuorum := &quorumError{NoQuorum: ErrNoQuorum, Op: "lock", N: 3, Need: 2}
	for _, tc := range []struct {
		name string
		ctx  context.Context
		ok   bool
		err  error
		want observe.Outcome
	}{
		{"held", live, true, nil, observe.OutcomeAcquired},
		{"held by another", live, false, nil, observe.OutcomeBusy},
		{"no quorum", live, false, noQuorum, observe.OutcomeNoQuorum},
		{"ctx ended", ended, false, fmt.Errorf("redlock: lock \"x\": %w; last attempt: %w", context.Canceled, noQuorum), observe.OutcomeCanceled},
		{"no quorum, ctx ended after", ended, false, noQuorum, observe.OutcomeNoQuorum},
		{"closed", live, false, ErrClosed, observe.OutcomeFailed},
		{"too late", live, false, errors.New("redlock: lock \"x\": acquired too late"), observe.OutcomeFailed},
	} {
		assert.Equal(t, tc.want, acquireOutcome(tc.ctx, tc.ok, tc.err), tc.name)
	}
}

func TestUnitEventNames(t *testing.T) {
	assert.Equal(t, []string{"Lock", "TryLock", "Unlock", "ForceUnlock", "Acquire", "TryAcquire", "Release", "Op(?)"},
		[]string{observe.OpLock.String(), observe.OpTryLock.String(), observe.OpUnlock.String(), observe.OpForceUnlock.String(),
			observe.OpAcquire.String(), observe.OpTryAcquire.String(), observe.OpRelease.String(), observe.Op(0).String()})
	assert.Equal(t, []string{"acquired", "busy", "no_quorum", "canceled", "failed", "unknown"},
		[]string{observe.OutcomeAcquired.String(), observe.OutcomeBusy.String(), observe.OutcomeNoQuorum.String(), observe.OutcomeCanceled.String(), observe.OutcomeFailed.String(), observe.Outcome(0).String()})
	assert.Equal(t, []string{"released", "lowered", "not_held", "no_quorum", "unknown"},
		[]string{observe.UnlockReleased.String(), observe.UnlockLowered.String(), observe.UnlockNotHeld.String(), observe.UnlockNoQuorum.String(), observe.UnlockOutcome(0).String()})
	assert.Equal(t, []string{"yes", "no", "failed", "quarantined", "unheard", "unknown"},
		[]string{observe.AnswerYes.String(), observe.AnswerNo.String(), observe.AnswerFailed.String(), observe.AnswerQuarantined.String(), observe.AnswerUnheard.String(), observe.NodeAnswer(0).String()})
	assert.Equal(t, []string{"up", "down", "quarantined", "back", "unknown"},
		[]string{observe.NodeUp.String(), observe.NodeDown.String(), observe.NodeQuarantined.String(), observe.NodeBack.String(), observe.NodeState(0).String()})
	reasons := []observe.HoldEndReason{observe.EndReleased, observe.EndLeaseEnded, observe.EndExpired, observe.EndTaken, observe.EndDenied, observe.EndUnconfirmed, 0}
	var names []string
	var lost []observe.HoldEndReason
	for _, r := range reasons {
		names = append(names, r.String())
		if r.Lost() {
			lost = append(lost, r)
		}
	}
	assert.Equal(t, []string{"released", "lease_ended", "expired", "taken", "denied", "unconfirmed", "unknown"}, names)
	assert.Equal(t, []observe.HoldEndReason{observe.EndExpired, observe.EndTaken, observe.EndDenied}, lost)
}
