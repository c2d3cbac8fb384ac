package main

import (
	"context"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/palette/moreland"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/pipeline"
	"github.com/mvml/mvml/registry"
)

func runInspect(_ context.Context, a *app, args []string) error {
	fs := newFlagSet("inspect")
	modelPath := fs.String("model", "", "model `FILE` (required)")
	plotPath := fs.String("plot", "", "write a heat map of |Ã| with the view boundaries and a colour scale to `FILE` (.png, .svg or .pdf)")
	tracePath := fs.String("plot-trace", "", "write the objective of every head per outer iteration of its fit to `FILE` (.png, .svg or .pdf)")
	head := fs.Int("head", 1, "head whose Ã --plot draws (one per class for one-vs-rest models)")
	format := fs.String("format", "text", "`FORMAT` of the description on stdout: text, or json (one document: views, kernels, w, block norms, fit traces, training run)")
	if err := parseFlags(a, fs, args); err != nil {
		return err
	}
	if err := required("model", *modelPath); err != nil {
		return err
	}
	if *format != "text" && *format != "json" {
		return usagef("--format %q: want text or json", *format)
	}
	var plots []pipeline.File
	if *plotPath != "" {
		plots = append(plots, pipeline.File{Role: "plot", Path: *plotPath})
	}
	if *tracePath != "" {
		plots = append(plots, pipeline.File{Role: "trace plot", Path: *tracePath})
	}
	if len(plots) > 0 {
		if err := pipeline.CheckFiles([]pipeline.File{{Role: "model file", Path: *modelPath}}, plots); err != nil {
			return err
		}
	}
	m, err := registry.LoadModel(*modelPath)
	if err != nil {
		return err
	}
	if *head < 1 || *head > len(m.Heads) {
		return usagef("--head %d: the model has heads 1 to %d", *head, len(m.Heads))
	}
	// With JSON on stdout, what was drawn is said on stderr.
	said := a.stdout
	if *format == "json" {
		said = a.stderr
		err = writeModelJSON(a.stdout, m)
	} else {
		err = printModel(a.stdout, m)
	}
	if err != nil {
		return err
	}
	if *plotPath != "" {
		if err := plotMetric(*plotPath, m, *head-1); err != nil {
			return fmt.Errorf("plot %s: %w", *plotPath, err)
		}
		fmt.Fprintf(said, "\n|Ã| of head %d drawn in %s\n", *head, *plotPath)
	}
	if *tracePath != "" {
		if err := plotTrace(*tracePath, m); err != nil {
			return fmt.Errorf("plot %s: %w", *tracePath, err)
		}
		fmt.Fprintf(said, "\nthe objective per iteration drawn in %s\n", *tracePath)
	}
	return nil
}

func printModel(w io.Writer, m *model.Model) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	cfg := m.Config
	fmt.Fprintf(tw, "model %s\n", m.Version)
	fmt.Fprintf(tw, "task\t%s", m.Spec.Task)
	if m.Classes != nil {
		fmt.Fprintf(tw, ", classes %s", joinFloats(m.Classes))
	}
	fmt.Fprintf(tw, "\ntrained\t%d rows", m.Meta.Rows)
	if m.Meta.Created != "" {
		fmt.Fprintf(tw, ", %s, fit %.2fs", m.Meta.Created, m.Meta.FitSeconds)
	}
	mu := fmt.Sprintf("%g", cfg.Fit.StepMu())
	if cfg.Fit.Mu == nil {
		mu = fmt.Sprintf("%g/eta = %s", model.DefaultMuEta, mu)
	}
	fmt.Fprintf(tw, "\nfit\tmode %s, lambda %g, eta %g, mu %s, learn-w %t, max-iter %d, tol %g\n",
		cfg.Fit.Mode, cfg.Fit.Lambda, cfg.Fit.Eta, mu, cfg.Fit.LearnW, cfg.Fit.MaxIter, cfg.Fit.Tol)
	fmt.Fprintf(tw, "features\tlandmarks %g (%d rows, seed %d), multiclass %s\n\n",
		cfg.Landmarks, len(m.Features.LandmarkRows), cfg.Seed, cfg.Multiclass)

	fmt.Fprintln(tw, "view\tdim\tlandmarks\trank\tkernel")
	for l, vm := range m.Features.Views {
		p, d := vm.Landmarks.Dims()
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\n", m.Spec.Views[l].Name, d, p, vm.Rank(), vm.Kernel)
	}
	fmt.Fprintf(tw, "\nhead\tw (%s)\titerations\tconverged\tobjective\tcond(Ã)\trefused steps (cond, not PD)\tjitter\n", strings.Join(viewNames(m), " "))
	for h, hd := range m.Heads {
		tr := hd.Trace
		objective := "-"
		if len(tr.Objective) > 0 {
			objective = fmt.Sprintf("%.4g → %.4g", tr.Objective[0], tr.Objective[len(tr.Objective)-1])
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%t\t%s\t%.3g\t%d, %d\t%g\n", headName(m, h), formatWeights(hd.W),
			tr.Iterations, tr.Converged, objective, tr.Cond, tr.CondLimited, tr.NotPD, tr.Jitter)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := explainConvergence(w, m); err != nil {
		return err
	}
	for h := range m.Heads {
		fmt.Fprintf(w, "\n‖Ã_lm‖_F, head %s: the weight of every view pair in the metric\n", headName(m, h))
		if err := printBlockNorms(w, viewNames(m), m.BlockNorms(h)); err != nil {
			return err
		}
	}
	if m.Meta.Tuning != nil {
		return printTuning(w, m.Meta.Tuning)
	}
	return nil
}

// printTuning prints the cross-validation table a model's hyper-parameters
// were chosen by: every candidate's squared loss on each fold held out,
// its total, and which was chosen.
func printTuning(w io.Writer, tun *model.Tuning) error {
	fmt.Fprintf(w, "\ntuned: %s chosen by exact %d-fold cross-validation on fold statistics (rows per fold %s)\n",
		tun.Table[tun.Chosen].Candidate, tun.Folds, joinFloats(tun.FoldRows))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprint(tw, "\tcandidate")
	for f := range tun.Folds {
		fmt.Fprintf(tw, "\tfold %d", f+1)
	}
	fmt.Fprintln(tw, "\ttotal\tper row")
	rows := 0.0
	for _, n := range tun.FoldRows {
		rows += n
	}
	for i, row := range tun.Table {
		mark := ""
		if i == tun.Chosen {
			mark = "*"
		}
		fmt.Fprintf(tw, "%s\t%s", mark, row.Candidate)
		if row.Err != "" {
			fmt.Fprintf(tw, "\tnot fitted: %s\n", row.Err)
			continue
		}
		for _, l := range row.FoldLoss {
			fmt.Fprintf(tw, "\t%.6g", l)
		}
		fmt.Fprintf(tw, "\t%.6g\t%.6g\n", row.Loss, row.Loss/rows)
	}
	return tw.Flush()
}

// tunedSummary is a line of what tuning chose: "lambda=0.01 (cv 0.123/row)",
// "-" for a model not tuned.
func tunedSummary(tun *model.Tuning) string {
	if tun == nil || tun.Chosen < 0 || tun.Chosen >= len(tun.Table) {
		return "-"
	}
	rows := 0.0
	for _, n := range tun.FoldRows {
		rows += n
	}
	row := tun.Table[tun.Chosen]
	return fmt.Sprintf("%s (cv %.4g/row)", row.Candidate, row.Loss/rows)
}

// explainConvergence says what "converged false" in the table of heads
// means and what to do about it: a head that ran every iteration of
// --max-iter without meeting --tol is a finished model, fitted less
// tightly than asked.
func explainConvergence(w io.Writer, m *model.Model) error {
	fit := m.Config.Fit
	var heads, last []string
	for h, hd := range m.Heads {
		tr := hd.Trace
		if tr.Converged {
			continue
		}
		heads = append(heads, headName(m, h))
		if n := len(tr.Objective); n >= 2 && tr.Objective[n-2] != 0 {
			last = append(last, fmt.Sprintf("%.2g%%", 100*(tr.Objective[n-2]-tr.Objective[n-1])/math.Abs(tr.Objective[n-2])))
		}
	}
	if len(heads) == 0 {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nconverged false (heads %s): the fit ran all --max-iter %d iterations without meeting --tol %g", strings.Join(heads, ", "), fit.MaxIter, fit.Tol)
	if fit.Tol == 0 {
		b.WriteString(" (tol 0 never stops early: false is expected).\n")
	} else {
		b.WriteString(", a relative decrease of the objective (or change of g̃ and Ã) per iteration below it")
		if len(last) == len(heads) {
			fmt.Fprintf(&b, "; the last iteration lowered the objective by %s", strings.Join(last, ", "))
		}
		b.WriteString(".\n")
	}
	b.WriteString("The model is complete and usable: it is the fit after its last iteration, and the objective never rises.\n")
	if fit.Tol > 0 {
		fmt.Fprintf(&b, "To fit it further, train again with a larger --max-iter (e.g. %d) or accept a looser --tol; compare the two with mvml eval or mvml cv.\n", 5*max(fit.MaxIter, 1))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func viewNames(m *model.Model) []string {
	names := make([]string, len(m.Spec.Views))
	for l := range m.Spec.Views {
		names[l] = m.Spec.Views[l].Name
	}
	return names
}

// headName says what a head predicts: a class against the rest, or all
// outputs.
func headName(m *model.Model, h int) string {
	if len(m.Heads) > 1 && len(m.Heads) == len(m.Classes) {
		return fmt.Sprintf("%d (class %g)", h+1, m.Classes[h])
	}
	return fmt.Sprint(h + 1)
}

func formatWeights(w []float64) string {
	parts := make([]string, len(w))
	for i, v := range w {
		parts[i] = fmt.Sprintf("%.3f", v)
	}
	return strings.Join(parts, " ")
}

func printBlockNorms(w io.Writer, names []string, norms *mat.Dense) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "\t%s\t\n", strings.Join(names, "\t"))
	for l, name := range names {
		fmt.Fprintf(tw, "%s", name)
		for k := range names {
			fmt.Fprintf(tw, "\t%.4g", norms.At(l, k))
		}
		fmt.Fprintln(tw, "\t")
	}
	return tw.Flush()
}

// metricGrid shows |Ã| as a grid whose first row is drawn at the top, as a
// matrix is read.
type metricGrid struct {
	a mat.Symmetric
	n int
}

func (g metricGrid) Dims() (c, r int)   { return g.n, g.n }
func (g metricGrid) Z(c, r int) float64 { return math.Abs(g.a.At(g.n-1-r, c)) }
func (g metricGrid) X(c int) float64    { return float64(c) }
func (g metricGrid) Y(r int) float64    { return float64(r) }

// saturation is the 99th percentile of |a_ij|, or the largest |a_ij| when
// that is 0.
func saturation(a mat.Symmetric) float64 {
	n := a.SymmetricDim()
	abs := make([]float64, 0, n*n)
	for i := range n {
		for j := range n {
			abs = append(abs, math.Abs(a.At(i, j)))
		}
	}
	slices.Sort(abs)
	if q := abs[(len(abs)-1)*99/100]; q > 0 {
		return q
	}
	return max(abs[len(abs)-1], math.SmallestNonzeroFloat64)
}

// plotMetric draws |Ã| of head h as a heat map, with lines at the view
// boundaries, the view names on the axes and the colour scale beside it.
func plotMetric(path string, m *model.Model, h int) error {
	a := m.Heads[h].A
	n := a.SymmetricDim()
	p := plot.New()
	p.Title.Text = fmt.Sprintf("|Ã|, head %s (model %s)", headName(m, h), m.Version)
	colours := moreland.ExtendedBlackBody()
	// A few diagonal entries dominate Ã; saturating them lets the
	// structure of the off-diagonal blocks show.
	colours.SetMin(0)
	colours.SetMax(saturation(a))
	pal := colours.Palette(255)
	heat := plotter.NewHeatMap(metricGrid{a: a, n: n}, pal)
	heat.Min, heat.Max = colours.Min(), colours.Max()
	heat.Overflow = pal.Colors()[len(pal.Colors())-1]
	heat.Rasterized = true // vector cells leave hairlines between them
	p.Add(heat)
	var xTicks, yTicks []plot.Tick
	edge := -0.5
	for l, r := range m.Features.Ranks() {
		name := m.Spec.Views[l].Name
		mid := edge + float64(r)/2
		xTicks = append(xTicks, plot.Tick{Value: mid, Label: name})
		yTicks = append(yTicks, plot.Tick{Value: float64(n-1) - mid, Label: name})
		edge += float64(r)
		if l == len(m.Features.Views)-1 {
			break
		}
		for _, pts := range []plotter.XYs{
			{{X: edge, Y: -0.5}, {X: edge, Y: float64(n) - 0.5}},
			{{X: -0.5, Y: float64(n-1) - edge}, {X: float64(n) - 0.5, Y: float64(n-1) - edge}},
		} {
			line, err := plotter.NewLine(pts)
			if err != nil {
				return err
			}
			// Cyan stands out on every colour of the black-body palette.
			line.Color = color.RGBA{G: 200, B: 255, A: 255}
			line.Width = vg.Points(1.5)
			p.Add(line)
		}
	}
	p.X.Tick.Marker = plot.ConstantTicks(xTicks)
	p.Y.Tick.Marker = plot.ConstantTicks(yTicks)
	p.X.Label.Text, p.Y.Label.Text = "view", "view"

	scale := plot.New()
	scale.Title.Text = "|a_ij|"
	scale.Add(&plotter.ColorBar{ColorMap: colours, Vertical: true})
	scale.HideX()
	scale.Y.Padding = 0
	// The top colour stands for every value from the 99th percentile up.
	scale.Y.Label.Text = "saturates at the 99th percentile"

	const width, height, bar = 7.5 * vg.Inch, 6 * vg.Inch, 1.5 * vg.Inch
	return saveCanvas(path, width, height, func(c draw.Canvas) {
		p.Draw(draw.Crop(c, 0, -bar, 0, 0))
		// The scale spans the heat map's height, clear of its title and
		// tick labels.
		scale.Draw(draw.Crop(c, width-bar+vg.Points(12), 0, vg.Points(30), -vg.Points(8)))
	})
}

// plotTrace draws the objective of every head after each outer iteration
// of its fit (iteration 0: the initial metric), the paper's convergence
// picture.
func plotTrace(path string, m *model.Model) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("objective per iteration (model %s)", m.Version)
	p.X.Label.Text, p.Y.Label.Text = "outer iteration", "objective"
	p.Legend.Top = true
	positive := true
	for h, hd := range m.Heads {
		tr := hd.Trace.Objective
		if len(tr) == 0 {
			continue
		}
		pts := make(plotter.XYs, len(tr))
		for i, v := range tr {
			pts[i] = plotter.XY{X: float64(i), Y: v}
			positive = positive && v > 0
		}
		line, points, err := plotter.NewLinePoints(pts)
		if err != nil {
			return err
		}
		line.Color = plotutil.Color(h)
		points.Color, points.Shape = plotutil.Color(h), plotutil.Shape(h)
		p.Add(line, points)
		if len(m.Heads) > 1 {
			p.Legend.Add("head "+headName(m, h), line, points)
		}
	}
	if positive {
		// Objectives fall over orders of magnitude early in a fit.
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	p.X.Tick.Marker = integerTicks{}
	return saveCanvas(path, 7*vg.Inch, 4.5*vg.Inch, p.Draw)
}

// integerTicks marks whole iterations only.
type integerTicks struct{}

func (integerTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for _, t := range (plot.DefaultTicks{}).Ticks(lo, hi) {
		if t.Value == math.Trunc(t.Value) {
			ticks = append(ticks, t)
		}
	}
	return ticks
}

// saveCanvas draws on a canvas of the format path's extension says (png,
// svg, pdf, …) and writes it to path.
func saveCanvas(path string, width, height vg.Length, drawOn func(draw.Canvas)) (err error) {
	c, err := draw.NewFormattedCanvas(width, height, strings.TrimPrefix(strings.ToLower(filepath.Ext(path)), "."))
	if err != nil {
		return err
	}
	drawOn(draw.New(c))
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := c.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
