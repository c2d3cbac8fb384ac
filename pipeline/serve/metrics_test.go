package serve

import (
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/mvml/mvml/internal/kafkatest"
	"github.com/mvml/mvml/internal/syncbuf"
	"github.com/mvml/mvml/kafkaconn"
	"github.com/mvml/mvml/pipeline"
	"github.com/mvml/mvml/pipeline/internal/metrics"
	"github.com/mvml/mvml/pipeline/internal/pipelinetest"
	"github.com/mvml/mvml/pipeline/refit"
)

// A runner's /metrics, scraped over HTTP while it serves a run against the
// in-process broker and read by Prometheus' parser, has the counters, the
// histograms of scoring time and end-to-end latency filled, the lag of
// every partition, and the fetch and write statistics of the topics.
func TestKafkaRunnerMetrics(t *testing.T) {
	spec := testSpec(t)
	m := trainTestModel(t, spec, makeData(spec, 150, 1))
	records := jsonRecords(t, spec, makeData(spec, 60, 4))
	c := kafkatest.Start(t, 2, "in", "out", "dead")
	// Produced two seconds ago, so every latency is at least that.
	const age = 2 * time.Second
	produced := time.Now().Add(-age)
	var msgs []kafkatest.Message
	for i, r := range append(records, []byte(`{"id": 1}`), []byte(`not json`)) {
		msgs = append(msgs, kafkatest.Message{Partition: i % 2, Value: r, Time: produced})
	}
	c.Produce(t, "in", msgs...)
	var log syncbuf.Buffer
	r, err := NewKafkaRunner(KafkaConfig{
		Conn: kafkaconn.Config{Brokers: c.Brokers}, Topic: "in", Group: "g", MaxWait: 20 * time.Millisecond,
		OutputTopic: "out", DeadLetterTopic: "dead", Model: m, HTTPAddr: "127.0.0.1:0",
		Options: pipeline.Options{BatchSize: 16, Logger: slog.New(slog.NewTextHandler(&log, nil))},
	})
	if err != nil {
		t.Fatal(err)
	}
	var families map[string]*dto.MetricFamily
	_, err = runKafka(t, r, func() bool {
		if st := r.Service().Stats(); st.Scored+st.DeadLettered < int64(len(msgs)) {
			return false
		}
		url := regexp.MustCompile(`metrics=(http://\S+)`).FindStringSubmatch(log.String())
		if url == nil {
			t.Fatalf("no metrics address logged:\n%s", log.String())
		}
		resp, err := http.Get(url[1])
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s", url[1], resp.Status)
		}
		families = pipelinetest.ParseMetrics(t, resp.Body)
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]float64{"mvml_records_in_total": 62, "mvml_records_scored_total": 60, "mvml_records_dead_lettered_total": 2, "mvml_records_not_committed": 0} {
		if got := pipelinetest.MetricValue(t, families, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	latency := families["mvml_end_to_end_latency_seconds"].GetMetric()[0].GetHistogram()
	if n := latency.GetSampleCount(); n != 60 || latency.GetSampleSum() < 60*age.Seconds() || latency.GetSampleSum() > 60*60 {
		t.Errorf("latency of %d scores adding up to %vs, want 60 of at least %v each", n, latency.GetSampleSum(), age)
	}
	if score := families["mvml_batch_score_seconds"].GetMetric()[0].GetHistogram(); score.GetSampleCount() < 4 || score.GetSampleSum() <= 0 {
		t.Errorf("batch scoring time: %v, want one observation per batch", score)
	}
	var fetched float64
	for _, p := range []string{"0", "1"} {
		if lag := pipelinetest.MetricValue(t, families, "mvml_kafka_consumer_lag", "topic", "in", "partition", p); lag != 0 {
			t.Errorf("lag of partition %s: %v after every record was taken, want 0", p, lag)
		}
		fetched += pipelinetest.MetricValue(t, families, "mvml_kafka_fetched_messages_total", "topic", "in", "partition", p)
		// A fetch may time out on a busy machine: the errors are there,
		// whatever their number.
		pipelinetest.MetricValue(t, families, "mvml_kafka_fetch_errors_total", "topic", "in", "partition", p)
	}
	if fetched != 62 || pipelinetest.MetricValue(t, families, "mvml_kafka_fetched_bytes_total", "topic", "in", "partition", "0") <= 0 {
		t.Errorf("%v messages fetched, want 62, and their bytes", fetched)
	}
	for topic, want := range map[string]float64{"out": 60, "dead": 2} {
		if got := pipelinetest.MetricValue(t, families, "mvml_kafka_written_messages_total", "topic", topic); got != want {
			t.Errorf("%v messages written to %s, want %v", got, topic, want)
		}
		if got := pipelinetest.MetricValue(t, families, "mvml_kafka_write_errors_total", "topic", topic); got != 0 {
			t.Errorf("%v write errors of %s", got, topic)
		}
	}
	if families["go_goroutines"] == nil || families["process_cpu_seconds_total"] == nil {
		t.Error("/metrics lacks the Go runtime or the process")
	}
}

// updateREADME rewrites docs/configuration.md's tables of the metrics: `make docs`.
var updateREADME = flag.Bool("update-readme", false, "rewrite the tables of the metrics in docs/configuration.md")

// docs/configuration.md's tables of the metrics are serveMetricDefs and refitMetricDefs;
// `make docs` rewrites them.
func TestMetricsTableInREADME(t *testing.T) {
	const readme = "../../docs/configuration.md"
	data, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	var serveRows, refitRows []metricsTableRow
	for _, def := range serveMetricDefs {
		serveRows = append(serveRows, metricsTableRow{def.name, def.kind, def.help})
	}
	for _, def := range refit.MetricDefs() {
		refitRows = append(refitRows, metricsTableRow{def.Name, def.Kind, def.Help})
	}
	text := string(data)
	for _, table := range []struct {
		begin, end string
		rows       []metricsTableRow
	}{
		{"<!-- metrics of mvml serve: written by `make docs` from serveMetricDefs; do not edit -->\n", "<!-- end of the metrics -->", serveRows},
		{"<!-- metrics of mvml refit: written by `make docs` from refitMetricDefs; do not edit -->\n", "<!-- end of the metrics of mvml refit -->", refitRows},
	} {
		i, j := strings.Index(text, table.begin), strings.Index(text, table.end)
		if i < 0 || j < i {
			t.Fatalf("docs/configuration.md lacks a table of the metrics between\n%s%s", table.begin, table.end)
		}
		if want := metricsTable(table.rows); text[i+len(table.begin):j] != want {
			if !*updateREADME {
				t.Fatalf("docs/configuration.md's table of the metrics after %q is stale: run `make docs`", strings.TrimSpace(table.begin))
			}
			text = text[:i+len(table.begin)] + want + text[j:]
		}
	}
	if text == string(data) {
		return
	}
	if err := os.WriteFile(readme, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// metricsTableRow is a row of a table of metric definitions.
type metricsTableRow struct {
	name string
	kind metrics.Kind
	help string
}

// metricsTable is docs/configuration.md's table of the metrics of rows: one line per
// metric, the rows of the further series of a metric (metrics.LabelledInt, which
// carry no help) left out.
func metricsTable(rows []metricsTableRow) string {
	var b strings.Builder
	b.WriteString("| metric | type | labels | meaning |\n|---|---|---|---|\n")
	for i, r := range rows {
		if i > 0 && rows[i-1].name == r.name {
			continue
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", r.name, r.kind.Type, strings.Join(r.kind.Labels, ", "), strings.ReplaceAll(r.help, "|", `\|`))
	}
	return b.String()
}
