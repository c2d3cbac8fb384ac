package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl/scram"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/mvml/mvml/internal/kafkatest"
)

// The Kafka commands reach a cluster that demands TLS and SASL
// (SCRAM-SHA-256), with the password taken from the environment.
func TestKafkaTLSAndSASL(t *testing.T) {
	dir := t.TempDir()
	cert, caPEM := kafkatest.SelfSigned(t)
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "records", "scores", "dead"),
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}),
		kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-256", "mvml", "s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	brokers := strings.Join(cluster.ListenAddrs(), ",")

	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	clientTLS := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	mech, err := scram.Mechanism(scram.SHA256, "mvml", "s3cret")
	if err != nil {
		t.Fatal(err)
	}
	specPath, trainCSV := fixture(t, dir, "train.csv", classSpec, 150, 1, nil)
	labelled := csvMessages(t, trainCSV, true)
	transport := &kafka.Transport{TLS: clientTLS, SASL: mech}
	defer transport.CloseIdleConnections()
	w := &kafka.Writer{Addr: kafka.TCP(cluster.ListenAddrs()...), Topic: "records", Transport: transport, RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond}
	msgs := make([]kafka.Message, len(labelled))
	for i, v := range labelled {
		msgs[i] = kafka.Message{Value: v}
	}
	if err := w.WriteMessages(context.Background(), msgs...); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	auth := []string{"--brokers", brokers, "--tls-ca", ca, "--sasl", "scram-sha-256", "--sasl-user", "mvml"}
	modelPath := filepath.Join(dir, "m.mvml")
	t.Setenv(kafkaPasswordEnv, "wrong")
	if code, _, stderr := mvml(t, append([]string{"train", "--topic", "records", "--views", specPath, "--model", modelPath}, auth...)...); code != exitError {
		t.Errorf("train with a wrong password: exit %d, stderr %q", code, stderr)
	}
	t.Setenv(kafkaPasswordEnv, "s3cret")
	out, _ := mustRun(t, append([]string{"train", "--topic", "records", "--views", specPath, "--model", modelPath, "--landmarks", "30"}, auth...)...)
	if !strings.Contains(out, "150 rows") {
		t.Fatalf("train over TLS and SASL: %s", out)
	}

	srv := startServe(append([]string{"--topic", "records", "--output-topic", "scores", "--dead-letter-topic", "dead",
		"--model", modelPath, "--max-wait", "20ms", "--http", ""}, auth...)...)
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: cluster.ListenAddrs(), Topic: "scores", Partition: 0, MaxWait: 50 * time.Millisecond,
		Dialer: &kafka.Dialer{Timeout: 10 * time.Second, TLS: clientTLS, SASLMechanism: mech}})
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 150 {
		if _, err := r.ReadMessage(ctx); err != nil {
			t.Fatalf("score %d: %v; mvml serve said:\n%s", i, err, srv.stderr)
		}
	}
	if code := srv.stop(t); code != exitOK {
		t.Fatalf("exit %d: %s", code, srv.stderr)
	}
	if want := "in 150 = scored 150"; !strings.Contains(srv.stderr.String(), want) {
		t.Errorf("serve over TLS and SASL: stderr lacks %q:\n%s", want, srv.stderr)
	}
}

func TestKafkaFlagsErrors(t *testing.T) {
	t.Setenv(kafkaPasswordEnv, "x")
	for _, tc := range []struct {
		flags kafkaFlags
		want  string
	}{
		{kafkaFlags{mechanism: "gssapi", user: "u"}, `--sasl "gssapi"`},
		{kafkaFlags{mechanism: "plain"}, "--sasl-user"},
		{kafkaFlags{tlsCA: filepath.Join(t.TempDir(), "none.pem")}, "--tls-ca"},
	} {
		if _, err := tc.flags.connection(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error about %s", tc.flags, err, tc.want)
		}
	}
	if c, err := (&kafkaFlags{}).connection(); c.TLS != nil || c.SASL != nil || err != nil {
		t.Errorf("no TLS, no SASL: %v %v %v, want plain TCP", c.TLS, c.SASL, err)
	}
}
