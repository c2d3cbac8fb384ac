package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// ShutdownTimeout bounds the wait for the HTTP requests under way when
// a serve.KafkaRunner or a refit.Role stops.
const ShutdownTimeout = 5 * time.Second

// Serve runs run while serving h (its health, readiness and metrics)
// on addr, or runs it alone when addr is "". Once run returns, the server
// shuts down, waiting up to ShutdownTimeout for the requests under
// way. It returns run's error joined with the server's ("http: …").
func Serve(ctx context.Context, addr string, h http.Handler, logger *slog.Logger, run func(context.Context) error) error {
	if addr == "" {
		return run(ctx)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("http: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	base := "http://" + ln.Addr().String()
	logger.Info("serving", "health", base+"/healthz", "ready", base+"/readyz", "metrics", base+"/metrics")
	runErr := run(ctx)
	shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownTimeout)
	defer cancel()
	err = srv.Shutdown(shutdown)
	if serveErr := <-served; !errors.Is(serveErr, http.ErrServerClosed) {
		err = errors.Join(err, serveErr)
	}
	if err != nil {
		err = fmt.Errorf("http: %w", err)
	}
	return errors.Join(runErr, err)
}
