package slots

import (
	"context"

	"github.com/hashicorp/go-multierror"

	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/internal/script"
	"github.com/redlock-go/redlock/internal/vote"
)

// ScanConfig is what the scans of one Semaphore need of it and its
// Client, made once per Semaphore.
type ScanConfig struct {
	Quorum  int // how many nodes make a majority
	Permits int // the Semaphore's permits: its slots
	// Quarantined says, as node i's error, why node i's answer does not
	// count (restart quarantine); nil when it counts.
	Quarantined func(i int) error
	Open        func() error // the Client's error after Close; nil before
	NoQuorum    error        // the Client's ErrNoQuorum
	Op          string       // the scan, as its ErrNoQuorum error says it
}

// Scan is what a scan found, counted as the nodes answer (a Tally), with
// the scan's round and errors.
type Scan struct {
	*Tally
	Round *quorum.Round // slots.lua to every node
	Err   error         // not enough nodes counted: ErrNoQuorum, the Client's after Close, or ctx's error
	Ended bool          // Err is only ctx.Err()

	cfg  *ScanConfig
	seen []bool            // per node: its answer (or failure) was counted
	errs *multierror.Error // the nodes that answered but did not count
}

// NewScan returns the scan whose round r was sent, counting nothing yet.
func NewScan(r *quorum.Round, cfg *ScanConfig) *Scan {
	n := len(r.Nodes)
	return &Scan{Tally: New(n, cfg.Quorum, cfg.Permits), Round: r, cfg: cfg, seen: make([]bool, n)}
}

// Collect counts the answers as they come, and decides as soon as a slot
// is free on a majority, or none can be. The slots free on a majority are
// then in Free; when fewer than a majority counted and some slot is still
// open, Err says why: ctx's error (Ended), the Client's after Close, or
// the scan's ErrNoQuorum error.
func (t *Scan) Collect(ctx context.Context) {
	t.Round.Collect(ctx, t.Decided)
	t.Decided(&t.Round.Ballot) // counts the nodes collect gave up on
	if len(t.Nodes) < t.cfg.Quorum && t.Open() {
		switch {
		case ctx.Err() != nil:
			t.Err, t.Ended = ctx.Err(), true
		case t.cfg.Open() != nil:
			t.Err = t.cfg.Open()
		default:
			t.Err = t.NoQuorum()
		}
	}
}

// Decided counts the answers that came since it last ran, and reports
// whether the scan is decided: the tally is certain, or all answered.
func (t *Scan) Decided(b *vote.Ballot) bool {
	for i := range t.Round.Nodes {
		if sl := t.Round.Nodes[i]; sl.Got && !t.seen[i] {
			t.seen[i] = true
			t.count(i, sl)
		}
	}
	return t.Certain() || b.Done()
}

// count counts node i, which collect counted as sl.
func (t *Scan) count(i int, sl quorum.Slot) {
	if sl.Vote != vote.Yes {
		t.Exclude()
		return
	}
	if err := t.cfg.Quarantined(i); err != nil {
		t.Exclude()
		t.errs = quorum.AppendError(t.errs, err)
		return
	}
	pttls, _ := script.ParseSlots(t.Round.Reply(i), t.cfg.Permits) // a vote yes: it parsed
	t.Count(i, pttls)
}

// NoQuorum is the ErrNoQuorum error of a scan that too few nodes answered
// usefully.
func (t *Scan) NoQuorum() error {
	errs := t.Round.NodeErrors()
	if t.errs != nil {
		errs = quorum.AppendError(errs, t.errs)
	}
	b := t.Round.Ballot
	return &quorum.Error{
		NoQuorum: t.cfg.NoQuorum,
		Op:       t.cfg.Op, Yes: len(t.Nodes), Unheard: b.N - b.Yes - b.No - b.Failed,
		Need: t.cfg.Quorum, N: b.N, Nodes: errs,
	}
}
