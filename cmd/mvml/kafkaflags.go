package main

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"
)

// kafkaPasswordEnv holds the SASL password: a flag's value would show in
// the process list.
const kafkaPasswordEnv = "MVML_KAFKA_PASSWORD"

// kafkaFlags are how a command reaches the brokers: addresses, TLS and SASL.
type kafkaFlags struct {
	brokers   string
	tls       bool
	tlsCA     string
	mechanism string
	user      string
}

func registerKafka(fs *flag.FlagSet, brokersUsage string) *kafkaFlags {
	k := &kafkaFlags{}
	fs.StringVar(&k.brokers, "brokers", "", brokersUsage)
	fs.BoolVar(&k.tls, "tls", false, "connect to the brokers over TLS, verifying them against the system's roots (or --tls-ca)")
	fs.StringVar(&k.tlsCA, "tls-ca", "", "PEM `FILE` of the certificate authorities that sign the brokers' certificates (implies --tls)")
	fs.StringVar(&k.mechanism, "sasl", "", "SASL `MECHANISM`: plain, scram-sha-256 or scram-sha-512, with --sasl-user and the password in $"+kafkaPasswordEnv)
	fs.StringVar(&k.user, "sasl-user", "", "SASL `USER`")
	return k
}

// list is the bootstrap addresses.
func (k *kafkaFlags) list() []string { return strings.Split(k.brokers, ",") }

// connection returns the dialer (for the readers) and transport (for the
// writers) that carry the TLS and SASL settings; both are nil for plain TCP.
func (k *kafkaFlags) connection() (*kafka.Dialer, *kafka.Transport, error) {
	var tlsConfig *tls.Config
	if k.tls || k.tlsCA != "" {
		tlsConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		if k.tlsCA != "" {
			pem, err := os.ReadFile(k.tlsCA)
			if err != nil {
				return nil, nil, fmt.Errorf("--tls-ca: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, nil, fmt.Errorf("--tls-ca %s: no PEM certificate in it", k.tlsCA)
			}
			tlsConfig.RootCAs = pool
		}
	}
	var mechanism sasl.Mechanism
	if k.mechanism != "" || k.user != "" {
		password, ok := os.LookupEnv(kafkaPasswordEnv)
		if k.user == "" || !ok {
			return nil, nil, usagef("--sasl needs --sasl-user and the password in $%s", kafkaPasswordEnv)
		}
		var err error
		switch strings.ToLower(k.mechanism) {
		case "plain":
			mechanism = plain.Mechanism{Username: k.user, Password: password}
		case "scram-sha-256":
			mechanism, err = scram.Mechanism(scram.SHA256, k.user, password)
		case "scram-sha-512":
			mechanism, err = scram.Mechanism(scram.SHA512, k.user, password)
		default:
			return nil, nil, usagef("--sasl %q: want plain, scram-sha-256 or scram-sha-512", k.mechanism)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("--sasl: %w", err)
		}
	}
	if tlsConfig == nil && mechanism == nil {
		return nil, nil, nil
	}
	dialer := &kafka.Dialer{Timeout: 10 * time.Second, DualStack: true, TLS: tlsConfig, SASLMechanism: mechanism}
	transport := &kafka.Transport{TLS: tlsConfig, SASL: mechanism}
	return dialer, transport, nil
}
