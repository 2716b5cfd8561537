package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tiered/tiered/internal/app/config"
	"github.com/tiered/tiered/localtier/vfs"
	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier"
)

var uploadCmd = &command{
	name:    "upload",
	summary: "run one upload pass: copy rolled segments to the bucket and commit them",
	help: `usage: tiered upload [--data-dir DIR] [--bucket URL] [--concurrency N] [--rate BYTES/s]
                     [--manifest-version N] [--json]

Runs one upload pass now over every topic with remote.storage.enable=true: each rolled
segment below the log's last stable offset that the partition's manifest does not hold
yet is uploaded (the .log streamed and checked batch by batch, and one .indexes object with
its .index, .timeindex and .txnindex) under a fresh attempt key, then committed to the partition's manifest with a conditional
write (several segments per commit). Rerunning is safe: committed segments are skipped, a
segment is never committed twice, and a race with another uploader is re-read and
reconciled. Segments the log cleaner rewrote after their upload replace their committed
range in one commit.

upload only copies and commits. It deletes nothing but its own attempts that were never
committed and the objects its own commits replaced; remote retention and garbage collection
are 'tiered retention --bucket'.

Flags:
  --data-dir DIR     data directory (default ./data; must exist)
  --bucket URL       file:///dir, mem://name[/prefix] or
                     s3://bucket[/prefix]?endpoint=...&region=...&path_style=true
                     (default file://<data-dir>/bucket)
  --concurrency N    segments uploaded at once (default 4)
  --rate BYTES/s     throttle the bytes stored per second (default unlimited; k, M, G suffixes)
  --manifest-version N
                     newest manifest format to write (default 2); 1 stores one object per
                     index, readable by releases before format 2: use it during a rolling
                     upgrade until every reader (fetch, serve, consume) is upgraded
  --json             print the report as JSON

Example:
  tiered upload --bucket 's3://logs/prod?endpoint=http://127.0.0.1:9000&region=us-east-1&path_style=true'
`,
	run: runUpload,
}

// checkManifestVersion refuses a --manifest-version this release cannot write.
func checkManifestVersion(v int) error {
	if v < 1 || v > manifest.Version {
		return usagef("--manifest-version %d must be from 1 to %d", v, manifest.Version)
	}
	return nil
}

func runUpload(r *Runner, ctx context.Context, args []string) error {
	fs := newFlags("upload")
	dataDir := fs.String("data-dir", DefaultDataDir, "")
	bucketURL := fs.String("bucket", "", "")
	concurrency := fs.Int("concurrency", remotetier.DefaultConcurrency, "")
	rateFlag := fs.String("rate", "0", "")
	manifestVersion := fs.Int("manifest-version", manifest.Version, "")
	asJSON := fs.Bool("json", false, "")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	if setFlags(fs)["bucket"] && *bucketURL == "" {
		return usagef("--bucket is empty: give a bucket URL, or leave --bucket out for file://<data-dir>/bucket")
	}
	if *concurrency < 1 || *concurrency > 256 {
		return usagef("--concurrency %d must be from 1 to 256", *concurrency)
	}
	if err := checkManifestVersion(*manifestVersion); err != nil {
		return err
	}
	bps, err := parseByteRate(*rateFlag)
	if err != nil {
		return usagef("--rate: %v", err)
	}
	if *bucketURL == "" {
		if *bucketURL, err = defaultBucket(*dataDir); err != nil {
			return err
		}
	}
	d, err := r.openDataDirAs(*dataDir, true, viaNone)
	if err != nil {
		return err
	}
	defer d.Close()
	b, err := openWriteBucket(ctx, *bucketURL)
	if err != nil {
		return err
	}
	defer b.Close()
	u, err := remotetier.NewUploader(b, remotetier.NewLocalSource(d, vfs.Default), remotetier.Options{
		Concurrency: *concurrency, BytesPerSecond: bps, ManifestVersion: *manifestVersion, Now: r.Now, Registerer: prometheus.NewRegistry()})
	if err != nil {
		return err
	}
	rep, err := u.RunOnce(ctx)
	if cerr := d.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close data dir: %w", cerr)
	}
	if *asJSON {
		if jerr := writeJSON(r.Stdout, rep); jerr != nil && err == nil {
			err = jerr
		}
	} else {
		printUpload(r.Stdout, rep)
	}
	if err != nil {
		return fmt.Errorf("upload to %s: %w", shownURL(*bucketURL), firstError(err))
	}
	return nil
}

// firstError keeps a joined error's first part (the others are in the report).
func firstError(err error) error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		if errs := j.Unwrap(); len(errs) > 1 {
			return fmt.Errorf("%w (and %d more errors)", errs[0], len(errs)-1)
		}
	}
	return err
}

func printUpload(w io.Writer, rep remotetier.Report) {
	for _, p := range rep.Partitions {
		for _, c := range p.Committed {
			how := "committed"
			switch {
			case c.Replaced:
				how = "replaced (cleaned)"
			case c.Cut:
				how = "committed (cut at the committed end)"
			}
			fmt.Fprintf(w, "%s-%d  offsets %d..%d  %d bytes  %s\n", p.Topic, p.Partition, c.BaseOffset, c.LastOffset, c.Bytes, how)
		}
		if p.Error != "" {
			fmt.Fprintf(w, "%s-%d  error: %s\n", p.Topic, p.Partition, oneLine(p.Error))
		}
	}
	fmt.Fprintf(w, "uploaded %d segments (%d replaced), %d bytes, %d commits (%d lost races); %d segments went away; lag %d segments, %d bytes\n",
		rep.UploadedSegments, rep.ReplacedSegments, rep.UploadedBytes, rep.Commits, rep.CommitConflicts, rep.SegmentsGone, rep.LagSegments, rep.LagBytes)
}

// defaultBucket is file://<data-dir>/bucket, created if missing.
func defaultBucket(dataDir string) (string, error) {
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return "", fmt.Errorf("data dir: %w", err)
	}
	if _, err := os.Stat(abs); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("data dir %s does not exist", dataDir)
		}
		return "", fmt.Errorf("data dir: %w", err)
	}
	dir := filepath.Join(abs, "bucket")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("default bucket: %w", err)
	}
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(dir)}).String(), nil
}

// parseByteRate parses a --rate: a size as the configuration writes them
// ("0", "1048576", "512k", "10M", "4MiB"; single letters are binary), not
// negative.
func parseByteRate(s string) (int64, error) {
	v, err := config.ParseByteSize(s)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("%q is not a byte rate (e.g. 0, 1048576, 512k, 10M, 4MiB)", s)
	}
	return int64(v), nil
}
