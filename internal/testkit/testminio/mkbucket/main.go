// Command mkbucket creates a bucket on a MinIO started by scripts/minio,
// using minio-go and the fixed test credentials of package testminio.
//
//	go run ./internal/testkit/testminio/mkbucket -endpoint 127.0.0.1:9000 -bucket tiered
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/tiered/tiered/internal/testkit/testminio"
)

func main() {
	endpoint := flag.String("endpoint", "127.0.0.1:9000", "MinIO host:port")
	bucket := flag.String("bucket", "tiered", "bucket to create (existing is fine)")
	flag.Parse()
	if err := run(*endpoint, *bucket); err != nil {
		fmt.Fprintln(os.Stderr, "mkbucket:", err)
		os.Exit(1)
	}
}

func run(endpoint, bucket string) error {
	c, err := minio.New(endpoint, &minio.Options{
		Creds:  credentials.NewStaticV4(testminio.AccessKey, testminio.SecretKey, ""),
		Region: testminio.Region,
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	exists, err := c.BucketExists(ctx, bucket)
	if err != nil || exists {
		return err
	}
	return c.MakeBucket(ctx, bucket, minio.MakeBucketOptions{Region: testminio.Region})
}
