package topicconfig

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestValidateTopicName(t *testing.T) {
	good := []string{"foo", "a.b_c-1", "__consumer_offsets", "-", "_", "...", strings.Repeat("a", 249)}
	for _, name := range good {
		if err := ValidateTopicName(name); err != nil {
			t.Errorf("ValidateTopicName(%q) = %v", name, err)
		}
	}
	long := strings.Repeat("a", 250)
	bad := map[string]string{
		"":      "Topic name is illegal, it can't be empty",
		".":     `Topic name cannot be "." or ".."`,
		"..":    `Topic name cannot be "." or ".."`,
		"a/b":   `Topic name "a/b" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'`,
		"../x":  `Topic name "../x" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'`,
		"a b":   `Topic name "a b" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'`,
		"tópic": `Topic name "tópic" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'`,
		"a\x00": "Topic name \"a\x00\" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'",
		long:    "Topic name is illegal, it can't be longer than 249 characters, topic name: " + long,
		// 249 characters but more bytes: illegal characters, not length.
		strings.Repeat("é", 249): `Topic name "` + strings.Repeat("é", 249) + `" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'`,
	}
	for name, msg := range bad {
		err := ValidateTopicName(name)
		var ite *InvalidTopicError
		if !errors.As(err, &ite) || ite.Topic != name {
			t.Errorf("ValidateTopicName(%q) = %v, want *InvalidTopicError", name, err)
			continue
		}
		if err.Error() != msg {
			t.Errorf("ValidateTopicName(%q) = %q, want %q", name, err.Error(), msg)
		}
	}
}

func TestCollidesWith(t *testing.T) {
	cases := []struct {
		a, b string
		want bool
	}{
		{"a.b", "a_b", true},
		{"a_b", "a.b", true},
		{"a.b_c", "a_b.c", true},
		{"a.b", "a.b", false}, // the same topic, not a collision
		{"a.b", "a-b", false},
		{"ab", "a_b", false},
	}
	for _, tc := range cases {
		if got := CollidesWith(tc.a, tc.b); got != tc.want {
			t.Errorf("CollidesWith(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestDirNames(t *testing.T) {
	cases := []struct {
		dir  string
		want DirInfo
	}{
		{"foo-0", DirInfo{Topic: "foo", Partition: 0}},
		{"my-topic-12", DirInfo{Topic: "my-topic", Partition: 12}},
		{"a-b-c-2147483647", DirInfo{Topic: "a-b-c", Partition: 2147483647}},
		{"__consumer_offsets-49", DirInfo{Topic: "__consumer_offsets", Partition: 49}},
		{"a.b-3", DirInfo{Topic: "a.b", Partition: 3}},
		{"foo--1", DirInfo{Topic: "foo-", Partition: 1}}, // Kafka splits at the last '-'
		{"/data/logs/foo-7", DirInfo{Topic: "foo", Partition: 7}},
		{"foo-0.0d1f4e1b2c3d4e5f60718293a4b5c6d7-delete", DirInfo{Topic: "foo", Partition: 0, Kind: DirDelete, UniqueID: "0d1f4e1b2c3d4e5f60718293a4b5c6d7"}},
		{"my.topic-with-dash-5.abc-future", DirInfo{Topic: "my.topic-with-dash", Partition: 5, Kind: DirFuture, UniqueID: "abc"}},
		{"t-1.x-stray", DirInfo{Topic: "t", Partition: 1, Kind: DirStray, UniqueID: "x"}},
	}
	for _, tc := range cases {
		got, err := ParseDir(tc.dir)
		if err != nil || got != tc.want {
			t.Errorf("ParseDir(%q) = %+v, %v; want %+v", tc.dir, got, err, tc.want)
			continue
		}
		topic, part, err := ParseDirName(tc.dir)
		if topic != tc.want.Topic || part != tc.want.Partition {
			t.Errorf("ParseDirName(%q) = %q, %d", tc.dir, topic, part)
		}
		var marked *MarkedDirError
		if tc.want.Kind == DirLog {
			if err != nil {
				t.Errorf("ParseDirName(%q) err = %v", tc.dir, err)
			}
			if name := DirName(tc.want.Topic, tc.want.Partition); name != filepath.Base(tc.dir) {
				t.Errorf("DirName(%q, %d) = %q, want %q", tc.want.Topic, tc.want.Partition, name, filepath.Base(tc.dir))
			}
		} else if !errors.As(err, &marked) || marked.Info != tc.want {
			t.Errorf("ParseDirName(%q) err = %v, want *MarkedDirError for %+v", tc.dir, err, tc.want)
		}
	}

	bad := []string{
		"", "foo", "-0", "foo-", "foo-x", "foo-01", "foo-+1", "foo- 1", "foo-2147483648", "foo-99999999999",
		"a/b-0x", "bad topic-0", "..-0", "foo-0-delete", "foo-0.-delete", "foo-0.a b-delete", ".abc-delete",
		"foo-bar.uuid-delete", "remote-log-index-cache", "bucket", "cleaner-offset-checkpoint", "meta.properties",
		strings.Repeat("a", 250) + "-0",
	}
	for _, dir := range bad {
		info, err := ParseDir(dir)
		var dne *DirNameError
		if !errors.As(err, &dne) {
			t.Errorf("ParseDir(%q) = %+v, %v; want *DirNameError", dir, info, err)
		}
		if _, _, err := ParseDirName(dir); !errors.As(err, &dne) {
			t.Errorf("ParseDirName(%q) err = %v; want *DirNameError", dir, err)
		}
	}
}

// TestFixtureLogDirs parses every partition directory of the real broker log dirs in the
// fixtures, which include topics containing '-' and '_'.
func TestFixtureLogDirs(t *testing.T) {
	roots, err := filepath.Glob("../../testdata/fixtures/kafka-tester/*/kraft-combined-logs")
	if err != nil {
		t.Fatal(err)
	}
	more, _ := filepath.Glob("../../testdata/fixtures/kafka-connect-spooldir-fork/*/kafka-data")
	roots = append(roots, more...)
	if len(roots) == 0 {
		t.Skip("fixtures not present")
	}
	n := 0
	for _, root := range roots {
		ents, err := os.ReadDir(root)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if !e.IsDir() {
				continue
			}
			topic, part, err := ParseDirName(e.Name())
			if err != nil {
				t.Errorf("%s: %v", e.Name(), err)
				continue
			}
			if DirName(topic, part) != e.Name() {
				t.Errorf("%s parsed to %q %d", e.Name(), topic, part)
			}
			n++
		}
	}
	if n < 10 {
		t.Fatalf("only %d partition dirs found in the fixtures", n)
	}
	topic, part, err := ParseDirName("_confluent-controlcenter-5-1-2-1-KSTREAM-OUTEROTHER-0000000096-store-changelog-0")
	if err != nil || topic != "_confluent-controlcenter-5-1-2-1-KSTREAM-OUTEROTHER-0000000096-store-changelog" || part != 0 {
		t.Fatalf("got %q %d %v", topic, part, err)
	}
}

// FuzzParseDirName: no panic; a live dir round-trips through DirName, a marked one through its
// suffixed form; failures are typed.
func FuzzParseDirName(f *testing.F) {
	for _, s := range []string{"foo-0", "my-topic-12", "foo-0.abc-delete", "x-1.y-future", "t-2.z-stray",
		"foo-01", "foo--1", "-", ".-1", "a.b-2147483647", "a-2147483648", "foo-0.-delete"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, dir string) {
		info, err := ParseDir(dir)
		if err != nil {
			var dne *DirNameError
			if !errors.As(err, &dne) {
				t.Fatalf("ParseDir(%q) error %v is not *DirNameError", dir, err)
			}
			return
		}
		if ValidateTopicName(info.Topic) != nil || info.Partition < 0 {
			t.Fatalf("ParseDir(%q) = %+v: bad topic or partition", dir, info)
		}
		name := DirName(info.Topic, info.Partition)
		if info.Kind != DirLog {
			name += "." + info.UniqueID + "-" + info.Kind.String()
		}
		if name != filepath.Base(dir) {
			t.Fatalf("ParseDir(%q) = %+v, which formats as %q", dir, info, name)
		}
	})
}
