package serve

import (
	"path/filepath"
	"testing"

	"github.com/segmentio/kafka-go"

	"github.com/mvml/mvml/kafkaconn"
	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/pipeline/internal/pipelinetest"
	"github.com/mvml/mvml/schemas"
)

// dataset, testSpec, makeData and trainTestModel are pipelinetest's, by
// the short names the many tests of this package use.
type dataset = pipelinetest.Dataset

func testSpec(t testing.TB) *schemas.ViewSpec { t.Helper(); return pipelinetest.Spec(t) }

func makeData(spec *schemas.ViewSpec, n int, seed uint64) *dataset {
	return pipelinetest.MakeData(spec, n, seed)
}

func trainTestModel(t testing.TB, spec *schemas.ViewSpec, d *dataset) *model.Model {
	t.Helper()
	return pipelinetest.TrainTestModel(t, spec, d)
}

func tempPath(t testing.TB, name string) string { return filepath.Join(t.TempDir(), name) }

// connMessage is m, read by a kafka-go reader of the test, as kafkaconn's.
func connMessage(m kafka.Message) kafkaconn.Message {
	hs := make([]kafkaconn.Header, len(m.Headers))
	for i, h := range m.Headers {
		hs[i] = kafkaconn.Header(h)
	}
	return kafkaconn.Message{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset, Key: m.Key, Value: m.Value, Headers: hs, Time: m.Time}
}
