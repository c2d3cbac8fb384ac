// Package kafkaconn is mvml's one door to Kafka: the only package that
// imports the Kafka client, kafka-go, whose types stop here. Config says
// how to reach a cluster (the bootstrap addresses, TLS, SASL, the client
// id, the dial timeout), and every client of a job is made from it alike:
// a PartitionReader reads a partition with fetches ahead in the
// background, a Group is a member of a consumer group and its
// Generations, a Client sends one request at a time when its caller says
// (Metadata, ListOffsets, Fetch, CommitOffsets, CommittedOffsets), and a
// Writer writes Messages. What they read and write is kafkaconn's own
// Message and Header.
//
// The workarounds for kafka-go's behaviour live beside the wrappers, each
// with its reason: connections that read ahead (ReadAheadSize), a floor
// under the fetch wait (MinFetchWait), the lag from high-water marks
// rather than kafka-go's lag reads, partitions assigned in number order
// (copartitioned), the errors that pass by themselves (Transient) and how
// a write or commit retries them (Retry), a commit refused because its
// generation is over (GenerationGone), and the size the writer counts for
// a message (MessageBytes). It also writes values larger than a message as
// chunks (WriteBlob) and puts them back together, checked (Assembler), and
// feeds a topic for tools and demos (Produce).
//
// kafkaconn knows the Kafka protocol client, never records or formats.
package kafkaconn

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"
)

// DefaultDialTimeout is Config.DialTimeout's default, kafka-go's dialer's.
const DefaultDialTimeout = 10 * time.Second

// Config says how to reach a Kafka cluster. The zero value of every field
// but Brokers is a working default.
type Config struct {
	// Brokers are the bootstrap addresses (host:port). Required.
	Brokers []string
	// TLS, when set, encrypts the connections and verifies the brokers
	// with it (LoadTLS builds one from a CA file). Default (nil) plain TCP.
	TLS *tls.Config
	// SASL, when set, authenticates the client with this mechanism
	// (NewSASL builds one). Default (nil) no authentication.
	SASL sasl.Mechanism
	// ClientID names the client to the brokers, in their logs and quotas.
	// Default ("") kafka-go's kafka.DefaultClientID, "PROGRAM@HOST
	// (github.com/segmentio/kafka-go)".
	ClientID string
	// DialTimeout bounds the opening of a connection, TLS handshake and
	// SASL exchange included. Default (0) DefaultDialTimeout, 10s.
	DialTimeout time.Duration
	// Retry says how the writes of package sink and the offset commits of
	// package ingest retry a transient failure. Default (zero) the
	// defaults of Retry: up to 10 tries in 30s.
	Retry Retry
}

// Validate reports a configuration that cannot connect: no brokers, an
// empty address, a negative timeout or retry setting.
func (c Config) Validate() error {
	switch {
	case len(c.Brokers) == 0:
		return errors.New("no brokers")
	case c.DialTimeout < 0:
		return fmt.Errorf("DialTimeout %v must not be negative", c.DialTimeout)
	}
	if err := c.Retry.Validate(); err != nil {
		return err
	}
	for i, b := range c.Brokers {
		if strings.TrimSpace(b) == "" {
			return fmt.Errorf("broker %d of %d is an empty address", i+1, len(c.Brokers))
		}
	}
	return nil
}

func (c Config) dialTimeout() time.Duration {
	if c.DialTimeout == 0 {
		return DefaultDialTimeout
	}
	return c.DialTimeout
}

// Addr is the bootstrap addresses as kafka-go's writers and clients take
// them, for tests that speak kafka-go themselves.
func (c Config) Addr() net.Addr { return kafka.TCP(c.Brokers...) }

// Dialer returns a dialer for kafka-go's readers (kafka.ReaderConfig): that
// of every PartitionReader and Group, and of tests that speak kafka-go.
// Its TCP connections read ahead ReadAheadSize bytes at a time (see
// there); they are otherwise those of kafka-go's default dialer.
func (c Config) Dialer() *kafka.Dialer {
	return &kafka.Dialer{
		Timeout:       c.dialTimeout(),
		DialFunc:      dialReadAhead,
		ClientID:      c.ClientID,
		TLS:           c.TLS,
		SASLMechanism: c.SASL,
	}
}

// Transport returns a new transport, a pool of connections, for kafka-go's
// writers and clients: that of every Client and Writer, and of tests that
// speak kafka-go. Its owner closes it (CloseIdleConnections) when done.
func (c Config) Transport() *kafka.Transport {
	return &kafka.Transport{
		DialTimeout: c.dialTimeout(),
		ClientID:    c.ClientID,
		TLS:         c.TLS,
		SASL:        c.SASL,
	}
}

// LoadTLS returns a TLS configuration (TLS 1.2 or later) that verifies the
// brokers against the certificate authorities of the PEM file caFile, or
// against the system's roots when caFile is empty.
func LoadTLS(caFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile == "" {
		return cfg, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("certificate authorities: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("certificate authorities %s: no PEM certificate in it", caFile)
	}
	cfg.RootCAs = pool
	return cfg, nil
}

// SASLMechanisms are the names NewSASL takes.
const SASLMechanisms = "plain, scram-sha-256 or scram-sha-512"

// ErrUnknownMechanism is NewSASL's error for a name not in SASLMechanisms.
var ErrUnknownMechanism = errors.New("unknown SASL mechanism")

// NewSASL returns the SASL mechanism named name (case-insensitive, one of
// SASLMechanisms) for user and password.
func NewSASL(name, user, password string) (sasl.Mechanism, error) {
	if user == "" {
		return nil, errors.New("SASL needs a user name")
	}
	var mech sasl.Mechanism
	var err error
	switch strings.ToLower(name) {
	case "plain":
		mech = plain.Mechanism{Username: user, Password: password}
	case "scram-sha-256":
		mech, err = scram.Mechanism(scram.SHA256, user, password)
	case "scram-sha-512":
		mech, err = scram.Mechanism(scram.SHA512, user, password)
	default:
		return nil, fmt.Errorf("%w %q: want %s", ErrUnknownMechanism, name, SASLMechanisms)
	}
	if err != nil {
		return nil, fmt.Errorf("SASL %s: %w", name, err)
	}
	return mech, nil
}
