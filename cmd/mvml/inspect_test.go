package main

import (
	"cmp"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/plot/plotutil"
)

// decodePNG reads a PNG file the test expects.
func decodePNG(t *testing.T, path string) image.Image {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return img
}

func luminance(c color.Color) float64 {
	r, g, b, _ := c.RGBA()
	return (0.2126*float64(r) + 0.7152*float64(g) + 0.0722*float64(b)) / 257
}

// countColour counts the pixels of img within 30 of c in every channel.
func countColour(img image.Image, c color.Color) int {
	wr, wg, wb, _ := c.RGBA()
	near := func(a, b uint32) bool { return max(a, b)-min(a, b) <= 30*257 }
	n := 0
	bounds := img.Bounds()
	for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			r, g, b, _ := img.At(x, y).RGBA()
			if near(r, wr) && near(g, wg) && near(b, wb) {
				n++
			}
		}
	}
	return n
}

// inspect --format json writes the whole description as one JSON document
// on stdout; --plot draws |Ã| with its colour scale and --plot-trace the
// objective per iteration of every head.
func TestInspectJSONAndPlots(t *testing.T) {
	dir := t.TempDir()
	spec, data := fixture(t, dir, "data.csv", classSpec, 150, 10, nil)
	modelPath := filepath.Join(dir, "m.mvml")
	mustRun(t, "train", "--input", data, "--views", spec, "--model", modelPath, "--landmarks", "20", "--learn-w")
	heat, trace := filepath.Join(dir, "a.png"), filepath.Join(dir, "trace.png")
	stdout, stderr := mustRun(t, "inspect", "--model", modelPath, "--format", "json", "--plot", heat, "--plot-trace", trace)

	var doc modelDoc
	dec := json.NewDecoder(strings.NewReader(stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil || dec.More() {
		t.Fatalf("stdout is not one JSON document (%v):\n%s", err, stdout)
	}
	if !strings.Contains(stderr, "a.png") || !strings.Contains(stderr, "trace.png") {
		t.Errorf("stderr does not say what was drawn: %s", stderr)
	}
	if len(doc.Version) != 12 || doc.Task != "classification" || len(doc.Classes) != 3 || doc.Training.Rows != 150 || !doc.Config.Fit.LearnW ||
		doc.Config.Landmarks != 20 || doc.Mu <= 0 {
		t.Errorf("model: %+v", doc)
	}
	var names []string
	for _, v := range doc.Views {
		names = append(names, v.Name)
		if v.Landmarks != 20 || v.Rank < 1 || v.Rank > 20 || v.Kernel.Type != "rbf" || v.Kernel.Gamma <= 0 {
			t.Errorf("view %+v", v)
		}
	}
	if !slices.Equal(names, []string{"a", "b"}) || doc.Views[0].Dim != 3 || doc.Views[1].Dim != 2 {
		t.Errorf("views %+v", doc.Views)
	}
	if len(doc.Heads) != 3 {
		t.Fatalf("%d heads, want one per class", len(doc.Heads))
	}
	for h, hd := range doc.Heads {
		tr := hd.Trace.Objective
		if hd.Class == nil || *hd.Class != doc.Classes[h] || len(hd.W) != 2 || len(hd.Intercept) != 1 || len(hd.BlockNorms) != 2 || len(hd.BlockNorms[1]) != 2 ||
			len(tr) != hd.Trace.Iterations+1 || !slices.IsSortedFunc(tr, func(a, b float64) int { return cmp.Compare(b, a) }) {
			t.Errorf("head %d: %+v", h, hd)
		}
		if math.Abs(hd.BlockNorms[0][1]-hd.BlockNorms[1][0]) > 1e-12 || hd.BlockNorms[0][0] <= 0 {
			t.Errorf("head %d: block norms %v, want symmetric and positive", h, hd.BlockNorms)
		}
	}

	img := decodePNG(t, heat)
	if b := img.Bounds(); b.Dx() != 720 || b.Dy() != 576 {
		t.Fatalf("heat map of %v, want 720×576 (7.5×6 in at 96 dpi)", b)
	}
	// The colour scale is a column on the right whose colours run from
	// light at the top to black at the bottom.
	bestX, bestColours := 0, 0
	for x := 720 - 100; x < 720; x++ {
		seen := map[color.Color]bool{}
		for y := range 576 {
			seen[img.At(x, y)] = true
		}
		if len(seen) > bestColours {
			bestX, bestColours = x, len(seen)
		}
	}
	top, bottom := luminance(img.At(bestX, 576/5)), luminance(img.At(bestX, 576*4/5))
	if bestColours < 100 || top < bottom+100 {
		t.Errorf("no colour scale: the column of most colours on the right (x %d) has %d, luminance %.0f at the top and %.0f at the bottom",
			bestX, bestColours, top, bottom)
	}
	// The view boundaries are cyan lines across the map.
	if n := countColour(img, color.RGBA{G: 200, B: 255, A: 255}); n < 500 {
		t.Errorf("%d cyan pixels of the view boundaries", n)
	}

	img = decodePNG(t, trace)
	if b := img.Bounds(); b.Dx() != 672 || b.Dy() != 432 {
		t.Fatalf("trace plot of %v, want 672×432", b)
	}
	for h := range 3 {
		if n := countColour(img, plotutil.Color(h)); n < 50 {
			t.Errorf("%d pixels of the line of head %d", n, h+1)
		}
	}

	// Other formats by the file's extension; a wrong --format is refused.
	svg := filepath.Join(dir, "a.svg")
	mustRun(t, "inspect", "--model", modelPath, "--plot", svg)
	if b, err := os.ReadFile(svg); err != nil || !strings.Contains(string(b), "<svg") {
		t.Errorf("no SVG written: %v", err)
	}
	if code, _, stderr := mvml(t, "inspect", "--model", modelPath, "--format", "yaml"); code != exitUsage || !strings.Contains(stderr, "want text or json") {
		t.Errorf("--format yaml: exit %d, %s", code, stderr)
	}
}
