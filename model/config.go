package model

import (
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

// Config holds the fit's hyper-parameters. λ, η and μ mean exactly what
// they mean in the paper's objective
//
//	‖y − Σ_l w_l U_l g̃_l‖² + λ⟨g̃, Ã⁻¹g̃⟩ + η‖Ã‖²_F
//
// (no rescaling by the number of rows or views), so values carry over from
// the paper and from scikit-multimodallearn. The zero value of a field
// means its default.
type Config struct {
	// Lambda is λ, the weight of ⟨g̃, Ã⁻¹g̃⟩. Default 0.1.
	Lambda float64
	// Eta is η, the weight of the penalty on Ã. Default 1.
	Eta float64
	// Mu is μ, the first trial step of the Ã update; each step is then
	// halved until it decreases the objective (Armijo backtracking).
	// μη < ½ keeps Ã positive definite in mode learned. Default 0.45/η.
	Mu float64
	// Mode is how Ã is obtained. Default ModeLearned.
	Mode Mode
	// LearnW learns the view weights w; otherwise w is uniform 1/v.
	LearnW bool
	// MaxIter caps the outer iterations (g̃, Ã, w). Default 10; a negative
	// value runs none (g̃ at the initial metric and weights only).
	MaxIter int
	// Tol stops the iterations when the relative decrease of the
	// objective, or the relative changes of both g̃ and Ã, fall below it.
	// Default 1e-5.
	Tol float64
	// NoIntercept fits without the unpenalised intercept, exactly the
	// paper's objective. By default the targets and features are centred
	// (from the statistics) and the intercept ȳ − ūᵀg̃_w is added back, as
	// ridge regression does; without it a class imbalance in one-vs-all
	// targets must be absorbed by the regularised kernel part.
	NoIntercept bool
	// MaxCondGrowth refuses Ã steps that would make its condition number
	// estimate exceed this multiple of the initial metric's: iterating the
	// Ã step drives Ã towards rank one. Relative, because the initial
	// metric U_lᵀU_l inherits the spread of the Nyström eigenvalues.
	// Default 1e4.
	MaxCondGrowth float64
}

// withDefaults returns c with every zero field set to its default, or an
// error for values outside their domain.
func (c Config) withDefaults() (Config, error) {
	if c.Lambda == 0 {
		c.Lambda = 0.1
	}
	if c.Eta == 0 {
		c.Eta = 1
	}
	if c.Mu == 0 {
		c.Mu = 0.45 / c.Eta
	}
	if c.Mode == "" {
		c.Mode = ModeLearned
	}
	if c.MaxIter == 0 {
		c.MaxIter = 10
	}
	if c.Tol == 0 {
		c.Tol = 1e-5
	}
	if c.MaxCondGrowth == 0 {
		c.MaxCondGrowth = 1e4
	}
	switch {
	case !(c.Lambda > 0) || math.IsInf(c.Lambda, 0):
		return c, fmt.Errorf("lambda %v must be positive and finite", c.Lambda)
	case !(c.Eta > 0) || math.IsInf(c.Eta, 0):
		return c, fmt.Errorf("eta %v must be positive and finite", c.Eta)
	case !(c.Mu > 0):
		return c, fmt.Errorf("mu %v must be positive", c.Mu)
	case c.Mode == ModeLearned && c.Mu*c.Eta >= 0.5:
		return c, fmt.Errorf("mu·eta = %v must be below 1/2 to keep Ã positive definite", c.Mu*c.Eta)
	case !(c.Tol > 0):
		return c, fmt.Errorf("tol %v must be positive", c.Tol)
	case !(c.MaxCondGrowth >= 1):
		return c, fmt.Errorf("max condition growth %v must be at least 1", c.MaxCondGrowth)
	}
	if _, err := ParseMode(string(c.Mode)); err != nil {
		return c, err
	}
	return c, nil
}
