// Package fetchcache owns the fetch service's read model: a Partition
// (offsets, reads of whole record batches by offset or time, aborted
// transactions), the Catalog that finds one, the optional SharedReader that
// hands out a cache's memory without a copy, and the catalogs: remote (the
// bucket through remotetier's manifest-driven reader over the caching
// bucket of fetchcache/chunkcache), local (tiered's own log dir) and
// combined (serve: local, with older offsets from the bucket). It also
// holds what every interface shares: the result codes and metrics of a
// request, and the mapping of corrupt data.
//
// Integrity: a batch reaches a Partition's Read or ReadView only after it
// passed record.CheckBatches — framing, CRC, header (lastOffsetDelta,
// record count) and offsets (record.Chain: within its segment's range, after
// the batch before it, the index entry's batch holding its offset, and the
// batch after it following it) — run by the two readers every catalog goes
// through: localtier.Log.Read for local segments and remotelog.RemoteLog for
// the bucket. So Kafka Fetch, HTTP raw and JSON, replay and consume all get
// checked batches, and the zero-copy views are checked in place (headers and
// CRCs over bytes already in memory, no copy). A read whose first batch
// fails is a corrupt error (Kafka CORRUPT_MESSAGE for that partition, HTTP
// 500 CORRUPT_MESSAGE, counted in tiered_fetch_corrupt_objects_total); a
// read that reaches a bad batch after good ones returns the good ones, and
// the next read, which starts at the bad batch, fails. When two batches do
// not follow one another either may be the wrong one, so the first is kept
// only when it continues the batch before it exactly (record.Suspect). A
// remote partition reports its log end (the high watermark) only after the
// final segment's tail was found to end there (remotelog's CheckEnd).
//
// The interfaces over it live in subpackages: httpapi (the /v1 HTTP API and
// its client), kafkasrv (the Kafka protocol), server (both listeners on one
// catalog), replay (time-range replay jobs); gate and auth are their
// admission control and security.
package fetchcache
