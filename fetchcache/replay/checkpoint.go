package replay

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/tiered/tiered/localtier/vfs"
)

// ReplayRange is one partition's part of a replay.
type ReplayRange struct {
	Partition int32 `json:"partition"`
	Start     int64 `json:"start"` // offset for From
	End       int64 `json:"end"`   // offset for To (exclusive)
	Next      int64 `json:"next"`  // next offset to deliver; End when done
}

// ReplayCheckpoint is the checkpoint file (JSON).
type ReplayCheckpoint struct {
	Version int    `json:"version"`
	Topic   string `json:"topic"`
	// TopicID is the topic ID (Kafka's string form) the replay started
	// on, left out when the source knew none (a topic without IDs, or a
	// checkpoint written before IDs were recorded: then a resume cannot
	// tell a re-created topic from the same one). A resume refuses a
	// source whose topic now has another ID (ErrTopicRecreated).
	TopicID   string       `json:"topic_id,omitempty"`
	Partition int32        `json:"partition"` // -1: all partitions
	From      int64        `json:"from_ms"`
	To        int64        `json:"to_ms"`
	Format    ReplayFormat `json:"format"`
	// OutputBytes is the output size that Ranges' Next offsets correspond
	// to: resume truncates the output file to it.
	OutputBytes int64         `json:"output_bytes"`
	Records     int64         `json:"records"`
	BatchBytes  int64         `json:"batch_bytes"`
	Complete    bool          `json:"complete"`
	Ranges      []ReplayRange `json:"ranges"`
}

// ReadReplayCheckpoint reads a checkpoint file; a missing file wraps
// ErrNoReplayCheckpoint.
func ReadReplayCheckpoint(path string) (*ReplayCheckpoint, error) {
	return ReadReplayCheckpointFS(vfs.Default, path)
}

// ReadReplayCheckpointFS is ReadReplayCheckpoint on fsys.
func ReadReplayCheckpointFS(fsys vfs.FS, path string) (*ReplayCheckpoint, error) {
	data, err := vfs.ReadFile(fsys, path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w at %s", ErrNoReplayCheckpoint, path)
	}
	if err != nil {
		return nil, fmt.Errorf("read checkpoint: %w", err)
	}
	var cp ReplayCheckpoint
	if err := json.Unmarshal(data, &cp); err != nil {
		return nil, fmt.Errorf("checkpoint %s is not a replay checkpoint: %w", path, err)
	}
	if cp.Version != replayCheckpointVersion {
		return nil, fmt.Errorf("checkpoint %s has version %d, want %d", path, cp.Version, replayCheckpointVersion)
	}
	for _, r := range cp.Ranges {
		if r.Start < 0 || r.Start > r.End || r.Next < r.Start || r.Next > r.End {
			return nil, fmt.Errorf("checkpoint %s: partition %d has an inconsistent range (start %d, next %d, end %d)", path, r.Partition, r.Start, r.Next, r.End)
		}
	}
	if cp.OutputBytes < 0 {
		return nil, fmt.Errorf("checkpoint %s: negative output size", path)
	}
	return &cp, nil
}

// flush writes the buffer, syncs the output file and checkpoints. A failed
// write or sync of the output is final (outErr): the bytes it covered are
// not known to be on disk — after a writeback error Linux reports it once
// and marks the pages clean, so a second fsync succeeds without them — and
// no checkpoint may count them.
func (j *replayJob) flush() error {
	if j.outErr != nil {
		return j.outErr
	}
	if err := j.bw.Flush(); err != nil {
		j.outErr = fmt.Errorf("write output: %w", err)
		return j.outErr
	}
	if s := j.syncer(); s != nil {
		if err := s.Sync(); err != nil {
			j.outErr = fmt.Errorf("sync output: %w", err)
			return j.outErr
		}
	}
	j.unflushed = 0
	j.lastFlush = j.o.Now()
	return j.checkpoint()
}

// syncer is what flush fsyncs: the output file, or stdout when it is a
// regular file (a shell redirection). A pipe or a terminal cannot be
// synced: nil.
func (j *replayJob) syncer() interface{ Sync() error } {
	if j.f != nil {
		return j.f
	}
	if j.stdoutFile != nil {
		return j.stdoutFile
	}
	return nil
}

func (j *replayJob) checkpoint() error {
	if j.cpPath == "" {
		return nil
	}
	data, err := json.MarshalIndent(&j.cp, "", "  ")
	if err != nil {
		return fmt.Errorf("encode checkpoint: %w", err)
	}
	if err := vfs.WriteFileAtomic(j.o.FS, j.cpPath, append(data, '\n')); err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
	}
	return nil
}

// openResumed truncates the output file to the checkpointed size.
func (j *replayJob) openResumed() error {
	if j.o.OutPath == "" {
		return nil
	}
	flag := os.O_WRONLY
	if j.cp.OutputBytes == 0 {
		// The checkpoint keeps none of the output: the file may be
		// missing, as after a crash between the first checkpoint and
		// the creation of the output.
		flag |= os.O_CREATE
	}
	f, err := j.openOutput(flag)
	if err != nil {
		return fmt.Errorf("open output to resume: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("open output to resume: %w", err)
	}
	if fi.Size() < j.cp.OutputBytes {
		f.Close()
		return fmt.Errorf("output %s is %d bytes but checkpoint %s records %d: the output was changed or lost; start without --resume", j.o.OutPath, fi.Size(), j.cpPath, j.cp.OutputBytes)
	}
	if err := f.Truncate(j.cp.OutputBytes); err != nil {
		f.Close()
		return fmt.Errorf("truncate output to the checkpoint: %w", err)
	}
	if _, err := f.Seek(j.cp.OutputBytes, io.SeekStart); err != nil {
		f.Close()
		return fmt.Errorf("seek output: %w", err)
	}
	j.f = f
	return nil
}

// openOutput opens the output file. When flag may create it, its directory
// is synced, so a checkpoint never counts bytes of a file a crash can lose.
func (j *replayJob) openOutput(flag int) (vfs.File, error) {
	f, err := j.o.FS.OpenFile(j.o.OutPath, flag, 0o644)
	if err != nil {
		return nil, err
	}
	if flag&os.O_CREATE != 0 {
		if err := j.o.FS.SyncDir(filepath.Dir(j.o.OutPath)); err != nil {
			return nil, errors.Join(err, f.Close())
		}
	}
	return f, nil
}
