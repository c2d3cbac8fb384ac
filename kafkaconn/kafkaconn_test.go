package kafkaconn

import (
	"context"
	"crypto/tls"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/mvml/mvml/internal/kafkatest"
)

func TestConfigValidate(t *testing.T) {
	for _, tt := range []struct {
		name string
		cfg  Config
		want string // "" means valid
	}{
		{"brokers", Config{Brokers: []string{"a:9092", "b:9092"}}, ""},
		{"no brokers", Config{}, "no brokers"},
		{"empty address", Config{Brokers: []string{"a:9092", " "}}, "broker 2 of 2 is an empty address"},
		{"negative timeout", Config{Brokers: []string{"a:9092"}, DialTimeout: -time.Second}, "DialTimeout -1s"},
	} {
		err := tt.cfg.Validate()
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.want)
		}
	}
}

// The dialer and the transport carry every setting, the defaults included.
func TestConfigClients(t *testing.T) {
	mech, err := NewSASL("plain", "u", "p")
	if err != nil {
		t.Fatal(err)
	}
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS13}
	for _, tt := range []struct {
		cfg         Config
		wantTimeout time.Duration
	}{
		{Config{Brokers: []string{"a:1"}}, DefaultDialTimeout},
		{Config{Brokers: []string{"a:1"}, TLS: tlsCfg, SASL: mech, ClientID: "scorer", DialTimeout: time.Second}, time.Second},
	} {
		d, tr := tt.cfg.Dialer(), tt.cfg.Transport()
		if d.Timeout != tt.wantTimeout || tr.DialTimeout != tt.wantTimeout {
			t.Errorf("%+v: dial timeouts %v and %v, want %v", tt.cfg, d.Timeout, tr.DialTimeout, tt.wantTimeout)
		}
		if d.TLS != tt.cfg.TLS || tr.TLS != tt.cfg.TLS || d.SASLMechanism != tt.cfg.SASL || tr.SASL != tt.cfg.SASL ||
			d.ClientID != tt.cfg.ClientID || tr.ClientID != tt.cfg.ClientID {
			t.Errorf("%+v: dialer %+v and transport %+v do not carry the settings", tt.cfg, d, tr)
		}
	}
}

func TestNewSASL(t *testing.T) {
	for _, tt := range []struct {
		name, user string
		want       string // the mechanism's name, or part of the error
		unknown    bool
	}{
		{"plain", "u", "PLAIN", false},
		{"SCRAM-SHA-256", "u", "SCRAM-SHA-256", false},
		{"scram-sha-512", "u", "SCRAM-SHA-512", false},
		{"gssapi", "u", `unknown SASL mechanism "gssapi": want plain, scram-sha-256 or scram-sha-512`, true},
		{"plain", "", "needs a user name", false},
	} {
		mech, err := NewSASL(tt.name, tt.user, "secret")
		switch {
		case err != nil:
			if !strings.Contains(err.Error(), tt.want) || errors.Is(err, ErrUnknownMechanism) != tt.unknown {
				t.Errorf("%s for %q: %v, want %q", tt.name, tt.user, err, tt.want)
			}
		case mech.Name() != tt.want:
			t.Errorf("%s: mechanism %s, want %s", tt.name, mech.Name(), tt.want)
		}
	}
}

func TestLoadTLS(t *testing.T) {
	dir := t.TempDir()
	_, caPEM := kafkatest.SelfSigned(t)
	ca, notPEM := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca.txt")
	if err := os.WriteFile(ca, caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	if cfg, err := LoadTLS(""); err != nil || cfg.RootCAs != nil || cfg.MinVersion != tls.VersionTLS12 {
		t.Errorf("no CA file: %+v %v, want the system's roots and TLS 1.2 at least", cfg, err)
	}
	if cfg, err := LoadTLS(ca); err != nil || cfg.RootCAs == nil {
		t.Errorf("CA file: %+v %v, want its roots", cfg, err)
	}
	if _, err := LoadTLS(filepath.Join(dir, "none.pem")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing CA file: %v", err)
	}
	if _, err := LoadTLS(notPEM); err == nil || !strings.Contains(err.Error(), "ca.txt: no PEM certificate") {
		t.Errorf("CA file without a certificate: %v", err)
	}
}

// One Config reaches a cluster that demands TLS and SASL, through its
// transport (a writer) and its dialer (a reader), over TCP; a wrong
// password is refused.
func TestConfigConnectsWithTLSAndSASL(t *testing.T) {
	cert, caPEM := kafkatest.SelfSigned(t)
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"),
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}),
		kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-512", "mvml", "s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	connect := func(password string) Config {
		t.Helper()
		tlsCfg, err := LoadTLS(ca)
		if err != nil {
			t.Fatal(err)
		}
		mech, err := NewSASL("scram-sha-512", "mvml", password)
		if err != nil {
			t.Fatal(err)
		}
		return Config{Brokers: cluster.ListenAddrs(), TLS: tlsCfg, SASL: mech, ClientID: "mvml-test"}
	}
	write := func(cfg Config, value string) error {
		transport := cfg.Transport()
		defer transport.CloseIdleConnections()
		w := &kafka.Writer{Addr: cfg.Addr(), Topic: "t", Transport: transport, RequiredAcks: kafka.RequireAll, MaxAttempts: 1}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return errors.Join(w.WriteMessages(ctx, kafka.Message{Value: []byte(value)}), w.Close())
	}

	if err := write(connect("wrong"), "refused"); err == nil {
		t.Error("a wrong password was accepted")
	}
	cfg := connect("s3cret")
	if err := write(cfg, "hello"); err != nil {
		t.Fatalf("writing through the transport: %v", err)
	}
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: cfg.Brokers, Topic: "t", Partition: 0, Dialer: cfg.Dialer(), MaxWait: 50 * time.Millisecond})
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := r.ReadMessage(ctx)
	if err != nil || string(m.Value) != "hello" {
		t.Fatalf("reading through the dialer: %q %v", m.Value, err)
	}
}

// Produce writes every value, in order, acknowledged.
func TestProduce(t *testing.T) {
	c := kafkatest.Start(t, 1, "t")
	values := [][]byte{[]byte("a"), {}, []byte(`{"id":1}`)}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := (Config{Brokers: c.Brokers}).Produce(ctx, "t", values); err != nil {
		t.Fatal(err)
	}
	msgs := c.ConsumeAll(t, "t")
	if len(msgs) != len(values) {
		t.Fatalf("%d messages, want %d", len(msgs), len(values))
	}
	for i, m := range msgs {
		if string(m.Value) != string(values[i]) {
			t.Errorf("message %d: %q, want %q", i, m.Value, values[i])
		}
	}
	if err := (Config{}).Produce(ctx, "t", values); err == nil || !strings.Contains(err.Error(), "producing to t: no brokers") {
		t.Errorf("no brokers: %v", err)
	}
}

// A Writer waits for every in-sync replica, writes synchronously and tries
// once (its callers retry), each message to its key's hash partition, or
// with ByPartition to its own Partition.
func TestWriterConfig(t *testing.T) {
	cfg := Config{Brokers: []string{"localhost:9092"}}
	for _, byPartition := range []bool{false, true} {
		w := cfg.NewWriter(WriterConfig{Topic: "t", BatchBytes: 4096, ByPartition: byPartition}).w
		if w.RequiredAcks != kafka.RequireAll || w.Async || w.MaxAttempts != 1 || w.BatchBytes != 4096 {
			t.Errorf("writer %+v", w)
		}
		_, hash := w.Balancer.(*kafka.Hash)
		_, own := w.Balancer.(kafka.BalancerFunc)
		if hash == byPartition || own != byPartition {
			t.Errorf("ByPartition %v: balancer %T", byPartition, w.Balancer)
		}
		if byPartition {
			if p := w.Balancer.Balance(kafka.Message{Partition: 2, Key: []byte("k")}, 0, 1, 2, 3); p != 2 {
				t.Errorf("ByPartition: message of partition 2 sent to %d", p)
			}
		}
	}
}
