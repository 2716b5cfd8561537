package objstore_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tiered/tiered/remotetier/objstore"
)

func FuzzParseURL(f *testing.F) {
	for _, s := range []string{
		"file:///tmp/b", "mem://x/p", "s3://b/p?endpoint=http://127.0.0.1:9000&region=us-east-1&path_style=true",
		"s3://b?part_size=5242880&part_concurrency=3", "s3://%zz", "s3://u:p@b", "file://h/x", "", "::",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		loc, err := objstore.ParseURL(raw)
		if err != nil {
			if strings.Contains(err.Error(), "\n") && !strings.Contains(raw, "\n") {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		switch loc.Scheme {
		case "file":
			if !filepath.IsAbs(loc.Dir) {
				t.Fatalf("accepted relative dir %q", loc.Dir)
			}
		case "mem":
			if loc.Name == "" {
				t.Fatal("accepted empty mem name")
			}
		case "s3":
			if loc.S3.Bucket == "" {
				t.Fatal("accepted empty bucket")
			}
		default:
			t.Fatalf("accepted scheme %q", loc.Scheme)
		}
		if loc.Prefix != "" && objstore.ValidateKey(loc.Prefix) != nil {
			t.Fatalf("accepted bad prefix %q", loc.Prefix)
		}
	})
}

// FuzzFilesystemKey: every key the filesystem backend accepts maps inside
// the root and round-trips through List with the same spelling.
func FuzzFilesystemKey(f *testing.F) {
	for _, s := range []string{"a", "a/b", "../x", "a/../../x", "/x", "a//b", ".tiered-tmp/x", "odd/ü %2F", "a/./b", "..."} {
		f.Add(s)
	}
	root := f.TempDir()
	b, err := objstore.NewFilesystem(root)
	if err != nil {
		f.Fatal(err)
	}
	defer b.Close()
	f.Fuzz(func(t *testing.T, key string) {
		ctx := context.Background()
		if objstore.ValidateKey(key) == nil {
			if p := filepath.Join(root, filepath.FromSlash(key)); !strings.HasPrefix(p, root+string(filepath.Separator)) {
				t.Fatalf("valid key %q maps outside the root: %s", key, p)
			}
		}
		_, err := b.Put(ctx, key, strings.NewReader("x"), 1, objstore.Condition{})
		if err != nil {
			if objstore.ValidateKey(key) == nil && errors.Is(err, objstore.ErrInvalidKey) &&
				!strings.HasPrefix(key, ".tiered-") && !strings.Contains(err.Error(), "255 bytes") {
				t.Fatalf("valid key %q refused: %v", key, err)
			}
			return
		}
		if objstore.ValidateKey(key) != nil {
			t.Fatalf("invalid key %q stored", key)
		}
		found := false
		b.List(ctx, key, func(i objstore.ObjectInfo) error {
			found = found || i.Key == key
			return nil
		})
		if !found {
			t.Fatalf("stored key %q not listed under itself", key)
		}
		if err := b.Delete(ctx, key); err != nil {
			t.Fatalf("delete %q: %v", key, err)
		}
	})
}
