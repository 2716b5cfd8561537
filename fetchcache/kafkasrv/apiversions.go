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

func (s *KafkaServer) apiVersions(_ context.Context, _ *kafkaConn, q *kmsg.ApiVersionsRequest) (kmsg.Response, string, time.Duration) {
	r := kmsg.NewPtrApiVersionsResponse()
	r.Version = q.Version
	r.ApiKeys = s.apiKeys
	return r, fetchcache.CodeOK, 0
}

// apiVersionsUnsupported answers an ApiVersions version we do not know the
// KIP-511 way: a v0 body (header v0), UNSUPPORTED_VERSION, listing what we
// support.
func (s *KafkaServer) apiVersionsUnsupported() kmsg.Response {
	r := kmsg.NewPtrApiVersionsResponse()
	r.Version = 0
	r.ErrorCode = kerr.UnsupportedVersion.Code
	r.ApiKeys = s.apiKeys
	return r
}
