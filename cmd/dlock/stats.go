package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// percentile returns the nearest-rank p-th percentile (0 < p <= 100) of sorted; 0 when
// sorted is empty.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(float64(len(sorted))*p/100+0.999999) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}

// bucket is one bar of a histogram: the samples in (previous bound, Le].
type bucket struct {
	LeMS  float64 `json:"le_ms"`
	Count int     `json:"count"`
	le    time.Duration
}

// histogram sorts samples into log-scale buckets with bounds 1, 2, 5, 10, 20, 50... µs,
// from the first non-empty bucket to the last.
func histogram(samples []time.Duration) []bucket {
	if len(samples) == 0 {
		return nil
	}
	var bounds []time.Duration
	top := slices.Max(samples)
	for b := time.Microsecond; ; b *= 10 {
		bounds = append(bounds, b, 2*b, 5*b)
		if 5*b >= top {
			break
		}
	}
	counts := make([]int, len(bounds))
	for _, s := range samples {
		i, _ := slices.BinarySearch(bounds, s) // the first bound >= s
		counts[min(i, len(bounds)-1)]++
	}
	first, last := 0, len(counts)-1
	for counts[first] == 0 {
		first++
	}
	for counts[last] == 0 {
		last--
	}
	var out []bucket
	for i := first; i <= last; i++ {
		out = append(out, bucket{le: bounds[i], LeMS: float64(bounds[i]) / float64(time.Millisecond), Count: counts[i]})
	}
	return out
}

// printHistogram draws buckets as bars of up to width characters.
func printHistogram(w io.Writer, buckets []bucket, width int) {
	most := 0
	for _, b := range buckets {
		most = max(most, b.Count)
	}
	for _, b := range buckets {
		n := 0
		if most > 0 {
			n = (b.Count*width + most - 1) / most
		}
		fmt.Fprintf(w, "  <= %-7s %-*s %d\n", b.le, width, strings.Repeat("#", n), b.Count)
	}
}

// ms converts a duration to float milliseconds, for JSON.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
