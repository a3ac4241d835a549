package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/s3gate/s3gate/config"
)

// healthcheckTimeout bounds the probe; container runtimes apply their own
// timeout too, but the command must never hang.
const healthcheckTimeout = 5 * time.Second

// healthcheck asks the gateway's metrics listener whether it is ready (GET
// /readyz). It is the container image's HEALTHCHECK, because the distroless
// image has no curl. Exit status: 0 ready, 1 anything else (Docker reserves 2).
func healthcheck(args, environ []string, stdout, stderr io.Writer) int {
	cfg, err := config.Load(args, environ, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "s3gate healthcheck: %v\n", err)
		return 1
	}
	if cfg.MetricsAddr == "" {
		fmt.Fprintf(stderr, "s3gate healthcheck: %sMETRICS_ADDR is off: nothing to ask\n", config.Prefix)
		return 1
	}
	url := "http://" + probeAddr(cfg.MetricsAddr) + "/readyz"
	ctx, cancel := context.WithTimeout(context.Background(), healthcheckTimeout)
	defer cancel()
	status, body, err := get(ctx, url)
	if err != nil {
		fmt.Fprintf(stderr, "s3gate healthcheck: %v\n", err)
		return 1
	}
	if status != http.StatusOK {
		fmt.Fprintf(stderr, "s3gate healthcheck: %s: %d %s\n", url, status, body)
		return 1
	}
	fmt.Fprintln(stdout, body)
	return 0
}

func get(ctx context.Context, url string) (status int, body string, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", fmt.Errorf("request: %w", err)
	}
	// No proxy from the environment: the probe targets this container.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close() //nolint:errcheck // read-only; the body read error is reported
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if err != nil {
		return 0, "", fmt.Errorf("GET %s: read answer: %w", url, err)
	}
	return resp.StatusCode, strings.TrimSpace(string(b)), nil
}

// probeAddr turns a listen address into one to connect to: a wildcard host
// (empty, 0.0.0.0, ::) means this machine's loopback.
func probeAddr(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen // config validated it; keep it as given
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	return net.JoinHostPort(host, port)
}
