package objstore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/tiered/tiered/internal/testkit/objtesting"
	"github.com/tiered/tiered/internal/testkit/testminio"
	"github.com/tiered/tiered/remotetier/objstore"
)

// BenchmarkPutMinIO compares the S3 backend's Put of a 24 MiB file
// (multipart, 16 MiB parts) with minio-go's PutObject of the same file to
// the same server in the same run: the physical baseline.
func BenchmarkPutMinIO(b *testing.B) {
	const size = 24 << 20
	srv := testminio.Shared(b)
	p := filepath.Join(b.TempDir(), "segment")
	if err := os.WriteFile(p, objtesting.Pattern(1, size), 0o644); err != nil {
		b.Fatal(err)
	}
	bucket := srv.NewBucket(b)
	ctx := context.Background()
	b.Run("tiered", func(b *testing.B) {
		bkt, err := objstore.NewS3(ctx, objstore.S3Config{Bucket: bucket, Endpoint: srv.Endpoint, Region: testminio.Region,
			PathStyle: true, Credentials: staticCreds()})
		if err != nil {
			b.Fatal(err)
		}
		defer bkt.Close()
		b.SetBytes(size)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			f, err := os.Open(p)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := bkt.Put(ctx, fmt.Sprintf("tiered/%d", i), f, size, objstore.Condition{}); err != nil {
				b.Fatal(err)
			}
			f.Close()
			i++
		}
	})
	b.Run("minio-go", func(b *testing.B) {
		mc := srv.Client()
		b.SetBytes(size)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			f, err := os.Open(p)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := mc.PutObject(ctx, bucket, fmt.Sprintf("minio-go/%d", i), f, size,
				minio.PutObjectOptions{PartSize: objstore.DefaultPartSize, NumThreads: objstore.DefaultPartConcurrency}); err != nil {
				b.Fatal(err)
			}
			f.Close()
			i++
		}
	})
}
