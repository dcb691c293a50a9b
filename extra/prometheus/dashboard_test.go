package dlockprom_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// dashboard is the part of a Grafana dashboard's JSON model that holds queries.
type dashboard struct {
	Title  string
	Panels []panel
	// Templating.List[].Query is a string, or an object with a "query" string.
	Templating struct {
		List []struct {
			Name, Type string
			Query      json.RawMessage
		}
	}
}

type panel struct {
	Title   string
	Type    string
	Panels  []panel // a row's panels, when collapsed
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string
	}
}

// The dashboard's panels each have a query, every query selects only metrics the
// Collector exports, every metric is on the dashboard, and each query parses
// (promtool, with Grafana's variables given values).
func TestDashboard(t *testing.T) {
	d := readDashboard(t)
	exported := exportedNames(t)
	queries := map[string]string{} // where -> expr
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			if len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			for _, tg := range p.Targets {
				queries[fmt.Sprintf("panel %q, query %s", p.Title, tg.RefID)] = tg.Expr
			}
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if q := variableQuery(t, v.Query); v.Type == "query" {
			queries[fmt.Sprintf("variable %q", v.Name)] = labelValuesMetric(t, v.Name, q)
		}
	}

	shown := map[string]bool{}
	for where, expr := range queries {
		checkQuery(t, where, expr, exported)
		for _, name := range metricNames(expr) {
			shown[histogramName(name)] = true
		}
	}
	for name := range exported {
		if !shown[histogramName(name)] {
			t.Errorf("the dashboard shows nothing of %s", name)
		}
	}
	checkQueriesParse(t, queries)
}

// histogramName returns name less a histogram series' suffix (_bucket, _sum, _count).
func histogramName(name string) string {
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			return base
		}
	}
	return name
}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	data, err := os.ReadFile("dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	if d.Title == "" || len(d.Panels) == 0 {
		t.Fatalf("dashboard.json has no title or no panels")
	}
	return d
}

// variableQuery returns a template variable's query, given as a string or as an object.
func variableQuery(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var obj struct{ Query string }
	if err := json.Unmarshal(raw, &obj); err != nil {
		t.Fatalf("a template variable's query %s: %v", raw, err)
	}
	return obj.Query
}

var labelValuesRE = regexp.MustCompile(`^label_values\(\s*([^,]+?)\s*,\s*\w+\s*\)$`)

// labelValuesMetric returns the series selector of a variable's label_values(selector,
// label) query, which Grafana sends to Prometheus's series API.
func labelValuesMetric(t *testing.T, name, q string) string {
	t.Helper()
	m := labelValuesRE.FindStringSubmatch(q)
	if m == nil {
		t.Errorf("variable %q: query %q is not label_values(metric, label)", name, q)
		return ""
	}
	return m[1]
}

// checkQueriesParse has promtool check a rule file that records each query, with
// Grafana's variables replaced by values of the kind Grafana gives them.
func checkQueriesParse(t *testing.T, queries map[string]string) {
	t.Helper()
	vars := strings.NewReplacer("$__rate_interval", "1m", "$__interval", "1m", "$__range", "1h",
		"${name}", ".*", "$name", ".*", "${kind}", ".*", "$kind", ".*")
	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	i := 0
	for _, expr := range queries {
		i++
		q, _ := json.Marshal(vars.Replace(expr)) // a JSON string is a YAML string
		fmt.Fprintf(&b, "      - record: dashboard:query%d\n        expr: %s\n", i, q)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "queries.yml"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	runPromtool(t, dir, "check", "rules", "queries.yml")
}
