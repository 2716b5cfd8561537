package kafkasrv

import (
	"context"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/auth"
)

const metadataKey int16 = 3

// metadataAPI serves Metadata v0-12: v10+ carry each topic's ID (the zero
// UUID for a topic without one), v12 may ask for a topic by ID. A topic
// needs describe (read or
// write on it, or admin), as Kafka's DESCRIBE, so a producer finds its
// topic's leader.
var metadataAPI = api{key: metadataKey, min: 0, max: 12, perm: auth.PermDescribe, handle: handler((*KafkaServer).metadata)}

// broker is the host and port Metadata advertises on connection kc.
func (s *KafkaServer) broker(kc *kafkaConn) (string, int32) {
	if s.advert.set {
		return s.advert.host, s.advert.port
	}
	if kc != nil && kc.c != nil {
		if a, ok := kc.c.LocalAddr().(*net.TCPAddr); ok {
			return a.IP.String(), int32(a.Port)
		}
		if host, port, err := splitHostPort(kc.c.LocalAddr().String()); err == nil {
			return host, port
		}
	}
	return "localhost", 9092
}

func (s *KafkaServer) metadata(ctx context.Context, kc *kafkaConn, q *kmsg.MetadataRequest) (kmsg.Response, string, time.Duration) {
	r := kmsg.NewPtrMetadataResponse()
	r.Version = q.Version
	host, port := s.broker(kc)
	b := kmsg.NewMetadataResponseBroker()
	b.NodeID, b.Host, b.Port = s.o.NodeID, host, port
	r.Brokers = []kmsg.MetadataResponseBroker{b}
	if s.o.Peers != nil {
		for _, pb := range s.o.Peers() {
			if pb.NodeID == s.o.NodeID {
				continue
			}
			mb := kmsg.NewMetadataResponseBroker()
			mb.NodeID, mb.Host, mb.Port = pb.NodeID, pb.Host, pb.Port
			r.Brokers = append(r.Brokers, mb)
		}
	}
	cluster := s.o.ClusterID
	r.ClusterID = &cluster
	r.ControllerID = s.o.NodeID
	code := fetchcache.CodeOK

	topics, err := s.o.Catalog.Topics(ctx)
	if err != nil {
		s.log.Error("kafka metadata: list topics", "err", err)
		topics, code = nil, fetchcache.CodeInternal
	}
	byName := make(map[string]fetchcache.TopicInfo, len(topics))
	byID := make(map[[16]byte]fetchcache.TopicInfo, len(topics))
	for _, t := range topics {
		byName[t.Name] = t
		if id := topicIDBytes(t.ID); id != ([16]byte{}) {
			byID[id] = t
		}
	}
	p := kc.principalOf()
	addTopic := func(t fetchcache.TopicInfo) {
		rt := kmsg.NewMetadataResponseTopic()
		name := t.Name
		rt.Topic = &name
		rt.TopicID = topicIDBytes(t.ID)
		for _, p := range t.Partitions {
			rp := kmsg.NewMetadataResponseTopicPartition()
			rp.Partition = p
			rp.Leader = s.o.NodeID
			rp.LeaderEpoch = -1 // no epochs: clients skip KIP-320 validation
			rp.Replicas = []int32{s.o.NodeID}
			rp.ISR = []int32{s.o.NodeID}
			rp.OfflineReplicas = []int32{}
			rt.Partitions = append(rt.Partitions, rp)
		}
		r.Topics = append(r.Topics, rt)
	}
	if q.Topics == nil || (q.Version == 0 && len(q.Topics) == 0) {
		if err != nil {
			// No answer rather than an empty list, which clients take for
			// the cluster's topics (a pattern subscription would drop all
			// its partitions): the connection is closed and the client
			// retries with the metadata it has, as for a broker gone.
			if kc != nil {
				kc.closeAfter = true
			}
			return nil, code, 0
		}
		for _, t := range topics {
			if s.o.Auth.May(p, permOf(ctx), t.Name) { // all topics: the denied ones are left out
				addTopic(t)
			}
		}
		return r, code, 0
	}
	for _, qt := range q.Topics {
		if qt.Topic == nil && qt.TopicID != ([16]byte{}) {
			if t, ok := byID[qt.TopicID]; ok {
				if s.allowed(ctx, kc, t.Name) {
					addTopic(t)
					continue
				}
				// As Kafka: an ID is no secret, so the denial is said
				// (without the name).
				rt := kmsg.NewMetadataResponseTopic()
				rt.TopicID = qt.TopicID
				rt.ErrorCode = kerr.TopicAuthorizationFailed.Code
				r.Topics = append(r.Topics, rt)
				code = worse(code, fetchcache.CodeTopicAuthorizationFailed)
				continue
			}
		}
		if qt.Topic == nil {
			rt := kmsg.NewMetadataResponseTopic()
			rt.TopicID = qt.TopicID
			rt.ErrorCode = kerr.UnknownTopicID.Code
			r.Topics = append(r.Topics, rt)
			if code == fetchcache.CodeOK {
				code = fetchcache.CodeUnknownTopicOrPartition
			}
			continue
		}
		if !s.allowed(ctx, kc, *qt.Topic) {
			rt := kmsg.NewMetadataResponseTopic()
			name := *qt.Topic
			rt.Topic = &name
			rt.ErrorCode = kerr.TopicAuthorizationFailed.Code
			r.Topics = append(r.Topics, rt)
			code = worse(code, fetchcache.CodeTopicAuthorizationFailed)
			continue
		}
		t, ok := byName[*qt.Topic]
		if !ok {
			rt := kmsg.NewMetadataResponseTopic()
			name := *qt.Topic
			rt.Topic = &name
			rt.ErrorCode = kerr.UnknownTopicOrPartition.Code
			if err != nil {
				rt.ErrorCode = kerr.LeaderNotAvailable.Code // retriable: the catalog failed
			}
			r.Topics = append(r.Topics, rt)
			if code == fetchcache.CodeOK {
				code = fetchcache.CodeUnknownTopicOrPartition
			}
			continue
		}
		addTopic(t)
	}
	return r, code, 0
}
