package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mvml/mvml/registry"
)

// The demo without --keep does not name the temporary directory it
// removes at its end, nor a file in it.
func TestDemoNamesNoRemovedPath(t *testing.T) {
	stdout, _ := mustRun(t, "demo", "--rows", "60", "--kafka=false")
	if strings.Contains(stdout, os.TempDir()) || strings.Contains(stdout, "mvml-demo-") || strings.Contains(stdout, "scores.parquet") {
		t.Errorf("the demo names a path it removes:\n%s", stdout)
	}
	if !strings.Contains(stdout, "--keep DIR keeps") {
		t.Errorf("the demo does not say how to keep its files:\n%s", stdout)
	}
}

// The quick start's `mvml demo --keep mvml-demo` in the clone leaves git
// status clean.
func TestDemoDirIgnoredByGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	cmd := exec.Command("git", "check-ignore", "-q", "mvml-demo/views.json")
	cmd.Dir = filepath.Join("..", "..")
	if err := cmd.Run(); err != nil {
		t.Errorf("git check-ignore mvml-demo/views.json: %v: the demo's directory is not ignored", err)
	}
}

// demo --keep refuses a directory that is not empty, naming what is in
// it, and writes nothing; --force writes the demo's files and leaves the
// others alone.
func TestDemoKeepRefusesNonEmptyDir(t *testing.T) {
	dir := t.TempDir()
	mine := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(mine, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := mvml(t, "demo", "--rows", "60", "--keep", dir, "--kafka=false")
	want := "mvml demo: --keep " + dir + ": the directory is not empty (notes.txt): give a new or empty directory, or --force to replace the demo's files in it\n"
	if code != exitUsage || !strings.HasPrefix(stderr, want) || stdout != "" {
		t.Fatalf("exit %d, stderr %q, want %q", code, stderr, want)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("the refused demo wrote into %s: %v", dir, entries)
	}
	mustRun(t, "demo", "--rows", "60", "--keep", dir, "--kafka=false", "--force")
	if data, err := os.ReadFile(mine); err != nil || string(data) != "mine" {
		t.Errorf("notes.txt: %q, %v", data, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "model.mvml")); err != nil {
		t.Error(err)
	}
	if code, _, stderr := mvml(t, "demo", "--rows", "60", "--force"); code != exitUsage || !strings.Contains(stderr, "--force is for --keep DIR") {
		t.Errorf("--force alone: exit %d, %q", code, stderr)
	}
}

// No command writes into a model store but the store itself: models get
// into its own store (current.mvml would disagree with current.json),
// train --model, score --output, inspect --plot, demo --keep --force and
// serve --output-dir into a store are refused before anything is written,
// and every file of the store is left as it was.
func TestNothingWritesIntoAStore(t *testing.T) {
	dir := t.TempDir()
	spec, data := fixture(t, dir, "data.csv", classSpec, 80, 31, nil)
	store := filepath.Join(dir, "store")
	out, _ := mustRun(t, "train", "--input", data, "--views", spec, "--model-dir", store, "--landmarks", "10")
	version := trainedVersion(out)
	// The store under another name: a symbolic link to it.
	alias := filepath.Join(dir, "alias")
	if err := os.Symlink(store, alias); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "m.mvml")
	mustRun(t, "train", "--input", data, "--views", spec, "--model", other, "--landmarks", "10")
	before := fileSums(t, store)
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"get into its own store", []string{"models", "get", version, "--model-dir", store, "--output", filepath.Join(store, registry.CurrentModel)}, exitUsage,
			"--output " + filepath.Join(store, registry.CurrentModel) + " is in the model store --model-dir " + store + ", which only the store writes"},
		{"get into its own store, through a link", []string{"models", "get", "current", "--model-dir", store, "--output", filepath.Join(alias, "copy.mvml")}, exitUsage,
			"is in the model store --model-dir " + store},
		{"get into another store", []string{"models", "get", "current", "--model-dir", alias, "--output", filepath.Join(store, version+".mvml")}, exitUsage,
			"is in the model store"},
		{"train --model", []string{"train", "--input", data, "--views", spec, "--model", filepath.Join(alias, registry.CurrentModel), "--landmarks", "10"}, exitError,
			"model file " + filepath.Join(alias, registry.CurrentModel) + " is in the model store " + alias + ", which only its store writes"},
		{"score --output", []string{"score", "--input", data, "--model", other, "--output", filepath.Join(store, "scores.parquet")}, exitError,
			"output " + filepath.Join(store, "scores.parquet") + " is in the model store"},
		{"inspect --plot", []string{"inspect", "--model", other, "--plot", filepath.Join(store, "a.png")}, exitError, "plot " + filepath.Join(store, "a.png") + " is in the model store"},
		{"demo --keep --force", []string{"demo", "--rows", "60", "--kafka=false", "--keep", store, "--force"}, exitError, "is in the model store"},
		{"serve --output-dir a store", serveDirArgs("--output-dir", store), exitUsage, "--output-dir " + store + " is a model store"},
		{"serve --output-dir its --model-dir", serveDirArgs("--output-dir", alias, "--model-dir", store), exitUsage, "--output-dir " + alias + " is --model-dir, the model store"},
	}
	for _, tt := range tests {
		code, stdout, stderr := mvml(t, tt.args...)
		if code != tt.code || !strings.Contains(stderr, tt.want) {
			t.Errorf("%s: exit %d, stderr %q; want exit %d and %q\nstdout: %s", tt.name, code, stderr, tt.code, tt.want, stdout)
		}
	}
	if after := fileSums(t, store); len(after) != len(before) {
		t.Errorf("the store's files changed: %d before, %d after", len(before), len(after))
	} else {
		for name, sum := range before {
			if after[name] != sum {
				t.Errorf("%s changed", name)
			}
		}
	}
	// Getting a version out of the store still works.
	mustRun(t, "models", "get", version, "--model-dir", alias, "--output", filepath.Join(dir, "got.mvml"))
	// A directory where a retraining job writes current.mvml for serve
	// --reload-interval is no store: the job writes it again.
	plain := filepath.Join(dir, "serving")
	if err := os.Mkdir(plain, 0o755); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		mustRun(t, "train", "--input", data, "--views", spec, "--model", filepath.Join(plain, registry.CurrentModel), "--landmarks", "10")
	}
}

// serveDirArgs are the flags of a serve with an output directory, more
// added; it is refused before it connects.
func serveDirArgs(more ...string) []string {
	return append([]string{"serve", "--brokers", "127.0.0.1:1", "--topic", "in", "--dead-letter-topic", "dlq", "--model", "m.mvml"}, more...)
}
