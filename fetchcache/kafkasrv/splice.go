package kafkasrv

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"net"

	"github.com/tiered/tiered/fetchcache"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// splicedFetch is a Fetch response whose record batches are written from
// the memory they lie in (the chunk cache's, for remote partitions) rather
// than copied into the encoded response: each partition with data carries
// a random marker as its record batches while kmsg encodes the rest, and
// encode swaps every marker, with its length prefix, for the real length
// and the parts. The marker is new for every response, so no request can
// place it in the encoded bytes.
type splicedFetch struct {
	*kmsg.FetchResponse
	marker []byte
	rps    []*kmsg.FetchResponseTopicPartition // the marked partitions, in encoding order
	views  []fetchcache.View                   // their batches
	// release returns the response budget the batches hold; called once
	// the response is written (or its connection failed).
	release func()
}

// markerSize is long enough that a marker never occurs by chance in the
// few kilobytes of a response's encoded fields.
const markerSize = 16

// spliceBatches returns r as it is when no partition has data, else as a
// splicedFetch with the partitions' views marked.
func spliceBatches(r *kmsg.FetchResponse, parts []*fetchPart) kmsg.Response {
	var sf *splicedFetch
	// parts are in the response's order (fetch appends them topic by topic,
	// partition by partition), which is the order kmsg encodes them in.
	for _, fp := range parts {
		if fp.data.Len == 0 {
			continue
		}
		if sf == nil {
			sf = &splicedFetch{FetchResponse: r, marker: make([]byte, markerSize)}
			for i := 0; i < markerSize; i += 8 {
				binary.LittleEndian.PutUint64(sf.marker[i:], rand.Uint64())
			}
		}
		fp.resp.RecordBatches = sf.marker
		sf.rps = append(sf.rps, fp.resp)
		sf.views = append(sf.views, fp.data)
	}
	if sf == nil {
		return r
	}
	return sf
}

// encode frames the response as buffers to write in order: the encoded
// fields, and each partition's record batches where its marker was.
func (sf *splicedFetch) encode(correlationID int32) net.Buffers {
	enc := appendResponse(nil, correlationID, sf.FetchResponse)
	flexible := sf.IsFlexible()
	var out net.Buffers
	var lenBuf []byte
	from, size := 0, len(enc)-4
	for _, v := range sf.views {
		at := bytes.Index(enc[from:], sf.marker)
		if at < 0 {
			return sf.copied(correlationID)
		}
		at += from
		// The record batches' length prefix before the marker: a compact
		// length (uvarint of len+1) in flexible versions, else an int32.
		want := binary.BigEndian.AppendUint32(nil, markerSize)
		if flexible {
			want = binary.AppendUvarint(nil, markerSize+1)
		}
		prefix := len(want)
		if at < from+prefix || !bytes.Equal(enc[at-prefix:at], want) {
			return sf.copied(correlationID)
		}
		start := len(lenBuf)
		if flexible {
			lenBuf = binary.AppendUvarint(lenBuf, uint64(v.Len)+1)
		} else {
			lenBuf = binary.BigEndian.AppendUint32(lenBuf, uint32(v.Len))
		}
		out = append(out, enc[from:at-prefix], lenBuf[start:len(lenBuf):len(lenBuf)])
		out = append(out, v.Parts...)
		size += len(lenBuf) - start - prefix + v.Len - markerSize
		from = at + markerSize
	}
	out = append(out, enc[from:])
	binary.BigEndian.PutUint32(enc[0:4], uint32(size))
	return out
}

// copied is the response encoded the ordinary way, the batches copied in:
// what encode falls back to should the encoding ever not show a marker
// where it must be (a kmsg change), so a client never gets a wrong frame.
func (sf *splicedFetch) copied(correlationID int32) net.Buffers {
	for k, rp := range sf.rps {
		rp.RecordBatches = sf.views[k].Bytes()
	}
	return net.Buffers{appendResponse(nil, correlationID, sf.FetchResponse)}
}
