// Package kafkaconn owns how mvml reaches a Kafka cluster: the bootstrap
// addresses, TLS, SASL, the client id and the dial timeout, in one Config
// from which both kinds of kafka-go client are made — a *kafka.Dialer for
// the readers of package ingest and a *kafka.Transport for the writers of
// package sink and for admin requests — so that every client of one job
// connects alike. It also says which Kafka errors pass by themselves
// (Transient) and how a write or commit retries them (Retry); it writes
// values larger than a message as chunks (WriteBlob) and puts them back
// together, checked, on the reading side (Assembler); Fetch reads a
// partition one request at a time, and Offsets lists the range it keeps,
// for readers that decide when to read (the model topic's, the
// refitter's and a serve replica's of the stats topic); Partitions
// checks a topic that must exist with one partition, and TopicClients
// are the client and writer of a component that reads and writes such a
// topic itself; and Produce
// feeds a topic for tools and demos.
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
// them.
func (c Config) Addr() net.Addr { return kafka.TCP(c.Brokers...) }

// Dialer returns a dialer for kafka-go's readers (kafka.ReaderConfig).
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
// writers and clients. Its owner closes it (CloseIdleConnections) when
// done.
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
