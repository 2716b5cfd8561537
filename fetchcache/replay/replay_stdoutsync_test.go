package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/tiered/tiered/localtier/vfs"
)

// *os.File, what the binary passes as Stdout, is what the replay syncs.
var _ statSyncer = (*os.File)(nil)

// fileStdout is stdout as the shell set it up: a regular file (> out), a
// pipe or a terminal. Sync records how much of what was written is durable:
// after a power loss a regular file keeps only that much.
type fileStdout struct {
	mode   os.FileMode
	data   []byte
	synced int
	syncs  int
}

func (f *fileStdout) Write(p []byte) (int, error) {
	f.data = append(f.data, p...)
	return len(p), nil
}

func (f *fileStdout) Sync() error {
	if !f.mode.IsRegular() {
		return errors.New("fsync: invalid argument") // as Linux answers for a pipe or a tty
	}
	f.synced, f.syncs = len(f.data), f.syncs+1
	return nil
}

func (f *fileStdout) Stat() (os.FileInfo, error) { return stdoutInfo{f}, nil }

type stdoutInfo struct{ f *fileStdout }

func (i stdoutInfo) Name() string       { return "stdout" }
func (i stdoutInfo) Size() int64        { return int64(len(i.f.data)) }
func (i stdoutInfo) Mode() os.FileMode  { return i.f.mode }
func (i stdoutInfo) ModTime() time.Time { return time.Time{} }
func (i stdoutInfo) IsDir() bool        { return false }
func (i stdoutInfo) Sys() any           { return nil }

// TestReplayStdoutFileSyncedBeforeCheckpoint: with --checkpoint and no
// --out, stdout redirected to a regular file is fsynced before each
// checkpoint, as --out is: no checkpoint counts output bytes a power loss
// can take (a resume would leave a hole instead of the documented repeat).
// Before, stdout was never synced. A pipe or a terminal cannot be synced
// and is not.
func TestReplayStdoutFileSyncedBeforeCheckpoint(t *testing.T) {
	env := newReplayEnv(t)
	const cpPath = "/c/job.checkpoint"
	for _, tc := range []struct {
		name     string
		mode     os.FileMode
		wantSync bool
	}{
		{"regular_file", 0o644, true},
		{"pipe", os.ModeNamedPipe | 0o600, false},
		{"terminal", os.ModeDevice | os.ModeCharDevice | 0o620, false},
	} {
		for name, src := range env.sources() {
			t.Run(tc.name+"/"+name, func(t *testing.T) {
				mem := vfs.NewMem()
				if err := vfs.MkdirAllSync(mem, "/c", 0o755); err != nil {
					t.Fatal(err)
				}
				stdout := &fileStdout{mode: tc.mode}
				var checkpoints int
				var unsynced []string
				efs := vfs.NewErrorFS(mem, vfs.InjectorFunc(func(op vfs.Op) error {
					if op.Kind != vfs.OpRename || op.NewPath != cpPath {
						return nil
					}
					// The checkpoint is about to take effect: what it
					// counts must be durable by now.
					data, err := vfs.ReadFile(mem, op.Path)
					var cp ReplayCheckpoint
					if err == nil {
						err = json.Unmarshal(data, &cp)
					}
					if err != nil {
						return fmt.Errorf("%w: read the checkpoint being written: %v", vfs.ErrInjected, err)
					}
					checkpoints++
					if cp.OutputBytes > int64(stdout.synced) {
						unsynced = append(unsynced, fmt.Sprintf("%d bytes counted, %d synced", cp.OutputBytes, stdout.synced))
					}
					return nil
				}))
				_, err := Replay(context.Background(), ReplayOptions{Source: src, Topic: replayTopic, Partition: ReplayAllPartitions,
					From: replayFrom, To: replayTo, Stdout: stdout, CheckpointPath: cpPath, FS: efs, FetchBytes: 300, FlushBytes: 1})
				if err != nil {
					t.Fatal(err)
				}
				if want := env.wantJSONL(replayFrom, replayTo, 0, 1, 2); string(stdout.data) != want {
					t.Fatalf("stdout: %d bytes, want %d", len(stdout.data), len(want))
				}
				if checkpoints < 3 {
					t.Fatalf("only %d checkpoints", checkpoints)
				}
				if !tc.wantSync {
					if stdout.syncs != 0 {
						t.Fatalf("stdout (%v) synced %d times", tc.mode, stdout.syncs)
					}
					return
				}
				if len(unsynced) > 0 {
					t.Fatalf("%d of %d checkpoints count output a power loss can take, the first: %s", len(unsynced), checkpoints, unsynced[0])
				}
			})
		}
	}
}
