package kafkasrv

import (
	"reflect"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestAPIRegistry pins what the listener advertises (the ranges are stated
// once, in the registry, so a change to one shows here) and checks the
// registry's shape: keys ascending and distinct, a handler for each, and
// versions kmsg can decode.
func TestAPIRegistry(t *testing.T) {
	want := []kmsg.ApiVersionsResponseApiKey{
		{ApiKey: produceKey, MinVersion: 3, MaxVersion: 9},
		{ApiKey: fetchKey, MinVersion: 4, MaxVersion: 12},
		{ApiKey: listOffsetsKey, MinVersion: 1, MaxVersion: 7},
		{ApiKey: metadataKey, MinVersion: 0, MaxVersion: 12},
		{ApiKey: offsetCommitKey, MinVersion: 2, MaxVersion: 9},
		{ApiKey: offsetFetchKey, MinVersion: 1, MaxVersion: 9},
		{ApiKey: findCoordinatorKey, MinVersion: 0, MaxVersion: 6},
		{ApiKey: joinGroupKey, MinVersion: 2, MaxVersion: 9},
		{ApiKey: heartbeatKey, MinVersion: 0, MaxVersion: 4},
		{ApiKey: leaveGroupKey, MinVersion: 0, MaxVersion: 5},
		{ApiKey: syncGroupKey, MinVersion: 0, MaxVersion: 5},
		{ApiKey: describeGroupsKey, MinVersion: 0, MaxVersion: 5},
		{ApiKey: listGroupsKey, MinVersion: 0, MaxVersion: 5},
		{ApiKey: apiVersionsKey, MinVersion: 0, MaxVersion: 3},
		{ApiKey: deleteGroupsKey, MinVersion: 0, MaxVersion: 2},
		{ApiKey: offsetDeleteKey, MinVersion: 0, MaxVersion: 0},
	}
	if !reflect.DeepEqual(KafkaAPIVersions, want) {
		t.Errorf("KafkaAPIVersions = %+v, want %+v", KafkaAPIVersions, want)
	}
	wantSASL := []kmsg.ApiVersionsResponseApiKey{
		{ApiKey: saslHandshakeKey, MinVersion: 0, MaxVersion: 1},
		{ApiKey: saslAuthenticateKey, MinVersion: 0, MaxVersion: 2},
	}
	if !reflect.DeepEqual(saslAPIVersions, wantSASL) {
		t.Errorf("saslAPIVersions = %+v, want %+v", saslAPIVersions, wantSASL)
	}
	var preAuth []int16
	for _, as := range [][]*api{apis, saslAPIs} {
		for i, a := range as {
			if i > 0 && a.key <= as[i-1].key {
				t.Errorf("API key %d comes after %d: keep the registry in the order of keys", a.key, as[i-1].key)
			}
			if registered(a.key) != a {
				t.Errorf("API key %d is registered twice", a.key)
			}
			if a.handle == nil {
				t.Errorf("%s has no handler", kmsg.NameForKey(a.key))
			}
			req := kmsg.RequestForKey(a.key)
			if req == nil || a.min < 0 || a.min > a.max || a.max > req.MaxVersion() {
				t.Errorf("%s: versions %d-%d are not ones kmsg decodes", kmsg.NameForKey(a.key), a.min, a.max)
			}
			if preAuthAPI(a.key) {
				preAuth = append(preAuth, a.key)
			}
		}
	}
	if want := []int16{apiVersionsKey, saslHandshakeKey, saslAuthenticateKey}; !slices.Equal(preAuth, want) {
		t.Errorf("APIs allowed before authentication: %v, want %v", preAuth, want)
	}
	if registered(9999) != nil || preAuthAPI(9999) {
		t.Error("an unknown key is registered")
	}
}
