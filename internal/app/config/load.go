package config

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/tiered/tiered/remotetier/policy"
)

// Source says which layer a value came from.
type Source string

// Layers, lowest first.
const (
	SourceDefault Source = "default"
	SourceFile    Source = "file"
	SourceEnv     Source = "env"
	SourceFlag    Source = "flag"
)

// EnvPrefix starts every configuration environment variable.
const EnvPrefix = "TIERED_"

// MaxFileBytes bounds the configuration file Load reads.
const MaxFileBytes = 1 << 20

// maxNodes bounds the YAML nodes one document may expand to (aliases included), so an alias
// bomb cannot make Load spin or allocate without bound.
const maxNodes = 100_000

// origin is where one value was set.
type origin struct {
	src  Source
	file string // SourceFile
	line int    // SourceFile; 0 when unknown
	name string // SourceEnv: the variable; SourceFlag: the flag name
}

// meta records the origin of every value set above the defaults, by key path.
type meta struct {
	origins map[string]origin
	// sections locates the YAML mappings of struct sections ("kafka.tls"), so a problem about
	// a section, or about a key it lacks, still gets a line.
	sections map[string]origin
	bad      map[string]bool // paths that failed to parse: Validate skips them
	// aclLists are the auth.acls entries given in the list form (read only), whose patterns
	// problems name auth.acls.<principal>[i].
	aclLists map[string]bool
}

func newMeta() *meta {
	return &meta{origins: map[string]origin{}, sections: map[string]origin{}, bad: map[string]bool{}, aclLists: map[string]bool{}}
}

// FlagPaths maps the daemons' command-line flags to key paths (DESIGN.md's serve, sidecar and
// fetch flags, the sidecar's uploader flags, plus --log-level and --log-format).
var FlagPaths = map[string]string{
	"data-dir":         "data_dir",
	"bucket":           "bucket",
	"http":             "http.addr",
	"kafka":            "kafka.addr",
	"advertised-addr":  "kafka.advertised_addr",
	"kafka-log-dir":    "sidecar.kafka_log_dir",
	"bootstrap-server": "sidecar.bootstrap_server",
	"topics":           "sidecar.topics",
	"cache-bytes":      "fetch.cache_bytes",
	"chunk-bytes":      "fetch.chunk_bytes",
	"cache-dir":        "fetch.cache_dir",
	"disk-cache-bytes": "fetch.disk_cache_bytes",
	"log-level":        "log.level",
	"log-format":       "log.format",
	"interval":         "uploader.interval",
	"concurrency":      "uploader.concurrency",
	"rate":             "uploader.bytes_per_second",
	"gc-grace":         "uploader.gc_grace",
	"manifest-version": "uploader.manifest_version",
}

// SetFlags returns the flags of fs the user gave that FlagPaths knows, by flag name, as
// LoadOptions.Flags wants them. Call it after fs.Parse.
func SetFlags(fs *flag.FlagSet) map[string]string {
	out := map[string]string{}
	fs.Visit(func(f *flag.Flag) {
		if _, ok := FlagPaths[f.Name]; ok {
			out[f.Name] = f.Value.String()
		}
	})
	return out
}

// Process names the process a configuration is for; each may change defaults (DefaultsFor)
// and adds requirements (ValidateFor).
type Process string

// Processes.
const (
	ProcessAny     Process = ""
	ProcessServe   Process = "serve"
	ProcessSidecar Process = "sidecar"
	ProcessFetch   Process = "fetch"
)

// ParseProcess returns the process named name: serve, sidecar or fetch.
func ParseProcess(name string) (Process, error) {
	switch p := Process(name); p {
	case ProcessServe, ProcessSidecar, ProcessFetch:
		return p, nil
	}
	return ProcessAny, fmt.Errorf("%q is not a process (want serve, sidecar or fetch)", name)
}

// LoadOptions are the layers Load applies over Defaults.
type LoadOptions struct {
	// File is the YAML file (--config); empty means none.
	File string
	// Env is the environment as os.Environ returns it; nil means no environment layer.
	Env []string
	// Flags are the flags the user gave, by flag name (see FlagPaths) or by key path
	// ("fetch.max_wait"); only explicitly set flags belong here (SetFlags).
	Flags map[string]string
	// Process picks that process's built-in defaults (DefaultsFor) and adds its requirements
	// to validation (ValidateFor).
	Process Process
}

// Load builds the effective configuration: DefaultsFor(opts.Process), then the file, the TIERED_* environment
// and the flags, then derives the default bucket and validates. The error joins every problem
// found (*FieldError each, file problems with their line); the Config is returned even then,
// for printing.
func Load(opts LoadOptions) (*Config, error) {
	c := DefaultsFor(opts.Process)
	var errs []error
	l := &loader{c: &c}
	if opts.File != "" {
		data, err := readFile(opts.File)
		if err != nil {
			errs = append(errs, err)
		} else {
			l.loadYAML(data, opts.File)
		}
	}
	l.loadEnv(opts.Env)
	l.loadFlags(opts.Flags)
	for _, p := range l.problems {
		errs = append(errs, p)
	}
	c.deriveBucket()
	if err := c.ValidateFor(opts.Process); err != nil {
		errs = append(errs, unjoin(err)...)
	}
	return &c, errors.Join(errs...)
}

func readFile(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("read config file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read config file %s: %w", name, err)
	}
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("read config file %s: larger than %d bytes", name, MaxFileBytes)
	}
	return data, nil
}

// deriveBucket fills the default bucket, file://<absolute data_dir>/bucket.
func (c *Config) deriveBucket() {
	if c.Bucket != "" || c.DataDir == "" {
		return
	}
	dir, err := filepath.Abs(c.DataDir)
	if err != nil {
		return
	}
	c.Bucket = (&url.URL{Scheme: "file", Path: filepath.ToSlash(filepath.Join(dir, "bucket"))}).String()
	if c.meta != nil {
		delete(c.meta.origins, "bucket")
	}
}

// DefaultBucket is the bucket URL serve uses for dataDir when none is configured.
func DefaultBucket(dataDir string) string {
	c := Config{DataDir: dataDir}
	c.deriveBucket()
	return c.Bucket
}

// FieldError is one configuration problem: the key path, where the value came from, and
// what is wrong. Its message never contains a secret's value.
type FieldError struct {
	// Path is the key path, e.g. "fetch.cache_bytes" or "broker.log.retention.ms".
	Path string
	// Source is the layer of the offending value (SourceDefault when not set by any layer).
	Source Source
	// File and Line locate a value from the YAML file (Line 0 when unknown).
	File string
	Line int
	// Name is the environment variable (SourceEnv) or flag (SourceFlag).
	Name string
	// Msg says what is wrong.
	Msg string
}

// Error returns e.g. "tiered.yaml:12: fetch.cache_bytes: must not be negative (-1)",
// "env TIERED_HTTP_ADDR: http.addr: ...", "flag --http: http.addr: ...".
func (e *FieldError) Error() string {
	var where string
	switch e.Source {
	case SourceFile:
		where = e.File
		if e.Line > 0 {
			where += ":" + strconv.Itoa(e.Line)
		}
		where += ": "
	case SourceEnv:
		where = "env " + e.Name + ": "
	case SourceFlag:
		if strings.Contains(e.Name, ".") || strings.Contains(e.Name, "_") {
			where = "flag " + e.Name + ": "
		} else {
			where = "flag --" + e.Name + ": "
		}
	}
	if e.Path == "" {
		return where + e.Msg
	}
	return where + e.Path + ": " + e.Msg
}

// problem builds a FieldError for path, located by the origin of path or its nearest
// recorded ancestor.
func (c *Config) problem(path, msg string) *FieldError {
	e := &FieldError{Path: path, Source: SourceDefault, Msg: msg}
	if c.meta == nil {
		return e
	}
	if o, ok := findOrigin(c.meta.origins, path); ok {
		e.Source, e.File, e.Line, e.Name = o.src, o.file, o.line, o.name
	} else if o, ok := findOrigin(c.meta.sections, path); ok {
		e.Source, e.File, e.Line = o.src, o.file, o.line
	}
	return e
}

// problemFrom is problem for a check of path against the value at other: when no layer set
// path itself, the problem is located where other was set (the value that conflicts with
// path's default).
func (c *Config) problemFrom(path, other, msg string) *FieldError {
	if c.meta != nil {
		if _, own := findOrigin(c.meta.origins, path); !own {
			if o, ok := findOrigin(c.meta.origins, other); ok {
				return &FieldError{Path: path, Source: o.src, File: o.file, Line: o.line, Name: o.name, Msg: msg}
			}
		}
	}
	return c.problem(path, msg)
}

// findOrigin looks path up in m, then its ancestors ("a.b[1].c", "a.b[1]", "a.b", "a").
func findOrigin(m map[string]origin, path string) (origin, bool) {
	for p := path; ; {
		if o, ok := m[p]; ok {
			return o, true
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			return origin{}, false
		}
		p = p[:i]
	}
}

// Source returns the layer the value at path came from: SourceDefault when no layer set it.
// For a list or a mapping value set as a whole, paths inside it report the whole's layer.
func (c *Config) Source(path string) Source {
	if c.meta == nil {
		return SourceDefault
	}
	if o, ok := findOrigin(c.meta.origins, path); ok {
		return o.src
	}
	return SourceDefault
}

// loader applies one layer after another to a Config.
type loader struct {
	c        *Config
	problems []*FieldError
	nodes    int
	at       origin // the layer being applied
}

func (l *loader) fail(path string, line int, msg string) {
	e := &FieldError{Path: path, Source: l.at.src, File: l.at.file, Name: l.at.name, Msg: msg}
	if l.at.src == SourceFile {
		e.Line = line
	}
	l.problems = append(l.problems, e)
	l.c.meta.bad[path] = true
}

func (l *loader) set(path string, line int) {
	o := l.at
	if o.src == SourceFile {
		o.line = line
	}
	l.c.meta.origins[path] = o
	delete(l.c.meta.bad, path)
}

// clearBelow forgets the origins inside path before a list at path is replaced.
func (l *loader) clearBelow(path string) {
	for p := range l.c.meta.origins {
		if strings.HasPrefix(p, path+"[") || strings.HasPrefix(p, path+".") {
			delete(l.c.meta.origins, p)
		}
	}
}

// loadYAML applies a YAML document.
func (l *loader) loadYAML(data []byte, file string) {
	l.at = origin{src: SourceFile, file: file}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		l.problems = append(l.problems, &FieldError{Source: SourceFile, File: file, Msg: yamlErrText(err)})
		return
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return // empty file
	}
	l.nodes = 0
	l.decode(doc.Content[0], reflect.ValueOf(l.c).Elem(), "")
	// yaml.Unmarshal reads the first document only: a second one ("---") would be
	// ignored without a word.
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var first, next yaml.Node
	if dec.Decode(&first) == nil && dec.Decode(&next) == nil && len(next.Content) > 0 {
		if n := next.Content[0]; n.Kind != yaml.ScalarNode || n.Tag != "!!null" {
			l.fail("", n.Line, "the file holds more than one YAML document (its second, after ---, begins here): put every key in one document")
		}
	}
}

// yamlErrText drops the "yaml: " prefix.
func yamlErrText(err error) string {
	return strings.TrimPrefix(err.Error(), "yaml: ")
}

var (
	durationType = reflect.TypeFor[time.Duration]()
	byteSizeType = reflect.TypeFor[ByteSize]()
	aclType      = reflect.TypeFor[ACL]()
	retainType   = reflect.TypeFor[RetentionDuration]()
	peerListType = reflect.TypeFor[PeerList]()
)

// fieldByTag returns the field of struct type t with yaml tag key.
func fieldByTag(t reflect.Type, key string) (int, bool) {
	for i := 0; i < t.NumField(); i++ {
		if tag := yamlTag(t.Field(i)); tag != "" && tag == key {
			return i, true
		}
	}
	return 0, false
}

func yamlTag(f reflect.StructField) string {
	if !f.IsExported() {
		return ""
	}
	tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if tag == "-" {
		return ""
	}
	return tag
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// eachKey calls fn for each key of mapping n with its value and path,
// after reporting keys that are not plain strings (aliases resolved) and
// duplicates, which fn never sees.
func (l *loader) eachKey(n *yaml.Node, path string, fn func(k, val *yaml.Node, kp string)) {
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		for k.Kind == yaml.AliasNode && k.Alias != nil {
			k = k.Alias
		}
		if k.Kind != yaml.ScalarNode {
			l.fail(path, k.Line, "keys must be plain strings")
			continue
		}
		kp := join(path, k.Value)
		if prev, dup := seen[k.Value]; dup {
			l.fail(kp, k.Line, fmt.Sprintf("duplicate key (first at line %d)", prev))
			continue
		}
		seen[k.Value] = k.Line
		fn(k, val, kp)
	}
}

// decode applies node n to v (at key path). Problems are recorded and decoding goes on, so
// one pass reports them all. A null leaves v unchanged.
func (l *loader) decode(n *yaml.Node, v reflect.Value, path string) {
	for n.Kind == yaml.AliasNode {
		if n.Alias == nil {
			return
		}
		n = n.Alias
	}
	l.nodes++
	if l.nodes > maxNodes {
		if l.nodes == maxNodes+1 {
			l.fail(path, n.Line, fmt.Sprintf("document too large (more than %d values after aliases)", maxNodes))
		}
		return
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return
	}
	t := v.Type()
	switch {
	case t == durationType, t == byteSizeType, t == retainType:
		// handled as scalars below
	case t.Kind() == reflect.Pointer:
		// an optional value (sidecar.topics' tier, retention.ms): set when present
		elem := reflect.New(t.Elem())
		if !v.IsNil() {
			elem.Elem().Set(v.Elem())
		}
		before := len(l.problems)
		l.decode(n, elem.Elem(), path)
		if len(l.problems) == before {
			v.Set(elem)
		}
		return
	case t == aclType:
		l.decodeACL(n, v, path)
		return
	case t == peerListType && n.Kind == yaml.ScalarNode:
		// fetch.peers: one string is one entry (a DNS name, or a single address).
		l.clearBelow(path)
		if s := strings.TrimSpace(n.Value); s == "" {
			v.Set(reflect.Zero(t))
		} else {
			v.Set(reflect.ValueOf(PeerList{s}))
		}
		l.set(path, n.Line)
		return
	case t.Kind() == reflect.Struct:
		if n.Kind != yaml.MappingNode {
			l.fail(path, n.Line, "want a mapping of keys, got "+nodeKind(n))
			return
		}
		l.eachKey(n, path, func(k, val *yaml.Node, kp string) {
			fi, ok := fieldByTag(t, k.Value)
			if !ok {
				l.fail(kp, k.Line, "unknown key"+knownKeys(t))
				return
			}
			if l.at.src == SourceFile && t.Field(fi).Type.Kind() == reflect.Struct {
				l.c.meta.sections[kp] = origin{src: SourceFile, file: l.at.file, line: k.Line}
			}
			l.decode(val, v.Field(fi), kp)
		})
		return
	case t.Kind() == reflect.Map:
		if n.Kind != yaml.MappingNode {
			l.fail(path, n.Line, "want a mapping, got "+nodeKind(n))
			return
		}
		if v.IsNil() {
			v.Set(reflect.MakeMap(t))
		}
		l.eachKey(n, path, func(k, val *yaml.Node, kp string) {
			elem := reflect.New(t.Elem()).Elem()
			if old := v.MapIndex(reflect.ValueOf(k.Value)); old.IsValid() {
				elem.Set(old)
			}
			before := len(l.problems)
			l.decode(val, elem, kp)
			if len(l.problems) == before {
				v.SetMapIndex(reflect.ValueOf(k.Value), elem)
				l.set(kp, val.Line)
			}
		})
		return
	case t.Kind() == reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			l.fail(path, n.Line, "want a list, got "+nodeKind(n))
			return
		}
		s := reflect.MakeSlice(t, 0, min(len(n.Content), 1024))
		before := len(l.problems)
		l.clearBelow(path)
		for i, e := range n.Content {
			elem := reflect.New(t.Elem()).Elem()
			l.decode(e, elem, fmt.Sprintf("%s[%d]", path, i))
			s = reflect.Append(s, elem)
		}
		if len(l.problems) == before {
			v.Set(s)
			l.set(path, n.Line)
		}
		return
	}
	// A scalar.
	if n.Kind != yaml.ScalarNode {
		l.fail(path, n.Line, "want "+typeWant(t)+", got "+nodeKind(n))
		return
	}
	if err := setScalar(v, n.Value); err != nil {
		l.fail(path, n.Line, err.Error())
		return
	}
	l.set(path, n.Line)
}

// decodeACL applies one auth.acls entry, which replaces the principal's entry of earlier
// layers as a whole: a list of topics (read only) or a mapping of read, write, groups, admin.
func (l *loader) decodeACL(n *yaml.Node, v reflect.Value, path string) {
	v.Set(reflect.Zero(aclType))
	l.c.meta.aclLists[path] = n.Kind == yaml.SequenceNode
	switch n.Kind {
	case yaml.SequenceNode:
		l.decode(n, v.FieldByName("Read"), path)
	case yaml.MappingNode:
		l.clearBelow(path)
		l.eachKey(n, path, func(k, val *yaml.Node, kp string) {
			fi, ok := fieldByTag(aclType, k.Value)
			if !ok {
				l.fail(kp, k.Line, "unknown key"+knownKeys(aclType))
				return
			}
			l.decode(val, v.Field(fi), kp)
		})
	default:
		l.fail(path, n.Line, "want a list of topics (read only) or a mapping of read, write, groups, admin, got "+nodeKind(n))
	}
}

// setScalar parses s into v by v's type. Messages never quote a Secret.
func setScalar(v reflect.Value, s string) error {
	t := v.Type()
	switch {
	case t == durationType:
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("%q is not a duration (want e.g. 500ms, 30s, 5m, 1h)", s)
		}
		v.SetInt(int64(d))
	case t == retainType:
		if strings.TrimSpace(s) == "-1" {
			v.SetInt(int64(KeepForever))
			return nil
		}
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("%q is not a duration or -1 (want e.g. 24h, 30m, 0 = at once, -1 = keep)", s)
		}
		v.SetInt(int64(d))
	case t == byteSizeType:
		b, err := ParseByteSize(s)
		if err != nil {
			return err
		}
		v.SetInt(int64(b))
	case t.Kind() == reflect.String:
		v.SetString(s)
	case t.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("%q is not true or false", s)
		}
		v.SetBool(b)
	case t.Kind() == reflect.Int || t.Kind() == reflect.Int64 || t.Kind() == reflect.Int32:
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, t.Bits())
		if err != nil {
			return fmt.Errorf("%q is not an integer", s)
		}
		v.SetInt(n)
	case t.Kind() == reflect.Float64:
		f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil {
			return fmt.Errorf("%q is not a number", s)
		}
		v.SetFloat(f)
	default:
		return fmt.Errorf("unsupported type %s", t)
	}
	return nil
}

func nodeKind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return "a value"
	default:
		return "nothing"
	}
}

func typeWant(t reflect.Type) string {
	switch {
	case t == durationType:
		return "a duration"
	case t == retainType:
		return "a duration or -1"
	case t == byteSizeType:
		return "a size in bytes"
	case t.Kind() == reflect.String:
		return "a string"
	case t.Kind() == reflect.Bool:
		return "true or false"
	case t.Kind() == reflect.Float64:
		return "a number"
	default:
		return "an integer"
	}
}

// knownKeys lists the keys of struct type t for an unknown-key message.
func knownKeys(t reflect.Type) string {
	var keys []string
	for i := 0; i < t.NumField(); i++ {
		if tag := yamlTag(t.Field(i)); tag != "" {
			keys = append(keys, tag)
		}
	}
	return " (known: " + strings.Join(keys, ", ") + ")"
}

// isComposite reports whether values of t are lists or mappings.
func isComposite(t reflect.Type) bool {
	return t.Kind() == reflect.Slice || t.Kind() == reflect.Map || (t.Kind() == reflect.Struct && t != durationType)
}

// setString applies one textual value (environment or flag) at path: scalars literally, lists
// and mappings as YAML flow text.
func (l *loader) setString(path, value string) {
	v, ok := l.c.lookup(path)
	if !ok {
		l.fail(path, 0, "unknown key")
		return
	}
	if v.isMapKey {
		elem := reflect.New(v.mapVal.Type().Elem()).Elem()
		if old := v.mapVal.MapIndex(reflect.ValueOf(v.key)); old.IsValid() {
			elem.Set(old)
		}
		if err := setScalar(elem, value); err != nil {
			l.fail(path, 0, err.Error())
			return
		}
		v.mapVal.SetMapIndex(reflect.ValueOf(v.key), elem)
		l.set(path, 0)
		return
	}
	if !isComposite(v.val.Type()) {
		if err := setScalar(v.val, value); err != nil {
			l.fail(path, 0, err.Error())
			return
		}
		l.set(path, 0)
		return
	}
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(value), &doc); err != nil {
		l.fail(path, 0, "not valid YAML: "+yamlErrText(err))
		return
	}
	if len(doc.Content) == 0 {
		return
	}
	l.nodes = 0
	l.decode(doc.Content[0], v.val, path) // records the origin of each value it sets
}

// target is a settable place in a Config: a value, or a key of a map.
type target struct {
	val      reflect.Value
	isMapKey bool
	mapVal   reflect.Value
	key      string
}

// lookup resolves a key path. A path into a map of strings names one key (the rest of the
// path, dots included: "broker.log.retention.ms").
func (c *Config) lookup(path string) (target, bool) {
	v := reflect.ValueOf(c).Elem()
	parts := strings.Split(path, ".")
	for i, p := range parts {
		switch v.Kind() {
		case reflect.Struct:
			if v.Type() == durationType {
				return target{}, false
			}
			fi, ok := fieldByTag(v.Type(), p)
			if !ok {
				return target{}, false
			}
			v = v.Field(fi)
		case reflect.Map:
			if v.Type().Elem().Kind() != reflect.String {
				return target{}, false
			}
			if v.IsNil() {
				v.Set(reflect.MakeMap(v.Type()))
			}
			return target{isMapKey: true, mapVal: v, key: strings.Join(parts[i:], ".")}, true
		default:
			return target{}, false
		}
	}
	return target{val: v}, true
}

// envVar is one environment variable and the key path it sets.
type envVar struct {
	name, path string
}

// envName is the variable for a key path: TIERED_ + path in upper case, '.' → '_'.
func envName(path string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(path, ".", "_"))
}

// EnvVars lists every configuration environment variable with the key path it sets, sorted by
// name: one per key of Config, plus one per known broker config.
func EnvVars() map[string]string {
	out := map[string]string{}
	for _, p := range leafPaths(reflect.TypeFor[Config](), "") {
		out[envName(p)] = p
	}
	for _, d := range brokerDefs {
		out[envName("broker."+d.name)] = "broker." + d.name
	}
	return out
}

// leafPaths lists the key paths of t's values that are not structs (lists and mappings count
// as one value).
func leafPaths(t reflect.Type, path string) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := yamlTag(f)
		if tag == "" {
			continue
		}
		p := join(path, tag)
		if f.Type.Kind() == reflect.Struct && f.Type != durationType {
			out = append(out, leafPaths(f.Type, p)...)
		} else {
			out = append(out, p)
		}
	}
	return out
}

// sectionWords are the first words after TIERED_ that belong to the configuration; an
// unknown variable starting with one is an error, others are left to their owners.
func sectionWords() map[string]bool {
	m := map[string]bool{}
	for _, p := range leafPaths(reflect.TypeFor[Config](), "") {
		first, _, _ := strings.Cut(p, ".")
		w, _, _ := strings.Cut(strings.ToUpper(first), "_")
		m[w] = true
	}
	return m
}

// loadEnv applies the TIERED_* variables, sorted by name so problems come in a stable order.
func (l *loader) loadEnv(env []string) {
	vars := EnvVars()
	words := sectionWords()
	var set []envVar
	values := map[string]string{}
	for _, kv := range env {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(name, EnvPrefix) {
			continue
		}
		if path, ok := vars[name]; ok {
			set = append(set, envVar{name: name, path: path})
			values[name] = value
			continue
		}
		w, _, _ := strings.Cut(strings.TrimPrefix(name, EnvPrefix), "_")
		if words[w] {
			l.at = origin{src: SourceEnv, name: name}
			l.fail("", 0, "unknown configuration variable (the rule is TIERED_ + key path in upper case with '_' for '.', e.g. TIERED_FETCH_CACHE_BYTES)")
		}
	}
	sort.Slice(set, func(i, j int) bool { return set[i].name < set[j].name })
	for _, e := range set {
		l.at = origin{src: SourceEnv, name: e.name}
		l.setString(e.path, values[e.name])
	}
}

// loadFlags applies the flags, by flag name or key path, sorted.
func (l *loader) loadFlags(flags map[string]string) {
	for _, name := range sortedKeys(flags) {
		path, ok := FlagPaths[name]
		if !ok {
			path = name
		}
		l.at = origin{src: SourceFlag, name: name}
		if name == "topics" {
			l.setTopicsFlag(flags[name])
			continue
		}
		l.setString(path, flags[name])
	}
}

// setTopicsFlag applies the --topics shorthand ('orders,logs-*'): one rule per item that
// tiers it with no remote deletion, replacing the rules of earlier layers.
func (l *loader) setTopicsFlag(value string) {
	rules, err := policy.ParseTopicsFlag(value)
	if err != nil {
		l.fail("sidecar.topics", 0, err.Error())
		return
	}
	l.clearBelow("sidecar.topics")
	l.c.Sidecar.Topics = rules
	l.set("sidecar.topics", 0)
}
