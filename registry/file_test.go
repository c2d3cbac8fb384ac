package registry

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mvml/mvml/model"
)

func TestLoadModelRefusesDamage(t *testing.T) {
	m := smallModel(t, 13)
	dir := t.TempDir()
	good := filepath.Join(dir, "m.mvml")
	if err := SaveModel(good, m); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	flipped := slices.Clone(data)
	flipped[len(flipped)/2] ^= 0x40
	tests := []struct {
		name string
		data []byte
	}{
		{"truncated", data[:len(data)-100]},
		{"bit flip", flipped},
		{"not a model", []byte("id,label\n1,2\n")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, tt.name+".mvml")
			if err := os.WriteFile(path, tt.data, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := LoadModel(path)
			if !errors.Is(err, model.ErrCorruptModel) || !strings.Contains(err.Error(), path) {
				t.Fatalf("error %v, want ErrCorruptModel naming %s", err, path)
			}
		})
	}
	if _, err := LoadModel(filepath.Join(dir, "absent.mvml")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	if m2, err := LoadModel(good); err != nil || m2.Version != m.Version {
		t.Fatalf("the saved model: %v, %v", m2, err)
	}
}
