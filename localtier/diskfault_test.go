package localtier

import (
	"errors"
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/tiered/tiered/internal/testkit/reliability"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/localtier/vfs"
)

// Disk-fault tests of a whole data dir: recovery of an uncleanly stopped
// dir, appends across rolls, flushes and the checkpoint writes of
// LogDir.Close, with each filesystem operation failed in turn (pebble's
// errorfs sweep) and with the disk running full after N bytes.
//
// "Acknowledged" follows Kafka's durability contract. A record is
// acknowledged when it is durable by the log's own account:
//   - flush.messages=1: Append returned AppendInfo.Durable (it fsynced
//     before returning);
//   - default flush.messages (never by count, flush.ms never due on the
//     test's frozen clock): a LogDir.Flush or LogDir.Close that returned
//     nil after the Append.
//
// An acknowledged record must survive a power loss (MemFS.CrashClone keeps
// only synced data). A record whose Append merely returned nil must
// survive a process restart (the files as they are). Whatever survives is
// always a prefix of what was appended, with the recovered log readable
// end to end.

const (
	dfDir        = "/data"
	dfTopic      = "t"
	dfParts      = 2
	dfBaseRounds = 4 // batches per partition written before the unclean stop
	dfRounds     = 8 // batches per partition the workload appends
	dfPerBatch   = 3
)

var dfClock = &fakeClock{t: time.UnixMilli(1_700_000_000_000)}

// dfModes are the durability settings each sweep runs under.
var dfModes = []struct {
	name      string
	overrides map[string]string
}{
	{"flush.messages=1", map[string]string{"flush.messages": "1"}},
	{"default flush", nil},
}

// dfBatch is a batch of dfPerBatch records whose values name partition,
// round and record, so survivors can be compared by content.
func dfBatch(t testing.TB, p, round int) ([]byte, []string) {
	t.Helper()
	recs := make([]record.Record, dfPerBatch)
	vals := make([]string, dfPerBatch)
	for i := range recs {
		vals[i] = fmt.Sprintf("p%d-r%d-%d-%0300d", p, round, i, 0)
		recs[i] = record.Record{Offset: int64(i), Timestamp: dfClock.t.UnixMilli(), Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(vals[i])}
	}
	var e record.Encoder
	b, err := e.AppendBatch(nil, record.NewBatchSpec(0, 0), recs)
	if err != nil {
		t.Fatal(err)
	}
	return b, vals
}

// dfImage is a data dir left by a process that flushed its logs but never
// wrote a checkpoint or closed them: opening it runs recovery over every
// segment. It returns the image and the values each partition holds.
func dfImage(t testing.TB, overrides map[string]string) (*vfs.MemFS, [][]string) {
	t.Helper()
	cfg := map[string]string{"internal.segment.bytes": "3000", "index.interval.bytes": "500"}
	for k, v := range overrides {
		cfg[k] = v
	}
	mem := vfs.NewMem()
	d, _, err := OpenLogDir(mem, dfDir, LogDirOptions{Now: dfClock.Now})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.CreateTopic(dfTopic, dfParts, cfg); err != nil {
		t.Fatal(err)
	}
	base := make([][]string, dfParts)
	for r := 0; r < dfBaseRounds; r++ {
		for p := 0; p < dfParts; p++ {
			l, _ := d.Partition(dfTopic, int32(p))
			b, vals := dfBatch(t, p, -1-r)
			if _, err := l.Append(b); err != nil {
				t.Fatal(err)
			}
			base[p] = append(base[p], vals...)
		}
	}
	for p := 0; p < dfParts; p++ {
		l, _ := d.Partition(dfTopic, int32(p))
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	img := mem.CrashClone() // the process stops here: no close, no checkpoint
	_ = d.Close()
	return img, base
}

// dfState is what the workload appended and what it had acknowledged.
type dfState struct {
	attempted [][]string // values offered to Append, per partition, in order
	appended  []int      // leading attempted values whose Append returned nil
	acked     []int      // leading attempted values acknowledged durable
}

func newDFState() *dfState {
	return &dfState{attempted: make([][]string, dfParts), appended: make([]int, dfParts), acked: make([]int, dfParts)}
}

func (s *dfState) ackAll() { copy(s.acked, s.appended) }

func (s *dfState) ackedCopy() []int { return slices.Clone(s.acked) }

// dfWorkload opens the dir (recovery), appends dfRounds batches to each
// partition, flushing every third round under the default policy, and
// closes the dir (flush, producer snapshots, checkpoints). retry, when not
// nil, is called with an Append error that wrote nothing; if it returns
// true the append is tried once more (the operator freed space).
func dfWorkload(t testing.TB, fsys vfs.FS, flushByCount bool, st *dfState, retry func(error) bool) (err error) {
	d, _, err := OpenLogDir(fsys, dfDir, LogDirOptions{Now: dfClock.Now})
	if err != nil {
		return err
	}
	defer func() {
		cerr := d.Close()
		if err == nil && cerr == nil {
			st.ackAll() // Close flushed everything
		}
		err = errors.Join(err, cerr)
	}()
	for r := 0; r < dfRounds; r++ {
		for p := 0; p < dfParts; p++ {
			l, err := d.Partition(dfTopic, int32(p))
			if err != nil {
				return err
			}
			b, vals := dfBatch(t, p, r)
			st.attempted[p] = append(st.attempted[p], vals...)
			info, err := l.Append(b)
			if err != nil && info.Records == 0 && retry != nil && retry(err) {
				b, _ = dfBatch(t, p, r)
				info, err = l.Append(b)
			}
			if err != nil {
				return err
			}
			st.appended[p] = len(st.attempted[p])
			if info.Durable {
				st.acked[p] = st.appended[p]
			} else if flushByCount {
				t.Fatalf("flush.messages=1 but append of round %d to partition %d is not durable", r, p)
			}
		}
		if !flushByCount && r%3 == 2 {
			if err := d.Flush(); err != nil {
				return err
			}
			st.ackAll()
		}
	}
	return nil
}

// dfCheck opens the dir on fsys and checks that each partition holds its
// base values followed by a prefix of the attempted ones at least need[p]
// long, readable end to end with contiguous offsets. With more set, it
// then appends one more batch per partition, closes, reopens and checks
// that batch is there: the dir recovered into a writable state. It
// returns the records compared and the acknowledged ones missing.
func dfCheck(t testing.TB, what string, fsys vfs.FS, base [][]string, st *dfState, need []int, more bool) (checked, lost int) {
	t.Helper()
	d, _, err := OpenLogDir(fsys, dfDir, LogDirOptions{Now: dfClock.Now})
	if err != nil {
		t.Fatalf("%s: reopen: %v", what, err)
	}
	defer func() {
		if d != nil {
			_ = d.Close()
		}
	}()
	for p := 0; p < dfParts; p++ {
		l, err := d.Partition(dfTopic, int32(p))
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		recs := readAll(t, l)
		if int64(len(recs)) != l.LogEndOffset()-l.LogStartOffset() {
			t.Fatalf("%s: partition %d: %d records readable, offsets [%d, %d)", what, p, len(recs), l.LogStartOffset(), l.LogEndOffset())
		}
		got := make([]string, len(recs))
		for i, r := range recs {
			if r.Offset != int64(i) {
				t.Fatalf("%s: partition %d: record %d has offset %d", what, p, i, r.Offset)
			}
			got[i] = string(r.Value)
		}
		want := append(slices.Clone(base[p]), st.attempted[p]...)
		n := len(base[p]) + need[p]
		checked += n
		for i := 0; i < min(n, len(got)); i++ {
			if got[i] != want[i] {
				lost++
			}
		}
		if len(got) < n {
			lost += n - len(got)
		}
		if lost > 0 {
			t.Errorf("%s: partition %d: %d of %d acknowledged records lost (%d records survive)", what, p, lost, n, len(got))
			return checked, lost
		}
		if len(got) > len(want) || !slices.Equal(got, want[:len(got)]) {
			t.Fatalf("%s: partition %d: the %d records are not a prefix of the %d appended", what, p, len(got), len(want))
		}
	}
	if !more {
		return checked, lost
	}
	for p := 0; p < dfParts; p++ {
		l, _ := d.Partition(dfTopic, int32(p))
		b, _ := dfBatch(t, p, 99)
		if _, err := l.Append(b); err != nil {
			t.Fatalf("%s: append after recovery: %v", what, err)
		}
	}
	err = d.Close()
	d = nil
	if err != nil {
		t.Fatalf("%s: close after recovery: %v", what, err)
	}
	d2, _, err := OpenLogDir(fsys, dfDir, LogDirOptions{Now: dfClock.Now})
	if err != nil {
		t.Fatalf("%s: second reopen: %v", what, err)
	}
	defer d2.Close()
	for p := 0; p < dfParts; p++ {
		l, _ := d2.Partition(dfTopic, int32(p))
		recs := readAll(t, l)
		_, vals := dfBatch(t, p, 99)
		if len(recs) < len(vals) || string(recs[len(recs)-1].Value) != vals[len(vals)-1] {
			t.Fatalf("%s: partition %d: the batch appended after recovery is not at the end", what, p)
		}
	}
	return checked, lost
}

// TestDiskInjectedErrorsLogDir extends TestInjectedErrors (one log) and
// TestDeleteSegmentsInjectedErrors (retention deletion) to a data dir:
// recovery, appends across rolls, flushes and the checkpoint writes of
// Close, failing operation i for i = 0, 1, 2, ... until the workload
// passes. Every failure must be the injected one. At the failure, power is
// cut (CrashClone): the acknowledged records survive. After the workload,
// the process restarts on the files as they are: every appended record
// survives. Both recovered dirs accept and keep new appends.
//
// The "open-file table" variants run the workload through a FileTable of
// dfTableFiles descriptors, so that files are closed and reopened between
// operations: the sweep then fails every reopen and every sync and close of
// an eviction too.
func TestDiskInjectedErrorsLogDir(t *testing.T) {
	for _, mode := range dfModes {
		for _, tableFiles := range []int{0, dfTableFiles} {
			name := mode.name
			if tableFiles > 0 {
				name += fmt.Sprintf(", open-file table of %d", tableFiles)
			}
			t.Run(name, func(t *testing.T) { diskInjectedErrorsLogDir(t, mode.overrides, tableFiles, name) })
		}
	}
}

// dfTableFiles is the open-file table of the sweep's table variants.
const dfTableFiles = 3

func diskInjectedErrorsLogDir(t *testing.T, overrides map[string]string, tableFiles int, name string) {
	img, base := dfImage(t, overrides)
	flushByCount := overrides != nil
	runs, checked, lost, readsAbsorbed, reopensFailed := 0, 0, 0, 0, int64(0)
	for i := int64(0); ; i++ {
		mem := img.CrashClone()
		st := newDFState()
		var crash *vfs.MemFS
		var ackedAtCrash []int
		var firedOp vfs.Op
		var n int64
		written := map[string]bool{}
		efs := vfs.NewErrorFS(mem, vfs.InjectorFunc(func(op vfs.Op) error {
			switch op.Kind {
			case vfs.OpFileWrite, vfs.OpFileWriteAt, vfs.OpFileTruncate:
				written[op.Path] = true
			case vfs.OpCreate:
				// Through the table, what a close can lose is what was
				// written and not synced; an open with O_CREATE writes
				// no data (its directory entry is the SyncDir's).
				if tableFiles == 0 {
					written[op.Path] = true
				}
			case vfs.OpFileClose:
				if !written[op.Path] {
					// Closing a descriptor only read from: its
					// error carries nothing to lose, and readers
					// rightly ignore it. Not a fault point.
					return nil
				}
			}
			n++
			if tableFiles > 0 && op.Kind == vfs.OpFileSync && n-1 != i {
				// Through the table, a descriptor closed with nothing
				// unsynced loses nothing either (the table drops that
				// close's error): a sync that succeeded clears written.
				defer delete(written, op.Path)
			}
			if n-1 == i {
				crash, ackedAtCrash, firedOp = mem.CrashClone(), st.ackedCopy(), op
				return fmt.Errorf("%w at op %d (%s)", vfs.ErrInjected, i, op)
			}
			return nil
		}))
		var fsys vfs.FS = efs
		var table *FileTable
		if tableFiles > 0 {
			table = NewFileTable(tableFiles)
			fsys = table.FS(efs)
		}
		err := dfWorkload(t, fsys, flushByCount, st, nil)
		if table != nil {
			reopensFailed += table.Stats().Failed
		}
		if err != nil && !errors.Is(err, vfs.ErrInjected) {
			t.Fatalf("op %d: failure is not the injected one: %v", i, err)
		}
		runs++
		if crash != nil {
			c, l := dfCheck(t, fmt.Sprintf("op %d, power cut", i), crash, base, st, ackedAtCrash, true)
			checked, lost = checked+c, lost+l
		}
		c, l := dfCheck(t, fmt.Sprintf("op %d, power cut after the workload", i), mem.CrashClone(), base, st, st.acked, false)
		checked, lost = checked+c, lost+l
		c, l = dfCheck(t, fmt.Sprintf("op %d, restart", i), mem, base, st, st.appended, true)
		checked, lost = checked+c, lost+l
		if t.Failed() {
			break
		}
		if err == nil && crash != nil {
			// A failed read that the engine answers by recovering
			// the segment from scratch (openSegment's tail scan
			// falls back to a full, CRC-checked recovery) changes
			// nothing and loses nothing, as the checks above show.
			// Any other swallowed error is a bug.
			// Through the table, a failed reopen for such a read is
			// the same failed read.
			absorbable := firedOp.Kind == vfs.OpFileReadAt || firedOp.Kind == vfs.OpFileRead ||
				(table != nil && firedOp.Kind == vfs.OpOpen && table.Stats().Failed > 0)
			if !absorbable {
				t.Fatalf("op %d (%s) was injected but the workload reported success: an error was swallowed", i, firedOp)
			}
			readsAbsorbed++
			continue
		}
		if err == nil {
			t.Logf("workload succeeded once op %d was past its %d operations (%d failed reads absorbed by a full recovery, %d failed reopens)", i, n, readsAbsorbed, reopensFailed)
			break
		}
	}
	if tableFiles > 0 && reopensFailed == 0 {
		t.Fatal("no injected failure reached a reopen of the open-file table")
	}
	reliability.Record(t, "disk: fail each fs operation (recovery, append, roll, flush, checkpoint), "+name, runs, checked, lost)
}

// TestDiskFullAppend runs the workload with the disk full after N bytes,
// for N from 0 past what the workload writes. Every failure is ENOSPC
// (errors.Is, through *os.PathError). One variant stops at the first error
// (the process gives up); in the other the operator frees space and the
// same process retries the refused append, which must then succeed and
// leave a log with no gap or duplicate. Acknowledged records survive a
// power cut afterwards; appended ones survive a restart.
func TestDiskFullAppend(t *testing.T) {
	for _, mode := range dfModes {
		t.Run(mode.name, func(t *testing.T) {
			img, base := dfImage(t, mode.overrides)
			flushByCount := mode.overrides != nil
			// How much the workload writes with room to spare.
			probe := vfs.NewDiskFull(img.CrashClone(), -1)
			if err := dfWorkload(t, probe, flushByCount, newDFState(), nil); err != nil {
				t.Fatal(err)
			}
			total := probe.Written()
			step := max(total/40, 1)
			runs, checked, lost, refusals := 0, 0, 0, 0
			for _, freeSpace := range []bool{false, true} {
				for budget := int64(0); budget <= total; budget += step {
					mem := img.CrashClone()
					full := vfs.NewDiskFull(mem, budget)
					st := newDFState()
					var retry func(error) bool
					if freeSpace {
						retry = func(err error) bool {
							if !errors.Is(err, syscall.ENOSPC) {
								t.Errorf("budget %d: append failed with %v, not ENOSPC", budget, err)
								return false
							}
							full.SetBudget(-1)
							return true
						}
					}
					err := dfWorkload(t, full, flushByCount, st, retry)
					if err != nil && !errors.Is(err, syscall.ENOSPC) {
						t.Fatalf("budget %d: failure is not ENOSPC: %v", budget, err)
					}
					if err == nil && full.Refused() > 0 && !freeSpace {
						t.Fatalf("budget %d: %d writes hit ENOSPC but the workload reported success", budget, full.Refused())
					}
					if full.Refused() > 0 {
						refusals++
					}
					runs++
					what := fmt.Sprintf("budget %d of %d (free space %v)", budget, total, freeSpace)
					c, l := dfCheck(t, what+", power cut", mem.CrashClone(), base, st, st.acked, true)
					checked, lost = checked+c, lost+l
					c, l = dfCheck(t, what+", restart", mem, base, st, st.appended, true)
					checked, lost = checked+c, lost+l
					if freeSpace && err == nil && st.appended[0] != len(st.attempted[0]) {
						t.Fatalf("%s: workload passed but not every append did", what)
					}
					if t.Failed() {
						return
					}
				}
			}
			if refusals == 0 {
				t.Fatal("no budget made the disk run full")
			}
			reliability.Record(t, "disk: ENOSPC during append/roll/checkpoint, "+mode.name, runs, checked, lost)
		})
	}
}
