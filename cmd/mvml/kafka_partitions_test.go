package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/mvml/mvml/internal/kafkatest"
)

// A bad row of a training topic is named by its partition and its offset
// there ("topic/partition: row offset"), in memory and streamed alike:
// offsets repeat across partitions.
func TestTrainFromKafkaNamesPartition(t *testing.T) {
	for _, tc := range []struct {
		name, spec string
		args       []string
		bad        map[int]map[string]string
		want       string
	}{
		{"feature", classSpec, nil, map[int]map[string]string{33: {"b_1": "1.7e308"}},
			"records/1: row 16, column b_1: view b: value 1.7e+308 is too large for a kernel"},
		{"feature, streamed", classSpec, []string{"--stream"}, map[int]map[string]string{33: {"b_1": "1.7e308"}},
			"records/1: row 16, column b_1: view b: value 1.7e+308 is too large for a kernel"},
		{"regression label, streamed", regressionSpec, []string{"--stream"}, map[int]map[string]string{9: {"label": "1e308"}},
			"records/1: row 4, column label: label 1e+308 is too large"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			spec, data := fixture(t, dir, "data.csv", tc.spec, 100, 13, tc.bad)
			cluster := kafkatest.Start(t, 2, "records")
			var msgs []kafkatest.Message
			for i, v := range csvMessages(t, data, true) {
				msgs = append(msgs, kafkatest.Message{Partition: i % 2, Value: v})
			}
			cluster.Produce(t, "records", msgs...)
			args := append([]string{"train", "--brokers", strings.Join(cluster.Brokers, ","), "--topic", "records", "--views", spec,
				"--model", filepath.Join(dir, "m.mvml"), "--landmarks", "20"}, tc.args...)
			if code, _, stderr := mvml(t, args...); code != exitError || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d, stderr %q; want %q", code, stderr, tc.want)
			}
		})
	}
}
