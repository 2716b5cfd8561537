package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/auth"
	"github.com/tiered/tiered/fetchcache/httpapi"
	"github.com/tiered/tiered/internal/app/config"
	"github.com/tiered/tiered/internal/app/daemon"
)

var serveCmd = &command{
	name:    "serve",
	summary: "run the log engine, cleaner, retention, uploader and fetch service in one process",
	help: `usage: tiered serve [--data-dir DIR] [--bucket URL] [--http ADDR] [--kafka ADDR] [--config FILE]
                    [--advertised-addr H:P] [--log-level L] [--log-format text|json]

Runs everything on one machine until SIGINT or SIGTERM: tiered's own log engine over the
data dir, the log cleaner (log.cleaner.enable), local and remote retention (every
log.retention.check.interval.ms), the uploader (topics with remote.storage.enable=true),
a flusher for flush.ms, and the fetch service on --http and --kafka. Reads of offsets
still on local disk are served from disk; older offsets (uploaded, then deleted locally by
local.retention.*) are served from the bucket through the chunk cache. The Kafka
listener also coordinates consumer groups (see 'tiered help fetch'), their committed
offsets under groups/ in the bucket.

Defaults need nothing installed: data dir ./data, bucket file://<data-dir>/bucket (made
if missing; the log-dir loader skips it), HTTP on 127.0.0.1:8080, Kafka on 127.0.0.1:9092.

The data dir is locked: a second process on it fails and names the holder (pid, HTTP
address). While serve runs, reach it with --server: 'tiered produce --server URL',
'tiered topic create|alter|describe --server URL', and consume with --fetch URL.

HTTP API, besides the fetch service's GET /v1/topics[/T/partitions/P[/records]]:
  POST  /v1/topics                            {"topic", "partitions", "configs": {}} -> 201,
                                              409 TOPIC_ALREADY_EXISTS, 400 INVALID_CONFIG
  GET   /v1/topics/T/config                   partitions and every config with its source
  PATCH /v1/topics/T/config                   {"set": {k: v}, "delete": [k]}
  POST  /v1/topics/T/records                  JSON lines (produce's shape), partitioned by key
  POST  /v1/topics/T/partitions/P/records     JSON lines to partition P
                                              (?auto_create=false: no topic auto-creation)
  POST  /v1/admin/reload                      like SIGHUP
  GET   /metrics, /healthz, /readyz
With auth.acls each route needs its permission (README, "Authorization"): topic create
and alter, reload and /metrics need admin, produce needs write (auto-creation: admin
too), reads need read; a refusal is 403. Each change logs one "audit" line naming the
principal (SIGHUP's: Signal:SIGHUP).
Produce answers {"topic", "records", "batches", "partitions": [{"partition",
"first_offset", "last_offset", ...}]} once the records are as durable as the topic's
flush settings promise: with Kafka's defaults (flush.messages and flush.ms unset) an
acknowledged append is in the page cache, like Kafka's (it survives a crash of the
process, not of the machine); a topic setting flush.messages or flush.ms gets an fsync
before the answer.

/readyz answers 503 until the data dir is recovered and every remote-enabled partition's
manifest was read; produce and fetch requests wait for that up to 10s, then get 503 / 429.

Configuration: built-in defaults < --config FILE (YAML) < TIERED_* environment < flags
(see 'tiered config print'). Kafka broker configs go in the file's broker section (e.g.
log.retention.hours, log.segment.bytes, log.cleaner.enable, num.partitions) and are
broker-wide topic defaults under each topic's overrides. An invalid configuration, or a
bucket that cannot be opened, is refused before anything is written: every problem is
listed and the exit status is 1 (2 when the only problems are flag values, like any
malformed flag). Failures after that (data dir held, address in use, recovery failure)
exit 1 too.

Signals: SIGTERM/SIGINT stop accepting, finish in-flight requests, stop the loops (an
upload in flight is abandoned and garbage-collected later), flush and checkpoint the
data dir and exit 0, all within shutdown_timeout (default 30s). SIGHUP reloads the
broker-wide topic defaults from the configuration and every topic's overrides from disk.

Flags:
  --data-dir DIR         data directory (default ./data)
  --bucket URL           file:///dir, mem://name or s3://bucket/prefix?endpoint=...&region=...
                         (default file://<data-dir>/bucket)
  --http ADDR            HTTP listener (default 127.0.0.1:8080; port 0 picks one)
  --kafka ADDR           Kafka-protocol listener (default 127.0.0.1:9092)
  --advertised-addr H:P  address Kafka Metadata advertises (default: the one reached)
  --config FILE          YAML configuration file
  --log-level L          debug, info, warn, error (default info)
  --log-format F         text or json (default text)

Example:
  tiered serve --data-dir /var/lib/tiered --bucket 's3://logs/tiered?region=eu-west-1'
`,
	run: runServe,
}

// daemonFlags defines the configuration flags a daemon accepts (names from
// config.FlagPaths) plus --config.
func daemonFlags(fs *flag.FlagSet, names ...string) *string {
	for _, n := range names {
		fs.String(n, "", "")
	}
	return fs.String("config", "", "")
}

// loadDaemonConfig loads the configuration for process p. An invalid
// configuration, or an explicit bucket that cannot be opened, is refused
// listing every problem: exit 1, or 2 when only flag values are wrong
// (configRefusal).
func loadDaemonConfig(ctx context.Context, fs *flag.FlagSet, file string, p config.Process) (*config.Config, func() (*config.Config, error), error) {
	opts := config.LoadOptions{File: file, Env: os.Environ(), Flags: config.SetFlags(fs), Process: p}
	reload := func() (*config.Config, error) { return config.Load(opts) }
	c, err := config.Load(opts)
	var problems []string
	if err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			if line = strings.TrimSpace(line); line != "" {
				problems = append(problems, line)
			}
		}
	}
	bctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// The derived default bucket is serve's to create (and fetch's missing
	// --bucket is a problem already).
	berr := daemon.CheckBucket(bctx, c.Bucket, c.DataDir, p == config.ProcessFetch)
	if berr != nil {
		problems = append(problems, berr.Error())
	}
	if len(problems) > 0 {
		return nil, nil, configRefusal(err, berr == nil, fmt.Sprintf("refusing to start: %d configuration problem(s): %s", len(problems), strings.Join(problems, "; ")))
	}
	return c, reload, nil
}

// configRefusal is the error of a configuration a command refuses, with
// message msg. It is a usage error (exit 2) when every problem is on the
// command line (onlyLoad: loadErr holds them all, and each is a
// *config.FieldError about a flag's value or a required setting no layer
// gave, which a flag supplies), like any missing or malformed flag value;
// otherwise (the YAML file, a TIERED_* variable, a bucket that cannot be
// opened) it exits 1, a refused configuration (README's exit codes).
// serve, fetch, sidecar and config print decide it here alike.
func configRefusal(loadErr error, onlyLoad bool, msg string) error {
	if onlyLoad && loadErr != nil && allFlagProblems(loadErr) {
		return usagef("%s", msg)
	}
	return errors.New(msg)
}

// allFlagProblems reports whether every problem joined in err is a flag's
// value or a required setting not given.
func allFlagProblems(err error) bool {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			if !allFlagProblems(e) {
				return false
			}
		}
		return true
	}
	var fe *config.FieldError
	return errors.As(err, &fe) && (fe.Source == config.SourceFlag || fe.Source == config.SourceDefault)
}

// daemonRunner is a daemon built from its configuration.
type daemonRunner interface {
	Run(ctx context.Context) error
}

// runDaemon is every daemon command: it parses the flags (names from config.FlagPaths, plus
// --config), loads process p's configuration (defaults < file < TIERED_* < flags), builds the
// daemon and runs it until ctx ends. A configuration problem or a bucket that cannot be
// opened is refused listing every problem (configRefusal decides the exit code).
func runDaemon(r *Runner, ctx context.Context, args []string, p config.Process, flags []string,
	build func(cfg *config.Config, reload func() (*config.Config, error), logger *slog.Logger) (daemonRunner, error)) error {
	fs := newFlags(string(p))
	file := daemonFlags(fs, flags...)
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	cfg, reload, err := loadDaemonConfig(ctx, fs, *file, p)
	if err != nil {
		return err
	}
	logger := daemon.NewLogger(cfg.Log, r.Stderr)
	d, err := build(cfg, reload, logger)
	if err != nil {
		var be *daemon.BucketError
		if errors.As(err, &be) {
			return fmt.Errorf("refusing to start: %w", err) // exit 1, as a refused configuration
		}
		return err
	}
	if m, ok := d.(interface{ MemoryLimit() int64 }); ok && r.MemoryLimit {
		limit := daemon.ApplyMemoryLimit(m.MemoryLimit(), logger)
		if p, ok := d.(interface{ PretouchBytes() int64 }); ok {
			daemon.Pretouch(limit, p.PretouchBytes(), logger)
		}
	}
	return d.Run(ctx)
}

func runServe(r *Runner, ctx context.Context, args []string) error {
	flags := []string{"data-dir", "bucket", "http", "kafka", "advertised-addr", "log-level", "log-format"}
	return runDaemon(r, ctx, args, config.ProcessServe, flags, func(cfg *config.Config, reload func() (*config.Config, error), logger *slog.Logger) (daemonRunner, error) {
		s, err := daemon.NewServe(ctx, daemon.ServeOptions{Config: cfg, Reload: reload, Logger: logger, Now: r.Now})
		if err != nil {
			return nil, err
		}
		return serveProcess{s: s, logger: logger}, nil
	})
}

// serveProcess runs serve with SIGHUP reloading it.
type serveProcess struct {
	s      *daemon.Serve
	logger *slog.Logger
}

func (p serveProcess) Run(ctx context.Context) error { return runServeProcess(ctx, p.s, p.logger) }

func (p serveProcess) MemoryLimit() int64 { return p.s.MemoryLimit() }

// runServeProcess runs s until ctx ends, reloading on SIGHUP; each reload
// logs its audit line, as POST /v1/admin/reload does, with the signal as
// the principal.
func runServeProcess(ctx context.Context, s *daemon.Serve, logger *slog.Logger) error {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	hctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		for {
			select {
			case <-hctx.Done():
				return
			case <-hup:
				result := auth.AuditOK
				if err := s.Reload(); err != nil {
					logger.Error("reload failed", "err", err)
					result = fetchcache.CodeReloadFailed
				}
				auth.Audit(logger, auth.SignalPrincipal("SIGHUP"), httpapi.AuditReload, "config", result)
			}
		}
	}()
	logger.Info("serve listening", "http", s.HTTPAddr(), "kafka", s.KafkaAddr())
	return s.Run(ctx)
}

// serverCall sends one request to a serve process's HTTP API and decodes a
// JSON answer into out (nil: discard). A non-2xx answer becomes an error
// carrying the server's message.
func serverCall(ctx context.Context, server, method, path, contentType string, body []byte, out any) error {
	base, err := url.Parse(strings.TrimRight(server, "/"))
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return usagef("--server %q is not an http:// or https:// URL", server)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, base.String()+path, rd)
	if err != nil {
		return fmt.Errorf("server request: %w", err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	hc := newHTTPClient()
	defer hc.CloseIdleConnections()
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("cannot reach server %s: %w", base.Redacted(), err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("read answer of server %s: %w", base.Redacted(), err)
	}
	if resp.StatusCode/100 != 2 {
		var e struct{ Code, Message string }
		if json.Unmarshal(data, &e) == nil && e.Message != "" {
			return fmt.Errorf("%s (%s)%s", e.Message, e.Code, statusHint(resp.StatusCode))
		}
		return fmt.Errorf("server %s answered %s%s", base.Redacted(), resp.Status, statusHint(resp.StatusCode))
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("decode answer of server %s: %w", base.Redacted(), err)
	}
	return nil
}
