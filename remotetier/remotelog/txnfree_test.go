package remotelog

import (
	"context"
	"slices"
	"testing"

	"github.com/tiered/tiered/internal/testkit/remotekit"
	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier/objstore"
)

// TestAbortedTxnsRemembersTheFreeTail: AbortedTxns remembers where the
// stretch of segments without a transaction index that ends the log
// begins, so later calls inside it walk nothing; its answers are those of
// a walk without the memo, from every offset.
func TestAbortedTxnsRemembersTheFreeTail(t *testing.T) {
	ctx := context.Background()
	for _, txn := range []bool{false, true} {
		local := remotekit.WriteLocal(t, t.TempDir(), 91, 8, 20, txn)
		r := remotekit.NewRemote(t, objstore.NewMemory(), "", 0, manifest.DefaultPolicy())
		r.Commit(local.Files(t)...)
		wantFrom := r.M.LogStartOffset
		for _, s := range r.Segs {
			if s.TxnIndex != nil {
				wantFrom = s.NextOffset()
			}
		}
		open := func() *RemoteLog {
			l, err := OpenRemoteLog(ctx, r.Bucket, "", remotekit.TestTopic, remotekit.TestPartition, ReaderOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return l
		}
		memo := open()
		for _, s := range r.Segs {
			from := s.BaseOffset
			got, err := memo.AbortedTxns(ctx, from, s.NextOffset())
			if err != nil {
				t.Fatal(err)
			}
			want, err := open().AbortedTxns(ctx, from, s.NextOffset())
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("txn=%v from %d: %v, without the memo %v", txn, from, got, want)
			}
		}
		if wantFrom == r.M.NextOffset() {
			// The last segment has one: nothing to remember.
			if memo.txnFree.m != nil {
				t.Fatalf("txn=%v: remembered no .txnindex from %d; the last segment has one", txn, memo.txnFree.from)
			}
			continue
		}
		if memo.txnFree.m != memo.Manifest() || memo.txnFree.from != wantFrom {
			t.Fatalf("txn=%v: remembered no .txnindex from %d, want from %d", txn, memo.txnFree.from, wantFrom)
		}
	}
}
