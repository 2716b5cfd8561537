package kafkasrv

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tiered/tiered/fetchcache"
)

const apiVersionsKey int16 = 18

// apiVersionsAPI serves ApiVersions v0-3, before authentication too; a
// version beyond them gets the KIP-511 answer (apiVersionsUnsupported).
var apiVersionsAPI = api{key: apiVersionsKey, min: 0, max: 3, preAuth: true, handle: handler((*KafkaServer).apiVersions)}

func (s *KafkaServer) apiVersions(ctx context.Context, _ *kafkaConn, q *kmsg.ApiVersionsRequest) (kmsg.Response, string, time.Duration) {
	r := kmsg.NewPtrApiVersionsResponse()
	r.Version = q.Version
	r.ApiKeys = s.advertised(ctx)
	return r, fetchcache.CodeOK, 0
}

// advertiseListTimeout bounds the topic listing ApiVersions may wait for.
const advertiseListTimeout = 2 * time.Second

// fetchByNameMax is the newest Fetch version that names topics; v13 names
// them by ID only.
const fetchByNameMax = 12

// byNameKeys is keys with Fetch capped at fetchByNameMax: what ApiVersions
// advertises while a topic has no known ID, so that clients fetch by name
// (a client would otherwise send v13 with zero IDs and get
// UNKNOWN_TOPIC_ID). A v13 request is still served.
func byNameKeys(keys []kmsg.ApiVersionsResponseApiKey) []kmsg.ApiVersionsResponseApiKey {
	out := append([]kmsg.ApiVersionsResponseApiKey(nil), keys...)
	for i := range out {
		if out[i].ApiKey == fetchKey && out[i].MaxVersion > fetchByNameMax {
			out[i].MaxVersion = fetchByNameMax
		}
	}
	return out
}

// topicIDsKnown reports whether every topic the catalog serves has a topic
// ID, and there is one (the remote catalog's listing is cached; an error
// counts as none). One topic without an ID is enough to cap Fetch at v12:
// librdkafka, having negotiated v13, fetches every topic by its ID, and
// sends the zero ID for one without (UNKNOWN_TOPIC_ID, for ever); Java and
// franz-go fall back to names per request, which v12 serves alike.
func (s *KafkaServer) topicIDsKnown(ctx context.Context) bool {
	topics, err := s.o.Catalog.Topics(ctx)
	if err != nil {
		return false
	}
	for _, t := range topics {
		if t.ID == "" {
			return false
		}
	}
	return len(topics) > 0
}

// apiVersionsUnsupported answers an ApiVersions version we do not know the
// KIP-511 way: a v0 body (header v0), UNSUPPORTED_VERSION, listing what we
// support.
func (s *KafkaServer) apiVersionsUnsupported() kmsg.Response {
	r := kmsg.NewPtrApiVersionsResponse()
	r.Version = 0
	r.ErrorCode = kerr.UnsupportedVersion.Code
	r.ApiKeys = s.advertised(context.Background())
	return r
}

// advertised is what ApiVersions lists: Fetch v13 only while every topic
// has an ID (byNameKeys).
func (s *KafkaServer) advertised(ctx context.Context) []kmsg.ApiVersionsResponseApiKey {
	// Before authentication: a listing the remote catalog has not cached
	// may not hold the answer up for long.
	ctx, cancel := context.WithTimeout(ctx, advertiseListTimeout)
	defer cancel()
	if s.topicIDsKnown(ctx) {
		return s.apiKeys
	}
	return s.apiKeysByName
}
