package eval

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// sklearnFolds is testdata/sklearn_folds.json, written by
// scripts/sklearn-folds.py from scikit-learn and numpy themselves.
type sklearnFolds struct {
	Generator string `json:"generator"`
	Cases     []struct {
		Labels   []float64 `json:"labels"`
		K        int       `json:"k"`
		Seed     uint64    `json:"seed"`
		Stratify bool      `json:"stratify"`
		Folds    [][]int   `json:"folds"`
	} `json:"cases"`
	Uint32 map[string][]uint32 `json:"uint32"`
}

func loadSklearnFolds(t *testing.T) sklearnFolds {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "sklearn_folds.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f sklearnFolds
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestFoldsMatchScikitLearn(t *testing.T) {
	ref := loadSklearnFolds(t)
	for i, c := range ref.Cases {
		name := fmt.Sprintf("%d/n=%d,k=%d,seed=%d,stratify=%t", i, len(c.Labels), c.K, c.Seed, c.Stratify)
		t.Run(name, func(t *testing.T) {
			got, err := Folds(c.Labels, c.K, c.Seed, c.Stratify)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.EqualFunc(got, c.Folds, slices.Equal) {
				t.Errorf("folds differ from %s", ref.Generator)
			}
		})
	}
}

func TestMT19937MatchesNumpy(t *testing.T) {
	for seed, want := range loadSklearnFolds(t).Uint32 {
		var s uint32
		fmt.Sscan(seed, &s)
		rng := newMT19937(s)
		for i, w := range want {
			if got := rng.uint32(); got != w {
				t.Fatalf("seed %s, draw %d: %d, numpy gives %d", seed, i, got, w)
			}
		}
	}
}

func TestFoldsErrors(t *testing.T) {
	for _, c := range []struct {
		name     string
		labels   []float64
		k        int
		seed     uint64
		stratify bool
	}{
		{"one fold", []float64{1, 2, 1, 2}, 1, 0, true},
		{"more folds than rows", []float64{1, 2, 1}, 4, 0, false},
		{"no class as large as k", []float64{1, 2, 3, 1, 2, 3}, 3, 0, true},
		{"seed beyond 32 bits", []float64{1, 2, 1, 2}, 2, 1 << 32, true},
	} {
		if _, err := Folds(c.labels, c.k, c.seed, c.stratify); err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
}
