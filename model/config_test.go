package model

import (
	"context"
	"math"
	"strings"
	"testing"
)

// fitWith is DefaultConfig changed by set, so that a test names only the
// values it is about.
func fitWith(set func(*Config)) Config {
	c := DefaultConfig()
	set(&c)
	return c
}

// trainWith is DefaultTrainConfig changed by set.
func trainWith(set func(*TrainConfig)) TrainConfig {
	c := DefaultTrainConfig()
	set(&c)
	return c
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(*TrainConfig)
		// want is "" for a valid configuration, else every fragment the
		// error must hold: the field, its value and the valid range.
		want []string
	}{
		{"defaults", func(*TrainConfig) {}, nil},
		{"zero max-iter", func(c *TrainConfig) { c.Fit.MaxIter = 0 }, nil},
		{"zero tol", func(c *TrainConfig) { c.Fit.Tol = 0 }, nil},
		{"explicit mu", func(c *TrainConfig) { c.Fit.Mu = new(0.2) }, nil},
		{"mu follows eta", func(c *TrainConfig) { c.Fit.Eta = 1e4 }, nil},
		{"large mu outside mode learned", func(c *TrainConfig) { c.Fit.Mode, c.Fit.Mu = ModeSparse, new(3.0) }, nil},
		{"landmark count", func(c *TrainConfig) { c.Landmarks = 64 }, nil},
		{"all landmarks", func(c *TrainConfig) { c.Landmarks = 1 }, nil},
		{"zero lambda", func(c *TrainConfig) { c.Fit.Lambda = 0 }, []string{"lambda 0", "positive finite"}},
		{"negative lambda", func(c *TrainConfig) { c.Fit.Lambda = -1 }, []string{"lambda -1", "positive finite"}},
		{"infinite lambda", func(c *TrainConfig) { c.Fit.Lambda = math.Inf(1) }, []string{"lambda +Inf", "positive finite"}},
		{"zero eta", func(c *TrainConfig) { c.Fit.Eta = 0 }, []string{"eta 0", "positive finite"}},
		{"NaN eta", func(c *TrainConfig) { c.Fit.Eta = math.NaN() }, []string{"eta NaN", "positive finite"}},
		{"zero mu", func(c *TrainConfig) { c.Fit.Mu = new(0.0) }, []string{"mu 0", "positive finite"}},
		{"mu eta too large", func(c *TrainConfig) { c.Fit.Mu = new(0.5) }, []string{"mu 0.5 with eta 1", "below 1/2", "mu below 0.5"}},
		{"no mode", func(c *TrainConfig) { c.Fit.Mode = "" }, []string{`mode ""`, "learned, sparse, cov or identity"}},
		{"negative max-iter", func(c *TrainConfig) { c.Fit.MaxIter = -1 }, []string{"max-iter -1", "0 (no iteration) or more"}},
		{"negative tol", func(c *TrainConfig) { c.Fit.Tol = -1e-3 }, []string{"tol -0.001", "≥ 0"}},
		{"condition growth", func(c *TrainConfig) { c.Fit.MaxCondGrowth = 0 }, []string{"condition growth 0", "≥ 1"}},
		{"zero landmarks", func(c *TrainConfig) { c.Landmarks = 0 }, []string{"landmarks 0", "(0,1]", "count of at least 2"}},
		{"fractional count", func(c *TrainConfig) { c.Landmarks = 2.5 }, []string{"landmarks 2.5", "whole count"}},
		{"no multiclass", func(c *TrainConfig) { c.Multiclass = "" }, []string{`multiclass ""`, "ovr or shared"}},
		{"every problem at once", func(c *TrainConfig) { *c = TrainConfig{} },
			[]string{"lambda 0", "eta 0", `mode ""`, "condition growth 0", "landmarks 0", `multiclass ""`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := trainWith(tc.set).Validate()
			if tc.want == nil {
				if err != nil {
					t.Fatalf("valid configuration refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// The derived μ is DefaultMuEta/η whatever η is; an explicit one is itself.
func TestStepMu(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want float64
	}{
		{DefaultConfig(), DefaultMuEta / DefaultEta},
		{fitWith(func(c *Config) { c.Eta = 10 }), DefaultMuEta / 10},
		{fitWith(func(c *Config) { c.Eta, c.Mu = 10, new(0.01) }), 0.01},
	} {
		if got := tc.cfg.StepMu(); got != tc.want {
			t.Errorf("eta %v, mu %v: StepMu %v, want %v", tc.cfg.Eta, tc.cfg.Mu, got, tc.want)
		}
	}
}

// MaxIter 0 fits g̃ at the initial metric only; Tol 0 runs every iteration.
func TestZeroMaxIterAndTol(t *testing.T) {
	p := newProblem(3, 60, []int{3, 4}, 1)
	st := p.stats(t)
	none, err := Fit(context.Background(), st, []int{0}, fitWith(func(c *Config) { c.MaxIter = 0 }), nil)
	if err != nil {
		t.Fatal(err)
	}
	if none.Trace.Iterations != 0 || len(none.Trace.Objective) != 1 || len(none.Trace.Steps) != 0 {
		t.Errorf("max-iter 0: trace %+v, want no iteration and the initial objective only", none.Trace)
	}
	const iters = 30
	all, err := Fit(context.Background(), st, []int{0}, fitWith(func(c *Config) { c.MaxIter, c.Tol = iters, 0 }), nil)
	if err != nil {
		t.Fatal(err)
	}
	if all.Trace.Iterations != iters || all.Trace.Converged {
		t.Errorf("tol 0: %d iterations, converged %t; want all %d, not converged", all.Trace.Iterations, all.Trace.Converged, iters)
	}
	loose, err := Fit(context.Background(), st, []int{0}, fitWith(func(c *Config) { c.MaxIter, c.Tol = iters, 1e-2 }), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !loose.Trace.Converged || loose.Trace.Iterations >= iters {
		t.Errorf("tol 1e-2: %d iterations, converged %t; the case does not stop early, so tol 0 proves nothing", loose.Trace.Iterations, loose.Trace.Converged)
	}
}
