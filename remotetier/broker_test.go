package remotetier

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tiered/tiered/internal/testkit/brokerdir"
	"github.com/tiered/tiered/internal/testkit/remotekit"
	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/checkpoint"
	"github.com/tiered/tiered/localtier/vfs"
	"github.com/tiered/tiered/remotetier/objstore"
	"github.com/tiered/tiered/remotetier/remotelog"
)

const (
	kraftFixture    = "../testdata/fixtures/kafka-tester/e856b9acfbc9c4aa601502057e350051d1304c9f/kraft-combined-logs"
	spooldirFixture = "../testdata/fixtures/kafka-connect-spooldir-fork/369b2776d6427f369ffecba1a5bdfcedbc5763c8/kafka-data"
)

// readOnlyFS fails the test on any call that could change the filesystem:
// the sidecar must never write into a broker's log dir.
type readOnlyFS struct {
	vfs.FS
	t      testing.TB
	writes atomic.Int64
}

func (f *readOnlyFS) deny(op, name string) error {
	f.writes.Add(1)
	f.t.Errorf("write to the broker's log dir: %s %s", op, name)
	return fmt.Errorf("%s %s: read-only", op, name)
}

func (f *readOnlyFS) Create(name string) (vfs.File, error) { return nil, f.deny("create", name) }
func (f *readOnlyFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	if flag&(os.O_WRONLY|os.O_RDWR|os.O_CREATE|os.O_TRUNC|os.O_APPEND) != 0 {
		return nil, f.deny("open for writing", name)
	}
	return f.FS.OpenFile(name, flag, perm)
}
func (f *readOnlyFS) Remove(name string) error               { return f.deny("remove", name) }
func (f *readOnlyFS) RemoveAll(name string) error            { return f.deny("remove all", name) }
func (f *readOnlyFS) Rename(o, n string) error               { return f.deny("rename", o) }
func (f *readOnlyFS) MkdirAll(d string, _ os.FileMode) error { return f.deny("mkdir", d) }
func (f *readOnlyFS) SyncDir(d string) error                 { return f.deny("sync dir", d) }
func (f *readOnlyFS) Lock(name string) (io.Closer, error)    { return nil, f.deny("lock", name) }

// upSnapshot maps every file under dir to its size, mode, mtime and hash.
func upSnapshot(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := e.Info()
		if err != nil {
			return err
		}
		v := fmt.Sprintf("%v %d %d", fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
		if !e.IsDir() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			v += fmt.Sprintf(" %x", sha256.Sum256(data))
		}
		out[p] = v
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// upRollBroker makes every partition's last segment rolled by adding an
// empty segment at its end, as a broker does when it rolls; it returns the
// partitions' directories.
func upRollBroker(t testing.TB, dir string) {
	t.Helper()
	view, err := localtier.OpenBrokerView(vfs.Default, dir)
	if err != nil {
		t.Fatal(err)
	}
	parts, err := view.Partitions()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range parts {
		segs, err := view.Segments(p.Topic, p.Partition)
		if err != nil {
			t.Fatal(err)
		}
		last := segs[len(segs)-1]
		if last.NextOffset == last.BaseOffset {
			continue
		}
		if err := os.WriteFile(localtier.SegmentPath(p.Dir, last.NextOffset, localtier.LogSuffix), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSidecarFixtures uploads copies of real broker log dirs (KRaft 3.7
// with indexes; Kafka 2.1 without index files, compacted topics, LZ4) below
// their checkpointed high watermarks through a filesystem that fails on any
// write, then reads every offset back through the manifest and compares it
// with the broker's own bytes.
func TestSidecarFixtures(t *testing.T) {
	ctx := context.Background()
	for _, fx := range []struct {
		name, dir string
		want      int // partitions expected in the remote tier
	}{{"kraft", kraftFixture, 1}, {"kafka-2.1", spooldirFixture, 18}} {
		t.Run(fx.name, func(t *testing.T) {
			dir := t.TempDir()
			brokerdir.CopyTree(t, fx.dir, dir)
			upRollBroker(t, dir)
			before := upSnapshot(t, dir)
			rofs := &readOnlyFS{FS: vfs.Default, t: t}
			view, err := localtier.OpenBrokerView(rofs, dir)
			if err != nil {
				t.Fatal(err)
			}
			mem := objstore.NewMemory()
			src := NewBrokerSource(view, rofs)
			u := upUploader(t, mem, src, Options{})
			rep, err := u.RunOnce(ctx)
			if err != nil {
				t.Fatal(err)
			}
			hws, err := view.HighWatermarks()
			if err != nil {
				t.Fatal(err)
			}
			committed := 0
			for _, pr := range rep.Partitions {
				if len(pr.Committed) == 0 {
					continue
				}
				committed++
				hw := hws[tp(pr.Topic, pr.Partition)]
				m := upLoad(t, mem, pr.Topic, pr.Partition)
				if err := m.Validate(); err != nil {
					t.Fatal(err)
				}
				segs := upAllSegments(t, mem, m)
				for _, s := range segs {
					want, err := os.ReadFile(localtier.SegmentPath(filepath.Join(dir, fmt.Sprintf("%s-%d", pr.Topic, pr.Partition)), s.BaseOffset, localtier.LogSuffix))
					if err != nil {
						t.Fatal(err)
					}
					if got := remotekit.Get(t, mem, s.Log.Key); !bytes.Equal(got, want) {
						t.Fatalf("%s-%d segment %d differs from the broker's file", pr.Topic, pr.Partition, s.BaseOffset)
					}
					if s.LastOffset >= hw {
						t.Fatalf("%s-%d: offset %d at or above the high watermark %d uploaded", pr.Topic, pr.Partition, s.LastOffset, hw)
					}
				}
				rl, err := remotelog.OpenRemoteLog(ctx, mem, "", pr.Topic, pr.Partition, remotelog.ReaderOptions{})
				if err != nil {
					t.Fatal(err)
				}
				for off := m.LogStartOffset; off < m.NextOffset(); off++ {
					res, err := rl.Read(ctx, off, 1)
					if err != nil {
						t.Fatalf("%s-%d remote read at %d: %v", pr.Topic, pr.Partition, off, err)
					}
					br, err := view.Read(pr.Topic, pr.Partition, off, 1, m.NextOffset())
					if err != nil {
						t.Fatalf("%s-%d broker read at %d: %v", pr.Topic, pr.Partition, off, err)
					}
					if !bytes.Equal(res.Data, br.Data) {
						t.Fatalf("%s-%d offset %d: remote batch differs from the broker's", pr.Topic, pr.Partition, off)
					}
				}
			}
			if committed != fx.want {
				t.Fatalf("%d partitions uploaded, want %d: %+v", committed, fx.want, rep)
			}
			if rofs.writes.Load() != 0 {
				t.Fatal("the sidecar wrote into the broker's log dir")
			}
			after := upSnapshot(t, dir)
			for p, v := range before {
				if after[p] != v {
					t.Fatalf("%s changed during the upload", p)
				}
			}
			if len(after) != len(before) {
				t.Fatal("files appeared in the broker's log dir")
			}
			// The KRaft metadata log has no high watermark checkpoint: left alone.
			if m := upLoad(t, mem, "__cluster_metadata", 0); m.Generation != 0 {
				t.Fatal("__cluster_metadata was uploaded")
			}
		})
	}
}

// hookSource runs hook on the first Read of every segment it opens.
type hookSource struct {
	Source
	hook func()
}

func (h hookSource) Open(ctx context.Context, p Partition, seg SegmentMeta) (SegmentReader, error) {
	r, err := h.Source.Open(ctx, p, seg)
	if err != nil {
		return nil, err
	}
	return &hookReader{SegmentReader: r, hook: h.hook}, nil
}

type hookReader struct {
	SegmentReader
	hook func()
	once sync.Once
}

func (h *hookReader) Read(p []byte) (int, error) {
	h.once.Do(h.hook)
	return h.SegmentReader.Read(p)
}

// TestSidecarSegmentGone: the broker deletes a segment (rename to .deleted,
// then remove, as Kafka's retention does) while it is being uploaded. While
// it is being checked, the upload is abandoned: counted, never committed,
// its objects deleted. Once checked, it is stored whole from the open file.
func TestSidecarSegmentGone(t *testing.T) {
	ctx := context.Background()
	for _, during := range []string{"check", "put"} {
		t.Run(during, func(t *testing.T) {
			dir := t.TempDir()
			brokerdir.CopyTree(t, kraftFixture, dir)
			upRollBroker(t, dir)
			path := filepath.Join(dir, "foo-0", "00000000000000000000.log")
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var removed atomic.Bool
			remove := func() {
				if removed.Swap(true) {
					return
				}
				if err := os.Rename(path, path+".deleted"); err != nil {
					t.Error(err)
				}
				if err := os.Remove(path + ".deleted"); err != nil {
					t.Error(err)
				}
			}
			view, err := localtier.OpenBrokerView(vfs.Default, dir)
			if err != nil {
				t.Fatal(err)
			}
			mem := objstore.NewMemory()
			var src Source = NewBrokerSource(view, nil)
			var bkt objstore.Bucket = mem
			if during == "check" {
				src = hookSource{src, remove}
			} else {
				bkt = objstore.WithFaults(mem, objstore.InjectorFunc(func(c objstore.Call) *objstore.Fault {
					if c.Op == objstore.OpPut && strings.HasSuffix(c.Key, ".log") {
						remove()
					}
					return nil
				}))
			}
			u := upUploader(t, bkt, src, Options{})
			rep, err := u.RunOnce(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if during == "check" {
				if rep.SegmentsGone != 1 || rep.UploadedSegments != 0 || testutil.ToFloat64(u.metrics.gone) != 1 {
					t.Fatalf("report %+v", rep)
				}
				if m := upLoad(t, mem, "foo", 0); m.Generation != 0 {
					t.Fatal("a deleted segment was committed")
				}
				if keys := upKeys(t, mem); len(keys) != 0 {
					t.Fatalf("objects of the abandoned upload left: %v", keys)
				}
				if _, err := u.RunOnce(ctx); err != nil {
					t.Fatal(err)
				}
				return
			}
			if rep.UploadedSegments != 1 {
				t.Fatalf("report %+v", rep)
			}
			segs := upAllSegments(t, mem, upLoad(t, mem, "foo", 0))
			if got := remotekit.Get(t, mem, segs[0].Log.Key); !bytes.Equal(got, want) {
				t.Fatal("the segment deleted during its upload was stored incomplete or different")
			}
		})
	}
}

func TestBrokerSourceLeads(t *testing.T) {
	dir := t.TempDir()
	brokerdir.CopyTree(t, spooldirFixture, dir)
	upRollBroker(t, dir)
	view, err := localtier.OpenBrokerView(vfs.Default, dir)
	if err != nil {
		t.Fatal(err)
	}
	src := NewBrokerSource(view, nil)
	src.Leads = func(context.Context) (map[checkpoint.TopicPartition]bool, error) {
		return map[checkpoint.TopicPartition]bool{tp("test10", 0): true}, nil
	}
	parts, err := src.Partitions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) != 1 || parts[0].Topic != "test10" || len(parts[0].Segments) != 1 {
		t.Fatalf("partitions %+v", parts)
	}
	src.Leads = func(context.Context) (map[checkpoint.TopicPartition]bool, error) { return nil, errors.New("no broker") }
	if _, err := src.Partitions(context.Background()); err == nil {
		t.Fatal("a failing leader lookup was ignored")
	}
}

// TestBrokerSourceOnePartitionUnlistable: a partition whose listing fails
// (here a malformed leader-epoch-checkpoint) is reported and left out of
// the pass; every other partition still uploads. Once it can be listed
// again, the next pass uploads it too.
func TestBrokerSourceOnePartitionUnlistable(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	brokerdir.CopyTree(t, spooldirFixture, dir)
	upRollBroker(t, dir)
	bad := filepath.Join(dir, "test10-0", checkpoint.LeaderEpochFile)
	good, err := os.ReadFile(bad)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("0\n1\nnot an epoch\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	view, err := localtier.OpenBrokerView(vfs.Default, dir)
	if err != nil {
		t.Fatal(err)
	}
	mem := objstore.NewMemory()
	u := upUploader(t, mem, NewBrokerSource(view, nil), Options{})
	rep, err := u.RunOnce(ctx)
	var le *PartitionListError
	if !errors.As(err, &le) || le.Topic != "test10" || le.Partition != 0 {
		t.Fatalf("pass error %v: want test10-0's listing error", err)
	}
	committed := map[string]bool{}
	for _, pr := range rep.Partitions {
		if len(pr.Committed) > 0 {
			committed[fmt.Sprintf("%s-%d", pr.Topic, pr.Partition)] = true
		}
		if pr.Topic == "test10" && (pr.Error == "" || len(pr.Committed) != 0) {
			t.Fatalf("test10-0 report %+v: want its listing error, nothing committed", pr)
		}
	}
	if len(committed) != 17 || rep.Errors != 1 {
		t.Fatalf("%d partitions uploaded, %d errors; want the other 17 uploaded, 1 error: %v", len(committed), rep.Errors, committed)
	}
	if m := upLoad(t, mem, "test10", 0); m.Generation != 0 {
		t.Fatal("test10-0 was uploaded without its leader epochs")
	}
	if err := os.WriteFile(bad, good, 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err = u.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m := upLoad(t, mem, "test10", 0); m.Generation == 0 || rep.Errors != 0 {
		t.Fatalf("test10-0 not uploaded once listable (errors %d)", rep.Errors)
	}
}
