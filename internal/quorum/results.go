package quorum

import (
	"errors"

	"github.com/redlock-go/redlock/internal/vote"
	"github.com/redlock-go/redlock/observe"
)

// Results is what every node did in r, for an Observer's event.
func (r *Round) Results() []observe.NodeResult {
	out := make([]observe.NodeResult, len(r.Nodes))
	for i, sl := range r.Nodes {
		res := observe.NodeResult{Node: r.q.members.Name(i), Err: sl.Err}
		switch {
		case !sl.Got:
			res.Answer = observe.AnswerUnheard
		case sl.Quarantined:
			res.Answer = observe.AnswerQuarantined
		case sl.Vote == vote.Yes:
			res.Answer = observe.AnswerYes
		case sl.Vote == vote.No:
			res.Answer = observe.AnswerNo
		default:
			res.Answer = observe.AnswerFailed
		}
		if res.Answer == observe.AnswerFailed && res.Err == nil {
			res.Err = r.q.members.Fail(i, errors.New("unexpected reply"))
		}
		out[i] = res
	}
	return out
}
