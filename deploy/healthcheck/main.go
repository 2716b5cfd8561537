// Command healthcheck is the container image's health probe: the image has
// no shell and no curl, so Docker and Compose healthchecks run this instead.
// It GETs one URL and exits 0 if the answer is 2xx, 1 otherwise, printing
// one line either way.
//
//	healthcheck [URL]    (default http://127.0.0.1:8080/healthz)
package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

// DefaultURL is probed when no URL is given.
const DefaultURL = "http://127.0.0.1:8080/healthz"

// timeout bounds the whole probe, connect to last byte.
const timeout = 3 * time.Second

func main() {
	url := DefaultURL
	switch len(os.Args) {
	case 1:
	case 2:
		url = os.Args[1]
	default:
		fmt.Fprintln(os.Stderr, "usage: healthcheck [URL]")
		os.Exit(2)
	}
	if err := probe(url); err != nil {
		fmt.Fprintln(os.Stderr, "unhealthy:", err)
		os.Exit(1)
	}
	fmt.Println("healthy:", url)
}

func probe(url string) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("build request: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("get %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("get %s: %s: %s", url, resp.Status, body)
	}
	return nil
}
