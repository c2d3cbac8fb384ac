// Package metrics owns what the long-running roles of mvml (the serve
// replicas of package pipeline/serve, the refitter of package
// pipeline/refit) share to be watched: the kinds of their Prometheus
// metrics, the sending of a role's Stats fields as samples (Kind, Send)
// and the collector of a role's table of numbers (Collector), the
// /metrics handler on a registry of the role's own (Handler), and the
// HTTP server of /healthz, /readyz and /metrics that runs beside a role
// and stops with it (Serve).
package metrics
