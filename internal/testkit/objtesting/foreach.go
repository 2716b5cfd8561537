package objtesting

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/tiered/tiered/internal/testkit/testminio"
	"github.com/tiered/tiered/remotetier/objstore"
)

// S3PartSize is the part size of the S3 buckets ForeachBucket opens: the
// S3 minimum, so BigSize objects take the multipart path.
const S3PartSize = objstore.MinPartSize

// ForeachBucket runs fn as a subtest on each backend, each with a fresh,
// empty bucket closed at the end: "memory", "filesystem" and "s3" (a real
// MinIO from testminio.Shared, so the calling package's TestMain must call
// testminio.Main). Without the MinIO binary the s3 subtest fails, telling
// to run ./scripts/setup; it is skipped only with TIERED_SKIP_MINIO=1.
func ForeachBucket(t *testing.T, fn func(t *testing.T, b objstore.Bucket)) {
	t.Run("memory", func(t *testing.T) {
		fn(t, objstore.NewMemory())
	})
	t.Run("filesystem", func(t *testing.T) {
		b, err := objstore.NewFilesystem(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		fn(t, b)
	})
	t.Run("s3", func(t *testing.T) {
		fn(t, NewMinIOBucket(t))
	})
}

// NewMinIOBucket returns an S3 bucket on the shared test MinIO: a fresh
// MinIO bucket, opened with static test credentials and S3PartSize, closed
// at the end of the test.
func NewMinIOBucket(t testing.TB) *objstore.S3 {
	t.Helper()
	srv := testminio.Shared(t)
	name := srv.NewBucket(t)
	b, err := objstore.NewS3(context.Background(), objstore.S3Config{
		Bucket:      name,
		Endpoint:    srv.Endpoint,
		Region:      testminio.Region,
		PathStyle:   true,
		PartSize:    S3PartSize,
		Credentials: credentials.NewStaticCredentialsProvider(testminio.AccessKey, testminio.SecretKey, ""),
	})
	if err != nil {
		t.Fatalf("open MinIO bucket %s: %v", name, err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}
