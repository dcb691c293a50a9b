package dlockprom_test

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The dashboard and the alert rules are checked against the metrics the Collector exports
// by reading the metric names out of their PromQL. promql's own parser is in the
// Prometheus server's module, too large a dependency for this; metricNames is enough for
// the queries written here, and promtool checks that each query parses.

var (
	promqlStrings   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`")
	promqlVariables = regexp.MustCompile(`\$\{[^}]*\}|\$[A-Za-z_][A-Za-z0-9_]*`) // Grafana's
	promqlBrackets  = regexp.MustCompile(`\{[^{}]*\}|\[[^\[\]]*\]`)              // matchers, ranges
	promqlGrouping  = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)`)
	promqlIdent     = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*`)
)

// promqlKeywords are the identifiers of PromQL that name no metric.
var promqlKeywords = []string{"and", "or", "unless", "bool", "offset", "by", "without", "on",
	"ignoring", "group_left", "group_right", "inf", "nan", "Inf", "NaN"}

// metricNames returns the metric names that a PromQL expression selects, in order of
// appearance: the identifiers left once strings, Grafana variables, label matchers,
// ranges and grouping label lists are removed, less keywords and function names (an
// identifier followed by '('). Numbers and durations start with digits and are no
// identifiers.
func metricNames(expr string) []string {
	s := promqlStrings.ReplaceAllString(expr, `""`)
	s = promqlVariables.ReplaceAllString(s, "0")
	s = promqlBrackets.ReplaceAllString(s, " ")
	s = promqlGrouping.ReplaceAllString(s, " ")
	var names []string
	for _, loc := range promqlIdent.FindAllStringIndex(s, -1) {
		ident := s[loc[0]:loc[1]]
		if loc[0] > 0 && isDigitOrDot(s[loc[0]-1]) { // the "e3" of 1e3, the "m" of 5m
			continue
		}
		if strings.HasPrefix(strings.TrimLeft(s[loc[1]:], " \t\n"), "(") || slices.Contains(promqlKeywords, ident) {
			continue
		}
		names = append(names, ident)
	}
	return names
}

func isDigitOrDot(b byte) bool { return b >= '0' && b <= '9' || b == '.' }

func TestMetricNames(t *testing.T) {
	tests := []struct {
		expr string
		want []string
	}{
		{`dlock_waiters`, []string{"dlock_waiters"}},
		{`sum by (name, kind) (dlock_held_leases{name=~"$name"})`, []string{"dlock_held_leases"}},
		{`histogram_quantile(0.99, sum by (name, le) (rate(dlock_wait_seconds_bucket{kind="read"}[$__rate_interval])))`,
			[]string{"dlock_wait_seconds_bucket"}},
		{`topk(10, rate(a_total[5m])) > on (name) group_left (kind) 10 * b_total offset 1h`, []string{"a_total", "b_total"}},
		{`x / ignoring(le) y and z unless w or bool_v`, []string{"x", "y", "z", "w", "bool_v"}},
		{`up{job="a{b}", x='y"z'} == bool 1e3`, []string{"up"}},
		{`sum without (instance) (rate(dlock_losses_total{cause!="x"}[${__range}]))`, []string{"dlock_losses_total"}},
		{`vector(1) + scalar(time())`, nil},
	}
	for _, tt := range tests {
		if got := metricNames(tt.expr); !slices.Equal(got, tt.want) {
			t.Errorf("metricNames(%q) = %q, want %q", tt.expr, got, tt.want)
		}
	}
}

// FuzzMetricNames: any input, however malformed, gives identifiers and no panic.
func FuzzMetricNames(f *testing.F) {
	f.Add(`histogram_quantile(0.99, sum by (le) (rate(x_bucket[5m])))`)
	f.Add(`a{b="}"} or c[1m`)
	f.Fuzz(func(t *testing.T, expr string) {
		for _, name := range metricNames(expr) {
			if !promqlIdent.MatchString(name) || promqlIdent.FindString(name) != name {
				t.Errorf("metricNames(%q) gave %q, not an identifier", expr, name)
			}
		}
	})
}
