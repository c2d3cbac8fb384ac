package kafkaconn

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// kafkaGo is the import path of the Kafka client kafkaconn wraps.
const kafkaGo = "github.com/segmentio/kafka-go"

// Only kafkaconn (and internal/kafkatest, test infrastructure) imports
// kafka-go outside tests: the rest of the module uses kafkaconn's types.
func TestOnlyKafkaconnImportsKafkaGo(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root %s: %v", root, err)
	}
	allowed := map[string]bool{"kafkaconn": true, filepath.Join("internal", "kafkatest"): true}
	var offenders []string
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || allowed[filepath.Dir(rel)] {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == kafkaGo || strings.HasPrefix(p, kafkaGo+"/") {
				offenders = append(offenders, rel)
				break
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range offenders {
		t.Errorf("%s imports %s: use kafkaconn's types", f, kafkaGo)
	}
}
