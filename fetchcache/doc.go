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
// The interfaces over it live in subpackages: httpapi (the /v1 HTTP API and
// its client), kafkasrv (the Kafka protocol), server (both listeners on one
// catalog), replay (time-range replay jobs); gate and auth are their
// admission control and security.
package fetchcache
