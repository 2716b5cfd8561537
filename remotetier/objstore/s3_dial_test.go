package objstore_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/tiered/tiered/internal/testkit/testminio"
	"github.com/tiered/tiered/remotetier/objstore"
)

// TestS3DialCheckSeesEveryConnection shows that the loopback-only check the
// test suite runs under (testminio.Main) would catch traffic off loopback:
// the store's own connections and the credential chain's instance-metadata
// lookup (169.254.169.254, the request this machine answers when IMDS is
// not disabled) both go through SetDialCheck, and are refused before
// anything is sent. With explicit credentials, instance metadata is never
// asked.
func TestS3DialCheckSeesEveryConnection(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	prev := objstore.SetDialCheck(func(_, address string) error {
		mu.Lock()
		seen = append(seen, address)
		mu.Unlock()
		return errors.New("refused by the test")
	})
	t.Cleanup(func() { objstore.SetDialCheck(prev) })
	enableIMDS := func(t *testing.T) {
		testminio.IsolateAWSEnv(t)
		os.Unsetenv("AWS_EC2_METADATA_DISABLED") // IsolateAWSEnv's t.Setenv restores it
	}
	static := credentials.NewStaticCredentialsProvider(testminio.AccessKey, testminio.SecretKey, "")
	for _, c := range []struct {
		name     string
		env      func(t *testing.T)
		cfg      objstore.S3Config
		want     string // an address the check must have seen
		wantErr  string
		notDials string // an address it must not have seen
	}{
		{"store_off_loopback", func(t *testing.T) { testminio.SetCredentialsEnv(t) },
			objstore.S3Config{Bucket: "b", Endpoint: "http://192.0.2.1:9000", PathStyle: true, Region: "us-east-1"},
			"192.0.2.1:9000", "cannot reach endpoint", ""},
		{"instance_metadata", enableIMDS,
			objstore.S3Config{Bucket: "b", Endpoint: "http://127.0.0.1:1", PathStyle: true, Region: "us-east-1"},
			"169.254.169.254:80", "no usable AWS credentials", ""},
		{"explicit_credentials", enableIMDS,
			objstore.S3Config{Bucket: "b", Endpoint: "http://127.0.0.1:1", PathStyle: true, Region: "us-east-1", Credentials: static},
			"127.0.0.1:1", "cannot reach endpoint", "169.254.169.254:80"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.env(t)
			mu.Lock()
			seen = nil
			mu.Unlock()
			c.cfg.OpenTimeout = 20 * time.Second
			b, err := objstore.NewS3(context.Background(), c.cfg)
			if err == nil {
				b.Close()
				t.Fatal("NewS3 succeeded through a check that refuses every connection")
			}
			mu.Lock()
			got := slices.Clone(seen)
			mu.Unlock()
			if !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("NewS3 = %v, want %q", err, c.wantErr)
			}
			if !slices.Contains(got, c.want) {
				t.Errorf("the check saw %q, want %s among them", got, c.want)
			}
			if c.notDials != "" && slices.Contains(got, c.notDials) {
				t.Errorf("the check saw a dial to %s: %q", c.notDials, got)
			}
		})
	}
}
