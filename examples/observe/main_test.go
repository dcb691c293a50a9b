package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/seed51c676c8/dlock/dlocktest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The example serves dlock's metrics while its workers run: a scrape of /metrics shows
// acquisitions, waits and holds of its locks; interrupted, it ends cleanly with its table.
func TestObserve(t *testing.T) {
	tests := []struct {
		name  string
		redis func(t *testing.T) string
	}{
		{"redis-server", func(t *testing.T) string { return dlocktest.Start(t).URL }},
		{"embedded", func(*testing.T) string { return "embedded" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			out := &syncBuffer{}
			done := make(chan error, 1)
			args := []string{"--redis", tt.redis(t), "--listen", "127.0.0.1:0", "--workers", "6", "--locks", "2"}
			go func() { done <- run(ctx, args, out) }()

			url := waitFor(t, out, done, metricsURL)
			body := scrapeUntil(t, url, acquiredRE)
			for _, want := range []string{
				`dlock_wait_seconds_bucket{kind="mutex",name="observe:job:0",le="+Inf"}`,
				`dlock_hold_seconds_count{kind="mutex",name="observe:job:0"}`,
				`dlock_held_leases{kind="mutex",name="observe:job:0"}`,
				`dlock_waiters{kind="mutex",name="observe:job:0"}`,
			} {
				if !strings.Contains(body, want) {
					t.Errorf("/metrics has no %s", want)
				}
			}

			cancel() // as Ctrl-C does
			if err := <-done; err != nil {
				t.Fatalf("run: %v\n%s", err, out.String())
			}
			t.Logf("output:\n%s", out.String())
			if !tableRE.MatchString(out.String()) {
				t.Errorf("no row for observe:job:0 with acquisitions in the table")
			}
		})
	}
}

var (
	metricsURL = regexp.MustCompile(`Metrics: (http://\S+/metrics)`)
	acquiredRE = regexp.MustCompile(`(?m)^dlock_acquisitions_total\{kind="mutex",name="observe:job:0"\} ([0-9.e+]+)$`)
	tableRE    = regexp.MustCompile(`(?m)^observe:job:0 +[1-9]\d* `)
)

// waitFor waits until the output matches re, and returns its first group. It fails the
// test if run ends first.
func waitFor(t *testing.T, out *syncBuffer, done chan error, re *regexp.Regexp) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			return m[1]
		}
		select {
		case err := <-done:
			t.Fatalf("run ended before printing %v: %v\n%s", re, err, out.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatalf("no %v in the output after 30s:\n%s", re, out.String())
	return ""
}

// scrapeUntil scrapes url until the body has a series re matches with a value above 0,
// and returns the body.
func scrapeUntil(t *testing.T, url string, re *regexp.Regexp) string {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	deadline := time.Now().Add(30 * time.Second)
	var body []byte
	for time.Now().Before(deadline) {
		resp, err := client.Get(url)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		body, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s, %v", url, resp.Status, err)
		}
		if m := re.FindSubmatch(body); m != nil {
			if v, _ := strconv.ParseFloat(string(m[1]), 64); v > 0 {
				return string(body)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("GET %s: no %v above 0 after 30s:\n%s", url, re, body)
	return ""
}

// syncBuffer is a bytes.Buffer that run writes while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
