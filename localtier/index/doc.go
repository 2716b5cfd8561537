// Package index owns a segment's three index files, byte for byte as Kafka
// writes them: the offset index (.index), the time index (.timeindex) and the
// transaction index (.txnindex). It loads them, appends to them, looks entries
// up, truncates them, and detects corruption so the caller can rebuild them
// from the log.
//
// All integers are big-endian. Offsets in .index and .timeindex are stored
// relative to the segment's base offset (offset - base, which must fit an
// int32).
//
//	.index       one 8-byte entry per indexed batch
//	+--------------------------+--------------------------+
//	| relative offset  (int32) | file position  (int32)   |
//	+--------------------------+--------------------------+
//
//	.timeindex   one 12-byte entry per new maximum timestamp
//	+----------------------------------------+--------------------------+
//	| timestamp, ms  (int64)                 | relative offset  (int32) |
//	+----------------------------------------+--------------------------+
//
//	.txnindex    one 34-byte entry per aborted transaction
//	+-----------+----------------+------------------+-----------------+-----------------------+
//	| version   | producer id    | first offset     | last offset     | last stable offset    |
//	| int16 = 0 | int64          | int64 (absolute) | int64 (absolute)| int64 (absolute)      |
//	+-----------+----------------+------------------+-----------------+-----------------------+
//
// Entries in .index have strictly increasing offsets and non-decreasing file
// positions. Entries in .timeindex have strictly increasing timestamps and
// non-decreasing offsets (Kafka's maybeAppend only adds an entry when the
// timestamp grows). Entries in .txnindex have strictly increasing last
// offsets.
//
// Kafka preallocates .index and .timeindex to segment.index.bytes and trims
// them when a segment is rolled or closed; a broker that crashed leaves a
// zero-filled tail. This package does not preallocate: it keeps the entries
// in memory and appends to the file. When loading, trailing all-zero entries
// are taken to be unwritten preallocated space and dropped. (An all-zero first
// entry would mean "base offset at position 0" or "timestamp 0 at the base
// offset"; dropping it changes no lookup result, since an empty index answers
// with the base offset too.) Loading never fails on bad content: call
// SanityCheck, and on a *CorruptIndexError rebuild the index (Reset, then
// Append from the log).
//
// An index is safe for concurrent use: lookups may run while one goroutine
// appends.
package index
