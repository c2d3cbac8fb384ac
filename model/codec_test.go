package model

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"os"
	"reflect"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/mvml/mvml/schemas"
)

// format1Fixture is a model file written by the build before format 2
// (testdata/format1.mvml, trained with λ 0.05 and every other value left
// to its default, which format 1 wrote as 0), with rows and the decisions
// that build gave them.
type format1Fixture struct {
	Version string `json:"version"`
	Rows    []struct {
		Views    [][]float64 `json:"views"`
		Decision []float64   `json:"decision"`
	} `json:"rows"`
}

func readFormat1(t *testing.T) (*Model, format1Fixture) {
	t.Helper()
	data, err := os.ReadFile("testdata/format1.mvml")
	if err != nil {
		t.Fatal(err)
	}
	m, err := Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("format 1 file: %v", err)
	}
	var fx format1Fixture
	raw, err := os.ReadFile("testdata/format1_scores.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &fx); err != nil {
		t.Fatal(err)
	}
	return m, fx
}

// A format 1 file still loads, scores as it did (bit for bit with gonum's
// BLAS, to 1e-10 with OpenBLAS), and its zeros read as the defaults they
// meant, so that a refit of it fits with the same values.
func TestFormat1FileStillLoads(t *testing.T) {
	m, fx := readFormat1(t)
	if m.Version != fx.Version {
		t.Errorf("version %s, the file says %s", m.Version, fx.Version)
	}
	want := trainWith(func(c *TrainConfig) { c.Landmarks, c.Seed, c.Fit.Lambda = 9, 2, 0.05 })
	if got, _ := json.Marshal(m.Config); string(got) != string(must(json.Marshal(want))) {
		t.Errorf("config %s, want %s", got, must(json.Marshal(want)))
	}
	if err := m.Config.Validate(); err != nil {
		t.Errorf("config of a format 1 file: %v", err)
	}
	s := m.NewScorer()
	for i, r := range fx.Rows {
		var dec mat.Dense
		views := []*mat.Dense{mat.NewDense(1, len(r.Views[0]), r.Views[0]), mat.NewDense(1, len(r.Views[1]), r.Views[1])}
		s.Score(&dec, nil, views)
		for c, v := range r.Decision {
			if got := dec.At(0, c); got != v && !(math.Abs(got-v) <= blasRounding*max(1, math.Abs(v))) {
				t.Errorf("row %d output %d: decision %v, the format 1 build gave %v", i, c, got, v)
			}
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// Models that score differently have different versions, also when their
// arrays are equal: relabelled classes, or the same 0/1 labels learned as
// a regression (whose standardised target is the same ±1).
func TestVersionIdentifiesTheModel(t *testing.T) {
	views, labels := toyViews(31, 90)
	// Balanced 0/1 labels: standardised as a regression target they are
	// the ±1 of the binary encoding.
	binary := make([]float64, len(labels))
	relabelled := make([]float64, len(labels))
	signed := make([]float64, len(labels))
	for i := range labels {
		binary[i], relabelled[i], signed[i] = float64(i%2), float64(5+2*(i%2)), float64(2*(i%2)-1)
	}
	cfg := trainWith(func(c *TrainConfig) { c.Landmarks, c.Seed = 20, 3 })
	train := func(task schemas.Task, labels []float64, cfg TrainConfig) *Model {
		t.Helper()
		m, err := Train(context.Background(), testSpec(task, 2, 3), views, labels, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	base := train(schemas.Classification, binary, cfg)
	for _, tc := range []struct {
		name  string
		model *Model
	}{
		{"classes 0/1 relabelled 5/7", train(schemas.Classification, relabelled, cfg)},
		{"the same labels as a regression", train(schemas.Regression, binary, cfg)},
		{"the same ±1 targets as a regression", train(schemas.Regression, signed, cfg)},
		{"another configuration", train(schemas.Classification, binary, trainWith(func(c *TrainConfig) {
			c.Landmarks, c.Seed, c.Fit.MaxCondGrowth = 20, 3, 1e5
		}))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.model.Version == base.Version {
				t.Errorf("version %s for both models", base.Version)
			}
		})
	}
	// The ±1 regression's arrays equal the classifier's (its target has
	// mean 0 and scale 1, the binary encoding's): the collision the
	// arrays-only version of format 1 made.
	if reg := train(schemas.Regression, signed, cfg); reg.arraysHash() != base.arraysHash() {
		t.Fatal("the regression's arrays differ from the classifier's: the case does not show the collision")
	}
	// The training run's description is not part of the model.
	again := train(schemas.Classification, binary, cfg)
	again.Meta = Meta{Rows: 1, FitSeconds: 99, Created: "2000-01-01T00:00:00Z"}
	if v, err := again.identityHash(); err != nil || v != base.Version {
		t.Errorf("an identical refit with another description: version %s (%v), want %s", v, err, base.Version)
	}
}

// A format 1 model written back stays a format 1 file with its version and
// configuration.
func TestFormat1RoundTrip(t *testing.T) {
	m, fx := readFormat1(t)
	var buf bytes.Buffer
	if err := m.Encode(&buf); err != nil {
		t.Fatal(err)
	}
	if v := binary.LittleEndian.Uint32(buf.Bytes()[8:]); v != format1 {
		t.Errorf("written in format %d, want 1", v)
	}
	back, err := Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if back.Version != fx.Version || !reflect.DeepEqual(back.Config, m.Config) {
		t.Errorf("read back version %s config %+v, want %s %+v", back.Version, back.Config, fx.Version, m.Config)
	}
}

// A format 2 file whose header names another version than its content's
// is refused, as is one whose configuration was edited (checksum fixed).
func TestFormat2VersionChecked(t *testing.T) {
	m, _ := trainedToy(t)
	var buf bytes.Buffer
	if err := m.Encode(&buf); err != nil {
		t.Fatal(err)
	}
	if v := binary.LittleEndian.Uint32(buf.Bytes()[8:]); v != FormatVersion {
		t.Fatalf("written in format %d, want %d", v, FormatVersion)
	}
	for _, tc := range []struct{ name, from, to string }{
		{"classes", `"classes":[1,2,3]`, `"classes":[1,2,4]`},
		{"lambda", `"Lambda":0.1`, `"Lambda":0.2`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := bytes.Replace(buf.Bytes()[:buf.Len()-sha256.Size], []byte(tc.from), []byte(tc.to), 1)
			if bytes.Equal(data, buf.Bytes()[:buf.Len()-sha256.Size]) {
				t.Fatalf("%s not in the header", tc.from)
			}
			sum := sha256.Sum256(data)
			_, err := Decode(bytes.NewReader(append(data, sum[:]...)))
			if !errors.Is(err, ErrCorruptModel) || !strings.Contains(err.Error(), "hashes to version") {
				t.Errorf("error %v, want a version mismatch", err)
			}
		})
	}
}
