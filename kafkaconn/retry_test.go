package kafkaconn

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

func TestRetryDo(t *testing.T) {
	refused := kafka.TopicAuthorizationFailed
	moving := kafka.NotLeaderForPartition
	fast := Retry{MinBackoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond}
	for _, tt := range []struct {
		name      string
		policy    Retry
		errs      []error // op's results, the last repeated
		wantCalls int
		wantErr   error // nil, or what the error must wrap
		gaveUp    bool
	}{
		{"success", fast, []error{nil}, 1, nil, false},
		{"a hiccup", fast, []error{moving, moving, nil}, 3, nil, false},
		{"a refusal", fast, []error{refused}, 1, refused, false},
		{"a hiccup, then a refusal", fast, []error{moving, refused}, 2, refused, false},
		{"no end", Retry{MaxAttempts: 4, MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond}, []error{moving}, 4, moving, true},
		{"one try", Retry{MaxAttempts: 1}, []error{moving}, 1, moving, true},
		{"out of time", Retry{MaxAttempts: 1000, MaxElapsed: 30 * time.Millisecond, MinBackoff: 10 * time.Millisecond, MaxBackoff: 10 * time.Millisecond},
			[]error{moving}, 0, moving, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			calls, retries := 0, 0
			start := time.Now()
			err := tt.policy.Do(context.Background(), func() error {
				calls++
				return tt.errs[min(calls, len(tt.errs))-1]
			}, func(error, time.Duration) { retries++ })
			if tt.wantErr == nil && err != nil || tt.wantErr != nil && !errors.Is(err, tt.wantErr) || errors.Is(err, ErrGaveUp) != tt.gaveUp {
				t.Errorf("error %v, want %v (gave up: %t)", err, tt.wantErr, tt.gaveUp)
			}
			if tt.wantCalls > 0 && calls != tt.wantCalls {
				t.Errorf("%d calls, want %d", calls, tt.wantCalls)
			}
			if retries != calls-1 {
				t.Errorf("%d retries reported for %d calls", retries, calls)
			}
			// Pauses of 5 to 10ms (jitter) within 30ms: 3 to 6 pauses,
			// so 4 to 7 calls; a loaded machine may take longer per call.
			if tt.name == "out of time" && (calls < 2 || calls > 7 || time.Since(start) > time.Second) {
				t.Errorf("%d calls in %v, want 2 to 7 within the 30ms allowed", calls, time.Since(start))
			}
		})
	}
}

// The pauses double from MinBackoff up to MaxBackoff, each between half
// and all of its step.
func TestRetryPauses(t *testing.T) {
	policy := Retry{MaxAttempts: 6, MinBackoff: 8 * time.Millisecond, MaxBackoff: 20 * time.Millisecond}
	var pauses []time.Duration
	err := policy.Do(context.Background(), func() error { return kafka.RequestTimedOut },
		func(_ error, pause time.Duration) { pauses = append(pauses, pause) })
	if !errors.Is(err, ErrGaveUp) || !strings.Contains(err.Error(), "after 6 tries") {
		t.Errorf("error %v", err)
	}
	steps := []time.Duration{8, 16, 20, 20, 20}
	if len(pauses) != len(steps) {
		t.Fatalf("pauses %v, want %d", pauses, len(steps))
	}
	for i, step := range steps {
		if step *= time.Millisecond; pauses[i] < step/2 || pauses[i] > step {
			t.Errorf("pause %d: %v, want %v to %v", i+1, pauses[i], step/2, step)
		}
	}
}

// A pause ends with the context, and the error says both.
func TestRetryCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	start := time.Now()
	err := Retry{MinBackoff: time.Hour, MaxBackoff: time.Hour, MaxElapsed: 2 * time.Hour}.Do(ctx,
		func() error { return kafka.LeaderNotAvailable }, func(error, time.Duration) { cancel() })
	if !errors.Is(err, context.Canceled) || !errors.Is(err, kafka.LeaderNotAvailable) || time.Since(start) > time.Second {
		t.Errorf("error %v after %v", err, time.Since(start))
	}
}

func TestRetryValidate(t *testing.T) {
	for _, tt := range []struct {
		policy Retry
		want   string
	}{
		{Retry{}, ""},
		{Retry{MaxAttempts: 1, MaxElapsed: time.Minute, MinBackoff: time.Second, MaxBackoff: time.Second}, ""},
		{Retry{MaxAttempts: -1}, "must not be negative"},
		{Retry{MaxElapsed: -time.Second}, "must not be negative"},
		{Retry{MinBackoff: 10 * time.Second}, "MinBackoff 10s exceeds MaxBackoff 5s"},
	} {
		err := tt.policy.Validate()
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%+v: %v, want %q", tt.policy, err, tt.want)
		}
		cfg := Config{Brokers: []string{"a:1"}, Retry: tt.policy}
		if (cfg.Validate() == nil) != (tt.want == "") {
			t.Errorf("Config with %+v: %v", tt.policy, cfg.Validate())
		}
	}
}
