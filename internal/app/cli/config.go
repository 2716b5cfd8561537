package cli

import (
	"context"
	"os"
	"sort"

	"github.com/tiered/tiered/internal/app/config"
)

var configPrintCmd = &command{
	name:    "config print",
	summary: "print the effective configuration (secrets masked)",
	help: `usage: tiered config print [--process serve|sidecar|fetch] [--config FILE] [--json] [--sources]
                          [daemon flags]

Prints the configuration a daemon would run with: built-in defaults, then the YAML file
(--config), then TIERED_* environment variables, then flags given on this command line
(later wins). --process picks the daemon (default serve): its defaults (the sidecar has
no HTTP listener unless http.addr is set, and no Kafka listener) and its requirements
(sidecar: sidecar.kafka_log_dir, an existing directory, and bucket; fetch: bucket), so
'tiered config print --process sidecar --config FILE' checks a sidecar's configuration
before it starts. Tokens and passwords print as ******. If the configuration is invalid for
that process, lists every problem and exits as that process would: 1, or 2 when the only
problems are flag values or required settings nothing gave (--kafka-log-dir, --bucket).

Environment variables: TIERED_ + the key path in upper case with '_' for '.',
e.g. TIERED_DATA_DIR, TIERED_SIDECAR_KAFKA_LOG_DIR, TIERED_FETCH_CACHE_BYTES,
TIERED_BROKER_LOG_RETENTION_MS.

Flags:
  --process NAME     serve (default), sidecar or fetch
  --config FILE      YAML configuration file
  --json             print {"config": {...}, "sources": {"key": "default|file|env|flag"}}
  --sources          annotate each YAML value with the layer it came from
  --data-dir, --bucket, --http, --kafka, --advertised-addr, --kafka-log-dir,
  --bootstrap-server, --topics, --cache-bytes, --chunk-bytes, --cache-dir,
  --disk-cache-bytes, --interval, --concurrency, --rate, --gc-grace,
  --manifest-version, --log-level, --log-format
                     as for serve, sidecar and fetch

Examples:
  TIERED_LOG_FORMAT=json tiered config print --config tiered.yaml --sources
  TIERED_SIDECAR_KAFKA_LOG_DIR=/var/lib/kafka/data tiered config print --process sidecar \
      --config tiered.yaml --sources
`,
	run: runConfigPrint,
}

func runConfigPrint(r *Runner, _ context.Context, args []string) error {
	fs := newFlags("config print")
	file := fs.String("config", "", "")
	process := fs.String("process", string(config.ProcessServe), "")
	asJSON := fs.Bool("json", false, "")
	sources := fs.Bool("sources", false, "")
	names := make([]string, 0, len(config.FlagPaths))
	for name := range config.FlagPaths {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fs.String(name, "", "")
	}
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	p, err := config.ParseProcess(*process)
	if err != nil {
		return usagef("--process: %v", err)
	}
	c, err := config.Load(config.LoadOptions{File: *file, Env: os.Environ(), Flags: config.SetFlags(fs), Process: p})
	if err != nil {
		return configRefusal(err, true, err.Error())
	}
	if *asJSON {
		return c.WriteJSON(r.Stdout)
	}
	return c.WriteYAML(r.Stdout, *sources)
}
