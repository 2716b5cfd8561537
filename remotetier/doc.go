// Package remotetier owns tiered's remote tier above the object-store seam
// (subpackage objstore): the uploader that copies rolled segments into a
// bucket and commits them to per-partition manifests, the sources it copies
// from (tiered's own log dir, or a Kafka broker's log dir read-only for the
// sidecar), remote retention, garbage collection of orphans and bucket
// verification. The read path over committed segments is its subpackage
// remotelog, which knows nothing of the uploader.
//
// Upload protocol (docs/format/manifest.md, "Commit protocol"), per
// partition:
//
//  0. Resolve the partition's lineage once per pass and topic
//     (resolveLineages): its topic ID (partition.metadata) against the
//     topic object (docs/format/topic-object.md), updated with a
//     conditional PUT — adopted on upgrade, a new lineage on re-creation,
//     a superseded ID refused. Everything below happens in that lineage.
//     LocalSource reports the topic ID tiered's own engine gave each topic
//     at creation (partition.metadata; none for topics created before it
//     wrote IDs): such an ID never adopts a name-only lineage, which is
//     another incarnation's (a data dir lost and started anew).
//  1. Read the root manifest once and cache it with its ETag.
//  2. Reconcile every rolled segment below the high watermark against it:
//     skip what is committed, append what follows, cut a segment that
//     starts inside the committed range at the committed end (a new leader
//     rolled at other offsets), and re-upload a cleaned segment of a
//     compacted topic whose committed copy it rewrote.
//  3. Upload each segment under a fresh attempt key: the .log streamed from
//     disk through a checker (framing, offsets, CRC; memory independent of
//     the segment size), and beside it one .indexes object holding the
//     .index, .timeindex (built from the log when the source has none) and
//     .txnindex back to back (docs/format/manifest.md).
//  4. Commit up to MaxCommitSegments segments in one root write,
//     conditional on the ETag read (If-None-Match: * for the first). A lost
//     race re-reads the root and reconciles again; an error of unknown
//     outcome re-reads it to see whether the write landed.
//  5. After the commit, delete what it unreferenced (replaced segments).
//     Attempts that were never part of a root write are deleted at once;
//     anything else unreferenced is left to GC, which deletes objects no
//     manifest references once they are older than the grace period.
//
// Deleted and re-created topics (lineage.go): MarkDeletedTopics stops a
// deleted ID being served; RemoveExpiredLineages removes superseded
// lineages after the deleted-topic retention, manifest first, data after.
// A deletion no record reports (made while no sidecar ran, its record
// covered by a metadata snapshot since) is found from an authoritative
// view of the cluster's live topics (LiveTopics: a KRaft image): each pass
// records the view's cluster ID and metadata offset on the lineages it
// holds live (manifest.LineageProof), and the pass that removes lineages
// marks deleted every current lineage of that cluster recorded at an
// earlier offset that the view no longer holds under its name
// (ReconcileDeleted).
//
// Remote retention decides from the sub-manifest references' summaries
// (remoteDecision: retention.RemotePlan, reading only the sub-manifests
// holding deleted segments and the one the deletion stops in), commits
// manifest.RemoveBelow first and deletes objects after; RemoteLookup tells retention.RunOnce how far the remote tier holds
// a partition, so local segments are deleted only once uploaded. Both use
// only the partition's own lineage (ownLineage: the current one when its
// topic ID is the local topic's; name-only for a topic without an ID and no
// topic object), and no manifest that ends past the local log end: any
// other holds nothing of the local log, whose segments are then all kept. The
// sidecar runs it inside its upload passes (Options.RemoteRetention,
// retentionStep shared with RemoteRetention), on the uploader's cached
// manifest: a lost conditional write re-reads and plans again, and only the
// writer whose commit unreferenced an object deletes it.
//
// Loss: when the next segment of a partition that is not compacted starts
// past the committed end, the source deleted the offsets in between before
// they were uploaded; the commit records them as a manifest.Gap (AppendLost),
// counts tiered_uploader_segments_lost_total and logs at ERROR. Per
// partition the uploader exports the lag and the headroom before the
// source's retention deletes the oldest segment not uploaded (PartitionLag).
package remotetier
