// Package examples holds the walk-through of README.md, a newcomer's tour of
// mvml on Kafka (a development broker, kcat, serve, a retraining, a
// rollback), and its test, which runs the README's commands as written with
// the built mvml binary and checks what each one does.
package examples
