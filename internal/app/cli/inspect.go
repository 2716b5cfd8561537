package cli

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tiered/tiered/internal/x/recordjson"
	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/index"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/localtier/vfs"
)

var inspectSegmentCmd = &command{
	name:    "inspect segment",
	summary: "dump and check a .log segment file",
	help: `usage: tiered inspect segment FILE [--json] [--no-records]

Prints every batch of a Kafka log segment (or any file of back-to-back record batches)
with its fields, then each of its records, checking framing, CRC and record encoding as
it goes. Batch fields, named like Kafka's DumpLogSegments: baseOffset lastOffset count
position size magic compresscodec crc isvalid, CreateTime/LogAppendTime (max timestamp)
baseTimestamp, producerId producerEpoch baseSequence lastSequence partitionLeaderEpoch
isTransactional isControl deleteHorizonMs; control batches add "control type N (name)"
(0 abort, 1 commit, 2 leader change, 3 snapshot header, 4 snapshot footer, 5 kraft
version, 6 kraft voters). Record lines start with "|": offset, timestamp, key and value
sizes, header keys, then key and payload (quoted text, or b64:... for binary).
Legacy magic 0/1 messages are shown too, compressed wrappers expanded.

If a batch fails framing, CRC or decoding, the good batches before it are printed, then
one line on stderr names the file and byte position, and the exit status is 1.

Flags:
  --json          print a JSON report instead: {"file", "size", "batches": [...], "valid_bytes",
                  "batch_count", "record_count", "error"}, records as consume prints them
  --no-records    print batches only

Example:
  tiered inspect segment data/orders-0/00000000000000000000.log
`,
	run: runInspectSegment,
}

var inspectIndexCmd = &command{
	name:    "inspect index",
	summary: "dump and check a .index, .timeindex or .txnindex file",
	help: `usage: tiered inspect index FILE [--json]

Prints the entries of an index file; the type comes from the name (<20-digit base
offset>.index, .timeindex or .txnindex) and so does the base offset. Offset index
entries print as "offset: O position: P", time index entries as "timestamp: T offset: O",
transaction index entries as "producerId: P firstOffset: F lastOffset: L lastStableOffset: S".
Unwritten (zero) preallocated space at the end is ignored, as Kafka does.

If the index fails Kafka's sanity checks (length not a whole number of entries, offsets not
increasing, ...), the entries are printed, then one line on stderr says why, and the exit
status is 1.

Flags:
  --json    print a JSON report: {"file", "type", "base_offset", "entries": [...], "error"}

Example:
  tiered inspect index data/orders-0/00000000000000000000.timeindex
`,
	run: runInspectIndex,
}

func oneFile(pos []string) (string, error) {
	switch len(pos) {
	case 0:
		return "", usagef("missing FILE argument")
	case 1:
		return pos[0], nil
	default:
		return "", usagef("unexpected argument %q: give one FILE", pos[1])
	}
}

func runInspectSegment(r *Runner, _ context.Context, args []string) error {
	fs := newFlags("inspect segment")
	asJSON := fs.Bool("json", false, "")
	noRecords := fs.Bool("no-records", false, "")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	path, err := oneFile(pos)
	if err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.IsDir() {
		return fmt.Errorf("%s is a directory, not a segment file", path)
	}
	w := bufio.NewWriterSize(r.Stdout, 64<<10)
	ins := &segInspector{w: w, path: path, json: *asJSON, records: !*noRecords}
	scanErr := ins.run(f, st.Size())
	if err := w.Flush(); err != nil {
		return fmt.Errorf("write stdout: %w", err)
	}
	return scanErr
}

// segInspector prints the batches of one file.
type segInspector struct {
	w       *bufio.Writer
	path    string
	json    bool
	records bool
	dec     record.Decoder
	batches int
	recs    int
	buf     []byte
}

// readBatch reads the batch at pos of f (size bytes long), checking it.
func (s *segInspector) readBatch(f io.ReaderAt, pos, size int64) (record.Batch, error) {
	left := size - pos
	var hdr [record.LogOverhead + 5]byte // offset, length, epoch/crc, magic
	if left < int64(len(hdr)) {
		return nil, &record.CorruptError{File: s.path, Pos: pos, Offset: -1,
			Reason: fmt.Sprintf("truncated batch header: %d bytes left at the end of the file", left)}
	}
	if _, err := f.ReadAt(hdr[:], pos); err != nil {
		return nil, fmt.Errorf("read %s at %d: %w", s.path, pos, err)
	}
	length := int64(int32(binary.BigEndian.Uint32(hdr[8:])))
	n := length + record.LogOverhead
	if length < 0 || n <= int64(len(hdr)) {
		// Let the iterator name the framing problem.
		it := record.NewIter(hdr[:])
		it.Next()
		if err := it.Err(); err != nil {
			return nil, record.WithFile(err, s.path, pos)
		}
	}
	if n > left {
		return nil, &record.CorruptError{File: s.path, Pos: pos, Offset: int64(binary.BigEndian.Uint64(hdr[:])),
			Reason: fmt.Sprintf("truncated batch: its length says %d bytes, the file has %d left", n, left)}
	}
	if int64(cap(s.buf)) < n {
		s.buf = make([]byte, n)
	}
	buf := s.buf[:n]
	if _, err := f.ReadAt(buf, pos); err != nil {
		return nil, fmt.Errorf("read %s at %d: %w", s.path, pos, err)
	}
	it := record.NewIter(buf)
	it.Verify = true
	b, ok := it.Next()
	if !ok {
		if err := it.Err(); err != nil {
			return nil, record.WithFile(err, s.path, pos)
		}
		return nil, &record.CorruptError{File: s.path, Pos: pos, Offset: -1, Reason: "truncated batch"}
	}
	return b, nil
}

func (s *segInspector) run(f io.ReaderAt, size int64) error {
	base, _, named := localtier.ParseSegmentName(filepath.Base(s.path))
	if s.json {
		fmt.Fprintf(s.w, "{\"file\":%s,\"size\":%d,", quoteJSON(s.path), size)
		if named {
			fmt.Fprintf(s.w, "\"base_offset\":%d,", base)
		}
		s.w.WriteString("\"batches\":[")
	} else {
		fmt.Fprintf(s.w, "Dumping %s\n", s.path)
		if named {
			fmt.Fprintf(s.w, "Log starting offset: %d\n", base)
		}
	}
	var pos int64
	var scanErr error
	for pos < size {
		b, err := s.readBatch(f, pos, size)
		if err != nil {
			scanErr = err
			break
		}
		recs, err := s.dec.Records(b)
		if err != nil {
			s.printBatch(b, pos, nil)
			scanErr = record.WithFile(err, s.path, pos)
			break
		}
		s.printBatch(b, pos, recs)
		pos += int64(b.Size())
	}
	if s.json {
		fmt.Fprintf(s.w, "\n],\"valid_bytes\":%d,\"batch_count\":%d,\"record_count\":%d,\"error\":", pos, s.batches, s.recs)
		if scanErr != nil {
			s.w.WriteString(quoteJSON(scanErr.Error()))
		} else {
			s.w.WriteString("null")
		}
		s.w.WriteString("}\n")
	} else {
		fmt.Fprintf(s.w, "Summary: %d batches, %d records, %d valid bytes of %d\n", s.batches, s.recs, pos, size)
	}
	return scanErr
}

// batchJSON is one batch of the --json report.
type batchJSON struct {
	BaseOffset           int64             `json:"base_offset"`
	LastOffset           int64             `json:"last_offset"`
	Count                int               `json:"count"`
	Position             int64             `json:"position"`
	Size                 int               `json:"size"`
	Magic                int8              `json:"magic"`
	Codec                string            `json:"codec"`
	CRC                  uint32            `json:"crc"`
	CRCValid             bool              `json:"crc_valid"`
	TimestampType        string            `json:"timestamp_type"`
	BaseTimestamp        int64             `json:"base_timestamp"`
	MaxTimestamp         int64             `json:"max_timestamp"`
	DeleteHorizonMs      int64             `json:"delete_horizon_ms"`
	ProducerID           int64             `json:"producer_id"`
	ProducerEpoch        int16             `json:"producer_epoch"`
	BaseSequence         int32             `json:"base_sequence"`
	LastSequence         int32             `json:"last_sequence"`
	PartitionLeaderEpoch int32             `json:"partition_leader_epoch"`
	IsTransactional      bool              `json:"is_transactional"`
	IsControl            bool              `json:"is_control"`
	ControlType          *int16            `json:"control_type,omitempty"`
	ControlTypeName      string            `json:"control_type_name,omitempty"`
	Records              []json.RawMessage `json:"records,omitempty"`
	DecodeError          string            `json:"decode_error,omitempty"`
}

func timestampType(b record.Batch) string {
	switch {
	case b.Magic() == 0:
		return "NoTimestampType"
	case b.LogAppendTime():
		return "LogAppendTime"
	default:
		return "CreateTime"
	}
}

func lastSequence(b record.Batch) int32 {
	if b.IsLegacy() || b.BaseSequence() < 0 {
		return -1
	}
	// Sequences wrap at MaxInt32, as in Kafka's DefaultRecordBatch.
	return int32((int64(b.BaseSequence()) + int64(b.LastOffsetDelta())) % (1 << 31))
}

func controlText(t int16) string {
	name := record.ControlTypeName(t)
	if strings.HasPrefix(name, "control type") {
		return fmt.Sprintf("control type %d", t)
	}
	return fmt.Sprintf("control type %d (%s)", t, name)
}

// controlType is the type of a control record, ok false if its key is bad.
func controlType(r *record.Record) (int16, bool) {
	_, t, err := record.ParseControlKey(r.Key)
	return t, err == nil
}

// printBatch prints b at pos; recs nil means its records did not decode.
func (s *segInspector) printBatch(b record.Batch, pos int64, recs []record.Record) {
	s.batches++
	s.recs += len(recs)
	bj := batchJSON{
		BaseOffset: b.BaseOffset(), LastOffset: b.LastOffset(), Count: int(b.RecordCount()), Position: pos, Size: b.Size(),
		Magic: b.Magic(), Codec: b.Codec().String(), CRC: b.CRC(), CRCValid: b.VerifyCRC() == nil,
		TimestampType: timestampType(b), BaseTimestamp: b.BaseTimestamp(), MaxTimestamp: b.MaxTimestamp(),
		DeleteHorizonMs: b.DeleteHorizon(), ProducerID: b.ProducerID(), ProducerEpoch: b.ProducerEpoch(),
		BaseSequence: b.BaseSequence(), LastSequence: lastSequence(b), PartitionLeaderEpoch: b.PartitionLeaderEpoch(),
		IsTransactional: b.IsTransactional(), IsControl: b.IsControl(),
	}
	if b.IsLegacy() {
		bj.BaseTimestamp = b.MaxTimestamp()
		if len(recs) > 0 {
			bj.BaseOffset = recs[0].Offset
			bj.Count = len(recs)
		}
	}
	if recs == nil {
		bj.DecodeError = "records do not decode"
	}
	if b.IsControl() && len(recs) > 0 {
		if t, ok := controlType(&recs[0]); ok {
			bj.ControlType = &t
			bj.ControlTypeName = record.ControlTypeName(t)
		}
	}
	if s.json {
		if s.records {
			for i := range recs {
				bj.Records = append(bj.Records, recordjson.AppendObject(nil, &recs[i]))
			}
		}
		if s.batches > 1 {
			s.w.WriteByte(',')
		}
		s.w.WriteString("\n")
		data, _ := json.Marshal(bj) // plain fields: cannot fail
		s.w.Write(data)
		return
	}
	w := s.w
	fmt.Fprintf(w, "baseOffset: %d lastOffset: %d count: %d baseSequence: %d lastSequence: %d producerId: %d producerEpoch: %d partitionLeaderEpoch: %d isTransactional: %t isControl: %t",
		bj.BaseOffset, bj.LastOffset, bj.Count, bj.BaseSequence, bj.LastSequence, bj.ProducerID, bj.ProducerEpoch, bj.PartitionLeaderEpoch, bj.IsTransactional, bj.IsControl)
	if bj.DeleteHorizonMs >= 0 {
		fmt.Fprintf(w, " deleteHorizonMs: %d", bj.DeleteHorizonMs)
	}
	fmt.Fprintf(w, " position: %d %s: %d baseTimestamp: %d size: %d magic: %d compresscodec: %s crc: %d isvalid: %t",
		pos, bj.TimestampType, bj.MaxTimestamp, bj.BaseTimestamp, bj.Size, bj.Magic, bj.Codec, bj.CRC, bj.CRCValid)
	if bj.ControlType != nil {
		fmt.Fprintf(w, " %s", controlText(*bj.ControlType))
	}
	w.WriteByte('\n')
	if !s.records {
		return
	}
	for i := range recs {
		rec := &recs[i]
		keySize, valSize := -1, -1
		if rec.Key != nil {
			keySize = len(rec.Key)
		}
		if rec.Value != nil {
			valSize = len(rec.Value)
		}
		fmt.Fprintf(w, "| offset: %d %s: %d keySize: %d valueSize: %d", rec.Offset, bj.TimestampType, rec.Timestamp, keySize, valSize)
		if b.IsControl() {
			t, ok := controlType(rec)
			if !ok {
				fmt.Fprintf(w, " control record with a malformed key: %s\n", quoteBytes(rec.Key))
				continue
			}
			fmt.Fprintf(w, " %s", controlText(t))
			if t == record.ControlAbort || t == record.ControlCommit {
				if v, epoch, err := record.ParseEndTxnValue(rec.Value); err == nil {
					fmt.Fprintf(w, " version: %d coordinatorEpoch: %d", v, epoch)
				}
			}
			w.WriteByte('\n')
			continue
		}
		seq := int32(-1)
		if bj.BaseSequence >= 0 {
			seq = int32((int64(bj.BaseSequence) + rec.Offset - b.BaseOffset()) % (1 << 31))
		}
		keys := make([]string, len(rec.Headers))
		for j, h := range rec.Headers {
			keys[j] = string(h.Key)
		}
		fmt.Fprintf(w, " sequence: %d headerKeys: [%s] key: %s payload: %s\n", seq, strings.Join(keys, ","), quoteBytes(rec.Key), quoteBytes(rec.Value))
	}
}

// quoteBytes renders a key or value for text output.
func quoteBytes(b []byte) string {
	switch {
	case b == nil:
		return "null"
	case utf8.Valid(b):
		return strconv.Quote(string(b))
	default:
		return "b64:" + base64.StdEncoding.EncodeToString(b)
	}
}

func quoteJSON(s string) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	return string(recordjson.AppendString(nil, s))
}

func runInspectIndex(r *Runner, _ context.Context, args []string) error {
	fs := newFlags("inspect index")
	asJSON := fs.Bool("json", false, "")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	path, err := oneFile(pos)
	if err != nil {
		return err
	}
	base, suffix, ok := localtier.ParseSegmentName(filepath.Base(path))
	kind := ""
	switch suffix {
	case localtier.IndexSuffix:
		kind = "offset"
	case localtier.TimeIndexSuffix:
		kind = "time"
	case localtier.TxnIndexSuffix:
		kind = "transaction"
	}
	if !ok || kind == "" {
		return usagef("cannot tell the index type of %s: the name must be <20-digit base offset>.index, .timeindex or .txnindex", filepath.Base(path))
	}
	if st, err := os.Stat(path); err != nil {
		return err
	} else if st.IsDir() {
		return fmt.Errorf("%s is a directory, not an index file", path)
	}
	var entries []any
	var lines []string
	var check func() error
	switch kind {
	case "offset":
		x, err := index.ReadOffsetIndex(vfs.Default, path, base)
		if err != nil {
			return err
		}
		for _, e := range x.All() {
			entries = append(entries, map[string]int64{"offset": e.Offset, "position": int64(e.Position)})
			lines = append(lines, fmt.Sprintf("offset: %d position: %d", e.Offset, e.Position))
		}
		check = x.SanityCheck
	case "time":
		x, err := index.ReadTimeIndex(vfs.Default, path, base)
		if err != nil {
			return err
		}
		for _, e := range x.All() {
			entries = append(entries, map[string]int64{"timestamp": e.Timestamp, "offset": e.Offset})
			lines = append(lines, fmt.Sprintf("timestamp: %d offset: %d", e.Timestamp, e.Offset))
		}
		check = x.SanityCheck
	case "transaction":
		x, err := index.ReadTxnIndex(vfs.Default, path, base)
		if err != nil {
			return err
		}
		for _, e := range x.All() {
			entries = append(entries, map[string]int64{"producer_id": e.ProducerID, "first_offset": e.FirstOffset, "last_offset": e.LastOffset, "last_stable_offset": e.LastStableOffset})
			lines = append(lines, fmt.Sprintf("producerId: %d firstOffset: %d lastOffset: %d lastStableOffset: %d", e.ProducerID, e.FirstOffset, e.LastOffset, e.LastStableOffset))
		}
		check = x.SanityCheck
	}
	checkErr := check()
	if *asJSON {
		rep := struct {
			File       string  `json:"file"`
			Type       string  `json:"type"`
			BaseOffset int64   `json:"base_offset"`
			Entries    []any   `json:"entries"`
			Error      *string `json:"error"`
		}{File: path, Type: kind, BaseOffset: base, Entries: entries}
		if rep.Entries == nil {
			rep.Entries = []any{}
		}
		if checkErr != nil {
			msg := checkErr.Error()
			rep.Error = &msg
		}
		if err := writeJSON(r.Stdout, rep); err != nil {
			return err
		}
	} else {
		w := bufio.NewWriter(r.Stdout)
		fmt.Fprintf(w, "Dumping %s\n", path)
		for _, l := range lines {
			fmt.Fprintln(w, l)
		}
		fmt.Fprintf(w, "Summary: %s index, base offset %d, %d entries\n", kind, base, len(lines))
		if err := w.Flush(); err != nil {
			return fmt.Errorf("write stdout: %w", err)
		}
	}
	if checkErr != nil {
		var ce *index.CorruptIndexError
		if errors.As(checkErr, &ce) {
			return checkErr
		}
		return fmt.Errorf("check %s: %w", path, checkErr)
	}
	return nil
}
