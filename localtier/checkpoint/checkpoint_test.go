package checkpoint

import (
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tiered/tiered/internal/testkit/reliability"
	"github.com/tiered/tiered/localtier/vfs"
)

const fixtures = "../../testdata/fixtures"

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestFixtures(t *testing.T) {
	offsetFiles := []string{ReplicationOffsetFile, RecoveryPointOffsetFile, LogStartOffsetFile, CleanerOffsetFile}
	var paths []string
	for _, name := range append(offsetFiles, LeaderEpochFile) {
		for _, pattern := range []string{"*/*/*/" + name, "*/*/*/*/" + name} {
			m, err := filepath.Glob(filepath.Join(fixtures, pattern))
			must(t, err)
			paths = append(paths, m...)
		}
	}
	if len(paths) < 30 {
		t.Fatalf("found only %d checkpoint fixtures", len(paths))
	}
	for _, p := range paths {
		t.Run(strings.TrimPrefix(p, fixtures+"/"), func(t *testing.T) {
			raw, err := os.ReadFile(p)
			must(t, err)
			if filepath.Base(p) == LeaderEpochFile {
				got, err := ReadLeaderEpochs(vfs.Default, p)
				must(t, err)
				if string(FormatLeaderEpochs(got)) != string(raw) {
					t.Fatalf("re-formatted %q, file %q", FormatLeaderEpochs(got), raw)
				}
				return
			}
			got, err := ReadOffsets(vfs.Default, p)
			must(t, err)
			if len(raw) == 0 {
				if len(got) != 0 {
					t.Fatalf("empty file read as %v", got)
				}
				return
			}
			// Same content, in our sorted order.
			f, err := FormatOffsets(got)
			must(t, err)
			sortedLines := func(s string) []string { l := strings.Split(s, "\n"); slices.Sort(l); return l }
			if !slices.Equal(sortedLines(string(f)), sortedLines(string(raw))) {
				t.Fatalf("re-formatted\n%s\nfile\n%s", f, raw)
			}
		})
	}
}

func TestFixtureValues(t *testing.T) {
	dir := filepath.Join(fixtures, "kafka-tester/e856b9acfbc9c4aa601502057e350051d1304c9f/kraft-combined-logs")
	off, err := ReadOffsets(vfs.Default, filepath.Join(dir, RecoveryPointOffsetFile))
	must(t, err)
	if want := map[TopicPartition]int64{{"foo", 0}: 3}; !maps.Equal(off, want) {
		t.Fatalf("recovery point = %v, want %v", off, want)
	}
	ep, err := ReadLeaderEpochs(vfs.Default, filepath.Join(dir, "__cluster_metadata-0", LeaderEpochFile))
	must(t, err)
	if want := []EpochEntry{{1, 0}, {2, 81}}; !slices.Equal(ep, want) {
		t.Fatalf("leader epochs = %v, want %v", ep, want)
	}
	big, err := ReadOffsets(vfs.Default, filepath.Join(fixtures, "kafka-connect-spooldir-fork/369b2776d6427f369ffecba1a5bdfcedbc5763c8/kafka-data", ReplicationOffsetFile))
	must(t, err)
	if len(big) != 104 || big[TopicPartition{"_confluent-controlcenter-5-1-2-1-actual-group-consumption-rekey", 0}] != 14 {
		t.Fatalf("spooldir replication checkpoint: %d entries", len(big))
	}
}

func TestFormatBytes(t *testing.T) {
	b, err := FormatOffsets(map[TopicPartition]int64{
		{"foo", 10}: 7, {"bar", 1}: 0, {"foo", 2}: -1, {"__consumer_offsets", 49}: 1 << 40,
	})
	must(t, err)
	want := "0\n4\n__consumer_offsets 49 1099511627776\nbar 1 0\nfoo 2 -1\nfoo 10 7\n"
	if string(b) != want {
		t.Fatalf("FormatOffsets = %q, want %q", b, want)
	}
	if got := string(FormatLeaderEpochs([]EpochEntry{{0, 0}, {2, 3}})); got != "0\n2\n0 0\n2 3\n" {
		t.Fatalf("FormatLeaderEpochs = %q", got)
	}
	if got, _ := FormatOffsets(nil); string(got) != "0\n0\n" {
		t.Fatalf("empty FormatOffsets = %q", got)
	}
	for _, topic := range []string{"", "a b", "tab\there", "nl\n"} {
		if _, err := FormatOffsets(map[TopicPartition]int64{{topic, 0}: 1}); err == nil {
			t.Errorf("topic %q formatted", topic)
		}
	}
}

func forEachFS(t *testing.T, fn func(t *testing.T, fsys vfs.FS, dir string)) {
	t.Run("os", func(t *testing.T) { fn(t, vfs.Default, t.TempDir()) })
	t.Run("mem", func(t *testing.T) {
		m := vfs.NewMem()
		must(t, vfs.MkdirAllSync(m, "/data", 0o755))
		fn(t, m, "/data")
	})
}

func TestRoundTrip(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		path := filepath.Join(dir, ReplicationOffsetFile)
		got, err := ReadOffsets(fsys, path)
		must(t, err)
		if len(got) != 0 {
			t.Fatalf("missing file read as %v", got)
		}
		want := map[TopicPartition]int64{{"a", 0}: 5, {"a", 1}: 6, {"b.c_d-e", 2147483647}: 9223372036854775807}
		must(t, WriteOffsets(fsys, path, want))
		got, err = ReadOffsets(fsys, path)
		must(t, err)
		if !maps.Equal(got, want) {
			t.Fatalf("read %v, want %v", got, want)
		}
		if _, err := fsys.Stat(path + ".tmp"); err == nil {
			t.Fatal("temporary file left behind")
		}

		epath := filepath.Join(dir, LeaderEpochFile)
		eps := []EpochEntry{{0, 0}, {3, 100}, {7, 12345678901}}
		must(t, WriteLeaderEpochs(fsys, epath, eps))
		gotEps, err := ReadLeaderEpochs(fsys, epath)
		must(t, err)
		if !slices.Equal(gotEps, eps) {
			t.Fatalf("read %v, want %v", gotEps, eps)
		}
		must(t, WriteLeaderEpochs(fsys, epath, nil))
		gotEps, err = ReadLeaderEpochs(fsys, epath)
		must(t, err)
		if len(gotEps) != 0 {
			t.Fatalf("emptied file read as %v", gotEps)
		}
	})
}

func TestParseAccepts(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want map[TopicPartition]int64
	}{
		{"empty_file", "", map[TopicPartition]int64{}},
		{"version_only", "0\n", map[TopicPartition]int64{}},
		{"no_trailing_newline", "0\n1\nfoo 0 1", map[TopicPartition]int64{{"foo", 0}: 1}},
		{"crlf", "0\r\n1\r\nfoo 0 1\r\n", map[TopicPartition]int64{{"foo", 0}: 1}},
		{"tabs_and_trailing_space", "0\n1\nfoo\t0  1 \n", map[TopicPartition]int64{{"foo", 0}: 1}},
		{"duplicate_last_wins", "0\n2\nfoo 0 1\nfoo 0 2\n", map[TopicPartition]int64{{"foo", 0}: 2}},
		{"plus_sign", "+0\n1\nfoo +1 +2\n", map[TopicPartition]int64{{"foo", 1}: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseOffsets("f", []byte(tt.in))
			must(t, err)
			if !maps.Equal(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestParseMalformed(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		epochs   bool
		wantLine int
		wantText string
	}{
		{"bad_version", "x\n0\n", false, 1, "x"},
		{"wrong_version", "1\n0\n", false, 1, "1"},
		{"bad_count", "0\nmany\n", false, 2, "many"},
		{"negative_count", "0\n-1\n", false, 2, "-1"},
		{"count_overflow", "0\n99999999999\n", false, 2, "99999999999"},
		{"too_few", "0\n2\nfoo 0 1\n", false, 0, ""},
		{"too_many", "0\n0\nfoo 0 1\n", false, 0, ""},
		{"hostile_count", "0\n2147483647\nfoo 0 1\n", false, 0, ""},
		{"two_fields", "0\n1\nfoo 1\n", false, 3, "foo 1"},
		{"four_fields", "0\n1\nfoo 0 1 2\n", false, 3, "foo 0 1 2"},
		{"bad_partition", "0\n1\nfoo x 1\n", false, 3, "foo x 1"},
		{"partition_overflow", "0\n1\nfoo 2147483648 1\n", false, 3, "foo 2147483648 1"},
		{"bad_offset", "0\n1\nfoo 0 1.5\n", false, 3, "foo 0 1.5"},
		{"leading_space", "0\n1\n foo 0 1\n", false, 3, " foo 0 1"},
		{"blank_line", "0\n1\nfoo 0 1\n\n", false, 4, ""},
		{"epoch_three_fields", "0\n1\n0 0 0\n", true, 3, "0 0 0"},
		{"epoch_bad_epoch", "0\n1\nx 0\n", true, 3, "x 0"},
		{"epoch_epoch_overflow", "0\n1\n2147483648 0\n", true, 3, "2147483648 0"},
		{"epoch_bad_offset", "0\n1\n0 x\n", true, 3, "0 x"},
		{"epoch_count", "0\n3\n0 0\n", true, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			if tt.epochs {
				_, err = ParseLeaderEpochs("/d/ckpt", []byte(tt.in))
			} else {
				_, err = ParseOffsets("/d/ckpt", []byte(tt.in))
			}
			var me *MalformedError
			if !errors.As(err, &me) {
				t.Fatalf("got %v, want *MalformedError", err)
			}
			if me.File != "/d/ckpt" || me.Line != tt.wantLine || me.Text != tt.wantText {
				t.Fatalf("got %+v, want line %d text %q", me, tt.wantLine, tt.wantText)
			}
			prefix := "Malformed line in checkpoint file [/d/ckpt]: "
			if tt.wantLine == 0 {
				prefix = "Malformed checkpoint file [/d/ckpt]: "
			}
			if !strings.HasPrefix(err.Error(), prefix) {
				t.Fatalf("message %q lacks %q", err, prefix)
			}
		})
	}
}

func TestMalformedErrorShortensLongLines(t *testing.T) {
	_, err := ParseOffsets("f", []byte("0\n1\n"+strings.Repeat("x", 10000)+"\n"))
	var me *MalformedError
	if !errors.As(err, &me) || len(me.Text) > maxLineInError+3 {
		t.Fatalf("got %v", err)
	}
}

func TestReadFileErrors(t *testing.T) {
	m := vfs.NewMem()
	must(t, m.MkdirAll("/dir", 0o755))
	if _, err := ReadOffsets(m, "/dir"); err == nil {
		// reading a directory is an I/O error on both filesystems
		t.Fatal("reading a directory succeeded")
	}
	f, err := m.Create("/bad")
	must(t, err)
	_, err = io.WriteString(f, "0\n1\nfoo 0\n")
	must(t, err)
	must(t, f.Close())
	var me *MalformedError
	if _, err := ReadOffsets(m, "/bad"); !errors.As(err, &me) || me.File != "/bad" {
		t.Fatalf("ReadOffsets of a bad file: %v", err)
	}
}

// TestCrash stops the second of two writes at every filesystem operation (as
// a power loss would) and requires the file that survives to hold the first
// or the second checkpoint, never anything else.
func TestCrash(t *testing.T) {
	old := map[TopicPartition]int64{{"foo", 0}: 1, {"foo", 1}: 2}
	next := map[TopicPartition]int64{{"foo", 0}: 10, {"foo", 1}: 20, {"bar", 0}: 30}
	sawOld, sawNew := false, false
	runs, checked := 0, 0
	for i := 0; ; i++ {
		runs++
		m := vfs.NewMem()
		must(t, vfs.MkdirAllSync(m, "/data", 0o755))
		path := "/data/" + RecoveryPointOffsetFile
		must(t, WriteOffsets(m, path, old))

		ops := 0
		stopped := vfs.NewErrorFS(m, vfs.InjectorFunc(func(op vfs.Op) error {
			ops++
			if ops > i {
				return vfs.ErrInjected // the machine is off: nothing more happens
			}
			return nil
		}))
		err := WriteOffsets(stopped, path, next)
		done := err == nil
		if !done && !errors.Is(err, vfs.ErrInjected) {
			t.Fatalf("stop at op %d: %v", i, err)
		}

		got, err := ReadOffsets(m.CrashClone(), path)
		if err != nil {
			t.Fatalf("stop at op %d: after crash: %v", i, err)
		}
		checked += len(got)
		switch {
		case maps.Equal(got, old):
			sawOld = true
		case maps.Equal(got, next):
			sawNew = true
		default:
			t.Fatalf("stop at op %d: after crash the checkpoint is %v", i, got)
		}
		if done {
			if !maps.Equal(got, next) {
				t.Fatal("a completed write did not survive the crash")
			}
			break
		}
	}
	if !sawOld || !sawNew {
		t.Fatalf("saw old %v, new %v", sawOld, sawNew)
	}
	// Records here are checkpoint entries (topic-partition offsets).
	reliability.Record(t, "disk: power cut at each fs operation of a checkpoint write", runs, checked, 0)
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("0\n1\nfoo 0 1\n"))
	f.Add([]byte("0\n2\n0 0\n2 81\n"))
	f.Add([]byte(""))
	f.Add([]byte("0\n2147483647\n"))
	f.Add([]byte("0\r\n1\r\nfoo\t0 1\r"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if m, err := ParseOffsets("fuzz", b); err == nil {
			out, ferr := FormatOffsets(m)
			if ferr != nil {
				t.Fatalf("parsed topics do not format: %v", ferr)
			}
			again, err := ParseOffsets("fuzz", out)
			if err != nil || !maps.Equal(again, m) {
				t.Fatalf("offsets round trip: %v, %v vs %v", err, again, m)
			}
		} else if !isMalformed(err) {
			t.Fatalf("error %v is not a *MalformedError", err)
		}
		if e, err := ParseLeaderEpochs("fuzz", b); err == nil {
			again, err := ParseLeaderEpochs("fuzz", FormatLeaderEpochs(e))
			if err != nil || !slices.Equal(again, e) {
				t.Fatalf("epochs round trip: %v, %v vs %v", err, again, e)
			}
		} else if !isMalformed(err) {
			t.Fatalf("error %v is not a *MalformedError", err)
		}
	})
}

func isMalformed(err error) bool {
	var me *MalformedError
	return errors.As(err, &me)
}
