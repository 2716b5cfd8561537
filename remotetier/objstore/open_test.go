package objstore_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tiered/tiered/internal/testkit/objtesting"
	"github.com/tiered/tiered/remotetier/objstore"
)

func TestParseURLGood(t *testing.T) {
	for _, c := range []struct {
		url  string
		want objstore.Location
	}{
		{"file:///var/lib/tiered/bucket", objstore.Location{Scheme: "file", Dir: "/var/lib/tiered/bucket"}},
		{"file://localhost/tmp/b", objstore.Location{Scheme: "file", Dir: "/tmp/b"}},
		{"file:/tmp/b", objstore.Location{Scheme: "file", Dir: "/tmp/b"}},
		{"mem://test", objstore.Location{Scheme: "mem", Name: "test"}},
		{"mem://test/a/b/", objstore.Location{Scheme: "mem", Name: "test", Prefix: "a/b"}},
		{"s3://bkt", objstore.Location{Scheme: "s3", S3: objstore.S3Config{Bucket: "bkt"}}},
		{"s3://bkt/pre/fix?endpoint=http://127.0.0.1:9000&region=us-east-1&path_style=true",
			objstore.Location{Scheme: "s3", Prefix: "pre/fix", S3: objstore.S3Config{
				Bucket: "bkt", Endpoint: "http://127.0.0.1:9000", Region: "us-east-1", PathStyle: true}}},
		{"s3://bkt/?region=eu-west-1&path_style=false&part_size=8388608&part_concurrency=4",
			objstore.Location{Scheme: "s3", S3: objstore.S3Config{
				Bucket: "bkt", Region: "eu-west-1", PartSize: 8 << 20, PartConcurrency: 4}}},
	} {
		got, err := objstore.ParseURL(c.url)
		if err != nil {
			t.Errorf("ParseURL(%q): %v", c.url, err)
			continue
		}
		if got != c.want {
			t.Errorf("ParseURL(%q) = %+v, want %+v", c.url, got, c.want)
		}
	}
}

func TestParseURLBad(t *testing.T) {
	for _, c := range []struct {
		url, want string
	}{
		{"", "empty"},
		{"   ", "empty"},
		{"/just/a/path", "missing scheme"},
		{"bucket", "missing scheme"},
		{"gs://bucket", `unknown scheme "gs"`},
		{"http://127.0.0.1:9000/bucket", `unknown scheme "http"`},
		{"s3://", "missing bucket name"},
		{"s3:///prefix", "missing bucket name"},
		{"s3://bkt:9000/x", "cannot have a port"},
		{"s3://bkt?endpoint=127.0.0.1:9000", "not an http(s)://host[:port] URL"},
		{"s3://bkt?endpoint=ftp://h", "not an http(s)://host[:port] URL"},
		{"s3://bkt?path_style=maybe", "not a boolean"},
		{"s3://bkt?part_size=1024", "at least 5242880"},
		{"s3://bkt?part_size=big", "at least 5242880"},
		{"s3://bkt?part_concurrency=0", "from 1 to 64"},
		{"s3://bkt?regoin=us-east-1", `unknown parameter "regoin"`},
		{"s3://bkt?region=a&region=b", "given 2 times"},
		{"s3://bkt/a//b", "bad prefix"},
		{"s3://bkt/a/../b", "bad prefix"},
		{"s3://bkt#frag", "fragment"},
		{"s3://%zz", "malformed"},
		{"file://relative/dir", `has host "relative"`},
		{"file://", "absolute directory"},
		{"file:///d?x=1", "no query parameters"},
		{"mem://", "needs a name"},
		{"mem://x?y=1", "no query parameters"},
	} {
		_, err := objstore.ParseURL(c.url)
		if err == nil {
			t.Errorf("ParseURL(%q) succeeded, want error containing %q", c.url, c.want)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, c.want) || strings.Contains(msg, "\n") {
			t.Errorf("ParseURL(%q) = %q, want one line containing %q", c.url, msg, c.want)
		}
	}
	// Every problem is reported, deterministically.
	_, err := objstore.ParseURL("s3://bkt?zzz=1&aaa=2&path_style=x")
	want := `bucket URL s3://bkt?zzz=1&aaa=2&path_style=x: path_style="x" is not a boolean; unknown parameter "aaa" (known: endpoint, region, path_style, part_size, part_concurrency); unknown parameter "zzz" (known: endpoint, region, path_style, part_size, part_concurrency)`
	if err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
}

func TestParseURLNeverEchoesCredentials(t *testing.T) {
	for _, u := range []string{
		"s3://AKIAEXAMPLE:SuperSecret@bkt/x",
		"s3://bkt?endpoint=http://AKIAEXAMPLE:SuperSecret@host:9000",
		"s3://AKIAEXAMPLE:SuperSecret@%zz",
		"s3://bkt?endpoint=http%3A%2F%2FAKIAEXAMPLE%3ASuperSecret%40host%3A9000", // the '@' query-encoded
	} {
		_, err := objstore.ParseURL(u)
		if err == nil {
			t.Errorf("ParseURL(%q) accepted credentials", u)
			continue
		}
		if strings.Contains(err.Error(), "SuperSecret") {
			t.Errorf("error echoes the secret: %v", err)
		}
	}
}

func TestOpenFile(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b, err := objstore.Open(ctx, "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	objtesting.MustPut(t, b, "k/v", []byte("hello"))
	if got, err := os.ReadFile(filepath.Join(dir, "k", "v")); err != nil || string(got) != "hello" {
		t.Errorf("object file = %q, %v; want the plain content", got, err)
	}

	_, err = objstore.Open(ctx, "file://"+filepath.Join(dir, "missing"))
	if !errors.Is(err, objstore.ErrBucketNotFound) || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("Open of a missing directory = %v, want ErrBucketNotFound", err)
	}
	if errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("a missing bucket matches ErrNotFound (object): %v", err)
	}
	_, err = objstore.Open(ctx, "file://"+filepath.Join(dir, "k", "v"))
	if err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("Open of a file = %v, want 'not a directory'", err)
	}
}

func TestOpenMemorySharedByName(t *testing.T) {
	ctx := context.Background()
	name := "open-shared-" + t.Name()
	t.Cleanup(func() { objstore.DropMemory(name) })
	a, err := objstore.Open(ctx, "mem://"+name)
	if err != nil {
		t.Fatal(err)
	}
	b, err := objstore.Open(ctx, "mem://"+name)
	if err != nil {
		t.Fatal(err)
	}
	objtesting.MustPut(t, a, "x", []byte("shared"))
	if got := objtesting.MustGet(t, b, "x"); string(got) != "shared" {
		t.Errorf("second opener read %q", got)
	}
	c, err := objstore.Open(ctx, "mem://"+name+"/pre")
	if err != nil {
		t.Fatal(err)
	}
	objtesting.MustPut(t, c, "y", []byte("prefixed"))
	if got := objtesting.MustGet(t, a, "pre/y"); string(got) != "prefixed" {
		t.Errorf("prefixed object at pre/y = %q", got)
	}
	other, err := objstore.Open(ctx, "mem://other-"+name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Get(ctx, "x"); !objstore.IsNotFound(err) {
		t.Errorf("a different name shares objects: %v", err)
	}
}

func TestWithPrefixList(t *testing.T) {
	mem := objstore.NewMemory()
	p, err := objstore.WithPrefix(mem, "/tenant/a/")
	if err != nil {
		t.Fatal(err)
	}
	objtesting.MustPut(t, p, "k1", []byte("1"))
	objtesting.MustPut(t, mem, "tenant/b/k2", []byte("2"))
	var keys []string
	if err := p.List(context.Background(), "", func(i objstore.ObjectInfo) error {
		keys = append(keys, i.Key)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 || keys[0] != "k1" {
		t.Errorf("prefixed List = %q, want [k1]", keys)
	}
	if _, err := objstore.WithPrefix(mem, "a/../b"); err == nil {
		t.Error("WithPrefix accepted a '..' prefix")
	}
}
