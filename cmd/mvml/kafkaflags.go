package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/mvml/mvml/kafkaconn"
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
	fs.StringVar(&k.mechanism, "sasl", "", "SASL `MECHANISM`: "+kafkaconn.SASLMechanisms+", with --sasl-user and the password in $"+kafkaPasswordEnv)
	fs.StringVar(&k.user, "sasl-user", "", "SASL `USER`")
	return k
}

// check notes what is wrong with the flags themselves, as lint sees it:
// an unknown SASL mechanism, a mechanism without a user or a user without
// a mechanism. The password is the environment's ($MVML_KAFKA_PASSWORD),
// checked when the command connects (connection).
func (k *kafkaFlags) check(c *checks) {
	switch {
	case k.mechanism != "":
		if _, err := kafkaconn.NewSASL(k.mechanism, "user", ""); errors.Is(err, kafkaconn.ErrUnknownMechanism) {
			c.failf("--sasl %q: want %s", k.mechanism, kafkaconn.SASLMechanisms)
		} else if k.user == "" {
			c.failf("--sasl needs --sasl-user and the password in $%s", kafkaPasswordEnv)
		}
	case k.user != "":
		c.failf("--sasl-user needs --sasl MECHANISM: %s", kafkaconn.SASLMechanisms)
	}
}

// connection returns the connection the flags describe; without --tls,
// --tls-ca and --sasl it is plain TCP.
func (k *kafkaFlags) connection() (kafkaconn.Config, error) {
	cfg := kafkaconn.Config{Brokers: strings.Split(k.brokers, ",")}
	if k.tls || k.tlsCA != "" {
		tlsConfig, err := kafkaconn.LoadTLS(k.tlsCA)
		if err != nil {
			return cfg, fmt.Errorf("--tls-ca: %w", err)
		}
		cfg.TLS = tlsConfig
	}
	if k.mechanism != "" || k.user != "" {
		password, ok := os.LookupEnv(kafkaPasswordEnv)
		if k.user == "" || !ok {
			return cfg, usagef("--sasl needs --sasl-user and the password in $%s", kafkaPasswordEnv)
		}
		mech, err := kafkaconn.NewSASL(k.mechanism, k.user, password)
		switch {
		case errors.Is(err, kafkaconn.ErrUnknownMechanism):
			return cfg, usagef("--sasl %q: want %s", k.mechanism, kafkaconn.SASLMechanisms)
		case err != nil:
			return cfg, fmt.Errorf("--sasl: %w", err)
		}
		cfg.SASL = mech
	}
	return cfg, nil
}
