package sink

import (
	"os"
	"path/filepath"
	"testing"
)

func TestAtomicFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "model.mvml")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	write := func(content string) *AtomicFile {
		t.Helper()
		f, err := CreateAtomic(path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte(content)); err != nil {
			t.Fatal(err)
		}
		return f
	}
	check := func(want string) {
		t.Helper()
		got, err := os.ReadFile(path)
		if err != nil || string(got) != want {
			t.Fatalf("content %q (%v), want %q", got, err, want)
		}
		if _, err := os.Stat(path + ".tmp"); !os.IsNotExist(err) {
			t.Fatalf("temporary file left: %v", err)
		}
	}
	f := write("aborted")
	check2 := func() {
		if got, _ := os.ReadFile(path); string(got) != "old" {
			t.Fatalf("the path changed before Commit: %q", got)
		}
	}
	check2()
	if err := f.Abort(); err != nil {
		t.Fatal(err)
	}
	check("old")
	f = write("new")
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	check("new")
	if err := f.Abort(); err != nil {
		t.Errorf("Abort after Commit: %v", err)
	}
	check("new")
}
