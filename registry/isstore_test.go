package registry

import (
	"os"
	"path/filepath"
	"testing"
)

// IsStore tells a model store, of this release or written before its
// pointers, from a directory where a job writes a model file it names
// current.mvml.
func TestIsStore(t *testing.T) {
	tests := []struct {
		name  string
		files []string
		want  bool
	}{
		{"empty", nil, false},
		{"a model file named current.mvml", []string{CurrentModel}, false},
		{"other files", []string{"scores.parquet", "m.mvml"}, false},
		{"the current pointer", []string{CurrentPointer}, true},
		{"a store before the pointers", []string{CurrentModel, "0123456789ab.mvml"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range tt.files {
				if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if got := IsStore(dir); got != tt.want {
				t.Errorf("IsStore with %v: %t, want %t", tt.files, got, tt.want)
			}
		})
	}
	// A directory named current.json is not a pointer.
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, CurrentPointer), 0o755); err != nil {
		t.Fatal(err)
	}
	if IsStore(dir) {
		t.Error("a directory current.json makes a store")
	}
}
