package config

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.yaml.in/yaml/v3"

	"github.com/tiered/tiered/fetchcache/auth"
	"github.com/tiered/tiered/localtier/topicconfig"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// writeFile writes a config file into a temp dir and returns its path.
func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tiered.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// problems returns the FieldErrors of a Load/Validate error.
func problems(t *testing.T, err error) []*FieldError {
	t.Helper()
	if err == nil {
		return nil
	}
	var out []*FieldError
	for _, e := range unjoin(err) {
		var fe *FieldError
		if !errors.As(e, &fe) {
			t.Fatalf("problem %v (%T) is not a *FieldError", e, e)
		}
		out = append(out, fe)
	}
	return out
}

func mustLoad(t *testing.T, opts LoadOptions) *Config {
	t.Helper()
	c, err := Load(opts)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return c
}

func TestDefaultsLoadClean(t *testing.T) {
	dir := t.TempDir()
	c := mustLoad(t, LoadOptions{Flags: map[string]string{"data-dir": dir}})
	if want := "file://" + filepath.ToSlash(filepath.Join(dir, "bucket")); c.Bucket != want {
		t.Errorf("bucket %q, want %q", c.Bucket, want)
	}
	if got := c.Source("bucket"); got != SourceDefault {
		t.Errorf("bucket source %q, want default", got)
	}
	if c.HTTP.Addr != DefaultHTTPAddr || c.Kafka.Addr != DefaultKafkaAddr || c.Fetch.ChunkBytes != 4<<20 || c.Uploader.Concurrency != 4 {
		t.Errorf("defaults: %+v", c)
	}
	for p, s := range c.Sources() {
		if s != SourceDefault && p != "data_dir" {
			t.Errorf("%s: source %s, want default", p, s)
		}
	}
	if len(c.TopicDefaults()) != 0 {
		t.Errorf("TopicDefaults of the defaults = %v, want empty (Kafka's defaults are topicconfig's)", c.TopicDefaults())
	}
	// Defaults() alone also validates once the bucket is derived.
	d := Defaults()
	d.deriveBucket()
	if err := d.Validate(); err != nil {
		t.Errorf("Defaults().Validate: %v", err)
	}
	if DefaultBucket("/x/y") != "file:///x/y/bucket" {
		t.Errorf("DefaultBucket = %q", DefaultBucket("/x/y"))
	}
}

func TestPrecedence(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, `
data_dir: `+dir+`
http:
  addr: 127.0.0.1:7001
kafka:
  addr: 127.0.0.1:7002
fetch:
  cache_bytes: 64MiB
  chunk_bytes: 1MiB
  max_wait: 5s
broker:
  log.retention.ms: "1000"
  log.cleaner.threads: 2
  num.partitions: 3
log:
  level: debug
`)
	env := []string{
		"PATH=/bin",
		"TIERED_KAFKA_ADDR=127.0.0.1:7102",
		"TIERED_FETCH_CACHE_BYTES=128MiB",
		"TIERED_FETCH_MAX_WAIT=7s",
		"TIERED_BROKER_LOG_RETENTION_MS=2000",
		"TIERED_BROKER_LOG_CLEANER_THREADS=4",
		"TIERED_LOG_FORMAT=json",
		"TIERED_SKIP_MINIO=1", // another tool's variable: ignored
	}
	flags := map[string]string{
		"cache-bytes":             "256MiB",
		"fetch.max_wait":          "9s",
		"broker.log.retention.ms": "3000",
	}
	c := mustLoad(t, LoadOptions{File: file, Env: env, Flags: flags})
	tests := []struct {
		path string
		got  any
		want any
		src  Source
	}{
		{"data_dir", c.DataDir, dir, SourceFile},
		{"http.addr", c.HTTP.Addr, "127.0.0.1:7001", SourceFile},                   // file only
		{"kafka.addr", c.Kafka.Addr, "127.0.0.1:7102", SourceEnv},                  // env beats file
		{"fetch.cache_bytes", c.Fetch.CacheBytes, ByteSize(256 << 20), SourceFlag}, // flag beats env and file
		{"fetch.chunk_bytes", c.Fetch.ChunkBytes, ByteSize(1 << 20), SourceFile},
		{"fetch.max_wait", c.Fetch.MaxWait, 9 * time.Second, SourceFlag}, // flag by key path
		{"broker.log.retention.ms", c.Broker["log.retention.ms"], "3000", SourceFlag},
		{"broker.log.cleaner.threads", c.Broker["log.cleaner.threads"], "4", SourceEnv},
		{"broker.num.partitions", c.Broker["num.partitions"], "3", SourceFile},
		{"broker.log.retention.hours", c.Broker["log.retention.hours"], "168", SourceDefault}, // other broker keys keep their defaults
		{"log.level", c.Log.Level, "debug", SourceFile},
		{"log.format", c.Log.Format, "json", SourceEnv},
		{"uploader.concurrency", c.Uploader.Concurrency, 4, SourceDefault},
	}
	for _, tt := range tests {
		if !reflect.DeepEqual(tt.got, tt.want) {
			t.Errorf("%s = %v, want %v", tt.path, tt.got, tt.want)
		}
		if s := c.Source(tt.path); s != tt.src {
			t.Errorf("%s source = %s, want %s", tt.path, s, tt.src)
		}
	}
	if got := c.TopicDefaults(); !reflect.DeepEqual(got, map[string]string{"retention.ms": "3000"}) {
		t.Errorf("TopicDefaults = %v", got)
	}
	bs, err := c.BrokerSettings()
	if err != nil || bs.CleanerThreads != 4 || bs.NumPartitions != 3 || !bs.AutoCreateTopics {
		t.Errorf("BrokerSettings = %+v, %v", bs, err)
	}
}

func TestEnvNames(t *testing.T) {
	vars := EnvVars()
	for name, path := range map[string]string{
		"TIERED_DATA_DIR":                  "data_dir",
		"TIERED_BUCKET":                    "bucket",
		"TIERED_HTTP_ADDR":                 "http.addr",
		"TIERED_HTTP_TLS_CERT_FILE":        "http.tls.cert_file",
		"TIERED_KAFKA_ADVERTISED_ADDR":     "kafka.advertised_addr",
		"TIERED_FETCH_CACHE_BYTES":         "fetch.cache_bytes",
		"TIERED_UPLOADER_GC_GRACE":         "uploader.gc_grace",
		"TIERED_UPLOADER_MANIFEST_VERSION": "uploader.manifest_version",
		"TIERED_AUTH_TOKENS":               "auth.tokens",
		"TIERED_BROKER_LOG_RETENTION_MS":   "broker.log.retention.ms",
		"TIERED_BROKER_NUM_PARTITIONS":     "broker.num.partitions",
		"TIERED_SHUTDOWN_TIMEOUT":          "shutdown_timeout",
	} {
		if vars[name] != path {
			t.Errorf("%s -> %q, want %q", name, vars[name], path)
		}
	}
	// The rule is injective: every key path has its own variable.
	paths := leafPaths(reflect.TypeFor[Config](), "")
	for _, d := range brokerDefs {
		paths = append(paths, "broker."+d.name)
	}
	if len(vars) != len(paths) {
		t.Errorf("%d variables for %d key paths: two paths share a name", len(vars), len(paths))
	}
	// Every flag maps to a real key path.
	for flag, path := range FlagPaths {
		c := Defaults()
		if _, ok := c.lookup(path); !ok {
			t.Errorf("flag --%s maps to unknown path %q", flag, path)
		}
	}
}

func TestEnvCompositeAndMerge(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, "data_dir: "+dir+"\nauth:\n  tokens: [{principal: a, token: filetok}]\n  acls: {a: [x]}\n")
	env := []string{
		"TIERED_AUTH_TOKENS=[{principal: a, token: envtok0}, {principal: b, token: envtok}, {principal: c, token: envtok2}]",
		"TIERED_AUTH_ACLS={b: ['*'], c: [orders-*]}",
		"TIERED_BROKER={log.cleaner.threads: 3}",
	}
	c := mustLoad(t, LoadOptions{File: file, Env: env})
	if len(c.Auth.Tokens) != 3 || c.Auth.Tokens[1].Principal != "b" || c.Auth.Tokens[2].Token.Reveal() != "envtok2" {
		t.Errorf("tokens (lists are replaced) = %+v", c.Auth.Tokens)
	}
	want := map[string]ACL{"a": {Read: []string{"x"}}, "b": {Read: []string{"*"}}, "c": {Read: []string{"orders-*"}}}
	if !reflect.DeepEqual(c.Auth.ACLs, want) {
		t.Errorf("acls (mappings merge) = %v, want %v", c.Auth.ACLs, want)
	}
	if c.Source("auth.acls.a") != SourceFile || c.Source("auth.acls.b") != SourceEnv || c.Source("auth.tokens") != SourceEnv {
		t.Errorf("sources: %v", c.Sources())
	}
	if c.Source("broker.log.cleaner.threads") != SourceEnv || c.Source("broker.num.partitions") != SourceDefault {
		t.Errorf("broker sources: %v", c.Sources())
	}
	if c.Broker["log.cleaner.threads"] != "3" || c.Broker["num.partitions"] != "1" {
		t.Errorf("broker map from env: %v", c.Broker)
	}
}

func TestUnknownKeyNamesLine(t *testing.T) {
	file := writeFile(t, "data_dir: /tmp/x\nhttp:\n  adr: 127.0.0.1:1\n")
	_, err := Load(LoadOptions{File: file})
	ps := problems(t, err)
	if len(ps) != 1 {
		t.Fatalf("problems %v, want 1", err)
	}
	p := ps[0]
	if p.Path != "http.adr" || p.Line != 3 || p.Source != SourceFile || p.File != file {
		t.Errorf("problem %+v", p)
	}
	if want := file + ":3: http.adr: unknown key (known: addr, tls, read_header_timeout, body_read_timeout, write_timeout, idle_timeout, max_connections, max_connections_per_ip, max_inflight_produce_bytes)"; p.Error() != want {
		t.Errorf("message %q, want %q", p.Error(), want)
	}
}

// validationCase is one bad configuration and the problem it must produce.
type validationCase struct {
	name    string
	yaml    string            // file body (data_dir is prepended)
	env     []string          // environment
	flags   map[string]string // flags
	process Process
	path    string // expected problem path
	line    int    // expected line (file problems), counting the prepended data_dir line
	msg     string // substring of the message
}

func TestValidationErrors(t *testing.T) {
	dir := t.TempDir()
	logDir := t.TempDir()
	tlsDir := t.TempDir()
	cert, key := writeCert(t, tlsDir, "a")
	cert2, _ := writeCert(t, tlsDir, "b")
	notPEM := filepath.Join(tlsDir, "not.pem")
	os.WriteFile(notPEM, []byte("hello"), 0o600)
	missing := filepath.Join(tlsDir, "missing.pem")
	cases := []validationCase{
		{name: "unknown_key", yaml: "fetch:\n  cache_byte: 1\n", path: "fetch.cache_byte", line: 3, msg: "unknown key"},
		{name: "unknown_top_key", yaml: "buckett: x\n", path: "buckett", line: 2, msg: "unknown key"},
		{name: "duplicate_key", yaml: "log:\n  level: info\n  level: debug\n", path: "log.level", line: 4, msg: "duplicate key (first at line 3)"},
		{name: "wrong_type_int", yaml: "uploader:\n  concurrency: many\n", path: "uploader.concurrency", line: 3, msg: `"many" is not an integer`},
		{name: "wrong_type_section", yaml: "http: 8080\n", path: "http", line: 2, msg: "want a mapping of keys, got a value"},
		{name: "wrong_type_scalar", yaml: "http:\n  addr: [a, b]\n", path: "http.addr", line: 3, msg: "want a string, got a list"},
		{name: "wrong_type_bool_broker", yaml: "broker:\n  log.cleaner.enable: maybe\n", path: "broker.log.cleaner.enable", line: 3, msg: "Expected value to be either true or false"},
		{name: "wrong_type_list", yaml: "auth:\n  tokens: {a: b}\n", path: "auth.tokens", line: 3, msg: "want a list, got a mapping"},
		{name: "bad_size", yaml: "fetch:\n  cache_bytes: 12XB\n", path: "fetch.cache_bytes", line: 3, msg: "is not a size"},
		{name: "bad_duration", yaml: "fetch:\n  max_wait: soon\n", path: "fetch.max_wait", line: 3, msg: "is not a duration"},
		{name: "negative_size", yaml: "fetch:\n  cache_bytes: -5\n", path: "fetch.cache_bytes", line: 3, msg: "must not be negative (got -5)"},
		{name: "negative_rate", yaml: "uploader:\n  bytes_per_second: -1KiB\n", path: "uploader.bytes_per_second", line: 3, msg: "must not be negative (got -1024)"},
		{name: "bucket_scheme", yaml: "bucket: ftp://x/y\n", path: "bucket", line: 2, msg: `unknown scheme "ftp"`},
		{name: "bucket_relative_file", yaml: "bucket: file://relative\n", path: "bucket", line: 2, msg: "file URL has host"},
		{name: "bucket_credentials", yaml: "bucket: s3://key:secret@b/p\n", path: "bucket", line: 2, msg: "credentials in the URL are not accepted"},
		{name: "bucket_inside_data_dir", yaml: "bucket: file://" + dir + "/other\n", path: "bucket", line: 2, msg: "inside data_dir must be"},
		{name: "http_addr_no_port", yaml: "http:\n  addr: localhost\n", path: "http.addr", line: 3, msg: "is not host:port"},
		{name: "http_addr_bad_port", yaml: "http:\n  addr: 127.0.0.1:99999\n", path: "http.addr", line: 3, msg: "port must be a number"},
		{name: "http_addr_empty", yaml: "http:\n  addr: ''\n", path: "http.addr", line: 3, msg: "must not be empty"},
		{name: "kafka_same_addr", yaml: "http:\n  addr: 127.0.0.1:7000\nkafka:\n  addr: 127.0.0.1:7000\n", path: "kafka.addr", line: 5, msg: "same address as http.addr"},
		{name: "advertised_needed", yaml: "kafka:\n  addr: 0.0.0.0:9092\n", path: "kafka.advertised_addr", msg: "required when kafka.addr (0.0.0.0:9092) listens on all interfaces"},
		{name: "advertised_meta", yaml: "kafka:\n  addr: 0.0.0.0:9092\n  advertised_addr: 0.0.0.0:9092\n", path: "kafka.advertised_addr", line: 4, msg: "non-routable"},
		{name: "advertised_no_port", yaml: "kafka:\n  advertised_addr: broker1\n", path: "kafka.advertised_addr", line: 3, msg: "is not host:port"},
		{name: "bootstrap_bad", yaml: "sidecar:\n  bootstrap_server: a:1,b\n", path: "sidecar.bootstrap_server", line: 3, msg: `"b" is not host:port`},
		{name: "sidecar_dir_missing", process: ProcessSidecar, yaml: "bucket: mem://b\nsidecar:\n  kafka_log_dir: " + dir + "/nope\n", path: "sidecar.kafka_log_dir", line: 4, msg: "no such file"},
		{name: "groups_session_bounds", yaml: "groups:\n  min_session_timeout: 10s\n  max_session_timeout: 5s\n", path: "groups.max_session_timeout", msg: "must be at least groups.min_session_timeout (10s), got 5s"},
		{name: "groups_negative_delay", yaml: "groups:\n  initial_rebalance_delay: -1s\n", path: "groups.initial_rebalance_delay", msg: "must not be negative"},
		{name: "groups_zero_retention", yaml: "groups:\n  offsets_retention: 0s\n", path: "groups.offsets_retention", msg: "must be a positive duration"},
		{name: "groups_zero_max_size", yaml: "groups:\n  max_size: 0\n", path: "groups.max_size", msg: "must be positive"},
		{name: "log_level", yaml: "log:\n  level: verbose\n", path: "log.level", line: 3, msg: `"verbose" is not one of debug, info, warn, error`},
		{name: "log_format", yaml: "log:\n  format: xml\n", path: "log.format", line: 3, msg: "is not one of text, json"},
		{name: "broker_unknown", yaml: "broker:\n  log.retention.days: 3\n", path: "broker.log.retention.days", line: 3, msg: "unknown broker config name"},
		{name: "broker_type", yaml: "broker:\n  log.retention.ms: soon\n", path: "broker.log.retention.ms", line: 3, msg: "Invalid value soon for configuration log.retention.ms: Not a number of type LONG"},
		{name: "broker_int_range", yaml: "broker:\n  log.retention.hours: 3000000000\n", path: "broker.log.retention.hours", line: 3, msg: "Not a number of type INT"},
		{name: "broker_topic_bound", yaml: "broker:\n  log.segment.bytes: 5\n", path: "broker.log.segment.bytes", line: 3, msg: "as the default of topic config segment.bytes: Invalid value 5 for configuration segment.bytes: Value must be at least 1048576"},
		{name: "broker_own_bound", yaml: "broker:\n  log.roll.hours: 0\n", path: "broker.log.roll.hours", line: 3, msg: "Value must be at least 1"},
		{name: "broker_policy", yaml: "broker:\n  log.cleanup.policy: shred\n", path: "broker.log.cleanup.policy", line: 3, msg: "String must be one of: compact, delete"},
		{name: "broker_compression", yaml: "broker:\n  compression.type: brotli\n", path: "broker.compression.type", line: 3, msg: "String must be one of"},
		{name: "broker_ratio", yaml: "broker:\n  log.cleaner.min.cleanable.ratio: 1.5\n", path: "broker.log.cleaner.min.cleanable.ratio", line: 3, msg: "Value must be no more than 1"},
		{name: "broker_cross_field", yaml: "broker:\n  log.retention.hours: 1\n  log.local.retention.ms: 7200000\n", path: "broker.log.local.retention.ms", line: 4, msg: "Value must not be more than retention.ms property value: 3600000"},
		{name: "broker_only_bound", yaml: "broker:\n  num.partitions: 0\n", path: "broker.num.partitions", line: 3, msg: "Invalid value 0 for configuration num.partitions: Value must be at least 1"},
		{name: "broker_flush_bound", yaml: "broker:\n  log.flush.interval.messages: 0\n", path: "broker.log.flush.interval.messages", line: 3, msg: "Value must be at least 1"},
		{name: "broker_io_rate", yaml: "broker:\n  log.cleaner.io.max.bytes.per.second: 0\n", path: "broker.log.cleaner.io.max.bytes.per.second", line: 3, msg: "greater than 0"},
		{name: "tls_missing_files", yaml: "http:\n  tls:\n    cert_file: " + missing + "\n    key_file: " + key + "\n", path: "http.tls.cert_file", line: 4, msg: "no such file"},
		{name: "tls_key_only", yaml: "kafka:\n  tls:\n    key_file: " + key + "\n", path: "kafka.tls.cert_file", line: 3, msg: "required with key_file"},
		{name: "tls_mismatched_pair", yaml: "kafka:\n  tls:\n    cert_file: " + cert2 + "\n    key_file: " + key + "\n", path: "kafka.tls", line: 3, msg: "not a usable pair"},
		{name: "tls_ca_without_tls", yaml: "kafka:\n  tls:\n    client_ca_file: " + cert + "\n", path: "kafka.tls.client_ca_file", line: 4, msg: "mutual TLS needs cert_file and key_file"},
		{name: "tls_ca_not_pem", yaml: "kafka:\n  tls:\n    cert_file: " + cert + "\n    key_file: " + key + "\n    client_ca_file: " + notPEM + "\n", path: "kafka.tls.client_ca_file", line: 6, msg: "holds no PEM certificate"},
		{name: "uploader_concurrency", yaml: "uploader:\n  concurrency: 0\n", path: "uploader.concurrency", line: 3, msg: "must be from 1 to 256"},
		{name: "uploader_interval", yaml: "uploader:\n  interval: 0s\n", path: "uploader.interval", line: 3, msg: "must be a positive duration"},
		{name: "uploader_gc_grace", yaml: "uploader:\n  gc_grace: -1h\n", path: "uploader.gc_grace", line: 3, msg: "must be a positive duration"},
		{name: "uploader_manifest_version_new", yaml: "uploader:\n  manifest_version: 3\n", path: "uploader.manifest_version", line: 3, msg: "must be from 1 to 2 (got 3)"},
		{name: "uploader_manifest_version_zero", yaml: "uploader:\n  manifest_version: 0\n", path: "uploader.manifest_version", line: 3, msg: "must be from 1 to 2 (got 0)"},
		{name: "chunk_too_small", yaml: "fetch:\n  chunk_bytes: 100\n", path: "fetch.chunk_bytes", line: 3, msg: "must be from 4096"},
		{name: "cache_below_chunk", yaml: "fetch:\n  cache_bytes: 1MiB\n", path: "fetch.cache_bytes", line: 3, msg: "must hold at least one chunk"},
		{name: "cache_dir_without_bytes", yaml: "fetch:\n  cache_dir: /tmp/c\n", path: "fetch.disk_cache_bytes", line: 3, msg: "required with fetch.cache_dir"},
		{name: "disk_bytes_without_dir", yaml: "fetch:\n  disk_cache_bytes: 1GiB\n", path: "fetch.cache_dir", msg: "required with fetch.disk_cache_bytes"},
		{name: "inflight_below_chunk", yaml: "fetch:\n  max_inflight_bytes: 1KiB\n", path: "fetch.max_inflight_bytes", line: 3, msg: "must be at least one chunk"},
		{name: "max_gets", yaml: "fetch:\n  max_concurrent_gets: 0\n", path: "fetch.max_concurrent_gets", line: 3, msg: "must be at least 1"},
		{name: "parked_gets", yaml: "fetch:\n  parked_gets: -2\n", path: "fetch.parked_gets", line: 3, msg: "must be -1 (none), 0 (the default) or a bound"},
		{name: "max_wait", yaml: "fetch:\n  max_wait: 0s\n", path: "fetch.max_wait", line: 3, msg: "must be a positive duration"},
		{name: "readahead", yaml: "fetch:\n  readahead_chunks: -1\n", path: "fetch.readahead_chunks", line: 3, msg: "must not be negative"},
		{name: "max_open_files", yaml: "localtier:\n  max_open_files: -2\n", path: "localtier.max_open_files", line: 3, msg: "must be -1 (no bound), 0 (half of RLIMIT_NOFILE) or a positive count (got -2)"},
		{name: "kafka_idle_timeout", yaml: "kafka:\n  idle_timeout: 0s\n", path: "kafka.idle_timeout", line: 3, msg: "must be a positive duration"},
		{name: "kafka_max_connections_per_ip", yaml: "kafka:\n  max_connections_per_ip: 0\n", path: "kafka.max_connections_per_ip", line: 3, msg: "must be positive (got 0)"},
		{name: "kafka_response_budget", yaml: "kafka:\n  max_inflight_response_bytes: -1\n", path: "kafka.max_inflight_response_bytes", line: 3, msg: "must be positive (got -1)"},
		{name: "kafka_fetch_max_bytes_small", yaml: "kafka:\n  fetch_max_bytes: 1000\n", path: "kafka.fetch_max_bytes", line: 3, msg: "must be between 1KiB and 1GiB (got 1000)"},
		{name: "kafka_fetch_max_bytes_large", yaml: "kafka:\n  fetch_max_bytes: 2GiB\n", path: "kafka.fetch_max_bytes", line: 3, msg: "must be between 1KiB and 1GiB (got 2147483648)"},
		{name: "kafka_fetch_fill_concurrency", yaml: "kafka:\n  fetch_fill_concurrency: 0\n", path: "kafka.fetch_fill_concurrency", line: 3, msg: "must be positive (got 0)"},
		{name: "http_body_read_timeout", yaml: "http:\n  body_read_timeout: 0s\n", path: "http.body_read_timeout", line: 3, msg: "must be a positive duration"},
		{name: "http_max_connections", yaml: "http:\n  max_connections: -5\n", path: "http.max_connections", line: 3, msg: "must be positive (got -5)"},
		{name: "shutdown_timeout", yaml: "shutdown_timeout: 0s\n", path: "shutdown_timeout", line: 2, msg: "must be a positive duration"},
		{name: "token_empty", yaml: "auth:\n  tokens:\n    - principal: a\n", path: "auth.tokens[0].token", line: 4, msg: "must not be empty"},
		{name: "token_principal_empty", yaml: "auth:\n  tokens:\n    - token: abc\n", path: "auth.tokens[0].principal", line: 4, msg: "must not be empty"},
		{name: "token_duplicate", yaml: "auth:\n  tokens:\n    - {principal: a, token: t1}\n    - {principal: b, token: t1}\n", path: "auth.tokens[1].token", line: 5, msg: "same token as auth.tokens[0]"},
		{name: "sasl_duplicate_user", yaml: "auth:\n  sasl_plain:\n    - {username: u, password: p}\n    - {username: u, password: q}\n", path: "auth.sasl_plain[1].username", msg: "duplicate of auth.sasl_plain[0]"},
		{name: "sasl_empty_password", yaml: "auth:\n  sasl_plain:\n    - {username: u}\n", path: "auth.sasl_plain[0].password", msg: "must not be empty"},
		{name: "acls_without_auth", yaml: "auth:\n  acls: {a: ['*']}\n", path: "auth.acls", msg: "no listener authenticates"},
		{name: "acl_unknown_principal", yaml: "auth:\n  tokens: [{principal: a, token: t}]\n  acls: {b: ['*']}\n", path: "auth.acls.b", line: 4, msg: "no token or SASL/PLAIN user has this principal"},
		{name: "acl_bad_chars", yaml: "auth:\n  tokens: [{principal: a, token: t}]\n  acls: {a: ['a b*']}\n", path: "auth.acls.a[0]", line: 4, msg: "a topic prefix may contain only"},
		{name: "acl_bad_topic", yaml: "auth:\n  tokens: [{principal: a, token: t}]\n  acls: {a: ['..']}\n", path: "auth.acls.a[0]", line: 4, msg: `Topic name cannot be "." or ".."`},
		{name: "acl_bad_pattern", yaml: "auth:\n  tokens: [{principal: a, token: t}]\n  acls: {a: ['or*ders', 'logs-*']}\n", path: "auth.acls.a[0]", line: 4, msg: "'*' may appear only at the end"},
		{name: "acl_map_bad_write", yaml: "auth:\n  tokens: [{principal: a, token: t}]\n  acls:\n    a: {read: [x], write: [ok, 'a b']}\n", path: "auth.acls.a.write[1]", line: 5, msg: "contains a character other than"},
		{name: "acl_map_bad_read", yaml: "auth:\n  tokens: [{principal: a, token: t}]\n  acls:\n    a: {read: ['or*ders']}\n", path: "auth.acls.a.read[0]", line: 5, msg: "'*' may appear only at the end"},
		{name: "acl_unknown_key", yaml: "auth:\n  tokens: [{principal: a, token: t}]\n  acls:\n    a: {reads: [x]}\n", path: "auth.acls.a.reads", line: 5, msg: "unknown key (known: read, write, groups, admin)"},
		{name: "acl_scalar", yaml: "auth:\n  tokens: [{principal: a, token: t}]\n  acls:\n    a: orders\n", path: "auth.acls.a", line: 5, msg: "want a list of topics (read only) or a mapping of read, write, groups, admin, got a value"},
		{name: "acl_read_scalar", yaml: "auth:\n  tokens: [{principal: a, token: t}]\n  acls:\n    a: {read: orders}\n", path: "auth.acls.a.read", line: 5, msg: "want a list, got a value"},
		{name: "acl_admin_type", yaml: "auth:\n  tokens: [{principal: a, token: t}]\n  acls:\n    a: {admin: yes please}\n", path: "auth.acls.a.admin", line: 5, msg: `"yes please" is not true or false`},
		{name: "acl_admin_list", yaml: "auth:\n  tokens: [{principal: a, token: t}]\n  acls:\n    a: {admin: [x]}\n", path: "auth.acls.a.admin", line: 5, msg: "want true or false, got a list"},
		{name: "acl_duplicate_key", yaml: "auth:\n  tokens: [{principal: a, token: t}]\n  acls:\n    a: {read: [x], read: [y]}\n", path: "auth.acls.a.read", line: 5, msg: "duplicate key"},
		{name: "acl_group_empty", yaml: "auth:\n  tokens: [{principal: a, token: t}]\n  acls:\n    a: {groups: ['']}\n", path: "auth.acls.a.groups[0]", line: 5, msg: "a group ID must not be empty"},
		{name: "acl_group_star", yaml: "auth:\n  tokens: [{principal: a, token: t}]\n  acls:\n    a: {groups: ['billing-*', 'a*b']}\n", path: "auth.acls.a.groups[1]", line: 5, msg: "'*' may appear only at the end"},
		{name: "acl_group_type", yaml: "auth:\n  tokens: [{principal: a, token: t}]\n  acls:\n    a: {groups: {x: y}}\n", path: "auth.acls.a.groups", line: 5, msg: "want a list, got a mapping"},
		{name: "env_acl_unknown_key", env: []string{"TIERED_AUTH_TOKENS=[{principal: a, token: t}]", "TIERED_AUTH_ACLS={a: {produce: [x]}}"}, path: "auth.acls.a.produce", msg: "env TIERED_AUTH_ACLS: auth.acls.a.produce: unknown key"},
		{name: "env_bad_value", env: []string{"TIERED_FETCH_CHUNK_BYTES=big"}, path: "fetch.chunk_bytes", msg: "env TIERED_FETCH_CHUNK_BYTES: fetch.chunk_bytes: \"big\" is not a size"},
		{name: "env_negative", env: []string{"TIERED_FETCH_DISK_CACHE_BYTES=-1"}, path: "fetch.disk_cache_bytes", msg: "env TIERED_FETCH_DISK_CACHE_BYTES: fetch.disk_cache_bytes: must not be negative"},
		{name: "env_unknown_in_section", env: []string{"TIERED_FETCH_CACHE_BYTE=1"}, path: "", msg: "env TIERED_FETCH_CACHE_BYTE: unknown configuration variable"},
		{name: "env_unknown_broker", env: []string{"TIERED_BROKER_LOG_RETENTION_DAYS=1"}, path: "", msg: "env TIERED_BROKER_LOG_RETENTION_DAYS: unknown configuration variable"},
		{name: "env_bad_yaml", env: []string{"TIERED_AUTH_TOKENS=[{"}, path: "auth.tokens", msg: "not valid YAML"},
		{name: "flag_bad_value", flags: map[string]string{"chunk-bytes": "x"}, path: "fetch.chunk_bytes", msg: `flag --chunk-bytes: fetch.chunk_bytes: "x" is not a size`},
		{name: "flag_bad_addr", flags: map[string]string{"http": "nope"}, path: "http.addr", msg: `flag --http: http.addr: "nope" is not host:port`},
		{name: "flag_unknown_path", flags: map[string]string{"fetch.nope": "1"}, path: "fetch.nope", msg: "unknown key"},
		{name: "sidecar_needs_log_dir", process: ProcessSidecar, flags: map[string]string{"bucket": "mem://b"}, path: "sidecar.kafka_log_dir", msg: "required for tiered sidecar"},
		{name: "sidecar_needs_bucket", process: ProcessSidecar, flags: map[string]string{"kafka-log-dir": logDir}, path: "bucket", msg: "required for tiered sidecar (--bucket)"},
		{name: "sidecar_bucket_in_log_dir", process: ProcessSidecar, flags: map[string]string{"kafka-log-dir": dir, "bucket": "file://" + dir + "/b"}, path: "bucket", msg: "must not be inside sidecar.kafka_log_dir"},
		{name: "fetch_needs_bucket", process: ProcessFetch, path: "bucket", msg: "required for tiered fetch (--bucket)"},
		{name: "peers_bad_entry", yaml: "fetch:\n  peers: [10.0.0.1:9092, nope]\n", path: "fetch.peers[1]", line: 3, msg: `"nope" is not host:port`},
		{name: "peers_self_missing", process: ProcessFetch, yaml: "bucket: mem://b\nkafka:\n  advertised_addr: 10.0.0.3:9092\nfetch:\n  peers: [10.0.0.1:9092, 10.0.0.2:9092]\n", path: "fetch.peers", line: 6, msg: "advertised address 10.0.0.3:9092 (kafka.advertised_addr, else kafka.addr) is not in the list"},
		{name: "peers_port_zero", process: ProcessFetch, yaml: "bucket: mem://b\nkafka:\n  addr: 127.0.0.1:0\nhttp:\n  addr: 127.0.0.1:0\nfetch:\n  peers: fetch.svc:9092\n", path: "fetch.peers", line: 8, msg: "a fleet needs a fixed advertised address"},
		{name: "peer_lease_short", yaml: "fetch:\n  peer_lease: 100ms\n", path: "fetch.peer_lease", line: 3, msg: "must be at least 500ms"},
		{name: "peers_mapping", yaml: "fetch:\n  peers: {a: b}\n", path: "fetch.peers", line: 3, msg: "want a list, got a mapping"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opts := LoadOptions{Env: tc.env, Flags: tc.flags, Process: tc.process}
			if tc.yaml != "" {
				opts.File = writeFile(t, "data_dir: "+dir+"\n"+tc.yaml)
			} else {
				opts.Flags = map[string]string{"data-dir": filepath.Join(dir, "data")}
				for k, v := range tc.flags {
					opts.Flags[k] = v
				}
			}
			_, err := Load(opts)
			ps := problems(t, err)
			var found *FieldError
			for _, p := range ps {
				if p.Path == tc.path && strings.Contains(p.Error(), tc.msg) {
					found = p
				}
			}
			if found == nil {
				t.Fatalf("no problem at %q containing %q; got:\n%v", tc.path, tc.msg, err)
			}
			if len(ps) != 1 {
				t.Errorf("want exactly one problem, got %d:\n%v", len(ps), err)
			}
			if tc.line != 0 && (found.Line != tc.line || !strings.HasPrefix(found.Error(), fmt.Sprintf("%s:%d: ", opts.File, tc.line))) {
				t.Errorf("problem %q: line %d, want %d", found.Error(), found.Line, tc.line)
			}
		})
	}
}

func TestAllProblemsAtOnce(t *testing.T) {
	file := writeFile(t, `data_dir: /tmp/x
bucket: gopher://nowhere
http:
  addr: nope
  colour: blue
fetch:
  cache_bytes: -1
  max_wait: later
broker:
  log.segment.bytes: 5
  log.retention.fortnights: 1
log:
  level: loud
`)
	_, err := Load(LoadOptions{File: file, Env: []string{"TIERED_UPLOADER_CONCURRENCY=0"}})
	ps := problems(t, err)
	want := map[string]int{ // path -> line (0 = from env)
		"bucket":                          2,
		"http.addr":                       4,
		"http.colour":                     5,
		"fetch.cache_bytes":               7,
		"fetch.max_wait":                  8,
		"broker.log.segment.bytes":        10,
		"broker.log.retention.fortnights": 11,
		"log.level":                       13,
		"uploader.concurrency":            0,
	}
	got := map[string]int{}
	for _, p := range ps {
		got[p.Path] = p.Line
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("problems by path:\n got %v\nwant %v\nerror:\n%v", got, want, err)
	}
}

func TestSecretsNeverPrinted(t *testing.T) {
	const fileSecret, envSecret, pwSecret = "file-s3cr3t-token", "env-s3cr3t-token", "sasl-s3cr3t-pw"
	dir := t.TempDir()
	file := writeFile(t, "data_dir: "+dir+"\nauth:\n  tokens: [{principal: a, token: "+fileSecret+"}]\n  acls: {a: ['*'], b: ['*']}\n")
	env := []string{
		"TIERED_AUTH_SASL_PLAIN=[{username: b, password: " + pwSecret + "}]",
		"TIERED_AUTH_TOKENS=[{principal: a, token: " + fileSecret + "}, {principal: c, token: " + envSecret + "}]",
	}
	c := mustLoad(t, LoadOptions{File: file, Env: env})
	if c.Auth.Tokens[1].Token.Reveal() != envSecret || !c.Auth.SASLPlain[0].Password.Equal(pwSecret) || c.Auth.SASLPlain[0].Password.Equal("x") {
		t.Fatalf("secrets not loaded: Reveal/Equal broken")
	}
	var outputs []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%10.3s", "%T %v"} {
		outputs = append(outputs, fmt.Sprintf(verb, *c), fmt.Sprintf(verb, c.Auth), fmt.Sprintf(verb, c.Auth.Tokens[0]), fmt.Sprintf(verb, c.Auth.Tokens[0].Token))
	}
	outputs = append(outputs, c.Auth.Tokens[0].Token.String(), fmt.Sprint(c.Auth.SASLPlain), fmt.Sprintln(c.Auth.SASLPlain[0].Password))
	var logs bytes.Buffer
	for _, h := range []slog.Handler{slog.NewTextHandler(&logs, nil), slog.NewJSONHandler(&logs, nil)} {
		l := slog.New(h)
		l.Info("cfg", "token", c.Auth.Tokens[0].Token, "user", c.Auth.SASLPlain[0], "auth", c.Auth, "config", c)
		l.Info("attr", slog.Any("pw", c.Auth.SASLPlain[0].Password))
	}
	outputs = append(outputs, logs.String())
	j, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	outputs = append(outputs, string(j))
	y, err := yaml.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	outputs = append(outputs, string(y))
	var py, pj, ps bytes.Buffer
	if err := c.WriteYAML(&py, false); err != nil {
		t.Fatal(err)
	}
	if err := c.WriteYAML(&ps, true); err != nil {
		t.Fatal(err)
	}
	if err := c.WriteJSON(&pj); err != nil {
		t.Fatal(err)
	}
	outputs = append(outputs, py.String(), ps.String(), pj.String())
	// A validation error about a secret names the key, not the value.
	c.Auth.Tokens = append(c.Auth.Tokens, Token{Principal: "d", Token: Secret(envSecret)})
	outputs = append(outputs, fmt.Sprint(c.Validate()))
	for i, out := range outputs {
		for _, s := range []string{fileSecret, envSecret, pwSecret} {
			if strings.Contains(out, s) {
				t.Errorf("output %d contains secret %q:\n%s", i, s, out)
			}
		}
	}
	if !strings.Contains(py.String(), "token: '******'") || !strings.Contains(pj.String(), `"password": "******"`) {
		t.Errorf("masked values missing:\n%s\n%s", py.String(), pj.String())
	}
	if !strings.Contains(fmt.Sprint(c.Validate()), "auth.tokens[2].token: same token as auth.tokens[1]") {
		t.Errorf("duplicate token not reported: %v", c.Validate())
	}
	if Secret("").String() != "" {
		t.Errorf("empty secret prints %q", Secret("").String())
	}
}

func TestPrintRoundTripAndSources(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, "data_dir: "+dir+"\nbroker:\n  log.retention.hours: 24\n")
	c := mustLoad(t, LoadOptions{File: file, Env: []string{"TIERED_LOG_FORMAT=json"}, Flags: map[string]string{"http": "127.0.0.1:0"}})
	var out bytes.Buffer
	if err := c.WriteYAML(&out, true); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"data_dir: " + dir + " # file",
		"addr: 127.0.0.1:0 # flag",
		"format: json # env",
		"level: info # default",
		"log.retention.hours: 24 # file",
		"log.cleaner.min.cleanable.ratio: 0.5 # default",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("printed config lacks %q:\n%s", want, out.String())
		}
	}
	// The printed YAML is itself a valid configuration file that loads to the same values.
	c2 := mustLoad(t, LoadOptions{File: writeFile(t, out.String())})
	var p1, p2 bytes.Buffer
	if err := c.WriteYAML(&p1, false); err != nil {
		t.Fatal(err)
	}
	if err := c2.WriteYAML(&p2, false); err != nil {
		t.Fatal(err)
	}
	if p1.String() != p2.String() {
		t.Errorf("round trip differs:\n%s\n%s", p1.String(), p2.String())
	}
	if c2.Source("http.addr") != SourceFile {
		t.Errorf("reloaded source %s", c2.Source("http.addr"))
	}
	var js bytes.Buffer
	if err := c.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var parsed struct {
		Config  map[string]any    `json:"config"`
		Sources map[string]string `json:"sources"`
	}
	if err := json.Unmarshal(js.Bytes(), &parsed); err != nil {
		t.Fatal(err)
	}
	if parsed.Config["data_dir"] != dir || len(parsed.Sources) == 0 {
		t.Errorf("json: %s", js.String())
	}
}

func TestTopicDefaultsSynonyms(t *testing.T) {
	tests := []struct {
		name   string
		broker map[string]string
		want   map[string]string
	}{
		{"hours", map[string]string{"log.retention.hours": "72"}, map[string]string{"retention.ms": "259200000"}},
		{"minutes_beat_hours", map[string]string{"log.retention.hours": "72", "log.retention.minutes": "30"}, map[string]string{"retention.ms": "1800000"}},
		{"ms_beats_all", map[string]string{"log.retention.hours": "72", "log.retention.minutes": "30", "log.retention.ms": "5"}, map[string]string{"retention.ms": "5"}},
		{"negative_hours_unlimited", map[string]string{"log.retention.hours": "-1"}, map[string]string{"retention.ms": "-1"}},
		{"roll_hours", map[string]string{"log.roll.hours": "2"}, map[string]string{"segment.ms": "7200000"}},
		{"roll_ms_beats_hours", map[string]string{"log.roll.hours": "2", "log.roll.ms": "60000"}, map[string]string{"segment.ms": "60000"}},
		{"jitter", map[string]string{"log.roll.jitter.hours": "1"}, map[string]string{"segment.jitter.ms": "3600000"}},
		{"renamed", map[string]string{
			"message.max.bytes": "2000000", "log.index.size.max.bytes": "4096", "log.cleaner.min.cleanable.ratio": "0.25",
			"log.segment.delete.delay.ms": "1", "log.cleanup.policy": "compact,delete", "compression.type": "zstd",
			"log.message.timestamp.type": "LogAppendTime", "log.local.retention.ms": "1000", "log.local.retention.bytes": "10",
			"log.cleaner.delete.retention.ms": "2", "log.cleaner.min.compaction.lag.ms": "3", "log.cleaner.max.compaction.lag.ms": "4",
			"log.index.interval.bytes": "100", "log.segment.bytes": "2097152", "log.retention.bytes": "99",
		}, map[string]string{
			"max.message.bytes": "2000000", "segment.index.bytes": "4096", "min.cleanable.dirty.ratio": "0.25",
			"file.delete.delay.ms": "1", "cleanup.policy": "compact,delete", "compression.type": "zstd",
			"message.timestamp.type": "LogAppendTime", "local.retention.ms": "1000", "local.retention.bytes": "10",
			"delete.retention.ms": "2", "min.compaction.lag.ms": "3", "max.compaction.lag.ms": "4",
			"index.interval.bytes": "100", "segment.bytes": "2097152", "retention.bytes": "99",
		}},
		{"broker_only", map[string]string{"log.cleaner.threads": "3", "num.partitions": "2", "log.retention.check.interval.ms": "5"}, map[string]string{}},
	}
	// flush.messages / flush.ms are topic defaults once topicconfig knows them.
	flush := map[string]string{}
	if topicKnown("flush.messages") {
		flush["flush.messages"] = "1"
	}
	if topicKnown("flush.ms") {
		flush["flush.ms"] = "20"
	}
	tests = append(tests, struct {
		name   string
		broker map[string]string
		want   map[string]string
	}{"flush", map[string]string{"log.flush.interval.messages": "1", "log.flush.scheduler.interval.ms": "20"}, flush})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			flags := map[string]string{"data-dir": t.TempDir()}
			for k, v := range tt.broker {
				flags["broker."+k] = v
			}
			c := mustLoad(t, LoadOptions{Flags: flags})
			if got := c.TopicDefaults(); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("TopicDefaults = %v, want %v", got, tt.want)
			}
			if _, err := LayerTopicConfig(c.TopicDefaults(), nil); err != nil {
				t.Errorf("LayerTopicConfig: %v", err)
			}
		})
	}
	// Keys set by hand on a Config count; Kafka's defaults do not.
	c := Defaults()
	c.Broker["log.retention.ms"] = "1000"
	c.Broker["log.segment.bytes"] = "1073741824"
	if got := c.TopicDefaults(); !reflect.DeepEqual(got, map[string]string{"retention.ms": "1000"}) {
		t.Errorf("hand-set TopicDefaults = %v", got)
	}
	// Every topic config tiered maps has a synonym Kafka defines, in Kafka's order.
	if got := BrokerSynonyms("retention.ms"); !reflect.DeepEqual(got, []string{"log.retention.ms", "log.retention.minutes", "log.retention.hours"}) {
		t.Errorf("retention.ms synonyms %v", got)
	}
	if got := BrokerSynonyms("segment.ms"); !reflect.DeepEqual(got, []string{"log.roll.ms", "log.roll.hours"}) {
		t.Errorf("segment.ms synonyms %v", got)
	}
	for _, name := range topicconfig.Names() {
		if len(BrokerSynonyms(name)) == 0 && name != topicconfig.RemoteStorageEnableConfig {
			t.Errorf("topic config %s has no broker synonym", name)
		}
	}
}

func TestDescribeLayers(t *testing.T) {
	entries, err := DescribeLayers(map[string]string{"retention.ms": "1000", "segment.bytes": "2097152"}, map[string]string{"retention.ms": "500", "cleanup.policy": "compact"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]LayeredEntry{}
	for _, e := range entries {
		got[e.Name] = e
	}
	for name, want := range map[string]LayeredEntry{
		"retention.ms":   {"retention.ms", "500", LayerOverride},
		"segment.bytes":  {"segment.bytes", "2097152", LayerBroker},
		"cleanup.policy": {"cleanup.policy", "compact", LayerOverride},
		"segment.ms":     {"segment.ms", "604800000", LayerDefault},
	} {
		if got[name] != want {
			t.Errorf("%s = %+v, want %+v", name, got[name], want)
		}
	}
	if _, err := DescribeLayers(map[string]string{"segment.bytes": "5"}, nil); err == nil {
		t.Error("invalid broker layer accepted")
	}
	cfg, err := LayerTopicConfig(map[string]string{"retention.ms": "1000"}, map[string]string{"retention.bytes": "10"})
	if err != nil || cfg.RetentionMs != 1000 || cfg.RetentionBytes != 10 {
		t.Errorf("LayerTopicConfig = %+v, %v", cfg, err)
	}
}

func TestBrokerSettings(t *testing.T) {
	c := mustLoad(t, LoadOptions{Flags: map[string]string{
		"data-dir":                                   t.TempDir(),
		"broker.auto.create.topics.enable":           "FALSE",
		"broker.log.cleaner.backoff.ms":              "250",
		"broker.log.retention.check.interval.ms":     "1000",
		"broker.log.flush.scheduler.interval.ms":     "50",
		"broker.log.cleaner.io.max.bytes.per.second": "1e6",
	}})
	bs, err := c.BrokerSettings()
	if err != nil {
		t.Fatal(err)
	}
	want := BrokerSettings{
		AutoCreateTopics: false, NumPartitions: 1, CleanerEnable: true, CleanerThreads: 1,
		CleanerDedupeBufferSize: 128 << 20, CleanerIOMaxBytesPerSecond: 1e6, CleanerBackoff: 250 * time.Millisecond,
		RetentionCheckInterval: time.Second, FlushMessages: 1<<63 - 1, FlushMs: 50,
	}
	if bs != want {
		t.Errorf("BrokerSettings =\n%+v, want\n%+v", bs, want)
	}
	c.Broker["log.flush.interval.ms"] = "7" // beats the scheduler interval
	if bs, _ := c.BrokerSettings(); bs.FlushMs != 7 {
		t.Errorf("FlushMs = %d, want 7", bs.FlushMs)
	}
	c.Broker["num.partitions"] = "x"
	if _, err := c.BrokerSettings(); err == nil {
		t.Error("BrokerSettings accepted an invalid key")
	}
	for _, name := range BrokerConfigNames() {
		if brokerByName[name] == nil {
			t.Errorf("%s listed but unknown", name)
		}
	}
}

func TestValidTLSAndAuth(t *testing.T) {
	dir := t.TempDir()
	cert, key := writeCert(t, dir, "srv")
	file := writeFile(t, fmt.Sprintf(`data_dir: %s
http:
  tls: {cert_file: %s, key_file: %s}
kafka:
  addr: 0.0.0.0:9093
  advertised_addr: broker-1.example:9093
  tls: {cert_file: %s, key_file: %s, client_ca_file: %s}
auth:
  tokens: [{principal: ci, token: abc}]
  sasl_plain: [{username: alice, password: pw}]
  acls:
    ci: ["*"]
    alice: [orders, "logs.*"]
    CN=consumer: [orders]
`, dir, cert, key, cert, key, cert))
	c := mustLoad(t, LoadOptions{File: file})
	if !c.HTTP.TLS.Enabled() || c.Kafka.TLS.ClientCAFile != cert {
		t.Errorf("tls: %+v %+v", c.HTTP.TLS, c.Kafka.TLS)
	}
}

// TestACLShapes loads DESIGN.md's auth.acls: the list form is read only, the mapping form
// carries read, write, groups and admin; a later layer replaces a principal's entry whole, and
// the printed configuration loads back to the same ACLs.
func TestACLShapes(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, "data_dir: "+dir+`
auth:
  sasl_plain: [{username: reader, password: p}, {username: app, password: p}, {username: ingest, password: p}, {username: ops, password: p}]
  acls:
    reader: [orders, "logs-*"]
    app:    {read: ["orders"], groups: ["billing-*"]}
    ingest: {read: ["*"], write: ["orders"]}
    ops:    {read: ["*"], write: ["*"], groups: ["*"], admin: true}
`)
	want := map[string]ACL{
		"reader": {Read: []string{"orders", "logs-*"}},
		"app":    {Read: []string{"orders"}, Groups: []string{"billing-*"}},
		"ingest": {Read: []string{"*"}, Write: []string{"orders"}},
		"ops":    {Read: []string{"*"}, Write: []string{"*"}, Groups: []string{"*"}, Admin: true},
	}
	c := mustLoad(t, LoadOptions{File: file})
	if !reflect.DeepEqual(c.Auth.ACLs, want) {
		t.Fatalf("acls = %+v, want %+v", c.Auth.ACLs, want)
	}
	// The environment replaces ingest's entry as a whole (no read left from the file) and
	// turns ops into a list-form reader.
	c = mustLoad(t, LoadOptions{File: file, Env: []string{"TIERED_AUTH_ACLS={ingest: {write: [orders]}, ops: [x]}"}})
	want["ingest"], want["ops"] = ACL{Write: []string{"orders"}}, ACL{Read: []string{"x"}}
	if !reflect.DeepEqual(c.Auth.ACLs, want) {
		t.Fatalf("acls after env = %+v, want %+v", c.Auth.ACLs, want)
	}
	if c.Source("auth.acls.ingest") != SourceEnv || c.Source("auth.acls.app") != SourceFile {
		t.Errorf("sources: %v", c.Sources())
	}
	var out bytes.Buffer
	if err := c.WriteYAML(&out, true); err != nil {
		t.Fatal(err)
	}
	// (Printed secrets are masked: every password reads "******".)
	c2 := mustLoad(t, LoadOptions{File: writeFile(t, out.String())})
	if !reflect.DeepEqual(c2.Auth.ACLs, want) {
		t.Fatalf("printed and loaded back: %+v, want %+v\n%s", c2.Auth.ACLs, want, out.String())
	}
	if _, err := auth.NewAuthorizer(c2.Auth); err != nil {
		t.Fatalf("authorizer of the loaded config: %v", err)
	}
}

func TestByteSize(t *testing.T) {
	for in, want := range map[string]ByteSize{
		"0": 0, "4194304": 4 << 20, "4MiB": 4 << 20, "4 MiB": 4 << 20, "4mib": 4 << 20, "512KiB": 512 << 10,
		"1GiB": 1 << 30, "2TiB": 2 << 40, "1KB": 1000, "3MB": 3e6, "1GB": 1e9, "1TB": 1e12, "10B": 10, "-1": -1, "-2KiB": -2048,
		"512k": 512 << 10, "10M": 10 << 20, "1g": 1 << 30, "2T": 2 << 40,
	} {
		got, err := ParseByteSize(in)
		if err != nil || got != want {
			t.Errorf("ParseByteSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "MiB", "1.5GiB", "4 XB", "9999999999TiB", "0x10", "1e3"} {
		if _, err := ParseByteSize(in); err == nil {
			t.Errorf("ParseByteSize(%q) accepted", in)
		}
	}
	var v struct {
		S ByteSize `yaml:"s"`
	}
	if err := yaml.Unmarshal([]byte("s: 2MiB"), &v); err != nil || v.S != 2<<20 {
		t.Errorf("yaml decode: %d, %v", v.S, err)
	}
	if err := yaml.Unmarshal([]byte("s: lots"), &v); err == nil {
		t.Error("yaml decode of a bad size accepted")
	}
}

func TestFileLimits(t *testing.T) {
	big := writeFile(t, "data_dir: /tmp/x\n"+strings.Repeat("#", MaxFileBytes))
	if _, err := Load(LoadOptions{File: big}); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("oversized file: %v", err)
	}
	if _, err := Load(LoadOptions{File: filepath.Join(t.TempDir(), "none.yaml")}); err == nil || !strings.Contains(err.Error(), "read config file") {
		t.Errorf("missing file: %v", err)
	}
	// Aliases can make a small document expand to many values: the loader stops at maxNodes.
	var bomb strings.Builder
	bomb.WriteString("auth:\n  tokens: [{principal: p, token: t}]\n  acls:\n    p: &l [" + strings.Repeat("x, ", 2000) + "x]\n")
	for i := range 200 {
		fmt.Fprintf(&bomb, "    k%d: *l\n", i)
	}
	_, err := Load(LoadOptions{File: writeFile(t, bomb.String())})
	if err == nil || !strings.Contains(err.Error(), "document too large") {
		t.Errorf("alias bomb: %v", err)
	}
	// An empty file is no configuration at all.
	if _, err := Load(LoadOptions{File: writeFile(t, ""), Flags: map[string]string{"data-dir": t.TempDir()}}); err != nil {
		t.Errorf("empty file: %v", err)
	}
	// A null value leaves the default.
	c := mustLoad(t, LoadOptions{File: writeFile(t, "data_dir: "+t.TempDir()+"\nhttp:\n  addr:\nfetch:\n")})
	if c.HTTP.Addr != DefaultHTTPAddr {
		t.Errorf("null addr gave %q", c.HTTP.Addr)
	}
}

// writeCert writes a self-signed ECDSA certificate and key as PEM files.
func writeCert(t *testing.T, dir, name string) (certFile, keyFile string) {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// TestSidecarConfig: the sidecar reads the same layers as serve and fetch, with its own
// listener defaults (no HTTP listener unless configured, no Kafka listener), its uploader
// flags (--rate keeps its binary single-letter units), and the kafka section and data_dir of
// a file shared with fetch left unchecked.
// TestFetchPeers: fetch.peers as DESIGN.md writes it (one DNS name as a string), as a list,
// and from the environment in both shapes.
func TestFetchPeers(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts LoadOptions
		want PeerList
		src  Source
	}{
		{"default alone", LoadOptions{Process: ProcessFetch, Flags: map[string]string{"bucket": "mem://b"}}, nil, SourceDefault},
		{"dns string", LoadOptions{Process: ProcessFetch, File: writeFile(t, "bucket: mem://b\nkafka: {addr: '127.0.0.1:9092'}\nfetch: {peers: \"fetch-headless.tiered.svc:9092\"}\n")},
			PeerList{"fetch-headless.tiered.svc:9092"}, SourceFile},
		{"list", LoadOptions{Process: ProcessFetch, File: writeFile(t, "bucket: mem://b\nkafka: {advertised_addr: '10.0.0.2:9092'}\nfetch:\n  peers:\n    - 10.0.0.1:9092\n    - 10.0.0.2:9092\n")},
			PeerList{"10.0.0.1:9092", "10.0.0.2:9092"}, SourceFile},
		{"env list", LoadOptions{Process: ProcessFetch, Flags: map[string]string{"bucket": "mem://b", "advertised-addr": "10.0.0.1:9092"},
			Env: []string{"TIERED_FETCH_PEERS=[10.0.0.1:9092, 10.0.0.2:9092]"}}, PeerList{"10.0.0.1:9092", "10.0.0.2:9092"}, SourceEnv},
		{"env dns", LoadOptions{Process: ProcessFetch, Flags: map[string]string{"bucket": "mem://b", "advertised-addr": "10.0.0.1:9092"},
			Env: []string{"TIERED_FETCH_PEERS=fetch.svc:9092"}}, PeerList{"fetch.svc:9092"}, SourceEnv},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := mustLoad(t, tc.opts)
			if !reflect.DeepEqual(c.Fetch.Peers, tc.want) || c.Source("fetch.peers") != tc.src {
				t.Fatalf("fetch.peers = %q from %s, want %q from %s", c.Fetch.Peers, c.Source("fetch.peers"), tc.want, tc.src)
			}
			if c.Fetch.PeerLease != DefaultFetchPeerLease {
				t.Fatalf("fetch.peer_lease = %s, want the default %s", c.Fetch.PeerLease, DefaultFetchPeerLease)
			}
		})
	}
}

func TestSidecarConfig(t *testing.T) {
	logDir, envLogDir := t.TempDir(), t.TempDir()
	file := writeFile(t, `
bucket: mem://tiered
sidecar:
  kafka_log_dir: `+logDir+`
  bootstrap_server: kafka-0:9092,kafka-1:9092
kafka:
  addr: ":9093"
uploader:
  concurrency: 8
  gc_grace: 2h
`)
	c := mustLoad(t, LoadOptions{File: file, Process: ProcessSidecar,
		Flags: map[string]string{"rate": "10M", "interval": "3s", "manifest-version": "1"}})
	if c.HTTP.Addr != DefaultSidecarHTTPAddr || c.Source("http.addr") != SourceDefault {
		t.Errorf("http.addr %q (%s), want the sidecar default %q", c.HTTP.Addr, c.Source("http.addr"), DefaultSidecarHTTPAddr)
	}
	for path, want := range map[string]struct {
		got, want any
		src       Source
	}{
		"sidecar.kafka_log_dir":     {c.Sidecar.KafkaLogDir, logDir, SourceFile},
		"sidecar.bootstrap_server":  {c.Sidecar.BootstrapServer, "kafka-0:9092,kafka-1:9092", SourceFile},
		"bucket":                    {c.Bucket, "mem://tiered", SourceFile},
		"uploader.concurrency":      {c.Uploader.Concurrency, 8, SourceFile},
		"uploader.gc_grace":         {c.Uploader.GCGrace, 2 * time.Hour, SourceFile},
		"uploader.bytes_per_second": {c.Uploader.BytesPerSecond, ByteSize(10 << 20), SourceFlag},
		"uploader.interval":         {c.Uploader.Interval, 3 * time.Second, SourceFlag},
		"uploader.manifest_version": {c.Uploader.ManifestVersion, 1, SourceFlag},
	} {
		if want.got != want.want || c.Source(path) != want.src {
			t.Errorf("%s = %v from %s, want %v from %s", path, want.got, c.Source(path), want.want, want.src)
		}
	}

	// The environment layer, and a flag above it.
	env := []string{"TIERED_SIDECAR_KAFKA_LOG_DIR=" + envLogDir, "TIERED_BUCKET=mem://env", "TIERED_UPLOADER_INTERVAL=7s"}
	c = mustLoad(t, LoadOptions{Env: env, Process: ProcessSidecar, Flags: map[string]string{"interval": "1s"}})
	if c.Sidecar.KafkaLogDir != envLogDir || c.Source("sidecar.kafka_log_dir") != SourceEnv || c.Source("bucket") != SourceEnv {
		t.Errorf("from the environment: kafka_log_dir %q (%s), bucket %q (%s)", c.Sidecar.KafkaLogDir,
			c.Source("sidecar.kafka_log_dir"), c.Bucket, c.Source("bucket"))
	}
	if c.Uploader.Interval != time.Second || c.Source("uploader.interval") != SourceFlag {
		t.Errorf("uploader.interval %v (%s), want the flag's 1s over the environment's 7s", c.Uploader.Interval, c.Source("uploader.interval"))
	}

	// What only the sidecar may leave empty or skip.
	noHTTP := map[string]string{"http": "", "bucket": "mem://b", "kafka-log-dir": logDir, "kafka": ":9093"}
	if _, err := Load(LoadOptions{Flags: noHTTP, Process: ProcessSidecar}); err != nil {
		t.Errorf("sidecar without http.addr, with a kafka.addr lacking advertised_addr: %v", err)
	}
	ps := problems(t, func() error { _, err := Load(LoadOptions{Flags: noHTTP, Process: ProcessServe}); return err }())
	var paths []string
	for _, p := range ps {
		paths = append(paths, p.Path)
	}
	if !reflect.DeepEqual(paths, []string{"http.addr", "kafka.advertised_addr"}) {
		t.Errorf("serve with the same flags: problems at %v, want http.addr and kafka.advertised_addr", paths)
	}
	if _, err := Load(LoadOptions{Flags: map[string]string{"rate": "fast", "bucket": "mem://b", "kafka-log-dir": logDir}, Process: ProcessSidecar}); err == nil ||
		!strings.Contains(err.Error(), `flag --rate: uploader.bytes_per_second: "fast" is not a size`) {
		t.Errorf("--rate fast: %v", err)
	}
	// A file shared with fetch: fetch neither needs nor stats the sidecar's log dir.
	shared := writeFile(t, "bucket: mem://b\nsidecar:\n  kafka_log_dir: /only/in/the/broker/pod\n")
	if _, err := Load(LoadOptions{File: shared, Process: ProcessFetch}); err != nil {
		t.Errorf("fetch with a sidecar section: %v", err)
	}
	if _, err := Load(LoadOptions{File: shared, Process: ProcessSidecar}); err == nil || !strings.Contains(err.Error(), "/only/in/the/broker/pod") {
		t.Errorf("sidecar with a missing log dir: %v", err)
	}
	if p, err := ParseProcess("sidecar"); p != ProcessSidecar || err != nil {
		t.Errorf("ParseProcess(sidecar) = %q, %v", p, err)
	}
	if _, err := ParseProcess("broker"); err == nil {
		t.Error("ParseProcess(broker) accepted")
	}
	if d := DefaultsFor(ProcessServe); d.HTTP.Addr != DefaultHTTPAddr || d.Kafka.Addr != DefaultKafkaAddr {
		t.Errorf("serve's defaults changed: %+v %+v", d.HTTP, d.Kafka)
	}
}

// TestFetchBucketNotCheckedAgainstDataDir: tiered fetch has no data dir (no
// --data-dir flag; it never opens one), so the default ./data must not make
// it refuse a file:// bucket that holds the working directory or lies under
// ./data, as it must for serve.
func TestFetchBucketNotCheckedAgainstDataDir(t *testing.T) {
	bucket := t.TempDir()
	t.Chdir(bucket)
	if err := os.MkdirAll(filepath.Join(bucket, "data", "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{bucket, filepath.Join(bucket, "data", "b")} {
		if _, err := Load(LoadOptions{Process: ProcessFetch, Flags: map[string]string{"bucket": "file://" + b}}); err != nil {
			t.Errorf("fetch --bucket file://%s from %s: %v", b, bucket, err)
		}
		if _, err := Load(LoadOptions{Process: ProcessServe, Flags: map[string]string{"bucket": "file://" + b}}); err == nil {
			t.Errorf("serve --bucket file://%s with data_dir ./data: accepted", b)
		}
	}
}

// TestFileWithSeveralDocumentsRefused: a file holding more than one YAML
// document ("---" between them) is refused naming the line of the second,
// never read for its first document alone with the rest silently ignored.
func TestFileWithSeveralDocumentsRefused(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, "data_dir: "+dir+"\nlog: {level: debug}\n---\nlog: {level: warn}\n")
	_, err := Load(LoadOptions{File: file})
	ps := problems(t, err)
	if len(ps) != 1 || ps[0].Source != SourceFile || ps[0].Line != 4 || !strings.Contains(ps[0].Error(), "more than one YAML document") {
		t.Fatalf("problems %v, want one at line 4 (the second document's first key)", err)
	}
	// A "---" start marker, a "..." end marker or an empty document after
	// the first changes nothing.
	for _, body := range []string{"---\nlog: {level: debug}\n", "log: {level: debug}\n...\n", "log: {level: debug}\n---\n"} {
		c, err := Load(LoadOptions{File: writeFile(t, body), Flags: map[string]string{"data-dir": dir}})
		if err != nil || c.Log.Level != "debug" {
			t.Errorf("%q: level %q, %v", body, c.Log.Level, err)
		}
	}
}
