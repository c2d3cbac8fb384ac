package main

import (
	"context"
	"fmt"
	"image/color"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/palette/moreland"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/pipeline"
)

func runInspect(_ context.Context, a *app, args []string) error {
	fs := newFlagSet("inspect")
	modelPath := fs.String("model", "", "model `FILE` (required)")
	plotPath := fs.String("plot", "", "write a heat map of |Ã| with the view boundaries to `FILE` (.png, .svg or .pdf)")
	head := fs.Int("head", 1, "head whose Ã --plot draws (one per class for one-vs-rest models)")
	if err := parseFlags(a, fs, args); err != nil {
		return err
	}
	if err := required("model", *modelPath); err != nil {
		return err
	}
	if *plotPath != "" {
		err := pipeline.CheckFiles([]pipeline.File{{Role: "model file", Path: *modelPath}}, []pipeline.File{{Role: "plot", Path: *plotPath}})
		if err != nil {
			return err
		}
	}
	m, err := pipeline.LoadModel(*modelPath)
	if err != nil {
		return err
	}
	if *head < 1 || *head > len(m.Heads) {
		return usagef("--head %d: the model has heads 1 to %d", *head, len(m.Heads))
	}
	if err := printModel(a.stdout, m); err != nil {
		return err
	}
	if *plotPath == "" {
		return nil
	}
	if err := plotMetric(*plotPath, m, *head-1); err != nil {
		return fmt.Errorf("plot %s: %w", *plotPath, err)
	}
	fmt.Fprintf(a.stdout, "\n|Ã| of head %d drawn in %s\n", *head, *plotPath)
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
	for h := range m.Heads {
		fmt.Fprintf(w, "\n‖Ã_lm‖_F, head %s: the weight of every view pair in the metric\n", headName(m, h))
		if err := printBlockNorms(w, viewNames(m), m.BlockNorms(h)); err != nil {
			return err
		}
	}
	return nil
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
// boundaries and the view names on the axes.
func plotMetric(path string, m *model.Model, h int) error {
	a := m.Heads[h].A
	n := a.SymmetricDim()
	p := plot.New()
	p.Title.Text = fmt.Sprintf("|Ã|, head %s (model %s); colours saturate at the 99th percentile", headName(m, h), m.Version)
	pal := moreland.ExtendedBlackBody().Palette(255)
	heat := plotter.NewHeatMap(metricGrid{a: a, n: n}, pal)
	// A few diagonal entries dominate Ã; saturating them lets the
	// structure of the off-diagonal blocks show.
	heat.Min, heat.Max = 0, saturation(a)
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
	return p.Save(6*vg.Inch, 6*vg.Inch, path)
}
