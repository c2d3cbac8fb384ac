package kafkaconn

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// Defaults of Retry.
const (
	DefaultRetryAttempts   = 10
	DefaultRetryMaxElapsed = 30 * time.Second
	DefaultRetryMinBackoff = 100 * time.Millisecond
	DefaultRetryMaxBackoff = 5 * time.Second
)

// Retry says how a write or an offset commit that fails for a transient
// reason (Transient) is tried again: after a pause that starts at
// MinBackoff and doubles up to MaxBackoff, each drawn at random between
// half and all of it so that clients that failed together do not retry in
// step, until it succeeds, fails for another reason, or was tried
// MaxAttempts times or for MaxElapsed. The defaults ride out a broker
// restart or a leader election of some seconds; a failure that persists
// past them is returned.
type Retry struct {
	// MaxAttempts is the most tries of one operation, the first included.
	// Default (0) DefaultRetryAttempts, 10; 1 means no retry.
	MaxAttempts int
	// MaxElapsed bounds the time from the first try after which no new try
	// starts. Default (0) DefaultRetryMaxElapsed, 30s.
	MaxElapsed time.Duration
	// MinBackoff is the pause after the first failure. Default (0)
	// DefaultRetryMinBackoff, 100ms.
	MinBackoff time.Duration
	// MaxBackoff caps every pause. Default (0) DefaultRetryMaxBackoff, 5s.
	MaxBackoff time.Duration
}

// Validate reports a negative setting, or a MinBackoff above MaxBackoff.
func (r Retry) Validate() error {
	r = r.withDefaults()
	switch {
	case r.MaxAttempts < 0 || r.MaxElapsed < 0 || r.MinBackoff < 0 || r.MaxBackoff < 0:
		return fmt.Errorf("retry %+v must not be negative", r)
	case r.MinBackoff > r.MaxBackoff:
		return fmt.Errorf("retry MinBackoff %v exceeds MaxBackoff %v", r.MinBackoff, r.MaxBackoff)
	}
	return nil
}

func (r Retry) withDefaults() Retry {
	r.MaxAttempts = cmp.Or(r.MaxAttempts, DefaultRetryAttempts)
	r.MaxElapsed = cmp.Or(r.MaxElapsed, DefaultRetryMaxElapsed)
	r.MinBackoff = cmp.Or(r.MinBackoff, DefaultRetryMinBackoff)
	r.MaxBackoff = cmp.Or(r.MaxBackoff, DefaultRetryMaxBackoff)
	return r
}

// ErrGaveUp marks the error Do returns when a failure was still transient
// after the last try.
var ErrGaveUp = errors.New("gave up retrying")

// Do calls op until it returns nil or an error that is not Transient, or
// the policy gives up, and returns op's last error: as it is, or wrapped
// with ErrGaveUp and the count of tries when the policy gave up. Before
// each pause it calls onRetry, if not nil, with the error and the pause.
// A pause ends early when ctx does, and no try starts after ctx ended.
func (r Retry) Do(ctx context.Context, op func() error, onRetry func(err error, pause time.Duration)) error {
	r = r.withDefaults()
	start := time.Now()
	backoff := r.MinBackoff
	for attempt := 1; ; attempt++ {
		err := op()
		if err == nil || ctx.Err() != nil || !Transient(err) {
			return err
		}
		pause := backoff/2 + rand.N(backoff/2+1)
		if attempt >= r.MaxAttempts || time.Since(start)+pause > r.MaxElapsed {
			return fmt.Errorf("%w after %d tries in %v: %w", ErrGaveUp, attempt, time.Since(start).Round(time.Millisecond), err)
		}
		if onRetry != nil {
			onRetry(err, pause)
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w; then %w", err, ctx.Err())
		case <-t.C:
		}
		backoff = min(2*backoff, r.MaxBackoff)
	}
}
