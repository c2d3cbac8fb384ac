package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/memory"
	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"

	"github.com/mvml/mvml/eval"
	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/pipeline"
	"github.com/mvml/mvml/schemas"
	"github.com/mvml/mvml/sink"
)

// The demo's data set follows the toy of the paper's §3.3 (a view made
// from another by a shear and a rotation) and extends it so that views
// complement each other: a latent 2-D point lies on one of c interleaved
// spiral arms (its class), and each view sees it through its own map and
// its own noise:
//
//	plain:   x + ε₁
//	sheared: R(35°)·[1 1.2; 0 1]·x + ε₂   (the paper's toy transformation)
//	warped:  (x₁|x₁|/2, sin(1.5·x₂) + 0.3·x₁) + ε₃   (a folding nonlinear view)
//
// The noise blurs the arms in every single view, but it is independent
// across views, so a model reading the three together separates the classes
// better than any one view.
const demoSpecJSON = `{
  "name": "demo",
  "task": "classification",
  "views": [
    {"name": "plain", "prefix": "plain_", "dim": 2},
    {"name": "sheared", "prefix": "sheared_", "dim": 2},
    {"name": "warped", "prefix": "warped_", "dim": 2}
  ]
}`

// demoNoise is the standard deviation of every view's noise.
const demoNoise = 0.4

// demoRows is a generated data set: views[l] is rows×2, row-major.
type demoRows struct {
	ids    []int64
	labels []float64
	views  [3][]float64
}

func generateDemo(n, classes int, seed uint64) *demoRows {
	rng := rand.New(rand.NewPCG(seed, 0x6d766d6c))
	d := &demoRows{}
	shearRot := mat.NewDense(2, 2, nil)
	c, s := math.Cos(35*math.Pi/180), math.Sin(35*math.Pi/180)
	shearRot.Mul(mat.NewDense(2, 2, []float64{c, -s, s, c}), mat.NewDense(2, 2, []float64{1, 1.2, 0, 1}))
	noise := func() float64 { return demoNoise * rng.NormFloat64() }
	for i := range n {
		k := i % classes
		t := rng.Float64()
		r := 0.3 + 1.7*t
		theta := 2*math.Pi*float64(k)/float64(classes) + 3*t
		x1, x2 := r*math.Cos(theta), r*math.Sin(theta)
		d.ids = append(d.ids, int64(i))
		d.labels = append(d.labels, float64(k))
		d.views[0] = append(d.views[0], x1+noise(), x2+noise())
		d.views[1] = append(d.views[1],
			shearRot.At(0, 0)*x1+shearRot.At(0, 1)*x2+noise(),
			shearRot.At(1, 0)*x1+shearRot.At(1, 1)*x2+noise())
		d.views[2] = append(d.views[2], x1*math.Abs(x1)/2+noise(), math.Sin(1.5*x2)+0.3*x1+noise())
	}
	return d
}

// slice returns rows [lo, hi).
func (d *demoRows) slice(lo, hi int) *demoRows {
	out := &demoRows{ids: d.ids[lo:hi], labels: d.labels[lo:hi]}
	for l, v := range d.views {
		out.views[l] = v[2*lo : 2*hi]
	}
	return out
}

// record is d as a canonical record of spec.
func (d *demoRows) record(mem memory.Allocator, spec *schemas.ViewSpec) arrow.Record {
	b := schemas.NewRecordBuilder(mem, spec)
	defer b.Release()
	n := len(d.ids)
	b.Reserve(n)
	copy(b.IDs(), d.ids)
	copy(b.Labels(), d.labels)
	b.SetLabelsValid(0, n, true)
	for l, v := range d.views {
		copy(b.View(l), v)
	}
	b.SetLen(n)
	return b.NewRecord()
}

// writeParquet writes d in the flat layout (plain_0, plain_1, ...), as a
// feature store would hand it over.
func (d *demoRows) writeParquet(ctx context.Context, path string, spec *schemas.ViewSpec) error {
	flat := make(map[string][]string)
	for l := range spec.Views {
		flat[spec.Views[l].Name] = spec.Views[l].ColumnNames()
	}
	out, err := sink.Create(path, schemas.InputSchema(spec), sink.ParquetOptions{Flatten: flat})
	if err != nil {
		return err
	}
	rec := d.record(memory.NewGoAllocator(), spec)
	defer rec.Release()
	if err := out.Write(ctx, rec); err != nil {
		return fmt.Errorf("%w (%w)", err, out.Close(ctx))
	}
	return out.Close(ctx)
}

func runDemo(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet("demo")
	rows := fs.Int("rows", 1500, "rows to generate: two thirds to train on, one third to test")
	classes := fs.Int("classes", 3, "number of classes, 2 to 4")
	dataSeed := fs.Uint64("data-seed", 1, "seed of the generated data")
	keep := fs.String("keep", "", "write the files into `DIR` and keep them: a new or empty directory, unless --force (default: a temporary directory, removed at the end)")
	force := fs.Bool("force", false, "with --keep, write the demo's files into a directory that is not empty, replacing the demo's own files there (views.json, train.parquet, test.parquet, records.jsonl, model.mvml, scores.parquet)")
	withKafka := fs.Bool("kafka", true, "then serve the test rows through Kafka on an in-process broker, as `mvml serve` does")
	fit := registerFit(fs)
	if err := parseFlags(a, fs, args); err != nil {
		return err
	}
	if *rows < 60 {
		return usagef("--rows %d: want at least 60", *rows)
	}
	if *classes < 2 || *classes > 4 {
		return usagef("--classes %d: want 2 to 4", *classes)
	}
	if *force && *keep == "" {
		return usagef("--force is for --keep DIR: the default temporary directory is always new")
	}
	dir := *keep
	if dir == "" {
		tmp, err := os.MkdirTemp("", "mvml-demo-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	specPath, trainPath, testPath := filepath.Join(dir, "views.json"), filepath.Join(dir, "train.parquet"), filepath.Join(dir, "test.parquet")
	modelPath, scoresPath := filepath.Join(dir, "model.mvml"), filepath.Join(dir, "scores.parquet")
	recordsPath := filepath.Join(dir, "records.jsonl")
	// Names linked to one another in a kept directory would make one file
	// overwrite another.
	err := pipeline.CheckFiles(nil, []pipeline.File{
		{Role: "view spec", Path: specPath}, {Role: "training data", Path: trainPath}, {Role: "test data", Path: testPath},
		{Role: "model file", Path: modelPath}, {Role: "scores", Path: scoresPath}, {Role: "records", Path: recordsPath},
	})
	if err != nil {
		return err
	}
	if *keep != "" && !*force {
		if err := checkEmptyDir(dir); err != nil {
			return err
		}
	}
	spec, err := schemas.ParseViewSpec([]byte(demoSpecJSON))
	if err != nil {
		return err
	}
	if err := os.WriteFile(specPath, []byte(demoSpecJSON+"\n"), 0o644); err != nil {
		return err
	}
	data := generateDemo(*rows, *classes, *dataSeed)
	split := 2 * *rows / 3
	if err := data.slice(0, split).writeParquet(ctx, trainPath, spec); err != nil {
		return err
	}
	if err := data.slice(split, *rows).writeParquet(ctx, testPath, spec); err != nil {
		return err
	}
	// The test rows once more as the JSON records of a Kafka topic, one per
	// line, for a producer such as kcat -l to send.
	records := append(bytes.Join(demoRecords(spec, data.slice(split, *rows)), []byte("\n")), '\n')
	if err := os.WriteFile(recordsPath, records, 0o644); err != nil {
		return err
	}
	where := "in " + dir
	if *keep == "" {
		// The directory is gone when the demo ends: naming it would send
		// the user looking for files that are not there.
		where = "in a temporary directory removed at the end; --keep DIR keeps the files"
	}
	fmt.Fprintf(a.stdout, "generated %d rows of %d classes on interleaved spirals, seen through 3 noisy views: %d to train, %d to test (%s)\n\n",
		*rows, *classes, split, *rows-split, where)

	// The demo tells its own story on stdout; the jobs' log lines would
	// only interleave with it.
	var opts pipeline.Options
	cfg, err := fit.config(len(spec.Views))
	if err != nil {
		return err
	}
	m, err := pipeline.Train(ctx, pipeline.TrainJob{Spec: spec, Inputs: []string{trainPath}, Config: cfg, Output: modelPath, Options: opts})
	if err != nil {
		return err
	}
	counts, err := pipeline.Score(ctx, pipeline.ScoreConfig{Model: m, Inputs: []string{testPath}, Output: scoresPath, Contributions: true, Options: opts})
	if err != nil {
		return err
	}
	mvml, err := demoAccuracy(ctx, m, testPath, opts)
	if err != nil {
		return err
	}
	single := make([]float64, len(spec.Views))
	for l := range spec.Views {
		one := *spec
		one.Views = spec.Views[l : l+1]
		cfg1, err := fit.config(1)
		if err != nil {
			return err
		}
		m1, err := pipeline.Train(ctx, pipeline.TrainJob{Spec: &one, Inputs: []string{trainPath}, Config: cfg1, Options: opts})
		if err != nil {
			return fmt.Errorf("view %s alone: %w", spec.Views[l].Name, err)
		}
		if single[l], err = demoAccuracy(ctx, m1, testPath, opts); err != nil {
			return err
		}
	}
	scoresName := filepath.Join(dir, filepath.Base(scoresPath))
	if *keep == "" {
		scoresName = ""
	}
	if err := printDemo(a.stdout, m, mvml, single, counts, scoresName); err != nil {
		return err
	}
	if !*withKafka {
		return nil
	}
	return demoKafka(ctx, a.stdout, m, data.slice(split, *rows))
}

func demoAccuracy(ctx context.Context, m *model.Model, path string, opts pipeline.Options) (float64, error) {
	truth, pred, err := pipeline.PredictLabelled(ctx, m, []string{path}, opts)
	if err != nil {
		return 0, err
	}
	return eval.Compute(m.Spec.Task, truth, pred).Accuracy, nil
}

// checkEmptyDir refuses a kept directory that holds anything: the demo
// would replace files of the same names without a word.
func checkEmptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	if len(entries) == 0 {
		return nil
	}
	names := make([]string, 0, 3)
	for _, e := range entries[:min(3, len(entries))] {
		names = append(names, e.Name())
	}
	more := ""
	if len(entries) > len(names) {
		more = fmt.Sprintf(" and %d more", len(entries)-len(names))
	}
	return usagef("--keep %s: the directory is not empty (%s%s): give a new or empty directory, or --force to replace the demo's files in it", dir, strings.Join(names, ", "), more)
}

// printDemo tells the demo's results; scoresPath is where the scores are
// kept, "" when they are not.
func printDemo(w io.Writer, m *model.Model, mvml float64, single []float64, counts pipeline.Counts, scoresPath string) error {
	names := viewNames(m)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "model\ttest accuracy")
	fmt.Fprintf(tw, "MVML, all views\t%.3f\n", mvml)
	for l, acc := range single {
		fmt.Fprintf(tw, "view %s alone\t%.3f\n", names[l], acc)
	}
	best := floats.MaxIdx(single)
	if err := tw.Flush(); err != nil {
		return err
	}
	into := "(--keep DIR keeps them)"
	if scoresPath != "" {
		into = "into " + scoresPath
	}
	fmt.Fprintf(w, "\nMVML %+.1f points over the best single view (%s); %d test rows scored %s\n",
		100*(mvml-single[best]), names[best], counts.Scored, into)
	fmt.Fprintf(w, "\nview importance: ‖Ã_lm‖_F of every view pair, mean over the %d heads\n", len(m.Heads))
	mean := mat.NewDense(len(names), len(names), nil)
	for h := range m.Heads {
		mean.Add(mean, m.BlockNorms(h))
	}
	mean.Scale(1/float64(len(m.Heads)), mean)
	if err := printBlockNorms(w, names, mean); err != nil {
		return err
	}
	weights := make([]float64, len(names))
	for _, h := range m.Heads {
		for l, v := range h.W {
			weights[l] += v / float64(len(m.Heads))
		}
	}
	fmt.Fprintf(w, "view weights w (mean over heads): %s\n", formatWeights(weights))
	return nil
}
