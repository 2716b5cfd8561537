package objstore_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tiered/tiered/remotetier/objstore"
)

// TestS3ConditionalConflictIsNotALostIfAbsent: AWS answers 409
// ConditionalRequestConflict when conditional writes to one key race
// while neither has finished ("retry the upload"). For an If-None-Match
// Put it says nothing about whether the key exists, yet it was reported as
// ErrPreconditionFailed, which for IfAbsent means "the key exists": the
// manifest store then took a sub-manifest as written and made the root
// reference it, though the racing write might fail and leave nothing
// there. For If-Match, re-reading as after a lost race is right and stays.
func TestS3ConditionalConflictIsNotALostIfAbsent(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name        string
		cond        objstore.Condition
		wantLostCAS bool
	}{
		{"if_none_match", objstore.IfAbsent(), false},
		{"if_match", objstore.IfMatch(`"v1"`), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := newScriptedS3(t, func(w http.ResponseWriter, r *http.Request, key string) {
				io.Copy(io.Discard, r.Body)
				switch r.Method {
				case http.MethodPut:
					s3Error(w, http.StatusConflict, "ConditionalRequestConflict")
				case http.MethodHead:
					w.WriteHeader(http.StatusNotFound) // the key does not exist
				default:
					s3Error(w, http.StatusBadRequest, "InvalidArgument")
				}
			})
			_, err := b.Put(ctx, "sub/k", strings.NewReader("sub-manifest"), 12, c.cond)
			if err == nil {
				t.Fatal("Put answered 409 succeeded")
			}
			if got := objstore.IsPreconditionFailed(err); got != c.wantLostCAS {
				t.Errorf("409 ConditionalRequestConflict: IsPreconditionFailed = %v, want %v (err %v)", got, c.wantLostCAS, err)
			}
		})
	}
}
