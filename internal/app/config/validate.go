package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tiered/tiered/fetchcache/auth"
	"github.com/tiered/tiered/fetchcache/fleet"
	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier/objstore"
	"github.com/tiered/tiered/remotetier/policy"
)

// Bounds Validate enforces beyond "not negative".
const (
	MinChunkBytes          = 4 << 10
	MaxChunkBytes          = 1 << 30
	MaxUploaderConcurrency = 256
	// kafka.fetch_max_bytes: Kafka's own floor for fetch.max.bytes, and a
	// response that still fits a Kafka frame with room to spare.
	minKafkaFetchMaxBytes = 1 << 10
	maxKafkaFetchMaxBytes = 1 << 30
)

// Validate checks the configuration for any process and reports every problem at once, as an
// errors.Join of *FieldError: bad addresses, bucket URL, sizes, durations, log settings,
// broker configs (through topicconfig, Kafka's wording), missing or unreadable TLS files, and
// auth. It reads the TLS files and stats directories but writes nothing and opens no network
// connection (an unreachable bucket is found when the process opens it). Values that already
// failed to parse in Load are not checked again.
func (c *Config) Validate() error { return c.ValidateFor(ProcessAny) }

// ValidateFor is Validate plus the requirements of process p: sidecar needs
// sidecar.kafka_log_dir (an existing directory) and an explicit bucket, and checks neither
// the kafka listener nor data_dir, which it never uses, while an empty http.addr is allowed
// (no listener); fetch needs an explicit bucket. Other processes do not stat
// sidecar.kafka_log_dir, so one file can configure the sidecar and fetch.
func (c *Config) ValidateFor(p Process) error {
	v := &validator{c: c, p: p}
	v.general()
	switch p {
	case ProcessSidecar:
		if c.Sidecar.KafkaLogDir == "" {
			v.add("sidecar.kafka_log_dir", "required for tiered sidecar (--kafka-log-dir)")
		}
		if c.Source("bucket") == SourceDefault {
			v.add("bucket", "required for tiered sidecar (--bucket)")
		}
	case ProcessFetch:
		if c.Source("bucket") == SourceDefault {
			v.add("bucket", "required for tiered fetch (--bucket)")
		}
	}
	errs := make([]error, len(v.problems))
	for i, e := range v.problems {
		errs[i] = e
	}
	return errors.Join(errs...)
}

type validator struct {
	c        *Config
	p        Process
	problems []*FieldError
}

func (v *validator) add(path, format string, args ...any) {
	if v.c.meta != nil && v.c.meta.bad[path] {
		return
	}
	v.problems = append(v.problems, v.c.problem(path, fmt.Sprintf(format, args...)))
}

func (v *validator) general() {
	c := v.c
	if c.DataDir == "" && v.p != ProcessSidecar {
		v.add("data_dir", "must not be empty")
	}
	v.bucket()
	v.listeners()
	v.tls("http.tls", c.HTTP.TLS)
	if v.p != ProcessSidecar {
		v.tls("kafka.tls", c.Kafka.TLS)
	}
	if c.Sidecar.BootstrapServer != "" {
		for _, hp := range strings.Split(c.Sidecar.BootstrapServer, ",") {
			if err := checkHostPort(strings.TrimSpace(hp), false, false); err != nil {
				v.add("sidecar.bootstrap_server", "%v", err)
			}
		}
	}
	if d := c.Sidecar.DeletedTopicRetention; d < 0 && !d.Keep() {
		v.add("sidecar.deleted_topic_retention", "must be -1 (keep), 0 (remove at once) or a positive duration (got %s)", time.Duration(d))
	}
	for _, p := range policy.Validate(c.Sidecar.Topics) {
		v.add(fmt.Sprintf("sidecar.topics[%d].%s", p.Rule, p.Field), "%s", p.Msg)
	}
	if d := c.Sidecar.KafkaLogDir; d != "" && v.p == ProcessSidecar {
		if fi, err := os.Stat(d); err != nil {
			v.add("sidecar.kafka_log_dir", "%v", err)
		} else if !fi.IsDir() {
			v.add("sidecar.kafka_log_dir", "%s is not a directory", d)
		}
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		v.add("log.level", "%q is not one of debug, info, warn, error", c.Log.Level)
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		v.add("log.format", "%q is not one of text, json", c.Log.Format)
	}
	for _, p := range c.brokerProblems() {
		if c.meta == nil || !c.meta.bad[p.Path] {
			v.problems = append(v.problems, p)
		}
	}
	v.uploader()
	v.fetch()
	if n := v.c.LocalTier.MaxOpenFiles; n < -1 {
		v.add("localtier.max_open_files", "must be -1 (no bound), 0 (half of RLIMIT_NOFILE) or a positive count (got %d)", n)
	}
	v.auth()
	v.groups()
	v.positiveDuration("shutdown_timeout", int64(c.ShutdownTimeout))
}

func (v *validator) groups() {
	g := v.c.Groups
	v.nonNegative("groups.initial_rebalance_delay", int64(g.InitialRebalanceDelay))
	v.positiveDuration("groups.min_session_timeout", int64(g.MinSessionTimeout))
	v.positiveDuration("groups.offsets_retention", int64(g.OffsetsRetention))
	v.positive("groups.max_size", int64(g.MaxSize))
	if g.MaxSessionTimeout < g.MinSessionTimeout {
		v.addFrom("groups.max_session_timeout", "groups.min_session_timeout", "must be at least groups.min_session_timeout (%v), got %v", g.MinSessionTimeout, g.MaxSessionTimeout)
	}
}

func (v *validator) bucket() {
	c := v.c
	if c.Bucket == "" {
		v.add("bucket", "must not be empty")
		return
	}
	loc, err := objstore.ParseURL(c.Bucket)
	if err != nil {
		v.add("bucket", "%v", err)
		return
	}
	if loc.Scheme != "file" {
		return
	}
	bdir := filepath.Clean(filepath.FromSlash(loc.Dir))
	// Only serve has a data dir (the sidecar and fetch never open one).
	if c.DataDir != "" && v.p != ProcessSidecar && v.p != ProcessFetch {
		if data, err := filepath.Abs(c.DataDir); err == nil {
			switch {
			case within(bdir, data) && bdir != filepath.Join(data, "bucket"):
				v.add("bucket", "a file:// bucket inside data_dir must be %s (the log-dir loader skips only that directory)", filepath.Join(data, "bucket"))
			case within(data, bdir) && data != bdir:
				v.add("bucket", "data_dir %s is inside the bucket directory %s", data, bdir)
			}
		}
	}
	if kd := c.Sidecar.KafkaLogDir; kd != "" {
		if abs, err := filepath.Abs(kd); err == nil && within(bdir, abs) {
			v.add("bucket", "must not be inside sidecar.kafka_log_dir: the broker's log dir is never written")
		}
	}
}

// within reports whether path is dir or below it.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

func (v *validator) listeners() {
	c := v.c
	switch {
	case c.HTTP.Addr == "" && v.p != ProcessSidecar:
		v.add("http.addr", "must not be empty")
	case c.HTTP.Addr != "":
		if err := checkHostPort(c.HTTP.Addr, true, true); err != nil {
			v.add("http.addr", "%v", err)
		}
	}
	if c.HTTP.Addr != "" {
		v.positiveDuration("http.read_header_timeout", int64(c.HTTP.ReadHeaderTimeout))
		v.positiveDuration("http.body_read_timeout", int64(c.HTTP.BodyReadTimeout))
		v.positiveDuration("http.write_timeout", int64(c.HTTP.WriteTimeout))
		v.positiveDuration("http.idle_timeout", int64(c.HTTP.IdleTimeout))
		v.positive("http.max_connections", int64(c.HTTP.MaxConnections))
		v.positive("http.max_connections_per_ip", int64(c.HTTP.MaxConnectionsPerIP))
		v.positive("http.max_inflight_produce_bytes", int64(c.HTTP.MaxInFlightProduceBytes))
	}
	if c.Kafka.Addr == "" || v.p == ProcessSidecar {
		return
	}
	if err := checkHostPort(c.Kafka.Addr, true, true); err != nil {
		v.add("kafka.addr", "%v", err)
		return
	}
	v.positiveDuration("kafka.idle_timeout", int64(c.Kafka.IdleTimeout))
	v.positiveDuration("kafka.request_read_timeout", int64(c.Kafka.RequestReadTimeout))
	v.positiveDuration("kafka.sasl_timeout", int64(c.Kafka.SASLTimeout))
	v.positive("kafka.max_connections", int64(c.Kafka.MaxConnections))
	v.positive("kafka.max_connections_per_ip", int64(c.Kafka.MaxConnectionsPerIP))
	v.positive("kafka.max_inflight_response_bytes", int64(c.Kafka.MaxInFlightResponseBytes))
	v.positive("kafka.max_fetch_partitions", int64(c.Kafka.MaxFetchPartitions))
	v.positive("kafka.fetch_fill_concurrency", int64(c.Kafka.FetchFillConcurrency))
	if n := int64(c.Kafka.FetchMaxBytes); n < minKafkaFetchMaxBytes || n > maxKafkaFetchMaxBytes {
		v.add("kafka.fetch_max_bytes", "must be between 1KiB and 1GiB (got %d)", n)
	}
	if c.Kafka.Addr == c.HTTP.Addr && !strings.HasSuffix(c.Kafka.Addr, ":0") {
		v.addFrom("kafka.addr", "http.addr", "same address as http.addr (%s)", c.HTTP.Addr)
	}
	if a := c.Kafka.AdvertisedAddr; a != "" {
		if err := checkHostPort(a, false, false); err != nil {
			v.add("kafka.advertised_addr", "%v", err)
		} else if host, _, _ := net.SplitHostPort(a); unspecified(host) {
			v.add("kafka.advertised_addr", "%s cannot be advertised: clients cannot connect to the non-routable meta-address", a)
		}
		return
	}
	if host, _, _ := net.SplitHostPort(c.Kafka.Addr); unspecified(host) {
		v.addFrom("kafka.advertised_addr", "kafka.addr", "required when kafka.addr (%s) listens on all interfaces: clients need a routable host:port", c.Kafka.Addr)
	}
}

func unspecified(host string) bool {
	if host == "" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsUnspecified()
}

// checkHostPort checks host:port. An empty host (all interfaces) and port 0 (any free port)
// are allowed only for listen addresses.
func checkHostPort(addr string, listen, zeroPort bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port", addr)
	}
	if host == "" && !listen {
		return fmt.Errorf("%q has no host", addr)
	}
	if strings.ContainsAny(host, " /\\@?#") {
		return fmt.Errorf("%q has an invalid host", addr)
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || (n == 0 && !zeroPort) {
		return fmt.Errorf("%q: port must be a number from 1 to 65535", addr)
	}
	return nil
}

func (v *validator) tls(path string, t TLS) {
	if !t.Enabled() {
		if t.ClientCAFile != "" {
			v.add(path+".client_ca_file", "mutual TLS needs cert_file and key_file too")
		}
		return
	}
	if t.CertFile == "" {
		v.add(path+".cert_file", "required with key_file")
	}
	if t.KeyFile == "" {
		v.add(path+".key_file", "required with cert_file")
	}
	okCert := t.CertFile != "" && v.readable(path+".cert_file", t.CertFile)
	okKey := t.KeyFile != "" && v.readable(path+".key_file", t.KeyFile)
	if okCert && okKey {
		if _, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile); err != nil {
			v.add(path, "cert_file and key_file are not a usable pair: %v", err)
		}
	}
	if t.ClientCAFile != "" && v.readable(path+".client_ca_file", t.ClientCAFile) {
		pem, err := os.ReadFile(t.ClientCAFile)
		if err == nil && !x509.NewCertPool().AppendCertsFromPEM(pem) {
			v.add(path+".client_ca_file", "%s holds no PEM certificate", t.ClientCAFile)
		}
	}
}

func (v *validator) readable(path, file string) bool {
	f, err := os.Open(file)
	if err != nil {
		v.add(path, "%v", err)
		return false
	}
	f.Close()
	return true
}

// addFrom is add for a check of path against the value at other (problemFrom).
func (v *validator) addFrom(path, other, format string, args ...any) {
	if v.c.meta != nil && v.c.meta.bad[path] {
		return
	}
	v.problems = append(v.problems, v.c.problemFrom(path, other, fmt.Sprintf(format, args...)))
}

func (v *validator) nonNegative(path string, n int64) bool {
	if n < 0 {
		v.add(path, "must not be negative (got %d)", n)
		return false
	}
	return true
}

func (v *validator) positive(path string, n int64) {
	if n <= 0 {
		v.add(path, "must be positive (got %d)", n)
	}
}

func (v *validator) positiveDuration(path string, d int64) {
	if d <= 0 {
		v.add(path, "must be a positive duration")
	}
}

func (v *validator) uploader() {
	u := v.c.Uploader
	if u.Concurrency < 1 || u.Concurrency > MaxUploaderConcurrency {
		v.add("uploader.concurrency", "must be from 1 to %d (got %d)", MaxUploaderConcurrency, u.Concurrency)
	}
	v.nonNegative("uploader.bytes_per_second", int64(u.BytesPerSecond))
	v.positiveDuration("uploader.interval", int64(u.Interval))
	v.positiveDuration("uploader.gc_grace", int64(u.GCGrace))
	if u.ManifestVersion < 1 || u.ManifestVersion > manifest.Version {
		v.add("uploader.manifest_version", "must be from 1 to %d (got %d)", manifest.Version, u.ManifestVersion)
	}
}

// peers checks fetch.peers: host:port entries, and for tiered fetch with a list of
// addresses, this replica's advertised address among them.
func (v *validator) peers() {
	peers := v.c.Fetch.Peers
	if len(peers) == 0 {
		return
	}
	ok := true
	for i, p := range peers {
		if err := checkHostPort(p, false, false); err != nil {
			v.add(fmt.Sprintf("fetch.peers[%d]", i), "%v", err)
			ok = false
		}
	}
	if !ok || v.p != ProcessFetch {
		return
	}
	self := v.c.Kafka.AdvertisedAddr
	if self == "" {
		self = v.c.Kafka.Addr
	}
	if _, port, err := net.SplitHostPort(self); err != nil || port == "0" {
		v.add("fetch.peers", "a fleet needs a fixed advertised address: set kafka.advertised_addr (the Kafka address %q has no fixed port)", self)
		return
	}
	if len(peers) == 1 && fleet.IsDNSName(peers[0]) {
		return // a DNS name: the replica finds itself among its answers at start-up
	}
	if !slices.Contains(peers, self) {
		v.add("fetch.peers", "this replica's advertised address %s (kafka.advertised_addr, else kafka.addr) is not in the list %s", self, strings.Join(peers, ", "))
	}
}

func (v *validator) fetch() {
	f := v.c.Fetch
	chunk := int64(f.ChunkBytes)
	chunkOK := false
	if v.nonNegative("fetch.chunk_bytes", chunk) {
		if chunk < MinChunkBytes || chunk > MaxChunkBytes {
			v.add("fetch.chunk_bytes", "must be from %d (4KiB) to %d (1GiB) (got %d)", MinChunkBytes, MaxChunkBytes, chunk)
		} else {
			chunkOK = true
		}
	}
	if v.nonNegative("fetch.cache_bytes", int64(f.CacheBytes)) && chunkOK && int64(f.CacheBytes) < chunk {
		v.addFrom("fetch.cache_bytes", "fetch.chunk_bytes", "must hold at least one chunk (%d bytes, fetch.chunk_bytes)", chunk)
	}
	if v.nonNegative("fetch.disk_cache_bytes", int64(f.DiskCacheBytes)) {
		switch {
		case f.CacheDir != "" && f.DiskCacheBytes == 0:
			v.addFrom("fetch.disk_cache_bytes", "fetch.cache_dir", "required with fetch.cache_dir")
		case f.CacheDir == "" && f.DiskCacheBytes != 0:
			v.addFrom("fetch.cache_dir", "fetch.disk_cache_bytes", "required with fetch.disk_cache_bytes")
		case f.CacheDir != "" && chunkOK && int64(f.DiskCacheBytes) < chunk:
			v.addFrom("fetch.disk_cache_bytes", "fetch.chunk_bytes", "must hold at least one chunk (%d bytes, fetch.chunk_bytes)", chunk)
		}
	}
	if f.MaxConcurrentGets < 1 {
		v.add("fetch.max_concurrent_gets", "must be at least 1 (got %d)", f.MaxConcurrentGets)
	}
	if f.ParkedGets < -1 {
		v.add("fetch.parked_gets", "must be -1 (none), 0 (the default) or a bound (got %d)", f.ParkedGets)
	}
	if v.nonNegative("fetch.max_inflight_bytes", int64(f.MaxInFlightBytes)) && chunkOK && int64(f.MaxInFlightBytes) < chunk {
		v.addFrom("fetch.max_inflight_bytes", "fetch.chunk_bytes", "must be at least one chunk (%d bytes, fetch.chunk_bytes)", chunk)
	}
	v.positiveDuration("fetch.max_wait", int64(f.MaxWait))
	if f.PeerLease < fleet.MinLease {
		v.add("fetch.peer_lease", "must be at least %s (got %s)", fleet.MinLease, f.PeerLease)
	}
	v.peers()
	if f.ReadAheadChunks < 0 {
		v.add("fetch.readahead_chunks", "must not be negative (got %d; 0 disables read-ahead)", f.ReadAheadChunks)
	}
}

func (v *validator) auth() {
	a := v.c.Auth
	principals := map[string]bool{}
	tokenAt := map[string]int{}
	for i, t := range a.Tokens {
		p := fmt.Sprintf("auth.tokens[%d]", i)
		if strings.TrimSpace(t.Principal) == "" {
			v.add(p+".principal", "must not be empty")
		}
		principals[t.Principal] = true
		if t.Token == "" {
			v.add(p+".token", "must not be empty")
			continue
		}
		if j, dup := tokenAt[t.Token.Reveal()]; dup {
			v.add(p+".token", "same token as auth.tokens[%d]", j)
		} else {
			tokenAt[t.Token.Reveal()] = i
		}
	}
	userAt := map[string]int{}
	for i, u := range a.SASLPlain {
		p := fmt.Sprintf("auth.sasl_plain[%d]", i)
		switch {
		case u.Username == "":
			v.add(p+".username", "must not be empty")
		case strings.ContainsRune(u.Username, 0):
			v.add(p+".username", "must not contain NUL (the SASL/PLAIN separator)")
		default:
			if j, dup := userAt[u.Username]; dup {
				v.add(p+".username", "duplicate of auth.sasl_plain[%d]", j)
			}
			userAt[u.Username] = i
		}
		principals[u.Username] = true
		if u.Password == "" {
			v.add(p+".password", "must not be empty")
		} else if strings.ContainsRune(u.Password.Reveal(), 0) {
			v.add(p+".password", "must not contain NUL (the SASL/PLAIN separator)")
		}
	}
	mtls := v.c.Kafka.TLS.ClientCAFile != "" || v.c.HTTP.TLS.ClientCAFile != ""
	noAuth := len(a.Tokens) == 0 && len(a.SASLPlain) == 0 && !mtls
	if len(a.ACLs) > 0 && noAuth {
		v.add("auth.acls", "set, but no listener authenticates (configure auth.tokens, auth.sasl_plain or a tls.client_ca_file): every client would be allowed everything")
	}
	for _, principal := range sortedKeys(a.ACLs) {
		p := "auth.acls." + principal
		if strings.TrimSpace(principal) == "" {
			v.add("auth.acls", "a principal must not be empty")
		} else if !mtls && !noAuth && !principals[principal] {
			v.add(p, "no token or SASL/PLAIN user has this principal")
		}
		e := a.ACLs[principal]
		for _, f := range []struct {
			name  string
			pats  []string
			check func(string) error
		}{{"read", e.Read, auth.CheckTopicPattern}, {"write", e.Write, auth.CheckTopicPattern}, {"groups", e.Groups, auth.CheckGroupPattern}} {
			for i, pat := range f.pats {
				if err := f.check(pat); err != nil {
					at := fmt.Sprintf("%s.%s[%d]", p, f.name, i)
					if v.c.meta != nil && v.c.meta.aclLists[p] {
						at = fmt.Sprintf("%s[%d]", p, i) // the list form
					}
					v.add(at, "%v", err)
				}
			}
		}
	}
}
