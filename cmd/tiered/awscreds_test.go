package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// TestMissingAWSCredentialsOneLine runs the commands that open an s3://
// bucket with no AWS credentials anywhere. The credential chain ends at the
// EC2 instance metadata service, here a stand-in on loopback that refuses
// like a metadata endpoint outside EC2 (403), which makes the SDK log
// "SDK <time> WARN falling back to IMDSv1: ..." on its own. stderr must be
// exactly tiered's one line.
func TestMissingAWSCredentialsOneLine(t *testing.T) {
	bin := buildBinary(t)
	var hits atomic.Int64
	imds := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Error(w, "forbidden", http.StatusForbidden)
	}))
	defer imds.Close()
	none := filepath.Join(t.TempDir(), "none")
	// Only what is listed: no AWS variable of the machine's environment.
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "AWS_CONFIG_FILE=" + none,
		"AWS_SHARED_CREDENTIALS_FILE=" + none, "AWS_EC2_METADATA_SERVICE_ENDPOINT=" + imds.URL}
	url := "s3://nobucket/p?endpoint=http://127.0.0.1:1&region=us-east-1&path_style=true"
	for _, args := range [][]string{
		{"bucket", "verify", "--bucket", url},
		{"inspect", "manifest", "--bucket", url, "--topic", "t", "--partition", "0"},
		{"consume", "--bucket", url, "--topic", "t", "--partition", "0"},
		{"fetch", "--bucket", url, "--http", "127.0.0.1:0", "--kafka", "127.0.0.1:0"},
	} {
		t.Run(strings.Join(args[:2], "_"), func(t *testing.T) {
			before := hits.Load()
			cmd := exec.Command(bin, args...)
			cmd.Env = env
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			if exitCode(err) == 0 {
				t.Fatalf("exit 0 without credentials; stdout %q", stdout.String())
			}
			lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
			if len(lines) != 1 || !strings.HasPrefix(lines[0], "tiered "+args[0]) || !strings.Contains(lines[0], "no usable AWS credentials") {
				t.Errorf("stderr is not exactly tiered's one line about the credentials:\n%s", stderr.String())
			}
			if hits.Load() == before {
				t.Errorf("the credential chain never reached the metadata stand-in: the SDK warning path was not exercised")
			}
		})
	}
}
