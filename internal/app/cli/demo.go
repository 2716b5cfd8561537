package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tiered/tiered/internal/app/config"
	"github.com/tiered/tiered/internal/app/daemon"
	"github.com/tiered/tiered/internal/app/producer"
	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/record"
)

// The demo's topics.
const (
	demoEvents = "demo-events" // cleanup.policy=delete
	demoUsers  = "demo-users"  // cleanup.policy=compact
)

// demoTopicConfigs make segments small and short-lived locally, so they
// roll, upload and leave the local disk within seconds.
var demoTopicConfigs = map[string]map[string]string{
	demoEvents: {
		"cleanup.policy": "delete", "remote.storage.enable": "true", "compression.type": "zstd",
		"internal.segment.bytes": "65536", "segment.ms": "5000",
		"local.retention.ms": "10000", "local.retention.bytes": "262144",
	},
	demoUsers: {
		"cleanup.policy": "compact", "remote.storage.enable": "true",
		"internal.segment.bytes": "32768", "segment.ms": "5000",
		"min.cleanable.dirty.ratio": "0.1", "delete.retention.ms": "10000",
		"min.compaction.lag.ms": "3000", // uploaded before cleaned
		"local.retention.ms":    "15000",
	},
}

var demoCmd = &command{
	name:    "demo",
	summary: "run serve with a built-in producer and a live status line",
	help: `usage: tiered demo [--data-dir DIR] [--http ADDR] [--kafka ADDR] [--log-level L]

Runs 'tiered serve' on DIR (default: a new temporary directory, kept afterwards) with a
built-in producer writing two topics, both with remote.storage.enable=true and small
segments (internal.segment.bytes, segment.ms=5s) that stay only seconds on local disk
(local.retention.ms):
  demo-events   cleanup.policy=delete, zstd, keyed by sensor
  demo-users    cleanup.policy=compact, 200 keys, every 20th record a tombstone
The uploader runs every second and retention every 2 seconds, so segments roll, upload,
get cleaned and leave the local disk while you watch. A status line is printed about
once a second (rewritten in place on a terminal, one line per tick otherwise): local and
remote segments and bytes, uploads, cleaner runs, local deletions and the fetch cache's
hit ratio. At start it prints commands to copy into another terminal to read cold
offsets (uploaded, deleted locally) with 'tiered consume --fetch', 'tiered consume
--bucket' and kcat.

It prints a line at once saying it is starting, then the addresses, and a line naming
the new port when 127.0.0.1:8080 (HTTP) or 127.0.0.1:9092 (Kafka) is taken and a free one
is used instead. The kcat command needs kcat installed; the demo says whether it found it
on PATH. Ctrl-C stops the producer and serve cleanly (flush, checkpoint) and exits 0; the
data dir is kept, and the last line is the command that removes it.

Flags:
  --data-dir DIR     data directory (default: a new temporary directory)
  --http ADDR        HTTP listener (default 127.0.0.1:8080, else a free port)
  --kafka ADDR       Kafka-protocol listener (default 127.0.0.1:9092, else a free port)
  --log-level L      serve's log level on stderr (default warn)
`,
	run: runDemo,
}

// The demo's default listeners (variables so that tests can take them).
var (
	demoHTTPAddr  = config.DefaultHTTPAddr
	demoKafkaAddr = config.DefaultKafkaAddr
)

func runDemo(r *Runner, ctx context.Context, args []string) error {
	fs := newFlags("demo")
	dataDir := fs.String("data-dir", "", "")
	httpAddr := fs.String("http", demoHTTPAddr, "")
	kafkaAddr := fs.String("kafka", demoKafkaAddr, "")
	logLevel := fs.String("log-level", "warn", "")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if err := noArgs(pos); err != nil {
		return err
	}
	set := setFlags(fs)
	if *dataDir == "" {
		if *dataDir, err = os.MkdirTemp("", "tiered-demo-"); err != nil {
			return fmt.Errorf("temporary data dir: %w", err)
		}
	}
	if abs, err := filepath.Abs(*dataDir); err == nil {
		*dataDir = abs
	}
	// Say at once what is happening: recovery of a given data dir can take
	// a while, and nothing else is printed until serve is ready.
	fmt.Fprintf(r.Stdout, "tiered demo: starting serve on data dir %s ...\n", *dataDir)
	// A default port another process has: take a free one, and say so.
	var moved []string
	for _, l := range []struct {
		flag, what string
		addr       *string
	}{{"http", "HTTP", httpAddr}, {"kafka", "Kafka", kafkaAddr}} {
		if !set[l.flag] && addrTaken(*l.addr) {
			moved = append(moved, l.what)
			*l.addr = "127.0.0.1:0"
		}
	}
	flags := map[string]string{
		"data-dir": *dataDir, "http": *httpAddr, "kafka": *kafkaAddr, "log-level": *logLevel,
		"uploader.interval":                      "1s",
		"broker.log.retention.check.interval.ms": "2000",
		"broker.log.cleaner.backoff.ms":          "1000",
		"shutdown_timeout":                       "20s",
	}
	load := func() (*config.Config, error) {
		return config.Load(config.LoadOptions{Env: os.Environ(), Flags: flags, Process: config.ProcessServe})
	}
	cfg, err := load()
	if err != nil {
		return usagef("refusing to start: %s", oneLine(err.Error()))
	}
	logger := daemon.NewLogger(cfg.Log, r.Stderr)
	s, err := daemon.NewServe(ctx, daemon.ServeOptions{Config: cfg, Reload: load, Logger: logger, Now: r.Now, Command: "tiered demo"})
	if err != nil && errors.Is(err, syscall.EADDRINUSE) && (!set["http"] || !set["kafka"]) {
		// A default port was taken after the check above: use free ones.
		moved = moved[:0]
		if !set["http"] {
			flags["http"] = "127.0.0.1:0"
			moved = append(moved, "HTTP")
		}
		if !set["kafka"] {
			flags["kafka"] = "127.0.0.1:0"
			moved = append(moved, "Kafka")
		}
		if cfg, err = load(); err == nil {
			s, err = daemon.NewServe(ctx, daemon.ServeOptions{Config: cfg, Reload: load, Logger: logger, Now: r.Now, Command: "tiered demo"})
		}
	}
	if err != nil {
		return err
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	runErr := make(chan error, 1)
	go func() { runErr <- s.Run(runCtx) }()

	select {
	case <-s.Ready():
	case err := <-runErr:
		return err
	}
	if err := createDemoTopics(s.LogDir()); err != nil {
		stop()
		<-runErr
		return err
	}
	for _, what := range moved {
		want, got := demoHTTPAddr, s.HTTPAddr()
		if what == "Kafka" {
			want, got = demoKafkaAddr, s.KafkaAddr()
		}
		fmt.Fprintf(r.Stdout, "tiered demo: %s is in use, so %s listens on %s instead (--%s ADDR picks one)\n",
			want, what, got, strings.ToLower(what))
	}
	printDemoIntro(r.Stdout, s, cfg.Bucket, *dataDir)

	var wg sync.WaitGroup
	var produced demoCounter
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := demoProduce(runCtx, s, r, &produced); err != nil && runCtx.Err() == nil {
			logger.Error("demo producer stopped", "err", err)
		}
	}()
	st := &statusPrinter{w: r.Stdout, tty: isTerminal(r.Stdout), began: time.Now()}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var err2 error
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case err2 = <-runErr:
			runErr <- err2
			break loop
		case <-tick.C:
			status, err := s.Status(runCtx)
			if err == nil {
				st.print(status, produced.load())
			}
		}
	}
	st.end()
	stop()
	wg.Wait()
	err = <-runErr
	fmt.Fprintf(r.Stdout, "demo stopped after producing %d records; the data dir (with its bucket) is kept: %s\n", produced.load(), *dataDir)
	fmt.Fprintf(r.Stdout, "remove it with: rm -rf %s\n", shellQuote(*dataDir))
	return err
}

// addrTaken reports whether another process listens on addr (a bind fails
// with EADDRINUSE).
func addrTaken(addr string) bool {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return errors.Is(err, syscall.EADDRINUSE)
	}
	_ = l.Close()
	return false
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+:=@") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// kcatNote says whether the kcat of the demo's kcat command is installed.
func kcatNote(lookPath func(string) (string, error)) string {
	if p, err := lookPath("kcat"); err == nil {
		return "needs kcat: found at " + p
	}
	return "needs kcat, which is not on your PATH: install it first, e.g. apt install kcat or brew install kcat"
}

// createDemoTopics creates the demo topics unless a previous run did.
func createDemoTopics(d *localtier.LogDir) error {
	for _, name := range []string{demoEvents, demoUsers} {
		if _, ok := d.Topic(name); ok {
			continue
		}
		if _, err := d.CreateTopic(name, 2, demoTopicConfigs[name]); err != nil {
			return fmt.Errorf("create demo topic: %w", err)
		}
	}
	return nil
}

func printDemoIntro(w io.Writer, s *daemon.Serve, bucket, dataDir string) {
	self := "tiered"
	if exe, err := os.Executable(); err == nil && !inPath(exe) {
		self = exe
	}
	httpURL := "http://" + s.HTTPAddr()
	fmt.Fprintf(w, `tiered demo: serve on %s (HTTP %s, Kafka %s), bucket %s
Producing to %s (delete) and %s (compact), 2 partitions each; segments roll every
64 KiB / 5 s, upload within a second and leave the local disk after ~10 s.

Read cold offsets (in the bucket only) from another terminal while this runs:
  %s consume --fetch %s --topic %s --partition 0 --from-offset 0 --max-records 5
  %s consume --bucket %s --topic %s --partition 0 --max-records 5
  kcat -C -b %s -t %s -p 0 -o beginning -c 5 -e -f 'offset %%o key %%k: %%s\n'
    (%s)
  curl -s '%s/v1/topics/%s/partitions/0' | head -c 600
Stop with Ctrl-C. The data dir is kept afterwards (rm -rf %s removes it).

`, dataDir, httpURL, s.KafkaAddr(), daemon.ShownURL(bucket), demoEvents, demoUsers,
		self, httpURL, demoEvents, self, bucket, demoUsers, s.KafkaAddr(), demoEvents, kcatNote(exec.LookPath),
		httpURL, demoEvents, shellQuote(dataDir))
}

// inPath reports whether exe is what "tiered" finds in $PATH.
func inPath(exe string) bool {
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		if p := filepath.Join(dir, "tiered"); p == exe {
			return true
		}
	}
	return false
}

type demoCounter struct {
	mu sync.Mutex
	n  int64
}

func (c *demoCounter) add(n int) { c.mu.Lock(); c.n += int64(n); c.mu.Unlock() }
func (c *demoCounter) load() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// demoProduce writes ~10 ticks a second: 20 sensor events and 10 user
// updates each.
func demoProduce(ctx context.Context, s *daemon.Serve, r *Runner, n *demoCounter) error {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	var seq int64
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		now := r.now().UnixMilli()
		var events, users []producer.Input
		for i := range 20 {
			seq++
			v := fmt.Sprintf(`{"seq":%d,"sensor":%d,"celsius":%d.%d,"note":"%s"}`, seq, seq%16, 15+seq%20, seq%10, strings.Repeat("x", int(seq%64)))
			events = append(events, producer.Input{Line: i + 1, Record: record.Record{Timestamp: now,
				Key: fmt.Appendf(nil, "sensor-%d", seq%16), Value: []byte(v)}})
		}
		for i := range 10 {
			u := (seq + int64(i)*7) % 200
			rec := record.Record{Timestamp: now, Key: fmt.Appendf(nil, "user-%d", u)}
			if (seq+int64(i))%20 != 0 {
				rec.Value = fmt.Appendf(nil, `{"user":%d,"visits":%d}`, u, seq)
			}
			users = append(users, producer.Input{Line: i + 1, Record: rec})
		}
		for topic, in := range map[string][]producer.Input{demoEvents: events, demoUsers: users} {
			res, err := s.Produce(ctx, topic, producer.Inputs(in), producer.Options{Partition: -1})
			if err != nil {
				return err
			}
			n.add(res.Records)
		}
	}
}

// statusPrinter prints the status line: in place on a terminal, one line
// per tick otherwise.
type statusPrinter struct {
	w       io.Writer
	tty     bool
	began   time.Time
	printed bool
}

func (p *statusPrinter) print(st daemon.Status, produced int64) {
	line := fmt.Sprintf("[%3ds] produced %d | local %d seg %s | remote %d seg %s | uploads %.0f | cleaner runs %.0f | local deletes %.0f | cache hit %.0f%% (%.0f/%.0f)",
		int(time.Since(p.began).Seconds()), produced, st.LocalSegments, mb(st.LocalBytes), st.RemoteSegments, mb(st.RemoteBytes),
		st.Uploads, st.CleanerRuns, st.LocalDeletes, 100*st.CacheHitRatio(), st.CacheHits, st.CacheHits+st.CacheMisses)
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s", line)
	} else {
		fmt.Fprintln(p.w, line)
	}
	p.printed = true
}

func (p *statusPrinter) end() {
	if p.tty && p.printed {
		fmt.Fprintln(p.w)
	}
}

func mb(n int64) string { return fmt.Sprintf("%.2f MB", float64(n)/1e6) }

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
