// Package daemon owns the wiring of tiered's long-running processes: `tiered
// serve` (the local-tier log engine, log cleaner, local and remote retention,
// uploader, flusher and fetch service in one process over one data dir, plus
// serve's produce and topic admin HTTP API), `tiered fetch` (the stateless
// fetch service over a bucket) and `tiered sidecar` (the uploader over a Kafka
// broker's log dir, read only). It only connects the component packages —
// localtier, compactor, retention, remotetier, fetchcache — under one
// configuration (internal/app/config), one Prometheus registry and one logger,
// and orders their start-up and shutdown; the command-line layer
// (internal/app/cli) parses flags, loads the configuration and handles signals.
//
// Every daemon is built the same way (base): the logger and registry it is
// given (or a discarding logger and NewRegistry), the listeners' TLS and
// authentication from http.tls, kafka.tls and auth, and one HTTP listener
// wiring (server.Listen) serving /metrics from that registry, /healthz
// (200 while the process serves) and /readyz (the daemon's readiness), plus
// the Kafka listener of the daemons that run the fetch service. Serve and the
// sidecar map the uploader section to the uploader the same way, and every
// shutdown is bounded by shutdown_timeout.
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
// The sidecar opens the broker's log dir, asks the cluster for the
// partitions its broker leads (sidecar.bootstrap_server), opens and checks
// the bucket and binds its listener (only with http.addr set); its /readyz is
// 200 once an upload pass succeeded and while the latest one did, and 503
// with that pass's error otherwise. It serves no records.
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
// /readyz turns 200. The sidecar registers tiered_uploader_* and
// tiered_objstore_* (and the Go and process collectors) before it listens;
// it has no tiered_fetch_* series.
package daemon
