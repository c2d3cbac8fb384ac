package model

import (
	"errors"
	"fmt"
	"math"
)

// Mode selects how the block metric Ã is obtained.
type Mode string

const (
	// ModeLearned learns Ã with the Frobenius penalty η‖Ã‖²_F (MVML).
	ModeLearned Mode = "learned"
	// ModeSparse learns Ã with the group penalty η Σ_γ ‖Ã_γ‖_F over view
	// pairs (MVMLsparse), by proximal gradient steps.
	ModeSparse Mode = "sparse"
	// ModeCov fixes Ã = S = UᵀU, the cross-covariance of the features
	// (MVML_Cov).
	ModeCov Mode = "cov"
	// ModeIdentity fixes Ã = I (MVML_I): ridge regression on the weighted
	// concatenated features.
	ModeIdentity Mode = "identity"
)

// ParseMode reads a mode name.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case ModeLearned, ModeSparse, ModeCov, ModeIdentity:
		return m, nil
	}
	return "", fmt.Errorf("mode %q: want learned, sparse, cov or identity", s)
}

// The defaults of DefaultConfig and DefaultTrainConfig, exported so that
// the command line and the documentation take them from here.
const (
	DefaultLambda = 0.1
	DefaultEta    = 1.0
	// DefaultMuEta is μη when Config.Mu is nil: μ = DefaultMuEta/η, below
	// the ½ that keeps Ã positive definite in mode learned.
	DefaultMuEta         = 0.45
	DefaultMode          = ModeLearned
	DefaultMaxIter       = 10
	DefaultTol           = 1e-5
	DefaultMaxCondGrowth = 1e6
	DefaultLandmarks     = 0.12
	DefaultMulticlass    = MulticlassOvR
)

// Config holds the fit's hyper-parameters. λ, η and μ mean exactly what
// they mean in the paper's objective
//
//	‖y − Σ_l w_l U_l g̃_l‖² + λ⟨g̃, Ã⁻¹g̃⟩ + η‖Ã‖²_F
//
// (no rescaling by the number of rows or views), so values carry over from
// the paper and from scikit-multimodallearn. Every field means exactly its
// value, zero included: start from DefaultConfig and change what differs.
// Validate says which values are allowed.
type Config struct {
	// Lambda is λ > 0, the weight of ⟨g̃, Ã⁻¹g̃⟩.
	Lambda float64
	// Eta is η > 0, the weight of the penalty on Ã.
	Eta float64
	// Mu is μ > 0, the first trial step of the Ã update; each step is then
	// halved until it decreases the objective (Armijo backtracking). nil
	// means DefaultMuEta/η, so that μ follows η (a grid over η keeps μη
	// fixed). In mode learned μη must stay below ½ to keep Ã positive
	// definite.
	Mu *float64
	// Mode is how Ã is obtained.
	Mode Mode
	// LearnW learns the view weights w; otherwise w is uniform 1/v.
	LearnW bool
	// MaxIter ≥ 0 caps the outer iterations (Ã, w, g̃). 0 runs none: g̃ at
	// the initial metric and weights only.
	MaxIter int
	// Tol ≥ 0 stops the iterations when the relative decrease of the
	// objective, or the relative changes of both g̃ and Ã, fall to it or
	// below. 0 never stops early: MaxIter iterations run.
	Tol float64
	// NoIntercept fits without the unpenalised intercept, exactly the
	// paper's objective. By default the targets and features are centred
	// (from the statistics) and the intercept ȳ − ūᵀg̃_w is added back, as
	// ridge regression does; without it a class imbalance in one-vs-all
	// targets must be absorbed by the regularised kernel part.
	NoIntercept bool
	// MaxCondGrowth ≥ 1 refuses Ã steps that would make its condition
	// number estimate exceed this multiple of the initial metric's:
	// iterating the Ã step drives Ã towards rank one. Relative, because the
	// initial metric U_lᵀU_l of modes sparse and cov inherits the spread of
	// the Nyström eigenvalues; mode learned starts from a metric of
	// condition at most 1 + r_l (r_l features in view l), so the default
	// 1e6 caps its metric near 1e8, where rounding still moves its decisions
	// by less than 1e-8 relative.
	MaxCondGrowth float64
}

// DefaultConfig returns the default hyper-parameters: λ 0.1, η 1, μ
// 0.45/η, mode learned, uniform w, 10 iterations, tolerance 1e-5, with the
// intercept, condition growth 1e6.
func DefaultConfig() Config {
	return Config{
		Lambda: DefaultLambda, Eta: DefaultEta, Mode: DefaultMode,
		MaxIter: DefaultMaxIter, Tol: DefaultTol, MaxCondGrowth: DefaultMaxCondGrowth,
	}
}

// StepMu is the μ the fit uses: Mu, or DefaultMuEta/Eta when Mu is nil.
func (c Config) StepMu() float64 {
	if c.Mu != nil {
		return *c.Mu
	}
	return DefaultMuEta / c.Eta
}

// Validate reports every field outside its domain, each with the values
// it may take.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if !positiveFinite(c.Lambda) {
		bad("lambda %v: want a positive finite number", c.Lambda)
	}
	if !positiveFinite(c.Eta) {
		bad("eta %v: want a positive finite number", c.Eta)
	}
	if _, err := ParseMode(string(c.Mode)); err != nil {
		errs = append(errs, err)
	}
	switch mu := c.StepMu(); {
	case c.Mu != nil && !positiveFinite(mu):
		bad("mu %v: want a positive finite number", mu)
	case c.Mode == ModeLearned && positiveFinite(c.Eta) && !(mu*c.Eta < 0.5):
		bad("mu %v with eta %v: mode learned wants mu·eta below 1/2 (mu below %g) to keep Ã positive definite", mu, c.Eta, 0.5/c.Eta)
	}
	if c.MaxIter < 0 {
		bad("max-iter %d: want 0 (no iteration) or more", c.MaxIter)
	}
	if !(c.Tol >= 0) || math.IsInf(c.Tol, 0) {
		bad("tol %v: want a finite number ≥ 0 (0: run every iteration)", c.Tol)
	}
	if !(c.MaxCondGrowth >= 1) {
		bad("max condition growth %v: want a number ≥ 1", c.MaxCondGrowth)
	}
	return errors.Join(errs...)
}

func positiveFinite(v float64) bool { return v > 0 && !math.IsInf(v, 0) }
