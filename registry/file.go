package registry

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"

	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/sink"
)

// SaveModel writes m to path through a temporary file in the same
// directory, synced and renamed, so that path holds either its old content
// or the complete new model, never part of one.
func SaveModel(path string, m *model.Model) error {
	data, err := encodeModel(m)
	if err != nil {
		return fmt.Errorf("save model %s: %w", path, err)
	}
	return writeAtomic(path, data, "save model")
}

// encodeModel is m's model file.
func encodeModel(m *model.Model) ([]byte, error) {
	var buf bytes.Buffer
	if err := m.Encode(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// writeAtomic writes data to path as SaveModel writes a model; what names
// the operation in errors.
func writeAtomic(path string, data []byte, what string) error {
	f, err := sink.CreateAtomic(path)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if _, err := f.Write(data); err != nil {
		return errors.Join(fmt.Errorf("%s %s: %w", what, path, err), f.Abort())
	}
	if err := f.Commit(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// LoadModel reads and verifies a model file.
func LoadModel(path string) (*model.Model, error) {
	m, _, err := readModelFile(path)
	return m, err
}

// readModelFile reads and verifies the model file at path and returns it
// with its SHA-256 (lowercase hex) and size.
func readModelFile(path string) (*model.Model, fileSum, error) {
	m, data, err := readFileModel(path)
	if err != nil {
		return nil, fileSum{}, err
	}
	return m, sumOf(data), nil
}

// readFileModel reads and verifies the model file at path and returns it
// with the file's bytes.
func readFileModel(path string) (*model.Model, []byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("load model: %w", err)
	}
	m, err := model.Decode(bytes.NewReader(data))
	if err != nil {
		return nil, nil, fmt.Errorf("load model %s: %w", path, err)
	}
	return m, data, nil
}

// fileSum is the SHA-256 (lowercase hex) and size of a file.
type fileSum struct {
	sha   string
	bytes int64
}

func sumOf(data []byte) fileSum {
	sum := sha256.Sum256(data)
	return fileSum{hex.EncodeToString(sum[:]), int64(len(data))}
}
