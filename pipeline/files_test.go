package pipeline

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/pipeline/internal/pipelinetest"
	"github.com/mvml/mvml/registry"
)

// filesDir makes the files the CheckFiles cases name, in a new working
// directory, so that relative spellings can be tried:
//
//	in.csv       a file
//	link.csv     a symbolic link to in.csv
//	hard.csv     a hard link to in.csv
//	other.csv    another file
//	here         a symbolic link to the directory itself
//	sub/         a directory
//	plain        a file where a directory might be expected
func filesDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t.Chdir(dir)
	for _, name := range []string{"in.csv", "other.csv", "plain"} {
		if err := os.WriteFile(name, []byte("id,a_0\n1,2\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, step := range []error{
		os.Symlink("in.csv", "link.csv"),
		os.Link("in.csv", "hard.csv"),
		os.Symlink(dir, "here"),
		os.Mkdir("sub", 0o755),
	} {
		if step != nil {
			t.Fatal(step)
		}
	}
	return dir
}

func TestCheckFiles(t *testing.T) {
	dir := filesDir(t)
	in := func(paths ...string) []File {
		var fs []File
		for _, p := range paths {
			fs = append(fs, File{Role: "input", Path: p})
		}
		return fs
	}
	out := func(paths ...string) []File {
		var fs []File
		for i, p := range paths {
			fs = append(fs, File{Role: []string{"output", "rejects file"}[i], Path: p})
		}
		return fs
	}
	tests := []struct {
		name   string
		reads  []File
		writes []File
		same   *SameFileError // the conflict expected, if any
		errMsg string         // a part of any other error expected
	}{
		{name: "distinct files", reads: in("in.csv", "other.csv"), writes: out("out.parquet", "out.rejects.jsonl")},
		{name: "an output that exists already", reads: in("in.csv"), writes: out("other.csv")},
		{name: "same name", reads: in("in.csv"), writes: out("in.csv"),
			same: &SameFileError{File{"output", "in.csv"}, File{"input", "in.csv"}}},
		{name: "./ prefix", reads: in("in.csv"), writes: out("./in.csv"),
			same: &SameFileError{File{"output", "./in.csv"}, File{"input", "in.csv"}}},
		{name: "through a directory and back", reads: in("sub/../in.csv"), writes: out("in.csv"),
			same: &SameFileError{File{"output", "in.csv"}, File{"input", "sub/../in.csv"}}},
		{name: "absolute and relative", reads: in(filepath.Join(dir, "in.csv")), writes: out("in.csv"),
			same: &SameFileError{File{"output", "in.csv"}, File{"input", filepath.Join(dir, "in.csv")}}},
		{name: "symbolic link to the input", reads: in("in.csv"), writes: out("link.csv"),
			same: &SameFileError{File{"output", "link.csv"}, File{"input", "in.csv"}}},
		{name: "input read through a symbolic link", reads: in("link.csv"), writes: out("in.csv"),
			same: &SameFileError{File{"output", "in.csv"}, File{"input", "link.csv"}}},
		{name: "hard link", reads: in("in.csv"), writes: out("hard.csv"),
			same: &SameFileError{File{"output", "hard.csv"}, File{"input", "in.csv"}}},
		{name: "symbolic link to the directory", reads: in("other.csv", "in.csv"), writes: out("here/in.csv"),
			same: &SameFileError{File{"output", "here/in.csv"}, File{"input", "in.csv"}}},
		{name: "two outputs", reads: in("in.csv"), writes: out("s.jsonl", "./s.jsonl"),
			same: &SameFileError{File{"rejects file", "./s.jsonl"}, File{"output", "s.jsonl"}}},
		{name: "two new outputs through a linked directory", reads: in("in.csv"), writes: out("sub/s.jsonl", "here/sub/s.jsonl"),
			same: &SameFileError{File{"rejects file", "here/sub/s.jsonl"}, File{"output", "sub/s.jsonl"}}},
		{name: "output is a directory", reads: in("in.csv"), writes: out("sub"), errMsg: "output sub is a directory"},
		{name: "missing directory", reads: in("in.csv"), writes: out("none/out.parquet"), errMsg: "output none/out.parquet: directory none does not exist"},
		{name: "a file as the directory", reads: in("in.csv"), writes: out("plain/out.parquet"), errMsg: "output plain/out.parquet: plain is not a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckFiles(tt.reads, tt.writes)
			var same *SameFileError
			switch {
			case tt.same != nil:
				if !errors.As(err, &same) || *same != *tt.same {
					t.Fatalf("error %v, want %v", err, tt.same)
				}
			case tt.errMsg != "":
				if err == nil || !strings.Contains(err.Error(), tt.errMsg) || errors.As(err, &same) {
					t.Fatalf("error %v, want one containing %q", err, tt.errMsg)
				}
			case err != nil:
				t.Fatalf("error %v, want none", err)
			}
		})
	}
	err := CheckFiles(in("in.csv"), out("./in.csv"))
	if want := "output ./in.csv is the same file as the input in.csv: writing it would destroy that file"; err == nil || err.Error() != want {
		t.Errorf("message %q, want %q", err, want)
	}
	if got := dirEntries(t, dir); !slices.Equal(got, []string{"hard.csv", "here", "in.csv", "link.csv", "other.csv", "plain", "sub"}) {
		t.Errorf("the checks left %v", got)
	}
}

func TestCheckFilesUnwritableDirectory(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root writes into read-only directories")
	}
	dir := t.TempDir()
	locked := filepath.Join(dir, "locked")
	if err := os.Mkdir(locked, 0o555); err != nil {
		t.Fatal(err)
	}
	err := CheckFiles(nil, []File{{"output", filepath.Join(locked, "o.parquet")}})
	if err == nil || !strings.Contains(err.Error(), "cannot create files in "+locked+": permission denied") {
		t.Fatalf("error %v", err)
	}
}

// Score refuses, before it reads a row or creates a file, an output or a
// rejects file that would replace an input, the model file or each other.
func TestScoreRefusesToDestroyFiles(t *testing.T) {
	spec := testSpec(t)
	d := makeData(spec, 60, 31)
	m := trainTestModel(t, spec, d)
	dir := t.TempDir()
	parquetIn := filepath.Join(dir, "in.parquet")
	writeParquet(t, parquetIn, spec, d, false)
	csvIn := filepath.Join(dir, "in.csv")
	pipelinetest.WriteCSV(t, csvIn, spec, d, nil)
	modelFile := filepath.Join(dir, "model.jsonl") // a model may have any name
	if err := registry.SaveModel(modelFile, m); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		cfg    ScoreConfig
		writes File
		other  File
	}{
		{name: "output is the input", cfg: ScoreConfig{Inputs: []string{parquetIn}, Output: parquetIn},
			writes: File{"output", parquetIn}, other: File{"input", parquetIn}},
		{name: "a glob matches the output", cfg: ScoreConfig{Inputs: []string{filepath.Join(dir, "in.*")}, Output: parquetIn},
			writes: File{"output", parquetIn}, other: File{"input", parquetIn}},
		{name: "rejects file is an input", cfg: ScoreConfig{Inputs: []string{parquetIn, csvIn}, Output: filepath.Join(dir, "s.jsonl"), OnError: OnErrorSkip, Rejects: csvIn},
			writes: File{"rejects file", csvIn}, other: File{"input", csvIn}},
		{name: "rejects file is the output", cfg: ScoreConfig{Inputs: []string{csvIn}, Output: filepath.Join(dir, "s.jsonl"), OnError: OnErrorSkip, Rejects: dir + "/./s.jsonl"},
			writes: File{"rejects file", dir + "/./s.jsonl"}, other: File{"output", filepath.Join(dir, "s.jsonl")}},
		{name: "output is the model file", cfg: ScoreConfig{Inputs: []string{csvIn}, Output: modelFile, ModelFile: modelFile},
			writes: File{"output", modelFile}, other: File{"model file", modelFile}},
	}
	before := dirEntries(t, dir)
	contents := map[string][]byte{}
	for _, name := range before {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		contents[name] = data
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			cfg.Model = m
			read := false
			cfg.Options.Progress = func(int64) { read = true }
			counts, err := Score(context.Background(), cfg)
			var same *SameFileError
			if !errors.As(err, &same) || same.Write != tt.writes || same.Other != tt.other {
				t.Fatalf("error %v, want %s refused as %s", err, tt.writes, tt.other)
			}
			if read || counts != (Counts{}) {
				t.Fatalf("rows were read: %+v", counts)
			}
			if got := dirEntries(t, dir); !slices.Equal(got, before) {
				t.Fatalf("files %v, want %v", got, before)
			}
			for name, want := range contents {
				if got, _ := os.ReadFile(filepath.Join(dir, name)); !bytes.Equal(got, want) {
					t.Fatalf("%s changed", name)
				}
			}
		})
	}
}

// Train checks its model file and store before it reads a row, so that a
// long fit never ends in a model that cannot be written or that replaces
// an input.
func TestTrainChecksFilesFirst(t *testing.T) {
	spec := testSpec(t)
	d := makeData(spec, 60, 32)
	dir := t.TempDir()
	in := filepath.Join(dir, "in.csv")
	pipelinetest.WriteCSV(t, in, spec, d, nil)
	specFile := filepath.Join(dir, "views.json")
	if err := os.WriteFile(specFile, []byte(pipelinetest.SpecJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		job  TrainJob
		want string
	}{
		{name: "model file is the input", job: TrainJob{Output: in},
			want: "model file " + in + " is the same file as the input " + in},
		{name: "model file is the view spec", job: TrainJob{Output: specFile, SpecFile: specFile},
			want: "model file " + specFile + " is the same file as the view spec " + specFile},
		{name: "model file in a missing directory", job: TrainJob{Output: filepath.Join(dir, "none", "m.mvml")},
			want: "model file " + filepath.Join(dir, "none", "m.mvml") + ": directory " + filepath.Join(dir, "none") + " does not exist"},
		{name: "model store is a file", job: TrainJob{ModelDir: plain},
			want: "model store " + plain + ": "},
		{name: "model file is the store's current model", job: TrainJob{ModelDir: dir, Output: filepath.Join(dir, registry.CurrentModel)},
			want: "model store entry " + filepath.Join(dir, registry.CurrentModel) + " is the same file as the model file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job := tt.job
			job.Spec, job.Inputs, job.Config = spec, []string{in}, model.TrainConfig{Landmarks: 10}
			read := false
			job.Options.Progress = func(int64) { read = true }
			job.OnLoaded = func(int) { read = true }
			_, err := Train(context.Background(), job)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
			if read {
				t.Fatal("rows were read before the check")
			}
		})
	}
	if got := dirEntries(t, dir); !slices.Equal(got, []string{"in.csv", "plain", "views.json"}) {
		t.Fatalf("files %v", got)
	}
}

// A model store is created before the rows are read and receives the
// version and the current model, with their manifest and pointer.
func TestTrainPublishesToModelDir(t *testing.T) {
	spec := testSpec(t)
	d := makeData(spec, 80, 33)
	dir := t.TempDir()
	in := filepath.Join(dir, "in.csv")
	pipelinetest.WriteCSV(t, in, spec, d, nil)
	store := filepath.Join(dir, "models", "prod")
	storeExisted := false
	m, err := Train(context.Background(), TrainJob{
		Spec: spec, Inputs: []string{in}, ModelDir: store, Config: pipelinetest.TrainWith(func(c *model.TrainConfig) { c.Landmarks = 12 }),
		OnLoaded: func(int) { _, err := os.Stat(store); storeExisted = err == nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	if !storeExisted {
		t.Fatal("the model store was not created before the fit")
	}
	want := []string{m.Version + ".mvml", m.Version + ".json", registry.CurrentModel, registry.CurrentPointer}
	slices.Sort(want)
	if got := dirEntries(t, store); !slices.Equal(got, want) {
		t.Fatalf("store holds %v, want %v", got, want)
	}
}
