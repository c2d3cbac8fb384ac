package main

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mvml/mvml/internal/kafkatest"
)

// mvml wait --http polls /metrics until every condition holds, summing a
// metric's series, and fails after --timeout with what it saw last.
func TestWaitForMetrics(t *testing.T) {
	var scored atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		// Every poll scores 100 more records, over two partitions.
		n := scored.Add(100)
		fmt.Fprintf(w, "# TYPE mvml_records_scored_total counter\nmvml_records_scored_total %d\n", n)
		fmt.Fprintf(w, "# TYPE mvml_kafka_consumer_lag gauge\nmvml_kafka_consumer_lag{partition=\"0\"} 2\nmvml_kafka_consumer_lag{partition=\"1\"} 3\n")
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")

	code, stdout, stderr := mvml(t, "wait", "--http", addr, "mvml_records_scored_total>=500", "mvml_kafka_consumer_lag=5")
	if code != exitOK || stdout != "" || stderr != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if n := scored.Load(); n != 500 {
		t.Errorf("waited for %d records scored, want it to end at the poll that saw 500", n)
	}

	// Flags after the conditions, and a value never reached.
	code, _, stderr = mvml(t, "wait", "--http", srv.URL, "mvml_records_scored_total=1", "--timeout", "2s")
	if code != exitError || !strings.Contains(stderr, "mvml wait: not after 2s: mvml_records_scored_total ") || !strings.Contains(stderr, "(want =1)") {
		t.Errorf("a value passed by: exit %d, stderr %q", code, stderr)
	}
	code, _, stderr = mvml(t, "wait", "--http", addr, "mvml_absent_total>=1", "--timeout", "2s")
	if code != exitError || !strings.Contains(stderr, "mvml_absent_total absent, want >=1") {
		t.Errorf("an absent metric: exit %d, stderr %q", code, stderr)
	}

	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"wait"}, "give --brokers or --http"},
		{[]string{"wait", "--http", addr}, "--http needs a condition"},
		{[]string{"wait", "--http", addr, "scored>lots"}, `condition "scored>lots": want NAME=VALUE or NAME>=VALUE`},
		{[]string{"wait", "--http", addr, "scored=lots"}, `"lots" is not a number`},
		{[]string{"wait", "--brokers", "b:1", "x=1"}, "conditions are on the /metrics of --http"},
		{[]string{"wait", "--http", addr, "x=1", "--timeout", "0s"}, "--timeout 0s must be positive"},
	} {
		if code, _, stderr := mvml(t, tt.args...); code != exitUsage || !strings.Contains(stderr, tt.want) {
			t.Errorf("mvml %s: exit %d, stderr %q, want %q", strings.Join(tt.args, " "), code, stderr, tt.want)
		}
	}
}

// mvml wait --brokers returns once the brokers answer with the topics
// named, over the Kafka protocol; it fails after --timeout when they do
// not answer or lack a topic.
func TestWaitForBrokers(t *testing.T) {
	c := kafkatest.Start(t, 1, "records", "scores")
	brokers := strings.Join(c.Brokers, ",")
	if code, _, stderr := mvml(t, "wait", "--brokers", brokers, "--topics", "records,scores"); code != exitOK || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	code, _, stderr := mvml(t, "wait", "--brokers", brokers, "--topics", "records,models", "--timeout", "3s")
	if code != exitError || !strings.Contains(stderr, "not after 3s: topics missing: models") {
		t.Errorf("a missing topic: exit %d, stderr %q", code, stderr)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	code, _, stderr = mvml(t, "wait", "--brokers", closed, "--timeout", "500ms")
	if code != exitError || !strings.Contains(stderr, "the brokers do not answer") {
		t.Errorf("no broker: exit %d, stderr %q", code, stderr)
	}
}
