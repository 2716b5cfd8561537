package chunkcache

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tiered/tiered/remotetier/objstore"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of testdata/cache scripts")

// A cache script is a list of cases in the style of cockroachdb/datadriven:
//
//	command arg=value ...
//	----
//	expected output
//	(blank line)
//
// Lines starting with '#' between cases are comments. Run with -rewrite to
// regenerate the expected output after a deliberate change.
type scriptCase struct {
	line     int
	cmd      string
	args     map[string]string
	expected string
}

func parseScript(t *testing.T, path string) (cases []scriptCase, prefix []string) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			prefix = append(prefix, l)
			continue
		}
		c := scriptCase{line: i + 1, args: map[string]string{}}
		fields := strings.Fields(l)
		c.cmd = fields[0]
		for _, f := range fields[1:] {
			k, v, _ := strings.Cut(f, "=")
			c.args[k] = v
		}
		i++
		if i >= len(lines) || lines[i] != "----" {
			t.Fatalf("%s:%d: command without ---- line", path, c.line)
		}
		var out []string
		for i+1 < len(lines) && lines[i+1] != "" {
			i++
			out = append(out, lines[i])
		}
		c.expected = strings.Join(out, "\n")
		prefix = append(prefix, "\x00") // placeholder for the case
		cases = append(cases, c)
	}
	return cases, prefix
}

func TestCacheScripts(t *testing.T) {
	paths, err := filepath.Glob("testdata/cache/*.txt")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, path := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			cases, layout := parseScript(t, path)
			s := &scriptState{t: t, dir: t.TempDir()}
			defer s.close()
			var rewritten []string
			ci := 0
			for _, l := range layout {
				if l != "\x00" {
					rewritten = append(rewritten, l)
					continue
				}
				c := cases[ci]
				ci++
				got := strings.TrimRight(s.run(c), "\n")
				if *rewrite {
					rewritten = append(rewritten, cmdLine(path, c.line), "----")
					if got != "" {
						rewritten = append(rewritten, got)
					}
					continue
				}
				if got != c.expected {
					t.Errorf("%s:%d: %s\ngot:\n%s\nwant:\n%s", path, c.line, c.cmd, got, c.expected)
				}
			}
			if *rewrite {
				if err := os.WriteFile(path, []byte(strings.Join(rewritten, "\n")+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// cmdLine returns the original command line of a case, for -rewrite.
func cmdLine(path string, line int) string {
	f, err := os.Open(path)
	if err != nil {
		panic(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		if n == line {
			return sc.Text()
		}
	}
	panic("line not found")
}

type scriptState struct {
	t       *testing.T
	dir     string
	store   *objstore.Memory
	inner   *countingBucket
	c       *CachingBucket
	opts    CacheOptions
	objects map[string][]byte
}

func (s *scriptState) close() {
	if s.c != nil {
		s.c.Close()
	}
}

func (s *scriptState) int(c scriptCase, name string, def int64) int64 {
	v, ok := c.args[name]
	if !ok {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		s.t.Fatalf("line %d: %s=%q: %v", c.line, name, v, err)
	}
	return n
}

func (s *scriptState) str(c scriptCase, name string) string {
	v, ok := c.args[name]
	if !ok {
		s.t.Fatalf("line %d: %s needs %s=", c.line, c.cmd, name)
	}
	return v
}

func (s *scriptState) open() {
	c, err := NewCachingBucket(s.inner, s.opts)
	if err != nil {
		s.t.Fatalf("new caching bucket: %v", err)
	}
	s.c = c
}

func (s *scriptState) run(c scriptCase) string {
	if s.c == nil && c.cmd != "new" {
		s.t.Fatalf("line %d: %s before new", c.line, c.cmd)
	}
	switch c.cmd {
	case "new":
		// new chunk=N memory=N [readahead=N] [disk=N] [gets=N] [inflight=N] [parallel=N]
		s.close()
		s.store = objstore.NewMemory()
		s.inner = newCounting(s.store)
		s.objects = map[string][]byte{}
		s.opts = CacheOptions{
			ChunkBytes:        s.int(c, "chunk", 10),
			MemoryBytes:       s.int(c, "memory", 100),
			ReadAheadChunks:   int(s.int(c, "readahead", -1)),
			MaxConcurrentGets: int(s.int(c, "gets", 16)),
			MaxInFlightBytes:  s.int(c, "inflight", 0),
			FetchParallelism:  int(s.int(c, "parallel", 0)),
			// Off unless asked for: the scripts show the range each run
			// asks for, which a parked GET extends to the object's end.
			ParkedGets: int(s.int(c, "parked", -1)),
			MaxWait:    10 * time.Second,
			Registerer: prometheus.NewRegistry(),
		}
		if d := s.int(c, "disk", 0); d > 0 {
			s.opts.CacheDir = filepath.Join(s.dir, "disk")
			s.opts.DiskBytes = d
		}
		s.open()
		return ""

	case "put":
		// put key=K size=N
		key := s.str(c, "key")
		s.objects[key] = putObject(s.t, s.store, key, s.int(c, "size", 0))
		return ""

	case "get":
		// get key=K off=N [len=N]: reads, checks the bytes, and reports
		// the chunk lookups and the GETs it caused (read-ahead included).
		key := s.str(c, "key")
		off, length := s.int(c, "off", 0), s.int(c, "len", -1)
		before := s.counters()
		rc, err := s.c.GetRange(context.Background(), key, off, length)
		if err != nil {
			waitIdle(s.t, s.c)
			return "error: " + err.Error()
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			s.t.Fatal(err)
		}
		waitIdle(s.t, s.c)
		var b strings.Builder
		if want := expectRange(s.objects[key], off, length); !bytes.Equal(got, want) {
			fmt.Fprintf(&b, "CONTENT MISMATCH: got %d bytes, want %d\n", len(got), len(want))
		} else {
			fmt.Fprintf(&b, "read %d bytes\n", len(got))
		}
		d := s.counters().sub(before)
		fmt.Fprintf(&b, "memory: hits=%v misses=%v\n", d.memHits, d.memMisses)
		if s.c.disk != nil {
			fmt.Fprintf(&b, "disk: hits=%v misses=%v\n", d.diskHits, d.diskMisses)
		}
		b.WriteString("store:" + s.fetched())
		return b.String()

	case "concurrent":
		// concurrent n=N key=K off=N len=N: n readers of one cold range
		// while the store holds every GET until all have joined.
		n := int(s.int(c, "n", 2))
		key := s.str(c, "key")
		off, length := s.int(c, "off", 0), s.int(c, "len", -1)
		var joined atomic.Int64
		s.c.testHook = func(chunkKey) { joined.Add(1) }
		defer func() { s.c.testHook = nil }()
		s.inner.holdGets()
		var wg sync.WaitGroup
		var ok atomic.Int64
		want := expectRange(s.objects[key], off, length)
		for range n {
			wg.Go(func() {
				rc, err := s.c.GetRange(context.Background(), key, off, length)
				if err != nil {
					return
				}
				defer rc.Close()
				if got, err := io.ReadAll(rc); err == nil && bytes.Equal(got, want) {
					ok.Add(1)
				}
			})
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
	wait:
		for joined.Load() < int64(n) {
			select {
			case <-done: // all served without a miss
				break wait
			case <-time.After(100 * time.Microsecond):
			}
		}
		s.inner.release()
		<-done
		waitIdle(s.t, s.c)
		return fmt.Sprintf("readers=%d ok=%d\nstore:%s", n, ok.Load(), s.fetched())

	case "lru":
		// lru [tier=memory|disk]: chunks from least to most recently used.
		var names []string
		if c.args["tier"] == "disk" {
			waitIdle(s.t, s.c)
			rev := s.diskNames()
			for _, f := range s.c.disk.names() {
				names = append(names, rev[f])
			}
		} else {
			for _, k := range s.c.mem.keys() {
				names = append(names, k.String())
			}
		}
		return strings.Join(names, " ")

	case "bytes":
		var disk int64
		if s.c.disk != nil {
			disk = s.c.disk.size()
		}
		return fmt.Sprintf("memory=%d disk=%d", s.c.mem.size(), disk)

	case "metrics":
		m := s.c.m
		return fmt.Sprintf("evictions: memory=%v disk=%v\nreadahead: useful=%v wasted=%v\ncorrupt=%v\ngauge bytes: memory=%v disk=%v",
			testutil.ToFloat64(m.evictions.WithLabelValues(TierMemory)),
			testutil.ToFloat64(m.evictions.WithLabelValues(TierDisk)),
			testutil.ToFloat64(m.readAhead.WithLabelValues(ReadAheadUseful)),
			testutil.ToFloat64(m.readAhead.WithLabelValues(ReadAheadWasted)),
			testutil.ToFloat64(m.corrupt),
			testutil.ToFloat64(m.bytes.WithLabelValues(TierMemory)),
			testutil.ToFloat64(m.bytes.WithLabelValues(TierDisk)))

	case "corrupt":
		// corrupt key=K chunk=I [how=flip|truncate]: damage a disk chunk file.
		k := s.key(c)
		path := filepath.Join(s.opts.CacheDir, s.c.disk.fileName(k))
		data, err := os.ReadFile(path)
		if err != nil {
			return "error: " + err.Error()
		}
		if c.args["how"] == "truncate" {
			data = data[:len(data)/2]
		} else {
			data[0] ^= 0xff
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			s.t.Fatal(err)
		}
		return ""

	case "restart":
		// restart: close the cache and open a new one on the same options
		// (the memory tier is lost, the disk tier reloaded).
		waitIdle(s.t, s.c)
		s.c.Close()
		s.opts.Registerer = prometheus.NewRegistry()
		s.open()
		return ""
	}
	s.t.Fatalf("line %d: unknown command %q", c.line, c.cmd)
	return ""
}

func (s *scriptState) key(c scriptCase) chunkKey {
	key := s.str(c, "key")
	a, err := s.store.Attributes(context.Background(), key)
	if err != nil {
		s.t.Fatal(err)
	}
	return chunkKey{key, objectVersion(a), s.int(c, "chunk", 0)}
}

// diskNames maps chunk file names back to object#index.
func (s *scriptState) diskNames() map[string]string {
	rev := map[string]string{}
	for key, data := range s.objects {
		a, err := s.store.Attributes(context.Background(), key)
		if err != nil {
			s.t.Fatal(err)
		}
		for i := int64(0); i*s.opts.ChunkBytes < int64(len(data)); i++ {
			k := chunkKey{key, objectVersion(a), i}
			rev[s.c.disk.fileName(k)] = k.String()
		}
	}
	return rev
}

// fetched lists the store GETs since the last call as object#chunk (object#first-last for one GET of a run of chunks).
func (s *scriptState) fetched() string {
	var b strings.Builder
	for _, r := range s.inner.takeRanges() {
		fmt.Fprintf(&b, " %s#%d", r.key, r.off/s.opts.ChunkBytes)
		if last := (r.off + r.size - 1) / s.opts.ChunkBytes; r.size > 0 && last > r.off/s.opts.ChunkBytes {
			fmt.Fprintf(&b, "-%d", last) // one GET for a run of chunks
		}
		if r.off%s.opts.ChunkBytes != 0 {
			fmt.Fprintf(&b, "(unaligned %d)", r.off)
		}
	}
	if b.Len() == 0 {
		return " none"
	}
	return b.String()
}

type scriptCounters struct{ memHits, memMisses, diskHits, diskMisses float64 }

func (s *scriptState) counters() scriptCounters {
	m := s.c.m
	return scriptCounters{
		testutil.ToFloat64(m.hits.WithLabelValues(TierMemory)),
		testutil.ToFloat64(m.misses.WithLabelValues(TierMemory)),
		testutil.ToFloat64(m.hits.WithLabelValues(TierDisk)),
		testutil.ToFloat64(m.misses.WithLabelValues(TierDisk)),
	}
}

func (a scriptCounters) sub(b scriptCounters) scriptCounters {
	return scriptCounters{a.memHits - b.memHits, a.memMisses - b.memMisses, a.diskHits - b.diskHits, a.diskMisses - b.diskMisses}
}
