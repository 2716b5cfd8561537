package remotetier

import (
	"bytes"
	"context"
	"slices"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/tiered/tiered/internal/testkit/testminio"
	"github.com/tiered/tiered/remotetier/objstore"
)

// TestMinIOReadAndVerify: the reader and verify against real MinIO through
// an s3:// URL with a prefix; minio-go, the independent client, damages an
// object behind tiered's back.
func TestMinIOReadAndVerify(t *testing.T) {
	srv := testminio.Shared(t)
	testminio.SetCredentialsEnv(t)
	ctx := context.Background()
	bucketName := srv.NewBucket(t)
	b, err := objstore.Open(ctx, srv.URL(bucketName, "tiered/prod"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })

	local := writeLocal(t, t.TempDir(), 11, 4, 12, true)
	files := local.files(t)
	r := newRemote(t, b, "", 0, smallPolicy)
	r.commit(files[:1]...)
	r.commit(files[1:2]...)
	r.commit(files[2:]...)
	l := openTestLog(t, b, "")
	checkEveryOffset(t, r, l, local)
	checkTimestamps(t, r, l, local)
	got, err := l.AbortedTxns(ctx, 0, l.LogEndOffset())
	if err != nil || !slices.Equal(got, local.log.AbortedTxns(0, l.LogEndOffset())) {
		t.Fatalf("aborted transactions %+v, %v", got, err)
	}

	rep, err := VerifyBucket(ctx, b, DefaultVerifyOptions())
	if err != nil || !rep.OK() || rep.Objects == 0 {
		t.Fatalf("verify: %v, %+v", err, rep)
	}

	// minio-go rewrites a .log object with one bit flipped.
	seg := r.segs[2]
	data := slices.Clone(r.logs[2])
	data[len(data)-1] ^= 0x80
	if _, err := srv.Client().PutObject(ctx, bucketName, "tiered/prod/"+seg.Log.Key, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	rep, err = VerifyBucket(ctx, b, DefaultVerifyOptions())
	if err != nil || rep.OK() || len(rep.Problems) != 1 || rep.Problems[0].Kind != ProblemChecksum || rep.Problems[0].Key != seg.Log.Key {
		t.Fatalf("verify after damage: %v, %+v", err, rep.Problems)
	}
	if _, err := l.Read(ctx, seg.LastOffset, 1<<20); err == nil {
		t.Fatal("read of the damaged batch succeeded")
	}
}
