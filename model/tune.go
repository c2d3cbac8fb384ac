package model

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"gonum.org/v1/gonum/blas/blas64"
)

// TuneKeys are the hyper-parameters a tuning grid may vary, in the order
// Candidates enumerates them (the first varies slowest): the fit's own,
// those of `mvml cv --grid` that statistics of fixed feature maps can
// compare. landmarks and sigma_scale change the feature maps, and with
// them the statistics, so they cannot be tuned from statistics.
var TuneKeys = []string{"lambda", "eta", "mu", "learn_w"}

// Candidate is one point of a tuning grid: values of TuneKeys by name
// (learn_w 0 for uniform view weights, 1 to learn them); a key it lacks
// keeps the base configuration's value.
type Candidate map[string]float64

// Candidates returns every combination of the grid's values (NAME →
// values, the grammar of `cv --grid`), the first of TuneKeys varying
// slowest and each key's values in the order given. A grid CheckTuneGrid
// finds a problem in is an error: its first problem.
func Candidates(grid map[string][]float64) ([]Candidate, error) {
	if problems := CheckTuneGrid(grid); len(problems) > 0 {
		return nil, fmt.Errorf("tune: %w", problems[0])
	}
	var out []Candidate
	for _, c := range GridProduct(TuneKeys, grid) {
		out = append(out, Candidate(c))
	}
	return out, nil
}

// CheckTuneGrid returns every problem of a tuning grid that no base
// configuration is needed to see, keys in name order: a key not of
// TuneKeys, and what CheckTuneValues refuses.
func CheckTuneGrid(grid map[string][]float64) []error {
	var problems []error
	for _, k := range slices.Sorted(maps.Keys(grid)) {
		if !slices.Contains(TuneKeys, k) {
			problems = append(problems, fmt.Errorf("unknown hyper-parameter %q (want %s; landmarks and sigma_scale change the features, which statistics cannot)", k, strings.Join(TuneKeys, ", ")))
			continue
		}
		problems = append(problems, tuneValueProblems(k, grid[k])...)
	}
	return problems
}

// CheckTuneValues checks the values a grid gives one hyper-parameter, as
// far as no base configuration is needed: at least one value, none twice,
// learn_w 0 (uniform w) or 1 (learned w), any other key's values positive
// and finite (Config.Validate's rule for lambda, eta and mu; that of
// `cv --grid`'s landmarks and sigma_scale too). It returns the first
// problem. What depends on the rest of the configuration (mu·eta in mode
// learned, a landmark count that is not whole) is checked with it.
func CheckTuneValues(key string, vals []float64) error {
	if problems := tuneValueProblems(key, vals); len(problems) > 0 {
		return problems[0]
	}
	return nil
}

// tuneValueProblems is every problem CheckTuneValues looks for.
func tuneValueProblems(key string, vals []float64) []error {
	if len(vals) == 0 {
		return []error{fmt.Errorf("%s has no values", key)}
	}
	var problems []error
	for i, v := range vals {
		if first := slices.Index(vals[:i], v); first >= 0 {
			if !slices.Contains(vals[first+1:i], v) { // said once, at its second place
				problems = append(problems, fmt.Errorf("%s %v is given twice", key, v))
			}
			continue
		}
		switch {
		case key == "learn_w":
			if v != 0 && v != 1 {
				problems = append(problems, fmt.Errorf("learn_w is 0 (uniform w) or 1 (learned w), not %v", v))
			}
		case !positiveFinite(v):
			problems = append(problems, fmt.Errorf("%s %v: want a positive finite number", key, v))
		}
	}
	return problems
}

// GridProduct is every combination of grid's values, one map a
// combination, varying the keys in the order of keys (the last fastest);
// keys absent from grid are left out, and an empty grid gives one empty map.
func GridProduct(keys []string, grid map[string][]float64) []map[string]float64 {
	out := []map[string]float64{{}}
	for _, k := range keys {
		vals, ok := grid[k]
		if !ok {
			continue
		}
		next := make([]map[string]float64, 0, len(out)*len(vals))
		for _, c := range out {
			for _, v := range vals {
				n := make(map[string]float64, len(c)+1)
				for kk, vv := range c {
					n[kk] = vv
				}
				n[k] = v
				next = append(next, n)
			}
		}
		out = next
	}
	return out
}

// Apply returns base with the candidate's values, checked (Config.Validate).
func (c Candidate) Apply(base Config) (Config, error) {
	for k, v := range c {
		switch k {
		case "lambda":
			base.Lambda = v
		case "eta":
			base.Eta = v
		case "mu":
			base.Mu = new(v)
		case "learn_w":
			if v != 0 && v != 1 {
				return base, fmt.Errorf("candidate %s: learn_w is 0 or 1", c)
			}
			base.LearnW = v == 1
		default:
			return base, fmt.Errorf("candidate %s: unknown hyper-parameter %q", c, k)
		}
	}
	if err := base.Validate(); err != nil {
		return base, fmt.Errorf("candidate %s: %w", c, err)
	}
	return base, nil
}

// String lists the candidate's values in TuneKeys order, "lambda=0.01
// eta=1".
func (c Candidate) String() string { return FormatValues(TuneKeys, c) }

// FormatValues lists the values of a grid's combination in the order of
// keys, "lambda=0.01 eta=1"; keys it lacks are left out.
func FormatValues(keys []string, values map[string]float64) string {
	var parts []string
	for _, k := range keys {
		if v, ok := values[k]; ok {
			parts = append(parts, k+"="+strconv.FormatFloat(v, 'g', -1, 64))
		}
	}
	return strings.Join(parts, " ")
}

// TieTolerance is the relative distance within which two cross-validated
// losses count as equal: Tune then prefers the stronger regularisation.
const TieTolerance = 1e-12

// Tuning is the outcome of Tune: every candidate's cross-validated loss
// and the one chosen.
type Tuning struct {
	// Folds is the number of folds, FoldRows the (decayed) rows of each.
	Folds    int       `json:"folds"`
	FoldRows []float64 `json:"fold_rows"`
	// Table holds one row per candidate, in the order given.
	Table []TuneRow `json:"table"`
	// Chosen is the index in Table of the candidate chosen.
	Chosen int `json:"chosen"`
}

// TuneRow is one candidate's cross-validation.
type TuneRow struct {
	Candidate Candidate `json:"candidate"`
	// FoldLoss[f] is the squared loss on fold f of the candidate fitted
	// on all the other folds (Model.Loss's units); 0 for a fold without
	// rows.
	FoldLoss []float64 `json:"fold_loss,omitempty"`
	// Loss is the sum of FoldLoss.
	Loss float64 `json:"loss"`
	// Err says why the candidate could not be fitted on some fold (a
	// metric not positive definite, a loss that is not finite); such a
	// candidate is never chosen and its losses are left out.
	Err string `json:"error,omitempty"`
}

// Tune cross-validates the candidates (applied to base, see
// Candidate.Apply) on the accumulator's folds, from their statistics
// alone, and fits the one chosen on all the rows. For every fold f with
// rows and every candidate, the heads are fitted on the sums of all the
// other folds as a refit of those rows would fit them (with a fixed
// metric and weights to rounding: fixedFits, cholCV), and the squared
// loss of their decisions on fold f's rows comes from fold f's
// sums (Model.Loss): the loss that scoring every held-out row would give,
// without a row kept. The candidate of least total loss is chosen; losses
// within TieTolerance (relative) of the least count as ties, which go to
// the larger λ, then the larger η, then uniform view weights, then the
// earlier candidate: the simpler model when the data cannot tell. The
// sums are used as they are: after Decay, an older row weighs its decay
// factor in the fits and in the losses alike.
//
// With warm nil every fit is cold, as RefitCold's, and the model equals
// RefitCold of the chosen configuration; otherwise every fit (fold and
// final) is warm-started from warm's heads as Refit's, and warm must be
// of the accumulator's lineage. In modes identity and cov without
// learn_w, a warm start from uniform weights is the cold start
// (startsCold), and the fold fits are the cold ones. The fits of a fold
// share its statistics and, when cold, the initial metric's
// factorisation; candidates that differ in λ alone in modes identity and
// cov cost one Cholesky factorisation each. The folds are fitted in parallel on up to
// GOMAXPROCS goroutines; the result does not depend on the scheduling.
// Cancelling ctx stops it with ctx's error.
func (a *Accumulator) Tune(ctx context.Context, base Config, cands []Candidate, warm *Model) (*Model, *Tuning, error) {
	m, tun, _, err := a.TuneOn(ctx, base, cands, warm, nil)
	return m, tun, err
}

// TuneOn is Tune that also scores the chosen candidate's fold fits on
// the fold sums of on, other statistics of the lineage in as many folds
// (such as the labels since the model in service, for a gate): its third
// result, the chosen configuration's CrossLosses on on (bit for bit in
// the default build, whose Dgemm sums in one order whatever the shapes),
// from the fits Tune makes anyway. With on nil it is Tune, and the third
// result nil.
func (a *Accumulator) TuneOn(ctx context.Context, base Config, cands []Candidate, warm *Model, on *Accumulator) (*Model, *Tuning, []float64, error) {
	m, tun, onLoss, err := a.tuneOn(ctx, base, cands, warm, on)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("tune: %w", err)
	}
	return m, tun, onLoss, nil
}

func (a *Accumulator) tuneOn(ctx context.Context, base Config, cands []Candidate, warm *Model, on *Accumulator) (*Model, *Tuning, []float64, error) {
	if len(cands) == 0 {
		return nil, nil, nil, errors.New("no candidates")
	}
	cfgs := make([]Config, len(cands))
	for i, c := range cands {
		cfg, err := c.Apply(base)
		if err != nil {
			return nil, nil, nil, err
		}
		cfgs[i] = cfg
	}
	if warm != nil && warm.Features != a.m.Features && warm.Lineage() != a.Lineage() {
		return nil, nil, nil, fmt.Errorf("warm start from model %s of lineage %s, the statistics are of lineage %s (other feature maps or target encoding)",
			warm.Version, warm.Lineage(), a.Lineage())
	}
	tun := &Tuning{Folds: len(a.folds), FoldRows: a.FoldRows(), Table: make([]TuneRow, len(cands))}
	var filled []int
	for f, n := range tun.FoldRows {
		if n > 0 {
			filled = append(filled, f)
		}
	}
	if len(filled) < 2 {
		return nil, nil, nil, fmt.Errorf("%w (rows in %d of %d)", errFewFolds, len(filled), len(a.folds))
	}
	// A fold of on with rows where a's has none is fitted for on alone.
	scored := make([]*Stats, len(a.folds))
	if on != nil {
		var err error
		if scored, err = a.scoredFolds(on); err != nil {
			return nil, nil, nil, err
		}
	}
	var fitted []int
	for f := range a.folds {
		if tun.FoldRows[f] > 0 || scored[f] != nil {
			fitted = append(fitted, f)
		}
	}
	for i, c := range cands {
		tun.Table[i] = TuneRow{Candidate: c, FoldLoss: make([]float64, len(a.folds))}
	}
	// losses[f][i] is candidate i's loss on fold f, errs[f][i] its error;
	// onLosses and onErrs the same on scored[f].
	losses, onLosses := make([][]float64, len(a.folds)), make([][]float64, len(a.folds))
	errs, onErrs := make([][]error, len(a.folds)), make([][]error, len(a.folds))
	var fatal error
	var mu sync.Mutex
	a.sums() // merged once, before the folds read them
	eachFold(fitted, func(w *foldWork, f int) {
		l, e, ol, oe, err := a.crossFoldOn(ctx, w, f, cfgs, warm, a.folds[f], scored[f])
		mu.Lock()
		defer mu.Unlock()
		losses[f], errs[f], onLosses[f], onErrs[f] = l, e, ol, oe
		if err != nil && fatal == nil {
			fatal = err
		}
	})
	if err := ctx.Err(); err != nil {
		return nil, nil, nil, err
	}
	if fatal != nil {
		return nil, nil, nil, fatal
	}
	for i := range cands {
		row := &tun.Table[i]
		for _, f := range filled {
			if err := errs[f][i]; err != nil {
				row.Err = fmt.Sprintf("fold %d: %v", f, err)
				row.FoldLoss, row.Loss = nil, 0
				break
			}
			row.FoldLoss[f] = losses[f][i]
			row.Loss += losses[f][i]
		}
	}
	chosen, err := choose(tun.Table, cfgs)
	if err != nil {
		return nil, nil, nil, err
	}
	tun.Chosen = chosen
	var onLoss []float64
	if on != nil {
		onLoss = make([]float64, len(a.folds))
		for f, st := range scored {
			if st == nil {
				continue
			}
			if err := onErrs[f][chosen]; err != nil {
				return nil, nil, nil, fmt.Errorf("candidate %s on fold %d of the statistics scored: %w", cands[chosen], f, err)
			}
			onLoss[f] = onLosses[f][chosen]
		}
	}
	m, err := a.refit(ctx, cfgs[chosen], warm)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("candidate %s on all folds: %w", cands[chosen], err)
	}
	return m, tun, onLoss, nil
}

// CrossLosses returns, for every fold f, the squared loss (Model.Loss's
// units) on fold f of on of the heads fit fits on all of a's folds but f,
// cold as Tune fits them when warm is nil, warm-started from warm
// otherwise: with on = a, the fold losses of Tune's table for one
// configuration; for a gate, the out-of-sample loss of a candidate on
// other rows of the lineage split by the same folds, such as the labels
// that arrived since the serving model was published (a may hold them
// too: fold f's model sees no row of fold f). on must be of a's lineage
// and number of folds. Fold f's loss is 0 when on's fold f has no rows,
// or when a's other folds have none to fit.
// Cancelling ctx stops it with ctx's error.
func (a *Accumulator) CrossLosses(ctx context.Context, fit Config, warm *Model, on *Accumulator) ([]float64, error) {
	if err := fit.Validate(); err != nil {
		return nil, fmt.Errorf("cross losses: %w", err)
	}
	scored, err := a.scoredFolds(on)
	if err != nil {
		return nil, fmt.Errorf("cross losses: %w", err)
	}
	if warm != nil && warm.Features != a.m.Features && warm.Lineage() != a.Lineage() {
		return nil, fmt.Errorf("cross losses: warm start from model %s of lineage %s, the statistics are of lineage %s", warm.Version, warm.Lineage(), a.Lineage())
	}
	var filled []int
	for f, st := range scored {
		if st != nil {
			filled = append(filled, f)
		}
	}
	out := make([]float64, len(a.folds))
	errs := make([]error, len(a.folds))
	a.sums() // merged once, before the folds read them
	eachFold(filled, func(w *foldWork, f int) {
		l, e, err := a.crossFold(ctx, w, f, []Config{fit}, warm, scored[f])
		if err == nil {
			out[f], err = l[0], e[0]
		}
		if err != nil {
			errs[f] = fmt.Errorf("fold %d: %w", f, err)
		}
	})
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("cross losses: %w", err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("cross losses: %w", err)
	}
	return out, nil
}

// scoredFolds returns, for every fold f, on's fold f where fits on a's
// other folds score it (CrossLosses, TuneOn): when it has rows and a's
// other folds have rows to fit; nil otherwise. on must be of a's lineage
// and number of folds.
func (a *Accumulator) scoredFolds(on *Accumulator) ([]*Stats, error) {
	if on.m != a.m && on.Lineage() != a.Lineage() {
		return nil, fmt.Errorf("statistics of lineage %s scored by fits on lineage %s", on.Lineage(), a.Lineage())
	}
	if len(on.folds) != len(a.folds) {
		return nil, fmt.Errorf("statistics of %d folds scored by fits on %d folds", len(on.folds), len(a.folds))
	}
	scored := make([]*Stats, len(a.folds))
	for f, st := range on.folds {
		if st.N > 0 && a.Rows()-a.folds[f].N > 0 {
			scored[f] = st
		}
	}
	return scored, nil
}

// choose returns the index of the candidate of least loss among those
// without an error, ties broken as Tune says.
func choose(table []TuneRow, cfgs []Config) (int, error) {
	best := -1
	for i, row := range table {
		if row.Err == "" && (best < 0 || row.Loss < table[best].Loss) {
			best = i
		}
	}
	if best < 0 {
		return 0, fmt.Errorf("no candidate could be fitted on every fold; the first: %s", table[0].Err)
	}
	limit := table[best].Loss + TieTolerance*math.Abs(table[best].Loss)
	chosen := -1
	for i, row := range table {
		if row.Err != "" || row.Loss > limit {
			continue
		}
		if chosen < 0 || simpler(cfgs[i], cfgs[chosen]) {
			chosen = i
		}
	}
	return chosen, nil
}

// simpler says whether a regularises more strongly than b: a larger λ,
// then a larger η, then uniform view weights where b learns them.
func simpler(a, b Config) bool {
	switch {
	case a.Lambda != b.Lambda:
		return a.Lambda > b.Lambda
	case a.Eta != b.Eta:
		return a.Eta > b.Eta
	default:
		return !a.LearnW && b.LearnW
	}
}

// eachFold calls fn for every fold of folds on up to GOMAXPROCS
// goroutines and returns when all calls have. Each goroutine passes fn
// its own foldWork, from one fold to the next.
func eachFold(folds []int, fn func(w *foldWork, f int)) {
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(folds)) {
		wg.Go(func() {
			var w foldWork
			for f := range next {
				fn(&w, f)
			}
		})
	}
	for _, f := range folds {
		next <- f
	}
	close(next)
	wg.Wait()
}

// foldWork is what crossFold keeps from one fold to the next on one
// goroutine: the matrices of the last fold's sums and fits, which the
// next fold's write over instead of allocating their own (about a dozen
// D×D matrices a fold). Nothing of one fold is read by the next.
type foldWork struct {
	train *Stats
	in    *fitInput
	start *solver
	done  *solver
	fixed *fixedFits
}

// crossFold fits every configuration on the sums of all folds but f and
// returns their losses on the rows of score (fold f's or another
// accumulator's fold f), with the error of each configuration that could
// not be fitted; a failure that is not the candidate's (a cancelled ctx)
// is the third result. It works in w's matrices and leaves its own there.
func (a *Accumulator) crossFold(ctx context.Context, w *foldWork, f int, cfgs []Config, warm *Model, score *Stats) ([]float64, []error, error) {
	losses, errs, _, _, err := a.crossFoldOn(ctx, w, f, cfgs, warm, score, nil)
	return losses, errs, err
}

// crossFoldOn is crossFold that also scores the same fits on the rows of
// on, when not nil: the losses and errors on them are its third and
// fourth results, those crossFold with score on would give (bit for bit
// in the default build); with on nil, its losses are 0 and its errors
// the fits'.
func (a *Accumulator) crossFoldOn(ctx context.Context, w *foldWork, f int, cfgs []Config, warm *Model, score, on *Stats) ([]float64, []error, []float64, []error, error) {
	losses, errs := make([]float64, len(cfgs)), make([]error, len(cfgs))
	onLosses, onErrs := make([]float64, len(cfgs)), make([]error, len(cfgs))
	train := withoutFoldInto(w.train, a.sums(), a.folds[f])
	w.train = train
	units := a.m.labelUnits()
	in, err := newFitInputFrom(train, cfgs[0], units, w.in)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	w.in = in
	done := w.done // the last fit's, whose working matrices the next reuses
	var start *solver
	var startErr error
	var fixed *fixedFits // made for the first configuration isFixed
	defer func() {
		w.done = done
		if fixed != nil {
			w.fixed = fixed
		}
	}()
	allFixed := true
	for _, cfg := range cfgs {
		allFixed = allFixed && isFixed(cfg)
	}
	if warm != nil && allFixed && startsCold(warm, len(in.labels.Ranks)) {
		warm = nil
	}
	switch {
	case warm == nil && allFixed:
		// fixedFits factorises P + λI itself for every λ, and in mode
		// identity reads B(w) as P (L = I): the start stops before the
		// factorisation, and in mode identity before P.
		start, startErr = newStartMetric(ctx, in, cfgs[0], nil, w.start, true)
		if start != nil {
			if cfgs[0].Mode != ModeIdentity {
				start.refactor()
			}
			w.start = start
		}
	case warm == nil:
		start, startErr = newStartFrom(ctx, in, cfgs[0], nil, w.start)
		if start != nil {
			w.start = start
		}
	}
	var fixedCands []int // the candidates fitted by fixed, in order
	for i, cfg := range cfgs {
		if err := ctx.Err(); err != nil {
			return nil, nil, nil, nil, err
		}
		if startErr != nil {
			errs[i], onErrs[i] = startErr, startErr
			continue
		}
		if start != nil && isFixed(cfg) {
			if fixed == nil {
				fixed = newFixedFitsFrom(in, start, train.Outputs(), score, w.fixed)
			}
			fixed.fit(cfg)
			fixedCands = append(fixedCands, i)
			continue
		}
		var sols []*Solution
		var err error
		groups := headGroups(train.Outputs(), cfg, a.m.Config.Multiclass)
		sols, done, err = fitGroups(ctx, in, start, done, cfg, groups, warm)
		if ctx.Err() != nil {
			return nil, nil, nil, nil, ctx.Err()
		}
		if err != nil {
			errs[i], onErrs[i] = err, err
			continue
		}
		losses[i], errs[i] = solutionsLoss(score, sols, units)
		if on != nil {
			onLosses[i], onErrs[i] = solutionsLoss(on, sols, units)
		}
	}
	if len(fixedCands) > 0 {
		if on != nil {
			l, e := fixed.scoreOn(on)
			for j, i := range fixedCands {
				onLosses[i], onErrs[i] = l[j], e[j]
			}
		}
		l, e := fixed.scoreFits()
		for j, i := range fixedCands {
			losses[i], errs[i] = l[j], e[j]
		}
	}
	return losses, errs, onLosses, onErrs, nil
}

// startsCold says whether a fixed fit (isFixed) of statistics of that
// many views, warm-started from warm, starts where a cold one does, to
// the bit: such a fit is one g̃-step at the mode's metric (I, or the
// statistics' S), whatever warm's, and of warm it reads only the weights
// of its one head (fitGroups, newStart), which are then uniform, as a
// cold start's.
func startsCold(warm *Model, views int) bool {
	if len(warm.Heads) != 1 || len(warm.Heads[0].W) != views {
		return true
	}
	for _, w := range warm.Heads[0].W {
		if w != 1/float64(views) {
			return false
		}
	}
	return true
}

// isFixed says whether cfg fixes the metric and the weights (modes cov
// and identity without learn_w): its fit is one g̃-step.
func isFixed(cfg Config) bool {
	return (cfg.Mode == ModeCov || cfg.Mode == ModeIdentity) && !cfg.LearnW
}

// headGroups returns the target columns of every head, as FitHeads
// groups them: one head per class in one-vs-all unless metric and
// weights are fixed (then one joint solve gives the same columns), one
// head of all columns otherwise.
func headGroups(k int, cfg Config, mc Multiclass) [][]int {
	fixed := (cfg.Mode == ModeCov || cfg.Mode == ModeIdentity) && !cfg.LearnW
	if k > 1 && mc == MulticlassOvR && !fixed {
		groups := make([][]int, k)
		for c := range groups {
			groups[c] = []int{c}
		}
		return groups
	}
	cols := make([]int, k)
	for c := range cols {
		cols[c] = c
	}
	return [][]int{cols}
}

// fitGroups fits one solution per group of target columns with cfg: from
// a copy of start (a cold start, newStart, fitted with any λ of the same
// mode and intercept) in the working matrices of done, a finished
// solver's, when not nil, or, when start is nil, from warm's heads as
// FitHeads starts them. The solutions are those FitHeads finds. It also
// returns its last solver, for the next call's done.
func fitGroups(ctx context.Context, in *fitInput, start, done *solver, cfg Config, groups [][]int, warm *Model) ([]*Solution, *solver, error) {
	sols := make([]*Solution, len(groups))
	for h, cols := range groups {
		var s *solver
		switch {
		case start != nil:
			s = start.head(cols, done)
			done = s
			s.cfg, s.sparseMu = cfg, cfg.StepMu()
			if cfg.Lambda != start.cfg.Lambda {
				s.factored = false
			}
		case len(warm.Heads) == len(groups):
			st, err := newStart(ctx, in, cfg, &warm.Heads[h].Solution)
			if err != nil {
				return nil, done, err
			}
			s = st.withColumns(cols)
		default:
			st, err := newStart(ctx, in, cfg, nil)
			if err != nil {
				return nil, done, err
			}
			s = st.withColumns(cols)
		}
		var sol *Solution
		var err error
		if (cfg.Mode == ModeCov || cfg.Mode == ModeIdentity) && !cfg.LearnW {
			sol, err = fixedSolution(in, s)
		} else {
			sol, err = fitPrepared(ctx, in, s)
		}
		if err == nil {
			err = finiteSolution(sol)
		}
		if err != nil {
			if len(groups) > 1 {
				err = fmt.Errorf("head %d of %d: %w", h+1, len(groups), err)
			}
			return nil, done, err
		}
		sols[h] = sol
	}
	return sols, done, nil
}

// fixedSolution is fitPrepared for a fixed metric and fixed weights
// (modes cov and identity without learn_w), where the fit is its one
// g̃-step: the same g̃, w and intercept, without the objective, which
// cross-validation does not read (its trace is left empty).
func fixedSolution(in *fitInput, s *solver) (*Solution, error) {
	if err := s.gStep(); err != nil {
		return nil, err
	}
	st, cols := in.labels, s.cols
	sol := &Solution{A: s.a, G: s.g, W: s.w, Intercept: make([]float64, len(cols))}
	if !s.cfg.NoIntercept {
		off := offsets(st.Ranks)
		for c, col := range cols {
			b := st.YSum[col] / st.N
			for l := range st.Ranks {
				for i := off[l]; i < off[l+1]; i++ {
					b -= s.w[l] * st.USum[i] / st.N * s.g.At(i, c)
				}
			}
			sol.Intercept[c] = b
		}
	}
	in.units.encode(sol, s.cfg.NoIntercept)
	return sol, nil
}

// solutionsLoss is the squared loss on the rows of st (raw statistics of
// the model's encoded targets) of the heads sols, whose columns follow
// one another, in Model.Loss's units.
func solutionsLoss(st *Stats, sols []*Solution, units labelUnits) (float64, error) {
	off := offsets(st.Ranks)
	gamma := make([]float64, st.Dim())
	total, col := 0.0, 0
	for _, sol := range sols {
		_, k := sol.G.Dims()
		for c := range k {
			for l := range st.Ranks {
				for i := off[l]; i < off[l+1]; i++ {
					gamma[i] = sol.W[l] * sol.G.At(i, c)
				}
			}
			total += squaredLoss(st, col, gamma, sol.Intercept[c])
			col++
		}
	}
	return lossUnits(total, units)
}

// lossUnits turns a loss of the encoded targets into label units
// (regression: scale²) and refuses one that is not finite.
func lossUnits(loss float64, units labelUnits) (float64, error) {
	loss *= units.scale * units.scale
	if math.IsNaN(loss) || math.IsInf(loss, 0) {
		return 0, fmt.Errorf("squared loss %v is not finite", loss)
	}
	return loss, nil
}

// squaredLoss is Σ_i (y_i − b − u_iᵀγ)² over the rows of st for target
// column col: yᵀy − 2b·Σy + N·b² − 2γᵀ(c − b·Σu) + γᵀSγ.
func squaredLoss(st *Stats, col int, gamma []float64, b float64) float64 {
	d := st.Dim()
	sg := make([]float64, d)
	blas64.Symv(1, st.S.RawSymmetric(), blas64.Vector{N: d, Inc: 1, Data: gamma}, 0, blas64.Vector{N: d, Inc: 1, Data: sg})
	c := st.C.RawMatrix()
	lin, quad := 0.0, 0.0
	for i, g := range gamma {
		lin += g * (c.Data[i*c.Stride+col] - b*st.USum[i])
		quad += g * sg[i]
	}
	return st.YtY[col] - 2*b*st.YSum[col] + st.N*b*b - 2*lin + quad
}

// Loss is the squared loss of m's decisions on the rows whose statistics
// st holds (gathered on m's lineage, e.g. Accumulator.FoldStats):
// Σ_rows Σ_outputs (y − f(x))², with y the target as m codes it (±1 per
// class for classification, the label for regression) and f(x) the
// decision Scorer gives, from the sums alone: L = yᵀy − 2gᵀc + gᵀSg with
// the intercept folded in. It is the loss scoring every row would give
// (to rounding), for comparing models of one lineage on the same rows.
// Statistics of another shape, or a loss that is not finite, are an
// error.
func (m *Model) Loss(st *Stats) (float64, error) {
	if st.Dim() != m.Dim() || st.Outputs() != m.Outputs() {
		return 0, fmt.Errorf("loss: statistics of %d features and %d outputs, model %s has %d and %d", st.Dim(), st.Outputs(), m.Version, m.Dim(), m.Outputs())
	}
	off := offsets(m.Features.Ranks())
	gamma := make([]float64, st.Dim())
	total := 0.0
	for c := range m.Outputs() {
		for l, fc := range m.featCoef {
			for i := off[l]; i < off[l+1]; i++ {
				gamma[i] = fc.At(i-off[l], c)
			}
		}
		total += squaredLoss(st, c, gamma, m.offset[c])
	}
	loss, err := lossUnits(total, m.labelUnits())
	if err != nil {
		return 0, fmt.Errorf("loss of model %s: %w", m.Version, err)
	}
	return loss, nil
}

// Losses returns m's squared loss (Model.Loss) on the rows of every fold;
// m must be of the accumulator's lineage.
func (a *Accumulator) Losses(m *Model) ([]float64, error) {
	if m.Features != a.m.Features && m.Lineage() != a.Lineage() {
		return nil, fmt.Errorf("loss: model %s of lineage %s, the statistics are of lineage %s", m.Version, m.Lineage(), a.Lineage())
	}
	out := make([]float64, len(a.folds))
	for f, st := range a.folds {
		l, err := m.Loss(st)
		if err != nil {
			return nil, fmt.Errorf("fold %d: %w", f, err)
		}
		out[f] = l
	}
	return out, nil
}
