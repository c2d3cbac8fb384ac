package gate

import (
	"math"
	"testing"
)

// The gate's rule on the ratios of a refit's losses over the serving
// model's, with the figures the cmd/mvml gate tests measure.
func TestGatePasses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ra, rb float64
		want   bool
	}{
		{"clean labels", 1.052, 1.019, true},
		{"both better", 0.9, 0.8, true},
		{"30% wrong labels: cv worse, little gain on them", 1.37, 0.913, false},
		{"view shifted: cv a little worse, large gain on the new labels", 1.15, 0.70, true},
		{"cv worse by the margin, no gain", 1.12, 1.0, false},
		{"cv worse past the margin, gain smaller", 1.2, 0.9, false},
		{"worse on the new labels", 0.8, 1.2, false},
		{"at the margins", 1.1, 1.1, true},
		{"serving model perfect on the new labels", 1, math.Inf(1), false},
		{"not a number", math.NaN(), 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Passes(tc.ra, tc.rb, 0.1); got != tc.want {
				t.Errorf("Passes(%g, %g, 0.1) = %v, want %v", tc.ra, tc.rb, got, tc.want)
			}
		})
	}
	if lossRatio(0, 0) != 1 || lossRatio(2, 1) != 2 || !math.IsInf(lossRatio(1, 0), 1) {
		t.Error("lossRatio")
	}
}
