package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/tiered/tiered/localtier/vfs"
)

// TestReplayNoCheckpointAfterFailedSync: once an fsync of the output has
// failed, the bytes it covered are not known to be on disk (Linux marks
// the pages clean after reporting a writeback error once, so a second
// fsync succeeds without writing them), and no checkpoint may count them:
// the checkpoint the failed run leaves is the one from before the failure.
func TestReplayNoCheckpointAfterFailedSync(t *testing.T) {
	env := newReplayEnv(t)
	src := NewCatalogReplaySource(env.cat)
	tc := replayFaultCases[0]
	mem := tc.replayFS(t)
	var (
		syncs    int
		before   []byte // the checkpoint when the output's sync failed
		failedAt int64  // the output size then
	)
	efs := vfs.NewErrorFS(mem, vfs.InjectorFunc(func(op vfs.Op) error {
		if op.Kind != vfs.OpFileSync || op.Path != tc.out {
			return nil
		}
		syncs++
		if syncs != 3 {
			return nil
		}
		before, _ = vfs.ReadFile(mem, tc.cpPath())
		out, _ := vfs.ReadFile(mem, tc.out)
		failedAt = int64(len(out))
		return fmt.Errorf("%w: EIO on fsync of the output", vfs.ErrInjected)
	}))
	_, err := Replay(context.Background(), tc.options(efs, src))
	if !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("replay: %v, want the injected sync error", err)
	}
	prev, err := ReadReplayCheckpointFS(mem, tc.cpPath())
	if err != nil {
		t.Fatal(err)
	}
	var was ReplayCheckpoint
	if err := json.Unmarshal(before, &was); err != nil {
		t.Fatalf("checkpoint before the failure: %v", err)
	}
	if prev.OutputBytes != was.OutputBytes {
		t.Fatalf("after the output's fsync failed (with %d bytes written), the checkpoint moved from %d to %d output bytes: it counts bytes whose fsync failed",
			failedAt, was.OutputBytes, prev.OutputBytes)
	}
}
