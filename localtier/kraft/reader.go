package kraft

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"

	"github.com/tiered/tiered/localtier/vfs"
)

// Reader follows a metadata partition directory: each Read applies only what was appended
// since the last one (the bytes after the last whole batch of the segment it stopped in, and
// the segments after it), and replays from the snapshot again only when the directory
// changed in a way appending does not explain — a newer snapshot, a segment gone or shorter
// than read. A live broker's metadata log is read at the cost of its growth, not its size.
// Safe for concurrent use; the Image it returns is its own and changes on the next Read.
type Reader struct {
	fs  vfs.FS
	dir string

	mu       sync.Mutex
	im       *Image
	snapshot string
	segs     []readSeg // segments read, in order
	replays  int
}

// Replays is how many times Read replayed the directory from its snapshot (or start).
func (r *Reader) Replays() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.replays
}

type readSeg struct {
	name string
	pos  int64 // bytes of whole batches applied
	// The last batch applied: its position and CRC, checked before reading on (a segment
	// truncated and written again past the position read is not an append).
	lastPos  int64
	lastCRC  uint32
	hasBatch bool
}

// NewReader returns a Reader of dir (a __cluster_metadata-0 directory); fsys nil is the OS
// filesystem.
func NewReader(fsys vfs.FS, dir string) *Reader {
	if fsys == nil {
		fsys = vfs.Default
	}
	return &Reader{fs: fsys, dir: dir}
}

// Read brings the image up to date and calls fn with it (fn must not keep it: the next
// Read changes it).
func (r *Reader) Read(fn func(*Image) error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	snap, snapEnd, segs, err := Files(r.fs, r.dir)
	if err != nil {
		return err
	}
	if r.im == nil || snap != r.snapshot || !r.appendOnly(segs) {
		if err := r.replay(snap, snapEnd); err != nil {
			r.im = nil
			return err
		}
	}
	if err := r.follow(segs, max(snapEnd, 0)); err != nil {
		r.im = nil // start over next time: the state is partly applied
		return err
	}
	return fn(r.im)
}

// appendOnly reports whether the segments read are still there, in order, at least as long
// as read.
func (r *Reader) appendOnly(segs []string) bool {
	if len(segs) < len(r.segs) {
		return false
	}
	for i, s := range r.segs {
		if segs[i] != s.name {
			return false
		}
		fi, err := r.fs.Stat(filepath.Join(r.dir, s.name))
		if err != nil || fi.Size() < s.pos {
			return false
		}
		if i == len(r.segs)-1 && s.hasBatch && !r.sameBatch(s) {
			return false
		}
	}
	return true
}

// sameBatch reports whether segment s still holds, at its last batch's position, a batch
// with that CRC (an earlier segment is never written again).
func (r *Reader) sameBatch(s readSeg) bool {
	f, err := r.fs.Open(filepath.Join(r.dir, s.name))
	if err != nil {
		return false
	}
	defer f.Close()
	var hdr [21]byte // base offset 8, length 4, leader epoch 4, magic 1, crc 4
	if _, err := f.ReadAt(hdr[:], s.lastPos); err != nil {
		return false
	}
	return binary.BigEndian.Uint32(hdr[17:]) == s.lastCRC
}

func (r *Reader) replay(snap string, snapEnd int64) error {
	r.im, r.snapshot, r.segs = NewImage(), snap, nil
	r.replays++
	if snap == "" {
		return nil
	}
	r.im.SnapshotEnd, r.im.NextOffset = snapEnd, snapEnd
	return r.im.readFile(r.fs, filepath.Join(r.dir, snap), Snapshot, false)
}

// follow applies what each segment holds past the position read.
func (r *Reader) follow(segs []string, from int64) error {
	for i, name := range segs {
		if i == len(r.segs) {
			r.segs = append(r.segs, readSeg{name: name})
		}
		s := &r.segs[i]
		path := filepath.Join(r.dir, name)
		data, err := readFrom(r.fs, path, s.pos)
		if err != nil {
			return fmt.Errorf("read metadata log: %w", err)
		}
		tail, err := r.im.applyBatchesAt(path, data, s.pos, from, i == len(segs)-1)
		if err != nil {
			return err
		}
		s.pos += int64(tail.n)
		if tail.hasBatch {
			s.lastPos, s.lastCRC, s.hasBatch = tail.lastPos, tail.lastCRC, true
		}
	}
	return nil
}

// readFrom reads path from byte pos to its end.
func readFrom(fsys vfs.FS, path string, pos int64) ([]byte, error) {
	f, err := fsys.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() <= pos {
		return nil, nil
	}
	data := make([]byte, fi.Size()-pos)
	n, err := f.ReadAt(data, pos)
	if errors.Is(err, io.EOF) {
		err = nil // shorter than stat said: read what is there
	}
	return data[:n], err
}
