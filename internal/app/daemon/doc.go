// Package daemon owns the wiring of tiered's long-running processes: `tiered
// serve` (the local-tier log engine, log cleaner, local and remote retention,
// uploader, flusher and fetch service in one process over one data dir, plus
// serve's produce and topic admin HTTP API) and `tiered fetch` (the stateless
// fetch service over a bucket). It only connects the component packages —
// localtier, compactor, retention, remotetier, fetchcache — under one
// configuration (internal/app/config), one Prometheus registry and one logger,
// and orders their start-up and shutdown; the command-line layer
// (internal/app/cli) parses flags, loads the configuration and handles signals.
//
// # Start-up
//
// Serve checks an explicitly configured bucket first (an unreachable one
// fails the start with nothing written), then flocks the data dir without
// waiting (a second process gets a *HeldError naming the holder, whose pid
// and addresses serve records in the lock file), opens the default bucket
// <data-dir>/bucket, and binds its listeners. Recovery of the log dir then
// runs while the listeners answer: /healthz is 200, /readyz 503 until the
// log dir is recovered and every remote-enabled partition's root manifest
// was read once; requests for data wait for that up to ReadyWait, then get
// 503 LEADER_NOT_AVAILABLE (produce, topic admin) or 429/throttle (fetch).
//
// # Shutdown
//
// When Run's context ends, the listeners stop accepting and finish in-flight
// requests; then the loops stop (an upload in flight is abandoned, its
// attempt objects are garbage-collected later; a cleaning run is aborted and
// its .cleaned files removed at the next start); then the log dir is closed,
// which flushes every partition and writes the checkpoints; then the lock is
// released. The whole sequence is bounded by shutdown_timeout.
//
// # Metrics
//
// Every subsystem registers on one registry: tiered_localtier_* (this
// package: partitions, segments and bytes on disk, appends, flushes),
// tiered_compactor_*, tiered_retention_*, tiered_uploader_*,
// tiered_objstore_* and tiered_fetch_*. The series of the listeners, object
// store, fetch cache and local tier exist from the moment serve listens; the
// compactor, retention and uploader series once recovery finished, before
// /readyz turns 200.
package daemon
