package localtier

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/tiered/tiered/localtier/vfs"
)

func TestTopicIDStringRoundTrip(t *testing.T) {
	for _, s := range []string{"v9meXjI1RVKB-NSvF0GXDA", "fZi4qEpCTsik-rzkyV0Ypg", "AAAAAAAAAAAAAAAAAAAAAQ", "AAAAAAAAAAAAAAAAAAAAAA"} {
		id, err := ParseTopicID(s)
		if err != nil {
			t.Fatalf("ParseTopicID(%q): %v", s, err)
		}
		if id.String() != s {
			t.Fatalf("round trip %q -> %q", s, id.String())
		}
	}
	if id, _ := ParseTopicID("AAAAAAAAAAAAAAAAAAAAAQ"); id[15] != 1 || id.IsZero() {
		t.Fatalf("metadata topic id = %v", id)
	}
	for _, bad := range []string{"", "short", "v9meXjI1RVKB+NSvF0GXDA", "v9meXjI1RVKB-NSvF0GXD=", "v9meXjI1RVKB-NSvF0GXDAx"} {
		if _, err := ParseTopicID(bad); err == nil {
			t.Errorf("ParseTopicID(%q) = nil error", bad)
		}
	}
}

func TestReadPartitionMetadata(t *testing.T) {
	fsys := vfs.NewMem()
	cases := []struct {
		name, body string
		want       string // topic id; "" = zero; "ERR" = error
		line       int
	}{
		{"broker", "version: 0\ntopic_id: v9meXjI1RVKB-NSvF0GXDA", "v9meXjI1RVKB-NSvF0GXDA", 0},
		{"trailing newline", "version: 0\ntopic_id: fZi4qEpCTsik-rzkyV0Ypg\n", "fZi4qEpCTsik-rzkyV0Ypg", 0},
		{"version 1", "version: 1\ntopic_id: fZi4qEpCTsik-rzkyV0Ypg", "ERR", 1},
		{"no id", "version: 0\n", "ERR", 0},
		{"bad id", "version: 0\ntopic_id: nope", "ERR", 2},
		{"wrong key", "version: 0\ntopic: fZi4qEpCTsik-rzkyV0Ypg", "ERR", 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := "/p/" + c.name
			if err := fsys.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := vfs.WriteFileAtomic(fsys, filepath.Join(dir, PartitionMetadataFile), []byte(c.body)); err != nil {
				t.Fatal(err)
			}
			id, err := ReadPartitionMetadata(fsys, dir)
			if c.want == "ERR" {
				var pe *PartitionMetadataError
				if !errors.As(err, &pe) || pe.Line != c.line {
					t.Fatalf("err = %v, want *PartitionMetadataError at line %d", err, c.line)
				}
				return
			}
			if err != nil || id.String() != c.want {
				t.Fatalf("= %v, %v; want %s", id, err, c.want)
			}
		})
	}
	if id, err := ReadPartitionMetadata(fsys, "/absent"); err != nil || !id.IsZero() {
		t.Fatalf("missing file = %v, %v; want zero, nil", id, err)
	}
	if err := fsys.MkdirAll("/w", 0o755); err != nil {
		t.Fatal(err)
	}
	want, _ := ParseTopicID("v9meXjI1RVKB-NSvF0GXDA")
	if err := WritePartitionMetadata(fsys, "/w", want); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadPartitionMetadata(fsys, "/w"); err != nil || got != want {
		t.Fatalf("written and read back = %v, %v", got, err)
	}
}

func FuzzParsePartitionMetadata(f *testing.F) {
	f.Add([]byte("version: 0\ntopic_id: v9meXjI1RVKB-NSvF0GXDA"))
	f.Fuzz(func(t *testing.T, b []byte) {
		id, err := ParsePartitionMetadata("p", b)
		if err == nil {
			again, err := ParsePartitionMetadata("p", []byte("version: 0\ntopic_id: "+id.String()))
			if err != nil || again != id {
				t.Fatalf("re-parse of %v: %v %v", id, again, err)
			}
		}
	})
}

func TestBrokerViewTopicIDFromFixtures(t *testing.T) {
	root := filepath.Join(fixtureRoot, "kafka-tester")
	for _, c := range []struct{ commit, id string }{
		{"510714e73872b0137b684b90ffd0586c3adcc23b", "v9meXjI1RVKB-NSvF0GXDA"},
		{"e856b9acfbc9c4aa601502057e350051d1304c9f", "fZi4qEpCTsik-rzkyV0Ypg"},
	} {
		v, err := OpenBrokerView(vfs.Default, filepath.Join(root, c.commit, "kraft-combined-logs"))
		if err != nil {
			t.Fatalf("fixture: %v", err)
		}
		id, err := v.TopicID("foo", 0)
		if err != nil || id.String() != c.id {
			t.Fatalf("%s foo-0 = %v, %v; want %s", c.commit, id, err, c.id)
		}
		if _, err := v.TopicID("absent", 0); err == nil {
			t.Fatal("absent partition: nil error")
		}
	}
}

// TestNewTopicID: random topic IDs are Kafka's: version-4 UUIDs whose
// string form parses back, never the zero UUID, the metadata topic's or
// one starting with '-'; no two alike.
func TestNewTopicID(t *testing.T) {
	seen := map[TopicID]bool{}
	for range 2000 {
		id := NewTopicID()
		s := id.String()
		back, err := ParseTopicID(s)
		if err != nil || back != id || id.IsZero() || s[0] == '-' || s == "AAAAAAAAAAAAAAAAAAAAAQ" || id[6]>>4 != 4 || id[8]>>6 != 2 {
			t.Fatalf("topic id %s (%x): parsed %v, %v", s, id[:], back, err)
		}
		if seen[id] {
			t.Fatalf("topic id %s drawn twice", s)
		}
		seen[id] = true
	}
}
