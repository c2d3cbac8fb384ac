package serve

import (
	"strings"
	"testing"
	"time"

	"github.com/mvml/mvml/kafkaconn"
)

// A replica's consumer group heartbeats every second (a third of a
// shorter session timeout), so that a rebalance is learnt within a
// second, and gives up a silent replica after 10s.
func TestServeGroupTimings(t *testing.T) {
	for _, tc := range []struct {
		name               string
		session, heartbeat time.Duration
		wantSession        time.Duration
		wantHeartbeat      time.Duration
	}{
		{"defaults", 0, 0, 10 * time.Second, time.Second},
		{"a long session", 45 * time.Second, 0, 45 * time.Second, time.Second},
		{"a short session", 2 * time.Second, 0, 2 * time.Second, 2 * time.Second / 3},
		{"a heartbeat given", 6 * time.Second, 250 * time.Millisecond, 6 * time.Second, 250 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			session, heartbeat := KafkaConfig{SessionTimeout: tc.session, HeartbeatInterval: tc.heartbeat}.groupTimings()
			if session != tc.wantSession || heartbeat != tc.wantHeartbeat {
				t.Errorf("session %v, heartbeat %v; want %v and %v", session, heartbeat, tc.wantSession, tc.wantHeartbeat)
			}
		})
	}
}

func TestKafkaRunnerRefusesNegativeGroupTimings(t *testing.T) {
	spec := testSpec(t)
	m := trainTestModel(t, spec, makeData(spec, 150, 1))
	for _, cfg := range []KafkaConfig{{SessionTimeout: -time.Second}, {HeartbeatInterval: -time.Second}} {
		cfg.Conn, cfg.Topic, cfg.Group = kafkaconn.Config{Brokers: []string{"localhost:1"}}, "in", "g"
		cfg.OutputTopic, cfg.DeadLetterTopic, cfg.Model = "out", "dead", m
		if _, err := NewKafkaRunner(cfg); err == nil || !strings.Contains(err.Error(), "negative session timeout") {
			t.Errorf("session %v, heartbeat %v: %v, want a refusal", cfg.SessionTimeout, cfg.HeartbeatInterval, err)
		}
	}
}
