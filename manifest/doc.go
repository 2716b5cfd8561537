// Package manifest owns the remote tier's commit record: the per-partition
// manifest that lists every segment committed to the object store, its
// encoding, its validation, the object key scheme shared by everything that
// reads or writes the bucket, and offset/timestamp → segment lookup.
//
// The package does no I/O. Commit operations (Append, Replace, RemoveBelow)
// are pure functions from one manifest to the next; they return the
// sub-manifest objects to write before the new root, and the keys the new
// root no longer references. Reading a sealed sub-manifest goes through a
// Resolver the caller implements over its object store.
//
// Layout (docs/format/manifest.md, docs/format/bucket-layout.md):
//
//	<prefix>/manifests/<hash>/<topic>-<partition>/manifest.json     root: the commit point
//	<prefix>/manifests/<hash>/<topic>-<partition>/sub/<base>-<last>-<sha256[:16]>.json
//	                                                                 sealed sub-manifests, immutable
//	<prefix>/data/<hash>/<topic>-<partition>/<base>-<attempt>.log    segment objects, one pair per
//	                      .indexes (version 1: .index, .timeindex,   upload attempt
//	                      .txnindex)
//	<prefix>/topics/<topic>.json                                     topic object (docs/format/topic-object.md)
//
// A topic with a topic ID writes each partition in the directories of its
// lineage, "<topic>-<partition>~<id>" (Key.TopicID, DataKeysID,
// ManifestKeyID); the topic object (TopicState, ObserveTopic) names the
// lineage served, so a re-created topic never mixes with the old one.
//
// The root holds the most recent segments inline and a list of sealed
// sub-manifests, each a contiguous, immutable run of older segments with its
// offset and timestamp range, so serving one offset reads the root and at
// most one sub-manifest. Objects are written data first, sub-manifests next,
// root last (conditionally); deletion runs the other way.
package manifest
