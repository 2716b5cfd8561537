package kafkasrv

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/localtier"
)

// Topic IDs: the catalog names each topic's ID in Kafka's string form
// (fetchcache.TopicInfo.ID, "" when unknown); the protocol carries the 16
// bytes. Metadata v10+ returns them, Fetch v13+ names topics by them.

// topicIDBytes is the 16 bytes of Kafka's string form of a topic ID; the
// zero UUID for "" (or a form that does not decode: the catalog validated
// it already).
func topicIDBytes(id string) [16]byte {
	out, _ := localtier.ParseTopicID(id)
	return out
}

// topicsByID maps the catalog's known topic IDs to topic names.
func (s *KafkaServer) topicsByID(ctx context.Context) (map[[16]byte]string, error) {
	topics, err := s.o.Catalog.Topics(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[[16]byte]string, len(topics))
	for _, t := range topics {
		if id := topicIDBytes(t.ID); id != ([16]byte{}) {
			out[id] = t.Name
		}
	}
	return out, nil
}

// resolveFetchIDs names the topics of a Fetch v13+ by their IDs. Topics
// whose ID the catalog does not know (never known, a deleted topic, or the
// old lineage of a re-created one) are returned apart, to be answered with
// UNKNOWN_TOPIC_ID as Kafka does.
//
// Each distinct ID is checked once, and only for a topic the principal may
// read: the others are answered TOPIC_AUTHORIZATION_FAILED by the Fetch
// without a look at their manifests.
func (s *KafkaServer) resolveFetchIDs(ctx context.Context, kc *kafkaConn, ts []kmsg.FetchRequestTopic) (known, unknown []kmsg.FetchRequestTopic, err error) {
	byID, err := s.topicsByID(ctx)
	if err != nil {
		return nil, nil, err
	}
	checked := map[[16]byte]bool{} // the ID still served, by ID
	for _, t := range ts {
		name, ok := byID[t.TopicID]
		if served, done := checked[t.TopicID]; done {
			ok = ok && served
		} else if ok && len(t.Partitions) > 0 && s.o.Auth.May(kc.principalOf(), permOf(ctx), name) {
			// The listing may be older than the partition's last manifest
			// read: a topic re-created since is served under its new ID
			// only, never its data under the old one.
			// Offsets re-reads the manifest when due, as the read will.
			if p, err := s.o.Catalog.Partition(ctx, name, t.Partitions[0].Partition); err == nil {
				if ider, isIDer := p.(fetchcache.TopicIDer); isIDer {
					_, oerr := p.Offsets(ctx)
					var ue *fetchcache.UnknownTopicOrPartitionError
					if oerr == nil && topicIDBytes(ider.TopicID()) != t.TopicID || errors.As(oerr, &ue) {
						ok = false // re-created, or deleted since the listing
					}
				}
			}
			checked[t.TopicID] = ok
		}
		if !ok {
			unknown = append(unknown, t)
			continue
		}
		t.Topic = name
		known = append(known, t)
	}
	return known, unknown, nil
}

// unknownTopicIDs answers each partition of the topics with code
// (UNKNOWN_TOPIC_ID, or a retriable code when the catalog failed).
func unknownTopicIDs(r *kmsg.FetchResponse, ts []kmsg.FetchRequestTopic, code int16) {
	for _, qt := range ts {
		rt := kmsg.NewFetchResponseTopic()
		rt.TopicID = qt.TopicID
		for _, qp := range qt.Partitions {
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition = qp.Partition
			rp.ErrorCode = code
			rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
			rp.RecordBatches = []byte{}
			rt.Partitions = append(rt.Partitions, rp)
		}
		r.Topics = append(r.Topics, rt)
	}
}

// fetchIDCode is the metrics result code of topics answered by
// unknownTopicIDs.
func fetchIDCode(unknown []kmsg.FetchRequestTopic, err error) string {
	switch {
	case err != nil:
		return fetchcache.CodeInternal
	case len(unknown) > 0:
		return fetchcache.CodeUnknownTopicOrPartition
	}
	return fetchcache.CodeOK
}
