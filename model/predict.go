package model

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"
)

// Predict scores the rows of views as Score does, into dec and, when it is
// not nil, contrib, and sets pred[i] to the prediction of row i: the class
// label or the regression value its decision gives (Model.Predict). It
// returns the rows without a finite score, as Unscorable lists them; their
// prediction is NaN. pred must have one element per row.
func (s *Scorer) Predict(pred []float64, dec, contrib *mat.Dense, views []*mat.Dense) []Unscorable {
	n, _ := views[0].Dims()
	if len(pred) != n {
		panic(fmt.Sprintf("model: %d predictions for %d rows", len(pred), n))
	}
	if n == 0 {
		return nil
	}
	s.Score(dec, contrib, views)
	return s.predictions(pred, dec, contrib, views)
}

// predictions sets pred from the decisions of the batch just scored and
// returns its rows without a finite score, whose prediction is NaN.
func (s *Scorer) predictions(pred []float64, dec, contrib *mat.Dense, views []*mat.Dense) []Unscorable {
	for i := range pred {
		pred[i] = s.m.Predict(dec.RawRowView(i))
	}
	bad := s.Unscorable(dec, contrib, views)
	for _, u := range bad {
		pred[u.Row] = math.NaN()
	}
	return bad
}
