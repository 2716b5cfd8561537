package remotetier

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tiered/tiered/internal/testkit/remotekit"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier/objstore"
)

// verifyFixture is a filesystem bucket holding a partition with sealed
// sub-manifests and transaction indexes, so mtimes can be set by hand.
type verifyFixture struct {
	dir string
	b   objstore.Bucket
	r   *remotekit.Remote
}

func newVerifyFixture(t *testing.T, files []remotekit.SegFiles) *verifyFixture {
	t.Helper()
	dir := t.TempDir()
	b, err := objstore.NewFilesystem(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	r := remotekit.NewRemote(t, b, "", 0, remotekit.SmallPolicy)
	r.Commit(files[:3]...)
	r.Commit(files[3:]...)
	return &verifyFixture{dir: dir, b: b, r: r}
}

func (f *verifyFixture) age(t *testing.T, key string, d time.Duration) {
	t.Helper()
	at := time.Now().Add(-d)
	if err := os.Chtimes(filepath.Join(f.dir, key), at, at); err != nil {
		t.Fatal(err)
	}
}

// orphanKey is a data key of an attempt no manifest references.
func orphanKey(t *testing.T, base int64) string {
	t.Helper()
	keys, err := manifest.DataKeys("", remotekit.TestTopic, remotekit.TestPartition, base, manifest.NewAttemptID())
	if err != nil {
		t.Fatal(err)
	}
	return keys.Log
}

func problemKinds(rep *VerifyReport) []string {
	var out []string
	for _, p := range rep.Problems {
		out = append(out, string(p.Kind)+" "+filepath.Ext(p.Key))
	}
	slices.Sort(out)
	return out
}

func TestVerifyBucket(t *testing.T) {
	ctx := context.Background()
	local := remotekit.WriteLocal(t, t.TempDir(), 8, 5, 20, true)
	files := local.Files(t)

	tests := []struct {
		name      string
		files     func(fs []remotekit.SegFiles) // changes the segments before they are committed
		damage    func(t *testing.T, f *verifyFixture)
		ok        bool
		problems  []string // kind and extension of each problem's key
		orphans   int
		pastGrace int
		foreign   int
	}{
		{name: "clean", ok: true},
		{name: "bad_checksum", damage: func(t *testing.T, f *verifyFixture) {
			seg := f.r.Segs[3]
			data := slices.Clone(f.r.Logs[3])
			data[len(data)/2] ^= 0x01
			remotekit.Put(t, f.b, seg.Log.Key, data)
		}, problems: []string{"checksum_mismatch .log", "log_mismatch .log"}},
		// The manifest's checksums match in the cases below: the bytes
		// were uploaded so (a bad writer, a bit flipped before upload),
		// and only walking the batches finds them wrong.
		{name: "flipped_base_offset_uploaded", files: func(fs []remotekit.SegFiles) {
			log := slices.Clone(fs[3].Log)
			b := record.Batch(log)
			b.SetBaseOffset(b.BaseOffset() ^ 0x02) // the first batch
			fs[3].Log = log
		}, problems: []string{"log_mismatch .log"}},
		{name: "flipped_base_offset_mid_segment", files: func(fs []remotekit.SegFiles) {
			log := slices.Clone(fs[2].Log)
			b := record.Batch(log)
			mid := record.Batch(log[int(b.Length())+record.LogOverhead:])
			mid.SetBaseOffset(mid.BaseOffset() | 1<<40)
			fs[2].Log = log
		}, problems: []string{"log_mismatch .log"}},
		{name: "claimed_last_offset", files: func(fs []remotekit.SegFiles) {
			fs[len(fs)-1].Last = fs[len(fs)-1].Base + manifest.MaxSegmentSpan
		}, problems: []string{"log_mismatch .log"}},
		{name: "absurd_last_offset", damage: func(t *testing.T, f *verifyFixture) {
			// 2^63-2 while the bytes end much lower: refused on decode.
			last := f.r.Segs[len(f.r.Segs)-1].LastOffset
			root := remotekit.Get(t, f.b, f.r.M.Key())
			bad := bytes.Replace(root, []byte(fmt.Sprintf(`"last_offset":%d`, last)), []byte(`"last_offset":9223372036854775806`), 1)
			if bytes.Equal(bad, root) {
				t.Fatal("the root does not hold the final segment's last offset")
			}
			remotekit.Put(t, f.b, f.r.M.Key(), bad)
		}, problems: []string{"corrupt_manifest .json"}},
		{name: "record_count", damage: func(t *testing.T, f *verifyFixture) {
			m, err := manifest.DecodeRoot(f.r.M.Key(), remotekit.Get(t, f.b, f.r.M.Key()))
			if err != nil || len(m.Segments) == 0 {
				t.Fatalf("root: %v", err)
			}
			m.Segments[len(m.Segments)-1].RecordCount--
			root, err := manifest.EncodeRoot(m)
			if err != nil {
				t.Fatal(err)
			}
			remotekit.Put(t, f.b, m.Key(), root)
		}, problems: []string{"log_mismatch .log"}},
		{name: "missing_object", damage: func(t *testing.T, f *verifyFixture) {
			if err := f.b.Delete(ctx, f.r.Segs[0].TimeIndex.Key); err != nil {
				t.Fatal(err)
			}
		}, problems: []string{"missing .timeindex"}},
		{name: "wrong_size", damage: func(t *testing.T, f *verifyFixture) {
			seg := f.r.Segs[4]
			remotekit.Put(t, f.b, seg.Index.Key, remotekit.Get(t, f.b, seg.Index.Key)[:seg.Index.Size-8])
		}, problems: []string{"size_mismatch .index"}},
		{name: "corrupt_sub_manifest", damage: func(t *testing.T, f *verifyFixture) {
			ref := f.r.M.Sealed[0]
			data := remotekit.Get(t, f.b, ref.Key)
			data[len(data)-3] = ' '
			remotekit.Put(t, f.b, ref.Key, data)
		}, problems: []string{"corrupt_manifest .json"}},
		{name: "missing_sub_manifest", damage: func(t *testing.T, f *verifyFixture) {
			if err := f.b.Delete(ctx, f.r.M.Sealed[0].Key); err != nil {
				t.Fatal(err)
			}
		}, problems: []string{"missing .json"}},
		{name: "corrupt_root", damage: func(t *testing.T, f *verifyFixture) {
			remotekit.Put(t, f.b, f.r.M.Key(), []byte("{"))
		}, problems: []string{"corrupt_manifest .json"}},
		{name: "young_orphan", damage: func(t *testing.T, f *verifyFixture) {
			remotekit.Put(t, f.b, orphanKey(t, f.r.Segs[1].BaseOffset), []byte("in flight"))
		}, ok: true, orphans: 1},
		{name: "old_orphan", damage: func(t *testing.T, f *verifyFixture) {
			k := orphanKey(t, f.r.Segs[1].BaseOffset)
			remotekit.Put(t, f.b, k, []byte("lost race"))
			f.age(t, k, 2*time.Hour)
		}, orphans: 1, pastGrace: 1},
		{name: "old_orphan_sub_manifest", damage: func(t *testing.T, f *verifyFixture) {
			// A rewritten sub-manifest whose deletion did not happen.
			ref := f.r.M.Sealed[0]
			k := ref.Key[:len(ref.Key)-len("0123456789abcdef.json")] + "0123456789abcdef.json"
			remotekit.Put(t, f.b, k, []byte("{}"))
			f.age(t, k, 3*time.Hour)
		}, orphans: 1, pastGrace: 1},
		{name: "foreign_key", damage: func(t *testing.T, f *verifyFixture) {
			remotekit.Put(t, f.b, "README.txt", []byte("not ours"))
			remotekit.Put(t, f.b, "data/zz/notes.txt", []byte("not ours"))
		}, ok: true, foreign: 2},
		{name: "partition_without_manifest", damage: func(t *testing.T, f *verifyFixture) {
			keys, _ := manifest.DataKeys("", "other", 0, 0, manifest.NewAttemptID())
			remotekit.Put(t, f.b, keys.Log, []byte("crashed before the first commit"))
			remotekit.Put(t, f.b, keys.Index, []byte{})
			f.age(t, keys.Log, 2*time.Hour)
		}, orphans: 2, pastGrace: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := slices.Clone(files)
			if tt.files != nil {
				tt.files(fs)
			}
			f := newVerifyFixture(t, fs)
			if tt.damage != nil {
				tt.damage(t, f)
			}
			rep, err := VerifyBucket(ctx, f.b, DefaultVerifyOptions())
			if err != nil {
				t.Fatal(err)
			}
			if rep.OK() != tt.ok {
				t.Errorf("OK %v, want %v (problems %v, orphans %+v)", rep.OK(), tt.ok, rep.Problems, rep.Orphans)
			}
			if got := problemKinds(rep); !slices.Equal(got, tt.problems) {
				t.Errorf("problems %v, want %v", got, tt.problems)
			}
			past := 0
			for _, o := range rep.Orphans {
				if o.PastGrace {
					past++
					if o.Age < time.Hour {
						t.Errorf("orphan %s of age %v is past the grace period", o.Key, o.Age)
					}
				}
			}
			if len(rep.Orphans) != tt.orphans || past != tt.pastGrace || rep.ForeignCount != tt.foreign {
				t.Errorf("%d orphans (%d past grace), %d foreign; want %d (%d), %d", len(rep.Orphans), past, rep.ForeignCount, tt.orphans, tt.pastGrace, tt.foreign)
			}
			if tt.name == "clean" {
				var objs int
				var bytes int64
				for _, s := range f.r.Segs {
					for _, o := range s.Objects() {
						objs++
						bytes += o.Size
					}
				}
				if rep.Objects != objs || rep.Bytes != bytes {
					t.Errorf("checked %d objects, %d bytes; want %d, %d", rep.Objects, rep.Bytes, objs, bytes)
				}
				if len(rep.Partitions) != 1 || rep.Partitions[0].Segments != len(f.r.Segs) || rep.Partitions[0].SubCount != len(f.r.M.Sealed) {
					t.Errorf("partitions %+v", rep.Partitions)
				}
			}
		})
	}
}

// TestVerifyScope: only the bucket's prefix is checked.
func TestVerifyScope(t *testing.T) {
	ctx := context.Background()
	local := remotekit.WriteLocal(t, t.TempDir(), 9, 2, 10, false)
	files := local.Files(t)
	raw := objstore.NewMemory()
	for _, prefix := range []string{"team-a", "team-b"} {
		pb, err := objstore.WithPrefix(raw, prefix)
		if err != nil {
			t.Fatal(err)
		}
		r := remotekit.NewRemote(t, pb, "", 0, manifest.DefaultPolicy())
		r.Commit(files...)
		if prefix == "team-b" {
			remotekit.Put(t, pb, r.Segs[0].Log.Key, []byte("broken"))
		}
	}
	a, _ := objstore.WithPrefix(raw, "team-a")
	rep, err := VerifyBucket(ctx, a, DefaultVerifyOptions())
	if err != nil || !rep.OK() || len(rep.Partitions) != 1 {
		t.Fatalf("team-a: %v, %+v", err, rep)
	}
	b, _ := objstore.WithPrefix(raw, "team-b")
	if rep, err := VerifyBucket(ctx, b, DefaultVerifyOptions()); err != nil || rep.OK() {
		t.Fatalf("team-b: %v, ok %v", err, rep.OK())
	}
	// The whole bucket sees both partitions, each under its prefix.
	rep, err = VerifyBucket(ctx, raw, DefaultVerifyOptions())
	if err != nil || rep.OK() || len(rep.Partitions) != 2 || rep.Partitions[0].Prefix != "team-a" {
		t.Fatalf("whole bucket: %v, %+v", err, rep.Partitions)
	}
	if len(rep.Problems) != 1 || !strings.HasPrefix(rep.Problems[0].Key, "team-b/") {
		t.Fatalf("problems %v", rep.Problems)
	}
}

// TestVerifyStoreError: a failing store is an error, not a report.
func TestVerifyStoreError(t *testing.T) {
	local := remotekit.WriteLocal(t, t.TempDir(), 10, 2, 10, false)
	mem := objstore.NewMemory()
	r := remotekit.NewRemote(t, mem, "", 0, manifest.DefaultPolicy())
	r.Commit(local.Files(t)...)
	faulty := objstore.WithFaults(mem, objstore.FailMatching(func(c objstore.Call) bool {
		return c.Op == objstore.OpGet && strings.HasSuffix(c.Key, ".log")
	}, nil))
	if _, err := VerifyBucket(context.Background(), faulty, DefaultVerifyOptions()); err == nil || !strings.Contains(err.Error(), objstore.ErrInjected.Error()) {
		t.Fatalf("got %v", err)
	}
}
