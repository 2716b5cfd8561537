package remotetier

import (
	"bytes"
	"context"
	"slices"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/tiered/tiered/internal/testkit/remotekit"
	"github.com/tiered/tiered/internal/testkit/testminio"
	"github.com/tiered/tiered/remotetier/objstore"
	"github.com/tiered/tiered/remotetier/remotelog"
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

	local := remotekit.WriteLocal(t, t.TempDir(), 11, 4, 12, true)
	files := local.Files(t)
	r := remotekit.NewRemote(t, b, "", 0, remotekit.SmallPolicy)
	r.Commit(files[:1]...)
	r.Commit(files[1:2]...)
	r.Commit(files[2:]...)
	l, err := remotelog.OpenRemoteLog(ctx, b, "", remotekit.TestTopic, remotekit.TestPartition, remotelog.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	remotekit.CheckEveryOffset(t, r, func(ctx context.Context, off int64, maxBytes int) ([]byte, int64, int64, error) {
		res, err := l.Read(ctx, off, maxBytes)
		return res.Data, res.LogStartOffset, res.LogEndOffset, err
	}, local)
	remotekit.CheckTimestamps(t, r, l.OffsetForTimestamp, local)
	got, err := l.AbortedTxns(ctx, 0, l.LogEndOffset())
	if err != nil || !slices.Equal(got, local.Log.AbortedTxns(0, l.LogEndOffset())) {
		t.Fatalf("aborted transactions %+v, %v", got, err)
	}

	rep, err := VerifyBucket(ctx, b, DefaultVerifyOptions())
	if err != nil || !rep.OK() || rep.Objects == 0 {
		t.Fatalf("verify: %v, %+v", err, rep)
	}

	// minio-go rewrites a .log object with one bit flipped.
	seg := r.Segs[2]
	data := slices.Clone(r.Logs[2])
	data[len(data)-1] ^= 0x80
	if _, err := srv.Client().PutObject(ctx, bucketName, "tiered/prod/"+seg.Log.Key, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	rep, err = VerifyBucket(ctx, b, DefaultVerifyOptions())
	// The object's checksum and its last batch's CRC.
	if err != nil || rep.OK() || len(rep.Problems) != 2 || rep.Problems[0].Kind != ProblemChecksum || rep.Problems[1].Kind != ProblemLog ||
		rep.Problems[0].Key != seg.Log.Key || rep.Problems[1].Key != seg.Log.Key {
		t.Fatalf("verify after damage: %v, %+v", err, rep.Problems)
	}
	if _, err := l.Read(ctx, seg.LastOffset, 1<<20); err == nil {
		t.Fatal("read of the damaged batch succeeded")
	}
}
