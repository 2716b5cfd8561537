package replay

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/tiered/tiered/internal/testkit/reliability"
	"github.com/tiered/tiered/localtier/vfs"
)

// replayFaultCase is one replay job of the fault sweep.
type replayFaultCase struct {
	name      string
	format    ReplayFormat
	partition int32
	out, cp   string // cp "": the default, next to out
}

var replayFaultCases = []replayFaultCase{
	{"jsonl_all_partitions", ReplayJSONL, ReplayAllPartitions, "/r/out.jsonl", ""},
	{"jsonl_checkpoint_elsewhere", ReplayJSONL, 1, "/r/out.jsonl", "/c/job.checkpoint"},
	{"raw_one_partition", ReplayRaw, 2, "/r/out.raw", ""},
}

// A narrower range than replayFrom..replayTo keeps the sweep short: about
// four batches a partition, a checkpoint after each.
const replayFaultTo = ts0 + 633

func (tc replayFaultCase) options(fsys vfs.FS, src ReplaySource) ReplayOptions {
	return ReplayOptions{Source: src, Topic: replayTopic, Partition: tc.partition, From: replayFrom, To: replayFaultTo,
		Format: tc.format, OutPath: tc.out, CheckpointPath: tc.cp, FS: fsys, FetchBytes: 300, FlushBytes: 1}
}

func (tc replayFaultCase) cpPath() string {
	if tc.cp != "" {
		return tc.cp
	}
	return tc.out + ReplayCheckpointSuffix
}

// replayFS is a MemFS holding the directories of tc, made durable.
func (tc replayFaultCase) replayFS(t *testing.T) *vfs.MemFS {
	t.Helper()
	mem := vfs.NewMem()
	for _, d := range []string{"/r", "/c"} {
		if err := vfs.MkdirAllSync(mem, d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return mem
}

// replayWorkload is an interrupted replay (cancelled after a few reads)
// and its resume to the end, on fsys: every kind of checkpoint write
// (the first, one per flush, the one on interrupt, the final one) and the
// resume's reopening of the output happen once each at least.
func replayWorkload(tc replayFaultCase, fsys vfs.FS, src ReplaySource) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := Replay(ctx, tc.options(fsys, &cancellingSource{ReplaySource: src, n: 3, cancel: cancel}))
	if !errors.Is(err, ErrReplayInterrupted) {
		if err == nil {
			return errors.New("the first run was not interrupted")
		}
		return err
	}
	o := tc.options(fsys, src)
	o.Resume = true
	_, err = Replay(context.Background(), o)
	return err
}

// recoverReplay is what a user does after a failed or crashed replay:
// resume when there is a checkpoint, else start again. It must end with
// the whole output, each record once; it reports how it got there.
func recoverReplay(t *testing.T, tc replayFaultCase, fsys vfs.FS, src ReplaySource, want []byte) string {
	t.Helper()
	how := "restarted"
	o := tc.options(fsys, src)
	cp, err := ReadReplayCheckpointFS(fsys, tc.cpPath())
	switch {
	case errors.Is(err, ErrNoReplayCheckpoint):
	case err != nil:
		t.Fatalf("checkpoint unreadable (half-written?): %v", err)
	default:
		o.Resume = true
		how = "resumed"
		if cp.Complete {
			how = "complete"
		}
	}
	if _, err := Replay(context.Background(), o); err != nil {
		t.Fatalf("%s job failed: %v", how, err)
	}
	got, err := vfs.ReadFile(fsys, tc.out)
	if err != nil {
		t.Fatalf("%s job: %v", how, err)
	}
	if string(got) != string(want) {
		t.Fatalf("%s job: output of %d bytes, want %d (records lost or repeated)", how, len(got), len(want))
	}
	if saved, err := ReadReplayCheckpointFS(fsys, tc.cpPath()); err != nil || !saved.Complete || saved.OutputBytes != int64(len(want)) {
		t.Fatalf("%s job: final checkpoint %+v, %v", how, saved, err)
	}
	return how
}

// TestReplayCheckpointFaults fails each filesystem operation of a replay
// and its resume in turn (checkpoint writes: create, write, sync, close,
// rename, sync dir; the output's open, writes, syncs, stat, truncate,
// close), and separately cuts power just before it (CrashClone keeps only
// what was synced). The failure must be the injected one; afterwards, on
// the files as they are (a restart) and on what survived the power cut,
// --resume (or a fresh start when no checkpoint was written yet) must end
// with the same output as a run without faults: no record lost or
// repeated, and a checkpoint is either readable or absent, never accepted
// half-written.
func TestReplayCheckpointFaults(t *testing.T) {
	env := newReplayEnv(t)
	src := NewCatalogReplaySource(env.cat)
	for _, tc := range replayFaultCases {
		t.Run(tc.name, func(t *testing.T) {
			clean := tc.replayFS(t)
			ref, err := Replay(context.Background(), tc.options(clean, src))
			if err != nil {
				t.Fatal(err)
			}
			want, err := vfs.ReadFile(clean, tc.out)
			if err != nil {
				t.Fatal(err)
			}
			if tc.format == ReplayJSONL {
				parts := []int32{tc.partition}
				if tc.partition == ReplayAllPartitions {
					parts = slices.Sorted(maps.Keys(env.want))
				}
				if string(want) != env.wantJSONL(replayFrom, replayFaultTo, parts...) {
					t.Fatal("reference run differs from the expected records")
				}
			}
			seen := map[string]int{}
			kinds := map[vfs.OpKind]bool{}
			for i := int64(0); ; i++ {
				if i > 2000 {
					t.Fatal("the workload never succeeded")
				}
				mem := tc.replayFS(t)
				var (
					n     int64
					crash *vfs.MemFS
					at    vfs.Op
				)
				efs := vfs.NewErrorFS(mem, vfs.InjectorFunc(func(op vfs.Op) error {
					n++
					if n-1 != i {
						return nil
					}
					crash, at = mem.CrashClone(), op
					return fmt.Errorf("%w at op %d (%s)", vfs.ErrInjected, i, op)
				}))
				err := replayWorkload(tc, efs, src)
				if err == nil {
					if crash != nil {
						t.Fatalf("op %d (%s) was failed but the replay reported success: an error was swallowed", i, at)
					}
					got, rerr := vfs.ReadFile(mem, tc.out)
					if rerr != nil || string(got) != string(want) {
						t.Fatalf("fault-free workload: output %d bytes (%v), want %d", len(got), rerr, len(want))
					}
					t.Logf("workload succeeded once op %d was past its %d operations; failed %v; outcomes %v", i, n, slices.Sorted(maps.Keys(kinds)), seen)
					for _, need := range []string{"restart: resumed", "power cut: resumed", "restart: restarted", "power cut: restarted"} {
						if seen[need] == 0 {
							t.Errorf("no fault point gave the outcome %q: %v", need, seen)
						}
					}
					for _, k := range []vfs.OpKind{vfs.OpCreate, vfs.OpFileWrite, vfs.OpFileSync, vfs.OpFileClose, vfs.OpRename, vfs.OpSyncDir,
						vfs.OpOpen, vfs.OpFileRead, vfs.OpFileStat, vfs.OpFileTruncate} {
						if !kinds[k] {
							t.Errorf("no %s operation was failed", k)
						}
					}
					reliability.Record(t, "replay: fail or cut power at each fs operation of a replay and its resume ("+tc.name+")",
						int(i)+1, 2*int(i)*int(ref.Records), 0)
					return
				}
				if crash == nil || !errors.Is(err, vfs.ErrInjected) {
					t.Fatalf("op %d: failure is not the injected one: %v", i, err)
				}
				kinds[at.Kind] = true
				t.Run(fmt.Sprintf("op%03d_%s", i, at.Kind), func(t *testing.T) {
					seen["restart: "+recoverReplay(t, tc, mem, src, want)]++
					seen["power cut: "+recoverReplay(t, tc, crash, src, want)]++
				})
			}
		})
	}
}

// TestReplayTornCheckpoint: every strict prefix of a checkpoint file (a
// write torn by a crash, were it not for the atomic replace) is refused by
// ReadReplayCheckpoint and by --resume, which then writes nothing.
func TestReplayTornCheckpoint(t *testing.T) {
	env := newReplayEnv(t)
	src := NewCatalogReplaySource(env.cat)
	tc := replayFaultCases[0]
	mem := tc.replayFS(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := Replay(ctx, tc.options(mem, &cancellingSource{ReplaySource: src, n: 4, cancel: cancel})); !errors.Is(err, ErrReplayInterrupted) {
		t.Fatalf("first run: %v", err)
	}
	good, err := vfs.ReadFile(mem, tc.cpPath())
	if err != nil {
		t.Fatal(err)
	}
	out, err := vfs.ReadFile(mem, tc.out)
	if err != nil {
		t.Fatal(err)
	}
	// The last byte is the newline after the JSON: without it the file is
	// still whole.
	for n := range len(good) - 1 {
		if err := vfs.WriteFileAtomic(mem, tc.cpPath(), good[:n]); err != nil {
			t.Fatal(err)
		}
		if cp, err := ReadReplayCheckpointFS(mem, tc.cpPath()); err == nil || errors.Is(err, ErrNoReplayCheckpoint) {
			t.Fatalf("%d of %d bytes: read as %+v, %v", n, len(good), cp, err)
		}
		o := tc.options(mem, src)
		o.Resume = true
		if _, err := Replay(context.Background(), o); err == nil || !strings.Contains(err.Error(), tc.cpPath()) {
			t.Fatalf("%d of %d bytes: resume gave %v, want an error naming the checkpoint", n, len(good), err)
		}
		if got, err := vfs.ReadFile(mem, tc.out); err != nil || string(got) != string(out) {
			t.Fatalf("%d of %d bytes: refused resume changed the output (%v)", n, len(good), err)
		}
	}
}
