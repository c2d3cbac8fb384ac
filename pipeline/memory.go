package pipeline

import (
	"fmt"
	"math"
	"runtime"
	"strings"

	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/transform"
)

// DefaultMaxLandmarks bounds the landmark count per view that the default
// fraction of the rows (model.DefaultLandmarks, 12%) gives a training job
// (TrainJob.MaxLandmarks). The paper's shares (6, 12 and 24%) are of data
// sets of 896 to 2,000 rows, 54 to 480 landmarks; a share of a large input
// is not: 12% of 400,000 rows is 48,000 landmarks per view, whose fit needs
// (3·48,000)² numbers per matrix, 165 GB. The fit costs O((v·p)³) and its
// memory O((v·p)²), while the Nyström approximation improves slowly past a
// few hundred landmarks; 256 keeps a fit of three views under a second
// and its matrices (D = 768) at 4.7 MB each. Up to 2,133 rows the bound
// changes nothing.
const DefaultMaxLandmarks = 256

// DefaultHoldBytes is the most a training job holds in memory by default
// (MemoryBudget.Hold) before it streams its rows instead: about 300,000
// rows of 3 × 64 features.
const DefaultHoldBytes = 1 << 30

// MemoryBudget bounds what a training job may allocate (TrainJob.Memory).
// Before it reads a row, and again once it knows the rows and before its
// heavy allocations, the job estimates what it needs (EstimateTrain): when
// the rows would take more than Hold, or the whole more than Limit, it
// streams instead of holding the rows (when Auto), and above Limit it
// refuses, saying what it needs and which flag would fit.
type MemoryBudget struct {
	// Limit is the most the job may use, in bytes; 0 means no limit.
	Limit int64
	// LimitFrom says where Limit comes from, for the messages: "--memory-limit",
	// "the machine's memory", "the container's memory limit (cgroup v2)".
	LimitFrom string
	// Hold is the most the rows a training holds may take (what streaming
	// them would save); 0 means no bound but Limit.
	Hold int64
	// Auto lets the job stream (the TrainJob.Stream path) when holding the
	// rows would need more than Hold; otherwise it does what Stream says,
	// or refuses.
	Auto bool
}

// overHold says whether a training holding its rows, estimated est,
// exceeds the budget: the rows more than Hold, or the whole more than
// Limit.
func (b MemoryBudget) overHold(est Estimate) bool {
	return (b.Hold > 0 && est.Held-est.Streamed > b.Hold) || (b.Limit > 0 && est.Held > b.Limit)
}

// MemoryError is a training refused because its estimated need exceeds
// the memory limit; its message names the flags that would fit.
type MemoryError struct {
	// What is being estimated, e.g. "holding 1,000,000 rows".
	What string
	Need int64
	// AtLeast says that Need is a lower bound: the rows were not all read.
	AtLeast   bool
	Limit     int64
	LimitFrom string
	// Alternatives say what would fit, e.g. "--stream (about 300 MB)".
	Alternatives []string
}

func (e *MemoryError) Error() string {
	about := "about"
	if e.AtLeast {
		about = "more than"
	}
	msg := fmt.Sprintf("%s needs %s %s, more than the memory limit of %s (%s)", e.What, about, Bytes(e.Need), Bytes(e.Limit), e.LimitFrom)
	for i, a := range e.Alternatives {
		if i == 0 {
			msg += ": give "
		} else {
			msg += ", or "
		}
		msg += a
	}
	return msg
}

// Bytes formats a byte count in decimal units, as "1.5 GB".
func Bytes(n int64) string {
	v := float64(n)
	for _, unit := range []string{"B", "kB", "MB", "GB", "TB"} {
		if v < 1000 || unit == "TB" {
			if unit == "B" {
				return fmt.Sprintf("%d B", n)
			}
			return fmt.Sprintf("%.3g %s", v, unit)
		}
		v /= 1000
	}
	return ""
}

// The parts of EstimateTrain, each an upper estimate of the live heap.
const (
	// processBytes is the process itself, the decoders' buffers and the
	// Arrow batches in flight.
	processBytes = 160 << 20
	// heldRowBytes is a held row besides its values: its label and where it
	// came from (file and row, for the errors).
	heldRowBytes = 8 + 32
	// chunkBytes are the features, their concatenation and the kernel of a
	// chunk of rows projected at once (about 4 MiB each, model.chunkRows).
	chunkBytes = 3 * 8 << 19
)

// Estimate is what a training job is estimated to need, in bytes.
type Estimate struct {
	// Held is the need of a training holding its rows in memory, Streamed
	// that of a streamed one: the sample, not the rows.
	Held, Streamed int64
	// Fit is the fit's part of both: statistics, feature maps and the
	// solvers' matrices, Tune included.
	Fit int64
	// Tune is what tuning from fold statistics adds to Fit (0 without
	// folds): the fold sums and the cross-validation's matrices.
	Tune int64
}

// tuneWorkerMats bounds the D×D matrices one goroutine of the
// cross-validation (model.Accumulator.Tune, a fold at a time) holds: the
// other folds' sums and their centred copy, a cold start's solver and a
// head's (about ten each), and the held-out sums and the shifted system
// of the fixed-metric fits. Fits of a fixed metric hold about half.
const tuneWorkerMats = 26

// EstimateTrain estimates what training on rows rows of views whose
// dimensions add to dims needs with p landmarks per view, k target columns
// (classes of a one-vs-all model, else 1) and a streamed sample of sample
// rows. The values held take 8 bytes each, twice over while their slices
// grow; the fit holds the statistics S (D×D, D = views·p, with its
// residues and centred copies) and about ten D×D matrices per solver, one
// for the shared start and one for each head fitted at once (one per CPU).
// It is EstimateTrainFolds of one fold: a training that does not tune.
func EstimateTrain(rows int64, views, dims, p, k, sample int) Estimate {
	return EstimateTrainFolds(rows, views, dims, p, k, sample, 1)
}

// EstimateTrainFolds is EstimateTrain for a training that keeps folds
// fold sums and tunes from them (TrainJob.Tune) when folds > 1: each fold
// keeps its own S and residues (2·folds·D² numbers, O(K·(vp)²)), and the
// cross-validation fits on up to min(folds, CPUs) goroutines at once,
// tuneWorkerMats D×D matrices each, before the chosen candidate's fit.
func EstimateTrainFolds(rows int64, views, dims, p, k, sample, folds int) Estimate {
	d := float64(views) * float64(p)
	workers := float64(min(runtime.GOMAXPROCS(0), max(k, 1)))
	mats := 5 + 10*(1+workers)
	feats := float64(views) * 4 * float64(p) * float64(p)
	var tune float64
	if folds > 1 {
		cv := float64(min(runtime.GOMAXPROCS(0), folds))
		tune = 8 * (2*float64(folds) + tuneWorkerMats*cv) * d * d
	}
	fit := 8*(mats*d*d+feats+d*float64(k)*4) + chunkBytes + tune
	held := float64(rows) * (16*float64(dims) + heldRowBytes)
	streamed := float64(min(int64(sample), rows)) * 16 * float64(dims)
	clamp := func(v float64) int64 { return int64(min(v, math.MaxInt64/2)) }
	return Estimate{
		Held:     clamp(processBytes + held + fit),
		Streamed: clamp(processBytes + streamed + fit),
		Fit:      clamp(fit),
		Tune:     clamp(tune),
	}
}

// landmarkCount is the landmark count p of a training on rows rows:
// Config.Landmarks as a count, refused above the rows rather than quietly
// lowered, or as a fraction of the rows, at most MaxLandmarks when that is
// set (bounded says it did bound it).
func (job TrainJob) landmarkCount(rows int64) (p int, bounded bool, err error) {
	l := job.Config.Landmarks
	if l > 1 && l > float64(rows) {
		return 0, false, fmt.Errorf("landmarks %d: more than the %d training rows; give at most %d, or a fraction of the rows (default %g)",
			int64(l), rows, rows, model.DefaultLandmarks)
	}
	if p, err = transform.LandmarkCount(int(min(rows, math.MaxInt32)), l); err != nil {
		return 0, false, err
	}
	if l <= 1 && job.MaxLandmarks > 0 && p > job.MaxLandmarks {
		return job.MaxLandmarks, true, nil
	}
	return p, false, nil
}

// resolveLandmarks is the configuration with the landmark count of a
// training on rows rows: as configured, or the bounded count (said in the
// log) when MaxLandmarks bounds the fraction.
func (job TrainJob) resolveLandmarks(rows int64) (model.TrainConfig, int, error) {
	cfg := job.Config
	p, bounded, err := job.landmarkCount(rows)
	if err != nil {
		return cfg, 0, err
	}
	if bounded {
		job.Logger.Info("landmarks bounded: the default share of the rows is at most a bounded count per view (give --landmarks to choose)",
			"fraction", cfg.Landmarks, "rows", rows, "landmarks", p)
		cfg.Landmarks = float64(p)
	}
	return cfg, p, nil
}

// estimate is EstimateTrainFolds for the job's views, rows rows, p
// landmarks per view and folds (one unless it tunes).
func (job TrainJob) estimate(rows int64, p int) Estimate {
	dims := job.Spec.Dims()
	total := 0
	for _, d := range dims {
		total += d
	}
	folds := 1
	if job.tuning() {
		folds = job.folds()
	}
	return EstimateTrainFolds(rows, len(dims), total, p, outputsGuess, job.sampleSize(), folds)
}

// landmarksGuess is the landmark count per view before the rows are
// counted: the count configured, else the bound on the fraction, else 0.
func (job TrainJob) landmarksGuess() int {
	if l := job.Config.Landmarks; l > 1 {
		return int(min(l, math.MaxInt32))
	}
	return job.MaxLandmarks
}

// sampleSize is the rows a streamed training keeps.
func (job TrainJob) sampleSize() int {
	if job.SampleRows > 0 {
		return job.SampleRows
	}
	return DefaultSampleRows
}

// outputsGuess is the target columns of a fit before the labels are read:
// one, or the grid's worth; a one-vs-all fit of C classes has C heads but
// fits min(C, CPUs) at once, which EstimateTrain counts.
const outputsGuess = 1

// planMemory decides, from rows (0: not known), whether the job streams
// and refuses it when even that would exceed the limit. It returns the job
// as it will run.
func (job TrainJob) planMemory(rows int64) (TrainJob, error) {
	b := job.Memory
	if rows <= 0 || job.Like != nil {
		// Unknown rows are checked once read; a training like a base holds
		// or streams its rows through the base's fixed features.
		return job, nil
	}
	p, _, err := job.landmarkCount(rows)
	if err != nil {
		return job, err
	}
	if job.Stream {
		return job, job.checkStreamed(rows, p)
	}
	est := job.estimate(rows, p)
	if !b.Auto || !b.overHold(est) {
		return job, job.checkHeld(rows, est)
	}
	if len(job.Grid) == 0 {
		if err := job.checkStreamed(rows, p); err != nil {
			return job, err
		}
		job.Logger.Warn("streaming the rows: holding them would need more memory than allowed, so they are read twice instead (as with --stream)",
			"rows", rows, "held_need", Bytes(est.Held), "rows_allowed", Bytes(b.Hold), "limit", Bytes(b.Limit), "streamed_need", Bytes(est.Streamed), "landmarks", p)
		job.Stream = true
		return job, nil
	}
	// Held by request (--stream=false), or for a grid's cross-validation,
	// within the limit.
	return job, job.checkHeld(rows, est)
}

// checkHeld refuses a training holding rows rows whose estimate exceeds
// the limit.
func (job TrainJob) checkHeld(rows int64, est Estimate) error {
	b := job.Memory
	job.Logger.Debug("memory estimate", "rows", rows, "held_need", est.Held, "tune", est.Tune, "limit", b.Limit)
	if b.Limit == 0 || est.Held <= b.Limit {
		return nil
	}
	what := fmt.Sprintf("holding %d rows in memory", rows)
	if est.Tune > 0 {
		what += fmt.Sprintf(" and tuning over %d folds (%s)", job.folds(), Bytes(est.Tune))
	}
	e := &MemoryError{What: what, Need: est.Held, Limit: b.Limit, LimitFrom: b.LimitFrom}
	if len(job.Grid) == 0 && job.Like == nil && est.Streamed <= b.Limit {
		e.Alternatives = append(e.Alternatives, fmt.Sprintf("--stream (about %s)", Bytes(est.Streamed)))
	}
	e.Alternatives = append(e.Alternatives, "--memory-limit "+flagBytes(roundUp(est.Held)))
	return e
}

// checkStreamed refuses a streamed training of rows rows with p landmarks
// per view whose estimate exceeds the limit, naming the landmark count
// that would fit.
func (job TrainJob) checkStreamed(rows int64, p int) error {
	b := job.Memory
	if b.Limit == 0 {
		return nil
	}
	est := job.estimate(rows, p)
	job.Logger.Debug("memory estimate", "rows", rows, "landmarks", p, "streamed_need", est.Streamed, "tune", est.Tune, "limit", b.Limit)
	if est.Streamed <= b.Limit {
		return nil
	}
	what := fmt.Sprintf("a streamed fit of %d views × %d landmarks", len(job.Spec.Views), p)
	if est.Tune > 0 {
		what += fmt.Sprintf(" tuning over %d folds (%s)", job.folds(), Bytes(est.Tune))
	}
	e := &MemoryError{What: what, Need: est.Streamed, Limit: b.Limit, LimitFrom: b.LimitFrom}
	lo, hi := 1, p // the largest count that fits, by bisection
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if job.estimate(rows, mid).Streamed <= b.Limit {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	if lo >= 2 && job.estimate(rows, lo).Streamed <= b.Limit {
		e.Alternatives = append(e.Alternatives, fmt.Sprintf("--landmarks %d", lo))
	}
	e.Alternatives = append(e.Alternatives, "--memory-limit "+flagBytes(roundUp(est.Streamed)))
	return e
}

// flagBytes is Bytes as a flag's value: "1.5GB".
func flagBytes(n int64) string { return strings.ReplaceAll(Bytes(n), " ", "") }

// roundUp rounds a byte count up to two significant digits, so that the
// figure a message proposes covers the need.
func roundUp(n int64) int64 {
	unit := int64(1)
	for n/unit >= 100 {
		unit *= 10
	}
	return (n + unit - 1) / unit * unit
}
